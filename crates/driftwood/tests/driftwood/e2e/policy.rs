//! Rollout policies (the `driftwood.sh/rollout-*` annotations) on the embedded cluster, the
//! invariants checked every second: a canary wave soaks before the next wave starts; a canary
//! whose pods crash-loop on the new AMI halts the rollout until resumed; a rate budget spreads
//! the rollout over its windows and holds across a controller restart.

use super::harness::{Harness, describe};
use super::support::{
    MINUTE, NODECLASS, claims_of, cluster, deployment, disrupting, drift_template, events_about,
    idle, initialized_of, name, nodepool, now, pdb, ready_pods, replaced, with_annotations,
};
use driftwood_api::NodePool;
use driftwood_api::nodepool::RolloutPolicyStatus;
use driftwood_api::wellknown::CONDITION_ROLLOUT_COMPLETE;
use driftwood_controller::Settings;
use driftwood_controller::state::Snapshot;
use std::collections::{BTreeMap, BTreeSet};

/// A NodePool of [`nodepool`] whose budget allows every node at once (so only the policy paces
/// the rollout), annotated with `annotations`.
fn policy_pool(name: &str, annotations: &[(&str, &str)]) -> String {
    let yaml = nodepool(
        name,
        "  disruption:\n    budgets:\n    - nodes: \"100%\"\n",
        "",
    );
    with_annotations(&yaml, name, annotations)
}

/// When each of `original` was first seen disrupting (its command recorded, or being deleted).
#[derive(Default)]
struct Starts {
    at: BTreeMap<String, i64>,
    gone: BTreeMap<String, i64>,
}

impl Starts {
    fn observe(&mut self, s: &Snapshot, original: &BTreeSet<String>, now: i64) {
        for claim in s.store.nodeclaims.values() {
            let n = name(claim);
            if original.contains(&n)
                && (disrupting(claim) || claim.metadata.deletion_timestamp.is_some())
            {
                self.at.entry(n).or_insert(now);
            }
        }
        for n in original {
            if !s.store.nodeclaims.contains_key(n) {
                self.gone.entry(n.clone()).or_insert(now);
            }
        }
    }

    /// Start times, sorted.
    fn times(&self) -> Vec<i64> {
        let mut t: Vec<i64> = self.at.values().copied().collect();
        t.sort_unstable();
        t
    }
}

fn pool_status(s: &Snapshot, pool: &str) -> (Option<RolloutPolicyStatus>, String, String) {
    let np: Option<&NodePool> = s.nodepool(pool).map(|p| p.as_ref());
    let status = np.and_then(|p| p.status.as_ref());
    let policy = status
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.policy.clone());
    let condition = status.and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == CONDITION_ROLLOUT_COMPLETE)
    });
    (
        policy,
        condition.and_then(|c| c.reason.clone()).unwrap_or_default(),
        condition
            .and_then(|c| c.message.clone())
            .unwrap_or_default(),
    )
}

/// A pool of `replicas` nodes, one 3-cpu `app` pod on each 4-cpu node, all initialized.
async fn fleet(h: &mut Harness, pool_yaml: &str, pool: &str, replicas: usize) -> BTreeSet<String> {
    h.apply(pool_yaml).await;
    h.apply(&deployment(pool, replicas, "3", pool, "")).await;
    h.wait_until(&format!("{replicas} nodes of {pool}"), 20 * MINUTE, |s| {
        initialized_of(s, pool).len() == replicas && ready_pods(s, pool) == replicas
    })
    .await;
    claims_of(&h.snapshot(), pool)
        .into_iter()
        .map(name)
        .collect()
}

