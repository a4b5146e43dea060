//! What the Consolidatable marker writes, from the cache and what it saw last pass: a pod
//! event (a pod bound to, or leaving, a NodeClaim's node) as `status.lastPodEventTime`, and the
//! Consolidatable condition set or cleared by Karpenter's consolidateAfter rule.
//!
//! A pass looks only at the NodeClaims something changed for since the last one — the
//! NodeClaim, its Node, the pods on that Node, its NodePool — found by comparing the cache's
//! persistent maps with the ones the last pass saw (which skips everything they still share),
//! and at those whose consolidateAfter ran out since. [`decide`] looks at every NodeClaim, and
//! a test holds the two equal. (One difference the API server never serves: an Initialized
//! condition without a transition time counts from when the NodeClaim is looked at, which
//! here is when it last changed rather than every pass.)

use crate::state::revisions::Tracked;
use crate::state::{PodEventSet, Snapshot};
use driftwood_api::NodeClaim;
use driftwood_api::NodePool;
use driftwood_api::condition::Conditions;
use driftwood_api::lookup::ObjectLookups;
use driftwood_api::wellknown::{CONDITION_CONSOLIDATABLE, CONDITION_INITIALIZED};
use driftwood_disruption::consolidatable::{Consolidatable, consolidatable, record_pod_event};
use imbl::OrdMap;
use imbl::ordmap::DiffItem;
use k8s_openapi::api::core::v1::Node;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// One NodeClaim's writes this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub nodeclaim: String,
    /// Record a pod event now (`status.lastPodEventTime`).
    pub pod_event: bool,
    /// Set (Some(true)) or clear (Some(false)) Consolidatable; None leaves it.
    pub consolidatable: Option<bool>,
}

/// The marks, the earliest time a NodeClaim becomes Consolidatable (UTC seconds), each
/// NodeClaim's pod signature now ([`decide`]'s; [`decide_changed`] keeps them in its
/// [`Memory`]), and for each mark with a pod event the
/// signature seen before it (put back should the mark not be written, so that the event is
/// seen again).
#[derive(Debug, Default)]
pub struct Decision {
    pub marks: Vec<Mark>,
    pub next_at: Option<i64>,
    pub signatures: HashMap<String, u64>,
    pub before: HashMap<String, u64>,
}

/// The pods whose coming and going is a pod event (bound to the NodeClaim's node, not a
/// DaemonSet pod, not finished and not terminating) as one number, kept by the cache per watch
/// event; 0 without a node or such pods.
pub fn pod_signature(snapshot: &Snapshot, claim: &NodeClaim) -> u64 {
    snapshot
        .node_of(claim)
        .and_then(|n| n.metadata.name.as_deref())
        .and_then(|node| snapshot.pod_event_sets.get(node))
        .map_or(0, |set| set.signature())
}

/// One NodeClaim looked at: its pod signature (None: not the marker's — being deleted, or of
/// no NodePool that consolidates), its mark and when it becomes Consolidatable.
struct Looked {
    signature: Option<u64>,
    mark: Option<Mark>,
    due: Option<i64>,
}

/// What [`look`] reads of a NodePool: whether it is static, and its consolidateAfter.
fn marks_read(pool: &NodePool) -> (bool, &str) {
    (
        pool.is_static(),
        pool.spec.disruption.consolidate_after.0.as_str(),
    )
}

/// Looks at one NodeClaim at `now`, `seen` being its pod signature as last seen.
fn look(snapshot: &Snapshot, name: &str, claim: &NodeClaim, seen: Option<u64>, now: i64) -> Looked {
    let not_ours = Looked {
        signature: None,
        mark: None,
        due: None,
    };
    if claim.metadata.deletion_timestamp.is_some() {
        return not_ours;
    }
    let Some(pool) = claim
        .nodepool_name()
        .and_then(|p| snapshot.nodepool(p))
        .filter(|p| !p.is_static())
    else {
        return not_ours;
    };
    let signature = pod_signature(snapshot, claim);
    let recorded = claim
        .status
        .as_ref()
        .and_then(|s| s.last_pod_event_time.as_ref())
        .map(|t| t.0.as_second());
    let changed = seen.is_some_and(|before| before != signature);
    let pod_event = changed && record_pod_event(recorded, now);
    let last_pod_event = if pod_event { Some(now) } else { recorded };
    let initialized_at = claim
        .condition(CONDITION_INITIALIZED)
        .filter(|c| c.is_true())
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(now, |t| t.0.as_second())
        });
    // An unreadable consolidateAfter is refused by validation; here it means "off".
    let after = pool
        .spec
        .disruption
        .consolidate_after
        .seconds()
        .ok()
        .flatten();
    let want = consolidatable(after, initialized_at, last_pod_event, now);
    let due = match want {
        Consolidatable::At(at) => Some(at),
        _ => None,
    };
    let has = claim.condition(CONDITION_CONSOLIDATABLE);
    let set = match (want, has) {
        (Consolidatable::Yes, Some(c)) if c.is_true() => None,
        (Consolidatable::Yes, _) => Some(true),
        (_, Some(_)) => Some(false),
        (_, None) => None,
    };
    Looked {
        signature: Some(signature),
        mark: (pod_event || set.is_some()).then(|| Mark {
            nodeclaim: name.to_string(),
            pod_event,
            consolidatable: set,
        }),
        due,
    }
}

