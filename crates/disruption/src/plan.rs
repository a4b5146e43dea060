//! The drift disruption planner: in one pass, choose as many drifted candidates as the
//! NodePools' budgets allow (empty nodes first, then oldest drift, taking NodePools in turn),
//! simulating each candidate's pods against the capacity left after those already chosen, and
//! decide per candidate: delete (its pods fit on existing capacity) or replace (with the new
//! NodeClaims the simulation opened). One failing candidate does not block the others.

use crate::budget::AllowedDisruptions;
use crate::candidate::{Blocked, NodeView, check_candidate};
use crate::summary::SummarizedWorld;
use crate::world::{PassWorld, reduced_nodes};
use driftwood_api::nodepool::NodePool;
use driftwood_api::wellknown::REASON_DRIFTED;
use driftwood_scheduling::{
    NewNodeClaim, PodConstraints, PoolCache, Shared, SimPod, SimulationInput, SimulationResult,
    schedule_cached,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

/// What to do with one chosen candidate.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Its pods fit on existing capacity (or it has none): delete it.
    Delete,
    /// Launch these NodeClaims first, then delete it.
    Replace(Vec<NewNodeClaim>),
}

impl Decision {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Replace(_) => "replace",
        }
    }
}

/// A disruption command for one candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub nodeclaim: String,
    pub node: Option<String>,
    pub nodepool: String,
    pub decision: Decision,
    /// The pods that must move.
    pub pods: Vec<String>,
    /// The drift reason and message.
    pub reason: String,
    pub message: String,
}

/// The outcome of one planning pass.
#[derive(Debug, Clone, PartialEq)]
pub struct DisruptionPlan {
    pub commands: Vec<Command>,
    /// Drifted nodes not chosen this pass, and why.
    pub blocked: Vec<(String, Blocked)>,
    /// The budget of each NodePool for the Drifted reason at the start of the pass.
    pub budgets: Vec<AllowedDisruptions>,
    /// Drifted nodes that passed the candidate filters (before budgets and simulation).
    pub eligible: usize,
}

/// Everything the planner reads.
pub struct PlannerInput<'a> {
    /// UTC seconds.
    pub now: i64,
    /// Every managed node.
    pub nodes: &'a [NodeView],
    /// disruptionsAllowed of each PodDisruptionBudget, by namespace/name.
    pub pdb_allowed: &'a BTreeMap<String, i32>,
    pub nodepools: &'a [NodePool],
    /// The cluster as the scheduling simulation sees it: every node with its bound pods, the
    /// NodePools with their instance types, the daemonsets; `pods` are the pods Pending now.
    pub world: SimulationInput,
    /// What each NodePool's rollout policy allows this pass, by NodePool (none: no cap).
    pub policy_caps: &'a BTreeMap<String, PolicyCap>,
}

/// The most disruptions a NodePool's rollout policy lets one pass start, and why no more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyCap {
    /// `usize::MAX` when only `only` restricts.
    pub cap: usize,
    /// Zone by zone: the zone whose nodes may start now and those nodes' NodeClaims; the
    /// pool's other candidates wait.
    pub only: Option<(String, BTreeSet<String>)>,
    /// Whether the policy stops the rollout until an operator acts.
    pub halts: bool,
    /// Why no more (the hold, or the wave's or rate's share when the pass uses it up).
    pub detail: String,
}

/// How a pass simulates its candidates. Every way gives the same plan; the tests compare them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Simulation {
    /// The fastest exact way: when no pod depends on other pods, a world of the candidate and
    /// the receiving nodes, with outcomes remembered by pod shapes; otherwise the receiving
    /// nodes and summaries of the others ([`crate::summary`]).
    Reduced,
    /// Each candidate against the world of the candidate and the receiving nodes (no memo)
    /// when no pod depends on other pods, else against every node of the cluster.
    Whole,
}

/// Plans one pass of drift disruption.
pub fn plan_drift(input: PlannerInput<'_>) -> DisruptionPlan {
    plan_drift_with(input, Simulation::Reduced)
}

/// [`plan_drift`], simulating one way or the other (the tests and benchmarks compare both).
pub fn plan_drift_with(input: PlannerInput<'_>, simulation: Simulation) -> DisruptionPlan {
    let paused: BTreeSet<&str> = input
        .nodepools
        .iter()
        .filter(|p| p.rollout_paused())
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    let pdb_allowed = input.pdb_allowed;
    let method = MethodSpec {
        reason: REASON_DRIFTED,
        not_ready_disrupts: true,
        finding: &|view: &NodeView| {
            view.drift.as_ref().map(|(since, d)| Finding {
                since: *since,
                reason: d.reason.clone(),
                message: d.message.clone(),
            })
        },
        check: &|view: &NodeView| {
            check_candidate(view, pdb_allowed).and_then(|()| {
                if paused.contains(view.nodepool.as_str()) {
                    Err(Blocked::Paused {
                        nodepool: view.nodepool.clone(),
                    })
                } else {
                    Ok(())
                }
            })
        },
        empty_first: true,
    };
    plan_method(input, &method, simulation)
}

/// Why a method would disrupt a node: since when (UTC seconds), the reason and message its
/// command carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub since: i64,
    pub reason: String,
    pub message: String,
}

/// What a method that replaces nodes one by one (drift, repair) plans from: its budget reason;
/// whether NotReady nodes count as disrupting in its budget (not for repair: the NotReady nodes
/// are what it replaces); each node's finding (since when, reason, message: none when the node
/// is not the method's); the candidate check; whether empty nodes go first.
pub(crate) struct MethodSpec<'a> {
    pub reason: &'static str,
    pub not_ready_disrupts: bool,
    pub finding: &'a dyn Fn(&NodeView) -> Option<Finding>,
    pub check: &'a dyn Fn(&NodeView) -> Result<(), Blocked>,
    pub empty_first: bool,
}

