//! The controllers. Each is a pass over a snapshot of the cluster state, run by [`run_loop`]
//! whenever the state changes and at least once per period.

pub mod disruption;
pub mod drift;
pub mod hash;
pub mod lifecycle;
pub mod nodeclass;
pub mod provisioner;
pub mod termination;

use crate::context::Context;
use std::future::Future;
use std::time::Duration;

/// What a pass asks of its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    /// Run again after this long instead of the loop's period (e.g. at once after acting).
    pub requeue_after: Option<Duration>,
}

impl Outcome {
    pub fn idle() -> Self {
        Self::default()
    }

    pub fn again_in(after: Duration) -> Self {
        Self {
            requeue_after: Some(after),
        }
    }
}

/// Runs `pass` now, then whenever the cluster state changes (after `debounce`, so a burst of
/// changes is one pass) and at least every `period`.
pub async fn run_loop<F, Fut>(
    ctx: Context,
    name: &'static str,
    period: Duration,
    debounce: Duration,
    mut pass: F,
) where
    F: FnMut(Context) -> Fut,
    Fut: Future<Output = Outcome>,
{
    let mut changes = ctx.state.subscribe();
    ctx.state.wait_synced().await;
    tracing::debug!(controller = name, "starting");
    loop {
        let outcome = pass(ctx.clone()).await;
        let wait = outcome.requeue_after.unwrap_or(period);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                tokio::time::sleep(debounce).await;
                changes.borrow_and_update();
            }
        }
    }
}
