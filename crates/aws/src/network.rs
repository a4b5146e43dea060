//! Subnet and security-group discovery from selector terms, and the per-zone subnet choice.

use std::collections::{BTreeMap, BTreeSet};

use driftwood_api::ec2nodeclass::{SecurityGroupSelectorTerm, SubnetSelectorTerm};

use super::filters::tag_filters;
use crate::ports::{
    AwsError, DescribeSecurityGroupsInput, DescribeSubnetsInput, Ec2Api, Filter, SecurityGroup,
    Subnet,
};

/// The subnets and, per term, whether it matched anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubnetResolution {
    /// Matched subnets, most available IPs first, then by id.
    pub subnets: Vec<Subnet>,
    /// Indexes of terms that matched nothing.
    pub unmatched: Vec<usize>,
}

/// The security groups and, per term, whether it matched anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityGroupResolution {
    /// Matched groups, by id.
    pub security_groups: Vec<SecurityGroup>,
    /// Indexes of terms that matched nothing.
    pub unmatched: Vec<usize>,
}

fn subnet_filters(term: &SubnetSelectorTerm) -> Vec<Filter> {
    let mut filters = tag_filters(&term.tags);
    if let Some(id) = &term.id {
        filters.push(Filter::new("subnet-id", [id.as_str()]));
    }
    filters
}

fn security_group_filters(term: &SecurityGroupSelectorTerm) -> Vec<Filter> {
    let mut filters = tag_filters(&term.tags);
    if let Some(id) = &term.id {
        filters.push(Filter::new("group-id", [id.as_str()]));
    }
    if let Some(name) = &term.name {
        filters.push(Filter::new("group-name", [name.as_str()]));
    }
    filters
}

/// Resolves subnetSelectorTerms (terms are ORed; a term's fields are ANDed).
pub async fn resolve_subnets(
    ec2: &dyn Ec2Api,
    terms: &[SubnetSelectorTerm],
) -> Result<SubnetResolution, AwsError> {
    let mut by_id: BTreeMap<String, Subnet> = BTreeMap::new();
    let mut unmatched = Vec::new();
    for (index, term) in terms.iter().enumerate() {
        let filters = subnet_filters(term);
        if filters.is_empty() {
            unmatched.push(index);
            continue;
        }
        let found = ec2
            .describe_subnets(DescribeSubnetsInput {
                subnet_ids: Vec::new(),
                filters,
            })
            .await?;
        if found.is_empty() {
            unmatched.push(index);
        }
        for s in found {
            by_id.insert(s.subnet_id.clone(), s);
        }
    }
    let mut subnets: Vec<Subnet> = by_id.into_values().collect();
    subnets.sort_by(|a, b| {
        b.available_ip_address_count
            .cmp(&a.available_ip_address_count)
            .then_with(|| a.subnet_id.cmp(&b.subnet_id))
    });
    Ok(SubnetResolution { subnets, unmatched })
}

/// Resolves securityGroupSelectorTerms (terms are ORed; a term's fields are ANDed).
pub async fn resolve_security_groups(
    ec2: &dyn Ec2Api,
    terms: &[SecurityGroupSelectorTerm],
) -> Result<SecurityGroupResolution, AwsError> {
    let mut by_id: BTreeMap<String, SecurityGroup> = BTreeMap::new();
    let mut unmatched = Vec::new();
    for (index, term) in terms.iter().enumerate() {
        let filters = security_group_filters(term);
        if filters.is_empty() {
            unmatched.push(index);
            continue;
        }
        let found = ec2
            .describe_security_groups(DescribeSecurityGroupsInput {
                group_ids: Vec::new(),
                filters,
            })
            .await?;
        if found.is_empty() {
            unmatched.push(index);
        }
        for g in found {
            by_id.insert(g.group_id.clone(), g);
        }
    }
    Ok(SecurityGroupResolution {
        security_groups: by_id.into_values().collect(),
        unmatched,
    })
}

/// A subnet as the provider uses it at launch: id, zone, zone id, free IPs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ZonalSubnet {
    pub id: String,
    pub zone: String,
    pub zone_id: String,
    pub available_ips: i64,
}

/// The subnet to launch into per zone: the one with most available IPs (ties by id). Pure.
pub fn subnet_per_zone(subnets: &[ZonalSubnet]) -> BTreeMap<String, ZonalSubnet> {
    let mut best: BTreeMap<String, ZonalSubnet> = BTreeMap::new();
    for s in subnets {
        let better = match best.get(&s.zone) {
            None => true,
            Some(cur) => {
                s.available_ips > cur.available_ips
                    || (s.available_ips == cur.available_ips && s.id < cur.id)
            }
        };
        if better {
            best.insert(s.zone.clone(), s.clone());
        }
    }
    best
}

/// The zones the subnets cover.
pub fn zones(subnets: &[ZonalSubnet]) -> BTreeSet<String> {
    subnets.iter().map(|s| s.zone.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(id: &str, zone: &str, ips: i64) -> ZonalSubnet {
        ZonalSubnet {
            id: id.to_string(),
            zone: zone.to_string(),
            zone_id: String::new(),
            available_ips: ips,
        }
    }

    #[test]
    fn most_free_ips_per_zone() {
        let picked = subnet_per_zone(&[
            s("subnet-1", "a", 10),
            s("subnet-2", "a", 200),
            s("subnet-3", "b", 5),
        ]);
        assert_eq!(picked["a"].id, "subnet-2");
        assert_eq!(picked["b"].id, "subnet-3");
        assert_eq!(picked.len(), 2);
    }
}
