//! driftwood-sim: the embedded cluster. This crate provides the Kubernetes-compatible API
//! server (in-process and over HTTP), the workload controllers (Deployment, ReplicaSet) and
//! the clock abstraction the simulation runs on.

pub mod apiserver;
pub mod clock;
pub mod cluster;
pub mod daemonset;
pub mod kubelet;
pub mod scheduler;
pub mod watch_cache;
pub mod workloads;

pub use apiserver::{ApiServer, ApiServerConfig, HttpServer, PodTermination};
pub use clock::{Clock, SharedClock, SystemClock, VirtualClock};
pub use cluster::{SimCluster, SimClusterError, SimClusterOptions};
pub use workloads::WorkloadControllers;
