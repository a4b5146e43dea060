//! What the drift marker keeps between passes: each NodeClaim's last verdict with the versions
//! it was judged at, so a pass judges again only the NodeClaims whose NodeClaim, NodePool or
//! EC2NodeClass changed (Karpenter's per-NodeClaim reconcile, woken by those three), and every
//! NodeClaim once per drift interval (Karpenter requeues each every 5 minutes: what the cloud
//! changed out of band, and the InstanceTypeNotFound check's age, are seen then).
//!
//! Between those, a pass looks only at what moved: while no NodePool or class changed what a
//! verdict reads, the NodeClaims changed since the last pass (their revisions compared with
//! the last pass's, skipping the structure the two share) and those left to look at again (an unknown
//! verdict, a mark not written). A rollout changes NodeClaims many times a second; walking
//! every NodeClaim each time made the marker O(NodeClaims) per change.

use crate::state::revisions::{Change, Tracked};
use crate::state::{Snapshot, read_keys};
use driftwood_api::NodeClaim;
use driftwood_disruption::drift::Verdict;
use std::collections::{BTreeSet, HashMap};
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// What the last pass looked at, to find what changed since.
    last_seen: Option<LastSeen>,
    /// NodeClaims (by name) the next pass looks at whatever changed: an unknown verdict, a
    /// mark that was not written.
    again: BTreeSet<String>,
}

/// What a pass saw: the cache's NodeClaims (a persistent map: keeping it shares its
/// structure), what verdicts read of NodePools and classes, and the Drift gate.
#[derive(Debug)]
struct LastSeen {
    nodeclaims: Tracked<NodeClaim>,
    keys: ReadKeys,
    enabled: bool,
}

/// Which NodeClaims a pass looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every candidate, none of the remembered verdicts reused: the first pass, then one per
    /// drift interval.
    Everything,
    /// Every candidate, reusing the verdicts still valid: what a verdict reads of a NodePool or
    /// class changed, or the gate did.
    All,
    /// Only these NodeClaims, by name: changed since the last pass, or left to look at again.
    Only(BTreeSet<String>),
}

/// The drift marker's memory, shared by its passes.
#[derive(Clone, Default)]
pub struct DriftMemory(Arc<Mutex<Remembered>>);

/// One pass's view of the memory: what it looks at, and what it may reuse.
pub struct PassMemory {
    memory: DriftMemory,
    scope: Scope,
    now: i64,
    seen: HashMap<String, (Versions, Verdict)>,
    /// NodeClaims gone since the last pass (by uid), forgotten at the end of an `Only` pass.
    gone: Vec<String>,
    /// What this pass sees, kept for the next.
    sees: LastSeen,
}

impl DriftMemory {
    /// Starts a pass at `now` (seconds) over `nodeclaims` (the cache's), with `keys` read of
    /// the NodePools and classes now: it judges every NodeClaim when the last pass that did
    /// is `interval` seconds old or more (or there was none); else it looks at every one when
    /// the keys or the gate moved, and otherwise only at the NodeClaims changed since the last
    /// pass and those left to look at again.
    pub fn start(
        &self,
        now: i64,
        interval: i64,
        nodeclaims: &Tracked<NodeClaim>,
        keys: ReadKeys,
        enabled: bool,
    ) -> PassMemory {
        let remembered = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let again = remembered.again.clone();
        let mut gone = Vec::new();
        let scope = if remembered.last_full.is_none_or(|at| now - at >= interval) {
            Scope::Everything
        } else {
            match &remembered.last_seen {
                Some(last) if last.keys == keys && last.enabled == enabled => {
                    let mut names = again;
                    for change in nodeclaims.changes_since(&last.nodeclaims) {
                        match change {
                            Change::Added(name, _) | Change::Updated { key: name, .. } => {
                                names.insert(name.clone());
                            }
                            Change::Removed(_, claim) => {
                                gone.extend(claim.metadata.uid.clone());
                            }
                        }
                    }
                    Scope::Only(names)
                }
                _ => Scope::All,
            }
        };
        PassMemory {
            memory: self.clone(),
            scope,
            now,
            seen: HashMap::new(),
            gone,
            sees: LastSeen {
                nodeclaims: nodeclaims.clone(),
                keys,
                enabled,
            },
        }
    }
}

