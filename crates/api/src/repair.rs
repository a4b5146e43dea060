//! Node repair policies, as a cloud provider states them (Karpenter's `RepairPolicy`): a Node
//! condition in a given status (and, optionally, with a reason among some) for longer than a
//! toleration makes the node unhealthy, to be replaced within a drain bound.

/// One repair policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairPolicy {
    /// The Node condition's type, e.g. `Ready`.
    pub condition_type: &'static str,
    /// The status that is unhealthy, e.g. `False` or `Unknown`.
    pub condition_status: &'static str,
    /// The condition's reason must contain one of these (Karpenter's reason patterns of the
    /// `.*XID(64|74|…).*` form); empty: any reason, used only where no policy of the same type
    /// and status names the reason (the fallback).
    pub reason_contains: &'static [&'static str],
    /// How long the condition may hold before the node is repaired.
    pub toleration_seconds: i64,
    /// The longest the replaced node's drain may take (its pods forced out after); none: the
    /// NodeClaim's own terminationGracePeriod.
    pub termination_grace_seconds: Option<i64>,
}
