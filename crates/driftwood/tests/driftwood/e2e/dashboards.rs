//! Karpenter's own Grafana dashboards, and driftwood's (deploy/dashboards), read driftwood's
//! metrics: every metric their PromQL queries name is exported after a drift rollout on the
//! embedded cluster, with the labels the queries filter and group by.

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

/// PromQL's words that are not metric names.
const PROMQL_WORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
];

/// The metrics a PromQL expression reads, each with the labels the expression matches on it or
/// groups by (grouping labels are given to every metric of the expression; those here hold
/// one each).
fn promql_reads(expr: &str) -> BTreeMap<String, BTreeSet<String>> {
    let chars: Vec<char> = expr.chars().collect();
    let mut metrics: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut grouping: BTreeSet<String> = BTreeSet::new();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let skip_space = |mut j: usize| {
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        j
    };
    // The identifiers of a `( a, b )` or `{ a="x", b=~"y" }` list starting at `j`, and where it ends.
    let list = |j: usize, close: char| {
        let mut names = BTreeSet::new();
        let mut k = j + 1;
        let mut expect_name = true;
        while k < chars.len() && chars[k] != close {
            match chars[k] {
                '"' => {
                    k += 1;
                    while k < chars.len() && chars[k] != '"' {
                        k += if chars[k] == '\\' { 2 } else { 1 };
                    }
                    k += 1;
                }
                ',' => {
                    expect_name = true;
                    k += 1;
                }
                c if ident(c) && expect_name => {
                    let start = k;
                    while k < chars.len() && ident(chars[k]) {
                        k += 1;
                    }
                    names.insert(chars[start..k].iter().collect::<String>());
                    expect_name = false;
                }
                _ => k += 1,
            }
        }
        (names, k + 1)
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += 1;
            }
            i += 1;
        } else if c == '[' {
            while i < chars.len() && chars[i] != ']' {
                i += 1;
            }
        } else if (c.is_ascii_alphabetic() || c == '_') && (i == 0 || !ident(chars[i - 1])) {
            let start = i;
            while i < chars.len() && ident(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = skip_space(i);
            if word == "by" || word == "without" {
                let (labels, end) = list(next, ')');
                grouping.extend(labels);
                i = end;
            } else if PROMQL_WORDS.contains(&word.as_str())
                || chars.get(next) == Some(&'(')
                || ["by", "without"].iter().any(|w| {
                    let after = next + w.len();
                    chars.len() >= after
                        && chars[next..after].iter().copied().eq(w.chars())
                        && chars.get(after).is_none_or(|c| !ident(*c))
                })
            {
                // A keyword, a function, or an aggregation (`sum by (...)`).
            } else if chars.get(next) == Some(&'{') {
                let (labels, end) = list(next, '}');
                metrics.entry(word).or_default().extend(labels);
                i = end;
            } else {
                metrics.entry(word).or_default();
            }
            continue;
        }
        i += 1;
    }
    for labels in metrics.values_mut() {
        labels.extend(grouping.iter().cloned());
    }
    metrics
}

/// Every PromQL expression of a Grafana dashboard: its panels' targets and its template
/// variables' `label_values(metric, label)` queries (as the expression `metric{label=""}`).
fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                out.push(expr.to_string());
            }
        }
    }
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = variable["definition"].as_str().unwrap_or_default();
        if let Some(args) = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
        {
            let (metric, label) = args.split_once(',').unwrap();
            out.push(format!("{}{{{}=\"\"}}", metric.trim(), label.trim()));
        }
    }
    out
}

#[test]
fn promql_reads_names_metrics_and_their_labels_not_functions_or_keywords() {
    let reads = promql_reads(
        r#"sum by (nodepool, reason) (increase(karpenter_nodeclaims_disrupted_total{nodepool=~"$nodepool", x!="a,b"}[1m])) / on() max(up)"#,
    );
    let expected: BTreeMap<String, BTreeSet<String>> = [
        (
            "karpenter_nodeclaims_disrupted_total".to_string(),
            ["nodepool", "reason", "x"].map(String::from).into(),
        ),
        (
            "up".to_string(),
            ["nodepool", "reason"].map(String::from).into(),
        ),
    ]
    .into();
    assert_eq!(reads, expected);
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
    // driftwood's own dashboard, read from the file it ships as.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/chart/dashboards/driftwood-rollouts.json"
    );
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 10, "{queries:?}");
    for query in &queries {
        let reads = promql_reads(query);
        assert!(!reads.is_empty(), "{query} reads no metric");
        for (metric, labels) in reads {
            let series = samples
                .get(&metric)
                .unwrap_or_else(|| panic!("{metric} (in {query}) is not exported\n{text}"));
            assert!(
                series.iter().any(|s| labels
                    .iter()
                    .all(|l| s.get(l).is_some_and(|v| !v.is_empty()))),
                "no {metric} sample has all of {labels:?} (in {query}): {series:?}"
            );
        }
    }
    // The rollout is over: both nodes up to date, nothing drifted, disrupting or blocked.
    for (state, count) in [
        ("up_to_date", 2),
        ("drifted", 0),
        ("disrupting", 0),
        ("blocked", 0),
    ] {
        let line = format!(
            "driftwood_nodepool_rollout_nodes{{nodepool=\"general\",state=\"{state}\"}} {count}"
        );
        assert!(text.contains(&line), "no {line}\n{text}");
    }
    assert!(text.contains("driftwood_nodepool_rollout_complete{nodepool=\"general\"} 1"));
    assert!(text.contains("driftwood_nodepool_rollout_paused{nodepool=\"general\"} 0"));
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