/// Plans one pass of `method`: candidates ordered per pool (empty first if asked, then the
/// oldest finding), taken NodePools in turn while the budgets allow, each simulated against the
/// capacity left by those chosen before.
pub(crate) fn plan_method(
    input: PlannerInput<'_>,
    method: &MethodSpec<'_>,
    simulation: Simulation,
) -> DisruptionPlan {
    let PlannerInput {
        now,
        nodes,
        pdb_allowed: _,
        nodepools,
        mut world,
        policy_caps,
    } = input;
    let pending = std::mem::take(&mut world.pods);

    // Budgets per NodePool, over the nodes that remain and those already disrupting.
    let budgets = crate::candidate::pool_budgets_counting(
        nodes,
        nodepools,
        method.reason,
        now,
        method.not_ready_disrupts,
    );
    let mut allowance: BTreeMap<&str, usize> = budgets
        .iter()
        .map(|b| (b.nodepool.as_str(), b.allowed))
        .collect();
    // The rollout policies' caps, spent alongside the budgets (the smaller wins).
    let mut policy_left: BTreeMap<&str, usize> = policy_caps
        .iter()
        .map(|(pool, cap)| (pool.as_str(), cap.cap))
        .collect();

    let PassWorld {
        mut world,
        index,
        independent,
        targets,
        ..
    } = PassWorld::prepare(nodes, world, pending);

    // Candidates: the method's and eligible, ordered per pool.
    let mut blocked = Vec::new();
    let mut per_pool: BTreeMap<&str, Vec<(&NodeView, Finding)>> = BTreeMap::new();
    for view in nodes {
        let Some(finding) = (method.finding)(view) else {
            continue;
        };
        match (method.check)(view) {
            Ok(()) => per_pool
                .entry(view.nodepool.as_str())
                .or_default()
                .push((view, finding)),
            Err(reason) => blocked.push((view.nodeclaim.clone(), reason)),
        }
    }
    let eligible = per_pool.values().map(Vec::len).sum();
    for candidates in per_pool.values_mut() {
        candidates.sort_by_key(|(n, finding)| {
            let has_pods = method.empty_first && n.pods.iter().any(|p| p.reschedulable);
            (has_pods, finding.since, n.nodeclaim.clone())
        });
    }
    let findings: HashMap<&str, (String, String)> = per_pool
        .values()
        .flatten()
        .map(|(n, f)| (n.nodeclaim.as_str(), (f.reason.clone(), f.message.clone())))
        .collect();
    let ordered = round_robin(
        per_pool
            .into_iter()
            .map(|(pool, list)| (pool, list.into_iter().map(|(n, _)| n).collect()))
            .collect(),
    );

    let mut commands = Vec::new();
    let mut memo = MoveMemo::default();
    // The NodePools prepared once for all the pass's simulations.
    let mut pools = PoolCache::default();
    // Pods that depend on other pods: the receiving nodes whole, the others summarised (built
    // when the first candidate with pods is simulated).
    let mut summarized: Option<SummarizedWorld> = None;
    let reduced = simulation == Simulation::Reduced;
    for view in ordered {
        let left = allowance.get(view.nodepool.as_str()).copied().unwrap_or(0);
        if left == 0 {
            let detail = budgets
                .iter()
                .find(|b| b.nodepool == view.nodepool)
                .map(ToString::to_string)
                .unwrap_or_else(|| format!("nodepool {:?} not found", view.nodepool));
            blocked.push((
                view.nodeclaim.clone(),
                Blocked::Budget {
                    reason: method.reason,
                    nodepool: view.nodepool.clone(),
                    detail,
                },
            ));
            continue;
        }
        let policy_allows = policy_left.get(view.nodepool.as_str()).copied();
        if let Some(cap) = policy_caps.get(view.nodepool.as_str())
            && let Some((zone, members)) = &cap.only
            && !members.contains(&view.nodeclaim)
        {
            blocked.push((
                view.nodeclaim.clone(),
                Blocked::Policy {
                    nodepool: view.nodepool.clone(),
                    halts: false,
                    detail: format!("zone by zone: the nodes of zone {zone} first"),
                },
            ));
            continue;
        }
        if policy_allows == Some(0) {
            let cap = &policy_caps[view.nodepool.as_str()];
            blocked.push((
                view.nodeclaim.clone(),
                Blocked::Policy {
                    nodepool: view.nodepool.clone(),
                    halts: cap.halts,
                    detail: cap.detail.clone(),
                },
            ));
            continue;
        }
        let (reason, message) = findings
            .get(view.nodeclaim.as_str())
            .cloned()
            .unwrap_or_default();
        let pods: Vec<String> = view
            .pods
            .iter()
            .filter(|p| p.reschedulable)
            .map(|p| p.key.clone())
            .collect();
        let world_index = view.node.as_ref().and_then(|n| index.get(n)).copied();
        let decision = if pods.is_empty() {
            Decision::Delete
        } else {
            let Some(i) = world_index else {
                let error = "its node is not in the cluster snapshot".to_string();
                blocked.push((view.nodeclaim.clone(), Blocked::Simulation { error }));
                continue;
            };
            let outcome = if independent && reduced {
                memo.simulate(&mut world, &index, &targets, i, &mut pools)
            } else if !independent && reduced {
                let summary = summarized.get_or_insert_with(|| SummarizedWorld::new(&world));
                // The summaries cannot answer for a pod that tolerates the disrupted taint: the
                // whole world is simulated for it. Placements are recorded in both either way.
                let result = match summary.simulate(&world, i) {
                    Some(result) => result,
                    None => simulate_removal_of(&mut world, &targets, i, independent, &mut pools),
                };
                apply_move(&mut world, &index, i, result).map(|(decision, placed)| {
                    for (j, pod) in placed {
                        summary.place(j, pod);
                    }
                    decision
                })
            } else {
                simulate_move(&mut world, &index, &targets, i, independent, &mut pools).0
            };
            match outcome {
                Ok(decision) => decision,
                Err(reason) => {
                    blocked.push((view.nodeclaim.clone(), reason));
                    continue;
                }
            }
        };
        if let Some(i) = world_index {
            // The candidate is gone for every later simulation.
            Arc::make_mut(&mut world.existing_nodes[i])
                .pods
                .retain(|p| p.is_daemonset);
            if let Some(summary) = summarized.as_mut() {
                summary.empty(i);
            }
        }
        allowance.insert(view.nodepool.as_str(), left - 1);
        if let Some(n) = policy_allows {
            policy_left.insert(view.nodepool.as_str(), n.saturating_sub(1));
        }
        commands.push(Command {
            nodeclaim: view.nodeclaim.clone(),
            node: view.node.clone(),
            nodepool: view.nodepool.clone(),
            decision,
            pods,
            reason,
            message,
        });
    }
    blocked.sort_by(|a, b| a.0.cmp(&b.0));
    DisruptionPlan {
        commands,
        blocked,
        budgets,
        eligible,
    }
}

