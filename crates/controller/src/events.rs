//! Kubernetes events (events.k8s.io/v1) as Karpenter emits them, timestamped by the one clock,
//! with Karpenter's recorder rule: the same event about the same object is sent once per
//! window (2 minutes; 1 for NoCompatibleInstanceTypes, 5 for FailedScheduling).

use driftwood_cloud::Clock;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::{Client, Resource, ResourceExt};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

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
    recent: Arc<Mutex<Recent>>,
}

/// How long an event holds back its repeats (Karpenter's recorder: 2 minutes unless the event
/// says otherwise).
pub fn dedupe_window(reason: &str) -> jiff::SignedDuration {
    match reason {
        "NoCompatibleInstanceTypes" => jiff::SignedDuration::from_mins(1),
        "FailedScheduling" => jiff::SignedDuration::from_mins(5),
        _ => jiff::SignedDuration::from_mins(2),
    }
}

/// What makes two events the same: the reason (case folded), the object (its uid, else its
/// kind, namespace and name) and the note.
pub fn dedupe_key(reason: &str, regarding: &ObjectReference, note: &str) -> String {
    let object = match regarding.uid.as_deref().filter(|u| !u.is_empty()) {
        Some(uid) => uid.to_string(),
        None => format!(
            "{}/{}/{}",
            regarding.kind.as_deref().unwrap_or_default(),
            regarding.namespace.as_deref().unwrap_or_default(),
            regarding.name.as_deref().unwrap_or_default()
        ),
    };
    format!("{}\u{1f}{object}\u{1f}{note}", reason.to_lowercase())
}

/// The events sent lately and until when each holds back its repeats.
#[derive(Debug, Default)]
pub struct Recent {
    until: HashMap<String, jiff::Timestamp>,
    /// Expired entries are dropped when the map reaches this size.
    sweep_at: usize,
}

impl Recent {
    /// Whether an event with `key` is sent at `now` (none the same within its window); if so,
    /// it holds back its repeats until `now + window`.
    pub fn admit(
        &mut self,
        key: String,
        now: jiff::Timestamp,
        window: jiff::SignedDuration,
    ) -> bool {
        if self.until.get(&key).is_some_and(|until| *until > now) {
            return false;
        }
        if self.until.len() >= self.sweep_at {
            self.until.retain(|_, until| *until > now);
            self.sweep_at = (self.until.len() * 2).max(1024);
        }
        self.until
            .insert(key, now.saturating_add(window).unwrap_or(now));
        true
    }

    /// Lets the next event with `key` through (this one was not sent after all).
    pub fn forget(&mut self, key: &str) {
        self.until.remove(key);
    }

    /// Entries kept (expired ones go at the next sweep).
    pub fn len(&self) -> usize {
        self.until.len()
    }

    pub fn is_empty(&self) -> bool {
        self.until.is_empty()
    }
}

/// The reporting controller name Karpenter uses.
pub const REPORTING_CONTROLLER: &str = "karpenter";

impl Events {
    pub fn new(client: Client, clock: Arc<dyn Clock>) -> Self {
        Self {
            client,
            clock,
            counter: Arc::new(AtomicU64::new(0)),
            recent: Arc::default(),
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
        let admitted = self
            .recent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .admit(
                dedupe_key(reason, &regarding, note),
                now,
                dedupe_window(reason),
            );
        if !admitted {
            tracing::trace!(reason, object = ?regarding.name, "event repeated within its window; not sent");
            return;
        }
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
            let object = event.regarding.as_ref().and_then(|r| r.name.clone());
            tracing::warn!(%error, reason, ?object, "could not record event; a repeat will try again");
            // Not sent: a repeat is not held back by it.
            if let Some(regarding) = &event.regarding {
                self.recent
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .forget(&dedupe_key(reason, regarding, note));
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_700_000_000 + seconds).unwrap()
    }

    fn node(uid: &str) -> ObjectReference {
        ObjectReference {
            kind: Some("Node".into()),
            name: Some("ip-10-0-0-1".into()),
            uid: Some(uid.into()),
            ..Default::default()
        }
    }

    /// Karpenter's recorder suite ("should only create one event when many events are
    /// created quickly" and its timeout cases), re-expressed: a repeat within the window is
    /// held back, after it is sent; another object, reason or note is another event.
    #[test]
    fn the_same_event_about_the_same_object_is_sent_once_per_window() {
        let mut recent = Recent::default();
        let window = dedupe_window("DisruptionBlocked");
        assert_eq!(window, jiff::SignedDuration::from_mins(2));
        let blocked = |uid: &str, note: &str| dedupe_key("DisruptionBlocked", &node(uid), note);
        assert!(recent.admit(blocked("a", "pdb"), at(0), window));
        for s in 1..120 {
            assert!(!recent.admit(blocked("a", "pdb"), at(s), window), "{s}");
        }
        assert!(recent.admit(blocked("b", "pdb"), at(5), window));
        assert!(recent.admit(blocked("a", "do-not-disrupt"), at(5), window));
        // The reason is case folded, as Karpenter's key is.
        assert_eq!(
            dedupe_key("disruptionblocked", &node("a"), "pdb"),
            blocked("a", "pdb")
        );
        assert!(recent.admit(blocked("a", "pdb"), at(120), window));
        // A failed send lets the next one through.
        recent.forget(&blocked("a", "pdb"));
        assert!(recent.admit(blocked("a", "pdb"), at(121), window));
    }

    #[test]
    fn windows_follow_karpenters_per_event_timeouts_and_expired_entries_are_swept() {
        assert_eq!(
            dedupe_window("NoCompatibleInstanceTypes"),
            jiff::SignedDuration::from_mins(1)
        );
        assert_eq!(
            dedupe_window("FailedScheduling"),
            jiff::SignedDuration::from_mins(5)
        );
        let mut recent = Recent::default();
        let window = jiff::SignedDuration::from_mins(2);
        for i in 0..2000 {
            assert!(recent.admit(format!("k{i}"), at(i), window));
        }
        // Entries older than the window are dropped as the map grows.
        assert!(recent.len() < 1200, "{}", recent.len());
        // An object without a uid is told apart by kind, namespace and name.
        let by_name = |name: &str| ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some(name.into()),
            ..Default::default()
        };
        assert_ne!(
            dedupe_key("Nominated", &by_name("a"), "n"),
            dedupe_key("Nominated", &by_name("b"), "n")
        );
    }
}
