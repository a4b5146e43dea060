//! The generated stability property (issue 13): random valid NodePool + EC2NodeClass pairs over
//! the space Karpenter accepts (well-known and custom keys, every operator, multi-value In,
//! minValues, taints, kubelet, user data, tags, block devices, alias and name AMI terms) and a
//! workload that can land on them run on the embedded cluster for 2 h of virtual time with
//! nothing changed but the NodePool's weight: no NodeClaim may drift, no node may be replaced,
//! and every NodeClaim's labels must satisfy its NodePool's requirements. Then one random
//! single-field change, and drift must follow exactly when Karpenter's rule says, with the
//! reason and the field named.
//!
//! The suite runs a fast slice (`DEFAULT_CASES`, 8 cases); the long run is
//! `DRIFTWOOD_STABILITY_CASES=500 cargo test -p driftwood --test driftwood stability -- --nocapture`
//! (figures in BENCHMARKS.md).

use driftwood::demo::bundle::Files;
use driftwood::demo::{RunConfig, parse_scenario, run};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const DEFAULT_CASES: u64 = 8;

/// A requirement as YAML, with the instance types it leaves (sim catalog) in mind.
fn requirement(key: &str, operator: &str, values: &[&str], min_values: Option<u32>) -> String {
    let mut out = format!("              - key: {key}\n                operator: {operator}\n");
    if !values.is_empty() {
        let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
        out.push_str(&format!(
            "                values: [{}]\n",
            quoted.join(", ")
        ));
    }
    if let Some(n) = min_values {
        out.push_str(&format!("                minValues: {n}\n"));
    }
    out
}

/// Picks one of `options` (None = leave the key out).
fn pick<'a, T>(rng: &mut ChaCha8Rng, options: &'a [T]) -> &'a T {
    &options[rng.random_range(0..options.len())]
}

/// The single-field change of a case and what Karpenter's rule says it does.
struct Change {
    /// A scenario step (YAML, indented as a list item).
    step: String,
    /// `Some((reason, text the drift message must contain))` when it drifts the node.
    drifts: Option<(&'static str, &'static str)>,
}

fn change(rng: &mut ChaCha8Rng) -> Change {
    let patch = |kind: &str, body: &str| {
        format!(
            "  - name: the change\n    patch:\n      kind: {kind}\n      name: default\n      patch: {body}\n"
        )
    };
    match rng.random_range(0..9) {
        0 => Change {
            step: patch("NodePool", "{spec: {template: {metadata: {labels: {added: \"yes\"}}}}}"),
            drifts: Some(("NodePoolDrifted", "spec.template.metadata.labels")),
        },
        1 => Change {
            step: patch("NodePool", "{spec: {template: {spec: {expireAfter: 1000h}}}}"),
            drifts: Some(("NodePoolDrifted", "spec.template.spec.expireAfter")),
        },
        2 => Change {
            step: patch("NodePool", "{spec: {limits: {cpu: \"1000\"}, disruption: {budgets: [{nodes: \"20%\"}]}}}"),
            drifts: None,
        },
        3 => Change {
            step: patch("NodePool", "{spec: {template: {metadata: {annotations: {note: \"x\"}}}}}"),
            drifts: Some(("NodePoolDrifted", "spec.template.metadata.annotations")),
        },
        4 => Change {
            step: patch("EC2NodeClass", "{spec: {userData: \"echo changed\"}}"),
            drifts: Some(("NodeClassDrift", "spec.userData")),
        },
        5 => Change {
            step: patch("EC2NodeClass", "{spec: {tags: {changed: \"yes\"}}}"),
            drifts: Some(("NodeClassDrift", "spec.tags")),
        },
        6 => Change {
            step: patch("EC2NodeClass", "{spec: {detailedMonitoring: true}}"),
            drifts: Some(("NodeClassDrift", "spec.detailedMonitoring")),
        },
        7 => Change {
            // A requirement every node fails: a custom key nobody has, with Exists.
            step: "  - name: the change\n    apply:\n      inline: |\n        {{nodepool_with_extra_requirement}}\n".to_string(),
            drifts: Some(("RequirementsDrifted", "brand-new-key")),
        },
        _ => Change {
            step: patch("NodePool", "{spec: {weight: 50}}"),
            drifts: None,
        },
    }
}

