//! The disruption loop, Karpenter's methods in Karpenter's order: each pass advances the
//! commands in flight (delete a candidate once all its replacements are Initialized, roll back
//! after the timeout), then looks for new work — emptiness, drift (filling every NodePool's
//! budget in one pass), multi-node and single-node consolidation — and starts it: record the
//! command on the candidates, mark them, taint their nodes, create the replacements. A
//! consolidation command waits out its validation delay and is re-checked first. Everything
//! needed to resume is on the API objects.

mod consolidation;
mod decide;
mod policy;
mod start;
mod views;

pub use decide::{
    InFlightAction, InFlightRules, budget_signature, consolidation_signature, in_flight,
    orphaned_replacements, still_holds,
};

use super::Outcome;
use crate::api::{
    clear_claim_condition, delete, modify, modify_status, nodeclaims, nodes, remove_taint,
};
use crate::context::Context;
use crate::controllers::provisioner::provisionable;
use crate::events::EventType;
use crate::metrics::Metrics;
use crate::simulation::simulation_input;
use crate::state::Snapshot;
use consolidation::CONSOLIDATED_RECHECK_SECONDS;
use driftwood_api::condition::{STATUS_FALSE, STATUS_TRUE, set_condition};
use driftwood_api::lookup::ObjectLookups as _;
use driftwood_api::wellknown::{
    CONDITION_DISRUPTION_REASON, CONDITION_ROLLOUT_COMPLETE, REASON_DRIFTED, REASON_UNHEALTHY,
    TAINT_DISRUPTED_KEY,
};
use driftwood_disruption::command::InFlight;
use driftwood_disruption::consolidation::{Method, VALIDATION_DELAY_SECONDS};
use driftwood_disruption::plan::{Command, PlannerInput, plan_drift};
use driftwood_disruption::repair::{plan_repair, repair_deadline};
use driftwood_disruption::rollout::{
    PoolRollout, pool_rollout, with_backoff, with_policy, without_cleared_halt,
};
use driftwood_disruption::views::pdb_allowed;
use futures::StreamExt as _;
use start::{Start, start};
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
        let mut memory = self.memory.lock().await;
        // A pass that panicked (recovered by the loop driver) may have left the memory half
        // updated: start again from none, as a restarted process does (what must survive is
        // in the API).
        if std::mem::replace(&mut memory.in_pass, true) {
            tracing::warn!(
                controller = "disruption",
                "the last pass did not finish; starting from a fresh memory"
            );
            *memory = Memory {
                in_pass: true,
                ..Memory::default()
            };
        }
        let outcome = memory.pass(ctx).await;
        memory.in_pass = false;
        outcome
    }
}

/// The disruption controller's memory between passes: what it reported (to avoid repeating
/// events), the consolidation command waiting out its validation delay, and when the cluster
/// was last found consolidated.
#[derive(Default)]
struct Memory {
    /// Set while a pass runs: still set at the next pass's start, the last one panicked.
    in_pass: bool,
    last_blocked: BTreeMap<String, String>,
    last_unconsolidatable: BTreeMap<String, String>,
    waiting_reported: BTreeMap<String, String>,
    /// Drift's blocked candidates as last planned (the rollout status shows them on passes
    /// where drift did not plan).
    drift_blocked: Vec<(String, driftwood_disruption::candidate::Blocked)>,
    pending: Option<consolidation::Pending>,
    /// Per method, what it last looked at when it found nothing to do (not for want of time)
    /// and when: it is not run again until that changes, or after
    /// [`CONSOLIDATED_RECHECK_SECONDS`] (Karpenter's IsConsolidated, kept per method as
    /// Karpenter does).
    consolidated: BTreeMap<Method, consolidation::Consolidated>,
    /// NodePools single-node consolidation did not reach before its timeout.
    unseen_nodepools: Vec<String>,
    /// Each NodePool's rollout policy verdict this pass (pools with a policy or its progress).
    policies: BTreeMap<String, policy::PoolPolicy>,
    /// The policy progress last written per NodePool, until the snapshot shows it.
    policy_written: BTreeMap<String, policy::Written>,
    /// Each NodePool's backoff after failed replacements (read back from status.rollout once,
    /// when this controller starts leading).
    backoffs: BTreeMap<String, driftwood_api::nodepool::RolloutBackoff>,
    backoffs_loaded: bool,
    /// The rollout policies' query gates' last readings, by NodePool.
    gate_readings: BTreeMap<String, policy::Reading>,
    /// Replacements already counted in `karpenter_voluntary_disruption_queue_failures_total`
    /// (a command's candidates each roll back; its failed launches count once), kept while a
    /// rollback still names them.
    failed_launches_counted: BTreeSet<String>,
    /// Failed steps of the pass under way.
    errors: u32,
    /// Each NodeClaim's disruption view, kept while what it reads is unchanged.
    views: views::ViewCache,
    /// When the consolidation methods last ran through without starting anything. Karpenter
    /// runs them once per polling period ([`decide::CONSOLIDATION_POLL_SECONDS`]), and again at once
    /// only after a command started; passes woken sooner (drift's budgets, nodes coming up)
    /// leave them out until the period is up.
    consolidation_ran_at: Option<i64>,
    /// This pass: when the consolidation methods, left out, are due again.
    consolidation_due: Option<i64>,
}

