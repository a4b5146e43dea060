//! Test harness: an embedded cluster with the controllers, an independent observer cache, and
//! the invariants checked at every step.

use driftwood::chaos::{Invariants, Violation};
use driftwood::embedded::{Embedded, fill};
use driftwood_controller::state::{Snapshot, spawn_watchers};
use driftwood_controller::{ClusterState, Settings};
use driftwood_sim::SimClusterOptions;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

pub struct Harness {
    pub embedded: Embedded,
    pub observer: ClusterState,
    observer_tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The safety checks, as chaos runs make them.
    pub invariants: Invariants,
    /// When the harness started watching (virtual seconds).
    started: i64,
    pub steps: usize,
    /// The fewest ready pods of each Deployment seen once it was first fully ready.
    pub min_ready: BTreeMap<String, i32>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        for t in &self.observer_tasks {
            t.abort();
        }
    }
}

impl Harness {
    pub async fn start(kubernetes_version: &str, settings: Settings) -> Self {
        // RUST_LOG=info shows the controllers' log lines in a failing test's output.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let options = SimClusterOptions {
            kubernetes_version: kubernetes_version.to_string(),
            ..SimClusterOptions::default()
        };
        let embedded = Embedded::start(options, settings)
            .await
            .expect("embedded cluster starts");
        Self::watching(embedded).await
    }

    /// A harness over an embedded cluster already started (e.g. launching into moto).
    pub async fn watching(embedded: Embedded) -> Self {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let observer = ClusterState::new();
        let observer_tasks = spawn_watchers(&embedded.cluster.client(), &observer);
        observer.wait_synced().await;
        let started = embedded.cluster.clock().now().as_second();
        Self {
            embedded,
            observer,
            observer_tasks,
            invariants: Invariants::default(),
            started,
            steps: 0,
            min_ready: BTreeMap::new(),
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        self.observer.snapshot()
    }

    /// Applies a YAML file from ../shared/fixtures/blueprints with `values` filled in.
    pub async fn apply_fixture(&self, path: &str, values: &BTreeMap<String, String>) {
        let full = super::super::blueprints().join(path);
        let text =
            std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()));
        self.embedded
            .apply_yaml(&fill(&text, values))
            .await
            .unwrap_or_else(|e| panic!("applying {path}: {e:#}"));
    }

    pub async fn apply(&self, yaml: &str) {
        self.embedded
            .apply_yaml(yaml)
            .await
            .unwrap_or_else(|e| panic!("applying: {e:#}\n{yaml}"));
    }

    /// Advances virtual time one second at a time until `done` holds, checking the invariants
    /// at every step. Panics naming `what` after `max` of virtual time.
    pub async fn wait_until(
        &mut self,
        what: &str,
        max: Duration,
        mut done: impl FnMut(&Snapshot) -> bool,
    ) {
        let steps = max.as_secs().max(1);
        for _ in 0..steps {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let snapshot = self.snapshot();
            self.check_invariants(&snapshot);
            self.steps += 1;
            if done(&snapshot) {
                return;
            }
        }
        panic!(
            "timed out after {max:?} of virtual time waiting for: {what}\n{}",
            describe(&self.snapshot())
        );
    }

    /// The safety invariants, the same named checks a chaos run makes (no PDB below its desired
    /// healthy pods once met, no NodePool disrupting more nodes than its budgets allow, no node
    /// deleted before its replacements were initialized, no instance without a NodeClaim past
    /// garbage collection's bound), with no fault excused; then the availability record.
    pub fn check_invariants(&mut self, snapshot: &Snapshot) {
        let now = self.embedded.cluster.clock().now().as_second();
        let instances = self.embedded.cluster.aws().instances();
        self.invariants.check_second(
            now,
            snapshot,
            &instances,
            |_| false,
            &BTreeSet::new(),
            Some(self.started),
        );
        assert!(
            self.invariants.violations.is_empty(),
            "{}\n{}",
            self.invariants
                .violations
                .iter()
                .map(Violation::line)
                .collect::<Vec<_>>()
                .join("\n"),
            describe(snapshot)
        );
        // Availability: the fewest ready pods per app once any was ready.
        for (app, ready) in ready_by_app(snapshot) {
            let entry = self.min_ready.entry(app).or_insert(i32::MAX);
            if *entry != i32::MAX || ready > 0 {
                *entry = (*entry).min(ready);
            }
        }
    }
}

