//! The scheduler's decisions, as a pure function of the Nodes and Pods: which node each pending
//! pod is bound to (fit by driftwood-scheduling's rules, judged by the pod's required
//! constraints only as kube-scheduler's filters judge it, on the node kube-scheduler's scoring
//! prefers, then by name), and for pods that fit nowhere a kube-scheduler-style explanation.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use driftwood_api::wellknown::LABEL_HOSTNAME;
use driftwood_scheduling::resources::PODS;
use driftwood_scheduling::taints::first_untolerated;
use driftwood_scheduling::{
    ExistingNode, NodeSummary, PodConstraints, PodConversionError, Resources, Shared, SimPod,
    SimulationInput, SimulationOptions, Taint, schedule,
};

use super::score;
use k8s_openapi::api::core::v1::{Node, Pod};

/// The scheduler name pods must ask for (or leave empty).
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// What happens to one pending pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Bind the pod to the node.
    Bind {
        /// Namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// Node name.
        node: String,
    },
    /// The pod fits nowhere now.
    Unschedulable {
        /// Namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// kube-scheduler style, e.g. `0/3 nodes are available: 3 Insufficient cpu.`
        message: String,
    },
}

fn key_of(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn finished(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed")
}

fn bound_node(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// Is this pod waiting for this scheduler?
pub fn is_pending(pod: &Pod) -> bool {
    let ours = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .is_none_or(|n| n.is_empty() || n == DEFAULT_SCHEDULER);
    ours && bound_node(pod).is_none() && pod.metadata.deletion_timestamp.is_none() && !finished(pod)
}

/// The pods' scheduling forms, worked out once per pod version (uid and resourceVersion) and
/// kept from one pass to the next while a pass asks for them: the pending pods, and the pods of
/// nodes worked out again (the pods of a remembered node live in its [`Candidate`]).
#[derive(Debug, Default)]
struct SimPods {
    known: HashMap<String, (String, SimPod)>,
    /// The uids asked for in this pass.
    seen: HashSet<String>,
}

impl SimPods {
    /// The scheduling form of `pod`.
    fn of(&mut self, pod: &Pod) -> Result<SimPod, PodConversionError> {
        let (Some(uid), Some(version)) = (
            pod.metadata.uid.as_deref(),
            pod.metadata.resource_version.as_deref(),
        ) else {
            return SimPod::from_pod(pod);
        };
        if !self.seen.contains(uid) {
            self.seen.insert(uid.to_string());
        }
        if let Some((known, sim)) = self.known.get(uid)
            && known == version
        {
            return Ok(sim.clone());
        }
        let sim = SimPod::from_pod(pod)?;
        self.known
            .insert(uid.to_string(), (version.to_string(), sim.clone()));
        Ok(sim)
    }

    /// End a pass: forget the pods it did not ask for (gone, or finished).
    fn end_pass(&mut self) {
        let seen = std::mem::take(&mut self.seen);
        self.known.retain(|uid, _| seen.contains(uid));
    }
}

/// What one pass keeps for the next: the pods' scheduling forms, and each node as the
/// scheduler saw it with the pods bound there, given back while neither the Node nor any of
/// those pods changed (by resourceVersion) and no pod was placed on it — most nodes, most
/// passes.
#[derive(Debug, Default)]
pub struct Memory {
    pods: SimPods,
    interned: Interned,
    nodes: HashMap<String, (NodeVersion, Candidate)>,
}

/// How many groups or kinds the interned numbering may hold before a pass starts it afresh
/// (each ReplicaSet adds a kind; nodes of gone shapes leave their groups behind).
const INTERNED_AT_MOST: usize = 10_000;

impl Memory {
    /// Start a pass: the numbering afresh, with nothing remembered, when it grew too large.
    fn start_pass(&mut self) {
        if self.interned.kinds.len() > INTERNED_AT_MOST
            || self.interned.groups.len() > INTERNED_AT_MOST
        {
            self.interned = Interned::default();
            self.nodes.clear();
        }
    }
}

/// The versions (uid and resourceVersion) of a Node and of the pods bound to it, in uid order.
#[derive(Debug, PartialEq, Eq)]
struct NodeVersion {
    node: (String, String),
    pods: Vec<(String, String)>,
}

/// The uid and resourceVersion of an object, when it has both.
fn version_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<(&str, &str)> {
    Some((meta.uid.as_deref()?, meta.resource_version.as_deref()?))
}

impl NodeVersion {
    /// `None` when an object has no uid or resourceVersion (nothing is then remembered).
    fn of(node: &Node, pods: &[&Pod]) -> Option<Self> {
        let own = |(uid, version): (&str, &str)| (uid.to_string(), version.to_string());
        Some(Self {
            node: own(version_of(&node.metadata)?),
            pods: pods
                .iter()
                .map(|p| version_of(&p.metadata).map(own))
                .collect::<Option<_>>()?,
        })
    }

    fn matches(&self, node: &Node, pods: &[&Pod]) -> bool {
        let same = |known: &(String, String), meta| {
            version_of(meta).is_some_and(|(uid, version)| known.0 == uid && known.1 == version)
        };
        same(&self.node, &node.metadata)
            && self.pods.len() == pods.len()
            && self
                .pods
                .iter()
                .zip(pods)
                .all(|(known, pod)| same(known, &pod.metadata))
    }
}

/// A node as the scheduler sees it.
#[derive(Debug)]
struct Candidate {
    /// Shared with the simulation inputs a pass builds (which are gone before a placement
    /// changes the node).
    node: Arc<ExistingNode>,
    unschedulable: bool,
    /// The requests of the pods on it (kept as pods are placed).
    used: Resources,
    /// Allocatable minus used.
    free: Resources,
    /// The summary it belongs to: nodes with its labels but the hostname, and its taints.
    group: usize,
    /// The kinds of its pods (as [`Interned::kinds`]), with how many pods are of each (kept as
    /// pods are placed): what it weighs in its summary.
    kinds: Vec<(usize, u32)>,
    /// The same for its pods being deleted.
    terminating_kinds: Vec<(usize, u32)>,
    /// Whether a pod was placed on it in this pass (it is then not remembered).
    placed_on: bool,
}

/// The summaries' shapes and the pods' kinds, numbered once and kept from pass to pass (see
/// [`Memory`]).
#[derive(Debug, Default)]
struct Interned {
    groups: Vec<(BTreeMap<String, String>, Vec<Taint>)>,
    group_ids: HashMap<(BTreeMap<String, String>, Vec<Taint>), usize>,
    /// What of a pod the simulation reads when the pod sits on a summarised node: its
    /// namespace and labels (which groups select it) and its required anti-affinity (which
    /// pods it keeps away); the rest is left empty. Every DaemonSet pod has its own required
    /// node affinity (its node) but they are one kind here.
    kinds: Vec<PodConstraints>,
    /// Kinds by the hash of those fields.
    kind_ids: HashMap<u64, Vec<usize>>,
}

impl Interned {
    fn group(&mut self, node: &ExistingNode) -> usize {
        let mut shared = node.labels.clone();
        shared.remove(LABEL_HOSTNAME);
        let key = (shared, node.taints.clone());
        if let Some(&id) = self.group_ids.get(&key) {
            return id;
        }
        self.groups.push(key.clone());
        self.group_ids.insert(key, self.groups.len() - 1);
        self.groups.len() - 1
    }

    fn kind(&mut self, constraints: &PodConstraints) -> usize {
        let mut hasher = std::hash::DefaultHasher::new();
        (
            &constraints.namespace,
            &constraints.labels,
            &constraints.anti_affinity,
        )
            .hash(&mut hasher);
        let ids = self.kind_ids.entry(hasher.finish()).or_default();
        if let Some(&id) = ids.iter().find(|id| {
            let known = &self.kinds[**id];
            known.namespace == constraints.namespace
                && known.labels == constraints.labels
                && known.anti_affinity == constraints.anti_affinity
        }) {
            return id;
        }
        self.kinds.push(PodConstraints {
            namespace: constraints.namespace.clone(),
            labels: constraints.labels.clone(),
            anti_affinity: constraints.anti_affinity.clone(),
            ..PodConstraints::default()
        });
        ids.push(self.kinds.len() - 1);
        self.kinds.len() - 1
    }
}

impl Candidate {
    fn new(node: ExistingNode, unschedulable: bool, interned: &mut Interned) -> Self {
        let used = node
            .pods
            .iter()
            .chain(&node.terminating)
            .fold(Resources::new(), |sum, p| sum.add(&p.requests));
        let free = node.allocatable.sub(&used);
        let group = interned.group(&node);
        let mut candidate = Self {
            node: Arc::new(node),
            unschedulable,
            used,
            free,
            group,
            kinds: Vec::new(),
            terminating_kinds: Vec::new(),
            placed_on: false,
        };
        for i in 0..candidate.node.pods.len() {
            candidate.count(i, interned);
        }
        for pod in &candidate.node.terminating {
            tally_kind(
                &mut candidate.terminating_kinds,
                interned.kind(&pod.constraints),
            );
        }
        candidate
    }

    /// Counts the pod at `i` of the node's pods among its kinds.
    fn count(&mut self, i: usize, interned: &mut Interned) {
        tally_kind(
            &mut self.kinds,
            interned.kind(&self.node.pods[i].constraints),
        );
    }

    fn place(&mut self, pod: SimPod, interned: &mut Interned) {
        self.placed_on = true;
        self.used = self.used.add(&pod.requests);
        self.free = self.node.allocatable.sub(&self.used);
        Arc::make_mut(&mut self.node).pods.push(pod);
        self.count(self.node.pods.len() - 1, interned);
    }

    /// Whether the node passes the checks that need only it and the pod: the same checks as
    /// [`rejection`], cheapest and most selective first, without building any message.
    fn admits(&self, pod: &SimPod) -> bool {
        let constraints = &pod.constraints;
        !self.unschedulable
            && pod.requests.fits(&self.free)
            && first_untolerated(&self.node.taints, &constraints.tolerations).is_none()
            && constraints.node_selector.matches_labels(&self.node.labels)
            && (constraints.required_terms.is_empty()
                || constraints
                    .required_terms
                    .iter()
                    .any(|t| t.matches_labels(&self.node.labels)))
    }
}

/// Counts one more pod of `kind` in `kinds`.
fn tally_kind(kinds: &mut Vec<(usize, u32)>, kind: usize) {
    match kinds.iter_mut().find(|(k, _)| *k == kind) {
        Some((_, n)) => *n += 1,
        None => kinds.push((kind, 1)),
    }
}

/// Why one node cannot take the pod (kube-scheduler's wording; a node may give several).
fn node_reasons(candidate: &Candidate, pod: &SimPod) -> Vec<String> {
    rejection(candidate, pod).unwrap_or_else(|| {
        vec![
            "node(s) didn't satisfy the pod's topology spread or pod (anti-)affinity constraints"
                .to_string(),
        ]
    })
}

/// Why the node cannot take the pod judging it alone (cordon, taints, selector and affinity,
/// resources), or `None` when those checks pass.
fn rejection(candidate: &Candidate, pod: &SimPod) -> Option<Vec<String>> {
    if candidate.unschedulable {
        return Some(vec!["node(s) were unschedulable".to_string()]);
    }
    let node = &candidate.node;
    if let Some(taint) = first_untolerated(&node.taints, &pod.constraints.tolerations) {
        return Some(vec![format!(
            "node(s) had untolerated taint {{{}: {}}}",
            taint.key, taint.value
        )]);
    }
    let constraints = &pod.constraints;
    let selected = constraints.node_selector.matches_labels(&node.labels)
        && (constraints.required_terms.is_empty()
            || constraints
                .required_terms
                .iter()
                .any(|t| t.matches_labels(&node.labels)));
    if !selected {
        return Some(vec![
            "node(s) didn't match Pod's node affinity/selector".to_string(),
        ]);
    }
    let short: Vec<String> = pod
        .requests
        .exceeding(&candidate.free)
        .into_iter()
        .map(|r| {
            if r == PODS {
                "Too many pods".to_string()
            } else {
                format!("Insufficient {r}")
            }
        })
        .collect();
    (!short.is_empty()).then_some(short)
}

/// The first node in `order` (nodes that admit the pod) that takes it, judging each node
/// alone with no other: exact for a pod judged under one profile that depends on no other pod
/// when no pod of the cluster has required anti-affinity (the one constraint of bound pods the
/// simulation holds against any pod placed near them).
fn first_fit(candidates: &[Candidate], order: &[(f64, usize)], sim: &SimPod) -> Option<String> {
    order.iter().find_map(|(_, i)| {
        simulate(
            vec![candidates[*i].node.clone()],
            Vec::new(),
            sim,
            &BTreeMap::new(),
        )
    })
}

/// What makes pods interchangeable for placement: the same requests, priority, DaemonSet-ness
/// and constraints (labels included, which spreads and affinity terms select).
type Shape = (Resources, i32, bool, Shared<PodConstraints>);

/// The shape of a pod (see [`Shape`]).
fn shape_of(sim: &SimPod) -> Shape {
    (
        (*sim.requests).clone(),
        sim.priority,
        sim.is_daemonset,
        sim.constraints.clone(),
    )
}

/// Nodes and pods of each kind per summary group, counted by number: what a set of nodes
/// weighs for topology spread and pod affinity when summarised.
struct Tally {
    nodes: Vec<usize>,
    pods: Vec<BTreeMap<usize, u32>>,
    terminating: Vec<BTreeMap<usize, u32>>,
}

impl Tally {
    fn of(interned: &Interned, candidates: &[Candidate], members: &[usize]) -> Self {
        let mut tally = Self {
            nodes: vec![0; interned.groups.len()],
            pods: vec![BTreeMap::new(); interned.groups.len()],
            terminating: vec![BTreeMap::new(); interned.groups.len()],
        };
        for i in members {
            tally.add(&candidates[*i]);
        }
        tally
    }

    fn add(&mut self, candidate: &Candidate) {
        self.nodes[candidate.group] += 1;
        for (kind, count) in &candidate.kinds {
            *self.pods[candidate.group].entry(*kind).or_default() += count;
        }
        for (kind, count) in &candidate.terminating_kinds {
            *self.terminating[candidate.group].entry(*kind).or_default() += count;
        }
    }

    fn remove(&mut self, candidate: &Candidate) {
        self.nodes[candidate.group] = self.nodes[candidate.group].saturating_sub(1);
        let group = candidate.group;
        for (pods, kinds) in [
            (&mut self.pods[group], &candidate.kinds),
            (&mut self.terminating[group], &candidate.terminating_kinds),
        ] {
            for (kind, count) in kinds {
                if let Some(n) = pods.get_mut(kind) {
                    *n = n.saturating_sub(*count);
                    if *n == 0 {
                        pods.remove(kind);
                    }
                }
            }
        }
    }

    fn summaries(&self, interned: &Interned) -> Vec<NodeSummary> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(g, n)| NodeSummary {
                labels: interned.groups[g].0.clone(),
                taints: interned.groups[g].1.clone(),
                nodes: *n,
                pods: self.pods[g]
                    .iter()
                    .map(|(kind, count)| (interned.kinds[*kind].clone(), *count))
                    .collect(),
                terminating: self.terminating[g]
                    .iter()
                    .map(|(kind, count)| (interned.kinds[*kind].clone(), *count))
                    .collect(),
            })
            .collect()
    }
}

