//! The kubelets' decisions, as a pure function of the running machines, the Nodes and Pods the
//! API server holds, and the time: which Nodes to register, mark Ready/NotReady or delete, and
//! which Pods to start, mark not ready, remove after termination or collect as orphans.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use driftwood_api::wellknown::{TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE};
use driftwood_sim_aws::Machine;
pub use driftwood_sim_aws::faults::NodeFault;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use serde_json::{Value, json};

use super::node_template::{MachineFacts, fnv64, node_for_machine};

/// The kubelets' timings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletTimings {
    /// From registration to Ready.
    pub node_ready_delay: Duration,
    /// From binding (or the node becoming Ready) to the pod Running and Ready.
    pub pod_start_delay: Duration,
    /// The longest a terminating pod is kept (its grace period if shorter).
    pub pod_termination_cap: Duration,
    /// From a node having no workload pods left (or being gone) to its VolumeAttachments being
    /// detached (deleted), as the attach/detach controller and CSI driver would.
    pub volume_detach_delay: Duration,
}

impl Default for KubeletTimings {
    fn default() -> Self {
        Self {
            node_ready_delay: Duration::from_secs(5),
            pod_start_delay: Duration::from_secs(2),
            pod_termination_cap: Duration::from_secs(2),
            volume_detach_delay: Duration::from_secs(10),
        }
    }
}

/// One thing the kubelets do against the API server.
#[derive(Debug, Clone, PartialEq)]
pub enum KubeletAction {
    /// Create this Node.
    RegisterNode(Value),
    /// Set Ready=True and drop the not-ready taint.
    MarkNodeReady {
        /// Node name.
        node: String,
    },
    /// Set Ready=Unknown (the kubelet stopped posting status).
    MarkNodeNotReady {
        /// Node name.
        node: String,
    },
    /// Delete the Node (its machine is gone).
    DeleteNode {
        /// Node name.
        node: String,
    },
    /// Patch the pod status to Running/Ready.
    StartPod {
        /// Namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// The `status` to merge.
        status: Value,
    },
    /// Set Ready=False on a pod whose node stopped being Ready.
    MarkPodNotReady {
        /// Namespace.
        namespace: String,
        /// Pod name.
        name: String,
    },
    /// Delete with grace period 0 (termination finished).
    RemovePod {
        /// Namespace.
        namespace: String,
        /// Pod name.
        name: String,
    },
    /// Record on a VolumeAttachment when its node let go of its volumes (annotation
    /// [`DETACHING_SINCE`]); it is detached `volume_detach_delay` later.
    MarkVolumeDetaching {
        /// VolumeAttachment name.
        name: String,
        /// RFC 3339.
        since: String,
    },
    /// Detach: delete the VolumeAttachment.
    DetachVolume {
        /// VolumeAttachment name.
        name: String,
    },
    /// Attach a volume to a node: create its VolumeAttachment, then mark it attached.
    AttachVolume {
        /// VolumeAttachment name.
        name: String,
        /// PersistentVolume name.
        volume: String,
        /// Node name.
        node: String,
    },
    /// The pod's node seems not to exist: confirm with a read, then delete (pod GC).
    CollectOrphan {
        /// Namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// The node it is bound to.
        node: String,
    },
}

impl KubeletAction {
    /// A key identifying the action's target and kind (for de-duplication).
    pub fn key(&self) -> String {
        match self {
            Self::RegisterNode(node) => format!(
                "register/{}",
                node.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            ),
            Self::MarkNodeReady { node } => format!("ready/{node}"),
            Self::MarkNodeNotReady { node } => format!("notready/{node}"),
            Self::DeleteNode { node } => format!("delete/{node}"),
            Self::StartPod {
                namespace, name, ..
            } => format!("start/{namespace}/{name}"),
            Self::MarkPodNotReady { namespace, name } => format!("podnotready/{namespace}/{name}"),
            Self::RemovePod { namespace, name } => format!("remove/{namespace}/{name}"),
            Self::CollectOrphan {
                namespace, name, ..
            } => format!("orphan/{namespace}/{name}"),
            Self::MarkVolumeDetaching { name, .. } => format!("detaching/{name}"),
            Self::DetachVolume { name } => format!("detach/{name}"),
            Self::AttachVolume { name, .. } => format!("attach/{name}"),
        }
    }
}

/// The annotation the simulated attach/detach controller keeps on a VolumeAttachment: when its
/// node stopped needing it.
pub const DETACHING_SINCE: &str = "sim.driftwood.sh/detaching-since";

/// The CSI driver the simulated volumes attach through.
pub const ATTACHER: &str = "ebs.csi.aws.com";

/// The VolumeAttachment name for a volume on a node (`csi-<hash>`, as the CSI attacher names
/// them).
pub fn attachment_name(volume: &str, node: &str) -> String {
    format!("csi-{:016x}", fnv64(&format!("{volume}/{node}")))
}

/// What the simulated attach/detach controller does now, and which pods cannot start yet
/// because a volume of theirs is not attached to their node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VolumePlan {
    pub plan: KubeletPlan,
    /// `namespace/name` of pods waiting for a volume.
    pub waiting: BTreeSet<String>,
}

/// The simulated attach/detach controller. A pod bound to a node needs each of its claims'
/// volumes attached there (a VolumeAttachment with status.attached) before it starts; a
/// ReadWriteOnce volume still attached to another node must be detached from it first (no
/// multi-attach). A VolumeAttachment no pod on its node uses any more (terminating pods still
/// use theirs), or whose node is gone, is marked and detached (deleted) `volume_detach_delay`
/// later. Pure.
pub fn plan_volumes<
    V: Borrow<k8s_openapi::api::storage::v1::VolumeAttachment>,
    N: Borrow<Node>,
    P: Borrow<Pod>,
    C: Borrow<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
