//! Termination: NodeClaims being deleted are drained and their instances terminated before
//! the karpenter.sh/termination finalizer is released — taint, evict in waves through the
//! Eviction API (a PDB's 429 means wait), force out what the terminationGracePeriod no
//! longer allows, terminate the instance, delete the Node, release the finalizers. Also:
//! deleting a Node deletes its NodeClaim, and NodeClaims past expireAfter are deleted.
//! [`decide`] plans it all from the cache; [`pass`] carries the plans out.

mod decide;

pub use decide::{
    Decision, DeleteReason, Plan, Step, decide, instances_to_check, instances_to_describe,
    node_is_ready, volume_attachments_on,
};

use super::Outcome;
use crate::api::{
    add_taint, delete, disrupted_taint, is_not_found, is_too_many_requests, modify, modify_status,
    nodeclaims, nodes, remove_finalizer, set_claim_condition,
};
use crate::context::Context;
use crate::events::EventType;
use crate::metrics::Metrics;
use crate::state::Snapshot;
use driftwood_api::condition::{STATUS_FALSE, STATUS_TRUE, STATUS_UNKNOWN};
use driftwood_api::lookup::ProviderId as _;
use driftwood_api::wellknown::{
    ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP, CONDITION_DRAINED, CONDITION_INSTANCE_TERMINATING,
    CONDITION_VOLUMES_DETACHED, FINALIZER_TERMINATION, LABEL_EXCLUDE_FROM_LOAD_BALANCERS,
};
use driftwood_disruption::cached_pod::CachedPod;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, EvictParams};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The controller's name in logs, metrics and the per-object retries.
const CONTROLLER: &str = "node.termination";

