//! Inputs shaped like Karpenter's scheduling benchmark, generated from a fixed seed; shared by
//! the criterion benchmark and the packing test.

use driftwood_api::wellknown::{LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE};
use driftwood_scheduling::pod::{NamespaceSelection, PodAffinityTerm, TopologySpread};
use driftwood_scheduling::requirements::Requirements;
use driftwood_scheduling::testkit::{self, MIB};
use driftwood_scheduling::{ExistingNode, Resources, SimPod, SimulationInput};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const CPU_CHOICES: [i64; 5] = [100, 250, 500, 1000, 1500];
const MEMORY_CHOICES_MIB: [i64; 6] = [100, 256, 512, 1024, 2048, 4096];
const LABEL_VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

fn sized_pod(rng: &mut ChaCha8Rng, key: String) -> SimPod {
    let cpu = CPU_CHOICES[rng.random_range(0..CPU_CHOICES.len())];
    let mem = MEMORY_CHOICES_MIB[rng.random_range(0..MEMORY_CHOICES_MIB.len())];
    testkit::pod(&key, cpu, mem * MIB)
}

fn pick(rng: &mut ChaCha8Rng) -> &'static str {
    LABEL_VALUES[rng.random_range(0..LABEL_VALUES.len())]
}

fn selector(key: &str, value: &str) -> Option<Requirements> {
    Some(Requirements::from_labels(&testkit::labels(&[(key, value)])))
}

/// Five equal groups: unconstrained; zone spread (maxSkew 1); hostname spread; zonal
/// self-affinity; hostname anti-affinity.
pub fn karpenter_pods(count: usize, seed: u64) -> Vec<SimPod> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let per = count / 5;
    let mut pods = Vec::with_capacity(count);
    for i in 0..per {
        pods.push(sized_pod(&mut rng, format!("bench/generic-{i}")));
    }
    for (group, key) in [
        ("zone-spread", LABEL_TOPOLOGY_ZONE),
        ("host-spread", LABEL_HOSTNAME),
    ] {
        for i in 0..per {
            let mut p = sized_pod(&mut rng, format!("bench/{group}-{i}"));
            p.constraints.labels = testkit::labels(&[("my-label", pick(&mut rng))]);
            p.constraints.spreads.push(TopologySpread {
                topology_key: key.to_string(),
                max_skew: 1,
                hard: true,
                selector: selector("my-label", pick(&mut rng)),
                min_domains: None,
            });
            pods.push(p);
        }
    }
    for i in 0..per {
        let mut p = sized_pod(&mut rng, format!("bench/zone-affinity-{i}"));
        let value = pick(&mut rng);
        p.constraints.labels = testkit::labels(&[("my-affinity", value)]);
        p.constraints.affinity.push(PodAffinityTerm {
            topology_key: LABEL_TOPOLOGY_ZONE.to_string(),
            selector: selector("my-affinity", value),
            namespaces: NamespaceSelection::default(),
        });
        pods.push(p);
    }
    for i in 0..per {
        let mut p = sized_pod(&mut rng, format!("bench/host-anti-{i}"));
        p.constraints.labels = testkit::labels(&[("app", "nginx")]);
        p.constraints.anti_affinity.push(PodAffinityTerm {
            topology_key: LABEL_HOSTNAME.to_string(),
            selector: selector("app", "nginx"),
            namespaces: NamespaceSelection::default(),
        });
        pods.push(p);
    }
    pods
}

/// 400 instance types, one NodePool without limits, no existing nodes.
pub fn karpenter_shape(pods: usize) -> SimulationInput {
    SimulationInput {
        pods: karpenter_pods(pods, 42),
        nodepools: vec![testkit::nodepool(
            "default",
            testkit::fake_instance_types(400),
        )],
        ..SimulationInput::default()
    }
}

/// `nodes` existing nodes of 16 cores / 64 GiB / 110 pods over three zones, and `pods`
/// unconstrained pods to place on them.
pub fn existing_nodes_shape(nodes: usize, pods: usize) -> SimulationInput {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let existing = (0..nodes)
        .map(|i| ExistingNode {
            name: format!("node-{i:05}"),
            labels: testkit::labels(&[
                (LABEL_HOSTNAME, &format!("node-{i:05}")),
                (
                    LABEL_TOPOLOGY_ZONE,
                    ["test-zone-1", "test-zone-2", "test-zone-3"][i % 3],
                ),
            ]),
            allocatable: Resources::parse([("cpu", "15900m"), ("memory", "62Gi"), ("pods", "110")])
                .unwrap_or_default(),
            initialized: true,
            ..ExistingNode::default()
        })
        .map(std::sync::Arc::new)
        .collect();
    SimulationInput {
        existing_nodes: existing,
        pods: (0..pods)
            .map(|i| sized_pod(&mut rng, format!("bench/pod-{i}")))
            .collect(),
        nodepools: vec![testkit::nodepool(
            "default",
            testkit::fake_instance_types(400),
        )],
        ..SimulationInput::default()
    }
}
