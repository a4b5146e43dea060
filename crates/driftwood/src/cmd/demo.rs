//! `driftwood demo`: runs a scenario (by default the public "update nodes using drift"
//! walkthrough) on the embedded cluster with the simulated EC2 and the real controllers, on a
//! virtual clock; prints kubectl-style tables, the controllers' log lines, a timeline and a
//! verdict; exits 1 when the rollout did not finish or an expectation failed.

use driftwood::demo::bundle::{self, DEFAULT_SCENARIO, SCENARIOS};
use driftwood::demo::logs::{self, LogClock};
use driftwood::demo::{Pace, RunConfig, parse_scenario, run};
use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Prints to stdout, ignoring write errors (a closed pipe must not panic the demo).
fn say(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().write_all(text.as_bytes());
}

/// `println!` that ignores write errors.
macro_rules! sayln {
    ($($arg:tt)*) => {{
        say(&format!($($arg)*));
        say("\n");
    }};
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A scenario file (YAML), or the name of a bundled example (see --list).
    #[arg(long, value_name = "FILE")]
    scenario: Option<String>,
    /// List the bundled example scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Watch it live: this many virtual seconds per wall second (e.g. 10).
    #[arg(long, value_name = "X", conflicts_with = "realtime")]
    speed: Option<f64>,
    /// Run on wall-clock time (a two-minute wait takes two minutes).
    #[arg(long)]
    realtime: bool,
    /// Keep the cluster up afterwards and print the `export KUBECONFIG=...` line, until Ctrl-C.
    #[arg(long)]
    serve: bool,
    /// Write summary.json and rollout.svg (nodes by state, ready pods) to this directory.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Leave out the controllers' log lines.
    #[arg(long)]
    quiet: bool,
    /// Print the simulated account's AWS API calls per step, by action, per minute of cluster
    /// time (also in --report's summary.json).
    #[arg(long)]
    aws_calls: bool,
    /// Run under faults as `driftwood chaos` does (`all`, `KIND=RATE,...`, or `scenario` for
    /// the scenario's `faults:` section); with --seed, replays one chaos seed exactly.
    #[arg(long, value_name = "SPEC")]
    faults: Option<String>,
    /// The fault schedule's seed (with --faults).
    #[arg(long, value_name = "S", default_value_t = 1, requires = "faults")]
    seed: u64,
}

