//! Starts everything: the watch cache, then the controllers (only while leader).

use crate::context::Context;
use crate::controllers::disruption::{DisruptionController, budget_signature};
use crate::controllers::{
    Outcome, drift, hash, lifecycle, nodeclass, provisioner, run_loop, termination,
};
use std::time::Duration;
use tokio::task::JoinHandle;

/// Runs `pass` every `period` (or sooner when it asks), ignoring state changes.
async fn run_periodic<F, Fut>(ctx: Context, period: Duration, mut pass: F)
where
    F: FnMut(Context) -> Fut,
    Fut: std::future::Future<Output = Outcome>,
{
    ctx.state.wait_synced().await;
    loop {
        let outcome = pass(ctx.clone()).await;
        tokio::time::sleep(outcome.requeue_after.unwrap_or(period)).await;
    }
}

/// Spawns every controller; abort the handles to stop them.
pub fn spawn_controllers(ctx: &Context) -> Vec<JoinHandle<()>> {
    let s = ctx.settings.clone();
    let debounce = Duration::from_millis(200);
    let mut handles = vec![
        tokio::spawn(provisioner::run(ctx.clone())),
        tokio::spawn(run_loop(
            ctx.clone(),
            "lifecycle",
            Duration::from_secs(10),
            debounce,
            lifecycle::pass,
        )),
        tokio::spawn(run_loop(
            ctx.clone(),
            "hash",
            Duration::from_secs(60),
            debounce,
            hash::pass,
        )),
        tokio::spawn(run_loop(
            ctx.clone(),
            "nodeclass",
            s.nodeclass_interval,
            Duration::from_secs(1),
            nodeclass::pass,
        )),
        tokio::spawn({
            let checks = drift::InstanceTypeChecks::default();
            run_loop(
                ctx.clone(),
                "drift",
                s.drift_interval,
                Duration::from_secs(1),
                move |ctx| drift::pass(ctx, checks.clone()),
            )
        }),
        tokio::spawn(run_loop(
            ctx.clone(),
            "termination",
            Duration::from_secs(10),
            debounce,
            termination::pass,
        )),
        tokio::spawn(run_periodic(
            ctx.clone(),
            Duration::from_secs(120),
            lifecycle::collect_garbage,
        )),
    ];
    let disruption_ctx = ctx.clone();
    let period = s.disruption_interval;
    handles.push(tokio::spawn(async move {
        let ctx = disruption_ctx;
        let mut controller = DisruptionController::default();
        let mut changes = ctx.state.subscribe();
        ctx.state.wait_synced().await;
        loop {
            let outcome = controller.pass(ctx.clone()).await;
            let deadline = tokio::time::Instant::now() + outcome.requeue_after.unwrap_or(period);
            let seen = ctx.state.read(budget_signature);
            // Until the period is up, wake only for a change the budget depends on.
            loop {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => break,
                    changed = changes.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        // A burst of changes is one look, at most one a second.
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        changes.borrow_and_update();
                        if ctx.state.read(budget_signature) != seen {
                            break;
                        }
                    }
                }
            }
        }
    }));
    handles
}
