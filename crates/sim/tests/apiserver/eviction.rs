//! Eviction through PodDisruptionBudgets, and the PDB status controller.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{EvictParams, PostParams};
use serde_json::json;

use crate::{code_of, ready_pod, server};

fn budget(name: &str, spec: serde_json::Value) -> PodDisruptionBudget {
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": "web"}});
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

#[tokio::test]
async fn eviction_is_refused_when_the_budget_allows_no_disruption() {
    let api = server();
    let client = api.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    for name in ["web-1", "web-2", "web-3"] {
        ready_pod(&pods, name, json!({"app": "web"})).await;
    }
    pdbs.create(
        &PostParams::default(),
        &budget("web", json!({"minAvailable": 2})),
    )
    .await
    .unwrap();
    let status = pdbs.get("web").await.unwrap().status.unwrap();
    assert_eq!(
        (
            status.current_healthy,
            status.desired_healthy,
            status.disruptions_allowed,
            status.expected_pods
        ),
        (3, 2, 1, 3)
    );

    pods.evict("web-1", &EvictParams::default()).await.unwrap();
    assert!(
        pods.get_opt("web-1").await.unwrap().is_none(),
        "unbound pod deleted at once"
    );
    let status = pdbs.get("web").await.unwrap().status.unwrap();
    assert_eq!((status.current_healthy, status.disruptions_allowed), (2, 0));

    let error = pods
        .evict("web-2", &EvictParams::default())
        .await
        .unwrap_err();
    let kube::Error::Api(refusal) = error else {
        panic!("not an API error")
    };
    assert_eq!(refusal.code, 429);
    assert_eq!(refusal.reason, "TooManyRequests");
    assert_eq!(
        refusal.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let cause = &refusal.details.unwrap().causes[0];
    assert_eq!(cause.reason, "DisruptionBudget");
    assert!(
        cause
            .message
            .contains("needs 2 healthy pods and has 2 currently"),
        "{}",
        cause.message
    );
    assert!(pods.get_opt("web-2").await.unwrap().is_some());

    ready_pod(&pods, "web-4", json!({"app": "web"})).await;
    pods.evict("web-2", &EvictParams::default()).await.unwrap();
    assert_eq!(
        code_of(
            pods.evict("missing", &EvictParams::default())
                .await
                .unwrap_err()
        ),
        404
    );
}

#[tokio::test]
async fn graceful_eviction_charges_the_budget_and_records_the_pod() {
    let api = server();
    let client = api.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    for name in ["web-1", "web-2"] {
        let mut manifest = crate::pod(name, json!({"app": "web"}));
        manifest.spec.as_mut().unwrap().node_name = Some("node-1".into());
        pods.create(&PostParams::default(), &manifest)
            .await
            .unwrap();
        let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        pods.patch_status(name, &Default::default(), &kube::api::Patch::Merge(&status))
            .await
            .unwrap();
    }
    pdbs.create(
        &PostParams::default(),
        &budget("web", json!({"maxUnavailable": 1})),
    )
    .await
    .unwrap();
    pods.evict("web-1", &EvictParams::default()).await.unwrap();
    let terminating = pods.get("web-1").await.unwrap();
    assert!(
        terminating.metadata.deletion_timestamp.is_some(),
        "bound pod terminates gracefully"
    );
    let status = pdbs.get("web").await.unwrap().status.unwrap();
    assert_eq!(status.disruptions_allowed, 0);
    assert_eq!(status.current_healthy, 1);
    assert_eq!(
        code_of(
            pods.evict("web-2", &EvictParams::default())
                .await
                .unwrap_err()
        ),
        429
    );
}

#[tokio::test]
async fn two_matching_budgets_are_an_internal_error() {
    let api = server();
    let client = api.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    ready_pod(&pods, "web-1", json!({"app": "web"})).await;
    pdbs.create(
        &PostParams::default(),
        &budget("a", json!({"maxUnavailable": 1})),
    )
    .await
    .unwrap();
    pdbs.create(
        &PostParams::default(),
        &budget("b", json!({"maxUnavailable": 1})),
    )
    .await
    .unwrap();
    assert_eq!(
        code_of(
            pods.evict("web-1", &EvictParams::default())
                .await
                .unwrap_err()
        ),
        500
    );
}

#[tokio::test]
async fn percentage_budgets_use_the_owner_scale() {
    let api = server();
    let client = api.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "w", "image": "nginx:1"}]}}}
    }))
    .unwrap();
    let rs = replica_sets
        .create(&PostParams::default(), &rs)
        .await
        .unwrap();
    for name in ["web-1", "web-2", "web-3", "web-4"] {
        let mut manifest = crate::pod(name, json!({"app": "web"}));
        manifest.metadata.owner_references = Some(serde_json::from_value(json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs.metadata.uid.clone().unwrap(), "controller": true}])).unwrap());
        pods.create(&PostParams::default(), &manifest)
            .await
            .unwrap();
        let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        pods.patch_status(name, &Default::default(), &kube::api::Patch::Merge(&status))
            .await
            .unwrap();
    }
    pdbs.create(
        &PostParams::default(),
        &budget("web", json!({"maxUnavailable": "50%"})),
    )
    .await
    .unwrap();
    let status = pdbs.get("web").await.unwrap().status.unwrap();
    assert_eq!(
        (
            status.expected_pods,
            status.desired_healthy,
            status.disruptions_allowed
        ),
        (4, 2, 2)
    );
    let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    pods.patch_status(
        "web-1",
        &Default::default(),
        &kube::api::Patch::Strategic(&not_ready),
    )
    .await
    .unwrap();
    let status = pdbs.get("web").await.unwrap().status.unwrap();
    assert_eq!((status.current_healthy, status.disruptions_allowed), (3, 1));

    // Scaling the owner changes what the budget expects with no pod written (Kubernetes'
    // disruption controller watches the scale of the pods' controllers too).
    replica_sets
        .patch(
            "web",
            &Default::default(),
            &kube::api::Patch::Merge(json!({"spec": {"replicas": 8}})),
        )
        .await
        .unwrap();
    let status = pdbs.get("web").await.unwrap().status.unwrap();
    assert_eq!(
        (
            status.expected_pods,
            status.desired_healthy,
            status.disruptions_allowed
        ),
        (8, 4, 0)
    );
}

