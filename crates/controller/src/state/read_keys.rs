//! What a controller reads of a NodePool or an EC2NodeClass, as one number: a verdict or a
//! stamp keyed on it is redone when what it read changed, not when a status it never reads was
//! rewritten (the nodeclass controller rewrites NodePool status as the fleet's NodeClaims are
//! counted, and each class's rollout counts as nodes are replaced: keyed on resourceVersion,
//! every such write judged the whole fleet again).

use driftwood_api::hash::fnv1a64;
use driftwood_api::{EC2NodeClass, NodePool};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

/// The number for `read`, or (when it cannot be written out, which plain data never fails)
/// the object's resourceVersion, so a change is never missed.
fn key_of(read: &impl Serialize, meta: &ObjectMeta) -> u64 {
    match serde_json::to_vec(read) {
        Ok(bytes) => fnv1a64(&bytes),
        Err(_) => fnv1a64(
            meta.resource_version
                .as_deref()
                .unwrap_or_default()
                .as_bytes(),
        ),
    }
}

/// A NodePool's identity, annotations (its hash stamps) and spec: everything drift and the
/// hash controller read of it; not its status.
pub fn nodepool_spec_key(pool: &NodePool) -> u64 {
    let meta = &pool.metadata;
    key_of(&(&meta.uid, &meta.annotations, &pool.spec), meta)
}

/// An EC2NodeClass's identity, annotations and spec: what the hash controller reads of it.
pub fn nodeclass_spec_key(class: &EC2NodeClass) -> u64 {
    let meta = &class.metadata;
    key_of(&(&meta.uid, &meta.annotations, &class.spec), meta)
}

/// An EC2NodeClass's identity, annotations, spec and what its status resolved (images,
/// subnets, security groups, capacity reservations, instance profile, conditions): what a
/// drift verdict reads of it; not the rollout counts driftwood writes into its status.
pub fn nodeclass_resolved_key(class: &EC2NodeClass) -> u64 {
    let meta = &class.metadata;
    let status = class.status.as_ref().map(|s| {
        let mut resolved = s.clone();
        resolved.rollout = None;
        resolved
    });
    key_of(&(&meta.uid, &meta.annotations, &class.spec, &status), meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool() -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default", "uid": "p", "resourceVersion": "1", "generation": 1},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []
            }}}
        }))
        .expect("nodepool")
    }

    fn class() -> EC2NodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default", "uid": "c", "resourceVersion": "1"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "r"},
            "status": {"amis": [{"id": "ami-1", "requirements": []}]}
        }))
        .expect("class")
    }

    #[test]
    fn a_nodepool_status_write_keeps_the_key_and_a_spec_or_stamp_change_moves_it() {
        let before = nodepool_spec_key(&pool());
        let mut counted = pool();
        counted.metadata.resource_version = Some("2".into());
        counted.status = Some(serde_json::from_value(json!({"nodes": 40})).expect("status"));
        assert_eq!(nodepool_spec_key(&counted), before, "a status write");
        let mut stamped = pool();
        stamped.metadata.annotations =
            Some([("karpenter.sh/nodepool-hash".to_string(), "1".to_string())].into());
        assert_ne!(nodepool_spec_key(&stamped), before, "a hash stamp");
        let mut changed = pool();
        changed.spec.weight = Some(10);
        assert_ne!(nodepool_spec_key(&changed), before, "a spec change");
    }

    #[test]
    fn a_class_rollout_count_keeps_the_resolved_key_and_a_new_image_moves_it() {
        let before = nodeclass_resolved_key(&class());
        let spec_before = nodeclass_spec_key(&class());
        let mut counted = class();
        counted.metadata.resource_version = Some("2".into());
        counted.status.as_mut().expect("status").rollout =
            Some(serde_json::from_value(json!({"nodes": 10, "drifted": 3})).expect("rollout"));
        assert_eq!(nodeclass_resolved_key(&counted), before, "rollout counts");
        let mut reimaged = class();
        reimaged.status.as_mut().expect("status").amis[0].id = "ami-2".into();
        assert_ne!(nodeclass_resolved_key(&reimaged), before, "a new image");
        assert_eq!(
            nodeclass_spec_key(&reimaged),
            spec_before,
            "the hash reads no status"
        );
        let mut respec = class();
        respec.spec.role = Some("other".into());
        assert_ne!(nodeclass_spec_key(&respec), spec_before, "a spec change");
    }
}
