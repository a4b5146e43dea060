//! Cluster state: watchers on nodes, pods, PDBs, daemonsets, NodePools, NodeClaims,
//! EC2NodeClasses, VolumeAttachments and PersistentVolumeClaims feeding one store that
//! controllers read as a [`Snapshot`]. Objects are watched untyped and decoded one by one, so an
//! object that fails to decode is logged once and skipped instead of stalling its watch.
//!
//! The store and its indexes are persistent maps updated per watch event: taking a snapshot
//! shares their structure (no copy of the store), and an event costs O(log n).

pub mod built_nodes;
pub mod pool_usage;
pub mod read_keys;
pub mod revisions;
mod snapshot;
pub mod trim;
mod watch;

pub use snapshot::{Cached, PodEventSet, Snapshot};
pub use watch::spawn_watchers;

use driftwood_api::{EC2NodeClass, NodeClaim, NodePool};
use driftwood_disruption::cached_pod::CachedPod;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError, RwLock};
use tokio::sync::watch as tokio_watch;

use crate::condition_metrics::{StatusView, status_view_of};

/// `namespace/name` (cluster-scoped objects: `/name`... stored as just `name`).
pub type ObjectKey = String;

/// The objects of one kind: a persistent map, so cloning it shares its structure.
pub type Objects<K> = imbl::OrdMap<ObjectKey, Arc<K>>;

/// Every watched kind, by key (of Pods, what the cache keeps of them: [`CachedPod`]).
#[derive(Debug, Default, Clone)]
pub struct Store {
    pub nodes: Objects<Node>,
    pub pods: Objects<CachedPod>,
    pub pdbs: Objects<PodDisruptionBudget>,
    pub daemonsets: Objects<DaemonSet>,
    pub nodepools: Objects<NodePool>,
    pub nodeclaims: Objects<NodeClaim>,
    pub nodeclasses: Objects<EC2NodeClass>,
    pub volume_attachments: Objects<VolumeAttachment>,
    pub persistent_volume_claims: Objects<PersistentVolumeClaim>,
}

/// The watched kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Node,
    Pod,
    PodDisruptionBudget,
    DaemonSet,
    NodePool,
    NodeClaim,
    EC2NodeClass,
    VolumeAttachment,
    PersistentVolumeClaim,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::Node,
        Kind::Pod,
        Kind::PodDisruptionBudget,
        Kind::DaemonSet,
        Kind::NodePool,
        Kind::NodeClaim,
        Kind::EC2NodeClass,
        Kind::VolumeAttachment,
        Kind::PersistentVolumeClaim,
    ];

    /// This kind's position in [`Kind::ALL`].
    pub const fn position(self) -> usize {
        self as usize
    }
}

/// The shared, watch-fed store. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct ClusterState {
    current: Arc<RwLock<Snapshot>>,
    synced: Arc<RwLock<BTreeSet<Kind>>>,
    changes: tokio_watch::Sender<u64>,
    pod_hooks: Arc<RwLock<Vec<PodHook>>>,
    status_hooks: Arc<RwLock<Vec<StatusHook>>>,
}

/// Told of each pod change the watch delivers: the version the state held before (None for a
/// pod it had not seen) and the new one. Runs outside the state's lock.
pub type PodHook = Arc<dyn Fn(Option<&CachedPod>, &CachedPod) + Send + Sync>;

/// Told of each change of a NodeClaim, NodePool, Node or EC2NodeClass as a status view: the
/// version the state held before (None: not seen) and the new one (None: gone). Runs outside
/// the state's lock.
pub type StatusHook = Arc<dyn Fn(Option<&StatusView>, Option<&StatusView>) + Send + Sync>;

impl Default for ClusterState {
    fn default() -> Self {
        Self::new()
    }
}

