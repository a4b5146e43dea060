//! The walkthrough by hand with kubectl (a real client) against `driftwood sim serve`, in wall
//! time with short simulated delays: apply, `kubectl get nodes -l karpenter.sh/initialized=true`,
//! edit the class with `kubectl get ec2nodeclass ... -o yaml | sed ... | kubectl apply -f -` as
//! the older walkthrough does, and the node is replaced.

use super::blueprints;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// kubectl as installed by scripts/test (DRIFTWOOD_TEST_KUBECTL) or on PATH. A missing kubectl
/// fails the test: it is a required tool, never a skip.
pub fn kubectl_binary() -> String {
    let candidate =
        std::env::var("DRIFTWOOD_TEST_KUBECTL").unwrap_or_else(|_| "kubectl".to_string());
    let found = Command::new(&candidate)
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "kubectl is required by this test (scripts/test installs it); {candidate:?} did not run"
    );
    candidate
}

/// A child process killed when dropped.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let mut child = Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write");
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("kubectl finishes");
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `kubectl args` until `done(output)`, at most `limit` of wall time.
fn wait_for(
    kubeconfig: &Path,
    args: &[&str],
    limit: Duration,
    done: impl Fn(&str) -> bool,
) -> String {
    let start = Instant::now();
    loop {
        let out = kubectl(kubeconfig, args, None);
        if done(&out) {
            return out;
        }
        assert!(
            start.elapsed() < limit,
            "kubectl {args:?} never satisfied the condition within {limit:?}; last output:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The simulated account's recommended AMI for `version` (`driftwood sim ssm get-parameter`).
pub fn ssm(version: &str, arch_path: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_driftwood"))
        .args(["sim", "ssm", "get-parameter", "--name"])
        .arg(format!(
            "/aws/service/eks/optimized-ami/{version}/{arch_path}/recommended/image_id"
        ))
        .args(["--query", "Parameter.Value", "--output", "text"])
        .output()
        .expect("driftwood runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn walkthrough_by_hand_with_kubectl_against_sim_serve() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_driftwood"))
        .args([
            "sim",
            "serve",
            "--port",
            "0",
            "--metrics-port",
            "0",
            "--instance-launch-seconds",
            "1",
            "--instance-termination-seconds",
            "1",
            "--node-ready-seconds",
            "1",
            "--log-level",
            "warn",
        ])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("sim serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let _server = Server(child);
    let mut lines = BufReader::new(stdout).lines();
    let mut metrics_url = None;
    let export = lines
        .by_ref()
        .map_while(Result::ok)
        .inspect(|l| {
            if let Some(url) = l
                .strip_prefix("metrics: ")
                .and_then(|r| r.split_whitespace().next())
            {
                metrics_url = Some(url.to_string());
            }
        })
        .find(|l| l.starts_with("export KUBECONFIG="))
        .expect("export line");
    let metrics_url = metrics_url.expect("a metrics line before the export line");
    // Keep reading what the server prints, so its stdout never closes under it.
    std::thread::spawn(move || lines.for_each(drop));
    assert!(
        export.ends_with(&kubeconfig.display().to_string()),
        "{export}"
    );

    // The walkthrough: fill the placeholders with sed-like replacement and apply.
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    let (amd, arm) = (
        ssm("1.29", "amazon-linux-2"),
        ssm("1.29", "amazon-linux-2-arm64"),
    );
    assert!(
        amd.starts_with("ami-") && arm.starts_with("ami-"),
        "{amd} {arm}"
    );
    for file in ["latest-current-ami.yaml", "workload.yaml"] {
        let text = std::fs::read_to_string(blueprints().join("update-nodes-with-drift").join(file))
            .unwrap();
        let filled = text
            .replace("<<CLUSTER_NAME>>", "driftwood-demo")
            .replace(
                "<<KARPENTER_NODE_IAM_ROLE_NAME>>",
                "KarpenterNodeRole-driftwood-demo",
            )
            .replace("<<AMD64PREVAMI>>", &amd)
            .replace("<<ARM64PREVAMI>>", &arm);
        std::fs::write(manifests.join(file), filled).unwrap();
    }
    let applied = kubectl(
        &kubeconfig,
        &["apply", "-f", manifests.to_str().unwrap()],
        None,
    );
    assert!(
        applied.contains("ec2nodeclass.karpenter.k8s.aws/latest-current-ami created"),
        "{applied}"
    );
    assert!(
        applied.contains("nodepool.karpenter.sh/latest-current-ami created"),
        "{applied}"
    );

    let nodes = wait_for(
        &kubeconfig,
        &["get", "nodes", "-l", "karpenter.sh/initialized=true"],
        Duration::from_secs(60),
        |o| o.contains(" Ready ") && o.contains("v1.29."),
    );
    assert!(nodes.starts_with("NAME"), "{nodes}");
    assert!(
        nodes
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .eq(["NAME", "STATUS", "ROLES", "AGE", "VERSION"]),
        "{nodes}"
    );
    let old_node = nodes
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    wait_for(
        &kubeconfig,
        &["get", "pods"],
        Duration::from_secs(60),
        |o| o.matches("1/1     Running").count() == 3,
    );

    let old_claim = kubectl(&kubeconfig, &["get", "nodeclaims", "-o", "name"], None)
        .trim()
        .trim_start_matches("nodeclaim.karpenter.sh/")
        .to_string();
    assert!(old_claim.starts_with("latest-current-ami-"), "{old_claim}");
    // Once registered, the NodeClaim's instance is tagged with its name and its Node's (the
    // last write to a settled NodeClaim: the preview below must leave it as it is).
    wait_for(
        &kubeconfig,
        &[
            "get",
            "nodeclaim",
            &old_claim,
            "-o",
            "jsonpath={.metadata.annotations.karpenter\\.k8s\\.aws/tagged}",
        ],
        Duration::from_secs(60),
        |o| o == "true",
    );

    // A PodDisruptionBudget that allows no eviction holds the rollout, so the drifted NodeClaim
    // stays to be described.
    let pdb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: hold\n  namespace: default\nspec:\n  maxUnavailable: 0\n  selector:\n    matchLabels:\n      app: latest-current-ami\n";
    kubectl(&kubeconfig, &["apply", "-f", "-"], Some(pdb));

    // The older walkthrough's edit: get the class as YAML, change the AMIs, apply it back.
    let (amd30, arm30) = (
        ssm("1.30", "amazon-linux-2"),
        ssm("1.30", "amazon-linux-2-arm64"),
    );
    let class = kubectl(
        &kubeconfig,
        &["get", "ec2nodeclass", "latest-current-ami", "-o", "yaml"],
        None,
    );
    assert!(class.contains(&amd), "{class}");
    let edited = class
        .replace(&amd, &amd30)
        .replace(&arm, &arm30)
        .replace("KubernetesVersion: \"1.31\"", "KubernetesVersion: \"1.32\"");
    // First previewed (as JSON): the node drifts, and the PDB at zero is named instead of an
    // ETA; the live cluster is left as it was.
    let change = dir.path().join("new-class.yaml");
    std::fs::write(&change, &edited).unwrap();
    let versions = |kind: &str| {
        kubectl(
            &kubeconfig,
            &[
                "get",
                kind,
                "-o",
                "jsonpath={.items[*].metadata.resourceVersion}",
            ],
            None,
        )
    };
    let before = (versions("ec2nodeclasses"), versions("nodeclaims"));
    let (code, said) = driftwood(
        &kubeconfig,
        &[
            "preview",
            "-f",
            change.to_str().unwrap(),
            "-o",
            "json",
            "--horizon",
            "30m",
        ],
    );
    assert_eq!(code, Some(0), "{said}");
    let predicted: serde_json::Value =
        serde_json::from_str(&said).unwrap_or_else(|e| panic!("{e}: {said}"));
    assert_eq!(predicted["drifted"], 1, "{said}");
    assert_eq!(
        predicted["nodes"][0]["nodeclaim"],
        old_claim.as_str(),
        "{said}"
    );
    // The edit changes a tag as well as the AMIs: static drift is named first, as Karpenter does.
    assert_eq!(predicted["nodes"][0]["reason"], "NodeClassDrift", "{said}");
    assert!(
        predicted["nodes"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("EC2NodeClass spec.tags changed")),
        "{said}"
    );
    assert_eq!(predicted["complete"], false, "{said}");
    assert!(predicted["eta_seconds"].is_null(), "{said}");
    assert!(
        predicted["no_eta_because"]
            .as_str()
            .is_some_and(|w| w.contains("pdb \"default/hold\"")),
        "{said}"
    );
    assert_eq!((versions("ec2nodeclasses"), versions("nodeclaims")), before);

    let out = kubectl(&kubeconfig, &["apply", "-f", "-"], Some(&edited));
    assert!(out.contains("configured"), "{out}");

    // `kubectl describe nodeclaim` lists driftwood's events for it (written through
    // events.k8s.io/v1, read by kubectl as core/v1 events): drift, and why it is held.
    let described = wait_for(
        &kubeconfig,
        &["describe", "nodeclaim", &old_claim],
        Duration::from_secs(60),
        |o| o.contains("DisruptionBlocked"),
    );
    let events = described
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Events section:\n{described}"));
    assert!(
        events
            .lines()
            .any(|l| l.contains("Drifted") && l.contains("karpenter")),
        "{described}"
    );
    assert!(
        events
            .lines()
            .any(|l| l.contains("DisruptionBlocked") && l.contains("pdb")),
        "{described}"
    );
    // The rollout as kubectl shows it (driftwood's columns on NodePools) and as `driftwood
    // rollout status` does: held by the PDB.
    let pools = wait_for(
        &kubeconfig,
        &["get", "nodepools"],
        Duration::from_secs(60),
        |o| o.contains("Blocked"),
    );
    assert!(
        pools.lines().next().unwrap().split_whitespace().eq([
            "NAME",
            "NODECLASS",
            "NODES",
            "READY",
            "AGE",
            "UP-TO-DATE",
            "DRIFTED",
            "DISRUPTING",
            "ROLLOUT"
        ]),
        "{pools}"
    );
    let row: Vec<&str> = pools.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[5..], ["0", "1", "0", "Blocked"], "{pools}");
    let (code, said) = driftwood(
        &kubeconfig,
        &[
            "rollout",
            "status",
            "nodepool/latest-current-ami",
            "--watch=false",
        ],
    );
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("Waiting for nodepool \"latest-current-ami\" rollout to finish (Blocked)")
            && said.contains("pdb \"default/hold\""),
        "{said}"
    );
    // Pause and resume with the CLI: an annotation kubectl sees, and the column follows.
    let (code, said) = driftwood(&kubeconfig, &["rollout", "pause", "np/latest-current-ami"]);
    assert_eq!(
        (code, said.trim()),
        (Some(0), "nodepool.karpenter.sh/latest-current-ami paused")
    );
    let annotation = kubectl(
        &kubeconfig,
        &[
            "get",
            "nodepool",
            "latest-current-ami",
            "-o",
            "jsonpath={.metadata.annotations.driftwood\\.sh/rollout-paused}",
        ],
        None,
    );
    assert_eq!(annotation, "true");
    wait_for(
        &kubeconfig,
        &["get", "nodepools"],
        Duration::from_secs(60),
        |o| o.contains("Paused"),
    );
    let (code, said) = driftwood(&kubeconfig, &["rollout", "resume", "latest-current-ami"]);
    assert_eq!(
        (code, said.trim()),
        (Some(0), "nodepool.karpenter.sh/latest-current-ami resumed")
    );
    wait_for(
        &kubeconfig,
        &["get", "nodepools"],
        Duration::from_secs(60),
        |o| o.contains("Blocked"),
    );
    let (code, said) = driftwood(&kubeconfig, &["rollout", "pause", "deployment/web"]);
    assert_eq!(code, Some(1));
    assert!(
        said.contains("\"deployment/web\" is not a NodePool"),
        "{said}"
    );
    kubectl(
        &kubeconfig,
        &["delete", "poddisruptionbudget", "hold"],
        None,
    );
    // Followed to the end: exits 0 once every node is up to date.
    let (code, said) = driftwood(
        &kubeconfig,
        &[
            "rollout",
            "status",
            "nodepool/latest-current-ami",
            "--timeout",
            "120s",
        ],
    );
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.lines().last().unwrap().starts_with(
            "nodepool \"latest-current-ami\" successfully rolled out: 1 of 1 nodes up to date"
        ),
        "{said}"
    );
    let pools = kubectl(&kubeconfig, &["get", "nodepools"], None);
    let row: Vec<&str> = pools.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[5..], ["1", "0", "0", "Complete"], "{pools}");
    // The class's side: its one node on its current hash and images.
    let classes = wait_for(
        &kubeconfig,
        &["get", "ec2nodeclasses"],
        Duration::from_secs(60),
        |o| {
            o.lines()
                .nth(1)
                .is_some_and(|l| l.split_whitespace().skip(3).eq(["1", "1", "0"]))
        },
    );
    assert!(
        classes.lines().next().unwrap().split_whitespace().eq([
            "NAME",
            "READY",
            "AGE",
            "NODES",
            "UP-TO-DATE",
            "DRIFTED"
        ]),
        "{classes}"
    );
    // As a kubectl plugin: the binary linked as kubectl-driftwood on PATH (README's install).
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_driftwood"),
        plugins.join("kubectl-driftwood"),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        plugins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(kubectl_binary())
        .args([
            "driftwood",
            "rollout",
            "status",
            "np/latest-current-ami",
            "--watch=false",
        ])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env("PATH", path)
        .output()
        .expect("kubectl runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("successfully rolled out"),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let nodes = wait_for(
        &kubeconfig,
        &["get", "nodes", "-l", "karpenter.sh/initialized=true"],
        Duration::from_secs(120),
        |o| o.contains("v1.30.") && !o.contains(&old_node),
    );
    assert_eq!(nodes.lines().count(), 2, "one node, on v1.30: {nodes}");
    wait_for(
        &kubeconfig,
        &["get", "pods", "-o", "wide"],
        Duration::from_secs(60),
        |o| o.matches(" Running ").count() == 3 && !o.contains(&old_node),
    );
    // driftwood's events (written through events.k8s.io/v1) in `kubectl get events` (core/v1),
    // about the replaced NodeClaim, in the order they happened.
    let events = kubectl(
        &kubeconfig,
        &[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.kind=NodeClaim,involvedObject.name={old_claim}"),
            "-o",
            "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}",
        ],
        None,
    );
    let reasons: Vec<&str> = events.lines().collect();
    for reason in ["Drifted", "DisruptionLaunching", "DisruptionTerminating"] {
        assert!(reasons.contains(&reason), "{reason} missing in {reasons:?}");
    }
    // Karpenter's metric names on the controllers' /metrics.
    let metrics = http_get(&metrics_url);
    // The old node's capacity type (spot or on-demand, whichever was cheapest) labels it.
    assert!(
        metrics.lines().any(|l| l.starts_with(
            "karpenter_nodeclaims_disrupted_total{reason=\"drifted\",nodepool=\"latest-current-ami\",capacity_type=\""
        ) && l.ends_with("\",consolidation_policy=\"\",termination_mode=\"graceful\"} 1")),
        "{metrics}"
    );
    assert!(metrics.contains("karpenter_nodeclaims_created_total{reason=\"disruption\",nodepool=\"latest-current-ami\",min_values_relaxed=\"false\"} 1"), "{metrics}");
}

/// `driftwood ARGS` with `--kubeconfig`: its exit code and what it printed (stdout, then
/// stderr).
fn driftwood(kubeconfig: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_driftwood"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .expect("driftwood runs");
    let mut said = String::from_utf8_lossy(&out.stdout).into_owned();
    said.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code(), said)
}

/// A plain HTTP/1.0 GET of `url` (http://host:port/path), returning the body.
fn http_get(url: &str) -> String {
    use std::io::Read;
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let mut stream = std::net::TcpStream::connect(host).expect("connect to metrics");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").expect("send request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read response");
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or(response)
}
