//! driftwood-sim: the embedded cluster. This crate provides the Kubernetes-compatible API
//! server (in-process and over HTTP) and the clock abstraction the simulation runs on.

pub mod apiserver;
pub mod clock;

pub use apiserver::{ApiServer, ApiServerConfig, HttpServer, PodTermination};
pub use clock::{Clock, SharedClock, VirtualClock, WallClock};
