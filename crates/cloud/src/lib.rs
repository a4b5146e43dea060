//! driftwood-cloud: the neutral cloud boundary the controllers call — the `CloudProvider` trait,
//! its errors and types (instance types as driftwood-scheduling's model, offerings, provider
//! drift as a reason and message) — and the one clock. No cloud's code lives here: the AWS
//! provider is driftwood-aws.

pub mod buckets;
pub mod clock;
pub mod provider;

pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use provider::{CloudDrift, CloudError, CloudProvider, OfferingKey};
