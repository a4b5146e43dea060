//! What the provisioner launches, from the cache and the simulation world (NodePools with their
//! instance types, existing and in-flight capacity): the pods waiting for capacity are placed,
//! the NodeClaims the simulation opens are launched, and each pod that fits nowhere gets a note
//! saying why.

use crate::state::Snapshot;
use driftwood_disruption::views::is_currently_reschedulable;
use driftwood_scheduling::{
    NewNodeClaim, PoolCache, SimulationError, SimulationInput, SolveProgress, schedule_observed,
};
use std::collections::{BTreeMap, BTreeSet};

/// A pod that cannot be provisioned for, and the FailedScheduling note to give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub pod: String,
    pub note: String,
}

/// What one provisioning pass does.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Provisioning {
    /// The pods considered (`namespace/name`).
    pub pods: Vec<String>,
    /// NodeClaims to create, each from a NodePool that exists.
    pub launch: Vec<NewNodeClaim>,
    /// Pods that fit nowhere (or could not be read), with why.
    pub failures: Vec<Failure>,
    /// How many of `failures` could not be read, so were not simulated (Karpenter's ignored
    /// pods: refused by its validation before the simulation).
    pub ignored: usize,
    /// Pods placed on capacity that exists or is on its way (a Node, or a NodeClaim still
    /// launching), with where: `nodeclaim/NAME, node/NAME` as Karpenter's Nominated event
    /// says it.
    pub nominations: Vec<(String, String)>,
    /// How many pods of Nodes being deleted were placed with them.
    pub moving: usize,
}

/// Where a pod placed on existing capacity `target` (a Node's name, or an in-flight
/// NodeClaim's) should schedule, as Karpenter's Nominated event names it.
fn nominated_to(snapshot: &Snapshot, target: &str) -> String {
    match snapshot.store.nodes.get(target) {
        Some(node) => match snapshot.nodeclaim_of(node) {
            Some(claim) => format!(
                "nodeclaim/{}, node/{target}",
                claim.metadata.name.as_deref().unwrap_or_default()
            ),
            None => format!("node/{target}"),
        },
        None => format!("nodeclaim/{target}"),
    }
}

/// The pods of Nodes being deleted that need room elsewhere now
/// ([`is_currently_reschedulable`] at `now`, UTC seconds), as Karpenter's provisioner adds them
/// to the pending pods: capacity for them is launched while they still run, so a node deleted
/// by hand, expired or interrupted is replaced before its pods are evicted.
pub fn deleting_node_pods(snapshot: &Snapshot, now: i64) -> Vec<String> {
    let names = snapshot.deleting_node_names();
    if names.is_empty() {
        return Vec::new();
    }
    let pdbs = snapshot.pdb_list();
    names
        .iter()
        .flat_map(|node| snapshot.pods_by_node.get(node).into_iter().flatten())
        .filter(|key| {
            snapshot
                .store
                .pods
                .get(*key)
                .is_some_and(|pod| is_currently_reschedulable(pod, &pdbs, now))
        })
        .cloned()
        .collect()
}