/// The node the simulation places the pod on, given `whole` nodes (tried in this order) and
/// the `summaries` of the others.
fn simulate(
    whole: Vec<Arc<ExistingNode>>,
    summaries: Vec<NodeSummary>,
    sim: &SimPod,
    namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
) -> Option<String> {
    let input = SimulationInput {
        existing_nodes: whole,
        summaries,
        pods: vec![sim.clone()],
        namespace_labels: namespace_labels.clone(),
        options: SimulationOptions {
            // A pod is on its node until it is gone, for kube-scheduler's InterPodAffinity.
            terminating_pods_count_for_pod_affinity: true,
            ..SimulationOptions::default()
        },
        ..SimulationInput::default()
    };
    schedule(&input)
        .ok()
        .and_then(|r| r.existing_placements.into_iter().next())
        .map(|p| p.node)
}

/// Where the scheduling simulation places the pod given every node: the nodes in `order`
/// (those that admit it, best score first) whole, and the `others` (which cannot take it, but
/// whose pods count for its topology spread and pod affinity) summarised by their shared
/// labels and taints, so a simulation costs what the admitting nodes and the distinct pods of
/// the others cost.
fn whole_cluster_fit(
    candidates: &[Candidate],
    interned: &Interned,
    order: &[(f64, usize)],
    others: &[usize],
    sim: &SimPod,
    namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
) -> Option<String> {
    let summaries = Tally::of(interned, candidates, others).summaries(interned);
    let whole = order
        .iter()
        .map(|(_, i)| candidates[*i].node.clone())
        .collect();
    simulate(whole, summaries, sim, namespace_labels)
}

