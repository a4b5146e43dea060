//! The karpenter.sh/v1 NodeClaim: one request for one node, and what became of it.

use crate::condition::{Condition, Conditions};
use crate::duration::NillableDuration;
use crate::requirement::NodeSelectorRequirementWithMinValues;
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A reference to the cloud-specific node class (e.g. an EC2NodeClass).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassReference {
    /// Kind of the referent (EC2NodeClass).
    pub kind: String,
    /// Name of the referent.
    pub name: String,
    /// API group of the referent (karpenter.k8s.aws).
    pub group: String,
}

/// Resources the NodeClaim's pods require.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    /// Minimum resources required by the pods that caused this NodeClaim.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
}

/// What a NodeClaim asks for.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    singular = "nodeclaim",
    derive = "PartialEq",
    status = "NodeClaimStatus",
    shortname = "nc",
    shortname = "ncs",
    category = "karpenter",
    doc = "NodeClaim is the Schema for the NodeClaims API",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".metadata.labels.node\\.kubernetes\\.io/instance-type"}"#,
    printcolumn = r#"{"name":"Capacity","type":"string","jsonPath":".metadata.labels.karpenter\\.sh/capacity-type"}"#,
    printcolumn = r#"{"name":"Zone","type":"string","jsonPath":".metadata.labels.topology\\.kubernetes\\.io/zone"}"#,
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".status.nodeName"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"ImageID","type":"string","priority":1,"jsonPath":".status.imageID"}"#,
    printcolumn = r#"{"name":"ID","type":"string","priority":1,"jsonPath":".status.providerID"}"#,
    printcolumn = r#"{"name":"NodePool","type":"string","priority":1,"jsonPath":".metadata.labels.karpenter\\.sh/nodepool"}"#,
    printcolumn = r#"{"name":"NodeClass","type":"string","priority":1,"jsonPath":".spec.nodeClassRef.name"}"#,
    printcolumn = r#"{"name":"Drifted","type":"string","priority":1,"jsonPath":".status.conditions[?(@.type==\"Drifted\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimSpec {
    /// Taints applied to the node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints applied at startup that a daemon is expected to remove before the node is
    /// considered initialized.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// Requirements that constrain the instance types and offerings that may be launched.
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// Resources the pods that caused this NodeClaim require.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// The node class this NodeClaim is launched with.
    pub node_class_ref: NodeClassReference,
    /// The maximum time the node may spend draining before pods are deleted regardless.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<String>,
    /// How long the node may live before it is replaced ("Never" to disable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<NillableDuration>,
}

/// What became of a NodeClaim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    /// The name of the Node that registered for this NodeClaim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The cloud provider's id of the instance (aws:///zone/i-...).
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// The image the instance runs.
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// The instance's full capacity.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    /// Capacity available to pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, Quantity>,
    /// Launched, Registered, Initialized, Ready, Drifted, Consolidatable, DisruptionReason,
    /// InstanceTerminating.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The last time a pod was scheduled to or removed from the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<Time>,
}

impl Conditions for NodeClaim {
    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or(&[])
    }
}
