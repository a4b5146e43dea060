//! Watches: which stored events a watcher sees (with selector transitions), and the task that
//! streams them as newline-delimited JSON, with bookmarks, timeouts and 410 on expiry.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::error::ApiError;
use super::resources::{ResourceInfo, ResourceKey};
use super::selectors::{FieldSelector, LabelSelector};
use super::service::Shared;
use super::store::{EventType, StoredEvent};
use super::table;
use crate::clock::SharedClock;

/// Which objects a watch follows.
#[derive(Debug, Clone)]
pub struct WatchFilter {
    /// Resource watched.
    pub resource: ResourceKey,
    /// Its description.
    pub info: ResourceInfo,
    /// Version the client asked for (apiVersion of emitted custom objects).
    pub version: String,
    /// Namespace, or all.
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
}

impl WatchFilter {
    /// Does the object pass namespace and selectors?
    pub fn matches(&self, object: &Value) -> bool {
        let namespace_ok = self.namespace.as_deref().is_none_or(|wanted| {
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default()
                == wanted
        });
        namespace_ok && self.labels.matches_object(object) && self.fields.matches(object)
    }

    /// The event type this watcher sees for a stored event, if any: an object that starts
    /// matching appears as ADDED, one that stops matching as DELETED.
    pub fn translate(&self, event: &StoredEvent) -> Option<&'static str> {
        if event.resource != self.resource {
            return None;
        }
        let now = self.matches(&event.object);
        match event.event_type {
            EventType::Added | EventType::Deleted => now.then_some(event.event_type.as_str()),
            EventType::Modified => {
                let before = event.previous.as_deref().is_some_and(|p| self.matches(p));
                match (before, now) {
                    (true, true) => Some("MODIFIED"),
                    (false, true) => Some("ADDED"),
                    (true, false) => Some("DELETED"),
                    (false, false) => None,
                }
            }
        }
    }

    fn render(&self, object: &Value) -> Value {
        let mut object = object.clone();
        if self.info.custom
            && let Some(map) = object.as_object_mut()
        {
            map.insert(
                "apiVersion".into(),
                json!(self.info.api_version(&self.version)),
            );
        }
        object
    }
}

/// How watched objects are rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchOutput {
    /// The full object.
    Object,
    /// A one-row meta.k8s.io Table per event (`kubectl get -w`).
    Table,
    /// PartialObjectMetadata (`watch_metadata`).
    Metadata,
}

/// Everything needed to stream one watch.
#[derive(Debug)]
pub struct WatchPlan {
    /// Rendering of each event's object.
    pub output: WatchOutput,
    /// Clock for table ages.
    pub clock: SharedClock,
    /// What to follow.
    pub filter: WatchFilter,
    /// Synthetic ADDED events sent first (no resourceVersion, "0", or sendInitialEvents).
    pub initial: Vec<Arc<Value>>,
    /// Stream log events with resourceVersion greater than this.
    pub start_after: u64,
    /// Set when the requested version is too old: send this ERROR and stop.
    pub expired: Option<ApiError>,
    /// Send periodic BOOKMARK events.
    pub bookmarks: bool,
    /// Send the `k8s.io/initial-events-end` bookmark after the initial events.
    pub initial_end_bookmark: bool,
    /// Close the watch after this long.
    pub timeout: Duration,
    /// Bookmark period.
    pub bookmark_interval: Duration,
}

