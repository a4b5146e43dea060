//! The one loop driver every controller runs under: a pass now, then again when something it
//! cares about changes, when the pass asks, or when its period is up — with exponential backoff
//! of the timed requeue while passes fail, an error counter per controller, a panicking pass
//! recovered and retried as a failed one, controller-runtime's work-queue metrics, and
//! cancellation between passes (a pass in progress finishes; nothing is cut off half-way).

use super::Outcome;
use crate::context::Context;
use crate::liveness::LoopGuard;
use crate::metrics::Metrics;
use crate::state::Snapshot;
pub use crate::workqueue_metrics::Worker;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What a [`Wake::Signal`] watches: a few numbers computed from the cluster state.
pub type Probe = Arc<dyn Fn(&Snapshot) -> Vec<u64> + Send + Sync>;

/// What wakes a controller before its timer.
#[derive(Clone)]
pub enum Wake {
    /// Any change to the cluster state, `debounce` later (a burst of changes is one pass).
    Change { debounce: Duration },
    /// A change of `probe` over the cluster state, looked at no more than every `look_every`.
    Signal { probe: Probe, look_every: Duration },
    /// Only the timer.
    Timer,
}

/// Exponential backoff of the timed requeue after failed passes: `base`, doubled per
/// consecutive failed pass, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            max: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The delay after `failures` consecutive failed passes (none after a clean pass).
    pub fn delay(&self, failures: u32) -> Option<Duration> {
        let doublings = failures.checked_sub(1)?.min(16);
        Some(self.base.saturating_mul(1 << doublings).min(self.max))
    }
}

/// How one controller loop runs.
#[derive(Clone)]
pub struct LoopSpec {
    /// The loop's own name (liveness, `/healthz`).
    pub name: &'static str,
    /// Karpenter's name for the controller whose work it does: the `controller` label of the
    /// reconcile, work-queue and cloud-call metrics ([`Worker`]).
    pub controller: &'static str,
    /// The longest it sleeps between passes when nothing wakes it.
    pub period: Duration,
    pub wake: Wake,
    pub backoff: Backoff,
}

/// How long to wait for the next timed pass after `outcome`, with `failures` consecutive
/// failed passes so far (this one included). A failing controller never requeues itself faster
/// than its backoff; what it waits for (a state change) still wakes it.
pub fn next_wait(
    outcome: &Outcome,
    period: Duration,
    backoff: &Backoff,
    failures: u32,
) -> Duration {
    let requested = outcome.requeue_after.unwrap_or(period);
    match backoff.delay(failures) {
        Some(delay) => requested.max(delay),
        None => requested,
    }
}

/// Runs `pass` under `spec` until `cancel` fires (checked between passes).
pub async fn drive<F, Fut>(ctx: Context, spec: LoopSpec, cancel: CancellationToken, mut pass: F)
where
    F: FnMut(Context) -> Fut,
    Fut: Future<Output = Outcome>,
{
    let mut changes = ctx.state.subscribe();
    tokio::select! {
        () = cancel.cancelled() => return,
        () = ctx.state.wait_synced() => {}
    }
    tracing::debug!(controller = spec.controller, worker = spec.name, "starting");
    ctx.liveness.beat(spec.name, spec.period, ctx.clock.now());
    let _alive = LoopGuard {
        liveness: ctx.liveness.clone(),
        name: spec.name,
    };
    let loops = &ctx.metrics.loops;
    let worker = Worker {
        controller: spec.controller,
        name: spec.name,
    };
    loops.started(worker);
    loops.added(worker);
    let mut queued_since = tokio::time::Instant::now();
    let mut failures = 0u32;
    loop {
        let outcome = metered_pass(
            &ctx,
            worker,
            queued_since.elapsed().as_secs_f64(),
            pass(ctx.clone()),
            |outcome: &Outcome| outcome.errors,
        )
        .await
        // A pass that panicked counts as one failed step and is retried after its backoff.
        .unwrap_or_else(|| Outcome::idle().with_errors(1));
        ctx.liveness.beat(spec.name, spec.period, ctx.clock.now());
        if outcome.errors > 0 {
            failures = failures.saturating_add(1);
        } else {
            failures = 0;
        }
        if outcome.requeue_after.is_some() || outcome.errors > 0 {
            loops.retried(spec.controller);
        }
        let deadline =
            tokio::time::Instant::now() + next_wait(&outcome, spec.period, &spec.backoff, failures);
        let seen = match &spec.wake {
            Wake::Signal { probe, .. } => Some(ctx.state.read(|s| probe(s))),
            _ => None,
        };
        // Wait for the timer, a wake-up, or cancellation.
        loop {
            tokio::select! {
                () = cancel.cancelled() => {
                    tracing::debug!(controller = spec.controller, worker = spec.name, "stopped");
                    return;
                }
                () = tokio::time::sleep_until(deadline) => {
                    // A timed pass (the period, the pass's own requeue or its backoff) is an
                    // add when its time comes, as controller-runtime's AddAfter.
                    loops.added(worker);
                    queued_since = tokio::time::Instant::now();
                    break;
                }
                changed = changes.changed(), if !matches!(spec.wake, Wake::Timer) => {
                    if changed.is_err() {
                        return;
                    }
                    let woke = tokio::time::Instant::now();
                    match &spec.wake {
                        Wake::Change { debounce } => {
                            loops.added(worker);
                            tokio::time::sleep(*debounce).await;
                            changes.borrow_and_update();
                            queued_since = woke;
                            break;
                        }
                        Wake::Signal { probe, look_every } => {
                            tokio::time::sleep(*look_every).await;
                            changes.borrow_and_update();
                            if Some(ctx.state.read(|s| probe(s))) != seen {
                                loops.added(worker);
                                queued_since = woke;
                                break;
                            }
                        }
                        Wake::Timer => {}
                    }
                }
            }
        }
        if cancel.is_cancelled() {
            return;
        }
    }
}

