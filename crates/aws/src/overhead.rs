//! Node overhead: kube-reserved by the EKS formula, system-reserved and eviction thresholds,
//! with kubelet overrides; and the ENI-based max-pods formula.

use std::collections::BTreeMap;

use super::quantity::{QuantityError, parse_percent, parse_quantity};

const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

/// Resource amounts in base units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Resources {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    pub ephemeral_storage_bytes: i64,
    pub pods: i64,
}

impl Resources {
    /// Component-wise sum.
    pub fn plus(self, other: Self) -> Self {
        Self {
            cpu_millis: self.cpu_millis + other.cpu_millis,
            memory_bytes: self.memory_bytes + other.memory_bytes,
            ephemeral_storage_bytes: self.ephemeral_storage_bytes + other.ephemeral_storage_bytes,
            pods: self.pods + other.pods,
        }
    }

    /// Component-wise difference, floored at zero.
    pub fn minus(self, other: Self) -> Self {
        Self {
            cpu_millis: (self.cpu_millis - other.cpu_millis).max(0),
            memory_bytes: (self.memory_bytes - other.memory_bytes).max(0),
            ephemeral_storage_bytes: (self.ephemeral_storage_bytes - other.ephemeral_storage_bytes)
                .max(0),
            pods: (self.pods - other.pods).max(0),
        }
    }
}

/// What the kubelet keeps for itself and the system.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overhead {
    pub kube_reserved: Resources,
    pub system_reserved: Resources,
    pub eviction_threshold: Resources,
}

impl Overhead {
    /// The sum of all three.
    pub fn total(&self) -> Resources {
        self.kube_reserved
            .plus(self.system_reserved)
            .plus(self.eviction_threshold)
    }
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

fn apply_resource_map(
    base: &mut Resources,
    map: &BTreeMap<String, String>,
    field: &str,
) -> Result<(), OverheadError> {
    for (k, v) in map {
        let n = parse_quantity(v).map_err(|e| OverheadError {
            field: format!("{field}.{k}"),
            source: e,
        })?;
        match k.as_str() {
            "cpu" => base.cpu_millis = (n * 1000.0).round() as i64,
            "memory" => base.memory_bytes = n as i64,
            "ephemeral-storage" => base.ephemeral_storage_bytes = n as i64,
            "pid" => {}
            _ => {}
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
    let mut kube_reserved = Resources {
        cpu_millis: kube_reserved_cpu_millis(vcpus),
        memory_bytes: kube_reserved_memory_bytes(max_pods),
        ephemeral_storage_bytes: GIB,
        pods: 0,
    };
    apply_resource_map(&mut kube_reserved, &kubelet.kube_reserved, "kubeReserved")?;
    let mut system_reserved = Resources::default();
    apply_resource_map(
        &mut system_reserved,
        &kubelet.system_reserved,
        "systemReserved",
    )?;
    let mut eviction_threshold = Resources {
        memory_bytes: 100 * MIB,
        ephemeral_storage_bytes: capacity.ephemeral_storage_bytes / 10,
        ..Resources::default()
    };
    for (signal, value) in &kubelet.eviction_hard {
        let amount = |total: i64| -> Result<i64, OverheadError> {
            match parse_percent(value) {
                Some(p) => Ok((total as f64 * p).ceil() as i64),
                None => parse_quantity(value)
                    .map(|n| n as i64)
                    .map_err(|e| OverheadError {
                        field: format!("evictionHard.{signal}"),
                        source: e,
                    }),
            }
        };
        match signal.as_str() {
            "memory.available" => eviction_threshold.memory_bytes = amount(capacity.memory_bytes)?,
            "nodefs.available" => {
                eviction_threshold.ephemeral_storage_bytes =
                    amount(capacity.ephemeral_storage_bytes)?
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
        let cap = Resources {
            cpu_millis: 2000,
            memory_bytes: 8 * GIB,
            ephemeral_storage_bytes: 20 * GIB,
            pods: 29,
        };
        let mut k = KubeletOverrides::default();
        k.system_reserved
            .insert("cpu".to_string(), "100m".to_string());
        k.eviction_hard
            .insert("memory.available".to_string(), "5%".to_string());
        let o = overhead(2, 29, &cap, &k).unwrap();
        assert_eq!(o.system_reserved.cpu_millis, 100);
        assert_eq!(o.eviction_threshold.memory_bytes, 429_496_730);
        assert_eq!(o.eviction_threshold.ephemeral_storage_bytes, 2 * GIB);
        k.kube_reserved
            .insert("memory".to_string(), "lots".to_string());
        let err = overhead(2, 29, &cap, &k).unwrap_err();
        assert!(err.to_string().contains("spec.kubelet.kubeReserved.memory"));
    }
}
