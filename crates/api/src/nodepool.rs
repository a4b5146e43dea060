//! The karpenter.sh/v1 NodePool: a template for NodeClaims plus disruption rules, limits and
//! weight.

use crate::condition::{Condition, Conditions};
use crate::duration::NillableDuration;
use crate::nodeclaim::NodeClassReference;
use crate::requirement::NodeSelectorRequirementWithMinValues;
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Default `expireAfter` of a NodePool template.
pub const DEFAULT_EXPIRE_AFTER: &str = "720h";
/// Default node budget when a NodePool declares none.
pub const DEFAULT_BUDGET_NODES: &str = "10%";
/// Default consolidation policy.
pub const DEFAULT_CONSOLIDATION_POLICY: &str = "WhenEmptyOrUnderutilized";
/// Default consolidateAfter.
pub const DEFAULT_CONSOLIDATE_AFTER: &str = "0s";
pub const CONSOLIDATION_WHEN_EMPTY: &str = "WhenEmpty";
pub const CONSOLIDATION_WHEN_EMPTY_OR_UNDERUTILIZED: &str = "WhenEmptyOrUnderutilized";
/// Karpenter v1.14's policy: consolidate only moves whose savings are worth their disruption.
pub const CONSOLIDATION_BALANCED: &str = "Balanced";

/// The NodePool's desired state.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    singular = "nodepool",
    derive = "PartialEq",
    status = "NodePoolStatus",
    shortname = "np",
    shortname = "nps",
    category = "karpenter",
    doc = "NodePool is the Schema for the NodePools API",
    printcolumn = r#"{"name":"NodeClass","type":"string","jsonPath":".spec.template.spec.nodeClassRef.name"}"#,
    printcolumn = r#"{"name":"Nodes","type":"string","jsonPath":".status.resources.nodes"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Up-To-Date","type":"integer","jsonPath":".status.rollout.upToDate"}"#,
    printcolumn = r#"{"name":"Drifted","type":"integer","jsonPath":".status.rollout.drifted"}"#,
    printcolumn = r#"{"name":"Disrupting","type":"integer","jsonPath":".status.rollout.disrupting"}"#,
    printcolumn = r#"{"name":"Rollout","type":"string","jsonPath":".status.conditions[?(@.type==\"RolloutComplete\")].reason"}"#,
    printcolumn = r#"{"name":"Weight","type":"integer","priority":1,"jsonPath":".spec.weight"}"#,
    printcolumn = r#"{"name":"CPU","type":"string","priority":1,"jsonPath":".status.resources.cpu"}"#,
    printcolumn = r#"{"name":"Memory","type":"string","priority":1,"jsonPath":".status.resources.memory"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    /// The template NodeClaims are made from. Changing it drifts the NodeClaims made from it
    /// (except `requirements`, which drift only nodes that no longer satisfy them).
    pub template: NodeClaimTemplate,
    /// How and when nodes of this pool may be disrupted.
    #[serde(default)]
    pub disruption: Disruption,
    /// Resource limits for the pool's total capacity; no node is launched past them. A static
    /// NodePool may only limit `nodes`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Quantity>,
    /// Priority among NodePools: higher weights are tried first (1-100). Not allowed on a static
    /// NodePool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Static capacity: a fixed node count kept regardless of pods. Set at creation or never
    /// (a pool cannot switch between static and dynamic). driftwood accepts the field and
    /// leaves static NodePools alone (README, "Where driftwood differs").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
}

/// Labels and annotations of the NodeClaim template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMetaTemplate {
    /// Labels applied to every node of this pool.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations applied to every node of this pool.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The template NodeClaims are made from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    #[serde(default)]
    pub metadata: ObjectMetaTemplate,
    pub spec: NodeClaimTemplateSpec,
}