>(
    attachments: &[V],
    nodes: &[N],
    pods: &[P],
    claims: &[C],
    now: Timestamp,
    timings: &KubeletTimings,
) -> VolumePlan {
    let mut out = VolumePlan::default();
    let nodes: BTreeSet<&str> = nodes
        .iter()
        .filter_map(|n| n.borrow().metadata.name.as_deref())
        .collect();
    let volume_of: BTreeMap<(String, String), Option<String>> = claims
        .iter()
        .map(Borrow::borrow)
        .map(|c| {
            (
                (
                    c.metadata.namespace.clone().unwrap_or_default(),
                    c.metadata.name.clone().unwrap_or_default(),
                ),
                c.spec.as_ref().and_then(|s| s.volume_name.clone()),
            )
        })
        .collect();
    // (volume, node) → the pods there that use it.
    let mut used: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for pod in pods
        .iter()
        .map(Borrow::borrow)
        .filter(|p| uses_claims(p) && !pod_is_finished(p))
    {
        let Some(node) = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty())
        else {
            continue;
        };
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let key = format!(
            "{namespace}/{}",
            pod.metadata.name.clone().unwrap_or_default()
        );
        for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let Some(claim) = &volume.persistent_volume_claim else {
                continue;
            };
            match volume_of.get(&(namespace.clone(), claim.claim_name.clone())) {
                Some(Some(pv)) => used
                    .entry((pv.clone(), node.clone()))
                    .or_default()
                    .push(key.clone()),
                // An unbound or missing claim: the pod cannot start.
                _ => {
                    out.waiting.insert(key.clone());
                }
            }
        }
    }
    let live: Vec<&k8s_openapi::api::storage::v1::VolumeAttachment> = attachments
        .iter()
        .map(Borrow::borrow)
        .filter(|va| va.metadata.deletion_timestamp.is_none())
        .collect();
    for ((pv, node), users) in &used {
        let here = live.iter().find(|va| {
            va.spec.node_name == *node
                && va.spec.source.persistent_volume_name.as_deref() == Some(pv)
        });
        let attached = here.is_some_and(|va| va.status.as_ref().is_some_and(|s| s.attached));
        if !attached {
            out.waiting.extend(users.iter().cloned());
        }
        let elsewhere = live.iter().any(|va| {
            va.spec.node_name != *node
                && va.spec.source.persistent_volume_name.as_deref() == Some(pv)
        });
        if here.is_none() && !elsewhere && nodes.contains(node.as_str()) {
            out.plan.actions.push(KubeletAction::AttachVolume {
                name: attachment_name(pv, node),
                volume: pv.clone(),
                node: node.clone(),
            });
        }
    }
    for va in &live {
        let name = va.metadata.name.clone().unwrap_or_default();
        let node = va.spec.node_name.as_str();
        let pv = va
            .spec
            .source
            .persistent_volume_name
            .clone()
            .unwrap_or_default();
        let needed = nodes.contains(node) && used.contains_key(&(pv, node.to_string()));
        let since = va
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DETACHING_SINCE))
            .and_then(|t| t.parse::<Timestamp>().ok());
        match (needed, since) {
            (true, _) => {}
            (false, None) => out.plan.actions.push(KubeletAction::MarkVolumeDetaching {
                name,
                since: now.to_string(),
            }),
            (false, Some(since)) => {
                let due = plus(since, timings.volume_detach_delay);
                if due <= now {
                    out.plan.actions.push(KubeletAction::DetachVolume { name });
                } else {
                    out.plan.due_at(due);
                }
            }
        }
    }
    out
}

/// Does the pod mount a PersistentVolumeClaim? Only those pods matter to the attach/detach
/// controller.
pub fn uses_claims(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| v.persistent_volume_claim.is_some())
}

/// What the kubelets do now, and when they next have something due.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KubeletPlan {
    /// Actions, in a deterministic order.
    pub actions: Vec<KubeletAction>,
    /// The earliest future time something becomes due.
    pub next_due: Option<Timestamp>,
}

impl KubeletPlan {
    fn due_at(&mut self, at: Timestamp) {
        self.next_due = Some(self.next_due.map_or(at, |t| t.min(at)));
    }
}

/// `at` + `by`, saturating.
pub fn plus(at: Timestamp, by: Duration) -> Timestamp {
    let by = SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX);
    at.checked_add(by).unwrap_or(Timestamp::MAX)
}

fn to_timestamp(time: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Timestamp {
    time.0
}

/// The node's Ready condition: (status, lastTransitionTime).
pub fn node_ready(node: &Node) -> Option<(String, Option<Timestamp>)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| {
            (
                c.status.clone(),
                c.last_transition_time.as_ref().map(to_timestamp),
            )
        })
}

fn pod_condition<'a>(
    pod: &'a Pod,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn pod_is_running(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Running")
}

fn pod_is_finished(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed")
}

fn pod_ready(pod: &Pod) -> bool {
    pod_condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

fn node_ip(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address.clone())
        .unwrap_or_default()
}

