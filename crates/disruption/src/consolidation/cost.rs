//! What disrupting a node costs, as Karpenter weighs it: each pod's eviction cost from its
//! deletion cost and priority, a node's reschedule cost (1 plus its movable pods' positive
//! costs), and emptiness (no movable pod with a positive cost).

use crate::candidate::{NodeView, PodView};

/// Every node costs this much to disrupt before its pods are counted.
pub const PER_NODE_BASE_DISRUPTION_COST: f64 = 1.0;

/// A pod's eviction cost: 1, plus its `pod-deletion-cost` over 2^27 and its priority over 2^25,
/// clamped to [-10, 10] (a default pod costs 1; the extremes weigh about ±15 pods).
pub fn eviction_cost(pod: &PodView) -> f64 {
    let cost = 1.0
        + f64::from(pod.deletion_cost) / 2f64.powi(27)
        + f64::from(pod.priority) / 2f64.powi(25);
    cost.clamp(-10.0, 10.0)
}

/// The cost of moving `node`'s pods: the base cost plus every movable pod's positive eviction
/// cost (a pod with a negative cost does not make a node cheaper to disrupt).
pub fn reschedule_cost(node: &NodeView) -> f64 {
    PER_NODE_BASE_DISRUPTION_COST
        + node
            .pods
            .iter()
            .filter(|p| p.reschedulable)
            .map(|p| eviction_cost(p).max(0.0))
            .sum::<f64>()
}

/// Whether `node` is empty to consolidation: no movable pod adds to its reschedule cost.
pub fn is_empty(node: &NodeView) -> bool {
    reschedule_cost(node) <= PER_NODE_BASE_DISRUPTION_COST
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(deletion_cost: i32, priority: i32) -> PodView {
        PodView {
            key: "default/p".into(),
            reschedulable: true,
            deletion_cost,
            priority,
            ..Default::default()
        }
    }

    /// Karpenter's EvictionCost: default 1, weighted by deletion cost and priority, clamped.
    #[test]
    fn eviction_cost_is_weighted_and_clamped() {
        assert_eq!(eviction_cost(&pod(0, 0)), 1.0);
        assert!((eviction_cost(&pod(1 << 27, 0)) - 2.0).abs() < 1e-9);
        assert!((eviction_cost(&pod(0, 1 << 25)) - 2.0).abs() < 1e-9);
        assert_eq!(eviction_cost(&pod(i32::MAX, 1_000_000_000)), 10.0);
        assert_eq!(eviction_cost(&pod(i32::MIN, 0)), -10.0);
    }

    /// A node whose only movable pods cost nothing (or less) is empty; DaemonSet pods never
    /// count.
    #[test]
    fn emptiness_counts_only_movable_pods_with_a_positive_cost() {
        let mut node = NodeView::default();
        assert!(is_empty(&node));
        node.pods.push(PodView {
            reschedulable: false,
            ..pod(0, 0)
        });
        assert!(is_empty(&node));
        node.pods.push(pod(i32::MIN, 0));
        assert!(
            is_empty(&node),
            "a negative-cost pod does not make a node occupied"
        );
        node.pods.push(pod(0, 0));
        assert!(!is_empty(&node));
        assert_eq!(reschedule_cost(&node), 2.0);
    }
}
