//! Watches through kube-rs: resumption after a dropped connection, relist after 410,
//! bookmarks, and the virtual clock.

use std::sync::Arc;
use std::time::Duration;

use driftwood_sim::{ApiServer, ApiServerConfig, VirtualClock};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event};
use serde_json::json;

use crate::pod;

fn small_log_server(capacity: usize) -> ApiServer {
    ApiServer::new(ApiServerConfig {
        event_log_capacity: capacity,
        ..ApiServerConfig::default()
    })
}

fn name_of(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

#[tokio::test]
async fn watching_from_a_compacted_version_is_gone() {
    let api = small_log_server(10);
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    for i in 0..30 {
        pods.create(&PostParams::default(), &pod(&format!("p{i}"), json!({})))
            .await
            .unwrap();
    }
    assert_eq!(api.event_log_len(), 10);
    let mut stream = pods
        .watch(&WatchParams::default(), "3")
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Error(status)) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        other => panic!("expected a 410 error event, got {other:?}"),
    }
    let current = api.resource_version().to_string();
    let mut live = pods
        .watch(&WatchParams::default(), &current)
        .await
        .unwrap()
        .boxed();
    pods.create(&PostParams::default(), &pod("fresh", json!({})))
        .await
        .unwrap();
    match live.try_next().await.unwrap() {
        Some(WatchEvent::Added(added)) => assert_eq!(name_of(&added), "fresh"),
        other => panic!("expected ADDED, got {other:?}"),
    }
}

/// Next Apply/Delete/Init* event from a kube-runtime watcher, skipping errors.
async fn next_event(
    stream: &mut (impl futures::Stream<Item = Result<Event<Pod>, watcher::Error>> + Unpin),
) -> Event<Pod> {
    loop {
        match stream.next().await {
            Some(Ok(event)) => return event,
            Some(Err(_)) => {}
            None => panic!("watcher ended"),
        }
    }
}

#[tokio::test]
async fn kube_runtime_watcher_resumes_after_disconnect_and_relists_after_expiry() {
    let api = small_log_server(20);
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    pods.create(&PostParams::default(), &pod("p0", json!({})))
        .await
        .unwrap();
    let mut stream = watcher::watcher(pods.clone(), watcher::Config::default()).boxed();
    assert!(matches!(next_event(&mut stream).await, Event::Init));
    assert!(matches!(next_event(&mut stream).await, Event::InitApply(p) if name_of(&p) == "p0"));
    assert!(matches!(next_event(&mut stream).await, Event::InitDone));

    pods.create(&PostParams::default(), &pod("p1", json!({})))
        .await
        .unwrap();
    assert!(matches!(next_event(&mut stream).await, Event::Apply(p) if name_of(&p) == "p1"));

    api.disconnect_watches();
    pods.create(&PostParams::default(), &pod("p2", json!({})))
        .await
        .unwrap();
    match next_event(&mut stream).await {
        Event::Apply(p) => assert_eq!(name_of(&p), "p2", "resumed from the last seen version"),
        other => panic!("expected the missed event to be replayed, got {other:?}"),
    }

    api.disconnect_watches();
    for i in 3..40 {
        pods.create(&PostParams::default(), &pod(&format!("p{i}"), json!({})))
            .await
            .unwrap();
    }
    assert!(
        matches!(next_event(&mut stream).await, Event::Init),
        "expired version forces a relist"
    );
    let mut listed = Vec::new();
    loop {
        match next_event(&mut stream).await {
            Event::InitApply(p) => listed.push(name_of(&p)),
            Event::InitDone => break,
            other => panic!("unexpected {other:?} during relist"),
        }
    }
    assert_eq!(listed.len(), 40);
    pods.create(&PostParams::default(), &pod("after", json!({})))
        .await
        .unwrap();
    assert!(matches!(next_event(&mut stream).await, Event::Apply(p) if name_of(&p) == "after"));
}

/// A watch that times out in a busy cluster is resumed, not relisted: as kube-apiserver's
/// cacher does, the last bookmark goes out about 2 s before the watch's deadline, so a client
/// re-watches from a version the history still holds even when nothing it watches changed
/// since its list. (Before, the last version a quiet watch had seen was compacted away by the
/// other kinds' writes, and every kube-runtime watcher relisted at each timeout: at 2,000
/// nodes, all Pods and Nodes every 290 s of cluster time.)
#[tokio::test(start_paused = true)]
async fn a_watch_timing_out_in_a_busy_cluster_resumes_without_a_relist() {
    let api = small_log_server(20);
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    pods.create(&PostParams::default(), &pod("q0", json!({"app": "quiet"})))
        .await
        .unwrap();
    let config = watcher::Config::default().labels("app=quiet").timeout(30);
    // The watcher is driven all along, as a controller's is (it watches only while polled).
    let mut stream = watcher::watcher(pods.clone(), config).boxed();
    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            if let Ok(event) = event
                && events.send(event).is_err()
            {
                return;
            }
        }
    });
    let mut next = async || received.recv().await.expect("the watcher ended");
    assert!(matches!(next().await, Event::Init));
    assert!(matches!(next().await, Event::InitApply(p) if name_of(&p) == "q0"));
    assert!(matches!(next().await, Event::InitDone));
    // Writes the watch does not select push the list's version out of the 20-event history.
    for i in 0..40 {
        pods.create(
            &PostParams::default(),
            &pod(&format!("b{i}"), json!({"app": "busy"})),
        )
        .await
        .unwrap();
    }
    // Past the watch's 30 s timeout (the regular bookmarks come only once a minute).
    tokio::time::sleep(Duration::from_secs(45)).await;
    pods.create(&PostParams::default(), &pod("q1", json!({"app": "quiet"})))
        .await
        .unwrap();
    match next().await {
        Event::Apply(p) => assert_eq!(name_of(&p), "q1", "resumed from the last bookmark"),
        other => panic!("expected the watch to resume, got {other:?} (a relist)"),
    }
    driver.abort();
}

