//! The kubelets' decisions, as a pure function of the running machines, the Nodes and Pods the
//! API server holds, and the time: which Nodes to register, mark Ready/NotReady or delete, and
//! which Pods to start, mark not ready, remove after termination or collect as orphans.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use driftwood_sim_aws::Machine;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, Pod};
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
}

impl Default for KubeletTimings {
    fn default() -> Self {
        Self {
            node_ready_delay: Duration::from_secs(5),
            pod_start_delay: Duration::from_secs(2),
            pod_termination_cap: Duration::from_secs(2),
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
        }
    }
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

fn plus(at: Timestamp, by: Duration) -> Timestamp {
    let by = SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX);
    at.checked_add(by).unwrap_or(Timestamp::MAX)
}

fn to_timestamp(time: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Option<Timestamp> {
    serde_json::to_value(time)
        .ok()
        .and_then(|v| v.as_str().and_then(|s| s.parse().ok()))
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
                c.last_transition_time.as_ref().and_then(to_timestamp),
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
        ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
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

/// The status a started pod gets.
pub fn running_status(pod: &Pod, node: &Node, now: Timestamp) -> Value {
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
                "ready": true,
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
            condition("Ready"),
            condition("ContainersReady"),
            condition("PodScheduled"),
        ],
        "containerStatuses": containers,
    })
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

/// Decide what the kubelets do at `now`.
pub fn plan(
    machines: &[(Machine, MachineFacts)],
    nodes: &[Node],
    pods: &[Pod],
    now: Timestamp,
    timings: &KubeletTimings,
    default_kubernetes_version: &str,
) -> KubeletPlan {
    let mut out = KubeletPlan::default();
    let running: BTreeSet<&str> = machines.iter().map(|(m, _)| m.provider_id.as_str()).collect();
    let by_name: BTreeMap<&str, &Node> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref().map(|name| (name, n)))
        .collect();
    let registered: BTreeSet<&str> = nodes
        .iter()
        .filter_map(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()))
        .collect();

    for (machine, facts) in machines {
        if !registered.contains(machine.provider_id.as_str()) {
            let node = node_for_machine(machine, facts, default_kubernetes_version, now);
            let name = node.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            if !by_name.contains_key(name) {
                out.actions.push(KubeletAction::RegisterNode(node));
            }
        }
    }

    // Per node: is it one whose pods run (Ready) and is it gone?
    let mut ready_since: BTreeMap<&str, Timestamp> = BTreeMap::new();
    for (name, node) in &by_name {
        let provider_id = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        let ready = node_ready(node);
        let is_ready = ready.as_ref().is_some_and(|(s, _)| s == "True");
        let gone = is_aws_provider_id(provider_id) && !running.contains(provider_id);
        if gone {
            if is_ready {
                out.actions.push(KubeletAction::MarkNodeNotReady {
                    node: (*name).to_string(),
                });
            }
            if node.metadata.deletion_timestamp.is_none() {
                out.actions.push(KubeletAction::DeleteNode {
                    node: (*name).to_string(),
                });
            }
            continue;
        }
        if is_ready {
            let since = ready
                .and_then(|(_, t)| t)
                .unwrap_or(Timestamp::UNIX_EPOCH);
            ready_since.insert(name, since);
        } else if running.contains(provider_id) {
            let created = node
                .metadata
                .creation_timestamp
                .as_ref()
                .and_then(to_timestamp)
                .unwrap_or(now);
            let due = plus(created, timings.node_ready_delay);
            if due <= now {
                out.actions.push(KubeletAction::MarkNodeReady {
                    node: (*name).to_string(),
                });
            } else {
                out.due_at(due);
            }
        }
    }

    let mut sorted: Vec<&Pod> = pods.iter().collect();
    sorted.sort_by_key(|p| pod_key(p));
    for pod in sorted {
        let (namespace, name) = pod_key(pod);
        let Some(node_name) = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
        else {
            continue;
        };
        let node = by_name.get(node_name);
        if let Some(deleted_at) = pod.metadata.deletion_timestamp.as_ref().and_then(to_timestamp) {
            let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0).max(0);
            let requested = deleted_at
                .checked_sub(SignedDuration::from_secs(grace))
                .unwrap_or(deleted_at);
            let keep = Duration::from_secs(grace.unsigned_abs()).min(timings.pod_termination_cap);
            let due = plus(requested, keep);
            if node.is_none() || due <= now {
                out.actions.push(KubeletAction::RemovePod { namespace, name });
            } else {
                out.due_at(due);
            }
            continue;
        }
        let Some(node) = node else {
            out.actions.push(KubeletAction::CollectOrphan {
                namespace,
                name,
                node: node_name.to_string(),
            });
            continue;
        };
        if pod_is_finished(pod) {
            continue;
        }
        match ready_since.get(node_name) {
            Some(since) => {
                if pod_is_running(pod) && pod_ready(pod) {
                    continue;
                }
                let bound = pod_condition(pod, "PodScheduled")
                    .filter(|c| c.status == "True")
                    .and_then(|c| c.last_transition_time.as_ref())
                    .and_then(to_timestamp)
                    .or_else(|| pod.metadata.creation_timestamp.as_ref().and_then(to_timestamp))
                    .unwrap_or(now);
                let due = plus(bound.max(*since), timings.pod_start_delay);
                if due <= now {
                    out.actions.push(KubeletAction::StartPod {
                        namespace,
                        name,
                        status: running_status(pod, node, now),
                    });
                } else {
                    out.due_at(due);
                }
            }
            None => {
                if pod_ready(pod) {
                    out.actions.push(KubeletAction::MarkPodNotReady { namespace, name });
                }
            }
        }
    }
    out
}
