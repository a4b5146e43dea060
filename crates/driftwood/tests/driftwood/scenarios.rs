//! Every example scenario (examples/scenarios/) runs in-process through the demo library on
//! virtual time and passes; scenarios whose expectations fail say which step failed.

use driftwood::demo::bundle::{self, Files, SCENARIOS};
use driftwood::demo::track::EventKind;
use driftwood::demo::{Outcome, RunConfig, parse_scenario, run};
use std::collections::BTreeMap;

/// Runs scenario `text` with files from `files`; returns the outcome and what it printed.
async fn run_text(text: &str, files: &Files) -> (Outcome, String) {
    let scenario = parse_scenario(text).unwrap();
    let mut out = Vec::new();
    let outcome = run(&scenario, files, &RunConfig::default(), &mut out)
        .await
        .unwrap();
    (outcome, String::from_utf8_lossy(&out).into_owned())
}

async fn passes(name: &str) -> (Outcome, String) {
    let (outcome, printed) = run_text(bundle::bundled(name).unwrap(), &Files::Bundled).await;
    assert!(
        outcome.failure.is_none(),
        "{name}: {:?}\n{printed}\n{}",
        outcome.failure,
        outcome.summary.text()
    );
    (outcome, printed)
}

fn kinds(outcome: &Outcome) -> Vec<EventKind> {
    outcome.summary.timeline.iter().map(|e| e.what).collect()
}

#[test]
fn every_scenario_file_in_examples_is_bundled() {
    let dir = super::repo_root().join("examples/scenarios");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut bundled: Vec<String> = SCENARIOS.iter().map(|(n, _)| n.to_string()).collect();
    bundled.sort();
    assert_eq!(on_disk, bundled);
}

