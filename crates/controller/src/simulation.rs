//! Builds the scheduling simulation's input from a snapshot: existing nodes with their pods,
//! the NodePools with the instance types their classes offer, and the daemonset pods every new
//! node will carry.

use crate::context::Context;
use crate::state::Snapshot;
use driftwood_api::condition::Conditions;
use driftwood_api::nodepool::STATIC_UNSUPPORTED_MESSAGE;
use driftwood_api::wellknown::{CONDITION_READY, LABEL_NODEPOOL};
use driftwood_api::{NodeClaim, NodePool};
use driftwood_disruption::cached_pod::CachedPod;
use driftwood_scheduling::{
    ExistingNode, NodePoolSpec, Requirements, Resources, SimPod, SimulationInput, Taint,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Why a NodePool is left out of a simulation when no instance type meets its template's
/// requirements with an offering available (Karpenter skips such a pool and emits
/// NoCompatibleInstanceTypes on it).
pub const NO_COMPATIBLE_INSTANCE_TYPES: &str =
    "its requirements filtered out every instance type with an available offering";

/// `pods` (those bound to one node) as the simulation sees them (converted when each pod was last
/// seen; a pod that does not convert is left out, as logged then): the running ones, and the
/// ones being deleted, which hold their requests until they are terminal (Karpenter's cluster
/// state releases a pod's requests only then) but count for no other pod's topology.
fn sim_pods(pods: &[&Arc<CachedPod>]) -> (Vec<SimPod>, Vec<SimPod>) {
    let mut running = Vec::new();
    let mut terminating = Vec::new();
    for pod in pods {
        if pod.is_terminal() {
            continue;
        }
        let Ok(sim) = pod.sim.as_ref() else {
            continue;
        };
        if pod.is_terminating() {
            terminating.push(sim.clone());
        } else {
            running.push(sim.clone());
        }
    }
    (running, terminating)
}

/// Every Node with its pods; with `include_inflight` (provisioning), also NodeClaims launched
/// or launching without a Node yet (as uninitialized capacity), so provisioning does not launch
/// twice, and without the Nodes whose NodeClaim is being deleted (Karpenter's active nodes:
/// their pods are placed elsewhere, by the provisioner). A Node whose objects are the same as
/// at an earlier pass gives the view built then ([`crate::state::built_nodes`]).
pub fn existing_nodes(snapshot: &Snapshot, include_inflight: bool) -> Vec<Arc<ExistingNode>> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (name, node) in &snapshot.store.nodes {
        seen.insert(name.as_str());
        if node.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let claim = snapshot.nodeclaim_of(node);
        if include_inflight
            && claim
                .and_then(|claim| claim.metadata.name.as_ref())
                .is_some_and(|claim| snapshot.deleting_nodeclaims.contains(claim))
        {
            continue;
        }
        let pods = snapshot.pods_on(name);
        let view = snapshot.built_nodes.view(name, node, claim, &pods, || {
            existing_node(node, claim.map(Arc::as_ref), &pods)
        });
        out.extend(view);
    }
    snapshot.built_nodes.keep_only(&seen);
    if include_inflight {
        for (name, claim) in &snapshot.store.nodeclaims {
            if claim.metadata.deletion_timestamp.is_some() || snapshot.node_of(claim).is_some() {
                continue;
            }
            out.push(Arc::new(inflight_node(name, claim)));
        }
    }
    out
}

/// `node` as the simulation sees it, with `pods` (the pods bound to it) and what its NodeClaim
/// says; None (logged) when the Node cannot be read.
fn existing_node(
    node: &Node,
    claim: Option<&NodeClaim>,
    pods: &[&Arc<CachedPod>],
) -> Option<ExistingNode> {
    let (running, terminating) = sim_pods(pods);
    let mut existing = match ExistingNode::from_node(node, running) {
        Ok(existing) => existing,
        Err(error) => {
            tracing::debug!(%error, "node skipped in simulation");
            return None;
        }
    };
    existing.terminating = terminating;
    if let Some(claim) = claim {
        existing.initialized = claim.is_true(driftwood_api::wellknown::CONDITION_INITIALIZED);
        existing.startup_taints = claim
            .spec
            .startup_taints
            .iter()
            .filter_map(|t| Taint::from_k8s(t).ok())
            .collect();
        if !existing.initialized {
            with_nodeclaim_view(&mut existing, claim);
        }
    }
    Some(existing)
}