/// Why a termination step failed.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("{0}")]
    Api(#[from] kube::Error),
    #[error("{0}")]
    Cloud(#[from] driftwood_cloud::CloudError),
    #[error("{failed} of {tried} evictions failed; first: {first}")]
    Evictions {
        failed: usize,
        tried: usize,
        first: kube::Error,
    },
}

/// How soon a pass runs again while something is terminating.
const TERMINATING_REQUEUE: Duration = Duration::from_secs(1);

/// Whether the executor goes on with the next step of a plan.
enum Next {
    Continue,
    Stop,
}

pub async fn pass(ctx: Context) -> Outcome {
    let snapshot = ctx.state.snapshot();
    // Observe what only the cloud knows — which of the instances being terminated still exist,
    // in one call per pass rather than a Describe per instance — then decide from data.
    let asked = instances_to_describe(&snapshot);
    let live = if asked.is_empty() {
        None
    } else {
        match ctx.cloud.live_among(&asked).await {
            Ok(live) => Some(live),
            Err(error) => {
                tracing::warn!(cluster = %ctx.settings.cluster_name, instances = asked.len(), %error, "describing the instances being terminated failed; will retry");
                return Outcome::again_in(TERMINATING_REQUEUE).with_errors(1);
            }
        }
    };
    let gone: BTreeSet<String> = instances_to_check(&snapshot)
        .into_iter()
        .filter(|id| live.as_ref().is_some_and(|live| !live.contains(id)))
        .collect();
    let decision = decide(
        &snapshot,
        ctx.now_seconds(),
        ctx.settings.unprotected_pacing,
        &gone,
    );
    let now = ctx.clock.now();
    // Each plan is one NodeClaim's termination: they go on together, a few dozen at a time, as
    // Karpenter's termination controller reconciles nodes in parallel (one after another, a
    // wave of 100 draining nodes waited on each other's round trips to the API server).
    let mut plans = Vec::new();
    for plan in &decision.plans {
        // A NodeClaim whose last step failed waits out its own backoff.
        if ctx.retries.ready(CONTROLLER, &plan.subject, now) {
            plans.push(run_plan(&ctx, &snapshot, live.as_ref(), plan));
        }
    }
    let failed: Vec<bool> = futures::stream::iter(plans)
        .buffered(PLANS_AT_ONCE)
        .collect()
        .await;
    let errors = u32::try_from(failed.iter().filter(|f| **f).count()).unwrap_or(u32::MAX);
    let outcome = if decision.busy {
        Outcome::again_in(TERMINATING_REQUEUE)
    } else {
        Outcome::idle()
    };
    outcome.with_errors(errors)
}

/// How many NodeClaims' terminations go on at once.
const PLANS_AT_ONCE: usize = 32;

/// Carries out one NodeClaim's plan, step by step, until a step stops it or fails; records the
/// outcome for its backoff. Returns whether it failed.
async fn run_plan(
    ctx: &Context,
    snapshot: &Snapshot,
    live: Option<&BTreeSet<String>>,
    plan: &Plan,
) -> bool {
    let mut result = Ok(());
    let mut failed_step = "";
    for step in &plan.steps {
        match execute(ctx, snapshot, live, step).await {
            Ok(Next::Continue) => {}
            Ok(Next::Stop) => break,
            Err(error) => {
                failed_step = step.name();
                result = Err(error);
                break;
            }
        }
    }
    ctx.retries.record(
        &ctx.metrics,
        CONTROLLER,
        &plan.subject,
        failed_step,
        ctx.clock.now(),
        &result,
    )
}

/// Carries out one step.
async fn execute(
    ctx: &Context,
    snapshot: &Snapshot,
    live: Option<&BTreeSet<String>>,
    step: &Step,
) -> Result<Next, StepError> {
    match step {
        Step::DeleteNodeClaim {
            nodeclaim,
            nodepool,
            reason,
        } => {
            match reason {
                DeleteReason::Expired => {
                    tracing::info!(%nodeclaim, reason = "expired", "disrupting nodeclaim(s) via delete");
                }
                DeleteReason::NodeDeleted => {
                    tracing::info!(%nodeclaim, "deleting nodeclaim: its node was deleted");
                }
            }
            delete(&nodeclaims(&ctx.client), nodeclaim).await?;
            // Counted once deleted (a failed delete is retried, not counted twice).
            if matches!(reason, DeleteReason::Expired) {
                let snapshot = ctx.state.snapshot();
                ctx.metrics
                    .count_disrupted(&snapshot, nodeclaim, nodepool, "expired");
            }
        }
        Step::TaintForDrain { node } => {
            // The taint keeps new pods off; the label takes the node out of external load
            // balancers before its pods go (Karpenter sets both in one write).
            let written = modify(&ctx.state, &nodes(&ctx.client), node, |n| {
                let tainted = add_taint(n, &disrupted_taint());
                let labels = n.metadata.labels.get_or_insert_with(BTreeMap::new);
                let excluded = labels
                    .insert(
                        LABEL_EXCLUDE_FROM_LOAD_BALANCERS.to_string(),
                        "karpenter".to_string(),
                    )
                    .is_none();
                tainted | excluded
            })
            .await?;
            if written.is_some() {
                tracing::info!(%node, taint = "karpenter.sh/disrupted:NoSchedule", "tainted node");
            }
        }
        Step::StampDeadline { nodeclaim, at } => {
            let stamped = modify(&ctx.state, &nodeclaims(&ctx.client), nodeclaim, |c| {
                c.metadata
                    .annotations
                    .get_or_insert_with(BTreeMap::new)
                    .insert(
                        ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP.into(),
                        at.clone(),
                    )
                    .is_none()
            })
            .await?;
            // Karpenter's TerminationGracePeriodExpiring, on the NodeClaim and its Node, once
            // (when the deadline is written).
            if let Some(claim) = stamped {
                let note = format!("All pods will be deleted by {at}");
                ctx.events
                    .publish(
                        &claim,
                        EventType::Warning,
                        "TerminationGracePeriodExpiring",
                        &note,
                    )
                    .await;
                if let Some(node) = snapshot.node_of(&claim) {
                    ctx.events
                        .publish(
                            node.as_ref(),
                            EventType::Warning,
                            "TerminationGracePeriodExpiring",
                            &note,
                        )
                        .await;
                }
            }
        }
        Step::Evict { node, pods } => evict(ctx, snapshot, node, pods).await?,
        Step::ForceDelete { pods } => {
            let mut failures = Vec::new();
            for forced in pods {
                let (namespace, pod_name) = forced
                    .pod
                    .split_once('/')
                    .unwrap_or(("default", &forced.pod));
                let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
                let params = DeleteParams {
                    grace_period_seconds: u32::try_from(forced.grace_period_seconds).ok(),
                    ..Default::default()
                };
                match api.delete(pod_name, &params).await {
                    Ok(_) => {
                        Metrics::inc(
                            &ctx.metrics.pods_drained,
                            &[("reason", "termination-grace-period")],
                        );
                        if let Some(pod) = snapshot.store.pods.get(&forced.pod) {
                            let note = disrupted_note(snapshot, pod, forced.grace_period_seconds);
                            ctx.events
                                .publish_ref(
                                    pod.object_reference(),
                                    EventType::Normal,
                                    "Disrupted",
                                    &note,
                                )
                                .await;
                        }
                    }
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => {
                        tracing::warn!(pod = %forced.pod, error = %e, "forced deletion failed");
                        failures.push(e);
                    }
                }
            }
            let failed = failures.len();
            if let Some(first) = failures.into_iter().next() {
                return Err(StepError::Evictions {
                    failed,
                    tried: pods.len(),
                    first,
                });
            }
        }
        Step::Drained {
            nodeclaim,
            nodepool,
        } => {
            let now = ctx.now();
            let written = modify_status(&ctx.state, &nodeclaims(&ctx.client), nodeclaim, |c| {
                set_claim_condition(
                    c,
                    CONDITION_DRAINED,
                    STATUS_TRUE,
                    "Drained",
                    "",
                    now.clone(),
                )
            })
            .await?;
            if written.is_some() {
                Metrics::inc(&ctx.metrics.nodes_drained, &[("nodepool", nodepool)]);
            }
        }
        Step::WaitForVolumes {
            node,
            nodeclaim,
            attachments,
        } => {
            tracing::debug!(%node, volume_attachments = %attachments.join(","), "waiting for volumes to detach before terminating the instance");
            let now = ctx.now();
            let marked = modify_status(&ctx.state, &nodeclaims(&ctx.client), nodeclaim, |c| {
                set_claim_condition(
                    c,
                    CONDITION_VOLUMES_DETACHED,
                    STATUS_UNKNOWN,
                    "AwaitingVolumeDetachment",
                    "AwaitingVolumeDetachment",
                    now.clone(),
                )
            })
            .await?;
            // Said once, when the wait begins (the condition's write), not on every pass.
            if marked.is_some()
                && let Some(cached) = snapshot.store.nodes.get(node)
            {
                let note = format!(
                    "Awaiting deletion of bound volumeattachments ({})",
                    attachments.join(", ")
                );
                ctx.events
                    .publish(
                        cached.as_ref(),
                        EventType::Normal,
                        "AwaitingVolumeDetachment",
                        &note,
                    )
                    .await;
            }
            return Ok(Next::Stop);
        }
        Step::MarkInstanceTerminating {
            nodeclaim,
            volumes_detached,
        } => {
            let now = ctx.now();
            modify_status(&ctx.state, &nodeclaims(&ctx.client), nodeclaim, |c| {
                let volumes = match volumes_detached {
                    Some(true) => set_claim_condition(
                        c,
                        CONDITION_VOLUMES_DETACHED,
                        STATUS_TRUE,
                        CONDITION_VOLUMES_DETACHED,
                        "",
                        now.clone(),
                    ),
                    Some(false) => set_claim_condition(
                        c,
                        CONDITION_VOLUMES_DETACHED,
                        STATUS_FALSE,
                        "TerminationGracePeriodElapsed",
                        "TerminationGracePeriodElapsed",
                        now.clone(),
                    ),
                    None => false,
                };
                let terminating = set_claim_condition(
                    c,
                    CONDITION_INSTANCE_TERMINATING,
                    STATUS_TRUE,
                    "InstanceTerminating",
                    "Instance is terminating",
                    now.clone(),
                );
                volumes | terminating
            })
            .await?;
        }
        Step::TerminateInstance { nodeclaim } => {
            let Some(claim) = snapshot.store.nodeclaims.get(nodeclaim) else {
                return Ok(Next::Stop);
            };
            // Not listed any more (shutting down or gone): the rest of the plan may go on.
            if let (Some(live), Some(id)) = (live, claim.provider_id())
                && !live.contains(id)
            {
                observe_instance_terminated(ctx, claim);
                return Ok(Next::Continue);
            }
            match ctx.cloud.delete(claim).await {
                // Gone: the rest of the plan may go on.
                Err(e) if e.is_not_found() => {
                    observe_instance_terminated(ctx, claim);
                }
                // Terminating: wait for the cloud to report it gone.
                Ok(()) => return Ok(Next::Stop),
                Err(e) => return Err(e.into()),
            }
        }
        Step::ReleaseNodeFinalizer { node } => {
            let released = modify(&ctx.state, &nodes(&ctx.client), node, |n| {
                remove_finalizer(n, FINALIZER_TERMINATION)
            })
            .await?;
            // From the request that set the node's termination going: the Node's deletion,
            // or (a NodeClaim deleted first, as every disruption does) its NodeClaim's.
            if released.is_some()
                && let Some(cached) = snapshot.store.nodes.get(node)
                && let Some(deleted) = cached.metadata.deletion_timestamp.as_ref().or_else(|| {
                    snapshot
                        .nodeclaim_of(cached)
                        .and_then(|c| c.metadata.deletion_timestamp.as_ref())
                })
            {
                let now = ctx.clock.now();
                let nodepool = cached
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(driftwood_api::wellknown::LABEL_NODEPOOL))
                    .map_or("", String::as_str);
                ctx.metrics.node_termination.observe(
                    &[nodepool],
                    now.duration_since(deleted.0).as_secs_f64(),
                    now,
                );
            }
            if released.is_some()
                && let Some(cached) = snapshot.store.nodes.get(node)
                && let Some(created) = cached.metadata.creation_timestamp.as_ref()
            {
                let nodepool = Metrics::label_of(
                    Some(cached.as_ref()),
                    driftwood_api::wellknown::LABEL_NODEPOOL,
                );
                Metrics::observe(
                    &ctx.metrics.node_lifetime,
                    &[("nodepool", nodepool)],
                    ctx.clock.now().duration_since(created.0).as_secs_f64(),
                );
            }
        }
        Step::DeleteNode { node, nodepool } => {
            let zone = Metrics::label_of(
                ctx.state
                    .snapshot()
                    .store
                    .nodes
                    .get(node)
                    .map(AsRef::as_ref),
                driftwood_api::wellknown::LABEL_TOPOLOGY_ZONE,
            )
            .to_string();
            delete(&nodes(&ctx.client), node).await?;
            tracing::info!(%node, "deleted node");
            Metrics::inc(
                &ctx.metrics.nodes_terminated,
                &[("nodepool", nodepool), ("zone", &zone)],
            );
        }
        Step::ReleaseNodeClaimFinalizer {
            nodeclaim,
            nodepool,
        } => {
            let snapshot = ctx.state.snapshot();
            let claim = snapshot.store.nodeclaims.get(nodeclaim).map(AsRef::as_ref);
            let deleted = claim.and_then(|c| c.metadata.deletion_timestamp.clone());
            let (capacity_type, zone) = (
                Metrics::label_of(claim, driftwood_api::wellknown::LABEL_CAPACITY_TYPE).to_string(),
                Metrics::label_of(claim, driftwood_api::wellknown::LABEL_TOPOLOGY_ZONE).to_string(),
            );
            if modify(&ctx.state, &nodeclaims(&ctx.client), nodeclaim, |c| {
                remove_finalizer(c, FINALIZER_TERMINATION)
            })
            .await?
            .is_some()
            {
                tracing::info!(%nodeclaim, "deleted nodeclaim");
                if let Some(deleted) = deleted {
                    Metrics::observe(
                        &ctx.metrics.nodeclaim_termination,
                        &[("nodepool", nodepool)],
                        ctx.clock.now().duration_since(deleted.0).as_secs_f64(),
                    );
                }
                Metrics::inc(
                    &ctx.metrics.nodeclaims_terminated,
                    &[
                        ("nodepool", nodepool),
                        ("capacity_type", &capacity_type),
                        ("zone", &zone),
                    ],
                );
            }
        }
    }
    Ok(Next::Continue)
}

