//! The Consolidatable marker (Karpenter's `nodeclaim.podevents` and the consolidation part of
//! `nodeclaim.disruption`): records pod events on NodeClaims and keeps their Consolidatable
//! condition — True once `consolidateAfter` has passed without one.

mod decide;

pub use decide::{Decision, Mark, decide, pod_signature};

use super::Outcome;
use crate::api::{clear_claim_condition, modify_status, nodeclaims, set_claim_condition};
use crate::context::Context;
use driftwood_api::condition::STATUS_TRUE;
use driftwood_api::wellknown::CONDITION_CONSOLIDATABLE;
use futures::StreamExt as _;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The controller's name in logs, metrics and the per-object retries.
const CONTROLLER: &str = "nodeclaim.consolidation";

/// How many NodeClaim status writes go out at once.
const WRITES_AT_ONCE: usize = 32;

/// The pod signature of each NodeClaim as last written (a pod event is a change of it).
#[derive(Clone, Default)]
pub struct PodSignatures(Arc<Mutex<HashMap<String, u64>>>);

/// One pass: decide, write each NodeClaim's marks, requeue when the next one is due.
pub async fn pass(ctx: Context, seen: PodSignatures) -> Outcome {
    let snapshot = ctx.state.snapshot();
    let now = ctx.clock.now();
    let before = seen.0.lock().map(|m| m.clone()).unwrap_or_default();
    let decision = decide(&snapshot, &before, now.as_second());
    let api = nodeclaims(&ctx.client);
    let ready = |name: &str| {
        ctx.retries
            .ready(CONTROLLER, &format!("nodeclaim/{name}"), now)
    };
    let mut signatures = decision.signatures;
    let mut writes = Vec::new();
    for mark in &decision.marks {
        if !ready(&mark.nodeclaim) {
            // Waiting out its backoff: a pod event not written is seen again next pass.
            if mark.pod_event {
                unsee(&mut signatures, &before, &mark.nodeclaim);
            }
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
            // The pod event is not recorded: it is seen again next pass.
            if mark.pod_event {
                unsee(&mut signatures, &before, &mark.nodeclaim);
            }
        }
    }
    if let Ok(mut memory) = seen.0.lock() {
        *memory = signatures;
    }
    let outcome = match decision.next_at {
        Some(due) => Outcome::again_in(Duration::from_secs(
            u64::try_from(due - ctx.now_seconds()).unwrap_or(0).max(1),
        )),
        None => Outcome::idle(),
    };
    outcome.with_errors(errors)
}

/// Puts back the signature `nodeclaim` had before this pass.
fn unsee(signatures: &mut HashMap<String, u64>, before: &HashMap<String, u64>, nodeclaim: &str) {
    match before.get(nodeclaim) {
        Some(old) => signatures.insert(nodeclaim.to_string(), *old),
        None => signatures.remove(nodeclaim),
    };
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
