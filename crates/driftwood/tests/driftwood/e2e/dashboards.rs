//! Karpenter's own Grafana dashboards, and driftwood's (deploy/dashboards), read driftwood's
//! metrics: every metric their PromQL queries name is exported after a drift rollout on the
//! embedded cluster, with the labels the queries filter and group by.

use std::collections::{BTreeMap, BTreeSet};

use super::support::{
    DAEMONSET, MINUTE, cluster, deployment, initialized_of, nodepool, pdb, ready_pods,
};
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

/// Karpenter's node labels that driftwood writes only when the node has them (an empty label
/// value and no label are the same series to Prometheus): not counted missing on the
/// `karpenter_nodes_*` gauges.
fn written_when_present(label: &str) -> bool {
    // Node phase is deprecated and empty on every kubelet's Node: Karpenter writes `phase=""`.
    !matches!(
        label,
        "resource_type" | "node_name" | "managed" | "nodepool"
    )
}

/// The `# TYPE name type` lines of an exposition: name → type.
fn declared_types(body: &str) -> BTreeMap<String, String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| (name.to_string(), kind.trim().to_string()))
        .collect()
}

/// How driftwood's exposition differs from Karpenter's table for one metric, or `None`.
fn parity_gap(
    name: &str,
    kind: &str,
    labels: &BTreeSet<String>,
    families: &BTreeMap<String, (String, BTreeSet<String>, bool)>,
    declared: &BTreeMap<String, String>,
) -> Option<String> {
    // The parsers name a counter's family without `_total`.
    let family = match kind {
        "counter" => name.strip_suffix("_total").unwrap_or(name),
        _ => name,
    };
    let Some((found, sampled, any)) = families.get(family) else {
        // Declared with no sample yet (nothing of its kind happened in this run): its type is
        // on its `# TYPE` line.
        return match declared.get(family).or_else(|| declared.get(name)) {
            Some(found) if found == kind => None,
            Some(found) => Some(format!("a {found}, not a {kind}")),
            None => Some("not exported".to_string()),
        };
    };
    if found != kind {
        return Some(format!("a {found}, not a {kind}"));
    }
    let extra: Vec<&String> = sampled.difference(labels).collect();
    let node_gauge = name.starts_with("karpenter_nodes_") && labels.contains("instance_family");
    let missing: Vec<&String> = labels
        .difference(sampled)
        .filter(|l| !(node_gauge && written_when_present(l)))
        .collect();
    match (*any, extra.is_empty(), missing.is_empty()) {
        (false, _, _) | (true, true, true) => None,
        _ => Some(format!("labels missing {missing:?}, extra {extra:?}")),
    }
}

/// Where driftwood's metrics differ from Karpenter v1.14.1's reference today. The test fails
/// when this list is not exactly what the scrape shows, so a metric added or mended must be
/// struck from it.
/// Karpenter's AWS SDK request metrics: `driftwood controller` exports them from an interceptor
/// on its SDK clients (moto::controller_process checks them by name and type); the embedded
/// cluster's simulated account is called without the SDK, so it has none.
const SDK_ONLY: [&str; 5] = [
    "aws_sdk_go_request_total",
    "aws_sdk_go_request_retry_count",
    "aws_sdk_go_request_duration_seconds",
    "aws_sdk_go_request_attempt_total",
    "aws_sdk_go_request_attempt_duration_seconds",
];