/// The PDB status controller recomputes only the budgets a written pod is (or was) selected by:
/// a pod of another app changes nothing, a pod relabelled out of the selector leaves the
/// budget's count, and a selected pod turning unready lowers what the budget allows.
#[tokio::test]
async fn a_budget_follows_the_pods_it_selects_and_only_those() {
    let api = server();
    let client = api.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    for name in ["web-1", "web-2", "web-3"] {
        ready_pod(&pods, name, json!({"app": "web"})).await;
    }
    pdbs.create(
        &PostParams::default(),
        &budget("web", json!({"minAvailable": 1})),
    )
    .await
    .unwrap();
    let counts = |s: k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus| {
        (s.current_healthy, s.disruptions_allowed, s.expected_pods)
    };
    let before = pdbs.get("web").await.unwrap();
    assert_eq!(counts(before.status.clone().unwrap()), (3, 2, 3));

    ready_pod(&pods, "api-1", json!({"app": "api"})).await;
    let after_other = pdbs.get("web").await.unwrap();
    assert_eq!(
        after_other.metadata.resource_version, before.metadata.resource_version,
        "a pod the budget does not select leaves it as it was"
    );

    let relabel = kube::api::Patch::Merge(json!({"metadata": {"labels": {"app": "moved"}}}));
    pods.patch("web-3", &kube::api::PatchParams::default(), &relabel)
        .await
        .unwrap();
    assert_eq!(
        counts(pdbs.get("web").await.unwrap().status.unwrap()),
        (2, 1, 2),
        "a pod relabelled out of the selector leaves the count"
    );

    let unready = kube::api::Patch::Merge(
        json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
    );
    pods.patch_status("web-2", &kube::api::PatchParams::default(), &unready)
        .await
        .unwrap();
    assert_eq!(
        counts(pdbs.get("web").await.unwrap().status.unwrap()),
        (1, 0, 2),
        "an unready selected pod lowers what the budget allows"
    );
}
