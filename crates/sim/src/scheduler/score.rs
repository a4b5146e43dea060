//! kube-scheduler's scoring, default profile, over the nodes that can take a pod:
//! NodeResourcesFit with LeastAllocated (weight 1), NodeResourcesBalancedAllocation (1),
//! PodTopologySpread for `ScheduleAnyway` constraints (2), InterPodAffinity's preferred terms of
//! the pod (2), NodeAffinity's preferred terms (2) and TaintToleration's `PreferNoSchedule`
//! taints (3). Each plugin scores 0–100 per node; the weighted sum orders the nodes, best first,
//! ties by node name. (The preferred terms of pods already running, which kube-scheduler also
//! weighs for the incoming pod, and ImageLocality are not scored.)

use std::collections::BTreeMap;

use driftwood_scheduling::pod::PodAffinityTerm;
use driftwood_scheduling::resources::{CPU, MEMORY};
use driftwood_scheduling::taints::TaintEffect;
use driftwood_scheduling::{ExistingNode, Resources, SimPod};

const MAX: f64 = 100.0;

/// A node as scoring sees it: the node and what its pods request.
pub struct Scorable<'a> {
    /// The node, with the pods already on it.
    pub node: &'a ExistingNode,
    /// The requests of those pods.
    pub used: &'a Resources,
}

/// Requested fraction of cpu and memory with the pod added.
fn fractions(node: &Scorable<'_>, pod: &SimPod) -> [f64; 2] {
    let used = node.used.add(&pod.requests);
    [CPU, MEMORY].map(|r| {
        let capacity = node.node.allocatable.get(r);
        if capacity <= 0 {
            1.0
        } else {
            (used.get(r) as f64 / capacity as f64).min(1.0)
        }
    })
}

fn least_allocated(node: &Scorable<'_>, pod: &SimPod) -> f64 {
    let [cpu, memory] = fractions(node, pod);
    ((1.0 - cpu) + (1.0 - memory)) / 2.0 * MAX
}

fn balanced_allocation(node: &Scorable<'_>, pod: &SimPod) -> f64 {
    let [cpu, memory] = fractions(node, pod);
    (1.0 - (cpu - memory).abs() / 2.0) * MAX
}

/// Reverse-normalized: the node with the lowest raw value scores 100.
fn reverse_normalized(raw: &[f64]) -> Vec<f64> {
    let max = raw.iter().copied().fold(0.0, f64::max);
    let min = raw.iter().copied().fold(f64::INFINITY, f64::min);
    raw.iter()
        .map(|s| {
            if max <= 0.0 {
                MAX
            } else {
                MAX * (max + min - s) / max
            }
        })
        .collect()
}

/// For each node, how many pods that `counted` accepts run in the node's domain of
/// `topology_key` (None for a node without that label), and how many domains there are; pods
/// being deleted are counted `with_terminating` (kube-scheduler's PodTopologySpread skips them,
/// its InterPodAffinity does not).
fn per_domain(
    nodes: &[Scorable<'_>],
    topology_key: &str,
    with_terminating: bool,
    counted: impl Fn(&SimPod) -> bool,
) -> (Vec<Option<usize>>, usize) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for scorable in nodes {
        if let Some(domain) = scorable.node.labels.get(topology_key) {
            let terminating = if with_terminating {
                scorable.node.terminating.as_slice()
            } else {
                &[]
            };
            let pods = scorable.node.pods.iter().chain(terminating);
            let matching = pods.filter(|p| counted(p)).count();
            *counts.entry(domain.as_str()).or_default() += matching;
        }
    }
    let per_node = nodes
        .iter()
        .map(|n| {
            n.node
                .labels
                .get(topology_key)
                .map(|domain| counts.get(domain.as_str()).copied().unwrap_or(0))
        })
        .collect();
    (per_node, counts.len())
}

