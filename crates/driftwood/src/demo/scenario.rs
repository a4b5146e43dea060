//! Scenario files: a named rollout to replay on the embedded cluster — the cluster's version,
//! the simulated cloud's settings, the manifests to start from, then steps (apply, patch,
//! publish an AMI release, wait for a condition, check expectations, advance time, show
//! tables). Parsed with serde into typed structs; every error names the step and the field.

use super::duration::{DurationError, parse_duration};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Why a scenario file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("scenario is not valid YAML: {0}")]
    Yaml(#[source] serde_yaml::Error),
    #[error("scenario: {0}")]
    Header(String),
    #[error("step {index} ({name}): {message}")]
    Step {
        index: usize,
        name: String,
        message: String,
    },
}

/// A scenario as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// The control plane's Kubernetes minor version (e.g. `1.29`).
    pub kubernetes_version: String,
    pub cloud: CloudSettings,
    pub controller: ControllerSettings,
    /// Applied in order before the first step.
    pub manifests: Vec<Source>,
    pub steps: Vec<Step>,
    /// The faults `driftwood chaos` injects by default (and `driftwood demo --faults scenario`).
    pub faults: Option<crate::chaos::FaultsSection>,
}

/// The simulated cloud and cluster.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CloudSettings {
    #[serde(default = "default_seed")]
    pub seed: u64,
    #[serde(default = "default_cluster_name")]
    pub cluster_name: String,
    /// What the virtual clock reads at start (RFC 3339).
    #[serde(default)]
    pub start_time: Option<String>,
    #[serde(default, with = "opt_duration")]
    pub machine_launch_delay: Option<Duration>,
    #[serde(default, with = "opt_duration")]
    pub machine_termination_delay: Option<Duration>,
    #[serde(default, with = "opt_duration")]
    pub node_ready_delay: Option<Duration>,
    #[serde(default, with = "opt_duration")]
    pub pod_start_delay: Option<Duration>,
    /// Images (ids or placeholders such as `{{amd64_ami:1.30}}`) whose machines make every pod
    /// crash-loop: a new AMI that breaks the workload.
    #[serde(default)]
    pub crash_loop_images: Vec<String>,
}

impl Default for CloudSettings {
    fn default() -> Self {
        Self {
            seed: default_seed(),
            cluster_name: default_cluster_name(),
            start_time: None,
            machine_launch_delay: None,
            machine_termination_delay: None,
            node_ready_delay: None,
            pod_start_delay: None,
            crash_loop_images: Vec::new(),
        }
    }
}

fn default_seed() -> u64 {
    42
}

fn default_cluster_name() -> String {
    "driftwood-demo".to_string()
}

/// The controllers' settings a scenario may set.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControllerSettings {
    /// Karpenter-style feature gates, e.g. `Drift=true`.
    #[serde(default)]
    pub feature_gates: Option<String>,
    /// Evict pods no PDB protects all at once, as Karpenter does (default: paced at 25%).
    #[serde(default)]
    pub evict_unprotected_at_once: bool,
}

/// Manifest text: a file (relative to the scenario) or inline YAML, with placeholders filled.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Source {
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub inline: Option<String>,
    /// The Kubernetes version whose AMI ids fill `<<AMD64PREVAMI>>`/`<<ARM64PREVAMI>>`
    /// (default: the cluster's).
    #[serde(default)]
    pub ami_version: Option<String>,
    /// Text edits applied before filling placeholders, in order (`from` must occur).
    #[serde(default)]
    pub edits: Vec<Edit>,
}

/// Replace every occurrence of `from` with `to`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    pub from: String,
    pub to: String,
}

/// One step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// What the step is called in messages (`name:` or the action's key).
    pub name: String,
    /// For `waitFor`: the longest to wait (virtual time).
    pub timeout: Duration,
    pub action: Action,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Apply manifests (server-side apply); the first apply, patch or publish starts the rollout.
    Apply(Source),
    /// JSON merge patch of one object.
    Patch(PatchStep),
    /// Publish an EKS AMI release in the simulated account (SSM `latest` moves to it).
    PublishAmi(PublishAmi),
    /// Advance virtual time one second at a time until every condition holds.
    WaitFor(WaitFor),
    /// Check assertions now; the scenario fails naming this step if one does not hold.
    Expect(Expect),
    /// Let virtual time pass (e.g. `advanceTime: 10m`).
    AdvanceTime(Duration),
    /// Print `kubectl get pods` and `kubectl get nodes -l karpenter.sh/initialized=true`.
    Show(ShowWhat),
    /// Run `driftwood preview` of these manifests against the cluster as it is now (nothing is
    /// applied to it); the summary then sets the prediction beside what the rollout did. The
    /// step's timeout is the preview's horizon.
    Preview(Source),
}

/// What `show` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ShowWhat {
    Tables,
}

