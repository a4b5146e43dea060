//! Interruption handling on the embedded cluster: EC2's events reach the simulated account's
//! interruption queue (as EventBridge routes them), the controller replaces the node before
//! EC2 takes it, and the safety invariants hold at every step.

use super::harness::describe;
use super::support::{
    MINUTE, cluster, deployment, events_about, idle, initialized_of, instance_of, name, nodepool,
    pdb, ready_pods,
};
use driftwood_api::lookup::ObjectLookups as _;
use driftwood_api::wellknown::{LABEL_INSTANCE_TYPE, LABEL_TOPOLOGY_ZONE};
use driftwood_controller::Settings;
use std::time::Duration;

/// The `spot` pool: [`nodepool`] launching spot capacity.
fn spot_pool() -> String {
    nodepool("spot", "", "").replace("values: [\"on-demand\"]", "values: [\"spot\"]")
}

fn label(claim: &driftwood_api::NodeClaim, key: &str) -> String {
    claim.label(key).unwrap_or_default().to_string()
}

/// The reasons of the events about `name` in `default`.
async fn event_reasons(h: &super::harness::Harness, name: &str) -> Vec<String> {
    events_about(h, "default", name)
        .await
        .into_iter()
        .map(|(reason, _)| reason)
        .collect()
}

/// The `general` pool running Deployment `app` (2 pods of 3 cpu, a PDB keeping 1) on two
/// nodes: the harness and the two nodes' NodeClaims.
async fn two_app_nodes(
    settings: Settings,
) -> (
    super::harness::Harness,
    driftwood_api::NodeClaim,
    driftwood_api::NodeClaim,
) {
    let mut h = cluster(settings).await;
    h.apply(&nodepool("general", "", "")).await;
    h.apply(&deployment("app", 2, "3", "general", "")).await;
    h.apply(&pdb("app", 1)).await;
    h.wait_until("two nodes", 10 * MINUTE, |s| {
        initialized_of(s, "general").len() == 2 && ready_pods(s, "app") == 2
    })
    .await;
    let s = h.snapshot();
    let claims = initialized_of(&s, "general");
    (h, claims[0].clone(), claims[1].clone())
}

