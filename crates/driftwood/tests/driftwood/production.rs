//! The production binary as deployed, end to end, and process-level chaos on it: several
//! unmodified `driftwood controller` processes — the kube client from KUBECONFIG, the AWS SDK
//! from AWS_ENDPOINT_URL with any credentials — against `driftwood sim serve --no-controller`,
//! which serves the API server over HTTP and the simulated account in AWS's wire protocols
//! (with AWS's rate limits and eventual consistency on). The walkthrough's rollout completes
//! while the leader is killed with SIGKILL and its successor frozen with SIGSTOP past its lease
//! and thawed; the API server's audit log (every write, by the client's User-Agent, which
//! names the replica) shows that no replica wrote after another had taken the lease over.

use crate::blueprints;
use crate::kubectl::{Server, kubectl, ssm};
use crate::moto::controller_process::{eventually, free_port};
use driftwood_sim::apiserver::audit::{AuditEntry, read_audit_log};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A short lease so failovers take seconds (renew deadline 4 s, retry 0.8 s).
const LEASE_SECONDS: &str = "6";

struct SimServe {
    _server: Server,
    kubeconfig: PathBuf,
    aws_endpoint: String,
    region: String,
    audit: PathBuf,
}

fn sim_serve(dir: &Path) -> SimServe {
    let kubeconfig = dir.join("kubeconfig");
    let audit = dir.join("audit.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_driftwood"))
        .args([
            "sim",
            "serve",
            "--no-controller",
            "--port",
            "0",
            "--aws-port",
            "0",
        ])
        .args([
            "--instance-launch-seconds",
            "2",
            "--instance-termination-seconds",
            "1",
        ])
        .args(["--node-ready-seconds", "1", "--log-level", "warn"])
        .arg("--audit-log")
        .arg(&audit)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("sim serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let server = Server(child);
    let mut lines = BufReader::new(stdout).lines();
    let mut exports = std::collections::BTreeMap::new();
    for line in lines.by_ref().map_while(Result::ok) {
        if let Some((name, value)) = line.strip_prefix("export ").and_then(|l| l.split_once('=')) {
            exports.insert(name.to_string(), value.to_string());
        }
        if exports.contains_key("AWS_REGION") {
            break;
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    assert!(
        exports.contains_key("KUBECONFIG") && exports.contains_key("AWS_ENDPOINT_URL"),
        "sim serve printed {exports:?}"
    );
    SimServe {
        _server: server,
        kubeconfig,
        aws_endpoint: exports["AWS_ENDPOINT_URL"].clone(),
        region: exports["AWS_REGION"].clone(),
        audit,
    }
}

/// One `driftwood controller` replica, as a Deployment's pod runs it.
struct Replica {
    identity: String,
    process: Server,
    log: PathBuf,
}

impl Replica {
    fn start(sim: &SimServe, dir: &Path, identity: &str) -> Self {
        let log = dir.join(format!("{identity}.log"));
        let process = Command::new(env!("CARGO_BIN_EXE_driftwood"))
            .args(["controller", "--lease-duration-seconds", LEASE_SECONDS])
            .env_clear()
            .env("KUBECONFIG", &sim.kubeconfig)
            .env("CLUSTER_NAME", "driftwood-demo")
            .env(
                "CLUSTER_ENDPOINT",
                "https://driftwood-demo.example.eks.amazonaws.com",
            )
            .env("CLUSTER_CA_BUNDLE", "Y2E=")
            .env("SYSTEM_NAMESPACE", "kube-system")
            .env("POD_NAME", identity)
            .env("METRICS_PORT", free_port().to_string())
            .env("HEALTH_PROBE_PORT", free_port().to_string())
            .env("LOG_LEVEL", "info")
            .env("AWS_REGION", &sim.region)
            .env("AWS_ENDPOINT_URL", &sim.aws_endpoint)
            .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
            .env("AWS_SECRET_ACCESS_KEY", "any")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("driftwood controller starts");
        Self {
            identity: identity.to_string(),
            process: Server(process),
            log,
        }
    }

    fn pid(&self) -> String {
        self.process.0.id().to_string()
    }

    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.pid()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill {signal} {}", self.identity);
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The replica's writes as the API server audited them.
    fn writes<'a>(&self, audit: &'a [AuditEntry]) -> Vec<&'a AuditEntry> {
        let tag = format!("({})", self.identity);
        audit
            .iter()
            .filter(|e| e.user_agent.ends_with(&tag))
            .collect()
    }
}

