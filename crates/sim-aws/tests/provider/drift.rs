//! Provider drift: each reason fires in its own case and in no other.

use std::collections::BTreeMap;

use driftwood_api::ec2nodeclass::{SecurityGroupSelectorTerm, SubnetSelectorTerm};
use driftwood_api::wellknown::{
    ANNOTATION_EC2NODECLASS_HASH, ANNOTATION_EC2NODECLASS_HASH_VERSION, DRIFT_AMI, DRIFT_NODECLASS,
    DRIFT_SECURITY_GROUP, DRIFT_SUBNET,
};
use driftwood_api::{EC2NodeClass, NodeClaim};
use driftwood_aws::ProviderDrift;
use driftwood_aws::ports::Tag;
use driftwood_cloud::CloudProvider;
use driftwood_sim_aws::DISCOVERY_TAG;

use crate::common::*;

/// Launches a claim and waits until DescribeInstances sees its instance: drift is judged on
/// launched claims long past EC2's eventual consistency (seconds; a node registers in ~30 s).
async fn launch(env: &Env, class_name: &str) -> NodeClaim {
    let claim = env
        .provider
        .create(&claim("nc", class_name, walkthrough_requirements(), "1"))
        .await
        .unwrap();
    env.settle();
    claim
}

async fn drift_of(env: &Env, claim: &NodeClaim) -> Option<ProviderDrift> {
    env.provider.provider_drift(claim).await.unwrap()
}

/// Every provider drift reason present (to show a case drifts for one reason and no other).
async fn reasons_of(env: &Env, claim: &NodeClaim) -> Vec<&'static str> {
    env.provider
        .all_drifts(claim)
        .await
        .unwrap()
        .iter()
        .map(ProviderDrift::reason)
        .collect()
}

async fn id_pinned(env: &Env) -> (EC2NodeClass, NodeClaim) {
    let amd = env
        .sim
        .image_id_by_name("amazon-eks-node-1.29-v20251120")
        .unwrap();
    let arm = env
        .sim
        .image_id_by_name("amazon-eks-arm64-node-1.29-v20251120")
        .unwrap();
    let class = env
        .resolve(class("c", vec![id_term(&amd), id_term(&arm)], None))
        .await;
    let claim = launch(env, "c").await;
    (class, claim)
}

#[tokio::test(start_paused = true)]
async fn new_release_drifts_nothing_for_an_id_pinned_class() {
    let env = env();
    let (class, claim) = id_pinned(&env).await;
    assert_eq!(drift_of(&env, &claim).await, None);
    env.advance(3600);
    env.sim
        .publish_release_at("v20260801", "1.51.0", env.sim.now());
    env.resolve(class).await;
    assert_eq!(drift_of(&env, &claim).await, None);
}

#[tokio::test(start_paused = true)]
async fn new_release_drifts_an_alias_latest_class_with_ami_drift() {
    let env = env();
    let class = env
        .resolve(class("c", vec![alias_term("al2@latest")], None))
        .await;
    let claim = launch(&env, "c").await;
    let old = claim.status.as_ref().unwrap().image_id.clone().unwrap();
    assert_eq!(drift_of(&env, &claim).await, None);

    env.advance(3600);
    env.sim
        .publish_release_at("v20260801", "1.51.0", env.sim.now());
    // Not drifted until the class status is re-resolved.
    assert_eq!(drift_of(&env, &claim).await, None);
    env.resolve(class).await;
    let new = env
        .sim
        .image_id_by_name("amazon-eks-node-1.29-v20260801")
        .unwrap();
    let drift = drift_of(&env, &claim).await.unwrap();
    assert_eq!(reasons_of(&env, &claim).await, [DRIFT_AMI]);
    assert_eq!(
        drift,
        ProviderDrift::Ami {
            node_image: old.clone(),
            current_images: vec![new.clone()]
        }
    );
    assert!(
        drift.message().contains(&format!("{old} → {new}")),
        "{}",
        drift.message()
    );
}

