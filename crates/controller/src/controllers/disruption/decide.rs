//! What the disruption loop decides from the cache alone: where each command in flight
//! stands (wait, terminate the candidate, roll back and why) and the signature of what frees
//! or uses budget.

use crate::state::Snapshot;
use driftwood_api::condition::Conditions;
use driftwood_api::lookup::ObjectLookups;
use driftwood_api::wellknown::{
    ANNOTATION_DISRUPTION_REPLACEMENT_FOR, CONDITION_DISRUPTION_REASON, CONDITION_INITIALIZED,
};
use driftwood_disruption::command::{InFlight, Progress, RollbackReason};

/// What the disruption loop's next decision depends on, counted from the cache: NodeClaims,
/// those being deleted, those being disrupted, those Initialized, those Drifted and those
/// Consolidatable, and the NodePools whose rollout is paused. When it changes (a candidate
/// finished terminating and freed budget, a replacement initialized, a node drifted or became
/// consolidatable, a rollout paused or resumed) the loop runs a pass at once instead of waiting
/// out its period.
pub fn budget_signature(snapshot: &Snapshot) -> [usize; 7] {
    let mut signature = [0; 7];
    signature[5] = snapshot
        .store
        .nodepools
        .values()
        .filter(|p| p.rollout_paused())
        .count();
    for claim in snapshot.store.nodeclaims.values() {
        signature[0] += 1;
        signature[1] += usize::from(claim.metadata.deletion_timestamp.is_some());
        signature[2] += usize::from(claim.condition(CONDITION_DISRUPTION_REASON).is_some());
        signature[3] += usize::from(claim.is_true(CONDITION_INITIALIZED));
        signature[4] += usize::from(claim.is_true(driftwood_api::wellknown::CONDITION_DRIFTED));
        signature[6] +=
            usize::from(claim.is_true(driftwood_api::wellknown::CONDITION_CONSOLIDATABLE));
    }
    signature
}

/// Karpenter's disruption polling period: the consolidation methods run no more often than
/// this while nothing starts (its disruption controller requeues after 10 s, at once only
/// after a command). While a fleet comes up, nodes initialize every second and each wakes the
/// pass for drift's budgets: consolidating on each of them searched the whole fleet a second
/// (21% of a 2,000-node bring-up, profiled).
pub const CONSOLIDATION_POLL_SECONDS: i64 = 10;

/// Until when a pass at `now` leaves the consolidation methods out, if it does: they last ran
/// through without starting anything at `ran_at`, less than a polling period ago, and some node
/// is consolidatable (with none, there is nothing to wait for).
pub fn consolidation_waits_until(
    ran_at: Option<i64>,
    any_consolidatable: bool,
    now: i64,
) -> Option<i64> {
    ran_at
        .map(|at| at + CONSOLIDATION_POLL_SECONDS)
        .filter(|due| any_consolidatable && now < *due)
}

/// What the consolidation methods' outcome depends on, as one number: every managed node's
/// Consolidatable, disrupting, deleting and initialized state and its pods, the pods waiting
/// for capacity, the NodePools' generations and the PDBs' allowances. While it stays the same
/// (heartbeats and status writes elsewhere do not move it), a cluster found consolidated is
/// not searched again.
pub fn consolidation_signature(
    snapshot: &Snapshot,
    views: &[driftwood_disruption::candidate::NodeView],
) -> u64 {
    let mut text = String::new();
    for v in views {
        text.push_str(&format!(
            "{}|{}|{}{}{}{}|",
            v.nodeclaim,
            v.node.as_deref().unwrap_or_default(),
            u8::from(v.consolidatable),
            u8::from(v.disrupting),
            u8::from(v.deleting),
            u8::from(v.initialized)
        ));
        for p in &v.pods {
            text.push_str(&format!("{}{},", p.key, u8::from(p.reschedulable)));
        }
        text.push('\n');
    }
    for key in crate::controllers::provisioner::provisionable(snapshot) {
        text.push_str(&format!("pending {key}\n"));
    }
    for (name, pool) in &snapshot.store.nodepools {
        text.push_str(&format!("pool {name} {:?}\n", pool.metadata.generation));
    }
    for (pdb, allowed) in driftwood_disruption::views::pdb_allowed(&snapshot.pdb_list()) {
        text.push_str(&format!("pdb {pdb} {allowed}\n"));
    }
    driftwood_api::hash::fnv1a64(text.as_bytes())
}

