//! The hash controller: stamps each NodePool with its template hash (and each EC2NodeClass
//! with its static hash, cluster CA bundle included), and re-stamps NodeClaims stamped under
//! another hash version — an upgrade, or NodeClaims adopted from Karpenter — instead of
//! drifting them (a NodeClaim already drifted gets only the new version and stays drifted).

use super::Outcome;
use crate::api::modify;
use crate::context::Context;
use crate::state::{Snapshot, read_keys};
use driftwood_api::hash::{
    EC2NODECLASS_HASH_VERSION, NODEPOOL_HASH_VERSION, TemplateHashes, ec2nodeclass_hashes,
    nodepool_hashes,
};
use driftwood_api::wellknown::{
    ANNOTATION_EC2NODECLASS_FIELD_HASHES, ANNOTATION_EC2NODECLASS_HASH,
    ANNOTATION_EC2NODECLASS_HASH_VERSION, ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION, LABEL_NODEPOOL,
};
use driftwood_api::{EC2NodeClass, NodeClaim, NodePool};
use driftwood_disruption::drift::{nodeclass_restamp, nodepool_restamp};
use kube::api::Api;
use std::collections::BTreeMap;

/// The kind of object a stamp goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    NodePool,
    EC2NodeClass,
    NodeClaim,
}

/// Annotations to set on one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    pub target: Target,
    pub name: String,
    pub annotations: Vec<(String, String)>,
}

/// What the hash controller should write, from the cached objects alone: the NodePool and
/// EC2NodeClass hashes that are missing or stale, and the NodeClaims to re-stamp because their
/// hash version differs.
pub fn decide(snapshot: &Snapshot, cluster_ca_bundle: &str) -> Vec<Stamp> {
    let mut stamps = Vec::new();
    let mut pool_hashes: BTreeMap<&str, TemplateHashes> = BTreeMap::new();
    for (name, pool) in &snapshot.store.nodepools {
        let hashes = nodepool_hashes(pool);
        let wanted = vec![
            (ANNOTATION_NODEPOOL_HASH.to_string(), hashes.hash.clone()),
            (
                ANNOTATION_NODEPOOL_HASH_VERSION.to_string(),
                NODEPOOL_HASH_VERSION.to_string(),
            ),
        ];
        if !annotated(pool.metadata.annotations.as_ref(), &wanted) {
            stamps.push(Stamp {
                target: Target::NodePool,
                name: name.clone(),
                annotations: wanted,
            });
        }
        pool_hashes.insert(name, hashes);
    }
    let mut class_hashes: BTreeMap<&str, TemplateHashes> = BTreeMap::new();
    for (name, class) in &snapshot.store.nodeclasses {
        let hashes = ec2nodeclass_hashes(class, cluster_ca_bundle);
        let wanted = vec![
            (
                ANNOTATION_EC2NODECLASS_HASH.to_string(),
                hashes.hash.clone(),
            ),
            (
                ANNOTATION_EC2NODECLASS_HASH_VERSION.to_string(),
                EC2NODECLASS_HASH_VERSION.to_string(),
            ),
            // What changed can be named by readers that do not know the cluster CA bundle.
            (
                ANNOTATION_EC2NODECLASS_FIELD_HASHES.to_string(),
                hashes.fields_annotation(),
            ),
        ];
        if !annotated(class.metadata.annotations.as_ref(), &wanted) {
            stamps.push(Stamp {
                target: Target::EC2NodeClass,
                name: name.clone(),
                annotations: wanted,
            });
        }
        class_hashes.insert(name, hashes);
    }
    for (name, claim) in &snapshot.store.nodeclaims {
        let mut stamp = BTreeMap::new();
        let pool = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_NODEPOOL));
        if let Some(hashes) = pool.and_then(|p| pool_hashes.get(p.as_str())) {
            stamp.extend(nodepool_restamp(claim, hashes).unwrap_or_default());
        }
        if let Some(hashes) = class_hashes.get(claim.spec.node_class_ref.name.as_str()) {
            stamp.extend(nodeclass_restamp(claim, hashes).unwrap_or_default());
        }
        if !stamp.is_empty() {
            stamps.push(Stamp {
                target: Target::NodeClaim,
                name: name.clone(),
                annotations: stamp.into_iter().collect(),
            });
        }
    }
    stamps
}

