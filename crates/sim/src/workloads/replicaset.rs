//! The ReplicaSet controller: keep `spec.replicas` pods owned by each ReplicaSet and report
//! their readiness in its status. Planning is pure; `reconcile` applies it via the API.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::{Context, WorkloadError, is_terminating, pod_is_ready};

/// How soon a ReplicaSet waiting to see its own writes looks again.
const EXPECTATIONS_RETRY: Duration = Duration::from_millis(100);

/// At most this many pods are created per reconcile (like the real controller's burst).
const CREATE_BURST: usize = 500;

/// What the ReplicaSet controller should do.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaSetPlan {
    /// Pods to create from the template.
    pub create: usize,
    /// Pods to delete, by name.
    pub delete: Vec<String>,
    /// The status to report.
    pub status: ReplicaSetStatus,
}

/// Deletion preference: unscheduled, then pending, then not ready, then newest first.
fn deletion_rank(pod: &Pod) -> (u8, u8, u8, std::cmp::Reverse<String>, String) {
    let scheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_some_and(|n| !n.is_empty());
    let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    (
        u8::from(scheduled),
        u8::from(running),
        u8::from(pod_is_ready(pod)),
        std::cmp::Reverse(created),
        pod.name_any(),
    )
}

/// Plan one ReplicaSet given the pods it owns (any phase).
pub fn plan_replica_set(rs: &ReplicaSet, owned: &[&Pod]) -> ReplicaSetPlan {
    let desired = usize::try_from(
        rs.spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1)
            .max(0),
    )
    .unwrap_or(0);
    let active: Vec<&Pod> = owned
        .iter()
        .copied()
        .filter(|p| !is_terminating(p))
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .collect();
    let (create, delete) = if active.len() < desired {
        ((desired - active.len()).min(CREATE_BURST), Vec::new())
    } else if active.len() == desired {
        (0, Vec::new())
    } else {
        // Ranked only when there is something to delete, each pod's rank worked out once.
        let mut ranked = active.clone();
        ranked.sort_by_cached_key(|p| deletion_rank(p));
        (
            0,
            ranked
                .iter()
                .take(active.len() - desired)
                .map(|p| p.name_any())
                .collect(),
        )
    };
    let template_labels: BTreeMap<String, String> = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let count = |f: &dyn Fn(&Pod) -> bool| {
        i32::try_from(active.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
    };
    let ready = count(&pod_is_ready);
    let status = ReplicaSetStatus {
        replicas: count(&|_| true),
        fully_labeled_replicas: Some(count(&|p| {
            template_labels
                .iter()
                .all(|(k, v)| p.labels().get(k) == Some(v))
        })),
        ready_replicas: Some(ready),
        available_replicas: Some(ready),
        observed_generation: rs.metadata.generation,
        terminating_replicas: Some(
            i32::try_from(owned.iter().filter(|p| is_terminating(p)).count()).unwrap_or(i32::MAX),
        ),
        conditions: None,
    };
    ReplicaSetPlan {
        create,
        delete,
        status,
    }
}

/// A pod for `rs` from its template.
pub fn pod_from_template(rs: &ReplicaSet) -> Pod {
    let template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default();
    let template_meta = template.metadata.unwrap_or_default();
    let owner = OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: rs.name_any(),
        uid: rs.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", rs.name_any())),
            namespace: rs.namespace(),
            labels: template_meta.labels,
            annotations: template_meta.annotations,
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// Reconcile one ReplicaSet: the object read fresh, its pods from the shared index.
pub async fn reconcile(
    rs: Arc<ReplicaSet>,
    context: Arc<Context>,
) -> Result<Action, WorkloadError> {
    let namespace = rs.namespace().unwrap_or_default();
    let replica_sets: Api<ReplicaSet> = Api::namespaced(context.client.clone(), &namespace);
    let Some(rs) = super::live(&replica_sets, &rs.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let pods: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    // The pods it controls, from the shared index; none until the index has seen this
    // ReplicaSet's last creations and deletions (planning on an older view would overshoot).
    let Some(owned) = context.owned_pods.owned(&uid) else {
        return Ok(Action::requeue(EXPECTATIONS_RETRY));
    };
    let owned: Vec<&Pod> = owned.iter().map(AsRef::as_ref).collect();
    let plan = plan_replica_set(&rs, &owned);
    let mut created = Vec::new();
    let mut deleted = Vec::new();
    let mut failure = None;
    for _ in 0..plan.create {
        match pods
            .create(&PostParams::default(), &pod_from_template(&rs))
            .await
        {
            Ok(pod) => created.push(pod.name_any()),
            Err(error) => {
                failure = Some(error);
                break;
            }
        }
    }
    if failure.is_none() {
        for name in &plan.delete {
            match pods.delete(name, &DeleteParams::default()).await {
                Ok(_) => deleted.push(name.clone()),
                // Already gone: nothing to wait for.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
    }
    // Whatever was written is expected, even when a later write failed.
    context.owned_pods.expect(&uid, created, deleted);
    if let Some(error) = failure {
        return Err(error.into());
    }
    if rs.status.as_ref() != Some(&plan.status) {
        let patch = super::exact_status_patch(rs.status.as_ref(), &plan.status);
        replica_sets
            .patch_status(
                &rs.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(replicas: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web-abc", "namespace": "default", "uid": "rs-uid", "generation": 2},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "w", "image": "nginx"}]}}}
        }))
        .unwrap()
    }

    fn pod(name: &str, node: Option<&str>, ready: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "web"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [], "nodeName": node},
            "status": {"phase": if node.is_some() { "Running" } else { "Pending" }, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap()
    }

    #[test]
    fn scales_up_missing_pods_and_reports_status() {
        let pods = [pod("a", Some("n1"), true), pod("b", None, false)];
        let refs: Vec<&Pod> = pods.iter().collect();
        let plan = plan_replica_set(&rs(3), &refs);
        assert_eq!(plan.create, 1);
        assert!(plan.delete.is_empty());
        assert_eq!(plan.status.replicas, 2);
        assert_eq!(plan.status.ready_replicas, Some(1));
        assert_eq!(plan.status.observed_generation, Some(2));
    }

    #[test]
    fn scales_down_unscheduled_and_unready_pods_first() {
        let pods = [
            pod("ready", Some("n1"), true),
            pod("unready", Some("n1"), false),
            pod("pending", None, false),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let plan = plan_replica_set(&rs(1), &refs);
        assert_eq!(plan.delete, vec!["pending", "unready"]);
    }

    #[test]
    fn pods_from_the_template_are_owned_by_the_replica_set() {
        let pod = pod_from_template(&rs(1));
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-abc-"));
        assert_eq!(pod.metadata.owner_references.unwrap()[0].uid, "rs-uid");
        assert_eq!(pod.metadata.labels.unwrap()["app"], "web");
    }
}
