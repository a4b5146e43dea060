//! Termination: NodeClaims being deleted are drained and their instances terminated before
//! the karpenter.sh/termination finalizer is released — taint, evict in waves through the
//! Eviction API (a PDB's 429 means wait), force out what the terminationGracePeriod no
//! longer allows, terminate the instance, delete the Node, release the finalizers. Also:
//! deleting a Node deletes its NodeClaim, and NodeClaims past expireAfter are deleted.

use super::Outcome;
use crate::api::{
    add_taint, delete, disrupted_taint, is_not_found, is_too_many_requests, modify, modify_status,
    nodeclaims, nodes, remove_finalizer, set_claim_condition,
};
use crate::context::Context;
use crate::events::EventType;
use crate::metrics::Metrics;
use driftwood_api::NodeClaim;
use driftwood_api::condition::{Conditions, STATUS_TRUE};
use driftwood_api::duration::parse_go_duration;
use driftwood_api::wellknown::{
    ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP, CONDITION_INSTANCE_TERMINATING,
    FINALIZER_TERMINATION, LABEL_EXCLUDE_FROM_LOAD_BALANCERS, LABEL_NODEPOOL,
};
use driftwood_disruption::drain::{DrainPlan, DrainPod, plan_drains};
use driftwood_disruption::views::{drain_pod, matching_pdbs, owner_availability};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, EvictParams};
use std::collections::BTreeMap;
use std::time::Duration;

/// How soon a pass runs again while something is terminating.
const TERMINATING_REQUEUE: Duration = Duration::from_secs(1);

pub async fn pass(ctx: Context) -> Outcome {
    let snapshot = ctx.state.snapshot();
    let mut busy = false;

    // A deleted Node takes its NodeClaim with it.
    for node in snapshot
        .store
        .nodes
        .values()
        .filter(|n| n.metadata.deletion_timestamp.is_some())
    {
        let Some(claim) = snapshot.nodeclaim_of(node) else {
            let name = node.metadata.name.clone().unwrap_or_default();
            let _ = modify(&nodes(&ctx.client), &name, |n| {
                remove_finalizer(n, FINALIZER_TERMINATION)
            })
            .await;
            continue;
        };
        if claim.metadata.deletion_timestamp.is_none() {
            let name = claim.metadata.name.clone().unwrap_or_default();
            if let Err(error) = delete(&nodeclaims(&ctx.client), &name).await {
                tracing::warn!(nodeclaim = %name, %error, "could not delete nodeclaim of deleted node");
            }
            busy = true;
        }
    }

    // Expiration: forceful and outside budgets, as in Karpenter — a drift command in flight
    // for the same NodeClaim does not hold it back (its replacement stays as capacity).
    let now = ctx.now_seconds();
    for (name, claim) in &snapshot.store.nodeclaims {
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let expire = claim
            .spec
            .expire_after
            .as_ref()
            .and_then(|e| e.seconds().ok().flatten());
        let created = claim
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second());
        if let (Some(expire), Some(created)) = (expire, created)
            && created.saturating_add(i64::try_from(expire).unwrap_or(i64::MAX)) <= now
        {
            tracing::info!(nodeclaim = %name, reason = "expired", "disrupting nodeclaim(s) via delete");
            let pool = claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_NODEPOOL))
                .cloned()
                .unwrap_or_default();
            Metrics::inc(
                &ctx.metrics.nodeclaims_disrupted,
                &[("reason", "expired"), ("nodepool", &pool)],
            );
            let _ = delete(&nodeclaims(&ctx.client), name).await;
            busy = true;
        }
    }

    // Drain every finalizing node together, so pacing sees all the evictions of this pass.
    let mut drains = Vec::new();
    for (name, claim) in &snapshot.store.nodeclaims {
        let finalizing = claim.metadata.deletion_timestamp.is_some()
            && claim
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER_TERMINATION);
        if !finalizing {
            continue;
        }
        busy = true;
        match prepare_drain(&ctx, &snapshot, name, claim).await {
            Ok(Some(drain)) => drains.push((name, claim, drain)),
            Ok(None) => {
                if let Err(error) = finish(&ctx, &snapshot, name, claim).await {
                    tracing::warn!(nodeclaim = %name, %error, "termination step failed; will retry");
                }
            }
            Err(error) => {
                tracing::warn!(nodeclaim = %name, %error, "termination step failed; will retry")
            }
        }
    }
    let owners = owner_availability(snapshot.store.pods.values().map(|p| p.as_ref()), now);
    let inputs: Vec<(Vec<DrainPod>, Option<i64>)> =
        drains.iter().map(|(_, _, d)| d.clone()).collect();
    let plans = plan_drains(&inputs, owners, ctx.settings.unprotected_pacing, now);
    for ((name, claim, _), plan) in drains.iter().zip(plans) {
        let result = if plan.drained {
            let pool = pool_of(claim);
            Metrics::inc(&ctx.metrics.nodes_drained, &[("nodepool", &pool)]);
            finish(&ctx, &snapshot, name, claim).await
        } else {
            act_on_drain(&ctx, &snapshot, claim, &plan).await;
            Ok(())
        };
        if let Err(error) = result {
            tracing::warn!(nodeclaim = %name, %error, "termination step failed; will retry");
        }
    }
    if busy {
        Outcome::again_in(TERMINATING_REQUEUE)
    } else {
        Outcome::idle()
    }
}