fn line(event_type: &str, object: &Value) -> Vec<u8> {
    let mut bytes =
        serde_json::to_vec(&json!({"type": event_type, "object": object})).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

fn bookmark(filter: &WatchFilter, resource_version: u64, initial_end: bool) -> Vec<u8> {
    let mut metadata = json!({"resourceVersion": resource_version.to_string()});
    if initial_end && let Some(map) = metadata.as_object_mut() {
        map.insert(
            "annotations".into(),
            json!({"k8s.io/initial-events-end": "true"}),
        );
    }
    line(
        "BOOKMARK",
        &json!({"kind": filter.info.kind, "apiVersion": filter.info.api_version(&filter.version), "metadata": metadata}),
    )
}

/// Now plus `after`, saturating instead of overflowing.
fn far_future_safe(after: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(after)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}

/// How long before a watch's deadline its last bookmark goes out (kube-apiserver's cacher:
/// about 2 s), so a client re-watching after the timeout resumes from a version the history
/// still holds rather than the last one it saw of its kind (at 2,000 nodes, compacted within a
/// minute: every watcher relisted at each timeout).
const LAST_BOOKMARK_BEFORE_DEADLINE: Duration = Duration::from_secs(2);

/// When the next bookmark goes out: `interval` from now, or shortly before `deadline` if that
/// comes first (once: after it, the next falls past the deadline).
fn next_bookmark_at(interval: Duration, deadline: tokio::time::Instant) -> tokio::time::Instant {
    let regular = far_future_safe(interval);
    match deadline.checked_sub(LAST_BOOKMARK_BEFORE_DEADLINE) {
        Some(last) if last > tokio::time::Instant::now() && last < regular => last,
        _ => regular,
    }
}

/// Flush threshold for batching events into one body chunk.
const CHUNK_BYTES: usize = 256 * 1024;

async fn flush(tx: &mpsc::Sender<Bytes>, buffer: &mut Vec<u8>) -> bool {
    if buffer.is_empty() {
        return true;
    }
    tx.send(Bytes::from(std::mem::take(buffer))).await.is_ok()
}

/// Renders event objects in the requested output, tracking whether the table header was sent.
struct Renderer<'a> {
    plan: &'a WatchPlan,
    header_sent: bool,
}

impl Renderer<'_> {
    /// Whether the stored encoding can be sent as is (full objects at their stored version).
    fn can_share(&self, object: &Value) -> bool {
        let filter = &self.plan.filter;
        self.plan.output == WatchOutput::Object
            && (!filter.info.custom
                || object.get("apiVersion").and_then(Value::as_str)
                    == Some(filter.info.api_version(&filter.version).as_str()))
    }

    fn render(&mut self, object: &Value, resource_version: u64) -> Value {
        let filter = &self.plan.filter;
        let full = filter.render(object);
        match self.plan.output {
            WatchOutput::Object => full,
            WatchOutput::Metadata => table::partial_metadata(&full),
            WatchOutput::Table => {
                let mut rendered = table::render(
                    &filter.info,
                    &filter.version,
                    &[full],
                    &resource_version.to_string(),
                    None,
                    self.plan.clock.now(),
                );
                if self.header_sent
                    && let Some(map) = rendered.as_object_mut()
                {
                    map.insert("columnDefinitions".into(), json!([]));
                }
                self.header_sent = true;
                rendered
            }
        }
    }
}

