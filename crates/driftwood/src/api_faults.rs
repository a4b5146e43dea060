//! Faults between the controllers and the API server: conflicts, throttling and server errors
//! on writes, slow responses, and a process that dies between two of its writes. A tower layer
//! in front of the in-process API server consults one shared [`ApiFaults`]; each controller
//! process gets its own [`ProcessGate`] so a crash kills one process, not its standby.

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An HTTP error the API server answers a write with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    /// 409 Conflict (an optimistic-concurrency failure).
    Conflict,
    /// 429 Too Many Requests (API priority and fairness).
    TooManyRequests,
    /// 500 Internal Server Error.
    Internal,
    /// 503 Service Unavailable (etcd leader change, apiserver restart).
    Unavailable,
}

impl WriteError {
    fn code(self) -> u16 {
        match self {
            Self::Conflict => 409,
            Self::TooManyRequests => 429,
            Self::Internal => 500,
            Self::Unavailable => 503,
        }
    }

    fn reason(self) -> &'static str {
        match self {
            Self::Conflict => "Conflict",
            Self::TooManyRequests => "TooManyRequests",
            Self::Internal => "InternalError",
            Self::Unavailable => "ServiceUnavailable",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Self::Conflict => {
                "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again (injected)"
            }
            Self::TooManyRequests => "too many requests, please try again later (injected)",
            Self::Internal => {
                "an error on the server has prevented the request from succeeding (injected)"
            }
            Self::Unavailable => "the server is currently unable to handle the request (injected)",
        }
    }
}

/// What is armed.
#[derive(Debug, Default)]
struct State {
    /// Errors the next writes get, in order.
    write_errors: VecDeque<WriteError>,
    /// The next this-many requests (reads or writes) are delayed by `slow_by`.
    slow_requests: u32,
    slow_by: Duration,
    /// The process making the write that brings this to zero dies right after it.
    crash_after_writes: Option<u32>,
    /// Identities of processes that died and have not been collected.
    crashed: Vec<String>,
}

/// The faults armed for the controllers' API requests (shared by every process).
#[derive(Debug, Clone, Default)]
pub struct ApiFaults(Arc<Mutex<State>>);

/// One controller process's connection: dead once the process crashed.
#[derive(Debug, Clone)]
pub struct ProcessGate {
    identity: String,
    dead: Arc<AtomicBool>,
}

impl ProcessGate {
    /// A live process called `identity`.
    pub fn new(identity: &str) -> Self {
        Self {
            identity: identity.to_string(),
            dead: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether the process has crashed.
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }
}

/// What the layer does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Forward,
    Delay(Duration),
    Fail(WriteError),
    /// Forward it, then the process is dead.
    ForwardThenDie,
    /// The process is dead: the request never leaves it.
    Dead,
}

fn is_write(method: &http::Method) -> bool {
    matches!(
        *method,
        http::Method::POST | http::Method::PUT | http::Method::PATCH | http::Method::DELETE
    )
}

impl ApiFaults {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next `count` writes fail with `error`.
    pub fn fail_next_writes(&self, error: WriteError, count: u32) {
        let mut st = self.lock();
        for _ in 0..count {
            st.write_errors.push_back(error);
        }
    }

    /// The next `count` requests take `by` longer.
    pub fn slow_next_requests(&self, count: u32, by: Duration) {
        let mut st = self.lock();
        st.slow_requests += count;
        st.slow_by = by;
    }

    /// The process that makes the `writes`-th write from now dies right after sending it.
    pub fn crash_after_writes(&self, writes: u32) {
        self.lock().crash_after_writes = Some(writes.max(1));
    }

    /// Whether a crash is armed and not yet triggered.
    pub fn crash_pending(&self) -> bool {
        self.lock().crash_after_writes.is_some()
    }

    /// The identities of processes that died since the last call.
    pub fn take_crashed(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().crashed)
    }

    /// Disarm everything (the faults window is over).
    pub fn clear(&self) {
        let mut st = self.lock();
        st.write_errors.clear();
        st.slow_requests = 0;
        st.crash_after_writes = None;
    }

    fn decide(&self, gate: &ProcessGate, method: &http::Method) -> Verdict {
        if gate.is_dead() {
            return Verdict::Dead;
        }
        let mut st = self.lock();
        if is_write(method) {
            if let Some(left) = st.crash_after_writes.as_mut() {
                *left -= 1;
                if *left == 0 {
                    st.crash_after_writes = None;
                    gate.dead.store(true, Ordering::SeqCst);
                    st.crashed.push(gate.identity.clone());
                    return Verdict::ForwardThenDie;
                }
            }
            if let Some(error) = st.write_errors.pop_front() {
                return Verdict::Fail(error);
            }
        }
        if st.slow_requests > 0 {
            st.slow_requests -= 1;
            return Verdict::Delay(st.slow_by);
        }
        Verdict::Forward
    }
}

