//! client-go's request metrics as Karpenter exports them (through operatorpkg):
//! `client_go_request_total{code,method}` for every request the controllers' Kubernetes client
//! sends, and `client_go_request_duration_seconds{verb,group,version,kind,subresource}` for each
//! that is not a watch, kept by a tower layer on that client.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use crate::metrics::Labels;

/// operatorpkg's latency buckets: 1 ms growing by half, twenty of them (to about 2.2 s).
fn latency_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 1.5, 20))
}

/// The two families; cheap to clone (the client's layer and the registry share them).
#[derive(Clone, Debug)]
pub struct ClientMetrics {
    pub requests: Family<Labels, Counter>,
    pub duration: Family<Labels, Histogram, fn() -> Histogram>,
}

impl Default for ClientMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(latency_buckets),
        }
    }
}

impl ClientMetrics {
    /// Registers the families in `registry`.
    pub fn register(&self, registry: &mut driftwood_cloud::metric_registry::DeclaredRegistry) {
        registry.metric(
            "client_go_request",
            "Requests to the Kubernetes API server, by status code (<error> when no answer \
             came) and HTTP method",
            self.requests.clone(),
        );
        registry.metric(
            "client_go_request_duration_seconds",
            "Latency of requests to the Kubernetes API server (watches left out), by verb, \
             group, version, kind (the resource) and subresource",
            self.duration.clone(),
        );
    }

    fn record(&self, method: &http::Method, route: Option<&Route>, code: &str, seconds: f64) {
        self.requests
            .get_or_create(&vec![
                ("code".into(), code.into()),
                ("method".into(), method.as_str().into()),
            ])
            .inc();
        if let Some(route) = route.filter(|r| !r.watch) {
            self.duration
                .get_or_create(&vec![
                    ("verb".into(), route.verb(method).into()),
                    ("group".into(), route.group.clone()),
                    ("version".into(), route.version.clone()),
                    ("kind".into(), route.kind.clone()),
                    ("subresource".into(), route.subresource.clone()),
                ])
                .observe(seconds);
        }
    }
}

/// What a request's path names: `/api/v1/namespaces/default/pods/web-1/eviction` is group "",
/// version v1, kind pods, a name, subresource eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub group: String,
    pub version: String,
    /// The resource (plural), as client-go's metrics name it.
    pub kind: String,
    pub subresource: String,
    /// Whether the path names one object.
    pub named: bool,
    /// A watch (`?watch=true`): long-lived, so not timed.
    pub watch: bool,
}

impl Route {
    /// The route of `uri`, or None for a path outside the resource API (`/version`, discovery
    /// of a group).
    pub fn parse(uri: &http::Uri) -> Option<Route> {
        let segments: Vec<&str> = uri.path().split('/').skip(1).collect();
        let (group, rest) = match *segments.first()? {
            "api" => ("", &segments[1..]),
            "apis" => (*segments.get(1)?, segments.get(2..)?),
            _ => return None,
        };
        let (version, mut rest) = rest.split_first()?;
        // A namespaced path (`namespaces/<ns>/<resource>...`), not the namespace itself.
        if rest.first() == Some(&"namespaces") && rest.len() >= 3 {
            rest = &rest[2..];
        }
        let kind = rest.first().filter(|k| !k.is_empty())?;
        let watch = uri.query().is_some_and(|q| {
            q.split('&')
                .any(|pair| pair == "watch=true" || pair == "watch=1")
        });
        Some(Route {
            group: group.to_string(),
            version: (*version).to_string(),
            kind: (*kind).to_string(),
            named: rest.len() >= 2,
            subresource: rest.get(2).map(|s| (*s).to_string()).unwrap_or_default(),
            watch,
        })
    }

    /// client-go's verb for `method` on this route: a POST creates, a GET without a name lists,
    /// a PUT updates a named object (creates otherwise); PATCH and DELETE keep their names.
    pub fn verb(&self, method: &http::Method) -> &'static str {
        match *method {
            http::Method::POST => "CREATE",
            http::Method::GET if self.named => "GET",
            http::Method::GET => "LIST",
            http::Method::PUT if self.named => "UPDATE",
            http::Method::PUT => "CREATE",
            http::Method::PATCH => "PATCH",
            http::Method::DELETE => "DELETE",
            http::Method::HEAD => "HEAD",
            _ => "OTHER",
        }
    }
}

/// A tower layer counting and timing each request of a Kubernetes client.
#[derive(Clone, Debug)]
pub struct ClientMetricsLayer {
    metrics: ClientMetrics,
}

impl ClientMetricsLayer {
    pub fn new(metrics: ClientMetrics) -> Self {
        Self { metrics }
    }
}

impl<S> tower::Layer<S> for ClientMetricsLayer {
    type Service = MeteredClient<S>;

