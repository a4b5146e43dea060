//! The instance-type catalog: Karpenter's labels, capacity, overhead, allocatable and offerings
//! (zone × capacity type × price × availability), built purely from described EC2 data into the
//! scheduling crate's model, driftwood's one model of an instance type.

use std::collections::{BTreeMap, BTreeSet};

use driftwood_api::wellknown::INSTANCE_TYPE_LABELS;
use driftwood_api::wellknown::{
    CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, LABEL_ARCH, LABEL_INSTANCE_CATEGORY,
    LABEL_INSTANCE_CPU, LABEL_INSTANCE_CPU_MANUFACTURER,
    LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ, LABEL_INSTANCE_EBS_BANDWIDTH,
    LABEL_INSTANCE_FAMILY, LABEL_INSTANCE_GENERATION, LABEL_INSTANCE_GPU_COUNT,
    LABEL_INSTANCE_GPU_MANUFACTURER, LABEL_INSTANCE_GPU_MEMORY, LABEL_INSTANCE_GPU_NAME,
    LABEL_INSTANCE_HYPERVISOR, LABEL_INSTANCE_LOCAL_NVME, LABEL_INSTANCE_MEMORY,
    LABEL_INSTANCE_SIZE, LABEL_INSTANCE_TYPE, LABEL_OS, LABEL_TOPOLOGY_ZONE_ID,
};
use driftwood_api::wellknown::{
    LABEL_INSTANCE_ACCELERATOR_COUNT, LABEL_INSTANCE_ACCELERATOR_MANUFACTURER,
    LABEL_INSTANCE_ACCELERATOR_NAME, LABEL_INSTANCE_CAPABILITY_FLEX,
    LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED, LABEL_INSTANCE_NETWORK_BANDWIDTH,
    LABEL_INSTANCE_TENANCY,
};
use driftwood_scheduling::requirements::{Requirement, Requirements};
use driftwood_scheduling::{InstanceType, Offering};
use jiff::Timestamp;

use super::ami::kube_arch;
use super::overhead::{
    KubeletOverrides, OverheadError, Resources, base_resources, max_pods, overhead,
};
use super::unavailable::{OfferingKey, UnavailableOfferings};
use crate::ports::InstanceTypeDescription;

const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

/// The labels every node of `it` gets from its type: its single-valued `In` requirements,
/// without the zone id (a launch labels the node with its own zone's).
pub fn type_labels(it: &InstanceType) -> BTreeMap<String, String> {
    it.requirements
        .iter()
        .filter(|(key, _)| *key != LABEL_TOPOLOGY_ZONE_ID)
        .filter_map(|(key, r)| Some((key.to_string(), r.single_value()?.to_string())))
        .collect()
}

/// An instance type in the scheduling model, from Karpenter's labels for it: each label an
/// `In` requirement, `DoesNotExist` for every instance-type label it lacks (as Karpenter's
/// instance types carry them, so `Exists` or `Gt` on a GPU, NVMe or bandwidth label rules the
/// type out), `In` the zone ids of its offerings' zones.
fn instance_type(
    name: &str,
    labels: &BTreeMap<String, String>,
    zone_ids: BTreeSet<&String>,
    capacity: Resources,
    overhead: driftwood_scheduling::Overhead,
    offerings: Vec<Offering>,
) -> InstanceType {
    let mut requirements = Requirements::from_labels(labels.iter());
    for key in INSTANCE_TYPE_LABELS {
        if !labels.contains_key(*key) {
            requirements.add(key, Requirement::does_not_exist());
        }
    }
    let zone_ids: Vec<String> = zone_ids
        .into_iter()
        .filter(|id| !id.is_empty())
        .cloned()
        .collect();
    if !zone_ids.is_empty() {
        requirements.add(LABEL_TOPOLOGY_ZONE_ID, Requirement::is_in(zone_ids));
    }
    InstanceType {
        name: name.to_string(),
        requirements,
        capacity,
        overhead,
        offerings,
    }
}

/// The parts of an instance type name: category `c`, family `c6g`, generation `6`, size `2xlarge`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeNameParts {
    pub category: String,
    pub family: String,
    pub generation: Option<String>,
    pub size: String,
}