/// A merge patch of one object.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchStep {
    /// Defaults from `kind` for the driftwood kinds, Deployment, PDB and Node.
    #[serde(default)]
    pub api_version: Option<String>,
    pub kind: String,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    pub patch: serde_json::Value,
}

/// An AMI release to publish.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PublishAmi {
    /// The AL2/AL2023 release tag, e.g. `v20260801`.
    pub release: String,
    /// The Bottlerocket version shipped with it.
    #[serde(default = "default_bottlerocket")]
    pub bottlerocket: String,
    /// Publish this long from now (default: now).
    #[serde(default, with = "opt_duration")]
    pub after: Option<Duration>,
}

fn default_bottlerocket() -> String {
    "1.51.0".to_string()
}

/// Conditions that must all hold.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitFor {
    /// Every NodePool node's kubelet is on this minor version (e.g. `1.30`), and there is one.
    #[serde(default)]
    pub all_nodes_on_version: Option<String>,
    /// Exactly this many nodes carry `karpenter.sh/initialized=true` and are not being deleted.
    #[serde(default)]
    pub initialized_nodes: Option<usize>,
    /// At least this many ready pods with label `app`.
    #[serde(default)]
    pub ready_pods: Option<AppCount>,
    /// The Deployment's status.readyReplicas reached spec.replicas.
    #[serde(default)]
    pub deployment_ready: Option<String>,
    /// Every node that existed when the rollout started is gone.
    #[serde(default)]
    pub old_nodes_gone: Option<bool>,
    /// At least this many NodeClaims have `Drifted=True`.
    #[serde(default)]
    pub drifted_nodes: Option<usize>,
    /// Exactly this many initialized NodePool nodes run no workload pod (DaemonSet pods aside).
    #[serde(default)]
    pub empty_nodes: Option<usize>,
    /// The NodePool's `RolloutComplete` condition has this reason (e.g. `Halted`, `Soaking`).
    #[serde(default)]
    pub rollout_reason: Option<PoolReason>,
}

/// A NodePool and a `RolloutComplete` reason.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolReason {
    pub nodepool: String,
    pub reason: String,
}

/// At most `count` in any `window`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CountPerWindow {
    pub count: usize,
    #[serde(deserialize_with = "required_duration")]
    pub window: Duration,
}

fn required_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text).map_err(|e| serde::de::Error::custom(e.to_string()))
}

/// A count of ready pods of an app (label `app`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppCount {
    pub app: String,
    pub count: i32,
}

/// Assertions over the cluster now and what was observed since the rollout started.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// The fewest ready pods of `app` seen during the rollout was at least `count`.
    #[serde(default)]
    pub min_ready_pods: Option<AppCount>,
    /// Never more than this many old nodes disrupting (replacing or draining) at once.
    #[serde(default)]
    pub max_disrupting: Option<usize>,
    /// Exactly this many NodePool nodes now.
    #[serde(default)]
    pub nodes: Option<usize>,
    /// Exactly this many of the rollout's starting nodes are gone.
    #[serde(default)]
    pub replaced_nodes: Option<usize>,
    /// A Drifted condition with this reason was seen (e.g. `AMIDrift`, `NodeClassDrift`).
    #[serde(default)]
    pub drift_reason_seen: Option<String>,
    /// No node was disrupted before this time (RFC 3339, virtual clock).
    #[serde(default)]
    pub no_disruption_before: Option<String>,
    /// Every NodePool node's kubelet is on this minor version now.
    #[serde(default)]
    pub all_nodes_on_version: Option<String>,
    /// Exactly this many NodePool nodes (old or new) were removed since the rollout started.
    #[serde(default)]
    pub removed_nodes: Option<usize>,
    /// Exactly this many NodeClaims were seen Drifted since the rollout started.
    #[serde(default)]
    pub drifted_node_claims: Option<usize>,
    /// A Drifted condition whose `reason: message` contains this text was seen (e.g.
    /// `NodeClassDrift: EC2NodeClass spec.userData`).
    #[serde(default)]
    pub drift_message_seen: Option<String>,
    /// Every NodeClaim's labels satisfy its NodePool's requirements now (no RequirementsDrifted
    /// due).
    #[serde(default)]
    pub nodes_match_node_pools: bool,
    /// No pod waited for capacity (Pending, unbound) longer than this since the rollout
    /// started (e.g. `90s`: about a launch).
    #[serde(default, with = "opt_duration")]
    pub max_pending_pod_time: Option<Duration>,
    /// No workload pod on a rollout-start node began terminating before a replacement
    /// NodeClaim was Initialized.
    #[serde(default)]
    pub no_pod_evicted_before_replacement: bool,
    /// At least this many replacement NodeClaims were launched since the rollout started.
    #[serde(default)]
    pub min_replacements_launched: Option<usize>,
    /// Every NodePool node now carries this label (e.g. `karpenter.k8s.aws/instance-local-nvme`).
    #[serde(default)]
    pub every_node_labelled: Option<String>,
    /// Exactly this many initialized NodePool nodes run no workload pod now.
    #[serde(default)]
    pub empty_nodes: Option<usize>,
    /// No window of this length held more than `count` disruption starts (a rate budget kept).
    #[serde(default)]
    pub max_started_per_window: Option<CountPerWindow>,
    /// A NodeClaim was disrupted for this reason since the rollout started (`Drifted`, `Empty`,
    /// `Underutilized`).
    #[serde(default)]
    pub disruption_reason_seen: Option<String>,
    /// No NodeClaim was disrupted for this reason since the rollout started.
    #[serde(default)]
    pub no_disruption_reason: Option<String>,
}

