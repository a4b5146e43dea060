//! Node repair as Karpenter v1.15 does it, a voluntary disruption method ahead of drift: a node
//! whose condition matches a repair policy past its toleration is replaced (the replacement
//! launched and initialized first, then the node drained within the policy's bound), within the
//! NodePools' budgets for reason `Unhealthy` (NotReady nodes are not counted as disrupting
//! there), unless `karpenter.sh/do-not-repair` vetoes it, and never while more than 20% of a
//! NodePool's nodes are unhealthy (a zone outage or a bad image would otherwise replace the
//! whole pool). `karpenter.sh/do-not-disrupt` and PDBs do not block it: the drain honours them
//! until the bound forces the pods out.

use crate::candidate::{Blocked, NodeView};
use crate::plan::{DisruptionPlan, Finding, MethodSpec, PlannerInput, plan_method};
use driftwood_api::repair::RepairPolicy;
use driftwood_api::wellknown::REASON_UNHEALTHY;
use k8s_openapi::api::core::v1::Node;
use std::collections::{BTreeMap, BTreeSet};

/// Karpenter's limit: repair stops in a NodePool with more than this share of unhealthy nodes.
pub const UNHEALTHY_THRESHOLD_PERCENT: usize = 20;

/// A node condition a repair policy matches.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Unhealthy {
    /// `Ready=False`, `AcceleratedHardwareReady=False (XID79)`, …
    pub condition: String,
    /// The condition's type (`Ready`, `AcceleratedHardwareReady`, …).
    pub condition_type: String,
    /// When the condition last changed (UTC seconds).
    pub since: i64,
    /// When the toleration runs out (UTC seconds): a candidate from then on.
    pub due_at: i64,
    /// The drain bound of the matched policy.
    pub termination_grace_seconds: Option<i64>,
}

/// A condition type as Karpenter's metric label writes it: `AcceleratedHardwareReady` →
/// `accelerated_hardware_ready`.
pub fn snake_case(condition_type: &str) -> String {
    let mut out = String::with_capacity(condition_type.len() + 4);
    for (i, c) in condition_type.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The first condition of `node` a policy matches (the one due soonest), if any. A policy that
/// names reasons matches a condition whose reason contains one; one that names none matches
/// only where no policy of its type and status names that reason.
pub fn unhealthy(node: &Node, policies: &[RepairPolicy]) -> Option<Unhealthy> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .filter_map(|c| {
            let reason = c.reason.as_deref().unwrap_or_default();
            let same =
                |p: &&RepairPolicy| p.condition_type == c.type_ && p.condition_status == c.status;
            let policy = policies
                .iter()
                .filter(same)
                .find(|p| p.reason_contains.iter().any(|r| reason.contains(r)))
                .or_else(|| {
                    policies
                        .iter()
                        .filter(same)
                        .find(|p| p.reason_contains.is_empty())
                })?;
            let since = c
                .last_transition_time
                .as_ref()
                .map_or(0, |t| t.0.as_second());
            Some(Unhealthy {
                condition_type: c.type_.clone(),
                condition: if reason.is_empty() {
                    format!("{}={}", c.type_, c.status)
                } else {
                    format!("{}={} ({reason})", c.type_, c.status)
                },
                since,
                due_at: since.saturating_add(policy.toleration_seconds),
                termination_grace_seconds: policy.termination_grace_seconds,
            })
        })
        .min_by_key(|u| u.due_at)
}

/// How a repaired NodeClaim is drained: by when (UTC seconds), and the condition repaired as
/// Karpenter's metric labels it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairDeadline {
    pub deadline: i64,
    pub condition: String,
}

/// The drain bound of a NodeClaim repaired at `now`: the matched policy's bound (10 minutes
/// when its condition has cleared meanwhile, the condition then `unknown`), or the NodeClaim's
/// own terminationGracePeriod when that is shorter.
pub fn repair_deadline(
    claim: &driftwood_api::NodeClaim,
    node: Option<&Node>,
    policies: &[RepairPolicy],
    now: i64,
) -> RepairDeadline {
    const DEFAULT_BOUND: i64 = 600;
    let matched = node.and_then(|n| unhealthy(n, policies));
    let condition = matched
        .as_ref()
        .map_or_else(|| "unknown".to_string(), |u| snake_case(&u.condition_type));
    let bound = matched
        .and_then(|u| u.termination_grace_seconds)
        .unwrap_or(DEFAULT_BOUND);
    let own = claim
        .spec
        .termination_grace_period
        .as_deref()
        .and_then(|d| driftwood_api::duration::parse_go_duration(d).ok())
        .and_then(|s| i64::try_from(s).ok());
    let bound = own.map_or(bound, |own| own.min(bound));
    RepairDeadline {
        deadline: now.saturating_add(bound),
        condition,
    }
}

