//! What the NodeClaim lifecycle does next, from the cache alone: launch, register, initialize,
//! or give up on a NodeClaim whose Node never registered; and, given the cloud's instance list,
//! what garbage collection reclaims.

use crate::state::Snapshot;
use driftwood_api::NodeClaim;
use driftwood_api::condition::Conditions;
use driftwood_api::wellknown::{
    CONDITION_INITIALIZED, CONDITION_LAUNCHED, CONDITION_REGISTERED, LABEL_NODE_REGISTERED,
    TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE, TAINT_UNREGISTERED_KEY,
};
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use std::collections::{BTreeMap, BTreeSet};

/// One lifecycle step for one NodeClaim.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create the instance through the cloud provider.
    Launch { nodeclaim: String, nodepool: String },
    /// The Node with the NodeClaim's providerID appeared: sync labels, taints, finalizer and
    /// owner onto it, remove the unregistered taint, mark the NodeClaim Registered.
    Register {
        nodeclaim: String,
        node: String,
        nodepool: String,
        provider_id: String,
        labels: BTreeMap<String, String>,
        taints: Vec<Taint>,
        owner: OwnerReference,
    },
    /// No Node registered within the registration TTL: delete the NodeClaim.
    DeleteUnregistered { nodeclaim: String },
    /// The Node is Ready, its startup taints are gone and the requested extended resources
    /// are there: label it initialized, mark the NodeClaim Initialized and Ready.
    Initialize {
        nodeclaim: String,
        node: String,
        nodepool: String,
        allocatable: String,
    },
}

/// Everything the lifecycle wants done this pass.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    pub actions: Vec<Action>,
    /// Some NodeClaim is still on its way: run again soon.
    pub pending: bool,
}

use super::super::nodepool_of;

/// Decides this pass: `now` in UTC seconds, `registration_ttl` in seconds.
pub fn decide(snapshot: &Snapshot, now: i64, registration_ttl: i64) -> Decision {
    let mut decision = Decision::default();
    // The index holds the NodeClaims not being deleted and not Initialized: the ones with a
    // step left. An Initialized NodeClaim is the lifecycle's no more.
    for (name, claim) in snapshot
        .initializing_nodeclaims
        .iter()
        .filter_map(|name| Some((name, snapshot.store.nodeclaims.get(name)?)))
    {
        let action = if !claim.is_true(CONDITION_LAUNCHED) {
            Some(Action::Launch {
                nodeclaim: name.clone(),
                nodepool: nodepool_of(claim),
            })
        } else if !claim.is_true(CONDITION_REGISTERED) {
            register(snapshot, name, claim, now, registration_ttl)
        } else if !claim.is_true(CONDITION_INITIALIZED) {
            initialize(snapshot, name, claim)
        } else {
            continue;
        };
        decision.pending = true;
        decision.actions.extend(action);
    }
    decision
}

fn register(
    snapshot: &Snapshot,
    name: &str,
    claim: &NodeClaim,
    now: i64,
    registration_ttl: i64,
) -> Option<Action> {
    let provider_id = claim
        .status
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .unwrap_or_default();
    let Some(node) = snapshot.node_by_provider_id.get(&provider_id) else {
        let launched_at = claim
            .condition(CONDITION_LAUNCHED)
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0.as_second());
        return launched_at
            .is_some_and(|t| now - t > registration_ttl)
            .then(|| Action::DeleteUnregistered {
                nodeclaim: name.to_string(),
            });
    };
    let mut labels = claim.metadata.labels.clone().unwrap_or_default();
    labels.insert(LABEL_NODE_REGISTERED.into(), "true".into());
    let mut taints = claim.spec.taints.clone();
    taints.extend(claim.spec.startup_taints.iter().cloned());
    Some(Action::Register {
        nodeclaim: name.to_string(),
        node: node.clone(),
        nodepool: nodepool_of(claim),
        provider_id,
        labels,
        taints,
        owner: OwnerReference {
            api_version: "karpenter.sh/v1".into(),
            kind: "NodeClaim".into(),
            name: name.to_string(),
            uid: claim.metadata.uid.clone().unwrap_or_default(),
            block_owner_deletion: Some(true),
            controller: None,
        },
    })
}

