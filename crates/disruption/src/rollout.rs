//! Where a NodePool's rollout stands, from the planner's views of its nodes and what held them
//! this pass: the counts of `status.rollout` and the `RolloutComplete` condition with a message
//! naming what the rollout waits for.

use crate::candidate::{Blocked, NodeView};
use crate::policy::PolicyHold;
use driftwood_api::RolloutStatus;
use driftwood_api::nodepool::NodePool;
use driftwood_api::nodepool::RolloutPolicyStatus;

/// The `RolloutComplete` condition's reasons.
pub const REASON_COMPLETE: &str = "Complete";
pub const REASON_PROGRESSING: &str = "Progressing";
pub const REASON_PAUSED: &str = "Paused";
pub const REASON_BLOCKED: &str = "Blocked";
pub const REASON_BACKING_OFF: &str = "BackingOff";

/// One NodePool's rollout: its status and the `RolloutComplete` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolRollout {
    pub status: RolloutStatus,
    /// The condition is True: every node up to date, nothing disrupting.
    pub complete: bool,
    pub reason: &'static str,
    pub message: String,
}

/// The rollout of `pool` over `nodes` (every managed node; those of other pools are skipped),
/// given why drifted nodes were held this pass (`blocked`, by NodeClaim name, as the planner
/// returns it; a budget that is merely full holds none, see [`Blocked::holds_the_rollout`]).
pub fn pool_rollout(
    pool: &NodePool,
    nodes: &[NodeView],
    blocked: &[(String, Blocked)],
) -> PoolRollout {
    let name = pool.metadata.name.as_deref().unwrap_or_default();
    let mut status = RolloutStatus {
        observed_generation: pool.metadata.generation,
        paused: pool.rollout_paused(),
        ..RolloutStatus::default()
    };
    let mut holding: Vec<(&str, &Blocked)> = Vec::new();
    let mut budget_full: Option<&Blocked> = None;
    for view in nodes.iter().filter(|v| v.nodepool == name) {
        // An up-to-date node being consolidated away is no part of the rollout.
        let consolidating = view.drift.is_none()
            && !view.deleting
            && view
                .disruption_reason
                .as_deref()
                .is_some_and(|r| r != driftwood_api::wellknown::REASON_DRIFTED);
        if consolidating {
            status.up_to_date += 1;
        } else if view.disrupting || view.deleting {
            status.disrupting += 1;
        } else if view.drift.is_some() {
            status.drifted += 1;
            // The planner lists a node at most once; its list is sorted by name.
            let why = blocked
                .binary_search_by(|(n, _)| n.as_str().cmp(&view.nodeclaim))
                .ok()
                .map(|i| &blocked[i].1);
            match why {
                Some(why) if why.holds_the_rollout() => {
                    status.blocked += 1;
                    holding.push((&view.nodeclaim, why));
                }
                Some(why @ Blocked::Budget { .. }) => budget_full = budget_full.or(Some(why)),
                _ => {}
            }
        } else {
            status.up_to_date += 1;
        }
    }
    let total = status.up_to_date + status.drifted + status.disrupting;
    let counts = counts(&status);
    let (complete, reason, message) = if status.drifted == 0 && status.disrupting == 0 {
        (
            true,
            REASON_COMPLETE,
            format!("{total} of {total} nodes up to date"),
        )
    } else if status.paused && status.disrupting == 0 {
        (
            false,
            REASON_PAUSED,
            format!("{counts}; paused (annotation \"driftwood.sh/rollout-paused\")"),
        )
    } else if status.disrupting == 0 && status.blocked > 0 && status.blocked == status.drifted {
        let (first, why) = holding[0];
        let more = match holding.len() - 1 {
            0 => String::new(),
            n => format!(" (and {n} more)"),
        };
        (
            false,
            REASON_BLOCKED,
            format!("{counts}; every drifted node is blocked: {first}: {why}{more}"),
        )
    } else {
        let mut message = counts;
        if status.paused {
            message.push_str("; paused: the commands in flight finish, no new one starts");
        } else if let Some((first, why)) = holding.first() {
            message.push_str(&format!(
                "; {} blocked, first {first}: {why}",
                status.blocked
            ));
        } else if status.disrupting == 0
            && let Some(Blocked::Budget { detail, .. }) = budget_full
        {
            message.push_str(&format!("; waiting for the disruption budget: {detail}"));
        }
        (false, REASON_PROGRESSING, message)
    };
    PoolRollout {
        status,
        complete,
        reason,
        message,
    }
}

