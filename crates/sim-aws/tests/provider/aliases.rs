//! Every alias form Karpenter's examples use resolves through the provider against the catalog
//! built from public release facts; pinned releases exist only once the clock has reached them;
//! name patterns over a Kubernetes version still pick the standard AL2 image.

use driftwood_api::wellknown::CONDITION_AMIS_READY;
use driftwood_aws::ports::{DescribeImagesInput, Ec2Api, Filter};
use driftwood_sim_aws::kubernetes_versions;
use jiff::Timestamp;

use crate::common::*;

/// The image names `alias` resolves to on Kubernetes `k8s` (empty when it matches nothing).
async fn resolve(env: &Env, alias: &str) -> Vec<String> {
    let class = env.resolve(class("c", vec![alias_term(alias)], None)).await;
    let mut names: Vec<String> = class
        .status
        .as_ref()
        .map(|s| s.amis.iter().filter_map(|a| a.name.clone()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test(start_paused = true)]
async fn every_alias_form_of_karpenters_examples_resolves() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "1.29",
            "al2@latest",
            // Karpenter amifamily suite "should succeed to resolve AMIs (AL2)": four, the GPU
            // image once for NVIDIA and once for Neuron instances.
            &[
                "amazon-eks-arm64-node-1.29-v20251209",
                "amazon-eks-gpu-node-1.29-v20251209",
                "amazon-eks-gpu-node-1.29-v20251209",
                "amazon-eks-node-1.29-v20251209",
            ],
        ),
        (
            "1.33",
            "al2023@latest",
            &[
                "amazon-eks-node-al2023-arm64-nvidia-1.33-v20260714",
                "amazon-eks-node-al2023-arm64-standard-1.33-v20260714",
                "amazon-eks-node-al2023-x86_64-neuron-1.33-v20260714",
                "amazon-eks-node-al2023-x86_64-nvidia-1.33-v20260714",
                "amazon-eks-node-al2023-x86_64-standard-1.33-v20260714",
            ],
        ),
        (
            // The alias Karpenter's own docs use as their example: a release tagged in
            // awslabs/amazon-eks-ami without changelog notes (before AL2023's GPU variants).
            "1.30",
            "al2023@v20240807",
            &[
                "amazon-eks-node-al2023-arm64-standard-1.30-v20240807",
                "amazon-eks-node-al2023-x86_64-standard-1.30-v20240807",
            ],
        ),
        (
            "1.33",
            "al2023@v20250715",
            &[
                "amazon-eks-node-al2023-arm64-nvidia-1.33-v20250715",
                "amazon-eks-node-al2023-arm64-standard-1.33-v20250715",
                "amazon-eks-node-al2023-x86_64-neuron-1.33-v20250715",
                "amazon-eks-node-al2023-x86_64-nvidia-1.33-v20250715",
                "amazon-eks-node-al2023-x86_64-standard-1.33-v20250715",
            ],
        ),
        (
            "1.30",
            "al2023@v20240625",
            &[
                "amazon-eks-node-al2023-arm64-standard-1.30-v20240625",
                "amazon-eks-node-al2023-x86_64-standard-1.30-v20240625",
            ],
        ),
        ("1.33", "bottlerocket@latest", &[]),
        ("1.30", "bottlerocket@v1.39.1", &[]),
        (
            "1.33",
            "windows2019@latest",
            &["Windows_Server-2019-English-Core-EKS_Optimized-1.33-2026.01.22"],
        ),
        (
            "1.33",
            "windows2022@latest",
            &["Windows_Server-2022-English-Core-EKS_Optimized-1.33-2026.01.22"],
        ),
        (
            "1.35",
            "windows2025@latest",
            &["Windows_Server-2025-English-Core-EKS_Optimized-1.35-2026.04.18"],
        ),
    ];
    for (k8s, alias, want) in cases {
        let env = env_for(k8s, 42);
        let names = resolve(&env, alias).await;
        if want.is_empty() {
            // Bottlerocket: standard and NVIDIA, both architectures, of the named release; the
            // x86_64 standard image twice (standard and Neuron instances), five in all as in
            // Karpenter's amifamily suite.
            let version = alias.split('@').nth(1).unwrap_or_default();
            let version = if *version == *"latest" {
                "v1.50.0"
            } else {
                version
            };
            assert_eq!(names.len(), 5, "{alias} on {k8s}: {names:?}");
            assert!(
                names
                    .iter()
                    .all(|n| n.starts_with(&format!("bottlerocket-aws-k8s-{k8s}"))
                        && n.contains(&format!("-{version}-"))),
                "{alias} on {k8s}: {names:?}"
            );
        } else {
            assert_eq!(&names, want, "{alias} on {k8s}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn windows2025_needs_kubernetes_1_35() {
    let env = env_for("1.34", 42);
    let class = env
        .resolve(class("c", vec![alias_term("windows2025@latest")], None))
        .await;
    assert!(!condition(&class, CONDITION_AMIS_READY).is_true());
    assert!(
        env.sim
            .ssm_get_parameter(
                "/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.34/image_id"
            )
            .is_err()
    );
    assert!(
        env.sim
            .ssm_get_parameter(
                "/aws/service/ami-windows-latest/Windows_Server-2025-English-Full-EKS_Optimized-1.35/image_id"
            )
            .is_ok()
    );
}

#[tokio::test(start_paused = true)]
async fn pinned_releases_exist_only_once_the_clock_reaches_them() {
    let at: Timestamp = "2025-07-01T00:00:00Z".parse().unwrap();
    let env = env_at("1.33", 42, at);
    let pinned = resolve(&env, "al2023@v20250519").await;
    assert!(
        pinned.contains(&"amazon-eks-node-al2023-x86_64-standard-1.33-v20250519".to_string())
            && pinned.contains(&"amazon-eks-node-al2023-arm64-standard-1.33-v20250519".to_string()),
        "{pinned:?}"
    );
    assert!(resolve(&env, "al2023@v20250715").await.is_empty());
    assert!(resolve(&env, "bottlerocket@v1.43.0").await.is_empty());
    // al2023@latest is the newest release before now.
    assert!(
        resolve(&env, "al2023@latest")
            .await
            .iter()
            .all(|n| n.ends_with("-v20250627"))
    );
    env.clock.advance(jiff::SignedDuration::from_hours(24 * 15));
    // Standard for both architectures, NVIDIA for both, Neuron for x86_64 (Karpenter v1.14's
    // AL2023 query).
    assert_eq!(resolve(&env, "al2023@v20250715").await.len(), 5);
    assert!(
        resolve(&env, "al2023@latest")
            .await
            .iter()
            .all(|n| n.ends_with("-v20250715"))
    );
    env.clock.advance(jiff::SignedDuration::from_hours(24 * 30));
    // Four images; the x86_64 standard one serves Neuron instances too (Karpenter amifamily
    // suite "should succeed to resolve AMIs (Bottlerocket)": five).
    assert_eq!(resolve(&env, "bottlerocket@v1.43.0").await.len(), 5);
}

/// The public walkthrough's older form picks images by `*-<version>-*` and owner amazon: the
/// newest x86_64 image of every version with AL2 builds is an EKS image (never Bottlerocket or
/// Windows), and for the walkthrough's 1.27 and 1.28 the standard AL2 one.
#[tokio::test(start_paused = true)]
async fn name_patterns_over_a_version_pick_the_standard_al2_image() {
    let env = env();
    for k8s in kubernetes_versions() {
        let images = env
            .sim
            .describe_images(DescribeImagesInput {
                owners: vec!["amazon".to_string()],
                filters: vec![Filter::new("name", [format!("*-{k8s}-*")])],
                include_deprecated: true,
                ..Default::default()
            })
            .await
            .unwrap();
        let has_al2 = images
            .iter()
            .any(|i| i.name.starts_with(&format!("amazon-eks-node-{k8s}-")));
        if !has_al2 {
            continue;
        }
        let newest = images
            .iter()
            .filter(|i| i.architecture == "x86_64")
            .max_by(|a, b| {
                a.creation_date
                    .cmp(&b.creation_date)
                    .then(b.name.cmp(&a.name))
            })
            .unwrap();
        assert!(
            newest.name.starts_with("amazon-eks-node-"),
            "{k8s}: {}",
            newest.name
        );
    }
    for (k8s, want) in [
        ("1.27", "amazon-eks-node-1.27-v20250715"),
        ("1.28", "amazon-eks-node-1.28-v20251112"),
    ] {
        let env = env_for(k8s, 42);
        let class = env
            .resolve(class(
                "latest-current-ami-template",
                vec![
                    name_term(&format!("*-{k8s}-*"), Some("self")),
                    name_term(&format!("*-{k8s}-*"), Some("amazon")),
                ],
                Some("AL2"),
            ))
            .await;
        let amd64 = class
            .status
            .as_ref()
            .unwrap()
            .amis
            .iter()
            .find(|a| {
                a.requirements
                    .iter()
                    .any(|r| r.key == "kubernetes.io/arch" && r.values == ["amd64"])
            })
            .unwrap();
        assert_eq!(amd64.name.as_deref(), Some(want));
    }
}

/// Figures for the catalog's size and the cost of the calls that read it (printed with
/// `--nocapture`); the bounds are loose enough for a debug build on a slow machine.
#[tokio::test(start_paused = true)]
async fn the_catalog_is_large_and_lookups_stay_cheap() {
    let t = std::time::Instant::now();
    // Without rate limits: this measures the simulation's own cost of 100 lookups made in one
    // instant, which EC2 would throttle past its DescribeImages bucket of 100.
    let env = env_with(
        "1.29",
        42,
        start(),
        driftwood_sim_aws::Realism {
            rate_limits: false,
            ..driftwood_sim_aws::Realism::aws()
        },
    );
    let built = t.elapsed();
    let all = env
        .sim
        .describe_images(DescribeImagesInput {
            include_deprecated: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(all.len() > 5000, "{}", all.len());
    let t = std::time::Instant::now();
    for _ in 0..100 {
        let by_id = env
            .sim
            .describe_images(DescribeImagesInput {
                filters: vec![Filter::new("image-id", [all[7].image_id.clone()])],
                include_deprecated: true,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(by_id.len(), 1);
    }
    let by_id = t.elapsed() / 100;
    let t = std::time::Instant::now();
    let by_prefix = env
        .sim
        .describe_images(DescribeImagesInput {
            owners: vec!["amazon".to_string()],
            filters: vec![Filter::new("name", ["amazon-eks-node-1.29-*"])],
            include_deprecated: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let prefix = t.elapsed();
    let t = std::time::Instant::now();
    let _ = env
        .sim
        .describe_images(DescribeImagesInput {
            owners: vec!["amazon".to_string()],
            filters: vec![Filter::new("name", ["*-1.29-*"])],
            include_deprecated: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let scan = t.elapsed();
    let t = std::time::Instant::now();
    for _ in 0..100 {
        env.sim
            .ssm_get_parameter(
                "/aws/service/eks/optimized-ami/1.29/amazon-linux-2/recommended/image_id",
            )
            .unwrap();
    }
    let ssm = t.elapsed() / 100;
    println!(
        "{} images; account built in {built:?}; DescribeImages by id {by_id:?}, by name prefix \
         ({} images) {prefix:?}, by '*-1.29-*' (full scan) {scan:?}; GetParameter {ssm:?}",
        all.len(),
        by_prefix.len()
    );
    assert!(by_id < std::time::Duration::from_millis(5), "{by_id:?}");
    assert!(ssm < std::time::Duration::from_millis(1), "{ssm:?}");
}

/// Karpenter's AMI variants at launch: a GPU type launches on the NVIDIA image, a Neuron type
/// on the Neuron image, a plain type on the standard image (al2023@latest on 1.33).
#[tokio::test(start_paused = true)]
async fn each_instance_type_launches_on_the_image_of_its_variant() {
    use driftwood_api::NodeSelectorRequirementWithMinValues as Req;
    use driftwood_api::requirement::OP_IN;
    use driftwood_cloud::CloudProvider;

    let env = env_for("1.33", 42);
    env.resolve(class("gpu", vec![alias_term("al2023@latest")], None))
        .await;
    for (instance_type, variant) in [
        ("g5.xlarge", "x86_64-nvidia"),
        ("inf2.xlarge", "x86_64-neuron"),
        ("g5g.xlarge", "arm64-nvidia"),
        ("m5.large", "x86_64-standard"),
        ("m7g.large", "arm64-standard"),
    ] {
        let reqs = vec![Req::new(
            "node.kubernetes.io/instance-type",
            OP_IN,
            &[instance_type],
        )];
        let launched = env
            .provider
            .create(&claim(&format!("nc-{instance_type}"), "gpu", reqs, "1"))
            .await
            .unwrap_or_else(|e| panic!("{instance_type}: {e}"));
        let image = launched.status.as_ref().unwrap().image_id.clone().unwrap();
        let name = env.sim.image(&image).unwrap().image.name;
        assert_eq!(
            name,
            format!("amazon-eks-node-al2023-{variant}-1.33-v20260714"),
            "{instance_type}"
        );
    }
}
