//! The DaemonSet controller's decisions, as a pure function of DaemonSets, Nodes and Pods:
//! which daemon pods to create (pinned with `spec.nodeName`), which to delete, and the status.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::Arc;

use driftwood_scheduling::taints::first_untolerated;
use driftwood_scheduling::{SimPod, Taint, TaintEffect, Toleration};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::planner::{DaemonSetPlanner, Observed};
use crate::workloads::hash::template_hash;
use crate::workloads::pod_is_ready;

/// The label carrying the template revision a daemon pod was made from.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// One thing the controller does.
#[derive(Debug, Clone, PartialEq)]
pub enum DaemonSetAction {
    /// Create this pod in `namespace`.
    CreatePod {
        /// Namespace.
        namespace: String,
        /// The pod manifest.
        pod: Value,
    },
    /// Delete a daemon pod (graceful).
    DeletePod {
        /// Namespace.
        namespace: String,
        /// Pod name.
        name: String,
    },
    /// Replace the DaemonSet's status.
    UpdateStatus {
        /// Namespace.
        namespace: String,
        /// DaemonSet name.
        name: String,
        /// The new status.
        status: Value,
    },
}

/// Tolerations the DaemonSet controller adds to every daemon pod.
fn automatic_tolerations() -> Vec<Value> {
    let exists =
        |key: &str, effect: &str| json!({"key": key, "operator": "Exists", "effect": effect});
    vec![
        exists("node.kubernetes.io/not-ready", "NoExecute"),
        exists("node.kubernetes.io/unreachable", "NoExecute"),
        exists("node.kubernetes.io/disk-pressure", "NoSchedule"),
        exists("node.kubernetes.io/memory-pressure", "NoSchedule"),
        exists("node.kubernetes.io/pid-pressure", "NoSchedule"),
        exists("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
}

/// The daemon pod for `ds` on `node` (not yet created: generateName, no uid).
pub fn daemon_pod(ds: &DaemonSet, node: &str) -> Value {
    let name = ds.metadata.name.clone().unwrap_or_default();
    let namespace = ds.metadata.namespace.clone().unwrap_or_default();
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let revision = template_hash(&template);
    let mut template = serde_json::to_value(&template).unwrap_or_else(|_| json!({}));
    let mut metadata = template
        .get_mut("metadata")
        .map(Value::take)
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let mut spec = template
        .get_mut("spec")
        .map(Value::take)
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    if let Some(meta) = metadata.as_object_mut() {
        meta.insert("generateName".into(), json!(format!("{name}-")));
        meta.insert("namespace".into(), json!(namespace));
        meta.remove("name");
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(REVISION_LABEL.into(), json!(revision));
        }
        meta.insert(
            "ownerReferences".into(),
            json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                    "uid": ds.metadata.uid.clone().unwrap_or_default(),
                    "controller": true, "blockOwnerDeletion": true}]),
        );
    }
    if let Some(spec) = spec.as_object_mut() {
        spec.insert("nodeName".into(), json!(node));
        let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
        if let Some(list) = tolerations.as_array_mut() {
            for toleration in automatic_tolerations() {
                if !list.contains(&toleration) {
                    list.push(toleration);
                }
            }
        }
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
}

/// Whether a daemon pod should be placed on / may stay on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// A new pod may be created there.
    pub schedule: bool,
    /// An existing pod may stay.
    pub keep: bool,
}

/// Decide whether the template (as `sim`, with the automatic tolerations) belongs on `node`.
pub fn placement(sim: &SimPod, node: &Node) -> Placement {
    let no_labels = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&no_labels);
    let constraints = &sim.constraints;
    let selected = constraints.node_selector.matches_labels(labels)
        && (constraints.required_terms.is_empty()
            || constraints
                .required_terms
                .iter()
                .any(|t| t.matches_labels(labels)));
    let taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|t| Taint::from_k8s(t).ok())
        .collect();
    let tolerations: &[Toleration] = &constraints.tolerations;
    let no_execute: Vec<Taint> = taints
        .iter()
        .filter(|t| t.effect == TaintEffect::NoExecute)
        .cloned()
        .collect();
    let blocking: Vec<Taint> = taints
        .iter()
        .filter(|t| t.blocks_scheduling())
        .cloned()
        .collect();
    let keep = selected && first_untolerated(&no_execute, tolerations).is_none();
    let schedule = keep
        && first_untolerated(&blocking, tolerations).is_none()
        && node.metadata.deletion_timestamp.is_none();
    Placement { schedule, keep }
}

