//! What the watch decodes of an object before the cache takes it: managedFields never, and of
//! a Pod only what the cache's projection of it ([`driftwood_disruption::cached_pod::CachedPod`])
//! and its scheduling facts read — its identity, labels, owners, the annotations driftwood acts
//! on, what scheduling, drain and volume handling look at, its phase, conditions and restarts.
//! At 100,000 pods the rest (container images, env, probes, mounts, projected volumes, the rest
//! of the container statuses) would be most of the work of decoding each event.
use serde_json::Value;

/// Pod annotations driftwood reads (exact keys).
const POD_ANNOTATIONS: &[&str] = &[
    driftwood_api::wellknown::ANNOTATION_DO_NOT_DISRUPT,
    driftwood_api::wellknown::ANNOTATION_POD_DELETION_COST,
    driftwood_disruption::cached_pod::ANNOTATION_MIRROR_POD,
];

/// Container fields scheduling and drain read.
const CONTAINER_FIELDS: &[&str] = &["name", "resources", "ports", "restartPolicy"];

/// Status fields driftwood reads.
const POD_STATUS_FIELDS: &[&str] = &[
    "phase",
    "conditions",
    "startTime",
    "reason",
    "containerStatuses",
];

/// Container status fields driftwood reads.
const CONTAINER_STATUS_FIELDS: &[&str] = &["name", "ready", "restartCount"];

