//! `driftwood controller`: runs the controllers against a real cluster and AWS — the kube
//! client from the standard config (in-cluster or kubeconfig), the aws-sdk-rust ports from the
//! standard chain, leader election on a Lease, /metrics, /healthz and /readyz.

use driftwood_controller::{FeatureGates, Settings};
use std::process::ExitCode;

use super::logging::LogFormat;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The EKS cluster's name (tags, discovery, user data).
    #[arg(long, env = "CLUSTER_NAME")]
    pub cluster_name: String,
    /// The cluster's API endpoint nodes join (`aws eks describe-cluster --query
    /// cluster.endpoint`).
    #[arg(long, env = "CLUSTER_ENDPOINT", default_value = "")]
    pub cluster_endpoint: String,
    /// The cluster's CA bundle (base64 PEM) written into user data; read from the service
    /// account's ca.crt when empty.
    #[arg(long, env = "CLUSTER_CA_BUNDLE", default_value = "")]
    pub cluster_ca_bundle: String,
    /// The cluster DNS service IP written into user data.
    #[arg(long, env = "CLUSTER_DNS_IP", default_value = "10.100.0.10")]
    pub cluster_dns_ip: String,
    /// Feature gates, e.g. Drift=true.
    #[arg(long, env = "FEATURE_GATES", default_value = "")]
    pub feature_gates: String,
    /// The Prometheus HTTP API (plain http, e.g. http://prometheus-server.monitoring.svc) that
    /// rollout policies' query gates (driftwood.sh/rollout-gate-query) are asked.
    #[arg(long, env = "PROMETHEUS_URL")]
    pub prometheus_url: Option<String>,
    /// Find and count the instances EC2's status checks and scheduled events report unhealthy
    /// (karpenter_interruption_instance_status_unhealthy_total, a log line each) without
    /// draining or replacing them (Karpenter's InstanceStatusDryRun).
    #[arg(long, env = "INSTANCE_STATUS_DRY_RUN", default_value_t = false)]
    pub instance_status_dry_run: bool,
    /// Port of /metrics.
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    pub metrics_port: u16,
    /// Port of /healthz and /readyz.
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    pub health_probe_port: u16,
    /// Address /metrics listens on (default every interface, so Prometheus can scrape the pod
    /// IP; 127.0.0.1 keeps it to the pod, e.g. behind an authenticating sidecar).
    #[arg(long, env = "METRICS_ADDRESS", default_value = "0.0.0.0")]
    pub metrics_address: std::net::IpAddr,
    /// Address /healthz and /readyz listen on (default every interface, for the kubelet's
    /// probes).
    #[arg(long, env = "HEALTH_PROBE_ADDRESS", default_value = "0.0.0.0")]
    pub health_probe_address: std::net::IpAddr,
    /// Namespace of the leader-election Lease.
    #[arg(long, env = "SYSTEM_NAMESPACE", default_value = "kube-system")]
    pub leader_election_namespace: String,
    /// This replica's name in the Lease (the pod name in a Deployment).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Seconds a leader's Lease lasts without renewal before a standby takes over (the leader
    /// stops writing at 2/3 of it without a successful renewal, controller-runtime's
    /// proportions: 15 s lease, 10 s renew deadline, 2 s retry period).
    #[arg(long, default_value_t = 15)]
    pub lease_duration_seconds: u64,
    /// The cloud provider (aws).
    #[arg(long, default_value = "aws")]
    pub cloud_provider: String,
    /// The AWS region (default: the SDK's chain: AWS_REGION, profile, IMDS).
    #[arg(long, env = "AWS_REGION")]
    pub region: Option<String>,
    /// One endpoint for every AWS service (default: the SDK's chain, which also reads
    /// AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_EC2/_SSM/_IAM/_PRICING).
    #[arg(long)]
    pub aws_endpoint_url: Option<String>,
    /// The cluster has no route to the AWS Pricing API (a private VPC): use the built-in
    /// on-demand prices and never call it (Karpenter's ISOLATED_VPC).
    #[arg(long, env = "ISOLATED_VPC", default_value_t = false)]
    pub isolated_vpc: bool,
    /// The SQS queue (its name) EventBridge sends spot interruption warnings, rebalance
    /// recommendations, scheduled maintenance and instance state changes to (Karpenter's
    /// INTERRUPTION_QUEUE). Unset: interruption handling is off.
    #[arg(long, env = "INTERRUPTION_QUEUE", default_value = "")]
    pub interruption_queue: String,
    /// Attempts per AWS call; throttling and transient errors are retried with backoff.
    #[arg(long, env = "AWS_MAX_ATTEMPTS", default_value_t = 8)]
    pub aws_max_attempts: u32,
    /// Log level (error, warn, info, debug) or a tracing filter.
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Log line format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
}

