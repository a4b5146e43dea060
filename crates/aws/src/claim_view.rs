//! Conversions between the provider's values and NodeClaim fields: resources as quantities,
//! requests from quantities, instance tags, labels of a launched instance.

use std::collections::BTreeMap;

use driftwood_api::NodeClaim;
use driftwood_api::wellknown::{
    LABEL_CAPACITY_TYPE, LABEL_EC2NODECLASS, LABEL_NODEPOOL, LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_ZONE, LABEL_TOPOLOGY_ZONE_ID,
};
use driftwood_scheduling::resources::{EPHEMERAL_STORAGE, MEMORY};
use driftwood_scheduling::{Requirements, Resources};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::ports::Tag;

const KI: i64 = 1 << 10;
const MI: i64 = 1 << 20;

fn milli_quantity(milli: i64) -> Quantity {
    if milli % 1000 == 0 {
        Quantity((milli / 1000).to_string())
    } else {
        Quantity(format!("{milli}m"))
    }
}

fn bytes_quantity(milli: i64) -> Quantity {
    if milli % 1000 != 0 {
        return Quantity(format!("{milli}m"));
    }
    let bytes = milli / 1000;
    if bytes % MI == 0 {
        Quantity(format!("{}Mi", bytes / MI))
    } else if bytes % KI == 0 {
        Quantity(format!("{}Ki", bytes / KI))
    } else {
        Quantity(bytes.to_string())
    }
}

/// Every resource of `r` as a quantity (bytes for memory and ephemeral storage, whole units
/// where they are whole), amounts below zero reported as zero.
pub fn resource_quantities(r: &Resources) -> BTreeMap<String, Quantity> {
    r.0.iter()
        .map(|(name, milli)| {
            let milli = (*milli).max(0);
            let quantity = match name.as_str() {
                MEMORY | EPHEMERAL_STORAGE => bytes_quantity(milli),
                _ => milli_quantity(milli),
            };
            (name.clone(), quantity)
        })
        .collect()
}

/// The resources a NodeClaim requests, every one of them (extended resources too), exactly;
/// one that does not parse is an error naming it.
pub fn claim_requests(claim: &NodeClaim) -> Result<Resources, String> {
    let requests = claim.spec.resources.as_ref().map(|r| &r.requests);
    requests.map_or(Ok(Resources::new()), |list| {
        Resources::from_quantities(list).map_err(|e| {
            format!(
                "NodeClaim {}: spec.resources.requests.{}: {}",
                claim.metadata.name.as_deref().unwrap_or_default(),
                e.resource,
                e.source
            )
        })
    })
}

/// A NodeClaim's requirements in the scheduling model; one that cannot be read is an error
/// naming it.
pub fn claim_requirements(claim: &NodeClaim) -> Result<Requirements, String> {
    Requirements::from_api(&claim.spec.requirements).map_err(|e| {
        format!(
            "NodeClaim {}: spec.requirements: {e}",
            claim.metadata.name.as_deref().unwrap_or_default()
        )
    })
}

/// Tags every launched instance gets (Karpenter's launch tags): the class's tags, then
/// driftwood's (which win) — the cluster's, the NodePool's and the class's. Nothing of the one
/// NodeClaim is among them, so the launches of a pool's NodeClaims made together are identical
/// and go out as one fleet; the NodeClaim's name and its Node's are tagged once it registers
/// ([`registration_tags`]).
pub fn instance_tags(
    class_tags: &BTreeMap<String, String>,
    cluster: &str,
    nodepool: &str,
    nodeclass: &str,
) -> Vec<Tag> {
    let mut tags: BTreeMap<String, String> = class_tags.clone();
    for (k, v) in [
        (LABEL_NODEPOOL.to_string(), nodepool.to_string()),
        (LABEL_EC2NODECLASS.to_string(), nodeclass.to_string()),
        (
            format!("kubernetes.io/cluster/{cluster}"),
            "owned".to_string(),
        ),
        (TAG_EKS_CLUSTER_NAME.to_string(), cluster.to_string()),
    ] {
        tags.insert(k, v);
    }
    tags.into_iter().map(|(k, v)| Tag::new(k, v)).collect()
}

/// The tag naming an instance's NodeClaim.
pub const TAG_NODECLAIM: &str = "karpenter.sh/nodeclaim";
/// The tag naming an instance (its Node's name, once registered).
pub const TAG_NAME: &str = "Name";
/// The tag naming the EKS cluster.
pub const TAG_EKS_CLUSTER_NAME: &str = "eks:eks-cluster-name";

