//! Provisioning and NodeClaim lifecycle: unsatisfiable pods, NodePool limits and weights, a
//! controller crash between NodeClaim creation and launch, and leader election handover.

use super::harness::describe;
use super::support::{
    MINUTE, claims_of, cluster, deployment, events_about, idle, initialized_of, nodepool,
    ready_pods,
};
use driftwood_api::condition::Conditions;
use driftwood_api::wellknown::CONDITION_LAUNCHED;
use driftwood_controller::Settings;
use std::collections::BTreeSet;
use std::time::Duration;

/// The names of the pending pods of `app`.
fn pending_pods(h: &super::harness::Harness, app: &str) -> Vec<String> {
    h.snapshot()
        .store
        .pods
        .values()
        .filter(|p| p.labels().get("app").is_some_and(|a| a == app))
        .filter(|p| p.node_name.is_none())
        .map(|p| p.name.to_string())
        .collect()
}

/// Advances time until every named pod has a FailedScheduling event; returns their notes.
async fn failed_scheduling_notes(
    h: &mut super::harness::Harness,
    pods: &[String],
    max: Duration,
) -> Vec<String> {
    for _ in 0..max.as_secs() {
        let mut notes = Vec::new();
        for pod in pods {
            if let Some((_, note)) = events_about(h, "default", pod)
                .await
                .into_iter()
                .rfind(|(reason, _)| reason == "FailedScheduling")
            {
                notes.push(note);
            }
        }
        if notes.len() == pods.len() {
            return notes;
        }
        idle(h, Duration::from_secs(1)).await;
    }
    panic!(
        "no FailedScheduling event for all of {pods:?}\n{}",
        describe(&h.snapshot())
    );
}

#[tokio::test(start_paused = true)]
async fn unsatisfiable_pods_get_failed_scheduling_and_no_nodeclaim() {
    let mut h = cluster(Settings::default()).await;
    h.apply(&nodepool("general", "", "")).await;
    // A label no pool offers, and a request no instance type holds.
    h.apply(&deployment("nowhere", 1, "500m", "does-not-exist", ""))
        .await;
    h.apply(&deployment("huge", 1, "1000", "", "")).await;
    idle(&mut h, Duration::from_secs(5)).await;
    let mut pods = pending_pods(&h, "nowhere");
    pods.extend(pending_pods(&h, "huge"));
    assert_eq!(pods.len(), 2, "{}", describe(&h.snapshot()));
    let notes = failed_scheduling_notes(&mut h, &pods, MINUTE).await;
    for note in &notes {
        assert!(note.starts_with("Failed to schedule pod, "), "{note}");
        assert!(!note.contains("not considered"), "{note}");
    }
    let nowhere = &notes[0];
    assert!(
        nowhere.contains("does-not-exist"),
        "the note names the selector that fails: {nowhere}"
    );
    let huge = &notes[1];
    assert!(
        huge.contains("cpu") || huge.contains("instance type"),
        "the note names the resource that does not fit: {huge}"
    );
    idle(&mut h, 2 * MINUTE).await;
    let s = h.snapshot();
    assert!(
        s.store.nodeclaims.is_empty(),
        "no NodeClaim for unsatisfiable pods\n{}",
        describe(&s)
    );
    assert_eq!(h.embedded.cluster.aws().fleet_calls(), 0);
}