    fn layer(&self, inner: S) -> Self::Service {
        MeteredClient {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// The service [`ClientMetricsLayer`] makes.
#[derive(Clone, Debug)]
pub struct MeteredClient<S> {
    inner: S,
    metrics: ClientMetrics,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, B, R> tower::Service<http::Request<B>> for MeteredClient<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    R: Send + 'static,
{
    type Response = http::Response<R>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<R>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.method().clone();
        let route = Route::parse(request.uri());
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let call = self.inner.call(request);
        Box::pin(async move {
            let result = call.await.map_err(Into::into);
            let code = match &result {
                Ok(response) => response.status().as_str().to_string(),
                Err(_) => "<error>".to_string(),
            };
            metrics.record(
                &method,
                route.as_ref(),
                &code,
                started.elapsed().as_secs_f64(),
            );
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer, Service};

    fn route(uri: &str) -> Option<Route> {
        Route::parse(&uri.parse().unwrap())
    }

    /// The paths operatorpkg's parser documents, and the ones driftwood's controllers send.
    #[test]
    fn paths_name_group_version_kind_and_subresource() {
        let eviction = route("/api/v1/namespaces/default/pods/web-1/eviction").unwrap();
        assert_eq!(
            (eviction.group.as_str(), eviction.version.as_str()),
            ("", "v1")
        );
        assert_eq!(
            (eviction.kind.as_str(), eviction.subresource.as_str()),
            ("pods", "eviction")
        );
        assert_eq!(eviction.verb(&http::Method::POST), "CREATE");
        let lease =
            route("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/driftwood").unwrap();
        assert_eq!(
            (lease.group.as_str(), lease.kind.as_str(), lease.named),
            ("coordination.k8s.io", "leases", true)
        );
        assert_eq!(lease.verb(&http::Method::PUT), "UPDATE");
        let claims =
            route("/apis/karpenter.sh/v1/nodeclaims?watch=true&resourceVersion=5").unwrap();
        assert!(claims.watch && !claims.named);
        assert_eq!(claims.verb(&http::Method::GET), "LIST");
        let status = route("/apis/karpenter.sh/v1/nodeclaims/default-abcde/status").unwrap();
        assert_eq!(status.subresource, "status");
        assert_eq!(status.verb(&http::Method::PATCH), "PATCH");
        let namespaces = route("/api/v1/namespaces").unwrap();
        assert_eq!(
            (namespaces.kind.as_str(), namespaces.named),
            ("namespaces", false)
        );
        let namespace = route("/api/v1/namespaces/kube-system").unwrap();
        assert_eq!(
            (namespace.kind.as_str(), namespace.named),
            ("namespaces", true)
        );
        let pods = route("/api/v1/namespaces/default/pods").unwrap();
        assert_eq!((pods.kind.as_str(), pods.named), ("pods", false));
        assert_eq!(route("/version"), None);
        assert_eq!(route("/apis/karpenter.sh"), None);
    }

    #[derive(Clone)]
    struct Answer(Option<u16>);

    impl Service<http::Request<()>> for Answer {
        type Response = http::Response<()>;
        type Error = BoxError;
        type Future = std::future::Ready<Result<http::Response<()>, BoxError>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            std::future::ready(match self.0 {
                Some(code) => Ok(http::Response::builder().status(code).body(()).unwrap()),
                None => Err("connection refused".into()),
            })
        }
    }

    #[tokio::test]
    async fn each_request_is_counted_by_code_and_timed_unless_a_watch() {
        let metrics = ClientMetrics::default();
        let mut registry = driftwood_cloud::metric_registry::DeclaredRegistry::new();
        metrics.register(&mut registry);
        let layer = ClientMetricsLayer::new(metrics);
        let send = |code: Option<u16>, method: http::Method, uri: &str| {
            let mut service = layer.layer(Answer(code));
            let request = http::Request::builder()
                .method(method)
                .uri(uri)
                .body(())
                .unwrap();
            async move { service.call(request).await.is_ok() }
        };
        assert!(
            send(
                Some(201),
                http::Method::POST,
                "/api/v1/namespaces/a/pods/p/eviction"
            )
            .await
        );
        assert!(
            send(
                Some(429),
                http::Method::POST,
                "/api/v1/namespaces/a/pods/p/eviction"
            )
            .await
        );
        assert!(send(Some(200), http::Method::GET, "/api/v1/pods?watch=true").await);
        assert!(!send(None, http::Method::PATCH, "/api/v1/nodes/n-1").await);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry.registry()).unwrap();
        for line in [
            "client_go_request_total{code=\"201\",method=\"POST\"} 1",
            "client_go_request_total{code=\"429\",method=\"POST\"} 1",
            "client_go_request_total{code=\"200\",method=\"GET\"} 1",
            "client_go_request_total{code=\"<error>\",method=\"PATCH\"} 1",
            "client_go_request_duration_seconds_count{verb=\"CREATE\",group=\"\",version=\"v1\",kind=\"pods\",subresource=\"eviction\"} 2",
            "client_go_request_duration_seconds_count{verb=\"PATCH\",group=\"\",version=\"v1\",kind=\"nodes\",subresource=\"\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        assert!(
            !text.contains("verb=\"LIST\""),
            "a watch is not timed:\n{text}"
        );
    }
}
