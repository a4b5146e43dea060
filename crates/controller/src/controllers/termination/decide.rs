//! What termination does next, decided from the cache alone (plus which instances the cloud
//! already reported gone): a plan per object, whose steps the executor carries out in order
//! until one has to wait.

use crate::state::Snapshot;
use driftwood_api::NodeClaim;
use driftwood_api::condition::Conditions;
use driftwood_api::lookup::{ObjectLookups, ProviderId};
use driftwood_api::wellknown::{
    ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP, CONDITION_DRAINED, CONDITION_INSTANCE_TERMINATING,
    FINALIZER_TERMINATION, LABEL_EXCLUDE_FROM_LOAD_BALANCERS, TAINT_DISRUPTED_KEY,
};
use driftwood_disruption::drain::{DrainPod, ForcedDeletion, UnprotectedPacing, plan_drains};
use driftwood_disruption::views::{
    drain_pod, matching_pdbs, owner_availability, termination_deadline,
};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use std::collections::{BTreeMap, BTreeSet};

/// Why termination deletes a NodeClaim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// Its Node was deleted.
    NodeDeleted,
    /// It is past `expireAfter` (forceful, outside budgets, as in Karpenter).
    Expired,
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Delete the NodeClaim.
    DeleteNodeClaim {
        nodeclaim: String,
        nodepool: String,
        reason: DeleteReason,
    },
    /// Taint the node karpenter.sh/disrupted and exclude it from external load balancers.
    TaintForDrain { node: String },
    /// Persist the drain deadline as Karpenter's termination-timestamp annotation.
    StampDeadline { nodeclaim: String, at: String },
    /// Evict these pods (namespace/name) through the Eviction API; a PDB's 429 means wait.
    Evict { node: String, pods: Vec<String> },
    /// Delete these pods now: the terminationGracePeriod leaves them no more time.
    ForceDelete { pods: Vec<ForcedDeletion> },
    /// The node is drained: set the NodeClaim's Drained condition (Karpenter v1's), and count
    /// it once, when the condition is first set. Planned only while the condition is not True,
    /// so a NodeClaim waiting for its volumes or its instance is not counted again each pass.
    Drained { nodeclaim: String, nodepool: String },
    /// The node's persistent volumes are still attached: wait (ends the plan). The NodeClaim's
    /// VolumesDetached condition says so (Unknown, AwaitingVolumeDetachment), and the node's
    /// AwaitingVolumeDetachment event names the attachments when it is first set.
    WaitForVolumes {
        node: String,
        nodeclaim: String,
        attachments: Vec<String>,
    },
    /// Set InstanceTerminating on the NodeClaim, and VolumesDetached as the volume check found
    /// it: True (none left), False with reason TerminationGracePeriodElapsed (left, but the
    /// grace period is over), or untouched (not checked: no Ready node).
    MarkInstanceTerminating {
        nodeclaim: String,
        volumes_detached: Option<bool>,
    },
    /// Terminate the instance; the plan goes on only once the cloud says it is gone.
    TerminateInstance { nodeclaim: String },
    /// Release the termination finalizer of a Node.
    ReleaseNodeFinalizer { node: String },
    /// Delete the Node.
    DeleteNode { node: String, nodepool: String },
    /// Release the NodeClaim's termination finalizer: the NodeClaim is gone.
    ReleaseNodeClaimFinalizer { nodeclaim: String, nodepool: String },
}

impl Step {
    /// The step's name in logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Step::DeleteNodeClaim { .. } => "delete-nodeclaim",
            Step::TaintForDrain { .. } => "taint",
            Step::StampDeadline { .. } => "stamp-deadline",
            Step::Evict { .. } => "evict",
            Step::ForceDelete { .. } => "force-delete",
            Step::Drained { .. } => "drained",
            Step::WaitForVolumes { .. } => "wait-for-volumes",
            Step::MarkInstanceTerminating { .. } => "mark-instance-terminating",
            Step::TerminateInstance { .. } => "terminate-instance",
            Step::ReleaseNodeFinalizer { .. } => "release-node-finalizer",
            Step::DeleteNode { .. } => "delete-node",
            Step::ReleaseNodeClaimFinalizer { .. } => "release-nodeclaim-finalizer",
        }
    }
}

