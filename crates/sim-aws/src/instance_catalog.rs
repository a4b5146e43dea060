//! The simulated instance-type catalog: every type Karpenter v1.14 documents, with its facts
//! (vCPU, memory, architecture, CPU, hypervisor, bandwidths, local NVMe, GPUs and accelerators,
//! ENI limits, on-demand price) generated from public data by `scripts/karpenter-instance-types`
//! into `data/instance-types.json`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use driftwood_aws::ports::{AcceleratorInfo, GpuDeviceInfo, InstanceTypeDescription};
use driftwood_aws::price_estimate::estimate_on_demand_price;
use serde::Deserialize;

use crate::ids::hex_id;

/// The generated facts, one JSON object a line.
const DATA: &str = include_str!("../data/instance-types.json");

/// One line of the data file.
#[derive(Debug, Deserialize)]
struct Fact {
    name: String,
    /// `x86_64` or `arm64`.
    arch: String,
    vcpus: i64,
    memory_mib: i64,
    cpu_manufacturer: Option<String>,
    clock_mhz: Option<i64>,
    hypervisor: Option<String>,
    bare_metal: bool,
    ebs_mbps: Option<i64>,
    network_mbps: Option<i64>,
    local_nvme_gb: Option<i64>,
    encryption_in_transit: bool,
    enis: i64,
    ipv4_per_eni: i64,
    branch_enis: i64,
    efa: i64,
    neuron_cores: i64,
    gpu: Option<GpuFact>,
    accelerator: Option<AcceleratorFact>,
    on_demand_usd: Option<f64>,
    /// The resources Karpenter's reference table shows for the type (AL2023, after overhead).
    #[serde(default)]
    published: BTreeMap<String, String>,
    /// The labels Karpenter derives from the type's name (`category`, `family`, ...), keyed by
    /// the part after `karpenter.k8s.aws/instance-`.
    #[serde(default)]
    published_labels: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct GpuFact {
    name: String,
    manufacturer: String,
    count: i64,
    memory_mib: i64,
}

#[derive(Debug, Deserialize)]
struct AcceleratorFact {
    name: String,
    manufacturer: String,
    count: i64,
}

/// One simulated instance type with its on-demand price and the zone indexes it is not
/// offered in.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogEntry {
    pub description: InstanceTypeDescription,
    pub on_demand_price: f64,
    pub missing_zones: Vec<usize>,
    /// Allocatable resources as Karpenter's reference table publishes them (name → quantity),
    /// kept to check driftwood's own computation against.
    pub published: BTreeMap<String, String>,
    /// The labels Karpenter derives from the name, as its reference table publishes them
    /// (full label key → value), kept for the same reason.
    pub published_labels: BTreeMap<String, String>,
}

/// Which zones offer which type is not in the public data. Real regions have gaps, and the
/// simulation keeps two so that offering gaps are exercised: these families are not offered in
/// the third zone.
const ZONE_GAPS: &[&str] = &["c7i", "d3"];

/// Every instance type of the simulation, by name.
pub type InstanceCatalog = BTreeMap<String, CatalogEntry>;