pub(super) fn pod_name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// Decide for every DaemonSet, from every Node and daemon pod (a [`DaemonSetPlanner`] told
/// everything once).
pub fn plan<D: Borrow<DaemonSet>, N: Borrow<Node>, P: Borrow<Pod>>(
    daemon_sets: &[D],
    nodes: &[N],
    pods: &[P],
) -> Vec<DaemonSetAction> {
    let sets: Vec<Arc<DaemonSet>> = daemon_sets
        .iter()
        .map(|d| Arc::new(d.borrow().clone()))
        .collect();
    let nodes: Vec<Arc<Node>> = nodes.iter().map(|n| Arc::new(n.borrow().clone())).collect();
    let pods: Vec<Arc<Pod>> = pods.iter().map(|p| Arc::new(p.borrow().clone())).collect();
    DaemonSetPlanner::default().pass(&sets, Observed::Everything { nodes, pods })
}

/// What [`plan`] decided for one DaemonSet on one node: the actions there and what the node
/// adds to the DaemonSet's status and rollout.
#[derive(Debug, Clone, Default)]
pub(super) struct NodePlan {
    pub(super) actions: Vec<DaemonSetAction>,
    pub(super) desired: bool,
    pub(super) scheduled: bool,
    pub(super) misscheduled: bool,
    pub(super) ready: bool,
    pub(super) updated: bool,
    /// The node's pod, when it runs an older template.
    pub(super) outdated: Option<String>,
    /// A pod to create there, or its pod not ready.
    pub(super) unavailable: bool,
}

/// What one DaemonSet's pods look like, worked out when a node of it is decided.
pub(super) struct Template {
    pub(super) revision: String,
    pub(super) sim: SimPod,
}

pub(super) fn template(ds: &DaemonSet) -> Option<Template> {
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let revision = template_hash(&template);
    let sim = serde_json::from_value::<Pod>(daemon_pod(ds, ""))
        .ok()
        .and_then(|p| SimPod::from_pod(&p).ok())?;
    Some(Template { revision, sim })
}

/// The decision for DaemonSet `ds` (its pods being `template`) on `node`, whose daemon pods are
/// `here` (a ready one first, then the oldest).
pub(super) fn plan_node(
    ds: &DaemonSet,
    template: &Template,
    node: &Node,
    here: &[&Arc<Pod>],
) -> NodePlan {
    let namespace = ds.metadata.namespace.clone().unwrap_or_default();
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let place = placement(&template.sim, node);
    let mut plan = NodePlan {
        desired: place.schedule || (place.keep && !here.is_empty()),
        ..NodePlan::default()
    };
    let delete = |pod: &Pod| DaemonSetAction::DeletePod {
        namespace: namespace.clone(),
        name: pod_name(pod),
    };
    match here.split_first() {
        None if place.schedule => {
            plan.actions.push(DaemonSetAction::CreatePod {
                namespace: namespace.clone(),
                pod: daemon_pod(ds, &node_name),
            });
            plan.unavailable = true;
        }
        None => {}
        Some((first, extra)) if place.keep => {
            plan.scheduled = true;
            if pod_is_ready(first) {
                plan.ready = true;
            } else {
                plan.unavailable = true;
            }
            let current = first
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(REVISION_LABEL))
                .is_some_and(|r| *r == template.revision);
            if current {
                plan.updated = true;
            } else {
                plan.outdated = Some(pod_name(first));
            }
            plan.actions.extend(extra.iter().map(|p| delete(p)));
        }
        Some(_) => {
            plan.misscheduled = true;
            plan.actions.extend(here.iter().map(|p| delete(p)));
        }
    }
    plan
}