impl ClusterState {
    pub fn new() -> Self {
        let (changes, _) = tokio_watch::channel(0);
        Self {
            current: Arc::default(),
            synced: Arc::default(),
            changes,
            pod_hooks: Arc::default(),
            status_hooks: Arc::default(),
        }
    }

    /// A receiver that sees a new value after every change.
    pub fn subscribe(&self) -> tokio_watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Whether every kind has completed its initial list.
    pub fn synced(&self) -> bool {
        let synced = self
            .synced
            .read()
            .unwrap_or_else(|e| poisoned("synced kinds", e));
        synced.len() == Kind::ALL.len()
    }

    /// Waits until every kind has completed its initial list.
    pub async fn wait_synced(&self) {
        let mut rx = self.subscribe();
        while !self.synced() {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// The store and its indexes as they are now. Cheap: the persistent maps are shared, not
    /// copied, and later events do not change what this snapshot sees.
    ///
    /// A poisoned lock (a panic while the store was being updated) is a crash, never an empty
    /// view: an empty store read as "no NodeClaims" would have garbage collection terminate
    /// every instance.
    pub fn snapshot(&self) -> Snapshot {
        self.current
            .read()
            .unwrap_or_else(|e| poisoned("cluster state", e))
            .clone()
    }

    /// Reads one thing from the current state without taking a snapshot.
    pub fn read<T>(&self, f: impl FnOnce(&Snapshot) -> T) -> T {
        let current = self
            .current
            .read()
            .unwrap_or_else(|e| poisoned("cluster state", e));
        f(&current)
    }

    /// Stores `object` under `key` (added or changed), updating the indexes.
    pub fn apply<K: Cached>(&self, key: ObjectKey, object: Arc<K>) {
        if K::KIND != Kind::Pod {
            let hooks = self.status_hooks_for::<K>();
            if hooks.is_empty() {
                self.update(|s| {
                    s.apply(key, object);
                });
                return;
            }
            let mut old = None;
            let mut new = None;
            self.update(|s| {
                old = K::objects(&s.store).get(&key).cloned();
                new = Some(s.apply(key, object));
            });
            let old = old.and_then(|o| status_view_of(o.as_ref()));
            let new = new.and_then(|n| status_view_of(n.as_ref()));
            for hook in &hooks {
                hook(old.as_ref(), new.as_ref());
            }
            return;
        }
        let mut old = None;
        let mut new = None;
        self.update(|s| {
            old = K::objects(&s.store).get(&key).cloned();
            new = Some(s.apply(key, object));
        });
        let hooks = self
            .pod_hooks
            .read()
            .unwrap_or_else(|e| poisoned("pod hooks", e))
            .clone();
        fn as_pod<K: 'static>(object: &K) -> Option<&CachedPod> {
            (object as &dyn std::any::Any).downcast_ref::<CachedPod>()
        }
        if let Some(new) = new.as_deref().and_then(as_pod) {
            let old = old.as_deref().and_then(as_pod);
            for hook in &hooks {
                hook(old, new);
            }
        }
    }

    /// Calls `hook` on every later pod change.
    pub fn on_pod_change(&self, hook: PodHook) {
        self.pod_hooks
            .write()
            .unwrap_or_else(|e| poisoned("pod hooks", e))
            .push(hook);
    }

    /// Calls `hook` on every later change of a NodeClaim, NodePool, Node or EC2NodeClass.
    pub fn on_status_change(&self, hook: StatusHook) {
        self.status_hooks
            .write()
            .unwrap_or_else(|e| poisoned("status hooks", e))
            .push(hook);
    }

    /// The status hooks, when objects of kind `K` have status views (none otherwise).
    fn status_hooks_for<K: Cached>(&self) -> Vec<StatusHook> {
        if !has_status_view(K::KIND) {
            return Vec::new();
        }
        self.status_hooks
            .read()
            .unwrap_or_else(|e| poisoned("status hooks", e))
            .clone()
    }

    /// Forgets the object under `key`, updating the indexes.
    pub fn delete<K: Cached>(&self, key: &str) {
        let hooks = self.status_hooks_for::<K>();
        if hooks.is_empty() {
            self.update(|s| s.delete::<K>(key));
            return;
        }
        let mut old = None;
        self.update(|s| {
            old = K::objects(&s.store).get(key).cloned();
            s.delete::<K>(key);
        });
        if let Some(old) = old.and_then(|o| status_view_of(o.as_ref())) {
            for hook in &hooks {
                hook(Some(&old), None);
            }
        }
    }

    /// Replaces every object of kind `K` (a relist), updating the indexes. The status hooks
    /// see each object that changed, appeared or went away in the relist.
    pub fn reset<K: Cached>(&self, objects: Objects<K>) {
        let hooks = self.status_hooks_for::<K>();
        if hooks.is_empty() {
            self.update(|s| s.reset(objects));
            return;
        }
        let mut old = Objects::<K::Stored>::new();
        let new = objects.clone();
        self.update(|s| {
            old = K::objects(&s.store).clone();
            s.reset(objects);
        });
        for (key, before) in &old {
            let after = new.get(key);
            if after.is_some_and(|a| std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(before))) {
                continue;
            }
            let before = status_view_of(before.as_ref());
            let after = after.and_then(|a| status_view_of(a.as_ref()));
            for hook in &hooks {
                hook(before.as_ref(), after.as_ref());
            }
        }
        for after in new
            .iter()
            .filter(|(key, _)| !old.contains_key(*key))
            .map(|(_, after)| after)
        {
            let after = status_view_of(after.as_ref());
            for hook in &hooks {
                hook(None, after.as_ref());
            }
        }
    }

