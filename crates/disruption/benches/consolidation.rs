//! Benchmark group `consolidation`: one pass of the consolidation methods (emptiness, then
//! multi-node, then single-node consolidation, as the disruption loop runs them when drift has
//! nothing to do) over a fleet of on-demand 16-core nodes in a NodePool limited to on-demand.
//! `steady` fleets are full (15 of 15.92 allocatable cores used on every node): nothing can be
//! consolidated, so multi-node consolidation's binary search and single-node consolidation's
//! walk over every candidate both run to the end — the pass a settled cluster meets whenever it
//! changes. `steady_mixed` gives every node a different pod mix (no two nodes alike, so every
//! candidate is simulated). `steady_spread` fleets are `steady` with each pod of one of five
//! Deployments spread over zones (DoNotSchedule): nodes of three shapes (one a zone), so the
//! memo of failed shapes answers all but three candidates; `steady_spread_mixed` gives their
//! pods `steady_mixed`'s sizes, so no candidate is like another and each is simulated against
//! the whole cluster. `scaled_down` fleets run 3 pods a node: multi-node consolidation
//! finds its command (the largest prefix, at most 101 nodes).

#![allow(clippy::unwrap_used)]

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use driftwood_api::nodepool::{Budget, NodePool, NodePoolSpec};
use driftwood_disruption::candidate::{NodeView, PodView};
use driftwood_disruption::consolidation::{
    ConsolidationInput, MethodOutcome, plan_emptiness, plan_multi_node, plan_single_node,
};
use driftwood_disruption::world::PassWorld;
use driftwood_scheduling::pod::TopologySpread;
use driftwood_scheduling::resources::{CPU, MEMORY, PODS};
use driftwood_scheduling::testkit::{self, GIB};
use driftwood_scheduling::{
    ExistingNode, PodConstraints, Requirements, Resources, Shared, SimulationInput,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];

/// How the pods of a fleet differ.
#[derive(Clone, Copy, PartialEq)]
enum Pods {
    /// 1 core each.
    Same,
    /// Sizes differing per node, 940–1,000 millicores.
    Mixed,
    /// 1 core each, of five Deployments with a zone spread (DoNotSchedule): each simulation is
    /// against the whole cluster.
    Spread,
    /// `Mixed` sizes, of `Spread`'s Deployments.
    SpreadMixed,
}

/// `nodes` Consolidatable fake-it-15 nodes (16 cores) with `pods_per_node` pods each.
fn fleet(
    nodes: usize,
    pods_per_node: usize,
    shape: Pods,
) -> (Vec<NodeView>, SimulationInput, Vec<NodePool>) {
    let deployments: Vec<Shared<PodConstraints>> = (0..5)
        .map(|d| {
            let app = format!("app-{d}");
            let selector = Requirements::from_labels(&testkit::labels(&[("app", &app)]));
            Shared::new(PodConstraints {
                namespace: "default".into(),
                labels: testkit::labels(&[("app", &app)]),
                spreads: vec![TopologySpread {
                    topology_key: "topology.kubernetes.io/zone".into(),
                    max_skew: 1,
                    hard: true,
                    selector: Some(selector),
                    min_domains: None,
                }],
                ..PodConstraints::default()
            })
        })
        .collect();
    let mut views = Vec::with_capacity(nodes);
    let mut existing = Vec::with_capacity(nodes);
    for i in 0..nodes {
        let name = format!("node-{i:05}");
        let pods: Vec<_> = (0..pods_per_node)
            .map(|p| {
                let cpu = if matches!(shape, Pods::Mixed | Pods::SpreadMixed) {
                    940 + ((i * 7 + p) % 61) as i64
                } else {
                    1000
                };
                let mut pod = testkit::pod(&format!("default/{name}-{p}"), cpu, 2 * GIB);
                if matches!(shape, Pods::Spread | Pods::SpreadMixed) {
                    // One copy per Deployment, as the controller's cache shares them.
                    pod.constraints = deployments[(i + p) % deployments.len()].clone();
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
            consolidatable: true,
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
                ("topology.kubernetes.io/zone", ZONES[i % 3]),
                ("karpenter.sh/nodepool", "default"),
                ("karpenter.sh/capacity-type", "on-demand"),
                ("node.kubernetes.io/instance-type", "fake-it-15"),
                ("kubernetes.io/arch", "amd64"),
                ("kubernetes.io/os", "linux"),
            ]),
            allocatable: Resources::from_milli([
                (CPU, 15_920),
                (MEMORY, 31 * GIB * 1000),
                (PODS, 110_000),
            ]),
            pods,
            initialized: true,
            ..Default::default()
        });
    }
    let mut spec = testkit::nodepool("default", testkit::fake_instance_types(16));
    spec.labels = testkit::labels(&[("karpenter.sh/nodepool", "default")]);
    spec.requirements.add(
        "karpenter.sh/capacity-type",
        driftwood_scheduling::Requirement::is_in(["on-demand"]),
    );
    let world = SimulationInput {
        existing_nodes: existing.into_iter().map(Arc::new).collect(),
        nodepools: vec![spec],
        ..Default::default()
    };
    let mut pool = NodePool::new("default", NodePoolSpec::default());
    pool.spec.disruption.budgets = vec![Budget {
        nodes: "10%".into(),
        ..Default::default()
    }];
    (views, world, vec![pool])
}

/// One pass: emptiness, then multi-node, then single-node, each only if the one before found
/// nothing; returns the outcome that found a command, or single-node's.
fn pass(views: &[NodeView], world: &SimulationInput, pools: &[NodePool]) -> MethodOutcome {
    let pdbs = BTreeMap::new();
    let input = || ConsolidationInput {
        now: 0,
        nodes: views,
        pdb_allowed: &pdbs,
        nodepools: pools,
        world: PassWorld::of(views, world.clone()),
        spot_to_spot: false,
    };
    let empty = plan_emptiness(input());
    if empty.command.is_some() {
        return empty;
    }
    let multi = plan_multi_node(input(), &mut || false);
    if multi.command.is_some() {
        return multi;
    }
    plan_single_node(input(), &[], &mut || false)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("consolidation");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .warm_up_time(Duration::from_secs(1));
    for (shape, pods, kind, sizes) in [
        ("steady", 15, Pods::Same, &[1000, 5000][..]),
        ("steady_mixed", 15, Pods::Mixed, &[1000][..]),
        ("steady_spread", 15, Pods::Spread, &[250, 500][..]),
        (
            "steady_spread_mixed",
            15,
            Pods::SpreadMixed,
            &[250, 500][..],
        ),
        ("scaled_down", 3, Pods::Same, &[1000, 5000][..]),
    ] {
        for &nodes in sizes {
            let (views, world, pools) = fleet(nodes, pods, kind);
            let outcome = pass(&views, &world, &pools);
            println!(
                "consolidation/{shape}/{nodes}: {} eligible, command {:?}",
                outcome.eligible,
                outcome
                    .command
                    .as_ref()
                    .map(|c| (c.method, c.decision(), c.candidates.len()))
            );
            group.bench_with_input(BenchmarkId::new(shape, nodes), &nodes, |b, _| {
                b.iter(|| pass(&views, &world, &pools))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
