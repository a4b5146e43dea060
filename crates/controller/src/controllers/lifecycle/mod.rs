//! The NodeClaim lifecycle: launch through the cloud provider (Launched), registration of the
//! Node with the NodeClaim's providerID (labels, taints, finalizer synced; unregistered taint
//! removed; Registered), initialization (Node Ready, startup taints gone, requested extended
//! resources present; Initialized, Ready), liveness (not registered within the TTL → deleted)
//! and garbage collection of instances without a NodeClaim and NodeClaims without an instance.

mod decide;

pub use decide::{
    Action, Collect, Collection, Decision, UnclaimedSince, collect, decide, node_initialized,
};

use super::Outcome;
use crate::api::{
    add_finalizer, add_taint, delete, modify, modify_status, nodeclaims, nodes, remove_taint,
    set_claim_condition,
};
use crate::context::Context;
use crate::events::EventType;
use crate::metrics::Metrics;
use driftwood_api::NodeClaim;
use driftwood_api::condition::{STATUS_FALSE, STATUS_TRUE};
use driftwood_api::wellknown::{
    CONDITION_INITIALIZED, CONDITION_LAUNCHED, CONDITION_READY, CONDITION_REGISTERED,
    FINALIZER_TERMINATION, LABEL_NODE_INITIALIZED, TAINT_UNREGISTERED_KEY,
};
use driftwood_cloud::CloudError;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How many times a launch is retried in one pass after insufficient capacity (the provider
/// excludes the offerings that failed each time).
const LAUNCH_ATTEMPTS: usize = 3;

/// The controller's name in logs, metrics and the per-object retries.
const CONTROLLER: &str = "nodeclaim.lifecycle";

pub async fn pass(ctx: Context) -> Outcome {
    let snapshot = ctx.state.snapshot();
    let ttl = i64::try_from(ctx.settings.registration_ttl.as_secs()).unwrap_or(i64::MAX);
    let now = ctx.clock.now();
    let decision = decide(&snapshot, now.as_second(), ttl);
    // A NodeClaim whose last step failed waits out its own backoff; the others go on.
    let ready = |name: &str| {
        ctx.retries
            .ready(CONTROLLER, &format!("nodeclaim/{name}"), now)
    };
    // Launches go out together; the cloud calls dominate.
    let launches = decision.actions.iter().filter_map(|a| match a {
        Action::Launch {
            nodeclaim,
            nodepool,
        } if ready(nodeclaim) => snapshot.store.nodeclaims.get(nodeclaim).map(|claim| {
            let ctx = &ctx;
            async move {
                (
                    nodeclaim,
                    "launch",
                    launch(ctx, nodeclaim, nodepool, claim).await,
                )
            }
        }),
        _ => None,
    });
    let mut results = futures::future::join_all(launches).await;
    // Registrations and initializations touch one NodeClaim and its Node each: they go to the
    // API server together too (a few at a time), so a wave of a hundred nodes is not a hundred
    // round trips one after another.
    let mut steps = Vec::new();
    for action in &decision.actions {
        if !matches!(action, Action::Launch { .. }) && ready(action.nodeclaim()) {
            steps.push(step(&ctx, &snapshot, action));
        }
    }
    let stepped: Vec<_> = futures::stream::iter(steps)
        .buffered(STEPS_AT_ONCE)
        .collect()
        .await;
    results.extend(stepped);
    let now = ctx.clock.now();
    let errors = results
        .iter()
        .filter(|(name, step, result)| {
            let object = format!("nodeclaim/{name}");
            if let Err(StepError::HeldBack(until)) = result {
                // The cloud's turn for it comes at `until`: no failure, no write.
                ctx.retries.defer(CONTROLLER, &object, *until);
                return false;
            }
            ctx.retries
                .record(&ctx.metrics, CONTROLLER, &object, step, now, result)
        })
        .count();
    let outcome = if decision.pending {
        Outcome::again_in(Duration::from_secs(1))
    } else {
        Outcome::idle()
    };
    outcome.with_errors(u32::try_from(errors).unwrap_or(u32::MAX))
}

/// How many registrations and initializations go to the API server at once.
const STEPS_AT_ONCE: usize = 32;

/// One step other than a launch: the NodeClaim it is about, the step's name and its result.
async fn step<'a>(
    ctx: &Context,
    snapshot: &crate::state::Snapshot,
    action: &'a Action,
) -> (&'a String, &'static str, Result<(), StepError>) {
    match action {
        Action::Register { nodeclaim, .. } => (nodeclaim, "register", register(ctx, action).await),
        Action::DeleteUnregistered { nodeclaim } => {
            tracing::warn!(%nodeclaim, ttl = ?ctx.settings.registration_ttl, "deleting nodeclaim: node did not register in time");
            if let Some(claim) = snapshot.store.nodeclaims.get(nodeclaim) {
                ctx.events
                    .publish(
                        claim.as_ref(),
                        EventType::Warning,
                        "NodeClaimNotRegistered",
                        "Node did not register within the registration TTL; deleting the NodeClaim",
                    )
                    .await;
            }
            let deleted = delete(&nodeclaims(&ctx.client), nodeclaim).await;
            if deleted.is_ok() {
                count_disrupted(ctx, snapshot, nodeclaim, "registration_timeout");
            }
            (
                nodeclaim,
                "delete-unregistered",
                deleted.map_err(StepError::from),
            )
        }
        Action::Initialize { nodeclaim, .. } => {
            (nodeclaim, "initialize", initialize(ctx, action).await)
        }
        // Launches go out with the cloud calls in `pass`, never through here.
        Action::Launch { nodeclaim, .. } => (nodeclaim, "launch", Ok(())),
    }
}