    fn update(&self, f: impl FnOnce(&mut Snapshot)) {
        {
            let mut current = self
                .current
                .write()
                .unwrap_or_else(|e| poisoned("cluster state", e));
            f(&mut current);
        }
        self.changes.send_modify(|v| *v += 1);
    }

    pub(crate) fn mark_synced(&self, kind: Kind) {
        self.synced
            .write()
            .unwrap_or_else(|e| poisoned("synced kinds", e))
            .insert(kind);
        self.changes.send_modify(|v| *v += 1);
    }
}

/// Whether objects of `kind` have status conditions the metrics observe.
fn has_status_view(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::NodeClaim | Kind::NodePool | Kind::Node | Kind::EC2NodeClass
    )
}

/// A lock some thread panicked while holding: what it guards may be half-updated, and every
/// decision read from it could be wrong (an empty store reads as "no NodeClaims"). The process
/// stops at once so that it restarts from the API server's state, as a crashed pod does.
pub fn poisoned<T>(what: &str, _error: PoisonError<T>) -> ! {
    tracing::error!(
        object = what,
        "a lock was poisoned by a panic; stopping the process so it restarts with a fresh cache"
    );
    eprintln!("driftwood: the {what} lock was poisoned by a panic; aborting");
    std::process::abort()
}