/// The NodeClaim spec fields a NodePool template carries.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    /// Taints applied to every node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints a daemon removes once the node is set up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// Constraints on the instance types and offerings that may be launched.
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// The node class nodes are launched with.
    pub node_class_ref: NodeClassReference,
    /// How long a node may live before it is replaced; "Never" disables expiry. Default 720h.
    #[serde(default = "default_expire_after")]
    pub expire_after: NillableDuration,
    /// The maximum time a node may spend draining before its pods are deleted regardless.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<String>,
}

impl Default for NodeClaimTemplateSpec {
    fn default() -> Self {
        Self {
            taints: Vec::new(),
            startup_taints: Vec::new(),
            requirements: Vec::new(),
            node_class_ref: NodeClassReference::default(),
            expire_after: default_expire_after(),
            termination_grace_period: None,
        }
    }
}

fn default_expire_after() -> NillableDuration {
    NillableDuration(DEFAULT_EXPIRE_AFTER.to_string())
}

/// Disruption rules.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// How long after a pod was added or removed a node may be consolidated ("Never" disables).
    #[serde(default = "default_consolidate_after")]
    pub consolidate_after: NillableDuration,
    /// WhenEmpty (empty nodes only), WhenEmptyOrUnderutilized, or Balanced (moves scored).
    #[serde(default = "default_consolidation_policy")]
    pub consolidation_policy: String,
    /// How many nodes may be disrupted at once. Default: one budget of 10%.
    #[serde(default = "default_budgets")]
    pub budgets: Vec<Budget>,
}

impl Default for Disruption {
    fn default() -> Self {
        Self {
            consolidate_after: default_consolidate_after(),
            consolidation_policy: default_consolidation_policy(),
            budgets: default_budgets(),
        }
    }
}

fn default_consolidate_after() -> NillableDuration {
    NillableDuration(DEFAULT_CONSOLIDATE_AFTER.to_string())
}

fn default_consolidation_policy() -> String {
    DEFAULT_CONSOLIDATION_POLICY.to_string()
}

fn default_budgets() -> Vec<Budget> {
    vec![Budget::default()]
}

/// A limit on how many nodes may be disrupted at once, optionally only for some reasons and
/// only within a cron window.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// Disruption reasons this budget applies to (Underutilized, Empty, Drifted, and v1.15's
    /// Unhealthy for node repair); all when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Vec<String>>,
    /// A node count ("5") or a percentage of the pool's nodes ("10%", rounded up).
    #[serde(default = "default_budget_nodes")]
    pub nodes: String,
    /// Cron schedule (UTC) when the budget becomes active; needs `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// How long the budget stays active after each schedule start (e.g. "8h", "1h30m").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            reasons: None,
            nodes: default_budget_nodes(),
            schedule: None,
            duration: None,
        }
    }
}

fn default_budget_nodes() -> String {
    DEFAULT_BUDGET_NODES.to_string()
}

/// Observed state of a NodePool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// Resources of the nodes in this pool (cpu, memory, pods, nodes, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
    /// Ready, NodeClassReady, ValidationSucceeded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generation of the node class last seen Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    /// How many nodes (live NodeClaims) the pool has.
    #[serde(default)]
    pub nodes: i64,
    /// driftwood's account of the pool's rollout, written by the disruption loop. Not in
    /// Karpenter's CRD: with Karpenter's CRDs installed the API server prunes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
}

/// Where a NodePool's rollout stands: its live nodes (NodeClaims not being deleted) counted by
/// state, each node in exactly one of `upToDate`, `drifted` (waiting to be replaced, `blocked`
/// counting those of them that cannot be disrupted now) and `disrupting` (a command in flight).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The NodePool generation the nodes were compared with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Nodes that are not drifted and not being disrupted.
    #[serde(default)]
    pub up_to_date: i64,
    /// Drifted nodes waiting to be replaced.
    #[serde(default)]
    pub drifted: i64,
    /// Nodes with a disruption command in flight (replacement launching, draining).
    #[serde(default)]
    pub disrupting: i64,
    /// Drifted nodes that cannot be disrupted now (a PDB, do-not-disrupt, pods that fit
    /// nowhere, the rollout paused); a budget that is merely full blocks none.
    #[serde(default)]
    pub blocked: i64,
    /// Whether the pool's rollout is paused (the `driftwood.sh/rollout-paused` annotation).
    #[serde(default)]
    pub paused: bool,
    /// The rollout policy's progress (the `driftwood.sh/rollout-*` annotations): written before
    /// the disruptions it allows start, so a restarted controller keeps its waves and rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<RolloutPolicyStatus>,
    /// The pool's own backoff after replacements that failed (never initialized, or vanished):
    /// no new disruption starts in this pool until it ends; other pools are not held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<RolloutBackoff>,
}

