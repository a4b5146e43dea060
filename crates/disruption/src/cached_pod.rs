//! What driftwood keeps of a Pod ([`CachedPod`]): the few facts its controllers read, worked
//! out once when the pod's watch event arrives. What the pods of one workload have in common
//! (namespace, labels, owners, the annotations driftwood acts on, priority, grace period,
//! requests and limits) is one [`PodShape`], shared by all of them, so a pod costs its name,
//! UID, node, times and conditions — hundreds of bytes instead of the kilobytes of a typed Pod.

use driftwood_api::wellknown::{
    ANNOTATION_DO_NOT_DISRUPT, ANNOTATION_POD_DELETION_COST, TAINT_DISRUPTED_KEY,
};
use driftwood_scheduling::{PodConversionError, ResourceField, Resources, SimPod, pod_resources};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodCondition};
use k8s_openapi::jiff::Timestamp;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The annotation marking a static pod's mirror.
pub const ANNOTATION_MIRROR_POD: &str = "kubernetes.io/config.mirror";

/// A pod's owner, as its ownerReferences name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// `controller: true`.
    pub controller: bool,
}

/// What the pods of one workload share (the same template gives the same shape).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PodShape {
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub owners: Vec<Owner>,
    /// The `karpenter.sh/do-not-disrupt` annotation's value.
    pub do_not_disrupt: Option<String>,
    /// `controller.kubernetes.io/pod-deletion-cost` (0 when absent or not a number).
    pub deletion_cost: i32,
    /// A static pod's mirror: owned by its Node (ownerReference `v1` `Node`, as the kubelet
    /// sets it; Karpenter's IsOwnedByNode), or annotated `kubernetes.io/config.mirror`.
    pub mirror: bool,
    /// spec.priority (0 when unset).
    pub priority: i32,
    pub priority_class_name: Option<String>,
    /// spec.terminationGracePeriodSeconds (30 when unset, the API server's default).
    pub grace_period_seconds: i64,
    /// Whether a toleration lets it stay on a node tainted `karpenter.sh/disrupted:NoSchedule`.
    pub tolerates_disrupted: bool,
    /// Requests as the scheduler reserves them (containers, sidecars, init peak, overhead);
    /// None when a quantity does not parse.
    pub requests: Option<Resources>,
    /// Limits, likewise.
    pub limits: Option<Resources>,
    /// How many (regular) containers it has.
    pub containers: u16,
}

/// A pod's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    fn parse(phase: &str) -> Self {
        match phase {
            "Pending" => Self::Pending,
            "Running" => Self::Running,
            "Succeeded" => Self::Succeeded,
            "Failed" => Self::Failed,
            _ => Self::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::Unknown => "Unknown",
        }
    }
}

/// One of a pod's conditions: its status and when it last changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodConditionFacts {
    /// `status: "True"`.
    pub is_true: bool,
    /// `status: "False"`.
    pub is_false: bool,
    pub since: Option<Timestamp>,
}

impl PodConditionFacts {
    fn of(condition: &PodCondition) -> Self {
        Self {
            is_true: condition.status == "True",
            is_false: condition.status == "False",
            since: condition.last_transition_time.as_ref().map(|t| t.0),
        }
    }
}

/// What driftwood keeps of one Pod.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedPod {
    pub name: Box<str>,
    pub uid: Option<Box<str>>,
    pub resource_version: Option<Box<str>>,
    /// spec.nodeName (None when unbound).
    pub node_name: Option<Box<str>>,
    pub created: Option<Timestamp>,
    pub deleted: Option<Timestamp>,
    /// status.startTime.
    pub started: Option<Timestamp>,
    /// status.phase (None when the status has none yet).
    pub phase: Option<PodPhase>,
    pub ready: Option<PodConditionFacts>,
    pub scheduled: Option<PodConditionFacts>,
    /// PodScheduled is False with reason Unschedulable (kube-scheduler gave up on it).
    pub unschedulable: bool,
    /// The most restarts of any of its containers.
    pub restarts: u32,
    /// The restarts of all its containers.
    pub restart_total: u32,
    /// How many of its containers are ready (None: no container statuses reported).
    pub ready_containers: Option<u16>,
    /// The PersistentVolumeClaims its volumes use; a generic ephemeral volume's claim is
    /// `<pod>-<volume>`, as Kubernetes names it (Karpenter's GetPersistentVolumeClaim).
    pub claims: Box<[Box<str>]>,
    pub shape: Arc<PodShape>,
    /// Its scheduling facts, or why it cannot be simulated (naming the field).
    pub sim: Arc<Result<SimPod, PodConversionError>>,
}