/// Karpenter's budgets cap nodes disrupting at once; the canary-and-waves policy asked for in
/// kubernetes-sigs/karpenter#1775 orders them: one node, a soak, then half the pool, a soak,
/// then the rest.
#[tokio::test(start_paused = true)]
async fn a_canary_soaks_before_the_next_wave_and_each_wave_keeps_to_its_share() {
    let mut h = cluster(Settings::default()).await;
    let yaml = policy_pool(
        "fleet",
        &[
            ("driftwood.sh/rollout-waves", "1,50%"),
            ("driftwood.sh/rollout-soak", "10m"),
        ],
    );
    let original = fleet(&mut h, &yaml, "fleet", 8).await;
    drift_template(&h, &yaml, "fleet").await;
    let clock = h.embedded.cluster.clock();
    let mut starts = Starts::default();
    let mut reasons = BTreeSet::new();
    h.wait_until("every node of fleet replaced", 3 * 60 * MINUTE, |s| {
        starts.observe(s, &original, clock.now().as_second());
        let (_, reason, message) = pool_status(s, "fleet");
        if reason == "Soaking" {
            assert!(message.contains("soaks until"), "{message}");
        }
        reasons.insert(reason);
        replaced(s, &original, "fleet", 8)
    })
    .await;
    let times = starts.times();
    assert_eq!(times.len(), 8, "{times:?}");
    let canary = starts.at.iter().min_by_key(|(_, t)| **t).unwrap().0.clone();
    let canary_gone = starts.gone[&canary];
    // Wave 1 is the canary alone; wave 2 starts no sooner than 10 minutes after it was gone.
    assert!(
        times[1] >= canary_gone + 600,
        "wave 2 at {} but the canary was gone at {canary_gone}: {times:?}",
        times[1]
    );
    // Wave 2 brings the pool to 50%: three more (4 of 8), started together.
    assert_eq!(times[1], times[3], "{times:?}");
    assert!(times[4] > times[3], "{times:?}");
    // Wave 3 (the rest) waits for wave 2's nodes to be gone and soaked.
    let wave2_gone = starts
        .at
        .iter()
        .filter(|(_, t)| **t == times[1])
        .map(|(n, _)| starts.gone[n])
        .max()
        .unwrap();
    assert!(
        times[4] >= wave2_gone + 600,
        "{times:?}, wave 2 gone at {wave2_gone}"
    );
    assert_eq!(
        times[4], times[7],
        "the last wave is uncapped (budget 100%): {times:?}"
    );
    for reason in ["WaveInProgress", "Soaking"] {
        assert!(reasons.contains(reason), "{reasons:?}");
    }
    let waves: Vec<String> = events_about(&h, "default", "fleet")
        .await
        .into_iter()
        .filter(|(reason, _)| reason == "RolloutWaveStarted")
        .map(|(_, note)| note)
        .collect();
    assert_eq!(
        waves,
        vec![
            "Rollout wave 1 started: up to 1 node(s)",
            "Rollout wave 2 started: up to 3 node(s)",
            "Rollout wave 3 started: the remaining nodes",
        ]
    );
    // Done: the policy keeps nothing but the rate window (none here).
    h.wait_until("the rollout complete", 5 * MINUTE, |s| {
        pool_status(s, "fleet").1 == "Complete"
    })
    .await;
    assert_eq!(pool_status(&h.snapshot(), "fleet").0, None);
}