/// Removes what the cache does not keep from `object` (a Pod when `is_pod`).
pub fn trim(object: &mut Value, is_pod: bool) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
        if is_pod
            && let Some(annotations) = metadata
                .get_mut("annotations")
                .and_then(Value::as_object_mut)
        {
            annotations.retain(|key, _| POD_ANNOTATIONS.contains(&key.as_str()));
        }
    }
    if !is_pod {
        return;
    }
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            for container in spec
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .filter_map(Value::as_object_mut)
            {
                container.retain(|key, _| CONTAINER_FIELDS.contains(&key.as_str()));
            }
        }
        // Only volumes backed by claims matter (volume attachments); the rest is the kubelet's.
        if let Some(volumes) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
            volumes.retain(|v| {
                v.get("persistentVolumeClaim").is_some() || v.get("ephemeral").is_some()
            });
        }
    }
    if let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) {
        status.retain(|key, _| POD_STATUS_FIELDS.contains(&key.as_str()));
        // Of the containers' statuses, only their restarts (a rollout policy's restart gate);
        // the required strings stay, empty, so the object still decodes.
        if let Some(containers) = status
            .get_mut("containerStatuses")
            .and_then(Value::as_array_mut)
        {
            for container in containers.iter_mut().filter_map(Value::as_object_mut) {
                container.retain(|key, _| CONTAINER_STATUS_FIELDS.contains(&key.as_str()));
                container.insert("image".into(), Value::String(String::new()));
                container.insert("imageID".into(), Value::String(String::new()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"},
                         "annotations": {"karpenter.sh/do-not-disrupt": "true", "controller.kubernetes.io/pod-deletion-cost": "5",
                                         "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u", "controller": true}],
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"nodeName": "n1", "priorityClassName": "system-cluster-critical", "terminationGracePeriodSeconds": 30,
                     "tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists"}],
                     "containers": [{"name": "c", "image": "nginx", "env": [{"name": "A", "value": "b"}],
                                     "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 80, "hostPort": 8080}],
                                     "livenessProbe": {"httpGet": {"path": "/", "port": 80}}}],
                     "initContainers": [{"name": "sidecar", "image": "envoy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}},
                                 {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                                 {"name": "token", "projected": {"sources": []}}]},
            "status": {"phase": "Running", "startTime": "2024-01-01T00:00:00Z",
                       "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-01-01T00:00:01Z"},
                                      {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:09Z"}],
                       "containerStatuses": [{"name": "c", "ready": true, "restartCount": 4, "image": "nginx", "imageID": "x",
                                              "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}}],
                       "podIP": "10.0.0.1"}
        })
    }

    /// Everything driftwood reads of a pod survives, byte for byte where it counts.
    #[test]
    fn a_trimmed_pod_keeps_what_driftwood_reads() {
        let mut trimmed = pod();
        trim(&mut trimmed, true);
        let pod: Pod = serde_json::from_value(trimmed).expect("still a pod");
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(pod.metadata.labels.as_ref().expect("labels")["app"], "web");
        assert_eq!(
            pod.metadata
                .annotations
                .as_ref()
                .expect("annotations")
                .keys()
                .collect::<Vec<_>>(),
            [
                "controller.kubernetes.io/pod-deletion-cost",
                "karpenter.sh/do-not-disrupt"
            ]
        );
        assert!(pod.metadata.managed_fields.is_none());
        assert_eq!(
            pod.metadata.owner_references.as_ref().expect("owners")[0].kind,
            "ReplicaSet"
        );
        assert_eq!(
            spec.containers[0]
                .resources
                .as_ref()
                .expect("resources")
                .requests
                .as_ref()
                .expect("requests")["cpu"]
                .0,
            "1"
        );
        assert_eq!(
            spec.containers[0].ports.as_ref().expect("ports")[0].host_port,
            Some(8080)
        );
        assert!(spec.containers[0].image.is_none() && spec.containers[0].env.is_none());
        let sidecar = &spec.init_containers.as_ref().expect("init")[0];
        assert_eq!(sidecar.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.volumes.as_ref().expect("volumes").len(), 2);
        assert_eq!(
            spec.priority_class_name.as_deref(),
            Some("system-cluster-critical")
        );
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        assert_eq!(spec.tolerations.as_ref().expect("tolerations").len(), 1);
        let status = pod.status.as_ref().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert!(status.start_time.is_some() && status.conditions.is_some());
        assert!(status.pod_ip.is_none());
        let containers = status
            .container_statuses
            .as_ref()
            .expect("container statuses");
        assert_eq!(containers[0].restart_count, 4, "the restart gate reads it");
        assert!(containers[0].image.is_empty() && containers[0].state.is_none());
    }

    /// The trim drops nothing the cache keeps of a pod: the compact pod made from the trimmed
    /// pod is the one made from the whole pod.
    #[test]
    fn the_cached_pod_of_a_trimmed_pod_is_the_cached_pod_of_the_whole_pod() {
        use driftwood_disruption::cached_pod::CachedPod;
        let whole: Pod = serde_json::from_value(pod()).expect("a pod");
        let mut trimmed = pod();
        trim(&mut trimmed, true);
        let trimmed: Pod = serde_json::from_value(trimmed).expect("still a pod");
        let cached = CachedPod::from(&whole);
        assert_eq!(CachedPod::from(&trimmed), cached);
        assert_eq!(cached.shape.deletion_cost, 5);
        assert_eq!(
            &*cached.claims,
            [Box::from("data-web-1"), Box::from("web-1-scratch")]
        );
        assert!(cached.ready_since().is_some() && cached.scheduled_since().is_some());
        // A static pod's mirror annotation survives too.
        let mut mirror = pod();
        mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"] = json!("abc");
        let whole: Pod = serde_json::from_value(mirror.clone()).expect("a pod");
        trim(&mut mirror, true);
        let trimmed: Pod = serde_json::from_value(mirror).expect("still a pod");
        assert!(CachedPod::from(&trimmed).shape.mirror);
        assert_eq!(CachedPod::from(&trimmed), CachedPod::from(&whole));
    }

    /// Other kinds lose only their managedFields.
    #[test]
    fn other_objects_keep_everything_but_managed_fields() {
        let mut node = json!({"metadata": {"name": "n", "annotations": {"a": "b"}, "managedFields": []},
                              "status": {"nodeInfo": {"kubeletVersion": "v1.33.0"}}});
        trim(&mut node, false);
        assert_eq!(
            node,
            json!({"metadata": {"name": "n", "annotations": {"a": "b"}},
                                "status": {"nodeInfo": {"kubeletVersion": "v1.33.0"}}})
        );
    }
}
