//! A rollout as one self-contained HTML page (no script, no network): the headline facts, nodes
//! by state over time, each wave's progress, each workload's ready pods with its fewest marked,
//! and the timeline or node table — written by `demo --report` and `preview --report`.

use super::duration::compact;
use super::report::{chart_svg, escape};
use super::track::Frame;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One wave: the nodes whose disruption started together, and how far they got.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WaveProgress {
    pub number: usize,
    pub nodes: usize,
    /// Seconds after the change when its first node began disrupting.
    pub started: i64,
    /// Of its nodes, those gone, and when the last of them went (seconds after the change)
    /// once all are.
    pub done: usize,
    pub finished: Option<i64>,
}

/// Groups disruption starts into waves (as the preview does) and says how far each got:
/// `starts` and `gone` are seconds after the change, by NodeClaim.
pub fn wave_progress(starts: &[(String, i64)], gone: &BTreeMap<String, i64>) -> Vec<WaveProgress> {
    crate::preview::report::waves(starts)
        .into_iter()
        .map(|wave| {
            let ends: Vec<i64> = wave
                .nodeclaims
                .iter()
                .filter_map(|c| gone.get(c).copied())
                .collect();
            WaveProgress {
                number: wave.number,
                nodes: wave.nodeclaims.len(),
                started: wave.starts_after_seconds,
                done: ends.len(),
                finished: (ends.len() == wave.nodeclaims.len())
                    .then(|| ends.iter().copied().max())
                    .flatten(),
            }
        })
        .collect()
}

/// A table of the page: a caption, its column names and rows of cells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub caption: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// Everything the page shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<'a> {
    pub title: String,
    /// `Some(true)` passed, `Some(false)` failed, `None` a preview (no verdict).
    pub passed: Option<bool>,
    /// Headline rows: what, value.
    pub facts: Vec<(String, String)>,
    pub frames: &'a [Frame],
    /// The unix second the change was applied: offsets are counted from it.
    pub origin: i64,
    pub waves: Vec<WaveProgress>,
    pub tables: Vec<Table>,
}

/// Workload colours, one per workload in order (then again, dashed).
pub const WORKLOAD_COLORS: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#b07aa1", "#76b7b2", "#59a14f", "#edc948", "#e15759", "#ff9da7",
    "#9c755f", "#17becf",
];

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#212121;max-width:1100px}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}\
.pass{color:#2e7d32}.fail{color:#c62828}\
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 10px;text-align:left;border-bottom:1px solid #e0e0e0}\
th{background:#f5f5f5}.facts td:first-child{color:#616161}\
.swatch{display:inline-block;width:14px;height:14px;vertical-align:middle;margin-right:6px}";

/// The whole page.
pub fn render(page: &Page<'_>) -> String {
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(&page.title),
        escape(&page.title)
    );
    match page.passed {
        Some(true) => html.push_str("<p class=\"pass\" id=\"verdict\">PASS</p>\n"),
        Some(false) => html.push_str("<p class=\"fail\" id=\"verdict\">FAIL</p>\n"),
        None => {}
    }
    html.push_str("<table class=\"facts\">\n");
    for (what, value) in &page.facts {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(what),
            escape(value)
        );
    }
    html.push_str("</table>\n<h2>Nodes by state</h2>\n");
    html.push_str(&chart_svg(&page.title, page.frames));
    html.push_str("<h2>Waves</h2>\n");
    html.push_str(&waves_svg(&page.waves, page.frames, page.origin));
    html.push_str("<h2>Ready pods per workload</h2>\n");
    let workloads = workloads(page.frames, page.origin);
    html.push_str(&workloads_svg(&workloads, page.frames, page.origin));
    html.push_str(&legend(&workloads));
    for table in &page.tables {
        let _ = writeln!(html, "<h2>{}</h2>\n<table>", escape(&table.caption));
        html.push_str("<tr>");
        for h in &table.headers {
            let _ = write!(html, "<th>{}</th>", escape(h));
        }
        html.push_str("</tr>\n");
        for row in &table.rows {
            html.push_str("<tr>");
            for cell in row {
                let _ = write!(html, "<td>{}</td>", escape(cell));
            }
            html.push_str("</tr>\n");
        }
        html.push_str("</table>\n");
    }
    html.push_str("</body>\n</html>\n");
    html
}

