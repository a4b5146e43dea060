//! The in-memory object store: objects by (resource, namespace, name), one global
//! monotonically increasing resourceVersion, and a bounded event log that watches replay.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::resources::ResourceKey;

/// (namespace, name); the namespace is "" for cluster-scoped objects.
pub type ObjectName = (String, String);

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

impl EventType {
    /// The watch event type string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One entry of the event log.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    /// The resourceVersion this event produced.
    pub resource_version: u64,
    /// Which resource.
    pub resource: ResourceKey,
    /// What happened.
    pub event_type: EventType,
    /// The object after the change (the last state for deletions).
    pub object: Arc<Value>,
    /// The object before the change (modifications only).
    pub previous: Option<Arc<Value>>,
    /// `object` serialized once, shared by every watcher that sends it unchanged.
    pub encoded: OnceLock<bytes::Bytes>,
}

impl StoredEvent {
    /// The JSON encoding of `object`, computed on first use.
    pub fn encoded_object(&self) -> &bytes::Bytes {
        self.encoded.get_or_init(|| {
            bytes::Bytes::from(serde_json::to_vec(&*self.object).unwrap_or_default())
        })
    }
}

/// Objects plus the event log.
#[derive(Debug)]
pub struct Store {
    objects: BTreeMap<ResourceKey, BTreeMap<ObjectName, Arc<Value>>>,
    uids: HashMap<String, (ResourceKey, ObjectName)>,
    dependents: HashMap<String, BTreeSet<(ResourceKey, ObjectName)>>,
    resource_version: u64,
    log: VecDeque<Arc<StoredEvent>>,
    log_capacity: usize,
    compacted_through: u64,
}

