//! How long this cluster takes from a NodeClaim's creation to its node being initialized,
//! measured from its recent NodeClaims: the copy launches replacements at that pace, and the
//! ETA's range comes from the fastest and slowest of them.

use driftwood_api::NodeClaim;
use driftwood_api::condition::Conditions as _;
use driftwood_api::wellknown::CONDITION_INITIALIZED;
use serde::Serialize;
use std::time::Duration;

use super::live::LiveCluster;

/// When nothing in the cluster says otherwise: the embedded cluster's own launch (30 s) and
/// registration-to-ready (5 s) delays.
pub const DEFAULT_LAUNCH_TO_READY: Duration = Duration::from_secs(35);
/// How many of the newest NodeClaims are measured.
const SAMPLES: usize = 20;

/// The launch-to-ready time the preview assumes, and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaunchToReady {
    #[serde(serialize_with = "seconds")]
    pub median: Duration,
    #[serde(serialize_with = "seconds")]
    pub fastest: Duration,
    #[serde(serialize_with = "seconds")]
    pub slowest: Duration,
    /// NodeClaims measured (0: the default was used).
    pub measured: usize,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_secs())
}

impl LaunchToReady {
    /// How the report says it.
    pub fn describe(&self) -> String {
        if self.measured == 0 {
            format!(
                "launch to ready {} s (the default: no NodeClaim in this cluster has been initialized)",
                self.median.as_secs()
            )
        } else {
            format!(
                "launch to ready {} s (median of the {} newest initialized NodeClaims in this cluster; fastest {} s, slowest {} s)",
                self.median.as_secs(),
                self.measured,
                self.fastest.as_secs(),
                self.slowest.as_secs()
            )
        }
    }
}

/// Seconds from creation to Initialized, when the claim has both.
fn launch_to_ready_of(claim: &NodeClaim) -> Option<u64> {
    let created = claim.metadata.creation_timestamp.as_ref()?.0;
    let initialized = claim
        .condition(CONDITION_INITIALIZED)
        .filter(|c| c.is_true())?
        .last_transition_time
        .as_ref()?
        .0;
    u64::try_from(initialized.as_second() - created.as_second()).ok()
}

/// Measures the live cluster's newest initialized NodeClaims (the default without any).
pub fn launch_to_ready(live: &LiveCluster) -> LaunchToReady {
    let mut claims: Vec<NodeClaim> = live
        .nodeclaims
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    claims.sort_by_key(|c: &NodeClaim| {
        std::cmp::Reverse(c.metadata.creation_timestamp.as_ref().map(|t| t.0))
    });
    let mut samples: Vec<u64> = claims
        .iter()
        .filter_map(launch_to_ready_of)
        .take(SAMPLES)
        .collect();
    from_samples(&mut samples)
}

/// The median, fastest and slowest of `samples` (seconds).
pub fn from_samples(samples: &mut [u64]) -> LaunchToReady {
    if samples.is_empty() {
        return LaunchToReady {
            median: DEFAULT_LAUNCH_TO_READY,
            fastest: DEFAULT_LAUNCH_TO_READY * 4 / 5,
            slowest: DEFAULT_LAUNCH_TO_READY * 3 / 2,
            measured: 0,
        };
    }
    samples.sort_unstable();
    LaunchToReady {
        median: Duration::from_secs(samples[samples.len() / 2]),
        fastest: Duration::from_secs(samples[0]),
        slowest: Duration::from_secs(samples[samples.len() - 1]),
        measured: samples.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_and_spread_come_from_the_samples() {
        let t = from_samples(&mut [40, 35, 90, 38]);
        assert_eq!(t.median, Duration::from_secs(40));
        assert_eq!(t.fastest, Duration::from_secs(35));
        assert_eq!(t.slowest, Duration::from_secs(90));
        assert_eq!(t.measured, 4);
        assert!(t.describe().contains("median of the 4 newest"));
    }

    #[test]
    fn without_samples_the_default_is_used_and_said() {
        let t = from_samples(&mut []);
        assert_eq!(t.median, DEFAULT_LAUNCH_TO_READY);
        assert_eq!(t.measured, 0);
        assert!(t.describe().contains("the default"));
    }

    #[test]
    fn a_claim_is_measured_from_creation_to_initialized() {
        let claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "a", "creationTimestamp": "2026-11-26T00:00:00Z"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"conditions": [{"type": "Initialized", "status": "True", "reason": "Initialized", "message": "",
                "lastTransitionTime": "2026-11-26T00:00:42Z"}]},
        }))
        .unwrap();
        assert_eq!(launch_to_ready_of(&claim), Some(42));
    }
}
