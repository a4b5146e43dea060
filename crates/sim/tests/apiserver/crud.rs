//! Create/read/update/delete of built-in resources, selectors, pagination, finalizers,
//! garbage collection and graceful pod deletion.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::{code_of, pod, server};

#[tokio::test]
async fn pods_get_identity_fields_and_conflict_on_stale_update() {
    let api = server();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("web-1", json!({"app": "web"})))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|uid| uid.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert_eq!(
        created.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    assert_eq!(
        created
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds),
        Some(30)
    );

    let fetched = pods.get("web-1").await.unwrap();
    assert_eq!(
        fetched.metadata.resource_version,
        created.metadata.resource_version
    );

    let mut first = fetched.clone();
    first
        .metadata
        .labels
        .get_or_insert_default()
        .insert("tier".into(), "front".into());
    let updated = pods
        .replace("web-1", &PostParams::default(), &first)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        fetched.metadata.resource_version
    );

    let mut stale = fetched;
    stale
        .metadata
        .labels
        .get_or_insert_default()
        .insert("tier".into(), "back".into());
    let error = pods
        .replace("web-1", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(code_of(error), 409);

    let error = pods
        .create(&PostParams::default(), &pod("web-1", json!({})))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("not an API error")
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );

    let error = pods.get("missing").await.unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("not an API error")
    };
    assert_eq!(status.code, 404);
    assert_eq!(status.message, "pods \"missing\" not found");
}

#[tokio::test]
async fn generate_name_and_namespace_existence() {
    let api = server();
    let client = api.client();
    let mut template = pod("", json!({}));
    template.metadata.name = None;
    template.metadata.generate_name = Some("worker-".into());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let a = pods
        .create(&PostParams::default(), &template)
        .await
        .unwrap();
    let b = pods
        .create(&PostParams::default(), &template)
        .await
        .unwrap();
    let (a, b) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    assert!(
        a.starts_with("worker-") && a.len() == "worker-".len() + 5,
        "{a}"
    );
    assert_ne!(a, b);

    let elsewhere: Api<Pod> = Api::namespaced(client.clone(), "team-a");
    let error = elsewhere
        .create(&PostParams::default(), &pod("x", json!({})))
        .await
        .unwrap_err();
    assert_eq!(code_of(error), 404);
    let namespaces: Api<Namespace> = Api::all(client);
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap(),
        )
        .await
        .unwrap();
    elsewhere
        .create(&PostParams::default(), &pod("x", json!({})))
        .await
        .unwrap();
    let all: Api<Pod> = Api::all(api.client());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        3
    );
}