/// The steps for one object, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// What the plan is for (`nodeclaim/NAME` or `node/NAME`), for logs.
    pub subject: String,
    pub steps: Vec<Step>,
}

/// Everything termination wants done this pass.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    pub plans: Vec<Plan>,
    /// Something is terminating: run again soon.
    pub busy: bool,
}

use super::super::nodepool_of;

fn finalizing(claim: &NodeClaim) -> bool {
    claim.is_deleting() && claim.has_finalizer(FINALIZER_TERMINATION)
}

pub use driftwood_api::lookup::node_is_ready;

/// The NodeClaims being terminated (deleting, with termination's finalizer).
fn finalizing_claims(snapshot: &Snapshot) -> impl Iterator<Item = &std::sync::Arc<NodeClaim>> {
    snapshot
        .deleting_nodeclaims
        .iter()
        .filter_map(|name| snapshot.store.nodeclaims.get(name))
        .filter(|c| finalizing(c))
}

/// The providerIDs of every finalizing NodeClaim: what a pass asks the cloud about (whether
/// each instance still exists), in one call for all of them.
pub fn instances_to_describe(snapshot: &Snapshot) -> BTreeSet<String> {
    finalizing_claims(snapshot)
        .filter_map(|c| c.provider_id().map(str::to_string))
        .collect()
}

/// The providerIDs termination needs the cloud to look up before deciding (a subset of
/// [`instances_to_describe`]): the instances of finalizing NodeClaims whose Node is not Ready
/// (if the instance is gone, there is nothing left to drain).
pub fn instances_to_check(snapshot: &Snapshot) -> Vec<String> {
    finalizing_claims(snapshot)
        .filter(|c| snapshot.node_of(c).is_some_and(|n| !node_is_ready(n)))
        .filter_map(|c| c.provider_id().map(str::to_string))
        .collect()
}

/// The deadline annotation to write on a finalizing NodeClaim, when it has a
/// terminationGracePeriod and the annotation is not there yet.
fn deadline_stamp(claim: &NodeClaim) -> Option<String> {
    let stamped = claim
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP));
    if stamped {
        return None;
    }
    let at = termination_deadline(claim)?;
    k8s_openapi::jiff::Timestamp::from_second(at)
        .ok()
        .map(|t| t.to_string())
}

/// Whether the node already carries the disrupted taint and the load-balancer exclusion.
fn prepared_for_drain(node: &Node) -> bool {
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TAINT_DISRUPTED_KEY));
    let excluded = node
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(LABEL_EXCLUDE_FROM_LOAD_BALANCERS));
    tainted && excluded
}

/// Decides this pass of termination. `gone` holds the providerIDs (from
/// Whether `nodepool`'s maintenance window is open at `now` (always, without one).
fn maintenance_open(snapshot: &Snapshot, nodepool: &str, now: i64) -> bool {
    let Some(pool) = snapshot.nodepool(nodepool) else {
        return true;
    };
    match driftwood_api::rollout_policy::RolloutPolicy::of(pool) {
        Ok(policy) => policy
            .maintenance
            .is_none_or(|w| matches!(w.at(now), driftwood_api::cron::WindowAt::Open { .. })),
        Err(_) => true,
    }
}

