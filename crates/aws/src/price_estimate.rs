//! On-demand prices estimated from an instance type's shape, used only when the Pricing API
//! cannot be reached (isolated VPCs without its endpoint, no `pricing:GetProducts` grant,
//! emulators). Launch choices stay cheapest-first in the right order: the rates fit
//! us-east-1's Linux list prices of the general-purpose, compute and memory families within
//! about 5%, with Graviton's discount and a per-GPU rate.

use crate::ports::{InstanceTypeDescription, OnDemandPrice};

/// USD per vCPU-hour.
const PER_VCPU: f64 = 0.0336;
/// USD per GiB-hour of memory.
const PER_GIB: f64 = 0.0036;
/// USD per GPU-hour (fits g4dn).
const PER_GPU: f64 = 0.334;
/// Graviton (AWS-made processors) list prices are about 20% lower.
const GRAVITON_FACTOR: f64 = 0.8;

/// The estimated hourly on-demand price of `description`.
pub fn estimate_on_demand_price(description: &InstanceTypeDescription) -> f64 {
    let gib = description.memory_mib as f64 / 1024.0;
    let gpus: i64 = description.gpus.iter().map(|g| g.count).sum();
    let base = description.default_vcpus as f64 * PER_VCPU + gib * PER_GIB;
    let factor = if description.processor_manufacturer.as_deref() == Some("AWS") {
        GRAVITON_FACTOR
    } else {
        1.0
    };
    let price = base * factor + gpus as f64 * PER_GPU;
    (price * 10_000.0).round() / 10_000.0
}

/// Estimated prices for every described instance type.
pub fn estimate_on_demand_prices(descriptions: &[InstanceTypeDescription]) -> Vec<OnDemandPrice> {
    descriptions
        .iter()
        .map(|d| OnDemandPrice {
            instance_type: d.instance_type.clone(),
            price_per_hour: estimate_on_demand_price(d),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::GpuDeviceInfo;

    fn shape(name: &str, vcpus: i64, mib: i64, maker: &str, gpus: i64) -> InstanceTypeDescription {
        InstanceTypeDescription {
            instance_type: name.into(),
            default_vcpus: vcpus,
            memory_mib: mib,
            processor_manufacturer: Some(maker.into()),
            gpus: (gpus > 0)
                .then(|| GpuDeviceInfo {
                    name: "T4".into(),
                    manufacturer: "NVIDIA".into(),
                    count: gpus,
                    memory_mib: 16384,
                })
                .into_iter()
                .collect(),
            ..InstanceTypeDescription::default()
        }
    }

    #[test]
    fn estimates_are_within_ten_percent_of_list_prices() {
        // (type, vCPU, MiB, manufacturer, GPUs, us-east-1 Linux on-demand list price)
        let cases = [
            ("m5.large", 2, 8192, "Intel", 0, 0.096),
            ("m5.2xlarge", 8, 32768, "Intel", 0, 0.384),
            ("c5.xlarge", 4, 8192, "Intel", 0, 0.17),
            ("r5.large", 2, 16384, "Intel", 0, 0.126),
            ("m6g.large", 2, 8192, "AWS", 0, 0.077),
            ("g4dn.xlarge", 4, 16384, "Intel", 1, 0.526),
        ];
        for (name, vcpus, mib, maker, gpus, list) in cases {
            let estimate = estimate_on_demand_price(&shape(name, vcpus, mib, maker, gpus));
            assert!(
                (estimate - list).abs() / list < 0.10,
                "{name}: estimated {estimate}, list {list}"
            );
        }
    }

    #[test]
    fn bigger_types_cost_more_and_order_is_kept() {
        let small = estimate_on_demand_price(&shape("c5.large", 2, 4096, "Intel", 0));
        let medium = estimate_on_demand_price(&shape("m5.large", 2, 8192, "Intel", 0));
        let large = estimate_on_demand_price(&shape("m5.xlarge", 4, 16384, "Intel", 0));
        assert!(small < medium && medium < large);
    }
}
