//! Pods indexed by their controlling owner's uid, fed by one watch, with expectations: a
//! controller that created or deleted pods does not plan again for that owner until the index
//! has seen those writes (kube-controller-manager's ReplicaSet controller works the same way).
//! A reconcile reads its pods here instead of listing every pod of the selector per event.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
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

#[derive(Debug, Default)]
struct Index {
    /// Owner uid → pod name → pod.
    by_owner: HashMap<String, BTreeMap<String, Arc<Pod>>>,
    /// `namespace/name` → the owner uid it is filed under.
    owner_of: HashMap<String, String>,
    expectations: HashMap<String, Expectation>,
    synced: bool,
}

fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

fn controller_uid(pod: &Pod) -> Option<String> {
    pod.owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

impl Index {
    fn forget(&mut self, key: &str, name: &str) {
        if let Some(owner) = self.owner_of.remove(key) {
            if let Some(pods) = self.by_owner.get_mut(&owner) {
                pods.remove(name);
                if pods.is_empty() {
                    self.by_owner.remove(&owner);
                }
            }
            if let Some(e) = self.expectations.get_mut(&owner) {
                e.deletes.remove(name);
            }
        }
    }

    fn apply(&mut self, pod: Pod) {
        let key = key(&pod);
        let name = pod.name_any();
        self.forget(&key, &name);
        let Some(owner) = controller_uid(&pod) else {
            return;
        };
        if let Some(e) = self.expectations.get_mut(&owner) {
            e.creates.remove(&name);
            if pod.metadata.deletion_timestamp.is_some() {
                e.deletes.remove(&name);
            }
        }
        self.owner_of.insert(key, owner.clone());
        self.by_owner
            .entry(owner)
            .or_default()
            .insert(name, Arc::new(pod));
    }

    fn delete(&mut self, pod: &Pod) {
        self.forget(&key(pod), &pod.name_any());
    }
}

/// The shared index. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct OwnedPods {
    index: Arc<Mutex<Index>>,
}

impl OwnedPods {
    /// Starts the watch that feeds the index; abort the handle to stop it.
    pub fn spawn(client: Client) -> (Self, JoinHandle<()>) {
        let this = Self::default();
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
                    Ok(Event::Apply(pod)) => feeder.with(|i| i.apply(pod)),
                    Ok(Event::Delete(pod)) => feeder.with(|i| i.delete(&pod)),
                    Err(error) => tracing::debug!(%error, "owned pods: watch failed; retrying"),
                }
            }
        });
        (this, task)
    }

    fn with<T>(&self, f: impl FnOnce(&mut Index) -> T) -> T {
        f(&mut self.index.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Replaces the whole index (after a relist); expectations stay.
    pub fn reset(&self, pods: Vec<Pod>) {
        self.with(|i| {
            i.by_owner.clear();
            i.owner_of.clear();
            for pod in pods {
                i.apply(pod);
            }
            i.synced = true;
        });
    }

    /// Files or refiles one pod (a watch event; also how tests feed the index).
    pub fn apply(&self, pod: Pod) {
        self.with(|i| i.apply(pod));
    }

    /// Forgets one pod.
    pub fn delete(&self, pod: &Pod) {
        self.with(|i| i.delete(pod));
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