impl CachedPod {
    /// Keeps what driftwood reads of `pod`, its shape made by `intern` (which may hand back
    /// an equal shape already held, so that the pods of one workload share one).
    pub fn new(pod: &Pod, intern: impl FnOnce(PodShape) -> Arc<PodShape>) -> Self {
        let metadata = &pod.metadata;
        let spec = pod.spec.as_ref();
        let status = pod.status.as_ref();
        let annotations = metadata.annotations.as_ref();
        let annotation = |key: &str| annotations.and_then(|a| a.get(key));
        let owners: Vec<Owner> = metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| Owner {
                api_version: o.api_version.clone(),
                kind: o.kind.clone(),
                name: o.name.clone(),
                controller: o.controller == Some(true),
            })
            .collect();
        let mirror = owners
            .iter()
            .any(|o| o.api_version == "v1" && o.kind == "Node")
            || annotation(ANNOTATION_MIRROR_POD).is_some();
        let shape = PodShape {
            namespace: metadata.namespace.clone().unwrap_or_default(),
            labels: metadata.labels.clone().unwrap_or_default(),
            owners,
            do_not_disrupt: annotation(ANNOTATION_DO_NOT_DISRUPT).cloned(),
            deletion_cost: annotation(ANNOTATION_POD_DELETION_COST)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0),
            mirror,
            priority: spec.and_then(|s| s.priority).unwrap_or(0),
            priority_class_name: spec.and_then(|s| s.priority_class_name.clone()),
            grace_period_seconds: spec
                .and_then(|s| s.termination_grace_period_seconds)
                .unwrap_or(30),
            tolerates_disrupted: tolerates_disrupted(pod),
            requests: spec.and_then(|s| pod_resources(s, ResourceField::Requests).ok()),
            limits: spec.and_then(|s| pod_resources(s, ResourceField::Limits).ok()),
            containers: spec.map_or(0, |s| u16::try_from(s.containers.len()).unwrap_or(u16::MAX)),
        };
        let statuses = status
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or(&[]);
        let restarts = statuses
            .iter()
            .map(|c| u32::try_from(c.restart_count).unwrap_or(0));
        let conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or(&[]);
        let condition = |kind: &str| conditions.iter().find(|c| c.type_ == kind);
        let scheduled = condition("PodScheduled");
        let name = metadata.name.clone().unwrap_or_default();
        let claims = spec
            .and_then(|s| s.volumes.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
                (Some(claim), _) => Some(claim.claim_name.clone().into_boxed_str()),
                (None, Some(_)) => Some(format!("{name}-{}", v.name).into_boxed_str()),
                _ => None,
            })
            .collect();
        Self {
            uid: metadata.uid.as_deref().map(Box::from),
            resource_version: metadata.resource_version.as_deref().map(Box::from),
            node_name: spec
                .and_then(|s| s.node_name.as_deref())
                .filter(|n| !n.is_empty())
                .map(Box::from),
            created: metadata.creation_timestamp.as_ref().map(|t| t.0),
            deleted: metadata.deletion_timestamp.as_ref().map(|t| t.0),
            started: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
            phase: status.and_then(|s| s.phase.as_deref()).map(PodPhase::parse),
            ready: condition("Ready").map(PodConditionFacts::of),
            scheduled: scheduled.map(PodConditionFacts::of),
            unschedulable: scheduled.is_some_and(|c| {
                c.status == "False" && c.reason.as_deref() == Some("Unschedulable")
            }),
            restarts: restarts.clone().max().unwrap_or(0),
            restart_total: restarts.fold(0, u32::saturating_add),
            ready_containers: (!statuses.is_empty()).then(|| {
                u16::try_from(statuses.iter().filter(|c| c.ready).count()).unwrap_or(u16::MAX)
            }),
            claims,
            sim: Arc::new(SimPod::from_pod(pod)),
            shape: intern(shape),
            name: name.into_boxed_str(),
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.shape.namespace, self.name)
    }

    pub fn namespace(&self) -> &str {
        &self.shape.namespace
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.shape.labels
    }

    /// The node it is bound to ("" when unbound).
    pub fn node(&self) -> &str {
        self.node_name.as_deref().unwrap_or_default()
    }

    /// The phase's name, "Pending" before the status has one (as kubectl and Karpenter show it).
    pub fn phase_name(&self) -> &'static str {
        self.phase.map_or("Pending", PodPhase::as_str)
    }

    /// Phase Succeeded or Failed.
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase, Some(PodPhase::Succeeded | PodPhase::Failed))
    }

    /// Has a deletionTimestamp.
    pub fn is_terminating(&self) -> bool {
        self.deleted.is_some()
    }

    /// Ready is True.
    pub fn is_ready(&self) -> bool {
        self.ready.is_some_and(|c| c.is_true)
    }

    /// Owned by a DaemonSet.
    pub fn is_daemonset(&self) -> bool {
        self.has_owner_kind("DaemonSet")
    }

    pub fn has_owner_kind(&self, kind: &str) -> bool {
        self.shape.owners.iter().any(|o| o.kind == kind)
    }

    /// When Ready turned True, if it is.
    pub fn ready_since(&self) -> Option<Timestamp> {
        self.ready.filter(|c| c.is_true).and_then(|c| c.since)
    }

    /// When PodScheduled turned True, if it is.
    pub fn scheduled_since(&self) -> Option<Timestamp> {
        self.scheduled.filter(|c| c.is_true).and_then(|c| c.since)
    }

    /// A reference to the Pod, for events about it.
    pub fn object_reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(self.name.to_string()),
            namespace: Some(self.shape.namespace.clone()),
            uid: self.uid.as_deref().map(str::to_string),
            resource_version: self.resource_version.as_deref().map(str::to_string),
            ..Default::default()
        }
    }
}

