//! Which pod changes can change the scheduler's decisions: a pod appearing, going, being
//! bound, finishing, starting to terminate, or changing its labels or spec. Status-only writes
//! (a pod starting, turning Ready, being marked unschedulable) cannot, and at fleet scale they
//! are most of the cluster's writes.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Pod;

use super::decide::is_pending;

/// What of a pod the scheduler's decisions depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placement {
    node: Option<String>,
    pending: bool,
    finished: bool,
    terminating: bool,
    labels: Option<BTreeMap<String, String>>,
    /// Bumped by the API server on every spec change.
    generation: Option<i64>,
    scheduler: Option<String>,
}

impl Placement {
    fn of(pod: &Pod) -> Self {
        let spec = pod.spec.as_ref();
        Self {
            node: spec.and_then(|s| s.node_name.clone()),
            pending: is_pending(pod),
            finished: pod
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|p| p == "Succeeded" || p == "Failed"),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            labels: pod.metadata.labels.clone(),
            generation: pod.metadata.generation,
            scheduler: spec.and_then(|s| s.scheduler_name.clone()),
        }
    }
}

/// The placement-relevant state of every pod seen, by (namespace, name).
#[derive(Debug, Default)]
pub struct PodPlacements {
    known: HashMap<(String, String), Placement>,
}

impl PodPlacements {
    /// Record the pod `key` as it is now (`None`: gone). Whether the change can change a
    /// scheduling decision.
    pub fn changed(&mut self, key: (String, String), pod: Option<&Pod>) -> bool {
        match pod.map(Placement::of) {
            Some(now) => self.known.insert(key, now.clone()).as_ref() != Some(&now),
            None => self.known.remove(&key).is_some(),
        }
    }

    /// Forget everything (the watch listed every pod again).
    pub fn clear(&mut self) {
        self.known.clear();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(patch: serde_json::Value) -> Pod {
        let mut pod = json!({
            "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}, "generation": 1},
            "spec": {"containers": [{"name": "c", "image": "pause"}]},
            "status": {"phase": "Pending"}
        });
        json_patch::merge(&mut pod, &patch);
        serde_json::from_value(pod).unwrap()
    }

    fn key() -> (String, String) {
        ("default".to_string(), "p".to_string())
    }

    #[test]
    fn status_writes_do_not_count_and_placement_changes_do() {
        let mut seen = PodPlacements::default();
        assert!(seen.changed(key(), Some(&pod(json!({})))), "a new pod");
        let marked = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
        assert!(
            !seen.changed(key(), Some(&pod(marked))),
            "marked unschedulable"
        );
        let bound = json!({"spec": {"nodeName": "n1"}});
        assert!(seen.changed(key(), Some(&pod(bound.clone()))), "bound");
        let running = json!({"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        assert!(!seen.changed(key(), Some(&pod(running))), "started");
        let relabelled = json!({"spec": {"nodeName": "n1"}, "metadata": {"labels": {"app": "db"}}});
        assert!(seen.changed(key(), Some(&pod(relabelled))), "labels");
        let finished = json!({"spec": {"nodeName": "n1"}, "metadata": {"labels": {"app": "db"}}, "status": {"phase": "Succeeded"}});
        assert!(seen.changed(key(), Some(&pod(finished))), "finished");
        assert!(seen.changed(key(), None), "gone");
        assert!(!seen.changed(key(), None), "gone twice");
    }
}
