//! Plans a launch: which instance types and zones to offer CreateFleet, with which capacity
//! type, grouped by the AMI each type gets. Pure.

use std::collections::{BTreeMap, BTreeSet};

use driftwood_api::wellknown::{
    CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, LABEL_CAPACITY_TYPE, LABEL_TOPOLOGY_ZONE,
    LABEL_TOPOLOGY_ZONE_ID,
};
use driftwood_scheduling::{InstanceType, Requirements, Resources};

use super::ami::{ResolvedAmi, compatible_amis};
use super::network::ZonalSubnet;

/// At most this many instance types are offered to one fleet request (like Karpenter).
pub const MAX_INSTANCE_TYPES: usize = 60;

/// One (instance type, zone) the fleet may launch.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedOverride {
    pub instance_type: String,
    pub zone: String,
    pub subnet_id: String,
    pub price: f64,
}

/// The overrides that share one AMI (and so one launch template).
#[derive(Debug, Clone, PartialEq)]
pub struct AmiGroup {
    pub ami: ResolvedAmi,
    pub overrides: Vec<PlannedOverride>,
}

/// A launch plan.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchPlan {
    /// `spot` or `on-demand`.
    pub capacity_type: String,
    /// Groups in preference order (cheapest first).
    pub groups: Vec<AmiGroup>,
}

impl LaunchPlan {
    /// Every override of every group, cheapest first.
    pub fn all_overrides(&self) -> Vec<&PlannedOverride> {
        let mut all: Vec<&PlannedOverride> = self
            .groups
            .iter()
            .flat_map(|g| g.overrides.iter())
            .collect();
        all.sort_by(|a, b| {
            a.price
                .total_cmp(&b.price)
                .then_with(|| a.instance_type.cmp(&b.instance_type))
        });
        all
    }
}

/// A candidate type, its (zone, price) offers of the chosen capacity type, and its cheapest price.
type PricedType<'a> = (&'a InstanceType, Vec<(String, f64)>, f64);

/// Why nothing can be launched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("no instance type satisfies the requirements and requests with an available offering")]
    NoCompatibleInstanceType,
    #[error("no resolved AMI is compatible with the remaining instance types")]
    NoCompatibleAmi,
    #[error("no subnet in the allowed zones")]
    NoSubnet,
}

/// Whether `value` of label `key` is allowed by `requirements` (`None`: the label is absent).
fn allows(requirements: &Requirements, key: &str, value: Option<&str>) -> bool {
    requirements.get(key).is_none_or(|r| r.matches(value))
}

