//! Node overhead: kube-reserved by the EKS formula, system-reserved and eviction thresholds,
//! with kubelet overrides; and the ENI-based max-pods formula.

use std::collections::BTreeMap;

use driftwood_scheduling::quantity::QuantityError;

use super::quantity::non_negative_milli;
use driftwood_scheduling::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS};
pub use driftwood_scheduling::{Overhead, Resources};

const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

/// `amount` base units (bytes, pods) as milli-units, saturating.
fn milli(amount: i64) -> i64 {
    amount.saturating_mul(1000)
}

/// A resource list of `cpu` (millicores), `memory` and `ephemeral-storage` (bytes) and `pods`,
/// in the scheduling model's milli-units.
pub fn base_resources(
    cpu_millis: i64,
    memory_bytes: i64,
    storage_bytes: i64,
    pods: i64,
) -> Resources {
    Resources::from_milli([
        (CPU, cpu_millis),
        (MEMORY, milli(memory_bytes)),
        (EPHEMERAL_STORAGE, milli(storage_bytes)),
        (PODS, milli(pods)),
    ])
}

/// `capacity − overhead`, each amount floored at zero (as the kubelet reports allocatable).
pub fn allocatable(capacity: &Resources, overhead: &Overhead) -> Resources {
    let mut out = capacity.sub(&overhead.total());
    for value in out.0.values_mut() {
        *value = (*value).max(0);
    }
    out
}

/// A percentage like `10%` as a fraction, or `None` when `value` is not a percentage.
pub fn parse_percent(value: &str) -> Option<f64> {
    value
        .trim()
        .strip_suffix('%')
        .and_then(|n| n.trim().parse::<f64>().ok())
        .map(|p| p / 100.0)
}

/// Kubelet settings that change capacity or overhead (from the EC2NodeClass's `kubelet`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeletOverrides {
    pub max_pods: Option<i64>,
    pub pods_per_core: Option<i64>,
    pub kube_reserved: BTreeMap<String, String>,
    pub system_reserved: BTreeMap<String, String>,
    pub eviction_hard: BTreeMap<String, String>,
}

/// Max pods by the ENI formula: `enis × (ips_per_eni − 1) + 2`.
pub fn eni_limited_pods(enis: i64, ips_per_eni: i64) -> i64 {
    (enis.max(0) * (ips_per_eni - 1).max(0) + 2).max(0)
}

/// Max pods for a type: the kubelet's maxPods when set, else the ENI formula, capped by
/// podsPerCore × vCPUs when set.
pub fn max_pods(kubelet: &KubeletOverrides, vcpus: i64, enis: i64, ips_per_eni: i64) -> i64 {
    let base = kubelet
        .max_pods
        .unwrap_or_else(|| eni_limited_pods(enis, ips_per_eni));
    match kubelet.pods_per_core {
        Some(ppc) if ppc > 0 => base.min(ppc * vcpus),
        _ => base,
    }
}

/// kube-reserved CPU in millicores: 6% of the first core, 1% of the second, 0.5% of cores 3–4,
/// 0.25% of every core above 4 (each range truncated to whole millicores).
pub fn kube_reserved_cpu_millis(vcpus: i64) -> i64 {
    let cpu = vcpus.max(0) * 1000;
    let ranges: [(i64, i64, f64); 4] = [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, i64::MAX, 0.0025),
    ];
    ranges
        .iter()
        .filter(|(start, _, _)| cpu > *start)
        .map(|(start, end, pct)| ((cpu.min(*end) - start) as f64 * pct) as i64)
        .sum()
}

/// kube-reserved memory: `11 × maxPods + 255` MiB.
pub fn kube_reserved_memory_bytes(max_pods: i64) -> i64 {
    (11 * max_pods + 255) * MIB
}

/// Sets the amounts `map` names (`cpu`, `memory`, `ephemeral-storage`; others, like `pid`, are
/// not node resources) in `base`, exactly as quantities.
fn apply_resource_map(
    base: &mut Resources,
    map: &BTreeMap<String, String>,
    field: &str,
) -> Result<(), OverheadError> {
    for (k, v) in map {
        let milli = non_negative_milli(v).map_err(|e| OverheadError {
            field: format!("{field}.{k}"),
            source: e,
        })?;
        if matches!(k.as_str(), CPU | MEMORY | EPHEMERAL_STORAGE) {
            base.set(k, milli);
        }
    }
    Ok(())
}

/// A kubelet override could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("spec.kubelet.{field}: {source}")]
pub struct OverheadError {
    pub field: String,
    #[source]
    pub source: QuantityError,
}

