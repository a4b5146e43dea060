//! Criterion benchmark of the scheduling simulation, shaped like Karpenter's own.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use driftwood_scheduling::{packing_efficiency, schedule};

mod fixture;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduling");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for pods in [100usize, 1_000, 5_000, 20_000] {
        let input = fixture::karpenter_shape(pods);
        let start = Instant::now();
        let result = schedule(&input).unwrap_or_default();
        let took = start.elapsed();
        let (cpu, mem) = packing_efficiency(&input, &result);
        eprintln!(
            "karpenter_shape/{pods}: {} nodeclaims, {} unschedulable, packing cpu {:.1}% memory {:.1}%, one run {:.1} ms",
            result.new_nodeclaims.len(),
            result.unschedulable.len(),
            cpu * 100.0,
            mem * 100.0,
            took.as_secs_f64() * 1000.0
        );
        group.throughput(Throughput::Elements(pods as u64));
        group.bench_with_input(
            BenchmarkId::new("karpenter_shape", pods),
            &input,
            |b, input| b.iter(|| schedule(black_box(input))),
        );
    }
    let input = fixture::existing_nodes_shape(2_000, 10_000);
    let result = schedule(&input).unwrap_or_default();
    eprintln!(
        "existing_nodes/10000: {} placed on existing nodes, {} nodeclaims, {} unschedulable",
        result.existing_placements.len(),
        result.new_nodeclaims.len(),
        result.unschedulable.len()
    );
    group.throughput(Throughput::Elements(10_000));
    group.bench_with_input(
        BenchmarkId::new("existing_nodes", 10_000),
        &input,
        |b, input| b.iter(|| schedule(black_box(input))),
    );
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
