//! Each managed NodeClaim's disruption view ([`node_view`]) kept between passes and built again
//! only when something it reads changed: the NodeClaim or its Node (compared by pointer: the
//! cache stores a new object for every change), the pods bound to the Node (by the node's pod
//! revision), what the PDBs select, or the time, for a pod protected by a do-not-disrupt
//! duration. A pass at 2,000 nodes built every view again, each pod's matched against every
//! PDB, about once a second while the fleet changed.

use crate::state::Snapshot;
use driftwood_api::NodeClaim;
use driftwood_api::hash::fnv1a64;
use driftwood_disruption::cached_pod::CachedPod;
use driftwood_disruption::candidate::NodeView;
use driftwood_disruption::repair::unhealthy;
use driftwood_disruption::views::node_view;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use std::collections::HashMap;
use std::sync::Arc;

/// The views of the last pass, by NodeClaim name, with what each was built from.
#[derive(Debug, Default)]
pub struct ViewCache {
    entries: HashMap<String, Entry>,
    /// What the PDBs the views were built with select ([`pdb_signature`]).
    pdbs: u64,
}

#[derive(Debug)]
struct Entry {
    claim: Arc<NodeClaim>,
    node: Option<Arc<Node>>,
    pods: Option<u64>,
    /// A pod on the node is protected for a duration: the view depends on the time.
    timed: bool,
    view: NodeView,
}

impl Entry {
    fn holds(&self, claim: &Arc<NodeClaim>, node: Option<&Arc<Node>>, pods: Option<u64>) -> bool {
        !self.timed
            && Arc::ptr_eq(&self.claim, claim)
            && match (&self.node, node) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
            && self.pods == pods
    }
}

/// What a pod's view reads of the PDBs — each one's namespace, name, selector and unhealthy-pod
/// eviction policy — as one number (their status, which every eviction moves, is not read).
fn pdb_signature(pdbs: &[PodDisruptionBudget]) -> u64 {
    let mut text = String::new();
    for pdb in pdbs {
        let spec = pdb.spec.as_ref();
        text.push_str(&format!(
            "{:?}/{:?} {:?} {:?}\n",
            pdb.metadata.namespace,
            pdb.metadata.name,
            spec.and_then(|s| s.selector.as_ref()),
            spec.and_then(|s| s.unhealthy_pod_eviction_policy.as_ref()),
        ));
    }
    fnv1a64(text.as_bytes())
}

/// Whether `pod`'s do-not-disrupt is a duration (its protection depends on the time).
fn timed(pod: &CachedPod) -> bool {
    pod.shape
        .do_not_disrupt
        .as_deref()
        .is_some_and(|value| value != "true")
}

impl ViewCache {
    /// The disruption view of every managed NodeClaim (its node, pods, PDBs, drift, and with
    /// repair `policies` its node's health) at `now`, in the cache's order: each kept from the
    /// last pass while what it reads is unchanged.
    pub fn views(
        &mut self,
        snapshot: &Snapshot,
        now: i64,
        policies: &[driftwood_api::repair::RepairPolicy],
    ) -> Vec<NodeView> {
        let pdbs = snapshot.pdb_list();
        let signature = pdb_signature(&pdbs);
        if signature != self.pdbs {
            self.entries.clear();
            self.pdbs = signature;
        }
        let mut kept = HashMap::with_capacity(self.entries.len());
        let mut views = Vec::with_capacity(snapshot.store.nodeclaims.len());
        for (name, claim) in &snapshot.store.nodeclaims {
            let managed = claim
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(driftwood_api::wellknown::LABEL_NODEPOOL));
            if !managed {
                continue;
            }
            let node = snapshot.node_of(claim);
            let node_name = node.and_then(|n| n.metadata.name.as_deref());
            let pods = node_name.and_then(|n| snapshot.pod_revisions.get(n).copied());
            let entry = match self.entries.remove(name) {
                Some(entry) if entry.holds(claim, node, pods) => entry,
                _ => {
                    let on_node = node_name.map(|n| snapshot.pods_on(n)).unwrap_or_default();
                    let on_node: Vec<&CachedPod> = on_node.iter().map(|p| p.as_ref()).collect();
                    Entry {
                        claim: Arc::clone(claim),
                        node: node.cloned(),
                        pods,
                        timed: on_node.iter().any(|p| timed(p)),
                        view: node_view(claim, node.map(|n| n.as_ref()), &on_node, &pdbs, now),
                    }
                }
            };
            let mut view = entry.view.clone();
            if !policies.is_empty() {
                view.unhealthy = node.and_then(|n| unhealthy(n, policies));
            }
            views.push(view);
            kept.insert(name.clone(), entry);
        }
        self.entries = kept;
        views
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_api::condition::Conditions as _;
    use serde_json::json;

    /// Every view as a pass that keeps nothing builds it.
    fn fresh(snapshot: &Snapshot, now: i64) -> Vec<NodeView> {
        ViewCache::default().views(snapshot, now, &[])
    }

