//! Chaos runs (issue 17): the fast slice of the campaign — two scenarios under faults of every
//! kind, no invariant violated — and a safety check disabled behind the test-only switch, whose
//! violation is caught, named and replays exactly. The full campaign is `driftwood chaos`
//! (README, "Reliability").

use driftwood::chaos::campaign::{CampaignConfig, replay_command, run_campaign, run_seed};
use driftwood::chaos::{FaultKind, FaultSpec, Invariant, TimedFault};
use driftwood::demo::bundle::{self, Files};
use driftwood::demo::parse_scenario;
use driftwood::demo::report::clock_time;
use std::collections::BTreeMap;

fn campaign(name: &str, seeds: std::ops::Range<u64>) -> CampaignConfig {
    CampaignConfig {
        scenario: parse_scenario(bundle::bundled(name).unwrap()).unwrap(),
        scenario_arg: name.to_string(),
        files: Files::Bundled,
        spec: FaultSpec::all(),
        seeds: seeds.collect(),
        jobs: 2,
        report_dir: None,
        unsafe_skip_replacement_wait: false,
    }
}

/// The fast slice: the walkthrough and a PDB-protected workload under every kind of fault.
/// Every kind is injected somewhere in the slice, and nothing is violated. Nine seeds of the
/// walkthrough (seed 9 among them: it found the reused NodeClaim name) and four of
/// `pdb-protected`; the campaign's long run is `driftwood chaos --seeds 1000` (README).
#[test]
fn the_fast_slice_holds_every_invariant_under_every_kind_of_fault() {
    let mut injected: BTreeMap<FaultKind, u64> = BTreeMap::new();
    let mut failures = Vec::new();
    for (name, seeds) in [("update-nodes-with-drift", 1..10), ("pdb-protected", 1..5)] {
        let config = campaign(name, seeds);
        let summary = run_campaign(&config, |outcome| {
            if !outcome.passed() {
                failures.push(format!(
                    "{}\n  replay: {}",
                    outcome.failure_line(),
                    replay_command(name, &config.spec, outcome.seed)
                ));
            }
        })
        .unwrap();
        assert_eq!(summary.completed, summary.seeds, "{}", summary.text());
        for (kind, n) in summary.injected {
            *injected.entry(kind).or_insert(0) += n;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let missing: Vec<&str> = FaultKind::ALL
        .iter()
        .filter(|k| injected.get(k).copied().unwrap_or(0) == 0)
        .map(|k| k.name())
        .collect();
    assert!(missing.is_empty(), "never injected: {missing:?}");
}

/// `pdb-blocking` on a scenario without a PDB of its own (the walkthrough): the injector applies
/// a PDB with `maxUnavailable: 0` over the workload just before the AMI change, the old node
/// stays until that PDB is removed, and then the rollout completes with nothing violated.
#[test]
fn a_temporary_blocking_pdb_holds_the_rollout_until_it_is_removed() {
    let scenario = parse_scenario(bundle::bundled("update-nodes-with-drift").unwrap()).unwrap();
    let mut spec = FaultSpec::none();
    spec.at.push(TimedFault {
        after: std::time::Duration::from_secs(30),
        fault: FaultKind::PdbBlocking,
    });
    spec.window = std::time::Duration::from_secs(20 * 60);
    spec.settle = std::time::Duration::from_secs(10 * 60);
    let outcome = run_seed(&scenario, &Files::Bundled, &spec, 3, false).unwrap();
    assert!(
        outcome.passed(),
        "{}\n{}",
        outcome.failure_line(),
        outcome.output
    );
    let [fault] = outcome.findings.injected.as_slice() else {
        panic!("{:?}", outcome.findings.injected);
    };
    assert!(
        fault.detail.contains("chaos-pdb-blocking-1") && fault.detail.contains("maxUnavailable 0"),
        "{}",
        fault.detail
    );
    let minutes: i64 = fault
        .detail
        .rsplit("for ")
        .next()
        .and_then(|m| m.trim_end_matches('m').parse().ok())
        .unwrap();
    let removed = clock_time(fault.at + minutes * 60);
    let terminated = outcome
        .output
        .lines()
        .find(|l| l.contains("old node terminated"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no old node terminated:\n{}", outcome.output));
    assert!(
        terminated >= removed.as_str(),
        "old node terminated at {terminated}, PDB removed at {removed}\n{}",
        outcome.output
    );
}

/// `impaired-instance` (issue 33): EC2's status checks report running instances unhealthy
/// during the walkthrough's rollout — a failed system or instance check, or a scheduled event —
/// and driftwood replaces each (a failed check forcefully, after the two minutes it must last;
/// an event by a drain), with every invariant held and the rollout completed.
#[test]
fn instances_ec2_reports_unhealthy_are_replaced_with_nothing_violated() {
    let scenario = parse_scenario(bundle::bundled("update-nodes-with-drift").unwrap()).unwrap();
    let mut spec = FaultSpec::none();
    for minutes in [3, 6, 9] {
        spec.at.push(TimedFault {
            after: std::time::Duration::from_secs(minutes * 60),
            fault: FaultKind::ImpairedInstance,
        });
    }
    spec.window = std::time::Duration::from_secs(15 * 60);
    spec.settle = std::time::Duration::from_secs(20 * 60);
    let outcome = run_seed(&scenario, &Files::Bundled, &spec, 5, false).unwrap();
    assert!(
        outcome.passed(),
        "{}\n{}",
        outcome.failure_line(),
        outcome.output
    );
    // Each fault named a node of the pool, and each such node was removed beside the drifted
    // one (the summary's count of nodes removed).
    let impaired: std::collections::BTreeSet<&str> = outcome
        .findings
        .injected
        .iter()
        .map(|i| {
            assert_eq!(i.kind, FaultKind::ImpairedInstance);
            i.detail
                .split("(node ")
                .nth(1)
                .and_then(|rest| rest.split(')').next())
                .unwrap_or_else(|| panic!("{}", i.detail))
        })
        .collect();
    assert_eq!(impaired.len(), 3, "{:#?}", outcome.findings.injected);
    let removed: usize = outcome
        .output
        .lines()
        .find_map(|l| l.strip_prefix("Nodes removed: "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", outcome.output));
    assert_eq!(removed, 1 + impaired.len(), "{}", outcome.output);
}

/// `impaired-instance` on a PDB-protected workload (minAvailable 3 of 4): over four seeds EC2
/// reports nodes unhealthy both ways — failed checks, replaced forcefully without waiting on
/// the PDB (excused for those nodes' pods while the nodes are there), and scheduled events,
/// drained with the PDB honoured (not excused) — and every invariant holds.
#[test]
fn impaired_instances_under_a_pdb_hold_every_invariant() {
    let scenario = parse_scenario(bundle::bundled("pdb-protected").unwrap()).unwrap();
    let mut spec = FaultSpec::none();
    for minutes in [2, 4, 6, 8] {
        spec.at.push(TimedFault {
            after: std::time::Duration::from_secs(minutes * 60),
            fault: FaultKind::ImpairedInstance,
        });
    }
    spec.window = std::time::Duration::from_secs(12 * 60);
    spec.settle = std::time::Duration::from_secs(20 * 60);
    let mut details = Vec::new();
    for seed in 1..=4 {
        let outcome = run_seed(&scenario, &Files::Bundled, &spec, seed, false).unwrap();
        assert!(
            outcome.passed(),
            "seed {seed}: {}\n{}",
            outcome.failure_line(),
            outcome.output
        );
        details.extend(outcome.findings.injected.into_iter().map(|i| i.detail));
    }
    assert!(
        details.iter().any(|d| d.contains("status check fails")),
        "{details:#?}"
    );
    assert!(
        details.iter().any(|d| d.contains("event is scheduled")),
        "{details:#?}"
    );
}

/// With the controllers told to skip waiting for replacements (a test-only switch), the old
/// node goes before its replacement is initialized: the run names `replacement-first`, and the
/// same seed replays to the same faults and the same violation.
#[test]
fn a_disabled_safety_check_is_caught_named_and_replays() {
    let scenario = parse_scenario(bundle::bundled("update-nodes-with-drift").unwrap()).unwrap();
    let spec = FaultSpec::parse("api-conflict,watch-closed,window=5m,settle=10m").unwrap();
    let first = run_seed(&scenario, &Files::Bundled, &spec, 7, true).unwrap();
    assert!(!first.passed());
    let named: Vec<Invariant> = first
        .findings
        .violations
        .iter()
        .map(|v| v.invariant)
        .collect();
    assert!(
        named.contains(&Invariant::ReplacementFirst),
        "{named:?}\n{}",
        first.output
    );
    let line = first.failure_line();
    assert!(
        line.contains("seed 7") && line.contains("replacement-first"),
        "{line}"
    );
    let again = run_seed(&scenario, &Files::Bundled, &spec, 7, true).unwrap();
    assert_eq!(again.findings.injected, first.findings.injected);
    assert_eq!(again.findings.violations, first.findings.violations);
    // The same seed with the check in place passes.
    let safe = run_seed(&scenario, &Files::Bundled, &spec, 7, false).unwrap();
    assert!(
        safe.passed(),
        "{}\n{:?}",
        safe.failure_line(),
        safe.findings.violations
    );
}

/// The command line: a failing seed is printed with its replay command and the run exits 1; a
/// passing campaign prints the summary and `N passed, 0 failed`.
#[test]
fn the_chaos_command_prints_a_summary_and_exits_by_verdict() {
    let output = super::driftwood(
        &[
            "chaos",
            "--scenario",
            "update-nodes-with-drift",
            "--seeds",
            "2",
            "--faults",
            "all=30,window=5m",
        ],
        None,
    );
    let text = super::stdout(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("faults injected:"), "{text}");
    assert!(text.contains("replacement-first"), "{text}");
    assert!(text.contains("2 passed, 0 failed"), "{text}");
    let bad = super::driftwood(&["chaos", "--faults", "cosmic-rays=1"], None);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("cosmic-rays"), "{err}");
}
