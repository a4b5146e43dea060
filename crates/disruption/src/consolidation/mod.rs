//! Consolidation, Karpenter's three methods over one pass's world: emptiness (delete every
//! empty Consolidatable node the `Empty` budgets allow), multi-node consolidation (the largest
//! prefix of the best-value candidates that can be deleted together or replaced by one cheaper
//! node, found by binary search), and single-node consolidation (the first candidate, NodePools
//! taking turns, that can be deleted or replaced by a cheaper node) — and the validation that
//! re-checks a command after the wait before it is carried out.

pub mod balanced;
pub mod candidates;
pub mod compute;
pub mod cost;
pub mod price;
mod search;
mod validate;

pub use candidates::{Candidate, Kind};
#[cfg(test)]
use search::single_node;
pub use search::{MULTI_NODE_MAX_CANDIDATES, plan_multi_node, plan_single_node};
pub use validate::{ValidationFailure, validate};

use crate::budget::AllowedDisruptions;
use crate::candidate::{NodeView, pool_budgets};
use crate::world::PassWorld;
use driftwood_api::nodepool::NodePool;
use driftwood_api::wellknown::{REASON_EMPTY, REASON_UNDERUTILIZED};
use driftwood_scheduling::NewNodeClaim;
use std::collections::BTreeMap;

/// How long a consolidation command waits before it is validated and carried out (Karpenter's
/// commandValidationDelay): a pod that arrived meanwhile keeps its node.
pub const VALIDATION_DELAY_SECONDS: i64 = 15;

/// Which method found a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    Emptiness,
    MultiNode,
    SingleNode,
}

impl Method {
    /// The disruption reason (budgets, DisruptionReason, metrics): Empty or Underutilized.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Emptiness => REASON_EMPTY,
            Self::MultiNode | Self::SingleNode => REASON_UNDERUTILIZED,
        }
    }

    /// Karpenter's `consolidation_type` label: empty, multi or single.
    pub fn consolidation_type(self) -> &'static str {
        match self {
            Self::Emptiness => "empty",
            Self::MultiNode => "multi",
            Self::SingleNode => "single",
        }
    }

    fn kind(self) -> Kind {
        match self {
            Self::Emptiness => Kind::Empty,
            Self::MultiNode | Self::SingleNode => Kind::Underutilized,
        }
    }
}

/// A node a command disrupts.
#[derive(Debug, Clone, PartialEq)]
pub struct Disrupted {
    pub nodeclaim: String,
    pub node: Option<String>,
    pub nodepool: String,
    /// The pods that must move.
    pub pods: Vec<String>,
    /// Its hourly price.
    pub price: f64,
}

impl Disrupted {
    fn of(c: &Candidate<'_>) -> Self {
        Self {
            nodeclaim: c.view.nodeclaim.clone(),
            node: c.view.node.clone(),
            nodepool: c.view.nodepool.clone(),
            pods: c
                .view
                .pods
                .iter()
                .filter(|p| p.reschedulable)
                .map(|p| p.key.clone())
                .collect(),
            price: c.price.price,
        }
    }
}

/// A consolidation command: delete its candidates, or replace them with one node.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsolidationCommand {
    pub method: Method,
    pub candidates: Vec<Disrupted>,
    pub replacement: Option<NewNodeClaim>,
    /// The candidates' hourly price together, and the cheapest the replacement launches at.
    pub source_price: f64,
    pub replacement_price: f64,
}

impl ConsolidationCommand {
    /// delete or replace.
    pub fn decision(&self) -> &'static str {
        if self.replacement.is_some() {
            "replace"
        } else {
            "delete"
        }
    }

    /// Hourly savings.
    pub fn savings(&self) -> f64 {
        self.source_price - self.replacement_price
    }
}

