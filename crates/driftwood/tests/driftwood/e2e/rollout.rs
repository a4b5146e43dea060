//! Drift rollouts under disruption budgets: a 30-node pool rolls 3 at a time (the default 10%)
//! in about a tenth of the serial time, a `nodes: "0"` schedule window holds the rollout until
//! it closes, and a budget for Drifted does not hold other reasons.

use super::harness::{Harness, describe};
use super::support::{
    MINUTE, claims_of, cluster, deployment, disrupting, drift, drift_template, edit, events_about,
    explain, idle, initialized_of, name, nodepool, now, ready_pods,
};
use driftwood_api::NodePool;
use driftwood_api::condition::Conditions;
use driftwood_api::wellknown::{CONDITION_INITIALIZED, LABEL_NODEPOOL};
use driftwood_controller::Settings;
use driftwood_disruption::budget::allowed_disruptions;
use std::collections::BTreeSet;
use std::time::Duration;

/// Drifts every node of `pool` (a template label) and waits until none of the original
/// NodeClaims is left and `app` has `replicas` ready pods on new nodes. Returns the virtual
/// seconds it took and the most nodes seen disrupting at once.
async fn roll(
    h: &mut Harness,
    pool_yaml: &str,
    pool: &str,
    app: &str,
    replicas: usize,
) -> (i64, usize) {
    let original: BTreeSet<String> = claims_of(&h.snapshot(), pool)
        .into_iter()
        .map(name)
        .collect();
    assert_eq!(original.len(), replicas);
    let started = now(h);
    drift_template(h, pool_yaml, pool).await;
    let mut most_disrupting = 0;
    let mut over_three = Vec::new();
    h.wait_until(
        &format!("every node of {pool} replaced"),
        4 * 60 * MINUTE,
        |s| {
            let initialized = initialized_of(s, pool);
            let now_disrupting = s
                .store
                .nodeclaims
                .values()
                .filter(|c| original.contains(&name(c)))
                .filter(|c| disrupting(c) || c.metadata.deletion_timestamp.is_some())
                .count();
            // The default budget is 10% (rounded up) of the pool's initialized nodes, those
            // being deleted and initialized replacements included.
            let counted = s
                .store
                .nodeclaims
                .values()
                .filter(|c| {
                    c.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(LABEL_NODEPOOL))
                        .is_some_and(|p| p == pool)
                })
                .filter(|c| c.is_true(CONDITION_INITIALIZED))
                .count();
            let limit = counted.div_ceil(10);
            assert!(
                now_disrupting <= limit,
                "{now_disrupting} disrupting > 10% of {counted}\n{}",
                describe(s)
            );
            if now_disrupting > 3 {
                over_three.push((now_disrupting, counted));
            }
            most_disrupting = most_disrupting.max(now_disrupting);
            s.store.nodeclaims.keys().all(|n| !original.contains(n))
                && initialized.len() == replicas
                && ready_pods(s, app) == replicas
        },
    )
    .await;
    if !over_three.is_empty() {
        eprintln!(
            "{pool}: steps with more than 3 disrupting (disrupting, initialized nodes counted): {:?}",
            &over_three[..over_three.len().min(5)]
        );
    }
    (now(h) - started, most_disrupting)
}

