//! Watch fan-out under load: 5,000 pods and 500 nodes created and updated while several
//! watchers run; every watcher sees every event in order, and the event log stays bounded.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use crate::{node, pod, server};

const PODS: usize = 5_000;
const NODES: usize = 500;

async fn watch_all<K>(api: Api<K>, from: String, expected: usize) -> Vec<(String, String, u64)>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut stream = api
        .watch(&WatchParams::default().timeout(3600), &from)
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::with_capacity(expected);
    while seen.len() < expected {
        let event = stream.try_next().await.unwrap().expect("watch ended early");
        let (kind, object) = match event {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(status) => panic!("watch error {status:?}"),
        };
        let meta = object.meta();
        let version = meta
            .resource_version
            .as_deref()
            .unwrap()
            .parse::<u64>()
            .unwrap();
        seen.push((kind.to_string(), meta.name.clone().unwrap(), version));
    }
    seen
}

fn assert_complete_and_ordered(seen: &[(String, String, u64)], objects: usize) {
    assert_eq!(seen.len(), objects * 2);
    assert!(
        seen.windows(2).all(|w| w[0].2 < w[1].2),
        "resourceVersions strictly increase"
    );
    let mut per_object: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (kind, name, _) in seen {
        per_object.entry(name).or_default().push(kind);
    }
    assert_eq!(per_object.len(), objects);
    assert!(
        per_object
            .values()
            .all(|kinds| *kinds == ["ADDED", "MODIFIED"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_watcher_sees_every_event_in_order_with_a_bounded_log() {
    let api = server();
    let client = api.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let nodes: Api<Node> = Api::all(client.clone());
    let start = api.resource_version().to_string();
    let mut watchers = Vec::new();
    for _ in 0..3 {
        watchers.push(tokio::spawn(watch_all(
            pods.clone(),
            start.clone(),
            PODS * 2,
        )));
    }
    let node_watchers: Vec<_> = (0..2)
        .map(|_| tokio::spawn(watch_all(nodes.clone(), start.clone(), NODES * 2)))
        .collect();

    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let pods = pods.clone();
            let nodes = nodes.clone();
            tokio::spawn(async move {
                for i in (writer..PODS).step_by(4) {
                    let name = format!("pod-{i:05}");
                    pods.create(&PostParams::default(), &pod(&name, json!({"app": "load"})))
                        .await
                        .unwrap();
                    crate::bind(
                        &pods.clone().into_client(),
                        &name,
                        &format!("node-{:03}", i % NODES),
                    )
                    .await;
                }
                for i in (writer..NODES).step_by(4) {
                    let name = format!("node-{i:03}");
                    nodes
                        .create(&PostParams::default(), &node(&name))
                        .await
                        .unwrap();
                    let cordon = json!({"spec": {"unschedulable": true}});
                    nodes
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&cordon))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    for watcher in watchers {
        assert_complete_and_ordered(&watcher.await.unwrap(), PODS);
    }
    for watcher in node_watchers {
        assert_complete_and_ordered(&watcher.await.unwrap(), NODES);
    }
    assert_eq!(
        api.event_log_len(),
        10_000,
        "the log holds at most its capacity"
    );
    assert!(api.resource_version() >= (2 * (PODS + NODES)) as u64);
}