/// What wakes the hash controller before its period: a change to what it reads of a NodePool
/// or an EC2NodeClass (identity, annotations, spec; not the status driftwood rewrites as the
/// fleet changes), or a NodeClaim created or deleted (one adopted under another hash version).
/// A NodeClaim's own updates do not wake it (NodeClaims the provisioner launches carry the
/// current stamps; an annotation edited by hand is re-stamped within the period, where
/// Karpenter's hash controllers never look at NodeClaims but on a hash version change).
/// O(NodePools + classes), and never a pod event: during a rollout pods change many times a
/// second, and NodeClaim status a few times a second; each pass re-hashes every NodePool and
/// walks every NodeClaim.
pub fn wake_signature(snapshot: &Snapshot) -> Vec<u64> {
    let store = &snapshot.store;
    let mut signature = Vec::with_capacity(store.nodepools.len() + store.nodeclasses.len() + 1);
    signature.extend(
        store
            .nodepools
            .values()
            .map(|p| read_keys::nodepool_spec_key(p)),
    );
    signature.extend(
        store
            .nodeclasses
            .values()
            .map(|c| read_keys::nodeclass_spec_key(c)),
    );
    signature.push(store.nodeclaims.len() as u64);
    signature
}

/// One pass: decide, then write each stamp as a patch.
pub async fn pass(ctx: Context) -> Outcome {
    let stamps = decide(&ctx.state.snapshot(), &ctx.settings.cluster_ca_bundle);
    let mut errors = 0;
    for stamp in stamps {
        let name = &stamp.name;
        let set = |a: &mut Option<BTreeMap<String, String>>| set_annotations(a, &stamp.annotations);
        let written = match stamp.target {
            Target::NodePool => {
                let api: Api<NodePool> = Api::all(ctx.client.clone());
                modify(&ctx.state, &api, name, |p| set(&mut p.metadata.annotations))
                    .await
                    .map(|_| ())
            }
            Target::EC2NodeClass => {
                let api: Api<EC2NodeClass> = Api::all(ctx.client.clone());
                modify(&ctx.state, &api, name, |c| set(&mut c.metadata.annotations))
                    .await
                    .map(|_| ())
            }
            Target::NodeClaim => {
                let api: Api<NodeClaim> = Api::all(ctx.client.clone());
                modify(&ctx.state, &api, name, |c| set(&mut c.metadata.annotations))
                    .await
                    .map(|_| ())
            }
        };
        match (written, stamp.target) {
            (Ok(()), Target::NodeClaim) => {
                tracing::info!(nodeclaim = %name, "re-stamped nodeclaim hashes (hash version changed)")
            }
            (Ok(()), _) => {}
            (Err(error), target) => {
                errors += 1;
                tracing::warn!(?target, object = %name, %error, "could not stamp hash annotations")
            }
        }
    }
    Outcome::idle().with_errors(errors)
}

fn annotated<K: AsRef<str>>(
    annotations: Option<&BTreeMap<String, String>>,
    wanted: &[(K, String)],
) -> bool {
    wanted
        .iter()
        .all(|(k, v)| annotations.and_then(|a| a.get(k.as_ref())) == Some(v))
}