/// Plans a launch for `requirements` and `requests` over the catalog, AMIs (preference order)
/// and subnets (one per zone).
pub fn plan_launch(
    catalog: &[InstanceType],
    requirements: &Requirements,
    requests: &Resources,
    amis: &[ResolvedAmi],
    subnets: &BTreeMap<String, ZonalSubnet>,
) -> Result<LaunchPlan, PlanError> {
    if subnets.is_empty() {
        return Err(PlanError::NoSubnet);
    }
    // The zones of the subnets the requirements allow, by name and by zone id.
    let zones: BTreeSet<&str> = subnets
        .iter()
        .filter(|(zone, subnet)| {
            allows(requirements, LABEL_TOPOLOGY_ZONE, Some(zone.as_str()))
                && allows(
                    requirements,
                    LABEL_TOPOLOGY_ZONE_ID,
                    Some(subnet.zone_id.as_str()).filter(|id| !id.is_empty()),
                )
        })
        .map(|(zone, _)| zone.as_str())
        .collect();
    let capacity_types: BTreeSet<&str> = [CAPACITY_TYPE_SPOT, CAPACITY_TYPE_ON_DEMAND]
        .into_iter()
        .filter(|ct| allows(requirements, LABEL_CAPACITY_TYPE, Some(ct)))
        .collect();
    // A type is a candidate when its labels (and the instance-type labels it lacks, which it
    // carries as DoesNotExist) meet the requirements on them, and its allocatable holds every
    // request, extended resources included. Requirements on labels an instance type does not
    // decide (a NodePool's custom labels, the nodepool label) are met by the NodeClaim's own
    // labels, not by the instance type.
    let candidates: Vec<&InstanceType> = catalog
        .iter()
        .filter(|it| it.requirements.first_conflict(requirements).is_none())
        .filter(|it| it.holds(requests))
        .collect();
    let offered = |it: &InstanceType, ct: &str| -> Vec<(String, f64)> {
        it.offerings
            .iter()
            .filter(|o| o.available && o.capacity_type == ct && zones.contains(o.zone.as_str()))
            .map(|o| (o.zone.clone(), o.price))
            .collect()
    };
    let capacity_type = if capacity_types.contains(CAPACITY_TYPE_SPOT)
        && candidates
            .iter()
            .any(|it| !offered(it, CAPACITY_TYPE_SPOT).is_empty())
    {
        CAPACITY_TYPE_SPOT
    } else if capacity_types.contains(CAPACITY_TYPE_ON_DEMAND) {
        CAPACITY_TYPE_ON_DEMAND
    } else {
        return Err(PlanError::NoCompatibleInstanceType);
    };
    let mut priced: Vec<PricedType<'_>> = candidates
        .into_iter()
        .filter_map(|it| {
            let offers = offered(it, capacity_type);
            let min = offers.iter().map(|(_, p)| *p).min_by(f64::total_cmp)?;
            Some((it, offers, min))
        })
        .collect();
    if priced.is_empty() {
        return Err(PlanError::NoCompatibleInstanceType);
    }
    priced.sort_by(|a, b| a.2.total_cmp(&b.2).then_with(|| a.0.name.cmp(&b.0.name)));
    priced.truncate(MAX_INSTANCE_TYPES);

    let mut groups: Vec<AmiGroup> = Vec::new();
    for (it, offers, _) in priced {
        let Some(ami) = compatible_amis(amis, &it.requirements).into_iter().next() else {
            continue;
        };
        let overrides = offers.into_iter().filter_map(|(zone, price)| {
            subnets.get(&zone).map(|s| PlannedOverride {
                instance_type: it.name.clone(),
                zone,
                subnet_id: s.id.clone(),
                price,
            })
        });
        match groups.iter_mut().find(|g| g.ami.id == ami.id) {
            Some(g) => g.overrides.extend(overrides),
            None => groups.push(AmiGroup {
                ami: ami.clone(),
                overrides: overrides.collect(),
            }),
        }
    }
    groups.retain(|g| !g.overrides.is_empty());
    if groups.is_empty() {
        return Err(PlanError::NoCompatibleAmi);
    }
    Ok(LaunchPlan {
        capacity_type: capacity_type.to_string(),
        groups,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use driftwood_api::NodeSelectorRequirementWithMinValues as Requirement;
    use driftwood_api::requirement::{OP_EXISTS, OP_IN, OP_NOT_IN};
    use driftwood_api::wellknown::{LABEL_ARCH, LABEL_INSTANCE_GPU_COUNT, LABEL_INSTANCE_TYPE};
    use driftwood_scheduling::resources::CPU;
    use driftwood_scheduling::{Offering, Overhead};

    use super::*;
    use crate::overhead::base_resources;

    fn it(name: &str, arch: &str, cpu: i64, offers: &[(&str, &str, f64)]) -> InstanceType {
        let labels = BTreeMap::from([
            (LABEL_INSTANCE_TYPE.to_string(), name.to_string()),
            (LABEL_ARCH.to_string(), arch.to_string()),
        ]);
        let mut requirements = Requirements::from_labels(labels.iter());
        requirements.add(
            LABEL_INSTANCE_GPU_COUNT,
            driftwood_scheduling::Requirement::does_not_exist(),
        );
        InstanceType {
            name: name.to_string(),
            requirements,
            capacity: base_resources(cpu * 1000, 1 << 33, 1 << 34, 29),
            overhead: Overhead::default(),
            offerings: offers
                .iter()
                .map(|(zone, ct, price)| Offering {
                    zone: zone.to_string(),
                    capacity_type: ct.to_string(),
                    price: *price,
                    available: true,
                })
                .collect(),
        }
    }

    fn reqs(list: &[Requirement]) -> Requirements {
        Requirements::from_api(list).unwrap()
    }

    fn cpu(millis: i64) -> Resources {
        Resources::from_milli([(CPU, millis)])
    }

    fn ami(id: &str, arch: &str) -> ResolvedAmi {
        ResolvedAmi {
            id: id.to_string(),
            name: id.to_string(),
            arch: arch.to_string(),
            creation_date: String::new(),
            deprecated: false,
            requirements: vec![Requirement::new(LABEL_ARCH, OP_IN, &[arch])],
        }
    }

    fn subnets() -> BTreeMap<String, ZonalSubnet> {
        ["a", "b"]
            .iter()
            .map(|z| {
                (
                    z.to_string(),
                    ZonalSubnet {
                        id: format!("subnet-{z}"),
                        zone: z.to_string(),
                        zone_id: String::new(),
                        available_ips: 10,
                    },
                )
            })
            .collect()
    }

    fn catalog() -> Vec<InstanceType> {
        vec![
            it(
                "m5.large",
                "amd64",
                2,
                &[
                    ("a", "spot", 0.04),
                    ("b", "spot", 0.03),
                    ("a", "on-demand", 0.096),
                ],
            ),
            it(
                "m6g.large",
                "arm64",
                2,
                &[("a", "spot", 0.02), ("a", "on-demand", 0.077)],
            ),
            it(
                "c5.xlarge",
                "amd64",
                4,
                &[("c", "spot", 0.01), ("a", "on-demand", 0.17)],
            ),
        ]
    }

    #[test]
    fn spot_preferred_groups_by_ami_cheapest_first() {
        let amis = [ami("ami-x86", "amd64"), ami("ami-arm", "arm64")];
        let plan = plan_launch(
            &catalog(),
            &reqs(&[]),
            &Resources::default(),
            &amis,
            &subnets(),
        )
        .unwrap();
        assert_eq!(plan.capacity_type, "spot");
        assert_eq!(plan.groups.len(), 2);
        assert_eq!(
            plan.groups[0].ami.id, "ami-arm",
            "m6g.large is the cheapest type"
        );
        let first = plan.all_overrides()[0];
        assert_eq!(
            (first.instance_type.as_str(), first.zone.as_str()),
            ("m6g.large", "a")
        );
        // c5.xlarge's only spot offer is in zone c, which has no subnet: not offered.
        assert!(
            plan.all_overrides()
                .iter()
                .all(|o| o.instance_type != "c5.xlarge")
        );
        assert_eq!(
            plan.groups[1]
                .overrides
                .iter()
                .find(|o| o.zone == "b")
                .unwrap()
                .subnet_id,
            "subnet-b"
        );
    }

    #[test]
    fn on_demand_only_requirements_and_type_without_ami_drop_out() {
        let on_demand = reqs(&[Requirement::new(
            "karpenter.sh/capacity-type",
            OP_IN,
            &["on-demand"],
        )]);
        let amis = [ami("ami-x86", "amd64")];
        let plan = plan_launch(
            &catalog(),
            &on_demand,
            &Resources::default(),
            &amis,
            &subnets(),
        )
        .unwrap();
        assert_eq!(plan.capacity_type, "on-demand");
        assert_eq!(plan.groups.len(), 1);
        let types: Vec<&str> = plan
            .all_overrides()
            .iter()
            .map(|o| o.instance_type.as_str())
            .collect();
        assert_eq!(types, ["m5.large", "c5.xlarge"]);
    }

    #[test]
    fn zone_requirements_and_requests_filter() {
        let not_a = reqs(&[Requirement::new(
            "topology.kubernetes.io/zone",
            OP_NOT_IN,
            &["a"],
        )]);
        let amis = [ami("ami-x86", "amd64"), ami("ami-arm", "arm64")];
        let plan =
            plan_launch(&catalog(), &not_a, &Resources::default(), &amis, &subnets()).unwrap();
        let all = plan.all_overrides();
        assert_eq!(all.len(), 1);
        assert_eq!(
            (all[0].instance_type.as_str(), all[0].zone.as_str()),
            ("m5.large", "b")
        );

        let big = cpu(3000);
        let plan = plan_launch(&catalog(), &reqs(&[]), &big, &amis, &subnets()).unwrap();
        assert_eq!(
            plan.capacity_type, "on-demand",
            "the only 4-cpu type has no spot offer in a subnet zone"
        );
        let huge = cpu(64_000);
        assert_eq!(
            plan_launch(&catalog(), &reqs(&[]), &huge, &amis, &subnets()),
            Err(PlanError::NoCompatibleInstanceType)
        );
        assert_eq!(
            plan_launch(&catalog(), &reqs(&[]), &big, &amis, &BTreeMap::new()),
            Err(PlanError::NoSubnet)
        );
        assert_eq!(
            plan_launch(
                &catalog(),
                &reqs(&[]),
                &Resources::default(),
                &[],
                &subnets()
            ),
            Err(PlanError::NoCompatibleAmi)
        );
    }

    /// A request for a resource no type has (a GPU here) leaves no type: the old parser dropped
    /// extended requests and would have launched a type without one.
    #[test]
    fn extended_requests_and_instance_type_labels_the_type_lacks_rule_it_out() {
        let amis = [ami("ami-x86", "amd64"), ami("ami-arm", "arm64")];
        let mut gpu = cpu(1000);
        gpu.set("nvidia.com/gpu", 1000);
        assert_eq!(
            plan_launch(&catalog(), &reqs(&[]), &gpu, &amis, &subnets()),
            Err(PlanError::NoCompatibleInstanceType)
        );
        let mut catalog = catalog();
        catalog[0].capacity.set("nvidia.com/gpu", 1000);
        catalog[0].requirements = Requirements::from_labels(
            [
                (LABEL_INSTANCE_TYPE.to_string(), "m5.large".to_string()),
                (LABEL_ARCH.to_string(), "amd64".to_string()),
                (LABEL_INSTANCE_GPU_COUNT.to_string(), "1".to_string()),
            ]
            .iter()
            .map(|(k, v)| (k, v)),
        );
        let plan = plan_launch(&catalog, &reqs(&[]), &gpu, &amis, &subnets()).unwrap();
        assert!(
            plan.all_overrides()
                .iter()
                .all(|o| o.instance_type == "m5.large")
        );
        // Exists on an instance-type label: only the type that has it.
        let gpu_label = reqs(&[Requirement::new(LABEL_INSTANCE_GPU_COUNT, OP_EXISTS, &[])]);
        let plan = plan_launch(&catalog, &gpu_label, &cpu(1000), &amis, &subnets()).unwrap();
        assert!(
            plan.all_overrides()
                .iter()
                .all(|o| o.instance_type == "m5.large")
        );
    }

    /// A zone-id requirement picks the subnets of that zone.
    #[test]
    fn a_zone_id_requirement_picks_its_zone() {
        let mut with_ids = subnets();
        for (zone, subnet) in with_ids.iter_mut() {
            subnet.zone_id = format!("usw2-{zone}");
        }
        let amis = [ami("ami-x86", "amd64"), ami("ami-arm", "arm64")];
        let only_b = reqs(&[Requirement::new(LABEL_TOPOLOGY_ZONE_ID, OP_IN, &["usw2-b"])]);
        let plan =
            plan_launch(&catalog(), &only_b, &Resources::default(), &amis, &with_ids).unwrap();
        assert!(
            plan.all_overrides().iter().all(|o| o.zone == "b"),
            "{plan:?}"
        );
    }
}
