//! What the drift marker keeps between passes: each NodeClaim's last verdict with the versions
//! it was judged at, so a pass judges again only the NodeClaims whose NodeClaim, NodePool or
//! EC2NodeClass changed (Karpenter's per-NodeClaim reconcile, woken by those three), and every
//! NodeClaim once per drift interval (Karpenter requeues each every 5 minutes: what the cloud
//! changed out of band, and the InstanceTypeNotFound check's age, are seen then).

use crate::state::{Snapshot, read_keys};
use driftwood_disruption::drift::Verdict;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::Candidate;

/// What a verdict was judged at: the NodeClaim's resourceVersion, and what it read of its
/// NodePool and EC2NodeClass ([`read_keys`]: not their resourceVersions, which status writes
/// driftwood makes as the fleet changes would move; none when the class is not in the cache).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    claim: String,
    nodepool: u64,
    nodeclass: Option<u64>,
}

impl Versions {
    /// The versions `candidate` is judged at now.
    pub fn of(candidate: &Candidate<'_>, keys: &ReadKeys) -> Self {
        Self {
            claim: candidate
                .claim
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default(),
            nodepool: keys
                .pools
                .get(
                    candidate
                        .nodepool
                        .metadata
                        .name
                        .as_deref()
                        .unwrap_or_default(),
                )
                .copied()
                .unwrap_or_else(|| read_keys::nodepool_spec_key(candidate.nodepool)),
            nodeclass: keys
                .classes
                .get(candidate.claim.spec.node_class_ref.name.as_str())
                .copied(),
        }
    }
}

/// What verdicts read of each NodePool and EC2NodeClass, worked out once per pass.
pub struct ReadKeys {
    pools: HashMap<String, u64>,
    classes: HashMap<String, u64>,
}

impl ReadKeys {
    pub fn of(snapshot: &Snapshot) -> Self {
        Self {
            pools: snapshot
                .store
                .nodepools
                .iter()
                .map(|(name, pool)| (name.clone(), read_keys::nodepool_spec_key(pool)))
                .collect(),
            classes: snapshot
                .store
                .nodeclasses
                .iter()
                .map(|(name, class)| (name.clone(), read_keys::nodeclass_resolved_key(class)))
                .collect(),
        }
    }
}

/// The verdicts remembered, by NodeClaim uid, and when every NodeClaim was last judged.
#[derive(Debug, Default)]
struct Remembered {
    verdicts: HashMap<String, (Versions, Verdict)>,
    last_full: Option<i64>,
}

/// The drift marker's memory, shared by its passes.
#[derive(Clone, Default)]
pub struct DriftMemory(Arc<Mutex<Remembered>>);

/// One pass's view of the memory: whether it judges everything, and what it may reuse.
pub struct PassMemory {
    memory: DriftMemory,
    full: bool,
    now: i64,
    seen: HashMap<String, (Versions, Verdict)>,
}

impl DriftMemory {
    /// Starts a pass at `now` (seconds): it judges every NodeClaim when the last pass that did
    /// is `interval` seconds old or more (or there was none).
    pub fn start(&self, now: i64, interval: i64) -> PassMemory {
        let full = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_full
            .is_none_or(|at| now - at >= interval);
        PassMemory {
            memory: self.clone(),
            full,
            now,
            seen: HashMap::new(),
        }
    }
}

impl PassMemory {
    /// The verdict judged for NodeClaim `uid` at exactly `versions`, when this pass may reuse
    /// it: not a pass that judges everything, and never an unknown verdict (those are judged
    /// again each pass, as before).
    pub fn reusable(&self, uid: &str, versions: &Versions) -> Option<Verdict> {
        if self.full {
            return None;
        }
        let remembered = self.memory.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, verdict) = remembered.verdicts.get(uid)?;
        (at == versions && !matches!(verdict, Verdict::Unknown(_))).then(|| verdict.clone())
    }

    /// Records the verdict of NodeClaim `uid` at `versions` (judged or reused) this pass.
    pub fn record(&mut self, uid: &str, versions: Versions, verdict: &Verdict) {
        self.seen
            .insert(uid.to_string(), (versions, verdict.clone()));
    }

    /// Ends the pass: the memory keeps what this pass recorded and forgets NodeClaims it did
    /// not see (deleted, or no longer judged).
    pub fn finish(self) {
        let mut remembered = self.memory.0.lock().unwrap_or_else(PoisonError::into_inner);
        remembered.verdicts = self.seen;
        if self.full {
            remembered.last_full = Some(self.now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_disruption::drift::DriftFinding;

    fn versions(claim: &str, nodepool: u64, nodeclass: Option<u64>) -> Versions {
        Versions {
            claim: claim.into(),
            nodepool,
            nodeclass,
        }
    }

    fn drifted() -> Verdict {
        Verdict::Drifted(DriftFinding {
            reason: "AMIDrift".into(),
            message: "image changed".into(),
        })
    }

    /// One pass at `now` that records `verdicts` (uid, versions, verdict).
    fn pass(memory: &DriftMemory, now: i64, verdicts: &[(&str, Versions, Verdict)]) {
        let mut pass = memory.start(now, 300);
        for (uid, at, verdict) in verdicts {
            pass.record(uid, at.clone(), verdict);
        }
        pass.finish();
    }

    #[test]
    fn the_first_pass_and_one_each_interval_judge_everything() {
        let memory = DriftMemory::default();
        let at = versions("1", 1, Some(1));
        assert!(memory.start(0, 300).full);
        pass(&memory, 0, &[("a", at.clone(), drifted())]);
        assert_eq!(memory.start(299, 300).reusable("a", &at), Some(drifted()));
        // Karpenter requeues every NodeClaim 5 minutes after its last reconcile.
        assert_eq!(memory.start(300, 300).reusable("a", &at), None);
    }

    #[test]
    fn a_change_to_the_nodeclaim_its_nodepool_or_its_class_judges_it_again() {
        let memory = DriftMemory::default();
        pass(
            &memory,
            0,
            &[("a", versions("1", 1, Some(1)), Verdict::NotDrifted)],
        );
        let next = memory.start(10, 300);
        assert_eq!(
            next.reusable("a", &versions("1", 1, Some(1))),
            Some(Verdict::NotDrifted)
        );
        for changed in [
            versions("2", 1, Some(1)),
            versions("1", 2, Some(1)),
            versions("1", 1, Some(2)),
            versions("1", 1, None),
        ] {
            assert_eq!(next.reusable("a", &changed), None, "{changed:?}");
        }
        assert_eq!(
            next.reusable("b", &versions("1", 1, Some(1))),
            None,
            "a NodeClaim never judged"
        );
    }

    #[test]
    fn an_unknown_verdict_is_judged_again_and_unseen_nodeclaims_are_forgotten() {
        let memory = DriftMemory::default();
        let at = versions("1", 1, Some(1));
        pass(
            &memory,
            0,
            &[
                ("a", at.clone(), Verdict::Unknown("not listed yet".into())),
                ("b", at.clone(), Verdict::NotDrifted),
            ],
        );
        assert_eq!(memory.start(5, 300).reusable("a", &at), None);
        // A pass that sees only a: b (deleted) is forgotten.
        pass(&memory, 5, &[("a", at.clone(), Verdict::NotDrifted)]);
        let next = memory.start(6, 300);
        assert_eq!(next.reusable("a", &at), Some(Verdict::NotDrifted));
        assert_eq!(next.reusable("b", &at), None);
    }
}
