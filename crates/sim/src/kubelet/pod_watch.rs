//! Which pods the kubelets look at in a pass: those that changed, those on a Node that changed,
//! and those whose next step has come due — not every pod of the cluster on every wake-up.

use std::collections::{BTreeSet, HashMap, HashSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::attention::Attention;
use super::plan::uses_claims;

/// A pod, as (namespace, name).
pub type PodKey = (String, String);

/// The pods to look at, with the indexes that find them.
#[derive(Debug, Default)]
pub struct PodWatch {
    /// The node each known pod is bound to.
    node_of: HashMap<PodKey, String>,
    /// The pods bound to each node (by the node's name, whether or not the Node exists).
    on_node: HashMap<String, HashSet<PodKey>>,
    /// The pods that mount a PersistentVolumeClaim.
    claim_users: BTreeSet<PodKey>,
    /// Pods to look at in the next pass, or when their time comes.
    attention: Attention<PodKey>,
}

impl PodWatch {
    /// The pod `key` was created or changed (`pod` Some) or deleted (None): index it, and look
    /// at it in the next pass.
    pub fn pod_changed(&mut self, key: PodKey, pod: Option<&Pod>) {
        let node = pod
            .and_then(|p| p.spec.as_ref())
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty());
        if self.node_of.get(&key).map(String::as_str) != node {
            if let Some(old) = self.node_of.remove(&key)
                && let Some(pods) = self.on_node.get_mut(&old)
            {
                pods.remove(&key);
                if pods.is_empty() {
                    self.on_node.remove(&old);
                }
            }
            if let Some(node) = node {
                self.node_of.insert(key.clone(), node.to_string());
                self.on_node
                    .entry(node.to_string())
                    .or_default()
                    .insert(key.clone());
            }
        }
        if pod.is_some_and(uses_claims) {
            self.claim_users.insert(key.clone());
        } else {
            self.claim_users.remove(&key);
        }
        if pod.is_some() {
            self.attention.mark(key);
        } else {
            self.attention.unmark(&key);
        }
    }

    /// The watch listed every pod again: index them afresh and look at each.
    pub fn relisted<'a>(&mut self, pods: impl IntoIterator<Item = (PodKey, &'a Pod)>) {
        let mut attention = std::mem::take(&mut self.attention);
        attention.clear_marked();
        *self = Self {
            attention,
            ..Self::default()
        };
        for (key, pod) in pods {
            self.pod_changed(key, Some(pod));
        }
    }

    /// The Node `name` changed (or its machine or faults did): look at its pods.
    pub fn node_changed(&mut self, name: &str) {
        if let Some(pods) = self.on_node.get(name) {
            for pod in pods {
                self.attention.mark(pod.clone());
            }
        }
    }

    /// Look at every pod that mounts a claim (a volume attachment or claim changed).
    pub fn claims_changed(&mut self) {
        for pod in &self.claim_users {
            self.attention.mark(pod.clone());
        }
    }

    /// Look at `key` again at `at`.
    pub fn look_again_at(&mut self, key: PodKey, at: Timestamp) {
        self.attention.at(key, at);
    }

    /// The pods to look at now (changed, or due by `now`), in (namespace, name) order; they are
    /// forgotten until something makes them due again.
    pub fn take(&mut self, now: Timestamp) -> Vec<PodKey> {
        self.attention.take(now)
    }

    /// When a pod next comes due.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.attention.next_due()
    }

    /// The pods that mount a claim.
    pub fn claim_users(&self) -> impl Iterator<Item = &PodKey> {
        self.claim_users.iter()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_724_112_000 + seconds).unwrap()
    }

    fn key(name: &str) -> PodKey {
        ("default".to_string(), name.to_string())
    }

    fn pod(node: Option<&str>, claim: bool) -> Pod {
        let mut spec = json!({"containers": [{"name": "c", "image": "pause"}]});
        if let Some(node) = node {
            spec["nodeName"] = json!(node);
        }
        if claim {
            spec["volumes"] =
                json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]);
        }
        serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "default"}, "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn a_changed_pod_is_looked_at_once() {
        let mut watch = PodWatch::default();
        watch.pod_changed(key("a"), Some(&pod(Some("n1"), false)));
        assert_eq!(watch.take(at(0)), vec![key("a")]);
        assert_eq!(watch.take(at(0)), Vec::<PodKey>::new());
    }

    #[test]
    fn a_node_change_brings_up_the_pods_bound_to_it_now() {
        let mut watch = PodWatch::default();
        watch.pod_changed(key("a"), Some(&pod(Some("n1"), false)));
        watch.pod_changed(key("b"), Some(&pod(Some("n1"), false)));
        watch.pod_changed(key("c"), Some(&pod(Some("n2"), false)));
        watch.pod_changed(key("d"), Some(&pod(None, false)));
        watch.take(at(0));
        // b moves away (a rebinding cannot happen in Kubernetes, but a delete and re-create can).
        watch.pod_changed(key("b"), Some(&pod(Some("n2"), false)));
        watch.pod_changed(key("a"), None);
        watch.take(at(0));
        watch.node_changed("n1");
        assert_eq!(watch.take(at(0)), Vec::<PodKey>::new());
        watch.node_changed("n2");
        assert_eq!(watch.take(at(0)), vec![key("b"), key("c")]);
    }

    #[test]
    fn a_pod_comes_due_at_its_time_and_not_before() {
        let mut watch = PodWatch::default();
        watch.pod_changed(key("a"), Some(&pod(Some("n1"), false)));
        watch.take(at(0));
        watch.look_again_at(key("a"), at(2));
        assert_eq!(watch.next_due(), Some(at(2)));
        assert_eq!(watch.take(at(1)), Vec::<PodKey>::new());
        assert_eq!(watch.take(at(2)), vec![key("a")]);
        assert_eq!(watch.next_due(), None);
    }

    #[test]
    fn claim_users_are_known_and_brought_up_together() {
        let mut watch = PodWatch::default();
        watch.pod_changed(key("a"), Some(&pod(Some("n1"), true)));
        watch.pod_changed(key("b"), Some(&pod(Some("n1"), false)));
        watch.take(at(0));
        assert_eq!(watch.claim_users().collect::<Vec<_>>(), vec![&key("a")]);
        watch.claims_changed();
        assert_eq!(watch.take(at(0)), vec![key("a")]);
        watch.pod_changed(key("a"), None);
        assert_eq!(watch.claim_users().count(), 0);
    }

    #[test]
    fn a_relist_indexes_afresh_and_keeps_what_is_due() {
        let mut watch = PodWatch::default();
        watch.pod_changed(key("gone"), Some(&pod(Some("n1"), false)));
        watch.look_again_at(key("gone"), at(5));
        watch.take(at(0));
        let kept = pod(Some("n2"), false);
        watch.relisted([(key("kept"), &kept)]);
        assert_eq!(watch.take(at(0)), vec![key("kept")]);
        watch.node_changed("n1");
        assert_eq!(watch.take(at(1)), Vec::<PodKey>::new());
        // A pod due that is gone by then is looked up, found missing and left alone by the caller.
        assert_eq!(watch.take(at(5)), vec![key("gone")]);
    }
}