/// The overhead of a node with `vcpus`, `max_pods` and `capacity`, after kubelet overrides.
pub fn overhead(
    vcpus: i64,
    max_pods: i64,
    capacity: &Resources,
    kubelet: &KubeletOverrides,
) -> Result<Overhead, OverheadError> {
    let mut kube_reserved = base_resources(
        kube_reserved_cpu_millis(vcpus),
        kube_reserved_memory_bytes(max_pods),
        GIB,
        0,
    );
    apply_resource_map(&mut kube_reserved, &kubelet.kube_reserved, "kubeReserved")?;
    let mut system_reserved = Resources::default();
    apply_resource_map(
        &mut system_reserved,
        &kubelet.system_reserved,
        "systemReserved",
    )?;
    let mut eviction_threshold =
        base_resources(0, 100 * MIB, capacity.get(EPHEMERAL_STORAGE) / 1000 / 10, 0);
    for (signal, value) in &kubelet.eviction_hard {
        // A percentage of the total, rounded up to whole bytes; else an exact quantity.
        let amount = |resource: &str| -> Result<i64, OverheadError> {
            match parse_percent(value) {
                Some(p) => Ok(milli(
                    ((capacity.get(resource) / 1000) as f64 * p).ceil() as i64
                )),
                None => non_negative_milli(value).map_err(|e| OverheadError {
                    field: format!("evictionHard.{signal}"),
                    source: e,
                }),
            }
        };
        match signal.as_str() {
            "memory.available" => eviction_threshold.set(MEMORY, amount(MEMORY)?),
            "nodefs.available" => {
                eviction_threshold.set(EPHEMERAL_STORAGE, amount(EPHEMERAL_STORAGE)?)
            }
            _ => {}
        }
    }
    Ok(Overhead {
        kube_reserved,
        system_reserved,
        eviction_threshold,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_formula_matches_eks() {
        assert_eq!(kube_reserved_cpu_millis(1), 60);
        assert_eq!(kube_reserved_cpu_millis(2), 70);
        assert_eq!(kube_reserved_cpu_millis(4), 80);
        assert_eq!(kube_reserved_cpu_millis(8), 90);
        assert_eq!(kube_reserved_cpu_millis(16), 110);
        assert_eq!(kube_reserved_cpu_millis(64), 230);
    }

    #[test]
    fn pods_and_memory() {
        assert_eq!(eni_limited_pods(3, 10), 29);
        assert_eq!(eni_limited_pods(4, 15), 58);
        assert_eq!(eni_limited_pods(8, 30), 234);
        assert_eq!(kube_reserved_memory_bytes(29), 574 * MIB);
        let k = KubeletOverrides {
            pods_per_core: Some(10),
            ..Default::default()
        };
        assert_eq!(max_pods(&k, 2, 3, 10), 20);
        let k = KubeletOverrides {
            max_pods: Some(110),
            ..Default::default()
        };
        assert_eq!(max_pods(&k, 2, 3, 10), 110);
    }

    #[test]
    fn overrides_apply_and_bad_values_name_the_field() {
        let cap = base_resources(2000, 8 * GIB, 20 * GIB, 29);
        let mut k = KubeletOverrides::default();
        k.system_reserved
            .insert("cpu".to_string(), "100m".to_string());
        k.eviction_hard
            .insert("memory.available".to_string(), "5%".to_string());
        let o = overhead(2, 29, &cap, &k).unwrap();
        assert_eq!(o.system_reserved.get(CPU), 100);
        assert_eq!(o.eviction_threshold.get(MEMORY), 429_496_730_000);
        assert_eq!(o.eviction_threshold.get(EPHEMERAL_STORAGE), 2 * GIB * 1000);
        // Quantities are exact: 1.5Gi of kube-reserved memory is 1.5Gi, not a float's guess.
        k.kube_reserved
            .insert("memory".to_string(), "1.5Gi".to_string());
        k.kube_reserved
            .insert("pid".to_string(), "1000".to_string());
        let o = overhead(2, 29, &cap, &k).unwrap();
        assert_eq!(o.kube_reserved.get(MEMORY), 1_610_612_736_000);
        assert_eq!(o.kube_reserved.get("pid"), 0);
        assert_eq!(
            allocatable(&base_resources(100, 0, 0, 0), &o).get(CPU),
            0,
            "allocatable is floored at zero"
        );
        k.kube_reserved
            .insert("memory".to_string(), "lots".to_string());
        let err = overhead(2, 29, &cap, &k).unwrap_err();
        assert!(err.to_string().contains("spec.kubelet.kubeReserved.memory"));
    }
}