/// The longest a `waitFor` waits when the step gives no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The top level as written (steps kept raw so each is parsed with its index and name).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawScenario {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default = "default_version")]
    kubernetes_version: String,
    #[serde(default)]
    cloud: CloudSettings,
    #[serde(default)]
    controller: ControllerSettings,
    #[serde(default)]
    manifests: Vec<Source>,
    #[serde(default)]
    steps: Vec<serde_yaml::Value>,
    #[serde(default)]
    faults: Option<crate::chaos::FaultsSection>,
}

fn default_version() -> String {
    "1.29".to_string()
}

/// The keys a step may carry besides its one action.
const STEP_META: [&str; 2] = ["name", "timeout"];

/// Parses a scenario file's text.
pub fn parse_scenario(text: &str) -> Result<Scenario, ScenarioError> {
    let raw: RawScenario = serde_yaml::from_str(text).map_err(ScenarioError::Yaml)?;
    if raw.name.trim().is_empty() {
        return Err(ScenarioError::Header("name: must not be empty".into()));
    }
    for (i, source) in raw.manifests.iter().enumerate() {
        check_source(source).map_err(|m| ScenarioError::Header(format!("manifests[{i}]: {m}")))?;
    }
    let steps = raw
        .steps
        .iter()
        .enumerate()
        .map(|(i, value)| parse_step(i + 1, value))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(faults) = &raw.faults {
        crate::chaos::FaultSpec::from_section(faults)
            .map_err(|e| ScenarioError::Header(e.to_string()))?;
    }
    Ok(Scenario {
        name: raw.name,
        description: raw.description,
        kubernetes_version: raw.kubernetes_version,
        cloud: raw.cloud,
        controller: raw.controller,
        manifests: raw.manifests,
        steps,
        faults: raw.faults,
    })
}

/// A source names exactly one of `file` and `inline`.
fn check_source(source: &Source) -> Result<(), String> {
    match (&source.file, &source.inline) {
        (Some(_), None) | (None, Some(_)) => Ok(()),
        _ => Err("exactly one of `file` and `inline` is required".into()),
    }
}

fn parse_step(index: usize, value: &serde_yaml::Value) -> Result<Step, ScenarioError> {
    let fail = |name: &str, message: String| ScenarioError::Step {
        index,
        name: name.to_string(),
        message,
    };
    let serde_yaml::Value::Mapping(map) = value else {
        return Err(fail("?", "a step must be a mapping with one action".into()));
    };
    let mut action = serde_yaml::Mapping::new();
    let mut name = None;
    let mut timeout = DEFAULT_TIMEOUT;
    for (key, value) in map {
        let key_text = key.as_str().unwrap_or_default();
        match key_text {
            "name" => name = value.as_str().map(str::to_string),
            "timeout" => {
                let text = value.as_str().unwrap_or_default();
                timeout = parse_duration(text)
                    .map_err(|e| fail(name.as_deref().unwrap_or("?"), format!("timeout: {e}")))?;
            }
            _ => {
                action.insert(key.clone(), value.clone());
            }
        }
    }
    let keys: Vec<String> = action
        .keys()
        .map(|k| k.as_str().unwrap_or("?").to_string())
        .collect();
    let label = name.clone().unwrap_or_else(|| keys.join("+"));
    if keys.len() != 1 {
        return Err(fail(
            &label,
            format!(
                "a step needs exactly one action (apply, patch, publishAmi, waitFor, expect, advanceTime, show, preview) besides {}; found {}",
                STEP_META.join("/"),
                if keys.is_empty() {
                    "none".to_string()
                } else {
                    keys.join(", ")
                }
            ),
        ));
    }
    let Some((key, value)) = action.into_iter().next() else {
        return Err(fail(&label, "a step needs an action".into()));
    };
    let action =
        parse_action(key.as_str().unwrap_or_default(), value).map_err(|e| fail(&label, e))?;
    if let Action::Apply(source) | Action::Preview(source) = &action {
        check_source(source).map_err(|m| fail(&label, format!("apply: {m}")))?;
    }
    Ok(Step {
        name: label,
        timeout,
        action,
    })
}