/// `karpenter_nodeclaims_instance_termination_duration_seconds`: `claim`'s instance is gone,
/// counted from when its termination began (InstanceTerminating turned True), as Karpenter; 0
/// when the condition was set in this same pass (the snapshot predates it: an instance already
/// gone, reclaimed or interrupted).
fn observe_instance_terminated(ctx: &Context, claim: &driftwood_api::NodeClaim) {
    use driftwood_api::condition::Conditions as _;
    let now = ctx.clock.now();
    let since = claim
        .condition(CONDITION_INSTANCE_TERMINATING)
        .filter(|c| c.is_true())
        .and_then(|c| c.last_transition_time.as_ref())
        .map_or(now, |t| t.0);
    Metrics::observe(
        &ctx.metrics.instance_termination,
        &[(
            "nodepool",
            Metrics::label_of(Some(claim), driftwood_api::wellknown::LABEL_NODEPOOL),
        )],
        now.duration_since(since).as_secs_f64().max(0.0),
    );
}

/// Karpenter's `Disrupted` note on a pod deleted to meet its node's termination deadline.
fn disrupted_note(snapshot: &Snapshot, pod: &CachedPod, grace_period_seconds: i64) -> String {
    let deadline = pod
        .node_name
        .as_deref()
        .and_then(|n| snapshot.store.nodes.get(n))
        .and_then(|n| snapshot.nodeclaim_of(n))
        .and_then(|c| {
            c.metadata
                .annotations
                .as_ref()?
                .get(ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP)
                .cloned()
        })
        .unwrap_or_default();
    let own = pod.shape.grace_period_seconds;
    format!(
        "Deleting the pod to accommodate the terminationTime {deadline} of the node. The pod was \
         granted {grace_period_seconds} seconds of grace-period of its {own} \
         terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt \
         annotation."
    )
}