/// The demo's canary scenario as a test: the new AMI makes every pod crash-loop; the canary's
/// pod moves to its replacement and restarts, the soak's restart gate fails, and the rollout
/// halts after one node: a Warning event, `status.rollout.policy.halted`, the condition's
/// reason. Nothing else is disrupted however long one waits; resuming soaks the wave again,
/// and the still-failing gate halts it again; pointing the class back at the old AMI begins a
/// new rollout that replaces the canary's node back, no resume needed.
#[tokio::test(start_paused = true)]
async fn a_canary_whose_pods_crash_loop_halts_the_rollout_until_resumed() {
    let mut h = cluster(Settings::default()).await;
    let yaml = policy_pool(
        "fleet",
        &[
            ("driftwood.sh/rollout-waves", "1,50%"),
            ("driftwood.sh/rollout-soak", "10m"),
        ],
    );
    let original = fleet(&mut h, &yaml, "fleet", 6).await;
    // One pod may go at a time. (With minAvailable 5 the crash-looping pod would leave its PDB
    // allowing no disruption, and moving back would be blocked, as Karpenter blocks a node whose
    // pods' PDB allows none.)
    h.apply(&pdb("fleet", 4)).await;
    let values = h.embedded.walkthrough_values("1.30").unwrap();
    let broken = values["<<AMD64PREVAMI>>"].clone();
    h.embedded.cluster.aws().set_image_fault(
        &broken,
        Some(driftwood_sim_aws::faults::NodeFault::CrashLoopPods),
    );
    h.apply(&driftwood::embedded::fill(NODECLASS, &values))
        .await;
    let clock = h.embedded.cluster.clock();
    let mut starts = Starts::default();
    h.wait_until("the rollout halted", 60 * MINUTE, |s| {
        starts.observe(s, &original, clock.now().as_second());
        pool_status(s, "fleet").1 == "Halted"
    })
    .await;
    let (policy, _, message) = pool_status(&h.snapshot(), "fleet");
    let halt = policy
        .and_then(|p| p.halted)
        .expect("status.rollout.policy.halted");
    assert_eq!((halt.gate.as_str(), halt.wave), ("Restarts", 0), "{halt:?}");
    assert!(
        halt.message
            .contains("restarted 5 times (the policy allows 3)"),
        "{}",
        halt.message
    );
    assert!(
        message.contains("rollout halted in wave 1: health gate Restarts failed"),
        "{message}"
    );
    assert!(message.contains("driftwood rollout resume"), "{message}");
    // Twenty minutes later (two soaks): still one node replaced, five pods ready.
    for _ in 0..1200 {
        idle(&mut h, std::time::Duration::from_secs(1)).await;
        starts.observe(&h.snapshot(), &original, now(&h));
    }
    assert_eq!(
        starts.at.len(),
        1,
        "{:?}\n{}",
        starts.at,
        describe(&h.snapshot())
    );
    let halts = |events: &[(String, String)]| {
        events
            .iter()
            .filter(|(reason, _)| reason == "RolloutHalted")
            .count()
    };
    assert_eq!(halts(&events_about(&h, "default", "fleet").await), 1);
    // Resume: the halt is cleared, the wave soaks again, the gate still fails: halted again.
    let api: kube::Api<NodePool> = kube::Api::all(h.embedded.cluster.client());
    let cleared = driftwood::rollout::clear_halt(&api, "fleet").await.unwrap();
    assert_eq!(cleared.map(|c| c.gate), Some("Restarts".to_string()));
    h.wait_until("halted again", 10 * MINUTE, |s| {
        starts.observe(s, &original, clock.now().as_second());
        pool_status(s, "fleet")
            .0
            .and_then(|p| p.halted)
            .is_some_and(|again| again.at != halt.at)
    })
    .await;
    assert_eq!(starts.at.len(), 1);
    assert_eq!(ready_pods(&h.snapshot(), "fleet"), 5);
    // The class pointed back at the old AMI: a new target, a new rollout; the canary's node is
    // replaced back without a resume, and the other five, never drifted, stay.
    h.apply(&driftwood::embedded::fill(
        NODECLASS,
        &h.embedded.walkthrough_values("1.29").unwrap(),
    ))
    .await;
    let on_broken = |s: &Snapshot| -> Vec<String> {
        claims_of(s, "fleet")
            .into_iter()
            .filter(|c| c.status.as_ref().and_then(|st| st.image_id.as_deref()) == Some(&broken))
            .map(name)
            .collect()
    };
    h.wait_until(
        "the canary replaced back, the rollout complete",
        30 * MINUTE,
        |s| {
            starts.observe(s, &original, clock.now().as_second());
            pool_status(s, "fleet").1 == "Complete" && on_broken(s).is_empty()
        },
    )
    .await;
    assert_eq!(starts.at.len(), 1, "{:?}", starts.at);
    let s = h.snapshot();
    assert_eq!(ready_pods(&s, "fleet"), 6, "{}", describe(&s));
    assert_eq!(pool_status(&s, "fleet").0, None);
    let events = events_about(&h, "default", "fleet").await;
    let retargeted: Vec<&String> = events
        .iter()
        .filter(|(reason, _)| reason == "RolloutRetargeted")
        .map(|(_, note)| note)
        .collect();
    assert_eq!(retargeted.len(), 1, "{events:?}");
    assert!(
        retargeted[0].ends_with(
            "the halt in wave 1 (health gate Restarts) was for the old target and no longer holds"
        ),
        "{}",
        retargeted[0]
    );
    assert_eq!(halts(&events), 2, "{events:?}");
}

