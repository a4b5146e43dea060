//! A campaign: one scenario under many fault seeds, each on its own embedded cluster and
//! virtual clock on its own thread (as many at once as asked), summed up: rollouts run and
//! completed, faults injected by kind, violations by invariant, and `N passed, M failed`. A
//! failing seed's report says how to replay it exactly.

use super::invariants::{Invariant, Violation};
use super::spec::{FaultKind, FaultSpec};
use super::{ChaosConfig, ChaosFindings};
use crate::demo::bundle::Files;
use crate::demo::scenario::Scenario;
use crate::demo::{RunConfig, run};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// What a campaign runs.
#[derive(Debug, Clone)]
pub struct CampaignConfig {
    pub scenario: Scenario,
    /// How the scenario was named on the command line (for replay lines).
    pub scenario_arg: String,
    pub files: Files,
    pub spec: FaultSpec,
    pub seeds: Vec<u64>,
    /// Seeds run at once.
    pub jobs: usize,
    /// Where failing seeds' reports go.
    pub report_dir: Option<PathBuf>,
    /// Test-only (see [`ChaosConfig::unsafe_skip_replacement_wait`]).
    pub unsafe_skip_replacement_wait: bool,
}

/// One seed's result.
#[derive(Debug, Clone)]
pub struct SeedOutcome {
    pub seed: u64,
    /// The scenario's steps all succeeded.
    pub completed: bool,
    pub failure: Option<String>,
    pub findings: ChaosFindings,
    /// Everything the run printed.
    pub output: String,
    pub wall: Duration,
}

impl SeedOutcome {
    /// Whether the seed passed: no violation (a rollout that did not complete is one).
    pub fn passed(&self) -> bool {
        self.findings.violations.is_empty() && self.completed
    }

    /// Faults injected by kind.
    pub fn injected_by_kind(&self) -> BTreeMap<FaultKind, u64> {
        let mut out = BTreeMap::new();
        for i in &self.findings.injected {
            *out.entry(i.kind).or_insert(0) += 1;
        }
        out
    }

    /// The one-line verdict printed for a failing seed.
    pub fn failure_line(&self) -> String {
        let mut names: Vec<&str> = self
            .findings
            .violations
            .iter()
            .map(|v| v.invariant.name())
            .collect();
        names.dedup();
        let first = self
            .findings
            .violations
            .first()
            .map(|v| v.detail.clone())
            .or_else(|| self.failure.clone())
            .unwrap_or_default();
        format!(
            "seed {}: FAILED {} — {first}",
            self.seed,
            if names.is_empty() {
                "rollout-completes".to_string()
            } else {
                names.join(", ")
            }
        )
    }
}

/// Runs one seed on this thread (its own runtime, paused time).
pub fn run_seed(
    scenario: &Scenario,
    files: &Files,
    spec: &FaultSpec,
    seed: u64,
    unsafe_skip_replacement_wait: bool,
) -> anyhow::Result<SeedOutcome> {
    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()?;
    let config = RunConfig {
        chaos: Some(ChaosConfig {
            spec: spec.clone(),
            seed,
            unsafe_skip_replacement_wait,
        }),
        ..RunConfig::default()
    };
    let mut output: Vec<u8> = Vec::new();
    // The run's thread gets the log check (error-names-object) as its subscriber.
    let outcome = tracing::subscriber::with_default(super::log_check::subscriber(), || {
        runtime.block_on(async {
            let outcome = run(scenario, files, &config, &mut output).await?;
            let text = outcome.summary.text();
            let failure = outcome.failure.as_ref().map(ToString::to_string);
            let findings = outcome.chaos.clone().unwrap_or_default();
            anyhow::Ok((text, failure, findings))
        })
    })?;
    let (summary, failure, mut findings) = outcome;
    // A rollout that failed for another reason than a recorded invariant is still one that did
    // not complete.
    if failure.is_some()
        && !findings
            .violations
            .iter()
            .any(|v| v.invariant == Invariant::RolloutCompletes)
    {
        findings.violations.push(Violation {
            at: 0,
            invariant: Invariant::RolloutCompletes,
            detail: failure.clone().unwrap_or_default(),
        });
    }
    let mut text = String::from_utf8_lossy(&output).into_owned();
    text.push_str(&summary);
    Ok(SeedOutcome {
        seed,
        completed: failure.is_none(),
        failure,
        findings,
        output: text,
        wall: started.elapsed(),
    })
}

/// The campaign's totals.
#[derive(Debug, Clone, Default)]
pub struct CampaignSummary {
    pub scenario: String,
    pub seeds: usize,
    pub passed: usize,
    pub failed: usize,
    pub completed: usize,
    pub injected: BTreeMap<FaultKind, u64>,
    pub violations: BTreeMap<Invariant, u64>,
    pub forced_removals: usize,
    pub failing_seeds: Vec<u64>,
    pub wall: Duration,
}