impl Fact {
    fn into_entry(self) -> CatalogEntry {
        let cores_per_device = match &self.accelerator {
            Some(a) if a.count > 0 => self.neuron_cores / a.count,
            _ => 0,
        };
        let description = InstanceTypeDescription {
            instance_type: self.name,
            current_generation: true,
            bare_metal: self.bare_metal,
            hypervisor: self.hypervisor,
            supported_usage_classes: vec!["on-demand".to_string(), "spot".to_string()],
            supported_architectures: vec![self.arch],
            processor_manufacturer: self.cpu_manufacturer,
            sustained_clock_speed_ghz: self.clock_mhz.map(|mhz| mhz as f64 / 1000.0),
            default_vcpus: self.vcpus,
            memory_mib: self.memory_mib,
            maximum_network_interfaces: self.enis,
            ipv4_addresses_per_interface: self.ipv4_per_eni,
            network_performance: self
                .network_mbps
                .map(|m| format!("{} Gigabit", m / 1000))
                .unwrap_or_default(),
            instance_storage_total_gb: self.local_nvme_gb,
            ebs_bandwidth_mbps: self.ebs_mbps,
            network_bandwidth_mbps: self.network_mbps,
            encryption_in_transit_supported: self.encryption_in_transit,
            gpus: self
                .gpu
                .map(|g| GpuDeviceInfo {
                    name: g.name,
                    manufacturer: g.manufacturer,
                    count: g.count,
                    memory_mib: g.memory_mib,
                })
                .into_iter()
                .collect(),
            accelerators: self
                .accelerator
                .map(|a| AcceleratorInfo {
                    name: a.name,
                    manufacturer: a.manufacturer,
                    count: a.count,
                    cores_per_device,
                })
                .into_iter()
                .collect(),
            efa_max_interfaces: self.efa,
            branch_interfaces: self.branch_enis,
        };
        // The public price list has no price for a few types: estimate one from their shape.
        let on_demand_price = self
            .on_demand_usd
            .unwrap_or_else(|| estimate_on_demand_price(&description));
        let family = description
            .instance_type
            .split('.')
            .next()
            .unwrap_or_default();
        let missing_zones = if ZONE_GAPS.contains(&family) {
            vec![2]
        } else {
            Vec::new()
        };
        CatalogEntry {
            description,
            on_demand_price,
            missing_zones,
            published: self.published,
            published_labels: self
                .published_labels
                .into_iter()
                .map(|(k, v)| (format!("karpenter.k8s.aws/instance-{k}"), v))
                .collect(),
        }
    }
}

/// Every instance type of the simulation, parsed once. Lines that do not parse are left out
/// (a unit test checks there are none).
fn parsed() -> &'static InstanceCatalog {
    static CATALOG: OnceLock<InstanceCatalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        DATA.lines()
            .filter_map(|line| serde_json::from_str::<Fact>(line).ok())
            .map(|fact| {
                let entry = fact.into_entry();
                (entry.description.instance_type.clone(), entry)
            })
            .collect()
    })
}

/// Every instance type of the simulation, by name (a copy the caller may change).
pub fn instance_catalog() -> InstanceCatalog {
    parsed().clone()
}

/// The description of one instance type of the catalog.
pub fn describe(name: &str) -> Option<&'static InstanceTypeDescription> {
    parsed().get(name).map(|e| &e.description)
}

/// The deterministic spot price of `instance_type` in `zone`: 30–45% of on-demand.
pub fn spot_price(seed: u64, instance_type: &str, zone: &str, on_demand: f64) -> f64 {
    let h = u64::from_str_radix(
        &hex_id(seed, &format!("spot/{instance_type}/{zone}"), 8),
        16,
    )
    .unwrap_or(0);
    let factor = 0.30 + (h % 1500) as f64 / 10_000.0;
    (on_demand * factor * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_of_the_data_parses() {
        let lines = DATA.lines().filter(|l| !l.trim().is_empty()).count();
        assert_eq!(parsed().len(), lines);
        assert!(lines > 1300, "{lines}");
    }

    #[test]
    fn catalog_has_the_public_facts() {
        let cat = instance_catalog();
        let m5l = &cat["m5.large"].description;
        assert_eq!((m5l.default_vcpus, m5l.memory_mib), (2, 8192));
        assert_eq!(cat["m5.large"].on_demand_price, 0.096);
        assert_eq!(
            (
                m5l.maximum_network_interfaces,
                m5l.ipv4_addresses_per_interface
            ),
            (3, 10)
        );
        // Families the issue names: GPU, burstable, Neuron, metal.
        let p4d = &cat["p4d.24xlarge"].description;
        assert_eq!(p4d.gpus[0].count, 8);
        assert_eq!(p4d.gpus[0].name, "a100");
        assert_eq!(p4d.efa_max_interfaces, 4);
        assert!(cat.contains_key("t3.medium") && cat.contains_key("g5.xlarge"));
        let inf2 = &cat["inf2.xlarge"].description;
        assert_eq!(inf2.accelerators[0].count, 1);
        assert_eq!(inf2.accelerators[0].cores_per_device, 2);
        assert!(cat["c5.metal"].description.bare_metal);
        assert!(cat["c7g.large"].description.supported_architectures == ["arm64"]);
        // Every type has a positive price (listed or estimated).
        assert!(cat.values().all(|e| e.on_demand_price > 0.0));
        let p = spot_price(1, "m5.large", "us-west-2a", 0.096);
        assert!((0.0288..=0.0432).contains(&p), "{p}");
        assert_eq!(p, spot_price(1, "m5.large", "us-west-2a", 0.096));
    }
}
