//! Kubernetes events (events.k8s.io/v1) as Karpenter emits them, timestamped by the one clock.

use driftwood_cloud::Clock;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::{Client, Resource, ResourceExt};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Normal or Warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// Publishes events; failures are logged, never fatal.
#[derive(Clone)]
pub struct Events {
    client: Client,
    clock: Arc<dyn Clock>,
    counter: Arc<AtomicU64>,
}

/// The reporting controller name Karpenter uses.
pub const REPORTING_CONTROLLER: &str = "karpenter";

impl Events {
    pub fn new(client: Client, clock: Arc<dyn Clock>) -> Self {
        Self {
            client,
            clock,
            counter: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Records `reason` / `note` about `object`.
    pub async fn publish<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        kind_type: EventType,
        reason: &str,
        note: &str,
    ) {
        let reference = object_reference(object);
        self.publish_ref(reference, kind_type, reason, note).await;
    }

    pub async fn publish_ref(
        &self,
        regarding: ObjectReference,
        kind_type: EventType,
        reason: &str,
        note: &str,
    ) {
        let namespace = regarding
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        let now = self.clock.now();
        let sequence = self.counter.fetch_add(1, Ordering::Relaxed);
        let name = format!(
            "{}.{:x}{:04x}",
            regarding.name.as_deref().unwrap_or("object"),
            now.as_nanosecond(),
            sequence & 0xffff
        );
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(reason.to_string()),
            reason: Some(reason.to_string()),
            note: Some(note.chars().take(1024).collect()),
            type_: Some(match kind_type {
                EventType::Normal => "Normal".into(),
                EventType::Warning => "Warning".into(),
            }),
            regarding: Some(regarding),
            reporting_controller: Some(REPORTING_CONTROLLER.into()),
            reporting_instance: Some(REPORTING_CONTROLLER.into()),
            ..Default::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        if let Err(error) = api.create(&PostParams::default(), &event).await {
            tracing::debug!(%error, reason, "could not record event");
        }
    }
}

/// A reference to `object` for events.
pub fn object_reference<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).to_string()),
        kind: Some(K::kind(&()).to_string()),
        name: Some(object.name_any()),
        namespace: object.namespace(),
        uid: object.uid(),
        resource_version: object.resource_version(),
        field_path: None,
    }
}
