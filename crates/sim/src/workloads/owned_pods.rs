//! Pods indexed by their controlling owner's uid, fed by one watch, with expectations: a
//! controller that created or deleted pods does not plan again for that owner until the index
//! has seen those writes (kube-controller-manager's ReplicaSet controller works the same way).
//! A reconcile reads its pods here instead of listing every pod of the selector per event.
//!
//! The same watch triggers the owning ReplicaSets, each after the event is filed: a ReplicaSet
//! reconciled for a pod's change reads that change here. (Triggered by a watch of its own, the
//! reconcile could run before this index had the event, write a status from the older view —
//! one replica short of ready — and wait for a change that never comes.)

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::task::JoinHandle;

/// How long unmet expectations hold an owner back before it plans from what it sees anyway
/// (a write whose event never arrives must not block the owner for ever).
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(300);

/// The writes an owner is waiting to see.
#[derive(Debug)]
struct Expectation {
    /// Names of pods created and not yet seen.
    creates: BTreeSet<String>,
    /// Names of pods deleted and not yet seen gone or terminating.
    deletes: BTreeSet<String>,
    /// When the writes were made.
    since: tokio::time::Instant,
}

/// A pod's controlling owner: its uid (what pods are filed under) and, when it is a
/// ReplicaSet, the reference its reconcile is triggered by.
#[derive(Debug, Clone)]
struct Owner {
    uid: String,
    replica_set: Option<ObjectRef<ReplicaSet>>,
}

#[derive(Debug, Default)]
struct Index {
    /// Owner uid → pod name → pod.
    by_owner: HashMap<String, BTreeMap<String, Arc<Pod>>>,
    /// `namespace/name` → the owner it is filed under.
    owner_of: HashMap<String, Owner>,
    expectations: HashMap<String, Expectation>,
    synced: bool,
}

fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

fn controller_of(pod: &Pod) -> Option<Owner> {
    let reference = pod
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true))?;
    let replica_set = (reference.kind == "ReplicaSet" && reference.api_version == "apps/v1")
        .then(|| ObjectRef::new(&reference.name).within(&pod.namespace().unwrap_or_default()));
    Some(Owner {
        uid: reference.uid.clone(),
        replica_set,
    })
}

/// The ReplicaSets whose pods an event (or a relist) changed.
type Touched = HashSet<ObjectRef<ReplicaSet>>;

fn touch(touched: &mut Touched, owner: &Owner) {
    if let Some(rs) = &owner.replica_set {
        touched.insert(rs.clone());
    }
}

impl Index {
    fn forget(&mut self, key: &str, name: &str, touched: &mut Touched) {
        if let Some(owner) = self.owner_of.remove(key) {
            if let Some(pods) = self.by_owner.get_mut(&owner.uid) {
                pods.remove(name);
                if pods.is_empty() {
                    self.by_owner.remove(&owner.uid);
                }
            }
            if let Some(e) = self.expectations.get_mut(&owner.uid) {
                e.deletes.remove(name);
            }
            touch(touched, &owner);
        }
    }

    fn apply(&mut self, pod: Pod, touched: &mut Touched) {
        let key = key(&pod);
        let name = pod.name_any();
        self.forget(&key, &name, touched);
        let Some(owner) = controller_of(&pod) else {
            return;
        };
        if let Some(e) = self.expectations.get_mut(&owner.uid) {
            e.creates.remove(&name);
            if pod.metadata.deletion_timestamp.is_some() {
                e.deletes.remove(&name);
            }
        }
        touch(touched, &owner);
        self.by_owner
            .entry(owner.uid.clone())
            .or_default()
            .insert(name, Arc::new(pod));
        self.owner_of.insert(key, owner);
    }

    fn delete(&mut self, pod: &Pod, touched: &mut Touched) {
        self.forget(&key(pod), &pod.name_any(), touched);
    }
}

/// What is told of each ReplicaSet an event touched, once the event is filed.
pub type TriggerSink = Arc<dyn Fn(ObjectRef<ReplicaSet>) + Send + Sync>;

/// The shared index. Cheap to clone.
#[derive(Clone, Default)]
pub struct OwnedPods {
    index: Arc<Mutex<Index>>,
    /// Told of the ReplicaSets an event touched, once it is filed (none in tests that feed the
    /// index by hand).
    triggers: Option<TriggerSink>,
}