    fn claim(i: u64, drifted: bool, consolidatable: bool) -> Arc<NodeClaim> {
        let mut conditions = Vec::new();
        if drifted {
            conditions.push(json!({"type": "Drifted", "status": "True", "reason": "AMIDrift", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}));
        }
        if consolidatable {
            conditions.push(json!({"type": "Consolidatable", "status": "True", "reason": "Consolidatable", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}));
        }
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": format!("c{i}"), "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
            "status": {"providerID": format!("aws:///z/i-{i}"), "nodeName": format!("n{i}"), "conditions": conditions}
        }))
        .expect("nodeclaim");
        assert_eq!(claim.is_true("Drifted"), drifted);
        Arc::new(claim)
    }

    fn node(i: u64, tainted: bool, ready: bool) -> Arc<Node> {
        let taints = if tainted {
            json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
        } else {
            json!([])
        };
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("n{i}")},
                "spec": {"providerID": format!("aws:///z/i-{i}"), "taints": taints},
                "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
            }))
            .expect("node"),
        )
    }

    fn pod(
        i: u64,
        node: u64,
        app: &str,
        protect: Option<&str>,
    ) -> Arc<k8s_openapi::api::core::v1::Pod> {
        let annotations = match protect {
            Some(value) => json!({"karpenter.sh/do-not-disrupt": value}),
            None => json!({}),
        };
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("p{i}"), "namespace": "default", "uid": format!("u{i}"),
                             "labels": {"app": app}, "annotations": annotations},
                "spec": {"containers": [{"name": "c"}], "nodeName": format!("n{node}")},
                "status": {"phase": "Running", "startTime": "2024-01-01T00:00:00Z"}
            }))
            .expect("pod"),
        )
    }

    fn pdb(app: &str, policy: Option<&str>) -> Arc<PodDisruptionBudget> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "pdb", "namespace": "default"},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": app}},
                         "unhealthyPodEvictionPolicy": policy},
                "status": {"disruptionsAllowed": 1, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
            }))
            .expect("pdb"),
        )
    }

    /// Generated histories of NodeClaims, Nodes, pods (some protected for a duration) and a
    /// PDB changing, the time moving on: after every step the views kept between passes are
    /// the views built afresh.
    #[test]
    fn views_kept_between_passes_are_the_views_built_afresh() {
        const START: i64 = 1_704_067_200; // 2024-01-01T00:00:00Z
        for seed in 1..=60u64 {
            let mut next = driftwood_scheduling::testkit::seeded(seed.wrapping_mul(0x9E37_79B9));
            let mut snapshot = Snapshot::default();
            let mut cache = ViewCache::default();
            let mut now = START;
            for _ in 0..80 {
                let i = next(6);
                match next(9) {
                    0 | 1 => {
                        snapshot.apply(format!("c{i}"), claim(i, next(2) == 0, next(2) == 0));
                    }
                    2 => snapshot.delete::<NodeClaim>(&format!("c{i}")),
                    3 | 4 => {
                        snapshot.apply(format!("n{i}"), node(i, next(3) == 0, next(4) > 0));
                    }
                    5 => snapshot.delete::<Node>(&format!("n{i}")),
                    6 | 7 => {
                        let protect = [None, Some("true"), Some("10m"), Some("nonsense")]
                            [usize::try_from(next(4)).unwrap_or(0)];
                        let app = if next(2) == 0 { "web" } else { "api" };
                        let p = next(12);
                        if next(5) == 0 {
                            snapshot.delete::<k8s_openapi::api::core::v1::Pod>(&format!(
                                "default/p{p}"
                            ));
                        } else {
                            snapshot.apply(format!("default/p{p}"), pod(p, i, app, protect));
                        }
                    }
                    _ => {
                        let app = if next(2) == 0 { "web" } else { "api" };
                        let policy = (next(2) == 0).then_some("AlwaysAllow");
                        snapshot.apply("default/pdb".to_string(), pdb(app, policy));
                    }
                }
                now += i64::try_from(next(400)).unwrap_or(0);
                assert_eq!(
                    cache.views(&snapshot, now, &[]),
                    fresh(&snapshot, now),
                    "seed {seed}"
                );
            }
        }
    }

    /// A pass with nothing changed builds no view again: each one kept is the same.
    #[test]
    fn nothing_changed_builds_nothing_again() {
        let mut snapshot = Snapshot::default();
        snapshot.apply("c1".to_string(), claim(1, true, false));
        snapshot.apply("n1".to_string(), node(1, false, true));
        snapshot.apply("default/p1".to_string(), pod(1, 1, "web", None));
        let mut cache = ViewCache::default();
        let first = cache.views(&snapshot, 0, &[]);
        let kept = &cache.entries["c1"];
        let (claim_at, built) = (Arc::as_ptr(&kept.claim), kept.pods);
        assert_eq!(cache.views(&snapshot, 10, &[]), first);
        assert_eq!(Arc::as_ptr(&cache.entries["c1"].claim), claim_at);
        assert_eq!(cache.entries["c1"].pods, built);
        // A pod replaced on the node moves its revision: the view is built again.
        snapshot.apply("default/p1".to_string(), pod(1, 1, "web", Some("true")));
        let after = cache.views(&snapshot, 10, &[]);
        assert_ne!(cache.entries["c1"].pods, built);
        assert!(after[0].pods[0].do_not_disrupt);
    }
}
