//! Karpenter's own Grafana dashboards read driftwood's metrics: every metric their PromQL
//! queries name is exported after a drift rollout on the embedded cluster, with the labels
//! the queries filter and group by.

use std::collections::{BTreeMap, BTreeSet};

use super::support::{MINUTE, cluster, deployment, initialized_of, nodepool, pdb, ready_pods};
use driftwood_controller::Settings;

/// The metrics (sample names) the queries of Karpenter's two published dashboards read, and
/// the labels they filter or group by that the metric has in Karpenter. Taken from
/// aws/karpenter-provider-aws v1.14.1,
/// website/content/en/docs/getting-started/getting-started-with-karpenter/
/// karpenter-capacity-dashboard.json and karpenter-performance-dashboard.json (`cluster` and
/// `job` are Prometheus's target labels, not the exporter's; `node_time_seconds` and
/// `node_boot_time_seconds` are node-exporter's).
const DASHBOARD_QUERIES: &[(&str, &[&str])] = &[
    // Capacity dashboard.
    ("karpenter_nodes_created_total", &["nodepool"]),
    ("karpenter_nodes_terminated_total", &["nodepool"]),
    ("karpenter_voluntary_disruption_eligible_nodes", &["reason"]),
    ("karpenter_nodeclaims_disrupted_total", &["nodepool"]),
    (
        "karpenter_voluntary_disruption_decisions_total",
        &["decision"],
    ),
    (
        "karpenter_pods_state",
        &[
            "arch",
            "capacity_type",
            "instance_type",
            "namespace",
            "node",
            "nodepool",
            "zone",
            "phase",
        ],
    ),
    ("karpenter_nodepools_usage", &["resource_type", "nodepool"]),
    ("karpenter_nodepools_limit", &["resource_type", "nodepool"]),
    (
        "karpenter_nodes_allocatable",
        &[
            "nodepool",
            "resource_type",
            "arch",
            "capacity_type",
            "instance_type",
            "zone",
        ],
    ),
    (
        "karpenter_nodes_total_daemon_requests",
        &[
            "resource_type",
            "arch",
            "capacity_type",
            "instance_type",
            "nodepool",
            "zone",
        ],
    ),
    (
        "karpenter_nodes_total_pod_requests",
        &[
            "resource_type",
            "arch",
            "capacity_type",
            "instance_type",
            "nodepool",
            "zone",
        ],
    ),
    // Performance dashboard.
    (
        "karpenter_nodes_termination_duration_seconds",
        &["quantile"],
    ),
    ("karpenter_pods_startup_duration_seconds", &["quantile"]),
    (
        "controller_runtime_reconcile_time_seconds_bucket",
        &["controller"],
    ),
    (
        "controller_runtime_reconcile_time_seconds_count",
        &["controller"],
    ),
    ("controller_runtime_reconcile_total", &["controller"]),
];

/// The samples of an exposition: name → the label sets of its samples (labels with values).
fn samples(text: &str) -> BTreeMap<String, Vec<BTreeMap<String, String>>> {
    let mut out: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, rest) = match line.find('{') {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line.split(' ').next().unwrap_or_default(), ""),
        };
        let mut labels = BTreeMap::new();
        if let Some(end) = rest.rfind('}') {
            // Label values here hold no `",` sequence.
            for pair in rest[..end].split("\",") {
                if let Some((key, value)) = pair.split_once("=\"") {
                    labels.insert(key.to_string(), value.trim_end_matches('"').to_string());
                }
            }
        }
        out.entry(name.to_string()).or_default().push(labels);
    }
    out
}

const DAEMONSET: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  namespace: default
spec:
  selector:
    matchLabels:
      app: agent
  template:
    metadata:
      labels:
        app: agent
    spec:
      containers:
      - name: agent
        image: public.ecr.aws/eks-distro/kubernetes/pause:v1.33.0-eks-1-33-4
        resources:
          requests:
            cpu: 100m
            memory: 64Mi
"#;

#[tokio::test(start_paused = true)]
async fn karpenters_dashboards_find_every_metric_they_query() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool("general", "  limits:\n    cpu: 100\n", "");
    h.apply(&pool).await;
    h.apply(DAEMONSET).await;
    h.apply(&deployment("app", 2, "3", "general", "")).await;
    h.apply(&pdb("app", 1)).await;
    h.wait_until("two nodes running the Deployment", 10 * MINUTE, |s| {
        initialized_of(s, "general").len() == 2 && ready_pods(s, "app") == 2
    })
    .await;
    let first: BTreeSet<String> = initialized_of(&h.snapshot(), "general")
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    // A template label change drifts both nodes; they are replaced and terminated.
    h.apply(&pool.replace(
        "        pool: general\n",
        "        pool: general\n        team: blue\n",
    ))
    .await;
    h.wait_until(
        "both nodes replaced and the old ones gone",
        20 * MINUTE,
        |s| {
            let now = initialized_of(s, "general");
            now.len() == 2
                && s.store.nodes.len() == 2
                && s.store.nodeclaims.len() == 2
                && now
                    .iter()
                    .all(|c| !first.contains(c.metadata.name.as_deref().unwrap_or_default()))
                && ready_pods(s, "app") == 2
        },
    )
    .await;

    let ctx = h.embedded.ctx().expect("the controllers run");
    let text = ctx.metrics.scrape(
        &ctx.state,
        ctx.clock.now(),
        driftwood_controller::exposition::Exposition::Prometheus,
    );
    let samples = samples(&text);
    for (metric, labels) in DASHBOARD_QUERIES {
        let series = samples
            .get(*metric)
            .unwrap_or_else(|| panic!("{metric} is not exported\n{text}"));
        assert!(
            series.iter().any(|s| labels
                .iter()
                .all(|l| s.get(*l).is_some_and(|v| !v.is_empty()))),
            "no {metric} sample has all of {labels:?}: {series:?}"
        );
    }
    // What the series say, read the way the dashboards read them.
    let of = |metric: &str| samples.get(metric).cloned().unwrap_or_default();
    let general =
        |s: &BTreeMap<String, String>| s.get("nodepool").map(String::as_str) == Some("general");
    let cpu_nodes = of("karpenter_nodes_allocatable")
        .into_iter()
        .filter(|s| general(s) && s.get("resource_type").map(String::as_str) == Some("cpu"))
        .count();
    assert_eq!(
        cpu_nodes, 2,
        "count by (nodepool)(karpenter_nodes_allocatable{{resource_type=\"cpu\"}})"
    );
    assert!(
        text.contains("karpenter_nodes_terminated_total{nodepool=\"general\"} 2"),
        "{text}"
    );
    let terminations = text
        .lines()
        .find(|l| {
            l.starts_with(
                "karpenter_nodes_termination_duration_seconds_count{nodepool=\"general\"}",
            )
        })
        .unwrap_or_else(|| panic!("no termination count\n{text}"));
    assert!(terminations.ends_with(" 2"), "{terminations}");
    let startups = text
        .lines()
        .find(|l| l.starts_with("karpenter_pods_startup_duration_seconds_count"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_default();
    assert!(
        startups >= 4,
        "the app's and the agent's pods started: {startups}"
    );
    // The DaemonSet's pod is the daemon load of every node.
    assert!(
        of("karpenter_nodes_total_daemon_requests")
            .iter()
            .filter(|s| general(s) && s.get("resource_type").map(String::as_str) == Some("cpu"))
            .count()
            == 2
    );
}