impl std::fmt::Debug for OwnedPods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedPods")
            .field("index", &self.index)
            .field("triggers", &self.triggers.is_some())
            .finish()
    }
}

impl OwnedPods {
    /// An index that sends the ReplicaSets each event touches, after filing it, to the
    /// returned receiver (the ReplicaSet controller's trigger).
    pub fn triggers() -> (Self, UnboundedReceiver<ObjectRef<ReplicaSet>>) {
        let (sender, receiver) = unbounded_channel::<ObjectRef<ReplicaSet>>();
        let sink: TriggerSink = Arc::new(move |rs| {
            if sender.send(rs).is_err() {
                // The receiver is gone only when the controller stopped: nothing to wake.
                tracing::debug!("owned pods: the ReplicaSet controller stopped; trigger dropped");
            }
        });
        (Self::with_sink(sink), receiver)
    }

    /// An index that tells `sink` of the ReplicaSets each event touches, after filing it.
    pub fn with_sink(sink: TriggerSink) -> Self {
        Self {
            index: Arc::default(),
            triggers: Some(sink),
        }
    }

    /// Starts the watch that feeds the index; abort the handle to stop it. The receiver gets
    /// the ReplicaSets whose pods changed, each after the change is in the index.
    pub fn spawn(
        client: Client,
    ) -> (
        Self,
        UnboundedReceiver<ObjectRef<ReplicaSet>>,
        JoinHandle<()>,
    ) {
        let (this, receiver) = Self::triggers();
        let feeder = this.clone();
        let task = tokio::spawn(async move {
            let api: Api<Pod> = Api::all(client);
            let mut stream = watcher::watcher(api, watcher::Config::default())
                .modify(|pod: &mut Pod| pod.metadata.managed_fields = None)
                .default_backoff()
                .boxed();
            let mut relist: Option<Vec<Pod>> = None;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(Event::Init) => relist = Some(Vec::new()),
                    Ok(Event::InitApply(pod)) => relist.get_or_insert_with(Vec::new).push(pod),
                    Ok(Event::InitDone) => feeder.reset(relist.take().unwrap_or_default()),
                    Ok(Event::Apply(pod)) => feeder.apply(pod),
                    Ok(Event::Delete(pod)) => feeder.delete(&pod),
                    Err(error) => tracing::debug!(%error, "owned pods: watch failed; retrying"),
                }
            }
        });
        (this, receiver, task)
    }

    fn with<T>(&self, f: impl FnOnce(&mut Index) -> T) -> T {
        f(&mut self.index.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Tells of the touched ReplicaSets, the index already holding (and no longer locking)
    /// what touched them.
    fn trigger(&self, touched: Touched) {
        let Some(sink) = &self.triggers else {
            return;
        };
        for rs in touched {
            sink(rs);
        }
    }

    /// Replaces the whole index (after a relist); expectations stay. Every ReplicaSet that
    /// owned or owns a pod is triggered: events may have been missed between the watches.
    pub fn reset(&self, pods: Vec<Pod>) {
        let touched = self.with(|i| {
            let mut touched = Touched::new();
            for owner in i.owner_of.values() {
                touch(&mut touched, owner);
            }
            i.by_owner.clear();
            i.owner_of.clear();
            for pod in pods {
                i.apply(pod, &mut touched);
            }
            i.synced = true;
            touched
        });
        self.trigger(touched);
    }

    /// Files or refiles one pod (a watch event; also how tests feed the index).
    pub fn apply(&self, pod: Pod) {
        let touched = self.with(|i| {
            let mut touched = Touched::new();
            i.apply(pod, &mut touched);
            touched
        });
        self.trigger(touched);
    }

    /// Forgets one pod.
    pub fn delete(&self, pod: &Pod) {
        let touched = self.with(|i| {
            let mut touched = Touched::new();
            i.delete(pod, &mut touched);
            touched
        });
        self.trigger(touched);
    }

    /// The pods controlled by `owner`, or `None` while the index has not listed yet or has not
    /// seen this owner's last writes (plan later). Expectations older than
    /// [`EXPECTATIONS_TIMEOUT`] are dropped.
    pub fn owned(&self, owner: &str) -> Option<Vec<Arc<Pod>>> {
        self.with(|i| {
            if !i.synced {
                return None;
            }
            if let Some(e) = i.expectations.get(owner) {
                let met = e.creates.is_empty() && e.deletes.is_empty();
                if !met && e.since.elapsed() < EXPECTATIONS_TIMEOUT {
                    return None;
                }
                i.expectations.remove(owner);
            }
            Some(
                i.by_owner
                    .get(owner)
                    .map(|pods| pods.values().cloned().collect())
                    .unwrap_or_default(),
            )
        })
    }

    /// Records that `owner` created and deleted these pods (by name) and must see them before
    /// it plans again.
    pub fn expect(&self, owner: &str, created: Vec<String>, deleted: Vec<String>) {
        if created.is_empty() && deleted.is_empty() {
            return;
        }
        self.with(|i| {
            // A deletion the index already shows (gone or terminating) is met at once.
            let deletes = deleted
                .into_iter()
                .filter(|name| {
                    i.by_owner
                        .get(owner)
                        .and_then(|pods| pods.get(name))
                        .is_some_and(|p| p.metadata.deletion_timestamp.is_none())
                })
                .collect();
            let creates = created
                .into_iter()
                .filter(|name| {
                    !i.by_owner
                        .get(owner)
                        .is_some_and(|pods| pods.contains_key(name))
                })
                .collect();
            i.expectations.insert(
                owner.to_string(),
                Expectation {
                    creates,
                    deletes,
                    since: tokio::time::Instant::now(),
                },
            );
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, owner: &str, terminating: bool) -> Pod {
        let mut meta = json!({"name": name, "namespace": "default",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner, "controller": true}]});
        if terminating {
            meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({"metadata": meta, "spec": {"containers": []}})).unwrap()
    }

    fn names(pods: Option<Vec<Arc<Pod>>>) -> Option<Vec<String>> {
        pods.map(|p| p.iter().map(|p| p.name_any()).collect())
    }

    #[test]
    fn nothing_is_known_before_the_first_list() {
        let index = OwnedPods::default();
        index.apply(pod("a", "u1", false));
        assert_eq!(names(index.owned("u1")), None);
        index.reset(vec![pod("a", "u1", false), pod("b", "u2", false)]);
        assert_eq!(names(index.owned("u1")), Some(vec!["a".to_string()]));
        assert_eq!(names(index.owned("nobody")), Some(vec![]));
    }

    #[test]
    fn pods_are_filed_under_their_controller_and_refiled_when_it_changes() {
        let index = OwnedPods::default();
        index.reset(vec![pod("a", "u1", false)]);
        index.apply(pod("a", "u2", false));
        assert_eq!(names(index.owned("u1")), Some(vec![]));
        assert_eq!(names(index.owned("u2")), Some(vec!["a".to_string()]));
        index.delete(&pod("a", "u2", false));
        assert_eq!(names(index.owned("u2")), Some(vec![]));
    }

    #[tokio::test(start_paused = true)]
    async fn an_owner_waits_until_its_creations_and_deletions_are_seen() {
        let index = OwnedPods::default();
        index.reset(vec![pod("old", "u1", false)]);
        index.expect("u1", vec!["new".into()], vec!["old".into()]);
        assert_eq!(names(index.owned("u1")), None, "nothing seen yet");
        index.apply(pod("new", "u1", false));
        assert_eq!(
            names(index.owned("u1")),
            None,
            "the deletion is not seen yet"
        );
        index.apply(pod("old", "u1", true));
        assert_eq!(
            names(index.owned("u1")),
            Some(vec!["new".to_string(), "old".to_string()])
        );
        // Other owners never wait for u1's writes.
        index.expect("u1", vec!["never".into()], vec![]);
        assert_eq!(names(index.owned("u2")), Some(vec![]));
    }

    fn owned_by(name: &str, kind: &str, owner: &str, uid: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": uid, "controller": true}]},
            "spec": {"containers": []}}))
        .unwrap()
    }

    fn drain(receiver: &mut UnboundedReceiver<ObjectRef<ReplicaSet>>) -> Vec<String> {
        let mut names = Vec::new();
        while let Ok(rs) = receiver.try_recv() {
            names.push(format!("{}/{}", rs.namespace.unwrap_or_default(), rs.name));
        }
        names.sort();
        names
    }

    /// The ordering that keeps a ReplicaSet's status true: when its trigger is sent, the
    /// index already holds the change and is unlocked (a reconcile woken by it reads it).
    #[test]
    fn a_trigger_is_sent_after_the_change_is_filed_and_unlocked() {
        let slot: Arc<std::sync::OnceLock<OwnedPods>> = Arc::default();
        let phases: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
        let sink: TriggerSink = {
            let (slot, phases) = (slot.clone(), phases.clone());
            Arc::new(move |_rs| {
                let index = slot.get().expect("set before any event");
                // try_lock: a sink called under the lock records None instead of hanging.
                let phase = index.index.try_lock().ok().map(|i| {
                    i.by_owner
                        .get("u1")
                        .and_then(|pods| pods.get("a"))
                        .and_then(|p| p.status.as_ref()?.phase.clone())
                        .unwrap_or_default()
                });
                phases.lock().unwrap().push(phase);
            })
        };
        let index = OwnedPods::with_sink(sink);
        slot.set(index.clone()).unwrap();
        index.reset(vec![owned_by("a", "ReplicaSet", "web", "u1")]);
        let mut running = owned_by("a", "ReplicaSet", "web", "u1");
        running.status = Some(serde_json::from_value(json!({"phase": "Running"})).unwrap());
        index.apply(running);
        assert_eq!(
            *phases.lock().unwrap(),
            [Some(String::new()), Some("Running".to_string())]
        );
    }

    #[test]
    fn a_replica_set_is_triggered_once_its_pods_change_is_filed() {
        let (index, mut triggers) = OwnedPods::triggers();
        index.reset(vec![owned_by("a", "ReplicaSet", "web", "u1")]);
        assert_eq!(drain(&mut triggers), vec!["default/web"], "after a relist");
        // The trigger comes after the change is filed: a reconcile it wakes reads the change.
        let mut ready = owned_by("a", "ReplicaSet", "web", "u1");
        ready.status = Some(serde_json::from_value(json!({"phase": "Running"})).unwrap());
        index.apply(ready);
        let seen = triggers.try_recv().unwrap();
        assert_eq!(seen.name, "web");
        let pods = index.owned("u1").unwrap();
        assert_eq!(
            pods[0].status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running")
        );
        assert!(drain(&mut triggers).is_empty(), "one trigger per event");
        // Refiled under another ReplicaSet: both are woken; deleted: its owner is.
        index.apply(owned_by("a", "ReplicaSet", "api", "u2"));
        assert_eq!(drain(&mut triggers), vec!["default/api", "default/web"]);
        index.delete(&owned_by("a", "ReplicaSet", "api", "u2"));
        assert_eq!(drain(&mut triggers), vec!["default/api"]);
        // Pods of other controllers are indexed but wake no ReplicaSet.
        index.apply(owned_by("db-0", "StatefulSet", "db", "u3"));
        assert!(drain(&mut triggers).is_empty());
        assert_eq!(names(index.owned("u3")), Some(vec!["db-0".to_string()]));
        // A relist without a pod that went away while the watch was down still wakes its
        // ReplicaSet.
        index.apply(owned_by("b", "ReplicaSet", "web", "u1"));
        drain(&mut triggers);
        index.reset(vec![owned_by("db-0", "StatefulSet", "db", "u3")]);
        assert_eq!(drain(&mut triggers), vec!["default/web"]);
    }

    #[tokio::test(start_paused = true)]
    async fn writes_already_seen_and_lost_events_do_not_block_for_ever() {
        let index = OwnedPods::default();
        index.reset(vec![pod("a", "u1", false), pod("gone", "u1", true)]);
        // "a" was created and its event came before expect(); "gone" already terminates.
        index.expect("u1", vec!["a".into()], vec!["gone".into()]);
        assert!(index.owned("u1").is_some());
        index.expect("u1", vec!["lost".into()], vec![]);
        assert!(index.owned("u1").is_none());
        tokio::time::advance(EXPECTATIONS_TIMEOUT).await;
        assert!(index.owned("u1").is_some());
    }
}
