//! The safety and liveness invariants a chaos run checks, each by name: over the cluster as
//! the controllers' own cache would see it every virtual second, and over the end state once
//! the faults are lifted.

use driftwood_api::NodeClaim;
use driftwood_api::condition::Conditions;
use driftwood_api::lookup::ObjectLookups;
use driftwood_api::wellknown::{
    ANNOTATION_DISRUPTION_REPLACEMENTS, CONDITION_DISRUPTION_REASON, CONDITION_INITIALIZED,
    LABEL_NODEPOOL, REASON_DRIFTED,
};
use driftwood_aws::launcher::instance_id_from_provider_id;
use driftwood_aws::ports::Instance;
use driftwood_controller::state::Snapshot;
use driftwood_disruption::budget::allowed_disruptions;
use driftwood_disruption::cached_pod::CachedPod;
use driftwood_disruption::views::pdb_selects;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use std::collections::{BTreeMap, BTreeSet};

/// A named invariant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    /// No PDB below its desired healthy pods because of a voluntary disruption.
    PdbRespected,
    /// Never more nodes of a NodePool disrupting than its budgets allow.
    BudgetRespected,
    /// No disrupted node removed before its replacements were initialized.
    ReplacementFirst,
    /// Every workload pod is eventually replaced and Running (ready replicas = desired).
    NoPodLost,
    /// Every instance belongs to a NodeClaim, or is collected within the GC bound.
    NoOrphanInstance,
    /// No NodeClaim without a working instance and Node, no pool Node without a NodeClaim,
    /// once the faults stopped.
    NoLeakedNodeClaim,
    /// The scenario's rollout completes once the faults stop (within the stated bound).
    RolloutCompletes,
    /// Nothing panicked.
    NoPanic,
    /// Every warning and error logged names the object it is about.
    ErrorsNameObject,
    /// No controller replica's write reaches the API server while another holds the lease
    /// (process chaos, from the API server's audit).
    SingleWriter,
}

impl Invariant {
    /// Every invariant, in report order.
    pub const ALL: [Invariant; 10] = [
        Self::PdbRespected,
        Self::BudgetRespected,
        Self::ReplacementFirst,
        Self::NoPodLost,
        Self::NoOrphanInstance,
        Self::NoLeakedNodeClaim,
        Self::RolloutCompletes,
        Self::NoPanic,
        Self::ErrorsNameObject,
        Self::SingleWriter,
    ];

    /// The invariant's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::PdbRespected => "pdb-respected",
            Self::BudgetRespected => "budget-respected",
            Self::ReplacementFirst => "replacement-first",
            Self::NoPodLost => "no-pod-lost",
            Self::NoOrphanInstance => "no-orphan-instance",
            Self::NoLeakedNodeClaim => "no-leaked-nodeclaim",
            Self::RolloutCompletes => "rollout-completes",
            Self::NoPanic => "no-panic",
            Self::ErrorsNameObject => "error-names-object",
            Self::SingleWriter => "single-writer",
        }
    }
}

/// One violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Virtual time (seconds since the epoch).
    pub at: i64,
    pub invariant: Invariant,
    pub detail: String,
}

impl Violation {
    /// `HH:MM:SS invariant: detail`, as reports list it.
    pub fn line(&self) -> String {
        crate::demo::report::timeline_line(self.at, self.invariant.name(), &self.detail)
    }
}

/// An instance with our NodePool tag and no NodeClaim is an orphan after this long once the
/// faults stopped (two of garbage collection's 2-minute passes and its 30 s grace).
pub const ORPHAN_BOUND_SECONDS: i64 = 5 * 60;

