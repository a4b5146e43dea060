//! The simulation's input and output as plain data: existing nodes, NodePools, pods to place,
//! and the placements, new NodeClaims and unschedulable pods that come back.

use std::collections::BTreeMap;
use std::sync::Arc;

use driftwood_api::wellknown::{
    LABEL_NODE_INITIALIZED, TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE, TAINT_UNREGISTERED_KEY,
};
use k8s_openapi::api::core::v1::Node;
use thiserror::Error;

use crate::instance_type::InstanceType;
use crate::pod::{PodConstraints, SimPod};
use crate::requirements::Requirements;
use crate::resources::{ResourceError, Resources};
use crate::taints::{Taint, TaintError};

/// The default bound on the instance types offered per new NodeClaim.
pub const DEFAULT_MAX_INSTANCE_TYPES: usize = 60;

/// A node that exists (or a NodeClaim already in flight).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExistingNode {
    /// Node name (the hostname topology domain).
    pub name: String,
    /// Node labels.
    pub labels: BTreeMap<String, String>,
    /// Node taints.
    pub taints: Vec<Taint>,
    /// Taints that go away once the node is initialized; ignored while `initialized` is false.
    pub startup_taints: Vec<Taint>,
    /// Allocatable resources; must include `pods` (each pod takes one), as a real node's does.
    pub allocatable: Resources,
    /// Pods bound to it (their requests use capacity; they count for topology).
    pub pods: Vec<SimPod>,
    /// Pods bound to it that are being deleted: they hold their requests and host ports until
    /// they are gone, and are never moved. For topology, a pod being deleted is not counted
    /// by a topology spread (kube-scheduler and Karpenter both skip it), still keeps away the
    /// pods its required anti-affinity selects, and is counted by other pods' pod affinity and
    /// anti-affinity only when [`SimulationOptions::terminating_pods_count_for_pod_affinity`]
    /// says so.
    pub terminating: Vec<SimPod>,
    /// The node is leaving: its non-daemonset pods are placed elsewhere and nothing lands on it.
    pub going_away: bool,
    /// Whether the node is initialized. While not, its startup taints and the ephemeral
    /// not-ready / unreachable / unregistered taints are ignored, as they will be removed.
    pub initialized: bool,
}

impl ExistingNode {
    /// The taints pods must tolerate now: all of them once the node is initialized; before,
    /// its startup taints and the ephemeral not-ready, unreachable and unregistered taints are
    /// left out, as they will be removed.
    pub fn effective_taints(&self) -> Vec<Taint> {
        self.taints
            .iter()
            .filter(|t| {
                self.initialized
                    || !(self
                        .startup_taints
                        .iter()
                        .any(|s| s.key == t.key && s.effect == t.effect)
                        || [
                            TAINT_NODE_NOT_READY,
                            TAINT_NODE_UNREACHABLE,
                            TAINT_UNREGISTERED_KEY,
                        ]
                        .contains(&t.key.as_str()))
            })
            .cloned()
            .collect()
    }
}

/// A node that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NodeConversionError {
    /// A taint is malformed.
    #[error("node {node}: spec.taints: {source}")]
    Taint {
        /// Node name.
        node: String,
        /// The problem.
        #[source]
        source: TaintError,
    },
    /// Allocatable is malformed.
    #[error("node {node}: status.allocatable: {source}")]
    Allocatable {
        /// Node name.
        node: String,
        /// The problem.
        #[source]
        source: ResourceError,
    },
}