/// Stream the watch into `tx` until timeout, expiry, the client going away, or a disconnect.
pub async fn run(
    plan: WatchPlan,
    shared: Arc<Shared>,
    mut changes: watch::Receiver<u64>,
    mut disconnects: watch::Receiver<super::service::Disconnect>,
    tx: mpsc::Sender<Bytes>,
) {
    let filter = &plan.filter;
    let mut renderer = Renderer {
        plan: &plan,
        header_sent: false,
    };
    let mut buffer = Vec::new();
    if let Some(error) = &plan.expired {
        buffer.extend(line("ERROR", &error.to_status()));
        flush(&tx, &mut buffer).await;
        return;
    }
    let deadline = far_future_safe(plan.timeout);
    for object in &plan.initial {
        if renderer.can_share(object) {
            // Serialized straight into the stream: no copy of the object per watcher.
            buffer.extend_from_slice(b"{\"type\":\"ADDED\",\"object\":");
            if serde_json::to_writer(&mut buffer, &**object).is_err() {
                buffer.extend_from_slice(b"{}");
            }
            buffer.extend_from_slice(b"}\n");
        } else {
            buffer.extend(line("ADDED", &renderer.render(object, plan.start_after)));
        }
        if buffer.len() > CHUNK_BYTES && !flush(&tx, &mut buffer).await {
            return;
        }
    }
    if plan.initial_end_bookmark {
        buffer.extend(bookmark(filter, plan.start_after, true));
    }
    if !flush(&tx, &mut buffer).await {
        return;
    }
    let mut cursor = plan.start_after;
    let interval = plan.bookmark_interval.max(Duration::from_millis(10));
    let mut next_bookmark = next_bookmark_at(interval, deadline);
    let mut bookmark_due = false;
    loop {
        changes.borrow_and_update();
        let events = shared.lock().store().events_after(cursor);
        let Some(events) = events else {
            let oldest = shared.lock().store().oldest_watchable();
            let error = ApiError::expired(format!("too old resource version: {cursor} ({oldest})"));
            buffer.extend(line("ERROR", &error.to_status()));
            flush(&tx, &mut buffer).await;
            return;
        };
        for event in &events {
            cursor = event.resource_version;
            if let Some(event_type) = filter.translate(event) {
                if renderer.can_share(&event.object) {
                    buffer.extend_from_slice(b"{\"type\":\"");
                    buffer.extend_from_slice(event_type.as_bytes());
                    buffer.extend_from_slice(b"\",\"object\":");
                    buffer.extend_from_slice(event.encoded_object());
                    buffer.extend_from_slice(b"}\n");
                } else {
                    buffer.extend(line(
                        event_type,
                        &renderer.render(&event.object, event.resource_version),
                    ));
                }
                if buffer.len() > CHUNK_BYTES && !flush(&tx, &mut buffer).await {
                    return;
                }
            }
        }
        // A bookmark names the newest version read: the events before it go out first.
        if std::mem::take(&mut bookmark_due) {
            buffer.extend(bookmark(filter, cursor, false));
        }
        if !flush(&tx, &mut buffer).await {
            return;
        }
        if !events.is_empty() {
            continue;
        }
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep_until(next_bookmark), if plan.bookmarks => {
                next_bookmark = next_bookmark_at(interval, deadline);
                bookmark_due = true;
            }
            () = tokio::time::sleep_until(deadline) => return,
            _ = disconnects.changed() => {
                if disconnects.borrow().expire {
                    let error = ApiError::expired(format!(
                        "too old resource version: {cursor} (the watch cache was reset)"
                    ));
                    buffer.extend(line("ERROR", &error.to_status()));
                    flush(&tx, &mut buffer).await;
                }
                return;
            }
            () = tx.closed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::resources::Registry;

    fn filter(selector: &str) -> WatchFilter {
        let info = Registry::builtin()
            .lookup("", "v1", "pods")
            .unwrap()
            .clone();
        WatchFilter {
            resource: info.key(),
            info,
            version: "v1".into(),
            namespace: Some("default".into()),
            labels: LabelSelector::parse(selector).unwrap(),
            fields: FieldSelector::default(),
        }
    }

    fn event(event_type: EventType, before: Option<&str>, after: &str) -> StoredEvent {
        let pod = |app: &str| {
            Arc::new(
                json!({"metadata": {"namespace": "default", "name": "p", "labels": {"app": app}}}),
            )
        };
        StoredEvent {
            resource_version: 1,
            resource: ResourceKey::new("", "pods"),
            event_type,
            object: pod(after),
            previous: before.map(pod),
            encoded: std::sync::OnceLock::new(),
        }
    }

    #[test]
    fn selector_transitions_become_added_and_deleted() {
        let watch = filter("app=web");
        assert_eq!(
            watch.translate(&event(EventType::Modified, Some("db"), "web")),
            Some("ADDED")
        );
        assert_eq!(
            watch.translate(&event(EventType::Modified, Some("web"), "db")),
            Some("DELETED")
        );
        assert_eq!(
            watch.translate(&event(EventType::Modified, Some("web"), "web")),
            Some("MODIFIED")
        );
        assert_eq!(
            watch.translate(&event(EventType::Modified, Some("db"), "db")),
            None
        );
        assert_eq!(watch.translate(&event(EventType::Added, None, "db")), None);
    }
}