/// Tags a registered NodeClaim's instance gets (Karpenter's `nodeclaim.tagging`): `Name` is
/// its Node's name, `karpenter.sh/nodeclaim` the NodeClaim's, `eks:eks-cluster-name` the
/// cluster's.
pub fn registration_tags(cluster: &str, nodeclaim: &str, node_name: &str) -> Vec<Tag> {
    vec![
        Tag::new(TAG_NAME, node_name),
        Tag::new(TAG_NODECLAIM, nodeclaim),
        Tag::new(TAG_EKS_CLUSTER_NAME, cluster),
    ]
}

/// Labels of a node: the instance type's labels plus zone, zone id, region and capacity type.
pub fn node_labels(
    type_labels: &BTreeMap<String, String>,
    zone: &str,
    zone_id: &str,
    region: &str,
    capacity_type: &str,
) -> BTreeMap<String, String> {
    let mut labels = type_labels.clone();
    labels.insert(LABEL_TOPOLOGY_ZONE.to_string(), zone.to_string());
    if !zone_id.is_empty() {
        labels.insert(LABEL_TOPOLOGY_ZONE_ID.to_string(), zone_id.to_string());
    }
    if !region.is_empty() {
        labels.insert(LABEL_TOPOLOGY_REGION.to_string(), region.to_string());
    }
    labels.insert(LABEL_CAPACITY_TYPE.to_string(), capacity_type.to_string());
    labels
}

#[cfg(test)]
mod tests {
    use driftwood_scheduling::resources::CPU;

    use super::*;

    #[test]
    fn quantities_round_trip() {
        let mut r = crate::overhead::base_resources(1930, 7577 * MI, 17 * KI, 29);
        r.set("nvidia.com/gpu", 4000);
        let q = resource_quantities(&r);
        assert_eq!(q["cpu"].0, "1930m");
        assert_eq!(q["memory"].0, "7577Mi");
        assert_eq!(q["ephemeral-storage"].0, "17Ki");
        assert_eq!(q["pods"].0, "29");
        assert_eq!(q["nvidia.com/gpu"].0, "4");
        assert_eq!(Resources::from_quantities(&q).unwrap(), r);
    }

    /// Extended resources are requests like any other (the provider's old parser dropped them,
    /// so a NodeClaim asking for a GPU could be launched on a type without one).
    #[test]
    fn a_claims_requests_keep_extended_resources_and_bad_ones_name_the_field() {
        let mut claim = NodeClaim::new("default-abc", Default::default());
        let requests = |pairs: &[(&str, &str)]| driftwood_api::nodeclaim::ResourceRequirements {
            requests: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect(),
        };
        claim.spec.resources = Some(requests(&[("cpu", "1500m"), ("nvidia.com/gpu", "1")]));
        let r = claim_requests(&claim).unwrap();
        assert_eq!((r.get(CPU), r.get("nvidia.com/gpu")), (1500, 1000));
        claim.spec.resources = Some(requests(&[("cpu", "lots")]));
        let err = claim_requests(&claim).unwrap_err();
        assert!(
            err.contains("NodeClaim default-abc") && err.contains("spec.resources.requests.cpu"),
            "{err}"
        );
    }

    /// Karpenter's launch tags (`utils.GetTags`): the class's, with the cluster's, the
    /// NodePool's and the class's own winning; nothing of the one NodeClaim (its name and its
    /// Node's are tagged at registration).
    #[test]
    fn driftwood_tags_win_and_name_no_nodeclaim() {
        let class = BTreeMap::from([
            ("Name".to_string(), "mine".to_string()),
            ("team".to_string(), "a".to_string()),
            ("karpenter.sh/nodepool".to_string(), "theirs".to_string()),
        ]);
        let tags = instance_tags(&class, "demo", "default", "default");
        assert_eq!(
            tags,
            [
                Tag::new("Name", "mine"),
                Tag::new("eks:eks-cluster-name", "demo"),
                Tag::new("karpenter.k8s.aws/ec2nodeclass", "default"),
                Tag::new("karpenter.sh/nodepool", "default"),
                Tag::new("kubernetes.io/cluster/demo", "owned"),
                Tag::new("team", "a"),
            ]
        );
    }
}