/// A NodePool backing off after failed replacements.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutBackoff {
    /// Replacements that failed in a row (a replacement that initializes resets it).
    pub failures: i64,
    /// Until when no new disruption starts (RFC 3339).
    pub until: String,
    /// Why the last one failed.
    pub reason: String,
}

/// Where a rollout stands against the NodePool's rollout policy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPolicyStatus {
    /// When this rollout began: the first pass that found a drifted node (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// What this rollout replaces nodes to match: a hash of the pool's template hash, its
    /// class's hash and the class's resolved AMIs, subnets and security groups. When it
    /// changes (a new AMI, or the class pointed back at the old one) a new rollout begins,
    /// from its first wave, and a halt of the old one no longer holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Disruptions this rollout has started, every wave together.
    #[serde(default)]
    pub started: i64,
    /// The pool's nodes when this rollout began: what the waves' percentages are of (the
    /// replacements in flight do not grow a wave).
    #[serde(default)]
    pub nodes: i64,
    /// The wave under way, from 0; past the policy's list it is the last wave (the rest).
    #[serde(default)]
    pub wave: i64,
    /// Nodes to replace when this rollout began (drifted and disrupting): what a deadline
    /// spreads.
    #[serde(default)]
    pub planned: i64,
    /// Whether the deadline was found at risk (warned once a rollout).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deadline_at_risk: bool,
    /// The zone being rolled, when the policy goes zone by zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// When the current wave's last node was replaced and its soak began (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak_started_at: Option<String>,
    /// When each disruption within the rate budget's window started (RFC 3339), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent_starts: Vec<String>,
    /// Set when a health gate failed: the rollout halts until `driftwood rollout resume`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted: Option<RolloutHalt>,
}

/// A rollout halted by a failed health gate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutHalt {
    /// When (RFC 3339).
    pub at: String,
    /// The wave that was soaking, from 0.
    pub wave: i64,
    /// The gate that failed: Restarts, Unready or PdbBlocked.
    pub gate: String,
    /// What failed it.
    pub message: String,
}

/// The NodePool Ready reason driftwood sets on a static NodePool, which it leaves alone.
pub const REASON_STATIC_UNSUPPORTED: &str = "StaticCapacityNotSupported";
/// Why driftwood refuses a static NodePool: `driftwood validate`'s error and the Ready
/// condition's message.
pub const STATIC_UNSUPPORTED_MESSAGE: &str = "static capacity (spec.replicas) is not supported by \
     driftwood: it would neither launch nor keep the fixed node count, nor replace drifted nodes, \
     so it leaves this NodePool alone (no provisioning, no disruption)";
/// The only limit a static NodePool may set.
pub const LIMIT_NODES: &str = "nodes";

impl NodePool {
    /// Whether the pool's rollout is paused (`driftwood.sh/rollout-paused: "true"`).
    pub fn rollout_paused(&self) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::wellknown::ANNOTATION_ROLLOUT_PAUSED))
            .is_some_and(|v| v == "true")
    }

    /// The pool's weight (0 when unset).
    pub fn weight(&self) -> i32 {
        self.spec.weight.unwrap_or(0)
    }

    /// Whether the pool is static (`spec.replicas` set): a fixed node count, not provisioned
    /// for pods. driftwood does not manage static pools.
    pub fn is_static(&self) -> bool {
        self.spec.replicas.is_some()
    }
}

impl Conditions for NodePool {
    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or(&[])
    }
}
