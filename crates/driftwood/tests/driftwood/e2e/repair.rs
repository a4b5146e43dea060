//! Node repair (behind the `NodeRepair` gate) on the embedded cluster: a node whose kubelet
//! stops reporting is replaced once the AWS provider's toleration has passed, replacement
//! first, within the budgets, with the safety invariants checked every second.

use super::harness::describe;
use super::support::{
    MINUTE, cluster, deployment, events_about, idle, initialized_of, instance_of, name, nodepool,
    pdb, ready_pods,
};
use driftwood_api::condition::Conditions;
use driftwood_api::wellknown::CONDITION_DISRUPTION_REASON;
use driftwood_controller::{FeatureGates, Settings};
use driftwood_sim_aws::faults::NodeFault;

/// A node whose kubelet stops posting status (Ready=Unknown) is left alone for the 30-minute
/// toleration, then replaced with reason Unhealthy: the replacement initializes before the node
/// is drained (within the policy's 10-minute bound) and terminated; the PDB holds throughout.
#[tokio::test(start_paused = true)]
async fn a_node_that_stops_reporting_is_repaired_after_its_toleration() {
    let settings = Settings {
        feature_gates: FeatureGates::parse("NodeRepair=true").unwrap(),
        ..Settings::default()
    };
    let mut h = cluster(settings).await;
    h.apply(&nodepool("general", "", "")).await;
    h.apply(&deployment("app", 3, "3", "general", "")).await;
    h.apply(&pdb("app", 2)).await;
    h.wait_until("three nodes running the Deployment", 10 * MINUTE, |s| {
        initialized_of(s, "general").len() == 3 && ready_pods(s, "app") == 3
    })
    .await;
    let s = h.snapshot();
    let claim = initialized_of(&s, "general")[0].clone();
    let claim_name = name(&claim);
    let status = claim.status.clone().unwrap_or_default();
    let node = status.node_name.clone().unwrap_or_default();
    let instance = instance_of(&claim);
    h.embedded
        .cluster
        .aws()
        .set_node_fault(&instance, Some(NodeFault::NotReady));
    let broke = h.embedded.cluster.clock().now().as_second();
    h.wait_until("the node NotReady", 5 * MINUTE, |s| {
        s.store.nodes.get(&node).is_some_and(|n| {
            n.status
                .as_ref()
                .and_then(|st| st.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .is_some_and(|c| c.status != "True")
        })
    })
    .await;
    // Within the toleration nothing happens.
    idle(&mut h, 20 * MINUTE).await;
    let s = h.snapshot();
    let held = &s.store.nodeclaims[&claim_name];
    assert!(
        held.metadata.deletion_timestamp.is_none()
            && held.condition(CONDITION_DISRUPTION_REASON).is_none(),
        "repaired before its toleration\n{}",
        describe(&s)
    );
    h.wait_until("the unhealthy node replaced", 30 * MINUTE, |s| {
        !s.store.nodeclaims.contains_key(&claim_name)
            && initialized_of(s, "general").len() == 3
            && ready_pods(s, "app") == 3
    })
    .await;
    let took = h.embedded.cluster.clock().now().as_second() - broke;
    assert!(took >= 30 * 60, "repaired {took}s after the node broke");
    let reasons: Vec<(String, String)> = events_about(&h, "default", &claim_name).await;
    assert!(
        reasons
            .iter()
            .any(|(r, note)| r == "DisruptionTerminating" && note.contains("Unhealthy")),
        "{reasons:?}"
    );
    let metrics = h.embedded.ctx().expect("controllers run").metrics.render();
    assert!(
        metrics.contains(
            "karpenter_nodeclaims_disrupted_total{reason=\"unhealthy\",nodepool=\"general\",capacity_type=\"on-demand\",consolidation_policy=\"\",termination_mode=\"graceful\"} 1"
        ),
        "{metrics}"
    );
    let image = status.image_id.clone().unwrap_or_default();
    let line = format!(
        "karpenter_nodeclaims_unhealthy_disrupted_total{{condition=\"ready\",nodepool=\"general\",capacity_type=\"on-demand\",image_id=\"{image}\"}} 1"
    );
    assert!(metrics.contains(&line), "{line} in\n{metrics}");
}