/// Decides every managed NodeClaim's marks at `now`, given the pod signatures seen last pass
/// (a NodeClaim first seen has no event: what happened before is in its status already).
pub fn decide(snapshot: &Snapshot, seen: &HashMap<String, u64>, now: i64) -> Decision {
    let mut decision = Decision::default();
    for (name, claim) in &snapshot.store.nodeclaims {
        let looked = look(snapshot, name, claim, seen.get(name).copied(), now);
        let Some(signature) = looked.signature else {
            continue;
        };
        decision.signatures.insert(name.clone(), signature);
        if let Some(at) = looked.due {
            decision.next_at = Some(decision.next_at.map_or(at, |n: i64| n.min(at)));
        }
        decision.marks.extend(looked.mark);
    }
    decision
}

/// The parts of the cache a pass looked at (persistent maps: holding them costs nothing, and
/// comparing them with the next pass's skips what the two share; objects are compared by their
/// revisions, never in depth).
#[derive(Debug, Clone)]
struct LookedAt {
    nodeclaims: Tracked<NodeClaim>,
    nodes: Tracked<Node>,
    nodepools: Tracked<NodePool>,
    pod_event_sets: OrdMap<String, PodEventSet>,
}

impl LookedAt {
    fn of(snapshot: &Snapshot) -> Self {
        Self {
            nodeclaims: snapshot.tracked::<NodeClaim>(),
            nodes: snapshot.tracked::<Node>(),
            nodepools: snapshot.tracked::<NodePool>(),
            pod_event_sets: snapshot.pod_event_sets.clone(),
        }
    }
}

/// What the marker remembers between passes.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    /// Each managed NodeClaim's pod signature as last seen (a change of it is a pod event).
    pub signatures: HashMap<String, u64>,
    /// What the last pass looked at; None before the first, which looks at every NodeClaim.
    looked_at: Option<LookedAt>,
    /// NodeClaims not yet Consolidatable, by when they become so, and the other way round.
    due: BTreeSet<(i64, String)>,
    due_of: HashMap<String, i64>,
    /// The node each NodeClaim was last found on, and the NodeClaims found on each node.
    node_of: HashMap<String, String>,
    on_node: HashMap<String, BTreeSet<String>>,
    /// The node each NodeClaim's status named when last looked at, and the other way round
    /// (a NodeClaim is found on a node by that name when no node has its providerID).
    status_node_of: HashMap<String, String>,
    named_on: HashMap<String, BTreeSet<String>>,
    /// NodeClaims whose marks were not written (backing off, or the write failed): looked at
    /// again every pass until they are.
    pub unwritten: BTreeSet<String>,
}

impl Memory {
    /// The earliest time a NodeClaim becomes Consolidatable.
    pub fn next_at(&self) -> Option<i64> {
        self.due.first().map(|(at, _)| *at)
    }

    fn forget_due(&mut self, name: &str) {
        if let Some(at) = self.due_of.remove(name) {
            self.due.remove(&(at, name.to_string()));
        }
    }

    /// Puts back the pod signature `claim` had before a pod event that was not written, and
    /// looks at it again next pass.
    pub fn unsee(&mut self, claim: &str, before: u64) {
        self.signatures.insert(claim.to_string(), before);
        self.unwritten.insert(claim.to_string());
    }

    /// Remembers the node `claim` was found on and the node its status names.
    fn set_nodes(&mut self, claim: &str, found: Option<String>, named: Option<String>) {
        relate(&mut self.node_of, &mut self.on_node, claim, found);
        relate(&mut self.status_node_of, &mut self.named_on, claim, named);
    }
}

/// Sets `claim → node` in `of` and keeps `on` (node → claims) its inverse.
fn relate(
    of: &mut HashMap<String, String>,
    on: &mut HashMap<String, BTreeSet<String>>,
    claim: &str,
    node: Option<String>,
) {
    if of.get(claim) == node.as_ref() {
        return;
    }
    if let Some(old) = of.remove(claim)
        && let Some(claims) = on.get_mut(&old)
    {
        claims.remove(claim);
        if claims.is_empty() {
            on.remove(&old);
        }
    }
    if let Some(node) = node {
        on.entry(node.clone())
            .or_default()
            .insert(claim.to_string());
        of.insert(claim.to_string(), node);
    }
}