/// Karpenter's scheduler skips a NodePool whose requirements leave no instance type with an
/// available offering and publishes NoCompatibleInstanceTypes on it, deduplicated for a minute
/// (scheduling/events.go, scheduler.go's template filter).
#[tokio::test(start_paused = true)]
async fn a_nodepool_no_instance_type_satisfies_gets_no_compatible_instance_types() {
    let mut h = cluster(Settings::default()).await;
    // No instance type of the simulated catalog has 3 vCPUs.
    h.apply(&nodepool("odd", "", "").replace("values: [\"4\"]", "values: [\"3\"]"))
        .await;
    h.apply(&deployment("stuck", 1, "500m", "odd", "")).await;
    idle(&mut h, Duration::from_secs(5)).await;
    let pods = pending_pods(&h, "stuck");
    assert_eq!(pods.len(), 1, "{}", describe(&h.snapshot()));
    let notes = failed_scheduling_notes(&mut h, &pods, MINUTE).await;
    assert!(
        notes[0].contains("nodepool \"odd\": its requirements filtered out every instance type"),
        "the pod's note names the pool left out and why: {}",
        notes[0]
    );
    idle(&mut h, 5 * MINUTE).await;
    let on_pool: Vec<(String, String)> = events_about(&h, "default", "odd")
        .await
        .into_iter()
        .filter(|(reason, _)| reason == "NoCompatibleInstanceTypes")
        .collect();
    assert!(
        !on_pool.is_empty(),
        "no NoCompatibleInstanceTypes on the NodePool"
    );
    assert!(on_pool.iter().all(|(_, note)| note
        == "NodePool requirements filtered out all compatible available instance types"));
    // The provisioner looks again every pass while the pod waits: once a minute at most.
    assert!(
        on_pool.len() <= 7,
        "{} events in about six minutes",
        on_pool.len()
    );
    assert!(h.snapshot().store.nodeclaims.is_empty());
}