#[tokio::test(start_paused = true)]
async fn thirty_drifted_nodes_roll_three_at_a_time_in_about_ten_cycles() {
    let mut h = cluster(Settings::default()).await;
    // One node, to time a single replacement in this very cluster.
    let solo = nodepool("solo", "", "");
    h.apply(&solo).await;
    h.apply(&deployment("solo", 1, "3", "solo", "")).await;
    // Thirty nodes: one 3-cpu pod per 4-cpu node. Default budget: 10% → 3.
    let fleet = nodepool("fleet", "", "");
    h.apply(&fleet).await;
    h.apply(&deployment("fleet", 30, "3", "fleet", "")).await;
    h.wait_until("31 initialized nodes", 20 * MINUTE, |s| {
        initialized_of(s, "fleet").len() == 30
            && initialized_of(s, "solo").len() == 1
            && ready_pods(s, "fleet") == 30
            && ready_pods(s, "solo") == 1
    })
    .await;

    let (single, _) = roll(&mut h, &solo, "solo", "solo", 1).await;
    let (fleet_time, most) = roll(&mut h, &fleet, "fleet", "fleet", 30).await;
    eprintln!(
        "single replacement {single} s; 30 nodes in {fleet_time} s ({:.1} single-replacement cycles); at most {most} disrupting",
        fleet_time as f64 / single as f64
    );
    // 10% of the 30 nodes that remain: initialized replacements do not inflate the budget, so
    // exactly 3 at a time — the budget filled, never exceeded (the harness checked every step).
    assert_eq!(
        most, 3,
        "at most {most} nodes disrupting at once (10% of 30)"
    );
    assert!(
        fleet_time <= 13 * single,
        "30 nodes in {fleet_time} s: about ⌈30/3⌉ = 10 cycles of {single} s, not 30"
    );
    assert!(
        fleet_time >= 5 * single,
        "30 nodes in {fleet_time} s is implausibly fast for 3 at a time ({single} s each)"
    );
    let s = h.snapshot();
    assert_eq!(claims_of(&s, "fleet").len(), 30, "{}", describe(&s));
}

/// A pool whose drift budget is `nodes: "0"` from 00:00 for 2 h every day (UTC), 10% otherwise.
fn windowed_pool() -> String {
    nodepool(
        "general",
        "  disruption:\n    budgets:\n    - nodes: \"10%\"\n    - nodes: \"0\"\n      schedule: \"0 0 * * *\"\n      duration: 2h\n",
        "",
    )
}

#[tokio::test(start_paused = true)]
async fn a_zero_budget_window_holds_drift_until_it_closes() {
    let mut h = cluster(Settings::default()).await;
    // The simulation starts at 2026-07-20T00:00:00Z (DEFAULT_START_TIME): inside the window.
    let start = now(&h);
    assert!(start % 86_400 < 60, "the cluster starts at midnight UTC");
    let pool = windowed_pool();
    h.apply(&pool).await;
    h.apply(&deployment("app", 2, "3", "general", "")).await;
    h.wait_until("two nodes", 10 * MINUTE, |s| {
        initialized_of(s, "general").len() == 2 && ready_pods(s, "app") == 2
    })
    .await;
    let original: BTreeSet<String> = claims_of(&h.snapshot(), "general")
        .into_iter()
        .map(name)
        .collect();
    edit(
        &h,
        &pool,
        "        pool: general\n",
        "        pool: general\n        v: \"2\"\n",
    )
    .await;
    h.wait_until("both drifted", 2 * MINUTE, |s| {
        claims_of(s, "general").iter().all(|c| drift(c).is_some())
    })
    .await;
    // explain says what moved and what blocks it.
    let first = original.iter().next().unwrap().clone();
    let text = explain(&h, &first).await;
    assert!(text.contains("spec.template.metadata.labels"), "{text}");
    assert!(text.contains("Drifted: yes"), "{text}");
    assert!(
        text.contains("no allowed disruptions for reason Drifted"),
        "{text}"
    );
    assert!(
        text.contains("budget[1]"),
        "the window budget binds: {text}"
    );
    assert!(
        text.contains("2026-07-20T02:00:00Z"),
        "it names when the window closes: {text}"
    );

    // Nothing moves until 02:00.
    let midnight = start - start % 86_400;
    let window_end = midnight + 2 * 3600;
    let mut disrupted_in_window = Vec::new();
    while now(&h) < window_end - 1 {
        idle(&mut h, Duration::from_secs(1)).await;
        let s = h.snapshot();
        for claim in s.store.nodeclaims.values() {
            if original.contains(&name(claim))
                && (disrupting(claim) || claim.metadata.deletion_timestamp.is_some())
            {
                disrupted_in_window.push((now(&h) - midnight, name(claim)));
            }
        }
    }
    assert!(
        disrupted_in_window.is_empty(),
        "disrupted inside the window: {:?}",
        &disrupted_in_window[..disrupted_in_window.len().min(3)]
    );
    assert_eq!(h.snapshot().store.nodeclaims.len(), 2);
    // Then it proceeds.
    h.wait_until("both replaced after the window", 30 * MINUTE, |s| {
        s.store.nodeclaims.keys().all(|n| !original.contains(n))
            && initialized_of(s, "general").len() == 2
            && ready_pods(s, "app") == 2
    })
    .await;
    let done = now(&h) - midnight;
    assert!(
        (2 * 3600..2 * 3600 + 20 * 60).contains(&done),
        "replaced at {done} s after midnight"
    );
}