/// PodTopologySpread scoring: fewer matching pods in a node's domain is better, each soft
/// constraint weighted by the log of its domain count (as kube-scheduler weighs them).
fn topology_spread(nodes: &[Scorable<'_>], pod: &SimPod) -> Vec<f64> {
    let soft: Vec<_> = pod.constraints.spreads.iter().filter(|s| !s.hard).collect();
    if soft.is_empty() {
        return vec![0.0; nodes.len()];
    }
    let mut raw = vec![0.0; nodes.len()];
    for spread in soft {
        let Some(selector) = &spread.selector else {
            continue;
        };
        let (counts, domains) = per_domain(nodes, &spread.topology_key, false, |p| {
            p.constraints.namespace == pod.constraints.namespace
                && selector.matches_labels(&p.constraints.labels)
        });
        let weight = ((domains + 2) as f64).ln();
        for (score, count) in raw.iter_mut().zip(counts) {
            *score += weight * count.unwrap_or(0) as f64;
        }
    }
    reverse_normalized(&raw)
}

/// NodeAffinity: the weights of the preferred terms a node matches, normalized to the best.
fn node_affinity(nodes: &[Scorable<'_>], pod: &SimPod) -> Vec<f64> {
    let raw: Vec<f64> = nodes
        .iter()
        .map(|n| {
            pod.constraints
                .preferred_terms
                .iter()
                .filter(|(_, term)| term.matches_labels(&n.node.labels))
                .map(|(weight, _)| f64::from(*weight))
                .sum()
        })
        .collect();
    let max = raw.iter().copied().fold(0.0, f64::max);
    raw.iter()
        .map(|s| if max <= 0.0 { 0.0 } else { MAX * s / max })
        .collect()
}

/// TaintToleration: fewer untolerated PreferNoSchedule taints is better.
fn taint_toleration(nodes: &[Scorable<'_>], pod: &SimPod) -> Vec<f64> {
    let raw: Vec<f64> = nodes
        .iter()
        .map(|n| {
            n.node
                .taints
                .iter()
                .filter(|t| t.effect == TaintEffect::PreferNoSchedule)
                .filter(|t| {
                    !pod.constraints
                        .tolerations
                        .iter()
                        .any(|tol| tol.tolerates(t))
                })
                .count() as f64
        })
        .collect();
    reverse_normalized(&raw)
}

/// Whether `term` (of a pod in `namespace`) looks at pods in `other`.
fn term_namespace(
    term: &PodAffinityTerm,
    namespace: &str,
    other: &str,
    namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
) -> bool {
    let selection = &term.namespaces;
    if selection.names.is_empty() && selection.selector.is_none() {
        return namespace == other;
    }
    selection.names.contains(other)
        || selection.selector.as_ref().is_some_and(|selector| {
            namespace_labels
                .get(other)
                .is_some_and(|labels| selector.matches_labels(labels))
        })
}

/// InterPodAffinity: for each preferred term of the pod, its weight times the matching pods in
/// the node's domain (added for affinity, taken away for anti-affinity), scaled between the
/// lowest and the highest node.
fn inter_pod_affinity(
    nodes: &[Scorable<'_>],
    pod: &SimPod,
    namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<f64> {
    let constraints = &pod.constraints;
    let terms: Vec<(f64, &PodAffinityTerm)> = constraints
        .preferred_affinity
        .iter()
        .map(|(w, t)| (f64::from(*w), t))
        .chain(
            constraints
                .preferred_anti_affinity
                .iter()
                .map(|(w, t)| (-f64::from(*w), t)),
        )
        .collect();
    if terms.is_empty() {
        return vec![0.0; nodes.len()];
    }
    let mut raw = vec![0.0; nodes.len()];
    for (weight, term) in terms {
        let Some(selector) = &term.selector else {
            continue;
        };
        let (counts, _) = per_domain(nodes, &term.topology_key, true, |p| {
            term_namespace(
                term,
                &constraints.namespace,
                &p.constraints.namespace,
                namespace_labels,
            ) && selector.matches_labels(&p.constraints.labels)
        });
        for (score, count) in raw.iter_mut().zip(counts) {
            *score += weight * count.unwrap_or(0) as f64;
        }
    }
    let max = raw.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = raw.iter().copied().fold(f64::INFINITY, f64::min);
    raw.iter()
        .map(|s| {
            if max > min {
                MAX * (s - min) / (max - min)
            } else {
                0.0
            }
        })
        .collect()
}

/// The weighted score of each node for `pod` (same order as `nodes`).
pub fn scores(
    nodes: &[Scorable<'_>],
    pod: &SimPod,
    namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<f64> {
    let spread = topology_spread(nodes, pod);
    let pod_affinity = inter_pod_affinity(nodes, pod, namespace_labels);
    let affinity = node_affinity(nodes, pod);
    let taints = taint_toleration(nodes, pod);
    nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            least_allocated(node, pod)
                + balanced_allocation(node, pod)
                + 2.0 * spread[i]
                + 2.0 * pod_affinity[i]
                + 2.0 * affinity[i]
                + 3.0 * taints[i]
        })
        .collect()
}