/// The drain deadline: deletion time + terminationGracePeriod, persisted as Karpenter's
/// annotation the first time it is computed.
async fn deadline(ctx: &Context, name: &str, claim: &NodeClaim) -> Option<i64> {
    if let Some(stamped) = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP))
    {
        return stamped
            .parse::<k8s_openapi::jiff::Timestamp>()
            .ok()
            .map(|t| t.as_second());
    }
    let grace = parse_go_duration(claim.spec.termination_grace_period.as_deref()?).ok()?;
    let deleted = claim.metadata.deletion_timestamp.as_ref()?.0;
    let at = deleted
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(
            i64::try_from(grace).ok()?,
        ))
        .ok()?;
    let text = at.to_string();
    let _ = modify(&nodeclaims(&ctx.client), name, |c| {
        c.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP.into(),
                text.clone(),
            )
            .is_none()
    })
    .await;
    Some(at.as_second())
}

fn pool_of(claim: &NodeClaim) -> String {
    claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_NODEPOOL))
        .cloned()
        .unwrap_or_default()
}

/// Taints the claim's node and computes what its drain looks at: the node's pods as drain
/// sees them and the grace-period deadline. None when the claim has no node.
async fn prepare_drain(
    ctx: &Context,
    snapshot: &crate::state::Snapshot,
    name: &str,
    claim: &NodeClaim,
) -> Result<Option<(Vec<DrainPod>, Option<i64>)>, kube::Error> {
    let Some(node) = snapshot.node_of(claim) else {
        return Ok(None);
    };
    let node_name = node.metadata.name.clone().unwrap_or_default();
    // A node that is not Ready and whose instance is gone has nothing left to drain.
    if !node_is_ready(node)
        && let Some(provider_id) = claim.status.as_ref().and_then(|s| s.provider_id.as_deref())
        && matches!(ctx.cloud.get(provider_id).await, Err(e) if e.is_not_found())
    {
        tracing::info!(node = %node_name, "node is not ready and its instance is gone; released without a drain");
        return Ok(None);
    }
    // The taint keeps new pods off; the label takes the node out of external load balancers
    // before its pods go (Karpenter sets both in one write).
    if modify(&nodes(&ctx.client), &node_name, |n| {
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
    .await?
    .is_some()
    {
        tracing::info!(node = %node_name, taint = "karpenter.sh/disrupted:NoSchedule", "tainted node");
    }
    let deadline = deadline(ctx, name, claim).await;
    let pdbs: Vec<_> = snapshot
        .store
        .pdbs
        .values()
        .map(|p| (**p).clone())
        .collect();
    let views = snapshot
        .pods_on(&node_name)
        .iter()
        .map(|p| DrainPod {
            pdb_protected: !matching_pdbs(p, &pdbs).is_empty(),
            ..drain_pod(p, ctx.now_seconds())
        })
        .collect();
    Ok(Some((views, deadline)))
}

/// Carries out one step of a node's drain: evictions (a PDB's 429 means wait) and the
/// deletions the grace period forces.
async fn act_on_drain(
    ctx: &Context,
    snapshot: &crate::state::Snapshot,
    claim: &NodeClaim,
    plan: &DrainPlan,
) {
    let Some(node) = snapshot.node_of(claim) else {
        return;
    };
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let pods = snapshot.pods_on(&node_name);
    let mut refused = 0;
    for key in &plan.evict {
        let (namespace, pod_name) = key.split_once('/').unwrap_or(("default", key));
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
        match api.evict(pod_name, &EvictParams::default()).await {
            Ok(_) => {
                Metrics::inc(&ctx.metrics.pods_drained, &[("reason", "drain")]);
                if let Some(pod) = pods
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(pod_name))
                {
                    let note = format!("Evicted pod: node {node_name} is being terminated");
                    ctx.events
                        .publish(pod.as_ref(), EventType::Normal, "Evicted", &note)
                        .await;
                }
            }
            Err(e) if is_too_many_requests(&e) => refused += 1,
            Err(e) if is_not_found(&e) => {}
            Err(e) => tracing::warn!(pod = %key, error = %e, "eviction failed"),
        }
    }
    for forced in &plan.delete {
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
            Ok(_) => Metrics::inc(
                &ctx.metrics.pods_drained,
                &[("reason", "termination-grace-period")],
            ),
            Err(e) if is_not_found(&e) => {}
            Err(e) => tracing::warn!(pod = %forced.pod, error = %e, "forced deletion failed"),
        }
    }
    if refused > 0 {
        let note = format!(
            "Failed to drain node, {refused} pods are waiting to be evicted (a PodDisruptionBudget allows no disruption now)"
        );
        ctx.events
            .publish(node.as_ref(), EventType::Warning, "FailedDraining", &note)
            .await;
    }
}

