//! A watch-fed cache of one resource kind for the simulated components, waking a shared
//! `Notify` on every change so a component's loop runs again, and (when asked) noting which
//! objects changed so the component can look at those only.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// A running cache; dropping it stops the watch.
#[derive(Debug)]
pub struct WatchCache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store: Store<K>,
    task: JoinHandle<()>,
    /// The changes not yet taken, when the cache was asked to note them.
    changes: Option<Arc<Mutex<Changes>>>,
}

/// The objects (namespace, name) that changed since the changes were last taken.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Created, changed or deleted.
    pub touched: BTreeSet<(String, String)>,
    /// The watch listed everything again: objects deleted meanwhile were not reported one by
    /// one, so every object must be looked at.
    pub relisted: bool,
}

impl Changes {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        !self.relisted && self.touched.is_empty()
    }

    fn record<K: Resource>(&mut self, event: &watcher::Event<K>) {
        let key = |object: &K| {
            let meta = object.meta();
            (
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
            )
        };
        match event {
            watcher::Event::Apply(object)
            | watcher::Event::Delete(object)
            | watcher::Event::InitApply(object) => {
                self.touched.insert(key(object));
            }
            // The store takes the new list whole at its end.
            watcher::Event::InitDone => self.relisted = true,
            watcher::Event::Init => {}
        }
    }
}

impl<K> WatchCache<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Start watching every object of kind `K` (all namespaces), notifying `changed` on events.
    pub fn spawn(client: Client, changed: Arc<Notify>) -> Self {
        Self::spawn_selected(client, changed, None)
    }

    /// [`WatchCache::spawn`], of the objects `label_selector` selects only: a component that
    /// reads a few of many objects is neither woken by the others' events nor reads them.
    pub fn spawn_selected(
        client: Client,
        changed: Arc<Notify>,
        label_selector: Option<&str>,
    ) -> Self {
        Self::start(client, changed, label_selector, None)
    }

    /// [`WatchCache::spawn`], noting which objects change for [`WatchCache::take_changes`].
    pub fn spawn_tracked(client: Client, changed: Arc<Notify>) -> Self {
        Self::start(client, changed, None, Some(Arc::default()))
    }

    /// [`WatchCache::spawn_selected`], noting which objects change.
    pub fn spawn_selected_tracked(
        client: Client,
        changed: Arc<Notify>,
        label_selector: Option<&str>,
    ) -> Self {
        Self::start(client, changed, label_selector, Some(Arc::default()))
    }

    fn start(
        client: Client,
        changed: Arc<Notify>,
        label_selector: Option<&str>,
        changes: Option<Arc<Mutex<Changes>>>,
    ) -> Self {
        let (store, writer) = reflector::store();
        let mut config = watcher::Config::default();
        if let Some(selector) = label_selector {
            config = config.labels(selector);
        }
        let api: Api<K> = Api::all(client);
        // The components never read managedFields: not keeping them saves the memory of a
        // second copy of every object's field sets.
        let stream = reflector::reflector(
            writer,
            watcher(api, config).modify(|object: &mut K| object.meta_mut().managed_fields = None),
        )
        .default_backoff();
        let noted = changes.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match &event {
                    // The reflector has applied the event to the store before passing it on.
                    Ok(event) => {
                        if let Some(noted) = &noted {
                            noted
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .record(event);
                        }
                    }
                    Err(error) => tracing::debug!(%error, "watch cache: watch failed; retrying"),
                }
                changed.notify_one();
            }
        });
        Self {
            store,
            task,
            changes,
        }
    }

    /// Wait until the first list has arrived.
    pub async fn ready(&self) {
        let _ = self.store.wait_until_ready().await;
    }

    /// The cached objects (unordered; callers sort).
    pub fn objects(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    /// The cached object `namespace/name` (namespace empty for cluster-scoped kinds).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let key = ObjectRef::new(name);
        let key = if namespace.is_empty() {
            key
        } else {
            key.within(namespace)
        };
        self.store.get(&key)
    }

    /// The changes since the last call (all empty for a cache not spawned tracked). The store
    /// already holds them when they are taken.
    pub fn take_changes(&self) -> Changes {
        self.changes
            .as_ref()
            .map_or_else(Changes::default, |changes| {
                std::mem::take(&mut *changes.lock().unwrap_or_else(PoisonError::into_inner))
            })
    }
}

/// How long a component lets a burst of changes settle before acting on them. On paused tokio
/// time this sleep only ends once every other task is idle, so one pass sees the whole burst.
pub const SETTLE: Duration = Duration::from_millis(5);

/// Wait until `changed` is notified or `timeout` passes, then let the burst settle.
pub async fn wait_for_change(changed: &Notify, timeout: Duration) {
    tokio::select! {
        () = changed.notified() => {}
        () = tokio::time::sleep(timeout) => {}
    }
    tokio::time::sleep(SETTLE).await;
}

impl<K> Drop for WatchCache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn drop(&mut self) {
        self.task.abort();
    }
}
