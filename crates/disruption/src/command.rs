//! The disruption command in flight on a candidate NodeClaim, as a typed value: read from and
//! written to the candidate (its DisruptionReason condition and two annotations), and its
//! transitions — wait for the replacements, terminate the candidate, or roll back and say why.

use driftwood_api::NodeClaim;
use driftwood_api::condition::Conditions;
use driftwood_api::wellknown::{
    ANNOTATION_DISRUPTION_REPLACEMENTS, ANNOTATION_DISRUPTION_STARTED, CONDITION_DISRUPTION_REASON,
    CONDITION_INITIALIZED,
};
use std::fmt;

/// How long a replacement may take to become visible in the cache before it counts as gone.
pub const VISIBILITY_GRACE_SECONDS: i64 = 60;

/// A command recorded on its candidate: the replacements it waits for and when it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    /// Replacement NodeClaim names; empty for a delete (the pods fit on existing capacity).
    pub replacements: Vec<String>,
    /// When the command was recorded (RFC 3339 in the annotation), in UTC seconds; None when the
    /// annotation is missing or unreadable.
    pub started: Option<i64>,
}

impl InFlight {
    /// The command on `claim`: Some exactly when the candidate carries DisruptionReason.
    pub fn read(claim: &NodeClaim) -> Option<Self> {
        claim.condition(CONDITION_DISRUPTION_REASON)?;
        Some(Self {
            replacements: Self::replacements_of(claim),
            started: claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_DISRUPTION_STARTED))
                .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .map(|t| t.as_second()),
        })
    }

    /// The replacement names recorded on `claim` (empty when none are).
    pub fn replacements_of(claim: &NodeClaim) -> Vec<String> {
        claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_DISRUPTION_REPLACEMENTS))
            .map(|r| {
                r.split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The annotations that record a command with `replacements`, started at `started`.
    pub fn annotations(
        replacements: &[String],
        started: k8s_openapi::jiff::Timestamp,
    ) -> [(String, String); 2] {
        [
            (
                ANNOTATION_DISRUPTION_REPLACEMENTS.to_string(),
                replacements.join(","),
            ),
            (
                ANNOTATION_DISRUPTION_STARTED.to_string(),
                started.to_string(),
            ),
        ]
    }

    /// The annotation keys a rollback removes.
    pub const ANNOTATION_KEYS: [&'static str; 2] = [
        ANNOTATION_DISRUPTION_REPLACEMENTS,
        ANNOTATION_DISRUPTION_STARTED,
    ];

    /// Where the command stands, given the cached NodeClaims (`lookup`), now and the timeout
    /// for replacements to initialize.
    pub fn progress<'a>(
        &self,
        lookup: impl Fn(&str) -> Option<&'a NodeClaim>,
        now: i64,
        timeout_seconds: i64,
    ) -> Progress {
        let Some(started) = self.started else {
            // Not written by a command of ours (every command records its start before
            // anything else): never act on it, undo the mark.
            return Progress::RollBack(RollbackReason::Unrecorded);
        };
        let age = now - started;
        let present: Vec<&NodeClaim> = self.replacements.iter().filter_map(|r| lookup(r)).collect();
        let missing = present.len() < self.replacements.len();
        if !missing && present.iter().all(|r| r.is_true(CONDITION_INITIALIZED)) {
            Progress::Terminate
        } else if missing && age > VISIBILITY_GRACE_SECONDS {
            Progress::RollBack(RollbackReason::ReplacementGone)
        } else if age > timeout_seconds {
            Progress::RollBack(RollbackReason::NotInitializedInTime)
        } else {
            Progress::Wait
        }
    }

    /// The replacements that have not initialized (gone, or present and not Initialized): what
    /// a failed command counts as failed launches.
    pub fn uninitialized_replacements<'a>(
        &self,
        lookup: impl Fn(&str) -> Option<&'a NodeClaim>,
    ) -> Vec<String> {
        self.replacements
            .iter()
            .filter(|r| lookup(r).is_none_or(|c| !c.is_true(CONDITION_INITIALIZED)))
            .cloned()
            .collect()
    }

    /// The replacements a rollback deletes: those present that never initialized and are not
    /// already going (one that initialized stays as ordinary capacity).
    pub fn replacements_to_delete<'a>(
        &self,
        lookup: impl Fn(&str) -> Option<&'a NodeClaim>,
    ) -> Vec<String> {
        self.replacements
            .iter()
            .filter(|r| {
                lookup(r).is_some_and(|c| {
                    !c.is_true(CONDITION_INITIALIZED) && c.metadata.deletion_timestamp.is_none()
                })
            })
            .cloned()
            .collect()
    }
}

/// The next transition of a command in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Replacements are still launching or initializing.
    Wait,
    /// Every replacement is Initialized (or there are none): delete the candidate.
    Terminate,
    /// Undo the command: untaint the candidate, clear its mark, delete replacements that never
    /// initialized.
    RollBack(RollbackReason),
}

/// Why a command is rolled back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollbackReason {
    /// A replacement NodeClaim disappeared (deleted, or never became visible within the grace).
    ReplacementGone,
    /// The replacements did not initialize within the timeout.
    NotInitializedInTime,
    /// The candidate carries DisruptionReason but no recorded command.
    Unrecorded,
}

