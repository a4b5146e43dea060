//! The provisioner: pods kube-scheduler marked unschedulable are batched (1 s idle, 10 s at
//! most), simulated onto existing capacity (including nodes still launching) and the
//! NodePools, and the NodeClaims the simulation opens are created. Pods that fit nowhere get an
//! event saying why.

use crate::context::Context;
use crate::events::EventType;
use crate::metrics::Metrics;
use crate::nodeclaim_template::build_nodeclaim;
use crate::simulation::simulation_input;
use crate::state::Snapshot;
use driftwood_disruption::views::{is_daemonset_pod, is_mirror_pod};
use driftwood_scheduling::{SimPod, schedule};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Whether kube-scheduler gave up on the pod and it is ours to provision for.
pub fn is_provisionable(pod: &Pod) -> bool {
    let unscheduled = pod
        .spec
        .as_ref()
        .is_none_or(|s| s.node_name.as_deref().is_none_or(str::is_empty));
    let marked = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter().any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
        });
    unscheduled
        && marked
        && pod.metadata.deletion_timestamp.is_none()
        && !is_daemonset_pod(pod)
        && !is_mirror_pod(pod)
}

/// The keys of the pods waiting for capacity now (Pending, unschedulable, not DaemonSet or
/// mirror pods).
pub fn provisionable(snapshot: &Snapshot) -> BTreeSet<String> {
    snapshot.provisionable_pods.iter().cloned().collect()
}

/// Runs the provisioner until the task is aborted.
pub async fn run(ctx: Context) {
    let mut changes = ctx.state.subscribe();
    ctx.state.wait_synced().await;
    let mut reported: BTreeMap<String, String> = BTreeMap::new();
    loop {
        // Wait for a provisionable pod.
        while ctx
            .state
            .read(|s| s.provisionable_pods.is_empty())
            .unwrap_or(true)
        {
            if changes.changed().await.is_err() {
                return;
            }
        }
        // Batch: until no new pod for batch_idle, or batch_max since the first. A new pod is
        // an arrival counted by the cache's index, so each event costs O(1) here.
        let arrivals = |ctx: &Context| ctx.state.read(|s| s.provisionable_arrivals).unwrap_or(0);
        let first = tokio::time::Instant::now();
        let mut seen = arrivals(&ctx);
        let mut last_new = first;
        loop {
            let deadline = (last_new + ctx.settings.batch_idle).min(first + ctx.settings.batch_max);
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => break,
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let now_seen = arrivals(&ctx);
                    if now_seen != seen {
                        last_new = tokio::time::Instant::now();
                    }
                    seen = now_seen;
                }
            }
        }
        let created = provision(&ctx, &mut reported).await;
        // Read your writes: decide again only once the cache holds the NodeClaims just created,
        // so their capacity counts (bounded, so a lost event cannot stall provisioning).
        let deadline = tokio::time::Instant::now() + READ_YOUR_WRITES_TIMEOUT;
        while !ctx
            .state
            .read(|s| created.iter().all(|n| s.store.nodeclaims.contains_key(n)))
            .unwrap_or(true)
        {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {
                    tracing::warn!(nodeclaims = %created.join(", "), "created nodeclaims not seen in the cache yet; provisioning again anyway");
                    break;
                }
                changed = changes.changed() => if changed.is_err() {
                    return;
                },
            }
        }
    }
}

/// The longest the provisioner waits to see its own NodeClaims in the cache.
const READ_YOUR_WRITES_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// One provisioning pass; returns the names of the NodeClaims it created.
pub async fn provision(ctx: &Context, reported: &mut BTreeMap<String, String>) -> Vec<String> {
    let snapshot = ctx.state.snapshot();
    let keys = provisionable(&snapshot);
    let mut created = Vec::new();
    if keys.is_empty() {
        return created;
    }
    let mut pods = Vec::new();
    for key in &keys {
        let Some(pod) = snapshot.store.pods.get(key) else {
            continue;
        };
        match SimPod::from_pod(pod) {
            Ok(sim) => pods.push(sim),
            Err(error) => {
                let note = format!("Failed to schedule pod, {error}");
                if reported.get(key) != Some(&note) {
                    ctx.events
                        .publish(pod.as_ref(), EventType::Warning, "FailedScheduling", &note)
                        .await;
                    reported.insert(key.clone(), note);
                }
            }
        }
    }
    tracing::info!(pods = %keys.iter().take(5).cloned().collect::<Vec<_>>().join(", "), count = keys.len(), "found provisionable pod(s)");
    let (mut input, skipped) = simulation_input(ctx, &snapshot, true).await;
    input.pods = pods;
    let started = Instant::now();
    let result = schedule(&input);
    ctx.metrics
        .scheduling_duration
        .observe(started.elapsed().as_secs_f64());
    let result = match result {
        Ok(r) => r,
        Err(error) => {
            tracing::error!(%error, "scheduling simulation failed");
            return created;
        }
    };
    let new_pods: usize = result.new_nodeclaims.iter().map(|n| n.pods.len()).sum();
    if !result.new_nodeclaims.is_empty() {
        tracing::info!(
            nodeclaims = result.new_nodeclaims.len(),
            pods = new_pods,
            "computed new nodeclaim(s) to fit pod(s)"
        );
    }
    let api = crate::api::nodeclaims(&ctx.client);
    for planned in &result.new_nodeclaims {
        let Some(pool) = snapshot.nodepool(&planned.nodepool) else {
            continue;
        };
        let name = ctx.names.nodeclaim_name(&planned.nodepool);
        let claim = build_nodeclaim(&name, pool, planned);
        match api.create(&PostParams::default(), &claim).await {
            Ok(_) => {
                created.push(name.clone());
                let types = planned.instance_types.len();
                tracing::info!(
                    nodeclaim = %name,
                    nodepool = %planned.nodepool,
                    requests = %requests_text(planned),
                    instance_types = %format!("{} and {} other(s)", planned.instance_types.iter().take(5).cloned().collect::<Vec<_>>().join(", "), types.saturating_sub(5)),
                    "created nodeclaim"
                );
                Metrics::inc(
                    &ctx.metrics.nodeclaims_created,
                    &[("reason", "provisioning"), ("nodepool", &planned.nodepool)],
                );
            }
            Err(error) => tracing::warn!(nodeclaim = %name, %error, "could not create nodeclaim"),
        }
    }
    for unschedulable in &result.unschedulable {
        let mut note = format!("Failed to schedule pod, {}", unschedulable.reason);
        if !skipped.is_empty() {
            let list: Vec<String> = skipped
                .iter()
                .map(|(p, why)| format!("nodepool {p:?}: {why}"))
                .collect();
            note.push_str(&format!(" (not considered: {})", list.join("; ")));
        }
        if reported.get(&unschedulable.pod) != Some(&note) {
            if let Some(pod) = snapshot.store.pods.get(&unschedulable.pod) {
                ctx.events
                    .publish(pod.as_ref(), EventType::Warning, "FailedScheduling", &note)
                    .await;
            }
            tracing::warn!(pod = %unschedulable.pod, reason = %note, "could not schedule pod");
            reported.insert(unschedulable.pod.clone(), note);
        }
    }
    reported.retain(|k, _| keys.contains(k));
    created
}

fn requests_text(planned: &driftwood_scheduling::NewNodeClaim) -> String {
    planned
        .requests
        .names()
        .map(|n| {
            format!(
                "{n}: {}",
                driftwood_scheduling::resources::format_amount(n, planned.requests.get(n))
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}