impl ExistingNode {
    /// Builds an existing node from a Kubernetes Node and the pods bound to it. `initialized`
    /// is read from the `karpenter.sh/initialized` label (nodes without it count as initialized
    /// unless they carry `karpenter.sh/nodepool`).
    pub fn from_node(node: &Node, pods: Vec<SimPod>) -> Result<Self, NodeConversionError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let mut taints = Vec::new();
        for t in node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
        {
            taints.push(
                Taint::from_k8s(t).map_err(|source| NodeConversionError::Taint {
                    node: name.clone(),
                    source,
                })?,
            );
        }
        let allocatable = match node.status.as_ref().and_then(|s| s.allocatable.as_ref()) {
            Some(a) => Resources::from_quantities(a).map_err(|source| {
                NodeConversionError::Allocatable {
                    node: name.clone(),
                    source,
                }
            })?,
            None => Resources::new(),
        };
        let managed = labels.contains_key(driftwood_api::wellknown::LABEL_NODEPOOL);
        let initialized = labels
            .get(LABEL_NODE_INITIALIZED)
            .map_or(!managed, |v| v == "true");
        Ok(Self {
            name,
            labels,
            taints,
            startup_taints: Vec::new(),
            allocatable,
            pods,
            terminating: Vec::new(),
            going_away: false,
            initialized,
        })
    }
}

/// A NodePool as the simulation needs it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodePoolSpec {
    /// NodePool name.
    pub name: String,
    /// Higher weights are tried first (ties by name).
    pub weight: i32,
    /// `spec.template.spec.requirements` (with minValues).
    pub requirements: Requirements,
    /// `spec.template.metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.template.spec.taints`: pods must tolerate them.
    pub taints: Vec<Taint>,
    /// `spec.template.spec.startupTaints`: removed after start; pods need not tolerate them.
    pub startup_taints: Vec<Taint>,
    /// What `spec.limits` still allows (limits minus what the pool already uses); `None` = no limits.
    pub remaining_limits: Option<Resources>,
    /// The instance types its NodeClass offers (shared: a world is cloned per simulation and
    /// the catalog does not change within a pass).
    pub instance_types: std::sync::Arc<Vec<InstanceType>>,
}

/// Tunables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimulationOptions {
    /// How many instance types a new NodeClaim lists at most (cheapest first); default 60.
    pub max_instance_types: usize,
    /// Check every bin for every pod instead of skipping bins known to reject it. Slow; the
    /// result is the same, which tests use to verify the fast path.
    pub exhaustive: bool,
    /// Told of every simulation of this input and of the inputs derived from it (a planner's
    /// reduced and summarised worlds): the metrics of the controller whose pass runs them.
    pub observer: Observer,
    /// Whether pods being deleted ([`ExistingNode::terminating`]) count for other pods' pod
    /// affinity and anti-affinity. kube-scheduler counts them (a pod is on its node until it is
    /// gone); Karpenter's simulation does not (`IgnoredForTopology`), which is the default.
    pub terminating_pods_count_for_pod_affinity: bool,
}

impl Default for SimulationOptions {
    fn default() -> Self {
        Self {
            max_instance_types: DEFAULT_MAX_INSTANCE_TYPES,
            exhaustive: false,
            observer: Observer::default(),
            terminating_pods_count_for_pod_affinity: false,
        }
    }
}

/// Watches simulations as they run (Karpenter's scheduler metrics, by controller).
pub trait SimulationObserver: Send + Sync {
    /// A simulation starts: what is returned hears its progress, and is dropped when it ends.
    fn started(&self) -> Box<dyn ObservedSimulation>;
}

/// One simulation under watch ([`SimulationObserver::started`]); dropped when it ends.
pub trait ObservedSimulation {
    /// What the simulation reports its progress to.
    fn progress(&self) -> &crate::SolveProgress;
}

/// An input's [`SimulationObserver`], if any. It never changes an answer, so every two are
/// equal: inputs that differ only in who watches them are the same input.
#[derive(Clone, Default)]
pub struct Observer(pub Option<std::sync::Arc<dyn SimulationObserver>>);

impl Observer {
    /// Watched by `observer`.
    pub fn new(observer: std::sync::Arc<dyn SimulationObserver>) -> Self {
        Self(Some(observer))
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Observer(watched)"
        } else {
            "Observer(none)"
        })
    }
}

