//! Plans a launch: which instance types and zones to offer CreateFleet, with which capacity
//! type, grouped by the AMI each type gets. Pure.

use std::collections::{BTreeMap, BTreeSet};

use driftwood_api::NodeSelectorRequirementWithMinValues as Requirement;
use driftwood_api::wellknown::{CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, LABEL_CAPACITY_TYPE, LABEL_TOPOLOGY_ZONE};

use super::ami::{ResolvedAmi, compatible_amis};
use super::instance_types::InstanceTypeInfo;
use super::network::ZonalSubnet;
use super::overhead::Resources;
use super::requirements::{allowed_values, requirements_allow};

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
        let mut all: Vec<&PlannedOverride> = self.groups.iter().flat_map(|g| g.overrides.iter()).collect();
        all.sort_by(|a, b| a.price.total_cmp(&b.price).then_with(|| a.instance_type.cmp(&b.instance_type)));
        all
    }
}

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

fn fits(requests: &Resources, allocatable: &Resources) -> bool {
    requests.cpu_millis <= allocatable.cpu_millis
        && requests.memory_bytes <= allocatable.memory_bytes
        && requests.ephemeral_storage_bytes <= allocatable.ephemeral_storage_bytes
        && requests.pods <= allocatable.pods
}

/// Plans a launch for `requirements` and `requests` over the catalog, AMIs (preference order)
/// and subnets (one per zone).
pub fn plan_launch(
    catalog: &[InstanceTypeInfo],
    requirements: &[Requirement],
    requests: &Resources,
    amis: &[ResolvedAmi],
    subnets: &BTreeMap<String, ZonalSubnet>,
) -> Result<LaunchPlan, PlanError> {
    if subnets.is_empty() {
        return Err(PlanError::NoSubnet);
    }
    let zones: BTreeSet<String> =
        allowed_values(requirements, LABEL_TOPOLOGY_ZONE, subnets.keys().map(String::as_str));
    let capacity_types =
        allowed_values(requirements, LABEL_CAPACITY_TYPE, [CAPACITY_TYPE_SPOT, CAPACITY_TYPE_ON_DEMAND]);
    let candidates: Vec<&InstanceTypeInfo> = catalog
        .iter()
        .filter(|it| requirements_allow(requirements, &it.label_values()))
        .filter(|it| fits(requests, &it.allocatable()))
        .collect();
    let offered = |it: &InstanceTypeInfo, ct: &str| -> Vec<(String, f64)> {
        it.offerings
            .iter()
            .filter(|o| o.available && o.capacity_type == ct && zones.contains(&o.zone))
            .map(|o| (o.zone.clone(), o.price))
            .collect()
    };
    let capacity_type = if capacity_types.contains(CAPACITY_TYPE_SPOT)
        && candidates.iter().any(|it| !offered(it, CAPACITY_TYPE_SPOT).is_empty())
    {
        CAPACITY_TYPE_SPOT
    } else if capacity_types.contains(CAPACITY_TYPE_ON_DEMAND) {
        CAPACITY_TYPE_ON_DEMAND
    } else {
        return Err(PlanError::NoCompatibleInstanceType);
    };
    let mut priced: Vec<(&InstanceTypeInfo, Vec<(String, f64)>, f64)> = candidates
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
        let labels = it.label_values();
        let Some(ami) = compatible_amis(amis, &labels).into_iter().next() else { continue };
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
            None => groups.push(AmiGroup { ami: ami.clone(), overrides: overrides.collect() }),
        }
    }
    groups.retain(|g| !g.overrides.is_empty());
    if groups.is_empty() {
        return Err(PlanError::NoCompatibleAmi);
    }
    Ok(LaunchPlan { capacity_type: capacity_type.to_string(), groups })
}
