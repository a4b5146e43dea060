//! The disruption loop (drift): each pass advances the commands in flight — delete a candidate
//! once all its replacements are Initialized, roll back after the timeout — then plans new
//! commands filling every NodePool's budget and executes them: record the command on the
//! candidate NodeClaim (replacement names, start time, DisruptionReason), taint its node,
//! create the replacements. Everything needed to resume is on the API objects.

mod decide;

pub use decide::{
    InFlightAction, InFlightRules, budget_signature, in_flight, orphaned_replacements,
};

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
use driftwood_api::condition::{STATUS_FALSE, STATUS_TRUE, set_condition};
use driftwood_api::wellknown::{
    ANNOTATION_DISRUPTION_REPLACEMENT_FOR, CONDITION_DISRUPTION_REASON, CONDITION_ROLLOUT_COMPLETE,
    REASON_DRIFTED, TAINT_DISRUPTED_KEY,
};
use driftwood_disruption::command::InFlight;
use driftwood_disruption::plan::{Command, Decision, PlannerInput, plan_drift};
use driftwood_disruption::rollout::{PoolRollout, pool_rollout};
use driftwood_disruption::views::{node_view, pdb_allowed};
use futures::StreamExt as _;
use kube::api::PostParams;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How many disruption commands start at once (each is a handful of writes in order).
const COMMANDS_AT_ONCE: usize = 32;

/// The disruption controller: cheap to clone, one pass at a time.
#[derive(Clone, Default)]
pub struct DisruptionController {
    memory: std::sync::Arc<tokio::sync::Mutex<Memory>>,
}

impl DisruptionController {
    /// One pass: advance the commands in flight, then plan and start new ones.
    pub async fn pass(&self, ctx: Context) -> Outcome {
        self.memory.lock().await.pass(ctx).await
    }
}

/// The disruption controller's memory between passes (only to avoid repeating events).
#[derive(Default)]
struct Memory {
    last_blocked: BTreeMap<String, String>,
    waiting_reported: BTreeMap<String, String>,
    /// Failed steps of the pass under way.
    errors: u32,
}