impl PassMemory {
    /// What this pass looks at.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The keys this pass reads NodePools and classes at.
    pub fn keys(&self) -> &ReadKeys {
        &self.sees.keys
    }

    /// The verdict judged for NodeClaim `uid` at exactly `versions`, when this pass may reuse
    /// it: not a pass that judges everything, and never an unknown verdict (those are judged
    /// again each pass, as before).
    pub fn reusable(&self, uid: &str, versions: &Versions) -> Option<Verdict> {
        if self.scope == Scope::Everything {
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

    /// Ends the pass, with the NodeClaims (by name) the next pass looks at again whatever
    /// changes. A pass over every candidate leaves the memory with what it recorded (a
    /// NodeClaim it did not see, deleted or no longer judged, is forgotten); a pass over some
    /// adds what it recorded and forgets the NodeClaims gone.
    pub fn finish(self, again: BTreeSet<String>) {
        let mut remembered = self.memory.0.lock().unwrap_or_else(PoisonError::into_inner);
        match self.scope {
            Scope::Only(_) => {
                for uid in &self.gone {
                    remembered.verdicts.remove(uid);
                }
                remembered.verdicts.extend(self.seen);
            }
            Scope::All | Scope::Everything => remembered.verdicts = self.seen,
        }
        if self.scope == Scope::Everything {
            remembered.last_full = Some(self.now);
        }
        remembered.last_seen = Some(self.sees);
        remembered.again = again;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_disruption::drift::DriftFinding;
    use serde_json::json;

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

    fn keys(pool: u64) -> ReadKeys {
        ReadKeys {
            pools: [("default".to_string(), pool)].into(),
            classes: HashMap::new(),
        }
    }

    /// NodeClaims named as given (uid `uid-<name>`), each at resourceVersion `version`.
    /// A cache the tests hold NodeClaims in, so that passes see their revisions.
    #[derive(Default)]
    struct Cache(Snapshot);

    impl Cache {
        /// The cache made to hold `claims` (each object stored as given, so one kept from an
        /// earlier moment is unchanged), as a pass sees it.
        fn sees(&mut self, claims: &crate::state::Objects<NodeClaim>) -> Tracked<NodeClaim> {
            let held: Vec<String> = self.0.store.nodeclaims.keys().cloned().collect();
            for name in held.iter().filter(|n| !claims.contains_key(*n)) {
                self.0.delete::<NodeClaim>(name);
            }
            for (name, claim) in claims {
                if !self
                    .0
                    .store
                    .nodeclaims
                    .get(name)
                    .is_some_and(|c| Arc::ptr_eq(c, claim))
                {
                    self.0.apply(name.clone(), Arc::clone(claim));
                }
            }
            self.0.tracked::<NodeClaim>()
        }
    }

    fn claims(named: &[(&str, &str)]) -> crate::state::Objects<NodeClaim> {
        named
            .iter()
            .map(|(name, version)| {
                let claim: NodeClaim = serde_json::from_value(json!({
                    "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                    "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": version},
                    "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []}
                }))
                .expect("nodeclaim");
                (name.to_string(), Arc::new(claim))
            })
            .collect()
    }

    fn start(memory: &DriftMemory, now: i64) -> PassMemory {
        memory.start(now, 300, &Tracked::default(), keys(1), true)
    }

    /// One pass at `now` over no NodeClaims that records `verdicts` (uid, versions, verdict).
    fn pass(memory: &DriftMemory, now: i64, verdicts: &[(&str, Versions, Verdict)]) {
        let mut pass = start(memory, now);
        for (uid, at, verdict) in verdicts {
            pass.record(uid, at.clone(), verdict);
        }
        pass.finish(BTreeSet::new());
    }

    #[test]
    fn the_first_pass_and_one_each_interval_judge_everything() {
        let memory = DriftMemory::default();
        let at = versions("1", 1, Some(1));
        assert_eq!(start(&memory, 0).scope(), &Scope::Everything);
        pass(&memory, 0, &[("a", at.clone(), drifted())]);
        assert_eq!(start(&memory, 299).reusable("a", &at), Some(drifted()));
        // Karpenter requeues every NodeClaim 5 minutes after its last reconcile.
        assert_eq!(start(&memory, 300).scope(), &Scope::Everything);
        assert_eq!(start(&memory, 300).reusable("a", &at), None);
    }

    #[test]
    fn a_change_to_the_nodeclaim_its_nodepool_or_its_class_judges_it_again() {
        let memory = DriftMemory::default();
        pass(
            &memory,
            0,
            &[("a", versions("1", 1, Some(1)), Verdict::NotDrifted)],
        );
        let next = start(&memory, 10);
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

    /// Between full passes, a pass looks only at the NodeClaims added or changed since the last
    /// and those left to look at again; a NodePool or class change, or the gate, widens it to
    /// every NodeClaim.
    #[test]
    fn a_pass_looks_at_what_changed_and_what_was_left_to_look_at_again() {
        let memory = DriftMemory::default();
        let mut cache = Cache::default();
        let first = claims(&[("a", "1"), ("b", "1"), ("c", "1")]);
        let pass = memory.start(0, 300, &cache.sees(&first), keys(1), true);
        assert_eq!(pass.scope(), &Scope::Everything);
        pass.finish(["a".to_string()].into());
        // b changed, c went, d came: the pass looks at a (left again), b and d.
        let mut second = first.clone();
        second.insert("b".into(), claims(&[("b", "2")])["b"].clone());
        second.remove("c");
        second.insert("d".into(), claims(&[("d", "1")])["d"].clone());
        let pass = memory.start(10, 300, &cache.sees(&second), keys(1), true);
        assert_eq!(
            pass.scope(),
            &Scope::Only(["a", "b", "d"].map(String::from).into())
        );
        pass.finish(BTreeSet::new());
        // Nothing changed and nothing left: a pass that looks at nothing.
        let pass = memory.start(11, 300, &cache.sees(&second), keys(1), true);
        assert_eq!(pass.scope(), &Scope::Only(BTreeSet::new()));
        pass.finish(BTreeSet::new());
        // What a verdict reads of the NodePool moved, or the gate did: every NodeClaim.
        let pass = memory.start(12, 300, &cache.sees(&second), keys(2), true);
        assert_eq!(pass.scope(), &Scope::All);
        pass.finish(BTreeSet::new());
        assert_eq!(
            memory
                .start(13, 300, &cache.sees(&second), keys(2), false)
                .scope(),
            &Scope::All
        );
    }

    #[test]
    fn an_unknown_verdict_is_judged_again_and_gone_nodeclaims_are_forgotten() {
        let memory = DriftMemory::default();
        let mut cache = Cache::default();
        let at = versions("1", 1, Some(1));
        let both = claims(&[("a", "1"), ("b", "1")]);
        let mut pass = memory.start(0, 300, &cache.sees(&both), keys(1), true);
        pass.record(
            "uid-a",
            at.clone(),
            &Verdict::Unknown("not listed yet".into()),
        );
        pass.record("uid-b", at.clone(), &Verdict::NotDrifted);
        pass.finish(["a".to_string()].into());
        let next = memory.start(5, 300, &cache.sees(&both), keys(1), true);
        assert_eq!(next.reusable("uid-a", &at), None);
        assert_eq!(next.reusable("uid-b", &at), Some(Verdict::NotDrifted));
        // b is deleted: a pass over what changed forgets it.
        let only_a = claims(&[("a", "1")]);
        let mut pass = memory.start(5, 300, &cache.sees(&only_a), keys(1), true);
        assert_eq!(pass.scope(), &Scope::Only(["a".to_string()].into()));
        pass.record("uid-a", at.clone(), &Verdict::NotDrifted);
        pass.finish(BTreeSet::new());
        let next = memory.start(6, 300, &cache.sees(&only_a), keys(1), true);
        assert_eq!(next.reusable("uid-a", &at), Some(Verdict::NotDrifted));
        assert_eq!(next.reusable("uid-b", &at), None);
        // A pass over every NodeClaim keeps only what it saw.
        let pass = memory.start(7, 300, &cache.sees(&only_a), keys(2), true);
        assert_eq!(pass.scope(), &Scope::All);
        pass.finish(BTreeSet::new());
        assert_eq!(
            memory
                .start(8, 300, &cache.sees(&only_a), keys(2), true)
                .reusable("uid-a", &at),
            None
        );
    }
}