/// One generated case: the scenario text and the change's expectation.
fn case(seed: u64) -> (String, Option<(&'static str, &'static str)>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut reqs = String::new();
    let nvme = rng.random_bool(0.2);
    if nvme {
        reqs += &requirement("karpenter.k8s.aws/instance-local-nvme", "Exists", &[], None);
        if rng.random_bool(0.5) {
            reqs += &requirement(
                "karpenter.k8s.aws/instance-category",
                "In",
                &["i", "d"],
                None,
            );
        }
    } else {
        match rng.random_range(0..4) {
            0 => {
                reqs += &requirement(
                    "karpenter.k8s.aws/instance-category",
                    "In",
                    &["c", "m", "r"],
                    Some(2),
                )
            }
            1 => {
                reqs += &requirement(
                    "karpenter.k8s.aws/instance-category",
                    "NotIn",
                    &["t", "i", "d"],
                    None,
                )
            }
            2 => {
                reqs += &requirement(
                    "karpenter.k8s.aws/instance-local-nvme",
                    "DoesNotExist",
                    &[],
                    None,
                )
            }
            _ => {}
        }
        match rng.random_range(0..3) {
            0 => reqs += &requirement("karpenter.k8s.aws/instance-generation", "Gt", &["4"], None),
            1 => reqs += &requirement("karpenter.k8s.aws/instance-generation", "Gte", &["6"], None),
            _ => {}
        }
        if rng.random_bool(0.4) {
            reqs += &requirement(
                "karpenter.k8s.aws/instance-encryption-in-transit-supported",
                "In",
                &["true"],
                None,
            );
        }
    }
    match rng.random_range(0..3) {
        0 => reqs += &requirement("karpenter.k8s.aws/instance-cpu", "Lt", &["17"], None),
        1 => {
            reqs += &requirement(
                "karpenter.k8s.aws/instance-cpu",
                "In",
                &["2", "4", "8", "16"],
                None,
            )
        }
        _ => {}
    }
    if rng.random_bool(0.3) {
        reqs += &requirement(
            "karpenter.k8s.aws/instance-network-bandwidth",
            "Gte",
            &["750"],
            None,
        );
    }
    if rng.random_bool(0.3) {
        reqs += &requirement(
            "karpenter.k8s.aws/instance-hypervisor",
            "In",
            &["nitro"],
            None,
        );
    }
    reqs += &match rng.random_range(0..3) {
        0 => requirement("kubernetes.io/arch", "In", &["amd64"], None),
        1 => requirement("kubernetes.io/arch", "In", &["amd64", "arm64"], None),
        _ => String::new(),
    };
    reqs += &match rng.random_range(0..3) {
        0 => requirement(
            "karpenter.sh/capacity-type",
            "In",
            &["spot", "on-demand"],
            None,
        ),
        1 => requirement("karpenter.sh/capacity-type", "In", &["on-demand"], None),
        _ => String::new(),
    };
    if rng.random_bool(0.3) {
        reqs += &requirement(
            "topology.kubernetes.io/zone",
            "In",
            &["us-west-2a", "us-west-2b"],
            None,
        );
    }
    if rng.random_bool(0.2) {
        reqs += &requirement("kubernetes.io/os", "In", &["linux"], None);
    }
    // Custom keys, every operator.
    for (key, op, values) in [
        ("team", "In", &["a", "b", "c"][..]),
        ("tier", "Exists", &[][..]),
        ("rank", "Gt", &["3"][..]),
        ("slots", "Lt", &["10"][..]),
        ("env", "NotIn", &["prod"][..]),
        ("legacy", "DoesNotExist", &[][..]),
        ("zone-group", "In", &["west"][..]),
    ] {
        if rng.random_bool(0.35) {
            reqs += &requirement(key, op, values, None);
        }
    }
    // A taint without a value: Karpenter's CRD pattern refuses `value: ""` (as the embedded
    // API server now does), so the value is left out as users write it.
    let tainted = rng.random_bool(0.3);
    let taints = if tainted {
        "            taints:\n              - key: dedicated\n                effect: NoSchedule\n"
    } else {
        ""
    };
    let tolerations = if tainted {
        "            tolerations:\n              - key: dedicated\n                operator: Exists\n"
    } else {
        ""
    };
    let ami = pick(
        &mut rng,
        &[
            "          - alias: al2023@latest\n",
            "          - alias: bottlerocket@latest\n",
            "          - alias: al2@latest\n",
        ],
    );
    let mut class_extra = String::new();
    if rng.random_bool(0.4) {
        class_extra += "        userData: |\n          echo hello\n";
    }
    if rng.random_bool(0.5) {
        class_extra +=
            "        tags:\n          team: platform\n          KubernetesVersion: \"1.30\"\n";
    }
    if rng.random_bool(0.4) {
        class_extra +=
            "        kubelet:\n          maxPods: 110\n          clusterDNS: [\"10.100.0.10\"]\n";
    }
    if rng.random_bool(0.3) {
        class_extra += "        blockDeviceMappings:\n          - deviceName: /dev/xvda\n            rootVolume: true\n            ebs:\n              volumeSize: 50Gi\n              volumeType: gp3\n";
    }
    if rng.random_bool(0.3) {
        class_extra += "        metadataOptions:\n          httpTokens: required\n          httpPutResponseHopLimit: 2\n";
    }
    let replicas = rng.random_range(1..=4);
    let cpu = pick(&mut rng, &["250m", "500m", "1"]);
    let weight = rng.random_range(0..=100);
    let change = change(&mut rng);
    let nodepool = |extra: &str| {
        format!(
            "apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  weight: {weight}
  template:
    metadata:
      labels:
        intent: apps
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
{taints}      requirements:
{reqs}{extra}"
        )
        .replace("\n            ", "\n      ")
        .replace("\n              ", "\n        ")
        .replace("\n                ", "\n          ")
    };
    let extra_req = requirement("brand-new-key", "Exists", &[], None)
        .replace("\n                ", "\n          ")
        .replace("              - ", "        - ");
    let step = change.step.replace(
        "{{nodepool_with_extra_requirement}}",
        &nodepool(&extra_req).replace('\n', "\n        "),
    );
    let expect_change = match change.drifts {
        Some((reason, field)) => format!(
            "  - name: the change drifts the node
    waitFor:
      driftedNodes: 1
    timeout: 10m
  - expect:
      driftReasonSeen: {reason}
      driftMessageSeen: {field:?}
"
        ),
        None => "  - advanceTime: 30m
  - name: the change drifts nothing
    expect:
      driftedNodeClaims: 0
      removedNodes: 0
"
        .to_string(),
    };
    let text = format!(
        "name: stability-{seed}
kubernetesVersion: \"1.30\"
cloud:
  seed: {seed}
  startTime: \"2026-08-03T09:00:00Z\"
manifests:
  - inline: |
      apiVersion: karpenter.k8s.aws/v1
      kind: EC2NodeClass
      metadata:
        name: default
      spec:
        amiSelectorTerms:
{ami}        role: \"{{{{node_role}}}}\"
        securityGroupSelectorTerms:
          - tags:
              karpenter.sh/discovery: \"{{{{cluster_name}}}}\"
        subnetSelectorTerms:
          - tags:
              karpenter.sh/discovery: \"{{{{cluster_name}}}}\"
{class_extra}      ---
{pool}
      ---
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: web
      spec:
        replicas: {replicas}
        selector:
          matchLabels:
            app: web
        template:
          metadata:
            labels:
              app: web
          spec:
            nodeSelector:
              intent: apps
{tolerations}            containers:
              - name: web
                image: public.ecr.aws/eks-distro/kubernetes/pause:v1.33.0-eks-1-33-4
                resources:
                  requests:
                    cpu: {cpu}
                    memory: 256Mi
steps:
  - name: workload running
    waitFor:
      readyPods: {{app: web, count: {replicas}}}
    timeout: 15m
  - name: only the weight changes
    patch:
      kind: NodePool
      name: default
      patch: {{spec: {{weight: {new_weight}}}}}
  - advanceTime: 2h
  - name: two quiet hours
    expect:
      driftedNodeClaims: 0
      removedNodes: 0
      nodesMatchNodePools: true
      minReadyPods: {{app: web, count: {replicas}}}
{step}{expect_change}",
        pool = indent(&nodepool(""), "      "),
        new_weight = (weight + 1) % 101,
    );
    (text, change.drifts)
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|l| format!("{prefix}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(start_paused = true)]
async fn generated_nodepools_stay_put_and_drift_exactly_on_change() {
    let cases: u64 = std::env::var("DRIFTWOOD_STABILITY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let first: u64 = std::env::var("DRIFTWOOD_STABILITY_FIRST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let started = std::time::Instant::now();
    let mut failures = Vec::new();
    let mut drifting = 0;
    for seed in first..first + cases {
        let (text, drifts) = case(seed);
        drifting += usize::from(drifts.is_some());
        let scenario = match parse_scenario(&text) {
            Ok(s) => s,
            Err(e) => panic!("seed {seed}: generated scenario does not parse: {e}\n{text}"),
        };
        let mut out = Vec::new();
        let outcome = run(&scenario, &Files::Bundled, &RunConfig::default(), &mut out)
            .await
            .unwrap();
        if let Some(failure) = &outcome.failure {
            failures.push(format!("seed {seed}: {failure:?}\n{text}"));
        }
    }
    println!(
        "stability: {cases} cases ({drifting} with a drifting change) in {:.1}s, {} failed",
        started.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
