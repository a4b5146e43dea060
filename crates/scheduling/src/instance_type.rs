//! Instance types: capacity, the overhead the node reserves, what is left allocatable, and the
//! offerings (zone × capacity type × price × availability) they can be launched with.

use driftwood_api::wellknown::{LABEL_CAPACITY_TYPE, LABEL_TOPOLOGY_ZONE};

use crate::requirements::Requirements;
use crate::resources::Resources;

/// Resources a node keeps back from pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overhead {
    /// kubelet's kube-reserved.
    pub kube_reserved: Resources,
    /// kubelet's system-reserved.
    pub system_reserved: Resources,
    /// kubelet's hard eviction thresholds.
    pub eviction_threshold: Resources,
}

impl Overhead {
    /// The sum of the three reservations.
    pub fn total(&self) -> Resources {
        self.kube_reserved
            .add(&self.system_reserved)
            .add(&self.eviction_threshold)
    }
}

/// One way to launch an instance type.
#[derive(Debug, Clone, PartialEq)]
pub struct Offering {
    /// Zone, the value of `topology.kubernetes.io/zone`.
    pub zone: String,
    /// Capacity type, the value of `karpenter.sh/capacity-type` (`on-demand`, `spot`, `reserved`).
    pub capacity_type: String,
    /// Hourly price; lower is preferred.
    pub price: f64,
    /// Whether it can be launched now.
    pub available: bool,
}

/// An instance type the cloud can launch.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceType {
    /// Name, the value of `node.kubernetes.io/instance-type`.
    pub name: String,
    /// The labels the node will carry, as requirements (`In [value]` each; zone and capacity
    /// type come from `offerings` and need not be repeated here).
    pub requirements: Requirements,
    /// Total capacity; must include `pods` (the most pods the node accepts).
    pub capacity: Resources,
    /// What the node reserves.
    pub overhead: Overhead,
    /// Launch options.
    pub offerings: Vec<Offering>,
}

impl InstanceType {
    /// Capacity minus overhead: what pods (daemonsets included) can request.
    pub fn allocatable(&self) -> Resources {
        self.capacity.sub(&self.overhead.total())
    }

    /// Whether the allocatable of this type holds every amount of `requests` (worked out per
    /// requested resource, without building the allocatable list).
    pub fn holds(&self, requests: &Resources) -> bool {
        requests.0.iter().all(|(name, amount)| {
            let reserved = self
                .overhead
                .kube_reserved
                .get(name)
                .saturating_add(self.overhead.system_reserved.get(name))
                .saturating_add(self.overhead.eviction_threshold.get(name));
            *amount <= self.capacity.get(name).saturating_sub(reserved)
        })
    }

    /// Whether `offering` is allowed by the zone and capacity-type entries of `requirements`.
    pub fn offering_allowed(offering: &Offering, requirements: &Requirements) -> bool {
        requirements
            .get(LABEL_TOPOLOGY_ZONE)
            .is_none_or(|r| r.has(&offering.zone))
            && requirements
                .get(LABEL_CAPACITY_TYPE)
                .is_none_or(|r| r.has(&offering.capacity_type))
    }

    /// The cheapest available offering allowed by `requirements`.
    pub fn cheapest_offering(&self, requirements: &Requirements) -> Option<&Offering> {
        self.offerings
            .iter()
            .filter(|o| o.available && Self::offering_allowed(o, requirements))
            .min_by(|a, b| {
                a.price
                    .total_cmp(&b.price)
                    .then_with(|| a.zone.cmp(&b.zone))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{CPU, MEMORY};

    #[test]
    fn holds_is_fits_against_the_allocatable() {
        let it = InstanceType {
            name: "t".to_string(),
            requirements: Requirements::new(),
            capacity: Resources::from_milli([
                (CPU, 2000),
                (MEMORY, 8000),
                ("example.com/gpu", 1000),
            ]),
            overhead: Overhead {
                kube_reserved: Resources::from_milli([(CPU, 100)]),
                system_reserved: Resources::from_milli([(CPU, 50), (MEMORY, 1000)]),
                eviction_threshold: Resources::from_milli([(MEMORY, 500)]),
            },
            offerings: Vec::new(),
        };
        for requests in [
            Resources::from_milli([(CPU, 1850)]),
            Resources::from_milli([(CPU, 1851)]),
            Resources::from_milli([(MEMORY, 6500), ("example.com/gpu", 1000)]),
            Resources::from_milli([(MEMORY, 6501)]),
            Resources::from_milli([("example.com/gpu", 2000)]),
            Resources::from_milli([("other.com/device", 1)]),
            Resources::new(),
        ] {
            assert_eq!(
                it.holds(&requests),
                requests.fits(&it.allocatable()),
                "{requests}"
            );
        }
    }
}
