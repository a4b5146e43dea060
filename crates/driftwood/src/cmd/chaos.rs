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
