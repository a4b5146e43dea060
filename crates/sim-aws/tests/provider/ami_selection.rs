//! Every amiSelectorTerms form resolves as Karpenter does.

use std::collections::BTreeMap;

use driftwood_api::ec2nodeclass::AmiSelectorTerm;
use driftwood_api::wellknown::{CONDITION_AMIS_READY, CONDITION_READY};
use driftwood_aws::ports::Tag;

use crate::common::*;

fn amd64_and_arm64(env: &Env, k8s: &str, tag: &str) -> (String, String) {
    (
        env.sim
            .image_id_by_name(&format!("amazon-eks-node-{k8s}-{tag}"))
            .unwrap(),
        env.sim
            .image_id_by_name(&format!("amazon-eks-arm64-node-{k8s}-{tag}"))
            .unwrap(),
    )
}

#[tokio::test(start_paused = true)]
async fn walkthrough_id_terms_resolve_both_architectures_and_infer_al2() {
    let env = env();
    let (amd, arm) = amd64_and_arm64(&env, "1.29", "v20251120");
    let class = env
        .resolve(class(
            "latest-current-ami",
            vec![id_term(&amd), id_term(&arm)],
            None,
        ))
        .await;
    let status = class.status.as_ref().unwrap();
    assert_eq!(status.amis.len(), 2);
    let by_arch: BTreeMap<String, String> = status
        .amis
        .iter()
        .map(|a| {
            let arch = a
                .requirements
                .iter()
                .find(|r| r.key == "kubernetes.io/arch")
                .unwrap()
                .values[0]
                .clone();
            (arch, a.id.clone())
        })
        .collect();
    assert_eq!(by_arch["amd64"], amd);
    assert_eq!(by_arch["arm64"], arm);
    let c = condition(&class, CONDITION_AMIS_READY);
    assert!(c.is_true());
    assert!(
        c.message.as_deref().unwrap().contains("inferred AL2"),
        "{:?}",
        c.message
    );
    assert!(condition(&class, CONDITION_READY).is_true());
}