/// Simulates moving the pods of `world.existing_nodes[i]` elsewhere. On success the placements
/// onto existing nodes are applied to `world` (so later candidates see that capacity used).
///
/// When no pod in the cluster depends on other pods (`independent`), only the candidate and the
/// nodes that can receive pods affect the outcome, so the simulation runs on that smaller
/// world — exact, and what keeps a pass over thousands of drifted nodes fast.
fn simulate_move(
    world: &mut SimulationInput,
    index: &BTreeMap<String, usize>,
    targets: &[usize],
    i: usize,
    independent: bool,
    pools: &mut PoolCache,
) -> (Result<Decision, Blocked>, bool) {
    match simulate_move_inner(world, index, targets, i, independent, pools) {
        Ok((decision, changed)) => (Ok(decision), changed),
        Err(blocked) => (Err(blocked), false),
    }
}

/// [`simulate_move`]'s work; also says whether pods were placed on existing nodes (the world
/// changed).
fn simulate_move_inner(
    world: &mut SimulationInput,
    index: &BTreeMap<String, usize>,
    targets: &[usize],
    i: usize,
    independent: bool,
    pools: &mut PoolCache,
) -> Result<(Decision, bool), Blocked> {
    let result = simulate_removal_of(world, targets, i, independent, pools);
    let (decision, placed) = apply_move(world, index, i, result)?;
    Ok((decision, !placed.is_empty()))
}

/// Simulates removing `world.existing_nodes[i]`, in the reduced world of the candidate and the
/// receiving nodes (`targets`, positions) when no pod depends on other pods (`independent`),
/// else in the whole world.
fn simulate_removal_of(
    world: &mut SimulationInput,
    targets: &[usize],
    i: usize,
    independent: bool,
    pools: &mut PoolCache,
) -> Result<SimulationResult, driftwood_scheduling::SimulationError> {
    if independent {
        // The reduced world borrows everything but the nodes from the whole one (the NodePools
        // with their instance types are not copied per candidate), and shares those: only the
        // candidate is copied, to mark it.
        let reduced = reduced_nodes(world, targets, &[i]);
        let whole = std::mem::replace(&mut world.existing_nodes, reduced);
        let result = schedule_cached(world, pools);
        world.existing_nodes = whole;
        result
    } else {
        Arc::make_mut(&mut world.existing_nodes[i]).going_away = true;
        let result = schedule_cached(world, pools);
        Arc::make_mut(&mut world.existing_nodes[i]).going_away = false;
        result
    }
}

/// Reads the simulation of removing `world.existing_nodes[i]`: blocked when a pod fits
/// nowhere; else the decision, with the placements onto existing nodes applied to `world` (so
/// later candidates see that capacity used) and returned as (position, pod).
fn apply_move(
    world: &mut SimulationInput,
    index: &BTreeMap<String, usize>,
    i: usize,
    result: Result<SimulationResult, driftwood_scheduling::SimulationError>,
) -> Result<(Decision, Vec<(usize, SimPod)>), Blocked> {
    let result = result.map_err(|e| Blocked::Simulation {
        error: e.to_string(),
    })?;
    if !result.unschedulable.is_empty() {
        return Err(Blocked::PodsFitNowhere {
            pods: result
                .unschedulable
                .iter()
                .map(|u| (u.pod.clone(), u.reason.clone()))
                .collect(),
        });
    }
    let moving: BTreeMap<String, _> = world.existing_nodes[i]
        .pods
        .iter()
        .filter(|p| !p.is_daemonset)
        .map(|p| (p.key.clone(), p.clone()))
        .collect();
    let mut placed = Vec::new();
    for placement in &result.existing_placements {
        if let (Some(pod), Some(&j)) = (moving.get(&placement.pod), index.get(&placement.node)) {
            Arc::make_mut(&mut world.existing_nodes[j])
                .pods
                .push(pod.clone());
            placed.push((j, pod.clone()));
        }
    }
    Ok((
        if result.new_nodeclaims.is_empty() {
            Decision::Delete
        } else {
            Decision::Replace(result.new_nodeclaims)
        },
        placed,
    ))
}

/// Everything about a pod the simulation looks at, apart from its name.
type Shape = (BTreeMap<String, i64>, i32, Shared<PodConstraints>);

/// The movable pods of a candidate in a canonical order (by shape, then key), with their shapes.
fn canonical(pods: &[SimPod]) -> (Vec<Shape>, Vec<String>) {
    let mut pods: Vec<(Shape, &str)> = pods
        .iter()
        .filter(|p| !p.is_daemonset)
        .map(|p| {
            (
                (p.requests.0.clone(), p.priority, p.constraints.clone()),
                p.key.as_str(),
            )
        })
        .collect();
    pods.sort();
    pods.into_iter()
        .map(|(shape, key)| (shape, key.to_string()))
        .unzip()
}

/// A remembered outcome: the pod keys it was simulated with (canonical order) and the outcome.
type Remembered = (Vec<String>, Result<Decision, Blocked>);