/// The node conditions with Ready set to True (KubeletReady) or Unknown (NodeStatusUnknown),
/// its transition time moved to `now` when the status changes.
pub fn with_ready_condition(
    conditions: Vec<k8s_openapi::api::core::v1::NodeCondition>,
    ready: bool,
    now: Timestamp,
) -> Vec<Value> {
    let (status, reason, message) = if ready {
        ("True", "KubeletReady", "kubelet is posting ready status")
    } else {
        (
            "Unknown",
            "NodeStatusUnknown",
            "Kubelet stopped posting node status.",
        )
    };
    let now = now.to_string();
    let mut out: Vec<Value> = conditions
        .into_iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
    let fresh = json!({"type": "Ready", "status": status, "reason": reason, "message": message,
                       "lastHeartbeatTime": now, "lastTransitionTime": now});
    match out
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
    {
        Some(existing) => {
            if existing.get("status").and_then(Value::as_str) != Some(status) {
                *existing = fresh;
            }
        }
        None => out.push(fresh),
    }
    out
}

/// The taints without the node lifecycle controller's readiness taints (not-ready, unreachable).
pub fn without_readiness_taints(taints: &[Taint]) -> Vec<Taint> {
    taints
        .iter()
        .filter(|t| t.key != TAINT_NODE_NOT_READY && t.key != TAINT_NODE_UNREACHABLE)
        .cloned()
        .collect()
}

/// The taints plus `node.kubernetes.io/unreachable:NoSchedule`, as the node lifecycle
/// controller adds once a kubelet stops reporting.
pub fn with_unreachable_taint(taints: &[Taint], now: Timestamp) -> Vec<Taint> {
    let mut out = taints.to_vec();
    if !out
        .iter()
        .any(|t| t.key == TAINT_NODE_UNREACHABLE && t.effect == "NoSchedule")
    {
        out.push(Taint {
            key: TAINT_NODE_UNREACHABLE.to_string(),
            effect: "NoSchedule".to_string(),
            time_added: serde_json::from_value(json!(now.to_string())).ok(),
            value: None,
        });
    }
    out
}

/// A stable pod IP for a pod on a node: the node's /16 with host bits from the pod's identity.
pub fn pod_ip(node_ip: &str, pod_identity: &str) -> String {
    let hash = fnv64(pod_identity);
    let prefix: Vec<&str> = node_ip.split('.').take(2).collect();
    let prefix = if prefix.len() == 2 {
        prefix.join(".")
    } else {
        "10.0".to_string()
    };
    format!("{prefix}.{}.{}", 64 + hash % 128, (hash >> 8) % 254 + 1)
}

/// Pod annotation: `never` keeps a deleted pod terminating forever on a live node (a finalizer
/// nobody removes, a hung container runtime) — what a drain must not wait for indefinitely;
/// `full-grace` makes it take its whole grace period (it ignores SIGTERM).
pub const ANNOTATION_TERMINATION: &str = "sim.driftwood.sh/termination";
/// Pod annotation: `"false"` makes a running pod report Ready=False (a failing readiness
/// probe).
pub const ANNOTATION_READY: &str = "sim.driftwood.sh/ready";

fn annotated(pod: &Pod, key: &str, value: &str) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .is_some_and(|v| v == value)
}

/// The status a started pod gets (Ready, unless annotated [`ANNOTATION_READY`] `"false"`).
pub fn running_status(pod: &Pod, node: &Node, now: Timestamp) -> Value {
    let ready = if annotated(pod, ANNOTATION_READY, "false") {
        "False"
    } else {
        "True"
    };
    let now = now.to_string();
    let identity = pod
        .metadata
        .uid
        .clone()
        .unwrap_or_else(|| pod.metadata.name.clone().unwrap_or_default());
    let host_ip = node_ip(node);
    let ip = pod_ip(&host_ip, &identity);
    let condition = |type_: &str| json!({"type": type_, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    let containers: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            let image = c.image.clone().unwrap_or_default();
            json!({
                "name": c.name,
                "image": image,
                "imageID": format!("{image}@sha256:{:016x}{:016x}", fnv64(&image), fnv64(&format!("digest/{image}"))),
                "containerID": format!("containerd://{:016x}{:016x}", fnv64(&format!("{identity}/{}", c.name)), fnv64(&c.name)),
                "ready": ready == "True",
                "started": true,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
                "lastState": {},
            })
        })
        .collect();
    json!({
        "phase": "Running",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
        "conditions": [
            condition("PodReadyToStartContainers"),
            condition("Initialized"),
            json!({"type": "Ready", "status": ready, "lastProbeTime": null, "lastTransitionTime": now}),
            json!({"type": "ContainersReady", "status": ready, "lastProbeTime": null, "lastTransitionTime": now}),
            condition("PodScheduled"),
        ],
        "containerStatuses": containers,
    })
}

/// How many restarts a crash-looping pod shows: past any health gate's allowance.
pub const CRASH_LOOP_RESTARTS: i32 = 5;

/// The status of a pod whose containers crash on start ([`NodeFault::CrashLoopPods`]): Running,
/// not Ready, each container waiting in `CrashLoopBackOff` after [`CRASH_LOOP_RESTARTS`]
/// restarts (the kubelet's back-off has reached minutes by then).
pub fn crash_looping_status(pod: &Pod, node: &Node, now: Timestamp) -> Value {
    let mut status = running_status(pod, node, now);
    for condition in ["Ready", "ContainersReady"] {
        if let Some(c) = status
            .pointer_mut("/conditions")
            .and_then(Value::as_array_mut)
            .and_then(|cs| cs.iter_mut().find(|c| c["type"] == condition))
        {
            c["status"] = json!("False");
            c["reason"] = json!("ContainersNotReady");
        }
    }
    if let Some(containers) = status
        .pointer_mut("/containerStatuses")
        .and_then(Value::as_array_mut)
    {
        for c in containers {
            c["ready"] = json!(false);
            c["started"] = json!(false);
            c["restartCount"] = json!(CRASH_LOOP_RESTARTS);
            c["state"] = json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container"}});
            c["lastState"] = json!({"terminated": {"exitCode": 139, "reason": "Error", "finishedAt": now.to_string()}});
        }
    }
    status
}

