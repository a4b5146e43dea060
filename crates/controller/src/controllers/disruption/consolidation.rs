//! Running Karpenter's consolidation methods in the disruption loop: emptiness before drift,
//! multi-node then single-node consolidation after it, each off the async runtime within its
//! time bound, a found command held for the validation delay and re-checked before it starts.
//! Nothing is written until a command starts, so a restart simply plans again.

use super::start::{Start, start};
use crate::context::Context;
use crate::events::EventType;
use crate::metrics::Metrics;
use crate::state::Snapshot;
use driftwood_disruption::candidate::NodeView;
use driftwood_disruption::consolidation::balanced::{MoveKind, decision_label};
use driftwood_disruption::consolidation::{
    ConsolidationCommand, ConsolidationInput, Method, MethodOutcome, VALIDATION_DELAY_SECONDS,
    plan_emptiness, plan_multi_node, plan_single_node, validate,
};
use driftwood_disruption::world::PassWorld;
use driftwood_scheduling::SimulationInput;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How long multi-node consolidation searches (Karpenter's MultiNodeConsolidationTimeout).
pub const MULTI_NODE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long single-node consolidation searches (Karpenter's SingleNodeConsolidationTimeout).
pub const SINGLE_NODE_TIMEOUT: Duration = Duration::from_secs(180);
/// A consolidated cluster is looked at again after this long even if nothing changed
/// (Karpenter re-evaluates its consolidation state every 5 minutes).
pub const CONSOLIDATED_RECHECK_SECONDS: i64 = 300;

/// What a consolidation method looked at, and when: the cluster's consolidation signature and
/// the disruptions each NodePool's budgets allow for the method's reason. A method that found
/// nothing to do is not run again while both stay the same (for at most the recheck period).
///
/// Karpenter does not remember a search that budgets constrained (budgets could free up); here
/// the allowances are part of what is remembered, so such a search runs again exactly when an
/// allowance changes (a schedule opens, a node finishes disrupting) and not on every pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consolidated {
    signature: u64,
    allowed: Vec<(String, usize)>,
    at: i64,
}

impl Consolidated {
    /// What `method` would look at now.
    pub fn look(
        signature: u64,
        method: Method,
        views: &[NodeView],
        nodepools: &[driftwood_api::NodePool],
        now: i64,
    ) -> Self {
        let allowed =
            driftwood_disruption::candidate::pool_budgets(views, nodepools, method.reason(), now)
                .into_iter()
                .map(|b| (b.nodepool, b.allowed))
                .collect();
        Self {
            signature,
            allowed,
            at: now,
        }
    }

    /// Whether a method that found nothing in `self` would find nothing in `now` too: the same
    /// signature and allowances, within `recheck_seconds`.
    pub fn holds(&self, now: &Self, recheck_seconds: i64) -> bool {
        self.signature == now.signature
            && self.allowed == now.allowed
            && now.at - self.at < recheck_seconds
    }
}

/// A command found and waiting out its validation delay.
#[derive(Debug, Clone)]
pub struct Pending {
    pub command: ConsolidationCommand,
    /// When it is validated (UTC seconds).
    pub due: i64,
}

impl Pending {
    pub fn new(command: ConsolidationCommand, now: i64) -> Self {
        Self {
            command,
            due: now + VALIDATION_DELAY_SECONDS,
        }
    }
}

/// What the methods read, built once per pass (shared by the methods, never copied).
pub struct Inputs {
    pub now: i64,
    pub views: Vec<NodeView>,
    pub pdb_allowed: BTreeMap<String, i32>,
    pub nodepools: Vec<driftwood_api::NodePool>,
    pub world: SimulationInput,
    pub spot_to_spot: bool,
    /// `world` prepared for the consolidation methods, on first use: the same for each method
    /// and the validation of the pass, whose pending pods are scheduled once, not by each.
    pub prepared: OnceLock<PassWorld>,
}

impl Inputs {
    fn input(&self) -> ConsolidationInput<'_> {
        let world = self
            .prepared
            .get_or_init(|| PassWorld::of(&self.views, self.world.clone()))
            .clone();
        ConsolidationInput {
            now: self.now,
            nodes: &self.views,
            pdb_allowed: &self.pdb_allowed,
            nodepools: &self.nodepools,
            world,
            spot_to_spot: self.spot_to_spot,
        }
    }
}