/// Splits `c6gd.2xlarge` into its parts.
pub fn parse_type_name(name: &str) -> TypeNameParts {
    let (family, size) = name.split_once('.').unwrap_or((name, ""));
    let category: String = family
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    // High-memory types carry their memory between category and generation (`u-3tb1`: `u`,
    // generation 1), as Karpenter's name pattern allows.
    let rest = &family[category.len()..];
    let rest = rest
        .strip_prefix('-')
        .and_then(|r| {
            let digits = r.chars().take_while(|c| c.is_ascii_digit()).count();
            (digits > 0)
                .then(|| r[digits..].strip_prefix("tb"))
                .flatten()
        })
        .unwrap_or(rest);
    let generation: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    TypeNameParts {
        category,
        family: family.to_string(),
        generation: Some(generation).filter(|g| !g.is_empty()),
        size: size.to_string(),
    }
}

/// A name as Karpenter puts it in a label value: lower case, spaces as dashes
/// (`Radeon Pro V520` → `radeon-pro-v520`).
fn kebab(name: &str) -> String {
    name.to_ascii_lowercase().replace(' ', "-")
}

/// Karpenter's labels for a described instance type (`None` if its architecture is unusable).
pub fn instance_type_labels(
    desc: &InstanceTypeDescription,
    os: &str,
) -> Option<BTreeMap<String, String>> {
    let arch = desc
        .supported_architectures
        .iter()
        .find_map(|a| kube_arch(a))?;
    let parts = parse_type_name(&desc.instance_type);
    let mut labels = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        labels.insert(k.to_string(), v);
    };
    put(LABEL_INSTANCE_TYPE, desc.instance_type.clone());
    put(LABEL_ARCH, arch.to_string());
    put(LABEL_OS, os.to_string());
    put(LABEL_INSTANCE_CATEGORY, parts.category);
    put(LABEL_INSTANCE_FAMILY, parts.family);
    if let Some(g) = parts.generation {
        put(LABEL_INSTANCE_GENERATION, g);
    }
    put(LABEL_INSTANCE_SIZE, parts.size);
    put(LABEL_INSTANCE_CPU, desc.default_vcpus.to_string());
    put(LABEL_INSTANCE_MEMORY, desc.memory_mib.to_string());
    if let Some(h) = desc.hypervisor.as_ref().filter(|h| !h.is_empty()) {
        put(LABEL_INSTANCE_HYPERVISOR, h.clone());
    }
    if let Some(m) = &desc.processor_manufacturer {
        put(LABEL_INSTANCE_CPU_MANUFACTURER, kebab(m));
    }
    if let Some(ghz) = desc.sustained_clock_speed_ghz {
        put(
            LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
            format!("{}", (ghz * 1000.0).round() as i64),
        );
    }
    if let Some(gb) = desc.instance_storage_total_gb.filter(|g| *g > 0) {
        put(LABEL_INSTANCE_LOCAL_NVME, gb.to_string());
    }
    if let Some(mbps) = desc.ebs_bandwidth_mbps {
        put(LABEL_INSTANCE_EBS_BANDWIDTH, mbps.to_string());
    }
    if let Some(mbps) = desc.network_bandwidth_mbps {
        put(LABEL_INSTANCE_NETWORK_BANDWIDTH, mbps.to_string());
    }
    put(
        LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
        desc.encryption_in_transit_supported.to_string(),
    );
    let flex = desc.instance_type.split('.').next().unwrap_or_default();
    put(
        LABEL_INSTANCE_CAPABILITY_FLEX,
        flex.contains("-flex").to_string(),
    );
    // Karpenter offers default and dedicated tenancy; driftwood launches default tenancy.
    put(LABEL_INSTANCE_TENANCY, "default".to_string());
    // Accelerator labels only for a single kind of accelerator, as Karpenter sets them.
    if let [accelerator] = desc.accelerators.as_slice() {
        put(LABEL_INSTANCE_ACCELERATOR_NAME, kebab(&accelerator.name));
        put(
            LABEL_INSTANCE_ACCELERATOR_MANUFACTURER,
            kebab(&accelerator.manufacturer),
        );
        put(
            LABEL_INSTANCE_ACCELERATOR_COUNT,
            accelerator.count.to_string(),
        );
    }
    // GPU labels only for a single kind of GPU, as Karpenter sets them.
    if let [gpu] = desc.gpus.as_slice() {
        put(LABEL_INSTANCE_GPU_NAME, kebab(&gpu.name));
        put(LABEL_INSTANCE_GPU_MANUFACTURER, kebab(&gpu.manufacturer));
        put(LABEL_INSTANCE_GPU_COUNT, gpu.count.to_string());
        put(LABEL_INSTANCE_GPU_MEMORY, gpu.memory_mib.to_string());
    }
    Some(labels)
}

