//! Python's `prometheus_client` (the reference client, nobody here wrote it) as the tests' parser
//! of a /metrics exposition, Prometheus text or OpenMetrics.

use std::collections::{BTreeMap, BTreeSet};

/// Families as `prometheus_client` (Python's reference client) parses an exposition: name →
/// (type, the label names of its samples, without `le` and `quantile`, and whether it has any).
pub fn python_families(
    body: &str,
    openmetrics: bool,
) -> BTreeMap<String, (String, BTreeSet<String>, bool)> {
    use std::io::Write as _;
    let python = std::env::var("DRIFTWOOD_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let parser = if openmetrics {
        "prometheus_client.openmetrics.parser"
    } else {
        "prometheus_client.parser"
    };
    let script = format!(
        "import sys, json\nfrom {parser} import text_string_to_metric_families as parse\nout = {{}}\nfor f in parse(sys.stdin.read()):\n    labels = sorted({{k for s in f.samples for k in s.labels if k not in ('le', 'quantile')}})\n    out[f.name] = [f.type, labels, len(f.samples) > 0]\nprint(json.dumps(out))\n"
    );
    let mut child = std::process::Command::new(python)
        .args(["-c", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python runs (scripts/test installs prometheus_client)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client refused the exposition: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: BTreeMap<String, (String, Vec<String>, bool)> =
        serde_json::from_slice(&out.stdout).unwrap();
    parsed
        .into_iter()
        .map(|(name, (kind, labels, any))| (name, (kind, labels.into_iter().collect(), any)))
        .collect()
}
