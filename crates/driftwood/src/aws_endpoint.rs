//! The simulated AWS account over HTTP on loopback, in AWS's own wire protocols (EC2 and IAM
//! Query, SSM and Pricing JSON; `driftwood_sim_aws::wire`), so the production binary's AWS
//! SDK, the AWS CLI or any SDK can be pointed at it with `AWS_ENDPOINT_URL`. Any credentials
//! are accepted, as moto does.

use bytes::Bytes;
use driftwood_sim::apiserver::http::{HttpServer, serve_with};
use driftwood_sim_aws::SimAws;
use driftwood_sim_aws::wire::{WireRequest, handle};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use std::net::SocketAddr;
use std::sync::Arc;

/// Binds `address` (port 0 picks a free one) and serves `sim` on it; `url()` of the server is
/// the value of `AWS_ENDPOINT_URL`.
pub async fn serve(sim: Arc<SimAws>, address: SocketAddr) -> std::io::Result<HttpServer> {
    serve_with(
        address,
        "AWS API",
        move |request: hyper::Request<Incoming>| {
            let sim = sim.clone();
            async move { answer(&sim, request).await }
        },
    )
    .await
}

async fn answer(sim: &SimAws, request: hyper::Request<Incoming>) -> hyper::Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            tracing::debug!(%error, "reading an AWS API request body failed");
            Bytes::new()
        }
    };
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
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
    let mut response = hyper::Response::new(Full::new(Bytes::from(answer.body)));
    *response.status_mut() = http::StatusCode::from_u16(answer.status)
        .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    if let Ok(value) = http::HeaderValue::from_str(answer.content_type) {
        headers.insert(http::header::CONTENT_TYPE, value);
    }
    for (name, value) in answer.headers {
        if let Ok(value) = http::HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}
