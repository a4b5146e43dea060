//! Karpenter v1.14's Balanced policy: a move is made only when the share of the NodePool's cost
//! it saves is at least half the share of the NodePool's disruption cost it causes
//! ((savings / pool cost) / (disruption / pool disruption) >= 1/k, k = 2). Other policies pass
//! every move.

use super::candidates::Candidate;
use crate::candidate::NodeView;
use crate::consolidation::cost::reschedule_cost;
use driftwood_api::nodepool::CONSOLIDATION_BALANCED;
use std::collections::BTreeMap;

/// Karpenter's k for Balanced: a move passes at a score of 1/k.
pub const BALANCED_K: f64 = 2.0;

/// A NodePool's cost and disruption cost, the denominators of a move's score.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PoolTotals {
    /// The hourly price of its nodes.
    pub cost: f64,
    /// The reschedule cost of all its nodes (candidates or not).
    pub disruption: f64,
}

/// Each NodePool's totals over `nodes`, priced by `price` (None: unknown, not counted).
pub fn pool_totals(
    nodes: &[NodeView],
    price: impl Fn(&NodeView) -> Option<f64>,
) -> BTreeMap<String, PoolTotals> {
    let mut totals: BTreeMap<String, PoolTotals> = BTreeMap::new();
    for view in nodes {
        let t = totals.entry(view.nodepool.clone()).or_default();
        t.cost += price(view).unwrap_or(0.0);
        t.disruption += reschedule_cost(view);
    }
    totals
}

/// A move's score for one pool: savings share over disruption share (0 without savings,
/// infinite without disruption).
pub fn score(savings: f64, disruption: f64, totals: PoolTotals) -> Option<f64> {
    if totals.cost <= 0.0 || totals.disruption <= 0.0 {
        return None;
    }
    let saved = savings / totals.cost;
    let disrupted = disruption / totals.disruption;
    Some(if saved <= 0.0 {
        0.0
    } else if disrupted == 0.0 {
        f64::INFINITY
    } else {
        saved / disrupted
    })
}

/// Whether a move of `candidates` saving `savings` passes in every Balanced pool it touches
/// (each pool is credited its share of the savings by its share of the source price), with the
/// scores of the Balanced pools.
pub fn approve(
    candidates: &[&Candidate<'_>],
    savings: f64,
    totals: &BTreeMap<String, PoolTotals>,
) -> (bool, BTreeMap<String, f64>) {
    let mut by_pool: BTreeMap<&str, Vec<&Candidate<'_>>> = BTreeMap::new();
    for c in candidates {
        by_pool.entry(c.nodepool_name()).or_default().push(c);
    }
    let source: f64 = candidates.iter().map(|c| c.price.price).sum();
    let mut approved = true;
    let mut scores = BTreeMap::new();
    for (pool, members) in &by_pool {
        if members[0].nodepool.spec.disruption.consolidation_policy != CONSOLIDATION_BALANCED {
            continue;
        }
        let pool_source: f64 = members.iter().map(|c| c.price.price).sum();
        let share = if by_pool.len() > 1 && source > 0.0 {
            savings * pool_source / source
        } else {
            savings
        };
        let disruption: f64 = members.iter().map(|c| c.reschedule_cost).sum();
        let Some(s) = score(
            share,
            disruption,
            totals.get(*pool).copied().unwrap_or_default(),
        ) else {
            continue;
        };
        approved &= s >= 1.0 / BALANCED_K;
        scores.insert((*pool).to_string(), s);
    }
    (approved, scores)
}

/// Whether `candidate` could pass at best (deleted outright, saving its whole price).
pub fn can_pass(candidate: &Candidate<'_>, totals: &BTreeMap<String, PoolTotals>) -> bool {
    approve(&[candidate], candidate.price.price, totals).0
}