/// One workload's line: its colour, its most and fewest ready pods and when the fewest was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    pub name: String,
    pub color: &'static str,
    pub dashed: bool,
    pub at_start: i32,
    pub most: i32,
    pub fewest: i32,
    /// Seconds after the change of the first frame with the fewest.
    pub fewest_after: i64,
}

/// Every workload seen in `frames`, in name order, with its colour and extremes.
pub fn workloads(frames: &[Frame], origin: i64) -> Vec<Workload> {
    let mut names: BTreeMap<&str, Workload> = BTreeMap::new();
    for frame in frames {
        for (app, ready) in &frame.ready_by_app {
            let entry = names.entry(app).or_insert_with(|| Workload {
                name: app.clone(),
                color: "",
                dashed: false,
                at_start: *ready,
                most: *ready,
                fewest: *ready,
                fewest_after: frame.at - origin,
            });
            entry.most = entry.most.max(*ready);
            if *ready < entry.fewest {
                entry.fewest = *ready;
                entry.fewest_after = frame.at - origin;
            }
        }
    }
    names
        .into_values()
        .enumerate()
        .map(|(i, mut w)| {
            w.color = WORKLOAD_COLORS[i % WORKLOAD_COLORS.len()];
            w.dashed = i >= WORKLOAD_COLORS.len();
            w
        })
        .collect()
}

const W: f64 = 800.0;
const LEFT: f64 = 50.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 12.0;
const AXIS: f64 = 30.0;

/// The run's span in seconds after the change: from the first frame to the last.
fn span(frames: &[Frame], origin: i64) -> (i64, i64) {
    match (frames.first(), frames.last()) {
        (Some(a), Some(b)) => (a.at - origin, (b.at - origin).max(a.at - origin + 1)),
        _ => (0, 1),
    }
}

/// A time axis at `bottom` from `left` to the right margin, five ticks labelled `+offset`.
fn time_axis(svg: &mut String, left: f64, (from, to): (i64, i64), bottom: f64) {
    let plot_w = W - left - RIGHT;
    let _ = writeln!(
        svg,
        "<line x1=\"{left}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\" stroke=\"#212121\"/>",
        W - RIGHT
    );
    for i in 0..=4i32 {
        let t = from + (to - from) * i64::from(i) / 4;
        let x = left + plot_w * f64::from(i) / 4.0;
        let label = if t < 0 {
            format!("-{}", compact(-t))
        } else {
            format!("+{}", compact(t))
        };
        let _ = writeln!(
            svg,
            "<line x1=\"{x:.1}\" y1=\"{bottom}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#212121\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
            bottom + 4.0,
            bottom + 17.0
        );
    }
}

/// Where the waves' bars start: their labels sit to the left.
const WAVE_LABELS: f64 = 250.0;

