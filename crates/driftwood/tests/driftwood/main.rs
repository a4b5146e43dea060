//! driftwood's end-to-end tests, in one test binary: the offline commands (crds, validate,
//! demo) run as a process, and the controllers on the embedded cluster (e2e).

#![allow(clippy::unwrap_used)] // test helpers may unwrap

mod chaos;
mod crds;
mod demo;
pub mod deploy;
pub mod e2e;
mod helm;
pub mod kubectl;
#[cfg(feature = "aws")]
pub mod moto;
#[cfg(feature = "aws")]
mod production;
mod prometheus_client;
mod public_manifests;
mod scenarios;
mod stability;
mod validate;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the built binary with `args` and optional stdin.
pub fn driftwood(args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut command = Command::new(env!("CARGO_BIN_EXE_driftwood"));
    command
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("driftwood runs");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("driftwood finishes")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// ../shared/fixtures/blueprints beside the checkout, as CI lays it out.
pub fn blueprints() -> PathBuf {
    repo_root().join("../shared/fixtures/blueprints")
}

/// Fills the walkthrough's placeholders as its instructions do with sed.
pub fn fill_placeholders(text: &str) -> String {
    text.replace("<<CLUSTER_NAME>>", "demo")
        .replace("<<KARPENTER_NODE_IAM_ROLE_NAME>>", "KarpenterNodeRole-demo")
        .replace("<<AMD64PREVAMI>>", "ami-0a1b2c3d4e5f60718")
        .replace("<<ARM64PREVAMI>>", "ami-0f1e2d3c4b5a69788")
}
