//! The driftwood command line: a node lifecycle controller for Kubernetes that speaks
//! Karpenter's v1 API.

mod cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// driftwood keeps a cluster's nodes in line with the NodePool and EC2NodeClass they were made
/// from: it notices drifted nodes, says exactly what drifted, and replaces them without
/// downtime, never faster than the NodePool's disruption budgets allow.
///
/// It reads Karpenter's v1 resources (karpenter.sh/v1 NodePool and NodeClaim,
/// karpenter.k8s.aws/v1 EC2NodeClass), so existing manifests apply unchanged.
#[derive(Parser, Debug)]
#[command(
    name = "driftwood",
    version,
    about,
    long_about,
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Print the CustomResourceDefinitions of NodePool, NodeClaim and EC2NodeClass as YAML.
    ///
    /// Install them with `driftwood crds | kubectl apply -f -`. With --out-dir, write one file
    /// per CRD (this is how deploy/crds/ is generated).
    Crds(cmd::crds::Args),
    /// Check NodePool, NodeClaim and EC2NodeClass manifests against driftwood's (Karpenter's)
    /// rules without a cluster.
    ///
    /// Reads files, folders and `-` (stdin) as `kubectl apply -f` does. Prints `ok` or every
    /// broken rule per object, naming the field; other kinds are passed over with a note.
    /// Exits 1 when any object is invalid.
    Validate(cmd::validate::Args),
    /// Explain a NodeClaim or Node: is it drifted, exactly which fields changed, and what
    /// blocks its replacement now (budget and its window, PDB, do-not-disrupt, pods that fit
    /// nowhere, a replacement in flight). Uses KUBECONFIG like kubectl.
    Explain(cmd::explain::Args),
    /// Run the controllers against a real cluster (leader election, /metrics, /healthz).
    Controller(cmd::controller::Args),
    /// Steer and follow a NodePool's rollout: pause, resume, status (like kubectl rollout).
    /// Uses KUBECONFIG like kubectl.
    #[command(subcommand)]
    Rollout(cmd::rollout::RolloutCommand),
    /// Preview a change before applying it: which nodes drift and why, the waves, what holds
    /// nodes back, the ETA and the fewest ready pods per workload, found by applying the change
    /// to a copy of the cluster on the embedded one. Reads the cluster (lists only) and writes
    /// nothing to it or the cloud. Uses KUBECONFIG like kubectl.
    #[cfg(feature = "embedded")]
    Preview(cmd::preview::Args),
    /// The embedded cluster's tools.
    #[cfg(feature = "embedded")]
    #[command(subcommand)]
    Sim(cmd::sim::SimCommand),
    /// Run the "update nodes using drift" walkthrough (or another scenario) on an embedded
    /// cluster with a simulated EC2 and the real controllers, on a virtual clock.
    ///
    /// Prints `kubectl get pods/nodes` before and after, the controllers' log lines, and a
    /// timeline of the rollout; exits 1 if the rollout did not finish or availability fell
    /// below what the scenario allows. `--list` shows the bundled scenarios.
    #[cfg(feature = "embedded")]
    Demo(cmd::demo::Args),
    /// Run a scenario under many fault seeds (cloud capacity and errors, API conflicts and
    /// dropped watches, controller crashes and failovers, nodes that never become Ready, PDBs
    /// that block, ...) and check the safety invariants every virtual second.
    ///
    /// Prints a line per failing seed (with the command that replays it) and a summary: faults
    /// injected by kind, violations by invariant, `N passed, M failed`. Exits 1 on any
    /// violation.
    #[cfg(feature = "embedded")]
    Chaos(cmd::chaos::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crds(args) => cmd::crds::run(&args),
        Command::Validate(args) => cmd::validate::run(&args),
        Command::Explain(args) => block_on(cmd::explain::run(&args)),
        Command::Controller(args) => block_on(cmd::controller::run(&args)),
        Command::Rollout(command) => block_on(cmd::rollout::run(&command)),
        #[cfg(feature = "embedded")]
        Command::Preview(args) => cmd::preview::run(&args),
        #[cfg(feature = "embedded")]
        Command::Sim(command) => cmd::sim::run(&command),
        #[cfg(feature = "embedded")]
        Command::Demo(args) => cmd::demo::run_command(&args),
        #[cfg(feature = "embedded")]
        Command::Chaos(args) => cmd::chaos::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs an async command on a multi-threaded tokio runtime.
fn block_on<F: std::future::Future<Output = anyhow::Result<ExitCode>>>(
    future: F,
) -> anyhow::Result<ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(future)
}