const KNOWN_GAPS: &[(&str, &str)] = &[];

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
    // Every metric of Karpenter's reference, read by both of prometheus_client's parsers: the
    // same type and label names, or a gap listed in KNOWN_GAPS.
    let table = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/karpenter-metrics.tsv"
    ))
    .unwrap();
    let openmetrics = ctx.metrics.scrape(
        &ctx.state,
        ctx.clock.now(),
        driftwood_controller::exposition::Exposition::OpenMetrics,
    );
    let by_text = crate::prometheus_client::python_families(&text, false);
    let by_openmetrics = crate::prometheus_client::python_families(&openmetrics, true);
    let mut rows = 0;
    let mut with_samples = 0;
    for (families, body, format) in [
        (&by_text, &text, "text 0.0.4"),
        (&by_openmetrics, &openmetrics, "OpenMetrics"),
    ] {
        // Declared in the exposition, or registered with no series yet (left out of the
        // exposition as client_golang leaves out an empty vector).
        let mut declared = declared_types(body);
        for (name, kind) in ctx.metrics.declared() {
            declared
                .entry((*name).to_string())
                .or_insert_with(|| kind.as_str().to_string());
        }
        let mut gaps: Vec<(String, String)> = Vec::new();
        rows = 0;
        with_samples = 0;
        for line in table.lines().filter(|l| !l.starts_with('#')) {
            let mut cells = line.split('\t');
            let (name, kind) = (cells.next().unwrap(), cells.next().unwrap());
            let labels: BTreeSet<String> = cells
                .next()
                .unwrap_or_default()
                .split(',')
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect();
            rows += 1;
            match parity_gap(name, kind, &labels, families, &declared) {
                Some(gap) => gaps.push((name.to_string(), gap)),
                None => {
                    let family = name.strip_suffix("_total").unwrap_or(name);
                    let any = families.get(family).or_else(|| families.get(name));
                    with_samples += usize::from(any.is_some_and(|f| f.2));
                }
            }
        }
        let expected: Vec<(String, String)> = KNOWN_GAPS
            .iter()
            .map(|(n, g)| ((*n).to_string(), (*g).to_string()))
            .chain(
                SDK_ONLY
                    .iter()
                    .map(|n| ((*n).to_string(), "not exported".to_string())),
            )
            .collect();
        let new: Vec<String> = gaps
            .iter()
            .filter(|g| !expected.contains(g))
            .map(|(n, g)| format!("    ({n:?}, {g:?}),"))
            .collect();
        let mended: Vec<&String> = expected
            .iter()
            .filter(|g| !gaps.contains(g))
            .map(|(n, _)| n)
            .collect();
        assert!(
            new.is_empty() && mended.is_empty(),
            "read as {format}, driftwood differs from Karpenter's metrics reference other than \
             KNOWN_GAPS says.\nNew gaps:\n{}\nNo longer gaps (strike them): {mended:?}",
            new.join("\n")
        );
    }
    assert_eq!(
        rows, 128,
        "the table holds every metric of the reference, and the two of Karpenter's main branches"
    );
    eprintln!(
        "Karpenter's metrics (v1.14.1 and main): {} of {rows} as Karpenter has them ({with_samples} with samples checked label by label; {} more from the AWS SDK in `driftwood controller`), {} gaps",
        rows - KNOWN_GAPS.len() - SDK_ONLY.len(),
        SDK_ONLY.len(),
        KNOWN_GAPS.len()
    );

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
    // Both old nodes terminated, counted by pool and zone as Karpenter counts them.
    let terminated: u64 = text
        .lines()
        .filter(|l| {
            l.starts_with("karpenter_nodes_terminated_total{nodepool=\"general\",zone=\"us-west-2")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(terminated, 2, "{text}");
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
    // The provisioner's in-memory pod times: the app's two pods were seen waiting, decided on,
    // found room, bound and started, each timed once from those points.
    let count_of = |family: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(&format!("{family}_count")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_default()
    };
    for family in [
        "karpenter_pods_scheduling_decision_duration_seconds",
        "karpenter_pods_provisioning_bound_duration_seconds",
        "karpenter_pods_provisioning_startup_duration_seconds",
    ] {
        assert!(count_of(family) >= 2, "{family}\n{text}");
    }
    // No pod waits now: no per-pod provisioning gauge; the provisioner's last simulation has
    // no pod left to try, and is not running.
    assert!(
        !text.contains("karpenter_pods_provisioning_scheduling_undecided_time_seconds{")
            && !text.contains("karpenter_pods_provisioning_unbound_time_seconds{"),
        "{text}"
    );
    let depth = text
        .lines()
        .find(|l| {
            l.starts_with(
                "karpenter_scheduler_queue_depth{controller=\"provisioner\",scheduling_id=\"",
            )
        })
        .unwrap_or_else(|| panic!("no queue depth\n{text}"));
    assert!(depth.ends_with("} 0"), "{depth}");
    assert!(
        !text.contains("karpenter_scheduler_unfinished_work_seconds{"),
        "{text}"
    );
    // The drift budget (10% of 2 nodes rounds up to 1) and the nodes consuming it, none now.
    assert!(
        text.contains(
            "karpenter_nodepools_allowed_disruptions{nodepool=\"general\",reason=\"Drifted\"} 1\n"
        ) && text.contains(
            "karpenter_nodepools_nodes_consuming_budgets{nodepool=\"general\",reason=\"Drifted\"} 0\n"
        ),
        "{text}"
    );
    // The pool's two nodes priced from its catalog; no failed launch or termination, and no
    // claim that could not be priced.
    let cost: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("karpenter_nodepools_cost_total{nodepool=\"general\"} "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no cost\n{text}"));
    assert!(cost > 0.0 && cost < 10.0, "two nodes' hourly price: {cost}");
    for family in [
        "karpenter_cloudprovider_instance_launch_failures_total{",
        "karpenter_cloudprovider_instance_termination_failures_total{",
        "karpenter_nodepools_cost_tracker_errors_total{",
    ] {
        assert!(!text.contains(family), "{family}\n{text}");
    }
    // The old nodes' instances were terminated through the batcher.
    let terminated_in_batches: f64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "karpenter_cloudprovider_batcher_batch_size_sum{batcher=\"terminate_instances\"} ",
            )
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or_default();
    assert!(terminated_in_batches >= 2.0, "{text}");
    // The DaemonSet's pod is the daemon load of every node.
    assert!(
        of("karpenter_nodes_total_daemon_requests")
            .iter()
            .filter(|s| general(s) && s.get("resource_type").map(String::as_str) == Some("cpu"))
            .count()
            == 2
    );
    // controller-runtime's queue and worker figures, client-go's requests and the cloud
    // provider's calls, as this rollout made them.
    let sum = |series: &str| -> f64 {
        text.lines()
            .filter_map(|l| l.strip_prefix(series))
            .filter_map(|rest| rest.trim().parse::<f64>().ok())
            .sum()
    };
    // Labelled with Karpenter's controller names; nodeclaim.disruption's two workers are the
    // drift loop and the Consolidatable marker.
    for (controller, workers) in [
        ("provisioner", 1.0),
        ("disruption", 1.0),
        ("nodeclaim.disruption", 2.0),
        ("node.termination", 1.0),
        ("nodeclaim.lifecycle", 1.0),
    ] {
        let queue = format!("{{controller=\"{controller}\",name=\"{controller}\"}}");
        assert!(
            sum(&format!("workqueue_adds_total{queue}")) >= 1.0,
            "{controller}\n{text}"
        );
        assert!(
            sum(&format!("workqueue_work_duration_seconds_count{queue}")) >= 1.0,
            "{controller}\n{text}"
        );
        assert_eq!(
            sum(&format!(
                "controller_runtime_max_concurrent_reconciles{{controller=\"{controller}\"}}"
            )),
            workers
        );
        assert_eq!(
            sum(&format!(
                "controller_runtime_reconcile_panics_total{{controller=\"{controller}\"}}"
            )),
            0.0
        );
    }
    // No loop's own name is a controller label.
    for loop_name in [
        "drift",
        "termination",
        "lifecycle",
        "hash",
        "nodeclaim.consolidation",
    ] {
        assert!(
            !text.contains(&format!("controller=\"{loop_name}\"")),
            "{loop_name}\n{text}"
        );
    }
    // Two first nodes and two replacements launched, each one timed Create call at least.
    assert!(
        sum(
            "karpenter_cloudprovider_duration_seconds_count{controller=\"nodeclaim.lifecycle\",method=\"Create\",provider=\"aws\"}"
        ) >= 4.0,
        "{text}"
    );
    assert!(
        sum("karpenter_cloudprovider_instance_type_cpu_cores{instance_type=\"m5.large\"}") == 2.0,
        "{text}"
    );
    // The two old nodes' app pods were evicted through the Eviction API, each request timed.
    assert!(
        sum(
            "client_go_request_duration_seconds_count{verb=\"CREATE\",group=\"\",version=\"v1\",kind=\"pods\",subresource=\"eviction\"}"
        ) >= 2.0,
        "{text}"
    );
    assert!(
        sum("client_go_request_total{code=\"201\",method=\"POST\"}") >= 6.0,
        "{text}"
    );
    assert!(
        sum("karpenter_pods_eviction_requests_total{code=\"200\"}") >= 2.0,
        "{text}"
    );
    // Every pod of the rollout was seen unbound, then bound.
    assert!(
        sum("karpenter_pods_bound_duration_seconds_count") >= 4.0,
        "{text}"
    );
}
