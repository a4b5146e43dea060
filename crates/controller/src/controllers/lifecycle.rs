//! The NodeClaim lifecycle: launch through the cloud provider (Launched), registration of the
//! Node with the NodeClaim's providerID (labels, taints, finalizer synced; unregistered taint
//! removed; Registered), initialization (Node Ready, startup taints gone, requested extended
//! resources present; Initialized, Ready), liveness (not registered within the TTL → deleted)
//! and garbage collection of instances without a NodeClaim and NodeClaims without an instance.

use super::Outcome;
use crate::api::{
    add_finalizer, add_taint, delete, modify, modify_status, nodeclaims, nodes, remove_taint,
    set_claim_condition,
};
use crate::context::Context;
use crate::events::EventType;
use crate::metrics::Metrics;
use crate::state::Snapshot;
use driftwood_api::NodeClaim;
use driftwood_api::condition::{Conditions, STATUS_FALSE, STATUS_TRUE};
use driftwood_api::wellknown::{
    CONDITION_INITIALIZED, CONDITION_LAUNCHED, CONDITION_READY, CONDITION_REGISTERED,
    FINALIZER_TERMINATION, LABEL_NODE_INITIALIZED, LABEL_NODE_REGISTERED, LABEL_NODEPOOL,
    TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE, TAINT_UNREGISTERED_KEY,
};
use driftwood_cloud::CloudError;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use std::collections::BTreeSet;
use std::time::Duration;

/// How many times a launch is retried in one pass after insufficient capacity (the provider
/// excludes the offerings that failed each time).
const LAUNCH_ATTEMPTS: usize = 3;

pub async fn pass(ctx: Context) -> Outcome {
    let snapshot = ctx.state.snapshot();
    let mut pending = false;
    let launches: Vec<_> = snapshot
        .store
        .nodeclaims
        .iter()
        .filter(|(_, c)| c.metadata.deletion_timestamp.is_none() && !c.is_true(CONDITION_LAUNCHED))
        .map(|(name, claim)| launch(&ctx, name, claim))
        .collect();
    pending |= !launches.is_empty();
    futures::future::join_all(launches).await;

    for (name, claim) in &snapshot.store.nodeclaims {
        if claim.metadata.deletion_timestamp.is_some() || !claim.is_true(CONDITION_LAUNCHED) {
            continue;
        }
        let result = if !claim.is_true(CONDITION_REGISTERED) {
            pending = true;
            register(&ctx, &snapshot, name, claim).await
        } else if !claim.is_true(CONDITION_INITIALIZED) {
            pending = true;
            initialize(&ctx, &snapshot, name, claim).await
        } else {
            Ok(())
        };
        if let Err(error) = result {
            tracing::warn!(nodeclaim = %name, %error, "lifecycle step failed; will retry");
        }
    }
    if pending {
        Outcome::again_in(Duration::from_secs(1))
    } else {
        Outcome::idle()
    }
}

