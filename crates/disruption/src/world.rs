//! The cluster as one disruption pass simulates it: nodes that are leaving, drifted or not yet
//! initialized are no destination, the pods already looking for room (Pending, or on nodes
//! being deleted) have taken theirs, and a set of candidates can be removed from it in a
//! simulation that sees only the nodes that matter when no pod depends on another.

use crate::candidate::{Blocked, NodeView};
use driftwood_api::wellknown::TAINT_DISRUPTED_KEY;
use driftwood_scheduling::{
    ExistingNode, PoolCache, Removals, SimPod, SimulationInput, SimulationResult, Taint,
    TaintEffect, schedule, schedule_cached,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The world of one pass, with each node's position (positions never change within a pass;
/// only pods move). Prepared once per pass and cloned for each method that searches it.
#[derive(Clone)]
pub struct PassWorld {
    pub world: SimulationInput,
    pub index: BTreeMap<String, usize>,
    /// No pod in the cluster depends on other pods (no topology spread, pod affinity or
    /// anti-affinity): a simulation may leave out the nodes that cannot receive pods.
    pub independent: bool,
    /// Nodes (positions) the pods looking for room were placed on: nominated for them, as
    /// Karpenter's provisioner nominates nodes, and so no candidate for consolidation.
    pub nominated: BTreeSet<usize>,
    /// The NodePools prepared once for the pass's simulations.
    pub pools: PoolCache,
    /// The positions of the nodes that can receive pods ([`is_target`]), in order: the taints
    /// that decide it are set when the pass is prepared and do not change within it.
    pub targets: Vec<usize>,
}

impl PassWorld {
    /// Prepares `world` (every node with its pods) for a pass over `nodes`: drifted, leaving
    /// and disrupting nodes and uninitialized ones are tainted as disrupted (pods moved there
    /// would only move again, and Karpenter refuses plans that put pods on an uninitialized
    /// node); `pending` pods and the pods of leaving nodes take the room they would get first.
    pub fn prepare(nodes: &[NodeView], mut world: SimulationInput, pending: Vec<SimPod>) -> Self {
        let index = node_index(&world);
        let disrupted = disrupted_taint();
        let mut leaving = Vec::new();
        for view in nodes
            .iter()
            .filter(|n| n.drift.is_some() || n.deleting || n.disrupting)
        {
            if let Some(&i) = view.node.as_ref().and_then(|n| index.get(n)) {
                Arc::make_mut(&mut world.existing_nodes[i])
                    .taints
                    .push(disrupted.clone());
                if view.deleting || view.disrupting {
                    leaving.push(i);
                }
            }
        }
        for node in world.existing_nodes.iter_mut().filter(|n| !n.initialized) {
            Arc::make_mut(node).taints.push(disrupted.clone());
        }
        let nominated = reserve_room(&mut world, &index, pending, &leaving);
        let independent = !world
            .existing_nodes
            .iter()
            .flat_map(|n| n.pods.iter().chain(&n.terminating))
            .any(|p| p.constraints.depends_on_other_pods());
        let targets = target_positions(&world);
        Self {
            world,
            index,
            independent,
            nominated,
            pools: PoolCache::default(),
            targets,
        }
    }

    /// Prepares `world` for a pass over `nodes`, its `pods` being the pods looking for room
    /// ([`Self::prepare`]).
    pub fn of(nodes: &[NodeView], mut world: SimulationInput) -> Self {
        let pending = std::mem::take(&mut world.pods);
        Self::prepare(nodes, world, pending)
    }

    /// Simulates removing the nodes at `candidates` (positions) at once: their movable pods are
    /// placed on the nodes that can receive pods or on new NodeClaims. Nothing is applied.
    pub fn simulate_removal(&mut self, candidates: &[usize]) -> Result<SimulationResult, Blocked> {
        self.simulations().simulate_removal(candidates)
    }

    /// The simulations of removing one set of candidates after another from this world
    /// ([`Simulations`]).
    pub fn simulations(&mut self) -> Simulations<'_> {
        // The reduced world is worth it only when it leaves out many nodes. When most nodes can
        // receive pods (a settled fleet), the whole world, whose bound pods are read once for
        // every simulation, is cheaper (a profile of a 5,000-node pass once spent about 40%
        // building and dropping the reduced worlds, when they copied their nodes).
        if self.independent && self.targets.len() * 2 < self.world.existing_nodes.len() {
            return Simulations::Reduced(self);
        }
        let PassWorld { world, pools, .. } = self;
        Simulations::Whole {
            removals: Removals::new(world),
            pools,
        }
    }
}

/// The simulations of removing one set of candidates after another from a pass's world
/// ([`PassWorld::simulations`]).
pub enum Simulations<'w> {
    /// No pod depends on another and most nodes cannot receive pods: each simulation sees only
    /// its candidates and the nodes that can receive pods.
    Reduced(&'w mut PassWorld),
    /// Each simulation sees the whole world, whose bound pods are read once for all of them.
    Whole {
        removals: Removals<'w>,
        pools: &'w mut PoolCache,
    },
}