/// The NodeClaims that may be on `node` (named `name`): by its providerID now, by the node each
/// was last found on, and by the node name their status had when last looked at (a NodeClaim
/// whose status changed since is looked at anyway).
fn claims_of_node(
    snapshot: &Snapshot,
    memory: &Memory,
    name: &str,
    node: Option<&Node>,
    into: &mut BTreeSet<String>,
) {
    if let Some(claim) = node
        .and_then(|n| n.spec.as_ref())
        .and_then(|s| s.provider_id.as_ref())
        .and_then(|id| snapshot.nodeclaim_by_provider_id.get(id))
    {
        into.insert(claim.clone());
    }
    for claims in [memory.on_node.get(name), memory.named_on.get(name)]
        .into_iter()
        .flatten()
    {
        into.extend(claims.iter().cloned());
    }
}

/// The NodeClaims a pass must look at: every one at the first pass; after it, those that
/// changed, whose Node or its pod-event set changed, whose NodePool changed, whose
/// consolidateAfter ran out by `now`, and whose marks were not written.
fn to_look_at(
    snapshot: &Snapshot,
    sees: &LookedAt,
    memory: &Memory,
    now: i64,
) -> Option<BTreeSet<String>> {
    let last = memory.looked_at.as_ref()?;
    let mut names: BTreeSet<String> = memory.unwritten.clone();
    for (_, name) in memory.due.iter().take_while(|(at, _)| *at <= now) {
        names.insert(name.clone());
    }
    for change in sees.nodeclaims.changes_since(&last.nodeclaims) {
        names.insert(change.key().clone());
    }
    let mut nodes: BTreeSet<&String> = BTreeSet::new();
    for change in sees.nodes.changes_since(&last.nodes) {
        let name = change.key();
        nodes.insert(name);
        for node in [change.before(), change.after()].into_iter().flatten() {
            claims_of_node(snapshot, memory, name, Some(node), &mut names);
        }
    }
    for item in last.pod_event_sets.diff(&sees.pod_event_sets) {
        let name = match item {
            DiffItem::Add(name, _) | DiffItem::Remove(name, _) => name,
            DiffItem::Update { new, .. } => new.0,
        };
        if nodes.insert(name) {
            let node = snapshot.store.nodes.get(name).map(Arc::as_ref);
            claims_of_node(snapshot, memory, name, node, &mut names);
        }
    }
    for change in sees.nodepools.changes_since(&last.nodepools) {
        // A NodePool's status is written as its fleet changes (counts, rollout progress);
        // only what a mark reads of it sends its NodeClaims to be looked at again.
        if let (Some(old), Some(new)) = (change.before(), change.after())
            && marks_read(old) == marks_read(new)
        {
            continue;
        }
        if let Some(claims) = snapshot.nodeclaims_by_nodepool.get(change.key()) {
            names.extend(claims.iter().cloned());
        }
    }
    Some(names)
}

/// Decides the marks at `now` looking only at the NodeClaims something changed for since the
/// pass `memory` remembers (every NodeClaim at the first pass), and remembers this one. The
/// marks and the next due time are [`decide`]'s for the same cache and signatures.
pub fn decide_changed(snapshot: &Snapshot, memory: &mut Memory, now: i64) -> Decision {
    let sees = LookedAt::of(snapshot);
    let names = to_look_at(snapshot, &sees, memory, now);
    let names: Box<dyn Iterator<Item = &String>> = match &names {
        Some(names) => Box::new(names.iter()),
        None => Box::new(snapshot.store.nodeclaims.keys()),
    };
    let mut decision = Decision::default();
    for name in names {
        memory.forget_due(name);
        memory.unwritten.remove(name);
        let Some(claim) = snapshot.store.nodeclaims.get(name) else {
            memory.signatures.remove(name);
            memory.set_nodes(name, None, None);
            continue;
        };
        let found = snapshot
            .node_of(claim)
            .and_then(|n| n.metadata.name.clone());
        let named = claim.status.as_ref().and_then(|s| s.node_name.clone());
        memory.set_nodes(name, found, named);
        let seen = memory.signatures.get(name.as_str()).copied();
        let looked = look(snapshot, name, claim, seen, now);
        match looked.signature {
            Some(signature) => memory.signatures.insert(name.clone(), signature),
            None => memory.signatures.remove(name.as_str()),
        };
        if let Some(at) = looked.due {
            memory.due.insert((at, name.clone()));
            memory.due_of.insert(name.clone(), at);
        }
        if let (Some(before), Some(mark)) = (seen, &looked.mark)
            && mark.pod_event
        {
            decision.before.insert(name.clone(), before);
        }
        decision.marks.extend(looked.mark);
    }
    memory.looked_at = Some(sees);
    decision.next_at = memory.next_at();
    decision
}

#[cfg(test)]
mod tests;