impl RollbackReason {
    /// Whether the replacement itself failed (it never initialized, or vanished): what a
    /// NodePool backs off from.
    pub fn replacement_failed(&self) -> bool {
        matches!(self, Self::ReplacementGone | Self::NotInitializedInTime)
    }
}

impl fmt::Display for RollbackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ReplacementGone => "a replacement nodeclaim is gone",
            Self::NotInitializedInTime => "replacement nodeclaims did not initialize in time",
            Self::Unrecorded => "the command was not recorded on the nodeclaim (no start time)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    const STARTED: &str = "2024-01-01T00:00:00Z";
    const T0: i64 = 1_704_067_200;

    fn claim(name: &str, conditions: &[&str], annotations: serde_json::Value) -> NodeClaim {
        let conditions: Vec<_> = conditions
            .iter()
            .map(|t| json!({"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": STARTED}))
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
            "status": {"conditions": conditions}
        }))
        .expect("valid nodeclaim")
    }

    fn candidate(replacements: &str) -> NodeClaim {
        claim(
            "old",
            &[CONDITION_DISRUPTION_REASON],
            json!({ANNOTATION_DISRUPTION_REPLACEMENTS: replacements, ANNOTATION_DISRUPTION_STARTED: STARTED}),
        )
    }

    fn world(claims: Vec<NodeClaim>) -> BTreeMap<String, NodeClaim> {
        claims
            .into_iter()
            .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
            .collect()
    }

    #[test]
    fn a_command_is_read_only_from_a_marked_candidate_and_round_trips() {
        let unmarked = claim("a", &[], json!({ANNOTATION_DISRUPTION_REPLACEMENTS: "x"}));
        assert_eq!(InFlight::read(&unmarked), None);
        let command = InFlight::read(&candidate("new-1,new-2")).expect("marked");
        assert_eq!(command.replacements, ["new-1", "new-2"]);
        assert_eq!(command.started, Some(T0));
        let start: k8s_openapi::jiff::Timestamp = STARTED.parse().expect("timestamp");
        let written = InFlight::annotations(&command.replacements, start);
        let again = claim(
            "old",
            &[CONDITION_DISRUPTION_REASON],
            json!(written.into_iter().collect::<BTreeMap<_, _>>()),
        );
        assert_eq!(InFlight::read(&again), Some(command));
    }

    /// Karpenter orchestration queue: a command completes when every replacement is
    /// initialized; until then it waits.
    #[test]
    fn the_candidate_terminates_only_once_every_replacement_initialized() {
        let command = InFlight::read(&candidate("new-1,new-2")).expect("marked");
        let mut claims = world(vec![
            claim("new-1", &[CONDITION_INITIALIZED], json!({})),
            claim("new-2", &[], json!({})),
        ]);
        let at = |claims: &BTreeMap<String, NodeClaim>, now| {
            command.progress(|n| claims.get(n), now, 600)
        };
        assert_eq!(at(&claims, T0 + 30), Progress::Wait);
        claims.insert(
            "new-2".into(),
            claim("new-2", &[CONDITION_INITIALIZED], json!({})),
        );
        assert_eq!(at(&claims, T0 + 31), Progress::Terminate);
        // A delete command (no replacements) terminates at once.
        let delete = InFlight::read(&candidate("")).expect("marked");
        assert_eq!(delete.progress(|_| None, T0, 600), Progress::Terminate);
    }

    /// Karpenter orchestration queue "should not terminate the candidate if the replacement
    /// fails to initialize": rolled back after the timeout; a replacement that vanished rolls
    /// back after the visibility grace, not before.
    #[test]
    fn a_command_rolls_back_when_its_replacements_fail_and_says_why() {
        let command = InFlight::read(&candidate("new-1")).expect("marked");
        let launching = world(vec![claim("new-1", &[], json!({}))]);
        assert_eq!(
            command.progress(|n| launching.get(n), T0 + 600, 600),
            Progress::Wait
        );
        assert_eq!(
            command.progress(|n| launching.get(n), T0 + 601, 600),
            Progress::RollBack(RollbackReason::NotInitializedInTime)
        );
        assert_eq!(
            command.progress(|_| None, T0 + VISIBILITY_GRACE_SECONDS, 600),
            Progress::Wait
        );
        assert_eq!(
            command.progress(|_| None, T0 + VISIBILITY_GRACE_SECONDS + 1, 600),
            Progress::RollBack(RollbackReason::ReplacementGone)
        );
        assert_eq!(
            command.replacements_to_delete(|n| launching.get(n)),
            ["new-1"]
        );
        let initialized = world(vec![claim("new-1", &[CONDITION_INITIALIZED], json!({}))]);
        assert!(
            command
                .replacements_to_delete(|n| initialized.get(n))
                .is_empty()
        );
    }

    /// A DisruptionReason without a recorded start is not a command of ours: it is never acted
    /// on (no delete without replacements), only undone.
    #[test]
    fn an_unrecorded_mark_is_rolled_back_not_executed() {
        let marked = claim("old", &[CONDITION_DISRUPTION_REASON], json!({}));
        let command = InFlight::read(&marked).expect("marked");
        assert_eq!(
            command.progress(|_| None, T0, 600),
            Progress::RollBack(RollbackReason::Unrecorded)
        );
    }
}