#[tokio::test(start_paused = true)]
async fn nodepool_limits_stop_provisioning_at_the_limit() {
    let mut h = cluster(Settings::default()).await;
    // 4-cpu instances and an 8-cpu limit: two nodes at most.
    h.apply(&nodepool("limited", "  limits:\n    cpu: \"8\"", ""))
        .await;
    // One 3-cpu pod per node: four pods want four nodes.
    h.apply(&deployment("wide", 4, "3", "limited", "")).await;
    h.wait_until("two pods running", 5 * MINUTE, |s| {
        ready_pods(s, "wide") == 2
    })
    .await;
    let pending = pending_pods(&h, "wide");
    assert_eq!(pending.len(), 2, "{}", describe(&h.snapshot()));
    let notes = failed_scheduling_notes(&mut h, &pending, MINUTE).await;
    for note in &notes {
        assert!(note.starts_with("Failed to schedule pod, "), "{note}");
    }
    idle(&mut h, 5 * MINUTE).await;
    let s = h.snapshot();
    assert_eq!(claims_of(&s, "limited").len(), 2, "{}", describe(&s));
    assert_eq!(ready_pods(&s, "wide"), 2);
    assert_eq!(h.embedded.cluster.aws().instances().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_heavier_nodepool_is_used_first() {
    let mut h = cluster(Settings::default()).await;
    h.apply(&nodepool("light", "  weight: 10", "")).await;
    h.apply(&nodepool("heavy", "  weight: 100", "")).await;
    h.apply(&nodepool("unweighted", "", "")).await;
    // No node selector: every pool can take the pods.
    h.apply(&deployment("any", 3, "3", "", "")).await;
    h.wait_until("three pods running", 5 * MINUTE, |s| {
        ready_pods(s, "any") == 3
    })
    .await;
    let s = h.snapshot();
    assert_eq!(initialized_of(&s, "heavy").len(), 3, "{}", describe(&s));
    assert!(claims_of(&s, "light").is_empty(), "{}", describe(&s));
    assert!(claims_of(&s, "unweighted").is_empty(), "{}", describe(&s));
    // Karpenter's Nominated: each pod was told once (deduped by pod, as Karpenter's events)
    // that it should schedule on one of the NodeClaims launched for the pods. Where it then
    // runs is the kube-scheduler's choice among identical nodes.
    let heavy: BTreeSet<String> = claims_of(&s, "heavy")
        .into_iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    for pod in s.store.pods.values().filter(|p| p.name.starts_with("any-")) {
        let name = pod.name.to_string();
        let nominated: Vec<String> = events_about(&h, "default", &name)
            .await
            .into_iter()
            .filter(|(reason, _)| reason == "Nominated")
            .map(|(_, note)| note)
            .collect();
        assert_eq!(nominated.len(), 1, "{name}: {nominated:?}");
        let claim = nominated[0]
            .strip_prefix("Pod should schedule on: nodeclaim/")
            .unwrap_or_default();
        assert!(
            heavy.contains(claim),
            "{name}: {nominated:?} not one of {heavy:?}"
        );
    }
}

/// The provider IDs' instance ids of every NodeClaim.
fn claimed_instances(h: &super::harness::Harness) -> BTreeSet<String> {
    h.snapshot()
        .store
        .nodeclaims
        .values()
        .filter_map(|c| c.status.as_ref().and_then(|s| s.provider_id.clone()))
        .filter_map(|id| id.rsplit('/').next().map(str::to_string))
        .collect()
}

fn live_instances(h: &super::harness::Harness) -> BTreeSet<String> {
    h.embedded
        .cluster
        .aws()
        .instances()
        .into_iter()
        .filter(|i| i.state == "pending" || i.state == "running")
        .map(|i| i.instance_id)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_crash_between_nodeclaim_creation_and_launch_leaves_one_instance_per_claim() {
    let mut h = cluster(Settings::default()).await;
    h.apply(&nodepool("general", "", "")).await;
    h.apply(&deployment("app", 2, "3", "general", "")).await;
    // Step in small increments until the provisioner created the NodeClaims, and kill the
    // controllers before the lifecycle controller (200 ms debounce) launches them.
    let api = driftwood_controller::api::nodeclaims(&h.embedded.cluster.client());
    let mut created = Vec::new();
    for _ in 0..2000 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        created = api
            .list(&kube::api::ListParams::default())
            .await
            .unwrap()
            .items;
        if !created.is_empty() {
            break;
        }
    }
    assert!(!created.is_empty(), "the provisioner created NodeClaims");
    h.embedded.kill_controllers();
    let launched_before = created
        .iter()
        .filter(|c| c.is_true(CONDITION_LAUNCHED))
        .count();
    assert_eq!(launched_before, 0, "killed before launch");
    idle(&mut h, MINUTE).await;
    let fleet_calls_while_dead = h.embedded.cluster.aws().fleet_calls();
    assert_eq!(fleet_calls_while_dead, 0, "nothing launches while dead");

    h.embedded.start_controllers();
    h.wait_until("both pods running", 5 * MINUTE, |s| {
        ready_pods(s, "app") == 2
    })
    .await;
    // Past the GC grace (30 s) and at least one GC period (120 s).
    idle(&mut h, 3 * MINUTE).await;
    let s = h.snapshot();
    let claims = claims_of(&s, "general");
    assert_eq!(claims.len(), 2, "{}", describe(&s));
    assert!(claims.iter().all(|c| c.is_true(CONDITION_LAUNCHED)));
    assert_eq!(
        live_instances(&h),
        claimed_instances(&h),
        "exactly one live instance per NodeClaim, no orphan"
    );
    let names: BTreeSet<String> = created
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let now: BTreeSet<String> = claims.iter().map(|c| super::support::name(c)).collect();
    assert!(
        names.is_subset(&now) || names.is_disjoint(&now),
        "claims either resumed or were replaced wholesale: before {names:?}, after {now:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_instance_whose_nodeclaim_vanished_during_a_crash_is_garbage_collected() {
    let mut h = cluster(Settings::default()).await;
    h.apply(&nodepool("general", "", "")).await;
    h.apply(&deployment("app", 1, "3", "general", "")).await;
    h.wait_until("the pod running", 5 * MINUTE, |s| ready_pods(s, "app") == 1)
        .await;
    let orphan = claimed_instances(&h);
    assert_eq!(orphan.len(), 1);
    // While the controller is down its NodeClaim disappears without the finalizer running
    // (as if the crash cut off a launch whose record was never written): the instance is
    // left with no NodeClaim.
    h.embedded.kill_controllers();
    let api = driftwood_controller::api::nodeclaims(&h.embedded.cluster.client());
    let name = super::support::name(claims_of(&h.snapshot(), "general")[0]);
    api.patch(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    api.delete(&name, &kube::api::DeleteParams::default())
        .await
        .unwrap();
    idle(&mut h, Duration::from_secs(5)).await;
    assert!(h.snapshot().store.nodeclaims.is_empty());
    assert_eq!(
        live_instances(&h),
        orphan,
        "the instance outlives its NodeClaim"
    );

    h.embedded.start_controllers();
    // The first GC pass sees the orphan; the next, one GC period (120 s) later and past the
    // 30 s grace, terminates it; plus the termination delay.
    idle(&mut h, 3 * MINUTE).await;
    let live = live_instances(&h);
    assert!(
        live.is_disjoint(&orphan),
        "the orphaned instance is terminated: live {live:?}"
    );
    h.wait_until("the pod running again", 5 * MINUTE, |s| {
        ready_pods(s, "app") == 1
    })
    .await;
    assert_eq!(
        live_instances(&h),
        claimed_instances(&h),
        "exactly one live instance per NodeClaim"
    );
    assert_eq!(claimed_instances(&h).len(), 1);
}

/// The holder of the leader-election Lease.
async fn lease_holder(h: &super::harness::Harness) -> String {
    kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        h.embedded.cluster.client(),
        "kube-system",
    )
    .get(driftwood_controller::leader::LEASE_NAME)
    .await
    .unwrap()
    .spec
    .and_then(|s| s.holder_identity)
    .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn only_the_leader_acts_and_a_standby_takes_over() {
    let lease = Duration::from_secs(15);
    let mut h = cluster(Settings::default()).await;
    h.embedded.kill_controllers();
    let a = h.embedded.start_replica("replica-a", lease);
    idle(&mut h, Duration::from_secs(2)).await;
    let b = h.embedded.start_replica("replica-b", lease);
    idle(&mut h, Duration::from_secs(20)).await;
    assert!(a.is_leading(), "the first replica leads");
    assert!(!b.is_leading(), "the second stands by");
    assert!(b.metrics_text().is_none(), "a standby runs no controllers");
    assert_eq!(lease_holder(&h).await, "replica-a");

    h.apply(&nodepool("general", "", "")).await;
    h.apply(&deployment("app", 1, "3", "general", "")).await;
    h.wait_until("the pod running", 5 * MINUTE, |s| ready_pods(s, "app") == 1)
        .await;
    let metrics = a.metrics_text().unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("karpenter_nodeclaims_created") && l.contains("provisioning")),
        "the leader provisioned:\n{metrics}"
    );
    assert!(!b.is_leading());
    assert_eq!(h.snapshot().store.nodeclaims.len(), 1);

    // The leader dies; the standby acquires the lapsed lease.
    drop(a);
    let killed = super::support::now(&h);
    let mut took = None;
    for second in 1..=60 {
        idle(&mut h, Duration::from_secs(1)).await;
        if b.is_leading() {
            took = Some(second);
            break;
        }
    }
    let took = took.expect("the standby takes over");
    assert_eq!(lease_holder(&h).await, "replica-b");
    // The lease lapses 15 s after the last renewal (at most 5 s before the kill); the standby
    // retries every 5 s.
    assert!(
        took <= 15 + 5,
        "took over {took} s after the leader died (lease 15 s, retry 5 s)"
    );
    eprintln!("standby took over {took} s after the leader died at {killed}; lease {lease:?}");
    // And acts: a second replica needs a second node.
    h.apply(&deployment("app", 2, "3", "general", "")).await;
    h.wait_until("both pods running", 5 * MINUTE, |s| {
        ready_pods(s, "app") == 2
    })
    .await;
    let metrics = b.metrics_text().unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("karpenter_nodeclaims_created") && l.contains("provisioning")),
        "the new leader provisioned:\n{metrics}"
    );
    assert_eq!(h.snapshot().store.nodeclaims.len(), 2);
}