/// A pass's outcome: again in a second after acting, else when the consolidation methods left
/// out are due (`due_in` seconds), else idle.
fn settle(acted: bool, errors: u32, due_in: Option<i64>) -> Outcome {
    let outcome = if acted {
        Outcome::again_in(Duration::from_secs(1))
    } else if let Some(due_in) = due_in {
        Outcome::again_in(Duration::from_secs(due_in.max(1).unsigned_abs()))
    } else {
        Outcome::idle()
    };
    outcome.with_errors(errors)
}

impl Memory {
    async fn pass(&mut self, ctx: Context) -> Outcome {
        self.errors = 0;
        self.consolidation_due = None;
        let snapshot = ctx.state.snapshot();
        if !self.backoffs_loaded {
            self.backoffs = snapshot
                .store
                .nodepools
                .iter()
                .filter_map(|(name, pool)| {
                    let backoff = pool.status.as_ref()?.rollout.as_ref()?.backoff.clone()?;
                    Some((name.clone(), backoff))
                })
                .collect();
            self.backoffs_loaded = true;
        }
        let acted = self.advance_in_flight(&ctx, &snapshot).await;
        let now = ctx.now_seconds();

        let policies: &'static [driftwood_api::repair::RepairPolicy] =
            if ctx.settings.feature_gates.node_repair() {
                ctx.cloud.repair_policies()
            } else {
                &[]
            };
        let views = {
            let snapshot = snapshot.clone();
            let mut cache = std::mem::take(&mut self.views);
            let (views, cache) = super::off_runtime(move || {
                let views = cache.views(&snapshot, now, policies);
                (views, cache)
            })
            .await;
            self.views = cache;
            views
        };
        let nodepools: Vec<driftwood_api::NodePool> = snapshot
            .store
            .nodepools
            .values()
            .filter(|p| !p.is_static())
            .map(|p| (**p).clone())
            .collect();
        self.read_query_gates(&ctx, &snapshot, now).await;
        self.policies = policy::decide(
            &snapshot,
            &views,
            &self.policy_written,
            &self.gate_readings,
            now,
        );
        self.announce_policies(&ctx, &snapshot).await;
        // A consolidation command waiting out its validation delay holds the loop, as
        // Karpenter's does: nothing else starts meanwhile.
        if let Some(pending) = self.pending.take() {
            if now < pending.due {
                let wait = u64::try_from(pending.due - now).unwrap_or(1);
                self.pending = Some(pending);
                return Outcome::again_in(Duration::from_secs(wait)).with_errors(self.errors);
            }
            let inputs = self
                .inputs(&ctx, &snapshot, views.clone(), nodepools, now)
                .await;
            let (started, errors) =
                consolidation::validate_and_start(&ctx, &snapshot, &inputs, pending).await;
            self.errors += errors;
            self.consolidated.clear();
            // Karpenter requeues at once after a command: the methods may run next pass.
            self.consolidation_ran_at = None;
            self.report_rollouts(&ctx, &snapshot, &views).await;
            return self.settle(acted || started || errors > 0, now);
        }
        let any_consolidatable = views.iter().any(|v| v.consolidatable);
        self.consolidation_due =
            decide::consolidation_waits_until(self.consolidation_ran_at, any_consolidatable, now);
        let consolidation_waits = self.consolidation_due.is_some();
        let signature = if any_consolidatable && !consolidation_waits {
            consolidation_signature(&snapshot, &views)
        } else {
            0
        };
        // What each method would look at this pass; a method whose last look found nothing
        // and saw the same is skipped.
        let looks: BTreeMap<Method, consolidation::Consolidated> =
            [Method::Emptiness, Method::MultiNode, Method::SingleNode]
                .into_iter()
                .filter(|_| any_consolidatable && !consolidation_waits)
                .map(|m| {
                    let look =
                        consolidation::Consolidated::look(signature, m, &views, &nodepools, now);
                    (m, look)
                })
                .filter(|(m, look)| {
                    !self
                        .consolidated
                        .get(m)
                        .is_some_and(|last| last.holds(look, CONSOLIDATED_RECHECK_SECONDS))
                })
                .collect();
        let consolidating = !looks.is_empty();
        let drifting = views.iter().any(|v| v.drift.is_some());
        let repairing = views
            .iter()
            .any(|v| v.unhealthy.as_ref().is_some_and(|u| u.due_at <= now));
        if !drifting {
            // Nothing drifted: the drift budgets are still reported as they stand now (Karpenter
            // leaves them at what its last pass with candidates saw, so a finished rollout
            // would show its last node as still consuming the budget).
            let budgets = driftwood_disruption::candidate::pool_budgets(
                &views,
                &nodepools,
                REASON_DRIFTED,
                now,
            );
            self.report_gauges(&ctx, 0, &budgets);
        }
        if !consolidating && !drifting && !repairing {
            self.drift_blocked.clear();
            self.report_rollouts(&ctx, &snapshot, &views).await;
            return self.settle(acted, now);
        }
        let inputs = self.inputs(&ctx, &snapshot, views, nodepools, now).await;

        // 0. Node repair (Karpenter v1.15: repair, then drift, then consolidation).
        if repairing {
            let started = self.repair(&ctx, &snapshot, &inputs).await;
            if !started.is_empty() {
                let mut views = inputs.views.clone();
                for view in views
                    .iter_mut()
                    .filter(|v| started.contains(v.nodeclaim.as_str()))
                {
                    view.disrupting = true;
                }
                self.report_rollouts(&ctx, &snapshot, &views).await;
                return self.settle(true, now);
            }
        }

        // 1. Emptiness.
        if let Some(look) = looks.get(&Method::Emptiness) {
            let outcome = consolidation::run(&ctx, &inputs, Method::Emptiness, Vec::new()).await;
            self.report_unconsolidatable(&ctx, &snapshot, &outcome)
                .await;
            self.remember(Method::Emptiness, look, &outcome);
            if let Some(command) = outcome.command {
                self.pending = Some(consolidation::Pending::new(command, now));
                self.report_rollouts(&ctx, &snapshot, &inputs.views).await;
                return Outcome::again_in(Duration::from_secs(
                    VALIDATION_DELAY_SECONDS.unsigned_abs(),
                ))
                .with_errors(self.errors);
            }
        }

        // 2. Drift, filling every budget in one pass.
        let mut views = inputs.views.clone();
        let mut drift_started = false;
        if drifting {
            let started = self.drift(&ctx, &snapshot, &inputs).await;
            for view in views
                .iter_mut()
                .filter(|v| started.contains(v.nodeclaim.as_str()))
            {
                view.disrupting = true;
            }
            drift_started = !started.is_empty();
        } else {
            // (Its gauges were reported above, before the methods ran.)
            self.drift_blocked.clear();
        }
        if drift_started || !consolidating {
            self.report_rollouts(&ctx, &snapshot, &views).await;
            return self.settle(acted || drift_started, now);
        }

        // 3 and 4. Multi-node, then single-node consolidation.
        {
            for method in [Method::MultiNode, Method::SingleNode] {
                let Some(look) = looks.get(&method) else {
                    continue;
                };
                let unseen = if method == Method::SingleNode {
                    std::mem::take(&mut self.unseen_nodepools)
                } else {
                    Vec::new()
                };
                let outcome = consolidation::run(&ctx, &inputs, method, unseen).await;
                self.report_unconsolidatable(&ctx, &snapshot, &outcome)
                    .await;
                consolidation::report_moves(&ctx, &snapshot, &outcome).await;
                if method == Method::SingleNode {
                    self.unseen_nodepools = outcome.unseen_nodepools.clone();
                }
                self.remember(method, look, &outcome);
                if let Some(command) = outcome.command {
                    self.pending = Some(consolidation::Pending::new(command, now));
                    self.report_rollouts(&ctx, &snapshot, &views).await;
                    return Outcome::again_in(Duration::from_secs(
                        VALIDATION_DELAY_SECONDS.unsigned_abs(),
                    ))
                    .with_errors(self.errors);
                }
            }
        }
        // The methods ran through and started nothing: not again before the polling period.
        self.consolidation_ran_at = Some(now);
        self.report_rollouts(&ctx, &snapshot, &views).await;
        settle(acted, self.errors, None)
    }