/// `expire_watches` (a chaos fault: an etcd compaction or watch-cache reset) ends every watch
/// with 410 Expired, and a kube-runtime watcher relists even though it was up to date.
#[tokio::test]
async fn expired_watches_end_with_410_and_watchers_relist() {
    let api = small_log_server(1000);
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    pods.create(&PostParams::default(), &pod("p0", json!({})))
        .await
        .unwrap();
    let mut stream = watcher::watcher(pods.clone(), watcher::Config::default()).boxed();
    assert!(matches!(next_event(&mut stream).await, Event::Init));
    assert!(matches!(next_event(&mut stream).await, Event::InitApply(p) if name_of(&p) == "p0"));
    assert!(matches!(next_event(&mut stream).await, Event::InitDone));
    // An event through the open watch, so the expiry below ends a live one.
    pods.create(&PostParams::default(), &pod("p1", json!({})))
        .await
        .unwrap();
    assert!(matches!(next_event(&mut stream).await, Event::Apply(p) if name_of(&p) == "p1"));
    api.expire_watches();
    // The watcher saw an error (skipped by next_event) and starts over with a list.
    let relisted = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        assert!(matches!(next_event(&mut stream).await, Event::Init));
        let mut listed = Vec::new();
        loop {
            match next_event(&mut stream).await {
                Event::InitApply(p) => listed.push(name_of(&p)),
                Event::InitDone => break listed,
                other => panic!("unexpected {other:?} during relist"),
            }
        }
    })
    .await
    .expect("the watcher relists after 410");
    assert_eq!(relisted, vec!["p0".to_string(), "p1".to_string()]);
}

#[tokio::test(start_paused = true)]
async fn bookmarks_and_timestamps_follow_virtual_time() {
    let base: jiff::Timestamp = "2030-01-01T00:00:00Z".parse().unwrap();
    let config = ApiServerConfig::with_clock(Arc::new(VirtualClock::starting_at(base)));
    let api = ApiServer::new(config);
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let start = api.resource_version().to_string();
    let mut stream = pods
        .watch(&WatchParams::default(), &start)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Bookmark(bookmark)) => {
            assert_eq!(bookmark.metadata.resource_version, start)
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
    tokio::time::advance(Duration::from_secs(3600)).await;
    let created = pods
        .create(&PostParams::default(), &pod("late", json!({})))
        .await
        .unwrap();
    let stamp = created.metadata.creation_timestamp.unwrap().0;
    assert!(stamp.as_second() - base.as_second() >= 3600, "{stamp}");
    assert!(stamp.as_second() - base.as_second() < 3700, "{stamp}");
}

#[tokio::test]
async fn metadata_and_table_watches_render_each_event() {
    let api = crate::server();
    let client = api.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let start = api.resource_version().to_string();
    let mut metadata = pods
        .watch_metadata(&WatchParams::default(), &start)
        .await
        .unwrap()
        .boxed();
    pods.create(&PostParams::default(), &pod("m1", json!({"app": "m"})))
        .await
        .unwrap();
    match metadata.try_next().await.unwrap() {
        Some(WatchEvent::Added(partial)) => {
            assert_eq!(partial.metadata.name.as_deref(), Some("m1"));
            assert_eq!(partial.types.unwrap().kind, "PartialObjectMetadata");
        }
        other => panic!("expected ADDED metadata, got {other:?}"),
    }
    let request = http::Request::get(format!(
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion={start}"
    ))
    .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
    .body(Vec::new())
    .unwrap();
    let mut lines = client.request_stream(request).await.unwrap();
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    use futures::AsyncReadExt;
    while !buffer.contains(&b'\n') {
        let read = lines.read(&mut chunk).await.unwrap();
        assert!(read > 0, "stream ended");
        buffer.extend_from_slice(&chunk[..read]);
    }
    let first_line = buffer.split(|b| *b == b'\n').next().unwrap();
    let event: serde_json::Value = serde_json::from_slice(first_line).unwrap();
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["kind"], "Table");
    assert_eq!(event["object"]["rows"][0]["cells"][0], "m1");
    assert_eq!(event["object"]["columnDefinitions"][0]["name"], "Name");
}
