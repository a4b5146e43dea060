//! Conversions between the provider's values and NodeClaim fields: resources as quantities,
//! requests from quantities, instance tags, labels of a launched instance.

use std::collections::BTreeMap;

use driftwood_api::wellknown::{
    LABEL_CAPACITY_TYPE, LABEL_EC2NODECLASS, LABEL_NODEPOOL, LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_ZONE, LABEL_TOPOLOGY_ZONE_ID,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::overhead::Resources;
use super::quantity::parse_quantity;
use crate::ports::Tag;

const KI: i64 = 1 << 10;
const MI: i64 = 1 << 20;

fn cpu_quantity(millis: i64) -> Quantity {
    if millis % 1000 == 0 {
        Quantity((millis / 1000).to_string())
    } else {
        Quantity(format!("{millis}m"))
    }
}

fn bytes_quantity(bytes: i64) -> Quantity {
    if bytes % MI == 0 {
        Quantity(format!("{}Mi", bytes / MI))
    } else if bytes % KI == 0 {
        Quantity(format!("{}Ki", bytes / KI))
    } else {
        Quantity(bytes.to_string())
    }
}

/// `cpu`, `memory`, `ephemeral-storage`, `pods` as quantities.
pub fn resource_quantities(r: &Resources) -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".to_string(), cpu_quantity(r.cpu_millis)),
        ("memory".to_string(), bytes_quantity(r.memory_bytes)),
        (
            "ephemeral-storage".to_string(),
            bytes_quantity(r.ephemeral_storage_bytes),
        ),
        ("pods".to_string(), Quantity(r.pods.to_string())),
    ])
}

/// Parses resource requests; an unparsable one is an error naming it.
pub fn requests_from_quantities(
    requests: &BTreeMap<String, Quantity>,
) -> Result<Resources, String> {
    let mut r = Resources::default();
    for (k, q) in requests {
        let n = parse_quantity(&q.0).map_err(|e| format!("spec.resources.requests.{k}: {e}"))?;
        match k.as_str() {
            "cpu" => r.cpu_millis = (n * 1000.0).ceil() as i64,
            "memory" => r.memory_bytes = n.ceil() as i64,
            "ephemeral-storage" => r.ephemeral_storage_bytes = n.ceil() as i64,
            "pods" => r.pods = n.ceil() as i64,
            _ => {}
        }
    }
    Ok(r)
}

/// Tags every launched instance gets: the class's tags, then driftwood's (which win).
pub fn instance_tags(
    class_tags: &BTreeMap<String, String>,
    cluster: &str,
    nodepool: &str,
    nodeclaim: &str,
    nodeclass: &str,
) -> Vec<Tag> {
    let mut tags: BTreeMap<String, String> = class_tags.clone();
    for (k, v) in [
        (LABEL_NODEPOOL.to_string(), nodepool.to_string()),
        ("karpenter.sh/nodeclaim".to_string(), nodeclaim.to_string()),
        (LABEL_EC2NODECLASS.to_string(), nodeclass.to_string()),
        (
            format!("kubernetes.io/cluster/{cluster}"),
            "owned".to_string(),
        ),
        ("eks:eks-cluster-name".to_string(), cluster.to_string()),
        ("Name".to_string(), format!("{nodepool}/{nodeclaim}")),
    ] {
        tags.insert(k, v);
    }
    tags.into_iter().map(|(k, v)| Tag::new(k, v)).collect()
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
    use super::*;

    #[test]
    fn quantities_round_trip() {
        let r = Resources {
            cpu_millis: 1930,
            memory_bytes: 7577 * MI,
            ephemeral_storage_bytes: 17 * KI,
            pods: 29,
        };
        let q = resource_quantities(&r);
        assert_eq!(q["cpu"].0, "1930m");
        assert_eq!(q["memory"].0, "7577Mi");
        assert_eq!(q["ephemeral-storage"].0, "17Ki");
        assert_eq!(requests_from_quantities(&q).unwrap(), r);
        let bad = BTreeMap::from([("cpu".to_string(), Quantity("lots".to_string()))]);
        assert!(
            requests_from_quantities(&bad)
                .unwrap_err()
                .contains("spec.resources.requests.cpu")
        );
    }

    #[test]
    fn driftwood_tags_win() {
        let class = BTreeMap::from([
            ("Name".to_string(), "mine".to_string()),
            ("team".to_string(), "a".to_string()),
        ]);
        let tags = instance_tags(&class, "demo", "default", "default-abc", "default");
        assert!(tags.contains(&Tag::new("Name", "default/default-abc")));
        assert!(tags.contains(&Tag::new("team", "a")));
        assert!(tags.contains(&Tag::new("kubernetes.io/cluster/demo", "owned")));
    }
}
