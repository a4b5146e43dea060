//! Cluster state: watchers on nodes, pods, PDBs, daemonsets, NodePools, NodeClaims,
//! EC2NodeClasses, VolumeAttachments and PersistentVolumeClaims feeding one store that
//! controllers read as a [`Snapshot`]. Objects are watched untyped and decoded one by one, so an
//! object that fails to decode is logged once and skipped instead of stalling its watch.
//!
//! The store and its indexes are persistent maps updated per watch event: taking a snapshot
//! shares their structure (no copy of the store), and an event costs O(log n).

mod snapshot;
pub mod trim;
mod watch;

pub use snapshot::{Cached, Snapshot};
pub use watch::spawn_watchers;

use driftwood_api::{EC2NodeClass, NodeClaim, NodePool};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError, RwLock};
use tokio::sync::watch as tokio_watch;

/// `namespace/name` (cluster-scoped objects: `/name`... stored as just `name`).
pub type ObjectKey = String;

/// The objects of one kind: a persistent map, so cloning it shares its structure.
pub type Objects<K> = imbl::OrdMap<ObjectKey, Arc<K>>;

/// Every watched kind, by key.
#[derive(Debug, Default, Clone)]
pub struct Store {
    pub nodes: Objects<Node>,
    pub pods: Objects<Pod>,
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
}

/// The shared, watch-fed store. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct ClusterState {
    current: Arc<RwLock<Snapshot>>,
    synced: Arc<RwLock<BTreeSet<Kind>>>,
    changes: tokio_watch::Sender<u64>,
    pod_hooks: Arc<RwLock<Vec<PodHook>>>,
}

/// Told of each pod change the watch delivers: the version the state held before (None for a
/// pod it had not seen) and the new one. Runs outside the state's lock.
pub type PodHook = Arc<dyn Fn(Option<&Pod>, &Pod) + Send + Sync>;

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
            self.update(|s| s.apply(key, object));
            return;
        }
        let mut old = None;
        self.update(|s| {
            old = K::objects(&s.store).get(&key).cloned();
            s.apply(key, Arc::clone(&object));
        });
        let hooks = self
            .pod_hooks
            .read()
            .unwrap_or_else(|e| poisoned("pod hooks", e))
            .clone();
        fn as_pod<K: 'static>(object: &K) -> Option<&Pod> {
            (object as &dyn std::any::Any).downcast_ref::<Pod>()
        }
        if let Some(new) = as_pod(object.as_ref()) {
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

    /// Forgets the object under `key`, updating the indexes.
    pub fn delete<K: Cached>(&self, key: &str) {
        self.update(|s| s.delete::<K>(key));
    }

    /// Replaces every object of kind `K` (a relist), updating the indexes.
    pub fn reset<K: Cached>(&self, objects: Objects<K>) {
        self.update(|s| s.reset(objects));
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