/// What one method found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MethodOutcome {
    pub command: Option<ConsolidationCommand>,
    /// Candidates of the method (before budgets).
    pub eligible: usize,
    /// Each NodePool's budget for the method's reason.
    pub budgets: Vec<AllowedDisruptions>,
    /// A candidate was passed over because its NodePool's budget was used up (the cluster is
    /// then not "consolidated": the next pass looks again).
    pub constrained_by_budgets: bool,
    /// Nodes that cannot be consolidated now, and why (Karpenter's Unconsolidatable events).
    pub unconsolidatable: Vec<(String, String)>,
    /// The search ran out of time.
    pub timed_out: bool,
    /// NodePools single-node consolidation did not reach before its timeout: first next time.
    pub unseen_nodepools: Vec<String>,
    /// The moves scored on the way (single-node: each candidate simulated; multi-node: the
    /// command found, or else the last move turned down), in order.
    pub moves: Vec<balanced::ScoredMove>,
}

/// Everything a consolidation method reads.
pub struct ConsolidationInput<'a> {
    /// UTC seconds.
    pub now: i64,
    /// Every managed node.
    pub nodes: &'a [NodeView],
    /// disruptionsAllowed of each PodDisruptionBudget, by namespace/name.
    pub pdb_allowed: &'a BTreeMap<String, i32>,
    pub nodepools: &'a [NodePool],
    /// The cluster as the simulation sees it, prepared for the pass
    /// ([`PassWorld::of`], the pods Pending now being its world's `pods`): the same for every
    /// method of a pass, so prepared once and cloned for each.
    pub world: PassWorld,
    /// The SpotToSpotConsolidation feature gate.
    pub spot_to_spot: bool,
}

/// The pass's world, the method's candidates, its budgets and the nodes it cannot take.
struct Prepared<'a> {
    world: PassWorld,
    candidates: Vec<Candidate<'a>>,
    budgets: Vec<AllowedDisruptions>,
    unconsolidatable: Vec<(String, String)>,
}

fn prepare<'a>(input: ConsolidationInput<'a>, method: Method) -> Prepared<'a> {
    let ConsolidationInput {
        now,
        nodes,
        pdb_allowed,
        nodepools,
        world,
        ..
    } = input;
    let (candidates, unconsolidatable) =
        candidates::candidates(method.kind(), nodes, nodepools, pdb_allowed, &world);
    let budgets = pool_budgets(nodes, nodepools, method.reason(), now);
    Prepared {
        world,
        candidates,
        budgets,
        unconsolidatable,
    }
}

/// Allowed disruptions per NodePool name.
fn allowance(budgets: &[AllowedDisruptions]) -> BTreeMap<String, usize> {
    budgets
        .iter()
        .map(|b| (b.nodepool.clone(), b.allowed))
        .collect()
}

/// Emptiness: every empty Consolidatable candidate its NodePool's `Empty` budget allows, best
/// value first, deleted together.
pub fn plan_emptiness(input: ConsolidationInput<'_>) -> MethodOutcome {
    let Prepared {
        mut candidates,
        budgets,
        unconsolidatable,
        ..
    } = prepare(input, Method::Emptiness);
    sort_by_value(&mut candidates);
    let mut allowed = allowance(&budgets);
    let mut constrained = false;
    let mut chosen = Vec::new();
    for c in &candidates {
        let left = allowed.entry(c.view.nodepool.clone()).or_default();
        if *left == 0 {
            constrained = true;
            continue;
        }
        *left -= 1;
        chosen.push(Disrupted::of(c));
    }
    let command = (!chosen.is_empty()).then(|| ConsolidationCommand {
        method: Method::Emptiness,
        source_price: chosen.iter().map(|d| d.price).sum(),
        candidates: chosen,
        replacement: None,
        replacement_price: 0.0,
    });
    MethodOutcome {
        command,
        eligible: candidates.len(),
        budgets,
        constrained_by_budgets: constrained,
        unconsolidatable,
        ..Default::default()
    }
}

/// Candidates by price per unit of disruption, highest first (ties by NodeClaim name).
fn sort_by_value(candidates: &mut [Candidate<'_>]) {
    candidates.sort_by(|a, b| {
        b.savings_ratio()
            .total_cmp(&a.savings_ratio())
            .then_with(|| a.view.nodeclaim.cmp(&b.view.nodeclaim))
    });
}

#[cfg(test)]
mod tests;