/// `nvidia.com/gpu`: NVIDIA GPUs.
pub const RESOURCE_NVIDIA_GPU: &str = "nvidia.com/gpu";
/// `amd.com/gpu`: AMD GPUs.
pub const RESOURCE_AMD_GPU: &str = "amd.com/gpu";
/// `habana.ai/gaudi`: Habana Gaudi accelerators (reported as GPUs by EC2).
pub const RESOURCE_HABANA_GAUDI: &str = "habana.ai/gaudi";
/// `aws.amazon.com/neuron`: Neuron devices (Inferentia, Trainium).
pub const RESOURCE_AWS_NEURON: &str = "aws.amazon.com/neuron";
/// `aws.amazon.com/neuroncore`: NeuronCores.
pub const RESOURCE_AWS_NEURON_CORE: &str = "aws.amazon.com/neuroncore";
/// `vpc.amazonaws.com/efa`: Elastic Fabric Adapter interfaces.
pub const RESOURCE_EFA: &str = "vpc.amazonaws.com/efa";
/// `vpc.amazonaws.com/pod-eni`: branch ENIs for security groups per pod.
pub const RESOURCE_POD_ENI: &str = "vpc.amazonaws.com/pod-eni";

/// The extended resources Karpenter gives a described type (its `computeCapacity`): GPUs by
/// maker (NVIDIA, AMD, Habana), Neuron devices and their cores, EFA interfaces and branch ENIs.
/// Only non-zero amounts are returned.
pub fn extended_resources(desc: &InstanceTypeDescription) -> BTreeMap<&'static str, i64> {
    let gpus_by = |maker: &str| -> i64 {
        desc.gpus
            .iter()
            .filter(|g| g.manufacturer.eq_ignore_ascii_case(maker))
            .map(|g| g.count)
            .sum()
    };
    let neuron: Vec<_> = desc
        .accelerators
        .iter()
        .filter(|a| a.cores_per_device > 0 || a.manufacturer.eq_ignore_ascii_case("aws"))
        .collect();
    let amounts = [
        (RESOURCE_NVIDIA_GPU, gpus_by("nvidia")),
        (RESOURCE_AMD_GPU, gpus_by("amd")),
        (RESOURCE_HABANA_GAUDI, gpus_by("habana")),
        (RESOURCE_AWS_NEURON, neuron.iter().map(|a| a.count).sum()),
        // Karpenter counts the cores of the first Neuron device kind only.
        (
            RESOURCE_AWS_NEURON_CORE,
            neuron.first().map_or(0, |a| a.count * a.cores_per_device),
        ),
        (RESOURCE_EFA, desc.efa_max_interfaces),
        (RESOURCE_POD_ENI, desc.branch_interfaces),
    ];
    amounts.into_iter().filter(|(_, n)| *n > 0).collect()
}

/// Raw EC2 data the catalog is built from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogData {
    pub descriptions: Vec<InstanceTypeDescription>,
    /// Instance type → zones it is offered in.
    pub offered_zones: BTreeMap<String, BTreeSet<String>>,
    /// (instance type, zone) → latest spot price.
    pub spot_prices: BTreeMap<(String, String), f64>,
    /// Instance type → on-demand price.
    pub on_demand_prices: BTreeMap<String, f64>,
}

/// Per-class and cluster settings that shape the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogOptions {
    /// Zone → zone id, for the zones the class's subnets cover.
    pub zones: BTreeMap<String, String>,
    pub kubelet: KubeletOverrides,
    /// Root (ephemeral) volume size in bytes.
    pub ephemeral_storage_bytes: i64,
    pub vm_memory_overhead_percent: f64,
    pub reserved_enis: i64,
    /// `linux` or `windows`.
    pub os: String,
}