impl Simulations<'_> {
    /// The world the candidates are removed from.
    pub fn world(&self) -> &SimulationInput {
        match self {
            Self::Reduced(pass) => &pass.world,
            Self::Whole { removals, .. } => removals.input(),
        }
    }

    /// Simulates removing the nodes at `candidates` (positions) at once: their movable pods are
    /// placed on the nodes that can receive pods or on new NodeClaims. Nothing is applied.
    pub fn simulate_removal(&mut self, candidates: &[usize]) -> Result<SimulationResult, Blocked> {
        let result = match self {
            Self::Reduced(pass) => {
                // Only the candidates and the nodes that can receive pods affect the outcome.
                let reduced = reduced_nodes(&pass.world, &pass.targets, candidates);
                let whole = std::mem::replace(&mut pass.world.existing_nodes, reduced);
                let result = schedule_cached(&pass.world, &mut pass.pools);
                pass.world.existing_nodes = whole;
                result
            }
            Self::Whole { removals, pools } => removals.simulate(candidates, pools),
        };
        result.map_err(|e| Blocked::Simulation {
            error: e.to_string(),
        })
    }
}

/// The taint that marks a node as no destination in a pass.
fn disrupted_taint() -> Taint {
    Taint {
        key: TAINT_DISRUPTED_KEY.to_string(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    }
}

/// Places `pending` pods and the pods of the `leaving` nodes (by index) on the existing nodes
/// that can receive pods, as the scheduler would, and records those placements in `world`, so
/// later simulations see that capacity taken. Pods that need new capacity are the provisioner's
/// to launch for; they take nothing here. Returns the nodes that received pods.
pub(crate) fn reserve_room(
    world: &mut SimulationInput,
    index: &BTreeMap<String, usize>,
    pending: Vec<driftwood_scheduling::SimPod>,
    leaving: &[usize],
) -> BTreeSet<usize> {
    let mut nominated = BTreeSet::new();
    if pending.is_empty()
        && leaving
            .iter()
            .all(|&i| world.existing_nodes[i].pods.iter().all(|p| p.is_daemonset))
    {
        return nominated;
    }
    let mut input = world.clone();
    input.pods = pending;
    for &i in leaving {
        Arc::make_mut(&mut input.existing_nodes[i]).going_away = true;
    }
    let Ok(result) = schedule(&input) else {
        return nominated;
    };
    let moving: BTreeMap<String, driftwood_scheduling::SimPod> = input
        .pods
        .iter()
        .cloned()
        .chain(
            leaving
                .iter()
                .flat_map(|&i| world.existing_nodes[i].pods.iter())
                .filter(|p| !p.is_daemonset)
                .cloned(),
        )
        .map(|p| (p.key.clone(), p))
        .collect();
    // The world's nodes are no longer shared with `input`: a placement changes its node in place.
    drop(input);
    for placement in &result.existing_placements {
        if let (Some(pod), Some(&j)) = (moving.get(&placement.pod), index.get(&placement.node))
            && is_target(&world.existing_nodes[j])
        {
            Arc::make_mut(&mut world.existing_nodes[j])
                .pods
                .push(pod.clone());
            nominated.insert(j);
        }
    }
    nominated
}

/// The positions of the nodes of `world` that can receive pods ([`is_target`]), in order.
pub(crate) fn target_positions(world: &SimulationInput) -> Vec<usize> {
    world
        .existing_nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| is_target(n))
        .map(|(j, _)| j)
        .collect()
}

/// The nodes a simulation of removing the nodes at `leaving` needs when no pod depends on
/// another: those and the nodes that can receive pods (`targets`), in the world's order, the
/// leaving ones marked. Shared with `world`: only a node whose mark changes is copied.
pub(crate) fn reduced_nodes(
    world: &SimulationInput,
    targets: &[usize],
    leaving: &[usize],
) -> Vec<Arc<ExistingNode>> {
    let mut positions: Vec<usize> = targets.iter().chain(leaving).copied().collect();
    positions.sort_unstable();
    positions.dedup();
    positions
        .into_iter()
        .filter_map(|j| {
            let node = world.existing_nodes.get(j)?;
            Some(going_away(node, leaving.contains(&j)))
        })
        .collect()
}

/// `node` with `going_away` as given: the same node shared when it already is, else a copy.
pub(crate) fn going_away(node: &Arc<ExistingNode>, going: bool) -> Arc<ExistingNode> {
    if node.going_away == going {
        return Arc::clone(node);
    }
    let mut copy = ExistingNode::clone(node);
    copy.going_away = going;
    Arc::new(copy)
}

/// Each existing node's position in `world.existing_nodes`, by name (positions never change
/// within a pass; only pods move).
pub(crate) fn node_index(world: &SimulationInput) -> BTreeMap<String, usize> {
    world
        .existing_nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect()
}

/// Whether a node can receive pods in this pass (not tainted as disrupted).
pub(crate) fn is_target(node: &driftwood_scheduling::ExistingNode) -> bool {
    !node.taints.iter().any(|t| t.key == TAINT_DISRUPTED_KEY)
}