/// The next step of one command in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InFlightAction {
    /// Every replacement initialized: delete the candidate, disrupted for `reason` (Drifted,
    /// Empty, Underutilized: its DisruptionReason).
    Terminate {
        nodeclaim: String,
        nodepool: String,
        reason: String,
    },
    /// Undo the command: untaint `node`, clear the mark, delete the replacements listed.
    RollBack {
        nodeclaim: String,
        node: Option<String>,
        delete_replacements: Vec<String>,
        why: RollbackReason,
        /// The candidate's disruption reason (Drifted, Underutilized, ...).
        reason: String,
        /// The command's replacements that did not initialize, when a replacement failed (not
        /// for an unrecorded command).
        failed_replacements: Vec<String>,
    },
    /// Replacements are launching or initializing.
    Wait {
        nodeclaim: String,
        replacements: Vec<String>,
    },
}

/// Replacements whose command is gone — their candidate was deleted or lost its command
/// without them (its instance terminated from outside, say) — that have not initialized within
/// the replacement timeout of their creation. Nothing would ever roll them back: a registered
/// node that never becomes Ready stays for ever, and the provisioner keeps counting it as
/// capacity for the pods it was meant for (found by `driftwood chaos`, fleet-50-nodes seed 2).
pub fn orphaned_replacements(snapshot: &Snapshot, now: i64, timeout_seconds: i64) -> Vec<String> {
    let mut out = Vec::new();
    for (name, claim) in &snapshot.store.nodeclaims {
        if claim.metadata.deletion_timestamp.is_some() || claim.is_true(CONDITION_INITIALIZED) {
            continue;
        }
        let Some(candidates) = claim.annotation(ANNOTATION_DISRUPTION_REPLACEMENT_FOR) else {
            continue;
        };
        // One replacement may stand in for several candidates (multi-node consolidation).
        let commanded = candidates.split(',').any(|candidate| {
            snapshot
                .store
                .nodeclaims
                .get(candidate)
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .and_then(|c| InFlight::read(c))
                .is_some_and(|command| command.replacements.iter().any(|r| r == name))
        });
        if commanded {
            continue;
        }
        let age = claim
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| now - t.0.as_second());
        if age > timeout_seconds {
            out.push(name.clone());
        }
    }
    out
}

/// How commands in flight are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlightRules {
    /// Replacements not initialized this long after the command started roll it back.
    pub timeout_seconds: i64,
    /// Test-only (`Settings::unsafe_skip_replacement_wait`): a command still waiting for its
    /// replacements terminates its candidate at once, breaking replacement-first on purpose so
    /// that chaos runs can show the violation is caught.
    pub unsafe_skip_replacement_wait: bool,
}

/// Whether the reason a candidate was chosen for still holds in `snapshot` (the cache as it
/// is now, after a plan that may have taken long): still Drifted, or its node still matching a
/// repair `policy`, and not being deleted. A drift that cleared while the plan was computed (a
/// class edited back, a security group fixed) must not replace the node: that would be a false
/// drift.
pub fn still_holds(
    snapshot: &Snapshot,
    nodeclaim: &str,
    reason: &str,
    policies: &[driftwood_api::repair::RepairPolicy],
) -> bool {
    let Some(claim) = snapshot.store.nodeclaims.get(nodeclaim) else {
        return false;
    };
    if claim.metadata.deletion_timestamp.is_some() {
        return false;
    }
    match reason {
        driftwood_api::wellknown::REASON_DRIFTED => {
            claim.is_true(driftwood_api::wellknown::CONDITION_DRIFTED)
        }
        driftwood_api::wellknown::REASON_UNHEALTHY => snapshot
            .node_of(claim)
            .is_some_and(|node| driftwood_disruption::repair::unhealthy(node, policies).is_some()),
        _ => true,
    }
}

