//! The simulated instance-type catalog: c, m, r, i and d families, generations 5–7, Intel, AMD
//! and Graviton, sizes large to 16xlarge, with ENI limits and deterministic prices.

use driftwood_aws::ports::InstanceTypeDescription;

use crate::ids::hex_id;

/// One family of the catalog.
struct Family {
    name: &'static str,
    manufacturer: &'static str,
    arm: bool,
    hypervisor: &'static str,
    /// MiB of memory per vCPU.
    mib_per_vcpu: i64,
    /// On-demand USD per vCPU-hour.
    price_per_vcpu: f64,
    /// Instance store GB per vCPU (0 = none).
    storage_gb_per_vcpu: i64,
    sizes: &'static [&'static str],
    /// Zones (by index) where the family is not offered.
    missing_zones: &'static [usize],
}

const ALL: &[&str] = &[
    "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
];
const NO_12: &[&str] = &[
    "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge",
];
const D3: &[&str] = &["xlarge", "2xlarge", "4xlarge", "8xlarge"];

const FAMILIES: &[Family] = &[
    Family {
        name: "c5",
        manufacturer: "Intel",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 2048,
        price_per_vcpu: 0.0425,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "c5a",
        manufacturer: "AMD",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 2048,
        price_per_vcpu: 0.0385,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "c6i",
        manufacturer: "Intel",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 2048,
        price_per_vcpu: 0.0425,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "c6a",
        manufacturer: "AMD",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 2048,
        price_per_vcpu: 0.0383,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "c6g",
        manufacturer: "AWS",
        arm: true,
        hypervisor: "nitro",
        mib_per_vcpu: 2048,
        price_per_vcpu: 0.034,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "c7i",
        manufacturer: "Intel",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 2048,
        price_per_vcpu: 0.04463,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[2],
    },
    Family {
        name: "c7g",
        manufacturer: "AWS",
        arm: true,
        hypervisor: "nitro",
        mib_per_vcpu: 2048,
        price_per_vcpu: 0.03625,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "m5",
        manufacturer: "Intel",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 4096,
        price_per_vcpu: 0.048,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "m5a",
        manufacturer: "AMD",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 4096,
        price_per_vcpu: 0.043,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "m6i",
        manufacturer: "Intel",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 4096,
        price_per_vcpu: 0.048,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "m6a",
        manufacturer: "AMD",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 4096,
        price_per_vcpu: 0.0432,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "m6g",
        manufacturer: "AWS",
        arm: true,
        hypervisor: "nitro",
        mib_per_vcpu: 4096,
        price_per_vcpu: 0.0385,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "m7i",
        manufacturer: "Intel",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 4096,
        price_per_vcpu: 0.0504,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "m7g",
        manufacturer: "AWS",
        arm: true,
        hypervisor: "nitro",
        mib_per_vcpu: 4096,
        price_per_vcpu: 0.0408,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "r5",
        manufacturer: "Intel",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 8192,
        price_per_vcpu: 0.063,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "r6i",
        manufacturer: "Intel",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 8192,
        price_per_vcpu: 0.063,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "r6g",
        manufacturer: "AWS",
        arm: true,
        hypervisor: "nitro",
        mib_per_vcpu: 8192,
        price_per_vcpu: 0.0504,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "r7g",
        manufacturer: "AWS",
        arm: true,
        hypervisor: "nitro",
        mib_per_vcpu: 8192,
        price_per_vcpu: 0.05355,
        storage_gb_per_vcpu: 0,
        sizes: ALL,
        missing_zones: &[],
    },
    Family {
        name: "i3",
        manufacturer: "Intel",
        arm: false,
        hypervisor: "xen",
        mib_per_vcpu: 7808,
        price_per_vcpu: 0.078,
        storage_gb_per_vcpu: 237,
        sizes: NO_12,
        missing_zones: &[],
    },
    Family {
        name: "i4i",
        manufacturer: "Intel",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 8192,
        price_per_vcpu: 0.086,
        storage_gb_per_vcpu: 234,
        sizes: NO_12,
        missing_zones: &[],
    },
    Family {
        name: "d3",
        manufacturer: "Intel",
        arm: false,
        hypervisor: "nitro",
        mib_per_vcpu: 8192,
        price_per_vcpu: 0.12475,
        storage_gb_per_vcpu: 1488,
        sizes: D3,
        missing_zones: &[2],
    },
];