/// Issue 33 (client-go's leader election, `leader_election_slowpath_total`): when the lease
/// changes under its holder — here someone labels it, as a lost answer to the holder's own
/// renewal would too — the holder's next optimistic renewal is refused; it reads the lease,
/// finds itself the holder and renews it (the slow path), never stepping down, and the standby
/// stays a standby.
#[tokio::test(start_paused = true)]
async fn a_lease_written_by_someone_else_stays_with_its_holder() {
    let lease = Duration::from_secs(15);
    let mut h = cluster(Settings::default()).await;
    h.embedded.kill_controllers();
    let a = h.embedded.start_replica("replica-a", lease);
    idle(&mut h, Duration::from_secs(2)).await;
    let b = h.embedded.start_replica("replica-b", lease);
    idle(&mut h, Duration::from_secs(5)).await;
    assert!(a.is_leading() && !b.is_leading());
    assert_eq!(a.slowpath_renewals(), 0, "renewals by the fast path only");
    let leases = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        h.embedded.cluster.client(),
        "kube-system",
    );
    for round in 0..3 {
        leases
            .patch(
                driftwood_controller::leader::LEASE_NAME,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({
                    "metadata": {"labels": {"audited": format!("round-{round}")}}
                })),
            )
            .await
            .unwrap();
        for _ in 0..10 {
            idle(&mut h, Duration::from_secs(1)).await;
            assert!(
                a.is_leading(),
                "the holder stepped down after round {round}"
            );
            assert!(!b.is_leading());
        }
        assert_eq!(a.slowpath_renewals(), round + 1);
    }
    assert_eq!(lease_holder(&h).await, "replica-a");
    // The label written by someone else survives the renewals (they are patches).
    let read = leases
        .get(driftwood_controller::leader::LEASE_NAME)
        .await
        .unwrap();
    assert_eq!(
        read.metadata
            .labels
            .unwrap_or_default()
            .get("audited")
            .map(String::as_str),
        Some("round-2")
    );
    assert_eq!(b.slowpath_renewals(), 0);
    // Someone hands the lease to another holder: the next renewal is refused, the read shows
    // the lease is not ours, and the leader steps down at once (the slow path renews only its
    // own term).
    leases
        .patch(
            driftwood_controller::leader::LEASE_NAME,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({
                "spec": {"holderIdentity": "someone-else"}
            })),
        )
        .await
        .unwrap();
    idle(&mut h, Duration::from_secs(5)).await;
    assert!(!a.is_leading(), "the old holder stepped down");
    assert_eq!(
        a.slowpath_renewals(),
        3,
        "no renewal of a lease held by another"
    );
}

