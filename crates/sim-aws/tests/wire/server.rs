//! A loopback HTTP server (hyper) handing every request to `wire::handle`, remembering the
//! shape of each request it received.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use driftwood_sim_aws::SimAws;
use driftwood_sim_aws::wire::{WireRequest, handle};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// What one request looked like on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub content_type: Option<String>,
    pub target: Option<String>,
    pub body: String,
}

/// A running server.
pub struct Server {
    pub url: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

/// Serves `sim` on 127.0.0.1 (a free port) until the test's runtime ends.
pub async fn serve(sim: Arc<SimAws>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let sim = sim.clone();
            let record = record.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let sim = sim.clone();
                    let record = record.clone();
                    async move { respond(&sim, &record, request).await }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Server { url, seen }
}

async fn respond(
    sim: &SimAws,
    record: &Mutex<Vec<Seen>>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    record.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        content_type: header("content-type").map(str::to_string),
        target: header("x-amz-target").map(str::to_string),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let answer = handle(
        sim,
        WireRequest {
            method: parts.method.as_str(),
            path: parts.uri.path(),
            query: parts.uri.query(),
            content_type: header("content-type"),
            amz_target: header("x-amz-target"),
            body: &body,
        },
    )
    .await;
    let mut response = Response::builder()
        .status(answer.status)
        .header("content-type", answer.content_type);
    for (name, value) in answer.headers {
        response = response.header(name, value);
    }
    Ok(response.body(Full::new(Bytes::from(answer.body))).unwrap())
}