fn set_annotations<K: AsRef<str>>(
    annotations: &mut Option<BTreeMap<String, String>>,
    wanted: &[(K, String)],
) -> bool {
    let map = annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in wanted {
        if map.get(k.as_ref()) != Some(v) {
            map.insert(k.as_ref().to_string(), v.clone());
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Store;
    use driftwood_api::condition::STATUS_TRUE;
    use driftwood_api::wellknown::CONDITION_DRIFTED;
    use serde_json::json;
    use std::sync::Arc;

    fn pool(annotations: serde_json::Value) -> Arc<NodePool> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                "metadata": {"name": "default", "annotations": annotations},
                "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}
            }))
            .unwrap(),
        )
    }

    fn class() -> Arc<EC2NodeClass> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                "metadata": {"name": "default"},
                "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                         "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}
            }))
            .unwrap(),
        )
    }

    fn claim(annotations: serde_json::Value, drifted: bool) -> Arc<NodeClaim> {
        let conditions = if drifted {
            json!([{"type": CONDITION_DRIFTED, "status": STATUS_TRUE, "reason": "NodePoolDrifted", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}])
        } else {
            json!([])
        };
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": "default-abcde", "labels": {LABEL_NODEPOOL: "default"}, "annotations": annotations},
                "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
                "status": {"conditions": conditions}
            }))
            .unwrap(),
        )
    }

    fn snapshot(pool: Arc<NodePool>, claim: Option<Arc<NodeClaim>>) -> Snapshot {
        let mut store = Store::default();
        store.nodepools.insert("default".into(), pool);
        store.nodeclasses.insert("default".into(), class());
        if let Some(claim) = claim {
            store.nodeclaims.insert("default-abcde".into(), claim);
        }
        Snapshot::new(store)
    }

    fn stamped(stamps: &[Stamp], target: Target) -> BTreeMap<String, String> {
        stamps
            .iter()
            .filter(|s| s.target == target)
            .flat_map(|s| s.annotations.clone())
            .collect()
    }

    #[test]
    fn unstamped_nodepools_and_classes_get_their_hashes() {
        let s = snapshot(pool(json!({})), None);
        let stamps = decide(&s, "");
        let pool_stamp = stamped(&stamps, Target::NodePool);
        assert_eq!(
            pool_stamp[ANNOTATION_NODEPOOL_HASH],
            nodepool_hashes(&s.store.nodepools["default"]).hash
        );
        assert_eq!(
            pool_stamp[ANNOTATION_NODEPOOL_HASH_VERSION],
            NODEPOOL_HASH_VERSION
        );
        let class_stamp = stamped(&stamps, Target::EC2NodeClass);
        assert_eq!(
            class_stamp[ANNOTATION_EC2NODECLASS_HASH_VERSION],
            EC2NODECLASS_HASH_VERSION
        );
        assert!(class_stamp.contains_key(ANNOTATION_EC2NODECLASS_FIELD_HASHES));
    }

    #[test]
    fn objects_already_stamped_are_left_alone() {
        let first = snapshot(pool(json!({})), None);
        let hash = nodepool_hashes(&first.store.nodepools["default"]).hash;
        let s = snapshot(
            pool(
                json!({ANNOTATION_NODEPOOL_HASH: hash, ANNOTATION_NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION}),
            ),
            None,
        );
        assert!(stamped(&decide(&s, ""), Target::NodePool).is_empty());
    }

    /// The controller wakes for what it reads of a NodePool or an EC2NodeClass changing, and
    /// for a NodeClaim created (one adopted under another hash version); not for pods, a
    /// NodeClaim's status, or the NodePool status the nodeclass controller rewrites as the
    /// fleet's NodeClaims are counted.
    #[test]
    fn wakes_for_what_it_reads_and_not_for_pods_or_status_writes() {
        let mut s = snapshot(pool(json!({})), None);
        let before = wake_signature(&s);
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n"}
        }))
        .unwrap();
        s.apply("default/p".into(), Arc::new(pod));
        assert_eq!(wake_signature(&s), before, "a pod");
        let mut counted = (*pool(json!({}))).clone();
        counted.metadata.resource_version = Some("7".into());
        counted.status = Some(serde_json::from_value(json!({"nodes": 3})).unwrap());
        s.apply("default".into(), Arc::new(counted));
        assert_eq!(wake_signature(&s), before, "NodePool status counts");
        s.apply(
            "default-abcde".into(),
            claim(json!({ANNOTATION_NODEPOOL_HASH_VERSION: "v1"}), false),
        );
        assert_ne!(wake_signature(&s), before, "a NodeClaim adopted");
        let with_claim = wake_signature(&s);
        s.apply(
            "default-abcde".into(),
            claim(json!({ANNOTATION_NODEPOOL_HASH_VERSION: "v1"}), true),
        );
        assert_eq!(wake_signature(&s), with_claim, "a NodeClaim's status");
        s.apply("default".into(), pool(json!({"changed": "yes"})));
        assert_ne!(wake_signature(&s), with_claim, "a NodePool's annotations");
        let with_pool = wake_signature(&s);
        let mut respec = (*class()).clone();
        respec.spec.role = Some("other".into());
        s.apply("default".into(), Arc::new(respec));
        assert_ne!(wake_signature(&s), with_pool, "a class's spec");
    }

    #[test]
    fn the_cluster_ca_bundle_is_part_of_the_class_hash() {
        let s = snapshot(pool(json!({})), None);
        let a = stamped(&decide(&s, ""), Target::EC2NodeClass);
        let b = stamped(&decide(&s, "LS0tLS1CRUdJTg=="), Target::EC2NodeClass);
        assert_ne!(
            a[ANNOTATION_EC2NODECLASS_HASH],
            b[ANNOTATION_EC2NODECLASS_HASH]
        );
    }

    #[test]
    fn a_nodeclaim_under_an_old_hash_version_is_restamped_with_the_current_hash() {
        let s = snapshot(
            pool(json!({})),
            Some(claim(
                json!({ANNOTATION_NODEPOOL_HASH: "stale", ANNOTATION_NODEPOOL_HASH_VERSION: "v1"}),
                false,
            )),
        );
        let current = nodepool_hashes(&s.store.nodepools["default"]).hash;
        let restamp = stamped(&decide(&s, ""), Target::NodeClaim);
        assert_eq!(restamp[ANNOTATION_NODEPOOL_HASH], current);
        assert_eq!(
            restamp[ANNOTATION_NODEPOOL_HASH_VERSION],
            NODEPOOL_HASH_VERSION
        );
    }

    #[test]
    fn a_drifted_nodeclaim_gets_only_the_new_version_and_keeps_its_stale_hash() {
        // Karpenter: a NodeClaim already Drifted=True keeps drifting after a hash-version bump.
        let s = snapshot(
            pool(json!({})),
            Some(claim(
                json!({ANNOTATION_NODEPOOL_HASH: "stale", ANNOTATION_NODEPOOL_HASH_VERSION: "v1"}),
                true,
            )),
        );
        let restamp = stamped(&decide(&s, ""), Target::NodeClaim);
        assert_eq!(restamp.get(ANNOTATION_NODEPOOL_HASH), None);
        assert_eq!(
            restamp[ANNOTATION_NODEPOOL_HASH_VERSION],
            NODEPOOL_HASH_VERSION
        );
    }

    #[test]
    fn a_nodeclaim_on_the_current_version_is_never_restamped() {
        let s = snapshot(
            pool(json!({})),
            Some(claim(
                json!({ANNOTATION_NODEPOOL_HASH: "different", ANNOTATION_NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION,
                       ANNOTATION_EC2NODECLASS_HASH: "x", ANNOTATION_EC2NODECLASS_HASH_VERSION: EC2NODECLASS_HASH_VERSION}),
                false,
            )),
        );
        // A differing hash under the current version is drift, for the drift controller.
        assert!(stamped(&decide(&s, ""), Target::NodeClaim).is_empty());
    }
}
