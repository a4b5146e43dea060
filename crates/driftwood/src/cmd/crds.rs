//! `driftwood crds`: print or write the generated CRDs.

use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write one YAML file per CRD into this folder instead of printing them.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    match &args.out_dir {
        None => print!("{}", driftwood_api::crd::crds_yaml()?),
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            for (name, yaml) in driftwood_api::crd::crd_files()? {
                let path = dir.join(name);
                std::fs::write(&path, yaml)
                    .with_context(|| format!("writing {}", path.display()))?;
                println!("wrote {}", path.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
