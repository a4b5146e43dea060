//! Each existing node's bound pods folded once — requests summed, distinct constraints counted,
//! host ports gathered — so that the simulations of one pass that keep a node read a few
//! entries instead of going over its pods again ([`Removals`]).

use std::cell::OnceCell;
use std::collections::{BTreeSet, HashMap};

use driftwood_api::wellknown::LABEL_TOPOLOGY_ZONE;

use crate::model::{ExistingNode, SimulationError, SimulationInput, SimulationResult};
use crate::pod::{HostPort, PodConstraints};
use crate::shared::Shared;
use crate::taints::Taint;

use super::dense::{NumberedResources, ResourceNames, add_numbered};
use super::{Engine, PoolCache, SolveProgress};

/// One existing node's bound pods (running and being deleted), folded, with what the engine
/// reads of the node itself.
pub(super) struct BoundNode<'a> {
    /// The pods' requests summed per name (saturating, as the engine adds them), by the
    /// numbers of [`BoundNodes::names`].
    pub requests: NumberedResources,
    /// The node's allocatable, numbered the same way.
    pub allocatable: NumberedResources,
    /// The taints pods must tolerate now ([`ExistingNode::effective_taints`]).
    pub taints: Vec<Taint>,
    /// The node's zone label, by its place in [`BoundNodes::zones`].
    pub zone: Option<usize>,
    /// The pods' host ports, in pod order (running pods, then those being deleted).
    pub ports: Vec<HostPort>,
    /// The pods' distinct shared constraints in order of first appearance (running pods, then
    /// those being deleted).
    pub constraints: Vec<FoldedConstraints<'a>>,
}

/// Constraints shared by pods of one node.
pub(super) struct FoldedConstraints<'a> {
    pub constraints: &'a Shared<PodConstraints>,
    /// The shared copy's number among all nodes' (in order of first appearance).
    pub id: u32,
    /// How many of the node's running pods carry it.
    pub running: u32,
    /// How many of the node's pods being deleted carry it.
    pub terminating: u32,
}

impl<'a> BoundNode<'a> {
    /// `node` folded, its resource names numbered in `names`, its zone found in `zones`, the
    /// shared constraints numbered in `ids` (by address; `seen[id]` is the last node, by its
    /// `position`, that carried copy `id`, and where in that node's list).
    fn of(
        node: &'a ExistingNode,
        position: usize,
        names: &mut ResourceNames<'a>,
        zones: &[&str],
        ids: &mut HashMap<usize, u32>,
        seen: &mut Vec<(usize, usize)>,
    ) -> Self {
        let mut out = Self {
            requests: Vec::new(),
            allocatable: Vec::new(),
            taints: node.effective_taints(),
            zone: node
                .labels
                .get(LABEL_TOPOLOGY_ZONE)
                .and_then(|z| zones.binary_search(&z.as_str()).ok()),
            ports: Vec::new(),
            constraints: Vec::new(),
        };
        for (name, value) in &node.allocatable.0 {
            add_numbered(&mut out.allocatable, names.id(name), *value);
        }
        let running = node.pods.iter().map(|p| (p, true));
        for (pod, is_running) in running.chain(node.terminating.iter().map(|p| (p, false))) {
            for (name, value) in &pod.requests.0 {
                add_numbered(&mut out.requests, names.id(name), *value);
            }
            out.ports.extend(pod.constraints.host_ports.iter().cloned());
            let next = ids.len() as u32;
            let id = *ids.entry(pod.constraints.address()).or_insert(next);
            if id as usize == seen.len() {
                seen.push((usize::MAX, 0));
            }
            let at = match seen.get_mut(id as usize) {
                Some((last, at)) if *last == position => *at,
                Some(slot) => {
                    out.constraints.push(FoldedConstraints {
                        constraints: &pod.constraints,
                        id,
                        running: 0,
                        terminating: 0,
                    });
                    *slot = (position, out.constraints.len() - 1);
                    slot.1
                }
                None => continue,
            };
            let entry = &mut out.constraints[at];
            if is_running {
                entry.running += 1;
            } else {
                entry.terminating += 1;
            }
        }
        out
    }
}

/// Every existing node of an input folded ([`BoundNode`]), with what the engine reads of all
/// of them whichever stay: their resource names and their zones.
pub(super) struct BoundNodes<'a> {
    pub nodes: Vec<BoundNode<'a>>,
    /// How many distinct shared constraints the nodes' pods carry ([`FoldedConstraints::id`]).
    pub distinct: usize,
    /// The resource names the nodes offer and their pods request, numbered.
    pub names: ResourceNames<'a>,
    /// The names of every existing node's allocatable, each once.
    pub allocatable_names: Vec<&'a str>,
    /// The zones of every existing node (leaving or not: the zone numbering counts them all),
    /// in order.
    pub zones: Vec<&'a str>,
}