/// [`whole_cluster_fit`] for a pod the simulation judges under one profile (no preference, at
/// most one required node-affinity term): it takes the first node of `order` that fits, so
/// `order` can be tried a part at a time — the first node, then the next 2, 4, 8, … — each part
/// whole with every other node of `counted` summarised. Most pods fit on one of the first
/// nodes tried; a simulation costs what the part and the distinct pods cost, not what every
/// admitting node does.
fn part_by_part_fit(
    candidates: &[Candidate],
    interned: &Interned,
    order: &[(f64, usize)],
    counted: &[usize],
    sim: &SimPod,
    namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
) -> Option<String> {
    let mut tally = Tally::of(interned, candidates, counted);
    let mut rest = order;
    let mut size = 1;
    while !rest.is_empty() {
        let (part, after) = rest.split_at(size.min(rest.len()));
        for (_, i) in part {
            tally.remove(&candidates[*i]);
        }
        let whole = part
            .iter()
            .map(|(_, i)| candidates[*i].node.clone())
            .collect();
        let placed = simulate(whole, tally.summaries(interned), sim, namespace_labels);
        if placed.is_some() {
            return placed;
        }
        for (_, i) in part {
            tally.add(&candidates[*i]);
        }
        rest = after;
        size *= 2;
    }
    None
}

/// The pod as kube-scheduler's filters judge it: its required constraints (node selector and
/// required node affinity, tolerations, DoNotSchedule spreads, required pod affinity and
/// anti-affinity) and none of its preferences, which only score (`score`). The scheduling
/// simulation is Karpenter's, which holds preferences as requirements while some node meets
/// them; kube-scheduler never does, so a pod whose `ScheduleAnyway` spread or preferred
/// affinity no admitting node meets still lands on the best-scoring node that takes it.
fn filtered_form(sim: &SimPod) -> SimPod {
    if !sim.constraints.has_preferences() {
        return sim.clone();
    }
    SimPod {
        constraints: sim.constraints.without_preferences().into(),
        ..sim.clone()
    }
}

/// Whether the pod's node requirements name hostnames while its placement depends on other
/// pods: the simulation finds the domains of a spread by matching those requirements against
/// nodes' labels, and a summary has no hostname (it stands for many nodes), so such a pod is
/// simulated with every node whole.
fn pinned_by_hostname(constraints: &PodConstraints) -> bool {
    let names_hostname = |r: &driftwood_scheduling::Requirements| r.get(LABEL_HOSTNAME).is_some();
    constraints.depends_on_other_pods()
        && (names_hostname(&constraints.node_selector)
            || constraints.required_terms.iter().any(names_hostname)
            || constraints
                .preferred_terms
                .iter()
                .any(|(_, r)| names_hostname(r)))
}

/// kube-scheduler's FitError message: counts per reason, sorted, e.g.
/// `0/3 nodes are available: 1 node(s) had untolerated taint {karpenter.sh/disrupted: }, 2 Insufficient cpu.`
pub fn fit_error_message(node_count: usize, reasons: &BTreeMap<String, usize>) -> String {
    if node_count == 0 {
        return "no nodes available to schedule pods".to_string();
    }
    let mut parts: Vec<String> = reasons
        .iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    parts.sort();
    format!("0/{node_count} nodes are available: {}.", parts.join(", "))
}

/// Decide for every pending pod. `assumed` maps pod keys (`ns/name`) to the node a binding was
/// already issued for (the caches may not show it yet); those pods count as bound there.
pub fn decide<N: Borrow<Node>, P: Borrow<Pod>>(
    nodes: &[N],
    pods: &[P],
    namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
    assumed: &BTreeMap<String, String>,
) -> Vec<Decision> {
    decide_with(
        nodes,
        pods,
        namespace_labels,
        assumed,
        Judging::Fastest,
        &mut Memory::default(),
    )
}

/// [`decide`], working out again only the nodes that changed (the Node, a pod bound to it, or
/// a pod placed on it) since the last pass that used `memory`, and converting only the pods of
/// those nodes and the pending pods that changed. Same decisions.
pub fn decide_remembering<N: Borrow<Node>, P: Borrow<Pod>>(
    nodes: &[N],
    pods: &[P],
    namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
    assumed: &BTreeMap<String, String>,
    memory: &mut Memory,
) -> Vec<Decision> {
    memory.start_pass();
    let decisions = decide_with(
        nodes,
        pods,
        namespace_labels,
        assumed,
        Judging::Fastest,
        memory,
    );
    memory.pods.end_pass();
    decisions
}

/// How [`decide_with`] judges pods; every way decides the same (the tests compare them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Judging {
    /// Node by node when no pod depends on other pods; otherwise the nodes that admit the pod
    /// whole and the others summarised.
    Fastest,
    /// Every node whole, for every pod.
    Whole,
}