/// What the checks remember between seconds.
#[derive(Debug, Default)]
pub struct Invariants {
    /// PDBs that have had their desired healthy pods since they were last excused.
    pdb_armed: BTreeMap<String, bool>,
    /// The most healthy pods each PDB has wanted: one that wants more than ever before (its
    /// workload scaled up) is judged again once it has them. (Not its expected pods: those
    /// move with every pod a drain replaces.)
    pdb_most_desired: BTreeMap<String, i32>,
    /// The NodeClaims (by uid) that carried a DisruptionReason last second, per NodePool: a
    /// budget is judged when a disruption starts, as budgets gate starting ones.
    disrupting_claims: BTreeMap<String, BTreeSet<String>>,
    /// When each instance without a NodeClaim was first seen so.
    orphan_since: BTreeMap<String, i64>,
    /// (invariant, subject) already reported: one violation per subject.
    reported: BTreeSet<(Invariant, String)>,
    /// NodeClaims (by uid) whose deletion has been judged for replacement-first.
    deletions_judged: BTreeSet<String>,
    /// NodeClaims removed by expiry or a terminationGracePeriod (forceful, reported apart).
    pub forced_removals: BTreeSet<String>,
    pub violations: Vec<Violation>,
}

/// The pods a PDB covers.
pub fn pods_of_pdb<'a>(snapshot: &'a Snapshot, pdb: &PodDisruptionBudget) -> Vec<&'a CachedPod> {
    snapshot
        .store
        .pods
        .values()
        .map(AsRef::as_ref)
        .filter(|p| pdb_selects(pdb, p))
        .collect()
}

/// The PDBs (namespace/name) covering any of `pods`.
pub fn pdbs_selecting(snapshot: &Snapshot, pods: &[&CachedPod]) -> Vec<String> {
    snapshot
        .store
        .pdbs
        .iter()
        .filter(|(_, pdb)| pods.iter().any(|p| pdb_selects(pdb, p)))
        .map(|(key, _)| key.clone())
        .collect()
}

/// Whether a pod is Ready and not terminating.
pub fn pod_ready(pod: &CachedPod) -> bool {
    crate::demo::track::pod_ready(pod)
}

fn expired_at_deletion(claim: &NodeClaim) -> bool {
    let Some(deleted) = claim.metadata.deletion_timestamp.as_ref() else {
        return false;
    };
    claim
        .spec
        .expire_after
        .as_ref()
        .and_then(|e| e.seconds().ok().flatten())
        .zip(claim.metadata.creation_timestamp.as_ref())
        .is_some_and(|(after, created)| {
            created.0.as_second() + i64::try_from(after).unwrap_or(i64::MAX)
                <= deleted.0.as_second()
        })
}

/// Whether an instance is one of a NodePool's (tagged `karpenter.sh/nodepool`) and not gone.
fn is_live_pool_instance(instance: &Instance) -> bool {
    instance.state != "terminated"
        && instance.state != "shutting-down"
        && instance.tags.iter().any(|t| t.key == LABEL_NODEPOOL)
}

/// The subject's provider ID form.
fn provider_id(instance: &Instance) -> String {
    driftwood_aws::launcher::provider_id(&instance.availability_zone, &instance.instance_id)
}

impl Invariants {
    fn violate(&mut self, at: i64, invariant: Invariant, subject: &str, detail: String) {
        if self.reported.insert((invariant, subject.to_string())) {
            self.violations.push(Violation {
                at,
                invariant,
                detail,
            });
        }
    }

    /// Records a violation found outside the per-second checks (liveness, panics).
    pub fn record(&mut self, at: i64, invariant: Invariant, subject: &str, detail: String) {
        self.violate(at, invariant, subject, detail);
    }

