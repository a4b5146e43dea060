//! Patch flavours (strategic merge, JSON merge, JSON patch, server-side apply) and the
//! status-subresource rules.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::{code_of, node, pod, server};

#[tokio::test]
async fn strategic_merge_patch_of_taints_and_conditions() {
    let api = server();
    let nodes: Api<Node> = Api::all(api.client());
    let created = nodes
        .create(&PostParams::default(), &node("n1"))
        .await
        .unwrap();
    assert_eq!(
        created
            .status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap()
            .len(),
        1,
        "node status is kept on create"
    );

    let taint =
        json!({"spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}});
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Strategic(&taint))
        .await
        .unwrap();
    let two = json!({"spec": {"taints": [
        {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "gpu", "effect": "NoExecute"}
    ]}});
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Strategic(&two))
        .await
        .unwrap();
    let removed =
        json!({"spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoExecute"}]}});
    let patched = nodes
        .patch("n1", &PatchParams::default(), &Patch::Strategic(&removed))
        .await
        .unwrap();
    let keys: Vec<String> = patched
        .spec
        .unwrap()
        .taints
        .unwrap()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(
        keys,
        vec!["dedicated"],
        "taints are atomic lists, as kubectl taint expects"
    );

    let conditions = json!({"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "KubeletNotReady"},
        {"type": "MemoryPressure", "status": "False"}
    ]}});
    let patched = nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(&conditions),
        )
        .await
        .unwrap();
    let conditions = patched.status.unwrap().conditions.unwrap();
    let summary: Vec<(String, String)> = conditions
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("Ready".into(), "False".into()),
            ("MemoryPressure".into(), "False".into())
        ]
    );
    let kept = nodes.get("n1").await.unwrap();
    assert_eq!(
        kept.status.unwrap().node_info.unwrap().kubelet_version,
        "v1.29.15",
        "other status fields survive"
    );
}

#[tokio::test]
async fn strategic_merge_patch_merges_containers_by_name() {
    let api = server();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    pods.create(&PostParams::default(), &pod("p", json!({})))
        .await
        .unwrap();
    let patch =
        json!({"spec": {"containers": [{"name": "app", "image": "registry.example/app:2"}]}});
    let patched = pods
        .patch("p", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let containers = patched.spec.unwrap().containers;
    assert_eq!(containers.len(), 1);
    assert_eq!(
        containers[0].image.as_deref(),
        Some("registry.example/app:2")
    );
    assert_eq!(
        containers[0].termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
}

#[tokio::test]
async fn json_patch_and_merge_patch() {
    let api = server();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    pods.create(&PostParams::default(), &pod("p", json!({"a": "1"})))
        .await
        .unwrap();
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/labels/b", "value": "2"},
        {"op": "remove", "path": "/metadata/labels/a"}
    ]))
    .unwrap();
    let patched = pods
        .patch("p", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(
        patched
            .metadata
            .labels
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        vec![("b".to_string(), "2".to_string())]
    );
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/metadata/name", "value": "other"}]))
            .unwrap();
    let error = pods
        .patch("p", &PatchParams::default(), &Patch::<()>::Json(failing))
        .await
        .unwrap_err();
    assert_eq!(code_of(error), 422);
    let merge = json!({"metadata": {"annotations": {"note": "hi"}}});
    let patched = pods
        .patch("p", &PatchParams::default(), &Patch::Merge(&merge))
        .await
        .unwrap();
    assert_eq!(patched.metadata.annotations.unwrap()["note"], "hi");
}