    /// [`settle`] with this pass's errors and consolidation's due time.
    fn settle(&self, acted: bool, now: i64) -> Outcome {
        settle(
            acted,
            self.errors,
            self.consolidation_due.map(|due| due - now),
        )
    }

    /// Records what `method` found: nothing to do (and not for want of time) is remembered
    /// with what it looked at; anything else forgets.
    fn remember(
        &mut self,
        method: Method,
        look: &consolidation::Consolidated,
        outcome: &driftwood_disruption::consolidation::MethodOutcome,
    ) {
        if outcome.command.is_none() && !outcome.timed_out {
            self.consolidated.insert(method, look.clone());
        } else {
            self.consolidated.remove(&method);
        }
    }

    /// What every method reads this pass: the views, the world with the pods waiting for
    /// capacity, the NodePools (static ones are left alone), the PDBs' allowances.
    async fn inputs(
        &self,
        ctx: &Context,
        snapshot: &Snapshot,
        views: Vec<driftwood_disruption::candidate::NodeView>,
        nodepools: Vec<driftwood_api::NodePool>,
        now: i64,
    ) -> std::sync::Arc<consolidation::Inputs> {
        let (mut world, _) = simulation_input(ctx, snapshot, false).await;
        // Every simulation of the pass is reported under this controller's name, as Karpenter
        // reports its disruption simulations.
        world.options.observer = driftwood_scheduling::Observer::new(std::sync::Arc::new(
            crate::scheduler_metrics::ControllerSimulations::new(&ctx.metrics, "disruption"),
        ));
        // Pods waiting for capacity now need room as much as the candidates' pods do.
        world.pods = provisionable(snapshot)
            .iter()
            .filter_map(|key| snapshot.sim_pod(key)?.as_ref().ok().cloned())
            .collect();
        std::sync::Arc::new(consolidation::Inputs {
            now,
            views,
            pdb_allowed: pdb_allowed(&snapshot.pdb_list()),
            nodepools,
            world,
            spot_to_spot: ctx.settings.feature_gates.spot_to_spot_consolidation(),
            prepared: Default::default(),
        })
    }

