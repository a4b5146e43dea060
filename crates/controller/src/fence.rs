//! The leader fence: a replica writes to the API server only while its own clock says it still
//! holds the lease. Leader election opens it after each successful renewal for the renew
//! deadline and closes it the moment the lease is lost; every write of the controllers' client
//! (creates, patches, deletes, evictions, events) passes through [`FenceLayer`] and is refused
//! once the fence is closed — also when the process was frozen (SIGSTOP, a long GC pause, a
//! starved runtime) past its deadline and has not yet noticed that a standby took over.

use driftwood_cloud::Clock;
use jiff::Timestamp;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "write refused: this replica does not hold the leader lease (renewal older than the renew deadline, or lost)"
)]
pub struct NotLeader;

/// Whether this replica may write, shared by the elector and the client layer. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Fence {
    /// None: writes always allowed (a single controller process without election).
    elected: Option<Arc<ElectedFence>>,
}

#[derive(Debug)]
struct ElectedFence {
    clock: Arc<dyn Clock>,
    /// Writes are allowed strictly before this instant (None: not leading).
    until: Mutex<Option<Timestamp>>,
}

impl Fence {
    /// A fence that never closes, for a process that runs without leader election.
    pub fn open() -> Self {
        Self { elected: None }
    }

    /// A fence under leader election, closed until the elector opens it.
    pub fn elected(clock: Arc<dyn Clock>) -> Self {
        Self {
            elected: Some(Arc::new(ElectedFence {
                clock,
                until: Mutex::new(None),
            })),
        }
    }

    /// Allows writes until `until` (a successful renewal's local time plus the renew deadline).
    pub fn hold_until(&self, until: Timestamp) {
        if let Some(e) = &self.elected {
            *e.until
                .lock()
                .unwrap_or_else(|p| crate::state::poisoned("fence", p)) = Some(until);
        }
    }

    /// Refuses every write from now on (the lease is lost or released).
    pub fn close(&self) {
        if let Some(e) = &self.elected {
            *e.until
                .lock()
                .unwrap_or_else(|p| crate::state::poisoned("fence", p)) = None;
        }
    }

    /// Whether a write may go out now.
    pub fn allows_writes(&self) -> bool {
        match &self.elected {
            None => true,
            Some(e) => {
                let until = *e
                    .until
                    .lock()
                    .unwrap_or_else(|p| crate::state::poisoned("fence", p));
                until.is_some_and(|until| e.clock.now() < until)
            }
        }
    }
}

/// Whether an HTTP method changes state on the API server.
fn is_write(method: &http::Method) -> bool {
    !matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    )
}

/// A tower layer refusing writes while `fence` is closed (reads and watches go through).
#[derive(Clone, Debug)]
pub struct FenceLayer {
    fence: Fence,
}

impl FenceLayer {
    pub fn new(fence: Fence) -> Self {
        Self { fence }
    }
}

impl<S> tower::Layer<S> for FenceLayer {
    type Service = Fenced<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Fenced {
            inner,
            fence: self.fence.clone(),
        }
    }
}

/// The service [`FenceLayer`] makes.
#[derive(Clone, Debug)]
pub struct Fenced<S> {
    inner: S,
    fence: Fence,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, B> tower::Service<http::Request<B>> for Fenced<S>
where
    S: tower::Service<http::Request<B>>,
    S::Response: Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if is_write(request.method()) && !self.fence.allows_writes() {
            tracing::warn!(
                object = %request.uri().path(),
                method = %request.method(),
                "write refused: not the leader"
            );
            return Box::pin(std::future::ready(Err(Box::new(NotLeader) as BoxError)));
        }
        let call = self.inner.call(request);
        Box::pin(async move { call.await.map_err(Into::into) })
    }
}

/// The cloud provider behind the same fence: launching and terminating instances are writes
/// too, refused while this replica does not hold the lease (reads go through).
pub struct FencedCloud {
    inner: Arc<dyn driftwood_cloud::CloudProvider>,
    fence: Fence,
}

impl FencedCloud {
    pub fn new(inner: Arc<dyn driftwood_cloud::CloudProvider>, fence: Fence) -> Self {
        Self { inner, fence }
    }

    fn check(&self, what: &str) -> Result<(), driftwood_cloud::CloudError> {
        if self.fence.allows_writes() {
            return Ok(());
        }
        tracing::warn!(operation = what, "cloud write refused: not the leader");
        Err(driftwood_cloud::CloudError::Api {
            provider: self.inner.name().to_string(),
            message: format!("{what}: {NotLeader}"),
        })
    }
}

