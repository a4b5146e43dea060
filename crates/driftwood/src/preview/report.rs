//! What the preview reports: each node drifted or not and why, the waves, what held nodes
//! back, the ETA with its range and assumptions, the replacements and the fewest ready pods
//! per workload — as text, as JSON (`-o json`) and as a report directory with the timeline.

use driftwood_api::NodeClaim;
use driftwood_api::condition::Conditions as _;
use driftwood_api::wellknown::{
    CONDITION_DRIFTED, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, REASON_DRIFTED,
};
use driftwood_controller::state::Snapshot;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::cloud::CloudCopy;
use super::live::LiveCluster;
use super::objects::ObjectsCopy;
use super::timing::LaunchToReady;
use crate::demo::duration::compact;
use crate::demo::track::{EventKind, Frame, Tracker};

/// How far the copy's rollout time may be from the real one, in percent: the 50-node fleet's
/// preview was 13% slower than its real rollout (e2e test
/// `a_preview_names_the_drifting_nodes_and_predicts_the_rollout_that_follows`).
pub const COPY_ERROR_PERCENT: i64 = 15;

/// Disruptions that start within this many seconds of a wave's first belong to that wave.
const WAVE_WINDOW: i64 = 10;

/// DisruptionBlocked notes that say the node's own disruption is under way.
const IN_FLIGHT_NOTES: [&str; 2] = ["already in flight", "marked for deletion"];

/// One live node as the preview sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodePreview {
    pub nodeclaim: String,
    pub node: String,
    pub nodepool: String,
    pub instance_type: String,
    pub drifted: bool,
    /// The drift reason (`AMIDrift`, `NodePoolDrifted`, `SubnetDrift`, ...).
    pub reason: Option<String>,
    /// What drifted, old and new values, as the Drifted condition says.
    pub message: Option<String>,
    /// 1-based; `None` when it is not replaced within the horizon.
    pub wave: Option<usize>,
    /// Seconds after the change that its disruption started.
    pub starts_after_seconds: Option<i64>,
    /// Seconds after the change that its NodeClaim was gone (instance terminated).
    pub replaced_after_seconds: Option<i64>,
    /// What held it back, as the disruption controller said it (DisruptionBlocked).
    pub blocked: Vec<String>,
    /// Disrupted by consolidation in the copy, for this reason (`Empty`, `Underutilized`).
    pub consolidated: Option<String>,
}

/// One wave: the nodes whose disruption started together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Wave {
    pub number: usize,
    pub starts_after_seconds: i64,
    pub nodeclaims: Vec<String>,
}

/// A workload's fewest ready pods during the rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Availability {
    pub workload: String,
    pub fewest_ready: i32,
    pub pods: i32,
}

/// The preview.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preview {
    pub kubernetes_version: String,
    /// The objects the change applied to the copy.
    pub change: Vec<String>,
    pub files: Vec<String>,
    pub applied_at: String,
    /// Whether the rollout completed within the horizon.
    pub complete: bool,
    /// Seconds from the change to the last old NodeClaim gone (`None` when not complete).
    pub eta_seconds: Option<i64>,
    /// A range around the ETA from the spread of this cluster's launch-to-ready times.
    pub eta_range_seconds: Option<(i64, i64)>,
    /// Why there is no ETA (the rollout did not complete within the horizon), when so.
    pub no_eta_because: Option<String>,
    pub assumptions: Vec<String>,
    pub launch_to_ready: LaunchToReady,
    pub nodes: Vec<NodePreview>,
    pub drifted: usize,
    /// Live nodes the copy consolidated away (not drift), by reason.
    pub consolidated: BTreeMap<String, Vec<String>>,
    pub waves: Vec<Wave>,
    /// Replacements by instance type.
    pub replacements: BTreeMap<String, usize>,
    pub availability: Vec<Availability>,
    /// NodeClaims already drifted in the live cluster before the change.
    pub already_drifted: Vec<String>,
    /// What could not be copied, with why.
    pub not_copied: Vec<String>,
    /// What the preview could not know or decide (images taken on trust, classes not Ready).
    pub warnings: Vec<String>,
    /// The copy's nodes by state over time (the report directory's chart).
    #[serde(skip)]
    pub frames: Vec<Frame>,
}