fn lease_holder(kubeconfig: &Path) -> String {
    kubectl(
        kubeconfig,
        &[
            "-n",
            "kube-system",
            "get",
            "lease",
            "karpenter-leader-election",
            "-o",
            "jsonpath={.spec.holderIdentity}",
            "--ignore-not-found",
        ],
        None,
    )
}

fn walkthrough(version: &str) -> String {
    let mut text = String::new();
    for file in ["latest-current-ami.yaml", "workload.yaml"] {
        let raw = std::fs::read_to_string(blueprints().join("update-nodes-with-drift").join(file))
            .unwrap();
        text.push_str(
            &raw.replace("<<CLUSTER_NAME>>", "driftwood-demo")
                .replace(
                    "<<KARPENTER_NODE_IAM_ROLE_NAME>>",
                    "KarpenterNodeRole-driftwood-demo",
                )
                .replace("<<AMD64PREVAMI>>", &ssm(version, "amazon-linux-2"))
                .replace("<<ARM64PREVAMI>>", &ssm(version, "amazon-linux-2-arm64")),
        );
        text.push_str("\n---\n");
    }
    text
}

fn running_pods_on(kubeconfig: &Path, kubelet_version: &str) -> usize {
    let nodes = kubectl(
        kubeconfig,
        &[
            "get",
            "nodes",
            "-l",
            "karpenter.sh/initialized=true",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.status.nodeInfo.kubeletVersion}{\"\\n\"}{end}",
        ],
        None,
    );
    let on_version: Vec<&str> = nodes
        .lines()
        .filter(|l| l.ends_with(kubelet_version) || l.contains(&format!(" v{kubelet_version}")))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let pods = kubectl(
        kubeconfig,
        &[
            "get",
            "pods",
            "-l",
            "app=latest-current-ami",
            "-o",
            "jsonpath={range .items[*]}{.spec.nodeName} {.status.phase}{\"\\n\"}{end}",
        ],
        None,
    );
    pods.lines()
        .filter(|l| l.ends_with(" Running"))
        .filter(|l| on_version.iter().any(|n| l.starts_with(&format!("{n} "))))
        .count()
}

const HOLD_PDB: &str = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: hold\n  namespace: default\nspec:\n  maxUnavailable: 0\n  selector:\n    matchLabels:\n      app: latest-current-ami\n";

