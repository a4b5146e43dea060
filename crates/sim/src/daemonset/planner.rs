//! The DaemonSet controller's decisions kept between passes: each pass is told which Nodes and
//! daemon pods changed, decides again only those nodes (every node of a DaemonSet whose object
//! changed), and keeps each DaemonSet's status counts as running totals. A pass costs
//! O(changes), not O(nodes + pods): during a rollout of thousands of nodes every Node and pod
//! event woke a pass over the whole fleet.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::plan::{
    DaemonSetAction, NodePlan, Template, plan_node, pod_name, same_status, template,
};
use crate::workloads::{owned_by, pod_is_ready};

/// A daemon pod's key: namespace and name.
pub type PodKey = (String, String);

/// What a pass is told of the Nodes and daemon pods.
#[derive(Debug, Clone)]
pub enum Observed {
    /// Every Node and daemon pod: the first pass, and after a watch listed everything again
    /// (objects deleted meanwhile were not reported one by one).
    Everything {
        nodes: Vec<Arc<Node>>,
        pods: Vec<Arc<Pod>>,
    },
    /// The Nodes (by name) and daemon pods touched since the last pass, each as it is now
    /// (`None`: gone).
    Changed {
        nodes: Vec<(String, Option<Arc<Node>>)>,
        pods: Vec<(PodKey, Option<Arc<Pod>>)>,
    },
}

/// The controller's memory between passes.
#[derive(Default)]
pub struct DaemonSetPlanner {
    nodes: BTreeMap<String, Arc<Node>>,
    /// Daemon pods not being deleted, by the node they name (empty: none), then by key.
    pods_by_node: BTreeMap<String, BTreeMap<PodKey, Arc<Pod>>>,
    /// The node each pod in `pods_by_node` is filed under.
    pod_node: HashMap<PodKey, String>,
    /// Names in `pods_by_node` with no Node: their pods are deleted.
    orphaned: BTreeSet<String>,
    /// Each DaemonSet's decisions, by uid.
    sets: HashMap<String, SetPlan>,
    /// How many node decisions the last pass made.
    pub decided_last_pass: usize,
}

/// One DaemonSet's decisions: per node, and what they add up to.
struct SetPlan {
    set: Arc<DaemonSet>,
    template: Option<Template>,
    nodes: BTreeMap<String, NodePlan>,
    totals: Totals,
    /// Nodes whose pod runs an older template: node name → pod name.
    outdated: BTreeMap<String, String>,
    /// Nodes whose decision has actions (made again each pass until the cache shows them).
    with_actions: BTreeSet<String>,
}

/// The status counts, summed over the nodes.
#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    desired: i64,
    scheduled: i64,
    misscheduled: i64,
    ready: i64,
    updated: i64,
    unavailable: i64,
}

impl Totals {
    fn add(&mut self, plan: &NodePlan, sign: i64) {
        self.desired += sign * i64::from(plan.desired);
        self.scheduled += sign * i64::from(plan.scheduled);
        self.misscheduled += sign * i64::from(plan.misscheduled);
        self.ready += sign * i64::from(plan.ready);
        self.updated += sign * i64::from(plan.updated);
        self.unavailable += sign * i64::from(plan.unavailable);
    }
}

impl SetPlan {
    fn new(set: &Arc<DaemonSet>) -> Self {
        Self {
            set: Arc::clone(set),
            template: template(set),
            nodes: BTreeMap::new(),
            totals: Totals::default(),
            outdated: BTreeMap::new(),
            with_actions: BTreeSet::new(),
        }
    }

    fn forget(&mut self, node: &str) {
        if let Some(old) = self.nodes.remove(node) {
            self.totals.add(&old, -1);
        }
        self.outdated.remove(node);
        self.with_actions.remove(node);
    }

    fn remember(&mut self, node: &str, plan: NodePlan) {
        self.totals.add(&plan, 1);
        if let Some(pod) = &plan.outdated {
            self.outdated.insert(node.to_string(), pod.clone());
        }
        if !plan.actions.is_empty() {
            self.with_actions.insert(node.to_string());
        }
        self.nodes.insert(node.to_string(), plan);
    }
}