/// Why one lifecycle step failed.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("{0}")]
    Api(#[from] kube::Error),
    #[error("{0}")]
    Cloud(#[from] CloudError),
    #[error("{cloud}; and recording it on the NodeClaim failed: {api}")]
    CloudAndApi { cloud: CloudError, api: kube::Error },
    /// The cloud's rate is reached: the launch waits for its turn at this time.
    #[error("launch held back until {0}: the cloud's rate is reached")]
    HeldBack(jiff::Timestamp),
}

/// Launches `claim`'s instance and records it. Every failure is returned (the caller backs the
/// NodeClaim off): a cloud error is also written as Launched=False with its reason; a launch
/// out of capacity everywhere deletes the NodeClaim so provisioning picks other offerings.
async fn launch(ctx: &Context, name: &str, pool: &str, claim: &NodeClaim) -> Result<(), StepError> {
    let mut last_error = None;
    for _ in 0..LAUNCH_ATTEMPTS {
        let result = ctx.cloud.create(claim).await;
        match result {
            Ok(launched) => {
                // The instance exists but is not recorded yet: should the write fail (or this
                // leader stop before it), the retry launches another, and garbage collection
                // reclaims the instance no NodeClaim points at (as in Karpenter: a launch
                // carries nothing of the one NodeClaim, so that identical launches made
                // together are one CreateFleet call).
                record_launch(ctx, name, &launched).await?;
                let status = launched.status.clone().unwrap_or_default();
                let labels = launched.metadata.labels.clone().unwrap_or_default();
                tracing::info!(
                    nodeclaim = %name,
                    provider_id = %status.provider_id.clone().unwrap_or_default(),
                    instance_type = %labels.get(driftwood_api::wellknown::LABEL_INSTANCE_TYPE).cloned().unwrap_or_default(),
                    zone = %labels.get(driftwood_api::wellknown::LABEL_TOPOLOGY_ZONE).cloned().unwrap_or_default(),
                    capacity_type = %labels.get(driftwood_api::wellknown::LABEL_CAPACITY_TYPE).cloned().unwrap_or_default(),
                    image_id = %status.image_id.clone().unwrap_or_default(),
                    "launched nodeclaim"
                );
                Metrics::inc(&ctx.metrics.nodeclaims_launched, &[("nodepool", pool)]);
                return Ok(());
            }
            Err(error @ CloudError::InsufficientCapacity { .. }) => last_error = Some(error),
            Err(CloudError::Throttled { retry_at, .. }) => {
                tracing::debug!(nodeclaim = %name, %retry_at, "launch waits for its turn");
                return Err(StepError::HeldBack(retry_at));
            }
            Err(error) => {
                let reason = match &error {
                    CloudError::NodeClassNotReady { .. } => "NodeClassNotReady",
                    _ => "LaunchFailed",
                };
                let now = ctx.now();
                let message = error.to_string();
                let written = modify_status(&ctx.state, &nodeclaims(&ctx.client), name, |c| {
                    set_claim_condition(
                        c,
                        CONDITION_LAUNCHED,
                        STATUS_FALSE,
                        reason,
                        &message,
                        now.clone(),
                    )
                })
                .await;
                return Err(match written {
                    Ok(_) => StepError::Cloud(error),
                    Err(api) => StepError::CloudAndApi { cloud: error, api },
                });
            }
        }
    }
    // Every attempt ran out of capacity: the NodeClaim cannot launch; provisioning will try
    // again with the offerings that remain.
    let message = last_error.map(|e| e.to_string()).unwrap_or_default();
    ctx.events
        .publish(
            claim,
            EventType::Warning,
            "InsufficientCapacityError",
            &format!("NodeClaim {name} event: creating instance, {message}"),
        )
        .await;
    let requirements: Vec<String> = claim
        .spec
        .requirements
        .iter()
        .map(|r| {
            format!(
                "{} {} [{}]",
                r.key,
                r.operator,
                r.values
                    .iter()
                    .take(8)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(",")
            )
        })
        .collect();
    tracing::warn!(nodeclaim = %name, error = %message, requirements = %requirements.join("; "), "deleting nodeclaim: no capacity to launch it");
    delete(&nodeclaims(&ctx.client), name).await?;
    count_disrupted(ctx, &ctx.state.snapshot(), name, "insufficient_capacity");
    Ok(())
}

/// Counts NodeClaim `name` disrupted for `reason` under its NodePool (Karpenter counts the
/// NodeClaims its lifecycle and garbage collection delete too).
fn count_disrupted(ctx: &Context, snapshot: &crate::state::Snapshot, name: &str, reason: &str) {
    let nodepool = crate::metrics::Metrics::label_of(
        snapshot.store.nodeclaims.get(name).map(AsRef::as_ref),
        driftwood_api::wellknown::LABEL_NODEPOOL,
    );
    ctx.metrics
        .count_disrupted(snapshot, name, nodepool, reason);
}

/// Writes what the provider returned: labels and annotations, then status with Launched.
async fn record_launch(ctx: &Context, name: &str, launched: &NodeClaim) -> Result<(), kube::Error> {
    let api = nodeclaims(&ctx.client);
    let labels = launched.metadata.labels.clone().unwrap_or_default();
    let annotations = launched.metadata.annotations.clone().unwrap_or_default();
    modify(&ctx.state, &api, name, |c| {
        let before = (c.metadata.labels.clone(), c.metadata.annotations.clone());
        c.metadata
            .labels
            .get_or_insert_with(Default::default)
            .extend(labels.clone());
        c.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .extend(annotations.clone());
        before != (c.metadata.labels.clone(), c.metadata.annotations.clone())
    })
    .await?;
    let status = launched.status.clone().unwrap_or_default();
    let now = ctx.now();
    modify_status(&ctx.state, &api, name, |c| {
        let s = c.status.get_or_insert_with(Default::default);
        s.provider_id.clone_from(&status.provider_id);
        s.image_id.clone_from(&status.image_id);
        s.capacity.clone_from(&status.capacity);
        s.allocatable.clone_from(&status.allocatable);
        set_claim_condition(
            c,
            CONDITION_LAUNCHED,
            STATUS_TRUE,
            "Launched",
            "",
            now.clone(),
        );
        true
    })
    .await?;
    Ok(())
}

/// Carries out [`Action::Register`].
async fn register(ctx: &Context, action: &Action) -> Result<(), StepError> {
    let Action::Register {
        nodeclaim,
        node,
        nodepool,
        provider_id,
        labels,
        taints,
        owner,
    } = action
    else {
        return Ok(());
    };
    let synced = modify(&ctx.state, &nodes(&ctx.client), node, |n: &mut Node| {
        let mut changed = false;
        let node_labels = n.metadata.labels.get_or_insert_with(Default::default);
        for (k, v) in labels {
            if node_labels.get(k) != Some(v) {
                node_labels.insert(k.clone(), v.clone());
                changed = true;
            }
        }
        for taint in taints {
            changed |= add_taint(n, taint);
        }
        changed |= remove_taint(n, TAINT_UNREGISTERED_KEY);
        changed |= add_finalizer(n, FINALIZER_TERMINATION);
        let owners = n.metadata.owner_references.get_or_insert_with(Vec::new);
        if !owners.iter().any(|o| o.kind == "NodeClaim") {
            owners.push(owner.clone());
            changed = true;
        }
        changed
    })
    .await?;
    let now = ctx.now();
    modify_status(&ctx.state, &nodeclaims(&ctx.client), nodeclaim, |c| {
        c.status.get_or_insert_with(Default::default).node_name = Some(node.clone());
        set_claim_condition(
            c,
            CONDITION_REGISTERED,
            STATUS_TRUE,
            "Registered",
            "",
            now.clone(),
        );
        true
    })
    .await?;
    tracing::info!(%nodeclaim, %node, %provider_id, synced = synced.is_some(), "registered nodeclaim");
    Metrics::inc(
        &ctx.metrics.nodeclaims_registered,
        &[("nodepool", nodepool)],
    );
    let zone = Metrics::label_of(
        ctx.state
            .snapshot()
            .store
            .nodes
            .get(node.as_str())
            .map(AsRef::as_ref),
        driftwood_api::wellknown::LABEL_TOPOLOGY_ZONE,
    )
    .to_string();
    Metrics::inc(
        &ctx.metrics.nodes_created,
        &[("nodepool", nodepool), ("zone", &zone)],
    );
    Ok(())
}

/// Carries out [`Action::Initialize`].
async fn initialize(ctx: &Context, action: &Action) -> Result<(), StepError> {
    let Action::Initialize {
        nodeclaim,
        node,
        nodepool,
        allocatable,
    } = action
    else {
        return Ok(());
    };
    modify(&ctx.state, &nodes(&ctx.client), node, |n: &mut Node| {
        n.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(LABEL_NODE_INITIALIZED.into(), "true".into())
            .is_none()
    })
    .await?;
    let now = ctx.now();
    modify_status(&ctx.state, &nodeclaims(&ctx.client), nodeclaim, |c| {
        let a = set_claim_condition(
            c,
            CONDITION_INITIALIZED,
            STATUS_TRUE,
            "Initialized",
            "",
            now.clone(),
        );
        let b = set_claim_condition(c, CONDITION_READY, STATUS_TRUE, "Ready", "", now.clone());
        a || b
    })
    .await?;
    tracing::info!(%nodeclaim, %node, %allocatable, "initialized nodeclaim");
    Metrics::inc(
        &ctx.metrics.nodeclaims_initialized,
        &[("nodepool", nodepool)],
    );
    Ok(())
}

/// The garbage collector's name in logs, metrics and the per-object retries.
const GC_CONTROLLER: &str = "nodeclaim.garbagecollection";

/// Garbage collection's memory between passes: when each unclaimed instance was first seen.
#[derive(Debug, Clone, Default)]
pub struct GarbageCollector {
    unclaimed_since: Arc<Mutex<UnclaimedSince>>,
}

/// Garbage collection: terminate instances of this cluster that no NodeClaim points at (after
/// the grace period), and delete Registered NodeClaims whose instance is gone. Each failure is
/// counted and retried for its object after its backoff.
///
/// The cloud is listed before the cache is read, as the AWS provider's collector does: an
/// instance launched while a slow (paginated, throttled) list runs then has its NodeClaim's
/// providerID in the snapshot, instead of being judged against a snapshot older than it.
pub async fn collect_garbage(ctx: Context, gc: GarbageCollector) -> Outcome {
    let instances = match ctx.cloud.list().await {
        Ok(list) => list,
        Err(error) => {
            tracing::warn!(
                cluster = %ctx.settings.cluster_name,
                %error,
                "listing the cluster's instances for garbage collection failed"
            );
            return Outcome::idle().with_errors(1);
        }
    };
    let snapshot = ctx.state.snapshot();
    let grace = i64::try_from(ctx.settings.gc_grace.as_secs()).unwrap_or(i64::MAX);
    let now = ctx.clock.now();
    let collection = {
        let mut seen = gc
            .unclaimed_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let collection = collect(&snapshot, &instances, now.as_second(), grace, &seen);
        seen.clone_from(&collection.unclaimed_since);
        collection
    };
    let mut errors = 0u32;
    for action in collection.actions {
        let (object, step, result) = match action {
            Collect::TerminateInstance { provider_id } => {
                let object = format!("instance/{provider_id}");
                let Some(instance) = instances.iter().find(|i| {
                    i.status.as_ref().and_then(|s| s.provider_id.as_ref()) == Some(&provider_id)
                }) else {
                    continue;
                };
                if !ctx.retries.ready(GC_CONTROLLER, &object, now) {
                    continue;
                }
                tracing::info!(%provider_id, "garbage collecting instance with no nodeclaim");
                let result = match ctx.cloud.delete(instance).await {
                    Err(error) if !error.is_not_found() => Err(StepError::Cloud(error)),
                    _ => Ok(()),
                };
                (object, "terminate-instance", result)
            }
            Collect::DeleteNodeClaim {
                nodeclaim,
                provider_id,
            } => {
                let object = format!("nodeclaim/{nodeclaim}");
                if !ctx.retries.ready(GC_CONTROLLER, &object, now) {
                    continue;
                }
                tracing::info!(%nodeclaim, %provider_id, "garbage collecting nodeclaim with no cloudprovider representation");
                let result = delete(&nodeclaims(&ctx.client), &nodeclaim)
                    .await
                    .map_err(StepError::from);
                if result.is_ok() {
                    count_disrupted(&ctx, &snapshot, &nodeclaim, "garbage_collected");
                }
                (object, "delete-nodeclaim", result)
            }
        };
        if ctx
            .retries
            .record(&ctx.metrics, GC_CONTROLLER, &object, step, now, &result)
        {
            errors += 1;
        }
    }
    Outcome::idle().with_errors(errors)
}