#[tokio::test(start_paused = true)]
async fn walkthrough_name_terms_pick_newest_1_27_image_per_architecture() {
    let env = env();
    let class = env
        .resolve(class(
            "latest-current-ami-template",
            vec![
                name_term("*-1.27-*", Some("self")),
                name_term("*-1.27-*", Some("amazon")),
            ],
            Some("AL2"),
        ))
        .await;
    let names: Vec<String> = class
        .status
        .as_ref()
        .unwrap()
        .amis
        .iter()
        .map(|a| a.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "amazon-eks-node-1.27-v20250715",
            "amazon-eks-arm64-node-1.27-v20250715"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn name_term_without_owner_includes_self_images() {
    let env = env();
    let newest = start() - jiff::SignedDuration::from_hours(1);
    let golden = env.sim.add_custom_image(
        "golden-1.27-amd64",
        "x86_64",
        newest,
        Vec::new(),
        Some("1.27"),
    );
    let class = env
        .resolve(class("c", vec![name_term("*-1.27-*", None)], None))
        .await;
    let ids = ami_ids(&class);
    assert!(
        ids.contains(&golden),
        "self-owned newest amd64 image wins: {ids:?}"
    );
    assert_eq!(ids.len(), 2);
    // The same term restricted to owner amazon does not see it.
    let class = env
        .resolve(self::class(
            "c2",
            vec![name_term("*-1.27-*", Some("amazon"))],
            None,
        ))
        .await;
    assert!(!ami_ids(&class).contains(&golden));
}

#[tokio::test(start_paused = true)]
async fn aliases_resolve_through_the_ssm_public_parameters() {
    let env = env();
    let param = |p: &str| env.sim.ssm_get_parameter(p).unwrap().value;
    let class = env
        .resolve(class("al2", vec![alias_term("al2@latest")], None))
        .await;
    let ids = ami_ids(&class);
    assert!(ids.contains(&param(
        "/aws/service/eks/optimized-ami/1.29/amazon-linux-2/recommended/image_id"
    )));
    assert!(ids.contains(&param(
        "/aws/service/eks/optimized-ami/1.29/amazon-linux-2-arm64/recommended/image_id"
    )));

    let class = env
        .resolve(self::class(
            "al2023",
            vec![alias_term("al2023@latest")],
            None,
        ))
        .await;
    let ids = ami_ids(&class);
    assert!(ids.contains(&param(
        "/aws/service/eks/optimized-ami/1.29/amazon-linux-2023/x86_64/standard/recommended/image_id"
    )));
    assert!(ids.contains(&param(
        "/aws/service/eks/optimized-ami/1.29/amazon-linux-2023/arm64/standard/recommended/image_id"
    )));

    let class = env
        .resolve(self::class(
            "br",
            vec![alias_term("bottlerocket@latest")],
            None,
        ))
        .await;
    let ids = ami_ids(&class);
    assert!(ids.contains(&param(
        "/aws/service/bottlerocket/aws-k8s-1.29/x86_64/latest/image_id"
    )));
    assert!(ids.contains(&param(
        "/aws/service/bottlerocket/aws-k8s-1.29/arm64/latest/image_id"
    )));

    let class = env
        .resolve(self::class(
            "pinned",
            vec![alias_term("al2@v20251120")],
            None,
        ))
        .await;
    let mut names: Vec<String> = class
        .status
        .as_ref()
        .unwrap()
        .amis
        .iter()
        .map(|a| a.name.clone().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "amazon-eks-arm64-node-1.29-v20251120",
            "amazon-eks-gpu-node-1.29-v20251120",
            "amazon-eks-gpu-node-1.29-v20251120",
            "amazon-eks-node-1.29-v20251120"
        ]
    );
    // The GPU image serves two requirement sets (Karpenter's AL2 query: Neuron and NVIDIA).
    let mut gpu_sets: Vec<_> = class
        .status
        .as_ref()
        .unwrap()
        .amis
        .iter()
        .filter(|a| a.name.as_deref() == Some("amazon-eks-gpu-node-1.29-v20251120"))
        .map(|a| {
            a.requirements
                .iter()
                .find(|r| r.operator == "Exists")
                .map(|r| r.key.clone())
                .unwrap()
        })
        .collect();
    gpu_sets.sort();
    assert_eq!(
        gpu_sets,
        [
            "karpenter.k8s.aws/instance-accelerator-count",
            "karpenter.k8s.aws/instance-gpu-count"
        ]
    );
    // Alias AMIs carry the accelerator requirement too.
    let reqs = &class.status.as_ref().unwrap().amis[0].requirements;
    assert!(
        reqs.iter().any(
            |r| r.key == "karpenter.k8s.aws/instance-gpu-count" && r.operator == "DoesNotExist"
        )
    );
}

#[tokio::test(start_paused = true)]
async fn alias_for_the_cluster_version_follows_settings() {
    let env = env_for("1.31", 42);
    let class = env
        .resolve(class("al2", vec![alias_term("al2@latest")], None))
        .await;
    let names: Vec<String> = class
        .status
        .as_ref()
        .unwrap()
        .amis
        .iter()
        .map(|a| a.name.clone().unwrap())
        .collect();
    assert!(names.iter().all(|n| n.contains("-1.31-")), "{names:?}");
}

#[tokio::test(start_paused = true)]
async fn tags_terms_with_star_mean_key_exists_and_ssm_parameter_terms() {
    let env = env();
    let at = start() - jiff::SignedDuration::from_hours(48);
    let tagged = env.sim.add_custom_image(
        "golden-a",
        "x86_64",
        at,
        vec![Tag::new("team", "platform")],
        None,
    );
    let term = AmiSelectorTerm {
        tags: BTreeMap::from([("team".to_string(), "*".to_string())]),
        ..Default::default()
    };
    let class = env.resolve(class("tags", vec![term], None)).await;
    assert_eq!(ami_ids(&class), std::slice::from_ref(&tagged));
    let term = AmiSelectorTerm {
        tags: BTreeMap::from([("team".to_string(), "other".to_string())]),
        ..Default::default()
    };
    let class = env.resolve(self::class("tags2", vec![term], None)).await;
    assert!(ami_ids(&class).is_empty());

    env.sim.put_parameter("/my/golden/ami", &tagged);
    let term = AmiSelectorTerm {
        ssm_parameter: Some("/my/golden/ami".to_string()),
        ..Default::default()
    };
    let class = env.resolve(self::class("ssm", vec![term], None)).await;
    assert_eq!(ami_ids(&class), [tagged]);
    let c = condition(&class, CONDITION_AMIS_READY);
    assert!(
        c.message.as_deref().unwrap().contains("inferred Custom"),
        "{:?}",
        c.message
    );
}

#[tokio::test(start_paused = true)]
async fn deprecated_images_lose_to_older_ones() {
    let env = env();
    let newest = env
        .sim
        .image_id_by_name("amazon-eks-node-1.29-v20251209")
        .unwrap();
    env.sim
        .deprecate_image(&newest, start() - jiff::SignedDuration::from_hours(1));
    let class = env
        .resolve(class(
            "c",
            vec![name_term("amazon-eks-node-1.29-*", Some("amazon"))],
            Some("AL2"),
        ))
        .await;
    let status = class.status.as_ref().unwrap();
    assert_eq!(
        status.amis[0].name.as_deref(),
        Some("amazon-eks-node-1.29-v20251120")
    );
}