/// `set`'s daemon pods among `pods`: a ready one first, then the oldest.
fn pods_of<'a>(set: &DaemonSet, pods: Option<&'a BTreeMap<PodKey, Arc<Pod>>>) -> Vec<&'a Arc<Pod>> {
    let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
    let uid = set.metadata.uid.as_deref().unwrap_or_default();
    let mut here: Vec<&Arc<Pod>> = pods
        .into_iter()
        .flat_map(BTreeMap::values)
        .filter(|p| {
            p.metadata.namespace.as_deref() == Some(namespace) && owned_by(&p.metadata, uid)
        })
        .collect();
    here.sort_by_key(|p| {
        (
            !pod_is_ready(p),
            p.metadata.creation_timestamp.clone(),
            pod_name(p),
        )
    });
    here
}

fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

impl DaemonSetPlanner {
    /// One pass over `sets` (every DaemonSet) after `observed`: the actions to take, as
    /// [`super::plan`] decides them from the same objects.
    pub fn pass(&mut self, sets: &[Arc<DaemonSet>], observed: Observed) -> Vec<DaemonSetAction> {
        self.decided_last_pass = 0;
        let dirty = self.observe(observed);
        let mut sorted: Vec<&Arc<DaemonSet>> = sets
            .iter()
            .filter(|s| s.metadata.deletion_timestamp.is_none())
            .collect();
        sorted.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        let live: BTreeSet<&str> = sorted
            .iter()
            .map(|s| s.metadata.uid.as_deref().unwrap_or_default())
            .collect();
        self.sets.retain(|uid, _| live.contains(uid.as_str()));
        let mut actions = Vec::new();
        for set in sorted {
            let uid = set.metadata.uid.clone().unwrap_or_default();
            let plan = self.sets.entry(uid).or_insert_with(|| SetPlan::new(set));
            // What a node's decision reads of its DaemonSet is its identity and spec; its status
            // (written by this controller as the counts move) only decides the status write.
            let same = plan.set.metadata.uid == set.metadata.uid
                && plan.set.metadata.name == set.metadata.name
                && plan.set.metadata.namespace == set.metadata.namespace
                && plan.set.spec == set.spec;
            let everything = !same || plan.nodes.is_empty();
            if same {
                plan.set = Arc::clone(set);
            } else {
                *plan = SetPlan::new(set);
            }
            let Some(template) = &plan.template else {
                // A template that cannot be read decides nothing for its DaemonSet.
                continue;
            };
            let to_decide: Vec<&String> = if everything {
                self.nodes.keys().collect()
            } else {
                dirty.iter().collect()
            };
            let mut decided = Vec::with_capacity(to_decide.len());
            for name in to_decide {
                let Some(node) = self.nodes.get(name) else {
                    decided.push((name.clone(), None));
                    continue;
                };
                let here = pods_of(set, self.pods_by_node.get(name));
                decided.push((name.clone(), Some(plan_node(set, template, node, &here))));
            }
            self.decided_last_pass += decided.len();
            for (name, node_plan) in decided {
                plan.forget(&name);
                if let Some(node_plan) = node_plan {
                    plan.remember(&name, node_plan);
                }
            }
            actions.extend(set_actions(plan, &self.orphaned, &self.pods_by_node));
        }
        actions
    }

