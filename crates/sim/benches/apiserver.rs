//! API server throughput through the in-process kube client: create+get round trips, a
//! 1,000-pod list, and a watch delivering 1,000 events; and the server's own side of listing
//! and watching 100,000 pods (the tower service's response body, no client decoding).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use driftwood_sim::{ApiServer, ApiServerConfig};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"app": "bench", "tier": "web"}},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
    }))
    .unwrap()
}

fn benches(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let api = runtime.block_on(async { ApiServer::new(ApiServerConfig::default()) });
    let client = runtime.block_on(async { api.client() });
    let pods: Api<Pod> = Api::namespaced(client, "default");

    let mut next = 0u64;
    c.bench_function("create_then_get_pod", |b| {
        b.iter(|| {
            next += 1;
            let name = format!("p-{next}");
            runtime.block_on(async {
                pods.create(&PostParams::default(), &pod(&name))
                    .await
                    .unwrap();
                pods.get(&name).await.unwrap();
            });
        });
    });

    let listed = ApiServer::new(ApiServerConfig::default());
    let list_pods: Api<Pod> =
        runtime.block_on(async { Api::namespaced(listed.client(), "default") });
    runtime.block_on(async {
        for i in 0..1000 {
            list_pods
                .create(&PostParams::default(), &pod(&format!("l-{i:04}")))
                .await
                .unwrap();
        }
    });
    c.bench_function("list_1000_pods_with_label_selector", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let list = list_pods
                    .list(&ListParams::default().labels("app=bench,tier in (web)"))
                    .await
                    .unwrap();
                assert_eq!(list.items.len(), 1000);
            });
        });
    });

    c.bench_function("watch_replay_1000_events", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut stream = list_pods
                    .watch(&WatchParams::default(), "0")
                    .await
                    .unwrap()
                    .boxed();
                let mut seen = 0;
                while seen < 1000 {
                    if let Some(Ok(WatchEvent::Added(_))) = stream.next().await {
                        seen += 1;
                    }
                }
            });
        });
    });
}

/// The server's side of `GET /api/v1/pods` over 100,000 pods (DRIFTWOOD_BENCH_LIST_PODS to
/// change the count): routing, selection and the response body, without a client decoding it.
fn list_at_scale(c: &mut Criterion) {
    use http_body_util::BodyExt;
    let count: usize = std::env::var("DRIFTWOOD_BENCH_LIST_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let api = runtime.block_on(async { ApiServer::new(ApiServerConfig::default()) });
    let pods: Api<Pod> = runtime.block_on(async { Api::namespaced(api.client(), "default") });
    runtime.block_on(async {
        for i in 0..count {
            pods.create(&PostParams::default(), &pod(&format!("s-{i:06}")))
                .await
                .unwrap();
        }
    });
    let service = api.service();
    let mut group = c.benchmark_group("list_at_scale");
    group.sample_size(10);
    group.bench_function(format!("list_{count}_pods_server_side"), |b| {
        b.iter(|| {
            runtime.block_on(async {
                let request = http::Request::get("/api/v1/pods")
                    .body(http_body_util::Full::new(bytes::Bytes::new()))
                    .unwrap();
                let response = service.handle(request).await;
                let body = response.into_body().collect().await.unwrap().to_bytes();
                assert!(body.len() > count * 100);
            });
        });
    });
    group.bench_function(
        format!("watch_{count}_pods_initial_events_server_side"),
        |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let request = http::Request::get("/api/v1/pods?watch=true&resourceVersion=0")
                        .body(http_body_util::Full::new(bytes::Bytes::new()))
                        .unwrap();
                    let mut body = service.handle(request).await.into_body();
                    let mut lines = 0;
                    while lines < count {
                        let frame = body.frame().await.unwrap().unwrap();
                        if let Ok(data) = frame.into_data() {
                            lines += data.iter().filter(|b| **b == b'\n').count();
                        }
                    }
                });
            });
        },
    );
    group.finish();
}

criterion_group!(apiserver, benches, list_at_scale);
criterion_main!(apiserver);