impl Default for CatalogOptions {
    fn default() -> Self {
        Self {
            zones: BTreeMap::new(),
            kubelet: KubeletOverrides::default(),
            ephemeral_storage_bytes: 20 * GIB,
            vm_memory_overhead_percent: 0.075,
            reserved_enis: 0,
            os: "linux".to_string(),
        }
    }
}

/// MiB that Graviton (arm64) kernels reserve for the contiguous memory allocator, which pods
/// cannot use (Karpenter subtracts it before the VM overhead).
const ARM64_CMA_MIB: i64 = 64;

/// Capacity of a described type: vCPUs, memory minus the VM overhead (and, on arm64, the CMA
/// reservation), root volume, max pods, and the extended resources of [`extended_resources`].
pub fn capacity(desc: &InstanceTypeDescription, opts: &CatalogOptions) -> Resources {
    let arm64 = desc.supported_architectures.first().map(String::as_str) == Some("arm64");
    let memory_mib = desc.memory_mib - if arm64 { ARM64_CMA_MIB } else { 0 };
    let mem = memory_mib * MIB;
    let vm_overhead_mib = (memory_mib as f64 * opts.vm_memory_overhead_percent).ceil() as i64;
    let mut capacity = base_resources(
        desc.default_vcpus * 1000,
        mem - vm_overhead_mib * MIB,
        opts.ephemeral_storage_bytes,
        max_pods(
            &opts.kubelet,
            desc.default_vcpus,
            desc.maximum_network_interfaces - opts.reserved_enis,
            desc.ipv4_addresses_per_interface,
        ),
    );
    for (name, count) in extended_resources(desc) {
        capacity.add_one(name, count.saturating_mul(1000));
    }
    capacity
}

/// The most pods a node of this capacity accepts.
pub fn pods(capacity: &Resources) -> i64 {
    capacity.get(driftwood_scheduling::resources::PODS) / 1000
}

