//! Builders of plain simulation data for tests and benchmarks (here and in other crates):
//! Karpenter-style fake instance types, simple pods and NodePools.

use std::collections::BTreeMap;

use driftwood_api::wellknown::{
    CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, LABEL_ARCH, LABEL_INSTANCE_CPU,
    LABEL_INSTANCE_MEMORY, LABEL_INSTANCE_TYPE, LABEL_OS,
};

use crate::instance_type::{InstanceType, Offering, Overhead};
use crate::model::NodePoolSpec;
use crate::pod::SimPod;
use crate::requirements::Requirements;
use crate::resources::{CPU, MEMORY, PODS, Resources};

/// Bytes in a GiB.
pub const GIB: i64 = 1 << 30;
/// Bytes in a MiB.
pub const MIB: i64 = 1 << 20;

/// One instance type: `cpu` cores, `memory_gib` GiB, `max_pods` pods, with a small overhead,
/// offered on-demand and spot in every zone (spot 30% cheaper), priced by size.
pub fn instance_type(
    name: &str,
    cpu: i64,
    memory_gib: i64,
    max_pods: i64,
    zones: &[&str],
) -> InstanceType {
    let labels: BTreeMap<String, String> = [
        (LABEL_INSTANCE_TYPE, name.to_string()),
        (LABEL_ARCH, "amd64".to_string()),
        (LABEL_OS, "linux".to_string()),
        (LABEL_INSTANCE_CPU, cpu.to_string()),
        (LABEL_INSTANCE_MEMORY, (memory_gib * 1024).to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let price = cpu as f64 * 0.025 + memory_gib as f64 * 0.004;
    let mut offerings = Vec::new();
    for zone in zones {
        offerings.push(Offering {
            zone: zone.to_string(),
            capacity_type: CAPACITY_TYPE_ON_DEMAND.to_string(),
            price,
            available: true,
        });
        offerings.push(Offering {
            zone: zone.to_string(),
            capacity_type: CAPACITY_TYPE_SPOT.to_string(),
            price: price * 0.7,
            available: true,
        });
    }
    InstanceType {
        name: name.to_string(),
        requirements: Requirements::from_labels(&labels),
        capacity: Resources::from_milli([
            (CPU, cpu * 1000),
            (MEMORY, memory_gib * GIB * 1000),
            (PODS, max_pods * 1000),
        ]),
        overhead: Overhead {
            kube_reserved: Resources::from_milli([(CPU, 80), (MEMORY, 256 * MIB * 1000)]),
            system_reserved: Resources::new(),
            eviction_threshold: Resources::from_milli([(MEMORY, 100 * MIB * 1000)]),
        },
        offerings,
    }
}

/// `count` fake instance types shaped like Karpenter's benchmark: type `i` has `i+1` cores and
/// `2(i+1)` GiB, 110 pods, in the three zones `test-zone-1..3`.
pub fn fake_instance_types(count: usize) -> Vec<InstanceType> {
    let zones = ["test-zone-1", "test-zone-2", "test-zone-3"];
    (0..count as i64)
        .map(|i| instance_type(&format!("fake-it-{i}"), i + 1, 2 * (i + 1), 110, &zones))
        .collect()
}

/// A NodePool without limits, requirements or taints.
pub fn nodepool(name: &str, instance_types: Vec<InstanceType>) -> NodePoolSpec {
    NodePoolSpec {
        name: name.to_string(),
        instance_types: instance_types.into(),
        ..NodePoolSpec::default()
    }
}

/// A pod `namespace/name` requesting `cpu_milli` millicores and `memory_bytes` bytes.
pub fn pod(key: &str, cpu_milli: i64, memory_bytes: i64) -> SimPod {
    SimPod::new(
        key,
        Resources::from_milli([(CPU, cpu_milli), (MEMORY, memory_bytes * 1000)]),
    )
}

/// Labels from pairs.
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A seeded xorshift generator for generated test cases: each call gives a number below `n`
/// (`n` > 0), the same sequence for the same seed.
pub fn seeded(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut x = seed;
    move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    }
}
