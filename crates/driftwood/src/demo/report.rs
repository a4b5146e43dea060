//! The run's summary: the timeline in cluster time, availability, rollout time — as text for
//! the terminal, JSON for `--report`, and a hand-written SVG chart of nodes by state and ready
//! pods over time.

use super::duration::compact;
use super::scenario::Scenario;
use super::track::{EventKind, Frame, TimelineEvent, Tracker};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// `HH:MM:SS` (UTC) of a unix second.
pub fn clock_time(second: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(second)
        .map(|t| t.strftime("%H:%M:%S").to_string())
        .unwrap_or_else(|_| second.to_string())
}

/// `HH:MM:SS what: detail`, one line of a timeline (injected faults, violations).
pub fn timeline_line(second: i64, what: &str, detail: &str) -> String {
    format!("{} {what}: {detail}", clock_time(second))
}

fn rfc3339(second: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// One timeline entry as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReportedEvent {
    pub at: String,
    /// Seconds since the rollout started.
    pub offset_seconds: i64,
    pub what: EventKind,
    pub subject: String,
    pub detail: String,
}

/// Everything the run reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub scenario: String,
    pub kubernetes_version: String,
    pub passed: bool,
    pub failure: Option<String>,
    pub started_at: String,
    pub finished_at: String,
    pub rollout_started_at: Option<String>,
    pub rollout_finished_at: Option<String>,
    pub rollout_seconds: Option<i64>,
    pub nodes_replaced: usize,
    /// Every NodePool node removed since the rollout started, old or new (a node replaced
    /// again and again counts every time).
    pub nodes_removed: usize,
    pub max_disrupting: usize,
    /// The fewest ready pods per app (label `app`) during the rollout.
    pub min_ready_pods: BTreeMap<String, i32>,
    pub drift_reasons: Vec<String>,
    pub timeline: Vec<ReportedEvent>,
    pub frames: Vec<Frame>,
    /// The simulated account's API calls in each step (empty against another cloud).
    pub aws_calls: Vec<super::aws_calls::StepCalls>,
    /// A `preview` step's prediction beside what the rollout did.
    pub predicted: Option<PredictedVsActual>,
    /// The disruptions grouped into waves, with how far each got.
    pub waves: Vec<super::html::WaveProgress>,
    /// The unix second offsets count from (the change, or the start when nothing changed).
    #[serde(skip)]
    pub origin: i64,
}

/// A preview's prediction beside what the rollout then did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictedVsActual {
    pub predicted_drifted: usize,
    pub actual_drifted: usize,
    /// Whether the NodeClaims predicted to drift are exactly those replaced.
    pub same_nodes_replaced: bool,
    pub predicted_waves: usize,
    pub actual_waves: usize,
    /// The change to the last old NodeClaim gone.
    pub predicted_seconds: Option<i64>,
    pub actual_seconds: Option<i64>,
}

impl PredictedVsActual {
    /// Sets `preview` beside what `tracker` saw.
    pub fn new(preview: &crate::preview::Preview, tracker: &Tracker) -> Self {
        let predicted: std::collections::BTreeSet<&str> = preview
            .nodes
            .iter()
            .filter(|n| n.drifted)
            .map(|n| n.nodeclaim.as_str())
            .collect();
        let replaced: std::collections::BTreeSet<&str> =
            tracker.claims_gone.keys().map(String::as_str).collect();
        let start = tracker.rollout_start.unwrap_or_default();
        let starts: Vec<(String, i64)> = tracker
            .claims_disrupting
            .iter()
            .map(|(name, at)| (name.clone(), at - start))
            .collect();
        Self {
            predicted_drifted: predicted.len(),
            actual_drifted: tracker.drifted_claims.len(),
            same_nodes_replaced: predicted == replaced,
            predicted_waves: preview.waves.len(),
            actual_waves: crate::preview::report::waves(&starts).len(),
            predicted_seconds: preview.eta_seconds,
            actual_seconds: tracker.old_claims_gone_after(),
        }
    }

    /// How far the predicted rollout time is from the actual one, in percent of the actual.
    pub fn error_percent(&self) -> Option<f64> {
        let (p, a) = (self.predicted_seconds?, self.actual_seconds?);
        (a > 0).then(|| (p - a).abs() as f64 * 100.0 / a as f64)
    }

