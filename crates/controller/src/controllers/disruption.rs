//! The disruption loop (drift): each pass advances the commands in flight — delete a candidate
//! once all its replacements are Initialized, roll back after the timeout — then plans new
//! commands filling every NodePool's budget and executes them: record the command on the
//! candidate NodeClaim (replacement names, start time, DisruptionReason), taint its node,
//! create the replacements. Everything needed to resume is on the API objects.

use super::Outcome;
use crate::api::{
    add_taint, clear_claim_condition, delete, disrupted_taint, is_conflict, modify, modify_status,
    nodeclaims, nodes, remove_taint, set_claim_condition,
};
use crate::context::Context;
use crate::controllers::provisioner::provisionable;
use crate::events::EventType;
use crate::metrics::Metrics;
use crate::nodeclaim_template::build_nodeclaim;
use crate::simulation::simulation_input;
use crate::state::Snapshot;
use driftwood_api::NodeClaim;
use driftwood_api::condition::{Conditions, STATUS_TRUE};
use driftwood_api::wellknown::{
    CONDITION_DISRUPTION_REASON, CONDITION_INITIALIZED, REASON_DRIFTED, TAINT_DISRUPTED_KEY,
};
use driftwood_disruption::plan::{Command, Decision, PlannerInput, plan_drift};
use driftwood_disruption::views::{node_view, pdb_allowed};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::PostParams;
use std::collections::BTreeMap;
use std::time::Duration;

use driftwood_api::wellknown::{
    ANNOTATION_DISRUPTION_REPLACEMENTS as ANNOTATION_REPLACEMENTS,
    ANNOTATION_DISRUPTION_STARTED as ANNOTATION_STARTED,
};
/// How long a replacement may take to become visible before it counts as missing.
const VISIBILITY_GRACE_SECONDS: i64 = 60;

/// What the disruption loop's next decision depends on, counted from the cache: NodeClaims,
/// those being deleted, those being disrupted, those Initialized and those Drifted. When it
/// changes (a candidate finished terminating and freed budget, a replacement initialized, a
/// node drifted) the loop runs a pass at once instead of waiting out its period.
pub fn budget_signature(snapshot: &Snapshot) -> [usize; 5] {
    let mut signature = [0; 5];
    for claim in snapshot.store.nodeclaims.values() {
        signature[0] += 1;
        signature[1] += usize::from(claim.metadata.deletion_timestamp.is_some());
        signature[2] += usize::from(claim.condition(CONDITION_DISRUPTION_REASON).is_some());
        signature[3] += usize::from(claim.is_true(CONDITION_INITIALIZED));
        signature[4] += usize::from(claim.is_true(driftwood_api::wellknown::CONDITION_DRIFTED));
    }
    signature
}

/// The disruption controller's memory between passes (only to avoid repeating events).
#[derive(Default)]
pub struct DisruptionController {
    last_blocked: BTreeMap<String, String>,
    waiting_reported: BTreeMap<String, String>,
}

impl DisruptionController {
    pub async fn pass(&mut self, ctx: Context) -> Outcome {
        let snapshot = ctx.state.snapshot();
        let mut acted = self.advance_in_flight(&ctx, &snapshot).await;
        let now = ctx.now_seconds();

        let pdbs: Vec<PodDisruptionBudget> = snapshot
            .store
            .pdbs
            .values()
            .map(|p| (**p).clone())
            .collect();
        let views: Vec<_> = snapshot
            .store
            .nodeclaims
            .values()
            .filter(|c| {
                c.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(driftwood_api::wellknown::LABEL_NODEPOOL))
            })
            .map(|claim| {
                let node = snapshot.node_of(claim);
                let pods = node
                    .map(|n| snapshot.pods_on(n.metadata.name.as_deref().unwrap_or_default()))
                    .unwrap_or_default();
                let pods: Vec<&k8s_openapi::api::core::v1::Pod> =
                    pods.iter().map(|p| p.as_ref()).collect();
                node_view(claim, node.map(|n| n.as_ref()), &pods, &pdbs, now)
            })
            .collect();
        if views.iter().all(|v| v.drift.is_none()) {
            self.report_gauges(&ctx, 0, &[]);
            return if acted {
                Outcome::again_in(Duration::from_secs(1))
            } else {
                Outcome::idle()
            };
        }
        let (mut world, _) = simulation_input(&ctx, &snapshot, false).await;
        // Pods waiting for capacity now need room as much as the candidates' pods do.
        world.pods = provisionable(&snapshot)
            .iter()
            .filter_map(|key| snapshot.store.pods.get(key))
            .filter_map(|pod| driftwood_scheduling::SimPod::from_pod(pod).ok())
            .collect();
        let pools: Vec<_> = snapshot
            .store
            .nodepools
            .values()
            .map(|p| (**p).clone())
            .collect();
        let allowed = pdb_allowed(&pdbs);
        let plan = plan_drift(PlannerInput {
            now: ctx.now_seconds(),
            nodes: &views,
            pdb_allowed: &allowed,
            nodepools: &pools,
            world,
        });
        self.report_gauges(&ctx, plan.eligible, &plan.budgets);