fn is_aws_provider_id(provider_id: &str) -> bool {
    provider_id.starts_with("aws:///")
}

fn pod_key(pod: &Pod) -> (String, String) {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// Decide what the kubelets do at `now` (every kubelet healthy).
pub fn plan<N: Borrow<Node>, P: Borrow<Pod>>(
    machines: &[(Arc<Machine>, Arc<MachineFacts>)],
    nodes: &[N],
    pods: &[P],
    now: Timestamp,
    timings: &KubeletTimings,
    default_kubernetes_version: &str,
) -> KubeletPlan {
    plan_with_faults(
        machines,
        nodes,
        pods,
        now,
        timings,
        default_kubernetes_version,
        &BTreeMap::new(),
    )
}

/// Decide what the kubelets do at `now`, the kubelets of `faults` (by provider ID)
/// misbehaving as said there.
pub fn plan_with_faults<N: Borrow<Node>, P: Borrow<Pod>>(
    machines: &[(Arc<Machine>, Arc<MachineFacts>)],
    nodes: &[N],
    pods: &[P],
    now: Timestamp,
    timings: &KubeletTimings,
    default_kubernetes_version: &str,
    faults: &BTreeMap<String, NodeFault>,
) -> KubeletPlan {
    let nodes: Vec<Arc<Node>> = nodes.iter().map(|n| Arc::new(n.borrow().clone())).collect();
    let (mut out, states) = plan_nodes(
        machines,
        &nodes,
        now,
        timings,
        default_kubernetes_version,
        faults,
    );
    let mut sorted: Vec<&Pod> = pods.iter().map(Borrow::borrow).collect();
    sorted.sort_by(|a, b| {
        (a.metadata.namespace.as_deref(), a.metadata.name.as_deref())
            .cmp(&(b.metadata.namespace.as_deref(), b.metadata.name.as_deref()))
    });
    for pod in sorted {
        let step = plan_pod(pod, &states, now, timings);
        out.actions.extend(step.action);
        if let Some(due) = step.due {
            out.due_at(due);
        }
    }
    out
}

/// The kubelets' view of the registered Nodes, as the pods bound to them need it.
#[derive(Debug, Default)]
pub struct NodeStates {
    by_name: HashMap<String, NodeState>,
}

impl NodeStates {
    /// The Nodes known.
    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.by_name.keys()
    }

    /// Record how the Node `name` stands (None: it is gone).
    pub fn set(&mut self, name: &str, state: Option<NodeState>) {
        match state {
            Some(state) => {
                self.by_name.insert(name.to_string(), state);
            }
            None => {
                self.by_name.remove(name);
            }
        }
    }
}

/// How one registered Node stands for the pods on it.
#[derive(Debug, Clone)]
pub struct NodeState {
    node: Arc<Node>,
    /// Since when its pods run: set when the Node is Ready and its kubelet posts status.
    ready_since: Option<Timestamp>,
    /// Its kubelet crash-loops every pod (a fault).
    crash_loops: bool,
}

/// What the kubelet of one Node does with it now.
#[derive(Debug, Clone)]
pub struct NodeStep {
    /// Mark it Ready or NotReady, or delete it.
    pub actions: Vec<KubeletAction>,
    /// When it next needs a look (its Ready delay not over yet).
    pub due: Option<Timestamp>,
    /// How it stands for its pods.
    pub state: NodeState,
}

/// Decide what the kubelet of `node` does with it at `now`: `running(provider ID)` says whether
/// a machine runs, `faults` how kubelets misbehave. Pure.
pub fn plan_node(
    node: Arc<Node>,
    running: &dyn Fn(&str) -> bool,
    faults: &BTreeMap<String, NodeFault>,
    now: Timestamp,
    timings: &KubeletTimings,
) -> NodeStep {
    let name = node.metadata.name.clone().unwrap_or_default();
    let provider_id = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default();
    let fault = faults.get(provider_id);
    let crash_loops = fault == Some(&NodeFault::CrashLoopPods);
    let ready = node_ready(&node);
    let is_ready = ready.as_ref().is_some_and(|(s, _)| s == "True");
    let gone = is_aws_provider_id(provider_id) && !running(provider_id);
    let mut actions = Vec::new();
    let mut due = None;
    let mut ready_since = None;
    if gone {
        if is_ready {
            actions.push(KubeletAction::MarkNodeNotReady { node: name.clone() });
        }
        if node.metadata.deletion_timestamp.is_none() {
            actions.push(KubeletAction::DeleteNode { node: name });
        }
    } else if fault == Some(&NodeFault::NotReady) {
        if is_ready {
            actions.push(KubeletAction::MarkNodeNotReady { node: name });
        }
    } else if is_ready {
        ready_since = Some(ready.and_then(|(_, t)| t).unwrap_or(Timestamp::UNIX_EPOCH));
    } else if fault != Some(&NodeFault::NeverReady) && running(provider_id) {
        let created = node
            .metadata
            .creation_timestamp
            .as_ref()
            .map(to_timestamp)
            .unwrap_or(now);
        let ready_at = plus(created, timings.node_ready_delay);
        if ready_at <= now {
            actions.push(KubeletAction::MarkNodeReady { node: name });
        } else {
            due = Some(ready_at);
        }
    }
    NodeStep {
        actions,
        due,
        state: NodeState {
            node,
            ready_since,
            crash_loops,
        },
    }
}

