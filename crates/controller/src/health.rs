//! /healthz (no controller loop is stuck), /readyz (the watch cache has synced) and /metrics
//! over HTTP.

use crate::exposition::Exposition;
use crate::liveness::Liveness;
use crate::metrics::Metrics;
use crate::state::ClusterState;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use tokio::net::TcpListener;

/// What the endpoints read.
#[derive(Clone)]
pub struct Probes {
    pub state: ClusterState,
    pub metrics: Metrics,
    pub liveness: Liveness,
    pub clock: std::sync::Arc<dyn driftwood_cloud::Clock>,
}

fn respond(probes: &Probes, path: &str, accept: Option<&str>) -> Response<Full<Bytes>> {
    let Probes {
        state,
        metrics,
        liveness,
        clock,
    } = probes;
    let stuck = || liveness.stuck(clock.now());
    let (status, body) = match path {
        "/healthz" => match stuck().as_slice() {
            [] => (StatusCode::OK, "ok".to_string()),
            loops => (
                StatusCode::SERVICE_UNAVAILABLE,
                loops
                    .iter()
                    .map(|(name, since)| {
                        format!("controller {name} has not completed a pass for {since:#}\n")
                    })
                    .collect(),
            ),
        },
        "/readyz" if state.synced() => (StatusCode::OK, "ok".to_string()),
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            "cache not synced".to_string(),
        ),
        "/metrics" => {
            let format = Exposition::negotiate(accept);
            let text = metrics.scrape(state, clock.now(), format);
            let mut response = Response::new(Full::new(Bytes::from(text)));
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(format.content_type()),
            );
            return response;
        }
        _ => (StatusCode::NOT_FOUND, "not found".to_string()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Serves until the task is aborted. Returns the bound address through `bound`.
pub async fn serve(
    addr: SocketAddr,
    probes: Probes,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let handle = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let probes = probes.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let accept = request
                        .headers()
                        .get(hyper::header::ACCEPT)
                        .and_then(|v| v.to_str().ok());
                    let response = respond(&probes, request.uri().path(), accept);
                    async move { Ok::<_, Infallible>(response) }
                });
                if let Err(error) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(%error, "health/metrics connection ended with an error");
                }
            });
        }
    });
    Ok((local, handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /metrics says what it sends: Prometheus text 0.0.4 unless the scraper asks for
    /// OpenMetrics (Prometheus 3 refuses a target without a Content-Type).
    #[test]
    fn metrics_come_in_the_format_asked_for_with_its_content_type() {
        let probes = Probes {
            state: ClusterState::new(),
            metrics: Metrics::new(),
            liveness: Liveness::default(),
            clock: std::sync::Arc::new(driftwood_cloud::ManualClock::new(
                "2026-01-01T00:00:00Z".parse().expect("time"),
            )),
        };
        Metrics::inc(&probes.metrics.nodeclaims_created, &[("nodepool", "a")]);
        let pool: driftwood_api::NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "a"},
            "spec": {
                "limits": {"cpu": "1k", "memory": "500Gi"},
                "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"}, "requirements": []}}
            },
            "status": {"resources": {"cpu": "3500m", "memory": "12Gi", "nodes": "2"}}
        }))
        .expect("nodepool");
        probes.state.apply("a".into(), std::sync::Arc::new(pool));
        let content_type = |r: &Response<Full<Bytes>>| {
            r.headers()[hyper::header::CONTENT_TYPE]
                .to_str()
                .expect("ascii")
                .to_string()
        };
        let text = respond(&probes, "/metrics", None);
        assert_eq!(
            content_type(&text),
            "text/plain; version=0.0.4; charset=utf-8"
        );
        let open = respond(
            &probes,
            "/metrics",
            Some("application/openmetrics-text;version=1.0.0;q=0.6,text/plain;version=0.0.4;q=0.3"),
        );
        assert_eq!(
            content_type(&open),
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        let body = |r: Response<Full<Bytes>>| {
            use http_body_util::BodyExt as _;
            let bytes = futures::executor::block_on(r.into_body().collect())
                .expect("body")
                .to_bytes();
            String::from_utf8(bytes.to_vec()).expect("utf-8")
        };
        let text = body(text);
        assert!(
            text.contains("# TYPE karpenter_nodeclaims_created_total counter\n"),
            "{text}"
        );
        assert!(!text.contains("# EOF"), "{text}");
        // Karpenter's state gauges, read at the scrape: usage and limits in cores and bytes.
        for sample in [
            "karpenter_nodepools_usage{resource_type=\"cpu\",nodepool=\"a\"} 3.5",
            "karpenter_nodepools_usage{resource_type=\"memory\",nodepool=\"a\"} 12884901888",
            "karpenter_nodepools_limit{resource_type=\"cpu\",nodepool=\"a\"} 1000",
            "karpenter_cluster_state_synced 0",
            "karpenter_cluster_state_node_count 0",
        ] {
            assert!(text.contains(sample), "{sample} in {text}");
        }
        let open = body(open);
        assert!(
            open.contains("# TYPE karpenter_nodeclaims_created counter\n"),
            "{open}"
        );
        assert!(open.ends_with("# EOF\n"), "{open}");
    }

    #[test]
    fn readiness_follows_sync_and_health_follows_the_loops() {
        use driftwood_cloud::Clock as _;
        let clock = std::sync::Arc::new(driftwood_cloud::ManualClock::new(
            "2026-01-01T00:00:00Z".parse().expect("time"),
        ));
        let probes = Probes {
            state: ClusterState::new(),
            metrics: Metrics::new(),
            liveness: Liveness::default(),
            clock: clock.clone(),
        };
        assert_eq!(respond(&probes, "/healthz", None).status(), StatusCode::OK);
        assert_eq!(
            respond(&probes, "/readyz", None).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        for kind in crate::state::Kind::ALL {
            probes.state.mark_synced(kind);
        }
        assert_eq!(respond(&probes, "/readyz", None).status(), StatusCode::OK);
        assert_eq!(
            respond(&probes, "/nope", None).status(),
            StatusCode::NOT_FOUND
        );
        // A loop that stops completing passes fails /healthz once its allowance is over.
        probes
            .liveness
            .beat("lifecycle", std::time::Duration::from_secs(10), clock.now());
        clock.advance(jiff::SignedDuration::from_secs(600));
        assert_eq!(respond(&probes, "/healthz", None).status(), StatusCode::OK);
        clock.advance(jiff::SignedDuration::from_secs(1));
        assert_eq!(
            respond(&probes, "/healthz", None).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
}