        for (name, blocked) in &plan.blocked {
            let message = blocked.to_string();
            tracing::debug!(nodeclaim = %name, reason = %message, "disruption blocked");
            if self.last_blocked.get(name) != Some(&message) {
                if let Some(claim) = snapshot.store.nodeclaims.get(name) {
                    ctx.events
                        .publish(
                            claim.as_ref(),
                            EventType::Normal,
                            "DisruptionBlocked",
                            &message,
                        )
                        .await;
                }
                self.last_blocked.insert(name.clone(), message);
            }
        }
        for command in &plan.commands {
            self.last_blocked.remove(&command.nodeclaim);
            match execute(&ctx, &snapshot, command).await {
                Ok(()) => acted = true,
                Err(error) => {
                    tracing::warn!(nodeclaim = %command.nodeclaim, %error, "could not start disruption command")
                }
            }
        }
        if acted {
            Outcome::again_in(Duration::from_secs(1))
        } else {
            Outcome::idle()
        }
    }

    fn report_gauges(
        &self,
        ctx: &Context,
        eligible: usize,
        budgets: &[driftwood_disruption::budget::AllowedDisruptions],
    ) {
        Metrics::set(
            &ctx.metrics.voluntary_disruption_eligible_nodes,
            &[("reason", "drifted")],
            eligible as i64,
        );
        for budget in budgets {
            Metrics::set(
                &ctx.metrics.nodepools_allowed_disruptions,
                &[("nodepool", &budget.nodepool), ("reason", "drifted")],
                budget.allowed as i64,
            );
        }
    }

    /// Advances every command in flight; returns whether anything was done.
    async fn advance_in_flight(&mut self, ctx: &Context, snapshot: &Snapshot) -> bool {
        let mut acted = false;
        let now = ctx.now_seconds();
        for (name, claim) in &snapshot.store.nodeclaims {
            if claim.metadata.deletion_timestamp.is_some()
                || claim.condition(CONDITION_DISRUPTION_REASON).is_none()
            {
                continue;
            }
            let annotations = claim.metadata.annotations.clone().unwrap_or_default();
            let replacements: Vec<String> = annotations
                .get(ANNOTATION_REPLACEMENTS)
                .map(|r| {
                    r.split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let started = annotations
                .get(ANNOTATION_STARTED)
                .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .map_or(now, |t| t.as_second());
            let age = now - started;
            let present: Vec<&NodeClaim> = replacements
                .iter()
                .filter_map(|r| snapshot.store.nodeclaims.get(r).map(|c| c.as_ref()))
                .collect();
            let all_initialized = present.len() == replacements.len()
                && present.iter().all(|r| r.is_true(CONDITION_INITIALIZED));
            let timeout =
                i64::try_from(ctx.settings.replacement_timeout.as_secs()).unwrap_or(i64::MAX);
            if all_initialized {
                self.waiting_reported.remove(name);
                ctx.events
                    .publish(
                        claim.as_ref(),
                        EventType::Normal,
                        "DisruptionTerminating",
                        "Disrupting NodeClaim: Drifted",
                    )
                    .await;
                if let Err(error) = delete(&nodeclaims(&ctx.client), name).await {
                    tracing::warn!(nodeclaim = %name, %error, "could not delete disrupted nodeclaim");
                    continue;
                }
                let pool = claim
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(driftwood_api::wellknown::LABEL_NODEPOOL))
                    .cloned()
                    .unwrap_or_default();
                Metrics::inc(
                    &ctx.metrics.nodeclaims_disrupted,
                    &[("reason", "drifted"), ("nodepool", &pool)],
                );
                acted = true;
            } else if age > timeout
                || (present.len() < replacements.len() && age > VISIBILITY_GRACE_SECONDS)
            {
                let why = if present.len() < replacements.len() {
                    "a replacement nodeclaim is gone"
                } else {
                    "replacement nodeclaims did not initialize in time"
                };
                tracing::warn!(nodeclaim = %name, replacements = %replacements.join(","), reason = why, "failed to disrupt nodes, rolling back");
                if let Err(error) = rollback(ctx, snapshot, name, claim).await {
                    tracing::warn!(nodeclaim = %name, %error, "rollback failed; will retry");
                    continue;
                }
                ctx.events
                    .publish(
                        claim.as_ref(),
                        EventType::Warning,
                        "DisruptionBlocked",
                        &format!("Disruption rolled back: {why}; the node keeps running"),
                    )
                    .await;
                self.waiting_reported.remove(name);
                acted = true;
            } else if self.waiting_reported.get(name) != Some(&replacements.join(",")) {
                ctx.events
                    .publish(
                        claim.as_ref(),
                        EventType::Normal,
                        "DisruptionWaitingReadiness",
                        "Waiting on readiness to continue disruption",
                    )
                    .await;
                self.waiting_reported
                    .insert(name.clone(), replacements.join(","));
            }
        }
        acted
    }
}