/// A Node that is not initialized yet is seen through its NodeClaim too, as Karpenter's cluster
/// state does: until registration syncs them, the Node may lack the NodeClaim's labels, taints
/// and allocatable, and the capacity would look unusable for the very pods it was launched
/// for (the provisioner would then launch again).
fn with_nodeclaim_view(existing: &mut ExistingNode, claim: &NodeClaim) {
    for (key, value) in claim.metadata.labels.iter().flatten() {
        existing
            .labels
            .entry(key.clone())
            .or_insert_with(|| value.clone());
    }
    for taint in claim
        .spec
        .taints
        .iter()
        .filter_map(|t| Taint::from_k8s(t).ok())
    {
        if !existing
            .taints
            .iter()
            .any(|t| t.key == taint.key && t.effect == taint.effect)
        {
            existing.taints.push(taint);
        }
    }
    // Every resource the Node does not report yet (all of them before the kubelet's first
    // status, a GPU before its device plugin runs) comes from the NodeClaim, as Karpenter's
    // state node fills them in.
    if let Some(allocatable) = claim
        .status
        .as_ref()
        .filter(|s| !s.allocatable.is_empty())
        .and_then(|s| Resources::from_quantities(&s.allocatable).ok())
    {
        for name in allocatable.names() {
            if existing.allocatable.get(name) == 0 {
                existing.allocatable.set(name, allocatable.get(name));
            }
        }
    }
}

/// A NodeClaim without a Node as capacity: its allocatable once launched, else what its pods
/// requested; its labels; not initialized.
fn inflight_node(name: &str, claim: &NodeClaim) -> ExistingNode {
    let status = claim.status.as_ref();
    let allocatable = status
        .filter(|s| !s.allocatable.is_empty())
        .and_then(|s| Resources::from_quantities(&s.allocatable).ok())
        .or_else(|| {
            claim
                .spec
                .resources
                .as_ref()
                .and_then(|r| Resources::from_quantities(&r.requests).ok())
        })
        .unwrap_or_default();
    let mut labels = claim.metadata.labels.clone().unwrap_or_default();
    // What the launch cannot choose otherwise: a requirement of one value (the zone the
    // provisioner planned it in for a zone spread, say) is the label the instance will carry.
    // Until then the NodeClaim holds none of the well-known labels, and a pod planned onto it
    // for its zone would not fit back onto it while its launch waits its turn (EC2's launch
    // bucket): it would get a NodeClaim of its own again at every batch.
    for requirement in &claim.spec.requirements {
        if let [value] = requirement.values.as_slice()
            && requirement.operator == "In"
        {
            labels
                .entry(requirement.key.clone())
                .or_insert_with(|| value.clone());
        }
    }
    labels.insert(
        driftwood_api::wellknown::LABEL_HOSTNAME.to_string(),
        name.to_string(),
    );
    ExistingNode {
        name: name.to_string(),
        labels,
        taints: claim
            .spec
            .taints
            .iter()
            .filter_map(|t| Taint::from_k8s(t).ok())
            .collect(),
        startup_taints: claim
            .spec
            .startup_taints
            .iter()
            .filter_map(|t| Taint::from_k8s(t).ok())
            .collect(),
        allocatable,
        pods: Vec::new(),
        terminating: Vec::new(),
        going_away: false,
        initialized: false,
    }
}

/// The pods each DaemonSet would put on a new node.
pub fn daemonset_pods(snapshot: &Snapshot) -> Vec<SimPod> {
    snapshot
        .store
        .daemonsets
        .values()
        .filter_map(|ds| {
            let template = ds.spec.as_ref()?.template.clone();
            let mut metadata: ObjectMeta = template.metadata.unwrap_or_default();
            metadata.namespace = ds.metadata.namespace.clone();
            metadata.name = ds.metadata.name.clone();
            metadata.owner_references = Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "DaemonSet".into(),
                name: ds.metadata.name.clone().unwrap_or_default(),
                uid: ds.metadata.uid.clone().unwrap_or_default(),
                ..Default::default()
            }]);
            let pod = Pod {
                metadata,
                spec: template.spec,
                status: None,
            };
            let mut sim = SimPod::from_pod(&pod).ok()?;
            sim.is_daemonset = true;
            Some(sim)
        })
        .collect()
}