/// Runs one pass of `controller` after `queued_seconds` in its queue, as controller-runtime
/// meters a reconcile: the work-queue and worker families, the reconcile time (real time: on
/// the embedded cluster's virtual clock no time passes while a pass computes), the result
/// counted (`errors` of the pass's result failed steps; a panic is one) and each cloud call
/// labelled with `controller`. A panic is recovered, logged and counted, and None returned:
/// the caller retries after its backoff (the loop, its liveness and the other controllers
/// carry on). Every loop runs its passes through here, the provisioner's own loop too.
pub(crate) async fn metered_pass<T>(
    ctx: &Context,
    worker: Worker,
    queued_seconds: f64,
    pass: impl Future<Output = T>,
    errors: impl FnOnce(&T) -> u32,
) -> Option<T> {
    let controller = worker.controller;
    let loops = &ctx.metrics.loops;
    loops.pass_started(worker, queued_seconds);
    let started = std::time::Instant::now();
    let result = recover_panic(
        controller,
        crate::metered_cloud::CONTROLLER.scope(controller, pass),
    )
    .await;
    let seconds = started.elapsed().as_secs_f64();
    loops.pass_finished(worker, seconds, result.is_none());
    Metrics::observe(
        &ctx.metrics.reconcile_time,
        &[("controller", controller)],
        seconds,
    );
    let failed = result.as_ref().map_or(1, errors);
    let label = if failed > 0 { "error" } else { "success" };
    Metrics::inc(
        &ctx.metrics.reconcile_total,
        &[("controller", controller), ("result", label)],
    );
    if failed > 0 {
        ctx.metrics
            .reconcile_errors
            .get_or_create(&vec![("controller".into(), controller.into())])
            .inc_by(u64::from(failed));
    }
    result
}

/// `work`'s result, or None when it panicked (the panic logged as `controller`'s).
pub(crate) async fn recover_panic<T>(
    controller: &'static str,
    work: impl Future<Output = T>,
) -> Option<T> {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(work).catch_unwind().await {
        Ok(result) => Some(result),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic with no message".to_string());
            tracing::error!(
                controller,
                panic = %message,
                "observed a panic in a controller pass; the pass is retried"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_pass_is_recovered() {
        let ended: Option<Outcome> =
            recover_panic("drift", async { panic!("index out of bounds") }).await;
        assert_eq!(ended, None);
        let ended =
            recover_panic("drift", async { Outcome::again_in(Duration::from_secs(3)) }).await;
        assert_eq!(ended, Some(Outcome::again_in(Duration::from_secs(3))));
    }

    #[test]
    fn backoff_doubles_per_failed_pass_up_to_its_cap() {
        let backoff = Backoff::default();
        let delays: Vec<Option<u64>> = (0..9)
            .map(|n| backoff.delay(n).map(|d| d.as_secs()))
            .collect();
        assert_eq!(
            delays,
            [
                None,
                Some(1),
                Some(2),
                Some(4),
                Some(8),
                Some(16),
                Some(32),
                Some(60),
                Some(60)
            ]
        );
        assert_eq!(backoff.delay(u32::MAX), Some(Duration::from_secs(60)));
    }

    #[test]
    fn a_failing_pass_never_requeues_faster_than_its_backoff() {
        let backoff = Backoff::default();
        let period = Duration::from_secs(10);
        let busy = Outcome::again_in(Duration::from_secs(1));
        assert_eq!(
            next_wait(&busy, period, &backoff, 0),
            Duration::from_secs(1)
        );
        let failing = Outcome { errors: 2, ..busy };
        assert_eq!(
            next_wait(&failing, period, &backoff, 4),
            Duration::from_secs(8)
        );
        // A pass that asks for a longer wait than the backoff gets it.
        assert_eq!(
            next_wait(&Outcome::idle(), period, &backoff, 1),
            Duration::from_secs(10)
        );
    }
}
