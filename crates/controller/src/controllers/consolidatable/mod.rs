//! The Consolidatable marker (Karpenter's `nodeclaim.podevents` and the consolidation part of
//! `nodeclaim.disruption`): records pod events on NodeClaims and keeps their Consolidatable
//! condition — True once `consolidateAfter` has passed without one.

mod decide;

pub use decide::{Decision, Mark, Memory, decide, decide_changed, pod_signature};

use super::Outcome;
use crate::api::{clear_claim_condition, modify_status, nodeclaims, set_claim_condition};
use crate::context::Context;
use driftwood_api::condition::STATUS_TRUE;
use driftwood_api::wellknown::CONDITION_CONSOLIDATABLE;
use futures::StreamExt as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The controller's name in logs, metrics and the per-object retries: Karpenter's name for the
/// controller whose work this loop shares with drift (its Consolidatable sub-reconciler).
const CONTROLLER: &str = "nodeclaim.disruption";

/// How many NodeClaim status writes go out at once.
const WRITES_AT_ONCE: usize = 32;

/// What the marker remembers between passes ([`Memory`]): each NodeClaim's pod signature as
/// last written, and what the last pass looked at.
#[derive(Clone, Default)]
pub struct MarkerMemory(Arc<Mutex<Memory>>);

/// One pass: decide for the NodeClaims something changed for, write each one's marks, requeue
/// when the next one is due.
pub async fn pass(ctx: Context, memory: MarkerMemory) -> Outcome {
    let snapshot = ctx.state.snapshot();
    let now = ctx.clock.now();
    // Taken out while the pass runs (passes of one controller never overlap).
    let mut remembered = memory
        .0
        .lock()
        .map(|mut m| std::mem::take(&mut *m))
        .unwrap_or_default();
    let decision = decide_changed(&snapshot, &mut remembered, now.as_second());
    let api = nodeclaims(&ctx.client);
    let ready = |name: &str| {
        ctx.retries
            .ready(CONTROLLER, &format!("nodeclaim/{name}"), now)
    };
    let mut writes = Vec::new();
    for mark in &decision.marks {
        if !ready(&mark.nodeclaim) {
            // Waiting out its backoff: looked at again next pass, its pod event seen again.
            not_written(&mut remembered, &decision, mark);
            continue;
        }
        let (ctx, api) = (&ctx, &api);
        writes.push(async move { (mark, write(ctx, api, mark).await) });
    }
    let results: Vec<_> = futures::stream::iter(writes)
        .buffered(WRITES_AT_ONCE)
        .collect()
        .await;
    let mut errors = 0u32;
    let at = ctx.clock.now();
    for (mark, result) in &results {
        let object = format!("nodeclaim/{}", mark.nodeclaim);
        if ctx
            .retries
            .record(&ctx.metrics, CONTROLLER, &object, "mark", at, result)
        {
            errors += 1;
            not_written(&mut remembered, &decision, mark);
        }
    }
    let next_at = remembered.next_at();
    let backing_off = !remembered.unwritten.is_empty();
    if let Ok(mut m) = memory.0.lock() {
        *m = remembered;
    }
    let outcome = match next_at {
        Some(due) => Outcome::again_in(Duration::from_secs(
            u64::try_from(due - ctx.now_seconds()).unwrap_or(0).max(1),
        )),
        // A mark not written is tried again when its backoff allows, at the latest.
        None if backing_off => Outcome::again_in(Duration::from_secs(1)),
        None => Outcome::idle(),
    };
    outcome.with_errors(errors)
}

/// Remembers that `mark` was not written: its NodeClaim is looked at again next pass, with the
/// pod signature it had before a pod event, so the event is seen again.
fn not_written(memory: &mut Memory, decision: &Decision, mark: &Mark) {
    match decision.before.get(&mark.nodeclaim) {
        Some(&before) if mark.pod_event => memory.unsee(&mark.nodeclaim, before),
        _ => {
            memory.unwritten.insert(mark.nodeclaim.clone());
        }
    }
}

/// Writes one NodeClaim's marks in one status patch.
async fn write(
    ctx: &Context,
    api: &kube::Api<driftwood_api::NodeClaim>,
    mark: &Mark,
) -> Result<(), kube::Error> {
    let now = ctx.now();
    let written = modify_status(&ctx.state, api, &mark.nodeclaim, |c| {
        let mut changed = false;
        if mark.pod_event {
            c.status
                .get_or_insert_with(Default::default)
                .last_pod_event_time = Some(now.clone());
            changed = true;
        }
        changed |= match mark.consolidatable {
            Some(true) => set_claim_condition(
                c,
                CONDITION_CONSOLIDATABLE,
                STATUS_TRUE,
                CONDITION_CONSOLIDATABLE,
                "",
                now.clone(),
            ),
            Some(false) => clear_claim_condition(c, CONDITION_CONSOLIDATABLE),
            None => false,
        };
        changed
    })
    .await?;
    if written.is_some() {
        match mark.consolidatable {
            Some(true) => tracing::debug!(nodeclaim = %mark.nodeclaim, "marking consolidatable"),
            Some(false) => {
                tracing::debug!(nodeclaim = %mark.nodeclaim, "removing consolidatable status condition")
            }
            None => {}
        }
    }
    Ok(())
}