/// Taints expected while a node initializes, which hold initialization until they are gone
/// (Karpenter's known ephemeral taints: not-ready, unreachable, the external cloud provider's
/// uninitialized taint, the unregistered taint, and the Node Readiness Controller's
/// `readiness.k8s.io/` family).
pub fn is_ephemeral_taint(key: &str) -> bool {
    const EXTERNAL_CLOUD_PROVIDER: &str = "node.cloudprovider.kubernetes.io/uninitialized";
    [
        TAINT_NODE_NOT_READY,
        TAINT_NODE_UNREACHABLE,
        TAINT_UNREGISTERED_KEY,
        EXTERNAL_CLOUD_PROVIDER,
    ]
    .contains(&key)
        || key.starts_with("readiness.k8s.io/")
}

/// Whether `node` is ready to be called initialized for `claim` (Karpenter's initialization
/// rules): Ready, no startup taint of the NodeClaim left, none of the ephemeral taints, and
/// every extended resource the NodeClaim requested present in allocatable.
pub fn node_initialized(claim: &NodeClaim, node: &Node) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let taint_keys: BTreeSet<&str> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| t.key.as_str())
        .collect();
    let startup_left = claim
        .spec
        .startup_taints
        .iter()
        .any(|t| taint_keys.contains(t.key.as_str()));
    let ephemeral_left = taint_keys.iter().any(|k| is_ephemeral_taint(k));
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let extended_missing = claim
        .spec
        .resources
        .iter()
        .flat_map(|r| r.requests.keys())
        .filter(|k| k.contains('/'))
        .any(|k| {
            allocatable
                .and_then(|a| a.get(k))
                .is_none_or(|q| q.0 == "0")
        });
    ready && !startup_left && !ephemeral_left && !extended_missing
}

fn initialize(snapshot: &Snapshot, name: &str, claim: &NodeClaim) -> Option<Action> {
    let node = snapshot.node_of(claim)?;
    if !node_initialized(claim, node) {
        return None;
    }
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .map(|a| {
            a.iter()
                .map(|(k, v)| format!("{k}: {}", v.0))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    Some(Action::Initialize {
        nodeclaim: name.to_string(),
        node: node.metadata.name.clone().unwrap_or_default(),
        nodepool: nodepool_of(claim),
        allocatable,
    })
}

/// What garbage collection reclaims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Collect {
    /// An instance of this cluster no NodeClaim points at, older than the grace period.
    TerminateInstance { provider_id: String },
    /// A launched NodeClaim whose instance the cloud no longer lists.
    DeleteNodeClaim {
        nodeclaim: String,
        provider_id: String,
    },
}

impl Action {
    /// The NodeClaim this step is for.
    pub fn nodeclaim(&self) -> &str {
        match self {
            Action::Launch { nodeclaim, .. }
            | Action::Register { nodeclaim, .. }
            | Action::DeleteUnregistered { nodeclaim }
            | Action::Initialize { nodeclaim, .. } => nodeclaim,
        }
    }
}

/// Instances seen with no NodeClaim, by providerID: when garbage collection first saw each so,
/// by the controller's clock (UTC seconds). Kept between passes; lost on restart, which only
/// delays a collection.
pub type UnclaimedSince = BTreeMap<String, i64>;

/// What one garbage-collection pass does, and the sightings the next pass starts from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collection {
    pub actions: Vec<Collect>,
    pub unclaimed_since: UnclaimedSince,
}

