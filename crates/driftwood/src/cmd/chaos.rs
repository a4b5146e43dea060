//! `driftwood chaos`: runs a scenario under many fault seeds on embedded clusters, checks the
//! named invariants every virtual second and the end state once the faults stop, prints a line
//! per failing seed and a summary, and exits 1 on any violation.

use driftwood::chaos::campaign::{replay_command, write_report};
use driftwood::chaos::{CampaignConfig, FaultSpec, run_campaign};
use driftwood::demo::bundle;
use driftwood::demo::parse_scenario;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A scenario file (YAML), or the name of a bundled example (`driftwood demo --list`).
    #[arg(long, value_name = "NAME|FILE", default_value = bundle::DEFAULT_SCENARIO)]
    scenario: String,
    /// How many seeds (1..=N, or from --first-seed).
    #[arg(long, value_name = "N", default_value_t = 50)]
    seeds: u64,
    /// The first seed.
    #[arg(long, value_name = "S", default_value_t = 1)]
    first_seed: u64,
    /// The faults: `all` (every kind at its default rate), `none`, or comma-separated
    /// `KIND[=RATE]` (injections per virtual hour), `all=RATE`, `window=30m`, `settle=30m`.
    /// Default: the scenario's `faults:` section, else `all`.
    #[arg(long, value_name = "SPEC")]
    faults: Option<String>,
    /// Seeds run at once (default: the machine's cores).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Write each failing seed's report (violations, faults timeline, run output, replay
    /// command) to this directory.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Process chaos instead: the walkthrough's rollout run by real `driftwood controller`
    /// processes (this binary) against the embedded cluster over HTTP and the simulated
    /// account's AWS endpoint, under SIGKILL/SIGSTOP of the leader, API latency, resets,
    /// half-open connections and API server restarts, on wall-clock time, one seed at a time.
    #[arg(long)]
    processes: bool,
    /// With --processes: how long faults are injected after the change (seconds).
    #[arg(long, value_name = "S", default_value_t = 60)]
    window_seconds: u64,
}

/// The spec a run uses: `--faults`, else the scenario's section, else every kind.
pub fn fault_spec(
    arg: Option<&str>,
    scenario: &driftwood::demo::Scenario,
) -> anyhow::Result<FaultSpec> {
    Ok(match (arg, &scenario.faults) {
        (Some("scenario") | None, Some(section)) => FaultSpec::from_section(section)?,
        (Some(text), _) => FaultSpec::parse(text)?,
        (None, None) => FaultSpec::all(),
    })
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if args.processes {
        return run_processes(args);
    }
    let (text, files) = bundle::locate(&args.scenario).map_err(anyhow::Error::msg)?;
    let scenario = parse_scenario(&text).map_err(|e| anyhow::anyhow!("{}: {e}", args.scenario))?;
    let spec = fault_spec(args.faults.as_deref(), &scenario)?;
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(std::num::NonZeroUsize::get)
            .unwrap_or(1)
    });
    let config = CampaignConfig {
        scenario,
        scenario_arg: args.scenario.clone(),
        files,
        spec,
        seeds: (args.first_seed..args.first_seed.saturating_add(args.seeds)).collect(),
        jobs,
        report_dir: args.report.clone(),
        unsafe_skip_replacement_wait: false,
    };
    println!(
        "driftwood chaos: {} x {} seeds, faults {}, {} at a time",
        config.scenario.name,
        config.seeds.len(),
        config.spec.to_arg(),
        config.jobs
    );
    let summary = run_campaign(&config, |outcome| {
        if outcome.passed() {
            return;
        }
        println!("{}", outcome.failure_line());
        println!(
            "  replay: {}",
            replay_command(&config.scenario_arg, &config.spec, outcome.seed)
        );
        if let Some(dir) = &config.report_dir {
            match write_report(dir, &config, outcome) {
                Ok(path) => println!("  report: {}", path.display()),
                Err(e) => eprintln!("  could not write the report to {}: {e}", dir.display()),
            }
        }
    })?;
    print!("{}", summary.text());
    Ok(if summary.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `driftwood chaos --processes`: seeds one after another (each runs real processes on wall
/// time); a line per seed, then the totals.
fn run_processes(args: &Args) -> anyhow::Result<ExitCode> {
    use driftwood::chaos::processes::{
        ProcessChaosConfig, ProcessFault, replay_command, run_seed, seed_dir,
    };
    let binary = std::env::current_exe()?;
    let scratch = tempfile_dir()?;
    let base = args.report.clone().unwrap_or_else(|| scratch.clone());
    println!(
        "driftwood chaos --processes: walkthrough x {} seeds, {} s of faults each, wall-clock time",
        args.seeds, args.window_seconds
    );
    let started = std::time::Instant::now();
    let (mut failed, mut faults) = (0u64, std::collections::BTreeMap::<&str, usize>::new());
    let mut violations = 0usize;
    for seed in args.first_seed..args.first_seed.saturating_add(args.seeds) {
        let config = ProcessChaosConfig {
            binary: binary.clone(),
            seed,
            window: std::time::Duration::from_secs(args.window_seconds),
            settle: std::time::Duration::from_secs(180),
            work_dir: seed_dir(&base, seed),
        };
        let outcome = run_seed(&config)?;
        for kind in ProcessFault::ALL {
            *faults.entry(kind.name()).or_default() += outcome
                .injected
                .iter()
                .filter(|(_, k, _)| *k == kind)
                .count();
        }
        violations += outcome.violations.len();
        let rollout = outcome.rollout_seconds.map_or_else(
            || "end state not reached".to_string(),
            |s| format!("end state +{s} s after the change"),
        );
        if outcome.passed() {
            println!(
                "seed {seed}: ok ({} faults, {} replicas, {rollout})",
                outcome.injected.len(),
                outcome.replicas_started
            );
        } else {
            failed += 1;
            println!(
                "seed {seed}: FAILED {}",
                outcome
                    .violations
                    .iter()
                    .map(|v| v.line())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            for (at, kind, detail) in &outcome.injected {
                println!("  {at} {} {detail}", kind.name());
            }
            println!("  replay: {}", replay_command(seed));
            println!("  logs: {}", config.work_dir.display());
        }
    }
    let total: usize = faults.values().sum();
    println!(
        "{} seeds: {} passed, {failed} failed; {total} faults ({}); {violations} violations; {:.0} s",
        args.seeds,
        args.seeds - failed,
        faults
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        started.elapsed().as_secs_f64()
    );
    if args.report.is_none() && failed == 0 {
        std::fs::remove_dir_all(&scratch)?;
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A fresh directory under the system's temporary directory for the seeds' files.
fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("driftwood-process-chaos-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
