//! The simulated VPC: one private subnet per zone and the cluster security group, tagged for
//! discovery (`karpenter.sh/discovery: <cluster>`), plus an untagged default group.

use driftwood_aws::ports::{SecurityGroup, Subnet, Tag};

use crate::ids::resource_id;

/// The discovery tag key the walkthrough's selectors use.
pub const DISCOVERY_TAG: &str = "karpenter.sh/discovery";

/// The zone id of the `index`th zone of `region` (e.g. `usw2-az1`).
pub fn zone_id(region: &str, index: usize) -> String {
    let short: String = region
        .split('-')
        .enumerate()
        .map(|(i, part)| {
            if i == 2 {
                part.to_string()
            } else {
                part.chars().take(if i == 0 { 2 } else { 1 }).collect()
            }
        })
        .collect();
    format!("{short}-az{}", index + 1)
}

/// The VPC id for `cluster`.
pub fn vpc_id(seed: u64, cluster: &str) -> String {
    resource_id("vpc", seed, cluster)
}

/// One tagged private subnet per zone, with different free-IP counts.
pub fn default_subnets(seed: u64, cluster: &str, region: &str, zones: &[String]) -> Vec<Subnet> {
    let vpc = vpc_id(seed, cluster);
    zones
        .iter()
        .enumerate()
        .map(|(i, zone)| Subnet {
            subnet_id: resource_id("subnet", seed, &format!("{cluster}/private/{zone}")),
            vpc_id: vpc.clone(),
            availability_zone: zone.clone(),
            availability_zone_id: zone_id(region, i),
            cidr_block: format!("10.0.{}.0/19", 32 * i),
            available_ip_address_count: 8187 - 250 * i as i64,
            map_public_ip_on_launch: false,
            tags: vec![
                Tag::new(DISCOVERY_TAG, cluster),
                Tag::new("Name", format!("{cluster}-private-{zone}")),
                Tag::new("kubernetes.io/role/internal-elb", "1"),
            ],
        })
        .collect()
}

/// The cluster security group (tagged for discovery) and the VPC's default group (untagged).
pub fn default_security_groups(seed: u64, cluster: &str) -> Vec<SecurityGroup> {
    let vpc = vpc_id(seed, cluster);
    let cluster_sg = resource_id("sg", seed, &format!("{cluster}/cluster"));
    vec![
        SecurityGroup {
            group_id: cluster_sg.clone(),
            group_name: format!("eks-cluster-sg-{cluster}-{}", &cluster_sg[3..13]),
            description: "EKS created security group applied to ENI that is attached to EKS Control Plane master nodes, as well as any managed workloads.".to_string(),
            vpc_id: vpc.clone(),
            tags: vec![
                Tag::new(DISCOVERY_TAG, cluster),
                Tag::new(format!("kubernetes.io/cluster/{cluster}"), "owned"),
            ],
        },
        SecurityGroup {
            group_id: resource_id("sg", seed, &format!("{cluster}/default")),
            group_name: "default".to_string(),
            description: "default VPC security group".to_string(),
            vpc_id: vpc,
            tags: Vec::new(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_ids() {
        assert_eq!(zone_id("us-west-2", 0), "usw2-az1");
        assert_eq!(zone_id("eu-central-1", 2), "euc1-az3");
    }
}