/// Runs `method` over `inputs` off the runtime, timed into Karpenter's evaluation-duration
/// histogram; `unseen` are the NodePools single-node consolidation did not reach last time.
pub async fn run(
    ctx: &Context,
    inputs: &Arc<Inputs>,
    method: Method,
    unseen: Vec<String>,
) -> MethodOutcome {
    let inputs = Arc::clone(inputs);
    let began = Instant::now();
    let outcome = super::super::off_runtime(move || {
        // The time bound is of real computing time, like Karpenter's context deadline.
        let started = Instant::now();
        match method {
            Method::Emptiness => plan_emptiness(inputs.input()),
            Method::MultiNode => plan_multi_node(inputs.input(), &mut || {
                started.elapsed() > MULTI_NODE_TIMEOUT
            }),
            Method::SingleNode => plan_single_node(inputs.input(), &unseen, &mut || {
                started.elapsed() > SINGLE_NODE_TIMEOUT
            }),
        }
    })
    .await;
    let reason = method.reason().to_lowercase();
    Metrics::observe(
        &ctx.metrics.voluntary_disruption_evaluation_duration,
        &[
            ("reason", &reason),
            ("consolidation_type", method.consolidation_type()),
        ],
        began.elapsed().as_secs_f64(),
    );
    Metrics::set(
        &ctx.metrics.voluntary_disruption_eligible_nodes,
        &[("reason", &reason)],
        i64::try_from(outcome.eligible).unwrap_or(i64::MAX),
    );
    ctx.metrics
        .report_budgets(method.reason(), &outcome.budgets);
    if outcome.timed_out {
        Metrics::inc(
            &ctx.metrics.voluntary_disruption_consolidation_timeouts,
            &[("consolidation_type", method.consolidation_type())],
        );
        tracing::debug!(
            consolidation_type = method.consolidation_type(),
            "consolidation search stopped at its timeout"
        );
    }
    if let Some(command) = &outcome.command {
        let names: Vec<&str> = command
            .candidates
            .iter()
            .map(|d| d.nodeclaim.as_str())
            .collect();
        tracing::debug!(
            consolidation_type = method.consolidation_type(),
            decision = command.decision(),
            nodeclaims = %names.join(","),
            savings_per_hour = command.savings(),
            "consolidation command found; validating after {VALIDATION_DELAY_SECONDS}s"
        );
    }
    outcome
}

/// Records the moves a method scored as Karpenter does: each in
/// `karpenter_consolidation_moves_total`, each Balanced pool's score in
/// `karpenter_consolidation_score`, and a `ConsolidationApproved` event for each Balanced pool
/// that approved (on the Node and NodeClaim of a single-node move, on the NodePool of a
/// multi-node one).
pub async fn report_moves(ctx: &Context, snapshot: &Snapshot, outcome: &MethodOutcome) {
    for scored in &outcome.moves {
        let decision = decision_label(scored.approved);
        for pool in &scored.pools {
            Metrics::inc(
                &ctx.metrics.consolidation_moves,
                &[
                    ("decision", decision),
                    ("nodepool", &pool.nodepool),
                    ("policy", &pool.policy),
                ],
            );
            let Some(score) = pool.score else {
                continue;
            };
            tracing::debug!(
                nodepool = %pool.nodepool,
                score = score.value(),
                savings_fraction = score.savings_fraction,
                disruption_fraction = score.disruption_fraction,
                threshold = score.threshold(),
                approved = score.approved(),
                "consolidation score"
            );
            Metrics::observe(
                &ctx.metrics.consolidation_score,
                &[
                    ("decision", decision_label(score.approved())),
                    ("nodepool", &pool.nodepool),
                    ("policy", &pool.policy),
                ],
                score.value(),
            );
            if !score.approved() {
                continue;
            }
            let message = score.message();
            match scored.kind {
                MoveKind::Single => {
                    for (claim, node) in &scored.candidates {
                        if let Some(node) = node.as_ref().and_then(|n| snapshot.store.nodes.get(n))
                        {
                            ctx.events
                                .publish(
                                    node.as_ref(),
                                    EventType::Normal,
                                    "ConsolidationApproved",
                                    &message,
                                )
                                .await;
                        }
                        if let Some(claim) = snapshot.store.nodeclaims.get(claim) {
                            ctx.events
                                .publish(
                                    claim.as_ref(),
                                    EventType::Normal,
                                    "ConsolidationApproved",
                                    &message,
                                )
                                .await;
                        }
                    }
                }
                MoveKind::Multi => {
                    if let Some(nodepool) = snapshot.store.nodepools.get(pool.nodepool.as_str()) {
                        ctx.events
                            .publish(
                                nodepool.as_ref(),
                                EventType::Normal,
                                "ConsolidationApproved",
                                &message,
                            )
                            .await;
                    }
                }
            }
        }
    }
}

