//! A consistent copy of the cluster state with the indexes the planners need: pods per node,
//! pending pods, NodeClaims per NodePool, NodeClaim and Node by providerID.

use super::{ObjectKey, Store};
use driftwood_api::wellknown::LABEL_NODEPOOL;
use driftwood_api::{EC2NodeClass, NodeClaim, NodePool};
use k8s_openapi::api::core::v1::{Node, Pod};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The store at one moment plus indexes.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub store: Store,
    /// Pod keys bound to each node name.
    pub pods_by_node: BTreeMap<String, Vec<ObjectKey>>,
    /// Pods not bound to a node, not finished and not being deleted.
    pub pending_pods: Vec<ObjectKey>,
    /// NodeClaim names per NodePool name (from the karpenter.sh/nodepool label).
    pub nodeclaims_by_nodepool: BTreeMap<String, Vec<String>>,
    /// NodeClaim name by status.providerID.
    pub nodeclaim_by_provider_id: BTreeMap<String, String>,
    /// Node name by spec.providerID.
    pub node_by_provider_id: BTreeMap<String, String>,
}

impl Snapshot {
    pub fn new(store: Store) -> Self {
        let mut snapshot = Self {
            store,
            ..Default::default()
        };
        for (key, pod) in &snapshot.store.pods {
            let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
            match node {
                Some(node) if !node.is_empty() => snapshot
                    .pods_by_node
                    .entry(node)
                    .or_default()
                    .push(key.clone()),
                _ => {
                    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                    let finished = matches!(phase, Some("Succeeded" | "Failed"));
                    if !finished && pod.metadata.deletion_timestamp.is_none() {
                        snapshot.pending_pods.push(key.clone());
                    }
                }
            }
        }
        for (name, claim) in &snapshot.store.nodeclaims {
            if let Some(pool) = claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_NODEPOOL))
            {
                snapshot
                    .nodeclaims_by_nodepool
                    .entry(pool.clone())
                    .or_default()
                    .push(name.clone());
            }
            if let Some(id) = claim.status.as_ref().and_then(|s| s.provider_id.clone()) {
                snapshot.nodeclaim_by_provider_id.insert(id, name.clone());
            }
        }
        for (name, node) in &snapshot.store.nodes {
            if let Some(id) = node.spec.as_ref().and_then(|s| s.provider_id.clone()) {
                snapshot.node_by_provider_id.insert(id, name.clone());
            }
        }
        snapshot
    }

    pub fn nodepool(&self, name: &str) -> Option<&Arc<NodePool>> {
        self.store.nodepools.get(name)
    }

    pub fn nodeclass(&self, name: &str) -> Option<&Arc<EC2NodeClass>> {
        self.store.nodeclasses.get(name)
    }

    /// The Node of a NodeClaim: by providerID, else by status.nodeName.
    pub fn node_of(&self, claim: &NodeClaim) -> Option<&Arc<Node>> {
        let status = claim.status.as_ref()?;
        status
            .provider_id
            .as_ref()
            .and_then(|id| self.node_by_provider_id.get(id))
            .or(status.node_name.as_ref())
            .and_then(|name| self.store.nodes.get(name))
    }

    /// The NodeClaim of a Node, by providerID.
    pub fn nodeclaim_of(&self, node: &Node) -> Option<&Arc<NodeClaim>> {
        let id = node.spec.as_ref()?.provider_id.as_ref()?;
        self.nodeclaim_by_provider_id
            .get(id)
            .and_then(|name| self.store.nodeclaims.get(name))
    }

    /// The pods bound to `node`.
    pub fn pods_on(&self, node: &str) -> Vec<&Arc<Pod>> {
        self.pods_by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|key| self.store.pods.get(key))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: Option<&str>, phase: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c"}], "nodeName": node},
                "status": {"phase": phase}
            }))
            .unwrap(),
        )
    }

    #[test]
    fn indexes() {
        let mut store = Store::default();
        store
            .pods
            .insert("default/a".into(), pod("a", Some("n1"), "Running"));
        store
            .pods
            .insert("default/b".into(), pod("b", None, "Pending"));
        store
            .pods
            .insert("default/c".into(), pod("c", None, "Succeeded"));
        let node: Node = serde_json::from_value(
            json!({"metadata": {"name": "n1"}, "spec": {"providerID": "aws:///z/i-1"}}),
        )
        .unwrap();
        store.nodes.insert("n1".into(), Arc::new(node));
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "nc1", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
            "status": {"providerID": "aws:///z/i-1"}
        }))
        .unwrap();
        store.nodeclaims.insert("nc1".into(), Arc::new(claim));
        let snapshot = Snapshot::new(store);
        assert_eq!(snapshot.pods_by_node["n1"], vec!["default/a"]);
        assert_eq!(snapshot.pending_pods, vec!["default/b"]);
        assert_eq!(snapshot.nodeclaims_by_nodepool["default"], vec!["nc1"]);
        let claim = snapshot.store.nodeclaims["nc1"].clone();
        assert_eq!(
            snapshot
                .node_of(&claim)
                .and_then(|n| n.metadata.name.clone())
                .as_deref(),
            Some("n1")
        );
        let node = snapshot.store.nodes["n1"].clone();
        assert_eq!(
            snapshot
                .nodeclaim_of(&node)
                .and_then(|c| c.metadata.name.clone())
                .as_deref(),
            Some("nc1")
        );
        assert_eq!(snapshot.pods_on("n1").len(), 1);
    }
}