#[tokio::test]
async fn label_and_field_selectors_and_pagination() {
    let api = server();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    for (name, labels) in [
        ("a", json!({"app": "web", "tier": "front"})),
        ("b", json!({"app": "api"})),
        ("c", json!({"app": "db", "legacy": "true"})),
        ("d", json!({"app": "web", "legacy": "yes"})),
        ("e", json!({})),
    ] {
        pods.create(&PostParams::default(), &pod(name, labels))
            .await
            .unwrap();
    }
    let names = |list: kube::core::ObjectList<Pod>| {
        list.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    let selected = pods
        .list(&ListParams::default().labels("app in (web,api),!legacy"))
        .await
        .unwrap();
    assert_eq!(names(selected), vec!["a", "b"]);
    let selected = pods
        .list(&ListParams::default().labels("app notin (web),app"))
        .await
        .unwrap();
    assert_eq!(names(selected), vec!["b", "c"]);
    let selected = pods
        .list(&ListParams::default().labels("app!=web"))
        .await
        .unwrap();
    assert_eq!(names(selected), vec!["b", "c", "e"]);

    crate::bind(&pods.clone().into_client(), "c", "node-1").await;
    let on_node = pods
        .list(&ListParams::default().fields("spec.nodeName=node-1"))
        .await
        .unwrap();
    assert_eq!(names(on_node), vec!["c"]);
    let unscheduled = pods
        .list(&ListParams::default().fields("spec.nodeName=,metadata.name!=e"))
        .await
        .unwrap();
    assert_eq!(names(unscheduled), vec!["a", "b", "d"]);
    let pending = pods
        .list(&ListParams::default().fields("status.phase=Pending"))
        .await
        .unwrap();
    assert_eq!(pending.items.len(), 5);
    let error = pods
        .list(&ListParams::default().fields("spec.bogus=x"))
        .await
        .unwrap_err();
    assert_eq!(code_of(error), 400);

    let first = pods.list(&ListParams::default().limit(2)).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    assert_eq!(names(first), vec!["a", "b"]);
    let second = pods
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    let token = second.metadata.continue_.clone().unwrap();
    assert_eq!(names(second), vec!["c", "d"]);
    let last = pods
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert!(last.metadata.continue_.is_none());
    assert_eq!(names(last), vec!["e"]);
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let api = server();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let mut held = pod("held", json!({}));
    held.metadata.finalizers = Some(vec![
        "example.com/cleanup".into(),
        "example.com/other".into(),
    ]);
    pods.create(&PostParams::default(), &held).await.unwrap();
    let response = pods.delete("held", &DeleteParams::default()).await.unwrap();
    let pending = response
        .left()
        .expect("deletion is pending while finalizers remain");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert!(
        pods.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );

    let remove_one =
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/cleanup"]}});
    pods.patch(
        "held",
        &PatchParams::default(),
        &Patch::Strategic(&remove_one),
    )
    .await
    .unwrap();
    assert!(
        pods.get_opt("held").await.unwrap().is_some(),
        "one finalizer still holds it"
    );
    let clear = json!({"metadata": {"finalizers": null}});
    pods.patch("held", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    assert!(
        pods.get_opt("held").await.unwrap().is_none(),
        "last finalizer gone, object removed"
    );
}

fn owned_by(kind: &str, name: &str, uid: &str) -> serde_json::Value {
    json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true}])
}

#[tokio::test]
async fn deleting_an_owner_garbage_collects_dependents() {
    let api = server();
    let client = api.client();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}});
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template}
    }))
    .unwrap();
    let deployment = deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web-abc", "ownerReferences": owned_by("Deployment", "web", deployment.metadata.uid.as_deref().unwrap())},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template}
    }))
    .unwrap();
    let rs = replica_sets
        .create(&PostParams::default(), &rs)
        .await
        .unwrap();
    let mut child = pod("web-abc-1", json!({"app": "web"}));
    child.metadata.owner_references = Some(
        serde_json::from_value(owned_by(
            "ReplicaSet",
            "web-abc",
            rs.metadata.uid.as_deref().unwrap(),
        ))
        .unwrap(),
    );
    pods.create(&PostParams::default(), &child).await.unwrap();
    pods.create(
        &PostParams::default(),
        &pod("bystander", json!({"app": "web"})),
    )
    .await
    .unwrap();

    deployments
        .delete("web", &DeleteParams::background())
        .await
        .unwrap();
    assert!(replica_sets.get_opt("web-abc").await.unwrap().is_none());
    assert!(pods.get_opt("web-abc-1").await.unwrap().is_none());
    assert!(pods.get_opt("bystander").await.unwrap().is_some());

    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "orphan-rs"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template}
    }))
    .unwrap();
    let rs = replica_sets
        .create(&PostParams::default(), &rs)
        .await
        .unwrap();
    let mut child = pod("orphan-1", json!({"app": "x"}));
    child.metadata.owner_references = Some(
        serde_json::from_value(owned_by(
            "ReplicaSet",
            "orphan-rs",
            rs.metadata.uid.as_deref().unwrap(),
        ))
        .unwrap(),
    );
    pods.create(&PostParams::default(), &child).await.unwrap();
    replica_sets
        .delete("orphan-rs", &DeleteParams::orphan())
        .await
        .unwrap();
    let survivor = pods.get("orphan-1").await.unwrap();
    assert!(
        survivor.metadata.owner_references.is_none(),
        "orphaned pod loses its owner reference"
    );
}