/// Validates `pending` against `inputs` (the cluster now) and starts it; returns whether it
/// started, and the errors of a start that failed (logged).
pub async fn validate_and_start(
    ctx: &Context,
    snapshot: &Snapshot,
    inputs: &Arc<Inputs>,
    pending: Pending,
) -> (bool, u32) {
    let command = pending.command;
    let method = command.method;
    let checked = {
        let inputs = Arc::clone(inputs);
        let command = command.clone();
        super::super::off_runtime(move || validate(&command, inputs.input())).await
    };
    let command = match checked {
        Ok(command) => command,
        Err(failure) => {
            Metrics::inc(
                &ctx.metrics.voluntary_disruption_failed_validations,
                &[("consolidation_type", method.consolidation_type())],
            );
            let names: Vec<&str> = command
                .candidates
                .iter()
                .map(|d| d.nodeclaim.as_str())
                .collect();
            tracing::info!(
                consolidation_type = method.consolidation_type(),
                validation = failure.kind(),
                nodeclaims = %names.join(","),
                reason = %failure,
                "abandoning consolidation attempt, command is no longer valid"
            );
            for d in &command.candidates {
                if let Some(claim) = snapshot.store.nodeclaims.get(&d.nodeclaim) {
                    ctx.events
                        .publish(
                            claim.as_ref(),
                            EventType::Normal,
                            "DisruptionBlocked",
                            &format!(
                                "Consolidation command abandoned at validation ({}): {failure}",
                                failure.kind()
                            ),
                        )
                        .await;
                }
            }
            return (false, 0);
        }
    };
    match start(ctx, snapshot, &Start::consolidation(&command)).await {
        Ok(()) => (true, 0),
        Err(error) => {
            let names: Vec<&str> = command
                .candidates
                .iter()
                .map(|d| d.nodeclaim.as_str())
                .collect();
            tracing::warn!(nodeclaims = %names.join(","), %error, "could not start consolidation command");
            (false, 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_api::NodePool;
    use serde_json::json;

    fn pool(nodes: &str) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {
                "disruption": {"budgets": [{"nodes": nodes}]},
                "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"}, "requirements": []}}
            }
        }))
        .expect("nodepool")
    }

    fn view(name: &str, disrupting: bool) -> NodeView {
        NodeView {
            nodeclaim: name.to_string(),
            nodepool: "default".to_string(),
            initialized: true,
            ready: true,
            disrupting,
            ..Default::default()
        }
    }

    /// A method that found nothing is skipped while the signature and its reason's allowances
    /// stay the same, and runs again when either moves or the recheck period has passed: a
    /// node finishing its disruption frees budget, so a budget-constrained search runs again.
    #[test]
    fn a_search_that_found_nothing_holds_until_signature_or_allowance_moves() {
        let pools = [pool("1")];
        let busy = [view("a", true), view("b", false)];
        let free = [view("a", false), view("b", false)];
        let last = Consolidated::look(7, Method::SingleNode, &busy, &pools, 1_000);
        let same = Consolidated::look(7, Method::SingleNode, &busy, &pools, 1_010);
        assert!(last.holds(&same, CONSOLIDATED_RECHECK_SECONDS));
        let freed = Consolidated::look(7, Method::SingleNode, &free, &pools, 1_010);
        assert_ne!(last.allowed, freed.allowed, "{last:?} {freed:?}");
        assert!(!last.holds(&freed, CONSOLIDATED_RECHECK_SECONDS));
        let changed = Consolidated::look(8, Method::SingleNode, &busy, &pools, 1_010);
        assert!(!last.holds(&changed, CONSOLIDATED_RECHECK_SECONDS));
        let later = Consolidated::look(
            7,
            Method::SingleNode,
            &busy,
            &pools,
            1_000 + CONSOLIDATED_RECHECK_SECONDS,
        );
        assert!(!last.holds(&later, CONSOLIDATED_RECHECK_SECONDS));
    }
}
