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

/// A move's score in one pool (Karpenter's ScoreResult): the share of the pool's cost it saves
/// and the share of the pool's disruption cost it causes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Score {
    pub savings_fraction: f64,
    pub disruption_fraction: f64,
}

impl Score {
    /// Savings share over disruption share: 0 without savings, infinite without disruption.
    pub fn value(&self) -> f64 {
        if self.savings_fraction <= 0.0 {
            0.0
        } else if self.disruption_fraction == 0.0 {
            f64::INFINITY
        } else {
            self.savings_fraction / self.disruption_fraction
        }
    }

    /// The score a move must reach: 1/k.
    pub fn threshold(&self) -> f64 {
        1.0 / BALANCED_K
    }

    pub fn approved(&self) -> bool {
        self.value() >= self.threshold()
    }

    /// Karpenter's ConsolidationApproved message.
    pub fn message(&self) -> String {
        let value = self.value();
        let value = if value.is_infinite() {
            "+Inf".to_string()
        } else {
            format!("{value:.2}")
        };
        format!(
            "score {value} >= threshold {:.2} (k: {}, savings {:.1}%, disruption {:.1}%)",
            self.threshold(),
            BALANCED_K,
            self.savings_fraction * 100.0,
            self.disruption_fraction * 100.0
        )
    }
}

/// A move's score for one pool; zero (rejected) when the pool has no cost or no disruption to
/// measure it against, as in Karpenter.
pub fn score(savings: f64, disruption: f64, totals: PoolTotals) -> Score {
    if totals.cost <= 0.0 || totals.disruption <= 0.0 {
        return Score::default();
    }
    Score {
        savings_fraction: savings / totals.cost,
        disruption_fraction: disruption / totals.disruption,
    }
}

/// One NodePool's part in a scored move.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolScore {
    pub nodepool: String,
    /// Its consolidationPolicy.
    pub policy: String,
    /// Its score; None when the pool is not Balanced (its moves are counted, not scored).
    pub score: Option<Score>,
}

/// Each NodePool of a move of `candidates` saving `savings` (each pool credited its share of the
/// savings by its share of the source price), scored when Balanced; the move passes when every
/// Balanced pool approves it.
pub fn approve(
    candidates: &[&Candidate<'_>],
    savings: f64,
    totals: &BTreeMap<String, PoolTotals>,
) -> (bool, Vec<PoolScore>) {
    let mut by_pool: BTreeMap<&str, Vec<&Candidate<'_>>> = BTreeMap::new();
    for c in candidates {
        by_pool.entry(c.nodepool_name()).or_default().push(c);
    }
    let source: f64 = candidates.iter().map(|c| c.price.price).sum();
    let mut approved = true;
    let mut pools = Vec::with_capacity(by_pool.len());
    for (pool, members) in &by_pool {
        let policy = &members[0].nodepool.spec.disruption.consolidation_policy;
        let score = (policy == CONSOLIDATION_BALANCED).then(|| {
            let pool_source: f64 = members.iter().map(|c| c.price.price).sum();
            let share = if by_pool.len() > 1 && source > 0.0 {
                savings * pool_source / source
            } else {
                savings
            };
            let disruption: f64 = members.iter().map(|c| c.reschedule_cost).sum();
            score(
                share,
                disruption,
                totals.get(*pool).copied().unwrap_or_default(),
            )
        });
        approved &= score.is_none_or(|s| s.approved());
        pools.push(PoolScore {
            nodepool: (*pool).to_string(),
            policy: policy.clone(),
            score,
        });
    }
    (approved, pools)
}

/// Whether `candidate` could pass at best (deleted outright, saving its whole price); a pool
/// without a known cost lets every candidate through to be scored (Karpenter's
/// CanPassThreshold).
pub fn can_pass(candidate: &Candidate<'_>, totals: &BTreeMap<String, PoolTotals>) -> bool {
    if candidate.nodepool.spec.disruption.consolidation_policy != CONSOLIDATION_BALANCED {
        return true;
    }
    match totals.get(candidate.nodepool_name()) {
        Some(t) if t.cost > 0.0 => {
            score(candidate.price.price, candidate.reschedule_cost, *t).approved()
        }
        _ => true,
    }
}

/// Whether a scored move is one node's (single-node consolidation) or several nodes' together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveKind {
    Single,
    Multi,
}

/// A move a consolidation method scored, as Karpenter records it in
/// `karpenter_consolidation_moves_total`, `karpenter_consolidation_score` and its
/// ConsolidationApproved events.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredMove {
    pub kind: MoveKind,
    /// The move's decision (every Balanced pool approved it).
    pub approved: bool,
    /// Its candidates: NodeClaim and Node names.
    pub candidates: Vec<(String, Option<String>)>,
    pub pools: Vec<PoolScore>,
}

impl ScoredMove {
    pub fn new(
        kind: MoveKind,
        candidates: &[&Candidate<'_>],
        (approved, pools): (bool, Vec<PoolScore>),
    ) -> Self {
        Self {
            kind,
            approved,
            candidates: candidates
                .iter()
                .map(|c| (c.view.nodeclaim.clone(), c.view.node.clone()))
                .collect(),
            pools,
        }
    }
}

/// "approved" or "rejected", the `decision` label of the score metrics.
pub fn decision_label(approved: bool) -> &'static str {
    if approved { "approved" } else { "rejected" }
}
