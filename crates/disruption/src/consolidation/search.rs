//! Multi-node and single-node consolidation: which candidates to consolidate, in what order,
//! within the budgets and a time bound.

use super::balanced::{MoveKind, PoolTotals, ScoredMove, approve, can_pass, pool_totals};
use super::candidates::Candidate;
use super::compute::{Computed, compute};
use super::price::{keep_cheaper_than, node_price};
use super::{
    ConsolidationCommand, ConsolidationInput, Disrupted, Method, MethodOutcome, Prepared,
    allowance, prepare, sort_by_value,
};
use crate::world::PassWorld;
use driftwood_api::wellknown::LABEL_HOSTNAME;
use driftwood_scheduling::{PodConstraints, Resources, Shared, SimulationInput, Taint};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Multi-node consolidation looks at no more than this many candidates at once (Karpenter's
/// batch bound).
pub const MULTI_NODE_MAX_CANDIDATES: usize = 100;

/// Each NodePool's Balanced denominators over every managed node of the pass.
fn totals(
    input_nodes: &[crate::candidate::NodeView],
    world: &PassWorld,
) -> BTreeMap<String, PoolTotals> {
    pool_totals(input_nodes, |view| {
        let position = view.node.as_ref().and_then(|n| world.index.get(n))?;
        let pool = world
            .world
            .nodepools
            .iter()
            .find(|p| p.name == view.nodepool);
        node_price(pool, &world.world.existing_nodes[*position])
            .ok()
            .map(|p| p.price)
    })
}

/// Multi-node consolidation: of the candidates its budgets allow (best value first, at most
/// [`MULTI_NODE_MAX_CANDIDATES`]), the largest prefix of two or more that can be deleted or
/// replaced by one cheaper node, by binary search over the prefix length. `out_of_time` is asked
/// before each simulation; when it says so, the best command found so far is returned.
pub fn plan_multi_node(
    input: ConsolidationInput<'_>,
    out_of_time: &mut dyn FnMut() -> bool,
) -> MethodOutcome {
    let spot_to_spot = input.spot_to_spot;
    let nodes = input.nodes;
    let Prepared {
        mut world,
        mut candidates,
        budgets,
        unconsolidatable,
    } = prepare(input, Method::MultiNode);
    let pool_totals = totals(nodes, &world);
    let mut sims = world.simulations();
    sort_by_value(&mut candidates);
    let eligible = candidates.len();
    let mut allowed = allowance(&budgets);
    let mut constrained = false;
    let mut within: Vec<&Candidate<'_>> = Vec::new();
    for c in &candidates {
        let left = allowed.entry(c.view.nodepool.clone()).or_default();
        if *left == 0 {
            constrained = true;
            continue;
        }
        *left -= 1;
        within.push(c);
    }
    let max = within.len().min(MULTI_NODE_MAX_CANDIDATES);
    let mut outcome = MethodOutcome {
        eligible,
        budgets,
        constrained_by_budgets: constrained,
        unconsolidatable,
        ..Default::default()
    };
    if within.len() < 2 {
        return outcome;
    }
    // Prefix lengths (minus one) searched: [lo, hi]; a prefix of one is single-node's.
    let (mut lo, mut hi) = (
        1usize,
        if within.len() <= max {
            within.len() - 1
        } else {
            max
        },
    );
    let mut best: Option<(usize, Computed, ScoredMove)> = None;
    // The last move the Balanced scores turned down, recorded only when nothing is found (as
    // Karpenter does, to record one rejection per search rather than one per step).
    let mut last_rejected: Option<ScoredMove> = None;
    while lo <= hi {
        if out_of_time() {
            outcome.timed_out = true;
            break;
        }
        let mid = (lo + hi) / 2;
        let prefix = &within[..=mid];
        let valid = compute(&mut sims, prefix, spot_to_spot)
            .ok()
            .and_then(|computed| keep_distinct_from(computed, prefix, sims.world()))
            .and_then(|computed| {
                let scored = ScoredMove::new(
                    MoveKind::Multi,
                    prefix,
                    approve(prefix, computed.savings(), &pool_totals),
                );
                if scored.approved {
                    Some((computed, scored))
                } else {
                    last_rejected = Some(scored);
                    None
                }
            });
        match valid {
            Some((computed, scored)) => {
                best = Some((mid + 1, computed, scored));
                lo = mid + 1;
            }
            None => hi = mid - 1,
        }
    }
    if let Some((n, computed, scored)) = best {
        outcome.command = Some(command(Method::MultiNode, &within[..n], computed));
        outcome.moves.push(scored);
    } else if let Some(rejected) = last_rejected.filter(|_| !outcome.timed_out) {
        outcome.moves.push(rejected);
    }
    outcome
}

/// Karpenter's filterOutSameInstanceType: replacing several nodes with one of a type among
/// theirs only makes sense below the cheapest such node's price (otherwise deleting the others
/// and keeping it moves fewer pods); None when no type is left.
fn keep_distinct_from(
    mut computed: Computed,
    candidates: &[&Candidate<'_>],
    world: &SimulationInput,
) -> Option<Computed> {
    let Some(replacement) = computed.replacement.as_mut() else {
        return Some(computed);
    };
    let mut price_of: BTreeMap<&str, f64> = BTreeMap::new();
    for c in candidates.iter().filter(|c| c.price.price > 0.0) {
        let p = price_of
            .entry(c.price.instance_type.as_str())
            .or_insert(f64::MAX);
        *p = p.min(c.price.price);
    }
    let existing: BTreeSet<&str> = candidates
        .iter()
        .map(|c| c.price.instance_type.as_str())
        .collect();
    let max_price = replacement
        .instance_types
        .iter()
        .filter(|t| existing.contains(t.as_str()))
        .map(|t| price_of.get(t.as_str()).copied().unwrap_or(0.0))
        .fold(f64::MAX, f64::min);
    let pool = world
        .nodepools
        .iter()
        .find(|p| p.name == replacement.nodepool)?;
    keep_cheaper_than(replacement, pool, max_price).ok()?;
    if replacement.instance_types.is_empty() {
        return None;
    }
    computed.replacement_price =
        super::price::launch_price(replacement, pool).unwrap_or(computed.replacement_price);
    Some(computed)
}

/// Single-node consolidation: candidates best value first, NodePools taking turns (those not
/// reached last time first); the first that can be deleted or replaced by a cheaper node within
/// its budget. `out_of_time` is asked before each candidate.
pub fn plan_single_node(
    input: ConsolidationInput<'_>,
    unseen_first: &[String],
    out_of_time: &mut dyn FnMut() -> bool,
) -> MethodOutcome {
    single_node(input, unseen_first, out_of_time, true)
}

/// [`plan_single_node`], with the memo of failed shapes on or off (the tests compare both).
pub(super) fn single_node(
    input: ConsolidationInput<'_>,
    unseen_first: &[String],
    out_of_time: &mut dyn FnMut() -> bool,
    memoize: bool,
) -> MethodOutcome {
    let spot_to_spot = input.spot_to_spot;
    let nodes = input.nodes;
    let Prepared {
        mut world,
        mut candidates,
        budgets,
        unconsolidatable,
    } = prepare(input, Method::SingleNode);
    let pool_totals = totals(nodes, &world);
    let mut sims = world.simulations();
    sort_by_value(&mut candidates);
    let ordered = interleave(&candidates, unseen_first);
    let mut unseen: BTreeSet<String> = ordered.iter().map(|c| c.view.nodepool.clone()).collect();
    let allowed = allowance(&budgets);
    let mut outcome = MethodOutcome {
        eligible: candidates.len(),
        budgets,
        unconsolidatable,
        ..Default::default()
    };
    let mut failed: HashMap<NodeShape, (String, String)> = HashMap::new();
    for candidate in ordered {
        if out_of_time() {
            outcome.timed_out = true;
            outcome.unseen_nodepools = unseen.into_iter().collect();
            return outcome;
        }
        unseen.remove(&candidate.view.nodepool);
        if allowed.get(&candidate.view.nodepool).copied().unwrap_or(0) == 0 {
            outcome.constrained_by_budgets = true;
            continue;
        }
        if !can_pass(candidate, &pool_totals) {
            continue;
        }
        let shape = memoize
            .then(|| node_shape(sims.world(), candidate))
            .flatten();
        if let Some((first, why)) = shape.as_ref().and_then(|s| failed.get(s)) {
            outcome.unconsolidatable.push((
                candidate.view.nodeclaim.clone(),
                format!("{why} (as for {first}: the same node and pods)"),
            ));
            continue;
        }
        let computed = match compute(&mut sims, &[candidate], spot_to_spot) {
            Ok(computed) => computed,
            Err(why) => {
                if let Some(shape) = shape {
                    failed.insert(shape, (candidate.view.nodeclaim.clone(), why.clone()));
                }
                outcome
                    .unconsolidatable
                    .push((candidate.view.nodeclaim.clone(), why));
                continue;
            }
        };
        let scored = ScoredMove::new(
            MoveKind::Single,
            &[candidate],
            approve(&[candidate], computed.savings(), &pool_totals),
        );
        let approved = scored.approved;
        outcome.moves.push(scored);
        if !approved {
            continue;
        }
        outcome.command = Some(command(Method::SingleNode, &[candidate], computed));
        return outcome;
    }
    outcome
}

/// Everything about a pod a simulation looks at, apart from its name: its requests,
/// priority, whether a DaemonSet owns it, and its constraints (namespace and labels, which
/// other pods' spreads and affinities select it by, included).
type PodShape = (BTreeMap<String, i64>, i32, bool, Shared<PodConstraints>);

/// Everything about a candidate single-node consolidation's simulation looks at: its node's
/// labels but the hostname, taints, allocatable and price, and its pods (bound and being
/// deleted) in a canonical order. Two candidates of one shape see worlds that are the same up
/// to their names (each stays, with its pods, where the other leaves), so they come out the
/// same, and the simulation of the first answers the rest — a fleet rolled by Deployments is
/// mostly nodes of a few shapes. That holds when pods depend on other pods too: a zone spread
/// sees the same counts (the zone is a label of the shape), a hostname spread or anti-affinity
/// the same hosts up to their names — unless a pod names a host.
type NodeShape = (
    BTreeMap<String, String>,
    Vec<Taint>,
    Vec<Taint>,
    Resources,
    u64,
    Vec<PodShape>,
    Vec<PodShape>,
);

/// `candidate`'s shape, or None when a pod names a hostname (then no two nodes are alike).
fn node_shape(world: &SimulationInput, candidate: &Candidate<'_>) -> Option<NodeShape> {
    let node = &world.existing_nodes[candidate.position];
    let shapes = |pods: &[driftwood_scheduling::SimPod]| -> Option<Vec<PodShape>> {
        let mut shapes = Vec::with_capacity(pods.len());
        for pod in pods {
            let c = &pod.constraints;
            let names_host = c.node_selector.has(LABEL_HOSTNAME)
                || c.required_terms.iter().any(|t| t.has(LABEL_HOSTNAME))
                || c.preferred_terms.iter().any(|(_, t)| t.has(LABEL_HOSTNAME));
            if names_host {
                return None;
            }
            shapes.push((
                pod.requests.0.clone(),
                pod.priority,
                pod.is_daemonset,
                c.clone(),
            ));
        }
        shapes.sort();
        Some(shapes)
    };
    let pods = shapes(&node.pods)?;
    let terminating = shapes(&node.terminating)?;
    let mut labels = node.labels.clone();
    labels.remove(LABEL_HOSTNAME);
    Some((
        labels,
        node.taints.clone(),
        node.startup_taints.clone(),
        node.allocatable.clone(),
        candidate.price.price.to_bits(),
        pods,
        terminating,
    ))
}

/// `candidates` (already best value first) with NodePools taking turns: the pools in
/// `unseen_first` lead, then the others by name.
fn interleave<'c, 'a>(
    candidates: &'c [Candidate<'a>],
    unseen_first: &[String],
) -> Vec<&'c Candidate<'a>> {
    let mut per_pool: BTreeMap<&str, Vec<&Candidate<'a>>> = BTreeMap::new();
    for c in candidates {
        per_pool
            .entry(c.view.nodepool.as_str())
            .or_default()
            .push(c);
    }
    let mut order: Vec<&str> = unseen_first
        .iter()
        .map(String::as_str)
        .filter(|p| per_pool.contains_key(p))
        .collect();
    order.extend(
        per_pool
            .keys()
            .filter(|p| !unseen_first.iter().any(|u| u == *p)),
    );
    let longest = per_pool.values().map(Vec::len).max().unwrap_or(0);
    let mut out = Vec::with_capacity(candidates.len());
    for i in 0..longest {
        for pool in &order {
            if let Some(c) = per_pool.get(pool).and_then(|v| v.get(i)) {
                out.push(*c);
            }
        }
    }
    out
}

fn command(
    method: Method,
    candidates: &[&Candidate<'_>],
    computed: Computed,
) -> ConsolidationCommand {
    ConsolidationCommand {
        method,
        candidates: candidates.iter().map(|c| Disrupted::of(c)).collect(),
        source_price: computed.source_price,
        replacement_price: computed.replacement_price,
        replacement: computed.replacement,
    }
}
