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
use driftwood_api::condition::Conditions as _;
use driftwood_disruption::cached_pod::CachedPod;
use driftwood_disruption::views::{is_daemonset_pod, is_mirror_pod};
use futures::StreamExt as _;

use kube::api::PostParams;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Whether kube-scheduler gave up on the pod and it is ours to provision for.
pub fn is_provisionable(pod: &CachedPod) -> bool {
    pod.node_name.is_none()
        && pod.unschedulable
        && !pod.is_terminating()
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
/// The provisioner's name in metrics and logs (Karpenter's).
pub const CONTROLLER: &str = "provisioner";

pub async fn run(ctx: Context, cancel: CancellationToken) {
    let mut changes = ctx.state.subscribe();
    tokio::select! {
        () = cancel.cancelled() => return,
        () = ctx.state.wait_synced() => {}
    }
    let mut reported = Reported::default();
    let loops = &ctx.metrics.loops;
    let worker = super::driver::Worker::alone(CONTROLLER);
    loops.started(worker);
    // What the last pass decided from, and when it ran.
    let mut last: Option<(WorldSignature, tokio::time::Instant)> = None;
    loop {
        // Wait for a provisionable pod whose answer may differ from the last pass's.
        loop {
            let (pending, deleting, changed) = ctx.state.read(|s| {
                (
                    !s.provisionable_pods.is_empty(),
                    !s.deleting_nodeclaims.is_empty() || !s.deleting_nodes.is_empty(),
                    last.as_ref()
                        .is_none_or(|(seen, _)| world_signature(s) != *seen),
                )
            });
            let stale = last
                .as_ref()
                .is_some_and(|(_, at)| at.elapsed() >= RESIMULATE_AFTER);
            // Pods of Nodes being deleted are provisioned for when a Node starts deleting (the
            // signature moves); they are not re-simulated on a timer, as they are not waiting.
            if (pending && (changed || stale)) || (deleting && changed) {
                loops.added(worker);
                break;
            }
            // While pods wait for capacity already launched, look again when the last answer
            // is RESIMULATE_AFTER old; otherwise only a change wakes this loop.
            let recheck = last
                .as_ref()
                .filter(|_| pending)
                .map(|(_, at)| *at + RESIMULATE_AFTER);
            tokio::select! {
                () = cancel.cancelled() => return,
                () = async {
                    match recheck {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => {}
                changed = changes.changed() => if changed.is_err() {
                    return;
                },
            }
        }
        // Batch: until no new pod for batch_idle, or batch_max since the first. A new pod is
        // an arrival counted by the cache's index, so each event costs O(1) here.
        let arrivals = |ctx: &Context| ctx.state.read(|s| s.provisionable_arrivals);
        let first = tokio::time::Instant::now();
        let queued_since = first;
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
        // The batch's wait is its time in the queue; the pass is the work.
        let created = super::driver::metered_pass(
            &ctx,
            worker,
            queued_since.elapsed().as_secs_f64(),
            provision(&ctx, &mut reported),
            |_| 0,
        )
        .await
        .unwrap_or_default();
        // Read your writes: decide again only once the cache holds the NodeClaims just created,
        // so their capacity counts (bounded, so a lost event cannot stall provisioning).
        let deadline = tokio::time::Instant::now() + READ_YOUR_WRITES_TIMEOUT;
        while !ctx
            .state
            .read(|s| created.iter().all(|n| s.store.nodeclaims.contains_key(n)))
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
        last = Some((ctx.state.read(world_signature), tokio::time::Instant::now()));
    }
}

/// How long the answer of a pass stands for pods still pending while nothing it depends on
/// changed (a safety net: it is redone at least this often).
const RESIMULATE_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// What a provisioning pass's answer depends on, apart from pods that only leave the pending
/// set (bound to the capacity launched for them): new pending pods, the number of NodeClaims
/// and Nodes (a launch that failed removes its NodeClaim), NodePools changed. While it stays the
/// same, pods still pending are waiting for the NodeClaims the last pass launched for them
/// (Karpenter's nominated pods), and simulating them again would give the same answer. Every
/// part is O(1) to read (NodePools are few), as it is read on every watch event. A removal and
/// a creation at once cancel out; [`RESIMULATE_AFTER`] bounds what that can cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldSignature {
    arrivals: u64,
    nodeclaims: usize,
    nodes: usize,
    /// NodeClaims and Nodes being deleted: one more is capacity to launch for its pods.
    deleting: (usize, usize),
    nodepools: Vec<(String, Option<i64>)>,
    /// Each EC2NodeClass's readiness: a class turning Ready makes its NodePools usable (found
    /// with the simulated account's latency: the class resolved just after the first pass, and
    /// the pods waited for the 30 s re-simulation).
    nodeclasses: Vec<(String, bool)>,
}

/// The [`WorldSignature`] of `snapshot`.
pub fn world_signature(snapshot: &Snapshot) -> WorldSignature {
    WorldSignature {
        arrivals: snapshot.provisionable_arrivals,
        nodeclaims: snapshot.store.nodeclaims.len(),
        nodes: snapshot.store.nodes.len(),
        deleting: (
            snapshot.deleting_nodeclaims.len(),
            snapshot.deleting_nodes.len(),
        ),
        nodepools: snapshot
            .store
            .nodepools
            .iter()
            .map(|(name, pool)| (name.clone(), pool.metadata.generation))
            .collect(),
        nodeclasses: snapshot
            .store
            .nodeclasses
            .iter()
            .map(|(name, class)| {
                (
                    name.clone(),
                    class.is_true(driftwood_api::wellknown::CONDITION_READY),
                )
            })
            .collect(),
    }
}

/// How many NodeClaims a provisioning pass creates at once.
const CREATES_AT_ONCE: usize = 32;

/// The longest the provisioner waits to see its own NodeClaims in the cache.
const READ_YOUR_WRITES_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What the provisioner last told each pending pod, so a pod is not told the same again.
#[derive(Debug, Default)]
pub struct Reported {
    /// The FailedScheduling note.
    failures: BTreeMap<String, String>,
    /// When it was last told where it should schedule (Nominated), UTC seconds.
    nominations: BTreeMap<String, i64>,
    /// Nominated events are rate-limited as Karpenter's (a scale-up of thousands of pods
    /// records a few, not thousands of API writes).
    nomination_budget: NominationBudget,
}

/// Karpenter's pod nomination rate limiter: a token bucket of 10, refilled 5 a second; an
/// event without a token is dropped.
#[derive(Debug)]
struct NominationBudget {
    tokens: i64,
    at: i64,
}

impl Default for NominationBudget {
    fn default() -> Self {
        Self {
            tokens: NOMINATION_BURST,
            at: i64::MIN,
        }
    }
}

const NOMINATION_BURST: i64 = 10;
const NOMINATIONS_PER_SECOND: i64 = 5;

impl NominationBudget {
    /// Takes a token at `now` (UTC seconds), if there is one.
    fn take(&mut self, now: i64) -> bool {
        if now > self.at {
            let refill = now
                .saturating_sub(self.at)
                .saturating_mul(NOMINATIONS_PER_SECOND);
            self.tokens = self.tokens.saturating_add(refill).min(NOMINATION_BURST);
            self.at = now;
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

/// A pod is told where it should schedule at most once in this long (Karpenter's event
/// dedupe timeout: passes may place identical pods on the launching NodeClaims in another
/// order, which is no news to them).
const NOMINATION_DEDUPE_SECONDS: i64 = 120;

impl Reported {
    /// Whether `pod` is to be told `note` (it was not told the same last time); records it.
    fn tell(map: &mut BTreeMap<String, String>, pod: &str, note: &str) -> bool {
        if map.get(pod).is_some_and(|told| told == note) {
            return false;
        }
        map.insert(pod.to_string(), note.to_string());
        true
    }
}

/// One provisioning pass; returns the names of the NodeClaims it created.
pub async fn provision(ctx: &Context, reported: &mut Reported) -> Vec<String> {
    let snapshot = ctx.state.snapshot();
    let mut created = Vec::new();
    if snapshot.provisionable_pods.is_empty() && snapshot.deleting_node_names().is_empty() {
        // Nothing waits: no pod is unschedulable or ignored now.
        Metrics::set(
            &ctx.metrics.scheduler_unschedulable_pods,
            &[("controller", CONTROLLER)],
            0,
        );
        ctx.metrics.scheduler_ignored_pods.set(0);
        return created;
    }
    let (input, skipped) = simulation_input(ctx, &snapshot, true).await;
    for (name, why) in &skipped {
        if why != crate::simulation::NO_COMPATIBLE_INSTANCE_TYPES {
            continue;
        }
        let Some(pool) = snapshot.store.nodepools.get(name) else {
            continue;
        };
        // Sent once a minute at most (the recorder's window for this reason).
        tracing::info!(nodepool = %name, "skipping, nodepool requirements filtered out all instance types");
        ctx.events
            .publish(
                pool.as_ref(),
                EventType::Warning,
                "NoCompatibleInstanceTypes",
                "NodePool requirements filtered out all compatible available instance types",
            )
            .await;
    }
    let now = ctx.now_seconds();
    let started = Instant::now();
    // The simulation is CPU-bound (seconds at fleet scale): it runs on the blocking pool so the
    // async workers keep renewing the lease and serving watches meanwhile.
    let decision = {
        let snapshot = snapshot.clone();
        let running = ctx.metrics.scheduler_progress.start(CONTROLLER);
        super::off_runtime(move || decide(&snapshot, input, &skipped, now, &running.progress)).await
    };
    Metrics::observe(
        &ctx.metrics.scheduling_duration,
        &[("controller", CONTROLLER)],
        started.elapsed().as_secs_f64(),
    );
    let decision = match decision {
        Ok(d) => d,
        Err(error) => {
            tracing::error!(%error, "scheduling simulation failed");
            return created;
        }
    };
    // Karpenter's scheduler gauges: the pods the simulation could not place, and those it
    // never simulated.
    let ignored = decision.ignored;
    Metrics::set(
        &ctx.metrics.scheduler_unschedulable_pods,
        &[("controller", CONTROLLER)],
        i64::try_from(decision.failures.len() - ignored).unwrap_or(i64::MAX),
    );
    ctx.metrics
        .scheduler_ignored_pods
        .set(i64::try_from(ignored).unwrap_or(i64::MAX));
    record_decisions(ctx, &snapshot, &decision);
    if !decision.pods.is_empty() {
        tracing::info!(pods = %decision.pods.iter().take(5).cloned().collect::<Vec<_>>().join(", "), count = decision.pods.len(), deleting_pods = decision.moving, "found provisionable pod(s)");
    }
    if !decision.launch.is_empty() {
        let pods: usize = decision.launch.iter().map(|n| n.pods.len()).sum();
        tracing::info!(
            nodeclaims = decision.launch.len(),
            pods,
            "computed new nodeclaim(s) to fit pod(s)"
        );
    }
    let api = crate::api::nodeclaims(&ctx.client);
    let mut planned_claims = Vec::new();
    for planned in &decision.launch {
        let Some(pool) = snapshot.nodepool(&planned.nodepool) else {
            continue;
        };
        let name = ctx.names.nodeclaim_name(&planned.nodepool, |n| {
            snapshot.store.nodeclaims.contains_key(n)
        });
        let claim = build_nodeclaim(&name, pool, planned);
        planned_claims.push((name, planned, claim));
    }
    // Created together, a few at a time, as Karpenter creates a batch's NodeClaims in
    // parallel: one after another, 1,000 NodeClaims cost 1,000 round trips to the API server.
    let mut creates = Vec::with_capacity(planned_claims.len());
    for (name, planned, claim) in planned_claims {
        let api = &api;
        creates.push(async move {
            let result = api.create(&PostParams::default(), &claim).await;
            (name, planned, result)
        });
    }
    let results: Vec<_> = futures::stream::iter(creates)
        .buffered(CREATES_AT_ONCE)
        .collect()
        .await;
    let mut nominations = decision.nominations.clone();
    for (name, planned, result) in results {
        match result {
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
                    &[
                        ("reason", "provisioning"),
                        ("nodepool", &planned.nodepool),
                        ("min_values_relaxed", "false"),
                    ],
                );
                nominations.extend(
                    planned
                        .pods
                        .iter()
                        .map(|pod| (pod.clone(), format!("nodeclaim/{name}"))),
                );
            }
            Err(error) => tracing::warn!(nodeclaim = %name, %error, "could not create nodeclaim"),
        }
    }
    // Tell each pod where it should schedule (Karpenter's Nominated), at most once per
    // dedupe period, as Karpenter dedupes it by pod.
    let now = ctx.now_seconds();
    for (pod, target) in &nominations {
        let told = reported
            .nominations
            .get(pod)
            .is_some_and(|at| now - at < NOMINATION_DEDUPE_SECONDS);
        if told || !reported.nomination_budget.take(now) {
            continue;
        }
        reported.nominations.insert(pod.clone(), now);
        if let Some(object) = snapshot.store.pods.get(pod) {
            ctx.events
                .publish_ref(
                    object.object_reference(),
                    EventType::Normal,
                    "Nominated",
                    &format!("Pod should schedule on: {target}"),
                )
                .await;
        }
    }
    // Tell each pod that fits nowhere why, once per distinct reason.
    for failure in &decision.failures {
        if Reported::tell(&mut reported.failures, &failure.pod, &failure.note) {
            if let Some(pod) = snapshot.store.pods.get(&failure.pod) {
                ctx.events
                    .publish_ref(
                        pod.object_reference(),
                        EventType::Warning,
                        "FailedScheduling",
                        &failure.note,
                    )
                    .await;
            }
            tracing::warn!(pod = %failure.pod, reason = %failure.note, "could not schedule pod");
        }
    }
    reported
        .failures
        .retain(|k, _| snapshot.provisionable_pods.contains(k));
    reported
        .nominations
        .retain(|k, _| snapshot.provisionable_pods.contains(k));
    created
}

/// Notes in the provisioner's pod times what `decision` decided on the pending pods (those it
/// could not place, and those it placed, on existing capacity or new), and times each first
/// decision from the pod's ack (`karpenter_pods_scheduling_decision_duration_seconds`).
fn record_decisions(ctx: &Context, snapshot: &Snapshot, decision: &Provisioning) {
    let times = &ctx.metrics.state_gauges.scheduling;
    // Pods gone since, by the cache as it is now (not the pass's snapshot, which is older than
    // pods acked while the simulation ran).
    ctx.state
        .read(|s| times.retain(|key, _| s.store.pods.contains_key(key)));
    /// A pod's key with its UID ("" if the snapshot has none).
    fn with_uid<'a>(snapshot: &'a Snapshot, key: &'a str) -> (&'a str, &'a str) {
        let uid = snapshot
            .store
            .pods
            .get(key)
            .and_then(|p| p.uid.as_deref())
            .unwrap_or_default();
        (key, uid)
    }
    let failed: BTreeSet<&str> = decision.failures.iter().map(|f| f.pod.as_str()).collect();
    let placed = decision
        .pods
        .iter()
        .map(String::as_str)
        .filter(|pod| !failed.contains(pod))
        .map(|key| with_uid(snapshot, key));
    let failed = failed.iter().map(|key| with_uid(snapshot, key));
    for seconds in times.decide(failed, placed, ctx.clock.now()) {
        ctx.metrics.pod_scheduling_decision.observe(seconds);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Karpenter's PodNominationRateLimiter (token bucket 5/s, burst 10): a burst of 10, then
    /// 5 a second, never more than 10 saved up.
    #[test]
    fn nominations_are_rate_limited_like_karpenters() {
        let mut budget = NominationBudget::default();
        let taken = |budget: &mut NominationBudget, at: i64, n: usize| {
            (0..n).filter(|_| budget.take(at)).count()
        };
        assert_eq!(taken(&mut budget, 100, 50), 10);
        assert_eq!(taken(&mut budget, 100, 5), 0);
        assert_eq!(taken(&mut budget, 101, 50), 5);
        assert_eq!(taken(&mut budget, 200, 50), 10);
    }
    use crate::state::Store;
    use serde_json::json;
    use std::sync::Arc;

    fn pod(name: &str, node: Option<&str>) -> Arc<k8s_openapi::api::core::v1::Pod> {
        let status = if node.is_some() {
            json!({"phase": "Running"})
        } else {
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]})
        };
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c"}], "nodeName": node},
                "status": status
            }))
            .expect("pod"),
        )
    }

    fn nodeclaim(name: &str) -> Arc<driftwood_api::NodeClaim> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name},
                "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []}
            }))
            .expect("nodeclaim"),
        )
    }

    /// Pods pending for capacity already launched are not simulated again: binding them leaves
    /// the signature alone; a new pending pod, a NodeClaim gone (a failed launch) or a Node
    /// coming do not.
    #[test]
    fn the_world_signature_moves_only_with_what_changes_the_answer() {
        let mut snapshot = Snapshot::new(Store::default());
        snapshot.apply("default/a".into(), pod("a", None));
        snapshot.apply("default/b".into(), pod("b", None));
        snapshot.apply("c1".into(), nodeclaim("c1"));
        let seen = world_signature(&snapshot);
        snapshot.apply("default/a".into(), pod("a", Some("n1")));
        assert_eq!(world_signature(&snapshot), seen, "a pod bound");
        let mut arrived = snapshot.clone();
        arrived.apply("default/c".into(), pod("c", None));
        assert_ne!(world_signature(&arrived), seen, "a new pending pod");
        let mut failed = snapshot.clone();
        failed.delete::<driftwood_api::NodeClaim>("c1");
        assert_ne!(world_signature(&failed), seen, "a NodeClaim gone");
        let mut registered = snapshot.clone();
        registered.apply(
            "n1".into(),
            Arc::new(
                serde_json::from_value::<k8s_openapi::api::core::v1::Node>(
                    json!({"metadata": {"name": "n1"}}),
                )
                .expect("node"),
            ),
        );
        assert_ne!(world_signature(&registered), seen, "a Node registered");
        let class = |ready: &str| -> Arc<driftwood_api::EC2NodeClass> {
            Arc::new(
                serde_json::from_value(json!({
                    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                    "metadata": {"name": "default"},
                    "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                             "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                             "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]},
                    "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "R", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
                }))
                .expect("class"),
            )
        };
        let mut waiting = snapshot.clone();
        waiting.apply("default".into(), class("False"));
        let before = world_signature(&waiting);
        waiting.apply("default".into(), class("True"));
        assert_ne!(
            world_signature(&waiting),
            before,
            "a node class turned Ready"
        );
    }
}