/// The Nodes to register at `now`: one per running machine whose provider ID no Node has
/// (`registered`) and whose name no Node takes (`named`), unless a fault delays or prevents it.
pub fn plan_registrations(
    machines: &[(Arc<Machine>, Arc<MachineFacts>)],
    registered: &dyn Fn(&str) -> bool,
    named: &dyn Fn(&str) -> bool,
    now: Timestamp,
    default_kubernetes_version: &str,
    faults: &BTreeMap<String, NodeFault>,
) -> KubeletPlan {
    let mut out = KubeletPlan::default();
    for (machine, facts) in machines {
        match faults.get(&machine.provider_id) {
            Some(NodeFault::RegisterAfter(at)) if now < *at => {
                out.due_at(*at);
                continue;
            }
            Some(NodeFault::NeverRegisters) => continue,
            _ => {}
        }
        if !registered(&machine.provider_id) {
            let node = node_for_machine(machine, facts, default_kubernetes_version, now);
            let name = node
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !named(name) {
                out.actions.push(KubeletAction::RegisterNode(node));
            }
        }
    }
    out
}

/// Decide what the kubelets do at `now` with every Node (register, mark Ready or NotReady,
/// delete; registrations first, then by Node name), and say how each stands for its pods.
pub fn plan_nodes(
    machines: &[(Arc<Machine>, Arc<MachineFacts>)],
    nodes: &[Arc<Node>],
    now: Timestamp,
    timings: &KubeletTimings,
    default_kubernetes_version: &str,
    faults: &BTreeMap<String, NodeFault>,
) -> (KubeletPlan, NodeStates) {
    let running: HashSet<&str> = machines
        .iter()
        .map(|(m, _)| m.provider_id.as_str())
        .collect();
    let registered: HashSet<&str> = nodes
        .iter()
        .filter_map(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()))
        .collect();
    let mut named: Vec<&Arc<Node>> = nodes.iter().filter(|n| n.metadata.name.is_some()).collect();
    named.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let names: HashSet<&str> = named
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let mut out = plan_registrations(
        machines,
        &|id| registered.contains(id),
        &|name| names.contains(name),
        now,
        default_kubernetes_version,
        faults,
    );
    let mut states = NodeStates::default();
    for node in named {
        let step = plan_node(
            Arc::clone(node),
            &|id| running.contains(id),
            faults,
            now,
            timings,
        );
        out.actions.extend(step.actions);
        if let Some(due) = step.due {
            out.due_at(due);
        }
        let name = node.metadata.name.as_deref().unwrap_or_default();
        states.set(name, Some(step.state));
    }
    (out, states)
}

/// What the kubelets do about one pod now, and when they next have something to do for it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodStep {
    /// The action due now.
    pub action: Option<KubeletAction>,
    /// When the pod next needs a look (a start or removal not due yet).
    pub due: Option<Timestamp>,
}

