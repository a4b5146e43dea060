//! The interruption controller (Karpenter's `interruption`, on with `--interruption-queue`):
//! polls the SQS queue EventBridge fills with EC2 and AWS Health events, and for each spot
//! interruption warning, scheduled maintenance or instance stopping/terminating deletes the
//! instance's NodeClaim — termination then taints, drains through the Eviction API and
//! terminates, while the provisioner launches capacity for the pods at once (they are pods of a
//! deleting node). A spot interruption also takes its offering out of use for a while. A message
//! is deleted once handled; one whose handling failed comes back after the visibility timeout
//! and is handled again.

pub mod decide;
pub mod instance_status;

use crate::context::Context;
use crate::events::EventType;
use crate::metrics::Metrics;
use decide::{ClaimAction, MessagePlan};
use driftwood_api::wellknown::ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP;
use driftwood_aws::interruption::{InterruptionQueue, Kind};
use kube::api::{DeleteParams, Preconditions};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use super::Outcome;

/// The controller's name (metrics, logs, backoff).
pub const CONTROLLER: &str = "interruption";

/// One poll of the queue and the handling of what it returned. The long poll ends early when
/// `cancel` fires, so a replica that stops leading does not hold its loop for 20 seconds.
pub async fn pass(
    ctx: Context,
    queue: Arc<InterruptionQueue>,
    cancel: CancellationToken,
) -> Outcome {
    let received = tokio::select! {
        received = queue.receive() => received,
        () = cancel.cancelled() => return Outcome::idle(),
    };
    let received = match received {
        Ok(received) => received,
        Err(error) => {
            tracing::error!(controller = CONTROLLER, queue = queue.name(), %error, "getting messages from queue");
            Metrics::inc(
                &ctx.metrics.object_errors,
                &[("controller", CONTROLLER), ("step", "receive messages")],
            );
            return Outcome::idle().with_errors(1);
        }
    };
    if received.is_empty() {
        return Outcome::again_in(Duration::ZERO);
    }
    let snapshot = ctx.state.snapshot();
    let plans = decide::decide(&snapshot, &received);
    let handled = futures::future::join_all(
        plans
            .iter()
            .map(|plan| handle(&ctx, &queue, &snapshot, plan)),
    )
    .await;
    let errors = handled.iter().filter(|ok| !**ok).count();
    Outcome::again_in(Duration::ZERO).with_errors(u32::try_from(errors).unwrap_or(u32::MAX))
}

/// Handles one message; returns whether it was handled and deleted.
async fn handle(
    ctx: &Context,
    queue: &InterruptionQueue,
    snapshot: &crate::state::Snapshot,
    plan: &MessagePlan,
) -> bool {
    let Some(kind) = plan.kind else {
        tracing::warn!(
            controller = CONTROLLER,
            message = %plan.message_id,
            error = plan.unreadable.as_deref().unwrap_or_default(),
            "failed parsing interruption message; deleting it"
        );
        return delete_message(ctx, queue, plan).await;
    };
    Metrics::inc(
        &ctx.metrics.interruption_received_messages,
        &[("message_type", kind.label())],
    );
    let mut handled = true;
    for action in &plan.claims {
        handled &= act(ctx, CONTROLLER, snapshot, kind, action).await;
    }
    if !handled {
        // Left on the queue: received again after the visibility timeout.
        return false;
    }
    if let Some(time) = plan.time {
        let waited = ctx.clock.now().duration_since(time).as_secs_f64();
        if waited >= 0.0 {
            ctx.metrics
                .interruption_message_queue_duration
                .observe(waited);
        }
    }
    delete_message(ctx, queue, plan).await
}

async fn delete_message(ctx: &Context, queue: &InterruptionQueue, plan: &MessagePlan) -> bool {
    let result = queue.delete(&plan.receipt_handle).await;
    let failed = ctx.retries.record(
        &ctx.metrics,
        CONTROLLER,
        &format!("message/{}", plan.message_id),
        "delete message",
        ctx.clock.now(),
        &result,
    );
    if !failed {
        ctx.metrics.interruption_deleted_messages.inc();
    }
    !failed
}

