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
