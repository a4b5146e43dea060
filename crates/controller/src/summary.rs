//! Prometheus summaries (quantiles over a sliding window), which `prometheus_client` does not
//! have: Karpenter exports `karpenter_pods_startup_duration_seconds` and
//! `karpenter_nodes_termination_duration_seconds` as summaries with the quantiles 0, 0.5,
//! 0.9, 0.99 and 1, and its performance dashboard reads them by `quantile`.
//!
//! client_golang keeps a summary's quantiles over the last 10 minutes (`DefMaxAge`) and its
//! sum and count since start; so does this one. Its quantiles are exact over the window (up to
//! the newest [`WINDOW_CAP`] observations per series) where client_golang's are within 1% rank.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;

/// The quantiles Karpenter's summaries report (`metrics.SummaryObjectives`).
pub const QUANTILES: [f64; 5] = [0.0, 0.5, 0.9, 0.99, 1.0];

/// How long an observation counts towards the quantiles (client_golang's `DefMaxAge`).
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// The most observations a series keeps for its quantiles.
pub const WINDOW_CAP: usize = 4096;

#[derive(Debug, Default)]
struct Series {
    window: VecDeque<(Timestamp, f64)>,
    sum: f64,
    count: u64,
}

/// One summary family: series by label values, in the order of the family's label names.
#[derive(Debug, Clone)]
pub struct Summary {
    name: &'static str,
    help: &'static str,
    label_names: &'static [&'static str],
    series: Arc<Mutex<BTreeMap<Vec<String>, Series>>>,
}

impl Summary {
    /// A summary named `name` (no suffix) with these label names.
    pub fn new(
        name: &'static str,
        help: &'static str,
        label_names: &'static [&'static str],
    ) -> Self {
        Self {
            name,
            help,
            label_names,
            series: Arc::default(),
        }
    }

    /// The family's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Vec<String>, Series>> {
        // A panic while recording leaves at worst one observation half-recorded: the metric is
        // still worth serving, so the poison is cleared rather than spread.
        self.series.lock().unwrap_or_else(|e| {
            self.series.clear_poison();
            e.into_inner()
        })
    }

    /// Records `value` at `at` for the series with these label values.
    pub fn observe(&self, label_values: &[&str], value: f64, at: Timestamp) {
        if !value.is_finite() {
            return;
        }
        let key: Vec<String> = label_values.iter().map(|v| (*v).to_string()).collect();
        let mut series = self.lock();
        let entry = series.entry(key).or_default();
        entry.sum += value;
        entry.count += 1;
        entry.window.push_back((at, value));
        if entry.window.len() > WINDOW_CAP {
            entry.window.pop_front();
        }
    }

    /// The exposition of this family at `now` (`None`: before the first scrape's time is
    /// known, nothing has aged out), the same in Prometheus text 0.0.4 and
    /// OpenMetrics 1.0: `# HELP`, `# TYPE … summary`, a sample per quantile (NaN when the
    /// window is empty, as client_golang writes), then `_sum` and `_count`.
    pub fn render(&self, now: Option<Timestamp>, out: &mut String) {
        let mut series = self.lock();
        out.push_str(&format!("# HELP {} {}\n", self.name, self.help));
        out.push_str(&format!("# TYPE {} summary\n", self.name));
        for (values, entry) in series.iter_mut() {
            while let Some(now) = now
                && entry
                    .window
                    .front()
                    .is_some_and(|(at, _)| now.duration_since(*at).unsigned_abs() > MAX_AGE)
            {
                entry.window.pop_front();
            }
            let mut sorted: Vec<f64> = entry.window.iter().map(|(_, v)| *v).collect();
            sorted.sort_by(f64::total_cmp);
            let labels: Vec<String> = self
                .label_names
                .iter()
                .zip(values)
                .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
                .collect();
            for q in QUANTILES {
                let mut with_quantile = labels.clone();
                with_quantile.push(format!("quantile=\"{q}\""));
                out.push_str(&format!(
                    "{}{{{}}} {}\n",
                    self.name,
                    with_quantile.join(","),
                    number(quantile(&sorted, q))
                ));
            }
            let braces = if labels.is_empty() {
                String::new()
            } else {
                format!("{{{}}}", labels.join(","))
            };
            out.push_str(&format!(
                "{}_sum{braces} {}\n",
                self.name,
                number(entry.sum)
            ));
            out.push_str(&format!("{}_count{braces} {}\n", self.name, entry.count));
        }
    }
}

