//! The example scenarios and the manifests they reference, compiled into the binary so
//! `driftwood demo` works from any directory; and reading a scenario's files from disk.

use std::path::{Path, PathBuf};

/// Files under examples/, by path relative to examples/.
const FILES: &[(&str, &str)] = &[
    (
        "update-nodes-with-drift/latest-current-ami.yaml",
        include_str!("../../../../examples/update-nodes-with-drift/latest-current-ami.yaml"),
    ),
    (
        "update-nodes-with-drift/workload.yaml",
        include_str!("../../../../examples/update-nodes-with-drift/workload.yaml"),
    ),
    (
        "update-nodes-with-drift-name-terms/latest-current-ami.yaml",
        include_str!(
            "../../../../examples/update-nodes-with-drift-name-terms/latest-current-ami.yaml"
        ),
    ),
    (
        "update-nodes-with-drift-name-terms/workload.yaml",
        include_str!("../../../../examples/update-nodes-with-drift-name-terms/workload.yaml"),
    ),
];

/// The example scenarios, by name (the file stem under examples/scenarios/), in the order
/// `driftwood demo --list` shows them. The first is what `driftwood demo` runs.
pub const SCENARIOS: &[(&str, &str)] = &[
    (
        "update-nodes-with-drift",
        include_str!("../../../../examples/scenarios/update-nodes-with-drift.yaml"),
    ),
    (
        "update-nodes-with-drift-name-terms",
        include_str!("../../../../examples/scenarios/update-nodes-with-drift-name-terms.yaml"),
    ),
    (
        "budget-window",
        include_str!("../../../../examples/scenarios/budget-window.yaml"),
    ),
    (
        "canary-halt",
        include_str!("../../../../examples/scenarios/canary-halt.yaml"),
    ),
    (
        "rate-budget-100-nodes",
        include_str!("../../../../examples/scenarios/rate-budget-100-nodes.yaml"),
    ),
    (
        "fleet-50-nodes",
        include_str!("../../../../examples/scenarios/fleet-50-nodes.yaml"),
    ),
    (
        "preview-then-apply",
        include_str!("../../../../examples/scenarios/preview-then-apply.yaml"),
    ),
    (
        "fleet-1000-nodes",
        include_str!("../../../../examples/scenarios/fleet-1000-nodes.yaml"),
    ),
    (
        "fleet-5000-nodes",
        include_str!("../../../../examples/scenarios/fleet-5000-nodes.yaml"),
    ),
    (
        "fleet-realistic-1000",
        include_str!("../../../../examples/scenarios/fleet-realistic-1000.yaml"),
    ),
    (
        "fleet-realistic-5000",
        include_str!("../../../../examples/scenarios/fleet-realistic-5000.yaml"),
    ),
    (
        "pdb-protected",
        include_str!("../../../../examples/scenarios/pdb-protected.yaml"),
    ),
    (
        "consolidate-after-scale-down",
        include_str!("../../../../examples/scenarios/consolidate-after-scale-down.yaml"),
    ),
    (
        "al2023-latest-release",
        include_str!("../../../../examples/scenarios/al2023-latest-release.yaml"),
    ),
    (
        "tgp-do-not-disrupt",
        include_str!("../../../../examples/scenarios/tgp-do-not-disrupt.yaml"),
    ),
    (
        "pending-pods-full-budget",
        include_str!("../../../../examples/scenarios/pending-pods-full-budget.yaml"),
    ),
    (
        "replacement-never-initializes",
        include_str!("../../../../examples/scenarios/replacement-never-initializes.yaml"),
    ),
    (
        "stable-custom-key-in",
        include_str!("../../../../examples/scenarios/stable-custom-key-in.yaml"),
    ),
    (
        "stable-local-nvme-exists",
        include_str!("../../../../examples/scenarios/stable-local-nvme-exists.yaml"),
    ),
];

/// The scenario `driftwood demo` runs without arguments.
pub const DEFAULT_SCENARIO: &str = "update-nodes-with-drift";

/// Where a scenario's referenced files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Files {
    /// The copies compiled into the binary; paths relative to examples/scenarios/.
    Bundled,
    /// A directory on disk (the scenario file's).
    Disk(PathBuf),
}

impl Files {
    /// Reads `path` (relative to the scenario).
    pub fn read(&self, path: &str) -> Result<String, String> {
        match self {
            Files::Bundled => {
                let wanted = normalize(&format!("scenarios/{path}"));
                FILES
                    .iter()
                    .find(|(p, _)| *p == wanted)
                    .map(|(_, text)| text.to_string())
                    .ok_or_else(|| format!("{path}: not among the bundled example files"))
            }
            Files::Disk(dir) => {
                let full = dir.join(path);
                std::fs::read_to_string(&full).map_err(|e| format!("{}: {e}", full.display()))
            }
        }
    }
}

/// Resolves `.` and `..` in a relative `/`-separated path.
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// A bundled scenario's text by name.
pub fn bundled(name: &str) -> Option<&'static str> {
    SCENARIOS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Finds a scenario: a file path, else a bundled example's name.
pub fn locate(arg: &str) -> Result<(String, Files), String> {
    let path = Path::new(arg);
    if path.is_file() {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{arg}: {e}"))?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        return Ok((text, Files::Disk(dir)));
    }
    let stem = arg.trim_end_matches(".yaml");
    let stem = stem.rsplit('/').next().unwrap_or(stem);
    bundled(stem)
        .map(|t| (t.to_string(), Files::Bundled))
        .ok_or_else(|| {
            let names: Vec<&str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
            format!(
                "{arg}: no such file, and not a bundled example ({})",
                names.join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_relative_paths() {
        assert_eq!(normalize("scenarios/../a/b.yaml"), "a/b.yaml");
        assert_eq!(normalize("./a/./b"), "a/b");
    }

    #[test]
    fn bundled_files_resolve_from_the_scenarios_folder() {
        let text = Files::Bundled
            .read("../update-nodes-with-drift/workload.yaml")
            .unwrap();
        assert!(text.contains("kind: Deployment"));
        assert!(Files::Bundled.read("nope.yaml").is_err());
    }

    #[test]
    fn every_bundled_scenario_parses() {
        for (name, text) in SCENARIOS {
            let s = super::super::scenario::parse_scenario(text)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&s.name, name);
            assert!(!s.description.is_empty(), "{name}");
        }
    }
}
