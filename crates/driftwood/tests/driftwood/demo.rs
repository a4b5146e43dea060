//! `driftwood demo` as a process: the default walkthrough ends on v1.30 with a timeline and
//! exit 0; `--list` names every bundled scenario; a failing scenario exits 1 naming the step.

use super::{driftwood, stdout};

#[test]
fn default_demo_replaces_the_node_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let output = driftwood(&["demo", "--report", report.to_str().unwrap()], None);
    let text = stdout(&output);
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.contains("Timeline (cluster time):"), "{text}");
    assert!(text.contains("old node terminated"), "{text}");
    assert!(
        text.contains("disrupting node(s) reason=drifted decision=replace"),
        "{text}"
    );
    assert!(
        text.contains("Result: PASS (update-nodes-with-drift)"),
        "{text}"
    );
    let last_nodes = text
        .lines()
        .rfind(|l| l.starts_with("ip-"))
        .unwrap_or_default();
    assert!(last_nodes.contains(" v1.30."), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(json["passed"], true);
    assert_eq!(json["min_ready_pods"]["latest-current-ami"], 2);
    let svg = std::fs::read_to_string(report.join("rollout.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("ready-pods"));
}

#[test]
fn list_shows_every_bundled_scenario() {
    let output = driftwood(&["demo", "--list"], None);
    let text = stdout(&output);
    assert!(output.status.success());
    for (name, _) in driftwood::demo::SCENARIOS {
        assert!(
            text.lines().any(|l| l.starts_with(name)),
            "{name} missing:\n{text}"
        );
    }
}

#[test]
fn a_failing_scenario_exits_one_naming_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.yaml");
    std::fs::write(
        &path,
        "name: impossible\nsteps:\n  - name: no nodes yet\n    expect: {nodes: 2}\n",
    )
    .unwrap();
    let output = driftwood(
        &["demo", "--quiet", "--scenario", path.to_str().unwrap()],
        None,
    );
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "Result: FAIL (impossible): step 1 (no nodes yet): nodes: 0 NodePool nodes (expected 2)"
        ),
        "{text}"
    );
}

#[test]
fn a_broken_scenario_file_is_an_error_naming_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.yaml");
    std::fs::write(&path, "name: bad\nsteps:\n  - waitFor: {nodez: 1}\n").unwrap();
    let output = driftwood(&["demo", "--scenario", path.to_str().unwrap()], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr.contains("step 1 (waitFor): waitFor: unknown field `nodez`"),
        "{stderr}"
    );
}

/// Chromium for the report's rendering test: `DRIFTWOOD_TEST_CHROMIUM` (scripts/test sets it),
/// else `chromium` on PATH. Under CI=true a missing browser fails the test.
fn chromium() -> Option<std::path::PathBuf> {
    let found = std::env::var_os("DRIFTWOOD_TEST_CHROMIUM")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join("chromium"))
                    .find(|p| p.is_file())
            })
        });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and no Chromium: scripts/test installs Debian's chromium package"
        );
        eprintln!("skipped: no Chromium (set DRIFTWOOD_TEST_CHROMIUM or install chromium)");
    }
    found
}

/// `#rrggbb` as bytes.
fn rgb(hex: &str) -> [u8; 3] {
    let byte = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap();
    [byte(1), byte(3), byte(5)]
}

/// `demo --report` writes report.html; headless Chromium renders it: the picture is not blank,
/// shows the node-state layers, and every workload the run tracked is in the legend with its
/// colour on screen.
#[test]
fn the_html_report_renders_in_chromium_with_every_workload_in_its_legend() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/scenarios/three-workloads.yaml"
    );
    let output = driftwood(
        &[
            "demo",
            "--scenario",
            scenario,
            "--quiet",
            "--report",
            report.to_str().unwrap(),
        ],
        None,
    );
    let text = stdout(&output);
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("summary.json")).unwrap())
            .unwrap();
    let html = std::fs::read_to_string(report.join("report.html")).unwrap();
    // Every app the run tracked (summary.json's fewest ready pods) is a legend row with a colour.
    let apps: Vec<String> = summary["min_ready_pods"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(apps, ["api", "batch", "web"], "{summary}");
    let mut colours = Vec::new();
    for app in &apps {
        let row = format!("<tr class=\"workload\" data-workload=\"{app}\">");
        let at = html
            .find(&row)
            .unwrap_or_else(|| panic!("{app} is not in the legend:\n{html}"));
        let swatch = &html[at..];
        let colour = swatch
            .split("background:")
            .nth(1)
            .and_then(|s| s.get(..7))
            .unwrap_or_else(|| panic!("no swatch for {app}"));
        let fewest = summary["min_ready_pods"][app].as_i64().unwrap();
        let cells = &swatch[..swatch.find("</tr>").unwrap()];
        assert!(
            cells.contains(&format!("<td>{fewest}</td>")),
            "{app}: fewest {fewest} not in {cells}"
        );
        colours.push((app.clone(), colour.to_string()));
    }
    // Each wave of summary.json is a bar.
    let waves = summary["waves"].as_array().unwrap();
    assert!(!waves.is_empty() && waves.iter().all(|w| w["finished"].is_i64()));
    assert_eq!(html.matches("<rect class=\"wave\"").count(), waves.len());

    let Some(chromium) = chromium() else { return };
    let shot = dir.path().join("shot.png");
    let profile = dir.path().join("chromium-profile");
    let rendered = std::process::Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1000,1400",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", report.join("report.html").display()))
        .output()
        .expect("chromium runs");
    assert!(
        rendered.status.success() && shot.is_file(),
        "chromium: {}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let decoder = png::Decoder::new(std::fs::File::open(&shot).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let pixels: Vec<[u8; 3]> = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    let count = |c: [u8; 3]| pixels.iter().filter(|p| **p == c).count();
    let not_white = pixels.iter().filter(|p| **p != [255, 255, 255]).count();
    assert!(
        not_white * 20 > pixels.len(),
        "the page is nearly blank: {not_white} of {} pixels drawn",
        pixels.len()
    );
    // The node-state layers are drawn at 0.8 opacity over white: blend to find them.
    let blend = |hex: &str| rgb(hex).map(|v| (f64::from(v) * 0.8 + 255.0 * 0.2).round() as u8);
    for (layer, hex) in [("old", "#9e9e9e"), ("new", "#43a047")] {
        let c = blend(hex);
        assert!(
            count(c) > 2000,
            "the {layer} layer ({c:?}) covers {} pixels",
            count(c)
        );
    }
    for (app, hex) in &colours {
        let n = count(rgb(hex));
        assert!(
            n >= 150,
            "{app}'s colour {hex} shows on {n} pixels: its legend swatch is not drawn"
        );
    }
}
