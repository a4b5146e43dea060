//! The kube-scheduler stand-in: watches pending pods and nodes, binds each pod through the
//! `pods/binding` subresource, and marks pods that fit nowhere `PodScheduled=False`
//! (`Unschedulable`) through `pods/status`, with a `FailedScheduling` event — re-evaluating on
//! every change that can change a decision, and periodically.

pub mod decide;
mod relevant;
mod score;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::clock::SharedClock;
use crate::watch_cache::WatchCache;
use relevant::PodPlacements;

pub use decide::{DEFAULT_SCHEDULER, Decision, decide, fit_error_message};

/// Scheduler settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// How often pending pods are retried when nothing changes.
    pub retry_interval: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            retry_interval: Duration::from_secs(5),
        }
    }
}

/// The running scheduler; dropping this stops it.
#[derive(Debug)]
pub struct Scheduler {
    task: JoinHandle<()>,
}

impl Scheduler {
    /// Start the scheduler on the current tokio runtime.
    pub fn spawn(client: Client, clock: SharedClock, config: SchedulerConfig) -> Self {
        Self {
            task: tokio::spawn(run(client, clock, config)),
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How long an issued binding is assumed before the caches must show it.
const ASSUME_FOR: Duration = Duration::from_secs(30);

async fn run(client: Client, clock: SharedClock, config: SchedulerConfig) {
    let changed = Arc::new(Notify::new());
    let nodes: WatchCache<Node> = WatchCache::spawn_tracked(client.clone(), Arc::clone(&changed));
    let pods: WatchCache<Pod> = WatchCache::spawn_tracked(client.clone(), Arc::clone(&changed));
    let namespaces: WatchCache<Namespace> =
        WatchCache::spawn_tracked(client.clone(), Arc::clone(&changed));
    nodes.ready().await;
    pods.ready().await;
    namespaces.ready().await;
    // pod key → (node, when the binding was issued)
    let mut assumed: BTreeMap<String, (String, tokio::time::Instant)> = BTreeMap::new();
    let mut placements = PodPlacements::default();
    let mut memory = decide::Memory::default();
    // Decide again: something that can change a decision changed, a write of the last pass
    // failed, or the retry interval passed (pods that fit nowhere are tried again).
    let mut last_decided: Option<tokio::time::Instant> = None;
    let mut write_failed = false;
    loop {
        let relevant = relevant_changes(&pods, &nodes, &namespaces, &mut placements);
        let retry_due = last_decided.is_none_or(|at| at.elapsed() >= config.retry_interval);
        if !(relevant || retry_due || write_failed) {
            crate::watch_cache::wait_for_change(&changed, config.retry_interval).await;
            continue;
        }
        write_failed = false;
        last_decided = Some(tokio::time::Instant::now());
        let node_list = nodes.objects();
        let pod_list = pods.objects();
        let namespace_labels: BTreeMap<String, BTreeMap<String, String>> = namespaces
            .objects()
            .iter()
            .map(|n| {
                (
                    n.metadata.name.clone().unwrap_or_default(),
                    n.metadata.labels.clone().unwrap_or_default(),
                )
            })
            .collect();
        let pending_keys: std::collections::BTreeSet<String> = pod_list
            .iter()
            .filter(|p| decide::is_pending(p))
            .map(|p| {
                format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref().unwrap_or_default(),
                    p.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect();
        let started = tokio::time::Instant::now();
        assumed.retain(|key, (_, at)| {
            pending_keys.contains(key) && started.saturating_duration_since(*at) < ASSUME_FOR
        });
        let assumed_nodes: BTreeMap<String, String> = assumed
            .iter()
            .map(|(k, (node, _))| (k.clone(), node.clone()))
            .collect();
        let decisions = if pending_keys.len() > assumed.len() {
            decide::decide_remembering(
                &node_list,
                &pod_list,
                &namespace_labels,
                &assumed_nodes,
                &mut memory,
            )
        } else {
            Vec::new()
        };
        for decision in decisions {
            match decision {
                Decision::Bind {
                    namespace,
                    name,
                    node,
                } => {
                    let key = format!("{namespace}/{name}");
                    match bind(&client, &namespace, &name, &node).await {
                        Ok(()) => {
                            assumed.insert(key, (node, started));
                        }
                        Err(error) => {
                            write_failed = true;
                            tracing::debug!(%error, pod = %key, "binding failed");
                        }
                    }
                }
                Decision::Unschedulable {
                    namespace,
                    name,
                    message,
                } => {
                    let current = pods.get(&namespace, &name);
                    if current
                        .as_deref()
                        .is_some_and(|p| already_marked(p, &message))
                    {
                        continue;
                    }
                    if let Err(error) =
                        mark_unschedulable(&client, &clock, &namespace, &name, &message).await
                    {
                        write_failed = true;
                        tracing::debug!(%error, pod = %name, "marking unschedulable failed");
                        continue;
                    }
                    let uid = current
                        .and_then(|p| p.metadata.uid.clone())
                        .unwrap_or_default();
                    if let Err(error) =
                        failed_scheduling_event(&client, &clock, &namespace, &name, &uid, &message)
                            .await
                    {
                        tracing::debug!(%error, pod = %name, "recording FailedScheduling failed");
                    }
                }
            }
        }
        crate::watch_cache::wait_for_change(&changed, config.retry_interval).await;
    }
}

/// Take the caches' changes; whether any can change a decision (any Node or Namespace change,
/// and the pod changes [`PodPlacements`] says can).
fn relevant_changes(
    pods: &WatchCache<Pod>,
    nodes: &WatchCache<Node>,
    namespaces: &WatchCache<Namespace>,
    placements: &mut PodPlacements,
) -> bool {
    let mut relevant = !nodes.take_changes().is_empty();
    relevant |= !namespaces.take_changes().is_empty();
    let changes = pods.take_changes();
    if changes.relisted {
        placements.clear();
        relevant = true;
    }
    for key in changes.touched {
        let pod = pods.get(&key.0, &key.1);
        relevant |= placements.changed(key, pod.as_deref());
    }
    relevant
}

fn already_marked(pod: &Pod, message: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
                    && c.message.as_deref() == Some(message)
            })
        })
}

async fn bind(client: &Client, namespace: &str, name: &str, node: &str) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    api.create_subresource::<_, serde_json::Value>(
        "binding",
        name,
        &PostParams::default(),
        &binding,
    )
    .await?;
    Ok(())
}

async fn mark_unschedulable(
    client: &Client,
    clock: &SharedClock,
    namespace: &str,
    name: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let patch = json!({"status": {"conditions": [{
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastProbeTime": null,
        "lastTransitionTime": clock.now().to_string(),
    }]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await?;
    Ok(())
}

/// The `FailedScheduling` event kube-scheduler records (through events.k8s.io/v1, so it shows in
/// `kubectl describe pod` and `kubectl get events`) each time a pod's reason changes.
async fn failed_scheduling_event(
    client: &Client,
    clock: &SharedClock,
    namespace: &str,
    pod: &str,
    uid: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let now = clock.now();
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), namespace);
    let event = json!({
        "metadata": {"name": format!("{pod}.{:x}", now.as_nanosecond()), "namespace": namespace},
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        "reportingController": DEFAULT_SCHEDULER,
        "reportingInstance": format!("{DEFAULT_SCHEDULER}-driftwood-sim"),
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "type": "Warning",
        "note": message,
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": pod, "uid": uid},
    });
    let event = serde_json::from_value(event).map_err(kube::Error::SerdeError)?;
    match api.create(&PostParams::default(), &event).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error),
    }
}
