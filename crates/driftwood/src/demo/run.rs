//! Runs a scenario on the embedded cluster with the real controllers: applies its manifests,
//! then its steps one virtual second at a time, observing the cluster after every second
//! (timeline, node states, availability) and failing with the step's name when a `waitFor`
//! times out or an `expect` does not hold.

use super::bundle::Files;
use super::check::{self, DeploymentReadiness};
use super::logs::LogClock;
use super::report::Summary;
use super::scenario::{Action, PatchStep, Scenario, Source, Step, default_api_version};
use super::tables;
use super::template::{apply_edits, fill_expressions};
use super::track::{EventKind, Frame, Tracker};
use crate::chaos::invariants::Invariants;
use crate::chaos::{ChaosConfig, ChaosFindings, ChaosRun, Invariant};
use crate::embedded::{Embedded, fill};
use anyhow::Context as _;
use driftwood_controller::state::{Snapshot, spawn_watchers};
use driftwood_controller::{ClusterState, FeatureGates, Settings};
use driftwood_sim::SimClusterOptions;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::Duration;

/// How virtual time relates to wall time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// As fast as the machine goes (tokio paused time).
    Virtual,
    /// Paused time, with this many virtual seconds per wall second.
    Speed(f64),
    /// The runtime is not paused: virtual time is wall time.
    Realtime,
}

/// How to run.
#[derive(Clone)]
pub struct RunConfig {
    pub pace: Pace,
    /// Redraw a one-line progress display after every virtual second.
    pub progress: bool,
    /// Where the log layer reads its timestamps from (set once the cluster's clock exists).
    pub log_clock: Option<LogClock>,
    /// Run under faults, checking the chaos invariants.
    pub chaos: Option<ChaosConfig>,
    /// Test-only: the controllers skip waiting for replacements (see
    /// `Settings::unsafe_skip_replacement_wait`), to show the per-second safety checks of a
    /// fault-free run catch it.
    pub unsafe_skip_replacement_wait: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            pace: Pace::Virtual,
            progress: false,
            log_clock: None,
            chaos: None,
            unsafe_skip_replacement_wait: false,
        }
    }
}

/// A step (or the scenario's setup) that did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step {index} ({name}): {message}")]
pub struct StepFailure {
    /// 1-based; 0 for the scenario's `manifests`.
    pub index: usize,
    pub name: String,
    pub message: String,
}

/// A finished run: the summary, and the cluster (still running, for `--serve`).
pub struct Outcome {
    pub summary: Summary,
    pub failure: Option<StepFailure>,
    /// What a chaos run found (None without faults).
    pub chaos: Option<ChaosFindings>,
    pub embedded: Embedded,
    pub observer: ClusterState,
    observer_tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Outcome {
    fn drop(&mut self) {
        for task in &self.observer_tasks {
            task.abort();
        }
    }
}

/// The scenario's cluster options.
pub fn cluster_options(scenario: &Scenario) -> anyhow::Result<SimClusterOptions> {
    let defaults = SimClusterOptions::default();
    let cloud = &scenario.cloud;
    let start_time = match &cloud.start_time {
        Some(text) => text
            .parse()
            .with_context(|| format!("cloud.startTime: {text:?} is not an RFC 3339 time"))?,
        None => defaults.start_time,
    };
    Ok(SimClusterOptions {
        kubernetes_version: scenario.kubernetes_version.clone(),
        seed: cloud.seed,
        cluster_name: cloud.cluster_name.clone(),
        start_time,
        node_ready_delay: cloud.node_ready_delay.unwrap_or(defaults.node_ready_delay),
        pod_start_delay: cloud.pod_start_delay.unwrap_or(defaults.pod_start_delay),
        machine_launch_delay: cloud
            .machine_launch_delay
            .unwrap_or(defaults.machine_launch_delay),
        machine_termination_delay: cloud
            .machine_termination_delay
            .unwrap_or(defaults.machine_termination_delay),
        ..defaults
    })
}

/// The scenario's controller settings.
pub fn controller_settings(scenario: &Scenario) -> anyhow::Result<Settings> {
    let mut settings = Settings::default();
    if let Some(gates) = &scenario.controller.feature_gates {
        settings.feature_gates = FeatureGates::parse(gates).context("controller.featureGates")?;
        settings.feature_gates.warn_if_drift_disabled();
    }
    if scenario.controller.evict_unprotected_at_once {
        settings.unprotected_pacing = None;
    }
    Ok(settings)
}

/// The state of a run between steps.
struct Runner<'a> {
    scenario: &'a Scenario,
    files: &'a Files,
    config: &'a RunConfig,
    out: &'a mut dyn Write,
    embedded: Embedded,
    observer: ClusterState,
    tracker: Tracker,
    chaos: Option<ChaosRun>,
    /// Without faults, the per-second safety invariants (PDBs, budgets, replacement first),
    /// judged by the same rules as a chaos run: any violation fails the run.
    safety: Option<Invariants>,
    /// The simulated account's API calls during the manifests and each step.
    aws_calls: Vec<super::aws_calls::StepCalls>,
    /// What a `preview` step predicted.
    predicted: Option<crate::preview::Preview>,
}