/// Server-side apply as kube-apiserver does it: the first apply creates; a second manager
/// changing a field the first owns conflicts (409 naming the field and the manager) unless
/// forced, which takes the field; a manager that stops applying a field removes it, unless
/// another manager owns it. `managedFields` records each manager's fields.
#[tokio::test]
async fn server_side_apply_tracks_owners_conflicts_and_removals() {
    let api = server();
    let deployments: Api<Deployment> = Api::namespaced(api.client(), "default");
    let owner = PatchParams::apply("driftwood-test");
    let manifest = |labels: Value, replicas: Option<i32>| {
        let mut manifest = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": labels},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}}
        });
        if let Some(replicas) = replicas {
            manifest["spec"]["replicas"] = json!(replicas);
        }
        manifest
    };
    let created = deployments
        .patch(
            "web",
            &owner,
            &Patch::Apply(&manifest(json!({"team": "a", "tier": "web"}), Some(2))),
        )
        .await
        .unwrap();
    assert_eq!(created.spec.as_ref().unwrap().replicas, Some(2));
    assert_eq!(created.metadata.generation, Some(1));
    let managed = created.metadata.managed_fields.clone().unwrap();
    assert_eq!(managed.len(), 1);
    assert_eq!(managed[0].manager.as_deref(), Some("driftwood-test"));
    assert_eq!(managed[0].operation.as_deref(), Some("Apply"));

    let scale = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"owner": "b"}},
        "spec": {"replicas": 5}
    });
    let error = deployments
        .patch("web", &PatchParams::apply("scaler"), &Patch::Apply(&scale))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("{error:?}")
    };
    assert_eq!(status.code, 409);
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"driftwood-test\": .spec.replicas"
    );
    let applied = deployments
        .patch(
            "web",
            &PatchParams::apply("scaler").force(),
            &Patch::Apply(&scale),
        )
        .await
        .unwrap();
    assert_eq!(applied.spec.as_ref().unwrap().replicas, Some(5));
    assert_eq!(applied.metadata.generation, Some(2));
    let labels = applied.metadata.labels.clone().unwrap();
    assert_eq!(
        (labels["team"].as_str(), labels["owner"].as_str()),
        ("a", "b")
    );
    assert_eq!(
        applied.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some("nginx:1")
    );

    // The first manager applies again without `tier` and without replicas: its label goes,
    // replicas (now the scaler's) stay.
    let reapplied = deployments
        .patch(
            "web",
            &owner,
            &Patch::Apply(&manifest(json!({"team": "a"}), None)),
        )
        .await
        .unwrap();
    let labels = reapplied.metadata.labels.clone().unwrap();
    assert_eq!(labels.get("tier"), None, "no longer applied: removed");
    assert_eq!(labels["owner"], "b", "the scaler's label stays");
    assert_eq!(reapplied.spec.as_ref().unwrap().replicas, Some(5));
    let managers: Vec<_> = reapplied
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .map(|m| (m.manager.unwrap(), m.operation.unwrap()))
        .collect();
    assert_eq!(
        managers,
        vec![
            ("driftwood-test".to_string(), "Apply".to_string()),
            ("scaler".to_string(), "Apply".to_string())
        ]
    );

    // An apply without a field manager is refused, as kube-apiserver refuses it.
    let error = deployments
        .patch("web", &PatchParams::default(), &Patch::Apply(&scale))
        .await
        .unwrap_err();
    assert_eq!(code_of(error), 422);
}

#[tokio::test]
async fn status_subresource_separates_spec_and_status_writes() {
    let api = server();
    let deployments: Api<Deployment> = Api::namespaced(api.client(), "default");
    let manifest: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}},
        "status": {"replicas": 99}
    }))
    .unwrap();
    let created = deployments
        .create(&PostParams::default(), &manifest)
        .await
        .unwrap();
    assert!(created.status.is_none(), "status is dropped on create");

    let status = json!({"status": {"replicas": 3, "readyReplicas": 3}});
    let with_status = deployments
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(with_status.status.as_ref().unwrap().ready_replicas, Some(3));
    assert_eq!(
        with_status.metadata.generation,
        Some(1),
        "status writes do not bump generation"
    );

    let sneaky = json!({"spec": {"replicas": 4}, "status": {"readyReplicas": 0}});
    let patched = deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&sneaky))
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().replicas, Some(4));
    assert_eq!(
        patched.status.unwrap().ready_replicas,
        Some(3),
        "main resource ignores status"
    );
    assert_eq!(patched.metadata.generation, Some(2));

    let spec_via_status = json!({"spec": {"replicas": 7}});
    let unchanged = deployments
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&spec_via_status),
        )
        .await
        .unwrap();
    assert_eq!(
        unchanged.spec.unwrap().replicas,
        Some(4),
        "status subresource ignores spec"
    );
}

/// Server-side apply through Python's kubernetes client (`DynamicClient.server_side_apply`),
/// a client nobody here wrote: flux creates, argocd's change of flux's image conflicts (409 with
/// kube-apiserver's message) until forced, flux's re-apply without `replicas` removes them (and
/// the Deployment's default comes back), and the typed client reads both managers' entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_through_pythons_kubernetes_client() {
    let dir = tempfile::tempdir().unwrap();
    let api = server();
    let kubeconfig = dir.path().join("kubeconfig");
    let _http = api.serve_with_kubeconfig(&kubeconfig).await.unwrap();
    let python = std::env::var("DRIFTWOOD_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/apiserver/python/server_side_apply.py");
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&python)
            .arg(script)
            .arg(&kubeconfig)
            .output()
            .expect("python runs (scripts/test installs the kubernetes package)")
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "the Python client failed (scripts/test installs `kubernetes` with pip):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(seen["created_managers"], json!(["flux"]));
    assert_eq!(seen["conflict"]["status"], 409, "{seen}");
    assert_eq!(
        seen["conflict"]["message"],
        "Apply failed with 1 conflict: conflict with \"flux\": .spec.template.spec.containers[name=\"api\"].image"
    );
    assert_eq!(seen["forced_image"], "api:2");
    assert_eq!(seen["replicas_after"], 1);
    assert_eq!(
        seen["typed_managers"],
        json!([["argocd", "Apply"], ["flux", "Apply"]])
    );
}