pub async fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let gates = FeatureGates::parse(&args.feature_gates)?;
    if let Some(url) = &args.prometheus_url {
        driftwood_controller::prometheus::Prometheus::new(url)
            .map_err(|e| anyhow::anyhow!("--prometheus-url: {e}"))?;
    }
    let settings = Settings {
        cluster_name: args.cluster_name.clone(),
        feature_gates: gates,
        prometheus_url: args.prometheus_url.clone(),
        instance_status_dry_run: args.instance_status_dry_run,
        ..Settings::default()
    };
    match args.cloud_provider.as_str() {
        "aws" => run_aws(args, settings).await,
        other => anyhow::bail!("unknown --cloud-provider {other:?} (supported: aws)"),
    }
}

#[cfg(not(feature = "aws"))]
async fn run_aws(_args: &Args, _settings: Settings) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "this driftwood was built without the `aws` feature (the aws-sdk-rust adapter); rebuild with \
         default features to run `driftwood controller`, or use `driftwood sim serve`"
    )
}

#[cfg(feature = "aws")]
async fn run_aws(args: &Args, settings: Settings) -> anyhow::Result<ExitCode> {
    aws::run(args, settings).await
}

#[cfg(feature = "aws")]
mod aws {
    use super::Args;
    use anyhow::Context as _;
    use driftwood_aws::AwsSettings;
    use driftwood_cloud::{Clock, SystemClock};
    use driftwood_cloud_aws::{SdkMetrics, SdkOptions, load_sdk_config, sdk_ports};
    use driftwood_controller::client_metrics::{ClientMetrics, ClientMetricsLayer};
    use driftwood_controller::fence::{Fence, FenceLayer};
    use driftwood_controller::leader::{Election, Timings};
    use driftwood_controller::metrics::MetricSources;
    use driftwood_controller::runtime::Controllers;
    use driftwood_controller::{Process, ProcessConfig, Settings};
    use std::net::SocketAddr;
    use std::process::ExitCode;
    use std::sync::{Arc, Mutex, PoisonError};
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    /// How long controllers get to finish the pass under way when they stop.
    const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

    /// Where a pod's service account CA lives.
    const SERVICE_ACCOUNT_CA: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

    /// `major.minor` of the API server's version (`v1.31.2-eks-7f9249a` → `1.31`).
    fn minor_version(info: &k8s_openapi::apimachinery::pkg::version::Info) -> String {
        let minor: String = info
            .minor
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        format!("{}.{minor}", info.major)
    }

    fn ca_bundle(configured: &str) -> String {
        use base64::Engine as _;
        if !configured.is_empty() {
            return configured.to_string();
        }
        match std::fs::read(SERVICE_ACCOUNT_CA) {
            Ok(pem) => base64::engine::general_purpose::STANDARD.encode(pem),
            Err(_) => {
                tracing::warn!(
                    path = SERVICE_ACCOUNT_CA,
                    "no cluster CA bundle: set CLUSTER_CA_BUNDLE; nodes' user data will lack it"
                );
                String::new()
            }
        }
    }