/// The outcomes of simulations of independent pods (no pod depends on another), by the shapes
/// of the candidate's movable pods. Such an outcome depends only on those shapes, the nodes
/// that can receive pods and the NodePools, so it holds for any later candidate with the same
/// shapes until a simulation places pods on existing nodes (then the memo is cleared). A fleet
/// rolled by Deployments has many nodes with the same mix of pods: one simulation answers them
/// all.
#[derive(Default)]
struct MoveMemo {
    outcomes: HashMap<Vec<Shape>, Remembered>,
}

impl MoveMemo {
    fn simulate(
        &mut self,
        world: &mut SimulationInput,
        index: &BTreeMap<String, usize>,
        targets: &[usize],
        i: usize,
        pools: &mut PoolCache,
    ) -> Result<Decision, Blocked> {
        let (shapes, keys) = canonical(&world.existing_nodes[i].pods);
        if let Some((seen_keys, outcome)) = self.outcomes.get(&shapes) {
            let rename: BTreeMap<&str, &str> = seen_keys
                .iter()
                .map(String::as_str)
                .zip(keys.iter().map(String::as_str))
                .collect();
            return renamed(outcome, &rename);
        }
        let (outcome, changed) = simulate_move(world, index, targets, i, true, pools);
        if changed {
            self.outcomes.clear();
        } else {
            self.outcomes.insert(shapes, (keys, outcome.clone()));
        }
        outcome
    }
}

/// `outcome` with its pod keys renamed (pods of the same shape are interchangeable).
fn renamed(
    outcome: &Result<Decision, Blocked>,
    rename: &BTreeMap<&str, &str>,
) -> Result<Decision, Blocked> {
    let key = |k: &String| {
        rename
            .get(k.as_str())
            .map_or_else(|| k.clone(), |n| n.to_string())
    };
    match outcome {
        Ok(Decision::Delete) => Ok(Decision::Delete),
        Ok(Decision::Replace(claims)) => Ok(Decision::Replace(
            claims
                .iter()
                .map(|c| NewNodeClaim {
                    pods: c.pods.iter().map(key).collect(),
                    ..c.clone()
                })
                .collect(),
        )),
        Err(Blocked::PodsFitNowhere { pods }) => Err(Blocked::PodsFitNowhere {
            pods: pods.iter().map(|(p, why)| (key(p), why.clone())).collect(),
        }),
        Err(other) => Err(other.clone()),
    }
}

