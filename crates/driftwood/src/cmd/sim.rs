//! `driftwood sim ...`: the embedded cluster's tools. `sim ssm get-parameter` reads the
//! simulated SSM public parameters (the walkthrough's `aws ssm get-parameter` step, offline).

use driftwood_cloud::ManualClock;
use driftwood_sim_aws::{SimAws, SimConfig};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Subcommand, Debug)]
pub enum SimCommand {
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

pub fn run(command: &SimCommand) -> anyhow::Result<ExitCode> {
    match command {
        SimCommand::Ssm(SsmCommand::GetParameter(args)) => get_parameter(args),
    }
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
