//! One watcher per kind, untyped on the wire and decoded per object: a bad object is logged
//! once (per resourceVersion) and skipped, and the watch goes on.

use super::{Cached, ClusterState, Kind, Objects, object_key};
use driftwood_api::{EC2NodeClass, NodeClaim, NodePool};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// Starts a watcher for every kind; they run until the returned tasks are aborted.
pub fn spawn_watchers(client: &Client, state: &ClusterState) -> Vec<JoinHandle<()>> {
    vec![
        spawn_kind::<Node>(client, state),
        spawn_kind::<Pod>(client, state),
        spawn_kind::<PodDisruptionBudget>(client, state),
        spawn_kind::<DaemonSet>(client, state),
        spawn_kind::<NodePool>(client, state),
        spawn_kind::<NodeClaim>(client, state),
        spawn_kind::<EC2NodeClass>(client, state),
        spawn_kind::<VolumeAttachment>(client, state),
        spawn_kind::<PersistentVolumeClaim>(client, state),
    ]
}

fn spawn_kind<K>(client: &Client, state: &ClusterState) -> JoinHandle<()>
where
    K: Cached + Resource<DynamicType = ()> + DeserializeOwned,
{
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let state = state.clone();
    tokio::spawn(async move {
        let mut decoder = Decoder::<K>::new(K::KIND);
        let mut stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut buffer: Option<Objects<K>> = None;
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Init) => buffer = Some(Objects::new()),
                Ok(Event::InitApply(object)) => {
                    if let (Some(buffer), Some((key, typed))) =
                        (buffer.as_mut(), decoder.decode(&object))
                    {
                        buffer.insert(key, Arc::new(typed));
                    }
                }
                Ok(Event::InitDone) => {
                    state.reset(buffer.take().unwrap_or_default());
                    state.mark_synced(K::KIND);
                }
                Ok(Event::Apply(object)) => match decoder.decode(&object) {
                    Some((key, typed)) => state.apply(key, Arc::new(typed)),
                    // An object that no longer decodes is unknown to us now.
                    None => state.delete::<K>(&key_of(&object)),
                },
                Ok(Event::Delete(object)) => state.delete::<K>(&key_of(&object)),
                Err(error) => tracing::warn!(kind = ?K::KIND, %error, "watch error; retrying"),
            }
        }
    })
}

fn key_of(object: &DynamicObject) -> String {
    object_key(
        object.metadata.namespace.as_deref(),
        object.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// Decodes untyped objects, remembering which bad versions were already reported.
struct Decoder<K> {
    kind: Kind,
    reported: BTreeSet<(String, String)>,
    _kind: std::marker::PhantomData<fn() -> K>,
}

impl<K: DeserializeOwned> Decoder<K> {
    fn new(kind: Kind) -> Self {
        Self {
            kind,
            reported: BTreeSet::new(),
            _kind: std::marker::PhantomData,
        }
    }

    /// The typed object, trimmed to what the cache keeps ([`super::trim`]): never its
    /// managedFields, and of a Pod only what controllers read (the cache transform
    /// controller-runtime users apply for the same reason).
    fn decode(&mut self, object: &DynamicObject) -> Option<(String, K)> {
        let key = key_of(object);
        let is_pod = matches!(self.kind, Kind::Pod);
        let decoded = serde_json::to_value(object).and_then(|mut value| {
            super::trim::trim(&mut value, is_pod);
            serde_json::from_value::<K>(value)
        });
        match decoded {
            Ok(typed) => Some((key, typed)),
            Err(error) => {
                let version = object.metadata.resource_version.clone().unwrap_or_default();
                if self.reported.insert((key.clone(), version.clone())) {
                    tracing::error!(kind = ?self.kind, object = %key, resource_version = %version, %error,
                        "skipping object that does not decode");
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_objects_are_reported_once_per_version_and_skipped() {
        let mut decoder = Decoder::<NodePool>::new(Kind::NodePool);
        let bad: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "broken", "resourceVersion": "7"},
            "spec": {"template": {"spec": {"nodeClassRef": "not an object"}}}
        }))
        .unwrap();
        assert!(decoder.decode(&bad).is_none());
        assert!(decoder.decode(&bad).is_none());
        assert_eq!(decoder.reported.len(), 1);
        let good: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "ok", "resourceVersion": "8"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []}}}
        }))
        .unwrap();
        let (key, pool) = decoder.decode(&good).unwrap();
        assert_eq!(key, "ok");
        assert_eq!(pool.spec.disruption.budgets[0].nodes, "10%");
    }

    #[test]
    fn managed_fields_are_not_kept_in_the_cache() {
        let mut decoder = Decoder::<Pod>::new(Kind::Pod);
        let pod: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"},
                         "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                                            "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]},
            "spec": {"containers": [{"name": "c"}]}
        }))
        .unwrap();
        let (_, typed) = decoder.decode(&pod).unwrap();
        assert!(typed.metadata.managed_fields.is_none());
        assert_eq!(typed.metadata.labels.unwrap()["app"], "web");
    }
}