/// The resources a NodePool's NodeClaims hold (their capacity, or requests before launch).
pub fn nodepool_usage(snapshot: &Snapshot, pool: &str) -> Resources {
    snapshot
        .nodepool_usage
        .get(pool)
        .map(|u| u.usage().clone())
        .unwrap_or_default()
}

/// The NodePools as the simulation sees them, heaviest first. Pools whose class is missing or
/// not Ready, or whose instance types cannot be listed, are left out (with the reason).
pub async fn nodepool_specs(
    ctx: &Context,
    snapshot: &Snapshot,
) -> (Vec<NodePoolSpec>, BTreeMap<String, String>) {
    let mut specs = Vec::new();
    let mut skipped = BTreeMap::new();
    for (name, pool) in &snapshot.store.nodepools {
        if pool.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if pool.is_static() {
            // Static capacity is not managed: no launches for pods, no replacements.
            skipped.insert(name.clone(), STATIC_UNSUPPORTED_MESSAGE.to_string());
            continue;
        }
        let class_name = &pool.spec.template.spec.node_class_ref.name;
        match snapshot.nodeclass(class_name) {
            None => {
                skipped.insert(
                    name.clone(),
                    format!("EC2NodeClass {class_name:?} not found"),
                );
                continue;
            }
            Some(class) if !class.is_true(CONDITION_READY) => {
                skipped.insert(
                    name.clone(),
                    format!(
                        "EC2NodeClass {class_name:?} is not ready{}",
                        not_ready_because(class.conditions())
                    ),
                );
                continue;
            }
            Some(_) => {}
        }
        match ctx.cloud.instance_types(pool).await {
            Ok(types) => match nodepool_spec(snapshot, name, pool, types) {
                Ok(spec) => specs.push(spec),
                Err(reason) => {
                    skipped.insert(name.clone(), reason);
                }
            },
            Err(error) => {
                skipped.insert(name.clone(), format!("listing instance types: {error}"));
            }
        }
    }
    specs.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.name.cmp(&b.name)));
    (specs, skipped)
}

/// Why a class is not Ready, for the pods waiting on it: `: AMIsReady=False (AMINotFound: …)`
/// for each condition that holds Ready, or Ready's own reason; empty when nothing says.
fn not_ready_because(conditions: &[driftwood_api::condition::Condition]) -> String {
    let describe = |c: &driftwood_api::condition::Condition| {
        let detail = match (c.reason.as_deref(), c.message.as_deref()) {
            (Some(reason), Some(message)) if !message.is_empty() => {
                format!(" ({reason}: {message})")
            }
            (Some(reason), _) if !reason.is_empty() => format!(" ({reason})"),
            (_, Some(message)) if !message.is_empty() => format!(" ({message})"),
            _ => String::new(),
        };
        format!("{}={}{detail}", c.type_, c.status)
    };
    let holding: Vec<String> = conditions
        .iter()
        .filter(|c| c.type_ != CONDITION_READY && !c.is_true())
        .map(describe)
        .collect();
    if !holding.is_empty() {
        return format!(": {}", holding.join(", "));
    }
    conditions
        .iter()
        .find(|c| c.type_ == CONDITION_READY)
        .map(|c| format!(": {}", describe(c)))
        .unwrap_or_default()
}

