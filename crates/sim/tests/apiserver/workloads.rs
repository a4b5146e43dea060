//! The Deployment and ReplicaSet controllers against the embedded API server, with a test
//! stand-in for kubelets that marks every pod Running and Ready.

use std::collections::BTreeSet;
use std::time::Duration;

use driftwood_sim::WorkloadControllers;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::wait::await_condition;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::server;

/// Marks every new pod Running and Ready, as kubelets would.
/// Aborts its task when dropped. A detached watcher task outliving the in-process server spins
/// at runtime shutdown (every watch ends at once and is retried without yielding), so test
/// helpers must be stopped before the server goes away.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn fake_kubelets(client: Client) -> AbortOnDrop {
    AbortOnDrop(tokio::spawn(async move {
        let pods: Api<Pod> = Api::all(client.clone());
        let mut events = kube::runtime::watcher(pods, Default::default()).boxed();
        while let Some(event) = events.next().await {
            let Ok(
                kube::runtime::watcher::Event::Apply(pod)
                | kube::runtime::watcher::Event::InitApply(pod),
            ) = event
            else {
                continue;
            };
            if pod.metadata.deletion_timestamp.is_some()
                || driftwood_sim::workloads::pod_is_ready(&pod)
            {
                continue;
            }
            let api: Api<Pod> =
                Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
            let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
            let _ = api
                .patch_status(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await;
        }
    }))
}

async fn wait_for<K, F>(api: &Api<K>, name: &str, condition: F) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    F: Fn(&K) -> bool,
{
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(api.clone(), name, |object: Option<&K>| {
            object.is_some_and(&condition)
        }),
    );
    waited
        .await
        .expect("condition reached in time")
        .unwrap()
        .unwrap()
}

/// Wait until the pods matching `selector` satisfy `condition` (re-listed on every pod event).
async fn wait_for_pods(pods: &Api<Pod>, selector: &str, condition: impl Fn(&[Pod]) -> bool) {
    let mut events = kube::runtime::watcher(pods.clone(), Default::default()).boxed();
    let waited = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let listed = pods
                .list(&ListParams::default().labels(selector))
                .await
                .unwrap();
            if condition(&listed.items) {
                return;
            }
            events.next().await;
        }
    });
    waited.await.expect("pods reached the condition in time");
}

#[tokio::test]
async fn replica_sets_keep_their_pod_count() {
    let api = server();
    let client = api.client();
    let _controllers = WorkloadControllers::spawn(client.clone());
    let _kubelets = fake_kubelets(client.clone());
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "cache"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "cache"}},
                 "template": {"metadata": {"labels": {"app": "cache"}}, "spec": {"containers": [{"name": "c", "image": "redis:7"}]}}}
    }))
    .unwrap();
    replica_sets
        .create(&PostParams::default(), &rs)
        .await
        .unwrap();
    let ready = |rs: &ReplicaSet| {
        rs.status
            .as_ref()
            .is_some_and(|s| s.replicas == 3 && s.ready_replicas == Some(3))
    };
    wait_for(&replica_sets, "cache", ready).await;
    let listed = pods
        .list(&ListParams::default().labels("app=cache"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 3);
    assert!(
        listed
            .items
            .iter()
            .all(|p| p.name_any().starts_with("cache-"))
    );

    let victim = listed.items[0].name_any();
    pods.delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    let replaced = |pods: &[Pod]| {
        pods.len() == 3
            && pods
                .iter()
                .all(|p| p.name_any() != victim && driftwood_sim::workloads::pod_is_ready(p))
    };
    wait_for_pods(&pods, "app=cache", replaced).await;

    replica_sets
        .patch(
            "cache",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    wait_for_pods(&pods, "app=cache", |pods| pods.len() == 1).await;
    wait_for(&replica_sets, "cache", |rs: &ReplicaSet| {
        rs.status.as_ref().is_some_and(|s| s.replicas == 1)
    })
    .await;
}

#[tokio::test]
async fn deployments_roll_out_within_surge_and_availability_limits() {
    let api = server();
    let client = api.client();
    let _controllers = WorkloadControllers::spawn(client.clone());
    let _kubelets = fake_kubelets(client.clone());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let manifest: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &manifest)
        .await
        .unwrap();
    let settled = |d: &Deployment| {
        d.status.as_ref().is_some_and(|s| {
            s.available_replicas == Some(4)
                && s.updated_replicas == Some(4)
                && s.replicas == Some(4)
        }) && d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation
    };
    wait_for(&deployments, "web", settled).await;

    let before = pods.list(&ListParams::default()).await.unwrap();
    let from = before.metadata.resource_version.clone().unwrap();
    let mut live: BTreeSet<String> = before.items.iter().map(ResourceExt::name_any).collect();
    let mut ready: BTreeSet<String> = before
        .items
        .iter()
        .filter(|p| driftwood_sim::workloads::pod_is_ready(p))
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!((live.len(), ready.len()), (4, 4));
    let mut history = pods
        .watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(&image))
        .await
        .unwrap();
    let done = wait_for(&deployments, "web", settled).await;
    assert_eq!(done.metadata.generation, Some(2));

    let final_pods = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(final_pods.items.len(), 4);
    assert!(
        final_pods
            .items
            .iter()
            .all(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("nginx:2"))
    );
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let sets = replica_sets.list(&ListParams::default()).await.unwrap();
    let mut sizes: Vec<i32> = sets
        .items
        .iter()
        .map(|rs| rs.spec.as_ref().unwrap().replicas.unwrap())
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes, vec![0, 4]);

    // Replay the pod history of the rollout up to a sentinel: never more than 5 pods
    // (surge 1), never fewer than 4 ready (maxUnavailable 0).
    pods.create(
        &PostParams::default(),
        &crate::pod("zz-sentinel", json!({})),
    )
    .await
    .unwrap();
    let mut max_live = live.len();
    let mut min_ready = ready.len();
    let mut started = false;
    loop {
        let (kind, pod) = match history.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(p) => ("ADDED", p),
            WatchEvent::Modified(p) => ("MODIFIED", p),
            WatchEvent::Deleted(p) => ("DELETED", p),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("{e:?}"),
        };
        let name = pod.name_any();
        if name == "zz-sentinel" {
            break;
        }
        started = true;
        if kind == "DELETED" {
            live.remove(&name);
            ready.remove(&name);
        } else {
            live.insert(name.clone());
            if driftwood_sim::workloads::pod_is_ready(&pod)
                && pod.metadata.deletion_timestamp.is_none()
            {
                ready.insert(name);
            } else {
                ready.remove(&name);
            }
        }
        max_live = max_live.max(live.len());
        min_ready = min_ready.min(ready.len());
    }
    assert!(started);
    assert!(max_live <= 5, "surge exceeded: {max_live} pods at once");
    assert!(min_ready >= 4, "availability dropped to {min_ready}");
}