    /// Takes in what changed; returns the node names to decide again.
    fn observe(&mut self, observed: Observed) -> BTreeSet<String> {
        let mut dirty = BTreeSet::new();
        match observed {
            Observed::Everything { nodes, pods } => {
                self.nodes = nodes
                    .into_iter()
                    .map(|n| (n.metadata.name.clone().unwrap_or_default(), n))
                    .collect();
                self.pods_by_node.clear();
                self.pod_node.clear();
                for pod in pods {
                    self.file(pod);
                }
                self.sets.clear();
                self.orphaned = self
                    .pods_by_node
                    .keys()
                    .filter(|n| !self.nodes.contains_key(*n))
                    .cloned()
                    .collect();
            }
            Observed::Changed { nodes, pods } => {
                for (name, node) in nodes {
                    match node {
                        Some(node) => self.nodes.insert(name.clone(), node),
                        None => self.nodes.remove(&name),
                    };
                    dirty.insert(name);
                }
                for (key, pod) in pods {
                    if let Some(was) = self.unfile(&key) {
                        dirty.insert(was);
                    }
                    if let Some(pod) = pod {
                        dirty.extend(self.file(pod));
                    }
                }
                for name in &dirty {
                    if self.pods_by_node.contains_key(name) && !self.nodes.contains_key(name) {
                        self.orphaned.insert(name.clone());
                    } else {
                        self.orphaned.remove(name);
                    }
                }
            }
        }
        dirty
    }

    /// Files `pod` under its node unless it is being deleted; returns that node.
    fn file(&mut self, pod: Arc<Pod>) -> Option<String> {
        if pod.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let key = (
            pod.metadata.namespace.clone().unwrap_or_default(),
            pod.metadata.name.clone().unwrap_or_default(),
        );
        let node = node_of(&pod);
        self.pods_by_node
            .entry(node.clone())
            .or_default()
            .insert(key.clone(), pod);
        self.pod_node.insert(key, node.clone());
        Some(node)
    }

    /// Takes the pod `key` out; returns the node it was filed under.
    fn unfile(&mut self, key: &PodKey) -> Option<String> {
        let node = self.pod_node.remove(key)?;
        if let Some(pods) = self.pods_by_node.get_mut(&node) {
            pods.remove(key);
            if pods.is_empty() {
                self.pods_by_node.remove(&node);
            }
        }
        Some(node)
    }
}

