//! EC2NodeClass kubelet and EBS value checks: reserved resources by name and not negative,
//! eviction thresholds as percentages or quantities, podsPerCore not negative, EBS
//! initialization rate bounded and only with a snapshot (Karpenter v1.14's schema rules).

use super::rules::{self, VOLUME_INITIALIZATION_RATE_RANGE};
use super::{Collector, quoted_list};
use crate::ec2nodeclass::{BlockDevice, KubeletConfiguration};

pub(super) fn check_kubelet_values(c: &mut Collector, kubelet: &KubeletConfiguration) {
    for (name, map) in [
        ("kubeReserved", &kubelet.kube_reserved),
        ("systemReserved", &kubelet.system_reserved),
    ] {
        for (key, value) in map {
            let field = format!("spec.kubelet.{name}[{key}]");
            if !rules::RESERVED_RESOURCES.contains(&key.as_str()) {
                c.invalid(
                    &field,
                    key,
                    format!("must be one of {}", quoted_list(rules::RESERVED_RESOURCES)),
                );
            }
            if value.starts_with('-') {
                c.invalid(&field, value, "may not be a negative resource quantity");
            } else {
                c.pattern(
                    &field,
                    value,
                    rules::QUANTITY_PATTERN,
                    "must be a resource quantity",
                );
            }
        }
    }
    for (name, map) in [
        ("evictionHard", &kubelet.eviction_hard),
        ("evictionSoft", &kubelet.eviction_soft),
    ] {
        for (key, value) in map {
            c.pattern(
                &format!("spec.kubelet.{name}[{key}]"),
                value,
                rules::EVICTION_THRESHOLD_PATTERN,
                "must be a percentage (e.g. 10%) or a quantity (e.g. 100Mi)",
            );
        }
    }
    if let Some(per_core) = kubelet.pods_per_core
        && per_core < 0
    {
        c.invalid(
            "spec.kubelet.podsPerCore",
            per_core.to_string(),
            "must not be negative",
        );
    }
}

pub(super) fn check_ebs_values(c: &mut Collector, field: &str, ebs: &BlockDevice) {
    let Some(rate) = ebs.volume_initialization_rate else {
        return;
    };
    let (lo, hi) = VOLUME_INITIALIZATION_RATE_RANGE;
    if !(lo..=hi).contains(&i64::from(rate)) {
        c.invalid(
            format!("{field}.volumeInitializationRate"),
            rate.to_string(),
            format!("must be between {lo} and {hi} (MiB/s)"),
        );
    }
    if ebs.snapshot_id.as_deref().unwrap_or_default().is_empty() {
        c.error(
            format!("{field}.volumeInitializationRate"),
            "snapshotID must be set when volumeInitializationRate is set",
        );
    }
}