impl CampaignSummary {
    fn add(&mut self, outcome: &SeedOutcome) {
        self.seeds += 1;
        if outcome.passed() {
            self.passed += 1;
        } else {
            self.failed += 1;
            self.failing_seeds.push(outcome.seed);
        }
        self.completed += usize::from(outcome.completed);
        for (kind, n) in outcome.injected_by_kind() {
            *self.injected.entry(kind).or_insert(0) += n;
        }
        for v in &outcome.findings.violations {
            *self.violations.entry(v.invariant).or_insert(0) += 1;
        }
        self.forced_removals += outcome.findings.forced_removals;
    }

    /// The summary as printed.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "chaos: {} under {} seeds", self.scenario, self.seeds);
        let _ = writeln!(
            out,
            "rollouts run: {}, completed: {}",
            self.seeds, self.completed
        );
        let total: u64 = self.injected.values().sum();
        let _ = writeln!(out, "faults injected: {total}");
        for kind in FaultKind::ALL {
            let _ = writeln!(
                out,
                "  {:<28}{}",
                kind.name(),
                self.injected.get(&kind).copied().unwrap_or(0)
            );
        }
        let violations: u64 = self.violations.values().sum();
        let _ = writeln!(out, "invariant violations: {violations}");
        for invariant in Invariant::ALL {
            let _ = writeln!(
                out,
                "  {:<28}{}",
                invariant.name(),
                self.violations.get(&invariant).copied().unwrap_or(0)
            );
        }
        let _ = writeln!(
            out,
            "forced removals (expiry/terminationGracePeriod, not violations): {}",
            self.forced_removals
        );
        if !self.failing_seeds.is_empty() {
            let seeds: Vec<String> = self.failing_seeds.iter().map(u64::to_string).collect();
            let _ = writeln!(out, "failing seeds: {}", seeds.join(", "));
        }
        let _ = writeln!(out, "wall time: {:.1}s", self.wall.as_secs_f64());
        let _ = writeln!(out, "{} passed, {} failed", self.passed, self.failed);
        out
    }
}

/// The command that replays `seed` exactly.
pub fn replay_command(scenario_arg: &str, spec: &FaultSpec, seed: u64) -> String {
    format!(
        "driftwood demo --scenario {scenario_arg} --faults '{}' --seed {seed}",
        spec.to_arg()
    )
}

/// Writes a failing seed's report: violations, the faults' timeline, the run's output and the
/// replay command.
pub fn write_report(
    dir: &Path,
    config: &CampaignConfig,
    outcome: &SeedOutcome,
) -> std::io::Result<PathBuf> {
    let path = dir.join(format!("seed-{}.txt", outcome.seed));
    std::fs::create_dir_all(dir)?;
    let mut text = String::new();
    let _ = writeln!(text, "{}", outcome.failure_line());
    let _ = writeln!(
        text,
        "replay: {}\n",
        replay_command(&config.scenario_arg, &config.spec, outcome.seed)
    );
    let _ = writeln!(text, "violations:");
    for v in &outcome.findings.violations {
        let _ = writeln!(text, "  {}", v.line());
    }
    let _ = writeln!(text, "\nfaults injected:");
    for i in &outcome.findings.injected {
        let _ = writeln!(text, "  {}", i.line());
    }
    let _ = writeln!(text, "\nrun output:\n{}", outcome.output);
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Runs every seed (`jobs` at a time), calling `each` with every outcome as it finishes (in
/// finishing order), and sums up.
pub fn run_campaign(
    config: &CampaignConfig,
    mut each: impl FnMut(&SeedOutcome),
) -> anyhow::Result<CampaignSummary> {
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel::<anyhow::Result<SeedOutcome>>();
    let jobs = config.jobs.clamp(1, config.seeds.len().max(1));
    let mut workers = Vec::new();
    for worker in 0..jobs {
        let next = next.clone();
        let tx = tx.clone();
        let config = config.clone();
        workers.push(
            std::thread::Builder::new()
                .name(format!("chaos-{worker}"))
                .stack_size(16 * 1024 * 1024)
                .spawn(move || {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some(seed) = config.seeds.get(i) else {
                            return;
                        };
                        let outcome = run_seed(
                            &config.scenario,
                            &config.files,
                            &config.spec,
                            *seed,
                            config.unsafe_skip_replacement_wait,
                        );
                        if tx.send(outcome).is_err() {
                            return;
                        }
                    }
                })?,
        );
    }
    drop(tx);
    let mut summary = CampaignSummary {
        scenario: config.scenario.name.clone(),
        ..CampaignSummary::default()
    };
    for outcome in rx {
        let outcome = outcome?;
        summary.add(&outcome);
        each(&outcome);
    }
    for worker in workers {
        let _ = worker.join();
    }
    summary.failing_seeds.sort_unstable();
    summary.wall = started.elapsed();
    Ok(summary)
}