    /// The per-second safety checks. `excused(pdb, now)` says whether an involuntary fault
    /// disrupted a PDB's pods; `externally_terminated` are instances a fault terminated or interrupted;
    /// `faults_stopped` is when the cloud stopped failing calls (None: not yet), from when an
    /// orphan's time is counted (garbage collection cannot terminate it while TerminateInstances
    /// is being throttled or failed).
    pub fn check_second(
        &mut self,
        now: i64,
        snapshot: &Snapshot,
        instances: &[Instance],
        excused: impl Fn(&str) -> bool,
        externally_terminated: &BTreeSet<String>,
        faults_stopped: Option<i64>,
    ) {
        self.check_pdbs(now, snapshot, excused);
        self.check_budgets(now, snapshot);
        self.check_replacement_first(now, snapshot, externally_terminated);
        self.check_orphans(now, snapshot, instances, faults_stopped);
    }

    fn check_pdbs(&mut self, now: i64, snapshot: &Snapshot, excused: impl Fn(&str) -> bool) {
        for (key, pdb) in &snapshot.store.pdbs {
            let Some(status) = pdb.status.as_ref() else {
                continue;
            };
            let (current, desired) = (status.current_healthy, status.desired_healthy);
            let most = self.pdb_most_desired.entry(key.clone()).or_insert(desired);
            let grown = desired > *most;
            *most = (*most).max(desired);
            // Excused by a fault, or grown (a scale-up raises the pods wanted before they run).
            if excused(key) || grown {
                self.pdb_armed.insert(key.clone(), false);
                continue;
            }
            let armed = self.pdb_armed.entry(key.clone()).or_insert(false);
            if current >= desired {
                *armed = true;
            } else if *armed {
                *armed = false;
                let subject = format!("{key}@{now}");
                self.violate(
                    now,
                    Invariant::PdbRespected,
                    &subject,
                    format!("PDB {key}: {current} healthy pods < {desired} desired"),
                );
            }
        }
    }

    fn check_budgets(&mut self, now: i64, snapshot: &Snapshot) {
        for (name, pool) in &snapshot.store.nodepools {
            let claims: Vec<&NodeClaim> = snapshot
                .nodeclaims_by_nodepool
                .get(name)
                .into_iter()
                .flatten()
                .filter_map(|c| snapshot.store.nodeclaims.get(c))
                .map(AsRef::as_ref)
                .collect();
            let initialized: Vec<&&NodeClaim> = claims
                .iter()
                .filter(|c| c.is_true(CONDITION_INITIALIZED))
                .collect();
            let disrupting = initialized
                .iter()
                .filter(|c| c.condition(CONDITION_DISRUPTION_REASON).is_some())
                .count();
            // Judged in a second when a disruption started: a budget gates starting ones, so
            // one that tightens later (a window closing, the pool shrinking) stops new ones
            // without making those under way a violation.
            let now_disrupting: BTreeSet<String> = initialized
                .iter()
                .filter(|c| c.condition(CONDITION_DISRUPTION_REASON).is_some())
                .map(|c| {
                    c.metadata
                        .uid
                        .clone()
                        .or_else(|| c.metadata.name.clone())
                        .unwrap_or_default()
                })
                .collect();
            let before = self
                .disrupting_claims
                .insert(name.clone(), now_disrupting.clone())
                .unwrap_or_default();
            if now_disrupting.is_subset(&before) {
                continue;
            }
            // Each command was started within the budget of its own reason (Drifted, Empty,
            // Underutilized), counting every node disrupting for any reason: the loosest of the
            // reasons in flight bounds them all.
            let reasons: BTreeSet<String> = initialized
                .iter()
                .filter_map(|c| c.condition(CONDITION_DISRUPTION_REASON))
                .map(|c| {
                    c.reason
                        .clone()
                        .unwrap_or_else(|| REASON_DRIFTED.to_string())
                })
                .collect();
            // A budget's percentage is of the pool's nodes, not counting replacements that
            // stand in for nodes still being disrupted.
            let standing_in: BTreeSet<&str> = claims
                .iter()
                .filter(|c| {
                    c.condition(CONDITION_DISRUPTION_REASON).is_some()
                        || c.metadata.deletion_timestamp.is_some()
                })
                .filter_map(|c| c.annotation(ANNOTATION_DISRUPTION_REPLACEMENTS))
                .flat_map(|r| r.split(','))
                .collect();
            let total = initialized
                .iter()
                .filter(|c| !standing_in.contains(c.metadata.name.as_deref().unwrap_or_default()))
                .count();
            let limits: Vec<Option<usize>> = reasons
                .iter()
                .map(|r| allowed_disruptions(pool, r, total, 0, now).limit)
                .collect();
            // No reason in flight has an unlimited budget: the largest limit holds.
            let limit = if limits.iter().any(Option::is_none) {
                None
            } else {
                limits.into_iter().flatten().max()
            };
            if let Some(limit) = limit
                && disrupting > limit
            {
                let subject = format!("{name}@{now}");
                self.violate(
                    now,
                    Invariant::BudgetRespected,
                    &subject,
                    format!("NodePool {name}: {disrupting} nodes disrupting > budget {limit}"),
                );
            }
        }
    }

