//! Simulated workload controllers (Deployment → ReplicaSet → Pod; StatefulSet → Pod and its
//! volumes), running as kube-runtime controllers against any API server through a
//! `kube::Client`.

pub mod deployment;
pub mod hash;
pub mod owned_pods;
pub mod replicaset;
pub mod statefulset;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::task::JoinHandle;

/// Errors from a reconcile pass (retried after a short delay).
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The API server rejected or failed a request.
    #[error("kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),
}

/// Shared reconcile context.
#[derive(Clone)]
pub struct Context {
    /// Client for the API server.
    pub client: Client,
    /// Pods by controlling owner, with the owners' write expectations.
    pub owned_pods: owned_pods::OwnedPods,
}

/// Is the pod Ready (condition Ready=True)?
pub fn pod_is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The object as the API has it now, unless it is gone or being deleted (then there is nothing
/// to reconcile).
pub async fn live<K>(api: &Api<K>, name: &str) -> Result<Option<K>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .get_opt(name)
        .await?
        .filter(|o| o.meta().deletion_timestamp.is_none()))
}

/// Is the pod being deleted?
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Does the object have a controller owner reference with this uid?
pub fn owned_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references.as_ref().is_some_and(|refs| {
        refs.iter()
            .any(|r| r.controller == Some(true) && r.uid == uid)
    })
}

/// A structured label selector in query-string syntax.
pub fn label_selector_string(selector: &LabelSelector) -> String {
    let mut terms: Vec<String> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for expression in selector.match_expressions.iter().flatten() {
        let values = expression.values.clone().unwrap_or_default().join(",");
        terms.push(match expression.operator.as_str() {
            "In" => format!("{} in ({values})", expression.key),
            "NotIn" => format!("{} notin ({values})", expression.key),
            "Exists" => expression.key.clone(),
            _ => format!("!{}", expression.key),
        });
    }
    terms.join(",")
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

fn retry_soon<K>(_object: Arc<K>, error: &WorkloadError, _context: Arc<Context>) -> Action {
    tracing::warn!(%error, "workload reconcile failed; retrying");
    Action::requeue(Duration::from_secs(1))
}

/// How long the ReplicaSet controller gathers pod changes before it reconciles the
/// ReplicaSets they touch: a fixed window from the first change, which later changes do not
/// extend (unlike kube-runtime's `Config::debounce`, so a busy ReplicaSet is never starved).
/// Tokio's time: on the demo's paused clock the cluster's time, so the window closes once the
/// cluster has nothing else to do at this instant; unpaused (`--pace realtime`, some tests),
/// 100 ms of wall time. Each reconcile reads all the ReplicaSet's pods, and its pods change by
/// the thousand while a large one comes up or a rollout drains nodes: triggered per change, a
/// 5,000-pod ReplicaSet was reconciled back to back, a quarter of the embedded cluster's work
/// (perf, `fleet-5000-nodes`). kube-controller-manager's workqueue (and kube-runtime's runner)
/// merge a key's changes only while it waits, with no delay; this window is a deliberate one.
const POD_CHANGES_GATHERED_FOR: Duration = Duration::from_millis(100);

/// The ReplicaSets `changes` touch, each once per gathering (in the order first touched).
fn gathered(
    changes: tokio::sync::mpsc::UnboundedReceiver<kube::runtime::reflector::ObjectRef<ReplicaSet>>,
) -> impl futures::Stream<Item = kube::runtime::reflector::ObjectRef<ReplicaSet>> {
    futures::stream::unfold(changes, |mut changes| async move {
        let first = changes.recv().await?;
        tokio::time::sleep(POD_CHANGES_GATHERED_FOR).await;
        let mut seen = std::collections::HashSet::new();
        let mut batch = Vec::new();
        for touched in std::iter::once(first).chain(std::iter::from_fn(|| changes.try_recv().ok()))
        {
            if seen.insert(touched.clone()) {
                batch.push(touched);
            }
        }
        Some((futures::stream::iter(batch), changes))
    })
    .flatten()
}

/// The running Deployment and ReplicaSet controllers; dropping this stops them.
#[derive(Debug)]
pub struct WorkloadControllers {
    tasks: Vec<JoinHandle<()>>,
}

impl WorkloadControllers {
    /// Start both controllers on the current tokio runtime.
    pub fn spawn(client: Client) -> Self {
        let (owned_pods, pod_changes, index_task) = owned_pods::OwnedPods::spawn(client.clone());
        let context = Arc::new(Context {
            client: client.clone(),
            owned_pods,
        });
        // Triggered by the index it reads, after each pod event is filed there (not by a
        // watch of its own, which could run ahead of the index).
        let replica_sets = Controller::new(
            Api::<ReplicaSet>::all(client.clone()),
            watcher::Config::default(),
        )
        .reconcile_on(gathered(pod_changes))
        .run(replicaset::reconcile, retry_soon, Arc::clone(&context))
        .for_each(|_| futures::future::ready(()));
        let stateful_sets = Controller::new(
            Api::<StatefulSet>::all(client.clone()),
            watcher::Config::default(),
        )
        .owns(Api::<Pod>::all(client.clone()), watcher::Config::default())
        .run(statefulset::reconcile, retry_soon, Arc::clone(&context))
        .for_each(|_| futures::future::ready(()));
        let deployments = Controller::new(
            Api::<Deployment>::all(client.clone()),
            watcher::Config::default(),
        )
        .owns(Api::<ReplicaSet>::all(client), watcher::Config::default())
        .run(deployment::reconcile, retry_soon, context)
        .for_each(|_| futures::future::ready(()));
        Self {
            tasks: vec![
                index_task,
                tokio::spawn(replica_sets),
                tokio::spawn(stateful_sets),
                tokio::spawn(deployments),
            ],
        }
    }
}

impl Drop for WorkloadControllers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_selectors_render_as_query_strings() {
        let selector: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}, {"key": "legacy", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        assert_eq!(
            label_selector_string(&selector),
            "app=web,tier in (a,b),!legacy"
        );
    }
}