/// What [`build`] needs.
pub struct Inputs<'a> {
    pub live: &'a LiveCluster,
    pub change_names: &'a [String],
    pub applied: Vec<String>,
    pub applied_at: i64,
    pub finished_at: i64,
    pub complete: bool,
    pub tracker: &'a Tracker,
    pub fewest: BTreeMap<String, (i32, i32)>,
    pub already_drifted: Vec<String>,
    /// DisruptionBlocked notes per NodeClaim, oldest first.
    pub blocked: BTreeMap<String, Vec<String>>,
    pub timing: LaunchToReady,
    pub cloud: CloudCopy,
    pub objects: ObjectsCopy,
    pub final_snapshot: &'a Snapshot,
    /// Whether what the change selects was resolved through AWS.
    pub resolved_through_aws: bool,
    /// What the report must say besides (images taken on trust, classes not Ready).
    pub notes: Vec<String>,
}

/// The DisruptionBlocked notes the copy's controllers wrote, per NodeClaim, oldest first.
pub async fn blocked_events(
    client: &kube::Client,
) -> Result<BTreeMap<String, Vec<String>>, kube::Error> {
    let api: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::all(client.clone());
    let list = api.list(&kube::api::ListParams::default()).await?;
    let mut events: Vec<_> = list
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("DisruptionBlocked"))
        .collect();
    events.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for event in events {
        let Some(name) = event.regarding.as_ref().and_then(|r| r.name.clone()) else {
            continue;
        };
        let note = event.note.unwrap_or_default();
        // The node's own disruption under way is not something holding it back.
        if IN_FLIGHT_NOTES.iter().any(|n| note.contains(n)) {
            continue;
        }
        let notes = out.entry(name).or_default();
        if notes.last() != Some(&note) {
            notes.push(note);
        }
    }
    Ok(out)
}

fn label(claim: &NodeClaim, key: &str) -> String {
    claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key).cloned())
        .unwrap_or_default()
}

/// Groups start times (seconds after the change) into waves.
pub fn waves(starts: &[(String, i64)]) -> Vec<Wave> {
    let mut sorted = starts.to_vec();
    sorted.sort_by_key(|(name, at)| (*at, name.clone()));
    let mut out: Vec<Wave> = Vec::new();
    for (name, at) in sorted {
        match out.last_mut() {
            Some(wave) if at - wave.starts_after_seconds <= WAVE_WINDOW => {
                wave.nodeclaims.push(name)
            }
            _ => out.push(Wave {
                number: out.len() + 1,
                starts_after_seconds: at,
                nodeclaims: vec![name],
            }),
        }
    }
    out
}

