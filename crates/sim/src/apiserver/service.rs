//! The request handler as a `tower::Service` over any HTTP body: used in-process by
//! `kube::Client::new` and by the hyper HTTP server alike.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, Request, Response, header};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::core::{ApiCore, CoreRequest, CoreResponse};
use super::error::ApiError;
use super::kube_protobuf::{self, Answer};
use super::request::parse_query;

/// The response body type.
pub type ResponseBody = UnsyncBoxBody<Bytes, Infallible>;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// State shared by all requests and watches.
#[derive(Debug)]
pub struct Shared {
    core: Mutex<ApiCore>,
    /// Latest resourceVersion, for waking watchers.
    pub changes: watch::Sender<u64>,
    /// Bumped to close every open watch (simulates dropped connections).
    pub disconnects: watch::Sender<Disconnect>,
}

/// How open watches were last cut off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Disconnect {
    /// Bumped on every cut.
    pub epoch: u64,
    /// Whether the watches end with `410 Expired` (their clients must relist) rather than
    /// just closing (their clients resume from their last resourceVersion).
    pub expire: bool,
}

impl Shared {
    /// Lock the core (recovering from a poisoned lock rather than panicking).
    pub fn lock(&self) -> MutexGuard<'_, ApiCore> {
        self.core
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The API server as a cloneable tower service.
#[derive(Debug, Clone)]
pub struct ApiService {
    shared: Arc<Shared>,
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

fn json_response(code: u16, body: &Value) -> Response<ResponseBody> {
    bytes_response(
        code,
        "application/json",
        serde_json::to_vec(body).unwrap_or_default(),
    )
}

fn error_response(error: &ApiError) -> Response<ResponseBody> {
    json_response(error.code, &error.to_status())
}

fn bytes_response(code: u16, media_type: &'static str, bytes: Vec<u8>) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(Bytes::from(bytes)).boxed_unsync());
    *response.status_mut() =
        http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(media_type),
    );
    response
}

/// Answer an object in the media type the client asked for: Kubernetes protobuf when it
/// prefers it and the kind has a table, else JSON (406 when it accepts protobuf only).
fn negotiated_response(accept: &str, code: u16, body: &Value) -> Response<ResponseBody> {
    match kube_protobuf::negotiate(accept) {
        Answer::Json => json_response(code, body),
        answer => match kube_protobuf::encode(body) {
            Some(bytes) => bytes_response(code, kube_protobuf::MEDIA_TYPE, bytes),
            None if answer == Answer::ProtobufOnly => {
                error_response(&kube_protobuf::not_acceptable(body))
            }
            None => json_response(code, body),
        },
    }
}

impl ApiService {
    /// Wrap a core.
    pub fn new(core: ApiCore) -> Self {
        let version = core.store().resource_version();
        let (changes, _) = watch::channel(version);
        let (disconnects, _) = watch::channel(Disconnect::default());
        Self {
            shared: Arc::new(Shared {
                core: Mutex::new(core),
                changes,
                disconnects,
            }),
        }
    }

    /// Shared state (for direct store access).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Handle one HTTP request with any body type.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<ResponseBody>
    where
        B: http_body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<BoxError>,
    {
        let (parts, body) = request.into_parts();
        let (limit, latency) = {
            let core = self.shared.lock();
            (core.config().max_body_bytes, core.config().latency)
        };
        let watch = parts
            .uri
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
        let delay = match parts.method {
            _ if watch => Duration::ZERO,
            http::Method::GET | http::Method::HEAD => latency.read,
            _ => latency.write,
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let body = match Limited::new(body, limit).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(error) if error.is::<http_body_util::LengthLimitError>() => {
                return error_response(&ApiError::too_large(format!(
                    "the request body exceeds the {limit} byte limit"
                )));
            }
            Err(error) => {
                return error_response(&ApiError::bad_request(format!(
                    "could not read the request body: {error}"
                )));
            }
        };
        let core_request = CoreRequest {
            method: parts.method.clone(),
            path: parts.uri.path().to_string(),
            query: parse_query(parts.uri.query()),
            content_type: header_text(&parts.headers, header::CONTENT_TYPE),
            accept: header_text(&parts.headers, header::ACCEPT),
            user_agent: header_text(&parts.headers, header::USER_AGENT),
            body,
        };
        let outcome = {
            let mut core = self.shared.lock();
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| core.handle(&core_request)));
            let warnings = core.take_warnings();
            let version = core.store().resource_version();
            drop(core);
            self.shared.changes.send_if_modified(|current| {
                let changed = *current != version;
                *current = version;
                changed
            });
            (outcome, warnings)
        };
        let (outcome, warnings) = outcome;
        match outcome {
            Ok(CoreResponse::Json(code, body)) => {
                let mut response = negotiated_response(&core_request.accept, code, &body);
                for warning in warnings {
                    // RFC 7234 warning, as kube-apiserver sends it: `299 - "text"`.
                    let text = format!("299 - {:?}", warning);
                    if let Ok(value) = header::HeaderValue::from_str(&text) {
                        response.headers_mut().append(header::WARNING, value);
                    }
                }
                response
            }
            Ok(CoreResponse::Bytes(code, "application/json", bytes))
                if kube_protobuf::negotiate(&core_request.accept) != Answer::Json =>
            {
                // A list written straight to JSON: read back only for a protobuf client.
                match serde_json::from_slice::<Value>(&bytes) {
                    Ok(body) => negotiated_response(&core_request.accept, code, &body),
                    Err(_) => bytes_response(code, "application/json", bytes),
                }
            }
            Ok(CoreResponse::Bytes(code, media_type, bytes)) => {
                bytes_response(code, media_type, bytes)
            }
            Ok(CoreResponse::Watch(plan)) => {
                // Every watch request yields once. A client that re-watches in a loop (as
                // kube-runtime's watcher does when a stream ends) then always reaches a yield
                // point, so it can be cancelled even when the server is going away and every
                // stream ends at once.
                tokio::task::yield_now().await;
                let (tx, rx) = mpsc::channel::<Bytes>(16);
                let changes = self.shared.changes.subscribe();
                let disconnects = self.shared.disconnects.subscribe();
                tokio::spawn(super::watch::run(
                    *plan,
                    Arc::clone(&self.shared),
                    changes,
                    disconnects,
                    tx,
                ));
                let stream = futures::stream::unfold(rx, |mut rx| async move {
                    rx.recv().await.map(|chunk| (chunk, rx))
                })
                .map(|chunk| Ok::<_, Infallible>(Frame::data(chunk)));
                let mut response = Response::new(StreamBody::new(stream).boxed_unsync());
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    header::HeaderValue::from_static("application/json"),
                );
                response.headers_mut().insert(
                    header::TRANSFER_ENCODING,
                    header::HeaderValue::from_static("chunked"),
                );
                response
            }
            Err(_) => error_response(&ApiError::internal(
                "the server panicked while handling the request",
            )),
        }
    }
}

impl<B> tower::Service<Request<B>> for ApiService
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = Response<ResponseBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let service = self.clone();
        Box::pin(async move { Ok(service.handle(request).await) })
    }
}