/// [`instances_to_check`]) the cloud reported as no longer existing.
pub fn decide(
    snapshot: &Snapshot,
    now: i64,
    pacing: Option<UnprotectedPacing>,
    gone: &BTreeSet<String>,
) -> Decision {
    let mut decision = Decision::default();

    // A deleted Node takes its NodeClaim with it; one without a NodeClaim just goes.
    for node in snapshot
        .deleting_nodes
        .iter()
        .filter_map(|name| snapshot.store.nodes.get(name))
    {
        let name = node.metadata.name.clone().unwrap_or_default();
        match snapshot.nodeclaim_of(node) {
            None => decision.plans.push(Plan {
                subject: format!("node/{name}"),
                steps: vec![Step::ReleaseNodeFinalizer { node: name }],
            }),
            Some(claim) if claim.metadata.deletion_timestamp.is_none() => {
                let nodeclaim = claim.metadata.name.clone().unwrap_or_default();
                decision.busy = true;
                decision.plans.push(Plan {
                    subject: format!("nodeclaim/{nodeclaim}"),
                    steps: vec![Step::DeleteNodeClaim {
                        nodepool: nodepool_of(claim),
                        nodeclaim,
                        reason: DeleteReason::NodeDeleted,
                    }],
                });
            }
            Some(_) => {}
        }
    }

    // Expiration: a drift command in flight for the same NodeClaim does not hold it back; a
    // NodePool's maintenance window (driftwood.sh/maintenance-*) does, until it opens. An
    // unreadable rollout policy holds nothing here: expiry is not put off by a typo.
    let mut windows: BTreeMap<String, bool> = BTreeMap::new();
    // The index holds NodeClaims not being deleted by when they expire: the ones due are at
    // its front, and a pass reads only those.
    for (_, name) in snapshot
        .expiring_nodeclaims
        .iter()
        .take_while(|(at, _)| *at <= now)
    {
        let Some(claim) = snapshot.store.nodeclaims.get(name) else {
            continue;
        };
        let pool = nodepool_of(claim);
        // A static NodePool is left alone: expiring its nodes would shrink it with no
        // replacement (driftwood does not provision static capacity).
        if snapshot.nodepool(&pool).is_some_and(|p| p.is_static()) {
            continue;
        }
        if *windows
            .entry(pool.clone())
            .or_insert_with(|| maintenance_open(snapshot, &pool, now))
        {
            decision.busy = true;
            decision.plans.push(Plan {
                subject: format!("nodeclaim/{name}"),
                steps: vec![Step::DeleteNodeClaim {
                    nodeclaim: name.clone(),
                    nodepool: pool,
                    reason: DeleteReason::Expired,
                }],
            });
        }
    }

    // Finalizing NodeClaims: drain every node together, so pacing sees all the evictions of
    // this pass; a NodeClaim with nothing to drain goes straight to the end.
    let mut pdbs: Option<Vec<PodDisruptionBudget>> = None;
    let mut drains: Vec<(String, Vec<Step>, &NodeClaim, String)> = Vec::new();
    let mut inputs: Vec<(Vec<DrainPod>, Option<i64>)> = Vec::new();
    for (name, claim) in snapshot
        .deleting_nodeclaims
        .iter()
        .filter_map(|name| Some((name, snapshot.store.nodeclaims.get(name)?)))
    {
        if !finalizing(claim) {
            continue;
        }
        decision.busy = true;
        let mut steps = Vec::new();
        if let Some(at) = deadline_stamp(claim) {
            steps.push(Step::StampDeadline {
                nodeclaim: name.clone(),
                at,
            });
        }
        let deadline = termination_deadline(claim);
        let node = snapshot.node_of(claim);
        let instance_gone = claim.provider_id().is_some_and(|id| gone.contains(id));
        match node {
            Some(node) if node_is_ready(node) || !instance_gone => {
                let node_name = node.metadata.name.clone().unwrap_or_default();
                if !prepared_for_drain(node) {
                    steps.push(Step::TaintForDrain {
                        node: node_name.clone(),
                    });
                }
                let pdbs = pdbs.get_or_insert_with(|| snapshot.pdb_list());
                let pods = snapshot
                    .pods_on(&node_name)
                    .iter()
                    .map(|p| DrainPod {
                        pdb_protected: !matching_pdbs(p, pdbs).is_empty(),
                        ..drain_pod(p, now)
                    })
                    .collect();
                inputs.push((pods, deadline));
                drains.push((name.clone(), steps, claim, node_name));
            }
            _ => {
                // No node, or a node that is not Ready whose instance is gone: nothing to drain.
                steps.extend(finish(snapshot, name, claim, now, deadline));
                decision.plans.push(Plan {
                    subject: format!("nodeclaim/{name}"),
                    steps,
                });
            }
        }
    }
    if !drains.is_empty() {
        let owners = owner_availability(snapshot.store.pods.values().map(|p| p.as_ref()), now);
        let plans = plan_drains(&inputs, owners, pacing, now);
        for ((name, mut steps, claim, node), (drain, (_, deadline))) in
            drains.into_iter().zip(plans.into_iter().zip(inputs))
        {
            if drain.drained {
                if !claim.is_true(CONDITION_DRAINED) {
                    steps.push(Step::Drained {
                        nodeclaim: name.clone(),
                        nodepool: nodepool_of(claim),
                    });
                }
                steps.extend(finish(snapshot, &name, claim, now, deadline));
            } else {
                if !drain.evict.is_empty() {
                    steps.push(Step::Evict {
                        node,
                        pods: drain.evict,
                    });
                }
                if !drain.delete.is_empty() {
                    steps.push(Step::ForceDelete { pods: drain.delete });
                }
            }
            decision.plans.push(Plan {
                subject: format!("nodeclaim/{name}"),
                steps,
            });
        }
    }
    decision
}