/// Issue 30's "done when": a spot interruption warning for a node running a PDB-protected
/// Deployment replaces the node before EC2 reclaims it two minutes later, with no PDB
/// violation (checked every second). The NodeClaim gets Karpenter's SpotInterrupted and
/// TerminatingOnInterruption events, the message is deleted from the queue, the offering it
/// ran on is out of use (the replacement runs on another), and the metrics count it.
#[tokio::test(start_paused = true)]
async fn a_spot_interruption_replaces_the_node_before_ec2_reclaims_it() {
    let mut h = cluster(Settings::default()).await;
    h.apply(&spot_pool()).await;
    // One 3-cpu pod per 4-cpu node: three nodes, and a PDB that lets one pod go at a time.
    h.apply(&deployment("web", 3, "3", "spot", "")).await;
    h.apply(&pdb("web", 2)).await;
    h.wait_until(
        "three spot nodes running the Deployment",
        10 * MINUTE,
        |s| initialized_of(s, "spot").len() == 3 && ready_pods(s, "web") == 3,
    )
    .await;
    let s = h.snapshot();
    let claim = initialized_of(&s, "spot")[0].clone();
    let claim_name = name(&claim);
    assert_eq!(label(&claim, "karpenter.sh/capacity-type"), "spot");
    let offering = (
        label(&claim, LABEL_INSTANCE_TYPE),
        label(&claim, LABEL_TOPOLOGY_ZONE),
    );
    let status = claim.status.clone().unwrap_or_default();
    let node = status.node_name.clone().unwrap_or_default();
    let instance = instance_of(&claim);
    let aws = h.embedded.cluster.aws();
    h.min_ready.clear();
    assert!(aws.interrupt_spot(&instance), "a running spot instance");
    let warned = h.embedded.cluster.clock().now().as_second();

    h.wait_until(
        "the interrupted node drained and its pod running elsewhere",
        2 * MINUTE,
        |s| {
            ready_pods(s, "web") == 3
                && s.pods_on(&node)
                    .iter()
                    .all(|p| p.labels().get("app").is_none_or(|a| a != "web"))
        },
    )
    .await;
    let drained_after = h.embedded.cluster.clock().now().as_second() - warned;
    assert!(
        drained_after < 120,
        "drained {drained_after}s after the warning"
    );
    assert!(
        !aws.reclaimed_by_ec2(&instance),
        "driftwood terminated the instance or still has time to"
    );
    h.wait_until("the interrupted NodeClaim gone", 3 * MINUTE, |s| {
        !s.store.nodeclaims.contains_key(&claim_name)
    })
    .await;
    assert!(
        !aws.reclaimed_by_ec2(&instance),
        "driftwood terminated the instance before EC2 reclaimed it"
    );
    let s = h.snapshot();
    assert_eq!(initialized_of(&s, "spot").len(), 3, "{}", describe(&s));
    assert_eq!(h.min_ready.get("web").copied(), Some(2), "availability");
    // The offering EC2 reclaimed is avoided for the replacement.
    let survivors: Vec<String> = initialized_of(&s, "spot").iter().map(|c| name(c)).collect();
    let originals: Vec<String> = initialized_of(&h.snapshot(), "spot")
        .iter()
        .filter(|c| {
            c.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second())
                > Some(warned)
        })
        .map(|c| {
            format!(
                "{}/{}",
                label(c, LABEL_INSTANCE_TYPE),
                label(c, LABEL_TOPOLOGY_ZONE)
            )
        })
        .collect();
    assert_eq!(originals.len(), 1, "one replacement: {survivors:?}");
    assert_ne!(
        originals[0],
        format!("{}/{}", offering.0, offering.1),
        "the interrupted offering is marked unavailable"
    );
    // The message was handled and deleted.
    assert_eq!(
        aws.queue_depth(&h.embedded.cluster.options().cluster_name),
        0
    );
    let reasons = event_reasons(&h, &claim_name).await;
    let node_reasons = event_reasons(&h, &node).await;
    for reason in ["SpotInterrupted", "TerminatingOnInterruption"] {
        assert!(
            reasons.iter().any(|r| r == reason),
            "{reason} on the NodeClaim: {reasons:?}"
        );
        assert!(
            node_reasons.iter().any(|r| r == reason),
            "{reason} on the Node: {node_reasons:?}"
        );
    }
    let metrics = h.embedded.ctx().expect("controllers run").metrics.render();
    for line in [
        "karpenter_interruption_received_messages_total{message_type=\"spot_interrupted\"} 1",
        "karpenter_interruption_deleted_messages_total 1",
        "karpenter_nodeclaims_disrupted_total{reason=\"spot_interrupted\",nodepool=\"spot\",capacity_type=\"spot\",consolidation_policy=\"\",termination_mode=\"graceful\"} 1",
        // Its one web pod (Karpenter's main after v1.14.1).
        "karpenter_pods_disruption_initiated_total{reason=\"spot_interrupted\",nodepool=\"spot\",capacity_type=\"spot\",consolidation_policy=\"\",termination_mode=\"graceful\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
}

