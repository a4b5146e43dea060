//! `driftwood controller`: runs the controllers against a real cluster.

use driftwood_controller::{FeatureGates, Settings};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The EKS cluster's name (tags, discovery, user data).
    #[arg(long, env = "CLUSTER_NAME")]
    cluster_name: String,
    /// The cluster's API endpoint nodes join (discovered when unset).
    #[arg(long, env = "CLUSTER_ENDPOINT")]
    cluster_endpoint: Option<String>,
    /// Feature gates, e.g. Drift=true.
    #[arg(long, env = "FEATURE_GATES", default_value = "")]
    feature_gates: String,
    /// Port of /metrics.
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    metrics_port: u16,
    /// Port of /healthz and /readyz.
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    health_probe_port: u16,
    /// Namespace of the leader-election Lease.
    #[arg(long, env = "SYSTEM_NAMESPACE", default_value = "kube-system")]
    leader_election_namespace: String,
    /// The cloud provider (aws).
    #[arg(long, default_value = "aws")]
    cloud_provider: String,
}

pub async fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let gates = FeatureGates::parse(&args.feature_gates)?;
    let _settings = Settings {
        cluster_name: args.cluster_name.clone(),
        feature_gates: gates,
        ..Settings::default()
    };
    match args.cloud_provider.as_str() {
        "aws" => anyhow::bail!(
            "the aws-sdk-rust adapter for the EC2/SSM/IAM ports is not built yet, so `driftwood controller` cannot \
             reach AWS; use `driftwood sim serve` to run the controllers on the embedded cluster with a simulated EC2"
        ),
        other => anyhow::bail!("unknown --cloud-provider {other:?} (supported: aws)"),
    }
}