/// A rate budget (kubernetes-sigs/karpenter#2909: "no more than X per window", not per moment):
/// twelve nodes at three per ten minutes, the budget allowing all at once. Every ten-minute
/// window holds at most three starts, including across a restart of the controllers in the
/// middle of the rollout (the starts are in `status.rollout.policy.recentStarts`).
#[tokio::test(start_paused = true)]
async fn a_rate_budget_spreads_the_rollout_and_holds_across_a_restart() {
    let mut h = cluster(Settings::default()).await;
    let yaml = policy_pool("fleet", &[("driftwood.sh/rollout-rate", "3 per 10m")]);
    let original = fleet(&mut h, &yaml, "fleet", 12).await;
    drift_template(&h, &yaml, "fleet").await;
    let clock = h.embedded.cluster.clock();
    let mut starts = Starts::default();
    let mut most_recorded = 0;
    let mut rate_limited = false;
    h.wait_until("six nodes started", 60 * MINUTE, |s| {
        starts.observe(s, &original, clock.now().as_second());
        starts.at.len() >= 6
    })
    .await;
    // A new leader: the controllers' memory is gone, the status is not.
    h.embedded.kill_controllers();
    h.embedded.start_controllers();
    h.wait_until("every node of fleet replaced", 3 * 60 * MINUTE, |s| {
        starts.observe(s, &original, clock.now().as_second());
        let (policy, reason, message) = pool_status(s, "fleet");
        if let Some(policy) = policy {
            most_recorded = most_recorded.max(policy.recent_starts.len());
        }
        if reason == "RateLimited" {
            assert!(
                message.contains("rate budget: 3 disruption(s) per 10m0s started"),
                "{message}"
            );
            rate_limited = true;
        }
        replaced(s, &original, "fleet", 12)
    })
    .await;
    let times = starts.times();
    assert_eq!(times.len(), 12);
    for (i, t) in times.iter().enumerate() {
        let in_window = times[i..].iter().take_while(|u| **u < t + 600).count();
        assert!(
            in_window <= 3,
            "{in_window} starts in the 10 minutes from {t}: {times:?}"
        );
    }
    assert!(
        times[11] - times[0] >= 3 * 600,
        "four windows at least: {times:?}"
    );
    assert!(rate_limited);
    assert_eq!(most_recorded, 3);
}

/// One availability zone at a time (kubernetes-sigs/karpenter#2963): six nodes spread over
/// three zones by a zone topology spread, `driftwood.sh/rollout-zone-order: auto` and a budget
/// of 100%. Every node of a zone is replaced before any node of the next is disrupted, and the
/// spread's pods keep to it (DoNotSchedule) throughout.
#[tokio::test(start_paused = true)]
async fn zone_by_zone_finishes_each_zone_before_the_next() {
    let mut h = cluster(Settings::default()).await;
    let yaml = policy_pool("fleet", &[("driftwood.sh/rollout-zone-order", "auto")]);
    h.apply(&yaml).await;
    let spread = "      topologySpreadConstraints:\n      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: fleet}}}\n";
    h.apply(&deployment("fleet", 6, "3", "fleet", spread)).await;
    h.wait_until("6 nodes of fleet", 20 * MINUTE, |s| {
        initialized_of(s, "fleet").len() == 6 && ready_pods(s, "fleet") == 6
    })
    .await;
    let zone_of = |s: &Snapshot, claim: &str| -> String {
        s.store.nodeclaims[claim]
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("topology.kubernetes.io/zone"))
            .cloned()
            .unwrap_or_default()
    };
    let s = h.snapshot();
    let original: BTreeSet<String> = claims_of(&s, "fleet").into_iter().map(name).collect();
    let zones: BTreeMap<String, String> = original
        .iter()
        .map(|c| (c.clone(), zone_of(&s, c)))
        .collect();
    let distinct: BTreeSet<&String> = zones.values().collect();
    assert_eq!(
        distinct.len(),
        3,
        "two nodes in each of three zones: {zones:?}"
    );
    drift_template(&h, &yaml, "fleet").await;
    let clock = h.embedded.cluster.clock();
    let mut starts = Starts::default();
    h.wait_until("every node of fleet replaced", 2 * 60 * MINUTE, |s| {
        starts.observe(s, &original, clock.now().as_second());
        replaced(s, &original, "fleet", 6)
    })
    .await;
    // Zones in the order they began: each began after the one before had its nodes all gone.
    let mut by_zone: BTreeMap<&str, (i64, i64, i64)> = BTreeMap::new(); // first start, last start, last gone
    for (claim, at) in &starts.at {
        let entry = by_zone
            .entry(zones[claim].as_str())
            .or_insert((i64::MAX, i64::MIN, i64::MIN));
        entry.0 = entry.0.min(*at);
        entry.1 = entry.1.max(*at);
        entry.2 = entry.2.max(starts.gone[claim]);
    }
    let mut order: Vec<(&str, (i64, i64, i64))> = by_zone.into_iter().collect();
    order.sort_by_key(|(_, (first, _, _))| *first);
    assert_eq!(order.len(), 3, "{order:?}");
    for pair in order.windows(2) {
        let (before, (_, _, before_gone)) = pair[0];
        let (after, (after_first, _, _)) = pair[1];
        assert!(
            after_first >= before_gone,
            "zone {after} began at {after_first}, before zone {before}'s last node was gone at {before_gone}: {order:?}"
        );
    }
    // Equal zones go by name.
    let names: Vec<&str> = order.iter().map(|(z, _)| *z).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    let zone_events: Vec<String> = events_about(&h, "default", "fleet")
        .await
        .into_iter()
        .filter(|(reason, _)| reason == "RolloutZoneStarted")
        .map(|(_, note)| note)
        .collect();
    assert_eq!(zone_events.len(), 3, "{zone_events:?}");
    assert!(zone_events[0].contains(names[0]), "{zone_events:?}");
}