/// Undoes a command: untaint the node, clear DisruptionReason and the command annotations.
/// Replacements that initialized stay as ordinary capacity; one that never initialized is
/// deleted (driftwood has no consolidation to reclaim it later, unlike Karpenter, and a node
/// that never initialized holds no workload pods: its startup taints keep them off).
async fn rollback(
    ctx: &Context,
    snapshot: &Snapshot,
    name: &str,
    claim: &NodeClaim,
) -> Result<(), kube::Error> {
    let replacements = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_REPLACEMENTS))
        .map(|r| {
            r.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for replacement in &replacements {
        if let Some(r) = snapshot.store.nodeclaims.get(replacement)
            && !r.is_true(CONDITION_INITIALIZED)
            && r.metadata.deletion_timestamp.is_none()
        {
            tracing::info!(nodeclaim = %replacement, replaced = %name, "deleting replacement that never initialized");
            delete(&nodeclaims(&ctx.client), replacement).await?;
        }
    }
    if let Some(node) = snapshot.node_of(claim) {
        let node_name = node.metadata.name.clone().unwrap_or_default();
        modify(&nodes(&ctx.client), &node_name, |n| {
            remove_taint(n, TAINT_DISRUPTED_KEY)
        })
        .await?;
    }
    modify_status(&nodeclaims(&ctx.client), name, |c| {
        clear_claim_condition(c, CONDITION_DISRUPTION_REASON)
    })
    .await?;
    modify(&nodeclaims(&ctx.client), name, |c| {
        let Some(a) = c.metadata.annotations.as_mut() else {
            return false;
        };
        a.remove(ANNOTATION_REPLACEMENTS).is_some() | a.remove(ANNOTATION_STARTED).is_some()
    })
    .await?;
    Ok(())
}

/// Starts one command. The order makes it resumable: record it on the candidate, mark the
/// candidate, taint its node, then create the replacements (or delete it outright).
async fn execute(ctx: &Context, snapshot: &Snapshot, command: &Command) -> Result<(), kube::Error> {
    let mut replacements: Vec<(String, NodeClaim)> = Vec::new();
    if let Decision::Replace(planned) = &command.decision {
        for p in planned {
            // A replace whose replacement cannot be built must not become a delete.
            let Some(pool) = snapshot.nodepool(&p.nodepool) else {
                tracing::warn!(nodeclaim = %command.nodeclaim, nodepool = %p.nodepool, "replacement's nodepool is gone; not disrupting");
                return Ok(());
            };
            let name = ctx.names.nodeclaim_name(&p.nodepool);
            let claim = build_nodeclaim(&name, pool, p);
            replacements.push((name, claim));
        }
    }
    let names: Vec<String> = replacements.iter().map(|(n, _)| n.clone()).collect();
    let started = ctx.clock.now().to_string();
    let api = nodeclaims(&ctx.client);
    modify(&api, &command.nodeclaim, |c| {
        let a = c.metadata.annotations.get_or_insert_with(BTreeMap::new);
        a.insert(ANNOTATION_REPLACEMENTS.into(), names.join(","));
        a.insert(ANNOTATION_STARTED.into(), started.clone());
        true
    })
    .await?;
    let now = ctx.now();
    let message = if command.message.is_empty() {
        command.reason.clone()
    } else {
        format!("{}: {}", command.reason, command.message)
    };
    modify_status(&api, &command.nodeclaim, |c| {
        set_claim_condition(
            c,
            CONDITION_DISRUPTION_REASON,
            STATUS_TRUE,
            REASON_DRIFTED,
            &message,
            now.clone(),
        )
    })
    .await?;
    if let Some(node) = &command.node
        && modify(&nodes(&ctx.client), node, |n| {
            add_taint(n, &disrupted_taint())
        })
        .await?
        .is_some()
    {
        tracing::info!(node = %node, taint = "karpenter.sh/disrupted:NoSchedule", "tainted node");
    }
    let decision = command.decision.name();
    tracing::info!(
        reason = "drifted",
        decision,
        disrupted_node_count = 1,
        replacement_node_count = names.len(),
        pod_count = command.pods.len(),
        disrupted_nodes = %command.node.clone().unwrap_or_else(|| command.nodeclaim.clone()),
        replacement_nodeclaims = %names.join(","),
        drift = %message,
        "disrupting node(s)"
    );
    Metrics::inc(
        &ctx.metrics.voluntary_disruption_decisions,
        &[
            ("decision", decision),
            ("reason", "drifted"),
            ("consolidation_type", ""),
        ],
    );
    if let Some(claim) = snapshot.store.nodeclaims.get(&command.nodeclaim) {
        let note = if names.is_empty() {
            "Disrupting NodeClaim: Drifted (its pods fit on existing capacity)".to_string()
        } else {
            format!(
                "Launching NodeClaim: Drifted (replacing with {})",
                names.join(", ")
            )
        };
        ctx.events
            .publish(
                claim.as_ref(),
                EventType::Normal,
                "DisruptionLaunching",
                &note,
            )
            .await;
    }
    for (name, claim) in &replacements {
        match api.create(&PostParams::default(), claim).await {
            Ok(_) => {
                tracing::info!(nodeclaim = %name, nodepool = %command.nodepool, reason = "disruption", "created nodeclaim");
                Metrics::inc(
                    &ctx.metrics.nodeclaims_created,
                    &[("reason", "disruption"), ("nodepool", &command.nodepool)],
                );
            }
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(e),
        }
    }
    if replacements.is_empty() {
        delete(&api, &command.nodeclaim).await?;
        Metrics::inc(
            &ctx.metrics.nodeclaims_disrupted,
            &[("reason", "drifted"), ("nodepool", &command.nodepool)],
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Store;
    use serde_json::json;
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

    #[test]
    fn the_budget_signature_moves_with_what_frees_or_uses_budget() {
        let mut store = Store::default();
        store.nodeclaims.insert(
            "a".into(),
            claim("a", false, json!([condition(CONDITION_INITIALIZED)])),
        );
        let before = budget_signature(&Snapshot::new(store.clone()));
        assert_eq!(before, [1, 0, 0, 1, 0]);
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
            [1, 0, 0, 1, 1]
        );
        // A candidate being disrupted, then deleted, then gone: each frees or uses budget.
        store.nodeclaims.insert(
            "a".into(),
            claim("a", true, json!([condition(CONDITION_DISRUPTION_REASON)])),
        );
        assert_eq!(
            budget_signature(&Snapshot::new(store.clone())),
            [1, 1, 1, 0, 0]
        );
        store.nodeclaims.remove("a");
        assert_eq!(budget_signature(&Snapshot::new(store)), [0; 5]);
    }
}
