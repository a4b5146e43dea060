//! Small, idempotent API write helpers: modify-write as JSON patches with a resourceVersion
//! precondition — computed against the object in the watch cache, so a write costs no GET; on a
//! conflict (the cache lagged) re-read and retry — finalizers, taints, conditions.

use crate::state::{Cached, ClusterState};
use driftwood_api::condition::{clear_condition, set_condition};
use driftwood_api::{NodeClaim, NodeClaimStatus};
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// How many times a conflicting write is retried.
const CONFLICT_RETRIES: usize = 8;

/// Whether an API error is 404.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// Whether an API error is 409.
pub fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// Whether an API error is 429 (e.g. an eviction a PDB refuses for now).
pub fn is_too_many_requests(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 429)
}

/// Which part of an object a read-modify-write writes back.
#[derive(Clone, Copy)]
enum WriteTarget {
    Object,
    Status,
}

/// Lets `change` edit the object as the watch cache holds it (returning false when nothing
/// changed), and writes only what changed: a JSON patch from the cached object to the edited
/// one, with the cached resourceVersion as its precondition. When the API server refuses it
/// with 409 (the cache lagged behind a write), or the cache does not hold the object, the object
/// is read from the API server and the edit retried. Fields driftwood's types do not model — a
/// newer Kubernetes field, another controller's field, a field of an adopted Karpenter object —
/// are never in the patch, so they survive. Returns the written object, or None when it is gone
/// or unchanged.
pub async fn modify<K>(
    state: &ClusterState,
    api: &Api<K>,
    name: &str,
    change: impl Fn(&mut K) -> bool,
) -> Result<Option<K>, kube::Error>
where
    K: Cached<Stored = K> + Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    write_changes(state, api, name, change, WriteTarget::Object).await
}

/// As [`modify`], through the status subresource.
pub async fn modify_status<K>(
    state: &ClusterState,
    api: &Api<K>,
    name: &str,
    change: impl Fn(&mut K) -> bool,
) -> Result<Option<K>, kube::Error>
where
    K: Cached<Stored = K> + Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    write_changes(state, api, name, change, WriteTarget::Status).await
}

async fn write_changes<K>(
    state: &ClusterState,
    api: &Api<K>,
    name: &str,
    change: impl Fn(&mut K) -> bool,
    target: WriteTarget,
) -> Result<Option<K>, kube::Error>
where
    K: Cached<Stored = K> + Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let cached = state.read(|s| K::objects(&s.store).get(name).cloned());
    if let Some(cached) = cached {
        match patch_changes(api, name, &cached, &change, target).await {
            Err(e) if is_conflict(&e) => {}
            other => return other,
        }
    }
    read_modify_write(api, name, change, target).await
}

