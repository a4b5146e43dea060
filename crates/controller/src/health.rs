//! /healthz, /readyz (the watch cache has synced) and /metrics over HTTP.

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

fn respond(state: &ClusterState, metrics: &Metrics, path: &str) -> Response<Full<Bytes>> {
    let (status, body) = match path {
        "/healthz" => (StatusCode::OK, "ok".to_string()),
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
    state: ClusterState,
    metrics: Metrics,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let handle = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let state = state.clone();
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let response = respond(&state, &metrics, request.uri().path());
                    async move { Ok::<_, Infallible>(response) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((local, handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_sync() {
        let state = ClusterState::new();
        let metrics = Metrics::new();
        assert_eq!(
            respond(&state, &metrics, "/healthz").status(),
            StatusCode::OK
        );
        assert_eq!(
            respond(&state, &metrics, "/readyz").status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        for kind in crate::state::Kind::ALL {
            state.mark_synced(kind);
        }
        assert_eq!(
            respond(&state, &metrics, "/readyz").status(),
            StatusCode::OK
        );
        assert_eq!(
            respond(&state, &metrics, "/nope").status(),
            StatusCode::NOT_FOUND
        );
    }
}