/// Runs `scenario`, printing what a user should see to `out`.
pub async fn run(
    scenario: &Scenario,
    files: &Files,
    config: &RunConfig,
    out: &mut dyn Write,
) -> anyhow::Result<Outcome> {
    let options = cluster_options(scenario)?;
    let mut settings = controller_settings(scenario)?;
    settings.unsafe_skip_replacement_wait = config.unsafe_skip_replacement_wait
        || config
            .chaos
            .as_ref()
            .is_some_and(|c| c.unsafe_skip_replacement_wait);
    let mut embedded = Embedded::start(options, settings).await?;
    let chaos = config
        .chaos
        .as_ref()
        .map(|c| ChaosRun::start(c, &mut embedded));
    if let Some(log_clock) = &config.log_clock {
        log_clock.set(embedded.cluster.clock());
    }
    let observer = ClusterState::new();
    let observer_tasks = spawn_watchers(&embedded.cluster.client(), &observer);
    observer.wait_synced().await;
    let mut runner = Runner {
        scenario,
        files,
        config,
        out,
        embedded,
        observer,
        tracker: Tracker::new(),
        safety: chaos.is_none().then(Invariants::default),
        chaos,
        aws_calls: Vec::new(),
        predicted: None,
    };
    let started = runner.now();
    let mut failure = runner.run_all().await;
    // A broken safety invariant is what the run failed of, whatever a step said after it.
    if let Some(safety) = runner.safety.as_ref()
        && let Some(violation) = safety.violations.first()
    {
        let more = match safety.violations.len() - 1 {
            0 => String::new(),
            n => format!(" (and {n} more)"),
        };
        let then = failure
            .as_ref()
            .map(|f| format!("; then {f}"))
            .unwrap_or_default();
        failure = Some(StepFailure {
            index: scenario.steps.len() + 1,
            name: "safety, checked every second".to_string(),
            message: format!(
                "{} at {}: {}{more}{then}",
                violation.invariant.name(),
                super::report::clock_time(violation.at),
                violation.detail
            ),
        });
    }
    if runner.chaos.is_some() {
        runner.settle(failure.as_ref()).await;
    }
    runner.clear_progress();
    let now = runner.now();
    let findings = runner.chaos.take().map(|c| c.finish(now));
    let mut summary = Summary::new(
        scenario,
        started,
        runner.now(),
        &runner.tracker,
        failure.as_ref().map(ToString::to_string),
    );
    summary.aws_calls = std::mem::take(&mut runner.aws_calls);
    summary.predicted = runner
        .predicted
        .as_ref()
        .map(|p| super::report::PredictedVsActual::new(p, &runner.tracker));
    Ok(Outcome {
        summary,
        failure,
        chaos: findings,
        embedded: runner.embedded,
        observer: runner.observer,
        observer_tasks,
    })
}

