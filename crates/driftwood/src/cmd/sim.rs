//! `driftwood sim ...`: the embedded cluster. `sim serve` runs it (with the controllers) for
//! kubectl; `sim ssm get-parameter` reads the simulated SSM public parameters (the
//! walkthrough's `aws ssm get-parameter` step, offline).

use driftwood_cloud::ManualClock;
use driftwood_sim_aws::{SimAws, SimConfig};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Subcommand, Debug)]
pub enum SimCommand {
    /// Run the embedded cluster (API server, scheduler, kubelets, workload controllers,
    /// simulated EC2) with driftwood's controllers, and serve it to kubectl.
    ///
    /// Prints an `export KUBECONFIG=...` line; follow the walkthrough with kubectl from
    /// another terminal. Time follows the wall clock. Stops on Ctrl-C or SIGTERM.
    Serve(ServeArgs),
    /// The simulated AWS Systems Manager Parameter Store.
    #[command(subcommand)]
    Ssm(SsmCommand),
}

#[derive(clap::Subcommand, Debug)]
pub enum SsmCommand {
    /// Print a parameter, as `aws ssm get-parameter` does.
    ///
    /// Example (the walkthrough's step, offline):
    /// driftwood sim ssm get-parameter --name /aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id --query Parameter.Value --output text
    GetParameter(GetParameterArgs),
}

#[derive(clap::Args, Debug)]
pub struct GetParameterArgs {
    /// The parameter's name.
    #[arg(long)]
    name: String,
    /// Only `Parameter.Value` is supported (prints the value alone).
    #[arg(long)]
    query: Option<String>,
    /// json (default) or text.
    #[arg(long, default_value = "json")]
    output: String,
    /// The simulation's seed (AMI ids depend on it; the demo uses 1).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The simulated cluster's name.
    #[arg(long, default_value = "driftwood-demo")]
    cluster_name: String,
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Listen on another address (e.g. 0.0.0.0); only when asked.
    #[arg(long, default_value = "127.0.0.1")]
    address: std::net::IpAddr,
    /// Where to write the kubeconfig.
    #[arg(long, default_value = "driftwood-sim.kubeconfig")]
    kubeconfig: std::path::PathBuf,
    /// The cluster's Kubernetes minor version (AMIs and kubelets follow it).
    #[arg(long, default_value = "1.29")]
    kubernetes_version: String,
    /// The simulated cluster's name (discovery tags, node role).
    #[arg(long, default_value = "driftwood-demo")]
    cluster_name: String,
    /// Seed of the simulated AWS account.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run only the cluster, without driftwood's controllers.
    #[arg(long)]
    no_controller: bool,
    /// Feature gates of the controllers, e.g. Drift=true.
    #[arg(long, env = "FEATURE_GATES", default_value = "")]
    feature_gates: String,
    /// Log level (error, warn, info, debug).
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    log_level: String,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: super::logging::LogFormat,
    /// Seconds from launch until a simulated instance runs (EC2 takes about 30).
    #[arg(long, default_value_t = 30)]
    instance_launch_seconds: u64,
    /// Seconds from termination until a simulated instance is gone.
    #[arg(long, default_value_t = 30)]
    instance_termination_seconds: u64,
    /// Seconds from a Node joining until it is Ready.
    #[arg(long, default_value_t = 5)]
    node_ready_seconds: u64,
    /// Serve the controllers' /metrics, /healthz and /readyz on this port of 127.0.0.1
    /// (0 picks a free one; printed at start).
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Port on the same address for the simulated AWS account in AWS's wire protocols (0 picks
    /// a free one): point `driftwood controller`, the AWS CLI or an SDK at it with
    /// `AWS_ENDPOINT_URL` (any credentials are accepted).
    #[arg(long, default_value_t = 0)]
    aws_port: u16,
    /// Write every write request the API server receives (time, User-Agent, verb, path,
    /// status) to this file, one JSON line each.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<std::path::PathBuf>,
    /// Run cluster time X times faster than the wall clock (timestamps run ahead of your
    /// machine's clock, so kubectl's AGE column may read <invalid>). Default: wall time.
    #[arg(long, value_name = "X")]
    speed: Option<f64>,
}

pub fn run(command: &SimCommand) -> anyhow::Result<ExitCode> {
    match command {
        SimCommand::Ssm(SsmCommand::GetParameter(args)) => get_parameter(args),
        SimCommand::Serve(args) => match args.speed {
            None => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()?;
                let result = runtime.block_on(serve(args));
                // Bounded: a task still busy after the cluster is gone must not hold the exit.
                runtime.shutdown_timeout(std::time::Duration::from_secs(2));
                result
            }
            Some(speed) if speed.is_finite() && speed > 0.0 => {
                // Paused time on one thread: time jumps ahead whenever everything is idle, and
                // a pacer holds the thread 1/X wall seconds after each cluster second.
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .start_paused(true)
                    .build()?;
                runtime.block_on(async {
                    let pace = std::time::Duration::from_secs_f64(1.0 / speed);
                    let pacer = tokio::spawn(async move {
                        loop {
                            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                            std::thread::sleep(pace);
                        }
                    });
                    let result = serve(args).await;
                    pacer.abort();
                    result
                })
            }
            Some(speed) => anyhow::bail!("--speed {speed}: must be a positive number"),
        },
    }
}

