//! Chaos runs: a scenario replayed under a seeded schedule of faults (cloud, API server,
//! controller crashes and failovers, nodes and pods), with named safety invariants checked
//! every virtual second and liveness checked once the faults are lifted; `driftwood chaos`
//! runs one scenario under many seeds and sums up. A failing seed replays exactly with
//! `driftwood demo --scenario … --faults … --seed S`.

pub mod campaign;
pub mod inject;
pub mod invariants;
pub mod log_check;
pub mod panics;
pub mod processes;
pub mod spec;

pub use campaign::{CampaignConfig, CampaignSummary, SeedOutcome, run_campaign, run_seed};
pub use inject::{Injected, Injector};
pub use invariants::{Invariant, Invariants, Violation};
pub use spec::{FaultKind, FaultSpec, FaultsSection, TimedFault};

use crate::embedded::Embedded;
use driftwood_controller::state::Snapshot;
use std::collections::{BTreeMap, BTreeSet};

/// What makes a run a chaos run.
#[derive(Debug, Clone, PartialEq)]
pub struct ChaosConfig {
    pub spec: FaultSpec,
    /// Seeds the fault schedule.
    pub seed: u64,
    /// Test-only: the controllers skip waiting for replacements (see
    /// `Settings::unsafe_skip_replacement_wait`), to show a violation is caught.
    pub unsafe_skip_replacement_wait: bool,
}

/// A chaos run in progress: the injector and the invariants.
pub struct ChaosRun {
    pub injector: Injector,
    pub invariants: Invariants,
    panics_at_start: u64,
}

/// What a chaos run found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChaosFindings {
    pub injected: Vec<Injected>,
    pub violations: Vec<Violation>,
    /// NodeClaims removed by expiry or terminationGracePeriod (forceful, not violations).
    pub forced_removals: usize,
}

impl ChaosRun {
    /// Starts injecting into `embedded` (the controllers become two replicas).
    pub fn start(config: &ChaosConfig, embedded: &mut Embedded) -> Self {
        panics::install_counter();
        drop(log_check::take_unnamed());
        let mut injector = Injector::start(config.spec.clone(), config.seed, embedded);
        injector.begin(embedded.cluster.clock().now().as_second());
        Self {
            injector,
            invariants: Invariants::default(),
            panics_at_start: panics::count_on_this_thread(),
        }
    }

    /// Before a virtual second passes: inject, undo, lift.
    pub async fn before_second(&mut self, now: i64, embedded: &mut Embedded, snapshot: &Snapshot) {
        self.injector.second(now, embedded, snapshot).await;
    }

    /// After a virtual second passed: the safety checks.
    pub fn after_second(&mut self, now: i64, embedded: &Embedded, snapshot: &Snapshot) {
        let instances = embedded.cluster.aws().instances();
        let terminated: BTreeSet<String> = self.injector.terminated_instances.clone();
        let injector = &self.injector;
        let faults_stopped = injector
            .window_end()
            .filter(|end| now >= *end && injector.lifted());
        self.invariants.check_second(
            now,
            snapshot,
            &instances,
            |pdb| injector.excused(pdb, now),
            &terminated,
            faults_stopped,
        );
    }

    /// Whether the faults window is still open at `now`.
    pub fn faults_active(&self, now: i64) -> bool {
        self.injector.active(now)
    }

    /// When the end state must hold by (window end + settle), once the window started.
    pub fn liveness_deadline(&self) -> Option<i64> {
        let settle = i64::try_from(self.injector.spec().settle.as_secs()).unwrap_or(i64::MAX);
        self.injector
            .window_end()
            .map(|end| end.saturating_add(settle))
    }

    /// What of the end state does not hold now.
    pub fn end_state_unmet(
        &self,
        embedded: &Embedded,
        snapshot: &Snapshot,
    ) -> Vec<(Invariant, String, String)> {
        let instances = embedded.cluster.aws().instances();
        let workloads = workload_readiness(embedded);
        invariants::end_state_unmet(snapshot, &instances, &workloads)
    }

    /// Ends the run: panics seen, and what was found.
    pub fn finish(mut self, now: i64) -> ChaosFindings {
        let panics = panics::count_on_this_thread() - self.panics_at_start;
        if panics > 0 {
            self.invariants.record(
                now,
                Invariant::NoPanic,
                "panic",
                format!("{panics} panic(s); see the log for where"),
            );
        }
        for line in log_check::take_unnamed() {
            self.invariants.record(
                now,
                Invariant::ErrorsNameObject,
                &line,
                format!("logged without naming its object: {line}"),
            );
        }
        ChaosFindings {
            injected: self.injector.injected,
            violations: self.invariants.violations,
            forced_removals: self.invariants.forced_removals.len(),
        }
    }
}

/// Ready and desired replicas of every Deployment and StatefulSet (namespace/name).
pub fn workload_readiness(embedded: &Embedded) -> BTreeMap<String, (i32, i32)> {
    use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
    let api = embedded.cluster.api_server();
    let mut out = BTreeMap::new();
    for d in api.list::<Deployment>(None) {
        let key = format!(
            "Deployment {}/{}",
            d.metadata.namespace.clone().unwrap_or_default(),
            d.metadata.name.clone().unwrap_or_default()
        );
        let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let ready = d
            .status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        out.insert(key, (ready, desired));
    }
    for s in api.list::<StatefulSet>(None) {
        let key = format!(
            "StatefulSet {}/{}",
            s.metadata.namespace.clone().unwrap_or_default(),
            s.metadata.name.clone().unwrap_or_default()
        );
        let desired = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let ready = s
            .status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        out.insert(key, (ready, desired));
    }
    out
}