/// Where every command in flight stands: one action per candidate NodeClaim that carries a
/// command and is not already being deleted.
pub fn in_flight(snapshot: &Snapshot, now: i64, rules: InFlightRules) -> Vec<InFlightAction> {
    let lookup = |name: &str| snapshot.store.nodeclaims.get(name).map(|c| c.as_ref());
    let mut actions = Vec::new();
    for (name, claim) in &snapshot.store.nodeclaims {
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(command) = InFlight::read(claim) else {
            continue;
        };
        let progress = match command.progress(lookup, now, rules.timeout_seconds) {
            Progress::Wait if rules.unsafe_skip_replacement_wait => Progress::Terminate,
            other => other,
        };
        let reason = claim
            .condition(CONDITION_DISRUPTION_REASON)
            .and_then(|c| c.reason.clone())
            .unwrap_or_else(|| driftwood_api::wellknown::REASON_DRIFTED.to_string());
        actions.push(match progress {
            Progress::Terminate => InFlightAction::Terminate {
                nodeclaim: name.clone(),
                nodepool: claim.nodepool_name().unwrap_or_default().to_string(),
                reason,
            },
            Progress::RollBack(why) => InFlightAction::RollBack {
                nodeclaim: name.clone(),
                node: snapshot
                    .node_of(claim)
                    .and_then(|n| n.metadata.name.clone()),
                delete_replacements: command.replacements_to_delete(lookup),
                failed_replacements: if why.replacement_failed() {
                    command.uninitialized_replacements(lookup)
                } else {
                    Vec::new()
                },
                why,
                reason,
            },
            Progress::Wait => InFlightAction::Wait {
                nodeclaim: name.clone(),
                replacements: command.replacements,
            },
        });
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Store;
    use driftwood_api::NodeClaim;
    use driftwood_api::wellknown::{
        ANNOTATION_DISRUPTION_REPLACEMENTS, ANNOTATION_DISRUPTION_STARTED,
    };
    use serde_json::json;

    /// Karpenter's disruption controller runs the consolidation methods once per 10 s polling
    /// period (`pollingPeriod`), again at once only after a command started.
    #[test]
    fn consolidation_waits_out_the_polling_period_after_running_through() {
        // Never ran (or a command just started): at once.
        assert_eq!(consolidation_waits_until(None, true, 1_000), None);
        // Ran 3 s ago: until 10 s after it.
        assert_eq!(
            consolidation_waits_until(Some(997), true, 1_000),
            Some(1_007)
        );
        assert_eq!(
            consolidation_waits_until(Some(991), true, 1_000),
            Some(1_001)
        );
        // A whole period ago: due.
        assert_eq!(consolidation_waits_until(Some(990), true, 1_000), None);
        // Nothing consolidatable: nothing to wait for.
        assert_eq!(consolidation_waits_until(Some(997), false, 1_000), None);
    }
    use std::sync::Arc;

    fn claim(name: &str, deleting: bool, conditions: serde_json::Value) -> Arc<NodeClaim> {
        let mut meta = json!({"name": name, "labels": {"karpenter.sh/nodepool": "default"}});
        if deleting {
            meta["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta,
                "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
                "status": {"conditions": conditions}
            }))
            .unwrap(),
        )
    }

    fn condition(type_: &str) -> serde_json::Value {
        json!({"type": type_, "status": "True", "reason": type_, "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"})
    }

    /// A drift that cleared while the plan was computed stops its command; one that holds
    /// does not; a NodeClaim gone or being deleted is not started either.
    #[test]
    fn a_candidate_whose_drift_cleared_during_planning_is_not_started() {
        let mut store = Store::default();
        store.nodeclaims.insert(
            "drifted".into(),
            claim("drifted", false, json!([condition("Drifted")])),
        );
        store
            .nodeclaims
            .insert("cleared".into(), claim("cleared", false, json!([])));
        store.nodeclaims.insert(
            "deleting".into(),
            claim("deleting", true, json!([condition("Drifted")])),
        );
        let snapshot = Snapshot::new(store);
        assert!(still_holds(&snapshot, "drifted", "Drifted", &[]));
        assert!(!still_holds(&snapshot, "cleared", "Drifted", &[]));
        assert!(!still_holds(&snapshot, "deleting", "Drifted", &[]));
        assert!(!still_holds(&snapshot, "gone", "Drifted", &[]));
        assert!(
            !still_holds(&snapshot, "drifted", "Unhealthy", &[]),
            "no node, so nothing unhealthy"
        );
    }

    #[test]
    fn the_budget_signature_moves_with_what_frees_or_uses_budget() {
        let mut store = Store::default();
        store.nodeclaims.insert(
            "a".into(),
            claim("a", false, json!([condition(CONDITION_INITIALIZED)])),
        );
        let before = budget_signature(&Snapshot::new(store.clone()));
        assert_eq!(before, [1, 0, 0, 1, 0, 0, 0]);
        // A pod or node change elsewhere does not move it; a drifted NodeClaim does.
        store.nodeclaims.insert(
            "a".into(),
            claim(
                "a",
                false,
                json!([condition(CONDITION_INITIALIZED), condition("Drifted")]),
            ),
        );
        assert_eq!(
            budget_signature(&Snapshot::new(store.clone())),
            [1, 0, 0, 1, 1, 0, 0]
        );
        // So does one becoming Consolidatable.
        store.nodeclaims.insert(
            "a".into(),
            claim(
                "a",
                false,
                json!([
                    condition(CONDITION_INITIALIZED),
                    condition("Drifted"),
                    condition("Consolidatable")
                ]),
            ),
        );
        assert_eq!(
            budget_signature(&Snapshot::new(store.clone())),
            [1, 0, 0, 1, 1, 0, 1]
        );
        // A candidate being disrupted, then deleted, then gone: each frees or uses budget.
        store.nodeclaims.insert(
            "a".into(),
            claim("a", true, json!([condition(CONDITION_DISRUPTION_REASON)])),
        );
        assert_eq!(
            budget_signature(&Snapshot::new(store.clone())),
            [1, 1, 1, 0, 0, 0, 0]
        );
        store.nodeclaims.remove("a");
        assert_eq!(budget_signature(&Snapshot::new(store.clone())), [0; 7]);
        // A rollout paused, and resumed.
        let pool = |annotations: serde_json::Value| -> std::sync::Arc<driftwood_api::NodePool> {
            std::sync::Arc::new(
                serde_json::from_value(json!({
                    "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                    "metadata": {"name": "general", "annotations": annotations},
                    "spec": {"template": {"spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []}}}
                }))
                .expect("nodepool"),
            )
        };
        store.nodepools.insert(
            "general".into(),
            pool(json!({"driftwood.sh/rollout-paused": "true"})),
        );
        assert_eq!(
            budget_signature(&Snapshot::new(store.clone())),
            [0, 0, 0, 0, 0, 1, 0]
        );
        store.nodepools.insert("general".into(), pool(json!({})));
        assert_eq!(budget_signature(&Snapshot::new(store)), [0; 7]);
    }

    /// A candidate marked for disruption whose command (started at T0) lists `replacements`.
    fn candidate(name: &str, deleting: bool, replacements: &str) -> Arc<NodeClaim> {
        let marked = claim(
            name,
            deleting,
            json!([condition(CONDITION_DISRUPTION_REASON)]),
        );
        with_command(&marked, replacements, "2024-01-01T00:00:00Z")
    }

    fn with_command(claim: &NodeClaim, replacements: &str, started: &str) -> Arc<NodeClaim> {
        let mut claim = claim.clone();
        let annotations = claim
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        annotations.insert(
            ANNOTATION_DISRUPTION_REPLACEMENTS.into(),
            replacements.into(),
        );
        annotations.insert(ANNOTATION_DISRUPTION_STARTED.into(), started.into());
        Arc::new(claim)
    }

    const T0: i64 = 1_704_067_200; // 2024-01-01T00:00:00Z
    const RULES: InFlightRules = InFlightRules {
        timeout_seconds: 600,
        unsafe_skip_replacement_wait: false,
    };

    fn replacement_of(name: &str, candidate: &str, initialized: bool) -> Arc<NodeClaim> {
        let conditions = if initialized {
            json!([condition(CONDITION_INITIALIZED)])
        } else {
            json!([])
        };
        let mut c = (*claim(name, false, conditions)).clone();
        c.metadata.creation_timestamp = serde_json::from_value(json!("2024-01-01T00:00:00Z")).ok();
        c.metadata.annotations = Some(
            [(
                ANNOTATION_DISRUPTION_REPLACEMENT_FOR.to_string(),
                candidate.to_string(),
            )]
            .into(),
        );
        Arc::new(c)
    }

    /// A replacement whose candidate vanished is deleted once it is older than the replacement
    /// timeout without initializing; one its command still waits for, or one that initialized,
    /// is left alone.
    #[test]
    fn replacements_whose_command_is_gone_are_collected_after_the_timeout() {
        let mut store = Store::default();
        store
            .nodeclaims
            .insert("orphan".into(), replacement_of("orphan", "vanished", false));
        store
            .nodeclaims
            .insert("kept".into(), replacement_of("kept", "vanished", true));
        store
            .nodeclaims
            .insert("old".into(), candidate("old", false, "waited"));
        store
            .nodeclaims
            .insert("waited".into(), replacement_of("waited", "old", false));
        let snapshot = Snapshot::new(store);
        assert!(orphaned_replacements(&snapshot, T0 + 600, 600).is_empty());
        assert_eq!(
            orphaned_replacements(&snapshot, T0 + 601, 600),
            vec!["orphan".to_string()]
        );
    }

    /// Karpenter orchestration queue: wait while a replacement launches, terminate the
    /// candidate once it initialized; a candidate already being deleted is not looked at.
    #[test]
    fn commands_in_flight_wait_then_terminate() {
        let mut store = Store::default();
        store
            .nodeclaims
            .insert("old".into(), candidate("old", false, "new"));
        store
            .nodeclaims
            .insert("new".into(), claim("new", false, json!([])));
        store
            .nodeclaims
            .insert("gone".into(), candidate("gone", true, ""));
        let snapshot = Snapshot::new(store.clone());
        assert_eq!(
            in_flight(&snapshot, T0 + 10, RULES),
            vec![InFlightAction::Wait {
                nodeclaim: "old".into(),
                replacements: vec!["new".into()]
            }]
        );
        // The test-only switch that breaks replacement-first terminates at once instead.
        let unsafe_rules = InFlightRules {
            unsafe_skip_replacement_wait: true,
            ..RULES
        };
        assert_eq!(
            in_flight(&snapshot, T0 + 10, unsafe_rules),
            vec![InFlightAction::Terminate {
                nodeclaim: "old".into(),
                nodepool: "default".into(),
                reason: CONDITION_DISRUPTION_REASON.into(),
            }]
        );
        store.nodeclaims.insert(
            "new".into(),
            claim("new", false, json!([condition(CONDITION_INITIALIZED)])),
        );
        assert_eq!(
            in_flight(&Snapshot::new(store), T0 + 11, RULES),
            vec![InFlightAction::Terminate {
                nodeclaim: "old".into(),
                nodepool: "default".into(),
                reason: CONDITION_DISRUPTION_REASON.into(),
            }]
        );
    }

    /// Karpenter orchestration queue "should not terminate the candidate if the replacement
    /// fails to initialize": after the timeout the command rolls back, deleting the replacement
    /// that never initialized.
    #[test]
    fn a_timed_out_command_rolls_back_and_deletes_what_never_initialized() {
        let mut store = Store::default();
        store
            .nodeclaims
            .insert("old".into(), candidate("old", false, "new,ready"));
        store
            .nodeclaims
            .insert("new".into(), claim("new", false, json!([])));
        store.nodeclaims.insert(
            "ready".into(),
            claim("ready", false, json!([condition(CONDITION_INITIALIZED)])),
        );
        let actions = in_flight(&Snapshot::new(store), T0 + 601, RULES);
        assert_eq!(
            actions,
            vec![InFlightAction::RollBack {
                nodeclaim: "old".into(),
                node: None,
                delete_replacements: vec!["new".into()],
                why: RollbackReason::NotInitializedInTime,
                reason: CONDITION_DISRUPTION_REASON.into(),
                failed_replacements: vec!["new".into()],
            }]
        );
    }
}
