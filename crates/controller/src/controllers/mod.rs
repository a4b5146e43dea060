//! The controllers. Each decides in a pure `decide` over a snapshot of the cluster state and
//! acts in a thin `pass`, run by the one loop driver ([`driver::drive`]).

pub mod disruption;
pub mod drift;
pub mod driver;
pub mod hash;
pub mod lifecycle;
pub mod nodeclass;
pub mod provisioner;
pub mod termination;

use std::time::Duration;

/// What a pass tells its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    /// Run again after this long instead of the loop's period (e.g. at once after acting).
    pub requeue_after: Option<Duration>,
    /// Steps of this pass that failed (each logged, naming its object); they are retried.
    pub errors: u32,
}

impl Outcome {
    pub fn idle() -> Self {
        Self::default()
    }

    pub fn again_in(after: Duration) -> Self {
        Self {
            requeue_after: Some(after),
            errors: 0,
        }
    }

    /// The same outcome, with `errors` failed steps.
    pub fn with_errors(self, errors: u32) -> Self {
        Self { errors, ..self }
    }
}

/// The NodePool a NodeClaim belongs to (empty when it has none), as metrics and actions name it.
pub(crate) fn nodepool_of(claim: &driftwood_api::NodeClaim) -> String {
    use driftwood_api::lookup::ObjectLookups;
    claim.nodepool_name().unwrap_or_default().to_string()
}