/// Issue 16: the shape of a public Karpenter blueprint — 30 replicas with zone and hostname
/// topology spread `ScheduleAnyway` — on a fresh NodePool. The embedded kube-scheduler scores
/// nodes as kube-scheduler does, so the replicas spread over the nodes driftwood launched: no
/// node is left empty, and the zones stay within maxSkew as far as their capacity allows.
#[tokio::test(start_paused = true)]
async fn thirty_spread_replicas_use_every_node_launched() {
    let mut h = cluster(Settings::default()).await;
    h.apply(&nodepool("general", "", "")).await;
    let spread = "      topologySpreadConstraints:\n      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: inflate}}}\n      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: inflate}}}\n";
    h.apply(&deployment("inflate", 30, "1", "general", spread))
        .await;
    h.wait_until("30 replicas running", 10 * MINUTE, |s| {
        ready_pods(s, "inflate") == 30
    })
    .await;
    idle(&mut h, MINUTE).await;
    let s = h.snapshot();
    let mut per_node: std::collections::BTreeMap<String, usize> = Default::default();
    let mut zone_of: std::collections::BTreeMap<String, String> = Default::default();
    for claim in initialized_of(&s, "general") {
        let node = claim
            .status
            .as_ref()
            .and_then(|st| st.node_name.clone())
            .unwrap_or_default();
        let zone = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("topology.kubernetes.io/zone").cloned())
            .unwrap_or_default();
        zone_of.insert(node.clone(), zone);
        per_node.insert(node, 0);
    }
    for pod in s.store.pods.values() {
        let app = pod.labels().get("app");
        if app.map(String::as_str) == Some("inflate")
            && let Some(node) = pod.node_name.as_deref().map(str::to_string)
        {
            *per_node.entry(node).or_default() += 1;
        }
    }
    let empty: Vec<&String> = per_node
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(k, _)| k)
        .collect();
    assert!(
        empty.is_empty(),
        "empty nodes {empty:?} in {per_node:?}\n{}",
        describe(&s)
    );
    let mut per_zone: std::collections::BTreeMap<&str, usize> = Default::default();
    for (node, count) in &per_node {
        *per_zone
            .entry(zone_of.get(node).map(String::as_str).unwrap_or_default())
            .or_default() += count;
    }
    let (most, fewest) = (
        per_zone.values().max().copied().unwrap_or(0),
        per_zone.values().min().copied().unwrap_or(0),
    );
    assert!(
        per_zone.len() == 3 && most - fewest <= 1,
        "zones beyond maxSkew 1: {per_zone:?}"
    );
    println!("replicas per node: {per_node:?}; per zone: {per_zone:?}");
}