/// `rollout` with its pool's backoff after failed replacements: shown in `status.rollout`, and
/// while it holds the drifted nodes (and nothing more pressing is said), the condition's reason
/// `BackingOff` and why.
pub fn with_backoff(
    mut rollout: PoolRollout,
    backoff: Option<driftwood_api::nodepool::RolloutBackoff>,
    now: i64,
) -> PoolRollout {
    let holding = backoff
        .as_ref()
        .and_then(|b| crate::backoff::holding(b, now).map(|until| (b, until)));
    if let Some((backoff, until)) = holding
        && !rollout.complete
        && rollout.reason == REASON_PROGRESSING
        && rollout.status.drifted > 0
    {
        rollout.reason = REASON_BACKING_OFF;
        rollout.message = format!(
            "{}; {}",
            rollout.message,
            crate::backoff::detail(backoff, until)
        );
    }
    rollout.status.backoff = backoff;
    rollout
}

/// `rollout` with its pool's rollout policy: the progress to show in `status.rollout.policy`,
/// and, while the policy holds the drifted nodes (and the rollout is not paused or complete),
/// the hold as the condition's reason and the end of its message.
pub fn with_policy(
    mut rollout: PoolRollout,
    progress: Option<RolloutPolicyStatus>,
    hold: Option<&PolicyHold>,
) -> PoolRollout {
    let at_risk = progress.as_ref().is_some_and(|p| p.deadline_at_risk);
    rollout.status.policy = progress;
    if let Some(hold) = hold
        && !rollout.complete
        && !rollout.status.paused
        && rollout.status.drifted > 0
    {
        rollout.reason = hold.reason();
        rollout.message = format!("{}; {hold}", counts(&rollout.status));
    }
    if at_risk && !rollout.complete {
        rollout
            .message
            .push_str("; the deadline is at risk (event RolloutDeadlineAtRisk)");
    }
    rollout
}

/// `next` as written over `current` (the object a status write modifies): a halt decided in an
/// earlier pass that `current` no longer shows was cleared by `driftwood rollout resume`
/// meanwhile, so it is left out (with its soak's start); one decided this pass (`halted_now`)
/// stays.
pub fn without_cleared_halt(
    mut next: RolloutStatus,
    current: Option<&RolloutStatus>,
    halted_now: bool,
) -> RolloutStatus {
    let cleared = current
        .and_then(|r| r.policy.as_ref())
        .is_some_and(|p| p.halted.is_none());
    if cleared
        && !halted_now
        && let Some(policy) = next.policy.as_mut()
        && policy.halted.is_some()
    {
        policy.halted = None;
        policy.soak_started_at = None;
    }
    next
}