/// Ready, non-terminating pods per `app` label.
pub fn ready_by_app(snapshot: &Snapshot) -> BTreeMap<String, i32> {
    let mut out = BTreeMap::new();
    for pod in snapshot.store.pods.values() {
        let Some(app) = pod.labels().get("app") else {
            continue;
        };
        let entry = out.entry(app.clone()).or_insert(0);
        if !pod.is_terminating() && pod_ready(pod) {
            *entry += 1;
        }
    }
    out
}

pub fn pod_ready(pod: &driftwood_disruption::cached_pod::CachedPod) -> bool {
    pod.is_ready()
}

/// A one-screen description of the cluster for failure messages.
pub fn describe(snapshot: &Snapshot) -> String {
    let mut out = String::from("nodeclaims:\n");
    for (name, claim) in &snapshot.store.nodeclaims {
        let conditions: Vec<String> = claim
            .status
            .iter()
            .flat_map(|s| s.conditions.iter())
            .map(|c| {
                format!(
                    "{}={}({})",
                    c.type_,
                    c.status,
                    c.reason.clone().unwrap_or_default()
                )
            })
            .collect();
        out.push_str(&format!(
            "  {name} deleting={} {}\n",
            claim.metadata.deletion_timestamp.is_some(),
            conditions.join(" ")
        ));
    }
    out.push_str("nodes:\n");
    for (name, node) in &snapshot.store.nodes {
        let version = node
            .status
            .as_ref()
            .and_then(|s| s.node_info.as_ref())
            .map(|i| i.kubelet_version.clone())
            .unwrap_or_default();
        let taints: Vec<String> = node
            .spec
            .iter()
            .flat_map(|s| s.taints.iter().flatten())
            .map(|t| t.key.clone())
            .collect();
        out.push_str(&format!("  {name} {version} taints={taints:?}\n"));
    }
    out.push_str("pods:\n");
    for (key, pod) in &snapshot.store.pods {
        let condition = |c: Option<driftwood_disruption::cached_pod::PodConditionFacts>| {
            c.map_or("-", |c| {
                if c.is_true {
                    "True"
                } else if c.is_false {
                    "False"
                } else {
                    "Unknown"
                }
            })
        };
        out.push_str(&format!(
            "  {key} node={} phase={} ready={} PodScheduled={}{} Ready={}\n",
            pod.node(),
            pod.phase.map_or("", |p| p.as_str()),
            pod_ready(pod),
            condition(pod.scheduled),
            if pod.unschedulable {
                "(Unschedulable)"
            } else {
                ""
            },
            condition(pod.ready),
        ));
    }
    out.push_str("ec2nodeclasses:\n");
    for (name, class) in &snapshot.store.nodeclasses {
        let conditions: Vec<String> = class
            .status
            .iter()
            .flat_map(|s| s.conditions.iter())
            .map(|c| {
                format!(
                    "{}={}({}: {})",
                    c.type_,
                    c.status,
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default()
                )
            })
            .collect();
        out.push_str(&format!("  {name} {}\n", conditions.join(" ")));
    }
    out.push_str(&format!(
        "nodepools: {:?}\n",
        snapshot.store.nodepools.keys().collect::<Vec<_>>()
    ));
    out
}

/// The kubelet version of a node.
pub fn kubelet_version(node: &k8s_openapi::api::core::v1::Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.kubelet_version.clone())
        .unwrap_or_default()
}