/// The `code` label of `karpenter_pods_eviction_requests_total` for an eviction's answer, as
/// Karpenter counts it: "200" for an accepted eviction (whatever the success status), the
/// status code of an error the API server answered with, and nothing for an error that never
/// got an answer (the connection, a timeout).
fn eviction_code<T>(result: &Result<T, kube::Error>) -> Option<String> {
    match result {
        Ok(_) => Some("200".to_string()),
        Err(kube::Error::Api(status)) => Some(status.code.to_string()),
        Err(_) => None,
    }
}

/// Evicts `pods` from `node` through the Eviction API; refusals (a PDB allows no disruption
/// now) become one FailedDraining event on the node and are tried again next pass; any other
/// failure is returned (after trying every pod) so the NodeClaim backs off.
async fn evict(
    ctx: &Context,
    snapshot: &Snapshot,
    node: &str,
    pods: &[String],
) -> Result<(), StepError> {
    let mut refused = 0;
    let mut failures = Vec::new();
    for key in pods {
        let (namespace, pod_name) = key.split_once('/').unwrap_or(("default", key));
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
        let result = api.evict(pod_name, &EvictParams::default()).await;
        if let Some(code) = eviction_code(&result) {
            Metrics::inc(
                &ctx.metrics.pods_eviction_requests,
                &[("code", code.as_str())],
            );
        }
        match result {
            Ok(_) => {
                Metrics::inc(&ctx.metrics.pods_drained, &[("reason", "drain")]);
                if let Some(pod) = snapshot.store.pods.get(key) {
                    let note = format!("Evicted pod: node {node} is being terminated");
                    ctx.events
                        .publish_ref(pod.object_reference(), EventType::Normal, "Evicted", &note)
                        .await;
                }
            }
            Err(e) if is_too_many_requests(&e) => refused += 1,
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                tracing::warn!(pod = %key, error = %e, "eviction failed");
                failures.push(e);
            }
        }
    }
    if refused > 0
        && let Some(node) = snapshot.store.nodes.get(node)
    {
        let note = format!(
            "Failed to drain node, {refused} pods are waiting to be evicted (a PodDisruptionBudget allows no disruption now)"
        );
        ctx.events
            .publish(node.as_ref(), EventType::Warning, "FailedDraining", &note)
            .await;
    }
    let failed = failures.len();
    match failures.into_iter().next() {
        Some(first) => Err(StepError::Evictions {
            failed,
            tried: pods.len(),
            first,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("refused", "TooManyRequests")
                .with_code(code)
                .boxed(),
        )
    }

    /// karpenter `pkg/controllers/node/termination/terminator/eviction.go`: an accepted
    /// eviction counts as 200, an answered error by its status, an unanswered one not at all.
    #[test]
    fn eviction_requests_are_counted_by_the_code_karpenter_uses() {
        assert_eq!(eviction_code(&Ok(())), Some("200".to_string()));
        assert_eq!(
            eviction_code::<()>(&Err(api_error(429))),
            Some("429".to_string())
        );
        assert_eq!(
            eviction_code::<()>(&Err(api_error(404))),
            Some("404".to_string())
        );
        assert_eq!(
            eviction_code::<()>(&Err(kube::Error::LinesCodecMaxLineLengthExceeded)),
            None
        );
    }
}
