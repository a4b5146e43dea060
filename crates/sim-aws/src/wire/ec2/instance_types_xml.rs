//! EC2 XML of one instance type (DescribeInstanceTypes' `instanceTypeSet` item): the nested
//! structures the port flattens (`processorInfo`, `vCpuInfo`, `memoryInfo`, `networkInfo`
//! with its first network card's baseline bandwidth, `ebsInfo`, `instanceStorageInfo`,
//! `gpuInfo`, and `neuronInfo` for AWS devices or `inferenceAcceleratorInfo` for others).

use driftwood_aws::ports::{AcceleratorInfo, InstanceTypeDescription};

use super::narrow;
use crate::wire::xml::Xml;

/// The manufacturer the port gives Neuron devices (Inferentia, Trainium).
const NEURON_MANUFACTURER: &str = "aws";

pub(crate) fn instance_type(x: &mut Xml, t: &InstanceTypeDescription) {
    x.leaf("instanceType", &t.instance_type);
    x.value("currentGeneration", t.current_generation);
    x.value("bareMetal", t.bare_metal);
    x.opt("hypervisor", t.hypervisor.as_deref());
    x.text_list("supportedUsageClasses", "item", &t.supported_usage_classes);
    x.el("processorInfo", |x| {
        x.text_list("supportedArchitectures", "item", &t.supported_architectures);
        if let Some(ghz) = t.sustained_clock_speed_ghz {
            x.value("sustainedClockSpeedInGhz", ghz);
        }
        x.opt("manufacturer", t.processor_manufacturer.as_deref());
    });
    x.el("vCpuInfo", |x| {
        x.value("defaultVCpus", narrow(t.default_vcpus))
    });
    x.el("memoryInfo", |x| x.value("sizeInMiB", t.memory_mib));
    x.value(
        "instanceStorageSupported",
        t.instance_storage_total_gb.is_some(),
    );
    if let Some(gb) = t.instance_storage_total_gb {
        x.el("instanceStorageInfo", |x| {
            x.value("totalSizeInGB", gb);
            x.leaf("nvmeSupport", "required");
        });
    }
    x.el("ebsInfo", |x| match t.ebs_bandwidth_mbps {
        Some(mbps) => {
            x.leaf("ebsOptimizedSupport", "default");
            x.el("ebsOptimizedInfo", |x| {
                x.value("maximumBandwidthInMbps", narrow(mbps));
            });
        }
        None => x.leaf("ebsOptimizedSupport", "supported"),
    });
    network_info(x, t);
    if !t.gpus.is_empty() {
        x.el("gpuInfo", |x| {
            x.list("gpus", "item", &t.gpus, |x, g| {
                x.leaf("name", &g.name);
                x.leaf("manufacturer", &g.manufacturer);
                x.value("count", narrow(g.count));
                x.el("memoryInfo", |x| x.value("sizeInMiB", narrow(g.memory_mib)));
            });
        });
    }
    accelerators(x, &t.accelerators);
}

fn network_info(x: &mut Xml, t: &InstanceTypeDescription) {
    x.el("networkInfo", |x| {
        x.leaf("networkPerformance", &t.network_performance);
        x.value(
            "maximumNetworkInterfaces",
            narrow(t.maximum_network_interfaces),
        );
        x.value(
            "ipv4AddressesPerInterface",
            narrow(t.ipv4_addresses_per_interface),
        );
        x.value("maximumNetworkCards", 1);
        x.value("defaultNetworkCardIndex", 0);
        x.el("networkCards", |x| {
            x.el("item", |x| {
                x.value("networkCardIndex", 0);
                x.leaf("networkPerformance", &t.network_performance);
                x.value(
                    "maximumNetworkInterfaces",
                    narrow(t.maximum_network_interfaces),
                );
                if let Some(mbps) = t.network_bandwidth_mbps {
                    x.value("baselineBandwidthInGbps", mbps as f64 / 1000.0);
                }
            });
        });
        x.value("efaSupported", t.efa_max_interfaces > 0);
        if t.efa_max_interfaces > 0 {
            x.el("efaInfo", |x| {
                x.value("maximumEfaInterfaces", narrow(t.efa_max_interfaces));
            });
        }
        x.value(
            "encryptionInTransitSupported",
            t.encryption_in_transit_supported,
        );
    });
}

/// Neuron devices (`aws`) as `neuronInfo`, the others as `inferenceAcceleratorInfo` (the SDK
/// adapter reads the Neuron ones when there are any).
fn accelerators(x: &mut Xml, all: &[AcceleratorInfo]) {
    let (neuron, inference): (Vec<&AcceleratorInfo>, Vec<&AcceleratorInfo>) = all
        .iter()
        .partition(|a| a.manufacturer == NEURON_MANUFACTURER);
    if !neuron.is_empty() {
        x.el("neuronInfo", |x| {
            x.list("neuronDevices", "item", neuron, |x, a| {
                x.value("count", narrow(a.count));
                x.leaf("name", &a.name);
                x.el("coreInfo", |x| x.value("count", narrow(a.cores_per_device)));
            });
        });
    }
    if !inference.is_empty() {
        x.el("inferenceAcceleratorInfo", |x| {
            // EC2's one list of `member`s rather than `item`s.
            x.list("accelerators", "member", inference, |x, a| {
                x.value("count", narrow(a.count));
                x.leaf("name", &a.name);
                x.leaf("manufacturer", &a.manufacturer);
            });
        });
    }
}
