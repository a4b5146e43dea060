//! The `driftwood controller` binary as deployed: the kube client from KUBECONFIG against
//! `driftwood sim serve --no-controller`, the AWS SDK from the standard environment
//! (AWS_REGION, AWS_ENDPOINT_URL, IRSA's role and token file, nothing else) against moto. It
//! takes the leader Lease, serves /readyz and /metrics, resolves the EC2NodeClass from moto,
//! launches a NodeClaim's instance into moto, and exits 0 on SIGTERM.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::Moto;
use crate::kubectl::{Server, kubectl};

/// A port free on loopback now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn http_get(port: u16, path: &str) -> Option<String> {
    http_get_accepting(port, path, None)
}

/// GET `path` with an `Accept` header when given; the whole response, headers and body.
fn http_get_accepting(port: u16, path: &str, accept: Option<&str>) -> Option<String> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n{accept}\r\n").as_bytes())
        .ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    Some(out)
}

/// The response's Content-Type and body.
fn content_type_and_body(response: &str) -> (String, String) {
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((response, ""));
    let content_type = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    (content_type, body.to_string())
}

/// `name type` of every family of a /metrics body as Python's `prometheus_client` parses it
/// (its Prometheus text parser, or its OpenMetrics parser), sorted by name.
fn python_metric_families(body: &str, openmetrics: bool) -> Vec<String> {
    crate::prometheus_client::python_families(body, openmetrics)
        .into_iter()
        .map(|(name, (kind, _, _))| format!("{name} {kind}"))
        .collect()
}