    /// Plans drift and starts its commands; returns the candidates now disrupting.
    async fn drift(
        &mut self,
        ctx: &Context,
        snapshot: &Snapshot,
        inputs: &std::sync::Arc<consolidation::Inputs>,
    ) -> BTreeSet<String> {
        let caps = policy::caps(&self.policies, &self.backoffs, ctx.now_seconds());
        let mut plan = plan_off_runtime(inputs, plan_drift, caps).await;
        self.report_gauges(ctx, plan.eligible, &plan.budgets);
        self.record_policy_starts(ctx, snapshot, &mut plan).await;
        let started = self.start_plan(ctx, snapshot, &plan, REASON_DRIFTED).await;
        self.drift_blocked = plan.blocked;
        started
    }

    /// Plans node repair and starts its commands; returns the candidates now disrupting.
    async fn repair(
        &mut self,
        ctx: &Context,
        snapshot: &Snapshot,
        inputs: &std::sync::Arc<consolidation::Inputs>,
    ) -> BTreeSet<String> {
        let plan = plan_off_runtime(inputs, plan_repair, BTreeMap::new()).await;
        Metrics::set(
            &ctx.metrics.voluntary_disruption_eligible_nodes,
            &[("reason", "unhealthy")],
            i64::try_from(plan.eligible).unwrap_or(i64::MAX),
        );
        self.start_plan(ctx, snapshot, &plan, REASON_UNHEALTHY)
            .await
    }

