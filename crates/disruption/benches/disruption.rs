//! Benchmark group `disruption`: one drift planning pass over a large fleet where every node is
//! drifted — candidate filtering, budgets, and a scheduling simulation per chosen candidate
//! against the capacity left after those already chosen. `drift_pass` fleets have the same pod
//! mix on every node (as a fleet rolled by Deployments often does: one simulation answers every
//! candidate); `drift_pass_mixed` gives every node a different mix, so each candidate is
//! simulated.

#![allow(clippy::unwrap_used)]

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use driftwood_api::nodepool::{Budget, NodePool, NodePoolSpec};
use driftwood_disruption::candidate::{NodeView, PodView};
use driftwood_disruption::drift::DriftFinding;
use driftwood_disruption::plan::{PlannerInput, plan_drift};
use driftwood_scheduling::resources::{CPU, MEMORY, PODS};
use driftwood_scheduling::testkit::{self, GIB};
use driftwood_scheduling::{ExistingNode, Resources, SimulationInput};
use std::collections::BTreeMap;
use std::time::Duration;

const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];

/// `nodes` drifted 16-core nodes, each with `pods_per_node` 1-core pods, one NodePool with the
/// given budget and 400 instance types.
fn fleet(
    nodes: usize,
    pods_per_node: usize,
    budget: &str,
    mixed: bool,
) -> (Vec<NodeView>, SimulationInput, Vec<NodePool>) {
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
                testkit::pod(&format!("default/{name}-{p}"), cpu, 2 * GIB)
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
        existing_nodes: existing,
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
    for (nodes, budget, mixed) in [
        (500, "10%", false),
        (2000, "10%", false),
        (5000, "10%", false),
        (5000, "10%", true),
    ] {
        let (views, world, pools) = fleet(nodes, 10, budget, mixed);
        let name = if mixed {
            "drift_pass_mixed"
        } else {
            "drift_pass"
        };
        let pdbs = BTreeMap::new();
        let plan = plan_drift(PlannerInput {
            now: 0,
            nodes: &views,
            pdb_allowed: &pdbs,
            nodepools: &pools,
            world: world.clone(),
        });
        println!(
            "disruption/{name}/{nodes}: {} commands in one pass ({} blocked by budget)",
            plan.commands.len(),
            plan.blocked.len()
        );
        group.bench_with_input(BenchmarkId::new(name, nodes), &nodes, |b, _| {
            b.iter(|| {
                plan_drift(PlannerInput {
                    now: 0,
                    nodes: &views,
                    pdb_allowed: &pdbs,
                    nodepools: &pools,
                    world: world.clone(),
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