/// One DaemonSet's actions this pass: its nodes' actions in node order, its pods on nodes
/// that no longer exist deleted, the next outdated pod deleted when none is unavailable
/// (maxUnavailable 1), and its status when it changed.
fn set_actions(
    plan: &SetPlan,
    orphaned: &BTreeSet<String>,
    pods_by_node: &BTreeMap<String, BTreeMap<PodKey, Arc<Pod>>>,
) -> Vec<DaemonSetAction> {
    let set = &plan.set;
    let namespace = set.metadata.namespace.clone().unwrap_or_default();
    let name = set.metadata.name.clone().unwrap_or_default();
    let mut actions: Vec<DaemonSetAction> = plan
        .with_actions
        .iter()
        .filter_map(|node| plan.nodes.get(node))
        .flat_map(|p| p.actions.iter().cloned())
        .collect();
    for node in orphaned {
        for pod in pods_of(set, pods_by_node.get(node)) {
            actions.push(DaemonSetAction::DeletePod {
                namespace: namespace.clone(),
                name: pod_name(pod),
            });
        }
    }
    let totals = plan.totals;
    if totals.unavailable == 0
        && let Some(first) = plan.outdated.values().next()
    {
        actions.push(DaemonSetAction::DeletePod {
            namespace: namespace.clone(),
            name: first.clone(),
        });
    }
    let status = json!({
        "currentNumberScheduled": totals.scheduled,
        "desiredNumberScheduled": totals.desired,
        "numberMisscheduled": totals.misscheduled,
        "numberReady": totals.ready,
        "numberAvailable": totals.ready,
        "numberUnavailable": (totals.desired - totals.ready).max(0),
        "updatedNumberScheduled": totals.updated,
        "observedGeneration": set.metadata.generation.unwrap_or(0),
    });
    let current = set
        .status
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(Value::Null);
    if !same_status(&current, &status) {
        actions.push(DaemonSetAction::UpdateStatus {
            namespace,
            name,
            status,
        });
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemonset::plan::{daemon_pod, plan};

    fn node(name: &str, zone: &str, taint: Option<&str>) -> Arc<Node> {
        let taints = match taint {
            Some(effect) => json!([{"key": "dedicated", "effect": effect}]),
            None => json!([]),
        };
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
                "spec": {"taints": taints}
            }))
            .expect("node"),
        )
    }

    fn daemon_set(name: &str, selector: Value, image: &str) -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "kube-system", "uid": format!("uid-{name}"), "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"nodeSelector": selector, "containers": [{"name": "a", "image": image}]}}}
        }))
        .expect("daemonset")
    }

    fn pod_key(pod: &Pod) -> PodKey {
        (
            pod.metadata.namespace.clone().unwrap_or_default(),
            pod.metadata.name.clone().unwrap_or_default(),
        )
    }

    /// The Nodes and daemon pods of a generated cluster.
    type World = (BTreeMap<String, Arc<Node>>, BTreeMap<PodKey, Arc<Pod>>);

    /// What changed between two states of the world, as the watch caches report it.
    fn changes(before: &World, after: &World) -> Observed {
        fn touched<K: Ord + Clone, V>(
            before: &BTreeMap<K, Arc<V>>,
            after: &BTreeMap<K, Arc<V>>,
        ) -> Vec<(K, Option<Arc<V>>)> {
            let keys: BTreeSet<&K> = before.keys().chain(after.keys()).collect();
            keys.into_iter()
                .filter(|k| match (before.get(*k), after.get(*k)) {
                    (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
                    _ => true,
                })
                .map(|k| ((*k).clone(), after.get(k).cloned()))
                .collect()
        }
        Observed::Changed {
            nodes: touched(&before.0, &after.0),
            pods: touched(&before.1, &after.1),
        }
    }

    /// A small deterministic generator (xorshift), so a failing seed can be run again.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Generated histories of a cluster under two DaemonSets (one selecting zone a): nodes
    /// come, go and are tainted, the controller's own actions are carried out (some late, some
    /// not at all), pods become ready or are deleted by hand, templates change and status is
    /// written back. After every step, a planner told only what changed decides exactly what
    /// deciding every node from scratch decides, and decides again only the changed nodes when
    /// no DaemonSet's spec changed.
    #[test]
    fn deciding_only_what_changed_matches_deciding_everything() {
        for seed in 1..=150u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let mut sets = vec![
                Arc::new(daemon_set("agent", json!({}), "agent:1")),
                Arc::new(daemon_set(
                    "zonal",
                    json!({"topology.kubernetes.io/zone": "a"}),
                    "zonal:1",
                )),
            ];
            let mut world: World = Default::default();
            let mut planner = DaemonSetPlanner::default();
            let mut last = world.clone();
            let mut actions = planner.pass(
                &sets,
                Observed::Everything {
                    nodes: Vec::new(),
                    pods: Vec::new(),
                },
            );
            let mut made = 0;
            for step in 0..40 {
                let sets_before: Vec<Arc<DaemonSet>> = sets.clone();
                match rng.below(8) {
                    0 | 1 => {
                        let name = format!("n{}", rng.below(12));
                        let zone = if rng.below(2) == 0 { "a" } else { "b" };
                        let taint =
                            [None, Some("NoSchedule"), Some("NoExecute")][rng.below(3) as usize];
                        world.0.insert(name.clone(), node(&name, zone, taint));
                    }
                    2 => {
                        let name = format!("n{}", rng.below(12));
                        world.0.remove(&name);
                    }
                    3 | 4 => {
                        // Carry out the last pass's actions, each with even odds.
                        for action in &actions {
                            if rng.below(2) == 0 {
                                continue;
                            }
                            match action {
                                DaemonSetAction::CreatePod { pod, .. } => {
                                    let mut pod = pod.clone();
                                    made += 1;
                                    pod["metadata"]["name"] = json!(format!("p{made}"));
                                    pod["metadata"]["creationTimestamp"] = json!(format!(
                                        "2024-01-01T00:{:02}:{:02}Z",
                                        made / 60 % 60,
                                        made % 60
                                    ));
                                    let pod: Pod = serde_json::from_value(pod).expect("pod");
                                    world.1.insert(pod_key(&pod), Arc::new(pod));
                                }
                                DaemonSetAction::DeletePod { namespace, name } => {
                                    world.1.remove(&(namespace.clone(), name.clone()));
                                }
                                DaemonSetAction::UpdateStatus { name, status, .. } => {
                                    for set in &mut sets {
                                        if set.metadata.name.as_deref() == Some(name) {
                                            let mut written = (**set).clone();
                                            written.status = serde_json::from_value(status.clone())
                                                .expect("status");
                                            *set = Arc::new(written);
                                        }
                                    }
                                }
                            }
                        }
                    }
                    5 => {
                        // A pod becomes ready, or is being deleted.
                        let keys: Vec<PodKey> = world.1.keys().cloned().collect();
                        if !keys.is_empty() {
                            let key = &keys[rng.below(keys.len() as u64) as usize];
                            let mut pod = (*world.1[key]).clone();
                            if rng.below(3) == 0 {
                                pod.metadata.deletion_timestamp =
                                    serde_json::from_value(json!("2024-01-01T01:00:00Z"))
                                        .expect("time");
                            } else {
                                pod.status = serde_json::from_value(json!({"phase": "Running",
                                    "conditions": [{"type": "Ready", "status": "True"}]}))
                                .expect("status");
                            }
                            world.1.insert(key.clone(), Arc::new(pod));
                        }
                    }
                    6 => {
                        let i = rng.below(2) as usize;
                        let mut changed = (*sets[i]).clone();
                        if let Some(spec) = changed.spec.as_mut()
                            && let Some(pod_spec) = spec.template.spec.as_mut()
                        {
                            pod_spec.containers[0].image = Some(format!("v{step}"));
                        }
                        sets[i] = Arc::new(changed);
                    }
                    _ => {}
                }
                let observed = changes(&last, &world);
                let changed_nodes = match &observed {
                    Observed::Changed { nodes, pods } => {
                        let mut names: BTreeSet<String> =
                            nodes.iter().map(|(n, _)| n.clone()).collect();
                        for (key, pod) in pods {
                            names.extend(last.1.get(key).map(|p| node_of(p)));
                            names.extend(pod.as_ref().map(|p| node_of(p)));
                        }
                        names.len()
                    }
                    Observed::Everything { .. } => unreachable!(),
                };
                actions = planner.pass(&sets, observed);
                let nodes: Vec<Arc<Node>> = world.0.values().cloned().collect();
                let pods: Vec<Arc<Pod>> = world.1.values().cloned().collect();
                assert_eq!(
                    actions,
                    plan(&sets, &nodes, &pods),
                    "seed {seed}, step {step}"
                );
                // A status write is not a change to what a node's decision reads.
                let specs_same = sets_before.iter().zip(&sets).all(|(a, b)| a.spec == b.spec);
                if specs_same && step > 0 {
                    assert!(
                        planner.decided_last_pass <= 2 * changed_nodes,
                        "seed {seed}, step {step}: decided {} for {changed_nodes} changed nodes",
                        planner.decided_last_pass
                    );
                }
                last = world.clone();
            }
        }
    }

    /// Told nothing changed, a pass decides no node again and makes the same actions.
    #[test]
    fn nothing_changed_decides_nothing_again() {
        let set = Arc::new(daemon_set("agent", json!({}), "agent:1"));
        let nodes = vec![node("n1", "a", None), node("n2", "b", None)];
        let mut pod: Pod = serde_json::from_value(daemon_pod(&set, "n1")).expect("pod");
        pod.metadata.name = Some("p1".into());
        let mut planner = DaemonSetPlanner::default();
        let sets = [Arc::clone(&set)];
        let first = planner.pass(
            &sets,
            Observed::Everything {
                nodes,
                pods: vec![Arc::new(pod)],
            },
        );
        assert_eq!(planner.decided_last_pass, 2);
        let again = planner.pass(
            &sets,
            Observed::Changed {
                nodes: Vec::new(),
                pods: Vec::new(),
            },
        );
        assert_eq!(planner.decided_last_pass, 0);
        assert_eq!(again, first);
    }
}