/// One bar per wave, from its first disruption to its last node gone (amber, to the end of the
/// run, while some of its nodes are not gone), labelled with its size and progress.
fn waves_svg(waves: &[WaveProgress], frames: &[Frame], origin: i64) -> String {
    if waves.is_empty() {
        return "<p id=\"waves\">No node was disrupted.</p>\n".to_string();
    }
    let (from, frames_to) = span(frames, origin);
    let to = waves
        .iter()
        .filter_map(|w| w.finished)
        .chain(waves.iter().map(|w| w.started))
        .fold(frames_to, i64::max);
    let row = 18.0;
    let height = TOP + row * waves.len() as f64 + AXIS;
    let plot_w = W - WAVE_LABELS - RIGHT;
    let x = |t: i64| WAVE_LABELS + (t - from).max(0) as f64 / (to - from).max(1) as f64 * plot_w;
    let mut svg = format!(
        "<svg id=\"waves\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{height}\" viewBox=\"0 0 {W} {height}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    for (i, wave) in waves.iter().enumerate() {
        let y = TOP + row * i as f64;
        let end = wave.finished.unwrap_or(to);
        let (fill, state) = match wave.finished {
            Some(f) => ("#43a047", format!("done in {}", compact(f - wave.started))),
            None => ("#ffb300", format!("{} of {} gone", wave.done, wave.nodes)),
        };
        let x0 = x(wave.started);
        let _ = writeln!(
            svg,
            "<rect class=\"wave\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{fill}\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">wave {}: {} node(s) from +{}, {state}</text>",
            y + 2.0,
            (x(end) - x0).max(2.0),
            row - 4.0,
            WAVE_LABELS - 6.0,
            y + row - 5.0,
            wave.number,
            wave.nodes,
            compact(wave.started.max(0)),
        );
    }
    time_axis(&mut svg, WAVE_LABELS, (from, to), height - AXIS + 4.0);
    svg.push_str("</svg>\n");
    svg
}

/// Each workload's ready pods as a share of its most, over time, the fewest marked.
fn workloads_svg(workloads: &[Workload], frames: &[Frame], origin: i64) -> String {
    if workloads.is_empty() {
        return "<p id=\"workloads\">No pod carries an app label.</p>\n".to_string();
    }
    let height = 260.0;
    let plot_h = height - TOP - AXIS;
    let plot_w = W - LEFT - RIGHT;
    let (from, to) = span(frames, origin);
    let x = |at: i64| LEFT + (at - origin - from) as f64 / (to - from).max(1) as f64 * plot_w;
    let y = |share: f64| TOP + plot_h - share * plot_h;
    let mut svg = format!(
        "<svg id=\"workloads\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{height}\" viewBox=\"0 0 {W} {height}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    for share in [0.0, 0.5, 1.0] {
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{0:.1}\" x2=\"{1}\" y2=\"{0:.1}\" stroke=\"#e0e0e0\"/><text x=\"{2}\" y=\"{3:.1}\" text-anchor=\"end\">{4}%</text>",
            y(share),
            W - RIGHT,
            LEFT - 4.0,
            y(share) + 4.0,
            share * 100.0
        );
    }
    let step = frames.len().div_ceil(600).max(1);
    for w in workloads {
        let most = f64::from(w.most.max(1));
        let points: Vec<String> = frames
            .iter()
            .enumerate()
            .filter(|(i, f)| {
                (i % step == 0 || *i + 1 == frames.len()) && f.ready_by_app.contains_key(&w.name)
            })
            .map(|(_, f)| {
                let ready = f.ready_by_app.get(&w.name).copied().unwrap_or(0);
                format!("{:.1},{:.1}", x(f.at), y(f64::from(ready) / most))
            })
            .collect();
        let dash = if w.dashed {
            " stroke-dasharray=\"6 3\""
        } else {
            ""
        };
        let _ = writeln!(
            svg,
            "<polyline class=\"workload\" data-workload=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
            escape(&w.name),
            w.color,
            points.join(" ")
        );
        let _ = writeln!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{}\"/>",
            x(origin + w.fewest_after),
            y(f64::from(w.fewest) / most),
            w.color
        );
    }
    time_axis(&mut svg, LEFT, (from, to), TOP + plot_h);
    svg.push_str("</svg>\n");
    svg
}

