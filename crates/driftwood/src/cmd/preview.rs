//! `driftwood preview -f CHANGE.yaml`: what a change to NodePools or EC2NodeClasses will do to
//! the live fleet, found by applying it to a copy of the cluster on the embedded one. Reads the
//! cluster (lists only); writes nothing to it or to the cloud.

use super::rollout::{Connection, client, humantime_duration};
use anyhow::Context as _;
use driftwood::preview::live::LiveCluster;
use driftwood::preview::{PreviewOptions, preview_on_copy};
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The change: files with the new NodePools / EC2NodeClasses (as for kubectl apply -f);
    /// `-` reads stdin.
    #[arg(short = 'f', long = "filename", required = true)]
    files: Vec<String>,
    /// When to apply the change (RFC 3339, e.g. 2026-11-27T02:00:00Z); budget schedules are
    /// evaluated against it. Default: now.
    #[arg(long)]
    at: Option<jiff::Timestamp>,
    /// The longest to follow the rollout on the copy after the change.
    #[arg(long, default_value = "24h", value_parser = humantime_duration)]
    horizon: Duration,
    /// Output: text or json.
    #[arg(short, long, default_value = "text")]
    output: String,
    /// Also write preview.json, preview.txt, timeline.svg and preview.html into this directory.
    #[arg(long)]
    report: Option<std::path::PathBuf>,
    /// What a name the change selects resolves to in the copy: NAME=ID or NAME=ID:ARCH, NAME
    /// an alias (al2023@v20251120), an SSM parameter path or an image name (repeatable).
    #[arg(long = "ami")]
    amis: Vec<driftwood::preview::cloud::AmiOverride>,
    /// Resolve what the change selects (images, subnets, security groups) through AWS, with
    /// read-only Describe/Get calls; region and credentials as the AWS CLI finds them.
    #[cfg(feature = "aws")]
    #[arg(long)]
    aws: bool,
    /// AWS's endpoint, for an emulator (with --aws).
    #[cfg(feature = "aws")]
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    aws_endpoint_url: Option<String>,
    /// The copy's controllers' log lines on stderr at this level (error, warn, info, debug).
    #[arg(long, env = "LOG_LEVEL", default_value = "error")]
    log_level: String,
    /// The cluster name the copy's instances are tagged with.
    #[arg(long, default_value = "preview")]
    cluster_name: String,
    #[command(flatten)]
    connection: Connection,
}

fn read_change(files: &[String]) -> anyhow::Result<String> {
    let mut text = String::new();
    for file in files {
        let part = if file == "-" {
            std::io::read_to_string(std::io::stdin()).context("reading the change from stdin")?
        } else {
            std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?
        };
        text.push_str(&part);
        text.push_str("\n---\n");
    }
    Ok(text)
}

/// With `--aws`: the change's classes resolved through AWS (read-only).
#[cfg(feature = "aws")]
async fn resolve_through_aws(
    args: &Args,
    classes: &[driftwood_api::EC2NodeClass],
    kubernetes_version: &str,
) -> anyhow::Result<Option<driftwood::preview::aws_read::Answers>> {
    use driftwood_cloud_aws::{SdkOptions, load_sdk_config, sdk_ports};
    if !args.aws || classes.is_empty() {
        return Ok(None);
    }
    let sdk = load_sdk_config(&SdkOptions {
        endpoint_url: args.aws_endpoint_url.clone(),
        ..SdkOptions::default()
    })
    .await?;
    // A one-off read: its request metrics are not exported.
    let ports = sdk_ports(&sdk, None, &driftwood_cloud_aws::SdkMetrics::default());
    let answers = driftwood::preview::aws_read::resolve(
        &ports,
        classes,
        kubernetes_version,
        jiff::Timestamp::now(),
    )
    .await
    .map_err(|e| {
        anyhow::anyhow!(
            "resolving the change through AWS: {}: {}",
            e.code,
            e.message
        )
    })?;
    Ok(Some(answers))
}

#[cfg(not(feature = "aws"))]
async fn resolve_through_aws(
    _args: &Args,
    _classes: &[driftwood_api::EC2NodeClass],
    _kubernetes_version: &str,
) -> anyhow::Result<Option<driftwood::preview::aws_read::Answers>> {
    Ok(None)
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if args.output != "text" && args.output != "json" {
        anyhow::bail!("--output {:?}: want text or json", args.output);
    }
    super::logging::init(super::logging::LogFormat::Text, &args.log_level);
    let change = read_change(&args.files)?;
    // The live cluster is read with real time (its requests have real timeouts); the copy then
    // runs on paused time, as fast as the machine goes.
    let classes = driftwood::preview::change_classes(&change)?;
    let (live, aws_answers) = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let client = client(&args.connection).await?;
            let live = LiveCluster::read(&client).await?;
            let answers = resolve_through_aws(args, &classes, &live.kubernetes_version).await?;
            anyhow::Ok((live, answers))
        })?;
    let options = PreviewOptions {
        at: args.at,
        horizon: args.horizon,
        cluster_name: args.cluster_name.clone(),
        amis: args.amis.clone(),
        aws_answers,
        ..PreviewOptions::default()
    };
    let at = options.at.unwrap_or_else(jiff::Timestamp::now);
    let options = PreviewOptions {
        at: Some(at),
        ..options
    };
    let preview = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()?
        .block_on(preview_on_copy(&live, &change, &args.files, &options))?;
    if args.output == "json" {
        println!("{}", serde_json::to_string_pretty(&preview)?);
    } else {
        print!("{}", preview.text());
    }
    if let Some(dir) = &args.report {
        preview
            .write_report(dir)
            .with_context(|| format!("writing the report to {}", dir.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
