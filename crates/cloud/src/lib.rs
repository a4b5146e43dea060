//! driftwood-cloud: the neutral cloud boundary the controllers call — the `CloudProvider` trait,
//! its errors and types (instance types as driftwood-scheduling's model, offerings, provider
//! drift as a reason and message) — the one clock, and what the provider and the controllers
//! share to export metrics (Karpenter's buckets, a registry that knows its families). No
//! cloud's code lives here: the AWS provider is driftwood-aws.

pub mod buckets;
pub mod clock;
pub mod metric_registry;
pub mod provider;

pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use provider::{CloudDrift, CloudError, CloudProvider, OfferingKey};