/// Patches `name` from `read` to `read` edited by `change` (None: unchanged).
async fn patch_changes<K>(
    api: &Api<K>,
    name: &str,
    read: &K,
    change: &impl Fn(&mut K) -> bool,
    target: WriteTarget,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let mut object = read.clone();
    if !change(&mut object) {
        return Ok(None);
    }
    let Some(patch) = precondition_patch(read, &object) else {
        return Ok(None);
    };
    let params = PatchParams::default();
    let written = match target {
        WriteTarget::Object => api.patch(name, &params, &Patch::Json::<()>(patch)).await,
        WriteTarget::Status => {
            api.patch_status(name, &params, &Patch::Json::<()>(patch))
                .await
        }
    };
    match written {
        Ok(written) => Ok(Some(written)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads the object from the API server and patches it, retrying conflicts from a fresh read.
async fn read_modify_write<K>(
    api: &Api<K>,
    name: &str,
    change: impl Fn(&mut K) -> bool,
    target: WriteTarget,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    for _ in 0..CONFLICT_RETRIES {
        let read = match api.get(name).await {
            Ok(o) => o,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        match patch_changes(api, name, &read, &change, target).await {
            Err(e) if is_conflict(&e) => continue,
            other => return other,
        }
    }
    Err(kube::Error::Api(conflict_status(name)))
}

/// The JSON patch from `read` to `edited`, led by a replace of metadata.resourceVersion with
/// the version read (the API server refuses the patch with 409 when the object moved on).
/// None when nothing changed.
pub(crate) fn precondition_patch<K: Resource + Serialize>(
    read: &K,
    edited: &K,
) -> Option<json_patch::Patch> {
    let before = serde_json::to_value(read).ok()?;
    let after = serde_json::to_value(edited).ok()?;
    let changes = json_patch::diff(&before, &after);
    if changes.0.is_empty() {
        return None;
    }
    let mut ops = Vec::with_capacity(changes.0.len() + 1);
    if let Some(version) = read.meta().resource_version.clone() {
        ops.push(json_patch::PatchOperation::Replace(
            json_patch::ReplaceOperation {
                path: json_patch::jsonptr::PointerBuf::from_tokens(["metadata", "resourceVersion"]),
                value: serde_json::Value::String(version),
            },
        ));
    }
    ops.extend(changes.0);
    Some(json_patch::Patch(ops))
}

fn conflict_status(name: &str) -> Box<kube::core::Status> {
    Box::new(
        kube::core::Status::failure(
            &format!("{name}: still conflicting after {CONFLICT_RETRIES} retries"),
            "Conflict",
        )
        .with_code(409),
    )
}

/// Deletes an object; gone already is success.
pub async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

pub fn nodeclaims(client: &Client) -> Api<NodeClaim> {
    Api::all(client.clone())
}

pub fn nodes(client: &Client) -> Api<Node> {
    Api::all(client.clone())
}

/// Adds `finalizer` to the object's metadata; returns whether it changed.
pub fn add_finalizer<K: Resource>(object: &mut K, finalizer: &str) -> bool {
    let finalizers = object.meta_mut().finalizers.get_or_insert_with(Vec::new);
    if finalizers.iter().any(|f| f == finalizer) {
        return false;
    }
    finalizers.push(finalizer.to_string());
    true
}

/// Removes `finalizer`; returns whether it changed.
pub fn remove_finalizer<K: Resource>(object: &mut K, finalizer: &str) -> bool {
    let Some(finalizers) = object.meta_mut().finalizers.as_mut() else {
        return false;
    };
    let before = finalizers.len();
    finalizers.retain(|f| f != finalizer);
    before != finalizers.len()
}

/// Adds a taint (by key and effect) to a node; returns whether it changed.
pub fn add_taint(node: &mut Node, taint: &Taint) -> bool {
    let taints = node
        .spec
        .get_or_insert_with(Default::default)
        .taints
        .get_or_insert_with(Vec::new);
    if taints
        .iter()
        .any(|t| t.key == taint.key && t.effect == taint.effect)
    {
        return false;
    }
    taints.push(taint.clone());
    true
}

/// Removes every taint with `key`; returns whether it changed.
pub fn remove_taint(node: &mut Node, key: &str) -> bool {
    let Some(taints) = node.spec.as_mut().and_then(|s| s.taints.as_mut()) else {
        return false;
    };
    let before = taints.len();
    taints.retain(|t| t.key != key);
    before != taints.len()
}

/// Sets a NodeClaim condition in memory; returns whether it changed.
pub fn set_claim_condition(
    claim: &mut NodeClaim,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> bool {
    let generation = claim.metadata.generation;
    let status_block = claim.status.get_or_insert_with(NodeClaimStatus::default);
    set_condition(
        &mut status_block.conditions,
        type_,
        status,
        reason,
        message,
        now,
        generation,
    )
}

/// Clears a NodeClaim condition in memory; returns whether it changed.
pub fn clear_claim_condition(claim: &mut NodeClaim, type_: &str) -> bool {
    claim
        .status
        .as_mut()
        .is_some_and(|s| clear_condition(&mut s.conditions, type_))
}

/// The disrupted taint.
pub fn disrupted_taint() -> Taint {
    Taint {
        key: driftwood_api::wellknown::TAINT_DISRUPTED_KEY.to_string(),
        effect: driftwood_api::wellknown::TAINT_EFFECT_NO_SCHEDULE.to_string(),
        value: None,
        time_added: None,
    }
}
