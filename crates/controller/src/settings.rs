//! Controller settings (from flags and environment variables in the binary) and feature gates.

use std::collections::BTreeMap;
use std::time::Duration;

/// Why feature gates could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid feature gates {input:?}: {reason} (expected Name=true|false[,Name=true|false...])"
)]
pub struct FeatureGateError {
    pub input: String,
    pub reason: String,
}

/// Feature gates, as Karpenter's FEATURE_GATES ("Drift=true,SpotToSpotConsolidation=false").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureGates {
    /// Marking NodeClaims drifted (older Karpenter releases' gate). Default true.
    pub drift: bool,
    /// Gates driftwood does not use, kept for logging.
    pub other: BTreeMap<String, bool>,
}

/// Karpenter's gate for replacing a spot node with a cheaper spot node (default off).
pub const GATE_SPOT_TO_SPOT_CONSOLIDATION: &str = "SpotToSpotConsolidation";
/// Karpenter's gate for node repair (default off; alpha).
pub const GATE_NODE_REPAIR: &str = "NodeRepair";

impl Default for FeatureGates {
    fn default() -> Self {
        Self {
            drift: true,
            other: BTreeMap::new(),
        }
    }
}

impl FeatureGates {
    /// Logs, once at start, that `Drift=false` is honoured here although Karpenter v1 removed
    /// the gate (it is accepted there and ignored: drift is always on). Returns whether it
    /// warned.
    pub fn warn_if_drift_disabled(&self) -> bool {
        if self.drift {
            return false;
        }
        tracing::warn!(
            "feature gate Drift=false: driftwood will not mark NodeClaims drifted, as older \
             Karpenter releases did; Karpenter v1 removed this gate and ignores it (drift is \
             always on there). To stop drift replacing nodes with Karpenter v1 semantics, use a \
             disruption budget with reasons [Drifted] and nodes \"0\" instead"
        );
        true
    }

    /// Whether NodeRepair is on.
    pub fn node_repair(&self) -> bool {
        self.other.get(GATE_NODE_REPAIR).copied().unwrap_or(false)
    }

    /// Whether SpotToSpotConsolidation is on.
    pub fn spot_to_spot_consolidation(&self) -> bool {
        self.other
            .get(GATE_SPOT_TO_SPOT_CONSOLIDATION)
            .copied()
            .unwrap_or(false)
    }

    pub fn parse(input: &str) -> Result<Self, FeatureGateError> {
        let mut gates = Self::default();
        for part in input.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').ok_or_else(|| FeatureGateError {
                input: input.to_string(),
                reason: format!("{part:?} has no '='"),
            })?;
            let value = match value.trim() {
                "true" | "True" => true,
                "false" | "False" => false,
                other => {
                    return Err(FeatureGateError {
                        input: input.to_string(),
                        reason: format!("{name}: {other:?} is not true or false"),
                    });
                }
            };
            match name.trim() {
                "Drift" => gates.drift = value,
                other => {
                    gates.other.insert(other.to_string(), value);
                }
            }
        }
        Ok(gates)
    }
}