#[test]
fn bundled_walkthrough_manifests_are_the_fixtures_verbatim() {
    for form in [
        "update-nodes-with-drift",
        "update-nodes-with-drift-name-terms",
    ] {
        for file in ["latest-current-ami.yaml", "workload.yaml"] {
            let path = format!("../{form}/{file}");
            let fixture = super::blueprints().join(form).join(file);
            let Ok(expected) = std::fs::read_to_string(&fixture) else {
                continue; // fixtures not laid out beside this checkout
            };
            assert_eq!(Files::Bundled.read(&path).unwrap(), expected, "{path}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn walkthrough_replaces_the_node_keeping_two_of_three_pods() {
    let (outcome, printed) = passes("update-nodes-with-drift").await;
    let s = &outcome.summary;
    assert_eq!(s.min_ready_pods.get("latest-current-ami"), Some(&2));
    assert_eq!(s.nodes_replaced, 1);
    let kinds = kinds(&outcome);
    for kind in [
        EventKind::ChangeApplied,
        EventKind::DriftDetected,
        EventKind::DisruptionStarted,
        EventKind::ReplacementLaunched,
        EventKind::ReplacementInitialized,
        EventKind::Tainted,
        EventKind::Drained,
        EventKind::Terminated,
    ] {
        assert!(kinds.contains(&kind), "{kind:?} missing: {kinds:?}");
    }
    // Replacement initialized before the old node was terminated.
    let at = |k: EventKind| {
        s.timeline
            .iter()
            .find(|e| e.what == k)
            .unwrap()
            .offset_seconds
    };
    assert!(at(EventKind::ReplacementInitialized) <= at(EventKind::Terminated));
    assert!(s.rollout_seconds.unwrap() > 0);
    // The tables: before on v1.29, after on v1.30, as kubectl lays them out.
    assert!(
        printed
            .contains("NAME                                      STATUS   ROLES    AGE   VERSION"),
        "{printed}"
    );
    let nodes: Vec<&str> = printed.lines().filter(|l| l.starts_with("ip-")).collect();
    assert_eq!(nodes.len(), 2, "{printed}");
    assert!(
        nodes[0].contains("Ready    <none>") && nodes[0].contains(" v1.29."),
        "{}",
        nodes[0]
    );
    assert!(nodes[1].contains(" v1.30."), "{}", nodes[1]);
    assert!(
        printed.contains("NAME                               READY   STATUS    RESTARTS   AGE"),
        "{printed}"
    );
}

/// A fault-free run judges the chaos campaign's per-second safety invariants too: with the
/// controllers made to skip the wait for replacements (a planted bug), the walkthrough fails
/// of replacement-first, named as such, whatever its own steps say.
#[tokio::test(start_paused = true)]
async fn a_fault_free_run_fails_when_a_safety_invariant_breaks() {
    let scenario = parse_scenario(bundle::bundled("update-nodes-with-drift").unwrap()).unwrap();
    let config = RunConfig {
        unsafe_skip_replacement_wait: true,
        ..RunConfig::default()
    };
    let mut out = Vec::new();
    let outcome = run(&scenario, &Files::Bundled, &config, &mut out)
        .await
        .unwrap();
    let failure = outcome.failure.clone().expect("the planted bug is caught");
    assert_eq!(failure.name, "safety, checked every second");
    assert_eq!(failure.index, scenario.steps.len() + 1);
    assert!(
        failure.message.starts_with("replacement-first at "),
        "{failure}"
    );
}

#[tokio::test(start_paused = true)]
async fn name_terms_walkthrough_drifts_on_the_ami() {
    let (outcome, _) = passes("update-nodes-with-drift-name-terms").await;
    assert!(
        outcome
            .summary
            .drift_reasons
            .contains(&"AMIDrift".to_string())
    );
    assert_eq!(outcome.summary.nodes_replaced, 1);
}

/// The demo's canary scenario: the AMI that crash-loops the workload is stopped after one node.
#[tokio::test(start_paused = true)]
async fn canary_halt_stops_the_rollout_after_the_canary() {
    let (outcome, printed) = passes("canary-halt").await;
    let s = &outcome.summary;
    assert_eq!(s.nodes_replaced, 1);
    assert_eq!(s.min_ready_pods.get("web"), Some(&5));
    // kubectl's view: the canary's pod restarting on the one new node.
    assert!(
        printed
            .lines()
            .any(|l| l.starts_with("web-") && l.contains("0/1     Running   5")),
        "{printed}"
    );
}

#[tokio::test(start_paused = true)]
async fn budget_window_holds_the_rollout_until_it_ends() {
    let (outcome, _) = passes("budget-window").await;
    let s = &outcome.summary;
    let first = s
        .timeline
        .iter()
        .find(|e| e.what == EventKind::DisruptionStarted)
        .unwrap();
    assert!(first.at.as_str() >= "2026-07-20T11:00:00Z", "{}", first.at);
    assert_eq!(s.nodes_replaced, 3);
}

#[tokio::test(start_paused = true)]
async fn fifty_node_fleet_fills_but_never_exceeds_the_20_percent_budget() {
    let (outcome, _) = passes("fleet-50-nodes").await;
    let s = &outcome.summary;
    assert_eq!(s.nodes_replaced, 50);
    assert_eq!(s.max_disrupting, 10);
    // One pass of the disruption loop starts the whole budget, not one node at a time.
    let widest_pass = s
        .timeline
        .iter()
        .filter(|e| e.what == EventKind::DisruptionStarted)
        .fold(BTreeMap::<&str, usize>::new(), |mut m, e| {
            *m.entry(e.at.as_str()).or_default() += 1;
            m
        })
        .into_values()
        .max();
    assert_eq!(widest_pass, Some(10));
    // Five waves of ten; the next wave starts on the event that frees the budget, not at the
    // next poll: the rollout takes at most 10% longer than five back-to-back waves.
    let ratio = makespan_ratio(s, 5);
    assert!(ratio <= 1.10, "makespan {ratio:.3}× the budget bound");
}

/// The rollout time over the budget bound: `waves` × the first wave's duration (from its
/// disruption start to its old nodes terminated: launch to initialized, drain, terminate).
fn makespan_ratio(s: &driftwood::demo::report::Summary, waves: i64) -> f64 {
    let first = |kind: EventKind| {
        s.timeline
            .iter()
            .find(|e| e.what == kind)
            .map(|e| e.offset_seconds)
            .unwrap()
    };
    let wave = first(EventKind::Terminated) - first(EventKind::DisruptionStarted);
    let rollout = s.rollout_seconds.unwrap();
    assert!(wave > 0, "first wave took {wave}s");
    rollout as f64 / (waves * wave) as f64
}

/// The 1,000-node fleet at the default 10% budget (a long run, release build):
/// `cargo test --release -p driftwood --no-default-features --features embedded --test driftwood fleet_1000 -- --ignored`
#[tokio::test(start_paused = true)]
#[ignore = "long run: about 100 s in a release build; see BENCHMARKS.md"]
async fn fleet_1000_nodes_rolls_at_the_budget_bound() {
    let (outcome, _) = passes("fleet-1000-nodes").await;
    let s = &outcome.summary;
    assert_eq!(s.nodes_replaced, 1000);
    assert_eq!(s.max_disrupting, 100);
    let ratio = makespan_ratio(s, 10);
    assert!(ratio <= 1.10, "makespan {ratio:.3}× the budget bound");
}

#[tokio::test(start_paused = true)]
async fn pdb_keeps_three_of_four_ready() {
    let (outcome, _) = passes("pdb-protected").await;
    assert!(outcome.summary.min_ready_pods["api"] >= 3);
    assert_eq!(outcome.summary.nodes_replaced, 2);
}

/// Issue 28: a blueprint NodePool (WhenEmptyOrUnderutilized, consolidateAfter 1m) scaled from
/// 30 spread replicas to 6 leaves no empty node and fewer, cheaper nodes, within its budget,
/// the PDB and the spread (the scenario's own expectations, with the invariants every step).
#[tokio::test(start_paused = true)]
async fn a_scale_down_is_consolidated_into_fewer_cheaper_nodes() {
    let (outcome, _) = passes("consolidate-after-scale-down").await;
    let s = &outcome.summary;
    assert!(s.max_disrupting <= 2, "20% of 6 nodes");
    let started: Vec<&str> = s
        .timeline
        .iter()
        .filter(|e| e.what == EventKind::DisruptionStarted)
        .map(|e| e.detail.as_str())
        .collect();
    assert!(
        started.iter().any(|d| d.contains("reason=Empty")),
        "{started:?}"
    );
    assert!(
        started.iter().any(|d| d.contains("reason=Underutilized")),
        "{started:?}"
    );
    assert!(
        s.timeline
            .iter()
            .any(|e| e.what == EventKind::ReplacementLaunched),
        "a cheaper replacement"
    );
    // Nothing moved before consolidateAfter (1m) passed since the scale-down.
    let first = s
        .timeline
        .iter()
        .find(|e| e.what == EventKind::DisruptionStarted)
        .expect("a disruption");
    assert!(first.offset_seconds >= 60, "{first:?}");
}

/// The consolidation scenario with its NodePool edited (`from` → `to`) and its last
/// expectations replaced by `expect` (YAML lines under `expect:`) plus `more` steps.
fn consolidation_variant(edits: &[(&str, &str)], expect: &str, more: &str) -> String {
    let mut text = bundle::bundled("consolidate-after-scale-down")
        .unwrap()
        .to_string();
    for (from, to) in edits {
        assert!(text.contains(from), "{from}");
        text = text.replace(from, to);
    }
    let at = text.find("  - name: fewer, cheaper nodes").unwrap();
    text.truncate(at);
    format!("{text}  - name: consolidated as the policy allows\n    expect:\n{expect}{more}")
}

/// Issue 28: a WhenEmpty pool deletes its empty node but keeps the underutilized ones.
#[tokio::test(start_paused = true)]
async fn a_when_empty_pool_keeps_its_underutilized_nodes() {
    let text = consolidation_variant(
        &[(
            "consolidationPolicy: WhenEmptyOrUnderutilized",
            "consolidationPolicy: WhenEmpty",
        )],
        "      emptyNodes: 0\n      nodes: 5\n      disruptionReasonSeen: Empty\n      noDisruptionReason: Underutilized\n",
        "",
    );
    let (outcome, printed) = run_text(&text, &Files::Bundled).await;
    assert!(
        outcome.failure.is_none(),
        "{:?}\n{printed}",
        outcome.failure
    );
}

/// Issue 33: a Balanced pool's consolidation records what Karpenter's balancedEvaluator does
/// (balanced_integration_test.go "should approve replacing an expensive node with a cheaper
/// one": a ConsolidationApproved event with "k: 2" and ">= threshold 0.50"): every move counted
/// in `karpenter_consolidation_moves_total` by decision, nodepool and policy, each scored in
/// `karpenter_consolidation_score` (every pool here is Balanced, so one score per move), an
/// event for each approved single-node move on its NodeClaim and Node.
#[tokio::test(start_paused = true)]
async fn a_balanced_pool_records_its_scored_moves() {
    let text = consolidation_variant(
        &[(
            "consolidationPolicy: WhenEmptyOrUnderutilized",
            "consolidationPolicy: Balanced",
        )],
        "      emptyNodes: 0\n      disruptionReasonSeen: Underutilized\n      minReadyPods: {app: web, count: 5}\n",
        "",
    );
    let (outcome, printed) = run_text(&text, &Files::Bundled).await;
    assert!(
        outcome.failure.is_none(),
        "{:?}\n{printed}",
        outcome.failure
    );
    let ctx = outcome.embedded.ctx().expect("the controllers run");
    let text = ctx.metrics.render();
    // (decision, policy) -> sum over the family's samples.
    let sum = |prefix: &str| -> BTreeMap<(String, String), f64> {
        let mut sums = BTreeMap::new();
        for line in text.lines().filter(|l| l.starts_with(prefix)) {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let label = |name: &str| {
                series
                    .split(&format!("{name}=\""))
                    .nth(1)
                    .and_then(|rest| rest.split('"').next())
                    .unwrap_or_default()
                    .to_string()
            };
            *sums
                .entry((label("decision"), label("policy")))
                .or_insert(0.0) += value.parse::<f64>().unwrap();
        }
        sums
    };
    let moves = sum("karpenter_consolidation_moves_total{");
    let scored = sum("karpenter_consolidation_score_count{");
    let approved = moves
        .get(&("approved".to_string(), "Balanced".to_string()))
        .copied()
        .unwrap_or(0.0);
    assert!(approved >= 1.0, "{moves:?}\n{text}");
    assert!(
        moves.keys().all(|(_, policy)| policy == "Balanced"),
        "{moves:?}"
    );
    // The nodes consolidated are counted with their pool's policy (Karpenter's main after
    // v1.14.1), their pods too.
    for family in [
        "karpenter_nodeclaims_disrupted_total{",
        "karpenter_pods_disruption_initiated_total{",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(family)
                && l.contains("reason=\"underutilized\"")
                && l.contains("consolidation_policy=\"balanced\"")),
            "{family}\n{text}"
        );
    }
    let total = |m: &BTreeMap<(String, String), f64>| m.values().sum::<f64>();
    assert_eq!(total(&moves), total(&scored), "one score per move:\n{text}");
    let events: Vec<k8s_openapi::api::events::v1::Event> =
        kube::Api::all(outcome.embedded.cluster.client())
            .list(&Default::default())
            .await
            .unwrap()
            .items;
    let approvals: Vec<(String, String)> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("ConsolidationApproved"))
        .map(|e| {
            (
                e.regarding
                    .as_ref()
                    .and_then(|r| r.kind.clone())
                    .unwrap_or_default(),
                e.note.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        approvals
            .iter()
            .all(|(_, note)| note.contains("k: 2") && note.contains(">= threshold 0.50")),
        "{approvals:?}"
    );
    let kinds: std::collections::BTreeSet<&str> =
        approvals.iter().map(|(k, _)| k.as_str()).collect();
    assert!(
        kinds.contains("NodeClaim") && kinds.contains("Node") || kinds.contains("NodePool"),
        "{approvals:?}"
    );
}

/// Issue 28: a `nodes: "0"` budget for reason Underutilized blocks consolidation but not
/// drift (Karpenter budgets by reason).
#[tokio::test(start_paused = true)]
async fn an_underutilized_budget_of_zero_blocks_consolidation_not_drift() {
    let text = consolidation_variant(
        &[(
            "            - nodes: \"20%\"\n",
            "            - nodes: \"0\"\n              reasons: [Underutilized]\n            - nodes: \"20%\"\n",
        )],
        "      noDisruptionReason: Underutilized\n",
        "  - name: new AMI release\n    publishAmi:\n      release: v20260801\n  - name: drifted nodes replaced\n    waitFor:\n      oldNodesGone: true\n      readyPods: {app: web, count: 6}\n    timeout: 2h\n  - name: drift went on\n    expect:\n      disruptionReasonSeen: Drifted\n      noDisruptionReason: Underutilized\n      minReadyPods: {app: web, count: 5}\n",
    );
    let (outcome, printed) = run_text(&text, &Files::Bundled).await;
    assert!(
        outcome.failure.is_none(),
        "{:?}\n{printed}",
        outcome.failure
    );
    assert!(
        outcome
            .summary
            .drift_reasons
            .contains(&"AMIDrift".to_string())
    );
}

#[tokio::test(start_paused = true)]
async fn al2023_latest_drifts_when_a_release_is_published() {
    let (outcome, _) = passes("al2023-latest-release").await;
    let kinds = kinds(&outcome);
    assert_eq!(kinds.first(), Some(&EventKind::AmiPublished), "{kinds:?}");
    assert!(
        outcome
            .summary
            .drift_reasons
            .contains(&"AMIDrift".to_string())
    );
}

#[tokio::test(start_paused = true)]
async fn an_unmet_expectation_fails_naming_the_step() {
    let text = bundle::bundled("update-nodes-with-drift").unwrap().replace(
        "minReadyPods: {app: latest-current-ami, count: 2}",
        "minReadyPods: {app: latest-current-ami, count: 3}",
    );
    let (outcome, _) = run_text(&text, &Files::Bundled).await;
    let failure = outcome.failure.clone().expect("the scenario fails");
    assert_eq!(failure.index, 6);
    assert_eq!(failure.name, "availability");
    let message = failure.to_string();
    assert!(
        message
            .starts_with("step 6 (availability): minReadyPods: app latest-current-ami fell to 2"),
        "{message}"
    );
    assert!(!outcome.summary.passed);
    assert!(outcome.summary.text().contains("Result: FAIL"));
}

#[tokio::test(start_paused = true)]
async fn a_wait_that_times_out_fails_naming_the_step() {
    let text = r#"
name: too-many
kubernetesVersion: "1.29"
manifests:
  - file: ../update-nodes-with-drift/latest-current-ami.yaml
  - file: ../update-nodes-with-drift/workload.yaml
steps:
  - name: five nodes
    waitFor: {initializedNodes: 5}
    timeout: 3m
"#;
    let (outcome, _) = run_text(text, &Files::Bundled).await;
    let message = outcome.failure.clone().expect("times out").to_string();
    assert!(
        message.starts_with("step 1 (five nodes): timed out after 3m00s of virtual time waiting for: 5 initialized nodes (now 1)"),
        "{message}"
    );
}

#[tokio::test(start_paused = true)]
async fn scenario_files_on_disk_read_manifests_relative_to_themselves() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("class.yaml"),
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata:\n  name: c\nspec:\n  amiSelectorTerms:\n    - id: \"{{amd64_ami:1.29}}\"\n  role: \"{{node_role}}\"\n  securityGroupSelectorTerms:\n    - tags: {karpenter.sh/discovery: \"{{cluster_name}}\"}\n  subnetSelectorTerms:\n    - tags: {karpenter.sh/discovery: \"{{cluster_name}}\"}\n",
    )
    .unwrap();
    let path = dir.path().join("s.yaml");
    std::fs::write(
        &path,
        "name: disk\nmanifests:\n  - file: class.yaml\nsteps:\n  - patch: {kind: EC2NodeClass, name: c, patch: {spec: {tags: {team: a}}}}\n  - advanceTime: 5s\n",
    )
    .unwrap();
    let (text, files) = bundle::locate(path.to_str().unwrap()).unwrap();
    let (outcome, printed) = run_text(&text, &files).await;
    assert!(
        outcome.failure.is_none(),
        "{:?}\n{printed}",
        outcome.failure
    );
    assert!(
        printed.contains("EC2NodeClass/c serverside-applied"),
        "{printed}"
    );
    assert!(
        printed.contains("kubectl patch ec2nodeclass c --type merge"),
        "{printed}"
    );
    assert_eq!(kinds(&outcome), vec![EventKind::ChangeApplied]);
}

/// The demo's preview step: the prediction, then the same change for real, side by side.
#[tokio::test(start_paused = true)]
async fn a_previewed_upgrade_does_what_the_preview_said() {
    let (outcome, printed) = passes("preview-then-apply").await;
    assert!(
        printed.contains("$ driftwood preview -f - (inline)"),
        "{printed}"
    );
    assert!(printed.contains("20 of 20 nodes drift:"), "{printed}");
    let p = outcome.summary.predicted.clone().expect("a prediction");
    let text = outcome.summary.text();
    assert!(text.contains("Predicted vs actual:"), "{text}");
    assert_eq!((p.predicted_drifted, p.actual_drifted), (20, 20), "{text}");
    assert!(p.same_nodes_replaced, "{text}");
    assert!(p.predicted_waves >= 5 && p.actual_waves >= 5, "{text}");
    let error = p.error_percent().expect("both times");
    assert!(error <= 15.0, "{error:.0}% off\n{text}");
}
