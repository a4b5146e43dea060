//! The public "update nodes using drift" walkthrough (../shared/fixtures), both forms.

use super::harness::{Harness, describe, kubelet_version, pod_ready};
use driftwood_api::condition::Conditions;
use driftwood_api::wellknown::{
    CONDITION_INITIALIZED, CONDITION_LAUNCHED, CONDITION_REGISTERED, LABEL_NODE_INITIALIZED,
};
use driftwood_controller::Settings;
use driftwood_controller::state::Snapshot;
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

pub fn initialized_nodes(s: &Snapshot) -> Vec<String> {
    s.store
        .nodes
        .iter()
        .filter(|(_, n)| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_NODE_INITIALIZED))
                .is_some_and(|v| v == "true")
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// Ready, non-terminating pods of the walkthrough's workload on `node`.
pub fn workload_running_on(s: &Snapshot, node: &str) -> usize {
    s.pods_on(node)
        .iter()
        .filter(|p| {
            p.labels()
                .get("app")
                .is_some_and(|a| a == "latest-current-ami")
        })
        .filter(|p| !p.is_terminating() && pod_ready(p))
        .count()
}

/// Applies the walkthrough (id form) on a 1.29 cluster and waits for its node.
async fn provisioned() -> (Harness, String) {
    let mut h = Harness::start("1.29", Settings::default()).await;
    let values = h
        .embedded
        .walkthrough_values("1.29")
        .expect("ssm parameters");
    h.apply_fixture("update-nodes-with-drift/latest-current-ami.yaml", &values)
        .await;
    h.apply_fixture("update-nodes-with-drift/workload.yaml", &values)
        .await;
    h.wait_until(
        "3 workload pods running on an initialized v1.29 node",
        10 * MINUTE,
        |s| {
            initialized_nodes(s)
                .iter()
                .any(|n| workload_running_on(s, n) == 3)
        },
    )
    .await;
    let s = h.snapshot();
    let node = initialized_nodes(&s).into_iter().next().expect("a node");
    (h, node)
}

#[tokio::test(start_paused = true)]
async fn walkthrough_provisions_one_initialized_node_for_three_pods() {
    let (h, node) = provisioned().await;
    let s = h.snapshot();
    assert_eq!(s.store.nodeclaims.len(), 1, "{}", describe(&s));
    let claim = s.store.nodeclaims.values().next().unwrap();
    for condition in [
        CONDITION_LAUNCHED,
        CONDITION_REGISTERED,
        CONDITION_INITIALIZED,
    ] {
        assert!(claim.is_true(condition), "{condition}: {}", describe(&s));
    }
    let version = kubelet_version(&s.store.nodes[&node]);
    assert!(version.starts_with("v1.29."), "{version}");
    assert_eq!(workload_running_on(&s, &node), 3);
}

#[tokio::test(start_paused = true)]
async fn walkthrough_upgrade_replaces_the_node_without_downtime() {
    let (mut h, old_node) = provisioned().await;
    let values = h
        .embedded
        .walkthrough_values("1.30")
        .expect("ssm parameters");
    // The walkthrough's upgrade: the next version's AMI ids and the tag bumped.
    let text = std::fs::read_to_string(
        super::super::blueprints().join("update-nodes-with-drift/latest-current-ami.yaml"),
    )
    .unwrap()
    .replace("KubernetesVersion: \"1.31\"", "KubernetesVersion: \"1.32\"");
    h.min_ready.clear();
    h.apply(&driftwood::embedded::fill(&text, &values)).await;
    h.wait_until(
        "the old node gone and 3 pods on a v1.30 node",
        30 * MINUTE,
        |s| {
            !s.store.nodes.contains_key(&old_node)
                && initialized_nodes(s).iter().any(|n| {
                    kubelet_version(&s.store.nodes[n]).starts_with("v1.30.")
                        && workload_running_on(s, n) == 3
                })
        },
    )
    .await;
    let s = h.snapshot();
    assert_eq!(s.store.nodeclaims.len(), 1, "{}", describe(&s));
    // No PDB: driftwood moves a quarter of the controller's pods at a time (at least one), so
    // at least 2 of the 3 stayed Ready throughout.
    assert_eq!(
        h.min_ready.get("latest-current-ami").copied(),
        Some(2),
        "availability during the rollout"
    );
    let claim = s.store.nodeclaims.values().next().unwrap();
    let image = claim
        .status
        .as_ref()
        .and_then(|st| st.image_id.clone())
        .unwrap_or_default();
    assert_eq!(
        image, values["<<AMD64PREVAMI>>"],
        "the new node runs the 1.30 amd64 AMI"
    );
}