/// [`decide`], with the node-by-node shortcut allowed or not (the tests compare the two).
fn decide_with<N: Borrow<Node>, P: Borrow<Pod>>(
    nodes: &[N],
    pods: &[P],
    namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
    assumed: &BTreeMap<String, String>,
    judging: Judging,
    memory: &mut Memory,
) -> Vec<Decision> {
    let Memory {
        pods: known,
        interned,
        nodes: remembered,
    } = memory;
    let shortcut = judging == Judging::Fastest;
    let nodes: Vec<&Node> = nodes.iter().map(Borrow::borrow).collect();
    let pods: Vec<&Pod> = pods.iter().map(Borrow::borrow).collect();
    let mut by_node: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    let mut pending: Vec<&Pod> = Vec::new();
    for pod in pods {
        if finished(pod) {
            continue;
        }
        let node = bound_node(pod).or_else(|| assumed.get(&key_of(pod)).map(String::as_str));
        match node {
            Some(node) => by_node.entry(node).or_default().push(pod),
            None if is_pending(pod) => pending.push(pod),
            None => {}
        }
    }
    // Each node with its pods: as the last pass left it when nothing of it changed, else
    // worked out again.
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut versions: Vec<Option<NodeVersion>> = Vec::new();
    let mut last_pass = std::mem::take(remembered);
    let mut sorted_nodes: Vec<&Node> = nodes.clone();
    sorted_nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for node in sorted_nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let mut bound = by_node.remove(name).unwrap_or_default();
        bound.sort_by(|a, b| a.metadata.uid.cmp(&b.metadata.uid));
        if let Some((version, candidate)) = last_pass.remove(name)
            && version.matches(node, &bound)
        {
            candidates.push(candidate);
            versions.push(Some(version));
            continue;
        }
        // Pods being deleted hold their requests and ports, and count for pod affinity but
        // not for topology spread, until they are gone (kube-scheduler's NodeInfo keeps them;
        // its PodTopologySpread skips them).
        let mut running = Vec::new();
        let mut terminating = Vec::new();
        for pod in &bound {
            if let Ok(sim) = known.of(pod) {
                match pod.metadata.deletion_timestamp {
                    Some(_) => terminating.push(sim),
                    None => running.push(sim),
                }
            }
        }
        let Ok(mut existing) = ExistingNode::from_node(node, running) else {
            continue;
        };
        existing.terminating = terminating;
        // kube-scheduler honours every taint, whatever Karpenter would expect to go away.
        existing.initialized = true;
        let unschedulable = node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        candidates.push(Candidate::new(existing, unschedulable, interned));
        versions.push(NodeVersion::of(node, &bound));
    }
    pending.sort_by(|a, b| {
        let priority = |p: &Pod| p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        priority(b)
            .cmp(&priority(a))
            .then_with(|| {
                a.metadata
                    .creation_timestamp
                    .cmp(&b.metadata.creation_timestamp)
            })
            .then_with(|| key_of(a).cmp(&key_of(b)))
    });

    // A pod whose placement depends on no other pod can be judged node by node with no other
    // node in the simulation, unless some pod of the cluster (bound, or pending and so maybe
    // placed in this pass) has required anti-affinity: the simulation holds that against any
    // pod it selects, as kube-scheduler does.
    let anti_affinity_anywhere = shortcut
        && (candidates.iter().any(|c| {
            c.kinds
                .iter()
                .chain(&c.terminating_kinds)
                .any(|(kind, _)| !interned.kinds[*kind].anti_affinity.is_empty())
        }) || pending.iter().any(|p| {
            known
                .of(p)
                .is_ok_and(|sim| !sim.constraints.anti_affinity.is_empty())
        }));
    let mut decisions = Vec::new();
    let mut failed_shapes: HashMap<Shape, String> = HashMap::new();
    for pod in pending {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let sim = match known.of(pod) {
            Ok(sim) => sim,
            Err(error) => {
                decisions.push(Decision::Unschedulable {
                    namespace,
                    name,
                    message: error.to_string(),
                });
                continue;
            }
        };
        // A pod like one that already fit nowhere fits nowhere either, with the same message,
        // until a placement changes the nodes (the remembered failures are then forgotten).
        let shape = shortcut.then(|| shape_of(&sim));
        if let Some(message) = shape.as_ref().and_then(|s| failed_shapes.get(s)) {
            decisions.push(Decision::Unschedulable {
                namespace,
                name,
                message: message.clone(),
            });
            continue;
        }
        // The nodes that can take the pod judging each alone, best kube-scheduler score first,
        // then by name (the pod-dependent constraints are the simulation's to check).
        let feasible: Vec<usize> = candidates
            .iter()
            .enumerate()
            .filter(|(_, c)| c.admits(&sim))
            .map(|(i, _)| i)
            .collect();
        let scorable: Vec<score::Scorable<'_>> = feasible
            .iter()
            .map(|i| score::Scorable {
                node: &candidates[*i].node,
                used: &candidates[*i].used,
            })
            .collect();
        let mut order: Vec<(f64, usize)> = score::scores(&scorable, &sim, namespace_labels)
            .into_iter()
            .zip(feasible)
            .map(|(score, i)| (-score, i))
            .collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        // Nodes that cannot take this pod still count for its topology spread and affinity.
        let counted = |admitting_too: bool| -> Vec<usize> {
            candidates
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.unschedulable && (admitting_too || !c.admits(&sim)))
                .map(|(i, _)| i)
                .collect()
        };
        // kube-scheduler filters by the pod's required constraints only; its preferences
        // (ScheduleAnyway spreads, preferred node and pod affinity) were weighed in `order`.
        let filtered = filtered_form(&sim);
        let placed = if judging == Judging::Whole || pinned_by_hostname(&filtered.constraints) {
            // Every node whole: those that cannot take the pod come last.
            order.extend(counted(false).into_iter().map(|i| (f64::INFINITY, i)));
            whole_cluster_fit(
                &candidates,
                interned,
                &order,
                &[],
                &filtered,
                namespace_labels,
            )
        } else if filtered.constraints.required_terms.len() > 1 {
            // The simulation tries the terms one after the other over every admitting node.
            let others = counted(false);
            whole_cluster_fit(
                &candidates,
                interned,
                &order,
                &others,
                &filtered,
                namespace_labels,
            )
        } else if !anti_affinity_anywhere && !filtered.constraints.depends_on_other_pods() {
            // Placed on the first node of `order` that takes it, judged alone.
            first_fit(&candidates, &order, &filtered)
        } else {
            // A part of the order at a time, the rest summarised.
            part_by_part_fit(
                &candidates,
                interned,
                &order,
                &counted(true),
                &filtered,
                namespace_labels,
            )
        };
        match placed.and_then(|node| candidates.iter_mut().find(|c| c.node.name == node)) {
            Some(candidate) => {
                decisions.push(Decision::Bind {
                    namespace,
                    name,
                    node: candidate.node.name.clone(),
                });
                candidate.place(sim, interned);
                failed_shapes.clear();
            }
            None => {
                let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
                for candidate in &candidates {
                    for reason in node_reasons(candidate, &sim) {
                        *reasons.entry(reason).or_default() += 1;
                    }
                }
                let message = fit_error_message(candidates.len(), &reasons);
                if let Some(shape) = shape {
                    failed_shapes.insert(shape, message.clone());
                }
                decisions.push(Decision::Unschedulable {
                    namespace,
                    name,
                    message,
                });
            }
        }
    }
    // What the next pass may use: the nodes no pod was placed on.
    for (candidate, version) in candidates.into_iter().zip(versions) {
        if let Some(version) = version
            && !candidate.placed_on
        {
            remembered.insert(candidate.node.name.clone(), (version, candidate));
        }
    }
    decisions
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, cpu: &str, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "us-west-2a"}},
            "spec": {"taints": taints},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}
        }))
        .unwrap()
    }

    fn pod(name: &str, cpu: &str, node: Option<&str>) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}
        }))
        .unwrap()
    }

    fn bound_to(decisions: &[Decision], pod: &str) -> Option<String> {
        decisions.iter().find_map(|d| match d {
            Decision::Bind { name, node, .. } if name == pod => Some(node.clone()),
            _ => None,
        })
    }

    /// [`decide_with`] judging `judging`, with no namespace labels, no binding assumed and
    /// nothing remembered.
    fn judged(nodes: &[Node], pods: &[Pod], judging: Judging) -> Vec<Decision> {
        decide_with(
            nodes,
            pods,
            &BTreeMap::new(),
            &BTreeMap::new(),
            judging,
            &mut Memory::default(),
        )
    }

    fn message_for(decisions: &[Decision], pod: &str) -> Option<String> {
        decisions.iter().find_map(|d| match d {
            Decision::Unschedulable { name, message, .. } if name == pod => Some(message.clone()),
            _ => None,
        })
    }

    /// A pod like one that fit nowhere is tried again after a placement: here a smaller pod of
    /// its zone spread lands in the other zone, the least-loaded domain rises, and the next pod
    /// like the one that failed fits where the skew kept it out. A placement of another app
    /// leaves it failing, with the message the nodes give after that placement. Judged whole,
    /// the same.
    #[test]
    fn a_failed_pod_is_tried_again_after_a_placement_its_spread_counts() {
        let zoned = |name: &str, zone: &str, cpu: &str| -> Node {
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
                "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}
            }))
            .unwrap()
        };
        let web = |name: &str, cpu: &str, node: Option<&str>| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
                "spec": {"nodeName": node,
                         "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
                         "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                             "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]}
            }))
            .unwrap()
        };
        let nodes = vec![zoned("na", "a", "4"), zoned("nb", "b", "1")];
        let pods = vec![
            web("a-bound", "100m", Some("na")),
            // Zone a would be 2 against 0; zone b has no room for 2 cpu.
            web("b-big", "2", None),
            // Another app takes room: the big pod still fits nowhere.
            pod("c-other", "100m", None),
            web("d-big", "2", None),
            // A web pod in zone b: 1 against 1, so a second pod in zone a is within the skew.
            web("e-small", "500m", None),
            web("f-big", "2", None),
        ];
        let fastest = judged(&nodes, &pods, Judging::Fastest);
        assert_eq!(bound_to(&fastest, "b-big"), None);
        assert!(bound_to(&fastest, "c-other").is_some());
        assert_eq!(bound_to(&fastest, "d-big"), None);
        assert_eq!(bound_to(&fastest, "e-small").as_deref(), Some("nb"));
        assert_eq!(bound_to(&fastest, "f-big").as_deref(), Some("na"));
        assert!(message_for(&fastest, "d-big").is_some());
        let whole = judged(&nodes, &pods, Judging::Whole);
        assert_eq!(fastest, whole);
    }

    /// Generated clusters: nodes of several sizes, zones, labels and taints, some cordoned;
    /// pods bound and pending with selectors, tolerations and preferred node affinity. The
    /// node-by-node shortcut decides exactly what the whole-cluster simulation decides.
    #[test]
    fn the_node_by_node_shortcut_decides_as_the_whole_cluster_simulation() {
        let mut next = driftwood_scheduling::testkit::seeded(0x2545_F491_4F6C_DD1D);
        for case in 0..200 {
            let node_count = 1 + next(12);
            let nodes: Vec<Node> = (0..node_count)
                .map(|i| {
                    let cpu = ["1", "2", "4"][next(3) as usize];
                    let taints = if next(4) == 0 {
                        json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
                    } else {
                        json!([])
                    };
                    let zone = ["a", "b"][next(2) as usize];
                    let tier = ["web", "batch"][next(2) as usize];
                    serde_json::from_value(json!({
                        "metadata": {"name": format!("n{i:02}"), "labels": {
                            "kubernetes.io/hostname": format!("n{i:02}"),
                            "topology.kubernetes.io/zone": zone,
                            "tier": tier}},
                        "spec": {"taints": taints, "unschedulable": next(8) == 0},
                        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}
                    }))
                    .unwrap()
                })
                .collect();
            let pods: Vec<Pod> = (0..next(20))
                .map(|i| {
                    let cpu = ["100m", "500m", "1"][next(3) as usize];
                    let bound =
                        (next(3) == 0).then(|| format!("n{:02}", next(node_count)));
                    let mut spec = json!({"nodeName": bound, "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]});
                    if next(3) == 0 {
                        let tier = ["web", "batch"][next(2) as usize];
                        spec["nodeSelector"] = json!({ "tier": tier });
                    }
                    if next(3) == 0 {
                        spec["tolerations"] = json!([{"key": "dedicated", "operator": "Exists"}]);
                    }
                    if next(5) == 0 {
                        // Two required terms: the simulation tries them one after the other.
                        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]},
                            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]}]}}});
                    } else if next(4) == 0 {
                        spec["affinity"] = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 10, "preference": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]}}]}});
                    }
                    let mut meta = json!({"name": format!("p{i:02}"), "namespace": "default", "labels": {"app": "x"}});
                    if next(2) == 0 {
                        // Pods of one controller share a template: same requests and constraints.
                        let owner = next(3);
                        meta["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("rs{owner}"), "uid": format!("rs{owner}"), "controller": true}]);
                        let cpu = ["500m", "1", "2"][owner as usize];
                        spec = json!({"nodeName": bound, "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]});
                    }
                    serde_json::from_value(json!({"metadata": meta, "spec": spec})).unwrap()
                })
                .collect();
            assert_eq!(
                judged(&nodes, &pods, Judging::Fastest),
                judged(&nodes, &pods, Judging::Whole),
                "case {case}"
            );
        }
    }

    /// Generated clusters in two zones whose pods carry zone spread (DoNotSchedule and
    /// ScheduleAnyway), hostname anti-affinity and zone affinity, on nodes of several sizes,
    /// some tainted or cordoned, some bound pods being deleted: judging a pending pod against the nodes that admit it whole and
    /// the others summarised binds every pod where the whole-cluster simulation binds it.
    #[test]
    fn summarising_the_nodes_a_pod_cannot_use_decides_as_the_whole_cluster() {
        let mut next = driftwood_scheduling::testkit::seeded(0x9E37_79B9_7F4A_7C15);
        let mut bound_somewhere = 0;
        for case in 0..200 {
            let node_count = 1 + next(14);
            let with_anti_affinity = next(2) == 0;
            let anti_key =
                ["kubernetes.io/hostname", "topology.kubernetes.io/zone"][next(2) as usize];
            let nodes: Vec<Node> = (0..node_count)
                .map(|i| {
                    let cpu = ["1", "2", "4"][next(3) as usize];
                    let taints = if next(5) == 0 {
                        json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
                    } else {
                        json!([])
                    };
                    let zone = ["a", "b", "c"][next(3) as usize];
                    let mut node: Node = serde_json::from_value(json!({
                        "metadata": {"name": format!("n{i:02}"), "labels": {
                            "kubernetes.io/hostname": format!("n{i:02}"),
                            "topology.kubernetes.io/zone": zone,
                            "rack": format!("r{}", next(3))}},
                        "spec": {"taints": taints, "unschedulable": next(10) == 0},
                        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}
                    }))
                    .unwrap();
                    // A few nodes have no zone: pods constrained on the zone cannot go there.
                    if next(8) == 0 {
                        node.metadata
                            .labels
                            .as_mut()
                            .unwrap()
                            .remove("topology.kubernetes.io/zone");
                    }
                    node
                })
                .collect();
            let pods: Vec<Pod> = (0..1 + next(24))
                .map(|i| {
                    let app = ["web", "api", "cache", "db", "plain", "edge", "pinned"][next(7) as usize];
                    // Half the clusters have no required anti-affinity: their plain pods are
                    // judged node by node with no other node.
                    let app = if app == "cache" && !with_anti_affinity { "plain" } else { app };
                    let cpu = ["100m", "500m", "1"][next(3) as usize];
                    let bound = (next(2) == 0).then(|| format!("n{:02}", next(node_count)));
                    let mut spec = json!({"nodeName": bound, "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]});
                    let selector = json!({"matchLabels": {"app": app}});
                    match app {
                        "web" => spec["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}]),
                        "api" => spec["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector}]),
                        // Its anti-affinity keeps plain pods off its node (or zone) too.
                        "cache" => spec["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": anti_key, "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["cache", "plain"]}]}}]}}),
                        "plain" => {}
                        // Spread over racks, on two named hosts.
                        "pinned" => {
                            let hosts = [format!("n{:02}", next(node_count)), format!("n{:02}", next(node_count))];
                            spec["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}]);
                            spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": hosts}]}]}}});
                        }
                        // Every kind of preference: tried all required, then dropped in turn.
                        "edge" => {
                            let edge_anti_key = ["kubernetes.io/hostname", "topology.kubernetes.io/zone"][next(2) as usize];
                            spec["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector}]);
                            spec["affinity"] = json!({
                                "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "web"}}}}]},
                                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 20, "podAffinityTerm": {"topologyKey": edge_anti_key, "labelSelector": selector}}]},
                                "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                                    {"weight": 10, "preference": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}},
                                    {"weight": 5, "preference": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["c"]}]}}]}});
                        }
                        _ => spec["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "web"}}}]}}),
                    }
                    if next(4) == 0 {
                        spec["tolerations"] = json!([{"key": "dedicated", "operator": "Exists"}]);
                    }
                    let mut meta = json!({"name": format!("p{i:02}"), "namespace": "default", "labels": {"app": app}});
                    // Now and then a bound pod being deleted: it holds its room and counts for
                    // pod affinity, not for topology spread.
                    if bound.is_some() && next(5) == 0 {
                        meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
                    }
                    serde_json::from_value(json!({"metadata": meta, "spec": spec})).unwrap()
                })
                .collect();
            let fastest = judged(&nodes, &pods, Judging::Fastest);
            let whole = judged(&nodes, &pods, Judging::Whole);
            let binds = |d: &[Decision]| -> Vec<(String, Option<String>)> {
                d.iter()
                    .map(|d| match d {
                        Decision::Bind { name, node, .. } => (name.clone(), Some(node.clone())),
                        Decision::Unschedulable { name, .. } => (name.clone(), None),
                    })
                    .collect()
            };
            assert_eq!(binds(&fastest), binds(&whole), "case {case}");
            bound_somewhere += fastest
                .iter()
                .filter(|d| matches!(d, Decision::Bind { .. }))
                .count();
        }
        assert!(bound_somewhere > 200, "{bound_somewhere} pods bound");
    }

    #[test]
    fn the_least_allocated_node_wins_then_the_name() {
        let nodes = [
            node("b", "2", json!([])),
            node("a", "2", json!([])),
            node("c", "2", json!([])),
        ];
        let pods = [
            pod("busy", "1", Some("a")),
            pod("new", "100m", None),
            pod("next", "100m", None),
        ];
        let decisions = decide(&nodes, &pods, &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(bound_to(&decisions, "new").as_deref(), Some("b"));
        assert_eq!(
            bound_to(&decisions, "next").as_deref(),
            Some("c"),
            "b now holds 'new'"
        );
    }

    /// A pod's scheduling form, and a node with the pods bound to it, are kept between passes
    /// while their resourceVersions stay, and worked out again when one changes or a pod is
    /// placed on the node; a pass decides as one without memory would.
    #[test]
    fn remembered_pods_and_nodes_are_worked_out_again_when_they_change() {
        let versioned = |name: &str, cpu: &str, node: Option<&str>, version: &str| {
            let mut pod = pod(name, cpu, node);
            pod.metadata.uid = Some(format!("uid-{name}"));
            pod.metadata.resource_version = Some(version.to_string());
            pod
        };
        let versioned_node = |name: &str, cpu: &str, version: &str| {
            let mut node = node(name, cpu, json!([]));
            node.metadata.uid = Some(format!("uid-{name}"));
            node.metadata.resource_version = Some(version.to_string());
            node
        };
        let mut memory = Memory::default();
        let mut pass = |nodes: &[Node], pods: &[Pod]| {
            let remembered =
                decide_remembering(nodes, pods, &BTreeMap::new(), &BTreeMap::new(), &mut memory);
            assert_eq!(
                remembered,
                decide(nodes, pods, &BTreeMap::new(), &BTreeMap::new())
            );
            let mut kept: Vec<String> = memory.nodes.keys().cloned().collect();
            kept.sort();
            (remembered, kept, memory.pods.known.len())
        };
        let nodes = [versioned_node("a", "2", "1"), versioned_node("b", "2", "1")];
        let first = [
            versioned("busy", "1500m", Some("a"), "1"),
            versioned("new", "1", None, "1"),
        ];
        let (decided, kept, pods) = pass(&nodes, &first);
        assert_eq!(bound_to(&decided, "new").as_deref(), Some("b"));
        // `new` was placed on b: only a is kept.
        assert_eq!(kept, vec!["a"]);
        assert_eq!(pods, 2);

        // `busy` shrinks (a new version) and `b` fills: `new` now fits on `a` only.
        let second = [
            versioned("busy", "100m", Some("a"), "2"),
            versioned("filler", "1900m", Some("b"), "1"),
            versioned("new", "1", None, "1"),
        ];
        let (decided, kept, _) = pass(&nodes, &second);
        assert_eq!(bound_to(&decided, "new").as_deref(), Some("a"));
        assert_eq!(kept, vec!["b"]);

        // b grows (a new version of the Node): `new` fits there again.
        let grown = [versioned_node("a", "2", "1"), versioned_node("b", "4", "2")];
        let third = [
            versioned("busy", "1900m", Some("a"), "3"),
            versioned("filler", "1900m", Some("b"), "1"),
            versioned("new", "1", None, "1"),
        ];
        let (decided, kept, _) = pass(&grown, &third);
        assert_eq!(bound_to(&decided, "new").as_deref(), Some("b"));
        assert_eq!(kept, vec!["a"]);

        // A pass forgets the pods and nodes it no longer saw.
        let (_, kept, _) = pass(&grown[1..], &third[1..2]);
        assert_eq!(kept, vec!["b"]);
        assert!(!memory.pods.known.contains_key("uid-busy"));
    }

    /// Generated sequences of passes over one cluster: pods bound where the last pass decided
    /// (a new version), resized or deleted, Nodes resized or cordoned, pods added. Every pass
    /// with memory decides what a pass without memory decides.
    #[test]
    fn passes_with_memory_decide_as_passes_without() {
        let mut next = driftwood_scheduling::testkit::seeded(0x51_7CC1_B727_220A);
        let mut kept_somewhere = 0;
        for case in 0..60 {
            let mut version = 0u64;
            let mut bump =
                |meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
                    version += 1;
                    meta.resource_version = Some(version.to_string());
                };
            let mut nodes: Vec<Node> = (0..1 + next(8))
                .map(|i| {
                    let zone = ["a", "b", "c"][next(3) as usize];
                    let cpu = ["2", "4"][next(2) as usize];
                    let mut node = zonal_node(&format!("n{i}"), zone, cpu, json!([]));
                    node.metadata.uid = Some(format!("node-{i}"));
                    node
                })
                .collect();
            for node in &mut nodes {
                bump(&mut node.metadata);
            }
            let mut made = 0;
            let mut make = |next: &mut dyn FnMut(u64) -> u64| {
                made += 1;
                let app = ["web", "plain", "cache"][next(3) as usize];
                let cpu = ["100m", "500m", "1"][next(3) as usize];
                let mut spec = json!({"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]});
                match app {
                    "web" => {
                        spec["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}])
                    }
                    "cache" => {
                        spec["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "cache"}}}]}})
                    }
                    _ => {}
                }
                let mut pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("p{made:03}"), "namespace": "default", "uid": format!("pod-{made}"), "labels": {"app": app}},
                    "spec": spec,
                }))
                .unwrap();
                pod.metadata.resource_version = Some(format!("p{made}"));
                pod
            };
            let mut pods: Vec<Pod> = (0..next(16)).map(|_| make(&mut next)).collect();
            let mut memory = Memory::default();
            let labels = BTreeMap::new();
            let assumed = BTreeMap::new();
            for round in 0..6 {
                let remembered = decide_remembering(&nodes, &pods, &labels, &assumed, &mut memory);
                assert_eq!(
                    remembered,
                    decide(&nodes, &pods, &labels, &assumed),
                    "case {case} round {round}"
                );
                kept_somewhere += memory.nodes.len();
                // Bind most of what was decided.
                for decision in &remembered {
                    if let Decision::Bind { name, node, .. } = decision
                        && next(4) != 0
                        && let Some(pod) = pods
                            .iter_mut()
                            .find(|p| p.metadata.name.as_deref() == Some(name))
                    {
                        pod.spec.as_mut().unwrap().node_name = Some(node.clone());
                        bump(&mut pod.metadata);
                    }
                }
                // Change a few pods and nodes, remove and add some pods.
                for pod in &mut pods {
                    if next(8) == 0 {
                        let cpu = ["100m", "1500m"][next(2) as usize];
                        pod.spec.as_mut().unwrap().containers[0].resources = Some(
                            serde_json::from_value(json!({"requests": {"cpu": cpu}})).unwrap(),
                        );
                        bump(&mut pod.metadata);
                    }
                }
                if !pods.is_empty() && next(3) == 0 {
                    pods.remove(next(pods.len() as u64) as usize);
                }
                for _ in 0..next(4) {
                    pods.push(make(&mut next));
                }
                for node in &mut nodes {
                    match next(10) {
                        0 => {
                            node.spec.get_or_insert_with(Default::default).unschedulable =
                                Some(next(2) == 0);
                            bump(&mut node.metadata);
                        }
                        1 => {
                            let cpu = ["2", "4", "8"][next(3) as usize];
                            node.status
                                .as_mut()
                                .unwrap()
                                .allocatable
                                .as_mut()
                                .unwrap()
                                .insert(
                                    "cpu".to_string(),
                                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                                        cpu.to_string(),
                                    ),
                                );
                            bump(&mut node.metadata);
                        }
                        _ => {}
                    }
                }
            }
        }
        assert!(
            kept_somewhere > 100,
            "{kept_somewhere} nodes kept between passes"
        );
    }

    fn zonal_node(name: &str, zone: &str, cpu: &str, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
            "spec": {"taints": taints},
            "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}
        }))
        .unwrap()
    }

    /// A replica of the blueprint's workload: zone and hostname spread, `ScheduleAnyway`.
    fn spread_replica(name: &str) -> Pod {
        let spread = |key: &str| {
            json!({"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
                                        "labelSelector": {"matchLabels": {"app": "inflate"}}})
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "inflate"},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}],
                     "topologySpreadConstraints": [spread("topology.kubernetes.io/zone"), spread("kubernetes.io/hostname")]}
        }))
        .unwrap()
    }

    /// kube-scheduler's PodTopologySpread score (weight 2) outweighs LeastAllocated (weight 1):
    /// a big node in one zone does not take every replica while a smaller one in another zone is
    /// empty. Least allocated alone would put all four on `a-big`.
    #[test]
    fn schedule_anyway_spread_outweighs_least_allocated() {
        let nodes = [
            zonal_node("a-big", "us-west-2a", "16", json!([])),
            zonal_node("b-small", "us-west-2b", "4", json!([])),
        ];
        let pods: Vec<Pod> = (0..4)
            .map(|i| spread_replica(&format!("inflate-{i}")))
            .collect();
        let decisions = decide(&nodes, &pods, &BTreeMap::new(), &BTreeMap::new());
        let on = |node: &str| {
            pods.iter()
                .filter(|p| {
                    bound_to(&decisions, p.metadata.name.as_deref().unwrap()).as_deref()
                        == Some(node)
                })
                .count()
        };
        assert_eq!((on("a-big"), on("b-small")), (2, 2));
    }

    /// Issue 16's blueprint: 30 replicas with zone and hostname spread `ScheduleAnyway` on the 18
    /// nodes a fresh NodePool opened (6 per zone, alike): no node is left empty, every node gets
    /// one or two replicas, and the zones get 10 each.
    #[test]
    fn thirty_spread_replicas_leave_no_node_empty() {
        let zones = ["us-west-2a", "us-west-2b", "us-west-2c"];
        let nodes: Vec<Node> = (0..18)
            .map(|i| zonal_node(&format!("node-{i:02}"), zones[i % 3], "4", json!([])))
            .collect();
        let pods: Vec<Pod> = (0..30)
            .map(|i| spread_replica(&format!("inflate-{i:02}")))
            .collect();
        let decisions = decide(&nodes, &pods, &BTreeMap::new(), &BTreeMap::new());
        let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
        let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
        for pod in &pods {
            let node = bound_to(&decisions, pod.metadata.name.as_deref().unwrap())
                .expect("every replica is bound");
            let index: usize = node.trim_start_matches("node-").parse().unwrap();
            *per_zone.entry(zones[index % 3]).or_default() += 1;
            *per_node.entry(node).or_default() += 1;
        }
        assert_eq!(per_node.len(), 18, "no node left empty: {per_node:?}");
        assert!(
            per_node.values().all(|n| (1..=2).contains(n)),
            "{per_node:?}"
        );
        assert_eq!(
            per_zone.values().copied().collect::<Vec<_>>(),
            vec![10, 10, 10]
        );
    }

    /// InterPodAffinity (weight 2): a pod preferring to be near its cache lands in the cache's
    /// zone although the other zone's node is emptier; one preferring to avoid it goes away.
    #[test]
    fn preferred_pod_affinity_draws_and_anti_affinity_repels() {
        let nodes = [
            zonal_node("a", "us-west-2a", "4", json!([])),
            zonal_node("b", "us-west-2b", "4", json!([])),
        ];
        let mut cache = pod("cache", "2", Some("a"));
        cache.metadata.labels = Some([("app".to_string(), "cache".to_string())].into());
        let term = json!({"weight": 100, "podAffinityTerm": {"topologyKey": "topology.kubernetes.io/zone",
                          "labelSelector": {"matchLabels": {"app": "cache"}}}});
        let near: Pod = serde_json::from_value(json!({
            "metadata": {"name": "near", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
                     "affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term.clone()]}}}
        }))
        .unwrap();
        let far: Pod = serde_json::from_value(json!({
            "metadata": {"name": "far", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
                     "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}}
        }))
        .unwrap();
        let decisions = decide(
            &nodes,
            &[cache.clone(), near],
            &BTreeMap::new(),
            &BTreeMap::new(),
        );
        assert_eq!(
            bound_to(&decisions, "near").as_deref(),
            Some("a"),
            "least allocated alone picks b"
        );
        let decisions = decide(&nodes, &[cache, far], &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(bound_to(&decisions, "far").as_deref(), Some("b"));
    }

    /// TaintToleration (weight 3): a node with a PreferNoSchedule taint the pod does not tolerate
    /// is used only when the others are worse.
    #[test]
    fn prefer_no_schedule_taints_are_avoided() {
        let nodes = [
            node(
                "a",
                "2",
                json!([{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]),
            ),
            node("b", "2", json!([])),
        ];
        let pods = [pod("busy", "1", Some("b")), pod("new", "100m", None)];
        let decisions = decide(&nodes, &pods, &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(bound_to(&decisions, "new").as_deref(), Some("b"));
    }

    /// kube-scheduler's filters never read a preference (NodeAffinity's preferred terms only
    /// score): a pod preferring `tier: gold` goes to the plain node when the gold node's
    /// PreferNoSchedule taint outweighs the preference (TaintToleration 3 × 100 against
    /// NodeAffinity 2 × 100). Karpenter's simulation would hold the preference as a requirement
    /// while the gold node meets it, and place the pod there.
    #[test]
    fn a_preference_only_scores_as_in_kube_scheduler() {
        let mut gold = node(
            "gold",
            "4",
            json!([{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]),
        );
        gold.metadata
            .labels
            .get_or_insert_default()
            .insert("tier".to_string(), "gold".to_string());
        let nodes = [gold, node("plain", "4", json!([]))];
        let picky: Pod = serde_json::from_value(json!({
            "metadata": {"name": "picky", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
                     "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                         {"weight": 1, "preference": {"matchExpressions": [
                             {"key": "tier", "operator": "In", "values": ["gold"]}]}}]}}}
        }))
        .unwrap();
        for judging in [Judging::Fastest, Judging::Whole] {
            let decisions = judged(&nodes, std::slice::from_ref(&picky), judging);
            assert_eq!(
                bound_to(&decisions, "picky").as_deref(),
                Some("plain"),
                "{judging:?}"
            );
        }
        // Without the taint the preference wins the score.
        let mut untainted = nodes.clone();
        untainted[0].spec.get_or_insert_default().taints = None;
        let decisions = decide(&untainted, &[picky], &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(bound_to(&decisions, "picky").as_deref(), Some("gold"));
    }

    #[test]
    fn pods_placed_in_one_pass_use_up_capacity() {
        let nodes = [node("a", "1", json!([]))];
        let pods = [pod("first", "600m", None), pod("second", "600m", None)];
        let decisions = decide(&nodes, &pods, &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(bound_to(&decisions, "first").as_deref(), Some("a"));
        assert_eq!(
            message_for(&decisions, "second").as_deref(),
            Some("0/1 nodes are available: 1 Insufficient cpu.")
        );
    }

    #[test]
    fn assumed_bindings_count_as_bound() {
        let nodes = [node("a", "1", json!([]))];
        let pods = [pod("first", "600m", None), pod("second", "600m", None)];
        let assumed = BTreeMap::from([("default/first".to_string(), "a".to_string())]);
        let decisions = decide(&nodes, &pods, &BTreeMap::new(), &assumed);
        assert_eq!(decisions.len(), 1);
        assert!(message_for(&decisions, "second").is_some());
    }

    #[test]
    fn the_message_counts_each_reason_like_kube_scheduler() {
        let nodes = [
            node(
                "a",
                "4",
                json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
            ),
            node("b", "1", json!([])),
            node(
                "c",
                "1",
                json!([{"key": "soft", "effect": "PreferNoSchedule"}]),
            ),
        ];
        let pods = [pod("big", "2", None)];
        let decisions = decide(&nodes, &pods, &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(
            message_for(&decisions, "big").as_deref(),
            Some(
                "0/3 nodes are available: 1 node(s) had untolerated taint {karpenter.sh/disrupted: }, 2 Insufficient cpu."
            )
        );
    }

    #[test]
    fn cordoned_nodes_and_selectors_keep_pods_off() {
        let mut cordoned = node("a", "4", json!([]));
        cordoned.spec.as_mut().unwrap().unschedulable = Some(true);
        let nodes = [cordoned, node("b", "4", json!([]))];
        let mut picky = pod("picky", "100m", None);
        picky.spec.as_mut().unwrap().node_selector = Some(BTreeMap::from([(
            "kubernetes.io/arch".to_string(),
            "arm64".to_string(),
        )]));
        let decisions = decide(
            &nodes,
            &[picky, pod("plain", "100m", None)],
            &BTreeMap::new(),
            &BTreeMap::new(),
        );
        assert_eq!(
            message_for(&decisions, "picky").as_deref(),
            Some(
                "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) were unschedulable."
            )
        );
        assert_eq!(bound_to(&decisions, "plain").as_deref(), Some("b"));
    }

    #[test]
    fn tolerated_taints_and_no_execute_taints_are_honoured() {
        let nodes = [node(
            "a",
            "4",
            json!([{"key": "dedicated", "value": "gpu", "effect": "NoExecute"}]),
        )];
        let mut tolerant = pod("tolerant", "100m", None);
        tolerant.spec.as_mut().unwrap().tolerations = Some(vec![serde_json::from_value(
            json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute"}),
        )
        .unwrap()]);
        let decisions = decide(
            &nodes,
            &[tolerant, pod("plain", "100m", None)],
            &BTreeMap::new(),
            &BTreeMap::new(),
        );
        assert_eq!(bound_to(&decisions, "tolerant").as_deref(), Some("a"));
        assert_eq!(
            message_for(&decisions, "plain").as_deref(),
            Some("0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}.")
        );
    }

    #[test]
    fn required_anti_affinity_spreads_replicas_over_hostnames() {
        let nodes = [node("a", "4", json!([])), node("b", "4", json!([]))];
        let replica = |name: &str| {
            let mut p = pod(name, "100m", None);
            p.metadata.labels = Some(BTreeMap::from([("app".to_string(), "web".to_string())]));
            p.spec.as_mut().unwrap().affinity = Some(serde_json::from_value(json!({"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "web"}}}]}})).unwrap());
            p
        };
        let decisions = decide(
            &nodes,
            &[replica("r1"), replica("r2"), replica("r3")],
            &BTreeMap::new(),
            &BTreeMap::new(),
        );
        let mut placed: Vec<String> = ["r1", "r2"]
            .iter()
            .filter_map(|r| bound_to(&decisions, r))
            .collect();
        placed.sort();
        assert_eq!(placed, vec!["a", "b"]);
        assert!(message_for(&decisions, "r3").is_some_and(|m| m.starts_with("0/2 nodes are available: 2 node(s) didn't satisfy")));
    }

    /// A web pod of a DoNotSchedule zone spread, being deleted from `node` when `deleting`.
    fn web_replica(name: &str, cpu: &str, node: Option<&str>, deleting: bool) -> Pod {
        let deleted = deleting.then_some("2026-01-01T00:00:00Z");
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
                         "deletionTimestamp": deleted},
            "spec": {"nodeName": node,
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
                     "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]}
        }))
        .unwrap()
    }

    /// kube-scheduler keeps a pod being deleted on its node (NodeInfo) until it is gone: its
    /// requests hold the room and InterPodAffinity counts it, but PodTopologySpread skips it. A
    /// replacement replica goes to the zone its terminating predecessors are leaving, when the
    /// room they leave is enough.
    #[test]
    fn a_pod_being_deleted_holds_its_room_and_counts_for_no_spread() {
        let nodes = [
            zonal_node("a", "a", "4", json!([])),
            zonal_node("b", "b", "4", json!([])),
        ];
        let bound = vec![
            web_replica("old-0", "1500m", Some("a"), true),
            web_replica("old-1", "1500m", Some("a"), true),
            web_replica("web-0", "1500m", Some("b"), false),
        ];
        for judging in [Judging::Fastest, Judging::Whole] {
            // Zone a counts 0 replicas, b counts 1: only a keeps the skew at 1.
            let mut pods = bound.clone();
            pods.push(web_replica("web-1", "1", None, false));
            let decisions = judged(&nodes, &pods, judging);
            assert_eq!(bound_to(&decisions, "web-1").as_deref(), Some("a"));
            // A replica larger than the core the pods being deleted leave waits for them.
            let mut pods = bound.clone();
            pods.push(web_replica("web-2", "1500m", None, false));
            let decisions = judged(&nodes, &pods, judging);
            assert_eq!(bound_to(&decisions, "web-2"), None);
            let message = message_for(&decisions, "web-2").unwrap_or_default();
            assert!(message.contains("Insufficient cpu"), "{message}");
        }

        // Required anti-affinity against a pod being deleted keeps a pod off its node.
        let avoids: Pod = serde_json::from_value(json!({
            "metadata": {"name": "avoids", "namespace": "default", "labels": {"app": "other"}},
            "spec": {"containers": [{"name": "c", "image": "pause"}],
                     "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]}}}
        }))
        .unwrap();
        let mut pods = bound.clone();
        pods.push(avoids);
        let decisions = decide(&nodes, &pods, &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(bound_to(&decisions, "avoids"), None);
    }

    #[test]
    fn bound_terminating_and_foreign_pods_are_not_pending() {
        let mut foreign = pod("foreign", "100m", None);
        foreign.spec.as_mut().unwrap().scheduler_name = Some("other".to_string());
        assert!(!is_pending(&foreign));
        assert!(!is_pending(&pod("bound", "100m", Some("a"))));
        assert!(is_pending(&pod("waiting", "100m", None)));
        assert_eq!(
            fit_error_message(0, &BTreeMap::new()),
            "no nodes available to schedule pods"
        );
    }
}