fn nodepool_spec(
    snapshot: &Snapshot,
    name: &str,
    pool: &NodePool,
    instance_types: std::sync::Arc<Vec<driftwood_scheduling::InstanceType>>,
) -> Result<NodePoolSpec, String> {
    let template = &pool.spec.template;
    let mut requirements = Requirements::from_api(&template.spec.requirements)
        .map_err(|e| format!("spec.template.spec.requirements: {e}"))?;
    let mut labels = template.metadata.labels.clone();
    labels.insert(LABEL_NODEPOOL.to_string(), name.to_string());
    requirements = requirements.intersection(&Requirements::from_labels(labels.iter()));
    let compatible = instance_types.iter().any(|it| {
        requirements.first_conflict(&it.requirements).is_none()
            && it.offerings.iter().any(|o| {
                o.available
                    && driftwood_scheduling::InstanceType::offering_allowed(o, &requirements)
            })
    });
    if !compatible {
        return Err(NO_COMPATIBLE_INSTANCE_TYPES.to_string());
    }
    let taints = template
        .spec
        .taints
        .iter()
        .map(Taint::from_k8s)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("spec.template.spec.taints: {e}"))?;
    let startup_taints = template
        .spec
        .startup_taints
        .iter()
        .map(Taint::from_k8s)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("spec.template.spec.startupTaints: {e}"))?;
    let remaining_limits = if pool.spec.limits.is_empty() {
        None
    } else {
        // Only the resources the NodePool limits are limited; usage of others does not count.
        let limits = Resources::from_quantities(&pool.spec.limits)
            .map_err(|e| format!("spec.limits: {e}"))?;
        let usage = nodepool_usage(snapshot, name);
        let mut remaining = Resources::new();
        for resource in limits.names() {
            remaining.set(resource, limits.get(resource) - usage.get(resource));
        }
        Some(remaining)
    };
    Ok(NodePoolSpec {
        name: name.to_string(),
        weight: pool.weight(),
        requirements,
        labels,
        taints,
        startup_taints,
        remaining_limits,
        instance_types,
    })
}

/// The whole simulation input (pods to place left empty).
pub async fn simulation_input(
    ctx: &Context,
    snapshot: &Snapshot,
    include_inflight: bool,
) -> (SimulationInput, BTreeMap<String, String>) {
    let (nodepools, skipped) = nodepool_specs(ctx, snapshot).await;
    let input = SimulationInput {
        existing_nodes: existing_nodes(snapshot, include_inflight),
        pods: Vec::new(),
        nodepools,
        daemonsets: daemonset_pods(snapshot),
        ..Default::default()
    };
    (input, skipped)
}