pub(super) fn same_status(current: &Value, wanted: &Value) -> bool {
    wanted.as_object().is_some_and(|fields| {
        fields.iter().all(|(k, v)| {
            let have = current.get(k).cloned().unwrap_or(json!(0));
            have == *v
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, zone: &str, taints: Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
            "spec": {"taints": taints}
        }))
        .unwrap()
    }

    fn daemon_set(selector: Value) -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": "agent", "namespace": "kube-system", "uid": "ds-uid", "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"}},
                                  "spec": {"nodeSelector": selector, "containers": [{"name": "a", "image": "agent:1"}]}}}
        }))
        .unwrap()
    }

    fn existing(ds: &DaemonSet, name: &str, node: &str) -> Pod {
        let mut pod = daemon_pod(ds, node);
        pod["metadata"]["name"] = json!(name);
        serde_json::from_value(pod).unwrap()
    }

    fn created_on(actions: &[DaemonSetAction]) -> Vec<String> {
        actions
            .iter()
            .filter_map(|a| match a {
                DaemonSetAction::CreatePod { pod, .. } => {
                    pod["spec"]["nodeName"].as_str().map(str::to_string)
                }
                _ => None,
            })
            .collect()
    }

    fn deleted(actions: &[DaemonSetAction]) -> Vec<String> {
        actions
            .iter()
            .filter_map(|a| match a {
                DaemonSetAction::DeletePod { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn one_pod_per_selected_node_that_tolerates() {
        let ds = daemon_set(json!({"topology.kubernetes.io/zone": "a"}));
        let nodes = [
            node("n1", "a", json!([])),
            node("n2", "b", json!([])),
            node(
                "n3",
                "a",
                json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
            ),
            node(
                "n4",
                "a",
                json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
            ),
        ];
        let actions = plan(&[ds], &nodes, &[] as &[Pod]);
        assert_eq!(created_on(&actions), vec!["n1", "n4"]);
        let DaemonSetAction::CreatePod { pod, .. } = &actions[0] else {
            panic!()
        };
        assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "DaemonSet");
        assert_eq!(pod["metadata"]["generateName"], "agent-");
        assert!(pod["metadata"]["labels"][REVISION_LABEL].is_string());
    }

    #[test]
    fn pods_that_no_longer_belong_are_deleted_and_status_counts() {
        let ds = daemon_set(json!({}));
        let nodes = [
            node("n1", "a", json!([])),
            node(
                "n2",
                "a",
                json!([{"key": "dedicated", "effect": "NoExecute"}]),
            ),
            node(
                "n3",
                "a",
                json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
            ),
        ];
        let pods = [
            {
                let mut first = existing(&ds, "keep", "n1");
                first.metadata.creation_timestamp =
                    serde_json::from_value(json!("2024-08-20T00:00:01Z")).unwrap();
                first
            },
            {
                let mut later = existing(&ds, "duplicate", "n1");
                later.metadata.creation_timestamp =
                    serde_json::from_value(json!("2024-08-20T00:00:09Z")).unwrap();
                later
            },
            existing(&ds, "evicted-by-taint", "n2"),
            existing(&ds, "stays-despite-no-schedule", "n3"),
            existing(&ds, "node-gone", "n9"),
        ];
        let actions = plan(std::slice::from_ref(&ds), &nodes, &pods);
        let mut gone = deleted(&actions);
        gone.sort();
        assert_eq!(gone, vec!["duplicate", "evicted-by-taint", "node-gone"]);
        assert!(created_on(&actions).is_empty());
        let status = actions.iter().find_map(|a| match a {
            DaemonSetAction::UpdateStatus { status, .. } => Some(status.clone()),
            _ => None,
        });
        let status = status.unwrap();
        assert_eq!(status["desiredNumberScheduled"], 2);
        assert_eq!(status["currentNumberScheduled"], 2);
        assert_eq!(status["numberMisscheduled"], 1);
        assert_eq!(status["numberReady"], 0);
    }

    #[test]
    fn template_changes_roll_one_ready_pod_at_a_time() {
        let old = daemon_set(json!({}));
        let mut new = old.clone();
        new.spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .image = Some("agent:2".to_string());
        let nodes = [node("n1", "a", json!([])), node("n2", "a", json!([]))];
        let ready = |name: &str, node: &str| {
            let mut pod = existing(&old, name, node);
            pod.status = serde_json::from_value(
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
            )
            .unwrap();
            pod
        };
        let actions = plan(
            std::slice::from_ref(&new),
            &nodes,
            &[ready("p1", "n1"), ready("p2", "n2")],
        );
        assert_eq!(deleted(&actions), vec!["p1"]);
        let unready = existing(&old, "p1", "n1");
        let actions = plan(&[new], &nodes, &[unready, ready("p2", "n2")]);
        assert!(
            deleted(&actions).is_empty(),
            "wait while a pod is unavailable"
        );
    }
}
