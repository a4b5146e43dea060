//! The provisioner: pods kube-scheduler marked unschedulable are batched (1 s idle, 10 s at
//! most), simulated onto existing capacity (including nodes still launching) and the
//! NodePools, and the NodeClaims the simulation opens are created. Pods that fit nowhere get an
//! event saying why.

mod decide;

pub use decide::{Failure, Provisioning, decide};

use crate::context::Context;
use crate::events::EventType;
use crate::metrics::Metrics;
use crate::nodeclaim_template::build_nodeclaim;
use crate::simulation::simulation_input;
use crate::state::Snapshot;
use driftwood_disruption::views::{is_daemonset_pod, is_mirror_pod};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

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

/// Runs the provisioner until `cancel` fires (checked between passes: a pass that started
/// creates all its NodeClaims).
pub async fn run(ctx: Context, cancel: CancellationToken) {
    let mut changes = ctx.state.subscribe();
    tokio::select! {
        () = cancel.cancelled() => return,
        () = ctx.state.wait_synced() => {}
    }
    let mut reported: BTreeMap<String, String> = BTreeMap::new();
    loop {
        // Wait for a provisionable pod.
        while ctx
            .state
            .read(|s| s.provisionable_pods.is_empty())
            .unwrap_or(true)
        {
            tokio::select! {
                () = cancel.cancelled() => return,
                changed = changes.changed() => if changed.is_err() {
                    return;
                },
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
                () = cancel.cancelled() => return,
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
                () = cancel.cancelled() => return,
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
    let mut created = Vec::new();
    if snapshot.provisionable_pods.is_empty() {
        return created;
    }
    let (input, skipped) = simulation_input(ctx, &snapshot, true).await;
    let started = Instant::now();
    let decision = decide(&snapshot, input, &skipped);
    ctx.metrics
        .scheduling_duration
        .observe(started.elapsed().as_secs_f64());
    let decision = match decision {
        Ok(d) => d,
        Err(error) => {
            tracing::error!(%error, "scheduling simulation failed");
            return created;
        }
    };
    tracing::info!(pods = %decision.pods.iter().take(5).cloned().collect::<Vec<_>>().join(", "), count = decision.pods.len(), "found provisionable pod(s)");
    if !decision.launch.is_empty() {
        let pods: usize = decision.launch.iter().map(|n| n.pods.len()).sum();
        tracing::info!(
            nodeclaims = decision.launch.len(),
            pods,
            "computed new nodeclaim(s) to fit pod(s)"
        );
    }
    let api = crate::api::nodeclaims(&ctx.client);
    for planned in &decision.launch {
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
    // Tell each pod that fits nowhere why, once per distinct reason.
    for failure in &decision.failures {
        if reported.get(&failure.pod) != Some(&failure.note) {
            if let Some(pod) = snapshot.store.pods.get(&failure.pod) {
                ctx.events
                    .publish(
                        pod.as_ref(),
                        EventType::Warning,
                        "FailedScheduling",
                        &failure.note,
                    )
                    .await;
            }
            tracing::warn!(pod = %failure.pod, reason = %failure.note, "could not schedule pod");
            reported.insert(failure.pod.clone(), failure.note.clone());
        }
    }
    reported.retain(|k, _| snapshot.provisionable_pods.contains(k));
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