pub fn run_command(args: &Args) -> anyhow::Result<ExitCode> {
    if args.list {
        return list();
    }
    if let Some(speed) = args.speed
        && !(speed.is_finite() && speed > 0.0)
    {
        anyhow::bail!("--speed {speed}: must be a positive number of virtual seconds per second");
    }
    let name = args.scenario.as_deref().unwrap_or(DEFAULT_SCENARIO);
    let (text, files) = bundle::locate(name).map_err(anyhow::Error::msg)?;
    let scenario = parse_scenario(&text).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let progress = std::io::stdout().is_terminal();
    let log_clock = LogClock::default();
    if !args.quiet {
        logs::install(log_clock.clone(), progress);
    }
    let pace = match (args.realtime, args.speed) {
        (true, _) => Pace::Realtime,
        (false, Some(x)) => Pace::Speed(x),
        (false, None) => Pace::Virtual,
    };
    let chaos = match &args.faults {
        Some(text) => Some(driftwood::chaos::ChaosConfig {
            spec: super::chaos::fault_spec(Some(text), &scenario)?,
            seed: args.seed,
            unsafe_skip_replacement_wait: false,
        }),
        None => None,
    };
    let config = RunConfig {
        pace,
        progress,
        log_clock: Some(log_clock),
        chaos,
        unsafe_skip_replacement_wait: false,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(pace != Pace::Realtime)
        .build()?;
    let (code, outcome) = runtime.block_on(async {
        let wall = std::time::Instant::now();
        let mut stdout = std::io::stdout();
        let outcome = run(&scenario, &files, &config, &mut stdout).await?;
        say(&outcome.summary.text());
        if args.aws_calls {
            say(&driftwood::demo::aws_calls::text(
                &outcome.summary.aws_calls,
            ));
        }
        if let Some(findings) = &outcome.chaos {
            say(&chaos_text(findings));
        }
        sayln!(
            "({} of cluster time in {:.1}s of wall time)",
            driftwood::demo::duration::compact(
                outcome.embedded.cluster.clock().now().as_second()
                    - scenario_start(&outcome.summary)
            ),
            wall.elapsed().as_secs_f64()
        );
        if let Some(dir) = &args.report {
            write_report(dir, &outcome.summary)?;
        }
        if args.serve {
            serve(&outcome, pace).await?;
        }
        let violated = outcome
            .chaos
            .as_ref()
            .is_some_and(|f| !f.violations.is_empty());
        let code = if outcome.failure.is_none() && !violated {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
        anyhow::Ok((code, outcome))
    })?;
    // The run's world (the embedded API server's store, the watch caches, the simulated
    // account) is left to the operating system at exit rather than freed object by object:
    // that took 3–4 s of a 2-minute 1,000-node run (profiled), after everything was said.
    std::mem::forget(outcome);
    std::mem::forget(runtime);
    Ok(code)
}

/// The faults injected and the invariants violated, for a run under --faults.
fn chaos_text(findings: &driftwood::chaos::ChaosFindings) -> String {
    use std::fmt::Write as _;
    let mut out = format!("\nFaults injected: {}\n", findings.injected.len());
    for i in &findings.injected {
        let _ = writeln!(out, "  {}", i.line());
    }
    let _ = writeln!(out, "Invariant violations: {}", findings.violations.len());
    for v in &findings.violations {
        let _ = writeln!(out, "  {}", v.line());
    }
    out
}

fn scenario_start(summary: &driftwood::demo::Summary) -> i64 {
    summary
        .started_at
        .parse::<k8s_openapi::jiff::Timestamp>()
        .map(|t| t.as_second())
        .unwrap_or_default()
}

fn list() -> anyhow::Result<ExitCode> {
    let width = SCENARIOS.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    for (name, text) in SCENARIOS {
        let description = parse_scenario(text)
            .map(|s| s.description)
            .unwrap_or_else(|e| format!("(does not parse: {e})"));
        let first = description.split(". ").next().unwrap_or_default();
        sayln!("{name:<width$}  {}", first.trim_end_matches('.'));
    }
    sayln!(
        "\nRun one with `driftwood demo --scenario NAME` (or a path to your own scenario file)."
    );
    Ok(ExitCode::SUCCESS)
}

fn write_report(dir: &std::path::Path, summary: &driftwood::demo::Summary) -> anyhow::Result<()> {
    use anyhow::Context as _;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = dir.join("summary.json");
    std::fs::write(&json, serde_json::to_string_pretty(summary)?)
        .with_context(|| format!("writing {}", json.display()))?;
    let svg = dir.join("rollout.svg");
    std::fs::write(&svg, summary.svg()).with_context(|| format!("writing {}", svg.display()))?;
    let html = dir.join("report.html");
    std::fs::write(&html, summary.html()).with_context(|| format!("writing {}", html.display()))?;
    sayln!(
        "Report: {}, {} and {}",
        json.display(),
        svg.display(),
        html.display()
    );
    Ok(())
}

/// Serves the API over HTTP until Ctrl-C; virtual time then follows the wall clock.
async fn serve(outcome: &driftwood::demo::Outcome, pace: Pace) -> anyhow::Result<()> {
    if pace != Pace::Realtime {
        // From here on the cluster lives at wall-clock pace, so kubectl sees a steady cluster.
        tokio::time::resume();
    }
    let dir = std::env::temp_dir().join(format!("driftwood-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("kubeconfig");
    let server = outcome
        .embedded
        .cluster
        .serve_with_kubeconfig(&path)
        .await?;
    sayln!(
        "\nThe cluster is still up at {}. In another shell:",
        server.url()
    );
    sayln!("  export KUBECONFIG={}", path.display());
    sayln!("  kubectl get nodes,nodeclaims,pods");
    sayln!("Press Ctrl-C to stop.");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