    fn check_replacement_first(
        &mut self,
        now: i64,
        snapshot: &Snapshot,
        externally_terminated: &BTreeSet<String>,
    ) {
        for (name, claim) in &snapshot.store.nodeclaims {
            if claim.metadata.deletion_timestamp.is_none() {
                continue;
            }
            // Judged once, when the deletion is first seen: replacements must be initialized
            // by then (a replacement's name may later be reused by an unrelated NodeClaim).
            let uid = claim.metadata.uid.clone().unwrap_or_else(|| name.clone());
            if !self.deletions_judged.insert(uid) {
                continue;
            }
            if expired_at_deletion(claim) {
                self.forced_removals.insert(name.clone());
                continue;
            }
            let gone_outside = claim
                .status
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .is_some_and(|p| {
                    instance_id_from_provider_id(p)
                        .is_some_and(|id| externally_terminated.contains(id))
                });
            if gone_outside {
                continue;
            }
            let replacements = claim.annotation(ANNOTATION_DISRUPTION_REPLACEMENTS);
            for replacement in replacements
                .into_iter()
                .flat_map(|r| r.split(','))
                .filter(|r| !r.is_empty())
            {
                if let Some(r) = snapshot.store.nodeclaims.get(replacement)
                    && !r.is_true(CONDITION_INITIALIZED)
                {
                    self.violate(
                        now,
                        Invariant::ReplacementFirst,
                        name,
                        format!(
                            "NodeClaim {name} (NodePool {}) deleted before its replacement {replacement} was initialized",
                            claim.nodepool_name().unwrap_or("?")
                        ),
                    );
                }
            }
        }
    }

    fn check_orphans(
        &mut self,
        now: i64,
        snapshot: &Snapshot,
        instances: &[Instance],
        faults_stopped: Option<i64>,
    ) {
        let mut still = BTreeSet::new();
        for instance in instances.iter().filter(|i| is_live_pool_instance(i)) {
            let pid = provider_id(instance);
            if snapshot.nodeclaim_by_provider_id.contains_key(&pid) {
                continue;
            }
            still.insert(instance.instance_id.clone());
            let seen = *self
                .orphan_since
                .entry(instance.instance_id.clone())
                .or_insert(now);
            let Some(stopped) = faults_stopped else {
                continue;
            };
            let since = seen.max(stopped);
            if now - since > ORPHAN_BOUND_SECONDS {
                let id = instance.instance_id.clone();
                self.violate(
                    now,
                    Invariant::NoOrphanInstance,
                    &id,
                    format!(
                        "instance {id} ({}) has had no NodeClaim for {}s",
                        instance.instance_type,
                        now - since
                    ),
                );
            }
        }
        self.orphan_since.retain(|id, _| still.contains(id));
    }
}