/// Decides a pass at `now` (UTC seconds): `input` is the world without pods (Nodes being
/// deleted left out); `skipped` names the NodePools left out of it and why (a class not ready,
/// instance types that could not be listed). The pods placed are the pending ones, then those
/// of Nodes being deleted ([`deleting_node_pods`]); the latter are bound and running, so they
/// get no FailedScheduling note and no Nominated event.
pub fn decide(
    snapshot: &Snapshot,
    mut input: SimulationInput,
    skipped: &BTreeMap<String, String>,
    now: i64,
    progress: &SolveProgress,
) -> Result<Provisioning, SimulationError> {
    let mut decision = Provisioning::default();
    let moving = deleting_node_pods(snapshot, now);
    for key in &moving {
        if let Some(Ok(sim)) = snapshot.sim_pod(key) {
            input.pods.push(sim.clone());
        }
    }
    input.moving_pods = input.pods.len();
    for key in snapshot.provisionable_pods.iter() {
        let Some(converted) = snapshot.sim_pod(key) else {
            continue;
        };
        decision.pods.push(key.clone());
        match converted {
            Ok(sim) => input.pods.push(sim.clone()),
            Err(error) => {
                decision.ignored += 1;
                decision.failures.push(Failure {
                    pod: key.clone(),
                    note: format!("Failed to schedule pod, {error}"),
                });
            }
        }
    }
    if input.pods.is_empty() {
        return Ok(decision);
    }
    let result = schedule_observed(&input, &mut PoolCache::default(), progress)?;
    let moving: BTreeSet<String> = moving.into_iter().collect();
    decision.moving = moving.len();
    decision.nominations = result
        .existing_placements
        .iter()
        .filter(|p| !moving.contains(&p.pod))
        .map(|p| (p.pod.clone(), nominated_to(snapshot, &p.node)))
        .collect();
    decision.launch = result
        .new_nodeclaims
        .into_iter()
        .filter(|planned| snapshot.nodepool(&planned.nodepool).is_some())
        .collect();
    let not_considered = if skipped.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = skipped
            .iter()
            .map(|(p, why)| format!("nodepool {p:?}: {why}"))
            .collect();
        format!(" (not considered: {})", list.join("; "))
    };
    decision.failures.extend(
        result
            .unschedulable
            .into_iter()
            .filter(|u| !moving.contains(&u.pod))
            .map(|u| Failure {
                note: format!("Failed to schedule pod, {}{not_considered}", u.reason),
                pod: u.pod,
            }),
    );
    Ok(decision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Store;
    use driftwood_scheduling::testkit::{fake_instance_types, nodepool};
    use serde_json::json;
    use std::sync::Arc;

    fn pending(name: &str, cpu: &str) -> Arc<k8s_openapi::api::core::v1::Pod> {
        Arc::new(serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        })).expect("pod"))
    }

    fn snapshot(pods: &[(&str, &str)]) -> Snapshot {
        let mut snapshot = Snapshot::new(Store::default());
        snapshot.apply("default".into(), Arc::new(serde_json::from_value::<driftwood_api::NodePool>(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"}, "requirements": []}}}
        })).expect("nodepool")));
        for (name, cpu) in pods {
            snapshot.apply(format!("default/{name}"), pending(name, cpu));
        }
        snapshot
    }

    fn world() -> SimulationInput {
        SimulationInput {
            nodepools: vec![nodepool("default", fake_instance_types(4))],
            ..Default::default()
        }
    }

    /// Karpenter provisioning suite "should provision nodes": pending pods get one NodeClaim
    /// from the NodePool that can hold them.
    #[test]
    fn pending_pods_open_a_nodeclaim() {
        let decision = decide(
            &snapshot(&[("a", "500m"), ("b", "500m")]),
            world(),
            &BTreeMap::new(),
            0,
            &SolveProgress::default(),
        )
        .expect("simulation");
        assert_eq!(decision.pods, ["default/a", "default/b"]);
        assert_eq!(decision.launch.len(), 1);
        assert_eq!(decision.launch[0].nodepool, "default");
        assert_eq!(decision.launch[0].pods.len(), 2);
        assert!(decision.failures.is_empty());
        // Nothing waiting: nothing to do.
        assert_eq!(
            decide(
                &snapshot(&[]),
                world(),
                &BTreeMap::new(),
                0,
                &SolveProgress::default()
            ),
            Ok(Provisioning::default())
        );
    }

    /// A pod no instance type can hold gets a note (as for Karpenter's "should not schedule when
    /// limits are exceeded": the pod stays pending, told why); the pools left out are named; a pod whose
    /// requests cannot be read gets its own note and does not stop the others.
    #[test]
    fn pods_that_fit_nowhere_are_told_why() {
        let skipped = [(
            "gpu".to_string(),
            "EC2NodeClass \"gpu\" is not Ready".to_string(),
        )]
        .into();
        let decision = decide(
            &snapshot(&[("huge", "64"), ("bad", "lots"), ("ok", "1")]),
            world(),
            &skipped,
            0,
            &SolveProgress::default(),
        )
        .expect("simulation");
        assert_eq!(decision.launch.len(), 1);
        let notes: BTreeMap<&str, &str> = decision
            .failures
            .iter()
            .map(|f| (f.pod.as_str(), f.note.as_str()))
            .collect();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes["default/huge"].starts_with("Failed to schedule pod, "),
            "{notes:?}"
        );
        assert!(
            notes["default/huge"]
                .ends_with("(not considered: nodepool \"gpu\": EC2NodeClass \"gpu\" is not Ready)"),
            "{notes:?}"
        );
        assert!(notes["default/bad"].contains("lots"), "{notes:?}");
        // The unreadable pod was not simulated: ignored, not unschedulable.
        assert_eq!(decision.ignored, 1);
    }

    /// A Node of the `default` pool with its NodeClaim (`deleting`: a deletionTimestamp), room
    /// for 4 CPUs, and `pods` (name, cpu) running on it.
    fn with_node(snapshot: &mut Snapshot, name: &str, deleting: bool, pods: &[(&str, &str)]) {
        let provider_id = format!("aws:///test-zone-1a/i-{name}");
        let mut claim = json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "c"}, "requirements": []},
            "status": {"providerID": provider_id, "nodeName": name,
                       "conditions": [{"type": "Initialized", "status": "True", "reason": "Initialized", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        });
        if deleting {
            claim["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            claim["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
        }
        snapshot.apply(
            name.into(),
            Arc::new(serde_json::from_value::<driftwood_api::NodeClaim>(claim).expect("claim")),
        );
        snapshot.apply(name.into(), Arc::new(serde_json::from_value::<k8s_openapi::api::core::v1::Node>(json!({
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default", "kubernetes.io/hostname": name,
                         "topology.kubernetes.io/zone": "test-zone-1a", "karpenter.sh/capacity-type": "on-demand",
                         "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
            "spec": {"providerID": provider_id},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        })).expect("node")));
        for (pod, cpu) in pods {
            snapshot.apply(format!("default/{pod}"), Arc::new(serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(json!({
                "metadata": {"name": pod, "namespace": "default", "labels": {"app": "web"},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u"}]},
                "spec": {"nodeName": name, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
                "status": {"phase": "Running"}
            })).expect("pod")));
        }
    }

    fn world_of(snapshot: &Snapshot) -> SimulationInput {
        SimulationInput {
            existing_nodes: crate::simulation::existing_nodes(snapshot, true),
            ..world()
        }
    }

    /// Karpenter's scheduling suite, "Deleting Nodes": "should re-schedule pods from a deleting
    /// node when pods are active" — a NodeClaim being deleted gets capacity for its running
    /// pods at once (they get no note and no Nominated event: they are not pending); the same
    /// Node not being deleted gets nothing; and "should not reschedule pods from a deleting
    /// node when pods are blocked due to fully blocking PDBs".
    #[test]
    fn pods_of_a_deleting_node_get_capacity_before_they_are_evicted() {
        let mut deleting = snapshot(&[]);
        with_node(
            &mut deleting,
            "old",
            true,
            &[("web-1", "1"), ("web-2", "1")],
        );
        let decision = decide(
            &deleting,
            world_of(&deleting),
            &BTreeMap::new(),
            0,
            &SolveProgress::default(),
        )
        .expect("simulation");
        assert_eq!(decision.moving, 2);
        assert_eq!(decision.launch.len(), 1, "{decision:?}");
        assert_eq!(decision.launch[0].pods.len(), 2);
        assert!(decision.nominations.is_empty() && decision.failures.is_empty());

        let mut staying = snapshot(&[]);
        with_node(
            &mut staying,
            "old",
            false,
            &[("web-1", "1"), ("web-2", "1")],
        );
        let decision = decide(
            &staying,
            world_of(&staying),
            &BTreeMap::new(),
            0,
            &SolveProgress::default(),
        )
        .expect("simulation");
        assert_eq!(decision, Provisioning::default());

        let mut blocked = deleting.clone();
        blocked.apply(
            "default/web".into(),
            Arc::new(
                serde_json::from_value::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(
                    json!({
                        "metadata": {"name": "web", "namespace": "default"},
                        "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 0}
                    }),
                )
                .expect("pdb"),
            ),
        );
        let decision = decide(
            &blocked,
            world_of(&blocked),
            &BTreeMap::new(),
            0,
            &SolveProgress::default(),
        )
        .expect("simulation");
        assert_eq!(decision.moving, 0);
        assert!(decision.launch.is_empty(), "{decision:?}");
    }

    /// A drift rollout deletes the old NodeClaim only once its replacement is up: the pods
    /// then fit on the replacement, and nothing more is launched for them.
    #[test]
    fn pods_of_a_deleting_node_that_fit_on_its_replacement_launch_nothing() {
        let mut s = snapshot(&[]);
        with_node(&mut s, "old", true, &[("web-1", "1"), ("web-2", "1")]);
        with_node(&mut s, "replacement", false, &[]);
        let decision = decide(
            &s,
            world_of(&s),
            &BTreeMap::new(),
            0,
            &SolveProgress::default(),
        )
        .expect("simulation");
        assert_eq!(decision.moving, 2);
        assert!(decision.launch.is_empty(), "{decision:?}");
    }
}