/// A failing pool does not starve a healthy one (kubernetes-sigs/karpenter#3080, Karpenter's
/// per-NodePool backoff RFC): pool `bad` moves to an AMI whose machines never register, pool
/// `good` drifts at the same time. `good` rolls through at its budget's pace while `bad`'s
/// replacements fail; each failure doubles `bad`'s pause (2 minutes, then 4), shown in its
/// status and a RolloutBackingOff event, and no disruption of `bad` starts inside a pause.
#[tokio::test(start_paused = true)]
async fn a_failing_pool_backs_off_on_its_own_and_does_not_starve_a_healthy_one() {
    let mut h = cluster(Settings::default()).await;
    let values = h.embedded.walkthrough_values("1.29").unwrap();
    let broken_class = |values: &BTreeMap<String, String>| {
        driftwood::embedded::fill(NODECLASS, values).replace("name: default", "name: broken")
    };
    h.apply(&broken_class(&values)).await;
    let good = nodepool("good", "", "");
    let bad = nodepool("bad", "", "").replace(
        "name: default\n      requirements",
        "name: broken\n      requirements",
    );
    assert!(bad.contains("name: broken"), "{bad}");
    h.apply(&good).await;
    h.apply(&bad).await;
    h.apply(&deployment("good", 3, "3", "good", "")).await;
    h.apply(&deployment("bad", 3, "3", "bad", "")).await;
    h.wait_until("3 nodes in each pool", 20 * MINUTE, |s| {
        ready_pods(s, "good") == 3 && ready_pods(s, "bad") == 3
    })
    .await;
    let s = h.snapshot();
    let good_original: BTreeSet<String> = claims_of(&s, "good").into_iter().map(name).collect();
    let bad_original: BTreeSet<String> = claims_of(&s, "bad").into_iter().map(name).collect();
    // The broken class's next AMI never registers a node.
    let next = h.embedded.walkthrough_values("1.30").unwrap();
    h.embedded.cluster.aws().set_image_fault(
        &next["<<AMD64PREVAMI>>"],
        Some(driftwood_sim_aws::faults::NodeFault::NeverRegisters),
    );
    h.apply(&broken_class(&next)).await;
    drift_template(&h, &good, "good").await;
    let began = now(&h);
    let clock = h.embedded.cluster.clock();
    let mut good_done = None;
    let mut bad_starts: Vec<i64> = Vec::new();
    let mut bad_disrupting = false;
    let mut failures_seen = Vec::new();
    let mut backing_off = false;
    h.wait_until("good replaced and bad failed twice", 60 * MINUTE, |s| {
        let t = clock.now().as_second();
        if good_done.is_none()
            && s.store
                .nodeclaims
                .keys()
                .all(|n| !good_original.contains(n))
            && ready_pods(s, "good") == 3
        {
            good_done = Some(t);
        }
        let now_disrupting = s
            .store
            .nodeclaims
            .values()
            .any(|c| bad_original.contains(&name(c)) && disrupting(c));
        if now_disrupting && !bad_disrupting {
            bad_starts.push(t);
        }
        bad_disrupting = now_disrupting;
        let (_, reason, _) = pool_status(s, "bad");
        backing_off |= reason == "BackingOff";
        let backoff = s
            .nodepool("bad")
            .and_then(|p| p.status.as_ref())
            .and_then(|st| st.rollout.as_ref())
            .and_then(|r| r.backoff.clone());
        if let Some(b) = backoff
            && failures_seen.last() != Some(&(b.failures, b.until.clone()))
        {
            failures_seen.push((b.failures, b.until));
        }
        good_done.is_some() && failures_seen.iter().any(|(n, _)| *n >= 2) && bad_starts.len() >= 3
    })
    .await;
    let good_took = good_done.unwrap() - began;
    assert!(good_took < 15 * 60, "the healthy pool took {good_took} s");
    assert!(backing_off, "the bad pool's condition said BackingOff");
    // Each retry starts no sooner than the pause after the failure before: 2 min, then 4.
    let untils: Vec<i64> = failures_seen
        .iter()
        .map(|(_, until)| driftwood_disruption::policy::seconds(until).unwrap())
        .collect();
    assert!(
        bad_starts[1] >= untils[0],
        "{bad_starts:?} {failures_seen:?}"
    );
    assert!(
        bad_starts[2] >= untils[1],
        "{bad_starts:?} {failures_seen:?}"
    );
    assert_eq!(failures_seen[0].0, 1);
    assert_eq!(failures_seen[1].0, 2);
    let notes: Vec<String> = events_about(&h, "default", "bad")
        .await
        .into_iter()
        .filter(|(reason, _)| reason == "RolloutBackingOff")
        .map(|(_, note)| note)
        .collect();
    assert!(notes.len() >= 2, "{notes:?}");
    assert!(
        notes[1].starts_with("backing off after 2 failed replacement(s) in a row"),
        "{notes:?}"
    );
    // The healthy pool was never told to back off.
    assert!(
        events_about(&h, "default", "good")
            .await
            .iter()
            .all(|(r, _)| r != "RolloutBackingOff")
    );
}

