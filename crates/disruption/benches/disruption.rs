//! Benchmark group `disruption`: one drift planning pass over a large fleet where every node is
//! drifted — candidate filtering, budgets, and a scheduling simulation per chosen candidate
//! against the capacity left after those already chosen. `drift_pass` fleets have the same pod
//! mix on every node (as a fleet rolled by Deployments often does: one simulation answers every
//! candidate); `drift_pass_mixed` gives every node a different mix, so each candidate is
//! simulated. `drift_pass_spread` is the shape real fleets have: 20 pods per node from five
//! Deployments, each spread over the zones (DoNotSchedule) — pods that depend on other pods, so
//! each candidate is simulated against the receiving nodes and summaries of the others;
//! `drift_pass_spread_whole` simulates each against every node and pod, as before.

#![allow(clippy::unwrap_used)]

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use driftwood_api::nodepool::{Budget, NodePool, NodePoolSpec};
use driftwood_disruption::candidate::{NodeView, PodView};
use driftwood_disruption::drift::DriftFinding;
use driftwood_disruption::plan::{PlannerInput, Simulation, plan_drift_with};
use driftwood_scheduling::resources::{CPU, MEMORY, PODS};
use driftwood_scheduling::testkit::{self, GIB};
use driftwood_scheduling::{
    ExistingNode, Requirements, Resources, SimulationInput, TopologySpread,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];

/// The pod mix of a fleet's nodes.
#[derive(Clone, Copy, PartialEq)]
enum Mix {
    /// The same 1-core pods on every node.
    Same,
    /// Every node's pods differ in size from every other node's.
    Mixed,
    /// Pods of five Deployments, each with a zone spread (maxSkew 1, DoNotSchedule).
    Spread,
}

/// `nodes` drifted 16-core nodes, each with `pods_per_node` pods, one NodePool with the given
/// budget and 400 instance types.
fn fleet(
    nodes: usize,
    pods_per_node: usize,
    budget: &str,
    mix: Mix,
) -> (Vec<NodeView>, SimulationInput, Vec<NodePool>) {
    let mixed = mix == Mix::Mixed;
    let mut views = Vec::with_capacity(nodes);
    let mut existing = Vec::with_capacity(nodes);
    for i in 0..nodes {
        let name = format!("node-{i:05}");
        let zone = ZONES[i % 3];
        let pods: Vec<_> = (0..pods_per_node)
            .map(|p| {
                // Mixed: each node's pods differ in size from every other node's.
                let cpu = if mixed {
                    500 + (i * 7 + p) as i64 % 1000
                } else {
                    1000
                };
                let mut pod = testkit::pod(&format!("default/{name}-{p}"), cpu, 2 * GIB);
                if mix == Mix::Spread {
                    let app = format!("app-{}", p % 5);
                    std::sync::Arc::make_mut(&mut pod.requests).set(CPU, 500);
                    pod.constraints.labels =
                        testkit::labels(&[("app", &app), ("pod-template-hash", "5d8f7c")]);
                    pod.constraints.spreads.push(TopologySpread {
                        topology_key: "topology.kubernetes.io/zone".into(),
                        max_skew: 1,
                        hard: true,
                        selector: Some(Requirements::from_labels(&testkit::labels(&[(
                            "app", &app,
                        )]))),
                        min_domains: None,
                    });
                }
                pod
            })
            .collect();
        views.push(NodeView {
            nodeclaim: format!("nc-{name}"),
            node: Some(name.clone()),
            nodepool: "default".into(),
            initialized: true,
            ready: true,
            drift: Some((
                i as i64,
                DriftFinding {
                    reason: "AMIDrift".into(),
                    message: "ami".into(),
                },
            )),
            pods: pods
                .iter()
                .map(|p| PodView {
                    key: p.key.clone(),
                    reschedulable: true,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
        existing.push(ExistingNode {
            name: name.clone(),
            labels: testkit::labels(&[
                ("kubernetes.io/hostname", &name),
                ("topology.kubernetes.io/zone", zone),
                ("karpenter.sh/nodepool", "default"),
                ("kubernetes.io/arch", "amd64"),
                ("kubernetes.io/os", "linux"),
            ]),
            allocatable: Resources::from_milli([
                (CPU, 16_000),
                (MEMORY, 64 * GIB * 1000),
                (PODS, 110_000),
            ]),
            pods,
            initialized: true,
            ..Default::default()
        });
    }
    let mut spec = testkit::nodepool("default", testkit::fake_instance_types(400));
    spec.labels = testkit::labels(&[("karpenter.sh/nodepool", "default")]);
    let world = SimulationInput {
        existing_nodes: existing.into_iter().map(Arc::new).collect(),
        nodepools: vec![spec],
        ..Default::default()
    };
    let mut pool = NodePool::new("default", NodePoolSpec::default());
    pool.spec.disruption.budgets = vec![Budget {
        nodes: budget.into(),
        ..Default::default()
    }];
    (views, world, vec![pool])
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("disruption");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .warm_up_time(Duration::from_secs(1));
    let only = std::env::var("DRIFTWOOD_BENCH_ONLY").ok();
    for (name, nodes, pods, mix, simulation) in [
        ("drift_pass", 500, 10, Mix::Same, Simulation::Reduced),
        ("drift_pass", 2000, 10, Mix::Same, Simulation::Reduced),
        ("drift_pass", 5000, 10, Mix::Same, Simulation::Reduced),
        (
            "drift_pass_mixed",
            5000,
            10,
            Mix::Mixed,
            Simulation::Reduced,
        ),
        (
            "drift_pass_spread",
            500,
            20,
            Mix::Spread,
            Simulation::Reduced,
        ),
        (
            "drift_pass_spread",
            2000,
            20,
            Mix::Spread,
            Simulation::Reduced,
        ),
        (
            "drift_pass_spread",
            5000,
            20,
            Mix::Spread,
            Simulation::Reduced,
        ),
        (
            "drift_pass_spread_whole",
            500,
            20,
            Mix::Spread,
            Simulation::Whole,
        ),
    ] {
        if only.as_deref().is_some_and(|o| !name.starts_with(o)) {
            continue;
        }
        let (views, world, pools) = fleet(nodes, pods, "10%", mix);
        let pdbs = BTreeMap::new();
        let plan = plan_drift_with(
            PlannerInput {
                now: 0,
                nodes: &views,
                pdb_allowed: &pdbs,
                policy_caps: &Default::default(),
                nodepools: &pools,
                world: world.clone(),
            },
            simulation,
        );
        println!(
            "disruption/{name}/{nodes}: {} commands in one pass ({} blocked by budget)",
            plan.commands.len(),
            plan.blocked.len()
        );
        // The world is built per pass from the watch cache (measured by the controller's
        // memory benchmark), its nodes its own; here it is copied outside the timing, nodes
        // included (a copy that shared them would copy each node the pass changes inside it).
        group.bench_with_input(BenchmarkId::new(name, nodes), &nodes, |b, _| {
            b.iter_batched(
                || SimulationInput {
                    existing_nodes: world
                        .existing_nodes
                        .iter()
                        .map(|n| Arc::new(ExistingNode::clone(n)))
                        .collect(),
                    ..world.clone()
                },
                |world| {
                    plan_drift_with(
                        PlannerInput {
                            now: 0,
                            nodes: &views,
                            pdb_allowed: &pdbs,
                            policy_caps: &Default::default(),
                            nodepools: &pools,
                            world,
                        },
                        simulation,
                    )
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