#[tokio::test(start_paused = true)]
async fn a_drifted_only_budget_does_not_hold_expiration() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool(
        "general",
        "  disruption:\n    budgets:\n    - nodes: \"0\"\n      reasons: [Drifted]\n",
        "      expireAfter: 30m\n",
    );
    h.apply(&pool).await;
    h.apply(&deployment("app", 1, "3", "general", "")).await;
    h.wait_until("a node", 10 * MINUTE, |s| ready_pods(s, "app") == 1)
        .await;
    // The budget as the planner reads it: 0 for Drifted, no limit for other reasons.
    let s = h.snapshot();
    let np: &NodePool = s.nodepool("general").unwrap();
    let t = now(&h);
    assert_eq!(allowed_disruptions(np, "Drifted", 1, 0, t).allowed, 0);
    for reason in ["Underutilized", "Empty"] {
        let other = allowed_disruptions(np, reason, 1, 0, t);
        assert_eq!(other.limit, None, "{reason}: {other}");
        assert_eq!(other.allowed, 1, "{reason}: {other}");
    }
    // End to end: expiration (which driftwood, like Karpenter v1, does not gate on budgets)
    // still replaces the node after 30 minutes.
    let original = name(claims_of(&s, "general")[0]);
    h.wait_until("the expired node replaced", 45 * MINUTE, |s| {
        !s.store.nodeclaims.contains_key(&original)
            && ready_pods(s, "app") == 1
            && initialized_of(s, "general").len() == 1
    })
    .await;
    let s = h.snapshot();
    let replacement = claims_of(&s, "general")[0];
    assert!(replacement.is_true(CONDITION_INITIALIZED));
    assert_eq!(drift(replacement), None);
}

