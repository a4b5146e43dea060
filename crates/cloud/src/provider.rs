//! The CloudProvider trait the controllers call, its errors and the types it speaks in.

use async_trait::async_trait;
use driftwood_api::{NodeClaim, NodePool};
use driftwood_scheduling::InstanceType;

/// One offering: instance type, zone, capacity type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OfferingKey {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
}

impl OfferingKey {
    /// The key of `instance_type` in `zone` as `capacity_type`.
    pub fn new(instance_type: &str, zone: &str, capacity_type: &str) -> Self {
        Self {
            instance_type: instance_type.to_string(),
            zone: zone.to_string(),
            capacity_type: capacity_type.to_string(),
        }
    }
}

impl std::fmt::Display for OfferingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}/{}",
            self.instance_type, self.zone, self.capacity_type
        )
    }
}

/// A drift only the cloud provider can see (its image, network, class fields): the Drifted
/// condition's reason (e.g. `AMIDrift`) and a message naming what changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudDrift {
    pub reason: String,
    pub message: String,
}

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
    /// A call to the cloud's API failed (the provider's error code and message).
    #[error("{provider} call failed: {message}")]
    Api { provider: String, message: String },
    /// The cloud's rate for this call is reached: it is held back (no call made) until
    /// `retry_at`, the caller's turn.
    #[error("{provider} call held back until {retry_at}: {message}")]
    Throttled {
        provider: String,
        message: String,
        retry_at: jiff::Timestamp,
    },
}

impl CloudError {
    /// Whether the error means the instance is gone.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// When a throttled call may be made again.
    pub fn retry_at(&self) -> Option<jiff::Timestamp> {
        match self {
            Self::Throttled { retry_at, .. } => Some(*retry_at),
            _ => None,
        }
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

    /// Tags a registered `claim`'s instance with what only registration knows (for AWS: its
    /// Node's name, the NodeClaim's name and the cluster's, as Karpenter's `nodeclaim.tagging`),
    /// leaving tags the instance already has as they are. Returns whether tags were written
    /// (none are when the instance has them all); `NotFound` when the instance is gone.
    async fn tag_instance(&self, claim: &NodeClaim) -> Result<bool, CloudError>;

    /// The NodeClaim view of the instance with `provider_id`.
    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudError>;

    /// The NodeClaim view of every live instance this cluster launched.
    async fn list(&self) -> Result<Vec<NodeClaim>, CloudError>;

    /// Which of `provider_ids` are live (pending or running) instances this cluster launched:
    /// for callers that only need to know what still exists (termination asks once per pass
    /// about the instances it is terminating, instead of describing each one or listing the
    /// whole cluster). No provider IDs, no call.
    async fn live_among(
        &self,
        provider_ids: &std::collections::BTreeSet<String>,
    ) -> Result<std::collections::BTreeSet<String>, CloudError> {
        if provider_ids.is_empty() {
            return Ok(std::collections::BTreeSet::new());
        }
        Ok(self
            .list()
            .await?
            .into_iter()
            .filter_map(|claim| claim.status.and_then(|s| s.provider_id))
            .filter(|id| provider_ids.contains(id))
            .collect())
    }

    /// The instance types (with offerings) `pool` may launch through its node class, as the
    /// scheduler models them: shared, not copied (a catalog has over a thousand types, and the
    /// planner and the drift checks ask for it every pass).
    async fn instance_types(
        &self,
        pool: &NodePool,
    ) -> Result<std::sync::Arc<Vec<InstanceType>>, CloudError>;

    /// The first provider drift of `claim`, if any.
    async fn is_drifted(&self, claim: &NodeClaim) -> Result<Option<CloudDrift>, CloudError>;

    /// Marks `offering` unavailable for the provider's time-to-live, as an insufficient-capacity
    /// error does (after a spot interruption warning for it, `reason` `spot_interrupted`): the
    /// next launches avoid it. A local cache: no call to the cloud.
    fn mark_unavailable(&self, offering: &OfferingKey, reason: &str);

    /// The node conditions that make a node unhealthy, and for how long, for node repair
    /// (Karpenter's RepairPolicies; empty: the provider does not repair nodes).
    fn repair_policies(&self) -> &'static [driftwood_api::repair::RepairPolicy];
}