impl Memory {
    async fn pass(&mut self, ctx: Context) -> Outcome {
        self.errors = 0;
        let snapshot = ctx.state.snapshot();
        let mut acted = self.advance_in_flight(&ctx, &snapshot).await;
        let now = ctx.now_seconds();

        let views = {
            let snapshot = snapshot.clone();
            super::off_runtime(move || candidate_views(&snapshot, now)).await
        };
        if views.iter().all(|v| v.drift.is_none()) {
            self.report_gauges(&ctx, 0, &[]);
            self.report_rollouts(&ctx, &snapshot, &views, &[]).await;
            let outcome = if acted {
                Outcome::again_in(Duration::from_secs(1))
            } else {
                Outcome::idle()
            };
            return outcome.with_errors(self.errors);
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
            // A static NodePool is left alone (its Ready condition says why).
            .filter(|p| !p.is_static())
            .map(|p| (**p).clone())
            .collect();
        let allowed = pdb_allowed(&snapshot.pdb_list());
        // Planning simulates every candidate (minutes at 5,000 nodes with a zone spread): on
        // the blocking pool, so the lease is renewed and watches served meanwhile.
        let (plan, views) = super::off_runtime(move || {
            let plan = plan_drift(PlannerInput {
                now,
                nodes: &views,
                pdb_allowed: &allowed,
                nodepools: &pools,
                world,
            });
            (plan, views)
        })
        .await;
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
        // Commands touch distinct candidates and replacements: they start together (a few at a
        // time), so a wave of hundreds is not a sum of every write's round trip to the API
        // server (five writes a command; 500 commands one after another at a managed control
        // plane's ~10 ms a write would take 25 s).
        let mut starts = Vec::with_capacity(plan.commands.len());
        for command in &plan.commands {
            let (ctx, snapshot) = (&ctx, &snapshot);
            starts.push(async move { (command, execute(ctx, snapshot, command).await) });
        }
        let started: Vec<(&Command, Result<(), kube::Error>)> = futures::stream::iter(starts)
            .buffered(COMMANDS_AT_ONCE)
            .collect()
            .await;
        let mut now_disrupting: BTreeSet<&str> = BTreeSet::new();
        for (command, result) in started {
            self.last_blocked.remove(&command.nodeclaim);
            match result {
                Ok(()) => {
                    acted = true;
                    now_disrupting.insert(command.nodeclaim.as_str());
                }
                Err(error) => {
                    self.errors += 1;
                    tracing::warn!(nodeclaim = %command.nodeclaim, %error, "could not start disruption command")
                }
            }
        }
        // The status shows the commands just started: their candidates count as disrupting.
        let mut views = views;
        for view in views
            .iter_mut()
            .filter(|v| now_disrupting.contains(v.nodeclaim.as_str()))
        {
            view.disrupting = true;
        }
        self.report_rollouts(&ctx, &snapshot, &views, &plan.blocked)
            .await;
        let outcome = if acted {
            Outcome::again_in(Duration::from_secs(1))
        } else {
            Outcome::idle()
        };
        outcome.with_errors(self.errors)
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

    /// Writes each NodePool's rollout (`status.rollout` and the `RolloutComplete` condition)
    /// where it changed; a failed write is counted and redone on the next pass.
    async fn report_rollouts(
        &mut self,
        ctx: &Context,
        snapshot: &Snapshot,
        views: &[driftwood_disruption::candidate::NodeView],
        blocked: &[(String, driftwood_disruption::candidate::Blocked)],
    ) {
        let api: kube::Api<driftwood_api::NodePool> = kube::Api::all(ctx.client.clone());
        let now = ctx.now();
        for (name, pool) in &snapshot.store.nodepools {
            if pool.is_static() {
                continue;
            }
            let rollout = pool_rollout(pool, views, blocked);
            let state = if rollout.complete {
                STATUS_TRUE
            } else {
                STATUS_FALSE
            };
            if rollout_written(pool, &rollout, state) {
                continue;
            }
            let generation = pool.metadata.generation;
            let written = modify_status(&ctx.state, &api, name, |p| {
                let status = p.status.get_or_insert_with(Default::default);
                let changed = status.rollout.as_ref() != Some(&rollout.status);
                status.rollout = Some(rollout.status.clone());
                set_condition(
                    &mut status.conditions,
                    CONDITION_ROLLOUT_COMPLETE,
                    state,
                    rollout.reason,
                    &rollout.message,
                    now.clone(),
                    generation,
                ) | changed
            })
            .await;
            if let Err(error) = written {
                self.errors += 1;
                tracing::warn!(nodepool = %name, %error, "could not write the nodepool's rollout status; will retry");
            }
        }
    }

    /// Advances every command in flight; returns whether anything was done.
    async fn advance_in_flight(&mut self, ctx: &Context, snapshot: &Snapshot) -> bool {
        let timeout = i64::try_from(ctx.settings.replacement_timeout.as_secs()).unwrap_or(i64::MAX);
        let mut acted = false;
        for orphan in orphaned_replacements(snapshot, ctx.now_seconds(), timeout) {
            tracing::info!(nodeclaim = %orphan, "deleting replacement that never initialized; its disruption command is gone");
            if let Err(error) = delete(&nodeclaims(&ctx.client), &orphan).await {
                self.errors += 1;
                tracing::warn!(nodeclaim = %orphan, %error, "could not delete orphaned replacement; will retry");
                continue;
            }
            acted = true;
        }
        let rules = InFlightRules {
            timeout_seconds: timeout,
            unsafe_skip_replacement_wait: ctx.settings.unsafe_skip_replacement_wait,
        };
        for action in in_flight(snapshot, ctx.now_seconds(), rules) {
            match action {
                InFlightAction::Terminate {
                    nodeclaim,
                    nodepool,
                } => {
                    self.waiting_reported.remove(&nodeclaim);
                    if let Some(claim) = snapshot.store.nodeclaims.get(&nodeclaim) {
                        ctx.events
                            .publish(
                                claim.as_ref(),
                                EventType::Normal,
                                "DisruptionTerminating",
                                "Disrupting NodeClaim: Drifted",
                            )
                            .await;
                    }
                    if let Err(error) = delete(&nodeclaims(&ctx.client), &nodeclaim).await {
                        self.errors += 1;
                        tracing::warn!(%nodeclaim, %error, "could not delete disrupted nodeclaim");
                        continue;
                    }
                    Metrics::inc(
                        &ctx.metrics.nodeclaims_disrupted,
                        &[("reason", "drifted"), ("nodepool", &nodepool)],
                    );
                    acted = true;
                }
                InFlightAction::RollBack {
                    nodeclaim,
                    node,
                    delete_replacements,
                    why,
                } => {
                    tracing::warn!(%nodeclaim, reason = %why, "failed to disrupt nodes, rolling back");
                    if let Err(error) =
                        rollback(ctx, &nodeclaim, node.as_deref(), &delete_replacements).await
                    {
                        self.errors += 1;
                        tracing::warn!(%nodeclaim, %error, "rollback failed; will retry");
                        continue;
                    }
                    if let Some(claim) = snapshot.store.nodeclaims.get(&nodeclaim) {
                        ctx.events
                            .publish(
                                claim.as_ref(),
                                EventType::Warning,
                                "DisruptionBlocked",
                                &format!("Disruption rolled back: {why}; the node keeps running"),
                            )
                            .await;
                    }
                    self.waiting_reported.remove(&nodeclaim);
                    acted = true;
                }
                InFlightAction::Wait {
                    nodeclaim,
                    replacements,
                } => {
                    let waiting = replacements.join(",");
                    if self.waiting_reported.get(&nodeclaim) != Some(&waiting) {
                        if let Some(claim) = snapshot.store.nodeclaims.get(&nodeclaim) {
                            ctx.events
                                .publish(
                                    claim.as_ref(),
                                    EventType::Normal,
                                    "DisruptionWaitingReadiness",
                                    "Waiting on readiness to continue disruption",
                                )
                                .await;
                        }
                        self.waiting_reported.insert(nodeclaim, waiting);
                    }
                }
            }
        }
        acted
    }
}

/// Whether `pool` already shows `rollout` (its counts and its condition's status, reason and
/// message), so nothing needs writing.
fn rollout_written(pool: &driftwood_api::NodePool, rollout: &PoolRollout, state: &str) -> bool {
    let Some(status) = pool.status.as_ref() else {
        return false;
    };
    status.rollout.as_ref() == Some(&rollout.status)
        && status
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_ROLLOUT_COMPLETE)
            .is_some_and(|c| {
                c.status == state
                    && c.reason.as_deref() == Some(rollout.reason)
                    && c.message.as_deref() == Some(rollout.message.as_str())
                    && c.observed_generation == pool.metadata.generation
            })
}

/// Undoes a command: delete the replacements that never initialized, untaint the node, clear
/// DisruptionReason and the command annotations (the mark goes first, so a crash in between
/// leaves no command behind). Replacements that initialized stay as ordinary capacity; one that
/// never initialized holds no workload pods (its startup taints keep them off), and driftwood
/// has no consolidation to reclaim it later, unlike Karpenter.
async fn rollback(
    ctx: &Context,
    name: &str,
    node: Option<&str>,
    delete_replacements: &[String],
) -> Result<(), kube::Error> {
    for replacement in delete_replacements {
        tracing::info!(nodeclaim = %replacement, replaced = %name, "deleting replacement that never initialized");
        delete(&nodeclaims(&ctx.client), replacement).await?;
    }
    if let Some(node) = node {
        modify(&ctx.state, &nodes(&ctx.client), node, |n| {
            remove_taint(n, TAINT_DISRUPTED_KEY)
        })
        .await?;
    }
    modify_status(&ctx.state, &nodeclaims(&ctx.client), name, |c| {
        clear_claim_condition(c, CONDITION_DISRUPTION_REASON)
    })
    .await?;
    modify(&ctx.state, &nodeclaims(&ctx.client), name, |c| {
        let Some(a) = c.metadata.annotations.as_mut() else {
            return false;
        };
        InFlight::ANNOTATION_KEYS
            .iter()
            .fold(false, |removed, key| a.remove(*key).is_some() | removed)
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
            let name = ctx
                .names
                .nodeclaim_name(&p.nodepool, |n| snapshot.store.nodeclaims.contains_key(n));
            let mut claim = build_nodeclaim(&name, pool, p);
            claim
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(
                    ANNOTATION_DISRUPTION_REPLACEMENT_FOR.to_string(),
                    command.nodeclaim.clone(),
                );
            replacements.push((name, claim));
        }
    }
    let names: Vec<String> = replacements.iter().map(|(n, _)| n.clone()).collect();
    let recorded = InFlight::annotations(&names, ctx.clock.now());
    let api = nodeclaims(&ctx.client);
    modify(&ctx.state, &api, &command.nodeclaim, |c| {
        let a = c.metadata.annotations.get_or_insert_with(BTreeMap::new);
        a.extend(recorded.iter().cloned());
        true
    })
    .await?;
    let now = ctx.now();
    let message = if command.message.is_empty() {
        command.reason.clone()
    } else {
        format!("{}: {}", command.reason, command.message)
    };
    modify_status(&ctx.state, &api, &command.nodeclaim, |c| {
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
        && modify(&ctx.state, &nodes(&ctx.client), node, |n| {
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

/// The disruption view of every managed NodeClaim (its node, pods, PDBs, drift), in the
/// cache's order.
fn candidate_views(
    snapshot: &Snapshot,
    now: i64,
) -> Vec<driftwood_disruption::candidate::NodeView> {
    let pdbs = snapshot.pdb_list();
    snapshot
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
        .collect()
}