fn vcpus(size: &str) -> i64 {
    match size {
        "large" => 2,
        "xlarge" => 4,
        "2xlarge" => 8,
        "4xlarge" => 16,
        "8xlarge" => 32,
        "12xlarge" => 48,
        "16xlarge" => 64,
        _ => 2,
    }
}

/// (ENIs, IPv4 addresses per ENI) by vCPU count, as EC2 documents for these families.
fn eni_limits(vcpus: i64) -> (i64, i64) {
    match vcpus {
        0..=2 => (3, 10),
        3..=8 => (4, 15),
        9..=48 => (8, 30),
        _ => (15, 50),
    }
}

/// Baseline network bandwidth by size, in Mbps, on the scale EC2 documents for these families
/// (large 0.75 Gbps ... 16xlarge 20 Gbps).
fn network_baseline_mbps(vcpus: i64) -> i64 {
    match vcpus {
        ..=2 => 750,
        3..=4 => 1250,
        5..=8 => 2500,
        9..=16 => 5000,
        17..=32 => 10_000,
        33..=48 => 12_000,
        _ => 20_000,
    }
}

/// The generation digit of a family name (`c6gd` → 6).
fn generation(family: &str) -> u32 {
    family.chars().find_map(|c| c.to_digit(10)).unwrap_or(0)
}

/// One simulated instance type with its on-demand price and the zone indexes it is offered in.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogEntry {
    pub description: InstanceTypeDescription,
    pub on_demand_price: f64,
    pub missing_zones: Vec<usize>,
}

/// Every instance type of the simulation, sorted by name.
pub fn instance_catalog() -> Vec<CatalogEntry> {
    let mut out = Vec::new();
    for f in FAMILIES {
        for size in f.sizes {
            let v = vcpus(size);
            let (enis, ips) = eni_limits(v);
            let storage = (f.storage_gb_per_vcpu > 0).then_some(f.storage_gb_per_vcpu * v);
            let description = InstanceTypeDescription {
                instance_type: format!("{}.{size}", f.name),
                current_generation: true,
                bare_metal: false,
                hypervisor: Some(f.hypervisor.to_string()),
                supported_usage_classes: vec!["on-demand".to_string(), "spot".to_string()],
                supported_architectures: vec![if f.arm { "arm64" } else { "x86_64" }.to_string()],
                processor_manufacturer: Some(f.manufacturer.to_string()),
                sustained_clock_speed_ghz: Some(if f.arm { 2.5 } else { 3.1 }),
                default_vcpus: v,
                memory_mib: f.mib_per_vcpu * v,
                maximum_network_interfaces: enis,
                ipv4_addresses_per_interface: ips,
                network_performance: if v >= 64 {
                    "25 Gigabit".to_string()
                } else {
                    "Up to 12.5 Gigabit".to_string()
                },
                instance_storage_total_gb: storage,
                ebs_bandwidth_mbps: Some(match v {
                    ..=4 => 4750,
                    5..=16 => 4750 * v / 4,
                    _ => 19_000,
                }),
                network_bandwidth_mbps: Some(network_baseline_mbps(v)),
                encryption_in_transit_supported: generation(f.name) >= 6 || f.name == "c5a",
                gpus: Vec::new(),
                accelerators: Vec::new(),
            };
            let on_demand_price = (f.price_per_vcpu * v as f64 * 10_000.0).round() / 10_000.0;
            out.push(CatalogEntry {
                description,
                on_demand_price,
                missing_zones: f.missing_zones.to_vec(),
            });
        }
    }
    out.sort_by(|a, b| {
        a.description
            .instance_type
            .cmp(&b.description.instance_type)
    });
    out
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
    fn catalog_has_the_expected_shape() {
        let cat = instance_catalog();
        let m5l = cat
            .iter()
            .find(|e| e.description.instance_type == "m5.large")
            .unwrap();
        assert_eq!(m5l.description.default_vcpus, 2);
        assert_eq!(m5l.description.memory_mib, 8192);
        assert_eq!(m5l.on_demand_price, 0.096);
        assert!(
            cat.iter()
                .any(|e| e.description.instance_type == "c7g.16xlarge")
        );
        assert!(
            cat.iter()
                .any(|e| e.description.instance_type == "d3.8xlarge")
        );
        let p = spot_price(1, "m5.large", "us-west-2a", 0.096);
        assert!((0.0288..=0.0432).contains(&p), "{p}");
        assert_eq!(p, spot_price(1, "m5.large", "us-west-2a", 0.096));
    }
}