/// Garbage collection from the cloud's instance list (each instance as a NodeClaim with its
/// providerID and creation time): `now` and `grace` in seconds.
///
/// An instance no NodeClaim points at is terminated once it was launched `grace` ago by the
/// cloud's clock (the AWS provider's rule) and was also seen unclaimed by an earlier pass at
/// least `grace` ago by ours. The second condition does not trust the two clocks to agree: a
/// controller whose clock runs ahead of EC2's (skew, or a simulated clock) would otherwise read
/// an instance launched a moment ago as old, and terminate it in the moment between CreateFleet
/// answering and the NodeClaim's providerID reaching the cache.
pub fn collect(
    snapshot: &Snapshot,
    instances: &[NodeClaim],
    now: i64,
    grace: i64,
    seen: &UnclaimedSince,
) -> Collection {
    let mut out = Vec::new();
    let mut live = BTreeSet::new();
    let mut unclaimed_since = UnclaimedSince::new();
    for instance in instances {
        let Some(id) = instance.status.as_ref().and_then(|s| s.provider_id.clone()) else {
            continue;
        };
        live.insert(id.clone());
        if snapshot.nodeclaim_by_provider_id.contains_key(&id) {
            continue;
        }
        let first_seen = seen.get(&id).copied().unwrap_or(now).min(now);
        unclaimed_since.insert(id.clone(), first_seen);
        let launched = instance
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(now, |t| t.0.as_second());
        if now - launched >= grace && now - first_seen >= grace {
            out.push(Collect::TerminateInstance { provider_id: id });
        }
    }
    // Karpenter's rule (core nodeclaim/garbagecollection): only a Registered NodeClaim is
    // collected — its instance has been seen by a kubelet, so its absence from the list is not
    // the eventual consistency of a Describe right after launch — and only while its Node is
    // gone or not Ready. One that never registers is left to the registration TTL.
    for (name, claim) in &snapshot.store.nodeclaims {
        let Some(id) = claim.status.as_ref().and_then(|s| s.provider_id.clone()) else {
            continue;
        };
        let node_ready = snapshot
            .node_of(claim)
            .is_some_and(|node| driftwood_api::lookup::node_is_ready(node));
        if claim.metadata.deletion_timestamp.is_none()
            && claim.is_true(CONDITION_REGISTERED)
            && !node_ready
            && !live.contains(&id)
        {
            out.push(Collect::DeleteNodeClaim {
                nodeclaim: name.clone(),
                provider_id: id,
            });
        }
    }
    Collection {
        actions: out,
        unclaimed_since,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Store;
    use serde_json::json;
    use std::sync::Arc;

    const NOW: i64 = 1_704_067_200; // 2024-01-01T00:00:00Z
    const TTL: i64 = 900;

    fn merged(mut base: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
        json_patch::merge(&mut base, &extra);
        base
    }

    fn condition(type_: &str) -> serde_json::Value {
        json!({"type": type_, "status": "True", "reason": type_, "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"})
    }

    fn nodeclaim(conditions: &[&str], extra: serde_json::Value) -> Arc<NodeClaim> {
        let conditions: Vec<_> = conditions.iter().map(|c| condition(c)).collect();
        let claim = merged(
            json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": "c", "uid": "uid-c", "labels": {"karpenter.sh/nodepool": "default", "team": "a"}},
                "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": [],
                         "taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],
                         "startupTaints": [{"key": "agent-not-ready", "effect": "NoSchedule"}]},
                "status": {"providerID": "aws:///zone/i-1", "conditions": conditions}
            }),
            extra,
        );
        Arc::new(serde_json::from_value(claim).expect("nodeclaim"))
    }

    fn node(extra: serde_json::Value) -> Arc<Node> {
        let node = merged(
            json!({
                "metadata": {"name": "n1"},
                "spec": {"providerID": "aws:///zone/i-1"},
                "status": {"conditions": [{"type": "Ready", "status": "True"}],
                           "allocatable": {"cpu": "2", "memory": "8Gi"}}
            }),
            extra,
        );
        Arc::new(serde_json::from_value(node).expect("node"))
    }

    fn snapshot(claim: Arc<NodeClaim>, node: Option<Arc<Node>>) -> Snapshot {
        let mut snapshot = Snapshot::new(Store::default());
        snapshot.apply("c".into(), claim);
        if let Some(node) = node {
            snapshot.apply("n1".into(), node);
        }
        snapshot
    }

    /// Karpenter launch suite "should add the Launched status condition after creating the
    /// NodeClaim": a NodeClaim not launched yet is launched; one being deleted is left alone.
    #[test]
    fn an_unlaunched_nodeclaim_is_launched() {
        let decision = decide(&snapshot(nodeclaim(&[], json!({})), None), NOW, TTL);
        assert_eq!(
            decision.actions,
            vec![Action::Launch {
                nodeclaim: "c".into(),
                nodepool: "default".into()
            }]
        );
        assert!(decision.pending);
        let deleting = nodeclaim(
            &[],
            json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
        );
        assert_eq!(
            decide(&snapshot(deleting, None), NOW, TTL),
            Decision::default()
        );
    }

    /// Karpenter registration suite "should sync the labels to the Node when the Node comes
    /// online", "should sync the taints …", "should sync the startupTaints …", "should sync the
    /// karpenter.sh/registered label …" and "should add the owner reference to the Node".
    #[test]
    fn registration_syncs_labels_taints_and_owner_onto_the_node() {
        let decision = decide(
            &snapshot(
                nodeclaim(&[CONDITION_LAUNCHED], json!({})),
                Some(node(json!({}))),
            ),
            NOW,
            TTL,
        );
        let [
            Action::Register {
                node,
                labels,
                taints,
                owner,
                ..
            },
        ] = decision.actions.as_slice()
        else {
            panic!("expected one registration, got {:?}", decision.actions);
        };
        assert_eq!(node, "n1");
        assert_eq!(labels.get("team").map(String::as_str), Some("a"));
        assert_eq!(
            labels.get(LABEL_NODE_REGISTERED).map(String::as_str),
            Some("true")
        );
        let keys: Vec<&str> = taints.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["dedicated", "agent-not-ready"]);
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("NodeClaim", "c", "uid-c")
        );
    }

    /// Karpenter liveness suite "should use the status condition transition time for
    /// registration timeout, not the creation timestamp": with no Node, the NodeClaim waits
    /// until the TTL after Launched, then is deleted.
    #[test]
    fn a_nodeclaim_whose_node_never_registers_is_deleted_after_the_ttl() {
        let launched = snapshot(nodeclaim(&[CONDITION_LAUNCHED], json!({})), None);
        let waiting = decide(&launched, NOW + TTL, TTL);
        assert!(waiting.actions.is_empty());
        assert!(waiting.pending);
        assert_eq!(
            decide(&launched, NOW + TTL + 1, TTL).actions,
            vec![Action::DeleteUnregistered {
                nodeclaim: "c".into()
            }]
        );
    }

    /// Karpenter initialization suite: not while NotReady, not while a startup taint or an
    /// ephemeral taint (including a readiness.k8s.io/ taint) is left, not while a requested
    /// extended resource is missing; then initialized.
    #[test]
    fn initialization_waits_for_ready_taints_and_requested_resources() {
        let registered = nodeclaim(
            &[CONDITION_LAUNCHED, CONDITION_REGISTERED],
            json!({"spec": {"resources": {"requests": {"nvidia.com/gpu": "1"}}}}),
        );
        let ready = json!({"status": {"allocatable": {"nvidia.com/gpu": "1"}}});
        let cases = [
            (
                "NotReady",
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}], "allocatable": {"nvidia.com/gpu": "1"}}}),
                false,
            ),
            (
                "startup taint",
                merged(
                    ready.clone(),
                    json!({"spec": {"taints": [{"key": "agent-not-ready", "effect": "NoSchedule"}]}}),
                ),
                false,
            ),
            (
                "ephemeral taint",
                merged(
                    ready.clone(),
                    json!({"spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}}),
                ),
                false,
            ),
            (
                "readiness.k8s.io/ taint",
                merged(
                    ready.clone(),
                    json!({"spec": {"taints": [{"key": "readiness.k8s.io/some-rule", "effect": "NoSchedule"}]}}),
                ),
                false,
            ),
            ("extended resource missing", json!({}), false),
            (
                "extended resource zero",
                json!({"status": {"allocatable": {"nvidia.com/gpu": "0"}}}),
                false,
            ),
            ("everything in place", ready.clone(), true),
        ];
        for (case, extra, initialized) in cases {
            let decision = decide(&snapshot(registered.clone(), Some(node(extra))), NOW, TTL);
            let acted = decision
                .actions
                .iter()
                .any(|a| matches!(a, Action::Initialize { .. }));
            assert_eq!(acted, initialized, "{case}");
            assert!(decision.pending, "{case}: still on its way");
        }
        let done = nodeclaim(
            &[
                CONDITION_LAUNCHED,
                CONDITION_REGISTERED,
                CONDITION_INITIALIZED,
            ],
            json!({}),
        );
        assert_eq!(
            decide(&snapshot(done, Some(node(json!({})))), NOW, TTL),
            Decision::default()
        );
    }

    /// Karpenter garbage collection suite "should delete the NodeClaim when the Node is there in
    /// a NotReady state and the instance is gone" (the instance list decides) and orphaned
    /// instances terminated only after the grace period (the AWS provider's 30 s), counted
    /// both from the launch and from the pass that first saw the orphan.
    #[test]
    fn garbage_collection_reclaims_orphans_both_ways() {
        let claim = nodeclaim(&[CONDITION_LAUNCHED, CONDITION_REGISTERED], json!({}));
        let not_ready =
            node(json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}));
        let snapshot = snapshot(claim, Some(not_ready));
        let orphan = instance("aws:///zone/i-orphan", "2024-01-01T00:00:00Z");
        let ours = instance("aws:///zone/i-1", "2024-01-01T00:00:00Z");
        let both = [ours, orphan.clone()];
        // First sighting, long after the launch: remembered, not yet collected.
        let first = collect(&snapshot, &both, NOW + 600, 30, &UnclaimedSince::new());
        assert!(first.actions.is_empty());
        assert_eq!(
            first.unclaimed_since,
            UnclaimedSince::from([("aws:///zone/i-orphan".to_string(), NOW + 600)])
        );
        let early = collect(&snapshot, &both, NOW + 629, 30, &first.unclaimed_since);
        assert!(early.actions.is_empty());
        assert_eq!(early.unclaimed_since, first.unclaimed_since);
        assert_eq!(
            collect(&snapshot, &both, NOW + 630, 30, &first.unclaimed_since).actions,
            vec![Collect::TerminateInstance {
                provider_id: "aws:///zone/i-orphan".into()
            }]
        );
        // Seen long ago but launched just now (by the cloud's clock): not yet.
        let young = instance("aws:///zone/i-orphan", "2024-01-01T00:10:00Z");
        assert!(
            collect(&snapshot, &[young], NOW + 610, 30, &first.unclaimed_since)
                .actions
                .iter()
                .all(|a| !matches!(a, Collect::TerminateInstance { .. }))
        );
        assert_eq!(
            collect(&snapshot, &[orphan], NOW, 30, &UnclaimedSince::new()).actions,
            vec![Collect::DeleteNodeClaim {
                nodeclaim: "c".into(),
                provider_id: "aws:///zone/i-1".into()
            }]
        );
    }

    /// The race the AWS provider's 30 s launch-time grace covers, with the controller's clock
    /// 10 minutes ahead of EC2's: the instance is listed before its NodeClaim's providerID
    /// reaches the cache and looks 10 minutes old. It is not terminated; by the next pass the
    /// NodeClaim claims it and the sighting is forgotten.
    #[test]
    fn an_instance_listed_before_its_nodeclaims_provider_id_survives_a_clock_ahead_of_ec2s() {
        let launched_by_ec2 = instance("aws:///zone/i-new", "2024-01-01T00:00:00Z");
        let ahead = NOW + 600;
        let unwritten = snapshot(
            nodeclaim(&[], json!({"status": {"providerID": null}})),
            None,
        );
        let pass = collect(
            &unwritten,
            std::slice::from_ref(&launched_by_ec2),
            ahead,
            30,
            &UnclaimedSince::new(),
        );
        assert!(pass.actions.is_empty(), "{:?}", pass.actions);
        let written = snapshot(
            nodeclaim(
                &[CONDITION_LAUNCHED],
                json!({"status": {"providerID": "aws:///zone/i-new"}}),
            ),
            None,
        );
        let next = collect(
            &written,
            &[launched_by_ec2],
            ahead + 120,
            30,
            &pass.unclaimed_since,
        );
        assert_eq!(next, Collection::default());
    }

    fn instance(id: &str, created: &str) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": id, "creationTimestamp": created},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
            "status": {"providerID": id}
        }))
        .expect("instance")
    }

    /// EC2's Describe calls are eventually consistent: right after CreateFleet the instance may
    /// be missing from DescribeInstances. A NodeClaim that is Launched but not Registered is
    /// never collected for that (Karpenter's GC only looks at Registered NodeClaims; one that
    /// never registers is the registration TTL's) — the old rule deleted it at once.
    #[test]
    fn a_launched_nodeclaim_whose_instance_is_not_listed_yet_is_left_alone() {
        let claim = nodeclaim(&[CONDITION_LAUNCHED], json!({}));
        assert!(
            collect(&snapshot(claim, None), &[], NOW, 30, &UnclaimedSince::new())
                .actions
                .is_empty()
        );
    }

    /// Karpenter garbage collection suite "shouldn't delete the NodeClaim when the Node is there
    /// in a Ready state": a Ready Node vouches for its instance whatever the list says.
    #[test]
    fn a_registered_nodeclaim_with_a_ready_node_is_left_alone() {
        let claim = nodeclaim(&[CONDITION_LAUNCHED, CONDITION_REGISTERED], json!({}));
        assert!(
            collect(
                &snapshot(claim, Some(node(json!({})))),
                &[],
                NOW,
                30,
                &UnclaimedSince::new()
            )
            .actions
            .is_empty()
        );
    }
}
