//! Serving the API over plain HTTP/1.1 on a TCP port, and the kubeconfig that points at it.

use std::net::SocketAddr;
use std::path::Path;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use super::audit::AuditLog;
use super::service::ApiService;

/// A running HTTP server; dropping it (or calling `shutdown`) stops it.
#[derive(Debug)]
pub struct HttpServer {
    address: SocketAddr,
    task: JoinHandle<()>,
}

impl HttpServer {
    /// The bound address (with the real port when 0 was requested).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://IP:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Stop accepting and close open connections.
    pub fn shutdown(self) {
        self.task.abort();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Bind `address` (port 0 picks a free port) and serve `service` on it, recording writes in
/// `audit` when given.
pub async fn serve(
    service: ApiService,
    address: SocketAddr,
    audit: Option<AuditLog>,
) -> std::io::Result<HttpServer> {
    serve_with(address, "API", move |request: hyper::Request<Incoming>| {
        let service = service.clone();
        let audit = audit.clone();
        async move {
            let seen = audit.as_ref().map(|_| {
                let agent = request
                    .headers()
                    .get(http::header::USER_AGENT)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                (
                    request.method().clone(),
                    request.uri().path().to_string(),
                    agent,
                )
            });
            let response = service.handle(request).await;
            if let (Some(audit), Some((method, path, agent))) = (&audit, seen) {
                audit.record(&method, &path, &agent, response.status().as_u16());
            }
            response
        }
    })
    .await
}

/// Bind `address` (port 0 picks a free port) and answer every HTTP/1.1 request on it with
/// `handler` (`what` names the server in logs). The one accept loop of the embedded cluster's
/// listeners.
pub async fn serve_with<H, Fut, B>(
    address: SocketAddr,
    what: &'static str,
    handler: H,
) -> std::io::Result<HttpServer>
where
    H: Fn(hyper::Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = hyper::Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = TcpListener::bind(address).await?;
    let address = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, server = what, "accepting a connection failed");
                    tokio::task::yield_now().await;
                    continue;
                }
            };
            while connections.try_join_next().is_some() {}
            let handler = handler.clone();
            connections.spawn(async move {
                let service = service_fn(move |request: hyper::Request<Incoming>| {
                    let answer = handler(request);
                    async move { Ok::<_, std::convert::Infallible>(answer.await) }
                });
                if let Err(error) = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(%error, server = what, "connection ended with an error");
                }
            });
        }
    });
    Ok(HttpServer { address, task })
}

/// A kubeconfig document for a plain-HTTP server at `server_url`, context `driftwood`.
pub fn kubeconfig_yaml(server_url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: driftwood\n  cluster:\n    server: {server_url}\ncontexts:\n- name: driftwood\n  context:\n    cluster: driftwood\n    user: driftwood\n    namespace: default\ncurrent-context: driftwood\nusers:\n- name: driftwood\n  user: {{}}\n"
    )
}

/// Write the kubeconfig for `server_url` to `path`.
pub fn write_kubeconfig(path: &Path, server_url: &str) -> std::io::Result<()> {
    std::fs::write(path, kubeconfig_yaml(server_url))
}