impl PartialEq for Observer {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Observer {}

/// Nodes that receive no pod in a simulation, summarised: their pods count for topology
/// (spread, affinity, anti-affinity) in the domains of the labels the nodes share, and nothing
/// else about them is looked at. A caller summarises only nodes that none of the pods to place
/// can go to (a disruption pass's drifted and leaving nodes, which a taint keeps every moving
/// pod off; for the scheduler, the nodes a pending pod's taints, selector or requests rule
/// out), so that thousands of such nodes cost what their distinct pods cost rather than what
/// all their pods cost. The simulation places nothing on them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeSummary {
    /// Labels every summarised node carries. Not the hostname: a summary stands for many nodes.
    pub labels: BTreeMap<String, String>,
    /// Taints every summarised node carries (as they act: startup taints of uninitialized nodes
    /// left out); they name why a pod that fits nowhere could not go there.
    pub taints: Vec<Taint>,
    /// How many nodes the summary stands for; a summary of none is ignored.
    pub nodes: usize,
    /// The constraints of the nodes' pods, each with how many of their pods have them.
    pub pods: Vec<(PodConstraints, u32)>,
    /// The same for the nodes' pods being deleted (counted as [`ExistingNode::terminating`]).
    pub terminating: Vec<(PodConstraints, u32)>,
}

/// Everything the simulation looks at.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SimulationInput {
    /// Existing nodes, tried in this order (some may be going away); shared, so that inputs
    /// built from one world (a part of it, a candidate's reduced world) copy no node, and one
    /// that changes a node copies only that node (`Arc::make_mut`).
    pub existing_nodes: Vec<Arc<ExistingNode>>,
    /// Existing nodes that receive no pod, summarised: they count for topology only.
    pub summaries: Vec<NodeSummary>,
    /// Pods to place (pending pods, or pods of a node being replaced).
    pub pods: Vec<SimPod>,
    /// How many of `pods`, from the first, are running pods of Nodes being deleted: placed as
    /// the rest, but not pending (the effective-zone counts leave them out, as Karpenter counts
    /// pods in phase Pending only).
    pub moving_pods: usize,
    /// NodePools that may create nodes.
    pub nodepools: Vec<NodePoolSpec>,
    /// DaemonSet pod templates: each new node carries those that tolerate and select it.
    pub daemonsets: Vec<SimPod>,
    /// Namespace labels, for pod affinity `namespaceSelector`s.
    pub namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// Tunables.
    pub options: SimulationOptions,
}

/// A pod placed on an existing node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExistingPlacement {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// Node name.
    pub node: String,
}

/// A NodeClaim the simulation opened.
#[derive(Debug, Clone, PartialEq)]
pub struct NewNodeClaim {
    /// The NodePool it comes from.
    pub nodepool: String,
    /// NodePool requirements narrowed by its pods (and topology), template labels and the
    /// `karpenter.sh/nodepool` label included, plus `node.kubernetes.io/instance-type In
    /// [instance_types]`: ready to become the NodeClaim's `spec.requirements`.
    pub requirements: Requirements,
    /// Instance types that can host all its pods, cheapest compatible offering first, bounded.
    pub instance_types: Vec<String>,
    /// Pods placed on it, in placement order.
    pub pods: Vec<String>,
    /// Requests of its pods plus its daemonsets.
    pub requests: Resources,
    /// The part of `requests` that comes from daemonsets.
    pub daemonset_requests: Resources,
}

/// A pod that could not be placed, with a reason a user can act on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct UnschedulablePod {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// Why.
    pub reason: String,
}

/// What the simulation decided.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SimulationResult {
    /// Pods placed on existing nodes.
    pub existing_placements: Vec<ExistingPlacement>,
    /// NodeClaims to create.
    pub new_nodeclaims: Vec<NewNodeClaim>,
    /// Pods that fit nowhere.
    pub unschedulable: Vec<UnschedulablePod>,
}

/// Input the simulation cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SimulationError {
    /// More distinct zones than the engine tracks.
    #[error("too many distinct zones ({count}); at most {max} are supported")]
    TooManyZones {
        /// Zones seen.
        count: usize,
        /// The limit.
        max: usize,
    },
}
