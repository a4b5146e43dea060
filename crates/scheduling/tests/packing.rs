//! The Karpenter-shaped benchmark input: every pod is placed, node counts are sensible and the
//! opened nodes are well packed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../benches/fixture.rs"]
mod fixture;

use driftwood_scheduling::{packing_efficiency, schedule};

#[test]
fn karpenter_shape_places_everything_and_packs_well() {
    let input = fixture::karpenter_shape(1_000);
    let result = schedule(&input).unwrap();
    assert!(
        result.unschedulable.is_empty(),
        "{:?}",
        result.unschedulable.first()
    );
    let placed: usize = result.new_nodeclaims.iter().map(|c| c.pods.len()).sum();
    assert_eq!(placed, 1_000);
    // 200 hostname anti-affinity pods need 200 distinct nodes; more than that is waste.
    let nodes = result.new_nodeclaims.len();
    eprintln!(
        "nodeclaims: {nodes}, packing: {:?}",
        packing_efficiency(&input, &result)
    );
    assert!(nodes >= 200, "{nodes}");
    assert!(nodes <= 260, "{nodes}");
    let (cpu, mem) = packing_efficiency(&input, &result);
    assert!(cpu > 0.5 || mem > 0.5, "cpu {cpu} memory {mem}");
}

#[test]
fn existing_nodes_shape_fills_existing_nodes_first() {
    let input = fixture::existing_nodes_shape(200, 1_000);
    let result = schedule(&input).unwrap();
    assert!(result.unschedulable.is_empty());
    assert_eq!(result.existing_placements.len(), 1_000);
    assert!(result.new_nodeclaims.is_empty());
}

#[test]
fn skipping_known_rejections_does_not_change_the_karpenter_shape_result() {
    let input = fixture::karpenter_shape(500);
    let fast = schedule(&input).unwrap();
    let mut slow_input = input.clone();
    slow_input.options.exhaustive = true;
    assert_eq!(schedule(&slow_input).unwrap(), fast);
}