/// A JSON merge patch that makes an object's status exactly `desired`: keys the current status
/// has but `desired` lacks are set to null, since a merge patch otherwise leaves them in place
/// (and a status that can never match its desired value would be rewritten forever).
pub fn exact_status_patch<T: serde::Serialize>(
    current: Option<&T>,
    desired: &T,
) -> serde_json::Value {
    let mut desired = serde_json::to_value(desired).unwrap_or(serde_json::Value::Null);
    let current = current.and_then(|c| serde_json::to_value(c).ok());
    null_missing_keys(current.as_ref(), &mut desired);
    serde_json::json!({ "status": desired })
}

fn null_missing_keys(current: Option<&serde_json::Value>, desired: &mut serde_json::Value) {
    let (Some(serde_json::Value::Object(current)), serde_json::Value::Object(desired)) =
        (current, desired)
    else {
        return;
    };
    for (key, value) in current {
        match desired.get_mut(key) {
            None => {
                desired.insert(key.clone(), serde_json::Value::Null);
            }
            Some(child) => null_missing_keys(Some(value), child),
        }
    }
}

#[cfg(test)]
mod status_patch_tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSetStatus;

    #[test]
    fn fields_absent_from_the_desired_status_are_cleared() {
        let current = ReplicaSetStatus {
            replicas: 3,
            ready_replicas: Some(2),
            available_replicas: Some(2),
            ..Default::default()
        };
        let desired = ReplicaSetStatus {
            replicas: 3,
            ready_replicas: Some(3),
            ..Default::default()
        };
        let patch = exact_status_patch(Some(&current), &desired);
        assert_eq!(
            patch["status"]["availableReplicas"],
            serde_json::Value::Null
        );
        assert_eq!(patch["status"]["readyReplicas"], serde_json::json!(3));
        let mut merged = serde_json::to_value(&current).unwrap();
        json_patch::merge(&mut merged, &patch["status"]);
        let merged: ReplicaSetStatus = serde_json::from_value(merged).unwrap();
        assert_eq!(merged, desired);
    }
}

#[cfg(test)]
mod gathered_tests {
    use super::*;
    use kube::runtime::reflector::ObjectRef;

    /// The ReplicaSets touched within one gathering come out once each, in the order first
    /// touched, exactly when the window that the first change opened closes; a change after it
    /// opens the next window; changes queued when the channel closes still come out.
    #[tokio::test(start_paused = true)]
    async fn changes_are_gathered_for_a_while_and_each_replica_set_is_told_once() {
        use futures::FutureExt as _;
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        let rs = |name: &str| ObjectRef::<ReplicaSet>::new(name).within("default");
        let mut stream = Box::pin(gathered(receiver));
        // First-touched order is web, api; last-touched or sorted order would be api, web.
        for name in ["web", "api", "web"] {
            sender.send(rs(name)).unwrap();
        }
        let early = tokio::time::timeout(POD_CHANGES_GATHERED_FOR / 2, stream.next()).await;
        assert!(early.is_err(), "nothing before the gathering ends");
        let started = tokio::time::Instant::now();
        assert_eq!(stream.next().await, Some(rs("web")));
        assert_eq!(stream.next().await, Some(rs("api")));
        assert_eq!(started.elapsed(), POD_CHANGES_GATHERED_FOR / 2);
        assert!(stream.next().now_or_never().is_none(), "each told once");
        sender.send(rs("web")).unwrap();
        let next = tokio::time::Instant::now();
        assert_eq!(stream.next().await, Some(rs("web")));
        assert_eq!(next.elapsed(), POD_CHANGES_GATHERED_FOR);
        // Closed during a window: what was queued still comes out, then the end.
        sender.send(rs("db")).unwrap();
        drop(sender);
        assert_eq!(stream.next().await, Some(rs("db")));
        assert_eq!(stream.next().await, None);
    }
}