#[cfg(test)]
mod tests {
    /// A pod waiting on a class that is not Ready reads which condition holds it (issue 16:
    /// "the EC2NodeClass is not Ready and which condition").
    #[test]
    fn a_class_that_is_not_ready_names_the_condition_holding_it() {
        let condition = |type_: &str, status: &str, reason: &str, message: &str| {
            driftwood_api::condition::Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason: Some(reason.to_string()),
                message: Some(message.to_string()),
                last_transition_time: None,
                observed_generation: None,
            }
        };
        let conditions = [
            condition(
                "AMIsReady",
                "False",
                "AMINotFound",
                "no AMI matched amiSelectorTerms[0]",
            ),
            condition("SubnetsReady", "True", "SubnetsReady", ""),
            condition("Ready", "False", "NotReady", "AMIsReady=False"),
        ];
        assert_eq!(
            super::not_ready_because(&conditions),
            ": AMIsReady=False (AMINotFound: no AMI matched amiSelectorTerms[0])"
        );
        assert_eq!(
            super::not_ready_because(&conditions[2..]),
            ": Ready=False (NotReady: AMIsReady=False)"
        );
        assert_eq!(super::not_ready_because(&[]), "");
    }

    use super::*;
    use crate::state::Store;
    use serde_json::json;
    use std::sync::Arc;

    /// Karpenter's cluster state reads an uninitialized node through its NodeClaim: a Node the
    /// kubelet just created, before registration synced the NodeClaim's labels and taints and
    /// before it reported allocatable, is still the capacity its pods were launched for.
    #[test]
    fn a_node_not_yet_registered_carries_its_nodeclaims_labels_taints_and_allocatable() {
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "labels": {"karpenter.sh/nodepool": "default", "team": "a"}},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": [],
                     "taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]},
            "status": {"providerID": "aws:///zone/i-1", "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "29"},
                       "conditions": [{"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
        }))
        .expect("nodeclaim");
        let bare: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1", "team": "node-says-b"}},
            "spec": {"providerID": "aws:///zone/i-1",
                     "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]}
        }))
        .expect("node");
        let mut snapshot = Snapshot::new(Store::default());
        snapshot.apply("c".into(), Arc::new(claim.clone()));
        snapshot.apply("n1".into(), Arc::new(bare));
        let nodes = existing_nodes(&snapshot, true);
        assert_eq!(
            nodes.len(),
            1,
            "the node, not also the claim as in-flight capacity"
        );
        let node = &nodes[0];
        assert_eq!(
            node.labels.get("karpenter.sh/nodepool").map(String::as_str),
            Some("default")
        );
        // What the Node already says stays.
        assert_eq!(
            node.labels.get("team").map(String::as_str),
            Some("node-says-b")
        );
        assert!(node.taints.iter().any(|t| t.key == "dedicated"));
        assert_eq!(
            node.allocatable.get(driftwood_scheduling::resources::CPU),
            2000
        );
        assert!(!node.initialized);
    }

    /// A NodeClaim waiting for its launch (EC2's launch bucket empty) is capacity where it was
    /// planned: a requirement of one value (the zone a zone-spread pod was planned in) is the
    /// label it will carry, so the next batch finds its pods' place there instead of giving
    /// them NodeClaims of their own again; a requirement of several values labels nothing.
    #[test]
    fn a_nodeclaim_not_launched_yet_carries_the_labels_its_requirements_fix() {
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"},
                     "requirements": [
                         {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2b"]},
                         {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]},
                         {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]},
                         {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["other"]}
                     ],
                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
        }))
        .expect("nodeclaim");
        let mut snapshot = Snapshot::new(Store::default());
        snapshot.apply("c".into(), Arc::new(claim));
        let nodes = existing_nodes(&snapshot, true);
        let [node] = nodes.as_slice() else {
            panic!("one in-flight node: {nodes:?}");
        };
        let label = |key: &str| node.labels.get(key).map(String::as_str);
        assert_eq!(label("topology.kubernetes.io/zone"), Some("us-west-2b"));
        assert_eq!(label("node.kubernetes.io/instance-type"), None);
        assert_eq!(label("karpenter.sh/capacity-type"), None);
        // A label the NodeClaim already carries stays.
        assert_eq!(label("karpenter.sh/nodepool"), Some("default"));
        assert_eq!(label("kubernetes.io/hostname"), Some("c"));
    }

    /// Karpenter's state node: an uninitialized Node's zero resources come from its NodeClaim,
    /// each on its own. A Node whose kubelet reports cpu and memory but whose device plugin has
    /// not yet reported GPUs still counts the NodeClaim's GPUs (else the provisioner would
    /// launch a second GPU node for the same pods).
    #[test]
    fn a_registered_node_without_its_gpus_yet_counts_the_nodeclaims() {
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "labels": {"karpenter.sh/nodepool": "gpu"}},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
            "status": {"providerID": "aws:///zone/i-1",
                       "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "29", "nvidia.com/gpu": "1"}}
        }))
        .expect("nodeclaim");
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
            "spec": {"providerID": "aws:///zone/i-1"},
            "status": {"allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "29"}}
        }))
        .expect("node");
        let mut snapshot = Snapshot::new(Store::default());
        snapshot.apply("c".into(), Arc::new(claim));
        snapshot.apply("n1".into(), Arc::new(node));
        let nodes = existing_nodes(&snapshot, true);
        let node = &nodes[0];
        assert_eq!(node.allocatable.get("nvidia.com/gpu"), 1000);
        // What the kubelet reports wins where it reports something.
        assert_eq!(
            node.allocatable.get(driftwood_scheduling::resources::CPU),
            3920
        );
    }

    /// Karpenter's cluster state holds a pod's requests until the pod is terminal ("should not
    /// add requests if the pod is terminal"), and its topology leaves a pod being deleted out of
    /// every count (`IgnoredForTopology`): a node's pods being deleted are handed to the
    /// simulation apart from its running ones, and its finished pods not at all.
    #[test]
    fn a_nodes_pods_being_deleted_are_apart_and_its_finished_pods_gone() {
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "29"}}
        }))
        .expect("node");
        let pod = |name: &str, deleting: bool, phase: &str| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default", "uid": name,
                             "deletionTimestamp": deleting.then_some("2024-01-01T00:00:00Z")},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "pause",
                         "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"phase": phase}
            }))
            .expect("pod")
        };
        let mut snapshot = Snapshot::new(Store::default());
        snapshot.apply("n1".into(), Arc::new(node));
        for (name, deleting, phase) in [
            ("running", false, "Running"),
            ("leaving", true, "Running"),
            ("done", false, "Succeeded"),
        ] {
            snapshot.apply(
                format!("default/{name}"),
                Arc::new(pod(name, deleting, phase)),
            );
        }
        let nodes = existing_nodes(&snapshot, false);
        let keys = |pods: &[SimPod]| pods.iter().map(|p| p.key.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&nodes[0].pods), ["default/running"]);
        assert_eq!(keys(&nodes[0].terminating), ["default/leaving"]);
    }

    /// A node's view is built again exactly when its Node, its NodeClaim or a pod on it is
    /// another object; a node none of those changed for is the view built before (the same
    /// `Arc`), and a node gone is forgotten.
    #[test]
    fn a_nodes_view_is_built_again_only_when_its_node_claim_or_pods_change() {
        let node = |name: &str, team: &str| -> k8s_openapi::api::core::v1::Node {
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "team": team}},
                "spec": {"providerID": format!("aws:///zone/i-{name}")},
                "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "29"}}
            }))
            .expect("node")
        };
        let claim = |name: &str, initialized: bool| -> NodeClaim {
            let status = if initialized { "True" } else { "False" };
            serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name},
                "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
                "status": {"providerID": "aws:///zone/i-n1", "conditions": [{"type": "Initialized",
                    "status": status, "reason": "x", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
            }))
            .expect("nodeclaim")
        };
        let pod = |name: &str, cpu: &str| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "pause",
                         "resources": {"requests": {"cpu": cpu}}}]},
                "status": {"phase": "Running"}
            }))
            .expect("pod")
        };
        let mut snapshot = Snapshot::new(Store::default());
        snapshot.apply("n1".into(), Arc::new(node("n1", "a")));
        snapshot.apply("n2".into(), Arc::new(node("n2", "a")));
        snapshot.apply("c1".into(), Arc::new(claim("c1", false)));
        snapshot.apply("default/p".into(), Arc::new(pod("p", "1")));
        let first = existing_nodes(&snapshot, false);
        let again = existing_nodes(&snapshot.clone(), false);
        assert!(first.iter().zip(&again).all(|(a, b)| Arc::ptr_eq(a, b)));
        assert!(!first[0].initialized);
        // A pod on n1 changes: n1 is built again, n2 is not.
        snapshot.apply("default/p".into(), Arc::new(pod("p", "2")));
        let moved = existing_nodes(&snapshot, false);
        assert!(!Arc::ptr_eq(&moved[0], &first[0]));
        assert_eq!(
            moved[0].pods[0]
                .requests
                .get(driftwood_scheduling::resources::CPU),
            2000
        );
        assert!(Arc::ptr_eq(&moved[1], &first[1]));
        // Its NodeClaim changes: built again.
        snapshot.apply("c1".into(), Arc::new(claim("c1", true)));
        let claimed = existing_nodes(&snapshot, false);
        assert!(!Arc::ptr_eq(&claimed[0], &moved[0]) && claimed[0].initialized);
        // The Node itself changes: built again, with its labels.
        snapshot.apply("n2".into(), Arc::new(node("n2", "b")));
        let relabelled = existing_nodes(&snapshot, false);
        assert!(Arc::ptr_eq(&relabelled[0], &claimed[0]));
        assert_eq!(
            relabelled[1].labels.get("team").map(String::as_str),
            Some("b")
        );
        // A node gone is forgotten.
        snapshot.delete::<k8s_openapi::api::core::v1::Node>("n2");
        assert_eq!(existing_nodes(&snapshot, false).len(), 1);
        assert_eq!(
            format!("{:?}", snapshot.built_nodes),
            "BuiltNodes { views: 1 }"
        );
    }
}