    pub async fn run(args: &Args, mut settings: Settings) -> anyhow::Result<ExitCode> {
        super::super::logging::init(args.log_format, &args.log_level);
        settings.feature_gates.warn_if_drift_disabled();
        anyhow::ensure!(
            !args.cluster_name.is_empty(),
            "CLUSTER_NAME (--cluster-name) is empty: set it to the EKS cluster's name"
        );
        anyhow::ensure!(
            !args.cluster_endpoint.is_empty(),
            "CLUSTER_ENDPOINT (--cluster-endpoint) is empty: set it to the cluster's API endpoint \
             (aws eks describe-cluster --name {} --query cluster.endpoint)",
            args.cluster_name
        );
        let identity = args.identity.clone().unwrap_or_else(|| {
            std::env::var("HOSTNAME")
                .unwrap_or_else(|_| format!("driftwood-{}", std::process::id()))
        });
        // Two clients over one configuration: the election's, and the controllers', whose
        // writes pass the leader fence (refused once this replica does not hold the lease).
        // Both name this replica in their User-Agent, so the API server's audit log says which
        // replica wrote what.
        let mut kube_config = kube::Config::infer().await.context(
            "connecting to the Kubernetes API: no client configuration (in-cluster or KUBECONFIG)",
        )?;
        if let Ok(agent) = http::HeaderValue::from_str(&format!(
            "driftwood-controller/{} ({identity})",
            env!("CARGO_PKG_VERSION")
        )) {
            kube_config.headers.push((http::header::USER_AGENT, agent));
        }
        let election_client = kube::Client::try_from(kube_config.clone())
            .context("connecting to the Kubernetes API (in-cluster config or KUBECONFIG)")?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let fence = Fence::elected(clock.clone());
        let client_metrics = ClientMetrics::default();
        let client = kube::client::ClientBuilder::try_from(kube_config)
            .context("connecting to the Kubernetes API (in-cluster config or KUBECONFIG)")?
            .with_layer(&FenceLayer::new(fence.clone()))
            .with_layer(&ClientMetricsLayer::new(client_metrics.clone()))
            .build();
        let version = client
            .apiserver_version()
            .await
            .context("reading the Kubernetes API server's version")?;
        let kubernetes_version = minor_version(&version);

        let sdk = load_sdk_config(&SdkOptions {
            region: args.region.clone(),
            endpoint_url: args.aws_endpoint_url.clone(),
            max_attempts: args.aws_max_attempts,
            ..SdkOptions::default()
        })
        .await?;
        let region = sdk.region().map(ToString::to_string).unwrap_or_default();
        let sdk_metrics = SdkMetrics::default();
        let ports = sdk_ports(&sdk, None, &sdk_metrics);
        let mut aws_settings = AwsSettings::new(&args.cluster_name, &region, &kubernetes_version);
        aws_settings
            .cluster_endpoint
            .clone_from(&args.cluster_endpoint);
        aws_settings.cluster_ca_bundle = ca_bundle(&args.cluster_ca_bundle);
        settings
            .cluster_ca_bundle
            .clone_from(&aws_settings.cluster_ca_bundle);
        aws_settings.cluster_dns_ip.clone_from(&args.cluster_dns_ip);
        aws_settings.isolated_vpc = args.isolated_vpc;
        aws_settings.interruption_queue =
            Some(args.interruption_queue.clone()).filter(|q| !q.is_empty());

        let seed = u64::try_from(jiff::Timestamp::now().as_nanosecond()).unwrap_or(0)
            ^ u64::from(std::process::id());
        let process = Process::start(ProcessConfig {
            client: client.clone(),
            clock: clock.clone(),
            ports,
            aws: aws_settings,
            settings,
            name_seed: seed,
            fence: fence.clone(),
            metric_sources: MetricSources {
                client: client_metrics,
                external: vec![Arc::new(move |registry| sdk_metrics.register(registry))],
            },
        });
        let ctx = process.ctx.clone();
        let state = ctx.state.clone();
        let metrics = ctx.metrics.clone();

        let probes = driftwood_controller::health::Probes {
            state: state.clone(),
            metrics: metrics.clone(),
            liveness: ctx.liveness.clone(),
            clock: clock.clone(),
        };
        let (metrics_addr, metrics_task) = driftwood_controller::health::serve(
            SocketAddr::new(args.metrics_address, args.metrics_port),
            probes.clone(),
        )
        .await
        .with_context(|| {
            format!(
                "serving /metrics on {}:{}",
                args.metrics_address, args.metrics_port
            )
        })?;
        let (health_addr, health_task) = driftwood_controller::health::serve(
            SocketAddr::new(args.health_probe_address, args.health_probe_port),
            probes.clone(),
        )
        .await
        .with_context(|| {
            format!(
                "serving /healthz on {}:{}",
                args.health_probe_address, args.health_probe_port
            )
        })?;

        tracing::info!(
            cluster = %args.cluster_name,
            region = %region,
            kubernetes_version = %kubernetes_version,
            identity = %identity,
            metrics = %metrics_addr,
            health = %health_addr,
            "starting driftwood controller"
        );
        let controllers: Arc<Mutex<Option<Controllers>>> = Arc::default();
        let slot = controllers.clone();
        let election_ctx = ctx.clone();
        let timings = Timings::for_lease(Duration::from_secs(args.lease_duration_seconds.max(2)));
        let stop_election = CancellationToken::new();
        let election = tokio::spawn(driftwood_controller::leader::run_election(
            Election {
                client: election_client,
                namespace: args.leader_election_namespace.clone(),
                identity,
                clock,
                timings,
                fence,
                slowpath: ctx.metrics.leader_slowpath(),
            },
            stop_election.clone(),
            move |leading| {
                if !leading {
                    // The fence already refuses every write. Like controller-runtime, exit at
                    // once: a restarted process starts from the API server's state as a
                    // standby, and nothing of this term's passes can go on writing.
                    tracing::error!(
                        lease = driftwood_controller::leader::LEASE_NAME,
                        "leader election lost; exiting"
                    );
                    std::process::exit(1);
                }
                let mut running = slot.lock().unwrap_or_else(PoisonError::into_inner);
                tracing::info!("acquired the leader lease; starting the controllers");
                *running = Some(driftwood_controller::runtime::spawn_controllers(
                    &election_ctx,
                ));
            },
        ));

        super::super::signal::wait_for_shutdown().await;
        tracing::info!("shutting down");
        let running = controllers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(running) = running {
            running.stop(SHUTDOWN_GRACE).await;
        }
        // Release the lease so a standby takes over at its next try (Karpenter's
        // LeaderElectionReleaseOnCancel), not after a whole lease.
        stop_election.cancel();
        if let Err(error) = election.await {
            tracing::warn!(
                lease = driftwood_controller::leader::LEASE_NAME,
                %error,
                "the leader election task ended abnormally"
            );
        }
        drop(process);
        metrics_task.abort();
        health_task.abort();
        Ok(ExitCode::SUCCESS)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn kubernetes_minor_version_from_the_server_version() {
            let info = k8s_openapi::apimachinery::pkg::version::Info {
                major: "1".into(),
                minor: "31+".into(),
                ..Default::default()
            };
            assert_eq!(minor_version(&info), "1.31");
        }
    }
}
