//! `driftwood rollout pause|resume|status nodepool/NAME`: steer a NodePool's rollout and follow
//! it as `kubectl rollout` does for a Deployment, against any cluster the kubeconfig reaches.

use anyhow::Context as _;
use driftwood::rollout::{RolloutError, clear_halt, current, nodepool_name, set_paused};
use driftwood_api::NodePool;
use kube::api::Api;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Subcommand, Debug)]
pub enum RolloutCommand {
    /// Pause the rollout: no new disruption starts in the NodePool (commands in flight
    /// finish, drift marking goes on). Sets the annotation driftwood.sh/rollout-paused=true.
    Pause(Target),
    /// Resume a paused rollout (removes the annotation), or one its rollout policy halted on a
    /// failed health gate (clears the halt; the wave soaks again).
    Resume(Target),
    /// Print the rollout's progress; with --watch (the default) follow it until it completes
    /// (exit 0) or --timeout passes (exit 1). With --watch=false print it once: exit 0 when
    /// complete, 1 otherwise.
    Status(StatusArgs),
}

/// The cluster to talk to, as kubectl takes it.
#[derive(clap::Args, Debug)]
pub struct Connection {
    /// Path to the kubeconfig (default: KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, global = true)]
    kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    context: Option<String>,
    /// The namespace for namespaced reads (pods, PDBs, events), as kubectl takes it; NodePools,
    /// NodeClaims and EC2NodeClasses are cluster-scoped.
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct Target {
    /// nodepool/NAME (also np/NAME, or NAME).
    target: String,
    #[command(flatten)]
    connection: Connection,
}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// nodepool/NAME (also np/NAME, or NAME).
    target: String,
    /// Follow the rollout until it completes.
    #[arg(short, long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    watch: bool,
    /// Give up watching after this long (e.g. 30m); 0 waits for ever.
    #[arg(long, default_value = "0s", value_parser = humantime_duration)]
    timeout: Duration,
    #[command(flatten)]
    connection: Connection,
}

pub fn humantime_duration(text: &str) -> Result<Duration, String> {
    let parsed: jiff::SignedDuration = text
        .parse::<jiff::Span>()
        .map_err(|e| format!("{text:?} is not a duration like 90s or 30m: {e}"))
        .and_then(|span| {
            jiff::SignedDuration::try_from(span).map_err(|e| format!("{text:?}: {e}"))
        })?;
    Duration::try_from(parsed).map_err(|_| format!("{text:?} is negative"))
}

pub async fn client(connection: &Connection) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context: connection.context.clone(),
        ..Default::default()
    };
    let mut config = match &connection.kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &options).await?
        }
        None if connection.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer()
            .await
            .context("connecting to the cluster (KUBECONFIG or in-cluster)")?,
    };
    if let Some(namespace) = &connection.namespace {
        config.default_namespace.clone_from(namespace);
    }
    Ok(kube::Client::try_from(config)?)
}

pub async fn run(command: &RolloutCommand) -> anyhow::Result<ExitCode> {
    match command {
        RolloutCommand::Pause(target) | RolloutCommand::Resume(target) => {
            let paused = matches!(command, RolloutCommand::Pause(_));
            let name = nodepool_name(&target.target)?;
            let api: Api<NodePool> = Api::all(client(&target.connection).await?);
            set_paused(&api, name, paused).await?;
            if paused {
                println!("nodepool.karpenter.sh/{name} paused");
            } else {
                match clear_halt(&api, name).await? {
                    Some(halt) => println!(
                        "nodepool.karpenter.sh/{name} resumed: the halt of wave {} (health gate {}) is cleared and the wave soaks again",
                        halt.wave + 1,
                        halt.gate
                    ),
                    None => println!("nodepool.karpenter.sh/{name} resumed"),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        RolloutCommand::Status(args) => status(args).await,
    }
}

/// How often `--watch` reads the NodePool again.
const WATCH_EVERY: Duration = Duration::from_secs(2);

async fn status(args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let name = nodepool_name(&args.target)?;
    let api: Api<NodePool> = Api::all(client(&args.connection).await?);
    let started = tokio::time::Instant::now();
    let mut printed = String::new();
    loop {
        let progress = match current(&api, name).await {
            // Not written yet: while watching, the controller may still write it.
            Err(RolloutError::NoStatus(_))
                if args.watch && started.elapsed() < WATCH_EVERY * 15 =>
            {
                None
            }
            other => Some(other?),
        };
        if let Some(progress) = progress {
            if progress.line != printed {
                println!("{}", progress.line);
                printed = progress.line.clone();
            }
            if progress.complete {
                return Ok(ExitCode::SUCCESS);
            }
            if !args.watch {
                return Ok(ExitCode::FAILURE);
            }
        }
        if !args.timeout.is_zero() && started.elapsed() >= args.timeout {
            eprintln!(
                "error: timed out after {:?} waiting for nodepool {name:?} to roll out",
                args.timeout
            );
            return Ok(ExitCode::FAILURE);
        }
        tokio::time::sleep(WATCH_EVERY).await;
    }
}