/// Issue 27: pausing a NodePool's rollout (`driftwood.sh/rollout-paused`, as `driftwood
/// rollout pause` sets it) starts no new disruption after the pass under way, lets the command
/// in flight finish, keeps marking drift, and the status says so; resuming finishes the
/// rollout, and the status counts every node up to date against the current generation.
#[tokio::test(start_paused = true)]
async fn a_paused_rollout_starts_nothing_new_finishes_what_runs_and_resumes() {
    use driftwood::rollout::{progress, set_paused};
    let mut h = cluster(Settings::default()).await;
    // Four one-pod nodes; the default budget (10%, rounded up) disrupts one at a time.
    let pool = nodepool("general", "", "");
    h.apply(&pool).await;
    h.apply(&deployment("app", 4, "3", "general", "")).await;
    h.wait_until("four nodes", 20 * MINUTE, |s| {
        initialized_of(s, "general").len() == 4 && ready_pods(s, "app") == 4
    })
    .await;
    h.wait_until("the rollout complete before any change", MINUTE, |s| {
        s.nodepool("general").is_some_and(|p| {
            progress(p).is_ok_and(|r| r.complete)
                && p.status
                    .as_ref()
                    .and_then(|st| st.rollout.as_ref())
                    .map(|r| r.up_to_date)
                    == Some(4)
        })
    })
    .await;
    let original: BTreeSet<String> = claims_of(&h.snapshot(), "general")
        .into_iter()
        .map(name)
        .collect();
    drift_template(&h, &pool, "general").await;
    h.wait_until("the first command", 5 * MINUTE, |s| {
        claims_of(s, "general").iter().any(|c| disrupting(c))
    })
    .await;
    let first: Vec<String> = claims_of(&h.snapshot(), "general")
        .into_iter()
        .filter(|c| disrupting(c))
        .map(name)
        .collect();
    assert_eq!(first.len(), 1, "{first:?}");
    let pools: kube::Api<NodePool> = kube::Api::all(h.embedded.cluster.client());
    set_paused(&pools, "general", true).await.unwrap();
    // One pass may have been under way when the annotation landed; after it, nothing new.
    idle(&mut h, Duration::from_secs(2)).await;
    let started_by_then: BTreeSet<String> = h
        .snapshot()
        .store
        .nodeclaims
        .values()
        .filter(|c| {
            original.contains(&name(c))
                && (disrupting(c) || c.metadata.deletion_timestamp.is_some())
        })
        .map(|c| name(c))
        .collect();
    for _ in 0..(10 * 60) {
        idle(&mut h, Duration::from_secs(1)).await;
        let s = h.snapshot();
        let started_now: Vec<String> = s
            .store
            .nodeclaims
            .values()
            .filter(|c| original.contains(&name(c)) && !started_by_then.contains(&name(c)))
            .filter(|c| disrupting(c) || c.metadata.deletion_timestamp.is_some())
            .map(|c| name(c))
            .collect();
        assert!(
            started_now.is_empty(),
            "started while paused: {started_now:?}\n{}",
            describe(&s)
        );
    }
    let s = h.snapshot();
    let left: BTreeSet<String> = claims_of(&s, "general")
        .into_iter()
        .map(name)
        .filter(|n| original.contains(n))
        .collect();
    assert_eq!(
        left.len(),
        4 - started_by_then.len(),
        "the commands in flight finished: {left:?}"
    );
    assert!(
        left.iter().all(|n| drift(&s.store.nodeclaims[n]).is_some()),
        "drift is still marked"
    );
    let paused = s.nodepool("general").unwrap();
    let rollout = paused
        .status
        .as_ref()
        .and_then(|st| st.rollout.clone())
        .unwrap();
    assert!(rollout.paused);
    assert_eq!(
        (
            rollout.up_to_date,
            rollout.drifted,
            rollout.disrupting,
            rollout.blocked
        ),
        (
            4 - left.len() as i64,
            left.len() as i64,
            0,
            left.len() as i64
        )
    );
    assert_eq!(rollout.observed_generation, paused.metadata.generation);
    let shown = progress(paused).unwrap();
    assert!(!shown.complete);
    assert!(
        shown.line.contains("(Paused)")
            && shown
                .line
                .contains("paused (annotation \"driftwood.sh/rollout-paused\")"),
        "{}",
        shown.line
    );
    // Every held node says why in its DisruptionBlocked event.
    let held = left.iter().next().unwrap();
    assert!(
        events_about(&h, "default", held)
            .await
            .iter()
            .any(|(reason, note)| reason == "DisruptionBlocked"
                && note.contains("the rollout of nodepool \"general\" is paused")),
        "{held}"
    );

    set_paused(&pools, "general", false).await.unwrap();
    h.wait_until("every original replaced", 30 * MINUTE, |s| {
        s.store.nodeclaims.keys().all(|n| !original.contains(n))
            && initialized_of(s, "general").len() == 4
            && ready_pods(s, "app") == 4
    })
    .await;
    h.wait_until("the status complete", MINUTE, |s| {
        s.nodepool("general")
            .is_some_and(|p| progress(p).is_ok_and(|r| r.complete))
    })
    .await;
    let done = h
        .snapshot()
        .nodepool("general")
        .unwrap()
        .status
        .clone()
        .unwrap();
    let rollout = done.rollout.unwrap();
    assert_eq!(
        (
            rollout.up_to_date,
            rollout.drifted,
            rollout.disrupting,
            rollout.blocked,
            rollout.paused
        ),
        (4, 0, 0, 0, false)
    );
    // The node class controller's conditions are still there beside the rollout's.
    for condition in ["Ready", "NodeClassReady", "RolloutComplete"] {
        assert!(
            done.conditions.iter().any(|c| c.type_ == condition),
            "{condition}: {:?}",
            done.conditions
        );
    }
}
