//! Reads what launch needs out of an EC2NodeClass: the resolved AMIs and subnets from its
//! status, kubelet overrides, block devices (family defaults), metadata options, family.

use driftwood_api::EC2NodeClass;
use driftwood_api::ec2nodeclass::{AmiStatus, EC2NodeClassSpec};
use driftwood_api::requirement::OP_IN;
use driftwood_api::wellknown::LABEL_ARCH;

use super::ami::ResolvedAmi;
use super::ami_family::AmiFamily;
use super::overhead::KubeletOverrides;
use super::quantity::non_negative_milli;
use crate::ports::{BlockDeviceMapping, MetadataOptions};

const GIB: i64 = 1 << 30;

/// The family nodes of `class` run: amiFamily or the alias's family, else inferred from the
/// resolved image names in its status, else Custom.
pub fn class_family(class: &EC2NodeClass) -> AmiFamily {
    if let Some(f) = class
        .spec
        .effective_ami_family()
        .and_then(|f| AmiFamily::from_spec(&f))
    {
        return f;
    }
    let amis = class
        .status
        .as_ref()
        .map(|s| s.amis.as_slice())
        .unwrap_or_default();
    let families: std::collections::BTreeSet<AmiFamily> = amis
        .iter()
        .filter_map(|a| a.name.as_deref())
        .map(AmiFamily::infer_from_image_name)
        .collect();
    match (families.len(), families.into_iter().next()) {
        (1, Some(f)) => f,
        _ => AmiFamily::Custom,
    }
}

fn arch_of(ami: &AmiStatus) -> String {
    ami.requirements
        .iter()
        .find(|r| r.key == LABEL_ARCH && r.operator == OP_IN)
        .and_then(|r| r.values.first().cloned())
        .unwrap_or_default()
}

/// The AMIs in the class's status, in preference order.
pub fn status_amis(class: &EC2NodeClass) -> Vec<ResolvedAmi> {
    let amis = class
        .status
        .as_ref()
        .map(|s| s.amis.as_slice())
        .unwrap_or_default();
    amis.iter()
        .map(|a| ResolvedAmi {
            id: a.id.clone(),
            name: a.name.clone().unwrap_or_default(),
            arch: arch_of(a),
            creation_date: String::new(),
            deprecated: a.deprecated,
            requirements: a.requirements.clone(),
        })
        .collect()
}

/// The kubelet settings that shape capacity and overhead.
pub fn kubelet_overrides(spec: &EC2NodeClassSpec) -> KubeletOverrides {
    let Some(k) = &spec.kubelet else {
        return KubeletOverrides::default();
    };
    KubeletOverrides {
        max_pods: k.max_pods.map(i64::from),
        pods_per_core: k.pods_per_core.map(i64::from),
        kube_reserved: k.kube_reserved.clone(),
        system_reserved: k.system_reserved.clone(),
        eviction_hard: k.eviction_hard.clone(),
    }
}

/// The family's default block devices.
pub fn default_block_devices(family: AmiFamily) -> Vec<BlockDeviceMapping> {
    let ebs = |device: &str, gib: i64| BlockDeviceMapping {
        device_name: device.to_string(),
        volume_size_gib: Some(gib),
        volume_type: Some("gp3".to_string()),
        encrypted: Some(true),
        delete_on_termination: Some(true),
        ..Default::default()
    };
    match family {
        AmiFamily::Bottlerocket => vec![ebs("/dev/xvda", 4), ebs("/dev/xvdb", 20)],
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            vec![ebs("/dev/sda1", 50)]
        }
        AmiFamily::Custom => Vec::new(),
        _ => vec![ebs("/dev/xvda", 20)],
    }
}

/// The class's block devices (or the family defaults); volume sizes that do not parse are an
/// error naming the field.
pub fn block_devices(
    spec: &EC2NodeClassSpec,
    family: AmiFamily,
) -> Result<Vec<BlockDeviceMapping>, String> {
    if spec.block_device_mappings.is_empty() {
        return Ok(default_block_devices(family));
    }
    spec.block_device_mappings
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let ebs = m.ebs.clone().unwrap_or_default();
            let size = match &ebs.volume_size {
                Some(s) => {
                    let milli = non_negative_milli(s).map_err(|e| {
                        format!("spec.blockDeviceMappings[{i}].ebs.volumeSize: {e}")
                    })?;
                    // Whole GiB, rounded up.
                    let gib_milli = GIB.saturating_mul(1000);
                    Some(milli / gib_milli + i64::from(milli % gib_milli != 0))
                }
                None => None,
            };
            Ok(BlockDeviceMapping {
                device_name: m.device_name.clone().unwrap_or_default(),
                volume_size_gib: size,
                volume_type: ebs.volume_type.clone(),
                iops: ebs.iops,
                throughput: ebs.throughput,
                encrypted: ebs.encrypted,
                kms_key_id: ebs.kms_key_id.clone(),
                snapshot_id: ebs.snapshot_id.clone(),
                delete_on_termination: ebs.delete_on_termination,
            })
        })
        .collect()
}

/// The ephemeral storage nodes get: the root volume's size (Bottlerocket: the data volume).
pub fn ephemeral_storage_bytes(
    devices: &[BlockDeviceMapping],
    spec: &EC2NodeClassSpec,
    family: AmiFamily,
) -> i64 {
    let root_index = spec
        .block_device_mappings
        .iter()
        .position(|m| m.root_volume);
    let chosen = match root_index {
        Some(i) => devices.get(i),
        None if family == AmiFamily::Bottlerocket => devices.get(1).or(devices.first()),
        None => devices.first(),
    };
    chosen
        .and_then(|d| d.volume_size_gib)
        .map(|g| g * GIB)
        .unwrap_or(20 * GIB)
}

/// Instance metadata options (Karpenter's defaults when unset).
pub fn metadata_options(spec: &EC2NodeClassSpec) -> MetadataOptions {
    let m = spec.metadata_options.clone().unwrap_or_default();
    MetadataOptions {
        http_endpoint: Some(m.http_endpoint),
        http_protocol_ipv6: Some(m.http_protocol_ipv6),
        http_put_response_hop_limit: Some(m.http_put_response_hop_limit),
        http_tokens: Some(m.http_tokens),
    }
}
