//! Converts the provider's instance types into driftwood-scheduling's model (feature
//! `scheduling`).

use driftwood_api::wellknown::{INSTANCE_TYPE_LABELS, LABEL_TOPOLOGY_ZONE_ID};
use driftwood_scheduling::requirements::{Requirement, Requirements};
use driftwood_scheduling::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS};
use driftwood_scheduling::{InstanceType, Offering, Overhead, Resources as SchedResources};

use super::instance_types::InstanceTypeInfo;
use super::overhead::Resources;

fn milli(r: &Resources) -> SchedResources {
    SchedResources::from_milli([
        (CPU, r.cpu_millis),
        (MEMORY, r.memory_bytes.saturating_mul(1000)),
        (
            EPHEMERAL_STORAGE,
            r.ephemeral_storage_bytes.saturating_mul(1000),
        ),
        (PODS, r.pods.saturating_mul(1000)),
    ])
}

impl InstanceTypeInfo {
    /// The scheduling model of this type: labels as `In` requirements, `DoesNotExist` for every
    /// instance-type label it lacks (as Karpenter's instance types carry them, so `Exists` or
    /// `Gt` on a GPU, NVMe or bandwidth label rules the type out), the zone ids of its
    /// offerings, capacity and overhead in milli-units, offerings as they are.
    pub fn to_scheduling(&self) -> InstanceType {
        let mut requirements = Requirements::from_labels(self.labels.iter());
        for key in INSTANCE_TYPE_LABELS {
            if !self.labels.contains_key(*key) {
                requirements.add(key, Requirement::does_not_exist());
            }
        }
        let zone_ids: Vec<String> = self
            .offerings
            .iter()
            .filter(|o| !o.zone_id.is_empty())
            .map(|o| o.zone_id.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if !zone_ids.is_empty() {
            requirements.add(LABEL_TOPOLOGY_ZONE_ID, Requirement::is_in(zone_ids));
        }
        let mut capacity = milli(&self.capacity);
        for (name, count) in &self.extended {
            capacity.add_one(name, count.saturating_mul(1000));
        }
        InstanceType {
            name: self.name.clone(),
            requirements,
            capacity,
            overhead: Overhead {
                kube_reserved: milli(&self.overhead.kube_reserved),
                system_reserved: milli(&self.overhead.system_reserved),
                eviction_threshold: milli(&self.overhead.eviction_threshold),
            },
            offerings: self
                .offerings
                .iter()
                .map(|o| Offering {
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type.clone(),
                    price: o.price,
                    available: o.available,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::instance_types::Offering as AwsOffering;
    use crate::overhead::Overhead as AwsOverhead;

    #[test]
    fn converts_units_and_labels() {
        let it = InstanceTypeInfo {
            name: "m5.large".to_string(),
            arch: "amd64".to_string(),
            labels: BTreeMap::from([("kubernetes.io/arch".to_string(), "amd64".to_string())]),
            capacity: Resources {
                cpu_millis: 2000,
                memory_bytes: 1024,
                ephemeral_storage_bytes: 0,
                pods: 29,
            },
            extended: BTreeMap::from([("nvidia.com/gpu", 4)]),
            overhead: AwsOverhead::default(),
            label_values_cache: Default::default(),
            offerings: vec![AwsOffering {
                zone: "us-west-2a".to_string(),
                zone_id: "usw2-az1".to_string(),
                capacity_type: "spot".to_string(),
                price: 0.04,
                available: true,
            }],
        };
        let s = it.to_scheduling();
        assert_eq!(s.capacity.get(CPU), 2000);
        assert_eq!(s.capacity.get(MEMORY), 1_024_000);
        assert_eq!(s.capacity.get(PODS), 29_000);
        assert_eq!(s.capacity.get("nvidia.com/gpu"), 4000);
        assert!(
            s.requirements
                .get("kubernetes.io/arch")
                .unwrap()
                .has("amd64")
        );
        assert!(
            s.requirements
                .get(LABEL_TOPOLOGY_ZONE_ID)
                .unwrap()
                .has("usw2-az1")
        );
        assert_eq!(s.offerings[0].price, 0.04);
        // Labels the type lacks are DoesNotExist, so Exists on them cannot match it.
        let nvme = s
            .requirements
            .get("karpenter.k8s.aws/instance-local-nvme")
            .unwrap();
        assert!(nvme.matches(None) && !nvme.matches(Some("100")));
    }
}