async fn launch(ctx: &Context, name: &str, claim: &NodeClaim) {
    let pool = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_NODEPOOL))
        .cloned()
        .unwrap_or_default();
    let mut last_error = None;
    for _ in 0..LAUNCH_ATTEMPTS {
        let started = std::time::Instant::now();
        let result = ctx.cloud.create(claim).await;
        ctx.metrics
            .cloudprovider_duration
            .get_or_create(&vec![
                ("method".into(), "Create".into()),
                ("provider".into(), ctx.cloud.name().into()),
            ])
            .observe(started.elapsed().as_secs_f64());
        match result {
            Ok(launched) => {
                if let Err(error) = record_launch(ctx, name, &launched).await {
                    // The instance exists but is not recorded: garbage collection reclaims it
                    // if the NodeClaim ends up pointing at another one.
                    tracing::warn!(nodeclaim = %name, %error, "could not record launch");
                    return;
                }
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
                Metrics::inc(&ctx.metrics.nodeclaims_launched, &[("nodepool", &pool)]);
                return;
            }
            Err(error @ CloudError::InsufficientCapacity { .. }) => last_error = Some(error),
            Err(error) => {
                let (reason, requeue) = match &error {
                    CloudError::NodeClassNotReady { .. } => ("NodeClassNotReady", true),
                    _ => ("LaunchFailed", true),
                };
                let now = ctx.now();
                let message = error.to_string();
                let _ = modify_status(&nodeclaims(&ctx.client), name, |c| {
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
                tracing::warn!(nodeclaim = %name, %error, requeue, "could not launch nodeclaim");
                return;
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
    let _ = delete(&nodeclaims(&ctx.client), name).await;
}

/// Writes what the provider returned: labels and annotations, then status with Launched.
async fn record_launch(ctx: &Context, name: &str, launched: &NodeClaim) -> Result<(), kube::Error> {
    let api = nodeclaims(&ctx.client);
    let labels = launched.metadata.labels.clone().unwrap_or_default();
    let annotations = launched.metadata.annotations.clone().unwrap_or_default();
    modify(&api, name, |c| {
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
    modify_status(&api, name, |c| {
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

async fn register(
    ctx: &Context,
    snapshot: &Snapshot,
    name: &str,
    claim: &NodeClaim,
) -> Result<(), kube::Error> {
    let provider_id = claim
        .status
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .unwrap_or_default();
    let Some(node_name) = snapshot.node_by_provider_id.get(&provider_id).cloned() else {
        let launched_at = claim
            .condition(CONDITION_LAUNCHED)
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0.as_second());
        let ttl = i64::try_from(ctx.settings.registration_ttl.as_secs()).unwrap_or(i64::MAX);
        if launched_at.is_some_and(|t| ctx.now_seconds() - t > ttl) {
            tracing::warn!(nodeclaim = %name, ttl = ?ctx.settings.registration_ttl, "deleting nodeclaim: node did not register in time");
            ctx.events
                .publish(
                    claim,
                    EventType::Warning,
                    "NodeClaimNotRegistered",
                    "Node did not register within the registration TTL; deleting the NodeClaim",
                )
                .await;
            delete(&nodeclaims(&ctx.client), name).await?;
        }
        return Ok(());
    };
    let labels = claim.metadata.labels.clone().unwrap_or_default();
    let mut taints = claim.spec.taints.clone();
    taints.extend(claim.spec.startup_taints.clone());
    let owner = OwnerReference {
        api_version: "karpenter.sh/v1".into(),
        kind: "NodeClaim".into(),
        name: name.to_string(),
        uid: claim.metadata.uid.clone().unwrap_or_default(),
        block_owner_deletion: Some(true),
        controller: None,
    };
    let synced = modify(&nodes(&ctx.client), &node_name, |node: &mut Node| {
        let mut changed = false;
        let node_labels = node.metadata.labels.get_or_insert_with(Default::default);
        for (k, v) in &labels {
            if node_labels.get(k) != Some(v) {
                node_labels.insert(k.clone(), v.clone());
                changed = true;
            }
        }
        if node_labels
            .insert(LABEL_NODE_REGISTERED.into(), "true".into())
            .is_none()
        {
            changed = true;
        }
        for taint in &taints {
            changed |= add_taint(node, taint);
        }
        changed |= remove_taint(node, TAINT_UNREGISTERED_KEY);
        changed |= add_finalizer(node, FINALIZER_TERMINATION);
        let owners = node.metadata.owner_references.get_or_insert_with(Vec::new);
        if !owners.iter().any(|o| o.kind == "NodeClaim") {
            owners.push(owner.clone());
            changed = true;
        }
        changed
    })
    .await?;
    let node_name_for_status = node_name.clone();
    let now = ctx.now();
    modify_status(&nodeclaims(&ctx.client), name, |c| {
        c.status.get_or_insert_with(Default::default).node_name =
            Some(node_name_for_status.clone());
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
    let pool = labels.get(LABEL_NODEPOOL).cloned().unwrap_or_default();
    tracing::info!(nodeclaim = %name, node = %node_name, provider_id = %provider_id, synced = synced.is_some(), "registered nodeclaim");
    Metrics::inc(&ctx.metrics.nodeclaims_registered, &[("nodepool", &pool)]);
    Metrics::inc(&ctx.metrics.nodes_created, &[("nodepool", &pool)]);
    Ok(())
}

async fn initialize(
    ctx: &Context,
    snapshot: &Snapshot,
    name: &str,
    claim: &NodeClaim,
) -> Result<(), kube::Error> {
    let Some(node) = snapshot.node_of(claim) else {
        return Ok(());
    };
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let taint_keys: BTreeSet<&str> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| t.key.as_str())
        .collect();
    let startup_left = claim
        .spec
        .startup_taints
        .iter()
        .any(|t| taint_keys.contains(t.key.as_str()));
    let ephemeral_left = [
        TAINT_NODE_NOT_READY,
        TAINT_NODE_UNREACHABLE,
        TAINT_UNREGISTERED_KEY,
    ]
    .iter()
    .any(|k| taint_keys.contains(k));
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.clone())
        .unwrap_or_default();
    let requested_extended_missing = claim
        .spec
        .resources
        .iter()
        .flat_map(|r| r.requests.keys())
        .filter(|k| k.contains('/'))
        .any(|k| allocatable.get(k).is_none_or(|q| q.0 == "0"));
    if !ready || startup_left || ephemeral_left || requested_extended_missing {
        return Ok(());
    }
    modify(&nodes(&ctx.client), &node_name, |n: &mut Node| {
        n.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(LABEL_NODE_INITIALIZED.into(), "true".into())
            .is_none()
    })
    .await?;
    let now = ctx.now();
    modify_status(&nodeclaims(&ctx.client), name, |c| {
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
    let pool = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_NODEPOOL))
        .cloned()
        .unwrap_or_default();
    let allocatable_text: Vec<String> = allocatable
        .iter()
        .map(|(k, v)| format!("{k}: {}", v.0))
        .collect();
    tracing::info!(nodeclaim = %name, node = %node_name, allocatable = %allocatable_text.join(", "), "initialized nodeclaim");
    Metrics::inc(&ctx.metrics.nodeclaims_initialized, &[("nodepool", &pool)]);
    Ok(())
}

/// Garbage collection: terminate instances of this cluster that no NodeClaim points at (after
/// the grace period), and delete launched NodeClaims whose instance is gone.
pub async fn collect_garbage(ctx: Context) -> Outcome {
    let snapshot = ctx.state.snapshot();
    let instances = match ctx.cloud.list().await {
        Ok(list) => list,
        Err(error) => {
            tracing::warn!(%error, "listing instances for garbage collection failed");
            return Outcome::idle();
        }
    };
    let grace = i64::try_from(ctx.settings.gc_grace.as_secs()).unwrap_or(i64::MAX);
    let now = ctx.now_seconds();
    let mut live = BTreeSet::new();
    for instance in &instances {
        let Some(id) = instance.status.as_ref().and_then(|s| s.provider_id.clone()) else {
            continue;
        };
        live.insert(id.clone());
        if snapshot.nodeclaim_by_provider_id.contains_key(&id) {
            continue;
        }
        let launched = instance
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(now, |t| t.0.as_second());
        if now - launched < grace {
            continue;
        }
        tracing::info!(provider_id = %id, "garbage collecting instance with no nodeclaim");
        if let Err(error) = ctx.cloud.delete(instance).await
            && !error.is_not_found()
        {
            tracing::warn!(provider_id = %id, %error, "could not terminate orphaned instance");
        }
    }
    for (name, claim) in &snapshot.store.nodeclaims {
        let Some(id) = claim.status.as_ref().and_then(|s| s.provider_id.clone()) else {
            continue;
        };
        if claim.metadata.deletion_timestamp.is_none()
            && claim.is_true(CONDITION_LAUNCHED)
            && !live.contains(&id)
        {
            tracing::info!(nodeclaim = %name, provider_id = %id, "garbage collecting nodeclaim with no cloudprovider representation");
            let _ = delete(&nodeclaims(&ctx.client), name).await;
        }
    }
    Outcome::idle()
}