/// The `q` quantile of sorted values by nearest rank (0 is the least, 1 the greatest); NaN for
/// no values.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_string()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        format!("{value:?}")
    }
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&sorted, 0.0), 1.0);
        assert_eq!(quantile(&sorted, 0.5), 50.0);
        assert_eq!(quantile(&sorted, 0.9), 90.0);
        assert_eq!(quantile(&sorted, 0.99), 99.0);
        assert_eq!(quantile(&sorted, 1.0), 100.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn renders_quantiles_sum_and_count_and_forgets_old_observations() {
        let summary = Summary::new(
            "karpenter_nodes_termination_duration_seconds",
            "Time from a node's deletion to its finalizer's removal",
            &["nodepool"],
        );
        summary.observe(&["default"], 30.0, at(0));
        summary.observe(&["default"], 10.0, at(60));
        summary.observe(&["default"], 20.0, at(120));
        let mut out = String::new();
        summary.render(Some(at(130)), &mut out);
        assert_eq!(
            out,
            "# HELP karpenter_nodes_termination_duration_seconds Time from a node's deletion to its finalizer's removal\n\
             # TYPE karpenter_nodes_termination_duration_seconds summary\n\
             karpenter_nodes_termination_duration_seconds{nodepool=\"default\",quantile=\"0\"} 10.0\n\
             karpenter_nodes_termination_duration_seconds{nodepool=\"default\",quantile=\"0.5\"} 20.0\n\
             karpenter_nodes_termination_duration_seconds{nodepool=\"default\",quantile=\"0.9\"} 30.0\n\
             karpenter_nodes_termination_duration_seconds{nodepool=\"default\",quantile=\"0.99\"} 30.0\n\
             karpenter_nodes_termination_duration_seconds{nodepool=\"default\",quantile=\"1\"} 30.0\n\
             karpenter_nodes_termination_duration_seconds_sum{nodepool=\"default\"} 60.0\n\
             karpenter_nodes_termination_duration_seconds_count{nodepool=\"default\"} 3\n"
        );
        // Ten minutes after the first observation it no longer counts for the quantiles; the
        // sum and count keep it.
        let mut out = String::new();
        summary.render(Some(at(601)), &mut out);
        assert!(
            out.contains("{nodepool=\"default\",quantile=\"1\"} 20.0\n"),
            "{out}"
        );
        assert!(out.contains("_count{nodepool=\"default\"} 3\n"), "{out}");
        // All gone from the window: NaN quantiles, as client_golang writes.
        let mut out = String::new();
        summary.render(Some(at(800)), &mut out);
        assert!(
            out.contains("{nodepool=\"default\",quantile=\"0.5\"} NaN\n"),
            "{out}"
        );
    }

    #[test]
    fn a_summary_without_labels_writes_bare_sum_and_count() {
        let summary = Summary::new("karpenter_pods_startup_duration_seconds", "h", &[]);
        summary.observe(&[], 4.5, at(0));
        let mut out = String::new();
        summary.render(None, &mut out);
        assert!(out.contains("karpenter_pods_startup_duration_seconds{quantile=\"0.5\"} 4.5\n"));
        assert!(out.contains("karpenter_pods_startup_duration_seconds_sum 4.5\n"));
        assert!(out.contains("karpenter_pods_startup_duration_seconds_count 1\n"));
    }
}