/// Builds the report from what the run observed.
pub fn build(inputs: Inputs<'_>) -> Preview {
    let Inputs {
        live,
        change_names,
        applied,
        applied_at,
        finished_at,
        complete,
        tracker,
        fewest,
        already_drifted,
        blocked,
        timing,
        cloud,
        objects,
        final_snapshot,
        resolved_through_aws,
        notes,
    } = inputs;
    let gone = &tracker.claims_gone;
    let first = |kind: EventKind, subject: &str| {
        tracker
            .timeline
            .iter()
            .filter(|e| e.kind == kind && e.subject == subject)
            .map(|e| e.at)
            .min()
    };
    let claims: Vec<NodeClaim> = live
        .nodeclaims
        .iter()
        .filter(|o| o.metadata.deletion_timestamp.is_none())
        .filter_map(|o| serde_json::to_value(o).ok())
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    let mut starts = Vec::new();
    let mut nodes = Vec::new();
    for claim in &claims {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let node = claim
            .status
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        // Why it drifted: from the timeline (it may be gone now), else from the copy as it is.
        let drift = tracker
            .timeline
            .iter()
            .find(|e| e.kind == EventKind::DriftDetected && e.subject == name)
            .map(|e| e.detail.clone())
            .or_else(|| {
                final_snapshot
                    .store
                    .nodeclaims
                    .get(&name)
                    .and_then(|c| {
                        c.condition(CONDITION_DRIFTED)
                            .filter(|c| c.is_true())
                            .cloned()
                    })
                    .map(|c| {
                        format!(
                            "{}: {}",
                            c.reason.unwrap_or_default(),
                            c.message.unwrap_or_default()
                        )
                    })
            });
        let (reason, message) = match &drift {
            Some(detail) => match detail.split_once(": ") {
                Some((r, m)) => (Some(r.to_string()), Some(m.to_string())),
                None => (Some(detail.clone()), None),
            },
            None => (None, None),
        };
        let started = first(EventKind::DisruptionStarted, &name)
            .into_iter()
            .chain(tracker.claims_disrupting.get(&name).copied())
            .min()
            .map(|t| (t - applied_at).max(0));
        if let Some(at) = started {
            starts.push((name.clone(), at));
        }
        let replaced = gone.get(&name).map(|t| (t - applied_at).max(0));
        nodes.push(NodePreview {
            nodeclaim: name.clone(),
            node,
            nodepool: label(claim, LABEL_NODEPOOL),
            instance_type: label(claim, LABEL_INSTANCE_TYPE),
            drifted: drift.is_some(),
            reason,
            message,
            wave: None,
            starts_after_seconds: started,
            replaced_after_seconds: replaced,
            blocked: blocked.get(&name).cloned().unwrap_or_default(),
            consolidated: tracker
                .disruption_reasons
                .iter()
                .find(|(r, claims)| r.as_str() != REASON_DRIFTED && claims.contains(&name))
                .map(|(r, _)| r.clone()),
        });
    }
    let mut consolidated: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for n in &nodes {
        if let Some(reason) = &n.consolidated {
            consolidated
                .entry(reason.clone())
                .or_default()
                .push(n.nodeclaim.clone());
        }
    }
    let waves = waves(&starts);
    for node in &mut nodes {
        node.wave = waves
            .iter()
            .find(|w| w.nodeclaims.contains(&node.nodeclaim))
            .map(|w| w.number);
    }
    let mut replacements: BTreeMap<String, usize> = BTreeMap::new();
    for name in &tracker.replacements_launched {
        let instance_type = final_snapshot
            .store
            .nodeclaims
            .get(name)
            .map(|c| label(c, LABEL_INSTANCE_TYPE))
            .unwrap_or_default();
        let instance_type = if instance_type.is_empty() {
            "(not yet known)".to_string()
        } else {
            instance_type
        };
        *replacements.entry(instance_type).or_default() += 1;
    }
    // The rollout is done when the last old NodeClaim is gone (its instance terminated).
    let eta = complete.then(|| gone.values().max().map_or(0, |t| (t - applied_at).max(0)));
    let wave_count = i64::try_from(waves.len()).unwrap_or(i64::MAX);
    let secs = |d: std::time::Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    // The spread of this cluster's launch times over the waves, and never less than the
    // copy's own error (COPY_ERROR_PERCENT either way).
    let eta_range = eta.map(|eta| {
        let floor = eta * COPY_ERROR_PERCENT / 100;
        let faster = (wave_count * (secs(timing.median) - secs(timing.fastest))).max(floor);
        let slower = (wave_count * (secs(timing.slowest) - secs(timing.median))).max(floor);
        ((eta - faster).max(0), eta + slower)
    });
    let drifted = nodes.iter().filter(|n| n.drifted).count();
    let no_eta_because = (!complete).then(|| {
        let waiting: Vec<String> = nodes
            .iter()
            .filter(|n| n.drifted && n.replaced_after_seconds.is_none())
            .filter_map(|n| n.blocked.last().map(|b| format!("{}: {b}", n.nodeclaim)))
            .take(5)
            .collect();
        let horizon = compact(finished_at - applied_at);
        if waiting.is_empty() {
            format!("the rollout did not complete within the horizon ({horizon})")
        } else {
            format!(
                "the rollout did not complete within the horizon ({horizon}); still held: {}",
                waiting.join("; ")
            )
        }
    });
    let assumptions = vec![
        timing.describe(),
        format!("the ETA's range is at least ±{COPY_ERROR_PERCENT}%: the copy's own error"),
        format!(
            "the copy: {} NodePools, {} EC2NodeClasses, {} NodeClaims on {} instances, {} Nodes, {} pods, {} workloads, {} PDBs",
            objects.nodepools,
            objects.nodeclasses,
            objects.nodeclaims,
            cloud.instances,
            objects.nodes,
            objects.pods_bound,
            objects.workloads,
            objects.pdbs
        ),
        format!(
            "images, subnets and security groups as the live EC2NodeClasses resolved them ({} images, {} subnets, {} security groups, {} SSM parameters pinned); what the change selects anew {}",
            cloud.images,
            cloud.subnets,
            cloud.security_groups,
            cloud.pinned_parameters,
            if resolved_through_aws {
                "as AWS answered (read-only)"
            } else {
                "is resolved by the simulated account, not AWS (--aws asks AWS)"
            }
        ),
        "pods are not slower to start, and no node fails, than in the embedded cluster".to_string(),
    ];
    let mut not_copied = cloud.skipped;
    not_copied.extend(objects.skipped);
    let mut availability: Vec<Availability> = fewest
        .into_iter()
        .map(|(workload, (fewest_ready, pods))| Availability {
            workload,
            fewest_ready,
            pods,
        })
        .collect();
    availability.sort_by(|a, b| a.workload.cmp(&b.workload));
    Preview {
        kubernetes_version: live.kubernetes_version.clone(),
        change: applied,
        files: change_names.to_vec(),
        applied_at: jiff::Timestamp::from_second(applied_at)
            .map(|t| t.to_string())
            .unwrap_or_default(),
        complete,
        eta_seconds: eta,
        eta_range_seconds: eta_range,
        no_eta_because,
        assumptions,
        launch_to_ready: timing,
        drifted,
        consolidated,
        nodes,
        waves,
        replacements,
        availability,
        already_drifted,
        not_copied,
        warnings: notes,
        frames: tracker.frames.clone(),
    }
}