impl<'a> BoundNodes<'a> {
    pub fn of(input: &'a SimulationInput) -> Self {
        let mut allocatable_names: Vec<&str> = Vec::new();
        let mut zones = BTreeSet::new();
        for n in &input.existing_nodes {
            for name in n.allocatable.0.keys() {
                if !allocatable_names.contains(&name.as_str()) {
                    allocatable_names.push(name);
                }
            }
            if let Some(z) = n.labels.get(LABEL_TOPOLOGY_ZONE) {
                zones.insert(z.as_str());
            }
        }
        let zones: Vec<&str> = zones.into_iter().collect();
        let mut names = ResourceNames::default();
        let mut ids = HashMap::new();
        let mut seen = Vec::new();
        let nodes = input
            .existing_nodes
            .iter()
            .enumerate()
            .map(|(i, n)| BoundNode::of(n, i, &mut names, &zones, &mut ids, &mut seen))
            .collect();
        Self {
            nodes,
            distinct: ids.len(),
            names,
            allocatable_names,
            zones,
        }
    }
}

/// The simulations of removing one set of existing nodes after another from one world, each
/// with the same result as [`super::schedule_cached`] of the world with those nodes marked
/// going away, its bound pods read once for all of them: a pass that tries its candidates one
/// by one builds each simulation without going over every staying node's pods again.
pub struct Removals<'a> {
    input: &'a SimulationInput,
    /// Folded at the first simulation (a pass may have nothing to simulate).
    bound: OnceCell<BoundNodes<'a>>,
}

impl<'a> Removals<'a> {
    /// The removals from `input`, whose bound pods are read once, at the first simulation.
    /// Nodes already marked going away in `input` are gone in every simulation.
    pub fn new(input: &'a SimulationInput) -> Self {
        Self {
            input,
            bound: OnceCell::new(),
        }
    }

    /// The world the simulations remove nodes from.
    pub fn input(&self) -> &'a SimulationInput {
        self.input
    }

    /// The simulation of removing the existing nodes at `leaving` (positions in
    /// `input.existing_nodes`): the same result as [`super::schedule_cached`] of the input with
    /// them marked going away. An input's observer (`options.observer`) watches it run.
    pub fn simulate(
        &self,
        leaving: &[usize],
        cache: &mut PoolCache,
    ) -> Result<SimulationResult, SimulationError> {
        let gone: Vec<bool> = self
            .input
            .existing_nodes
            .iter()
            .enumerate()
            .map(|(i, n)| n.going_away || leaving.contains(&i))
            .collect();
        let bound = self.bound.get_or_init(|| BoundNodes::of(self.input));
        match self.input.options.observer.0.as_deref() {
            Some(observer) => {
                let watch = observer.started();
                solve(self.input, cache, bound, &gone, Some(watch.progress()))
            }
            None => solve(self.input, cache, bound, &gone, None),
        }
    }
}

/// Runs the simulation of `input` with the nodes `gone` says leaving, its bound pods read from
/// `bound`, telling `progress` (when given) how many pods it has still to try as it goes and,
/// when done, its pending pods by effective zone.
pub(super) fn solve(
    input: &SimulationInput,
    cache: &mut PoolCache,
    bound: &BoundNodes<'_>,
    gone: &[bool],
    progress: Option<&SolveProgress>,
) -> Result<SimulationResult, SimulationError> {
    let Some(progress) = progress else {
        // Nobody watches: the effective-zone counts are skipped.
        let mut engine = Engine::new(input, cache, bound, gone)?;
        engine.run(&SolveProgress::default());
        return Ok(engine.result());
    };
    // Every pod to place waits while the NodePools are prepared: the given ones and the movable
    // pods of the nodes going away.
    let moving: usize = input
        .existing_nodes
        .iter()
        .zip(gone)
        .filter(|(_, gone)| **gone)
        .map(|(n, _)| n.pods.iter().filter(|p| !p.is_daemonset).count())
        .sum();
    progress.set_queue_depth(input.pods.len() + moving);
    let mut engine = Engine::new(input, cache, bound, gone)?;
    // As the topology stands before any pod is placed; told once the simulation is done.
    let by_zone = engine.pending_by_effective_zone();
    engine.run(progress);
    progress.set_pending_by_effective_zone(by_zone);
    Ok(engine.result())
}