/// Decide what the kubelet of `pod`'s node does about it at `now`. Pure; depends on the pod,
/// its node's state and the time only.
pub fn plan_pod(
    pod: &Pod,
    states: &NodeStates,
    now: Timestamp,
    timings: &KubeletTimings,
) -> PodStep {
    let Some(node_name) = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
    else {
        return PodStep::default();
    };
    let act = |action: KubeletAction| PodStep {
        action: Some(action),
        due: None,
    };
    let wait = |due: Timestamp| PodStep {
        action: None,
        due: Some(due),
    };
    let state = states.by_name.get(node_name);
    if let Some(deleted_at) = pod.metadata.deletion_timestamp.as_ref().map(to_timestamp) {
        let grace = pod
            .metadata
            .deletion_grace_period_seconds
            .unwrap_or(0)
            .max(0);
        let requested = deleted_at
            .checked_sub(SignedDuration::from_secs(grace))
            .unwrap_or(deleted_at);
        let grace = Duration::from_secs(grace.unsigned_abs());
        // A pod that ignores SIGTERM is killed only when its whole grace period is over.
        let keep = if annotated(pod, ANNOTATION_TERMINATION, "full-grace") {
            grace
        } else {
            grace.min(timings.pod_termination_cap)
        };
        let due = plus(requested, keep);
        if state.is_some() && annotated(pod, ANNOTATION_TERMINATION, "never") {
            return PodStep::default();
        }
        if state.is_none() || due <= now {
            let (namespace, name) = pod_key(pod);
            return act(KubeletAction::RemovePod { namespace, name });
        }
        return wait(due);
    }
    let Some(state) = state else {
        let (namespace, name) = pod_key(pod);
        return act(KubeletAction::CollectOrphan {
            namespace,
            name,
            node: node_name.to_string(),
        });
    };
    if pod_is_finished(pod) {
        return PodStep::default();
    }
    match state.ready_since {
        Some(since) => {
            if pod_is_running(pod)
                && (pod_ready(pod)
                    || annotated(pod, ANNOTATION_READY, "false")
                    || state.crash_loops)
            {
                return PodStep::default();
            }
            let bound = pod_condition(pod, "PodScheduled")
                .filter(|c| c.status == "True")
                .and_then(|c| c.last_transition_time.as_ref())
                .or(pod.metadata.creation_timestamp.as_ref())
                .map(to_timestamp)
                .unwrap_or(now);
            let due = plus(bound.max(since), timings.pod_start_delay);
            if due > now {
                return wait(due);
            }
            let status = if state.crash_loops {
                crash_looping_status(pod, &state.node, now)
            } else {
                running_status(pod, &state.node, now)
            };
            let (namespace, name) = pod_key(pod);
            act(KubeletAction::StartPod {
                namespace,
                name,
                status,
            })
        }
        None if pod_ready(pod) => {
            let (namespace, name) = pod_key(pod);
            act(KubeletAction::MarkPodNotReady { namespace, name })
        }
        None => PodStep::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::node_template::node_resources_from_labels;

    const NO_NODES: &[Node] = &[];
    const NO_PODS: &[Pod] = &[];

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_724_112_000 + seconds).unwrap()
    }

    fn machine(id: &str) -> (Arc<Machine>, Arc<MachineFacts>) {
        let machine = Machine {
            instance_id: id.to_string(),
            provider_id: format!("aws:///us-west-2a/{id}"),
            instance_type: "m5.large".to_string(),
            zone: "us-west-2a".to_string(),
            capacity_type: "on-demand".to_string(),
            image_id: "ami-1".to_string(),
            kubernetes_version: Some("1.29".to_string()),
            launch_time: at(0),
            private_dns_name: format!("ip-{id}.us-west-2.compute.internal"),
            private_ip: "10.0.1.5".to_string(),
            labels: BTreeMap::new(),
            tags: BTreeMap::new(),
        };
        let facts = MachineFacts {
            resources: node_resources_from_labels(&BTreeMap::new()),
            image_name: "amazon-eks-node-1.29-v20240817".to_string(),
        };
        (Arc::new(machine), Arc::new(facts))
    }

    fn registered(id: &str, created: i64, ready_since: Option<i64>) -> Node {
        let (m, facts) = machine(id);
        let mut node = node_for_machine(&m, &facts, "1.29", at(created));
        node["metadata"]["creationTimestamp"] = json!(at(created).to_string());
        if let Some(since) = ready_since {
            node["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "lastTransitionTime": at(since).to_string()}]);
        }
        serde_json::from_value(node).unwrap()
    }

    fn pod(name: &str, node: &str, bound_at: i64) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "creationTimestamp": at(bound_at).to_string()},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause:3.9"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at(bound_at).to_string()}]}
        }))
        .unwrap()
    }

    fn timings() -> KubeletTimings {
        KubeletTimings::default()
    }

    #[test]
    fn a_running_machine_without_a_node_registers_one() {
        let plan = plan(
            &[machine("i-1")],
            NO_NODES,
            NO_PODS,
            at(0),
            &timings(),
            "1.29",
        );
        assert!(
            matches!(&plan.actions[..], [KubeletAction::RegisterNode(n)] if n["metadata"]["name"] == "ip-i-1.us-west-2.compute.internal")
        );
        let again = super::plan(
            &[machine("i-1")],
            &[registered("i-1", 0, None)],
            NO_PODS,
            at(1),
            &timings(),
            "1.29",
        );
        assert!(again.actions.is_empty());
        assert_eq!(
            again.next_due,
            Some(at(5)),
            "Ready is due five seconds after registration"
        );
    }

    fn faulty(fault: NodeFault) -> BTreeMap<String, NodeFault> {
        BTreeMap::from([("aws:///us-west-2a/i-1".to_string(), fault)])
    }

    #[test]
    fn a_kubelet_that_never_registers_or_registers_late() {
        let plan = |faults: &BTreeMap<String, NodeFault>, now: i64| {
            plan_with_faults(
                &[machine("i-1")],
                NO_NODES,
                NO_PODS,
                at(now),
                &timings(),
                "1.29",
                faults,
            )
        };
        let never = plan(&faults_never_registers(), 3600);
        assert!(never.actions.is_empty(), "{:?}", never.actions);
        let late = faulty(NodeFault::RegisterAfter(at(60)));
        let early = plan(&late, 10);
        assert!(early.actions.is_empty());
        assert_eq!(early.next_due, Some(at(60)));
        assert!(matches!(
            &plan(&late, 60).actions[..],
            [KubeletAction::RegisterNode(_)]
        ));
    }

    fn faults_never_registers() -> BTreeMap<String, NodeFault> {
        faulty(NodeFault::NeverRegisters)
    }

    #[test]
    fn a_node_that_never_becomes_ready_and_one_that_stops_posting_status() {
        let fresh = [registered("i-1", 0, None)];
        let never = plan_with_faults(
            &[machine("i-1")],
            &fresh,
            NO_PODS,
            at(600),
            &timings(),
            "1.29",
            &faulty(NodeFault::NeverReady),
        );
        assert!(never.actions.is_empty(), "{:?}", never.actions);
        let ready = [registered("i-1", 0, Some(5))];
        let pods = [pod("p", "ip-i-1.us-west-2.compute.internal", 0)];
        let mut running = pods[0].clone();
        running.status = serde_json::from_value(running_status(&pods[0], &ready[0], at(7))).ok();
        let stopped = plan_with_faults(
            &[machine("i-1")],
            &ready,
            &[running],
            at(60),
            &timings(),
            "1.29",
            &faulty(NodeFault::NotReady),
        );
        assert!(stopped.actions.contains(&KubeletAction::MarkNodeNotReady {
            node: "ip-i-1.us-west-2.compute.internal".into()
        }));
        assert!(stopped.actions.contains(&KubeletAction::MarkPodNotReady {
            namespace: "default".into(),
            name: "p".into()
        }));
    }

    #[test]
    fn pods_on_a_crash_looping_node_start_unready_restarting_and_stay_so() {
        let ready = [registered("i-1", 0, Some(5))];
        let pods = [pod("p", "ip-i-1.us-west-2.compute.internal", 0)];
        let plan = |pods: &[Pod]| {
            plan_with_faults(
                &[machine("i-1")],
                &ready,
                pods,
                at(60),
                &timings(),
                "1.29",
                &faulty(NodeFault::CrashLoopPods),
            )
        };
        let started = plan(&pods);
        let [KubeletAction::StartPod { status, .. }] = &started.actions[..] else {
            panic!("one pod started: {:?}", started.actions);
        };
        assert_eq!(status["phase"], "Running");
        let ready_condition = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready_condition["status"], "False");
        let container = &status["containerStatuses"][0];
        assert_eq!(container["restartCount"], CRASH_LOOP_RESTARTS);
        assert_eq!(container["state"]["waiting"]["reason"], "CrashLoopBackOff");
        // Started once: the kubelet does not start it again every pass.
        let mut running = pods[0].clone();
        running.status = serde_json::from_value(status.clone()).ok();
        assert!(plan(&[running]).actions.is_empty());
    }

    #[test]
    fn readiness_taints_come_and_go() {
        let now = at(3);
        let tainted = with_unreachable_taint(&[], now);
        assert_eq!(tainted.len(), 1);
        assert_eq!(tainted[0].key, TAINT_NODE_UNREACHABLE);
        assert_eq!(with_unreachable_taint(&tainted, now), tainted, "added once");
        let mut all = tainted.clone();
        all.push(Taint {
            key: "keep".into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        });
        all.push(Taint {
            key: TAINT_NODE_NOT_READY.into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        });
        let kept = without_readiness_taints(&all);
        assert_eq!(
            kept.iter().map(|t| t.key.as_str()).collect::<Vec<_>>(),
            vec!["keep"]
        );
    }

    #[test]
    fn nodes_become_ready_after_the_delay() {
        let nodes = [registered("i-1", 0, None)];
        let plan = plan(
            &[machine("i-1")],
            &nodes,
            NO_PODS,
            at(5),
            &timings(),
            "1.29",
        );
        assert_eq!(
            plan.actions,
            vec![KubeletAction::MarkNodeReady {
                node: "ip-i-1.us-west-2.compute.internal".to_string()
            }]
        );
    }

    #[test]
    fn bound_pods_start_after_the_delay_on_ready_nodes_only() {
        let name = "ip-i-1.us-west-2.compute.internal";
        let early = plan(
            &[machine("i-1")],
            &[registered("i-1", 0, Some(5))],
            &[pod("p", name, 6)],
            at(7),
            &timings(),
            "1.29",
        );
        assert!(early.actions.is_empty());
        assert_eq!(early.next_due, Some(at(8)));
        let due = plan(
            &[machine("i-1")],
            &[registered("i-1", 0, Some(5))],
            &[pod("p", name, 6)],
            at(8),
            &timings(),
            "1.29",
        );
        let [KubeletAction::StartPod { status, .. }] = &due.actions[..] else {
            panic!("{:?}", due.actions)
        };
        assert_eq!(status["phase"], "Running");
        assert_eq!(status["containerStatuses"][0]["ready"], true);
        let not_ready = plan(
            &[machine("i-1")],
            &[registered("i-1", 0, None)],
            &[pod("p", name, 1)],
            at(4),
            &timings(),
            "1.29",
        );
        assert!(
            not_ready
                .actions
                .iter()
                .all(|a| !matches!(a, KubeletAction::StartPod { .. }))
        );
    }

    #[test]
    fn terminating_pods_go_after_the_shorter_of_grace_and_cap() {
        let name = "ip-i-1.us-west-2.compute.internal";
        let mut terminating = pod("p", name, 0);
        // Deleted at 10 s with a 30 s grace period: deletionTimestamp is the deadline, 40 s.
        terminating.metadata.deletion_timestamp =
            serde_json::from_value(json!(at(40).to_string())).unwrap();
        terminating.metadata.deletion_grace_period_seconds = Some(30);
        let nodes = [registered("i-1", 0, Some(5))];
        let waiting = plan(
            &[machine("i-1")],
            &nodes,
            std::slice::from_ref(&terminating),
            at(11),
            &timings(),
            "1.29",
        );
        assert!(waiting.actions.is_empty());
        assert_eq!(waiting.next_due, Some(at(12)));
        let done = plan(
            &[machine("i-1")],
            &nodes,
            &[terminating],
            at(12),
            &timings(),
            "1.29",
        );
        assert_eq!(
            done.actions,
            vec![KubeletAction::RemovePod {
                namespace: "default".into(),
                name: "p".into()
            }]
        );
    }

    #[test]
    fn a_pod_that_ignores_sigterm_takes_its_whole_grace_period() {
        let name = "ip-i-1.us-west-2.compute.internal";
        let mut slow = pod("p", name, 0);
        slow.metadata.deletion_timestamp =
            serde_json::from_value(json!(at(40).to_string())).unwrap();
        slow.metadata.deletion_grace_period_seconds = Some(30);
        slow.metadata.annotations = Some(BTreeMap::from([(
            ANNOTATION_TERMINATION.to_string(),
            "full-grace".to_string(),
        )]));
        let nodes = [registered("i-1", 0, Some(5))];
        let run = |now| {
            plan(
                &[machine("i-1")],
                &nodes,
                std::slice::from_ref(&slow),
                at(now),
                &timings(),
                "1.29",
            )
        };
        let waiting = run(39);
        assert!(waiting.actions.is_empty());
        assert_eq!(waiting.next_due, Some(at(40)));
        assert_eq!(run(40).actions.len(), 1);
    }

    #[test]
    fn a_gone_machine_takes_its_node_and_orphans_its_pods() {
        let name = "ip-i-1.us-west-2.compute.internal";
        let nodes = [registered("i-1", 0, Some(5))];
        let mut ready = pod("p", name, 6);
        ready.status = serde_json::from_value(
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
        )
        .unwrap();
        let plan = plan(&[], &nodes, &[ready], at(20), &timings(), "1.29");
        assert_eq!(
            plan.actions,
            vec![
                KubeletAction::MarkNodeNotReady {
                    node: name.to_string()
                },
                KubeletAction::DeleteNode {
                    node: name.to_string()
                },
                KubeletAction::MarkPodNotReady {
                    namespace: "default".into(),
                    name: "p".into()
                },
            ]
        );
        let orphan = super::plan(
            &[],
            NO_NODES,
            &[pod("p", name, 6)],
            at(20),
            &timings(),
            "1.29",
        );
        assert_eq!(
            orphan.actions,
            vec![KubeletAction::CollectOrphan {
                namespace: "default".into(),
                name: "p".into(),
                node: name.to_string()
            }]
        );
        let mut held = registered("i-1", 0, None);
        held.metadata.deletion_timestamp =
            serde_json::from_value(json!(at(15).to_string())).unwrap();
        let held_plan = super::plan(&[], &[held], NO_PODS, at(20), &timings(), "1.29");
        assert!(
            held_plan.actions.is_empty(),
            "a node kept by finalizers is not deleted again: {:?}",
            held_plan.actions
        );
    }

    fn node_named(name: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
    }

    fn claim(name: &str, volume: &str) -> k8s_openapi::api::core::v1::PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"volumeName": volume}
        }))
        .unwrap()
    }

    fn with_claim(mut pod: Pod, claim: &str) -> Pod {
        pod.spec.as_mut().unwrap().volumes = Some(vec![
            serde_json::from_value(
                json!({"name": "data", "persistentVolumeClaim": {"claimName": claim}}),
            )
            .unwrap(),
        ]);
        pod
    }

    fn attachment(
        volume: &str,
        node: &str,
        attached: bool,
    ) -> k8s_openapi::api::storage::v1::VolumeAttachment {
        serde_json::from_value(json!({
            "metadata": {"name": attachment_name(volume, node)},
            "spec": {"attacher": ATTACHER, "nodeName": node, "source": {"persistentVolumeName": volume}},
            "status": {"attached": attached}
        }))
        .unwrap()
    }

    /// A pod's volume is attached to its node before it starts; a ReadWriteOnce volume still
    /// attached elsewhere waits for the detach (no multi-attach); a volume no pod on its node
    /// uses is detached after the delay.
    #[test]
    fn volumes_attach_before_the_pod_starts_and_never_to_two_nodes() {
        let nodes = [node_named("a"), node_named("b")];
        let claims = [claim("data-db-0", "pv-1")];
        let on_b = [with_claim(pod("db-0", "b", 0), "data-db-0")];
        let fresh = plan_volumes::<k8s_openapi::api::storage::v1::VolumeAttachment, _, _, _>(
            &[],
            &nodes,
            &on_b,
            &claims,
            at(10),
            &timings(),
        );
        assert_eq!(
            fresh.plan.actions,
            vec![KubeletAction::AttachVolume {
                name: attachment_name("pv-1", "b"),
                volume: "pv-1".into(),
                node: "b".into()
            }]
        );
        assert!(fresh.waiting.contains("default/db-0"));
        // Still attached to node a, where no pod uses it any more: b waits, a detaches later.
        let on_a = [attachment("pv-1", "a", true)];
        let moving = plan_volumes(&on_a, &nodes, &on_b, &claims, at(10), &timings());
        assert!(moving.waiting.contains("default/db-0"));
        assert!(
            moving
                .plan
                .actions
                .iter()
                .all(|a| !matches!(a, KubeletAction::AttachVolume { .. })),
            "{:?}",
            moving.plan.actions
        );
        assert!(matches!(
            moving.plan.actions[0],
            KubeletAction::MarkVolumeDetaching { .. }
        ));
        let mut marked = attachment("pv-1", "a", true);
        marked.metadata.annotations =
            Some([(DETACHING_SINCE.to_string(), at(10).to_string())].into());
        let later = plan_volumes(
            &[marked.clone()],
            &nodes,
            &on_b,
            &claims,
            at(15),
            &timings(),
        );
        assert!(later.plan.actions.is_empty());
        assert_eq!(later.plan.next_due, Some(at(20)));
        let due = plan_volumes(&[marked], &nodes, &on_b, &claims, at(20), &timings());
        assert_eq!(
            due.plan.actions,
            vec![KubeletAction::DetachVolume {
                name: attachment_name("pv-1", "a")
            }]
        );
        // Attached on b: the pod may start.
        let ready = plan_volumes(
            &[attachment("pv-1", "b", true)],
            &nodes,
            &on_b,
            &claims,
            at(30),
            &timings(),
        );
        assert!(ready.waiting.is_empty() && ready.plan.actions.is_empty());
    }
}