/// The legend: every workload with its colour, pods at the start, most and fewest ready.
fn legend(workloads: &[Workload]) -> String {
    if workloads.is_empty() {
        return String::new();
    }
    let mut html = String::from(
        "<table id=\"legend\">\n<tr><th>workload (app)</th><th>ready at start</th><th>most ready</th><th>fewest ready</th><th>fewest at</th></tr>\n",
    );
    for w in workloads {
        let _ = writeln!(
            html,
            "<tr class=\"workload\" data-workload=\"{0}\"><td><span class=\"swatch\" style=\"background:{1}\"></span>{0}</td><td>{2}</td><td>{3}</td><td>{4}</td><td>+{5}</td></tr>",
            escape(&w.name),
            w.color,
            w.at_start,
            w.most,
            w.fewest,
            compact(w.fewest_after.max(0))
        );
    }
    html.push_str("</table>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(at: i64, apps: &[(&str, i32)]) -> Frame {
        Frame {
            at,
            ready_by_app: apps.iter().map(|(a, n)| (a.to_string(), *n)).collect(),
            ..Frame::default()
        }
    }

    #[test]
    fn a_wave_is_finished_when_its_last_node_is_gone() {
        let starts = vec![
            ("a".to_string(), 2),
            ("b".to_string(), 3),
            ("c".to_string(), 80),
        ];
        let gone: BTreeMap<String, i64> = [("a".to_string(), 40), ("b".to_string(), 55)].into();
        let waves = wave_progress(&starts, &gone);
        assert_eq!(
            waves,
            vec![
                WaveProgress {
                    number: 1,
                    nodes: 2,
                    started: 2,
                    done: 2,
                    finished: Some(55),
                },
                WaveProgress {
                    number: 2,
                    nodes: 1,
                    started: 80,
                    done: 0,
                    finished: None,
                },
            ]
        );
    }

    #[test]
    fn each_workload_gets_its_own_colour_and_its_fewest_with_when() {
        let frames = vec![
            frame(100, &[("web", 4), ("api", 2)]),
            frame(101, &[("web", 3), ("api", 2)]),
            frame(102, &[("web", 2), ("api", 1)]),
            frame(103, &[("web", 4), ("api", 2)]),
        ];
        let w = workloads(&frames, 100);
        assert_eq!(w.len(), 2);
        assert_eq!(
            (w[0].name.as_str(), w[0].fewest, w[0].fewest_after),
            ("api", 1, 2)
        );
        assert_eq!((w[1].name.as_str(), w[1].most, w[1].fewest), ("web", 4, 2));
        assert_ne!(w[0].color, w[1].color);
        // The eleventh workload reuses the first colour, dashed.
        let many: Vec<(String, i32)> = (0..11).map(|i| (format!("app{i:02}"), 1)).collect();
        let refs: Vec<(&str, i32)> = many.iter().map(|(a, n)| (a.as_str(), *n)).collect();
        let w = workloads(&[frame(0, &refs)], 0);
        assert_eq!(w[10].color, w[0].color);
        assert!(w[10].dashed && !w[9].dashed);
    }

    #[test]
    fn the_page_names_every_workload_in_its_legend_and_escapes_what_it_quotes() {
        let frames = vec![
            frame(10, &[("web", 4), ("a<b", 1)]),
            frame(11, &[("web", 3), ("a<b", 0)]),
        ];
        let page = Page {
            title: "fleet & co".into(),
            passed: Some(true),
            facts: vec![("Nodes replaced".into(), "2".into())],
            frames: &frames,
            origin: 10,
            waves: vec![WaveProgress {
                number: 1,
                nodes: 2,
                started: 0,
                done: 1,
                finished: None,
            }],
            tables: vec![Table {
                caption: "Timeline".into(),
                headers: vec!["at".into(), "what".into()],
                rows: vec![vec!["+1s".into(), "<script>".into()]],
            }],
        };
        let html = render(&page);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<title>fleet &amp; co</title>"));
        assert!(html.contains("id=\"verdict\">PASS"));
        for name in ["web", "a&lt;b"] {
            assert!(
                html.contains(&format!("<tr class=\"workload\" data-workload=\"{name}\">")),
                "{name} not in the legend:\n{html}"
            );
            assert!(html.contains(&format!(
                "<polyline class=\"workload\" data-workload=\"{name}\""
            )));
        }
        assert!(html.contains("wave 1: 2 node(s) from +0s, 1 of 2 gone"));
        assert!(html.contains("<td>&lt;script&gt;</td>") && !html.contains("<script>"));
        // Self-contained: nothing is fetched.
        assert!(!html.contains("src=") && !html.contains("href="));
    }
}
