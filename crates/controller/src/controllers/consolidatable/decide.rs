//! What the Consolidatable marker writes, from the cache and what it saw last pass: a pod
//! event (a pod bound to, or leaving, a NodeClaim's node) as `status.lastPodEventTime`, and the
//! Consolidatable condition set or cleared by Karpenter's consolidateAfter rule.

use crate::state::Snapshot;
use driftwood_api::NodeClaim;
use driftwood_api::condition::Conditions;
use driftwood_api::hash::fnv1a64;
use driftwood_api::lookup::ObjectLookups;
use driftwood_api::wellknown::{CONDITION_CONSOLIDATABLE, CONDITION_INITIALIZED};
use driftwood_disruption::consolidatable::{Consolidatable, consolidatable, record_pod_event};
use driftwood_disruption::views::{is_daemonset_pod, is_terminal_pod};
use std::collections::HashMap;

/// One NodeClaim's writes this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub nodeclaim: String,
    /// Record a pod event now (`status.lastPodEventTime`).
    pub pod_event: bool,
    /// Set (Some(true)) or clear (Some(false)) Consolidatable; None leaves it.
    pub consolidatable: Option<bool>,
}

/// The marks, the earliest time a NodeClaim becomes Consolidatable (UTC seconds), and each
/// NodeClaim's pod signature now.
#[derive(Debug, Default)]
pub struct Decision {
    pub marks: Vec<Mark>,
    pub next_at: Option<i64>,
    pub signatures: HashMap<String, u64>,
}

/// The pods whose coming and going is a pod event: bound to the node, not a DaemonSet pod,
/// not finished and not terminating — as one number.
pub fn pod_signature(snapshot: &Snapshot, claim: &NodeClaim) -> u64 {
    let Some(node) = snapshot
        .node_of(claim)
        .and_then(|n| n.metadata.name.as_deref())
    else {
        return 0;
    };
    let mut uids: Vec<&str> = snapshot
        .pods_on(node)
        .into_iter()
        .filter(|p| !is_daemonset_pod(p) && !is_terminal_pod(p) && !p.is_terminating())
        .filter_map(|p| p.uid.as_deref())
        .collect();
    uids.sort_unstable();
    fnv1a64(uids.join(",").as_bytes())
}

/// Decides every managed NodeClaim's marks at `now`, given the pod signatures seen last pass
/// (a NodeClaim first seen has no event: what happened before is in its status already).
pub fn decide(snapshot: &Snapshot, seen: &HashMap<String, u64>, now: i64) -> Decision {
    let mut decision = Decision::default();
    for (name, claim) in &snapshot.store.nodeclaims {
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(pool) = claim
            .nodepool_name()
            .and_then(|p| snapshot.nodepool(p))
            .filter(|p| !p.is_static())
        else {
            continue;
        };
        let signature = pod_signature(snapshot, claim);
        decision.signatures.insert(name.clone(), signature);
        let recorded = claim
            .status
            .as_ref()
            .and_then(|s| s.last_pod_event_time.as_ref())
            .map(|t| t.0.as_second());
        let changed = seen.get(name).is_some_and(|&before| before != signature);
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
        if let Consolidatable::At(at) = want {
            decision.next_at = Some(decision.next_at.map_or(at, |n: i64| n.min(at)));
        }
        let has = claim.condition(CONDITION_CONSOLIDATABLE);
        let mark = match (want, has) {
            (Consolidatable::Yes, Some(c)) if c.is_true() => None,
            (Consolidatable::Yes, _) => Some(true),
            (_, Some(_)) => Some(false),
            (_, None) => None,
        };
        if pod_event || mark.is_some() {
            decision.marks.push(Mark {
                nodeclaim: name.clone(),
                pod_event,
                consolidatable: mark,
            });
        }
    }
    decision
}