/// A small fake Prometheus exporter of the HTTP API, on a thread of its own: every instant query
/// is answered with one sample, the value `value` holds now. Returns its URL and the queries.
fn fake_prometheus(
    value: std::sync::Arc<std::sync::Mutex<f64>>,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let queries = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&queries);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut line = String::new();
            if std::io::BufReader::new(&stream)
                .read_line(&mut line)
                .is_err()
            {
                continue;
            }
            seen.lock().unwrap().push(line.trim().to_string());
            let v = *value.lock().unwrap();
            let body = format!(
                r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{"app":"fleet"}},"value":[0,"{v}"]}}]}}}}"#
            );
            let _ = stream.write_all(format!("HTTP/1.0 200 OK\r\n\r\n{body}").as_bytes());
        }
    });
    (url, queries)
}

/// The query gate (`driftwood.sh/rollout-gate-query`, driftwood run with `--prometheus-url`)
/// against a fake exporter: while its answer stays at or under the bound the canary soaks and
/// the next wave starts; when it rises above during the next soak, the rollout halts on gate
/// Query, naming the query and the value.
#[tokio::test(start_paused = true)]
async fn a_query_gate_passes_a_healthy_soak_and_halts_when_its_answer_rises() {
    let value = std::sync::Arc::new(std::sync::Mutex::new(0.0));
    let (url, queries) = fake_prometheus(std::sync::Arc::clone(&value));
    let mut h = cluster(Settings {
        prometheus_url: Some(url),
        ..Settings::default()
    })
    .await;
    let yaml = policy_pool(
        "fleet",
        &[
            ("driftwood.sh/rollout-waves", "1,2"),
            ("driftwood.sh/rollout-soak", "5m"),
            (
                "driftwood.sh/rollout-gate-query",
                "sum(rate(http_errors_total[5m]))",
            ),
            ("driftwood.sh/rollout-gate-max", "0.1"),
        ],
    );
    let original = fleet(&mut h, &yaml, "fleet", 4).await;
    drift_template(&h, &yaml, "fleet").await;
    let clock = h.embedded.cluster.clock();
    let mut starts = Starts::default();
    h.wait_until("wave 2 started", 40 * MINUTE, |s| {
        starts.observe(s, &original, clock.now().as_second());
        starts.at.len() >= 2
    })
    .await;
    // The errors rise while wave 2 is replaced: its soak fails on the gate.
    *value.lock().unwrap() = 0.5;
    h.wait_until("halted on the query gate", 30 * MINUTE, |s| {
        starts.observe(s, &original, clock.now().as_second());
        pool_status(s, "fleet").1 == "Halted"
    })
    .await;
    let halt = pool_status(&h.snapshot(), "fleet")
        .0
        .and_then(|p| p.halted)
        .unwrap();
    assert_eq!((halt.gate.as_str(), halt.wave), ("Query", 1), "{halt:?}");
    assert_eq!(
        halt.message,
        "query \"sum(rate(http_errors_total[5m]))\" returned 0.5 (the policy allows at most 0.1)"
    );
    assert_eq!(
        starts.at.len(),
        2,
        "the last two nodes are left: {:?}",
        starts.at
    );
    let asked = queries.lock().unwrap().clone();
    assert!(
        asked.iter().all(|q| q
            == "GET /api/v1/query?query=sum%28rate%28http_errors_total%5B5m%5D%29%29 HTTP/1.0"),
        "{asked:?}"
    );
}