#[tokio::test]
async fn bound_pods_wait_for_the_kubelet_unless_grace_is_zero() {
    let api = server();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let mut bound = pod("bound", json!({}));
    bound.spec.as_mut().unwrap().node_name = Some("node-1".into());
    pods.create(&PostParams::default(), &bound).await.unwrap();
    pods.create(&PostParams::default(), &pod("unbound", json!({})))
        .await
        .unwrap();

    let terminating = pods
        .delete("bound", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    assert!(pods.get_opt("bound").await.unwrap().is_some());
    assert!(
        pods.delete("unbound", &DeleteParams::default())
            .await
            .unwrap()
            .is_right()
    );
    assert!(pods.get_opt("unbound").await.unwrap().is_none());

    pods.delete("bound", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert!(pods.get_opt("bound").await.unwrap().is_none());
}

#[tokio::test]
async fn binding_assigns_a_node_once() {
    let api = server();
    let client = api.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("p", json!({})))
        .await
        .unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "node-9"}});
    let request = |body: &serde_json::Value| {
        http::Request::post("/api/v1/namespaces/default/pods/p/binding")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(body).unwrap())
            .unwrap()
    };
    client.request_text(request(&binding)).await.unwrap();
    let bound = pods.get("p").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("node-9"));
    let scheduled = bound.status.unwrap().conditions.unwrap();
    assert!(
        scheduled
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );
    let error = client.request_text(request(&binding)).await.unwrap_err();
    assert_eq!(code_of(error), 409);
}

#[tokio::test]
async fn dry_run_validates_without_storing_and_typed_access_reads_the_store() {
    let api = server();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answered = pods.create(&dry, &pod("ghost", json!({}))).await.unwrap();
    assert_eq!(answered.metadata.name.as_deref(), Some("ghost"));
    assert!(pods.get_opt("ghost").await.unwrap().is_none());
    pods.create(&PostParams::default(), &pod("real", json!({"app": "x"})))
        .await
        .unwrap();
    let dry_delete = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    pods.delete("real", &dry_delete).await.unwrap();
    let direct: Option<Pod> = api.get("default", "real");
    assert_eq!(direct.unwrap().metadata.labels.unwrap()["app"], "x");
    assert_eq!(api.list::<Pod>(Some("default")).len(), 1);
    assert_eq!(api.list::<Namespace>(None).len(), 4);
}

#[tokio::test]
async fn scale_subresource_reads_and_writes_replicas() {
    let api = server();
    let deployments: Api<Deployment> = Api::namespaced(api.client(), "default");
    let manifest: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "w", "image": "nginx:1"}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &manifest)
        .await
        .unwrap();
    let scale = deployments.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
    let patch = json!({"spec": {"replicas": 6}});
    deployments
        .patch_scale("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let scaled = deployments.get("web").await.unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(6));
    assert_eq!(scaled.metadata.generation, Some(2));
    let negative = json!({"spec": {"replicas": -1}});
    let error = deployments
        .patch_scale("web", &PatchParams::default(), &Patch::Merge(&negative))
        .await
        .unwrap_err();
    assert_eq!(code_of(error), 422);
}

/// The API server answers as a managed control plane does, not instantly: a read takes 2 ms
/// and a write 8 ms of the cluster's time (here tokio's paused clock; the embedded cluster
/// sets `RequestLatency::MANAGED`); `RequestLatency::NONE`, the bare server's default, turns
/// it off.
#[tokio::test(start_paused = true)]
async fn requests_take_the_control_planes_latency() {
    let config = driftwood_sim::ApiServerConfig {
        latency: driftwood_sim::apiserver::RequestLatency::MANAGED,
        ..Default::default()
    };
    let api = driftwood_sim::ApiServer::new(config);
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let start = tokio::time::Instant::now();
    pods.create(&PostParams::default(), &pod("web-1", json!({"app": "web"})))
        .await
        .unwrap();
    assert_eq!(
        start.elapsed(),
        std::time::Duration::from_millis(8),
        "a write"
    );
    let start = tokio::time::Instant::now();
    pods.get("web-1").await.unwrap();
    assert_eq!(
        start.elapsed(),
        std::time::Duration::from_millis(2),
        "a read"
    );

    let instant = server();
    let pods: Api<Pod> = Api::namespaced(instant.client(), "default");
    let start = tokio::time::Instant::now();
    pods.create(&PostParams::default(), &pod("web-1", json!({"app": "web"})))
        .await
        .unwrap();
    assert_eq!(start.elapsed(), std::time::Duration::ZERO, "off");
}