/// Builds the catalog for the given zones: every usable type offered in at least one of them,
/// sorted by name. Offerings without a known price are left out. Pure.
pub fn build_catalog(
    data: &CatalogData,
    opts: &CatalogOptions,
    unavailable: &UnavailableOfferings,
    now: Timestamp,
) -> Result<Vec<InstanceType>, OverheadError> {
    let mut out = Vec::new();
    for desc in &data.descriptions {
        let Some(labels) = instance_type_labels(desc, &opts.os) else {
            continue;
        };
        let name = &desc.instance_type;
        let mut offerings = Vec::new();
        let mut zone_ids = BTreeSet::new();
        let offered = data.offered_zones.get(name);
        for (zone, zone_id) in &opts.zones {
            if !offered.is_some_and(|z| z.contains(zone)) {
                continue;
            }
            for ct in [CAPACITY_TYPE_SPOT, CAPACITY_TYPE_ON_DEMAND] {
                if !desc.supported_usage_classes.iter().any(|c| c == ct) {
                    continue;
                }
                let price = if ct == CAPACITY_TYPE_SPOT {
                    data.spot_prices.get(&(name.clone(), zone.clone())).copied()
                } else {
                    data.on_demand_prices.get(name).copied()
                };
                let Some(price) = price else { continue };
                let available = !unavailable.is_unavailable(&OfferingKey::new(name, zone, ct), now);
                offerings.push(Offering {
                    zone: zone.clone(),
                    capacity_type: ct.to_string(),
                    price,
                    available,
                });
                zone_ids.insert(zone_id);
            }
        }
        if offerings.is_empty() {
            continue;
        }
        let cap = capacity(desc, opts);
        let oh = overhead(desc.default_vcpus, pods(&cap), &cap, &opts.kubelet)?;
        out.push(instance_type(name, &labels, zone_ids, cap, oh, offerings));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use driftwood_scheduling::resources::{CPU, MEMORY};

    use super::*;

    fn m5_large() -> InstanceTypeDescription {
        InstanceTypeDescription {
            instance_type: "m5.large".to_string(),
            current_generation: true,
            hypervisor: Some("nitro".to_string()),
            supported_usage_classes: vec!["on-demand".to_string(), "spot".to_string()],
            supported_architectures: vec!["x86_64".to_string()],
            processor_manufacturer: Some("Intel".to_string()),
            default_vcpus: 2,
            memory_mib: 8192,
            maximum_network_interfaces: 3,
            ipv4_addresses_per_interface: 10,
            ..Default::default()
        }
    }

    /// Karpenter instance-type suite "should support individual instance type labels"
    /// (g4dn.8xlarge, inf2.xlarge): GPU and accelerator labels for a single kind, names in
    /// kebab case, bandwidths in Mbps, encryption in transit and the always-set labels.
    #[test]
    fn accelerated_types_get_gpu_and_accelerator_labels() {
        let g4dn = InstanceTypeDescription {
            instance_type: "g4dn.8xlarge".to_string(),
            supported_architectures: vec!["x86_64".to_string()],
            processor_manufacturer: Some("Intel".to_string()),
            default_vcpus: 32,
            memory_mib: 131_072,
            instance_storage_total_gb: Some(900),
            ebs_bandwidth_mbps: Some(9500),
            network_bandwidth_mbps: Some(50_000),
            encryption_in_transit_supported: true,
            gpus: vec![crate::ports::GpuDeviceInfo {
                name: "T4".to_string(),
                manufacturer: "NVIDIA".to_string(),
                count: 1,
                memory_mib: 16_384,
            }],
            ..Default::default()
        };
        let labels = instance_type_labels(&g4dn, "linux").unwrap();
        for (key, value) in [
            (LABEL_INSTANCE_GPU_NAME, "t4"),
            (LABEL_INSTANCE_GPU_MANUFACTURER, "nvidia"),
            (LABEL_INSTANCE_GPU_COUNT, "1"),
            (LABEL_INSTANCE_GPU_MEMORY, "16384"),
            (LABEL_INSTANCE_LOCAL_NVME, "900"),
            (LABEL_INSTANCE_EBS_BANDWIDTH, "9500"),
            (LABEL_INSTANCE_NETWORK_BANDWIDTH, "50000"),
            (LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED, "true"),
            (LABEL_INSTANCE_CAPABILITY_FLEX, "false"),
            (LABEL_INSTANCE_TENANCY, "default"),
            (LABEL_INSTANCE_CATEGORY, "g"),
            (LABEL_INSTANCE_GENERATION, "4"),
        ] {
            assert_eq!(labels.get(key).map(String::as_str), Some(value), "{key}");
        }
        assert!(!labels.contains_key(LABEL_INSTANCE_ACCELERATOR_NAME));
        let inf2 = InstanceTypeDescription {
            instance_type: "inf2.xlarge".to_string(),
            supported_architectures: vec!["x86_64".to_string()],
            accelerators: vec![crate::ports::AcceleratorInfo {
                name: "Inferentia2".to_string(),
                manufacturer: "aws".to_string(),
                count: 1,
                cores_per_device: 2,
            }],
            ..Default::default()
        };
        let labels = instance_type_labels(&inf2, "linux").unwrap();
        assert_eq!(labels[LABEL_INSTANCE_ACCELERATOR_NAME], "inferentia2");
        assert_eq!(labels[LABEL_INSTANCE_ACCELERATOR_COUNT], "1");
        assert!(!labels.contains_key(LABEL_INSTANCE_GPU_COUNT));
        // Two kinds of GPU: no GPU labels (Karpenter labels a single kind only).
        let mut mixed = g4dn.clone();
        mixed.gpus.push(mixed.gpus[0].clone());
        let labels = instance_type_labels(&mixed, "linux").unwrap();
        assert!(!labels.contains_key(LABEL_INSTANCE_GPU_NAME));
        assert_eq!(kebab("Radeon Pro V520"), "radeon-pro-v520");
    }

    #[test]
    fn name_parts() {
        let p = parse_type_name("c6gd.2xlarge");
        assert_eq!(
            (p.category.as_str(), p.family.as_str(), p.size.as_str()),
            ("c", "c6gd", "2xlarge")
        );
        assert_eq!(p.generation.as_deref(), Some("6"));
        // Karpenter's published labels for u-3tb1.56xlarge: category u, generation 1.
        let u = parse_type_name("u-3tb1.56xlarge");
        assert_eq!((u.category.as_str(), u.family.as_str()), ("u", "u-3tb1"));
        assert_eq!(u.generation.as_deref(), Some("1"));
        assert_eq!(
            parse_type_name("c7i-flex.large").generation.as_deref(),
            Some("7")
        );
    }

    #[test]
    fn catalog_labels_capacity_offerings() {
        let t0: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let data = CatalogData {
            descriptions: vec![m5_large()],
            offered_zones: BTreeMap::from([(
                "m5.large".to_string(),
                BTreeSet::from(["us-west-2a".to_string(), "us-west-2b".to_string()]),
            )]),
            spot_prices: BTreeMap::from([(
                ("m5.large".to_string(), "us-west-2a".to_string()),
                0.04,
            )]),
            on_demand_prices: BTreeMap::from([("m5.large".to_string(), 0.096)]),
        };
        let opts = CatalogOptions {
            zones: BTreeMap::from([
                ("us-west-2a".to_string(), "usw2-az1".to_string()),
                ("us-west-2c".to_string(), "usw2-az3".to_string()),
            ]),
            ..Default::default()
        };
        let mut unavailable = UnavailableOfferings::new();
        unavailable.mark(OfferingKey::new("m5.large", "us-west-2a", "spot"), t0);
        let cat = build_catalog(&data, &opts, &unavailable, t0).unwrap();
        assert_eq!(cat.len(), 1);
        let it = &cat[0];
        let labels = type_labels(it);
        assert_eq!(labels[LABEL_INSTANCE_CATEGORY], "m");
        assert_eq!(labels[LABEL_INSTANCE_GENERATION], "5");
        assert_eq!(labels[LABEL_INSTANCE_CPU_MANUFACTURER], "intel");
        assert!(!labels.contains_key(LABEL_TOPOLOGY_ZONE_ID));
        assert_eq!(pods(&it.capacity), 29);
        // 8192 MiB minus ceil(7.5%) = 614 MiB.
        assert_eq!(it.capacity.get(MEMORY), (8192 - 615) * MIB * 1000);
        assert_eq!(it.overhead.kube_reserved.get(CPU), 70);
        assert_eq!(it.allocatable().get(CPU), 1930);
        // Only zone a is both offered and in the class's zones: its zone id is a requirement.
        assert!(
            it.requirements
                .get(LABEL_TOPOLOGY_ZONE_ID)
                .is_some_and(|r| r.has("usw2-az1") && !r.has("usw2-az3"))
        );
        // Labels the type lacks are DoesNotExist, so Exists on them cannot match it.
        let nvme = it.requirements.get(LABEL_INSTANCE_LOCAL_NVME).unwrap();
        assert!(nvme.matches(None) && !nvme.matches(Some("100")));
        // Zone a: spot (unavailable) and on-demand.
        assert_eq!(it.offerings.len(), 2);
        assert!(
            !it.offerings
                .iter()
                .find(|o| o.capacity_type == "spot")
                .unwrap()
                .available
        );
        let any = Requirements::new();
        assert_eq!(
            it.cheapest_offering(&any).unwrap().capacity_type,
            "on-demand"
        );
        let later = t0 + jiff::SignedDuration::from_secs(181);
        let cat = build_catalog(&data, &opts, &unavailable, later).unwrap();
        assert_eq!(
            cat[0].cheapest_offering(&any).unwrap().capacity_type,
            "spot"
        );
    }

    /// Extended resources are capacity the kubelet reserves none of: a GPU type's allocatable
    /// keeps its GPUs.
    #[test]
    fn extended_resources_are_capacity_and_allocatable() {
        let mut p3 = m5_large();
        p3.instance_type = "p3.2xlarge".to_string();
        p3.gpus = vec![crate::ports::GpuDeviceInfo {
            name: "V100".to_string(),
            manufacturer: "NVIDIA".to_string(),
            count: 1,
            memory_mib: 16_384,
        }];
        let cap = capacity(&p3, &CatalogOptions::default());
        assert_eq!(cap.get(RESOURCE_NVIDIA_GPU), 1000);
        let oh = overhead(2, pods(&cap), &cap, &KubeletOverrides::default()).unwrap();
        assert_eq!(
            crate::overhead::allocatable(&cap, &oh).get(RESOURCE_NVIDIA_GPU),
            1000
        );
    }
}
