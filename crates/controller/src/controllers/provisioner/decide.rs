//! What the provisioner launches, from the cache and the simulation world (NodePools with their
//! instance types, existing and in-flight capacity): the pods waiting for capacity are placed,
//! the NodeClaims the simulation opens are launched, and each pod that fits nowhere gets a note
//! saying why.

use crate::state::Snapshot;
use driftwood_scheduling::{NewNodeClaim, SimPod, SimulationError, SimulationInput, schedule};
use std::collections::BTreeMap;

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
    /// Pods placed on capacity that exists or is on its way (a Node, or a NodeClaim still
    /// launching), with where: `nodeclaim/NAME, node/NAME` as Karpenter's Nominated event
    /// says it.
    pub nominations: Vec<(String, String)>,
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

/// Decides a pass: `input` is the world without pods; `skipped` names the NodePools left out of
/// it and why (a class not ready, instance types that could not be listed).
pub fn decide(
    snapshot: &Snapshot,
    mut input: SimulationInput,
    skipped: &BTreeMap<String, String>,
) -> Result<Provisioning, SimulationError> {
    let mut decision = Provisioning::default();
    for key in snapshot.provisionable_pods.iter() {
        let Some(pod) = snapshot.store.pods.get(key) else {
            continue;
        };
        decision.pods.push(key.clone());
        match SimPod::from_pod(pod) {
            Ok(sim) => input.pods.push(sim),
            Err(error) => decision.failures.push(Failure {
                pod: key.clone(),
                note: format!("Failed to schedule pod, {error}"),
            }),
        }
    }
    if input.pods.is_empty() {
        return Ok(decision);
    }
    let result = schedule(&input)?;
    decision.nominations = result
        .existing_placements
        .iter()
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
    decision
        .failures
        .extend(result.unschedulable.into_iter().map(|u| Failure {
            note: format!("Failed to schedule pod, {}{not_considered}", u.reason),
            pod: u.pod,
        }));
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
        )
        .expect("simulation");
        assert_eq!(decision.pods, ["default/a", "default/b"]);
        assert_eq!(decision.launch.len(), 1);
        assert_eq!(decision.launch[0].nodepool, "default");
        assert_eq!(decision.launch[0].pods.len(), 2);
        assert!(decision.failures.is_empty());
        // Nothing waiting: nothing to do.
        assert_eq!(
            decide(&snapshot(&[]), world(), &BTreeMap::new()),
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
    }
}
