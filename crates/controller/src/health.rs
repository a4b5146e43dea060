//! /healthz (no controller loop is stuck), /readyz (the watch cache has synced) and /metrics
//! over HTTP.

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

fn respond(probes: &Probes, path: &str) -> Response<Full<Bytes>> {
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
        "/metrics" => (StatusCode::OK, metrics.render()),
        _ => (StatusCode::NOT_FOUND, "not found".to_string()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
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
                    let response = respond(&probes, request.uri().path());
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
        assert_eq!(respond(&probes, "/healthz").status(), StatusCode::OK);
        assert_eq!(
            respond(&probes, "/readyz").status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        for kind in crate::state::Kind::ALL {
            probes.state.mark_synced(kind);
        }
        assert_eq!(respond(&probes, "/readyz").status(), StatusCode::OK);
        assert_eq!(respond(&probes, "/nope").status(), StatusCode::NOT_FOUND);
        // A loop that stops completing passes fails /healthz once its allowance is over.
        probes
            .liveness
            .beat("lifecycle", std::time::Duration::from_secs(10), clock.now());
        clock.advance(jiff::SignedDuration::from_secs(600));
        assert_eq!(respond(&probes, "/healthz").status(), StatusCode::OK);
        clock.advance(jiff::SignedDuration::from_secs(1));
        assert_eq!(
            respond(&probes, "/healthz").status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
}
