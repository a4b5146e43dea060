//! A watch-fed cache of one resource kind for the simulated components, waking a shared
//! `Notify` on every change so a component's loop runs again.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
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
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                if let Err(error) = event {
                    tracing::debug!(%error, "watch cache: watch failed; retrying");
                }
                changed.notify_one();
            }
        });
        Self { store, task }
    }

    /// Wait until the first list has arrived.
    pub async fn ready(&self) {
        let _ = self.store.wait_until_ready().await;
    }

    /// The cached objects (unordered; callers sort).
    pub fn objects(&self) -> Vec<Arc<K>> {
        self.store.state()
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