/// Whether the node's Ready condition is True.
fn node_is_ready(node: &k8s_openapi::api::core::v1::Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The VolumeAttachments termination waits for on `node`, as Karpenter filters them: those of
/// persistent volumes (inline volumes name none), except the volumes of pods the drain leaves
/// on the node (tolerating the disrupted taint, mirror pods, pods stuck terminating), which
/// would never detach.
pub fn volume_attachments_on<'a>(
    snapshot: &'a crate::state::Snapshot,
    node: &str,
    now: i64,
) -> Vec<&'a str> {
    let staying: std::collections::BTreeSet<&str> = snapshot
        .pods_on(node)
        .into_iter()
        .filter(|pod| {
            let view = drain_pod(pod, now);
            view.tolerates_disrupted
                || view.mirror
                || view.deletion_timestamp.is_some_and(|at| {
                    now - at > driftwood_disruption::drain::STUCK_TERMINATING_SECONDS
                })
        })
        .flat_map(|pod| {
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            pod.spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .filter_map(|v| v.persistent_volume_claim.as_ref())
                .filter_map(move |claim| {
                    snapshot
                        .store
                        .persistent_volume_claims
                        .get(&format!("{namespace}/{}", claim.claim_name))
                })
                .filter_map(|pvc| pvc.spec.as_ref()?.volume_name.as_deref())
                .collect::<Vec<_>>()
        })
        .collect();
    snapshot
        .store
        .volume_attachments
        .iter()
        .filter(|(_, va)| {
            va.spec.node_name == node
                && va.metadata.deletion_timestamp.is_none()
                && va
                    .spec
                    .source
                    .persistent_volume_name
                    .as_deref()
                    .is_some_and(|pv| !staying.contains(pv))
        })
        .map(|(name, _)| name.as_str())
        .collect()
}

