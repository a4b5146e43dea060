//! The provider's failed launches (each CreateFleet error, by zone, zone ID, capacity type and
//! Karpenter's reason for it) and failed terminations (by zone and zone ID), counted for
//! Karpenter's `karpenter_cloudprovider_instance_{launch,termination}_failures_total`.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The reason Karpenter's AWS provider gives a failed launch (its `ToReasonMessage`), from the
/// EC2 error's code and message: the first of its checks, in its order, that the text
/// `CODE: MESSAGE` matches; `LaunchFailed` when none does. Capacity and quota errors come last,
/// as in Karpenter.
pub fn launch_failure_reason(code: &str, message: &str) -> &'static str {
    let text = format!("{code}: {message}");
    let has = |needle: &str| text.contains(needle);
    if has("AuthFailure.ServiceLinkedRoleCreationNotPermitted") {
        return "SpotSLRCreationFailed";
    }
    if has("UnauthorizedOperation") || has("AccessDenied") || has("AuthFailure") {
        return if has("Not authorized for images")
            && !has("with an explicit deny in a permissions boundary")
            && !has("with an explicit deny in a service control policy")
        {
            "AMIAuthorizationFailure"
        } else {
            "Unauthorized"
        };
    }
    const ORDERED: [(&[&str], &str); 13] = [
        (
            &["InvalidParameter", "belong to different networks"],
            "SecurityGroupSubnetVPCMismatch",
        ),
        (
            &["iamInstanceProfile.name is invalid"],
            "InstanceProfileNameInvalid",
        ),
        (
            &["InvalidLaunchTemplateId.NotFound"],
            "LaunchTemplateNotFound",
        ),
        (&["User data is limited to"], "UserDataSizeLimitExceeded"),
        (&["InvalidAMIID.Malformed"], "InvalidAMIID"),
        (&["InvalidAMIID.NotFound"], "AMINotFound"),
        (&["RequestLimitExceeded"], "RequestLimitExceeded"),
        (&["InternalError"], "InternalError"),
        (&["not eligible for Free Tier"], "FreeTierIneligible"),
        (&["MaxFleetCountExceeded"], "FleetQuotaExceeded"),
        (&["PendingVerification"], "AccountPendingVerification"),
        (&["MaxSpotInstanceCountExceeded"], "SpotQuotaExceeded"),
        (&["VcpuLimitExceeded"], "VCPULimitExceeded"),
    ];
    ORDERED
        .iter()
        .find(|(needles, _)| needles.iter().all(|n| has(n)))
        .map_or_else(
            || {
                if has("InsufficientFreeAddressesInSubnet") {
                    "InsufficientFreeAddressesInSubnet"
                } else {
                    "LaunchFailed"
                }
            },
            |(_, reason)| reason,
        )
}

/// What a failed launch is counted by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LaunchFailure {
    pub zone: String,
    pub zone_id: String,
    pub capacity_type: String,
    pub reason: &'static str,
}

/// What a failed termination is counted by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TerminationFailure {
    pub zone: String,
    pub zone_id: String,
}

/// The counts, shared by the provider (which adds) and the metrics (which read).
#[derive(Debug, Default)]
pub struct FailureCounts {
    launches: Mutex<BTreeMap<LaunchFailure, u64>>,
    terminations: Mutex<BTreeMap<TerminationFailure, u64>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every write is one increment: a panic elsewhere leaves the counts usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FailureCounts {
    /// Counts one failed launch.
    pub fn launch_failed(&self, failure: LaunchFailure) {
        *lock(&self.launches).entry(failure).or_default() += 1;
    }

    /// Counts one failed termination.
    pub fn termination_failed(&self, failure: TerminationFailure) {
        *lock(&self.terminations).entry(failure).or_default() += 1;
    }

    /// Every failed launch counted so far, by what it is counted by.
    pub fn launches(&self) -> Vec<(LaunchFailure, u64)> {
        lock(&self.launches)
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    /// Every failed termination counted so far.
    pub fn terminations(&self) -> Vec<(TerminationFailure, u64)> {
        lock(&self.terminations)
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Karpenter's AWS provider errors suite ("ToReasonMessage"): each EC2 failure maps to its
    /// reason, the special cases of a broad one first, capacity and quota errors last, and
    /// anything else is LaunchFailed.
    #[test]
    fn ec2_failures_read_as_karpenters_reasons() {
        for (code, message, reason) in [
            (
                "AuthFailure.ServiceLinkedRoleCreationNotPermitted",
                "no",
                "SpotSLRCreationFailed",
            ),
            (
                "UnauthorizedOperation",
                "You are not authorized",
                "Unauthorized",
            ),
            (
                "AuthFailure",
                "Not authorized for images: [ami-1]",
                "AMIAuthorizationFailure",
            ),
            (
                "UnauthorizedOperation",
                "Not authorized for images: with an explicit deny in a service control policy",
                "Unauthorized",
            ),
            (
                "InvalidParameter",
                "Security group sg-1 and subnet subnet-1 belong to different networks.",
                "SecurityGroupSubnetVPCMismatch",
            ),
            ("InvalidParameter", "something else", "LaunchFailed"),
            (
                "InvalidParameterValue",
                "Value (p) for parameter iamInstanceProfile.name is invalid.",
                "InstanceProfileNameInvalid",
            ),
            ("InvalidAMIID.NotFound", "gone", "AMINotFound"),
            ("InvalidAMIID.Malformed", "bad", "InvalidAMIID"),
            ("RequestLimitExceeded", "slow down", "RequestLimitExceeded"),
            ("VcpuLimitExceeded", "quota", "VCPULimitExceeded"),
            ("MaxSpotInstanceCountExceeded", "quota", "SpotQuotaExceeded"),
            (
                "InsufficientFreeAddressesInSubnet",
                "full",
                "InsufficientFreeAddressesInSubnet",
            ),
            ("InsufficientInstanceCapacity", "none left", "LaunchFailed"),
            ("Unsupported", "not in this zone", "LaunchFailed"),
        ] {
            assert_eq!(
                launch_failure_reason(code, message),
                reason,
                "{code}: {message}"
            );
        }
    }

    #[test]
    fn failures_are_counted_by_their_labels() {
        let counts = FailureCounts::default();
        let ice = LaunchFailure {
            zone: "us-west-2a".into(),
            zone_id: "usw2-az1".into(),
            capacity_type: "spot".into(),
            reason: "LaunchFailed",
        };
        counts.launch_failed(ice.clone());
        counts.launch_failed(ice.clone());
        counts.termination_failed(TerminationFailure {
            zone: "us-west-2b".into(),
            zone_id: "usw2-az2".into(),
        });
        assert_eq!(counts.launches(), [(ice, 2)]);
        assert_eq!(counts.terminations().len(), 1);
    }
}