/// The store key of an object: `namespace/name`, or `name` when cluster-scoped.
pub fn object_key(namespace: Option<&str>, name: &str) -> ObjectKey {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pod hooks are told of each pod change with what the cache keeps of the pod: nothing
    /// before its first version, then the version the cache held and the new one.
    #[test]
    fn pod_hooks_see_the_cached_versions_of_a_pod() {
        use driftwood_disruption::cached_pod::PodPhase;
        let state = ClusterState::new();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        state.on_pod_change(Arc::new(move |old, new| {
            record
                .lock()
                .unwrap()
                .push((old.map(|p| p.phase), new.phase, new.key()));
        }));
        let pod = |phase: &str| -> Arc<k8s_openapi::api::core::v1::Pod> {
            Arc::new(
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": "p", "namespace": "default"},
                    "spec": {"containers": []}, "status": {"phase": phase}
                }))
                .unwrap(),
            )
        };
        state.apply("default/p".into(), pod("Pending"));
        state.apply("default/p".into(), pod("Running"));
        state.apply("n".into(), pool("n", "True"));
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                (None, Some(PodPhase::Pending), "default/p".to_string()),
                (
                    Some(Some(PodPhase::Pending)),
                    Some(PodPhase::Running),
                    "default/p".to_string()
                ),
            ]
        );
    }

    fn pool(name: &str, ready: &str) -> Arc<NodePool> {
        let mut pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []
            }}},
        }))
        .expect("a NodePool");
        pool.status = Some(
            serde_json::from_value(serde_json::json!({
                "conditions": [{"type": "Ready", "status": ready, "reason": "R",
                                "lastTransitionTime": "2026-01-01T00:00:00Z", "message": ""}]
            }))
            .expect("a status"),
        );
        Arc::new(pool)
    }

    /// The status hooks see every change of a kind with conditions: an apply (old and new), a
    /// delete (old, then nothing), and in a relist each object that changed, appeared or went
    /// away — and nothing for an object the relist hands back unchanged.
    #[test]
    fn status_hooks_see_applies_deletes_and_what_a_relist_changed() {
        let state = ClusterState::new();
        let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
        let log = seen.clone();
        state.on_status_change(Arc::new(move |old, new| {
            let status = |v: Option<&StatusView>| {
                v.map_or("-".to_string(), |v| {
                    format!("{}={}", v.name, v.conditions[0].status)
                })
            };
            log.lock()
                .unwrap()
                .push(format!("{} -> {}", status(old), status(new)));
        }));
        let kept = pool("kept", "True");
        state.apply("a".to_string(), pool("a", "False"));
        state.apply("a".to_string(), pool("a", "True"));
        state.apply("kept".to_string(), kept.clone());
        state.apply("gone".to_string(), pool("gone", "True"));
        state.delete::<NodePool>("a");
        let relisted: Objects<NodePool> = [
            ("kept".to_string(), kept),
            ("new".to_string(), pool("new", "Unknown")),
        ]
        .into_iter()
        .collect();
        state.reset(relisted);
        assert_eq!(
            *seen.lock().unwrap(),
            [
                "- -> a=False",
                "a=False -> a=True",
                "- -> kept=True",
                "- -> gone=True",
                "a=True -> -",
                "gone=True -> -",
                "- -> new=Unknown",
            ]
        );
    }

    /// Set in the child process the poisoned-lock test starts.
    const CHILD: &str = "DRIFTWOOD_TEST_POISONED_CACHE_CHILD";

    /// A panic while the store is being updated poisons its lock. Reading it then used to give
    /// an empty snapshot — "no NodeClaims", which garbage collection would act on; now the
    /// process aborts (to restart from the API server's state). Run in a child process, since
    /// the abort ends the process.
    #[test]
    fn a_poisoned_cache_aborts_instead_of_reading_as_empty() {
        if std::env::var_os(CHILD).is_some() {
            let state = ClusterState::new();
            let poisoner = state.clone();
            let panicked = std::thread::spawn(move || {
                poisoner.update(|_| panic!("a bug while applying a watch event"));
            })
            .join();
            assert!(panicked.is_err());
            let snapshot = state.snapshot();
            // Not reached: the read above aborts.
            println!("read {} nodeclaims", snapshot.store.nodeclaims.len());
            return;
        }
        let child = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "state::tests::a_poisoned_cache_aborts_instead_of_reading_as_empty",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .output()
            .expect("the child runs");
        let stdout = String::from_utf8_lossy(&child.stdout);
        let stderr = String::from_utf8_lossy(&child.stderr);
        assert!(!child.status.success(), "{stdout}\n{stderr}");
        assert!(!stdout.contains("read 0 nodeclaims"), "{stdout}");
        assert!(
            stderr.contains("lock was poisoned by a panic; aborting"),
            "{stderr}"
        );
    }
}
