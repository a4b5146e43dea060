//! `driftwood preview` against a live (embedded) cluster: a 30-node fleet under a 20% budget
//! with a PDB-protected workload. The preview names every node that will drift and why and
//! predicts the waves and an ETA; it sends the live cluster nothing but reads; applying the
//! same change for real replaces the same nodes in a time within 15% of the ETA.

use super::harness::Harness;
use super::support::{
    MINUTE, NODECLASS, cluster, deployment, idle, initialized_of, nodepool, now, pdb, ready_pods,
    with_annotations,
};
use driftwood::preview::{PreviewOptions, preview};
use driftwood_controller::Settings;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An in-process client to the live cluster that records the method and path of every
/// request it sends.
fn recording_client(h: &Harness, seen: Arc<Mutex<Vec<String>>>) -> kube::Client {
    let service = tower::ServiceBuilder::new()
        .map_request(move |request: http::Request<kube::client::Body>| {
            seen.lock()
                .unwrap()
                .push(format!("{} {}", request.method(), request.uri().path()));
            request
        })
        .service(h.embedded.cluster.api_server().service());
    kube::Client::new(service, "default")
}

/// The `default` class of [`cluster`] on the 1.30 AMI.
fn new_class(h: &Harness) -> String {
    let mut values = h.embedded.walkthrough_values("1.29").unwrap();
    let newer = h
        .embedded
        .cluster
        .aws()
        .eks_ami("al2", "latest", "1.30", "amd64");
    values.insert("<<AMD64PREVAMI>>".to_string(), newer.unwrap());
    driftwood::embedded::fill(NODECLASS, &values)
}

#[tokio::test(start_paused = true)]
async fn a_preview_names_the_drifting_nodes_and_predicts_the_rollout_that_follows() {
    let mut h = cluster(Settings::default()).await;
    h.apply(&nodepool(
        "fleet",
        "  disruption:\n    budgets:\n    - nodes: \"20%\"",
        "",
    ))
    .await;
    h.apply(&deployment("fleet", 30, "3", "fleet", "")).await;
    // A small workload beside it, under a PDB that lets one pod go at a time.
    h.apply(&deployment("web", 6, "100m", "fleet", "")).await;
    h.apply(&pdb("web", 5)).await;
    h.wait_until("30 nodes and every pod ready", 30 * MINUTE, |s| {
        initialized_of(s, "fleet").len() == 30
            && ready_pods(s, "fleet") == 30
            && ready_pods(s, "web") == 6
    })
    .await;
    // The fleet at rest a while (its NodeClaims' launch-to-ready times are what the preview
    // measures).
    idle(&mut h, MINUTE).await;
    let change = new_class(&h);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let live = recording_client(&h, Arc::clone(&seen));
    let at = h.embedded.cluster.clock().now();
    let predicted = preview(
        &live,
        &change,
        &["new-class.yaml".to_string()],
        &PreviewOptions {
            at: Some(at),
            horizon: Duration::from_secs(4 * 3600),
            ..PreviewOptions::default()
        },
    )
    .await
    .expect("the preview runs");
    let requests = seen.lock().unwrap().clone();
    assert!(!requests.is_empty());
    assert!(
        requests.iter().all(|r| r.starts_with("GET ")),
        "the preview sent the live cluster more than reads: {requests:?}"
    );
    let text = predicted.text();
    assert!(predicted.complete, "{text}");
    assert!(predicted.already_drifted.is_empty(), "{text}");
    assert_eq!(predicted.nodes.len(), 30, "{text}");
    assert_eq!(predicted.drifted, 30, "{text}");
    for node in &predicted.nodes {
        assert_eq!(node.reason.as_deref(), Some("AMIDrift"), "{text}");
        assert!(node.wave.is_some(), "{text}");
    }
    // 20% of 30: at most 6 nodes start in a wave, so at least five waves.
    assert!(predicted.waves.len() >= 5, "{text}");
    assert!(
        predicted.waves.iter().all(|w| w.nodeclaims.len() <= 6),
        "{text}"
    );
    assert_eq!(predicted.replacements.values().sum::<usize>(), 30, "{text}");
    let web = predicted
        .availability
        .iter()
        .find(|a| a.workload == "default/Deployment/web")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(web.fewest_ready >= 5, "{text}");
    let eta = predicted.eta_seconds.expect("an ETA");
    let (low, high) = predicted.eta_range_seconds.expect("a range");
    assert!(low <= eta && eta <= high, "{text}");
    assert!(
        predicted.assumptions[0].contains("median of the 20 newest"),
        "{text}"
    );
    // The HTML page (`preview --report`): both apps in the legend, a bar per wave, a row per node.
    let page = predicted.html();
    for app in ["fleet", "web"] {
        assert!(
            page.contains(&format!("<tr class=\"workload\" data-workload=\"{app}\">")),
            "{app} is not in the preview page's legend"
        );
    }
    assert_eq!(
        page.matches("<rect class=\"wave\"").count(),
        predicted.waves.len()
    );
    for node in &predicted.nodes {
        assert!(page.contains(&format!("<tr><td>{}</td>", node.nodeclaim)));
    }

    // Now for real.
    let original: BTreeSet<String> = h.snapshot().store.nodeclaims.keys().cloned().collect();
    let predicted_drifted: BTreeSet<String> = predicted
        .nodes
        .iter()
        .filter(|n| n.drifted)
        .map(|n| n.nodeclaim.clone())
        .collect();
    assert_eq!(predicted_drifted, original);
    let started = now(&h);
    h.apply(&change).await;
    let mut replaced = BTreeSet::new();
    let mut gone_at = Vec::new();
    let mut second = 0;
    h.wait_until("every original node replaced", 4 * 60 * MINUTE, |s| {
        second += 1;
        for claim in original
            .iter()
            .filter(|c| !s.store.nodeclaims.contains_key(*c))
        {
            if replaced.insert(claim.clone()) {
                gone_at.push((second, claim.clone()));
            }
        }
        replaced.len() == original.len()
    })
    .await;
    eprintln!("{text}\npredicted {eta} s; gone after the change (s): {gone_at:?}");
    let actual = now(&h) - started;
    assert_eq!(replaced, predicted_drifted);
    let off = (actual - eta).abs() as f64 / actual as f64;
    assert!(
        off <= 0.15,
        "predicted {eta} s, took {actual} s ({:.0}% off)\n{text}",
        off * 100.0
    );
}