/// After the drain (or with nothing to drain): wait for the node's volumes to detach (until the
/// terminationGracePeriod runs out), terminate the instance, delete the Node, release the
/// NodeClaim.
fn finish(
    snapshot: &Snapshot,
    name: &str,
    claim: &NodeClaim,
    now: i64,
    deadline: Option<i64>,
) -> Vec<Step> {
    let nodepool = nodepool_of(claim);
    let terminating = claim.is_true(CONDITION_INSTANCE_TERMINATING);
    let node = snapshot.node_of(claim);
    let node_name = node.and_then(|n| n.metadata.name.clone());
    let mut volumes_detached = None;
    if !terminating
        && let Some(node) = node
        && node_is_ready(node)
    {
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        let attached: Vec<String> = volume_attachments_on(snapshot, node_name, now)
            .into_iter()
            .map(str::to_string)
            .collect();
        let expired = deadline.is_some_and(|at| now > at);
        if !attached.is_empty() && !expired {
            return vec![Step::WaitForVolumes {
                node: node_name.to_string(),
                nodeclaim: name.to_string(),
                attachments: attached,
            }];
        }
        volumes_detached = Some(attached.is_empty());
    }
    let mut steps = Vec::new();
    if claim.provider_id().is_some() {
        if !terminating {
            steps.push(Step::MarkInstanceTerminating {
                nodeclaim: name.to_string(),
                volumes_detached,
            });
        }
        steps.push(Step::TerminateInstance {
            nodeclaim: name.to_string(),
        });
    }
    if let Some(node) = node_name {
        steps.push(Step::ReleaseNodeFinalizer { node: node.clone() });
        steps.push(Step::DeleteNode {
            node,
            nodepool: nodepool.clone(),
        });
    }
    steps.push(Step::ReleaseNodeClaimFinalizer {
        nodeclaim: name.to_string(),
        nodepool,
    });
    steps
}

