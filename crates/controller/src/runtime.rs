//! Starts the controllers (only while leader), each under the one loop driver, and stops them
//! between passes.

use crate::context::Context;
use crate::controllers::driver::{Backoff, LoopSpec, Wake, drive};
use crate::controllers::{
    consolidatable, disruption, drift, hash, interruption, lifecycle, nodeclass, provisioner,
    tagging, termination,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The running controllers. [`Controllers::stop`] stops them between passes; dropping them
/// cancels too, and aborts whatever has not stopped by then.
pub struct Controllers {
    cancel: CancellationToken,
    handles: Vec<JoinHandle<()>>,
}

impl Controllers {
    /// Asks every controller to stop after its current pass.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Stops every controller after its current pass, waiting at most `grace` before aborting
    /// the rest.
    pub async fn stop(mut self, grace: Duration) {
        self.cancel.cancel();
        let handles = std::mem::take(&mut self.handles);
        let waited = tokio::time::timeout(grace, futures::future::join_all(handles)).await;
        if waited.is_err() {
            tracing::warn!(
                ?grace,
                "controllers did not stop within the grace period; aborted"
            );
        }
    }
}

impl Drop for Controllers {
    fn drop(&mut self) {
        self.cancel.cancel();
        for handle in &self.handles {
            handle.abort();
        }
    }
}

/// Spawns every controller, and reports this replica as the leader (`leader_election_master_status`).
pub fn spawn_controllers(ctx: &Context) -> Controllers {
    ctx.metrics.observe_leading(true);
    let s = ctx.settings.clone();
    let cancel = CancellationToken::new();
    let on_change = |debounce| Wake::Change { debounce };
    // A loop named as the Karpenter controller whose work it does, or (`for_`) not.
    let spec = |name, period, wake| LoopSpec {
        name,
        controller: name,
        period,
        wake,
        backoff: Backoff::default(),
    };
    let for_ = |controller, spec: LoopSpec| LoopSpec { controller, ..spec };
    let debounce = Duration::from_millis(200);
    let checks = drift::InstanceTypeChecks::default();
    let drift_memory = drift::DriftMemory::default();
    let disruption_loop = disruption::DisruptionController::default();
    let marker_memory = consolidatable::MarkerMemory::default();
    let nodeclass_loop = nodeclass::NodeClassController::default();
    let garbage_collector = lifecycle::GarbageCollector::default();
    let tagging_memory = tagging::Memory::default();
    let mut handles = vec![
        tokio::spawn(provisioner::run(ctx.clone(), cancel.clone())),
        tokio::spawn(drive(
            ctx.clone(),
            for_(
                "nodeclaim.lifecycle",
                spec("lifecycle", Duration::from_secs(10), on_change(debounce)),
            ),
            cancel.clone(),
            lifecycle::pass,
        )),
        tokio::spawn(drive(
            ctx.clone(),
            // Karpenter's nodepool.hash and nodeclass.hash: woken by changes to the kinds it
            // reads, never by pod events.
            for_(
                "nodepool.hash",
                spec(
                    "hash",
                    Duration::from_secs(60),
                    Wake::Signal {
                        probe: Arc::new(hash::wake_signature),
                        look_every: debounce,
                    },
                ),
            ),
            cancel.clone(),
            hash::pass,
        )),
        // Node classes: resolved against the cloud only when due (refresh::due); woken by
        // changes to classes, NodePools and NodeClaims, never by pod events.
        tokio::spawn(drive(
            ctx.clone(),
            spec(
                "nodeclass",
                s.nodeclass_interval,
                Wake::Signal {
                    probe: Arc::new(nodeclass::wake_signature),
                    look_every: Duration::from_secs(1),
                },
            ),
            cancel.clone(),
            move |ctx| {
                let controller = nodeclass_loop.clone();
                async move { controller.pass(ctx).await }
            },
        )),
        tokio::spawn(drive(
            ctx.clone(),
            // Drift and the Consolidatable marker are nodeclaim.disruption's two workers.
            // Woken by the kinds a verdict depends on, never by pod events; each pass judges
            // again only what changed (drift::DriftMemory).
            for_(
                "nodeclaim.disruption",
                spec(
                    "drift",
                    s.drift_interval,
                    Wake::Signal {
                        probe: Arc::new(drift::wake_signature),
                        look_every: Duration::from_secs(1),
                    },
                ),
            ),
            cancel.clone(),
            move |ctx| drift::pass(ctx, checks.clone(), drift_memory.clone()),
        )),
        // Pod events and Consolidatable: woken by any change (a pod bound or leaving), and when
        // the next NodeClaim's consolidateAfter runs out.
        tokio::spawn(drive(
            ctx.clone(),
            for_(
                "nodeclaim.disruption",
                spec(
                    "nodeclaim.consolidation",
                    Duration::from_secs(60),
                    on_change(debounce),
                ),
            ),
            cancel.clone(),
            move |ctx| consolidatable::pass(ctx, marker_memory.clone()),
        )),
        tokio::spawn(drive(
            ctx.clone(),
            for_(
                "node.termination",
                spec("termination", Duration::from_secs(10), on_change(debounce)),
            ),
            cancel.clone(),
            termination::pass,
        )),
        // Registration tags: woken when the number of NodeClaims due them changes, one
        // instance a second while any are.
        tokio::spawn(drive(
            ctx.clone(),
            spec(
                tagging::CONTROLLER,
                Duration::from_secs(60),
                Wake::Signal {
                    probe: Arc::new(tagging::wake_signature),
                    look_every: Duration::from_secs(1),
                },
            ),
            cancel.clone(),
            move |ctx| tagging::pass(ctx, tagging_memory.clone()),
        )),
        tokio::spawn(drive(
            ctx.clone(),
            spec(
                "nodeclaim.garbagecollection",
                Duration::from_secs(120),
                Wake::Timer,
            ),
            cancel.clone(),
            move |ctx| lifecycle::collect_garbage(ctx, garbage_collector.clone()),
        )),
        // Disruption: until its period is up, wake only for a change the budget depends on
        // (a candidate finished terminating, a replacement initialized, a node drifted), looked
        // at no more than once a second.
        tokio::spawn(drive(
            ctx.clone(),
            spec(
                "disruption",
                s.disruption_interval,
                Wake::Signal {
                    probe: Arc::new(|s| {
                        disruption::budget_signature(s)
                            .iter()
                            .map(|&n| n as u64)
                            .collect()
                    }),
                    look_every: Duration::from_secs(1),
                },
            ),
            cancel.clone(),
            move |ctx| {
                let controller = disruption_loop.clone();
                async move { controller.pass(ctx).await }
            },
        )),
    ];
    // Interruption: a long poll of the queue after another (Karpenter requeues at once; the
    // 20 s long poll paces it), only with a queue configured.
    if let Some(queue) = ctx.interruption.clone() {
        tracing::info!(queue = queue.name(), "watching interruption queue");
        let stop = cancel.clone();
        handles.push(tokio::spawn(drive(
            ctx.clone(),
            spec(
                interruption::CONTROLLER,
                Duration::from_secs(30),
                Wake::Timer,
            ),
            cancel.clone(),
            move |ctx| interruption::pass(ctx, queue.clone(), stop.clone()),
        )));
    }
    // Instance status: EC2's own health checks and scheduled events, once a minute, with or
    // without a queue (as Karpenter).
    if let Some(reader) = ctx.instance_status.clone() {
        let seen = interruption::instance_status::Seen::default();
        let refused = interruption::instance_status::Refused::default();
        handles.push(tokio::spawn(drive(
            ctx.clone(),
            spec(
                interruption::instance_status::CONTROLLER,
                driftwood_aws::interruption::instance_status::POLL_INTERVAL,
                Wake::Timer,
            ),
            cancel.clone(),
            move |ctx| {
                interruption::instance_status::pass(
                    ctx,
                    reader.clone(),
                    seen.clone(),
                    refused.clone(),
                )
            },
        )));
    }
    Controllers { cancel, handles }
}