impl From<&Pod> for CachedPod {
    /// Keeps what driftwood reads of `pod`, with a shape of its own.
    fn from(pod: &Pod) -> Self {
        Self::new(pod, Arc::new)
    }
}

/// Whether a toleration of `pod` matches `karpenter.sh/disrupted:NoSchedule`.
fn tolerates_disrupted(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.tolerations.iter().flatten())
        .any(|t| {
            let key_ok = t
                .key
                .as_deref()
                .is_none_or(|k| k.is_empty() || k == TAINT_DISRUPTED_KEY);
            let effect_ok = t
                .effect
                .as_deref()
                .is_none_or(|e| e.is_empty() || e == "NoSchedule");
            let exists = t.operator.as_deref() == Some("Exists");
            let matches_value = exists || t.value.as_deref().unwrap_or_default().is_empty();
            key_ok && effect_ok && matches_value && (exists || t.key.is_some())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).expect("a pod")
    }

    fn time(text: &str) -> Option<Timestamp> {
        Some(text.parse().expect("a time"))
    }

    /// Every fact the controllers read survives the projection, worked out as the typed Pod
    /// gave it: identity, owners, the annotations acted on, scheduling and drain fields,
    /// conditions, restarts and claims.
    #[test]
    fn a_cached_pod_keeps_what_driftwood_reads() {
        let full = pod(json!({
            "metadata": {"name": "db-0", "namespace": "shop", "uid": "u-1", "resourceVersion": "42",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "deletionTimestamp": "2026-01-01T00:10:00Z",
                         "labels": {"app": "db"},
                         "annotations": {"karpenter.sh/do-not-disrupt": "30m",
                                         "controller.kubernetes.io/pod-deletion-cost": " -7 ",
                                         "unrelated": "x"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                              "name": "db", "uid": "s", "controller": true}]},
            "spec": {"nodeName": "n1", "priority": 100, "priorityClassName": "system-node-critical",
                     "terminationGracePeriodSeconds": 120,
                     "tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists",
                                      "effect": "NoSchedule"}],
                     "containers": [{"name": "a", "resources": {"requests": {"cpu": "250m"},
                                                                 "limits": {"memory": "1Gi"}}},
                                    {"name": "b"}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}},
                                 {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                                 {"name": "token", "projected": {"sources": []}}]},
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:05Z",
                       "conditions": [
                           {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:02Z"},
                           {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:09Z"}],
                       "containerStatuses": [
                           {"name": "a", "ready": true, "restartCount": 3, "image": "", "imageID": ""},
                           {"name": "b", "ready": false, "restartCount": 4, "image": "", "imageID": ""}]}
        }));
        let cached = CachedPod::from(&full);
        assert_eq!(cached.key(), "shop/db-0");
        assert_eq!(cached.uid.as_deref(), Some("u-1"));
        assert_eq!(cached.resource_version.as_deref(), Some("42"));
        assert_eq!(cached.node(), "n1");
        assert_eq!(cached.created, time("2026-01-01T00:00:00Z"));
        assert!(cached.is_terminating() && !cached.is_terminal());
        assert_eq!(cached.started, time("2026-01-01T00:00:05Z"));
        assert_eq!(cached.phase, Some(PodPhase::Running));
        assert_eq!(cached.scheduled_since(), time("2026-01-01T00:00:02Z"));
        assert!(!cached.is_ready() && cached.ready.is_some_and(|c| c.is_false));
        assert_eq!(cached.ready_since(), None);
        assert!(!cached.unschedulable);
        assert_eq!(
            (
                cached.restarts,
                cached.restart_total,
                cached.ready_containers
            ),
            (4, 7, Some(1))
        );
        assert_eq!(
            &*cached.claims,
            [Box::from("data-db-0"), Box::from("db-0-scratch")]
        );
        let shape = &cached.shape;
        assert_eq!(shape.labels, BTreeMap::from([("app".into(), "db".into())]));
        assert!(cached.has_owner_kind("StatefulSet") && !cached.is_daemonset());
        assert!(shape.owners[0].controller && shape.owners[0].name == "db");
        assert_eq!(shape.do_not_disrupt.as_deref(), Some("30m"));
        assert_eq!(shape.deletion_cost, -7);
        assert!(!shape.mirror);
        assert_eq!(shape.priority, 100);
        assert_eq!(
            shape.priority_class_name.as_deref(),
            Some("system-node-critical")
        );
        assert_eq!(shape.grace_period_seconds, 120);
        assert!(shape.tolerates_disrupted);
        assert_eq!(shape.containers, 2);
        let requests = shape.requests.as_ref().expect("requests");
        assert_eq!(requests.get("cpu"), 250);
        assert_eq!(
            shape.limits.as_ref().expect("limits").get("memory"),
            1024 * 1024 * 1024 * 1000
        );
        let sim = cached.sim.as_ref().as_ref().expect("converts");
        assert_eq!(sim.key, cached.key());
        assert_eq!(sim.requests.get("cpu"), 250);
        let reference = cached.object_reference();
        assert_eq!(
            (
                reference.kind.as_deref(),
                reference.namespace.as_deref(),
                reference.uid.as_deref()
            ),
            (Some("Pod"), Some("shop"), Some("u-1"))
        );
    }

    /// The defaults a bare pod gets: the API server's 30 s grace period, no phase, pending
    /// (unbound), a pod kube-scheduler gave up on is unschedulable; a static pod's mirror is
    /// known by its Node owner or its annotation.
    #[test]
    fn a_bare_pod_gets_the_defaults_and_mirrors_are_recognised() {
        let bare = CachedPod::from(&pod(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": []},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                       "reason": "Unschedulable"}]}
        })));
        assert_eq!(bare.shape.grace_period_seconds, 30);
        assert_eq!((bare.phase, bare.node_name.as_deref()), (None, None));
        assert!(bare.unschedulable && bare.ready.is_none() && bare.ready_containers.is_none());
        assert_eq!(bare.key(), "/p");
        let owned_by_node = CachedPod::from(&pod(json!({
            "metadata": {"name": "kube-proxy-n1", "namespace": "kube-system",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "n"}]},
            "spec": {"containers": []}
        })));
        let annotated = CachedPod::from(&pod(json!({
            "metadata": {"name": "etcd-n1", "namespace": "kube-system",
                         "annotations": {"kubernetes.io/config.mirror": "abc"}},
            "spec": {"containers": []}
        })));
        assert!(owned_by_node.shape.mirror && annotated.shape.mirror && !bare.shape.mirror);
    }
}