/// Everything the controllers are configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub cluster_name: String,
    /// The cluster CA bundle nodes bootstrap with (base64); part of the EC2NodeClass hash, so a
    /// new CA drifts every node, as in Karpenter v1.12+.
    pub cluster_ca_bundle: String,
    pub feature_gates: FeatureGates,
    /// Provisioning batches pending pods until none arrived for this long...
    pub batch_idle: Duration,
    /// ...or this long passed since the first.
    pub batch_max: Duration,
    /// The disruption loop's period.
    pub disruption_interval: Duration,
    /// How often every NodeClaim is re-checked for drift (besides on changes).
    pub drift_interval: Duration,
    /// How often EC2NodeClass status is re-resolved (new AMI releases are noticed within it).
    pub nodeclass_interval: Duration,
    /// A replacement not initialized within this long is rolled back (at least 10 minutes).
    pub replacement_timeout: Duration,
    /// A NodeClaim not registered this long after launch is deleted.
    pub registration_ttl: Duration,
    /// Instances with our tags but no NodeClaim are terminated after this long.
    pub gc_grace: Duration,
    /// Seed for generated names (NodeClaims), so a simulation is repeatable.
    pub name_seed: u64,
    /// Pacing of pods no PDB protects during drain (at most 25% of a controller's pods
    /// unavailable at once, at least one); `None` evicts them all at once, as Karpenter does.
    pub unprotected_pacing: Option<driftwood_disruption::drain::UnprotectedPacing>,
    /// Test-only, never set by a flag: delete a disrupted candidate without waiting for its
    /// replacements to initialize. It breaks the replacement-first rule on purpose, so tests
    /// can show that `driftwood chaos` catches and names the violation.
    pub unsafe_skip_replacement_wait: bool,
    /// The Prometheus HTTP API rollout policies' query gates ask (`--prometheus-url`); None:
    /// a query gate cannot be read and holds its wave.
    pub prometheus_url: Option<String>,
    /// The instance status controller only finds and counts the cluster's unhealthy
    /// instances (`karpenter_interruption_instance_status_unhealthy_total`, its log line) and
    /// leaves them alone: no event, no deadline, no deletion (Karpenter's
    /// InstanceStatusDryRun, a variable its tests set; here `--instance-status-dry-run`).
    pub instance_status_dry_run: bool,
}

/// The shortest replacement timeout driftwood accepts.
pub const MIN_REPLACEMENT_TIMEOUT: Duration = Duration::from_secs(600);

impl Default for Settings {
    fn default() -> Self {
        Self {
            cluster_name: String::new(),
            cluster_ca_bundle: String::new(),
            feature_gates: FeatureGates::default(),
            batch_idle: Duration::from_secs(1),
            batch_max: Duration::from_secs(10),
            disruption_interval: Duration::from_secs(10),
            drift_interval: Duration::from_secs(300),
            nodeclass_interval: Duration::from_secs(60),
            replacement_timeout: MIN_REPLACEMENT_TIMEOUT,
            registration_ttl: Duration::from_secs(900),
            gc_grace: Duration::from_secs(30),
            name_seed: 0,
            unprotected_pacing: Some(driftwood_disruption::drain::UnprotectedPacing::default()),
            prometheus_url: None,
            unsafe_skip_replacement_wait: false,
            instance_status_dry_run: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_gates() {
        assert!(FeatureGates::parse("").unwrap().drift);
        assert!(!FeatureGates::parse("Drift=false").unwrap().drift);
        let gates = FeatureGates::parse("Drift=true, SpotToSpotConsolidation=false").unwrap();
        assert!(gates.drift);
        assert_eq!(gates.other.get("SpotToSpotConsolidation"), Some(&false));
        let err = FeatureGates::parse("Drift=maybe").unwrap_err();
        assert!(err.to_string().contains("Drift"), "{err}");
        assert!(FeatureGates::parse("Drift").is_err());
    }

    /// Karpenter v1.15's gates are accepted: NodeRepair (off by default) turns repair on;
    /// TerminateFirstDrift and TerminateFirstRepair are accepted and kept (driftwood has no
    /// capacity-constrained pool for them to act on: no reservations, no static NodePools).
    #[test]
    fn karpenter_v1_15_gates_are_accepted() {
        assert!(!FeatureGates::default().node_repair());
        let gates = FeatureGates::parse(
            "NodeRepair=true,TerminateFirstDrift=true,TerminateFirstRepair=false,PodDeletionCostManagement=false",
        )
        .unwrap();
        assert!(gates.node_repair());
        assert_eq!(gates.other.get("TerminateFirstDrift"), Some(&true));
        assert!(!gates.spot_to_spot_consolidation());
    }

    #[test]
    fn only_a_disabled_drift_gate_warns() {
        assert!(
            FeatureGates::parse("Drift=false")
                .unwrap()
                .warn_if_drift_disabled()
        );
        assert!(
            !FeatureGates::parse("Drift=true")
                .unwrap()
                .warn_if_drift_disabled()
        );
        assert!(!FeatureGates::default().warn_if_drift_disabled());
    }
}