/// `kubectl drain` of a node driftwood made (cordon, then evictions): the node lifecycle
/// controller's `node.kubernetes.io/unschedulable` taint keeps the evicted pods' replacements
/// off it, so driftwood's provisioner launches capacity for them, as Karpenter does for pods a
/// cordoned node cannot take. (Before the taint, the embedded scheduler put the pod straight
/// back on the cordoned node and nothing was launched.)
#[tokio::test(start_paused = true)]
async fn a_drained_node_gets_capacity_for_the_pods_it_held() {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use kube::Api;
    use kube::api::{EvictParams, ListParams, Patch, PatchParams};

    let mut h = cluster(Settings::default()).await;
    h.apply(&nodepool("general", "", "")).await;
    h.apply(&deployment("web", 1, "1", "general", "")).await;
    h.wait_until("web ready", 5 * MINUTE, |s| ready_pods(s, "web") == 1)
        .await;
    let claims_before: BTreeSet<String> = claims_of(&h.snapshot(), "general")
        .iter()
        .map(|c| super::support::name(c))
        .collect();
    let pods: Api<Pod> = Api::namespaced(h.embedded.cluster.client(), "default");
    let running = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    let drained = running.items[0]
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap();
    let nodes: Api<Node> = Api::all(h.embedded.cluster.client());
    let cordon = serde_json::json!({"spec": {"unschedulable": true}});
    nodes
        .patch(&drained, &PatchParams::default(), &Patch::Merge(&cordon))
        .await
        .unwrap();
    let node = nodes.get(&drained).await.unwrap();
    assert!(
        node.spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unschedulable"),
        "a cordoned node carries the unschedulable taint"
    );
    for pod in &running.items {
        let on_drained = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&drained);
        if on_drained {
            let name = pod.metadata.name.clone().unwrap();
            pods.evict(&name, &EvictParams::default()).await.unwrap();
        }
    }
    h.wait_until(
        "web ready again, none of it on the drained node",
        5 * MINUTE,
        |s| {
            ready_pods(s, "web") == 1
                && s.store
                    .pods
                    .values()
                    .all(|p| p.node_name.as_deref() != Some(drained.as_str()))
        },
    )
    .await;
    let s = h.snapshot();
    let launched: Vec<String> = claims_of(&s, "general")
        .iter()
        .map(|c| super::support::name(c))
        .filter(|name| !claims_before.contains(name))
        .collect();
    assert_eq!(
        launched.len(),
        1,
        "one NodeClaim launched for the evicted pod\n{}",
        describe(&s)
    );
}