impl Preview {
    /// The node table: its column names and one row per live node, in wave order.
    pub fn node_table(&self) -> ([&'static str; 8], Vec<Vec<String>>) {
        let header = [
            "NODECLAIM",
            "NODE",
            "NODEPOOL",
            "TYPE",
            "WAVE",
            "STARTS",
            "GONE",
            "WHY",
        ];
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut nodes: Vec<&NodePreview> = self.nodes.iter().collect();
        nodes.sort_by_key(|n| {
            (
                n.wave.unwrap_or(usize::MAX),
                !n.drifted,
                n.nodeclaim.clone(),
            )
        });
        for n in nodes {
            let after = |s: Option<i64>| s.map_or("-".to_string(), |s| format!("+{}", compact(s)));
            let why = match (&n.reason, &n.message, &n.consolidated) {
                (Some(r), Some(m), _) => format!("{r}: {m}"),
                (Some(r), None, _) => r.clone(),
                (None, _, Some(c)) => format!("not drifted; consolidated ({c})"),
                _ => "not drifted".to_string(),
            };
            rows.push(vec![
                n.nodeclaim.clone(),
                n.node.clone(),
                n.nodepool.clone(),
                n.instance_type.clone(),
                n.wave.map_or("-".to_string(), |w| w.to_string()),
                after(n.starts_after_seconds),
                after(n.replaced_after_seconds),
                why,
            ]);
        }
        (header, rows)
    }

    /// The self-contained HTML page of the preview.
    pub fn html(&self) -> String {
        let origin = self
            .applied_at
            .parse::<k8s_openapi::jiff::Timestamp>()
            .map(|t| t.as_second())
            .unwrap_or_else(|_| self.frames.first().map_or(0, |f| f.at));
        let mut facts = vec![
            ("Kubernetes".to_string(), self.kubernetes_version.clone()),
            ("Change".to_string(), self.change.join("; ")),
            (
                "Applied (copy's clock)".to_string(),
                self.applied_at.clone(),
            ),
            (
                "Nodes drifting".to_string(),
                format!("{} of {}", self.drifted, self.nodes.len()),
            ),
            (
                "Predicted rollout time".to_string(),
                match (self.eta_seconds, self.eta_range_seconds) {
                    (Some(eta), Some((lo, hi))) => {
                        format!("{} ({} to {})", compact(eta), compact(lo), compact(hi))
                    }
                    (Some(eta), None) => compact(eta),
                    _ => self
                        .no_eta_because
                        .clone()
                        .unwrap_or_else(|| "none".to_string()),
                },
            ),
        ];
        for a in &self.availability {
            facts.push((
                format!("Fewest ready pods of {}", a.workload),
                format!("{} of {}", a.fewest_ready, a.pods),
            ));
        }
        for w in &self.warnings {
            facts.push(("Warning".to_string(), w.clone()));
        }
        let gone: BTreeMap<String, i64> = self
            .nodes
            .iter()
            .filter_map(|n| Some((n.nodeclaim.clone(), n.replaced_after_seconds?)))
            .collect();
        let starts: Vec<(String, i64)> = self
            .waves
            .iter()
            .flat_map(|w| {
                w.nodeclaims
                    .iter()
                    .map(|c| (c.clone(), w.starts_after_seconds))
            })
            .collect();
        let (header, rows) = self.node_table();
        crate::demo::html::render(&crate::demo::html::Page {
            title: format!("driftwood preview: {}", self.files.join(", ")),
            passed: None,
            facts,
            frames: &self.frames,
            origin,
            waves: crate::demo::html::wave_progress(&starts, &gone),
            tables: vec![crate::demo::html::Table {
                caption: "Nodes".to_string(),
                headers: header.iter().map(|h| h.to_lowercase()).collect(),
                rows,
            }],
        })
    }

    /// The report as a terminal shows it.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Preview of {} (Kubernetes {}), applied at {} on a copy of the cluster",
            self.files.join(", "),
            self.kubernetes_version,
            self.applied_at
        );
        for applied in &self.change {
            let _ = writeln!(out, "  {applied}");
        }
        let _ = writeln!(out, "\nAssumes:");
        for a in &self.assumptions {
            let _ = writeln!(out, "  - {a}");
        }
        for warning in &self.warnings {
            let _ = writeln!(out, "\nWarning: {warning}");
        }
        if !self.already_drifted.is_empty() {
            let _ = writeln!(
                out,
                "\nAlready drifted before the change: {}",
                self.already_drifted.join(", ")
            );
        }
        let _ = writeln!(
            out,
            "\n{} of {} nodes drift:",
            self.drifted,
            self.nodes.len()
        );
        let (header, rows) = self.node_table();
        out.push_str(&crate::demo::tables::layout(&header, &rows));
        for (reason, claims) in &self.consolidated {
            let _ = writeln!(
                out,
                "\nConsolidation in the copy ({reason}): {} node(s): {}",
                claims.len(),
                claims.join(", ")
            );
        }
        if !self.waves.is_empty() {
            let _ = writeln!(out, "\nWaves:");
            for w in &self.waves {
                let _ = writeln!(
                    out,
                    "  {:>3}  +{:<8} {} node(s): {}",
                    w.number,
                    compact(w.starts_after_seconds),
                    w.nodeclaims.len(),
                    w.nodeclaims.join(", ")
                );
            }
        }
        // What held nodes back, last said per node, grouped (the JSON has every note).
        let mut held: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for n in &self.nodes {
            if let Some(last) = n.blocked.last() {
                held.entry(last.as_str())
                    .or_default()
                    .push(n.nodeclaim.as_str());
            }
        }
        if !held.is_empty() {
            let _ = writeln!(out, "\nLast held back by:");
            for (why, claims) in held {
                let shown: Vec<&str> = claims.iter().take(3).copied().collect();
                let more = claims.len().saturating_sub(shown.len());
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "  {} ({}{more}): {why}",
                    claims.len(),
                    shown.join(", ")
                );
            }
        }
        if !self.replacements.is_empty() {
            let list: Vec<String> = self
                .replacements
                .iter()
                .map(|(t, n)| format!("{n} × {t}"))
                .collect();
            let _ = writeln!(out, "\nReplacements: {}", list.join(", "));
        }
        if !self.availability.is_empty() {
            let _ = writeln!(out, "\nFewest ready pods:");
            for a in &self.availability {
                let _ = writeln!(out, "  {}: {} of {}", a.workload, a.fewest_ready, a.pods);
            }
        }
        match (
            self.eta_seconds,
            self.eta_range_seconds,
            &self.no_eta_because,
        ) {
            (Some(eta), Some((low, high)), _) => {
                let _ = writeln!(
                    out,
                    "\nETA: {} after the change (range {} – {})",
                    compact(eta),
                    compact(low),
                    compact(high)
                );
            }
            (_, _, Some(why)) => {
                let _ = writeln!(out, "\nNo ETA: {why}");
            }
            _ => {}
        }
        if !self.not_copied.is_empty() {
            let _ = writeln!(out, "\nNot copied: {}", self.not_copied.join("; "));
        }
        out
    }

    /// Writes `preview.json`, `preview.txt`, `timeline.svg` and `preview.html` into `dir`.
    pub fn write_report(&self, dir: &std::path::Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(dir.join("preview.json"), json)?;
        std::fs::write(dir.join("preview.txt"), self.text())?;
        let title = format!("driftwood preview: {}", self.files.join(", "));
        std::fs::write(
            dir.join("timeline.svg"),
            crate::demo::report::chart_svg(&title, &self.frames),
        )?;
        std::fs::write(dir.join("preview.html"), self.html())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disruptions_started_together_are_one_wave() {
        let starts = vec![
            ("c".to_string(), 50),
            ("a".to_string(), 2),
            ("b".to_string(), 3),
            ("d".to_string(), 58),
            ("e".to_string(), 200),
        ];
        let w = waves(&starts);
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].nodeclaims, ["a", "b"]);
        assert_eq!(w[1].starts_after_seconds, 50);
        assert_eq!(w[1].nodeclaims, ["c", "d"]);
        assert_eq!(w[2].number, 3);
    }
}