#[test]
fn the_production_binary_rolls_out_through_sigkill_and_sigstop_of_its_leaders() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_serve(dir.path());
    let kubeconfig = sim.kubeconfig.clone();
    kubectl(
        &kubeconfig,
        &["apply", "-f", "-"],
        Some(&walkthrough("1.29")),
    );

    let mut replicas = vec![
        Replica::start(&sim, dir.path(), "driftwood-a"),
        Replica::start(&sim, dir.path(), "driftwood-b"),
    ];
    let logs = |replicas: &[Replica]| {
        replicas
            .iter()
            .map(|r| format!("--- {}:\n{}", r.identity, r.log()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    eventually(
        "3 pods running on a 1.29 node",
        Duration::from_secs(120),
        || (running_pods_on(&kubeconfig, "1.29") == 3).then_some(()),
    );
    let first = lease_holder(&kubeconfig);
    assert!(
        replicas.iter().any(|r| r.identity == first),
        "holder {first:?}\n{}",
        logs(&replicas)
    );

    // The change, held by a PDB that allows nothing: the leader marks the node drifted and
    // keeps passing over it while the replicas are killed and frozen.
    kubectl(&kubeconfig, &["apply", "-f", "-"], Some(HOLD_PDB));
    kubectl(
        &kubeconfig,
        &["apply", "-f", "-"],
        Some(&walkthrough("1.30")),
    );
    eventually(
        "the old NodeClaim marked drifted",
        Duration::from_secs(60),
        || {
            let drifted = kubectl(
                &kubeconfig,
                &[
                    "get",
                    "nodeclaims",
                    "-o",
                    "jsonpath={.items[*].status.conditions[?(@.type==\"Drifted\")].status}",
                ],
                None,
            );
            drifted.contains("True").then_some(())
        },
    );

    // SIGKILL the leader; a new replica starts, as the Deployment would; a standby takes over.
    let killed = replicas.iter().position(|r| r.identity == first).unwrap();
    replicas[killed].signal("-KILL");
    replicas.push(Replica::start(&sim, dir.path(), "driftwood-c"));
    let second = eventually(
        "a new leader after SIGKILL",
        Duration::from_secs(60),
        || {
            let holder = lease_holder(&kubeconfig);
            (holder != first && !holder.is_empty()).then_some(holder)
        },
    );

    // SIGSTOP the new leader for three leases; the remaining replica takes over meanwhile.
    let frozen = replicas.iter().position(|r| r.identity == second).unwrap();
    replicas[frozen].signal("-STOP");
    let third = eventually(
        "a leader while the last is frozen",
        Duration::from_secs(60),
        || {
            let holder = lease_holder(&kubeconfig);
            (holder != second && holder != first && !holder.is_empty()).then_some(holder)
        },
    );
    // Keep it frozen until the new leader has renewed twice (its term is well under way).
    let renew_time = || {
        kubectl(
            &kubeconfig,
            &[
                "-n",
                "kube-system",
                "get",
                "lease",
                "karpenter-leader-election",
                "-o",
                "jsonpath={.spec.renewTime}",
            ],
            None,
        )
    };
    let mut renewals = Vec::new();
    eventually(
        "two renewals by the new leader",
        Duration::from_secs(30),
        || {
            let now = renew_time();
            if renewals.last() != Some(&now) {
                renewals.push(now);
            }
            (renewals.len() >= 3).then_some(())
        },
    );
    replicas[frozen].signal("-CONT");
    // Thawed, it finds its lease gone and exits, as controller-runtime does.
    let status = eventually(
        "the thawed replica to exit",
        Duration::from_secs(30),
        || replicas[frozen].process.0.try_wait().unwrap(),
    );
    assert!(!status.success(), "{status:?}");
    assert!(
        replicas[frozen].log().contains("leader election lost"),
        "{}",
        logs(&replicas)
    );

    // Release the hold: the rollout completes under the third leader.
    kubectl(&kubeconfig, &["delete", "pdb", "hold"], None);
    eventually(
        "3 pods running on a 1.30 node and no 1.29 node",
        Duration::from_secs(180),
        || {
            let old = running_pods_on(&kubeconfig, "1.29");
            (running_pods_on(&kubeconfig, "1.30") == 3 && old == 0).then_some(())
        },
    );

    // The audit: nothing written by a replica after another had taken the lease — its first
    // successful lease write — except its own lease renewal the API server refused (409).
    let audit = read_audit_log(&sim.audit).unwrap();
    let at = |e: &AuditEntry| -> jiff::Timestamp { e.time.parse().expect("audit time") };
    let took_over = |identity: &str| -> jiff::Timestamp {
        let replica = replicas.iter().find(|r| r.identity == identity).unwrap();
        replica
            .writes(&audit)
            .into_iter()
            .find(|e| e.path.contains("/leases") && e.status < 300)
            .map(at)
            .unwrap_or_else(|| panic!("{identity} never wrote the lease"))
    };
    for (old, new) in [(&first, &second), (&second, &third)] {
        let from = took_over(new);
        let replica = replicas.iter().find(|r| &r.identity == old).unwrap();
        let late: Vec<&AuditEntry> = replica
            .writes(&audit)
            .into_iter()
            .filter(|e| at(e) > from && e.status < 300)
            .collect();
        assert!(
            late.is_empty(),
            "{old} wrote after {new} took the lease at {from}: {late:?}"
        );
    }
    // The thawed replica's renewal reached the API server and was refused; nothing else did.
    let thawed_late: Vec<&AuditEntry> = replicas[frozen]
        .writes(&audit)
        .into_iter()
        .filter(|e| at(e) > took_over(&third))
        .collect();
    assert!(
        thawed_late
            .iter()
            .all(|e| e.path.contains("/leases") && e.status == 409),
        "{thawed_late:?}"
    );
    // The last leader's writes are in the audit under its name (the rollout's taint, evictions
    // and deletions among them).
    let third_writes = replicas
        .iter()
        .find(|r| r.identity == third)
        .unwrap()
        .writes(&audit);
    assert!(
        third_writes.iter().any(|e| e.path.contains("/eviction")),
        "{third_writes:?}"
    );

    // SIGTERM on the last leader: a clean exit that releases the lease.
    let last = replicas.iter().position(|r| r.identity == third).unwrap();
    replicas[last].signal("-TERM");
    let status = eventually("the last leader to exit", Duration::from_secs(60), || {
        replicas[last].process.0.try_wait().unwrap()
    });
    assert!(status.success(), "{status:?}\n{}", logs(&replicas));
    assert_eq!(lease_holder(&kubeconfig), "", "released on SIGTERM");
}

/// The fast slice of `driftwood chaos --processes`: one seed of process faults over the
/// walkthrough's rollout, every named invariant and single-writer checked.
#[test]
fn process_chaos_seed_passes_its_invariants() {
    use driftwood::chaos::processes::{ProcessChaosConfig, run_seed};
    let dir = tempfile::tempdir().unwrap();
    let outcome = run_seed(&ProcessChaosConfig {
        binary: PathBuf::from(env!("CARGO_BIN_EXE_driftwood")),
        seed: 3,
        window: Duration::from_secs(45),
        settle: Duration::from_secs(180),
        work_dir: dir.path().to_path_buf(),
    })
    .unwrap();
    assert!(
        outcome.injected.len() >= 3,
        "too few faults: {:?}",
        outcome.injected
    );
    assert!(
        outcome.passed(),
        "{:?}\nfaults: {:?}\nlogs kept in {}",
        outcome.violations,
        outcome.injected,
        dir.keep().display()
    );
    assert!(outcome.rollout_seconds.is_some());
}

/// boto3 (botocore: Python's AWS SDK, which the AWS CLI is built on) against `sim serve`'s AWS
/// endpoint: a client nobody here wrote reads the simulated account's subnets, instance types,
/// images and SSM parameters, and gets IAM's error shape.
#[test]
fn boto3_reads_the_simulated_account_over_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_serve(dir.path());
    let python = std::env::var("DRIFTWOOD_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = r#"
import boto3, botocore, json
ec2 = boto3.client("ec2")
ssm = boto3.client("ssm")
iam = boto3.client("iam")
subnets = ec2.describe_subnets(Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": ["driftwood-demo"]}])["Subnets"]
types = ec2.describe_instance_types(InstanceTypes=["m5.large"])["InstanceTypes"]
images = ec2.describe_images(Owners=["amazon"], Filters=[{"Name": "name", "Values": ["amazon-eks-node-1.29-*"]}])["Images"]
ami = ssm.get_parameter(Name="/aws/service/eks/optimized-ami/1.29/amazon-linux-2/recommended/image_id")["Parameter"]["Value"]
try:
    iam.get_instance_profile(InstanceProfileName="missing")
    code = None
except botocore.exceptions.ClientError as e:
    code = e.response["Error"]["Code"]
print(json.dumps({"zones": sorted(s["AvailabilityZone"] for s in subnets),
                  "m5": [types[0]["VCpuInfo"]["DefaultVCpus"], types[0]["MemoryInfo"]["SizeInMiB"]],
                  "ami_listed": ami in [i["ImageId"] for i in images], "iam": code}))
"#;
    let out = Command::new(python)
        .args(["-c", script])
        .env("AWS_ENDPOINT_URL", &sim.aws_endpoint)
        .env("AWS_DEFAULT_REGION", &sim.region)
        .env("AWS_ACCESS_KEY_ID", "x")
        .env("AWS_SECRET_ACCESS_KEY", "x")
        .output()
        .expect("python runs (scripts/test installs boto3 with moto)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        answer,
        serde_json::json!({
            "zones": ["us-west-2a", "us-west-2b", "us-west-2c"],
            "m5": [2, 8192],
            "ami_listed": true,
            "iam": "NoSuchEntity"
        })
    );
}
