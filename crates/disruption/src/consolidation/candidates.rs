//! Which nodes consolidation may look at, by Karpenter's rules: a disruptable node (initialized,
//! not leaving, no do-not-disrupt, no PDB at zero — graceful, so a terminationGracePeriod does
//! not lift pod-level blocks) of a NodePool with consolidation on, Consolidatable, and priced.
//! Emptiness takes the empty ones; single- and multi-node consolidation the others, in
//! WhenEmptyOrUnderutilized and Balanced pools.

use super::cost::{is_empty, reschedule_cost};
use super::price::{NodePrice, node_price};
use crate::candidate::{NodeView, check_candidate};
use crate::world::PassWorld;
use driftwood_api::nodepool::{CONSOLIDATION_WHEN_EMPTY, NodePool};
use std::collections::{BTreeMap, BTreeSet};

/// A node consolidation may disrupt, with what it costs to run and to disrupt.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    pub view: &'a NodeView,
    pub nodepool: &'a NodePool,
    /// Its node's position in the pass's world.
    pub position: usize,
    pub price: NodePrice,
    /// 1 plus its movable pods' positive eviction costs.
    pub reschedule_cost: f64,
}

impl Candidate<'_> {
    /// Price per unit of disruption: the higher, the more worth disrupting.
    pub fn savings_ratio(&self) -> f64 {
        self.price.price / self.reschedule_cost
    }

    pub fn is_empty(&self) -> bool {
        is_empty(self.view)
    }

    pub fn nodepool_name(&self) -> &str {
        &self.view.nodepool
    }
}

/// Which consolidation method a candidate is chosen for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Emptiness: empty nodes.
    Empty,
    /// Single- and multi-node consolidation: nodes with pods to move.
    Underutilized,
}

/// The candidates of `kind` among `nodes`, and why each other managed node is not one (the
/// Unconsolidatable / DisruptionBlocked message), in `nodes`' order.
pub fn candidates<'a>(
    kind: Kind,
    nodes: &'a [NodeView],
    nodepools: &'a [NodePool],
    pdb_allowed: &BTreeMap<String, i32>,
    world: &PassWorld,
) -> (Vec<Candidate<'a>>, Vec<(String, String)>) {
    // Replacements of commands in flight stand in for nodes whose pods have not moved yet.
    let standing_in: BTreeSet<&str> = nodes
        .iter()
        .filter(|v| v.deleting || v.disrupting)
        .flat_map(|v| v.replacements.iter().map(String::as_str))
        .collect();
    let mut chosen = Vec::new();
    let mut not = Vec::new();
    for view in nodes {
        if standing_in.contains(view.nodeclaim.as_str()) {
            continue;
        }
        match candidate(kind, view, nodepools, pdb_allowed, world) {
            Ok(Some(c)) => chosen.push(c),
            Ok(None) => {}
            Err(why) => not.push((view.nodeclaim.clone(), why)),
        }
    }
    (chosen, not)
}

/// `view` as a candidate of `kind`: Ok(None) when it is simply not of that kind (an occupied
/// node to emptiness, an empty one to consolidation, or not yet Consolidatable).
fn candidate<'a>(
    kind: Kind,
    view: &'a NodeView,
    nodepools: &'a [NodePool],
    pdb_allowed: &BTreeMap<String, i32>,
    world: &PassWorld,
) -> Result<Option<Candidate<'a>>, String> {
    let Some(nodepool) = nodepools
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(view.nodepool.as_str()))
    else {
        return Err(format!("NodePool not found (NodePool={})", view.nodepool));
    };
    if nodepool.is_static() {
        return Ok(None);
    }
    let graceful = NodeView {
        eventual: false,
        ..view.clone()
    };
    check_candidate(&graceful, pdb_allowed).map_err(|b| b.to_string())?;
    let Some(position) = view.node.as_ref().and_then(|n| world.index.get(n)).copied() else {
        return Ok(None);
    };
    if world.nominated.contains(&position) {
        return Err("Cannot disrupt NodeClaim: state node is nominated for a pending pod".into());
    }
    let disruption = &nodepool.spec.disruption;
    if disruption.consolidate_after.is_never() {
        return Err(format!(
            "NodePool {:?} has consolidation disabled",
            view.nodepool
        ));
    }
    let empty = is_empty(view);
    match kind {
        Kind::Empty if !empty => return Ok(None),
        Kind::Underutilized if empty => return Ok(None),
        Kind::Underutilized if disruption.consolidation_policy == CONSOLIDATION_WHEN_EMPTY => {
            return Err(format!(
                "NodePool {:?} has consolidation policy WhenEmpty, but node is not empty",
                view.nodepool
            ));
        }
        _ => {}
    }
    let pool_spec = world
        .world
        .nodepools
        .iter()
        .find(|p| p.name == view.nodepool);
    let price = match node_price(pool_spec, &world.world.existing_nodes[position]) {
        Ok(price) => price,
        // Emptiness deletes without comparing prices.
        Err(_) if kind == Kind::Empty => NodePrice {
            instance_type: String::new(),
            capacity_type: String::new(),
            zone: String::new(),
            price: 0.0,
        },
        Err(why) => return Err(why),
    };
    if !view.consolidatable {
        return Ok(None);
    }
    Ok(Some(Candidate {
        view,
        nodepool,
        position,
        price,
        reschedule_cost: reschedule_cost(view),
    }))
}
