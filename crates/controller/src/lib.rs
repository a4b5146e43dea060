//! driftwood-controller: the kube-rs runtime — cluster state fed by watches, the controllers
//! (provisioner, NodeClaim lifecycle, hash, node class, drift marker, disruption, termination,
//! garbage collection), leader election, events, metrics and health. Decisions come from the
//! pure crates (api, scheduling, disruption); this crate reads the world and acts.

pub mod api;
pub mod aws_provider_metrics;
pub mod client_metrics;
pub mod condition_metrics;
pub mod context;
pub mod controllers;
pub mod cost_metrics;
pub mod events;
pub mod exposition;
pub mod fence;
pub mod health;
pub mod leader;
pub mod liveness;
pub mod metered_cloud;
pub mod metrics;
pub mod nodeclaim_template;
pub mod pod_scheduling_times;
pub mod process;
pub mod process_metrics;
pub mod prometheus;
pub mod rbac;
pub mod retry;
pub mod runtime;
pub mod scheduler_metrics;
pub mod settings;
pub mod simulation;
pub mod state;
pub mod state_metrics;
pub mod summary;
pub mod workqueue_metrics;

pub use context::{Context, NameGenerator, NodeClassResolver};
pub use process::{Process, ProcessConfig};
pub use settings::{FeatureGates, Settings};
pub use state::ClusterState;