/// The leader Lease's holder (empty when it is released or does not exist yet).
fn lease_holder(kubeconfig: &std::path::Path) -> String {
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

/// Polls `check` every 200 ms of wall time until it returns Some, at most `limit`.
pub fn eventually<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_controller_binary_runs_against_a_cluster_and_moto() {
    let moto = Moto::start("demo");
    let seed = moto.seed.clone();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");

    let _sim = crate::deploy::sim_serve(&kubeconfig, &["--no-controller"]);

    let values = [
        ("<<CLUSTER_NAME>>", seed.cluster.clone()),
        ("<<KARPENTER_NODE_IAM_ROLE_NAME>>", seed.role.clone()),
        (
            "<<AMD64PREVAMI>>",
            seed.ami("amazon-eks-node-1.29-v20240807"),
        ),
        (
            "<<ARM64PREVAMI>>",
            seed.ami("amazon-eks-arm64-node-1.29-v20240807"),
        ),
    ];
    let fill = |path: &str| {
        let mut text = std::fs::read_to_string(crate::blueprints().join(path)).unwrap();
        for (k, v) in &values {
            text = text.replace(k, v);
        }
        text
    };
    kubectl(
        &kubeconfig,
        &["apply", "-f", "-"],
        Some(&fill("update-nodes-with-drift/latest-current-ami.yaml")),
    );

    let token = dir.path().join("token");
    std::fs::write(
        &token,
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a3ViZS1zeXN0ZW06ZHJpZnR3b29kIn0.c2ln",
    )
    .unwrap();
    let metrics_port = free_port();
    let health_port = free_port();
    let log = dir.path().join("controller.log");
    let controller = Command::new(env!("CARGO_BIN_EXE_driftwood"))
        .arg("controller")
        .env_clear()
        .env("KUBECONFIG", &kubeconfig)
        .env("CLUSTER_NAME", &seed.cluster)
        .env("CLUSTER_ENDPOINT", "https://demo.example.eks.amazonaws.com")
        .env("CLUSTER_CA_BUNDLE", "Y2E=")
        .env("FEATURE_GATES", "Drift=true")
        .env("SYSTEM_NAMESPACE", "kube-system")
        .env("POD_NAME", "driftwood-7d9c-x2")
        .env("METRICS_PORT", metrics_port.to_string())
        .env("HEALTH_PROBE_PORT", health_port.to_string())
        .args(["--metrics-address", "127.0.0.1"])
        .args(["--health-probe-address", "127.0.0.1"])
        .env("LOG_LEVEL", "info")
        .env("AWS_REGION", &seed.region)
        .env("AWS_ENDPOINT_URL", &seed.endpoint)
        // moto has no Pricing API: a closed port, as a VPC without the Pricing endpoint.
        .env("AWS_ENDPOINT_URL_PRICING", super::CLOSED_PORT)
        // Credentials as IRSA provides them: a projected token and a role to assume with it
        // (STS AssumeRoleWithWebIdentity, answered by moto).
        .env(
            "AWS_ROLE_ARN",
            "arn:aws:iam::123456789012:role/driftwood-controller-demo",
        )
        .env("AWS_WEB_IDENTITY_TOKEN_FILE", &token)
        .env("AWS_ROLE_SESSION_NAME", "driftwood")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut controller = Server(controller);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();

    // Leader, ready, metrics.
    eventually("the leader lease", Duration::from_secs(60), || {
        let holder = lease_holder(&kubeconfig);
        (holder == "driftwood-7d9c-x2").then_some(())
    });
    let ready = eventually("/readyz", Duration::from_secs(60), || {
        http_get(health_port, "/readyz").filter(|r| r.contains(" 200 "))
    });
    assert!(ready.ends_with("ok"), "{ready}");

    // The class resolved from moto through the SDK.
    let amis = eventually(
        "EC2NodeClass status from moto",
        Duration::from_secs(60),
        || {
            let amis = kubectl(
                &kubeconfig,
                &[
                    "get",
                    "ec2nodeclass",
                    "latest-current-ami",
                    "-o",
                    "jsonpath={.status.amis[*].id}",
                ],
                None,
            );
            (!amis.is_empty()).then_some(amis)
        },
    );
    assert!(
        amis.contains(&values[2].1) && amis.contains(&values[3].1),
        "{amis}\n{}",
        log_text()
    );

    // A pending workload → a NodeClaim whose instance is in moto.
    kubectl(
        &kubeconfig,
        &["apply", "-f", "-"],
        Some(&fill("update-nodes-with-drift/workload.yaml")),
    );
    let provider_id = eventually("a launched NodeClaim", Duration::from_secs(90), || {
        let ids = kubectl(
            &kubeconfig,
            &[
                "get",
                "nodeclaims",
                "-o",
                "jsonpath={.items[*].status.providerID}",
            ],
            None,
        );
        (!ids.is_empty()).then_some(ids)
    });
    let instance = provider_id.rsplit('/').next().unwrap().to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let described = runtime.block_on(async {
        moto.ec2()
            .await
            .describe_instances()
            .instance_ids(&instance)
            .send()
            .await
            .unwrap()
    });
    let launched = &described.reservations()[0].instances()[0];
    assert_eq!(launched.image_id(), Some(values[2].1.as_str()));
    let metrics = http_get(metrics_port, "/metrics").unwrap();
    assert!(
        metrics.contains("karpenter_nodeclaims_created_total"),
        "{metrics}"
    );
    // /metrics as Prometheus 2 and 3 scrape it: text 0.0.4 by default, OpenMetrics when asked
    // (Prometheus 3's Accept), each with its Content-Type and read by prometheus_client's
    // matching parser with every family typed (counters not `unknown`), the same families.
    let (text_type, text) = content_type_and_body(&metrics);
    assert_eq!(text_type, "text/plain; version=0.0.4; charset=utf-8");
    let from_text = python_metric_families(&text, false);
    assert!(
        from_text.contains(&"karpenter_nodeclaims_created counter".to_string()),
        "{from_text:?}"
    );
    assert!(
        from_text
            .iter()
            .all(|f| !f.ends_with(" unknown") && !f.ends_with(" untyped")),
        "{from_text:?}"
    );
    // The same families in both formats. The two scrapes are moments apart while the
    // controller works, so a pair that differs is scraped again (both formats, back to back)
    // before it counts as a difference; the last pair's differing families are shown with
    // their lines.
    let scrape_pair = || {
        let text = content_type_and_body(&http_get(metrics_port, "/metrics").unwrap()).1;
        let (open_type, open) = content_type_and_body(
            &http_get_accepting(
                metrics_port,
                "/metrics",
                Some("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"),
            )
            .unwrap(),
        );
        assert_eq!(
            open_type,
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        (text, open)
    };
    let mut differences = String::new();
    for _ in 0..3 {
        let (text, open) = scrape_pair();
        let from_text = python_metric_families(&text, false);
        let from_open = python_metric_families(&open, true);
        if from_text == from_open {
            differences.clear();
            break;
        }
        let only = |a: &[String], b: &[String]| -> Vec<String> {
            a.iter().filter(|f| !b.contains(f)).cloned().collect()
        };
        let (only_text, only_open) = (only(&from_text, &from_open), only(&from_open, &from_text));
        let lines_of = |body: &str, families: &[String]| -> Vec<String> {
            let names: Vec<&str> = families
                .iter()
                .filter_map(|f| f.split(' ').next())
                .collect();
            body.lines()
                .filter(|l| names.iter().any(|n| l.contains(n)))
                .take(40)
                .map(str::to_string)
                .collect()
        };
        differences = format!(
            "families only in the text scrape: {only_text:?}\n{:#?}\nonly in the OpenMetrics scrape: {only_open:?}\n{:#?}",
            lines_of(&text, &only_text),
            lines_of(&open, &only_open),
        );
    }
    assert!(differences.is_empty(), "{differences}");
    // The AWS calls it made through the SDK, per operation, as Karpenter's aws-sdk-go metrics;
    // and its requests to the API server, as client-go's.
    let count = |series: &str| -> f64 {
        text.lines()
            .filter_map(|l| l.strip_prefix(series))
            .filter_map(|rest| rest.trim().parse::<f64>().ok())
            .sum()
    };
    for action in ["CreateFleet", "DescribeSubnets", "DescribeInstanceTypes"] {
        let call =
            format!("aws_sdk_go_request_total{{service=\"EC2\",action=\"{action}\",code=\"200\"}}");
        assert!(count(&call) >= 1.0, "{call}\n{text}");
    }
    for family in [
        "aws_sdk_go_request counter",
        "aws_sdk_go_request_attempt counter",
        "aws_sdk_go_request_duration_seconds histogram",
        "aws_sdk_go_request_attempt_duration_seconds histogram",
        "aws_sdk_go_request_retry_count histogram",
    ] {
        assert!(
            from_text.contains(&family.to_string()),
            "{family}: {from_text:?}"
        );
    }
    assert!(
        count("client_go_request_total{code=\"201\",method=\"POST\"}") >= 1.0,
        "the NodeClaim's create\n{text}"
    );
    assert!(log_text().contains("launched nodeclaim"), "{}", log_text());

    // SIGTERM: a clean exit.
    let pid = controller.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = eventually("the controller to exit", Duration::from_secs(30), || {
        controller.0.try_wait().unwrap()
    });
    assert!(status.success(), "{status:?}\n{}", log_text());
    // It released the Lease on its way out, so a standby takes over at its next try rather
    // than after a whole lease (Karpenter's LeaderElectionReleaseOnCancel).
    let holder = lease_holder(&kubeconfig);
    assert_eq!(holder, "", "{}", log_text());
}