    /// The side-by-side table.
    pub fn text(&self) -> String {
        let time = |s: Option<i64>| s.map_or_else(|| "-".to_string(), compact);
        let rows = vec![
            vec![
                "nodes drifted".to_string(),
                self.predicted_drifted.to_string(),
                self.actual_drifted.to_string(),
            ],
            vec![
                "same nodes replaced".to_string(),
                String::new(),
                if self.same_nodes_replaced {
                    "yes"
                } else {
                    "no"
                }
                .to_string(),
            ],
            vec![
                "waves".to_string(),
                self.predicted_waves.to_string(),
                self.actual_waves.to_string(),
            ],
            vec![
                "rollout time".to_string(),
                time(self.predicted_seconds),
                match self.error_percent() {
                    Some(e) => format!("{} ({e:.0}% off)", time(self.actual_seconds)),
                    None => time(self.actual_seconds),
                },
            ],
        ];
        let mut out = String::from("\nPredicted vs actual:\n");
        for line in super::tables::layout(&["", "PREDICTED", "ACTUAL"], &rows).lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

impl Summary {
    pub fn new(
        scenario: &Scenario,
        started: i64,
        finished: i64,
        tracker: &Tracker,
        failure: Option<String>,
    ) -> Self {
        let rollout_start = tracker.rollout_start;
        let rollout_end = tracker.last_node_event();
        let origin = rollout_start.unwrap_or(started);
        let mut timeline: Vec<&TimelineEvent> = tracker.timeline.iter().collect();
        timeline.sort_by_key(|e| (e.at, e.kind));
        Self {
            scenario: scenario.name.clone(),
            kubernetes_version: scenario.kubernetes_version.clone(),
            passed: failure.is_none(),
            failure,
            started_at: rfc3339(started),
            finished_at: rfc3339(finished),
            rollout_started_at: rollout_start.map(rfc3339),
            rollout_finished_at: rollout_end.map(rfc3339),
            rollout_seconds: rollout_start.zip(rollout_end).map(|(s, e)| e - s),
            nodes_replaced: tracker.replaced(),
            nodes_removed: tracker.removed(),
            max_disrupting: tracker.max_disrupting,
            min_ready_pods: tracker.min_ready.clone(),
            drift_reasons: tracker.drift_reasons.iter().cloned().collect(),
            timeline: timeline
                .into_iter()
                .map(|e| ReportedEvent {
                    at: rfc3339(e.at),
                    offset_seconds: e.at - origin,
                    what: e.kind,
                    subject: e.subject.clone(),
                    detail: e.detail.clone(),
                })
                .collect(),
            frames: tracker.frames.clone(),
            aws_calls: Vec::new(),
            predicted: None,
            waves: super::html::wave_progress(
                &tracker
                    .claims_disrupting
                    .iter()
                    .map(|(name, at)| (name.clone(), at - origin))
                    .collect::<Vec<_>>(),
                &tracker
                    .claims_gone
                    .iter()
                    .map(|(name, at)| (name.clone(), at - origin))
                    .collect(),
            ),
            origin,
        }
    }

    /// The timeline with same-second events of one kind grouped: clock time, offset, what
    /// happened, and to what.
    pub fn grouped_timeline(&self) -> Vec<[String; 4]> {
        let mut rows = Vec::new();
        let mut i = 0;
        while i < self.timeline.len() {
            let first = &self.timeline[i];
            let mut j = i + 1;
            while j < self.timeline.len()
                && self.timeline[j].at == first.at
                && self.timeline[j].what == first.what
            {
                j += 1;
            }
            let group = &self.timeline[i..j];
            let time = first.at.get(11..19).unwrap_or(&first.at).to_string();
            let offset = format!("+{}", compact(first.offset_seconds));
            let line = if group.len() == 1 {
                let detail = if first.detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", first.detail)
                };
                format!("{}{detail}", first.subject)
            } else {
                let names: Vec<&str> = group.iter().take(3).map(|e| e.subject.as_str()).collect();
                let more = group.len().saturating_sub(3);
                let tail = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                format!("{} × {}{tail}", group.len(), names.join(", "))
            };
            rows.push([time, offset, first.what.phrase().to_string(), line]);
            i = j;
        }
        rows
    }

    /// The self-contained HTML page of the run.
    pub fn html(&self) -> String {
        let mut facts = vec![
            ("Kubernetes".to_string(), self.kubernetes_version.clone()),
            (
                "Nodes replaced".to_string(),
                self.nodes_replaced.to_string(),
            ),
            (
                "Most disrupting at once".to_string(),
                self.max_disrupting.to_string(),
            ),
        ];
        if let Some(seconds) = self.rollout_seconds {
            facts.push((
                "Rollout time (cluster time)".to_string(),
                format!(
                    "{} ({} → {})",
                    compact(seconds),
                    self.rollout_started_at.as_deref().unwrap_or("?"),
                    self.rollout_finished_at.as_deref().unwrap_or("?")
                ),
            ));
        }
        if !self.drift_reasons.is_empty() {
            facts.push(("Drifted for".to_string(), self.drift_reasons.join(", ")));
        }
        if let Some(f) = &self.failure {
            facts.push(("Failure".to_string(), f.clone()));
        }
        super::html::render(&super::html::Page {
            title: format!("driftwood demo: {}", self.scenario),
            passed: Some(self.passed),
            facts,
            frames: &self.frames,
            origin: self.origin,
            waves: self.waves.clone(),
            tables: vec![super::html::Table {
                caption: "Timeline (cluster time)".to_string(),
                headers: ["time", "after the change", "what", "subject"]
                    .map(String::from)
                    .to_vec(),
                rows: self
                    .grouped_timeline()
                    .into_iter()
                    .map(|r| r.to_vec())
                    .collect(),
            }],
        })
    }

    /// The summary for the terminal: timeline (same-second events of one kind grouped),
    /// availability, rollout time and the verdict.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "\nTimeline (cluster time):");
        for [time, offset, what, line] in self.grouped_timeline() {
            let _ = writeln!(out, "  {time}  {offset:<10} {what:<24} {line}");
        }
        if self.timeline.is_empty() {
            let _ = writeln!(out, "  (no rollout: the scenario changed nothing)");
        }
        let _ = writeln!(out);
        for (app, min) in &self.min_ready_pods {
            let _ = writeln!(
                out,
                "Fewest ready pods of app {app} during the rollout: {min}"
            );
        }
        let _ = writeln!(
            out,
            "Nodes replaced: {}, at most {} disrupting at once",
            self.nodes_replaced, self.max_disrupting
        );
        if self.nodes_removed > self.nodes_replaced {
            let _ = writeln!(
                out,
                "Nodes removed: {} in all ({} of them launched during the rollout)",
                self.nodes_removed,
                self.nodes_removed - self.nodes_replaced
            );
        }
        if let Some(seconds) = self.rollout_seconds {
            let _ = writeln!(
                out,
                "Rollout time: {} of cluster time (change applied {} → last node event {})",
                compact(seconds),
                self.rollout_started_at.as_deref().unwrap_or("?"),
                self.rollout_finished_at.as_deref().unwrap_or("?")
            );
        }
        if let Some(predicted) = &self.predicted {
            out.push_str(&predicted.text());
        }
        match &self.failure {
            None => {
                let _ = writeln!(out, "Result: PASS ({})", self.scenario);
            }
            Some(f) => {
                let _ = writeln!(out, "Result: FAIL ({}): {f}", self.scenario);
            }
        }
        out
    }

