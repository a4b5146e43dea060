//! The CloudProvider trait the controllers call, and its errors.

use async_trait::async_trait;
use driftwood_api::{NodeClaim, NodePool};

use crate::aws::drift::ProviderDrift;
use crate::aws::instance_types::InstanceTypeInfo;
use crate::aws::unavailable::OfferingKey;
use crate::ports::AwsError;

/// What can go wrong talking to the cloud.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CloudError {
    /// The instance (or NodeClaim's instance) does not exist or is already terminated.
    #[error("{what} not found: {message}")]
    NotFound { what: String, message: String },
    /// No offering could be launched; these offerings failed (and are now marked unavailable).
    #[error("insufficient capacity: {message}{}", if offerings.is_empty() { String::new() } else { format!(" (failed offerings: {})", offerings.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")) })]
    InsufficientCapacity {
        offerings: Vec<OfferingKey>,
        message: String,
    },
    /// The NodeClaim's node class is missing or not Ready.
    #[error("EC2NodeClass {name:?} is not ready: {message}")]
    NodeClassNotReady { name: String, message: String },
    /// The request itself is unusable (bad provider ID, unparsable requests, ...).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// What the answer depends on is not resolved yet (e.g. an EC2NodeClass status list is
    /// empty), so no answer can be given now.
    #[error("{0}")]
    Unresolved(String),
    /// An AWS call failed.
    #[error("AWS call failed: {0}")]
    Api(#[from] AwsError),
}

impl CloudError {
    /// Whether the error means the instance is gone.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// Whether the error means no capacity.
    pub fn is_insufficient_capacity(&self) -> bool {
        matches!(self, Self::InsufficientCapacity { .. })
    }
}

/// The operations the controllers need from a cloud.
#[async_trait]
pub trait CloudProvider: Send + Sync {
    /// The provider's name (`aws`).
    fn name(&self) -> &str;

    /// Launches an instance for `claim`; returns the claim with its labels (instance type,
    /// zone, capacity type, ...), annotations and status (providerID, imageID, capacity,
    /// allocatable) filled in.
    async fn create(&self, claim: &NodeClaim) -> Result<NodeClaim, CloudError>;

    /// Terminates the claim's instance; `NotFound` once it is gone.
    async fn delete(&self, claim: &NodeClaim) -> Result<(), CloudError>;

    /// The NodeClaim view of the instance with `provider_id`.
    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudError>;

    /// The NodeClaim view of every live instance this cluster launched.
    async fn list(&self) -> Result<Vec<NodeClaim>, CloudError>;

    /// The instance types (with offerings) `pool` may launch through its node class.
    async fn instance_types(&self, pool: &NodePool) -> Result<Vec<InstanceTypeInfo>, CloudError>;

    /// The first provider drift of `claim`, if any.
    async fn is_drifted(&self, claim: &NodeClaim) -> Result<Option<ProviderDrift>, CloudError>;
}