/// The NodePools with more than [`UNHEALTHY_THRESHOLD_PERCENT`] of their nodes unhealthy
/// (matching a policy, due or not), with the message Karpenter's NodeRepairBlocked event gives.
pub fn over_threshold(nodes: &[NodeView]) -> BTreeMap<String, String> {
    let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for view in nodes {
        let entry = counts.entry(view.nodepool.as_str()).or_default();
        entry.0 += 1;
        entry.1 += usize::from(view.unhealthy.is_some());
    }
    counts
        .into_iter()
        .filter(|(_, (total, unhealthy))| {
            *unhealthy > (total * UNHEALTHY_THRESHOLD_PERCENT).div_ceil(100)
        })
        .map(|(pool, _)| {
            (
                pool.to_string(),
                format!(
                    "more than {UNHEALTHY_THRESHOLD_PERCENT}% of nodes in nodepool {pool:?} are unhealthy"
                ),
            )
        })
        .collect()
}

/// Whether `view` may be repaired now (its toleration passed), or why not.
pub fn check_repair(
    view: &NodeView,
    blocked_pools: &BTreeMap<String, String>,
) -> Result<(), Blocked> {
    if !view.initialized {
        return Err(Blocked::NotInitialized);
    }
    if view.deleting {
        return Err(Blocked::BeingDeleted);
    }
    if view.disrupting {
        return Err(Blocked::AlreadyDisrupting);
    }
    if view.do_not_repair {
        return Err(Blocked::DoNotRepair);
    }
    if let Some(message) = blocked_pools.get(&view.nodepool) {
        return Err(Blocked::RepairThreshold {
            message: message.clone(),
        });
    }
    Ok(())
}

/// Plans one pass of repair over the nodes whose toleration ran out by `input.now`.
pub fn plan_repair(input: PlannerInput<'_>) -> DisruptionPlan {
    let now = input.now;
    let blocked_pools = over_threshold(input.nodes);
    let due: BTreeSet<&str> = input
        .nodes
        .iter()
        .filter(|v| v.unhealthy.as_ref().is_some_and(|u| u.due_at <= now))
        .map(|v| v.nodeclaim.as_str())
        .collect();
    let method = MethodSpec {
        reason: REASON_UNHEALTHY,
        not_ready_disrupts: false,
        finding: &|view: &NodeView| {
            let u = view.unhealthy.as_ref()?;
            due.contains(view.nodeclaim.as_str()).then(|| Finding {
                since: u.since,
                reason: REASON_UNHEALTHY.to_string(),
                message: format!("{} since {}", u.condition, format_time(u.since)),
            })
        },
        check: &|view: &NodeView| check_repair(view, &blocked_pools),
        empty_first: false,
    };
    plan_method(input, &method, crate::plan::Simulation::Reduced)
}