#[tokio::test(start_paused = true)]
async fn name_term_upgrade_from_1_27_to_1_28_is_ami_drift() {
    let env = env_for("1.27", 42);
    let terms = |v: &str| {
        vec![
            name_term(&format!("*-{v}-*"), Some("self")),
            name_term(&format!("*-{v}-*"), Some("amazon")),
        ]
    };
    let class = env.resolve(class("c", terms("1.27"), Some("AL2"))).await;
    let claim = launch(&env, "c").await;
    assert_eq!(drift_of(&env, &claim).await, None);
    let mut upgraded = class.clone();
    upgraded.spec.ami_selector_terms = terms("1.28");
    env.resolve(upgraded).await;
    let drift = drift_of(&env, &claim).await.unwrap();
    assert_eq!(reasons_of(&env, &claim).await, [DRIFT_AMI]);
    let new = env
        .sim
        .image_id_by_name("amazon-eks-node-1.28-v20251112")
        .unwrap();
    assert!(
        matches!(&drift, ProviderDrift::Ami { current_images, .. } if current_images == &vec![new])
    );
}

#[tokio::test(start_paused = true)]
async fn static_field_change_is_nodeclass_drift_naming_the_field() {
    let env = env();
    let (mut class, claim) = id_pinned(&env).await;
    let stamped =
        claim.metadata.annotations.as_ref().unwrap()[ANNOTATION_EC2NODECLASS_HASH].clone();
    // The walkthrough's upgrade bumps the KubernetesVersion tag along with the AMI ids.
    class
        .spec
        .tags
        .insert("KubernetesVersion".to_string(), "1.30".to_string());
    env.classes.upsert(class.clone());
    let drift = drift_of(&env, &claim).await.unwrap();
    assert_eq!(reasons_of(&env, &claim).await, [DRIFT_NODECLASS]);
    match &drift {
        ProviderDrift::NodeClass {
            stamped_hash,
            current_hash,
            changed_fields,
        } => {
            assert_eq!(stamped_hash, &stamped);
            assert_ne!(current_hash, &stamped);
            assert_eq!(changed_fields, &["tags".to_string()]);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        drift.message().contains("spec.tags changed"),
        "{}",
        drift.message()
    );

    // Reverting the field clears the drift.
    class.spec.tags.clear();
    env.classes.upsert(class);
    assert_eq!(drift_of(&env, &claim).await, None);
}

#[tokio::test(start_paused = true)]
async fn claims_stamped_under_another_hash_version_are_not_drifted_by_hash() {
    let env = env();
    let (mut class, mut claim) = id_pinned(&env).await;
    claim.metadata.annotations.as_mut().unwrap().insert(
        ANNOTATION_EC2NODECLASS_HASH_VERSION.to_string(),
        "v3".to_string(),
    );
    class.spec.user_data = Some("echo changed".to_string());
    env.classes.upsert(class);
    assert_eq!(drift_of(&env, &claim).await, None);
}

#[tokio::test(start_paused = true)]
async fn subnet_no_longer_selected_is_subnet_drift_only() {
    let env = env();
    let (class, claim) = id_pinned(&env).await;
    let zone = claim.metadata.labels.as_ref().unwrap()["topology.kubernetes.io/zone"].clone();
    let fresh = env
        .sim
        .add_subnet(&zone, 4000, vec![Tag::new("tier", "new")]);
    let mut moved = class.clone();
    moved.spec.subnet_selector_terms = vec![SubnetSelectorTerm {
        tags: BTreeMap::from([("tier".to_string(), "new".to_string())]),
        id: None,
    }];
    env.resolve(moved).await;
    let drift = drift_of(&env, &claim).await.unwrap();
    assert_eq!(reasons_of(&env, &claim).await, [DRIFT_SUBNET]);
    assert!(
        matches!(&drift, ProviderDrift::Subnet { current_subnets, .. } if current_subnets == &vec![fresh])
    );
    // Putting the old selector back clears it.
    env.resolve(class).await;
    assert_eq!(drift_of(&env, &claim).await, None);
}

#[tokio::test(start_paused = true)]
async fn added_security_group_is_security_group_drift_only() {
    let env = env();
    let (class, claim) = id_pinned(&env).await;
    let extra = env
        .sim
        .add_security_group("extra", vec![Tag::new(DISCOVERY_TAG, CLUSTER)]);
    env.resolve(class.clone()).await;
    let drift = drift_of(&env, &claim).await.unwrap();
    assert_eq!(reasons_of(&env, &claim).await, [DRIFT_SECURITY_GROUP]);
    assert!(
        matches!(&drift, ProviderDrift::SecurityGroup { current_groups, node_groups }
        if current_groups.contains(&extra) && !node_groups.contains(&extra) && current_groups.len() == 2)
    );

    // Selecting exactly the node's group by id again clears it.
    let node_group = env
        .sim
        .security_groups()
        .into_iter()
        .find(|g| g.group_name.starts_with("eks-cluster-sg"))
        .unwrap();
    let mut by_id = class;
    by_id.spec.security_group_selector_terms = vec![SecurityGroupSelectorTerm {
        tags: BTreeMap::new(),
        id: Some(node_group.group_id),
        name: None,
    }];
    env.resolve(by_id).await;
    assert_eq!(drift_of(&env, &claim).await, None);
}

#[tokio::test(start_paused = true)]
async fn drift_of_a_terminated_instance_is_not_found() {
    let env = env();
    let (_, claim) = id_pinned(&env).await;
    env.provider.delete(&claim).await.unwrap();
    assert!(
        env.provider
            .provider_drift(&claim)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test(start_paused = true)]
async fn a_release_scheduled_for_later_appears_when_the_clock_gets_there() {
    let env = env();
    let class = env
        .resolve(class("c", vec![alias_term("al2023@latest")], None))
        .await;
    let claim = launch(&env, "c").await;
    env.sim.publish_release_at(
        "v20260801",
        "1.51.0",
        start() + jiff::SignedDuration::from_mins(10),
    );
    env.advance(9 * 60);
    let class = env.resolve(class).await;
    assert_eq!(drift_of(&env, &claim).await, None, "not published yet");
    env.advance(60);
    env.resolve(class).await;
    let drift = drift_of(&env, &claim).await.unwrap();
    assert_eq!(reasons_of(&env, &claim).await, [DRIFT_AMI]);
    let new = env
        .sim
        .image_id_by_name("amazon-eks-node-al2023-x86_64-standard-1.29-v20260801")
        .unwrap();
    assert!(
        matches!(&drift, ProviderDrift::Ami { current_images, .. } if current_images == &vec![new])
    );
}

#[tokio::test(start_paused = true)]
async fn walkthrough_upgrade_of_ids_and_tag_reports_nodeclass_then_ami_drift() {
    let env = env_for("1.29", 42);
    let prev = |arch| env.sim.eks_ami("al2", "latest", "1.28", arch).unwrap();
    let mut class = class(
        "latest-current-ami",
        vec![id_term(&prev("amd64")), id_term(&prev("arm64"))],
        None,
    );
    class
        .spec
        .tags
        .insert("KubernetesVersion".to_string(), "1.28".to_string());
    let class = env.resolve(class).await;
    let claim = launch(&env, "latest-current-ami").await;
    assert_eq!(drift_of(&env, &claim).await, None);

    let next = |arch| env.sim.eks_ami("al2", "latest", "1.29", arch).unwrap();
    let mut upgraded = class.clone();
    upgraded.spec.ami_selector_terms = vec![id_term(&next("amd64")), id_term(&next("arm64"))];
    upgraded
        .spec
        .tags
        .insert("KubernetesVersion".to_string(), "1.29".to_string());
    env.resolve(upgraded).await;
    assert_eq!(reasons_of(&env, &claim).await, [DRIFT_NODECLASS, DRIFT_AMI]);
    let first = drift_of(&env, &claim).await.unwrap();
    assert!(first.message().contains("spec.tags"), "{}", first.message());
}
