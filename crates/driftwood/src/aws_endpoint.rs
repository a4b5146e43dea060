//! The simulated AWS account over HTTP on loopback, in AWS's own wire protocols (EC2 and IAM
//! Query, SSM and Pricing JSON; `driftwood_sim_aws::wire`), so the production binary's AWS
//! SDK, the AWS CLI or any SDK can be pointed at it with `AWS_ENDPOINT_URL`. Any credentials
//! are accepted, as moto does.

use bytes::Bytes;
use driftwood_sim_aws::SimAws;
use driftwood_sim_aws::wire::{WireRequest, handle};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// A running endpoint; dropping it stops it.
pub struct AwsEndpoint {
    address: SocketAddr,
    task: JoinHandle<()>,
}

impl AwsEndpoint {
    /// `http://IP:PORT`, the value of `AWS_ENDPOINT_URL`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Drop for AwsEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds `address` (port 0 picks a free one) and serves `sim` on it.
pub async fn serve(sim: Arc<SimAws>, address: SocketAddr) -> std::io::Result<AwsEndpoint> {
    let listener = TcpListener::bind(address).await?;
    let address = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "accepting an AWS API connection failed");
                    tokio::task::yield_now().await;
                    continue;
                }
            };
            while connections.try_join_next().is_some() {}
            let sim = sim.clone();
            connections.spawn(async move {
                let handler = service_fn(move |request: hyper::Request<Incoming>| {
                    let sim = sim.clone();
                    async move { Ok::<_, std::convert::Infallible>(answer(&sim, request).await) }
                });
                if let Err(error) = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), handler)
                    .await
                {
                    tracing::debug!(%error, "AWS API connection ended with an error");
                }
            });
        }
    });
    Ok(AwsEndpoint { address, task })
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