fn format_time(seconds: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(seconds)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|_| seconds.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(conditions: serde_json::Value) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": "n"}, "status": {"conditions": conditions}}),
        )
        .unwrap()
    }

    fn condition(type_: &str, status: &str, reason: &str, at: &str) -> serde_json::Value {
        json!({"type": type_, "status": status, "reason": reason, "lastTransitionTime": at})
    }

    const POLICIES: &[RepairPolicy] = &[
        RepairPolicy {
            condition_type: "Ready",
            condition_status: "False",
            reason_contains: &[],
            toleration_seconds: 1800,
            termination_grace_seconds: Some(600),
        },
        RepairPolicy {
            condition_type: "AcceleratedHardwareReady",
            condition_status: "False",
            reason_contains: &["XID79"],
            toleration_seconds: 600,
            termination_grace_seconds: Some(300),
        },
        RepairPolicy {
            condition_type: "AcceleratedHardwareReady",
            condition_status: "False",
            reason_contains: &[],
            toleration_seconds: 1800,
            termination_grace_seconds: Some(600),
        },
    ];

    /// Karpenter's health suite: "should delete nodes that are unhealthy by the cloud
    /// provider" (a matching type and status, due after the toleration); "should not delete node
    /// when unhealthy type does not match" / "when health status does not match"; the condition
    /// due first is the one reported; a reason-specific policy wins over the fallback.
    #[test]
    fn conditions_match_policies_by_type_status_and_reason() {
        let t = "2026-01-01T00:00:00Z";
        let since = 1_767_225_600;
        let ready = unhealthy(
            &node(json!([condition("Ready", "False", "KubeletDown", t)])),
            POLICIES,
        )
        .unwrap();
        assert_eq!((ready.since, ready.due_at), (since, since + 1800));
        assert_eq!(ready.condition, "Ready=False (KubeletDown)");
        assert_eq!(snake_case(&ready.condition_type), "ready");
        assert_eq!(
            snake_case("AcceleratedHardwareReady"),
            "accelerated_hardware_ready"
        );
        assert_eq!(ready.termination_grace_seconds, Some(600));
        for other in [
            condition("Ready", "True", "", t),
            condition("Ready", "Unknown", "", t),
            condition("BadNode", "False", "", t),
        ] {
            assert_eq!(unhealthy(&node(json!([other])), POLICIES), None);
        }
        let xid = |reason: &str| {
            unhealthy(
                &node(json!([condition(
                    "AcceleratedHardwareReady",
                    "False",
                    reason,
                    t
                )])),
                POLICIES,
            )
            .unwrap()
        };
        assert_eq!(xid("NVIDIA XID79 fell off the bus").due_at, since + 600);
        assert_eq!(xid("NVIDIA XID31").due_at, since + 1800, "the fallback");
        let both = unhealthy(
            &node(json!([
                condition("Ready", "False", "", t),
                condition("AcceleratedHardwareReady", "False", "XID79", t),
            ])),
            POLICIES,
        )
        .unwrap();
        assert_eq!(both.due_at, since + 600, "the one due first");
    }

    /// The drain bound is the policy's, or the NodeClaim's own terminationGracePeriod when
    /// shorter; with the condition cleared meanwhile, 10 minutes and `unknown`.
    #[test]
    fn a_repaired_node_drains_within_the_shorter_of_the_two_bounds() {
        let claim = |tgp: Option<&str>| {
            let mut spec = json!({"nodeClassRef": {"group": "g", "kind": "k", "name": "c"}, "requirements": []});
            if let Some(tgp) = tgp {
                spec["terminationGracePeriod"] = json!(tgp);
            }
            serde_json::from_value::<driftwood_api::NodeClaim>(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": "c"}, "spec": spec
            }))
            .unwrap()
        };
        let sick = node(json!([condition(
            "AcceleratedHardwareReady",
            "False",
            "XID79",
            "2026-01-01T00:00:00Z"
        )]));
        let now = 2_000_000_000;
        let r = repair_deadline(&claim(None), Some(&sick), POLICIES, now);
        assert_eq!(r.deadline, now + 300);
        assert_eq!(r.condition, "accelerated_hardware_ready");
        let r = repair_deadline(&claim(Some("1m")), Some(&sick), POLICIES, now);
        assert_eq!(r.deadline, now + 60);
        let r = repair_deadline(&claim(Some("1h")), None, POLICIES, now);
        assert_eq!((r.deadline, r.condition.as_str()), (now + 600, "unknown"));
    }

    fn view(pool: &str, sick: bool) -> NodeView {
        NodeView {
            nodepool: pool.into(),
            unhealthy: sick.then(Unhealthy::default),
            ..Default::default()
        }
    }

    /// "should ignore unhealthy nodes if more then 20% of the nodes are unhealthy in a
    /// nodepool" (3 of 10); "should consider round up when there is a low number of nodes for a
    /// nodepool" (1 of 3 is repaired: 20% of 3 rounds up to 1).
    #[test]
    fn more_than_a_fifth_unhealthy_stops_repair_in_the_pool() {
        let mut nodes: Vec<NodeView> = (0..10).map(|i| view("big", i < 3)).collect();
        nodes.extend((0..3).map(|i| view("small", i < 1)));
        nodes.extend((0..10).map(|i| view("fine", i < 2)));
        let blocked = over_threshold(&nodes);
        assert_eq!(blocked.keys().collect::<Vec<_>>(), ["big"]);
        assert_eq!(
            blocked["big"],
            "more than 20% of nodes in nodepool \"big\" are unhealthy"
        );
    }
}