/// What of the end state does not hold yet: (invariant, subject, what), given the
/// Deployments' (name → (ready, desired)).
pub fn end_state_unmet(
    snapshot: &Snapshot,
    instances: &[Instance],
    workloads: &BTreeMap<String, (i32, i32)>,
) -> Vec<(Invariant, String, String)> {
    let mut out = Vec::new();
    for (name, (ready, desired)) in workloads {
        if ready < desired {
            out.push((
                Invariant::NoPodLost,
                name.clone(),
                format!("{name}: {ready}/{desired} replicas ready"),
            ));
        }
    }
    for (name, claim) in &snapshot.store.nodeclaims {
        if claim.metadata.deletion_timestamp.is_some() {
            out.push((
                Invariant::NoLeakedNodeClaim,
                name.clone(),
                format!("NodeClaim {name} still terminating"),
            ));
        } else if !claim.is_true(CONDITION_INITIALIZED) {
            out.push((
                Invariant::NoLeakedNodeClaim,
                name.clone(),
                format!("NodeClaim {name} never initialized"),
            ));
        }
    }
    for (name, node) in &snapshot.store.nodes {
        let pooled = node
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(LABEL_NODEPOOL));
        let pid = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default();
        if pooled && !snapshot.nodeclaim_by_provider_id.contains_key(&pid) {
            out.push((
                Invariant::NoLeakedNodeClaim,
                name.clone(),
                format!("Node {name} has no NodeClaim"),
            ));
        }
    }
    for instance in instances.iter().filter(|i| is_live_pool_instance(i)) {
        if !snapshot
            .nodeclaim_by_provider_id
            .contains_key(&provider_id(instance))
        {
            out.push((
                Invariant::NoOrphanInstance,
                instance.instance_id.clone(),
                format!("instance {} has no NodeClaim", instance.instance_id),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct() {
        let names: BTreeSet<&str> = Invariant::ALL.iter().map(|i| i.name()).collect();
        assert_eq!(names.len(), Invariant::ALL.len());
    }

    /// A snapshot holding one PDB `default/web` with this status.
    fn with_pdb(current: i32, desired: i32, expected: i32) -> Snapshot {
        let mut s = Snapshot::default();
        let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"currentHealthy": current, "desiredHealthy": desired,
                       "expectedPods": expected, "disruptionsAllowed": 0}
        }))
        .unwrap();
        s.apply("default/web".to_string(), std::sync::Arc::new(pdb));
        s
    }

    fn pdb_violations(seconds: &[(i32, i32, i32)]) -> usize {
        let mut invariants = Invariants::default();
        for (at, &(current, desired, expected)) in seconds.iter().enumerate() {
            let at = i64::try_from(at).unwrap();
            invariants.check_pdbs(at, &with_pdb(current, desired, expected), |_| false);
        }
        invariants.violations.len()
    }

    /// A drain that takes a PDB below its desired healthy pods is reported even while its
    /// expected pods move (a pod gone and its replacement created between two samples); a
    /// scale-up that raises the pods wanted before they run is not, until they have run.
    #[test]
    fn a_pdb_broken_mid_drain_is_reported_and_a_scale_up_is_not() {
        // (current healthy, desired healthy, expected pods) per second.
        assert_eq!(pdb_violations(&[(3, 2, 3), (2, 2, 3), (3, 2, 3)]), 0);
        assert_eq!(pdb_violations(&[(3, 2, 3), (1, 2, 2), (2, 2, 3)]), 1);
        // maxUnavailable 1: desired follows expected down and back up during a drain.
        assert_eq!(pdb_violations(&[(3, 2, 3), (1, 1, 2), (1, 2, 3)]), 1);
        // Scaled from 3 to 6 pods under maxUnavailable 1: wanted 5 before the new ones run.
        assert_eq!(pdb_violations(&[(3, 2, 3), (3, 5, 6), (5, 5, 6)]), 0);
        assert_eq!(
            pdb_violations(&[(3, 2, 3), (3, 5, 6), (5, 5, 6), (4, 5, 6)]),
            1,
            "judged again once the scaled-up PDB is whole"
        );
    }
}