    /// The chart of nodes by state and ready pods over the rollout.
    pub fn svg(&self) -> String {
        chart_svg(&self.scenario, &self.frames)
    }
}

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 320.0;
const LEFT: f64 = 50.0;
const RIGHT: f64 = 60.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 50.0;

/// One stacked layer: name, colour, and its value in a frame.
type Layer = (&'static str, &'static str, fn(&Frame) -> usize);

/// At most this many points per series.
const MAX_POINTS: usize = 600;

/// Stacked areas (old, replacing, draining, new nodes) and a ready-pods line, hand-written SVG.
pub fn chart_svg(title: &str, frames: &[Frame]) -> String {
    let step = frames.len().div_ceil(MAX_POINTS).max(1);
    let sampled: Vec<&Frame> = frames
        .iter()
        .step_by(step)
        .chain(
            frames
                .last()
                .filter(|_| !(frames.len() - 1).is_multiple_of(step)),
        )
        .collect();
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{LEFT}\" y=\"18\" font-size=\"14\">{}: nodes by state and ready pods</text>\n",
        escape(title)
    );
    let (Some(first), Some(last)) = (sampled.first(), sampled.last()) else {
        svg.push_str("<text x=\"50\" y=\"160\">no rollout observed</text>\n</svg>\n");
        return svg;
    };
    let t0 = first.at;
    let span = (last.at - t0).max(1) as f64;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let max_nodes = sampled
        .iter()
        .map(|f| f.old + f.drifted + f.replacing + f.draining + f.new)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let max_pods = sampled
        .iter()
        .map(|f| f.ready_pods)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let x = |at: i64| LEFT + (at - t0) as f64 / span * plot_w;
    let y = |v: f64, max: f64| TOP + plot_h - v / max * plot_h;
    // Stacked layers, bottom to top.
    let layers: [Layer; 4] = [
        ("old", "#9e9e9e", |f| f.old + f.drifted),
        ("replacing", "#ffb300", |f| f.replacing),
        ("draining", "#e53935", |f| f.draining),
        ("new", "#43a047", |f| f.new),
    ];
    let mut below: Vec<f64> = vec![0.0; sampled.len()];
    for (name, color, value) in layers {
        let above: Vec<f64> = sampled
            .iter()
            .zip(&below)
            .map(|(f, b)| b + value(f) as f64)
            .collect();
        let mut points: Vec<String> = sampled
            .iter()
            .zip(&above)
            .map(|(f, v)| format!("{:.1},{:.1}", x(f.at), y(*v, max_nodes)))
            .collect();
        points.extend(
            sampled
                .iter()
                .zip(&below)
                .rev()
                .map(|(f, v)| format!("{:.1},{:.1}", x(f.at), y(*v, max_nodes))),
        );
        let _ = writeln!(
            svg,
            "<polygon class=\"{name}\" fill=\"{color}\" fill-opacity=\"0.8\" stroke=\"none\" points=\"{}\"/>",
            points.join(" ")
        );
        below = above;
    }
    let line: Vec<String> = sampled
        .iter()
        .map(|f| format!("{:.1},{:.1}", x(f.at), y(f.ready_pods as f64, max_pods)))
        .collect();
    let _ = writeln!(
        svg,
        "<polyline class=\"ready-pods\" fill=\"none\" stroke=\"#1e88e5\" stroke-width=\"2\" points=\"{}\"/>",
        line.join(" ")
    );
    // Axes and labels.
    let bottom = TOP + plot_h;
    let right = LEFT + plot_w;
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"black\"/>\n<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{bottom}\" stroke=\"black\"/>\n<line x1=\"{right}\" y1=\"{TOP}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"#1e88e5\"/>"
    );
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{max_nodes}</text>\n<text x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text>\n<text x=\"{}\" y=\"{}\" fill=\"#1e88e5\">{max_pods} pods</text>",
        LEFT - 4.0,
        TOP + 4.0,
        LEFT - 4.0,
        bottom,
        right + 4.0,
        TOP + 4.0
    );
    let _ = writeln!(
        svg,
        "<text x=\"{LEFT}\" y=\"{}\">{}</text>\n<text x=\"{right}\" y=\"{}\" text-anchor=\"end\">{} (+{})</text>",
        bottom + 14.0,
        clock_time(t0),
        bottom + 14.0,
        clock_time(last.at),
        compact(last.at - t0)
    );
    let legend = [
        ("old", "#9e9e9e"),
        ("replacing", "#ffb300"),
        ("draining", "#e53935"),
        ("new", "#43a047"),
        ("ready pods", "#1e88e5"),
    ];
    for (i, (name, color)) in legend.iter().enumerate() {
        let lx = LEFT + i as f64 * 110.0;
        let ly = HEIGHT - 14.0;
        let _ = writeln!(
            svg,
            "<rect x=\"{lx}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{color}\"/><text x=\"{}\" y=\"{ly}\">{name}</text>",
            ly - 9.0,
            lx + 14.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// Text made safe inside XML/HTML elements and double-quoted attributes.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(at: i64, old: usize, replacing: usize, new: usize, ready: i32) -> Frame {
        Frame {
            at,
            old,
            replacing,
            new,
            ready_pods: ready,
            ..Frame::default()
        }
    }

    #[test]
    fn clock_time_is_utc_hms() {
        assert_eq!(clock_time(9 * 3600 + 12), "09:00:12");
    }

    #[test]
    fn svg_has_one_polygon_per_state_and_the_pods_line() {
        let frames = vec![
            frame(0, 1, 0, 0, 3),
            frame(10, 0, 1, 1, 2),
            frame(20, 0, 0, 1, 3),
        ];
        let svg = chart_svg("walk<through>", &frames);
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polygon").count(), 4);
        assert!(svg.contains("class=\"ready-pods\""));
        assert!(svg.contains("walk&lt;through&gt;"));
        // The ready-pods line dips at t=10 (2 of 3): y is lower on the page (larger).
        let line = svg.lines().find(|l| l.contains("ready-pods")).unwrap();
        assert!(
            line.contains("50.0,30.0") && line.contains("395.0,110.0"),
            "{line}"
        );
    }

    #[test]
    fn svg_without_frames_says_so() {
        assert!(chart_svg("x", &[]).contains("no rollout observed"));
    }

    #[test]
    fn text_groups_same_second_events() {
        let mut tracker = Tracker::new();
        tracker.start_rollout(100, &Default::default());
        tracker.note(100, EventKind::ChangeApplied, "EC2NodeClass/x", "upgrade");
        for n in ["a", "b", "c", "d"] {
            tracker.note(160, EventKind::Terminated, n, "node deleted");
        }
        let scenario = super::super::scenario::parse_scenario("name: s").unwrap();
        let summary = Summary::new(&scenario, 0, 200, &tracker, None);
        let text = summary.text();
        assert!(
            text.contains("old node terminated      4 × a, b, c and 1 more"),
            "{text}"
        );
        assert!(text.contains("+1m00s"), "{text}");
        assert!(text.contains("Result: PASS"), "{text}");
    }
}