fn status(error: WriteError) -> Response<Body> {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": error.message(),
        "reason": error.reason(),
        "code": error.code(),
    });
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(bytes)).boxed_unsync());
    *response.status_mut() =
        http::StatusCode::from_u16(error.code()).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    if error == WriteError::TooManyRequests {
        response.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
    }
    response
}

/// The API server service behind the faults, as seen by one process.
#[derive(Clone)]
pub struct FaultyService<S> {
    inner: S,
    faults: ApiFaults,
    gate: ProcessGate,
}

impl<S> FaultyService<S> {
    /// `inner` as seen through `faults` by the process behind `gate`.
    pub fn new(inner: S, faults: ApiFaults, gate: ProcessGate) -> Self {
        Self {
            inner,
            faults,
            gate,
        }
    }
}

/// The response body the layer answers with (the API server's own body type).
pub type Body = driftwood_sim::apiserver::ResponseBody;

impl<S, ReqBody> tower::Service<Request<ReqBody>> for FaultyService<S>
where
    S: tower::Service<Request<ReqBody>, Response = Response<Body>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
{
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let verdict = self.faults.decide(&self.gate, request.method());
        let mut inner = self.inner.clone();
        std::mem::swap(&mut inner, &mut self.inner);
        Box::pin(async move {
            match verdict {
                Verdict::Dead => {
                    Err("connection refused: the controller process has crashed".into())
                }
                Verdict::Fail(error) => Ok(status(error)),
                Verdict::Delay(by) => {
                    tokio::time::sleep(by).await;
                    inner.call(request).await.map_err(Into::into)
                }
                Verdict::Forward | Verdict::ForwardThenDie => {
                    inner.call(request).await.map_err(Into::into)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_fail_in_order_then_pass_and_reads_are_never_failed() {
        let faults = ApiFaults::default();
        let gate = ProcessGate::new("a");
        faults.fail_next_writes(WriteError::Conflict, 1);
        faults.fail_next_writes(WriteError::TooManyRequests, 1);
        assert_eq!(faults.decide(&gate, &http::Method::GET), Verdict::Forward);
        assert_eq!(
            faults.decide(&gate, &http::Method::PATCH),
            Verdict::Fail(WriteError::Conflict)
        );
        assert_eq!(
            faults.decide(&gate, &http::Method::POST),
            Verdict::Fail(WriteError::TooManyRequests)
        );
        assert_eq!(
            faults.decide(&gate, &http::Method::DELETE),
            Verdict::Forward
        );
        assert_eq!(status(WriteError::TooManyRequests).status(), 429);
    }

    #[test]
    fn a_crash_kills_only_the_process_that_made_the_write() {
        let faults = ApiFaults::default();
        let a = ProcessGate::new("a");
        let b = ProcessGate::new("b");
        faults.crash_after_writes(2);
        assert_eq!(faults.decide(&a, &http::Method::PATCH), Verdict::Forward);
        assert_eq!(faults.decide(&a, &http::Method::GET), Verdict::Forward);
        assert_eq!(
            faults.decide(&a, &http::Method::POST),
            Verdict::ForwardThenDie
        );
        assert_eq!(faults.decide(&a, &http::Method::GET), Verdict::Dead);
        assert_eq!(faults.decide(&b, &http::Method::PATCH), Verdict::Forward);
        assert_eq!(faults.take_crashed(), vec!["a".to_string()]);
        assert!(faults.take_crashed().is_empty());
    }

    #[test]
    fn slow_requests_are_counted_down() {
        let faults = ApiFaults::default();
        let gate = ProcessGate::new("a");
        faults.slow_next_requests(1, Duration::from_secs(3));
        assert_eq!(
            faults.decide(&gate, &http::Method::GET),
            Verdict::Delay(Duration::from_secs(3))
        );
        assert_eq!(faults.decide(&gate, &http::Method::GET), Verdict::Forward);
    }
}
