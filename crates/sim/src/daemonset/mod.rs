//! The DaemonSet controller: one pod per node whose labels the template selects and whose
//! taints it tolerates, pinned with `spec.nodeName`, owned by the DaemonSet; status kept
//! current; template changes rolled out one pod at a time.

pub mod plan;
pub mod planner;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::watch_cache::WatchCache;

pub use plan::{DaemonSetAction, REVISION_LABEL, daemon_pod, plan};
pub use planner::{DaemonSetPlanner, Observed};

/// The running DaemonSet controller; dropping this stops it.
#[derive(Debug)]
pub struct DaemonSetController {
    task: JoinHandle<()>,
}

impl DaemonSetController {
    /// Start the controller on the current tokio runtime.
    pub fn spawn(client: Client) -> Self {
        Self {
            task: tokio::spawn(run(client)),
        }
    }
}

impl Drop for DaemonSetController {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Resync even without changes, to retry failed requests.
const RESYNC: Duration = Duration::from_secs(10);

async fn run(client: Client) {
    let changed = Arc::new(Notify::new());
    let sets: WatchCache<DaemonSet> = WatchCache::spawn(client.clone(), Arc::clone(&changed));
    let nodes: WatchCache<Node> = WatchCache::spawn_tracked(client.clone(), Arc::clone(&changed));
    // Only pods this controller made carry its revision label: the rest of the cluster's pods
    // (every Deployment's) neither wake it nor are read on each pass. Unlike Kubernetes'
    // controller, it no longer sees a daemon pod whose label is removed by hand (nothing in the
    // embedded cluster does that).
    let pods: WatchCache<Pod> = WatchCache::spawn_selected_tracked(
        client.clone(),
        Arc::clone(&changed),
        Some(REVISION_LABEL),
    );
    sets.ready().await;
    nodes.ready().await;
    pods.ready().await;
    // Actions issued and when, not made again for a while (a creation not yet visible in the
    // pod cache), by action key.
    let mut in_flight: HashMap<String, tokio::time::Instant> = HashMap::new();
    let mut planner = DaemonSetPlanner::default();
    let mut first = true;
    loop {
        let set_list = sets.objects();
        let (node_changes, pod_changes) = (nodes.take_changes(), pods.take_changes());
        let observed = if first || node_changes.relisted || pod_changes.relisted {
            first = false;
            Observed::Everything {
                nodes: nodes.objects(),
                pods: pods.objects(),
            }
        } else {
            Observed::Changed {
                nodes: node_changes
                    .touched
                    .into_iter()
                    .map(|(_, name)| {
                        let node = nodes.get("", &name);
                        (name, node)
                    })
                    .collect(),
                pods: pod_changes
                    .touched
                    .into_iter()
                    .map(|(namespace, name)| {
                        let pod = pods.get(&namespace, &name);
                        ((namespace, name), pod)
                    })
                    .collect(),
            }
        };
        let now = tokio::time::Instant::now();
        in_flight.retain(|_, at| now.saturating_duration_since(*at) < Duration::from_secs(5));
        for action in planner.pass(&set_list, observed) {
            let key = action_key(&action);
            if in_flight.contains_key(&key) {
                continue;
            }
            in_flight.insert(key, now);
            if let Err(error) = execute(&client, action).await {
                tracing::debug!(%error, "daemonset action failed; will retry");
            }
        }
        crate::watch_cache::wait_for_change(&changed, RESYNC).await;
    }
}

fn action_key(action: &DaemonSetAction) -> String {
    match action {
        DaemonSetAction::CreatePod { namespace, pod } => format!(
            "create/{namespace}/{}/{}",
            pod.pointer("/metadata/generateName")
                .and_then(|v| v.as_str())
                .unwrap_or_default(),
            pod.pointer("/spec/nodeName")
                .and_then(|v| v.as_str())
                .unwrap_or_default()
        ),
        DaemonSetAction::DeletePod { namespace, name } => format!("delete/{namespace}/{name}"),
        DaemonSetAction::UpdateStatus {
            namespace,
            name,
            status,
        } => format!("status/{namespace}/{name}/{status}"),
    }
}

async fn execute(client: &Client, action: DaemonSetAction) -> Result<(), kube::Error> {
    match action {
        DaemonSetAction::CreatePod { namespace, pod } => {
            let pod: Pod = serde_json::from_value(pod).map_err(kube::Error::SerdeError)?;
            Api::<Pod>::namespaced(client.clone(), &namespace)
                .create(&PostParams::default(), &pod)
                .await?;
        }
        DaemonSetAction::DeletePod { namespace, name } => {
            match Api::<Pod>::namespaced(client.clone(), &namespace)
                .delete(&name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        DaemonSetAction::UpdateStatus {
            namespace,
            name,
            status,
        } => {
            Api::<DaemonSet>::namespaced(client.clone(), &namespace)
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": status})),
                )
                .await?;
        }
    }
    Ok(())
}