    /// Reports a plan's blocked candidates (once per change) and starts its commands, disrupted
    /// for `reason`; returns the candidates now disrupting.
    async fn start_plan(
        &mut self,
        ctx: &Context,
        snapshot: &Snapshot,
        plan: &driftwood_disruption::plan::DisruptionPlan,
        reason: &'static str,
    ) -> BTreeSet<String> {
        for (name, blocked) in &plan.blocked {
            let message = blocked.to_string();
            tracing::debug!(nodeclaim = %name, reason = %message, "disruption blocked");
            if self.last_blocked.get(name) != Some(&message) {
                if let Some(claim) = snapshot.store.nodeclaims.get(name) {
                    // Karpenter's event for a NodePool with too many unhealthy nodes.
                    let (type_, event) = match blocked {
                        driftwood_disruption::candidate::Blocked::RepairThreshold { .. } => {
                            (EventType::Warning, "NodeRepairBlocked")
                        }
                        _ => (EventType::Normal, "DisruptionBlocked"),
                    };
                    ctx.events
                        .publish(claim.as_ref(), type_, event, &message)
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
        let policies = ctx.cloud.repair_policies();
        let now_cache = ctx.state.snapshot();
        for command in &plan.commands {
            if !still_holds(&now_cache, &command.nodeclaim, reason, policies) {
                tracing::info!(nodeclaim = %command.nodeclaim, reason, "no longer a candidate since the plan was made; not disrupting");
                continue;
            }
            let what = Start::replacing(command, reason);
            starts.push(async move { (command, start(ctx, snapshot, &what).await) });
        }
        let started: Vec<(&Command, Result<(), kube::Error>)> = futures::stream::iter(starts)
            .buffered(COMMANDS_AT_ONCE)
            .collect()
            .await;
        let mut now_disrupting = BTreeSet::new();
        for (command, result) in started {
            self.last_blocked.remove(&command.nodeclaim);
            match result {
                Ok(()) => {
                    now_disrupting.insert(command.nodeclaim.clone());
                }
                Err(error) => {
                    self.errors += 1;
                    tracing::warn!(nodeclaim = %command.nodeclaim, %error, "could not start disruption command")
                }
            }
        }
        now_disrupting
    }

    /// Publishes an Unconsolidatable (or DisruptionBlocked) event where a node's reason changed.
    async fn report_unconsolidatable(
        &mut self,
        ctx: &Context,
        snapshot: &Snapshot,
        outcome: &driftwood_disruption::consolidation::MethodOutcome,
    ) {
        for (name, why) in &outcome.unconsolidatable {
            if self.last_unconsolidatable.get(name) == Some(why) {
                continue;
            }
            tracing::debug!(nodeclaim = %name, reason = %why, "unconsolidatable");
            // Karpenter's split: a node that is no candidate at all ("Cannot disrupt ...")
            // is DisruptionBlocked; one that is but cannot be consolidated, Unconsolidatable.
            let reason = if why.starts_with("Cannot disrupt") {
                "DisruptionBlocked"
            } else {
                "Unconsolidatable"
            };
            if let Some(claim) = snapshot.store.nodeclaims.get(name) {
                ctx.events
                    .publish(claim.as_ref(), EventType::Normal, reason, why)
                    .await;
            }
            self.last_unconsolidatable.insert(name.clone(), why.clone());
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
        ctx.metrics.report_budgets(REASON_DRIFTED, budgets);
    }

    /// Asks Prometheus each due query gate (off the runtime: a blocking socket with its own
    /// timeouts); a failed query is logged, counted, and holds its wave until one answers.
    async fn read_query_gates(&mut self, ctx: &Context, snapshot: &Snapshot, now: i64) {
        let due = policy::queries_due(snapshot, &self.gate_readings, now);
        if due.is_empty() {
            return;
        }
        let url = ctx.settings.prometheus_url.clone();
        let answers = super::off_runtime(move || {
            let prometheus = url.as_deref().map(crate::prometheus::Prometheus::new);
            due.into_iter()
                .map(|(pool, query)| {
                    let answer = match &prometheus {
                        None => Err("the policy has a query gate but driftwood runs without --prometheus-url".to_string()),
                        Some(Err(error)) => Err(error.to_string()),
                        Some(Ok(p)) => p.max_sample(&query).map_err(|e| e.to_string()),
                    };
                    (pool, answer)
                })
                .collect::<Vec<_>>()
        })
        .await;
        for (pool, answer) in answers {
            if let Err(error) = &answer {
                self.errors += 1;
                tracing::warn!(nodepool = %pool, %error, "could not read the rollout policy's query gate; its wave waits");
            }
            self.gate_readings.insert(pool, (now, answer));
        }
    }

    /// Records one more failed replacement of `claim`'s NodePool: its backoff doubles, and a
    /// Warning RolloutBackingOff on the NodePool says until when.
    async fn back_off(
        &mut self,
        ctx: &Context,
        snapshot: &Snapshot,
        claim: &driftwood_api::NodeClaim,
        why: &str,
    ) {
        let Some(pool) = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(driftwood_api::wellknown::LABEL_NODEPOOL))
        else {
            return;
        };
        let now = ctx.now_seconds();
        let backoff =
            driftwood_disruption::backoff::after_failure(self.backoffs.get(pool), now, why);
        let until = driftwood_disruption::backoff::holding(&backoff, now).unwrap_or(now);
        let message = driftwood_disruption::backoff::detail(&backoff, until);
        tracing::warn!(nodepool = %pool, failures = backoff.failures, %message, "nodepool backing off");
        if let Some(object) = snapshot.store.nodepools.get(pool) {
            ctx.events
                .publish(
                    object.as_ref(),
                    EventType::Warning,
                    "RolloutBackingOff",
                    &message,
                )
                .await;
        }
        self.backoffs.insert(pool.clone(), backoff);
    }

    /// Publishes each pool's policy news of this pass on the NodePool: a new target
    /// (RolloutRetargeted), a halt (Warning RolloutHalted), a deadline at risk, a zone's turn
    /// and a wave that began (RolloutWaveStarted).
    async fn announce_policies(&self, ctx: &Context, snapshot: &Snapshot) {
        for (name, verdict) in &self.policies {
            let Some(pool) = snapshot.store.nodepools.get(name) else {
                continue;
            };
            if let Some(retargeted) = &verdict.pass.retargeted {
                let message = driftwood_disruption::policy::retargeted_message(retargeted);
                tracing::info!(nodepool = %name, message = %message, "rollout retargeted");
                ctx.events
                    .publish(
                        pool.as_ref(),
                        EventType::Normal,
                        "RolloutRetargeted",
                        &message,
                    )
                    .await;
            }
            if let Some(halt) = &verdict.pass.halted_now {
                let message = format!(
                    "Rollout halted in wave {}: health gate {} failed: {}",
                    halt.wave + 1,
                    halt.gate,
                    halt.message
                );
                tracing::warn!(nodepool = %name, gate = %halt.gate, message = %halt.message, "rollout halted");
                ctx.events
                    .publish(pool.as_ref(), EventType::Warning, "RolloutHalted", &message)
                    .await;
            }
            if let Some(why) = &verdict.pass.deadline_at_risk {
                tracing::warn!(nodepool = %name, reason = %why, "rollout deadline at risk");
                ctx.events
                    .publish(
                        pool.as_ref(),
                        EventType::Warning,
                        "RolloutDeadlineAtRisk",
                        &format!("The rollout's deadline cannot be met: {why}"),
                    )
                    .await;
            }
            if let Some(zone) = &verdict.pass.zone_started {
                tracing::info!(nodepool = %name, zone = %zone, "rollout zone started");
                ctx.events
                    .publish(
                        pool.as_ref(),
                        EventType::Normal,
                        "RolloutZoneStarted",
                        &format!("Rollout of zone {zone} started: its nodes are replaced before any other zone's"),
                    )
                    .await;
            }
            if let Some(wave) = verdict.pass.wave_started {
                let message = match verdict.pass.cap {
                    Some(cap) => format!("Rollout wave {} started: up to {cap} node(s)", wave + 1),
                    None => format!("Rollout wave {} started: the remaining nodes", wave + 1),
                };
                tracing::info!(nodepool = %name, wave = wave + 1, "rollout wave started");
                ctx.events
                    .publish(
                        pool.as_ref(),
                        EventType::Normal,
                        "RolloutWaveStarted",
                        &message,
                    )
                    .await;
            }
        }
    }

    /// Writes the policy progress of every pool the plan disrupts, with its new starts, before
    /// any of them starts (so a restarted controller counts them); a pool whose write fails
    /// starts nothing this pass.
    async fn record_policy_starts(
        &mut self,
        ctx: &Context,
        snapshot: &Snapshot,
        plan: &mut driftwood_disruption::plan::DisruptionPlan,
    ) {
        let api: kube::Api<driftwood_api::NodePool> = kube::Api::all(ctx.client.clone());
        let now = ctx.now_seconds();
        let mut per_pool: BTreeMap<String, usize> = BTreeMap::new();
        for command in &plan.commands {
            *per_pool.entry(command.nodepool.clone()).or_default() += 1;
        }
        let mut refused = BTreeSet::new();
        for (pool, count) in per_pool {
            let Some(verdict) = self.policies.get_mut(&pool) else {
                continue;
            };
            let Some(progress) = verdict.pass.progress.as_mut() else {
                continue;
            };
            driftwood_disruption::policy::record_starts(progress, count, now);
            let decided = progress.clone();
            let before = snapshot
                .store
                .nodepools
                .get(&pool)
                .and_then(|p| p.metadata.resource_version.clone());
            let written = modify_status(&ctx.state, &api, &pool, |p| {
                let status = p.status.get_or_insert_with(Default::default);
                let rollout = status.rollout.get_or_insert_with(Default::default);
                let changed = rollout.policy.as_ref() != Some(&decided);
                rollout.policy = Some(decided.clone());
                changed
            })
            .await;
            match written {
                Ok(_) => {
                    self.policy_written.insert(
                        pool.clone(),
                        policy::Written {
                            before,
                            progress: Some(decided),
                        },
                    );
                }
                Err(error) => {
                    self.errors += 1;
                    tracing::warn!(nodepool = %pool, %error, "could not record the rollout policy's starts; starting none in this pool this pass");
                    refused.insert(pool);
                }
            }
        }
        plan.commands.retain(|c| !refused.contains(&c.nodepool));
    }

    /// Writes each NodePool's rollout (`status.rollout` and the `RolloutComplete` condition)
    /// where it changed; a failed write is counted and redone on the next pass.
    async fn report_rollouts(
        &mut self,
        ctx: &Context,
        snapshot: &Snapshot,
        views: &[driftwood_disruption::candidate::NodeView],
    ) {
        let blocked = std::mem::take(&mut self.drift_blocked);
        self.write_rollouts(ctx, snapshot, views, &blocked).await;
        self.drift_blocked = blocked;
    }

    async fn write_rollouts(
        &mut self,
        ctx: &Context,
        snapshot: &Snapshot,
        views: &[driftwood_disruption::candidate::NodeView],
        blocked: &[(String, driftwood_disruption::candidate::Blocked)],
    ) {
        let api: kube::Api<driftwood_api::NodePool> = kube::Api::all(ctx.client.clone());
        let now = ctx.now();
        let now_seconds = ctx.now_seconds();
        let rollouts: Vec<(
            &String,
            &std::sync::Arc<driftwood_api::NodePool>,
            PoolRollout,
        )> = snapshot
            .store
            .nodepools
            .iter()
            .filter(|(_, pool)| !pool.is_static())
            .map(|(name, pool)| {
                let rollout = pool_rollout(pool, views, blocked);
                let verdict = self.policies.get(name).map(|p| &p.pass);
                (
                    name,
                    pool,
                    with_backoff(
                        with_policy(
                            rollout,
                            verdict.and_then(|p| p.progress.clone()),
                            verdict.and_then(|p| p.hold.as_ref()),
                        ),
                        self.backoffs.get(name).cloned(),
                        now_seconds,
                    ),
                )
            })
            .collect();
        // The gauges follow the decision, written to the API or not (with Karpenter's CRDs
        // installed the API server prunes status.rollout).
        ctx.metrics.observe_rollouts(
            rollouts
                .iter()
                .map(|(name, _, r)| (name.as_str(), &r.status, r.complete)),
        );
        for (name, pool, rollout) in rollouts {
            let state = if rollout.complete {
                STATUS_TRUE
            } else {
                STATUS_FALSE
            };
            if rollout_written(pool, &rollout, state) {
                continue;
            }
            let generation = pool.metadata.generation;
            let halted_now = self
                .policies
                .get(name)
                .is_some_and(|p| p.pass.halted_now.is_some());
            let written = modify_status(&ctx.state, &api, name, |p| {
                let status = p.status.get_or_insert_with(Default::default);
                let next = without_cleared_halt(
                    rollout.status.clone(),
                    status.rollout.as_ref(),
                    halted_now,
                );
                let changed = status.rollout.as_ref() != Some(&next);
                status.rollout = Some(next);
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
            match written {
                Ok(updated) => {
                    // What the API now holds (a cleared halt stays cleared).
                    let progress = match updated {
                        Some(p) => p.status.and_then(|s| s.rollout).and_then(|r| r.policy),
                        None => rollout.status.policy.clone(),
                    };
                    self.policy_written.insert(
                        name.clone(),
                        policy::Written {
                            before: pool.metadata.resource_version.clone(),
                            progress,
                        },
                    );
                }
                Err(error) => {
                    self.errors += 1;
                    tracing::warn!(nodepool = %name, %error, "could not write the nodepool's rollout status; will retry");
                }
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
        let actions = in_flight(snapshot, ctx.now_seconds(), rules);
        let still_named: BTreeSet<&String> = actions
            .iter()
            .flat_map(|a| match a {
                InFlightAction::RollBack {
                    failed_replacements,
                    ..
                } => failed_replacements.as_slice(),
                _ => &[],
            })
            .collect();
        self.failed_launches_counted
            .retain(|r| still_named.contains(r));
        for action in actions {
            match action {
                InFlightAction::Terminate {
                    nodeclaim,
                    nodepool,
                    reason,
                } => {
                    self.waiting_reported.remove(&nodeclaim);
                    // Its replacements initialized: the pool's backoff, if any, is over.
                    self.backoffs.remove(&nodepool);
                    if let Some(claim) = snapshot.store.nodeclaims.get(&nodeclaim) {
                        ctx.events
                            .publish(
                                claim.as_ref(),
                                EventType::Normal,
                                "DisruptionTerminating",
                                &format!("Disrupting NodeClaim: {reason}"),
                            )
                            .await;
                    }
                    let mut repaired = None;
                    if reason == REASON_UNHEALTHY {
                        match stamp_repair_deadline(ctx, snapshot, &nodeclaim).await {
                            Ok(condition) => repaired = Some(condition),
                            Err(error) => {
                                self.errors += 1;
                                tracing::warn!(%nodeclaim, %error, "could not set the repaired nodeclaim's drain deadline");
                                continue;
                            }
                        }
                    }
                    if let Err(error) = delete(&nodeclaims(&ctx.client), &nodeclaim).await {
                        self.errors += 1;
                        tracing::warn!(%nodeclaim, %error, "could not delete disrupted nodeclaim");
                        continue;
                    }
                    if let (Some(condition), Some(claim)) =
                        (repaired, snapshot.store.nodeclaims.get(&nodeclaim))
                    {
                        let image = claim
                            .status
                            .as_ref()
                            .and_then(|s| s.image_id.clone())
                            .unwrap_or_default();
                        Metrics::inc(
                            &ctx.metrics.nodeclaims_unhealthy_disrupted,
                            &[
                                ("condition", &condition),
                                ("nodepool", &nodepool),
                                (
                                    "capacity_type",
                                    claim
                                        .label(driftwood_api::wellknown::LABEL_CAPACITY_TYPE)
                                        .unwrap_or_default(),
                                ),
                                ("image_id", &image),
                            ],
                        );
                    }
                    ctx.metrics.count_disrupted(
                        snapshot,
                        &nodeclaim,
                        &nodepool,
                        &reason.to_lowercase(),
                    );
                    acted = true;
                }
                InFlightAction::RollBack {
                    nodeclaim,
                    node,
                    delete_replacements,
                    why,
                    reason,
                    failed_replacements,
                } => {
                    tracing::warn!(%nodeclaim, reason = %why, "failed to disrupt nodes, rolling back");
                    let uncounted = failed_replacements
                        .into_iter()
                        .filter(|r| self.failed_launches_counted.insert(r.clone()))
                        .count();
                    if uncounted > 0 {
                        // Karpenter labels consolidation_type with the decision too.
                        ctx.metrics
                            .voluntary_disruption_queue_failures
                            .get_or_create(&vec![
                                ("decision".to_string(), "replace".to_string()),
                                ("reason".to_string(), reason.to_lowercase()),
                                ("consolidation_type".to_string(), "replace".to_string()),
                            ])
                            .inc_by(uncounted as u64);
                    }
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
                        if why.replacement_failed() {
                            self.back_off(ctx, snapshot, claim, &why.to_string()).await;
                        }
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

/// Runs `planner` (drift or repair) over the pass's inputs on the blocking pool: planning
/// simulates every candidate (minutes at 5,000 nodes with a zone spread), and meanwhile the
/// lease is renewed and watches served.
async fn plan_off_runtime(
    inputs: &std::sync::Arc<consolidation::Inputs>,
    planner: fn(PlannerInput<'_>) -> driftwood_disruption::plan::DisruptionPlan,
    policy_caps: BTreeMap<String, driftwood_disruption::plan::PolicyCap>,
) -> driftwood_disruption::plan::DisruptionPlan {
    let inputs = std::sync::Arc::clone(inputs);
    super::off_runtime(move || {
        planner(PlannerInput {
            now: inputs.now,
            nodes: &inputs.views,
            pdb_allowed: &inputs.pdb_allowed,
            nodepools: &inputs.nodepools,
            world: inputs.world.clone(),
            policy_caps: &policy_caps,
        })
    })
    .await
}

/// Sets a repaired NodeClaim's drain deadline (Karpenter's termination-timestamp annotation,
/// [`repair_deadline`]) before it is deleted, so termination reads it from the start. Returns
/// the condition repaired, as the metric labels it.
async fn stamp_repair_deadline(
    ctx: &Context,
    snapshot: &Snapshot,
    name: &str,
) -> Result<String, kube::Error> {
    let Some(claim) = snapshot.store.nodeclaims.get(name) else {
        return Ok("unknown".to_string());
    };
    let node = snapshot.node_of(claim).map(AsRef::as_ref);
    let repair = repair_deadline(claim, node, ctx.cloud.repair_policies(), ctx.now_seconds());
    let deadline = jiff::Timestamp::from_second(repair.deadline)
        .unwrap_or_else(|_| ctx.clock.now())
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    modify(&ctx.state, &nodeclaims(&ctx.client), name, |c| {
        let annotations = c.metadata.annotations.get_or_insert_with(Default::default);
        let key = driftwood_api::wellknown::ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP;
        // An earlier deadline stands (e.g. EC2 reported the instance failing: now); as
        // Karpenter's health controller keeps one already passed.
        let earlier = annotations.get(key).is_some_and(|at| {
            at.parse::<jiff::Timestamp>()
                .is_ok_and(|at| at.as_second() <= repair.deadline)
        });
        if earlier {
            return false;
        }
        annotations.insert(key.to_string(), deadline.clone()) != Some(deadline.clone())
    })
    .await
    .map(|_| repair.condition)
}

/// Undoes a command: delete the replacements that never initialized, untaint the node, clear
/// DisruptionReason and the command annotations (the mark goes first, so a crash in between
/// leaves no command behind). Replacements that initialized stay as ordinary capacity; one that
/// never initialized holds no workload pods (its startup taints keep them off); one that did
/// and stays empty is consolidation's to reclaim.
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