impl Runner<'_> {
    fn now(&self) -> i64 {
        self.embedded.cluster.clock().now().as_second()
    }

    fn snapshot(&self) -> Snapshot {
        self.observer.snapshot()
    }

    fn say(&mut self, text: &str) {
        self.clear_progress();
        let _ = writeln!(self.out, "{text}");
    }

    fn clear_progress(&mut self) {
        if self.config.progress {
            let _ = write!(self.out, "\r\x1b[K");
            let _ = self.out.flush();
        }
    }

    async fn run_all(&mut self) -> Option<StepFailure> {
        let scenario = self.scenario;
        let clock = super::report::clock_time(self.now());
        let pace = match self.config.pace {
            Pace::Virtual => "virtual clock".to_string(),
            Pace::Speed(x) => format!("virtual clock at {x}x"),
            Pace::Realtime => "wall-clock time".to_string(),
        };
        self.say(&format!(
            "{clock} driftwood demo: {} (Kubernetes {}, simulated EC2, {pace})",
            scenario.name, scenario.kubernetes_version
        ));
        for (i, image) in scenario.cloud.crash_loop_images.iter().enumerate() {
            match self.fill(image, None) {
                Ok(id) => self.embedded.cluster.aws().set_image_fault(
                    id.trim(),
                    Some(driftwood_sim_aws::faults::NodeFault::CrashLoopPods),
                ),
                Err(message) => {
                    return Some(StepFailure {
                        index: 0,
                        name: format!("cloud.crashLoopImages[{i}]"),
                        message,
                    });
                }
            }
        }
        let (mut at, mut calls) = (self.now(), self.embedded.cluster.aws().api_calls());
        for (i, source) in scenario.manifests.iter().enumerate() {
            if let Err(message) = self.apply(source).await {
                return Some(StepFailure {
                    index: 0,
                    name: format!("manifests[{i}]"),
                    message,
                });
            }
        }
        self.count_aws_calls("manifests", &mut at, &mut calls);
        for (i, step) in scenario.steps.iter().enumerate() {
            let result = self.step(step).await;
            self.count_aws_calls(&step.name, &mut at, &mut calls);
            if let Err(message) = result {
                return Some(StepFailure {
                    index: i + 1,
                    name: step.name.clone(),
                    message,
                });
            }
        }
        None
    }

    /// Records the simulated account's calls since `at`/`calls` under `step`, and moves them on.
    fn count_aws_calls(
        &mut self,
        step: &str,
        at: &mut i64,
        calls: &mut std::collections::BTreeMap<String, driftwood_sim_aws::calls::CallCount>,
    ) {
        let now = self.now();
        let after = self.embedded.cluster.aws().api_calls();
        self.aws_calls.push(super::aws_calls::StepCalls::between(
            step,
            now - *at,
            calls,
            &after,
        ));
        *at = now;
        *calls = after;
    }

    async fn step(&mut self, step: &Step) -> Result<(), String> {
        match &step.action {
            Action::Apply(source) => {
                self.begin_rollout();
                let applied = self.apply(source).await?;
                let at = self.now();
                self.tracker.note(
                    at,
                    EventKind::ChangeApplied,
                    &applied.join(", "),
                    &step.name,
                );
                Ok(())
            }
            Action::Patch(patch) => {
                self.begin_rollout();
                self.patch(patch).await?;
                let at = self.now();
                let subject = format!("{}/{}", patch.kind, patch.name);
                self.tracker
                    .note(at, EventKind::ChangeApplied, &subject, &step.name);
                Ok(())
            }
            Action::PublishAmi(publish) => {
                self.begin_rollout();
                let at = self.embedded.cluster.clock().now()
                    + k8s_openapi::jiff::SignedDuration::try_from(
                        publish.after.unwrap_or_default(),
                    )
                    .unwrap_or_default();
                self.embedded.cluster.aws().publish_release_at(
                    &publish.release,
                    &publish.bottlerocket,
                    at,
                );
                let clock = super::report::clock_time(self.now());
                self.say(&format!(
                    "{clock} published EKS AMI release {} (Bottlerocket {}) in the simulated account",
                    publish.release, publish.bottlerocket
                ));
                self.tracker.note(
                    at.as_second(),
                    EventKind::AmiPublished,
                    &publish.release,
                    &step.name,
                );
                Ok(())
            }
            Action::WaitFor(wait) => {
                // Under faults the liveness bound is at least `settle` after the faults stop: a
                // machine broken just before they stopped takes the registration timeout
                // (15 min) and a relaunch to replace.
                let limit = match &self.chaos {
                    Some(chaos) => step.timeout.max(chaos.injector.spec().settle).as_secs(),
                    None => step.timeout.as_secs(),
                };
                let mut waited = 0;
                loop {
                    let deployments = self.deployments(wait.deployment_ready.as_deref());
                    let unmet = check::unmet(wait, &self.snapshot(), &self.tracker, &deployments);
                    if unmet.is_empty() {
                        return Ok(());
                    }
                    if waited >= limit {
                        let message = format!(
                            "timed out after {} of virtual time waiting for: {}",
                            super::duration::compact(limit as i64),
                            unmet.join("; ")
                        );
                        let now = self.now();
                        if let Some(chaos) = self.chaos.as_mut() {
                            chaos.invariants.record(
                                now,
                                Invariant::RolloutCompletes,
                                &step.name,
                                format!(
                                    "step {:?} {message} (after the faults stopped)",
                                    step.name
                                ),
                            );
                        }
                        return Err(message);
                    }
                    // Under faults, a wait's timeout counts from when the faults stop: the
                    // liveness bound is the step's timeout after the window.
                    let now = self.now();
                    let counting = self.chaos.as_ref().is_none_or(|c| !c.faults_active(now));
                    self.tick().await;
                    if counting {
                        waited += 1;
                    }
                }
            }
            Action::AdvanceTime(duration) => {
                for _ in 0..duration.as_secs() {
                    self.tick().await;
                }
                Ok(())
            }
            Action::Expect(expect) => {
                let failed = check::failed(expect, &self.snapshot(), &self.tracker);
                if failed.is_empty() {
                    Ok(())
                } else if self.chaos.is_some() {
                    // Under faults, nodes and pods are also taken away involuntarily (a node
                    // NotReady, an instance terminated): the scenario's expectations describe a
                    // fault-free run, the chaos invariants judge this one.
                    let clock = super::report::clock_time(self.now());
                    self.say(&format!(
                        "{clock} expectation not held under faults (not enforced): {}",
                        failed.join("; ")
                    ));
                    Ok(())
                } else {
                    Err(failed.join("; "))
                }
            }
            Action::Show(_) => {
                self.show_tables();
                Ok(())
            }
            Action::Preview(source) => {
                let (label, text) = self.source_text(source)?;
                let clock = super::report::clock_time(self.now());
                let options = crate::preview::PreviewOptions {
                    at: Some(self.embedded.cluster.clock().now()),
                    horizon: step.timeout,
                    ..crate::preview::PreviewOptions::default()
                };
                let shown = label.trim_start_matches("../").to_string();
                let preview = crate::preview::preview(
                    &self.embedded.cluster.client(),
                    &text,
                    std::slice::from_ref(&shown),
                    &options,
                )
                .await
                .map_err(|e| format!("previewing {shown}: {e:#}"))?;
                let body: Vec<String> = preview.text().lines().map(|l| format!("  {l}")).collect();
                self.say(&format!(
                    "{clock} $ driftwood preview -f {shown}\n{}",
                    body.join("\n")
                ));
                self.predicted = Some(preview);
                Ok(())
            }
        }
    }

    /// The first change of the scenario's steps starts the rollout.
    fn begin_rollout(&mut self) {
        let at = self.now();
        let snapshot = self.snapshot();
        self.tracker.start_rollout(at, &snapshot);
    }

    /// After the steps of a chaos run: let the faults window run out, then wait (up to the
    /// liveness bound) for the end state — every workload ready, no NodeClaim leaked, no
    /// instance orphaned — and record what never came as violations.
    async fn settle(&mut self, failure: Option<&StepFailure>) {
        let Some(deadline) = self.chaos.as_ref().and_then(ChaosRun::liveness_deadline) else {
            return;
        };
        if failure.is_some_and(|f| f.index == 0) {
            return;
        }
        loop {
            let now = self.now();
            let snapshot = self.snapshot();
            let Some(chaos) = self.chaos.as_mut() else {
                return;
            };
            if !chaos.faults_active(now) && chaos.injector.lifted() {
                let unmet = chaos.end_state_unmet(&self.embedded, &snapshot);
                if unmet.is_empty() {
                    return;
                }
                if now >= deadline {
                    let state = chaos.injector.leader_state();
                    let clock = super::report::clock_time(now);
                    let _ = writeln!(
                        self.out,
                        "{clock} controller replicas at the liveness deadline:\n{state}"
                    );
                    for (invariant, subject, what) in unmet {
                        chaos.invariants.record(
                            now,
                            invariant,
                            &subject,
                            format!("{what} at the liveness deadline"),
                        );
                    }
                    return;
                }
            }
            self.tick().await;
        }
    }

    /// One virtual second: sleep, observe, redraw progress.
    async fn tick(&mut self) {
        if let Pace::Speed(speed) = self.config.pace
            && speed > 0.0
        {
            std::thread::sleep(Duration::from_secs_f64(1.0 / speed));
        }
        if let Some(chaos) = self.chaos.as_mut() {
            let now = self.embedded.cluster.clock().now().as_second();
            let snapshot = self.observer.snapshot();
            chaos
                .before_second(now, &mut self.embedded, &snapshot)
                .await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let at = self.now();
        let snapshot = self.snapshot();
        self.tracker.observe(at, &snapshot);
        if let Some(chaos) = self.chaos.as_mut() {
            chaos.after_second(at, &self.embedded, &snapshot);
        }
        if let Some(safety) = self.safety.as_mut() {
            // No fault excuses a PDB or terminates an instance; orphans are judged only under
            // faults (their bound counts from when the faults stopped), so no instance is read.
            safety.check_second(at, &snapshot, &[], |_| false, &BTreeSet::new(), None);
        }
        if self.config.progress
            && let Some(frame) = self.tracker.frames.last().cloned()
        {
            self.draw_progress(&frame);
        }
    }

    fn draw_progress(&mut self, frame: &Frame) {
        let elapsed = frame.at - self.tracker.rollout_start.unwrap_or(frame.at);
        let line = format!(
            "{} +{:<8} old {} · drifted {} · replacing {} · draining {} · new {} · done {} · ready pods {}",
            super::report::clock_time(frame.at),
            super::duration::compact(elapsed),
            frame.old,
            frame.drifted,
            frame.replacing,
            frame.draining,
            frame.new,
            frame.done,
            frame.ready_pods
        );
        let _ = write!(self.out, "\r\x1b[K{line}");
        let _ = self.out.flush();
    }

    fn deployments(&self, name: Option<&str>) -> DeploymentReadiness {
        let mut out = BTreeMap::new();
        if let Some(name) = name
            && let Some(d) = self
                .embedded
                .cluster
                .api_server()
                .get::<Deployment>("default", name)
        {
            let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let ready = d
                .status
                .as_ref()
                .and_then(|s| s.ready_replicas)
                .unwrap_or(0);
            out.insert(name.to_string(), (ready, desired));
        }
        out
    }

    /// Reads, edits, fills and applies a manifest source; returns `Kind/name` applied.
    /// A source's label and its text, edited and filled.
    fn source_text(&self, source: &Source) -> Result<(String, String), String> {
        let (label, text) = match (&source.file, &source.inline) {
            (Some(file), _) => (file.clone(), self.files.read(file)?),
            (None, Some(inline)) => ("- (inline)".to_string(), inline.clone()),
            (None, None) => return Err("no file or inline manifest".into()),
        };
        let edits: Vec<(String, String)> = source
            .edits
            .iter()
            .map(|e| (e.from.clone(), e.to.clone()))
            .collect();
        let text = apply_edits(&text, &edits)?;
        let text = self.fill(&text, source.ami_version.as_deref())?;
        Ok((label, text))
    }

    async fn apply(&mut self, source: &Source) -> Result<Vec<String>, String> {
        let (label, text) = self.source_text(source)?;
        let clock = super::report::clock_time(self.now());
        let applied = self
            .embedded
            .apply_yaml(&text)
            .await
            .map_err(|e| format!("applying {label}: {e:#}"))?;
        let shown = label.trim_start_matches("../");
        let mut lines = vec![format!("{clock} $ kubectl apply -f {shown}")];
        lines.extend(
            applied
                .iter()
                .map(|a| format!("{clock}   {a} serverside-applied")),
        );
        self.say(&lines.join("\n"));
        Ok(applied)
    }

    /// Fills the walkthrough placeholders (AMI ids of `ami_version`, default the cluster's)
    /// and `{{...}}` expressions.
    fn fill(&self, text: &str, ami_version: Option<&str>) -> Result<String, String> {
        let version = ami_version.unwrap_or(&self.scenario.kubernetes_version);
        let text = if text.contains("<<") {
            let values = self
                .embedded
                .walkthrough_values(version)
                .map_err(|e| format!("reading the {version} AMI ids from SSM: {e:#}"))?;
            fill(text, &values)
        } else {
            text.to_string()
        };
        let aws = self.embedded.cluster.aws();
        let cluster = self.embedded.cluster.options().cluster_name.clone();
        fill_expressions(&text, |name, arg| match (name, arg) {
            ("cluster_name", None) => Some(cluster.clone()),
            ("node_role", None) => Some(format!("KarpenterNodeRole-{cluster}")),
            ("amd64_ami", Some(v)) => aws.eks_ami("al2", "latest", v, "amd64"),
            ("arm64_ami", Some(v)) => aws.eks_ami("al2", "latest", v, "arm64"),
            ("al2023_amd64_ami", Some(v)) => aws.eks_ami("al2023", "latest", v, "amd64"),
            ("al2023_arm64_ami", Some(v)) => aws.eks_ami("al2023", "latest", v, "arm64"),
            _ => None,
        })
        .map_err(|e| e.to_string())
    }

    async fn patch(&mut self, patch: &PatchStep) -> Result<(), String> {
        let api_version = patch
            .api_version
            .clone()
            .or_else(|| default_api_version(&patch.kind).map(str::to_string))
            .ok_or_else(|| format!("patch: apiVersion is required for kind {}", patch.kind))?;
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api_version.clone()),
        };
        let gvk = GroupVersionKind::gvk(&group, &version, &patch.kind);
        let client = self.embedded.cluster.client();
        let (resource, capabilities) =
            kube::discovery::pinned_kind(&client, &gvk)
                .await
                .map_err(|e| {
                    format!(
                        "patch: the cluster does not serve {api_version} {}: {e}",
                        patch.kind
                    )
                })?;
        let api: Api<DynamicObject> = if capabilities.scope == kube::discovery::Scope::Namespaced {
            let ns = patch.namespace.clone().unwrap_or_else(|| "default".into());
            Api::namespaced_with(client, &ns, &resource)
        } else {
            Api::all_with(client, &resource)
        };
        api.patch(
            &patch.name,
            &PatchParams::default(),
            &Patch::Merge(&patch.patch),
        )
        .await
        .map_err(|e| format!("patch {} {}: {e}", patch.kind, patch.name))?;
        let clock = super::report::clock_time(self.now());
        self.say(&format!(
            "{clock} $ kubectl patch {} {} --type merge -p '{}'",
            patch.kind.to_lowercase(),
            patch.name,
            patch.patch
        ));
        Ok(())
    }

    fn show_tables(&mut self) {
        let snapshot = self.snapshot();
        let now = self.now();
        let pods = snapshot
            .store
            .pods
            .values()
            .filter(|p| p.namespace() == "default")
            .map(AsRef::as_ref);
        let nodes = check::initialized_nodes(&snapshot);
        let clock = super::report::clock_time(now);
        let text = format!(
            "\n{clock} $ kubectl get pods\n{}\n{clock} $ kubectl get nodes -l karpenter.sh/initialized=true\n{}",
            tables::pods_table(pods, now),
            tables::nodes_table(nodes, now)
        );
        self.say(&text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::parse_scenario;

    #[test]
    fn scenario_settings_reach_the_cluster_and_controllers() {
        let s = parse_scenario(
            "name: s\nkubernetesVersion: \"1.27\"\ncloud: {seed: 9, startTime: \"2026-07-20T09:00:00Z\", nodeReadyDelay: 7s}\ncontroller: {featureGates: Drift=false, evictUnprotectedAtOnce: true}\n",
        )
        .unwrap();
        let options = cluster_options(&s).unwrap();
        assert_eq!(options.kubernetes_version, "1.27");
        assert_eq!(options.seed, 9);
        assert_eq!(options.node_ready_delay, Duration::from_secs(7));
        assert_eq!(options.start_time.to_string(), "2026-07-20T09:00:00Z");
        let settings = controller_settings(&s).unwrap();
        assert!(!settings.feature_gates.drift);
        assert!(settings.unprotected_pacing.is_none());
    }

    #[test]
    fn bad_settings_name_the_field() {
        let s = parse_scenario("name: s\ncloud: {startTime: yesterday}\n").unwrap();
        let e = format!("{:#}", cluster_options(&s).unwrap_err());
        assert!(e.contains("cloud.startTime"), "{e}");
        let s = parse_scenario("name: s\ncontroller: {featureGates: Drift=maybe}\n").unwrap();
        let e = format!("{:#}", controller_settings(&s).unwrap_err());
        assert!(e.contains("controller.featureGates"), "{e}");
    }
}