/// The VolumeAttachments termination waits for on `node`, as Karpenter filters them: those of
/// persistent volumes (inline volumes name none), except the volumes of pods the drain leaves
/// on the node (tolerating the disrupted taint, mirror pods, pods stuck terminating), which
/// would never detach.
pub fn volume_attachments_on<'a>(snapshot: &'a Snapshot, node: &str, now: i64) -> Vec<&'a str> {
    let staying: BTreeSet<&str> = snapshot
        .pods_on(node)
        .into_iter()
        .filter(|pod| {
            let view = drain_pod(pod, now);
            view.tolerates_disrupted
                || view.mirror
                || view.deletion_timestamp.is_some_and(|at| {
                    now - at > driftwood_disruption::drain::STUCK_TERMINATING_SECONDS
                })
        })
        .flat_map(|pod| {
            pod.claims
                .iter()
                .filter_map(|claim| {
                    snapshot
                        .store
                        .persistent_volume_claims
                        .get(&format!("{}/{claim}", pod.namespace()))
                })
                .filter_map(|pvc| pvc.spec.as_ref()?.volume_name.as_deref())
                .collect::<Vec<_>>()
        })
        .collect();
    snapshot
        .store
        .volume_attachments
        .iter()
        .filter(|(_, va)| {
            va.spec.node_name == node
                && va.metadata.deletion_timestamp.is_none()
                && va
                    .spec
                    .source
                    .persistent_volume_name
                    .as_deref()
                    .is_some_and(|pv| !staying.contains(pv))
        })
        .map(|(name, _)| name.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Store;
    use driftwood_disruption::cached_pod::CachedPod;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;
    use std::sync::Arc;

    const NOW: i64 = 1_704_067_200; // 2024-01-01T00:00:00Z

    fn parse<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Arc<T> {
        Arc::new(serde_json::from_value(value).expect("valid object"))
    }

    fn nodeclaim(name: &str, extra: serde_json::Value) -> Arc<driftwood_api::NodeClaim> {
        let mut claim = json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"},
                         "finalizers": ["karpenter.sh/termination"],
                         "creationTimestamp": "2023-12-31T00:00:00Z"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
            "status": {"providerID": format!("aws:///zone/i-{name}"), "nodeName": format!("node-{name}")}
        });
        merge(&mut claim, extra);
        parse(claim)
    }

    fn node(
        name: &str,
        ready: bool,
        extra: serde_json::Value,
    ) -> Arc<k8s_openapi::api::core::v1::Node> {
        let mut node = json!({
            "metadata": {"name": format!("node-{name}"), "finalizers": ["karpenter.sh/termination"]},
            "spec": {"providerID": format!("aws:///zone/i-{name}")},
            "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
        });
        merge(&mut node, extra);
        parse(node)
    }

    fn pod(name: &str, node: &str, extra: serde_json::Value) -> Arc<Pod> {
        let mut pod = json!({
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2023-12-31T00:00:00Z",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        });
        merge(&mut pod, extra);
        parse(pod)
    }

    fn merge(base: &mut serde_json::Value, extra: serde_json::Value) {
        json_patch::merge(base, &extra);
    }

    const DELETING: &str = "2024-01-01T00:00:00Z";

    fn store_with(
        claims: Vec<Arc<driftwood_api::NodeClaim>>,
        nodes: Vec<Arc<k8s_openapi::api::core::v1::Node>>,
        pods: Vec<Arc<Pod>>,
    ) -> Snapshot {
        let mut store = Store::default();
        for c in claims {
            store
                .nodeclaims
                .insert(c.metadata.name.clone().unwrap_or_default(), c);
        }
        for n in nodes {
            store
                .nodes
                .insert(n.metadata.name.clone().unwrap_or_default(), n);
        }
        for p in pods {
            store.pods.insert(
                format!("default/{}", p.metadata.name.clone().unwrap_or_default()),
                Arc::new(CachedPod::from(p.as_ref())),
            );
        }
        Snapshot::new(store)
    }

    fn steps(decision: &Decision, subject: &str) -> Vec<Step> {
        decision
            .plans
            .iter()
            .filter(|p| p.subject == subject)
            .flat_map(|p| p.steps.clone())
            .collect()
    }

    /// Karpenter termination suite "should delete nodeclaims associated with nodes" and "should
    /// delete nodes without nodeclaims".
    #[test]
    fn a_deleted_node_takes_its_nodeclaim_and_one_without_is_released() {
        let snapshot = store_with(
            vec![nodeclaim("a", json!({}))],
            vec![
                node(
                    "a",
                    true,
                    json!({"metadata": {"deletionTimestamp": DELETING}}),
                ),
                node(
                    "orphan",
                    true,
                    json!({"metadata": {"deletionTimestamp": DELETING}}),
                ),
            ],
            vec![],
        );
        let decision = decide(&snapshot, NOW, None, &BTreeSet::new());
        assert_eq!(
            steps(&decision, "nodeclaim/a"),
            vec![Step::DeleteNodeClaim {
                nodeclaim: "a".into(),
                nodepool: "default".into(),
                reason: DeleteReason::NodeDeleted
            }]
        );
        assert_eq!(
            steps(&decision, "node/node-orphan"),
            vec![Step::ReleaseNodeFinalizer {
                node: "node-orphan".into()
            }]
        );
        assert!(decision.busy);
    }

    /// Karpenter expiration suite "should expire a NodeClaim after expireAfter": deleted once
    /// creation + expireAfter has passed, not a second before.
    #[test]
    fn a_nodeclaim_past_expire_after_is_deleted() {
        let claim = nodeclaim("a", json!({"spec": {"expireAfter": "24h"}}));
        let snapshot = store_with(vec![claim], vec![node("a", true, json!({}))], vec![]);
        let expired = decide(&snapshot, NOW, None, &BTreeSet::new());
        assert_eq!(
            steps(&expired, "nodeclaim/a"),
            vec![Step::DeleteNodeClaim {
                nodeclaim: "a".into(),
                nodepool: "default".into(),
                reason: DeleteReason::Expired
            }]
        );
        let before = decide(&snapshot, NOW - 1, None, &BTreeSet::new());
        assert!(before.plans.is_empty());
        assert!(!before.busy);
    }

    /// A NodeClaim of a static NodePool (`spec.replicas`) is not expired: driftwood leaves
    /// static NodePools alone, and would not replace the node.
    #[test]
    fn a_static_nodepools_nodeclaim_is_not_expired() {
        let claim = nodeclaim("a", json!({"spec": {"expireAfter": "24h"}}));
        let mut snapshot = store_with(vec![claim], vec![node("a", true, json!({}))], vec![]);
        let pool: driftwood_api::NodePool = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"replicas": 1, "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"}, "requirements": []}}}
        }))
        .expect("nodepool");
        snapshot.apply("default".into(), Arc::new(pool));
        let decision = decide(&snapshot, NOW, None, &BTreeSet::new());
        assert!(steps(&decision, "nodeclaim/a").is_empty(), "{decision:?}");
    }

    /// driftwood's maintenance window holds expiry too (kubernetes-sigs/karpenter#1750): a
    /// NodeClaim past expireAfter waits while its NodePool's window is closed and is deleted once
    /// it opens; an unreadable window holds nothing.
    #[test]
    fn an_expired_nodeclaim_waits_for_its_nodepools_maintenance_window() {
        let claim = nodeclaim("a", json!({"spec": {"expireAfter": "24h"}}));
        let with_window = |schedule: &str| {
            let mut snapshot = store_with(
                vec![claim.clone()],
                vec![node("a", true, json!({}))],
                vec![],
            );
            let pool: driftwood_api::NodePool = serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                "metadata": {"name": "default", "annotations": {
                    "driftwood.sh/maintenance-schedule": schedule,
                    "driftwood.sh/maintenance-duration": "1h"}},
                "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"}, "requirements": []}}}
            }))
            .expect("nodepool");
            snapshot.apply("default".into(), Arc::new(pool));
            snapshot
        };
        let hour = (NOW.rem_euclid(86_400)) / 3600;
        // The window opens at the top of the next hour: held now.
        let later = with_window(&format!("0 {} * * *", (hour + 1) % 24));
        assert!(steps(&decide(&later, NOW, None, &BTreeSet::new()), "nodeclaim/a").is_empty());
        let opened = NOW - NOW.rem_euclid(3600) + 3600;
        assert_eq!(
            steps(
                &decide(&later, opened, None, &BTreeSet::new()),
                "nodeclaim/a"
            ),
            vec![Step::DeleteNodeClaim {
                nodeclaim: "a".into(),
                nodepool: "default".into(),
                reason: DeleteReason::Expired
            }]
        );
        let unreadable = with_window("not a schedule");
        assert_eq!(
            steps(
                &decide(&unreadable, NOW, None, &BTreeSet::new()),
                "nodeclaim/a"
            )
            .len(),
            1
        );
    }

    /// Karpenter termination suite "should exclude nodes from load balancers when terminating"
    /// and "should fail to evict pods that violate a PDB" (the eviction is attempted; the 429 is
    /// the API's answer): taint, stamp the terminationGracePeriod deadline, evict the pod — and
    /// no instance termination while a pod is left.
    #[test]
    fn a_finalizing_nodeclaim_taints_stamps_and_evicts_before_anything_is_terminated() {
        let claim = nodeclaim(
            "a",
            json!({"metadata": {"deletionTimestamp": DELETING}, "spec": {"terminationGracePeriod": "1h"}}),
        );
        let snapshot = store_with(
            vec![claim],
            vec![node("a", true, json!({}))],
            vec![pod("web", "node-a", json!({}))],
        );
        let decision = decide(&snapshot, NOW, None, &BTreeSet::new());
        assert_eq!(
            steps(&decision, "nodeclaim/a"),
            vec![
                Step::StampDeadline {
                    nodeclaim: "a".into(),
                    at: "2024-01-01T01:00:00Z".into()
                },
                Step::TaintForDrain {
                    node: "node-a".into()
                },
                Step::Evict {
                    node: "node-a".into(),
                    pods: vec!["default/web".into()]
                },
            ]
        );
    }

    /// Karpenter termination suite "should not evict pods that tolerate karpenter disruption
    /// taint with exists operator" and "should delete nodes" once drained: the instance is
    /// terminated before the Node goes, and the NodeClaim's finalizer is released last.
    #[test]
    fn a_drained_node_is_terminated_in_order() {
        let claim = nodeclaim("a", json!({"metadata": {"deletionTimestamp": DELETING}}));
        let tainted = node(
            "a",
            true,
            json!({
                "metadata": {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "karpenter"}},
                "spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}
            }),
        );
        let agent = pod(
            "agent",
            "node-a",
            json!({"spec": {"tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]}}),
        );
        let snapshot = store_with(vec![claim], vec![tainted], vec![agent]);
        let decision = decide(&snapshot, NOW, None, &BTreeSet::new());
        assert_eq!(
            steps(&decision, "nodeclaim/a"),
            vec![
                Step::Drained {
                    nodeclaim: "a".into(),
                    nodepool: "default".into()
                },
                Step::MarkInstanceTerminating {
                    nodeclaim: "a".into(),
                    volumes_detached: Some(true)
                },
                Step::TerminateInstance {
                    nodeclaim: "a".into()
                },
                Step::ReleaseNodeFinalizer {
                    node: "node-a".into()
                },
                Step::DeleteNode {
                    node: "node-a".into(),
                    nodepool: "default".into()
                },
                Step::ReleaseNodeClaimFinalizer {
                    nodeclaim: "a".into(),
                    nodepool: "default".into()
                },
            ]
        );
    }

    /// `karpenter_nodes_drained_total` counted once: once the Drained condition is set, the
    /// passes that wait for the instance to terminate do not plan Drained again.
    #[test]
    fn a_drained_nodeclaim_is_not_counted_again() {
        let claim = nodeclaim(
            "a",
            json!({"metadata": {"deletionTimestamp": DELETING},
                   "status": {"conditions": [{"type": "Drained", "status": "True", "reason": "Drained", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}),
        );
        let tainted = node(
            "a",
            true,
            json!({
                "metadata": {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "karpenter"}},
                "spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}
            }),
        );
        let snapshot = store_with(vec![claim], vec![tainted], vec![]);
        let decision = decide(&snapshot, NOW, None, &BTreeSet::new());
        let planned = steps(&decision, "nodeclaim/a");
        assert!(
            !planned.iter().any(|s| matches!(s, Step::Drained { .. })),
            "{planned:?}"
        );
        assert!(planned.contains(&Step::TerminateInstance {
            nodeclaim: "a".into()
        }));
    }

    /// Karpenter termination suite "should delete nodes with no underlying instance even if not
    /// fully drained" and "should not delete nodes with no underlying instance if the node is
    /// still Ready".
    #[test]
    fn a_not_ready_node_whose_instance_is_gone_skips_the_drain() {
        let claim = nodeclaim("a", json!({"metadata": {"deletionTimestamp": DELETING}}));
        let web = pod("web", "node-a", json!({}));
        let gone: BTreeSet<String> = ["aws:///zone/i-a".to_string()].into();

        let not_ready = store_with(
            vec![claim.clone()],
            vec![node("a", false, json!({}))],
            vec![web.clone()],
        );
        assert_eq!(
            instances_to_check(&not_ready),
            vec!["aws:///zone/i-a".to_string()]
        );
        let released = steps(&decide(&not_ready, NOW, None, &gone), "nodeclaim/a");
        assert!(
            !released.iter().any(|s| matches!(s, Step::Evict { .. })),
            "{released:?}"
        );
        assert!(released.contains(&Step::DeleteNode {
            node: "node-a".into(),
            nodepool: "default".into()
        }));

        let ready = store_with(vec![claim], vec![node("a", true, json!({}))], vec![web]);
        assert!(instances_to_check(&ready).is_empty());
        let drained = steps(&decide(&ready, NOW, None, &gone), "nodeclaim/a");
        assert!(
            drained.iter().any(|s| matches!(s, Step::Evict { .. })),
            "{drained:?}"
        );
        assert!(!drained.iter().any(|s| matches!(s, Step::DeleteNode { .. })));
    }

    /// Karpenter termination suite "should wait for volume attachments" and "should wait for
    /// volume attachments until the nodeclaim's termination grace period expires".
    #[test]
    fn termination_waits_for_volumes_until_the_grace_period_ends() {
        let claim = nodeclaim(
            "a",
            json!({"metadata": {"deletionTimestamp": DELETING}, "spec": {"terminationGracePeriod": "10m"}}),
        );
        let mut store = Store::default();
        store.nodeclaims.insert("a".into(), claim);
        store
            .nodes
            .insert("node-a".into(), node("a", true, json!({})));
        store.volume_attachments.insert(
            "csi-1".into(),
            parse(json!({"metadata": {"name": "csi-1"},
                         "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "node-a", "source": {"persistentVolumeName": "pv-1"}}})),
        );
        let snapshot = Snapshot::new(store);
        let waiting = steps(
            &decide(&snapshot, NOW + 600, None, &BTreeSet::new()),
            "nodeclaim/a",
        );
        assert_eq!(
            waiting.last(),
            Some(&Step::WaitForVolumes {
                node: "node-a".into(),
                nodeclaim: "a".into(),
                attachments: vec!["csi-1".into()]
            })
        );
        let expired = steps(
            &decide(&snapshot, NOW + 601, None, &BTreeSet::new()),
            "nodeclaim/a",
        );
        assert!(
            expired.contains(&Step::TerminateInstance {
                nodeclaim: "a".into()
            }),
            "{expired:?}"
        );
        // The attachment is still there: VolumesDetached goes False (the grace period ran out).
        assert!(
            expired.contains(&Step::MarkInstanceTerminating {
                nodeclaim: "a".into(),
                volumes_detached: Some(false)
            }),
            "{expired:?}"
        );
    }

    /// Karpenter termination suite "should only wait for volume attachments associated with
    /// drainable pods": the volume of a pod that tolerates the disrupted taint stays with the
    /// node and is not waited for; inline volumes (no PersistentVolume) are not either.
    #[test]
    fn only_volumes_of_pods_that_leave_are_waited_for() {
        let mut store = Store::default();
        for (name, claim, tolerates) in [
            ("db-0", "data-db-0", false),
            ("agent", "data-agent", true),
            ("cache", "cache-scratch", true),
        ] {
            let tolerations = if tolerates {
                serde_json::json!([{"key": "karpenter.sh/disrupted", "operator": "Exists"}])
            } else {
                serde_json::json!([])
            };
            // A generic ephemeral volume's claim is named `<pod>-<volume>` (Karpenter's
            // GetPersistentVolumeClaim, as Kubernetes names it).
            let volume = if claim.ends_with("-scratch") {
                serde_json::json!({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
            } else {
                serde_json::json!({"name": "data", "persistentVolumeClaim": {"claimName": claim}})
            };
            let pod: Arc<Pod> = parse(serde_json::json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"nodeName": "n1", "containers": [], "tolerations": tolerations,
                         "volumes": [volume]}
            }));
            store.pods.insert(
                format!("default/{name}"),
                Arc::new(CachedPod::from(pod.as_ref())),
            );
            store.persistent_volume_claims.insert(
                format!("default/{claim}"),
                parse(serde_json::json!({
                    "metadata": {"name": claim, "namespace": "default"},
                    "spec": {"volumeName": format!("pv-{claim}")}
                })),
            );
            store.volume_attachments.insert(
                format!("csi-{claim}"),
                parse(serde_json::json!({
                    "metadata": {"name": format!("csi-{claim}")},
                    "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1",
                             "source": {"persistentVolumeName": format!("pv-{claim}")}}
                })),
            );
        }
        store.volume_attachments.insert(
            "csi-inline".into(),
            parse(serde_json::json!({
                "metadata": {"name": "csi-inline"},
                "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1", "source": {}}
            })),
        );
        let snapshot = Snapshot::new(store);
        assert_eq!(
            volume_attachments_on(&snapshot, "n1", 0),
            vec!["csi-data-db-0"]
        );
        assert!(volume_attachments_on(&snapshot, "n2", 0).is_empty());
    }
}