async fn serve(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    super::logging::init(args.log_format, &args.log_level);
    let options = driftwood_sim::SimClusterOptions {
        kubernetes_version: args.kubernetes_version.clone(),
        cluster_name: args.cluster_name.clone(),
        seed: args.seed,
        start_time: k8s_openapi::jiff::Timestamp::now(),
        machine_launch_delay: std::time::Duration::from_secs(args.instance_launch_seconds),
        machine_termination_delay: std::time::Duration::from_secs(
            args.instance_termination_seconds,
        ),
        node_ready_delay: std::time::Duration::from_secs(args.node_ready_seconds),
        ..Default::default()
    };
    let settings = driftwood_controller::Settings {
        feature_gates: driftwood_controller::FeatureGates::parse(&args.feature_gates)?,
        ..Default::default()
    };
    settings.feature_gates.warn_if_drift_disabled();
    let mut embedded = driftwood::embedded::Embedded::start(options, settings).await?;
    if args.no_controller {
        embedded.kill_controllers();
    }
    let address = std::net::SocketAddr::new(args.address, args.port);
    let server = match &args.audit_log {
        Some(path) => {
            let audit =
                driftwood_sim::apiserver::audit::AuditLog::create(path, embedded.cluster.clock())?;
            embedded
                .cluster
                .api_server()
                .serve_http_audited(address, audit)
                .await?
        }
        None => embedded.cluster.serve_http(address).await?,
    };
    let aws = driftwood::aws_endpoint::serve(
        embedded.cluster.aws(),
        std::net::SocketAddr::new(args.address, args.aws_port),
    )
    .await?;
    let kubeconfig = std::path::absolute(&args.kubeconfig)?;
    driftwood_sim::apiserver::http::write_kubeconfig(&kubeconfig, &server.url())?;
    // Write errors are ignored: the cluster keeps serving if whoever started us closed stdout.
    let mut out = std::io::stdout();
    if let (Some(port), Some(ctx)) = (args.metrics_port, embedded.ctx()) {
        let address = std::net::SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), port);
        let (bound, _task) = driftwood_controller::health::serve(
            address,
            driftwood_controller::health::Probes {
                state: ctx.state.clone(),
                metrics: ctx.metrics.clone(),
                liveness: ctx.liveness.clone(),
                clock: ctx.clock.clone(),
            },
        )
        .await?;
        let _ = writeln!(
            out,
            "metrics: http://{bound}/metrics (also /healthz, /readyz)"
        );
    }
    let _ = writeln!(
        out,
        "driftwood sim serve: embedded cluster {:?} (Kubernetes {}) at {}{}",
        args.cluster_name,
        args.kubernetes_version,
        server.url(),
        if args.no_controller {
            ", controllers off"
        } else {
            ", driftwood controllers running"
        }
    );
    let _ = writeln!(out, "export KUBECONFIG={}", kubeconfig.display());
    let _ = writeln!(out, "export AWS_ENDPOINT_URL={}", aws.url());
    let region = embedded.cluster.aws().config().region.clone();
    let _ = writeln!(out, "export AWS_REGION={region}");
    // The AWS CLI v1 and boto3 read the region from AWS_DEFAULT_REGION.
    let _ = writeln!(out, "export AWS_DEFAULT_REGION={region}");
    let _ = writeln!(
        out,
        "(the walkthrough's AMIs: driftwood sim ssm get-parameter --seed {} --name /aws/service/eks/optimized-ami/{}/amazon-linux-2/recommended/image_id --query Parameter.Value --output text)",
        args.seed, args.kubernetes_version
    );
    let _ = out.flush();
    super::signal::wait_for_shutdown().await;
    eprintln!("driftwood sim serve: stopping");
    server.shutdown();
    drop(aws);
    Ok(ExitCode::SUCCESS)
}

fn get_parameter(args: &GetParameterArgs) -> anyhow::Result<ExitCode> {
    let clock = Arc::new(ManualClock::new(k8s_openapi::jiff::Timestamp::now()));
    let aws = SimAws::new(SimConfig::new(&args.cluster_name, args.seed), clock);
    let parameter = match aws.ssm_get_parameter(&args.name) {
        Ok(p) => p,
        Err(error) => {
            eprintln!(
                "An error occurred ({}) when calling the GetParameter operation: {}",
                error.code, error.message
            );
            return Ok(ExitCode::from(254));
        }
    };
    match (args.query.as_deref(), args.output.as_str()) {
        (Some("Parameter.Value"), "text") => println!("{}", parameter.value),
        (Some("Parameter.Value"), _) => println!("{}", serde_json::Value::String(parameter.value)),
        (Some(other), _) => {
            anyhow::bail!("--query {other:?} is not supported (only Parameter.Value)")
        }
        (None, "text") => println!(
            "{}\t{}\t{}\t{}",
            parameter.name, parameter.type_, parameter.value, parameter.version
        ),
        (None, _) => {
            let json = serde_json::json!({"Parameter": {
                "Name": parameter.name, "Type": parameter.type_, "Value": parameter.value, "Version": parameter.version
            }});
            println!("{}", serde_json::to_string_pretty(&json)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}