/// Takes one candidate from each NodePool in turn (pools whose first candidate drifted
/// earliest go first), so no pool's rollout starves another's.
fn round_robin<'a>(per_pool: BTreeMap<&str, Vec<&'a NodeView>>) -> Vec<&'a NodeView> {
    let mut queues: Vec<VecDeque<&NodeView>> = per_pool.into_values().map(VecDeque::from).collect();
    queues.sort_by_key(|q| {
        q.front()
            .and_then(|n| n.drift.as_ref().map(|(since, _)| *since))
    });
    let mut out = Vec::new();
    while queues.iter().any(|q| !q.is_empty()) {
        for queue in &mut queues {
            if let Some(view) = queue.pop_front() {
                out.push(view);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidate::PodView;
    use crate::drift::DriftFinding;
    use crate::world::node_index;
    use driftwood_api::nodepool::{Budget, NodePoolSpec};
    use driftwood_api::wellknown::TAINT_DISRUPTED_KEY;
    use driftwood_scheduling::resources::{CPU, MEMORY, PODS};
    use driftwood_scheduling::testkit::{self, GIB};
    use driftwood_scheduling::{ExistingNode, Requirements, Resources};
    use driftwood_scheduling::{Taint, TaintEffect};

    const ZONE: &str = "test-zone-1";

    struct Cluster {
        views: Vec<NodeView>,
        world: SimulationInput,
        pools: Vec<NodePool>,
    }

    impl Cluster {
        fn new() -> Self {
            let mut spec = testkit::nodepool("default", testkit::fake_instance_types(16));
            spec.labels = testkit::labels(&[("karpenter.sh/nodepool", "default")]);
            let other = testkit::nodepool("other", testkit::fake_instance_types(16));
            Self {
                views: Vec::new(),
                world: SimulationInput {
                    nodepools: vec![spec, other],
                    ..Default::default()
                },
                pools: vec![pool("default", "10%"), pool("other", "10%")],
            }
        }

        /// A 4-core node of `nodepool` with `pods` pods of 1 core each; drifted at `drifted`.
        fn node(&mut self, name: &str, nodepool: &str, pods: usize, drifted: Option<i64>) {
            let sim_pods: Vec<_> = (0..pods)
                .map(|i| testkit::pod(&format!("default/{name}-{i}"), 1000, GIB))
                .collect();
            self.world.existing_nodes.push(Arc::new(ExistingNode {
                name: name.into(),
                labels: testkit::labels(&[
                    ("kubernetes.io/hostname", name),
                    ("topology.kubernetes.io/zone", ZONE),
                    ("karpenter.sh/nodepool", nodepool),
                    ("karpenter.sh/capacity-type", "on-demand"),
                    ("node.kubernetes.io/instance-type", "fake-it-3"),
                    ("kubernetes.io/arch", "amd64"),
                    ("kubernetes.io/os", "linux"),
                ]),
                allocatable: Resources::from_milli([
                    (CPU, 4000),
                    (MEMORY, 16 * GIB * 1000),
                    (PODS, 110_000),
                ]),
                pods: sim_pods.clone(),
                initialized: true,
                ..Default::default()
            }));
            self.views.push(NodeView {
                nodeclaim: format!("nc-{name}"),
                node: Some(name.into()),
                nodepool: nodepool.into(),
                initialized: true,
                ready: true,
                drift: drifted.map(|t| {
                    (
                        t,
                        DriftFinding {
                            reason: "AMIDrift".into(),
                            message: "ami-old → ami-new".into(),
                        },
                    )
                }),
                pods: sim_pods
                    .iter()
                    .map(|p| PodView {
                        key: p.key.clone(),
                        reschedulable: true,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            });
        }

        fn plan(&self) -> DisruptionPlan {
            plan_drift(PlannerInput {
                now: 1_000_000,
                nodes: &self.views,
                pdb_allowed: &BTreeMap::new(),
                policy_caps: &BTreeMap::new(),
                nodepools: &self.pools,
                world: self.world.clone(),
            })
        }
    }

    impl Cluster {
        /// Marks `name`'s node unhealthy since `since` (Ready=False), due after 30 minutes.
        fn unhealthy(&mut self, name: &str, since: i64) {
            let view = self
                .views
                .iter_mut()
                .find(|v| v.node.as_deref() == Some(name))
                .expect("node");
            view.ready = false;
            view.unhealthy = Some(crate::repair::Unhealthy {
                condition: "Ready=False".into(),
                condition_type: "Ready".into(),
                since,
                due_at: since + 1800,
                termination_grace_seconds: Some(600),
            });
        }

        fn repair(&self) -> DisruptionPlan {
            crate::repair::plan_repair(PlannerInput {
                now: 1_000_000,
                nodes: &self.views,
                pdb_allowed: &BTreeMap::new(),
                policy_caps: &BTreeMap::new(),
                nodepools: &self.pools,
                world: self.world.clone(),
            })
        }
    }

    /// Node repair as a voluntary disruption (Karpenter v1.15): a node unhealthy past its
    /// toleration is replaced with reason Unhealthy, its pods given new capacity first; one not
    /// yet due is not; `karpenter.sh/do-not-repair` vetoes it while `do-not-disrupt` does not;
    /// the default 10% budget of ten nodes allows one repair although the node is NotReady (it
    /// does not count as disrupting for this reason); a budget of 0 for Unhealthy holds it and
    /// leaves drift's budget alone; three unhealthy nodes of ten (over 20%) stop repair in the
    /// pool (Karpenter's "should ignore unhealthy nodes if more then 20% of the nodes are
    /// unhealthy in a nodepool").
    #[test]
    fn unhealthy_nodes_are_replaced_within_their_own_budget_and_threshold() {
        let mut cluster = Cluster::new();
        for i in 0..10 {
            cluster.node(&format!("n{i}"), "default", 2, None);
        }
        cluster.unhealthy("n0", 1_000_000 - 1800);
        cluster.unhealthy("n1", 1_000_000 - 60);
        let plan = cluster.repair();
        assert_eq!(chosen(&plan), ["nc-n0"], "{plan:?}");
        let command = &plan.commands[0];
        assert_eq!(command.reason, "Unhealthy");
        assert!(
            command.message.starts_with("Ready=False since "),
            "{}",
            command.message
        );
        assert!(
            matches!(&command.decision, Decision::Replace(r) if !r.is_empty())
                || command.decision == Decision::Delete
        );
        assert_eq!(plan.budgets[0].reason, "Unhealthy");
        assert_eq!(plan.budgets[0].allowed, 1, "{}", plan.budgets[0]);

        cluster.views[0].do_not_disrupt = Some("Node");
        assert_eq!(
            chosen(&cluster.repair()),
            ["nc-n0"],
            "do-not-disrupt does not block repair"
        );
        cluster.views[0].do_not_repair = true;
        let vetoed = cluster.repair();
        assert!(vetoed.commands.is_empty());
        assert_eq!(
            vetoed.blocked,
            [("nc-n0".to_string(), Blocked::DoNotRepair)]
        );
        cluster.views[0].do_not_repair = false;

        cluster.pools[0].spec.disruption.budgets = vec![
            Budget {
                nodes: "0".into(),
                reasons: Some(vec!["Unhealthy".into()]),
                ..Default::default()
            },
            Budget {
                nodes: "10%".into(),
                ..Default::default()
            },
        ];
        let held = cluster.repair();
        assert!(held.commands.is_empty());
        assert!(
            held.blocked[0]
                .1
                .to_string()
                .contains("disruption reason Unhealthy"),
            "{}",
            held.blocked[0].1
        );
        cluster.pools[0].spec.disruption.budgets = vec![Budget {
            nodes: "10%".into(),
            ..Default::default()
        }];

        cluster.unhealthy("n2", 1_000_000 - 60);
        let stopped = cluster.repair();
        assert!(stopped.commands.is_empty());
        assert!(matches!(
            &stopped.blocked[0].1,
            Blocked::RepairThreshold { message } if message == "more than 20% of nodes in nodepool \"default\" are unhealthy"
        ));
    }

    fn pool(name: &str, nodes: &str) -> NodePool {
        let mut np = NodePool::new(name, NodePoolSpec::default());
        np.spec.disruption.budgets = vec![Budget {
            nodes: nodes.into(),
            ..Default::default()
        }];
        np
    }

    fn chosen(plan: &DisruptionPlan) -> Vec<&str> {
        plan.commands.iter().map(|c| c.nodeclaim.as_str()).collect()
    }

    /// Karpenter: "won't delete node if it would require pods to schedule on an uninitialized
    /// node" — and driftwood issue 14: after a rollback, the never-initialized replacement must
    /// not count as the place for the old node's pods (that deleted both old nodes with no
    /// replacement). The plan is a Replace, with new capacity.
    #[test]
    fn an_uninitialized_node_is_no_destination() {
        let mut cluster = Cluster::new();
        cluster.node("old", "default", 2, Some(100));
        cluster.node("stuck", "default", 0, None);
        Arc::make_mut(&mut cluster.world.existing_nodes[1]).initialized = false;
        cluster.views[1].initialized = false;
        let plan = cluster.plan();
        assert_eq!(chosen(&plan), ["nc-old"]);
        assert!(
            matches!(&plan.commands[0].decision, Decision::Replace(r) if !r.is_empty()),
            "{:?}",
            plan.commands[0].decision
        );
        // Once it initialized, it is a destination and the pods just move: Delete.
        Arc::make_mut(&mut cluster.world.existing_nodes[1]).initialized = true;
        cluster.views[1].initialized = true;
        assert_eq!(cluster.plan().commands[0].decision, Decision::Delete);
    }

    /// Pods Pending now take the room they would get before any candidate's pods look for it,
    /// so a drift Delete never strands them (issue 14: no pod Pending longer than a launch).
    #[test]
    fn pending_pods_take_room_before_candidates() {
        let mut cluster = Cluster::new();
        cluster.node("old", "default", 2, Some(100));
        cluster.node("spare", "default", 2, None); // 2 of 4 cores free
        assert_eq!(cluster.plan().commands[0].decision, Decision::Delete);
        cluster.world.pods = vec![
            testkit::pod("default/pending-0", 1000, GIB),
            testkit::pod("default/pending-1", 1000, GIB),
        ];
        let plan = cluster.plan();
        assert!(
            matches!(&plan.commands[0].decision, Decision::Replace(r) if !r.is_empty()),
            "{:?}",
            plan.commands[0].decision
        );
    }

    /// Karpenter's SimulateScheduling includes the pods of nodes being deleted: they need room
    /// as much as the candidate's do.
    #[test]
    fn pods_of_leaving_nodes_take_room_before_candidates() {
        let mut cluster = Cluster::new();
        cluster.node("old", "default", 2, Some(100));
        cluster.node("spare", "default", 2, None);
        cluster.node("going", "default", 2, None);
        let plan = cluster.plan();
        assert_eq!(plan.commands.len(), 1, "{:?}", plan.blocked);
        assert_eq!(plan.commands[0].decision, Decision::Delete);
        cluster.views[2].deleting = true;
        cluster.pools[0] = pool("default", "100%"); // the leaving node uses no budget here
        let plan = cluster.plan();
        assert!(
            matches!(&plan.commands[0].decision, Decision::Replace(r) if !r.is_empty()),
            "{:?}",
            plan.commands[0].decision
        );
    }

    #[test]
    fn fills_the_whole_budget_in_one_pass() {
        let mut cluster = Cluster::new();
        for i in 0..30 {
            cluster.node(&format!("n{i:02}"), "default", 3, Some(100 + i));
        }
        let plan = cluster.plan();
        assert_eq!(plan.budgets[0].allowed, 3);
        assert_eq!(
            chosen(&plan),
            ["nc-n00", "nc-n01", "nc-n02"],
            "oldest drift first"
        );
        assert!(
            plan.commands
                .iter()
                .all(|c| matches!(&c.decision, Decision::Replace(r) if !r.is_empty()))
        );
        assert_eq!(plan.eligible, 30);
        assert_eq!(plan.blocked.len(), 27);
        assert!(
            plan.blocked
                .iter()
                .all(|(_, b)| matches!(b, Blocked::Budget { .. }))
        );
        assert!(
            plan.blocked[0]
                .1
                .to_string()
                .contains("budget[0] (nodes: \"10%\") allows 3"),
            "{}",
            plan.blocked[0].1
        );
    }

    #[test]
    fn disrupting_nodes_count_against_the_budget() {
        let mut cluster = Cluster::new();
        for i in 0..30 {
            cluster.node(&format!("n{i:02}"), "default", 3, Some(100 + i));
        }
        cluster.views[0].disrupting = true;
        cluster.views[1].deleting = true;
        let plan = cluster.plan();
        assert_eq!(chosen(&plan), ["nc-n02"]);
    }

    #[test]
    fn empty_nodes_go_first_and_are_deleted() {
        let mut cluster = Cluster::new();
        for i in 0..9 {
            cluster.node(&format!("n{i}"), "default", 2, Some(100 + i));
        }
        cluster.node("empty", "default", 0, Some(999));
        let plan = cluster.plan();
        assert_eq!(plan.budgets[0].allowed, 1);
        assert_eq!(chosen(&plan), ["nc-empty"]);
        assert_eq!(plan.commands[0].decision, Decision::Delete);
    }

    #[test]
    fn pods_that_fit_on_spare_capacity_mean_delete_and_the_capacity_is_used_up() {
        let mut cluster = Cluster::new();
        cluster.pools = vec![pool("default", "100%"), pool("other", "100%")];
        cluster.node("spare", "default", 1, None); // 3 free cores
        cluster.node("a", "default", 2, Some(1));
        cluster.node("b", "default", 2, Some(2));
        let plan = cluster.plan();
        assert_eq!(chosen(&plan), ["nc-a", "nc-b"]);
        assert_eq!(
            plan.commands[0].decision,
            Decision::Delete,
            "a's 2 pods fit on spare"
        );
        assert!(
            matches!(&plan.commands[1].decision, Decision::Replace(_)),
            "spare has 1 core left for b's 2"
        );
    }

    #[test]
    fn drifted_nodes_are_not_targets() {
        let mut cluster = Cluster::new();
        cluster.pools = vec![pool("default", "1"), pool("other", "1")];
        cluster.node("a", "default", 1, Some(1));
        cluster.node("b", "default", 0, Some(2)); // drifted and empty, but must not receive a's pod
        cluster.pools[0].spec.disruption.budgets[0].nodes = "1".into();
        let plan = cluster.plan();
        // b is empty so goes first and alone (budget 1).
        assert_eq!(chosen(&plan), ["nc-b"]);
        cluster.views.retain(|v| v.nodeclaim != "nc-b");
        cluster.world.existing_nodes.retain(|n| n.name != "b");
        cluster.node("c", "default", 0, Some(3));
        cluster.views.last_mut().unwrap().initialized = false; // still launching
        let plan = cluster.plan();
        assert_eq!(chosen(&plan), ["nc-a"]);
        assert!(matches!(&plan.commands[0].decision, Decision::Replace(_)));
    }

    #[test]
    fn one_failing_candidate_does_not_block_the_others() {
        let mut cluster = Cluster::new();
        cluster.pools = vec![pool("default", "100%"), pool("other", "100%")];
        cluster.node("a", "default", 1, Some(1));
        cluster.node("b", "default", 1, Some(2));
        // a's pod needs a label no NodePool offers.
        let pod = &mut Arc::make_mut(&mut cluster.world.existing_nodes[0]).pods[0];
        pod.constraints.node_selector =
            Requirements::from_labels(&testkit::labels(&[("example.com/special", "yes")]));
        let plan = cluster.plan();
        assert_eq!(chosen(&plan), ["nc-b"]);
        assert_eq!(plan.blocked.len(), 1);
        assert!(
            matches!(&plan.blocked[0].1, Blocked::PodsFitNowhere { pods } if pods[0].0 == "default/a-0")
        );
        assert!(
            plan.blocked[0].1.to_string().starts_with(
                "Cannot disrupt NodeClaim: not all pods would schedule, default/a-0 => "
            )
        );
    }

    /// The memo of simulation outcomes changes nothing: generated fleets (mixed pod counts and
    /// sizes, some nodes not drifted and able to take pods, pods that fit nowhere) plan the same
    /// commands and blocks with and without it.
    #[test]
    fn memoized_planning_matches_simulating_every_candidate() {
        for seed in 0..40u64 {
            let mut cluster = Cluster::new();
            cluster.pools[0].spec.disruption.budgets[0].nodes =
                ["100%", "50%", "3"][seed as usize % 3].into();
            let mut next =
                driftwood_scheduling::testkit::seeded(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            for i in 0..12 {
                let pods = next(4) as usize;
                let drifted = (next(4) != 0).then_some(i as i64);
                cluster.node(&format!("n{i:02}"), "default", pods, drifted);
                let node = Arc::make_mut(cluster.world.existing_nodes.last_mut().unwrap());
                for pod in &mut node.pods {
                    match next(5) {
                        0 => std::sync::Arc::make_mut(&mut pod.requests)
                            .set(driftwood_scheduling::resources::CPU, 2000),
                        1 => {
                            pod.constraints.node_selector = Requirements::from_labels(
                                &testkit::labels(&[("example.com/special", "yes")]),
                            )
                        }
                        _ => {}
                    }
                }
            }
            let none = BTreeMap::new();
            let no_caps = BTreeMap::new();
            let input = || PlannerInput {
                now: 0,
                nodes: &cluster.views,
                pdb_allowed: &none,
                policy_caps: &no_caps,
                nodepools: &cluster.pools,
                world: cluster.world.clone(),
            };
            let memoized = plan_drift_with(input(), Simulation::Reduced);
            let simulated = plan_drift_with(input(), Simulation::Whole);
            assert_eq!(memoized.commands, simulated.commands, "seed {seed}");
            assert_eq!(memoized.blocked, simulated.blocked, "seed {seed}");
        }
    }

    /// A pod of one of the generated workloads: each names a topology rule the planner must
    /// honour (zone spread hard and soft, hostname spread, hostname and zone anti-affinity,
    /// zone affinity, zone anti-affinity against another app's tier), or none; a few tolerate
    /// every taint or are pinned by hostname, which the summarised world hands back to the whole
    /// one.
    fn workload_pod(pod: &mut SimPod, kind: u64, node: &str) {
        use driftwood_scheduling::pod::NamespaceSelection;
        use driftwood_scheduling::{PodAffinityTerm, Toleration, TopologySpread};
        let app = [
            "web", "api", "cache", "db", "batch", "pinned", "lonely", "any", "mine", "guard",
        ][kind as usize % 10];
        let tier = if app == "web" || app == "api" {
            "front"
        } else {
            "back"
        };
        pod.constraints.labels =
            testkit::labels(&[("app", app), ("tier", tier), ("pod-template-hash", node)]);
        let selector =
            |app: &str| Some(Requirements::from_labels(&testkit::labels(&[("app", app)])));
        let spread = |key: &str, hard: bool| TopologySpread {
            topology_key: key.into(),
            max_skew: 1,
            hard,
            selector: selector(app),
            min_domains: None,
        };
        let term = |key: &str, app: &str| PodAffinityTerm {
            topology_key: key.into(),
            selector: selector(app),
            namespaces: NamespaceSelection::default(),
        };
        let c = &mut pod.constraints;
        match app {
            "web" => c.spreads.push(spread("topology.kubernetes.io/zone", true)),
            "api" => c.spreads.push(spread("topology.kubernetes.io/zone", false)),
            "cache" => c
                .anti_affinity
                .push(term("kubernetes.io/hostname", "cache")),
            "db" => c.affinity.push(term("topology.kubernetes.io/zone", "web")),
            "pinned" => c.spreads.push(spread("kubernetes.io/hostname", true)),
            "lonely" => c
                .anti_affinity
                .push(term("topology.kubernetes.io/zone", "lonely")),
            "guard" => c.anti_affinity.push(PodAffinityTerm {
                topology_key: "topology.kubernetes.io/zone".into(),
                selector: Some(Requirements::from_labels(&testkit::labels(&[(
                    "tier", "front",
                )]))),
                namespaces: NamespaceSelection::default(),
            }),
            "any" => c.tolerations.push(Toleration::exists(None, None)),
            "mine" => {
                c.node_selector =
                    Requirements::from_labels(&testkit::labels(&[("kubernetes.io/hostname", node)]))
            }
            _ => {}
        }
    }

    /// Topology-aware planning is exact: on generated fleets in three zones whose pods carry
    /// zone and hostname spread, pod affinity and anti-affinity (and some nodes that can receive
    /// pods, some leaving, some not initialized, DaemonSet pods, pods being deleted), simulating each candidate
    /// against the receiving nodes and summaries of the others plans the same commands (the same
    /// decisions, NodeClaims and pods) and blocks the same nodes as simulating it against every
    /// node of the cluster. The reasons of pods that fit nowhere count the summarised nodes by
    /// their taint, so for those only the pods are compared.
    #[test]
    fn summarised_planning_matches_simulating_the_whole_cluster() {
        let zones = ["test-zone-1", "test-zone-2", "test-zone-3"];
        let mut differed = 0;
        for seed in 0..150u64 {
            let mut cluster = Cluster::new();
            cluster.pools[0].spec.disruption.budgets[0].nodes =
                ["100%", "50%", "3"][seed as usize % 3].into();
            let mut next =
                driftwood_scheduling::testkit::seeded(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let count = 8 + next(12) as usize;
            for i in 0..count {
                let name = format!("n{i:02}");
                let drifted = (next(5) != 0).then_some(i as i64);
                cluster.node(&name, "default", next(4) as usize, drifted);
                let zone = zones[next(3) as usize];
                let node = Arc::make_mut(cluster.world.existing_nodes.last_mut().unwrap());
                node.labels
                    .insert("topology.kubernetes.io/zone".into(), zone.into());
                for pod in &mut node.pods {
                    // Mostly the topology workloads; "any" and "mine" rarely.
                    let kind = match next(20) {
                        0 => 7,
                        1 => 8,
                        2 => 9,
                        k => k % 7,
                    };
                    workload_pod(pod, kind, &name);
                    if next(3) == 0 {
                        std::sync::Arc::make_mut(&mut pod.requests)
                            .set(driftwood_scheduling::resources::CPU, 500);
                    }
                }
                // Now and then a pod being deleted: it holds its requests and keeps its own
                // anti-affinity, and counts for no other pod's topology.
                if !node.pods.is_empty() && next(5) == 0 {
                    let pod = node.pods.remove(0);
                    node.terminating.push(pod);
                }
                if next(4) == 0 {
                    let mut ds = testkit::pod(&format!("kube-system/ds-{name}"), 100, GIB / 8);
                    ds.is_daemonset = true;
                    ds.constraints.labels = testkit::labels(&[("app", "web")]);
                    node.pods.push(ds);
                }
                match next(8) {
                    0 => cluster.views.last_mut().unwrap().deleting = true,
                    1 => {
                        cluster.views.last_mut().unwrap().initialized = false;
                        Arc::make_mut(cluster.world.existing_nodes.last_mut().unwrap())
                            .initialized = false;
                    }
                    _ => {}
                }
            }
            let none = BTreeMap::new();
            let no_caps = BTreeMap::new();
            let input = || PlannerInput {
                now: 0,
                nodes: &cluster.views,
                pdb_allowed: &none,
                policy_caps: &no_caps,
                nodepools: &cluster.pools,
                world: cluster.world.clone(),
            };
            let summarised = plan_drift_with(input(), Simulation::Reduced);
            let whole = plan_drift_with(input(), Simulation::Whole);
            assert_eq!(summarised.commands, whole.commands, "seed {seed}");
            let comparable = |plan: &DisruptionPlan| -> Vec<(String, String)> {
                plan.blocked
                    .iter()
                    .map(|(nc, b)| {
                        let what = match b {
                            Blocked::PodsFitNowhere { pods } => pods
                                .iter()
                                .map(|(p, _)| p.as_str())
                                .collect::<Vec<_>>()
                                .join(","),
                            other => other.to_string(),
                        };
                        (nc.clone(), what)
                    })
                    .collect()
            };
            assert_eq!(comparable(&summarised), comparable(&whole), "seed {seed}");
            if summarised.commands.iter().any(|c| matches!(&c.decision, Decision::Replace(r) if r.iter().any(|r| r.requirements.get("topology.kubernetes.io/zone").is_some()))) {
                differed += 1;
            }
        }
        assert!(
            differed > 10,
            "the fleets exercise zonal placement: {differed}"
        );
    }

    #[test]
    fn reduced_simulation_matches_the_full_one_for_independent_pods() {
        for drifted in 0..6 {
            let mut cluster = Cluster::new();
            for i in 0..6 {
                let pods = (i * 3) % 5;
                cluster.node(
                    &format!("n{i}"),
                    "default",
                    pods,
                    (i < drifted).then_some(i as i64),
                );
            }
            let mut world = cluster.world.clone();
            let taint = Taint {
                key: TAINT_DISRUPTED_KEY.into(),
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            };
            for n in world.existing_nodes.iter_mut().take(drifted) {
                Arc::make_mut(n).taints.push(taint.clone());
            }
            let index = node_index(&world);
            let targets = crate::world::target_positions(&world);
            for i in 0..world.existing_nodes.len() {
                let mut full = world.clone();
                let mut reduced = world.clone();
                let a = simulate_move(
                    &mut full,
                    &index,
                    &targets,
                    i,
                    false,
                    &mut PoolCache::default(),
                );
                let b = simulate_move(
                    &mut reduced,
                    &index,
                    &targets,
                    i,
                    true,
                    &mut PoolCache::default(),
                );
                assert_eq!(a, b, "drifted={drifted} candidate={i}");
                assert_eq!(
                    full.existing_nodes, reduced.existing_nodes,
                    "placements applied alike"
                );
            }
        }
    }

    #[test]
    fn nodepools_take_turns() {
        let mut cluster = Cluster::new();
        cluster.pools = vec![pool("default", "2"), pool("other", "2")];
        for i in 0..4 {
            cluster.node(&format!("d{i}"), "default", 1, Some(10 + i));
            cluster.node(&format!("o{i}"), "other", 1, Some(20 + i));
        }
        let plan = cluster.plan();
        assert_eq!(chosen(&plan), ["nc-d0", "nc-o0", "nc-d1", "nc-o1"]);
    }

    #[test]
    fn ineligible_candidates_are_reported() {
        let mut cluster = Cluster::new();
        cluster.node("a", "default", 1, Some(1));
        cluster.views[0].do_not_disrupt = Some("Node");
        cluster.node("fresh", "default", 1, None);
        let plan = cluster.plan();
        assert!(plan.commands.is_empty());
        assert_eq!(plan.eligible, 0);
        assert!(
            matches!(plan.blocked[..], [(ref nc, Blocked::DoNotDisrupt { on: "Node" })] if nc == "nc-a")
        );
    }
}
