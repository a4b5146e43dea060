//! The lookups every controller repeats, as extension traits: an object's labels, annotations,
//! NodePool and deletion; a NodeClaim's and a Node's providerID; whether a Node is Ready.

use crate::NodeClaim;
use crate::wellknown::LABEL_NODEPOOL;
use k8s_openapi::api::core::v1::Node;

/// Lookups on any Kubernetes object.
pub trait ObjectLookups: kube::Resource {
    /// The value of label `key`.
    fn label(&self, key: &str) -> Option<&str> {
        self.meta().labels.as_ref()?.get(key).map(String::as_str)
    }

    /// The value of annotation `key`.
    fn annotation(&self, key: &str) -> Option<&str> {
        self.meta()
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    /// The NodePool it belongs to (its `karpenter.sh/nodepool` label).
    fn nodepool_name(&self) -> Option<&str> {
        self.label(LABEL_NODEPOOL)
    }

    /// Whether it is being deleted (has a deletionTimestamp).
    fn is_deleting(&self) -> bool {
        self.meta().deletion_timestamp.is_some()
    }

    /// Whether it carries `finalizer`.
    fn has_finalizer(&self, finalizer: &str) -> bool {
        self.meta()
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == finalizer)
    }
}

impl<K: kube::Resource> ObjectLookups for K {}

/// The cloud instance an object stands for.
pub trait ProviderId {
    /// Its providerID, when known.
    fn provider_id(&self) -> Option<&str>;
}

impl ProviderId for NodeClaim {
    fn provider_id(&self) -> Option<&str> {
        self.status.as_ref()?.provider_id.as_deref()
    }
}

impl ProviderId for Node {
    fn provider_id(&self) -> Option<&str> {
        self.spec.as_ref()?.provider_id.as_deref()
    }
}

/// Whether a Node's Ready condition is True.
pub fn node_is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lookups_read_what_is_there_and_nothing_else() {
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "a", "labels": {"karpenter.sh/nodepool": "default"},
                         "annotations": {"x": "y"}, "finalizers": ["karpenter.sh/termination"]},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
            "status": {"providerID": "aws:///us-west-2a/i-1"}
        }))
        .expect("nodeclaim");
        assert_eq!(claim.nodepool_name(), Some("default"));
        assert_eq!(claim.annotation("x"), Some("y"));
        assert_eq!(claim.label("missing"), None);
        assert_eq!(claim.provider_id(), Some("aws:///us-west-2a/i-1"));
        assert!(claim.has_finalizer("karpenter.sh/termination") && !claim.is_deleting());
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}
        }))
        .expect("node");
        assert_eq!((node.provider_id(), node.nodepool_name()), (None, None));
        assert!(!node_is_ready(&node));
    }
}