#[tokio::test(start_paused = true)]
async fn a_budget_window_in_the_future_is_named_as_the_wait_and_counted_in_the_eta() {
    let mut h = cluster(Settings::default()).await;
    // No disruption from 00:00 for an hour: a change at about 00:02 waits until 01:00.
    h.apply(&nodepool(
        "nightly",
        "  disruption:\n    budgets:\n    - nodes: \"0\"\n      schedule: \"0 0 * * *\"\n      duration: 1h",
        "",
    ))
    .await;
    h.apply(&deployment("nightly", 3, "3", "nightly", "")).await;
    h.wait_until("3 nodes and their pods ready", 30 * MINUTE, |s| {
        initialized_of(s, "nightly").len() == 3 && ready_pods(s, "nightly") == 3
    })
    .await;
    let change = new_class(&h);
    let at = h.embedded.cluster.clock().now();
    let predicted = preview(
        &h.embedded.cluster.client(),
        &change,
        &["new-class.yaml".to_string()],
        &PreviewOptions {
            at: Some(at),
            horizon: Duration::from_secs(24 * 3600),
            ..PreviewOptions::default()
        },
    )
    .await
    .expect("the preview runs");
    let text = predicted.text();
    eprintln!("{text}");
    assert_eq!(predicted.drifted, 3, "{text}");
    assert!(predicted.complete, "{text}");
    let window_opens = at.as_second().div_euclid(86_400) * 86_400 + 3600;
    let wait = window_opens - at.as_second();
    let eta = predicted.eta_seconds.expect("an ETA");
    assert!(
        eta >= wait && eta < wait + 600,
        "ETA {eta} s, window opens in {wait} s\n{text}"
    );
    for node in &predicted.nodes {
        assert!(
            node.starts_after_seconds.is_some_and(|s| s >= wait),
            "{text}"
        );
        assert!(
            node.blocked.iter().any(|b| b.contains("budget")),
            "the wait is not put down to the budget: {:?}\n{text}",
            node.blocked
        );
    }
}

/// A preview of a pool with a rollout policy (waves `1,50%`, a 10-minute soak, budget 100%):
/// the prediction follows the policy — the canary alone in the first wave, the second wave no
/// sooner than the soak after it, the rest after another — and the held nodes say why.
#[tokio::test(start_paused = true)]
async fn a_preview_follows_the_pools_rollout_policy() {
    let mut h = cluster(Settings::default()).await;
    let pool = with_annotations(
        &nodepool(
            "canary",
            "  disruption:\n    budgets:\n    - nodes: \"100%\"\n",
            "",
        ),
        "canary",
        &[
            ("driftwood.sh/rollout-waves", "1,50%"),
            ("driftwood.sh/rollout-soak", "10m"),
        ],
    );
    h.apply(&pool).await;
    h.apply(&deployment("canary", 4, "3", "canary", "")).await;
    h.wait_until("4 nodes and their pods ready", 30 * MINUTE, |s| {
        initialized_of(s, "canary").len() == 4 && ready_pods(s, "canary") == 4
    })
    .await;
    let change = new_class(&h);
    let predicted = preview(
        &h.embedded.cluster.client(),
        &change,
        &["new-class.yaml".to_string()],
        &PreviewOptions {
            at: Some(h.embedded.cluster.clock().now()),
            horizon: Duration::from_secs(6 * 3600),
            ..PreviewOptions::default()
        },
    )
    .await
    .expect("the preview runs");
    let text = predicted.text();
    assert!(predicted.complete, "{text}");
    let sizes: Vec<usize> = predicted.waves.iter().map(|w| w.nodeclaims.len()).collect();
    assert_eq!(
        sizes,
        vec![1, 1, 2],
        "the canary, up to 50%, the rest\n{text}"
    );
    let starts: Vec<i64> = predicted
        .waves
        .iter()
        .map(|w| w.starts_after_seconds)
        .collect();
    assert!(starts[1] - starts[0] >= 600, "{starts:?}\n{text}");
    assert!(starts[2] - starts[1] >= 600, "{starts:?}\n{text}");
    assert!(
        predicted
            .nodes
            .iter()
            .filter(|n| n.wave.is_some_and(|w| w > 1))
            .all(|n| n
                .blocked
                .iter()
                .any(|b| b.contains("soaks until") || b.contains("is being replaced"))),
        "the later waves' nodes say they wait for the policy\n{text}"
    );
}