/// An AWS Health scheduled change (instance retirement) replaces an on-demand node, and a
/// rebalance recommendation only reports: its node stays.
#[tokio::test(start_paused = true)]
async fn scheduled_maintenance_replaces_a_node_and_a_rebalance_recommendation_only_reports() {
    let (mut h, retired, advised) = two_app_nodes(Settings::default()).await;
    let aws = h.embedded.cluster.aws();
    let now = h.embedded.cluster.clock().now();
    let origin = aws.event_origin();
    assert_eq!(
        aws.publish_event(&origin.rebalance_recommendation(&instance_of(&advised), now)),
        1
    );
    assert_eq!(
        aws.publish_event(&origin.scheduled_change(&[&instance_of(&retired)], now)),
        1
    );
    h.wait_until("the retired node replaced", 5 * MINUTE, |s| {
        !s.store.nodeclaims.contains_key(&name(&retired))
            && initialized_of(s, "general").len() == 2
            && ready_pods(s, "app") == 2
    })
    .await;
    idle(&mut h, Duration::from_secs(30)).await;
    let s = h.snapshot();
    assert!(
        s.store.nodeclaims.contains_key(&name(&advised))
            && s.store.nodeclaims[&name(&advised)]
                .metadata
                .deletion_timestamp
                .is_none(),
        "a rebalance recommendation disrupts nothing\n{}",
        describe(&s)
    );
    let reasons = event_reasons(&h, &name(&advised)).await;
    assert!(
        reasons.iter().any(|r| r == "SpotRebalanceRecommendation"),
        "{reasons:?}"
    );
    let reasons = event_reasons(&h, &name(&retired)).await;
    assert!(
        reasons.iter().any(|r| r == "InstanceUnhealthy"),
        "{reasons:?}"
    );
    assert_eq!(
        aws.queue_depth(&h.embedded.cluster.options().cluster_name),
        0
    );
    assert_eq!(h.min_ready.get("app").copied(), Some(1));
}