/// The counts a `RolloutComplete` message begins with.
fn counts(status: &RolloutStatus) -> String {
    format!(
        "{} of {} nodes up to date, {} drifted, {} disrupting",
        status.up_to_date,
        status.up_to_date + status.drifted + status.disrupting,
        status.drifted,
        status.disrupting
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drift::DriftFinding;
    use serde_json::json;

    #[test]
    fn a_halt_cleared_by_resume_is_not_written_back_unless_decided_now() {
        let halted = RolloutStatus {
            policy: Some(RolloutPolicyStatus {
                soak_started_at: Some("2026-07-20T09:00:00Z".into()),
                halted: Some(driftwood_api::nodepool::RolloutHalt {
                    gate: "Restarts".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..RolloutStatus::default()
        };
        let resumed = RolloutStatus {
            policy: Some(RolloutPolicyStatus::default()),
            ..RolloutStatus::default()
        };
        let written = without_cleared_halt(halted.clone(), Some(&resumed), false);
        let policy = written.policy.unwrap();
        assert_eq!((policy.halted, policy.soak_started_at), (None, None));
        // Decided this pass, or still shown: written as decided.
        assert_eq!(
            without_cleared_halt(halted.clone(), Some(&resumed), true),
            halted
        );
        assert_eq!(
            without_cleared_halt(halted.clone(), Some(&halted), false),
            halted
        );
        assert_eq!(without_cleared_halt(halted.clone(), None, false), halted);
    }

    fn pool(annotations: serde_json::Value) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "general", "generation": 4, "annotations": annotations},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}
        }))
        .expect("nodepool")
    }

    fn node(name: &str, drifted: bool, disrupting: bool) -> NodeView {
        NodeView {
            nodeclaim: name.to_string(),
            nodepool: "general".to_string(),
            initialized: true,
            ready: true,
            disrupting,
            drift: drifted.then(|| {
                (
                    0,
                    DriftFinding {
                        reason: "AMIDrift".to_string(),
                        message: String::new(),
                    },
                )
            }),
            ..NodeView::default()
        }
    }

    fn pdb_blocked(name: &str) -> (String, Blocked) {
        (
            name.to_string(),
            Blocked::PdbAtZero {
                pod: "default/web-1".to_string(),
                pdb: "default/web".to_string(),
            },
        )
    }

    #[test]
    fn every_node_up_to_date_is_complete() {
        let other = NodeView {
            nodepool: "other".to_string(),
            ..node("x", true, false)
        };
        let r = pool_rollout(
            &pool(json!({})),
            &[node("a", false, false), node("b", false, false), other],
            &[],
        );
        assert!(r.complete);
        assert_eq!(r.reason, REASON_COMPLETE);
        assert_eq!(r.message, "2 of 2 nodes up to date");
        assert_eq!(
            r.status,
            RolloutStatus {
                observed_generation: Some(4),
                up_to_date: 2,
                ..RolloutStatus::default()
            }
        );
    }

    /// Consolidation is not the rollout: an up-to-date node consolidated away leaves the
    /// rollout complete; a drifted node consolidated away is rollout progress.
    #[test]
    fn a_consolidation_in_flight_is_no_rollout() {
        let consolidating = NodeView {
            disruption_reason: Some("Underutilized".to_string()),
            ..node("c", false, true)
        };
        let r = pool_rollout(
            &pool(json!({})),
            &[node("a", false, false), consolidating],
            &[],
        );
        assert!(r.complete, "{}", r.message);
        assert_eq!(r.status.up_to_date, 2);
        let drifted = NodeView {
            disruption_reason: Some("Underutilized".to_string()),
            ..node("d", true, true)
        };
        let r = pool_rollout(&pool(json!({})), &[node("a", false, false), drifted], &[]);
        assert!(!r.complete);
        assert_eq!(r.status.disrupting, 1);
    }

    #[test]
    fn each_node_counts_once_and_a_full_budget_blocks_none() {
        let nodes = [
            node("a", false, false),
            node("b", true, true),
            node("c", true, false),
            node("d", true, false),
        ];
        let blocked = vec![
            (
                "c".to_string(),
                Blocked::Budget {
                    reason: "Drifted",
                    nodepool: "general".to_string(),
                    detail: "1 of 1 in use".to_string(),
                },
            ),
            pdb_blocked("d"),
        ];
        let r = pool_rollout(&pool(json!({})), &nodes, &blocked);
        assert!(!r.complete);
        assert_eq!(r.reason, REASON_PROGRESSING);
        assert_eq!(
            (
                r.status.up_to_date,
                r.status.drifted,
                r.status.disrupting,
                r.status.blocked
            ),
            (1, 2, 1, 1)
        );
        assert!(r.message.starts_with("1 of 4 nodes up to date, 2 drifted, 1 disrupting; 1 blocked, first d: Cannot disrupt NodeClaim: pdb"), "{}", r.message);
    }

    #[test]
    fn a_rollout_held_only_by_blockers_says_blocked_and_names_the_first() {
        let nodes = [node("a", true, false), node("b", true, false)];
        let r = pool_rollout(
            &pool(json!({})),
            &nodes,
            &[pdb_blocked("a"), pdb_blocked("b")],
        );
        assert_eq!(r.reason, REASON_BLOCKED);
        assert!(
            r.message.contains(
                "every drifted node is blocked: a: Cannot disrupt NodeClaim: pdb \"default/web\""
            ),
            "{}",
            r.message
        );
        assert!(r.message.ends_with("(and 1 more)"), "{}", r.message);
    }

    #[test]
    fn a_paused_pool_says_paused_once_its_commands_in_flight_are_done() {
        let paused = pool(json!({"driftwood.sh/rollout-paused": "true"}));
        let held = |n: &str| {
            (
                n.to_string(),
                Blocked::Paused {
                    nodepool: "general".to_string(),
                },
            )
        };
        let r = pool_rollout(
            &paused,
            &[node("a", true, true), node("b", true, false)],
            &[held("b")],
        );
        assert_eq!(r.reason, REASON_PROGRESSING);
        assert!(
            r.message
                .ends_with("paused: the commands in flight finish, no new one starts"),
            "{}",
            r.message
        );
        assert!(r.status.paused);
        let r = pool_rollout(
            &paused,
            &[node("a", false, false), node("b", true, false)],
            &[held("b")],
        );
        assert_eq!(r.reason, REASON_PAUSED);
        assert_eq!(r.status.blocked, 1);
        // Any value but "true" is not paused.
        assert!(!pool(json!({"driftwood.sh/rollout-paused": "false"})).rollout_paused());
    }

    #[test]
    fn a_full_budget_with_nothing_in_flight_names_the_budget() {
        let blocked = vec![(
            "a".to_string(),
            Blocked::Budget {
                reason: "Drifted",
                nodepool: "general".to_string(),
                detail: "0 allowed (schedule \"0 2 * * *\" for 4h not active)".to_string(),
            },
        )];
        let r = pool_rollout(&pool(json!({})), &[node("a", true, false)], &blocked);
        assert_eq!(r.reason, REASON_PROGRESSING);
        assert!(r.message.ends_with("waiting for the disruption budget: 0 allowed (schedule \"0 2 * * *\" for 4h not active)"), "{}", r.message);
        assert_eq!(r.status.blocked, 0);
    }
}
