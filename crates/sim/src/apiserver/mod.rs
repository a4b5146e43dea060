//! The embedded Kubernetes-compatible API server: an in-memory store with watches, served
//! in-process as a tower service (for `kube::Client`) and over HTTP (for kubectl).
//!
//! Typical use:
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use driftwood_sim::{ApiServer, ApiServerConfig};
//! let api = ApiServer::new(ApiServerConfig::default());
//! let client = api.client(); // in-process kube::Client, default namespace "default"
//! let http = api.serve_with_kubeconfig(std::path::Path::new("/tmp/kubeconfig")).await?;
//! println!("kubectl --kubeconfig /tmp/kubeconfig get nodes  # {}", http.url());
//! # drop(client); Ok(()) }
//! ```
//!
//! Behaviour worth knowing (all covered by tests in `tests/apiserver`):
//! * objects are stored per (group, plural) as JSON; custom resources are served at every
//!   version their CRD serves, with no conversion (only `apiVersion` is rewritten);
//! * one global resourceVersion; the watch log keeps `event_log_capacity` events, older
//!   versions get `410 Expired` (kube-runtime watchers then relist);
//! * create resets server-owned status (pods start `Pending`; nodes and namespaces keep
//!   what the client sent); main-resource writes ignore status, `/status` writes ignore
//!   everything else; `generation` moves only when something outside metadata/status does;
//! * strategic merge patch follows the built-in types' merge keys (containers/env/volumes
//!   by name, conditions/addresses by type, ports by containerPort, finalizers as a set);
//!   `taints` and `tolerations` are atomic lists as in Kubernetes. Server-side apply tracks
//!   field managers in `managedFields`, with conflicts, forcing and removal of fields a manager
//!   stops applying ([`managed_fields`]);
//! * request bodies in JSON, YAML, or Kubernetes protobuf for the kinds client-go's typed
//!   clients send that the cluster serves ([`kube_protobuf`]: Secrets, ConfigMaps,
//!   Namespaces, Leases, DeleteOptions, Evictions, Bindings, Scales); other media types get
//!   415. Responses are protobuf for those kinds when the client prefers it, JSON otherwise
//!   (406 when a client accepts nothing else); watches stream JSON;
//! * bound pods deleted with a grace period keep `deletionTimestamp` until a kubelet deletes
//!   them with `gracePeriodSeconds=0` ([`PodTermination::Immediate`] removes them at once);
//! * background garbage collection through ownerReferences; `Orphan` strips the reference;
//!   `Foreground` behaves like `Background`;
//! * the PDB controller runs synchronously after every pod/PDB write, so evictions always
//!   see current budgets.

mod access_review;
pub mod audit;
mod builtin_kinds;
mod builtin_validation;
mod cascade;
pub mod core;
pub mod crd;
pub mod defaults;
pub mod discovery;
pub mod error;
mod events;
pub mod http;
pub mod jsonpath;
pub mod kube_protobuf;
pub mod managed_fields;
pub mod node_lifecycle;
pub mod openapi;
pub mod pdb;
mod pdb_index;
mod protobuf;
pub mod request;
pub mod resources;
mod scale;
pub mod schema;
pub mod selectors;
pub mod service;
pub mod store;
pub mod strategic_merge;
mod subresources;
pub mod table;
pub mod watch;
mod write;

use std::net::SocketAddr;
use std::path::Path;

pub use self::core::{ApiCore, ApiServerConfig, PodTermination, RequestLatency};
pub use self::error::ApiError;
pub use self::http::{HttpServer, kubeconfig_yaml, write_kubeconfig};
pub use self::service::{ApiService, ResponseBody};

/// A handle to one embedded API server. Cheap to clone; all clones share the same state.
#[derive(Debug, Clone)]
pub struct ApiServer {
    service: ApiService,
}

impl ApiServer {
    /// A fresh server with the built-in resources and the default namespaces.
    pub fn new(config: ApiServerConfig) -> Self {
        Self {
            service: ApiService::new(ApiCore::new(config)),
        }
    }

    /// The tower service handling requests.
    pub fn service(&self) -> ApiService {
        self.service.clone()
    }

    /// An in-process kube client (default namespace `default`). Must be called inside a
    /// tokio runtime.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.service.clone(), "default")
    }

    /// Serve over HTTP/1.1 on `address` (port 0 picks a free port).
    pub async fn serve_http(&self, address: SocketAddr) -> std::io::Result<HttpServer> {
        http::serve(self.service.clone(), address, None).await
    }

    /// As [`Self::serve_http`], recording every write received in `audit`.
    pub async fn serve_http_audited(
        &self,
        address: SocketAddr,
        audit: audit::AuditLog,
    ) -> std::io::Result<HttpServer> {
        http::serve(self.service.clone(), address, Some(audit)).await
    }

    /// Serve on 127.0.0.1 with a free port and write a kubeconfig for it to `path`.
    pub async fn serve_with_kubeconfig(&self, path: &Path) -> std::io::Result<HttpServer> {
        let server = self
            .serve_http(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await?;
        write_kubeconfig(path, &server.url())?;
        Ok(server)
    }

    /// Read the server state directly (store, registry) under its lock.
    pub fn inspect<R>(&self, read: impl FnOnce(&ApiCore) -> R) -> R {
        read(&self.service.shared().lock())
    }

    /// One stored object, typed, read directly from the store (no HTTP, no watch events).
    pub fn get<K>(&self, namespace: &str, name: &str) -> Option<K>
    where
        K: kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned,
    {
        let key = resources::ResourceKey::new(&K::group(&()), &K::plural(&()));
        self.inspect(|core| core.store().get(&key, namespace, name).cloned())
            .and_then(|object| serde_json::from_value((*object).clone()).ok())
    }

    /// All stored objects of a type (optionally one namespace), sorted by namespace and name.
    pub fn list<K>(&self, namespace: Option<&str>) -> Vec<K>
    where
        K: kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned,
    {
        let key = resources::ResourceKey::new(&K::group(&()), &K::plural(&()));
        let objects: Vec<std::sync::Arc<serde_json::Value>> = self.inspect(|core| {
            core.store()
                .list(&key, namespace)
                .map(|(_, object)| std::sync::Arc::clone(object))
                .collect()
        });
        objects
            .into_iter()
            .filter_map(|object| serde_json::from_value((*object).clone()).ok())
            .collect()
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.inspect(|core| core.store().resource_version())
    }

    /// Close every open watch stream, as if the connections dropped. Clients resume from
    /// their last resourceVersion (or relist after 410 if it has expired).
    pub fn disconnect_watches(&self) {
        self.service.shared().disconnects.send_modify(|d| {
            d.epoch += 1;
            d.expire = false;
        });
    }

    /// End every open watch with `410 Expired`, as after an etcd compaction or a watch-cache
    /// reset: clients must relist.
    pub fn expire_watches(&self) {
        self.service.shared().disconnects.send_modify(|d| {
            d.epoch += 1;
            d.expire = true;
        });
    }

    /// How many events the watch log currently holds.
    pub fn event_log_len(&self) -> usize {
        self.inspect(|core| core.store().log_len())
    }
}
