//! The controllers. Each decides in a pure `decide` over a snapshot of the cluster state and
//! acts in a thin `pass`, run by the one loop driver ([`driver::drive`]).

pub mod consolidatable;
pub mod disruption;
pub mod drift;
pub mod driver;
pub mod hash;
pub mod interruption;
pub mod lifecycle;
pub mod nodeclass;
pub mod provisioner;
pub mod tagging;
pub mod termination;

use std::time::Duration;

/// What a pass tells its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    /// Run again after this long instead of the loop's period (e.g. at once after acting).
    pub requeue_after: Option<Duration>,
    /// Steps of this pass that failed (each logged, naming its object); they are retried.
    pub errors: u32,
}

impl Outcome {
    pub fn idle() -> Self {
        Self::default()
    }

    pub fn again_in(after: Duration) -> Self {
        Self {
            requeue_after: Some(after),
            errors: 0,
        }
    }

    /// The same outcome, with `errors` failed steps.
    pub fn with_errors(self, errors: u32) -> Self {
        Self { errors, ..self }
    }
}

/// The NodePool a NodeClaim belongs to (empty when it has none), as metrics and actions name it.
pub(crate) fn nodepool_of(claim: &driftwood_api::NodeClaim) -> String {
    use driftwood_api::lookup::ObjectLookups;
    claim.nodepool_name().unwrap_or_default().to_string()
}

/// Runs CPU-bound work (a scheduling simulation, a disruption plan) on tokio's blocking pool,
/// off the async workers, so that a long pass cannot starve the lease renewal, the watches or
/// the health endpoints. Under the embedded cluster's paused clock a blocking task holds
/// virtual time still until it returns, so simulations stay repeatable. A panic in `work` is
/// re-raised here.
pub(crate) async fn off_runtime<T, F>(work: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    /// A disruption plan at 5,000 nodes takes minutes of CPU. Run inline on the async workers
    /// it starves every other task — the lease renewal among them (a 15 s lease would lapse);
    /// on the blocking pool the other tasks keep running. One worker thread, as a busy
    /// runtime has none to spare.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_long_pass_off_the_runtime_does_not_starve_the_lease_renewal() {
        let renewals = Arc::new(AtomicU32::new(0));
        let counter = renewals.clone();
        let renewer = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
        let busy = || {
            let start = Instant::now();
            let mut x = 0u64;
            while start.elapsed() < Duration::from_millis(400) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            x
        };
        // The pass runs as a task on the one worker, as the controllers do (the test body itself
        // runs on another thread).
        let pass = tokio::spawn({
            let renewals = renewals.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(30)).await;
                // Inline: nothing else runs on the worker meanwhile.
                let before = renewals.load(Ordering::SeqCst);
                std::hint::black_box(busy());
                let inline = renewals.load(Ordering::SeqCst) - before;
                // Off the runtime: the renewal loop keeps ticking.
                let before = renewals.load(Ordering::SeqCst);
                std::hint::black_box(super::off_runtime(busy).await);
                let off = renewals.load(Ordering::SeqCst) - before;
                (inline, off)
            }
        });
        let (inline, off) = pass.await.expect("pass");
        renewer.abort();
        assert_eq!(inline, 0, "inline work starves the other tasks");
        assert!(
            off >= 3,
            "off the runtime the renewal ran {off} times in 400 ms"
        );
    }
}