/// Karpenter's instance status controller, with no interruption queue needed: EC2 reports one
/// node's host failing its system status check and another node's instance scheduled for
/// retirement. Once the check has failed for two minutes, the next poll terminates that node
/// forcefully (its termination deadline set to now, so the drain does not wait on the PDB);
/// the retirement cordons and drains the other node as a scheduled change does. Both are
/// replaced with the invariants checked every second, each gets InstanceUnhealthy and
/// TerminatingOnInterruption, and each instance and category is counted once however many
/// polls see it (Karpenter's "should forcefully terminate the NodeClaim when an instance is
/// unhealthy due to EC2 system status checks", "should delete the NodeClaim when an instance
/// has a scheduled maintenance event", "should only emit the metric once across multiple
/// reconciles for the same unhealthy instance").
#[tokio::test(start_paused = true)]
async fn ec2_status_checks_and_scheduled_events_replace_the_unhealthy_nodes() {
    use driftwood_sim_aws::faults::Impairment;
    let (mut h, failing, retiring) = two_app_nodes(Settings::default()).await;
    let aws = h.embedded.cluster.aws();
    let now = h.embedded.cluster.clock().now();
    aws.set_impairment(
        &instance_of(&failing),
        Some(Impairment {
            system_check_failed_since: Some(now),
            ..Impairment::default()
        }),
    );
    // A failed check counts after two minutes: nothing happens to it before.
    idle(&mut h, Duration::from_secs(110)).await;
    let s = h.snapshot();
    assert!(
        s.store.nodeclaims[&name(&failing)]
            .metadata
            .deletion_timestamp
            .is_none(),
        "acted before the check had failed for two minutes\n{}",
        describe(&s)
    );
    let stamped =
        |s: &driftwood_controller::state::Snapshot, claim: &str| {
            s.store.nodeclaims.get(claim).and_then(|c| {
                c.metadata.deletion_timestamp.as_ref()?;
                Some(c.metadata.annotations.as_ref().is_some_and(|a| {
                    a.contains_key("karpenter.sh/nodeclaim-termination-timestamp")
                }))
            })
        };
    let mut forced = None;
    h.wait_until("the failing node replaced", 5 * MINUTE, |s| {
        forced = forced.or(stamped(s, &name(&failing)));
        !s.store.nodeclaims.contains_key(&name(&failing))
            && initialized_of(s, "general").len() == 2
            && ready_pods(s, "app") == 2
    })
    .await;
    assert_eq!(
        forced,
        Some(true),
        "a failed check sets the termination deadline (forceful)"
    );
    aws.set_impairment(
        &instance_of(&retiring),
        Some(Impairment {
            scheduled_event: Some("instance-retirement".to_string()),
            ..Impairment::default()
        }),
    );
    let mut annotated = None;
    h.wait_until("the retiring node replaced", 5 * MINUTE, |s| {
        annotated = annotated.or(stamped(s, &name(&retiring)));
        !s.store.nodeclaims.contains_key(&name(&retiring))
            && initialized_of(s, "general").len() == 2
            && ready_pods(s, "app") == 2
    })
    .await;
    assert_eq!(
        annotated,
        Some(false),
        "a scheduled event drains as usual: no deadline set"
    );
    // More polls see nothing new to count.
    idle(&mut h, Duration::from_secs(150)).await;
    for claim in [&failing, &retiring] {
        let reasons = event_reasons(&h, &name(claim)).await;
        for reason in ["InstanceUnhealthy", "TerminatingOnInterruption"] {
            assert!(reasons.iter().any(|r| r == reason), "{reason}: {reasons:?}");
        }
    }
    let metrics = h.embedded.ctx().expect("controllers run").metrics.render();
    for line in [
        "karpenter_interruption_instance_status_unhealthy_total{category=\"SystemStatus\"} 1",
        "karpenter_interruption_instance_status_unhealthy_total{category=\"EventStatus\"} 1",
        "karpenter_nodeclaims_disrupted_total{reason=\"system_status\",nodepool=\"general\",capacity_type=\"on-demand\",consolidation_policy=\"\",termination_mode=\"graceful\"} 1",
        "karpenter_nodeclaims_disrupted_total{reason=\"event_status\",nodepool=\"general\",capacity_type=\"on-demand\",consolidation_policy=\"\",termination_mode=\"graceful\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    assert_eq!(h.min_ready.get("app").copied(), Some(1));
}

/// Karpenter's "should NOT delete the NodeClaim when dry run is enabled but should still emit
/// the metric" (InstanceStatusDryRun; `--instance-status-dry-run` here): a failed system check
/// and a scheduled retirement are found and counted once each, however many polls see them,
/// and neither NodeClaim is touched — no deletion, no termination deadline, no event.
#[tokio::test(start_paused = true)]
async fn a_dry_run_counts_unhealthy_instances_and_leaves_them_alone() {
    use driftwood_sim_aws::faults::Impairment;
    let settings = Settings {
        instance_status_dry_run: true,
        ..Settings::default()
    };
    let (mut h, failing, retiring) = two_app_nodes(settings).await;
    let aws = h.embedded.cluster.aws();
    let now = h.embedded.cluster.clock().now();
    aws.set_impairment(
        &instance_of(&failing),
        Some(Impairment {
            system_check_failed_since: Some(now),
            ..Impairment::default()
        }),
    );
    aws.set_impairment(
        &instance_of(&retiring),
        Some(Impairment {
            scheduled_event: Some("instance-retirement".to_string()),
            ..Impairment::default()
        }),
    );
    // Well past the two minutes a failed check needs, over several polls.
    idle(&mut h, 6 * MINUTE).await;
    let s = h.snapshot();
    for claim in [&failing, &retiring] {
        let cached = &s.store.nodeclaims[&name(claim)];
        assert!(
            cached.metadata.deletion_timestamp.is_none(),
            "{} deleted in a dry run",
            name(claim)
        );
        assert!(
            !cached.metadata.annotations.as_ref().is_some_and(|a| {
                a.contains_key("karpenter.sh/nodeclaim-termination-timestamp")
            }),
            "a deadline set in a dry run"
        );
        let reasons = event_reasons(&h, &name(claim)).await;
        assert!(
            !reasons
                .iter()
                .any(|r| r == "InstanceUnhealthy" || r == "TerminatingOnInterruption"),
            "{reasons:?}"
        );
    }
    let metrics = h.embedded.ctx().expect("controllers run").metrics.render();
    for line in [
        "karpenter_interruption_instance_status_unhealthy_total{category=\"SystemStatus\"} 1",
        "karpenter_interruption_instance_status_unhealthy_total{category=\"EventStatus\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    assert!(
        !metrics.contains("karpenter_nodeclaims_disrupted_total{reason=\"system_status\""),
        "{metrics}"
    );
    assert_eq!(ready_pods(&h.snapshot(), "app"), 2);
}