/// Reports the message on the NodeClaim and its Node, marks the offering, sets the termination
/// deadline to now and deletes the NodeClaim if the kind asks; returns whether every write
/// succeeded. `controller` names the loop (logs, metrics, backoff).
pub(crate) async fn act(
    ctx: &Context,
    controller: &'static str,
    snapshot: &crate::state::Snapshot,
    kind: Kind,
    action: &ClaimAction,
) -> bool {
    let Some(claim) = snapshot.store.nodeclaims.get(&action.nodeclaim) else {
        return true;
    };
    let node = action
        .node
        .as_ref()
        .and_then(|name| snapshot.store.nodes.get(name));
    if let Some((reason, warning, note)) = kind.event() {
        let type_ = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        report(ctx, claim, node, type_, reason, [note, note]).await;
    }
    if let Some(offering) = &action.unavailable {
        ctx.cloud.mark_unavailable(offering, kind.label());
    }
    if action.deadline_now && !set_deadline_now(ctx, controller, &action.nodeclaim).await {
        return false;
    }
    if !action.delete {
        return true;
    }
    let params = DeleteParams {
        preconditions: claim.metadata.uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let result = match crate::api::nodeclaims(&ctx.client)
        .delete(&action.nodeclaim, &params)
        .await
    {
        Ok(_) => Ok(true),
        Err(error) if crate::api::is_not_found(&error) => Ok(false),
        Err(error) => Err(error),
    };
    let failed = ctx.retries.record(
        &ctx.metrics,
        controller,
        &format!("nodeclaim/{}", action.nodeclaim),
        "delete nodeclaim",
        ctx.clock.now(),
        &result.as_ref().map(|_| ()),
    );
    if failed {
        return false;
    }
    if result.unwrap_or(false) {
        tracing::info!(
            controller = controller,
            nodeclaim = %action.nodeclaim,
            node = action.node.as_deref().unwrap_or_default(),
            message_type = kind.label(),
            "initiating delete from interruption message"
        );
        report(
            ctx,
            claim,
            node,
            EventType::Warning,
            "TerminatingOnInterruption",
            [
                "Interruption triggered termination for the NodeClaim",
                "Interruption triggered termination for the Node",
            ],
        )
        .await;
        ctx.metrics
            .count_disrupted(snapshot, &action.nodeclaim, &action.nodepool, kind.label());
    }
    true
}

/// Sets the NodeClaim's termination deadline to now (Karpenter's forceful termination: the
/// drain then deletes pods without waiting on their PodDisruptionBudgets); returns whether the
/// write succeeded (a NodeClaim already gone needs none).
async fn set_deadline_now(ctx: &Context, controller: &'static str, nodeclaim: &str) -> bool {
    // RFC 3339 in whole seconds, as Karpenter writes it.
    let now = ctx.clock.now();
    let now = jiff::Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string();
    let result = crate::api::modify(
        &ctx.state,
        &crate::api::nodeclaims(&ctx.client),
        nodeclaim,
        |c| {
            let annotations = c.metadata.annotations.get_or_insert_with(Default::default);
            if annotations.contains_key(ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP) {
                return false;
            }
            annotations.insert(
                ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP.to_string(),
                now.clone(),
            );
            true
        },
    )
    .await;
    let result = match result {
        Err(error) if crate::api::is_not_found(&error) => Ok(None),
        other => other,
    };
    !ctx.retries.record(
        &ctx.metrics,
        controller,
        &format!("nodeclaim/{nodeclaim}"),
        "set termination deadline",
        ctx.clock.now(),
        &result.map(|_| ()),
    )
}

/// Publishes `reason` on the NodeClaim and on its Node (if it registered one), each with its
/// note, as Karpenter reports interruptions on both.
async fn report(
    ctx: &Context,
    claim: &driftwood_api::NodeClaim,
    node: Option<&std::sync::Arc<k8s_openapi::api::core::v1::Node>>,
    type_: EventType,
    reason: &str,
    [on_claim, on_node]: [&str; 2],
) {
    ctx.events.publish(claim, type_, reason, on_claim).await;
    if let Some(node) = node {
        ctx.events
            .publish(node.as_ref(), type_, reason, on_node)
            .await;
    }
}