/// The uid of an object ("" when missing).
pub fn uid_of(object: &Value) -> &str {
    object
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

impl Store {
    /// An empty store whose event log keeps at most `log_capacity` events.
    pub fn new(log_capacity: usize) -> Self {
        Self {
            objects: BTreeMap::new(),
            uids: HashMap::new(),
            dependents: HashMap::new(),
            resource_version: 0,
            log: VecDeque::new(),
            log_capacity: log_capacity.max(1),
            compacted_through: 0,
        }
    }

    /// The latest resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    /// Watches may start from any version >= this one.
    pub fn oldest_watchable(&self) -> u64 {
        self.compacted_through
    }

    /// Number of events currently retained.
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    /// One object.
    pub fn get(&self, resource: &ResourceKey, namespace: &str, name: &str) -> Option<&Arc<Value>> {
        self.objects
            .get(resource)
            .and_then(|objects| objects.get(&(namespace.to_string(), name.to_string())))
    }

    /// All objects of a resource (optionally one namespace), sorted by (namespace, name).
    pub fn list<'a>(
        &'a self,
        resource: &ResourceKey,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a ObjectName, &'a Arc<Value>)> + 'a {
        self.objects
            .get(resource)
            .into_iter()
            .flat_map(|objects| objects.iter())
            .filter(move |((ns, _), _)| namespace.is_none_or(|wanted| wanted == ns))
    }

    /// Every resource that has stored objects.
    pub fn resources(&self) -> Vec<ResourceKey> {
        self.objects.keys().cloned().collect()
    }

    /// Objects whose ownerReferences name `owner_uid`, sorted.
    pub fn dependents_of(&self, owner_uid: &str) -> Vec<(ResourceKey, ObjectName)> {
        self.dependents
            .get(owner_uid)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn unindex_owners(&mut self, resource: &ResourceKey, name: &ObjectName, object: &Value) {
        for owner in owner_uids(object) {
            if let Some(set) = self.dependents.get_mut(&owner) {
                set.remove(&(resource.clone(), name.clone()));
                if set.is_empty() {
                    self.dependents.remove(&owner);
                }
            }
        }
    }

    fn index_owners(&mut self, resource: &ResourceKey, name: &ObjectName, object: &Value) {
        for owner in owner_uids(object) {
            self.dependents
                .entry(owner)
                .or_default()
                .insert((resource.clone(), name.clone()));
        }
    }

    /// Where the object with this uid lives.
    pub fn locate_uid(&self, uid: &str) -> Option<&(ResourceKey, ObjectName)> {
        self.uids.get(uid)
    }

    fn next_version(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    fn record(&mut self, event: StoredEvent) {
        if self.log.len() >= self.log_capacity
            && let Some(evicted) = self.log.pop_front()
        {
            self.compacted_through = evicted.resource_version;
        }
        self.log.push_back(Arc::new(event));
    }

    /// Store `object` (new or replacing), stamping a fresh resourceVersion. Returns it.
    pub fn put(&mut self, resource: &ResourceKey, mut object: Value) -> Arc<Value> {
        let version = self.next_version();
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("resourceVersion".into(), Value::String(version.to_string()));
        }
        let name = name_of(&object);
        let uid = uid_of(&object).to_string();
        let object = Arc::new(object);
        let previous = self
            .objects
            .entry(resource.clone())
            .or_default()
            .insert(name.clone(), Arc::clone(&object));
        if let Some(previous) = &previous {
            self.unindex_owners(resource, &name, previous);
        }
        self.index_owners(resource, &name, &object);
        if !uid.is_empty() {
            self.uids.insert(uid, (resource.clone(), name));
        }
        let event_type = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(StoredEvent {
            resource_version: version,
            resource: resource.clone(),
            event_type,
            object: Arc::clone(&object),
            previous,
            encoded: OnceLock::new(),
        });
        object
    }

    /// Remove an object; the DELETED event carries a fresh resourceVersion.
    pub fn remove(
        &mut self,
        resource: &ResourceKey,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<Value>> {
        let key = (namespace.to_string(), name.to_string());
        let removed = self.objects.get_mut(resource)?.remove(&key)?;
        self.uids.remove(uid_of(&removed));
        self.unindex_owners(resource, &key, &removed);
        let version = self.next_version();
        let mut last = (*removed).clone();
        if let Some(metadata) = last.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("resourceVersion".into(), Value::String(version.to_string()));
        }
        let last = Arc::new(last);
        self.record(StoredEvent {
            resource_version: version,
            resource: resource.clone(),
            event_type: EventType::Deleted,
            object: Arc::clone(&last),
            previous: None,
            encoded: OnceLock::new(),
        });
        Some(last)
    }

    /// Events with resourceVersion > `after`, or `None` if some of them were compacted away.
    pub fn events_after(&self, after: u64) -> Option<Vec<Arc<StoredEvent>>> {
        if after < self.compacted_through {
            return None;
        }
        let start = self
            .log
            .partition_point(|event| event.resource_version <= after);
        Some(self.log.range(start..).cloned().collect())
    }
}

/// The uids named in an object's `metadata.ownerReferences`.
pub fn owner_uids(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// (namespace, name) of an object.
pub fn name_of(object: &Value) -> ObjectName {
    let field = |f: &str| {
        object
            .pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (field("namespace"), field("name"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")}})
    }

    #[test]
    fn versions_increase_and_events_are_logged_in_order() {
        let pods = ResourceKey::new("", "pods");
        let mut store = Store::new(100);
        store.put(&pods, pod("a"));
        store.put(&pods, pod("b"));
        store.put(&pods, pod("a"));
        store.remove(&pods, "default", "b");
        let events = store.events_after(1).unwrap();
        let summary: Vec<(u64, EventType)> = events
            .iter()
            .map(|e| (e.resource_version, e.event_type))
            .collect();
        assert_eq!(
            summary,
            vec![
                (2, EventType::Added),
                (3, EventType::Modified),
                (4, EventType::Deleted)
            ]
        );
        assert_eq!(
            store.get(&pods, "default", "a").unwrap()["metadata"]["resourceVersion"],
            "3"
        );
        assert!(store.locate_uid("uid-b").is_none());
    }

    #[test]
    fn owner_index_follows_writes_and_removals() {
        let pods = ResourceKey::new("", "pods");
        let mut store = Store::new(100);
        let mut child = pod("child");
        child["metadata"]["ownerReferences"] = json!([{"uid": "owner-1"}]);
        store.put(&pods, child.clone());
        let name = ("default".to_string(), "child".to_string());
        assert_eq!(
            store.dependents_of("owner-1"),
            vec![(pods.clone(), name.clone())]
        );
        child["metadata"]["ownerReferences"] = json!([{"uid": "owner-2"}]);
        store.put(&pods, child);
        assert!(store.dependents_of("owner-1").is_empty());
        assert_eq!(store.dependents_of("owner-2").len(), 1);
        store.remove(&pods, "default", "child");
        assert!(store.dependents_of("owner-2").is_empty());
    }

    #[test]
    fn event_log_is_bounded_and_old_versions_expire() {
        let pods = ResourceKey::new("", "pods");
        let mut store = Store::new(10);
        for i in 0..25 {
            store.put(&pods, pod(&format!("p{i}")));
        }
        assert_eq!(store.log_len(), 10);
        assert!(
            store.events_after(5).is_none(),
            "compacted versions must expire"
        );
        assert_eq!(store.events_after(15).unwrap().len(), 10);
        assert_eq!(store.events_after(25).unwrap().len(), 0);
    }
}