/// The action named `key` with its value.
fn parse_action(key: &str, value: serde_yaml::Value) -> Result<Action, String> {
    fn typed<T: serde::de::DeserializeOwned>(
        key: &str,
        value: serde_yaml::Value,
    ) -> Result<T, String> {
        serde_yaml::from_value(value).map_err(|e| format!("{key}: {e}"))
    }
    match key {
        "apply" => typed(key, value).map(Action::Apply),
        "patch" => typed(key, value).map(Action::Patch),
        "publishAmi" => typed(key, value).map(Action::PublishAmi),
        "waitFor" => typed(key, value).map(Action::WaitFor),
        "expect" => typed(key, value).map(Action::Expect),
        "advanceTime" => {
            let text: String = typed(key, value)?;
            parse_duration(&text)
                .map(Action::AdvanceTime)
                .map_err(|e: DurationError| format!("{key}: {e}"))
        }
        "show" => typed(key, value).map(Action::Show),
        "preview" => typed(key, value).map(Action::Preview),
        other => Err(format!(
            "unknown action {other:?} (expected one of apply, patch, publishAmi, waitFor, expect, advanceTime, show, preview)"
        )),
    }
}

mod opt_duration {
    use super::*;

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| parse_duration(&t))
            .transpose()
            .map_err(|e| serde::de::Error::custom(e.to_string()))
    }
}

/// The apiVersion of a kind a `patch` step names without one.
pub fn default_api_version(kind: &str) -> Option<&'static str> {
    let known: BTreeMap<&str, &str> = BTreeMap::from([
        ("NodePool", "karpenter.sh/v1"),
        ("NodeClaim", "karpenter.sh/v1"),
        ("EC2NodeClass", "karpenter.k8s.aws/v1"),
        ("Deployment", "apps/v1"),
        ("PodDisruptionBudget", "policy/v1"),
        ("Node", "v1"),
        ("Pod", "v1"),
    ]);
    known.get(kind).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name: t
kubernetesVersion: "1.29"
cloud: {seed: 1, machineLaunchDelay: 20s}
manifests:
  - file: a.yaml
steps:
  - name: wait
    waitFor: {initializedNodes: 1}
    timeout: 5m
  - apply: {file: a.yaml, amiVersion: "1.30", edits: [{from: "1.31", to: "1.32"}]}
  - advanceTime: 10m
  - show: tables
  - expect: {minReadyPods: {app: x, count: 2}, driftReasonSeen: AMIDrift}
  - publishAmi: {release: v20260801}
  - patch: {kind: NodePool, name: p, patch: {spec: {weight: 3}}}
"#;

    #[test]
    fn parses_every_step_kind() {
        let s = parse_scenario(GOOD).unwrap();
        assert_eq!(s.steps.len(), 7);
        assert_eq!(s.steps[0].name, "wait");
        assert_eq!(s.steps[0].timeout, Duration::from_secs(300));
        assert_eq!(s.steps[1].name, "apply");
        assert_eq!(s.steps[1].timeout, DEFAULT_TIMEOUT);
        assert_eq!(s.cloud.machine_launch_delay, Some(Duration::from_secs(20)));
        assert_eq!(
            s.steps[2].action,
            Action::AdvanceTime(Duration::from_secs(600))
        );
        let Action::PublishAmi(p) = &s.steps[5].action else {
            panic!("publishAmi")
        };
        assert_eq!(p.bottlerocket, "1.51.0");
    }

    #[test]
    fn errors_name_the_step_and_field() {
        let text = "name: t\nsteps:\n  - waitFor: {initializedNodes: 1}\n  - name: upgrade\n    apply: {fil: a.yaml}\n";
        let e = parse_scenario(text).unwrap_err().to_string();
        assert!(e.starts_with("step 2 (upgrade):"), "{e}");
        assert!(e.contains("fil"), "{e}");
    }

    #[test]
    fn a_step_needs_exactly_one_action() {
        let e = parse_scenario("name: t\nsteps:\n  - apply: {file: a}\n    show: tables\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("step 1") && e.contains("exactly one action"),
            "{e}"
        );
        let e = parse_scenario("name: t\nsteps:\n  - bogus: 1\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("step 1 (bogus)") && e.contains("unknown action"),
            "{e}"
        );
    }

    #[test]
    fn bad_timeouts_and_sources_are_named() {
        let e = parse_scenario("name: t\nsteps:\n  - waitFor: {}\n    timeout: 5x\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("step 1") && e.contains("timeout"), "{e}");
        let e = parse_scenario("name: t\nmanifests:\n  - {}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("manifests[0]"), "{e}");
    }
}