#[async_trait::async_trait]
impl driftwood_cloud::CloudProvider for FencedCloud {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn create(
        &self,
        claim: &driftwood_api::NodeClaim,
    ) -> Result<driftwood_api::NodeClaim, driftwood_cloud::CloudError> {
        self.check("create instance")?;
        self.inner.create(claim).await
    }

    async fn delete(
        &self,
        claim: &driftwood_api::NodeClaim,
    ) -> Result<(), driftwood_cloud::CloudError> {
        self.check("terminate instance")?;
        self.inner.delete(claim).await
    }

    async fn tag_instance(
        &self,
        claim: &driftwood_api::NodeClaim,
    ) -> Result<bool, driftwood_cloud::CloudError> {
        self.check("tag instance")?;
        self.inner.tag_instance(claim).await
    }

    async fn get(
        &self,
        provider_id: &str,
    ) -> Result<driftwood_api::NodeClaim, driftwood_cloud::CloudError> {
        self.inner.get(provider_id).await
    }

    async fn list(&self) -> Result<Vec<driftwood_api::NodeClaim>, driftwood_cloud::CloudError> {
        self.inner.list().await
    }

    async fn live_among(
        &self,
        provider_ids: &std::collections::BTreeSet<String>,
    ) -> Result<std::collections::BTreeSet<String>, driftwood_cloud::CloudError> {
        self.inner.live_among(provider_ids).await
    }

    async fn instance_types(
        &self,
        pool: &driftwood_api::NodePool,
    ) -> Result<std::sync::Arc<Vec<driftwood_scheduling::InstanceType>>, driftwood_cloud::CloudError>
    {
        self.inner.instance_types(pool).await
    }

    async fn is_drifted(
        &self,
        claim: &driftwood_api::NodeClaim,
    ) -> Result<Option<driftwood_cloud::CloudDrift>, driftwood_cloud::CloudError> {
        self.inner.is_drifted(claim).await
    }

    fn mark_unavailable(&self, offering: &driftwood_cloud::OfferingKey, reason: &str) {
        self.inner.mark_unavailable(offering, reason);
    }

    fn repair_policies(&self) -> &'static [driftwood_api::repair::RepairPolicy] {
        self.inner.repair_policies()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_cloud::clock::ManualClock;
    use jiff::SignedDuration;
    use tower::{Layer, Service, ServiceExt};

    #[derive(Clone)]
    struct Echo;

    impl tower::Service<http::Request<()>> for Echo {
        type Response = &'static str;
        type Error = BoxError;
        type Future = std::future::Ready<Result<&'static str, BoxError>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            std::future::ready(Ok("sent"))
        }
    }

    fn request(method: http::Method) -> http::Request<()> {
        http::Request::builder()
            .method(method)
            .uri("/api/v1/nodes/n1")
            .body(())
            .expect("request")
    }

    async fn send(service: &mut Fenced<Echo>, method: http::Method) -> bool {
        service
            .ready()
            .await
            .expect("ready")
            .call(request(method))
            .await
            .is_ok()
    }

    /// A leader frozen past its renew deadline (SIGSTOP, a starved runtime) must not write when
    /// it wakes, even before its elector runs again: the fence is judged on the local clock.
    #[tokio::test]
    async fn writes_stop_at_the_renew_deadline_and_when_the_lease_is_lost() {
        let clock = Arc::new(ManualClock::new(
            "2026-01-01T00:00:00Z".parse().expect("time"),
        ));
        let fence = Fence::elected(clock.clone());
        let mut service = FenceLayer::new(fence.clone()).layer(Echo);
        assert!(
            !send(&mut service, http::Method::PATCH).await,
            "not leading yet"
        );
        assert!(
            send(&mut service, http::Method::GET).await,
            "reads always go"
        );

        fence.hold_until(clock.now() + SignedDuration::from_secs(10));
        for method in [
            http::Method::POST,
            http::Method::PUT,
            http::Method::PATCH,
            http::Method::DELETE,
        ] {
            assert!(send(&mut service, method).await, "leading");
        }
        clock.advance(SignedDuration::from_secs(10));
        assert!(
            !send(&mut service, http::Method::DELETE).await,
            "deadline passed"
        );
        assert!(send(&mut service, http::Method::GET).await);

        fence.hold_until(clock.now() + SignedDuration::from_secs(10));
        assert!(send(&mut service, http::Method::POST).await, "renewed");
        fence.close();
        assert!(!send(&mut service, http::Method::POST).await, "lost");
    }

    #[tokio::test]
    async fn an_open_fence_never_refuses() {
        let mut service = FenceLayer::new(Fence::open()).layer(Echo);
        assert!(send(&mut service, http::Method::DELETE).await);
    }
}
