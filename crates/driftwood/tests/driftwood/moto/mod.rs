//! The aws-sdk-rust adapter against moto's server: the provider through the real SDK
//! (provider), the controllers on the embedded cluster launching into moto with sim kubelets
//! joining Nodes for moto's instances (walkthrough), and the `driftwood controller` binary
//! (controller_process). moto is required: scripts/test installs `moto[server]`; a missing
//! moto fails these tests, it never skips them.

pub mod controller_process;
mod fleet;
mod interruption;
mod preview;
mod provider;
pub mod walkthrough;

use driftwood_aws::AwsPorts;
use driftwood_cloud_aws::{SdkOptions, load_sdk_config, sdk_ports};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

/// Where nothing listens (port 1 is reserved and closed on loopback).
pub const CLOSED_PORT: &str = "http://127.0.0.1:1";

/// What the server script seeded.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Seed {
    pub endpoint: String,
    pub region: String,
    pub cluster: String,
    pub vpc: String,
    /// Zone → the tagged subnet in it.
    pub subnets: BTreeMap<String, String>,
    pub untagged_subnet: String,
    pub security_group: String,
    pub role: String,
    /// AMI name → id.
    pub amis: BTreeMap<String, String>,
}

impl Seed {
    pub fn ami(&self, name: &str) -> String {
        self.amis
            .get(name)
            .unwrap_or_else(|| panic!("moto has no AMI named {name}: {:?}", self.amis))
            .clone()
    }
}

/// A running moto server; dropping it stops the server.
pub struct Moto {
    child: Child,
    stdin: Option<ChildStdin>,
    pub seed: Seed,
}

impl Drop for Moto {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Python with moto, as scripts/test installed it (DRIFTWOOD_TEST_PYTHON) or python3.
pub fn python() -> String {
    let python = std::env::var("DRIFTWOOD_TEST_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let found = Command::new(&python)
        .args(["-c", "import moto.server, boto3"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "moto's server is required by this test (scripts/test installs it with \
         `pip install \"moto[server]\"`); `{python} -c 'import moto.server'` failed"
    );
    python
}

impl Moto {
    /// Starts moto seeded for `cluster` in us-west-2.
    pub fn start(cluster: &str) -> Self {
        // RUST_LOG=debug shows the SDK's requests and retries in a failing test's output.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/driftwood/moto/moto_server.py");
        let mut child = Command::new(python())
            .arg(&script)
            .arg(cluster)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if std::env::var_os("DRIFTWOOD_TEST_MOTO_LOG").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("moto_server.py starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let seed: Seed = match serde_json::from_str(&line) {
            Ok(seed) => seed,
            Err(e) => {
                let _ = child.kill();
                panic!(
                    "moto_server.py did not print its seed ({e}): {line:?}; \
                     rerun with DRIFTWOOD_TEST_MOTO_LOG=1 to see its output"
                );
            }
        };
        Self { child, stdin, seed }
    }

    /// SDK options pointing at this server with fake credentials. moto has no Pricing API (a
    /// GetProducts request never gets an answer from it), so pricing points at a closed port,
    /// as in a VPC without the Pricing endpoint: the provider then estimates on-demand prices.
    /// Attempts may take long: the end-to-end test runs on paused tokio time, which jumps
    /// ahead (paced) while moto answers.
    pub fn sdk_options(&self) -> SdkOptions {
        SdkOptions {
            region: Some(self.seed.region.clone()),
            endpoint_url: Some(self.seed.endpoint.clone()),
            max_attempts: 3,
            initial_backoff: Duration::from_millis(100),
            attempt_timeout: Duration::from_secs(600),
            static_credentials: Some(("AKIDMOTO".to_string(), "moto".to_string())),
            pricing_endpoint_url: Some(CLOSED_PORT.to_string()),
            ..SdkOptions::default()
        }
    }

    /// The cloud ports over the real SDK, pointed at this server.
    pub async fn ports(&self) -> AwsPorts {
        let options = self.sdk_options();
        sdk_ports(
            &load_sdk_config(&options).await.unwrap(),
            options.pricing_endpoint_url.as_deref(),
            &driftwood_cloud_aws::SdkMetrics::default(),
        )
    }

    /// A raw EC2 client for what the ports do not do (moto fix-ups, checks).
    pub async fn ec2(&self) -> driftwood_cloud_aws::aws_sdk_ec2::Client {
        driftwood_cloud_aws::aws_sdk_ec2::Client::new(
            &load_sdk_config(&self.sdk_options()).await.unwrap(),
        )
    }
}

/// moto ignores the launch template's security groups on CreateFleet (EC2 applies them; moto
/// leaves on-demand instances without any and gives spot ones the VPC's default group): set
/// `group` on each instance of `cluster` that has other groups, as EC2 would have.
pub async fn apply_launch_template_security_groups(
    ec2: &driftwood_cloud_aws::aws_sdk_ec2::Client,
    cluster: &str,
    group: &str,
) -> Vec<String> {
    use driftwood_cloud_aws::aws_sdk_ec2::types::Filter;
    let out = ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag:eks:eks-cluster-name")
                .values(cluster)
                .build(),
        )
        .filters(
            Filter::builder()
                .name("instance-state-name")
                .values("pending")
                .values("running")
                .build(),
        )
        .send()
        .await
        .unwrap();
    let mut fixed = Vec::new();
    for instance in out.reservations().iter().flat_map(|r| r.instances()) {
        let groups: Vec<_> = instance
            .security_groups()
            .iter()
            .filter_map(|g| g.group_id())
            .collect();
        if groups != [group] {
            let id = instance.instance_id().unwrap().to_string();
            ec2.modify_instance_attribute()
                .instance_id(&id)
                .groups(group)
                .send()
                .await
                .unwrap();
            fixed.push(id);
        }
    }
    fixed
}
