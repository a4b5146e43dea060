//! The world of a pass as a candidate's pods can reach it when pods depend on other pods
//! (topology spread, pod affinity, anti-affinity): the nodes that can receive pods, whole, and
//! every other node (drifted, leaving, not initialized) as a summary that only counts its pods
//! in its topology domains. A candidate is simulated against that instead of against every node
//! and pod of the cluster; the outcome is the same (the scheduling crate's property test
//! `summarised_nodes_count_as_the_nodes_they_stand_for` and this crate's differential test).

use crate::world::{going_away, is_target};
use driftwood_api::wellknown::{LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE};
use driftwood_scheduling::pod::collect_selector_label_keys;
use driftwood_scheduling::taints::first_untolerated;
use driftwood_scheduling::{
    NodeSummary, PodConstraints, PoolCache, Requirements, Shared, SimPod, SimulationInput,
    SimulationResult, schedule_cached,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// A summarised node: its summary, for each of its pods the summary entry it counts in and
/// whether a DaemonSet owns it (such pods stay when the node's other pods leave), and the
/// entries of its pods being deleted that count (in the summary's `terminating`).
struct Member {
    summary: usize,
    pods: Vec<(usize, bool)>,
    terminating: Vec<usize>,
}

/// The receiving nodes of a pass and the summaries of the others, kept current as candidates
/// are chosen and pods placed.
pub(crate) struct SummarizedWorld {
    /// The receiving nodes in world order, the summaries, and the world's NodePools,
    /// daemonsets, namespaces and options.
    input: SimulationInput,
    /// World position → position in `input.existing_nodes`, for receiving nodes.
    receiving: HashMap<usize, usize>,
    /// World position → membership, for summarised nodes.
    members: HashMap<usize, Member>,
    /// Per summary: the entry of each pod constraints (labels no selector reads removed).
    entries: Vec<HashMap<PodConstraints, usize>>,
    /// Per summary: the entry of constraints as pods carry them (the pods of one ReplicaSet
    /// carry the same), so that most pods are counted without building the reduced form.
    seen: Vec<HashMap<PodConstraints, usize>>,
    /// The same by the address of the pods' shared copy (the controller's cache gives the pods
    /// of a ReplicaSet one), each with a clone that keeps the address alive: such pods are
    /// counted without hashing their constraints.
    seen_shared: Vec<HashMap<usize, (Shared<PodConstraints>, usize)>>,
    /// Pod label keys some selector in the world reads.
    selector_keys: BTreeSet<String>,
    /// Entries (summary, entry) that weigh in every simulation: pods owning a required
    /// anti-affinity term, pods naming a custom topology key, and pods some required
    /// anti-affinity term in the world selects.
    always: BTreeSet<(usize, usize)>,
    /// The entries each selector (of a candidate's pods) selects, worked out once per pass.
    selected: HashMap<Requirements, Vec<(usize, usize)>>,
    /// The NodePools prepared once for the pass's simulations.
    pools: PoolCache,
}

impl SummarizedWorld {
    /// Splits `world` (prepared for the pass: nodes that receive nothing carry the disrupted
    /// taint) into receiving nodes and summaries grouped by labels (hostname aside) and taints.
    pub(crate) fn new(world: &SimulationInput) -> Self {
        let mut selector_keys = BTreeSet::new();
        collect_selector_label_keys(
            world
                .existing_nodes
                .iter()
                .flat_map(|n| n.pods.iter().chain(&n.terminating))
                .chain(world.pods.iter())
                .map(|p| &*p.constraints),
            &mut selector_keys,
        );
        let mut out = Self {
            input: SimulationInput {
                existing_nodes: Vec::new(),
                summaries: Vec::new(),
                pods: Vec::new(),
                // The candidates' pods are running, but no effective-zone counts are read from
                // a disruption simulation.
                moving_pods: 0,
                nodepools: world.nodepools.clone(),
                daemonsets: world.daemonsets.clone(),
                namespace_labels: world.namespace_labels.clone(),
                options: world.options.clone(),
            },
            receiving: HashMap::new(),
            members: HashMap::new(),
            entries: Vec::new(),
            seen: Vec::new(),
            seen_shared: Vec::new(),
            selector_keys,
            always: BTreeSet::new(),
            selected: HashMap::new(),
            pools: PoolCache::default(),
        };
        let mut by_shape: HashMap<
            (BTreeMap<String, String>, Vec<driftwood_scheduling::Taint>),
            usize,
        > = HashMap::new();
        for (i, node) in world.existing_nodes.iter().enumerate() {
            if is_target(node) {
                out.receiving.insert(i, out.input.existing_nodes.len());
                out.input.existing_nodes.push(node.clone());
                continue;
            }
            let mut labels = node.labels.clone();
            labels.remove(LABEL_HOSTNAME);
            let taints = node.effective_taints();
            let summary = *by_shape
                .entry((labels.clone(), taints.clone()))
                .or_insert_with(|| {
                    out.input.summaries.push(NodeSummary {
                        labels,
                        taints,
                        nodes: 0,
                        pods: Vec::new(),
                        terminating: Vec::new(),
                    });
                    out.entries.push(HashMap::new());
                    out.seen.push(HashMap::new());
                    out.seen_shared.push(HashMap::new());
                    out.input.summaries.len() - 1
                });
            out.input.summaries[summary].nodes += 1;
            let pods = node
                .pods
                .iter()
                .map(|p| (out.count(summary, &p.constraints), p.is_daemonset))
                .collect();
            let counts_for_affinity = world.options.terminating_pods_count_for_pod_affinity;
            let terminating = node
                .terminating
                .iter()
                .filter(|p| counts_for_affinity || !p.constraints.anti_affinity.is_empty())
                .map(|p| out.count_terminating(summary, &p.constraints))
                .collect();
            out.members.insert(
                i,
                Member {
                    summary,
                    pods,
                    terminating,
                },
            );
        }
        out.always = out.weighing_always(world);
        out
    }

    /// The entries that weigh in every simulation whatever the candidate ([`Self::always`]).
    fn weighing_always(&self, world: &SimulationInput) -> BTreeSet<(usize, usize)> {
        let anti_selectors: Vec<&Requirements> = world
            .existing_nodes
            .iter()
            .flat_map(|n| n.pods.iter().chain(&n.terminating))
            .chain(world.pods.iter())
            .flat_map(|p| p.constraints.anti_affinity.iter())
            .filter_map(|t| t.selector.as_ref())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut out = BTreeSet::new();
        for (si, summary) in self.input.summaries.iter().enumerate() {
            for (ei, (c, _)) in summary.pods.iter().enumerate() {
                let weighs = !c.anti_affinity.is_empty()
                    || names_custom_topology_key(c)
                    || anti_selectors.iter().any(|s| s.matches_labels(&c.labels));
                if weighs {
                    out.insert((si, ei));
                }
            }
        }
        out
    }

    /// The entries a selector selects (by labels; the simulation checks namespaces).
    fn selected_by(&mut self, selector: &Requirements) -> &[(usize, usize)] {
        let summaries = &self.input.summaries;
        self.selected.entry(selector.clone()).or_insert_with(|| {
            summaries
                .iter()
                .enumerate()
                .flat_map(|(si, s)| {
                    s.pods
                        .iter()
                        .enumerate()
                        .filter(|(_, (c, _))| selector.matches_labels(&c.labels))
                        .map(move |(ei, _)| (si, ei))
                })
                .collect()
        })
    }

    /// The summarised pods that can weigh in a simulation of `moving`: those a selector of a
    /// moving pod selects, and [`Self::always`]. The others are in no topology group of the
    /// simulation: they are left out of it (counted as zero), which makes no difference to the
    /// outcome and saves the simulation interning them.
    fn weighing(&mut self, moving: &[&SimPod]) -> BTreeSet<(usize, usize)> {
        let mut selectors: BTreeSet<&Requirements> = BTreeSet::new();
        for p in moving {
            let c = &p.constraints;
            selectors.extend(c.spreads.iter().filter_map(|s| s.selector.as_ref()));
            selectors.extend(
                c.affinity
                    .iter()
                    .chain(&c.anti_affinity)
                    .chain(c.preferred_affinity.iter().map(|(_, t)| t))
                    .chain(c.preferred_anti_affinity.iter().map(|(_, t)| t))
                    .filter_map(|t| t.selector.as_ref()),
            );
        }
        let mut out = self.always.clone();
        for selector in selectors {
            out.extend(self.selected_by(selector).iter().copied());
        }
        out
    }

    /// Sets the count of every entry outside `weighing` to zero; returns what they were.
    fn leave_out(&mut self, weighing: &BTreeSet<(usize, usize)>) -> Vec<(usize, usize, u32)> {
        let mut saved = Vec::new();
        for (si, summary) in self.input.summaries.iter_mut().enumerate() {
            for (ei, (_, count)) in summary.pods.iter_mut().enumerate() {
                if *count > 0 && !weighing.contains(&(si, ei)) {
                    saved.push((si, ei, *count));
                    *count = 0;
                }
            }
        }
        saved
    }

    /// Puts back counts [`Self::leave_out`] saved.
    fn put_back(&mut self, saved: Vec<(usize, usize, u32)>) {
        for (si, ei, count) in saved {
            self.input.summaries[si].pods[ei].1 = count;
        }
    }

    /// Counts one more pod with constraints `c` in `summary`; returns its entry.
    fn count(&mut self, summary: usize, c: &Shared<PodConstraints>) -> usize {
        if let Some(&(_, entry)) = self.seen_shared[summary].get(&c.address()) {
            self.input.summaries[summary].pods[entry].1 += 1;
            return entry;
        }
        if let Some(&entry) = self.seen[summary].get(&**c) {
            self.input.summaries[summary].pods[entry].1 += 1;
            self.seen_shared[summary].insert(c.address(), (c.clone(), entry));
            return entry;
        }
        let keys = &self.selector_keys;
        let key = if c.labels.keys().all(|k| keys.contains(k)) {
            PodConstraints::clone(c)
        } else {
            let mut stripped = PodConstraints::clone(c);
            stripped.labels.retain(|k, _| keys.contains(k));
            stripped
        };
        let s = &mut self.input.summaries[summary];
        let entry = *self.entries[summary].entry(key.clone()).or_insert_with(|| {
            s.pods.push((key, 0));
            s.pods.len() - 1
        });
        s.pods[entry].1 += 1;
        self.seen[summary].insert(PodConstraints::clone(c), entry);
        self.seen_shared[summary].insert(c.address(), (c.clone(), entry));
        entry
    }

    /// Counts one more pod being deleted with constraints `c` in `summary` (every such pod is
    /// kept whole and weighs in every simulation: there are few); returns its entry.
    fn count_terminating(&mut self, summary: usize, c: &PodConstraints) -> usize {
        let entries = &mut self.input.summaries[summary].terminating;
        if let Some(entry) = entries.iter().position(|(known, _)| known == c) {
            entries[entry].1 += 1;
            return entry;
        }
        entries.push((c.clone(), 1));
        entries.len() - 1
    }

    /// Adds (`sign` 1) or removes (-1) the summarised node at world position `i` and its pods.
    fn shift(&mut self, i: usize, sign: i32, only_movable: bool) {
        let Some(member) = self.members.get(&i) else {
            return;
        };
        let summary = &mut self.input.summaries[member.summary];
        if !only_movable {
            summary.nodes = summary.nodes.saturating_add_signed(sign as isize);
            for entry in &member.terminating {
                let count = &mut summary.terminating[*entry].1;
                *count = count.saturating_add_signed(sign);
            }
        }
        for (entry, daemonset) in &member.pods {
            if only_movable && *daemonset {
                continue;
            }
            let count = &mut summary.pods[*entry].1;
            *count = count.saturating_add_signed(sign);
        }
    }

    /// Simulates removing the node at world position `i` of `world`: its movable pods are
    /// placed on the receiving nodes or on new NodeClaims. `None` when the summaries cannot
    /// answer for its pods (one tolerates a summarised node's taints, or names a hostname in
    /// its node selection): the caller simulates the whole world then.
    pub(crate) fn simulate(
        &mut self,
        world: &SimulationInput,
        i: usize,
    ) -> Option<Result<SimulationResult, driftwood_scheduling::SimulationError>> {
        let node = world.existing_nodes.get(i)?;
        let moving: Vec<&SimPod> = node.pods.iter().filter(|p| !p.is_daemonset).collect();
        let reachable_by_taint = moving.iter().any(|p| {
            self.input.summaries.iter().any(|s| {
                s.nodes > 0 && first_untolerated(&s.taints, &p.constraints.tolerations).is_none()
            })
        });
        if reachable_by_taint || moving.iter().any(|p| names_hostname(&p.constraints)) {
            return None;
        }
        let weighing = self.weighing(&moving);
        let result = if let Some(&r) = self.receiving.get(&i) {
            let saved = self.leave_out(&weighing);
            Arc::make_mut(&mut self.input.existing_nodes[r]).going_away = true;
            let result = schedule_cached(&self.input, &mut self.pools);
            Arc::make_mut(&mut self.input.existing_nodes[r]).going_away = false;
            self.put_back(saved);
            result
        } else {
            self.members.get(&i)?;
            self.shift(i, -1, false);
            let saved = self.leave_out(&weighing);
            self.input.existing_nodes.push(going_away(node, true));
            let result = schedule_cached(&self.input, &mut self.pools);
            self.input.existing_nodes.pop();
            self.put_back(saved);
            self.shift(i, 1, false);
            result
        };
        Some(result)
    }

    /// Records `pod` placed on the node at world position `j`: a receiving node, or (when the
    /// whole world was simulated for a pod that tolerates the disrupted taint) a summarised one.
    pub(crate) fn place(&mut self, j: usize, pod: SimPod) {
        if let Some(&r) = self.receiving.get(&j) {
            Arc::make_mut(&mut self.input.existing_nodes[r])
                .pods
                .push(pod);
            return;
        }
        let Some(summary) = self.members.get(&j).map(|m| m.summary) else {
            return;
        };
        let before = self.input.summaries[summary].pods.len();
        let entry = self.count(summary, &pod.constraints);
        if self.input.summaries[summary].pods.len() > before {
            // A new entry weighs in every later simulation (no selector was matched with it).
            self.always.insert((summary, entry));
        }
        if let Some(member) = self.members.get_mut(&j) {
            member.pods.push((entry, pod.is_daemonset));
        }
    }

    /// Records that the node at world position `i` keeps only its DaemonSet pods (it was
    /// chosen: its other pods are leaving).
    pub(crate) fn empty(&mut self, i: usize) {
        if let Some(&r) = self.receiving.get(&i) {
            Arc::make_mut(&mut self.input.existing_nodes[r])
                .pods
                .retain(|p| p.is_daemonset);
        }
        self.shift(i, -1, true);
        if let Some(member) = self.members.get_mut(&i) {
            member.pods.retain(|(_, daemonset)| *daemonset);
        }
    }
}

/// Whether a pod's topology constraints name a key other than zone and hostname.
fn names_custom_topology_key(c: &PodConstraints) -> bool {
    let custom = |key: &String| key != LABEL_HOSTNAME && key != LABEL_TOPOLOGY_ZONE;
    c.spreads.iter().any(|s| custom(&s.topology_key))
        || c.affinity
            .iter()
            .chain(&c.anti_affinity)
            .chain(c.preferred_affinity.iter().map(|(_, t)| t))
            .chain(c.preferred_anti_affinity.iter().map(|(_, t)| t))
            .any(|t| custom(&t.topology_key))
}

/// Whether a pod's node selection names the hostname label (a summary has no hostname).
fn names_hostname(c: &PodConstraints) -> bool {
    let names = |r: &driftwood_scheduling::Requirements| r.get(LABEL_HOSTNAME).is_some();
    names(&c.node_selector)
        || c.required_terms.iter().any(names)
        || c.preferred_terms.iter().any(|(_, r)| names(r))
}
