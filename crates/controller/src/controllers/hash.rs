//! The hash controller: stamps each NodePool with its template hash (and each EC2NodeClass
//! with its static hash, cluster CA bundle included), and re-stamps NodeClaims stamped under
//! another hash version — an upgrade, or NodeClaims adopted from Karpenter — instead of
//! drifting them (a NodeClaim already drifted gets only the new version and stays drifted).

use super::Outcome;
use crate::api::modify;
use crate::context::Context;
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

/// One pass over every NodePool, EC2NodeClass and NodeClaim.
pub async fn pass(ctx: Context) -> Outcome {
    let snapshot = ctx.state.snapshot();
    let mut pool_hashes: BTreeMap<String, TemplateHashes> = BTreeMap::new();
    for (name, pool) in &snapshot.store.nodepools {
        let hashes = nodepool_hashes(pool);
        let wanted = [
            (ANNOTATION_NODEPOOL_HASH, hashes.hash.clone()),
            (
                ANNOTATION_NODEPOOL_HASH_VERSION,
                NODEPOOL_HASH_VERSION.to_string(),
            ),
        ];
        if !annotated(pool.metadata.annotations.as_ref(), &wanted) {
            let api: Api<NodePool> = Api::all(ctx.client.clone());
            if let Err(error) = modify(&api, name, |p| {
                set_annotations(&mut p.metadata.annotations, &wanted)
            })
            .await
            {
                tracing::warn!(nodepool = %name, %error, "could not stamp nodepool hash");
            }
        }
        pool_hashes.insert(name.clone(), hashes);
    }
    let mut class_hashes: BTreeMap<String, TemplateHashes> = BTreeMap::new();
    for (name, class) in &snapshot.store.nodeclasses {
        let hashes = ec2nodeclass_hashes(class, &ctx.settings.cluster_ca_bundle);
        let wanted = [
            (ANNOTATION_EC2NODECLASS_HASH, hashes.hash.clone()),
            (
                ANNOTATION_EC2NODECLASS_HASH_VERSION,
                EC2NODECLASS_HASH_VERSION.to_string(),
            ),
            // What changed can be named by readers that do not know the cluster CA bundle.
            (
                ANNOTATION_EC2NODECLASS_FIELD_HASHES,
                hashes.fields_annotation(),
            ),
        ];
        if !annotated(class.metadata.annotations.as_ref(), &wanted) {
            let api: Api<EC2NodeClass> = Api::all(ctx.client.clone());
            if let Err(error) = modify(&api, name, |c| {
                set_annotations(&mut c.metadata.annotations, &wanted)
            })
            .await
            {
                tracing::warn!(ec2nodeclass = %name, %error, "could not stamp ec2nodeclass hash");
            }
        }
        class_hashes.insert(name.clone(), hashes);
    }
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    for (name, claim) in &snapshot.store.nodeclaims {
        let mut stamp = BTreeMap::new();
        let pool = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_NODEPOOL));
        if let Some(hashes) = pool.and_then(|p| pool_hashes.get(p)) {
            stamp.extend(nodepool_restamp(claim, hashes).unwrap_or_default());
        }
        if let Some(hashes) = class_hashes.get(&claim.spec.node_class_ref.name) {
            stamp.extend(nodeclass_restamp(claim, hashes).unwrap_or_default());
        }
        if stamp.is_empty() {
            continue;
        }
        let wanted: Vec<(&str, String)> =
            stamp.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        match modify(&api, name, |c| {
            set_annotations(&mut c.metadata.annotations, &wanted)
        })
        .await
        {
            Ok(_) => {
                tracing::info!(nodeclaim = %name, "re-stamped nodeclaim hashes (hash version changed)")
            }
            Err(error) => tracing::warn!(nodeclaim = %name, %error, "could not re-stamp nodeclaim"),
        }
    }
    Outcome::idle()
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