/// After the drain (or for a claim that never registered): wait for the node's volumes to
/// detach (until the terminationGracePeriod runs out), terminate the instance, delete the
/// Node, release the finalizers.
async fn finish(
    ctx: &Context,
    snapshot: &crate::state::Snapshot,
    name: &str,
    claim: &NodeClaim,
) -> Result<(), kube::Error> {
    let pool = pool_of(claim);
    if !claim.is_true(CONDITION_INSTANCE_TERMINATING)
        && let Some(node) = snapshot.node_of(claim)
        && node_is_ready(node)
    {
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        let attached = volume_attachments_on(snapshot, node_name, ctx.now_seconds());
        let expired = deadline(ctx, name, claim)
            .await
            .is_some_and(|at| ctx.now_seconds() > at);
        if !attached.is_empty() && !expired {
            tracing::debug!(node = %node_name, volume_attachments = %attached.join(","), "waiting for volumes to detach before terminating the instance");
            return Ok(());
        }
    }
    if claim
        .status
        .as_ref()
        .and_then(|s| s.provider_id.as_ref())
        .is_some()
    {
        if !claim.is_true(CONDITION_INSTANCE_TERMINATING) {
            let now = ctx.now();
            modify_status(&nodeclaims(&ctx.client), name, |c| {
                set_claim_condition(
                    c,
                    CONDITION_INSTANCE_TERMINATING,
                    STATUS_TRUE,
                    "InstanceTerminating",
                    "Instance is terminating",
                    now.clone(),
                )
            })
            .await?;
        }
        match ctx.cloud.delete(claim).await {
            Err(e) if e.is_not_found() => {}
            Ok(()) => return Ok(()),
            Err(e) => {
                tracing::warn!(nodeclaim = %name, error = %e, "could not terminate instance");
                return Ok(());
            }
        }
    }
    if let Some(node) = snapshot.node_of(claim) {
        let node_name = node.metadata.name.clone().unwrap_or_default();
        modify(&nodes(&ctx.client), &node_name, |n| {
            remove_finalizer(n, FINALIZER_TERMINATION)
        })
        .await?;
        delete(&nodes(&ctx.client), &node_name).await?;
        tracing::info!(node = %node_name, "deleted node");
        Metrics::inc(&ctx.metrics.nodes_terminated, &[("nodepool", &pool)]);
    }
    if modify(&nodeclaims(&ctx.client), name, |c| {
        remove_finalizer(c, FINALIZER_TERMINATION)
    })
    .await?
    .is_some()
    {
        tracing::info!(nodeclaim = %name, "deleted nodeclaim");
        Metrics::inc(&ctx.metrics.nodeclaims_terminated, &[("nodepool", &pool)]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Snapshot, Store};
    use std::sync::Arc;

    fn parse<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Arc<T> {
        Arc::new(serde_json::from_value(value).expect("valid object"))
    }

    /// Karpenter termination suite "should only wait for volume attachments associated with
    /// drainable pods": the volume of a pod that tolerates the disrupted taint stays with the
    /// node and is not waited for; inline volumes (no PersistentVolume) are not either.
    #[test]
    fn only_volumes_of_pods_that_leave_are_waited_for() {
        let mut store = Store::default();
        for (name, claim, tolerates) in
            [("db-0", "data-db-0", false), ("agent", "data-agent", true)]
        {
            let tolerations = if tolerates {
                serde_json::json!([{"key": "karpenter.sh/disrupted", "operator": "Exists"}])
            } else {
                serde_json::json!([])
            };
            store.pods.insert(
                format!("default/{name}"),
                parse(serde_json::json!({
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"nodeName": "n1", "containers": [], "tolerations": tolerations,
                             "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}
                })),
            );
            store.persistent_volume_claims.insert(
                format!("default/{claim}"),
                parse(serde_json::json!({
                    "metadata": {"name": claim, "namespace": "default"},
                    "spec": {"volumeName": format!("pv-{claim}")}
                })),
            );
            store.volume_attachments.insert(
                format!("csi-{claim}"),
                parse(serde_json::json!({
                    "metadata": {"name": format!("csi-{claim}")},
                    "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1",
                             "source": {"persistentVolumeName": format!("pv-{claim}")}}
                })),
            );
        }
        store.volume_attachments.insert(
            "csi-inline".into(),
            parse(serde_json::json!({
                "metadata": {"name": "csi-inline"},
                "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1", "source": {}}
            })),
        );
        let snapshot = Snapshot::new(store);
        assert_eq!(
            volume_attachments_on(&snapshot, "n1", 0),
            vec!["csi-data-db-0"]
        );
        assert!(volume_attachments_on(&snapshot, "n2", 0).is_empty());
    }
}
