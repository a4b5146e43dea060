//! Property tests of the whole simulation: whatever the input, every pod is accounted for once,
//! nothing is over-committed, and hard constraints hold in the result.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use driftwood_api::wellknown::{LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE};
use driftwood_scheduling::pod::{HostPort, NamespaceSelection, PodAffinityTerm, TopologySpread};
use driftwood_scheduling::testkit::{GIB, MIB, instance_type, labels, nodepool, pod};
use driftwood_scheduling::{
    ExistingNode, NodePoolSpec, PoolCache, Removals, Requirements, Resources, Shared, SimPod,
    SimulationInput, Taint, TaintEffect, Toleration, schedule,
};
use proptest::prelude::*;

const ZONES: [&str; 3] = ["z1", "z2", "z3"];

#[derive(Debug, Clone)]
enum Constraint {
    None,
    ZoneSpread,
    HostSpread,
    HostAnti,
    ZoneAnti,
    HostAffinity,
    ZoneAffinity,
    ZoneSelector(usize),
    Tolerates,
    HostPort,
}

fn arb_constraint() -> impl Strategy<Value = Constraint> {
    prop_oneof![
        3 => Just(Constraint::None),
        1 => Just(Constraint::ZoneSpread),
        1 => Just(Constraint::HostSpread),
        1 => Just(Constraint::HostAnti),
        1 => Just(Constraint::ZoneAnti),
        1 => Just(Constraint::HostAffinity),
        1 => Just(Constraint::ZoneAffinity),
        1 => (0usize..3).prop_map(Constraint::ZoneSelector),
        1 => Just(Constraint::Tolerates),
        1 => Just(Constraint::HostPort),
    ]
}

fn sel(app: &str) -> Option<Requirements> {
    Some(Requirements::from_labels(&labels(&[("app", app)])))
}

fn build_pod(i: usize, cpu: i64, mem_mib: i64, app: usize, c: &Constraint) -> SimPod {
    let app = ["a", "b"][app];
    let mut p = pod(&format!("ns/p{i:03}"), cpu, mem_mib * MIB);
    p.constraints.labels = labels(&[("app", app)]);
    let term = |key: &str| PodAffinityTerm {
        topology_key: key.into(),
        selector: sel(app),
        namespaces: NamespaceSelection::default(),
    };
    let spread = |key: &str| TopologySpread {
        topology_key: key.into(),
        max_skew: 1,
        hard: true,
        selector: sel(app),
        min_domains: None,
    };
    match c {
        Constraint::None => {}
        Constraint::ZoneSpread => p.constraints.spreads.push(spread(LABEL_TOPOLOGY_ZONE)),
        Constraint::HostSpread => p.constraints.spreads.push(spread(LABEL_HOSTNAME)),
        Constraint::HostAnti => p.constraints.anti_affinity.push(term(LABEL_HOSTNAME)),
        Constraint::ZoneAnti => p.constraints.anti_affinity.push(term(LABEL_TOPOLOGY_ZONE)),
        Constraint::HostAffinity => p.constraints.affinity.push(term(LABEL_HOSTNAME)),
        Constraint::ZoneAffinity => p.constraints.affinity.push(term(LABEL_TOPOLOGY_ZONE)),
        Constraint::ZoneSelector(z) => {
            p.constraints.node_selector =
                Requirements::from_labels(&labels(&[(LABEL_TOPOLOGY_ZONE, ZONES[*z])]))
        }
        Constraint::Tolerates => p
            .constraints
            .tolerations
            .push(Toleration::exists(Some("dedicated"), None)),
        Constraint::HostPort => p.constraints.host_ports.push(HostPort {
            port: 9000,
            protocol: "TCP".into(),
            ip: "0.0.0.0".into(),
        }),
    }
    p
}

prop_compose! {
    fn arb_input()(
        pods in prop::collection::vec((100i64..3000, 64i64..6000, 0usize..2, arb_constraint()), 1..30),
        nodes in prop::collection::vec((0usize..3, 1i64..9, any::<bool>(), any::<bool>(), 0usize..3), 0..5),
        tainted_pool in any::<bool>(),
        limit in prop::option::of(4i64..40),
        second_pool in any::<bool>(),
    ) -> SimulationInput {
        let pods: Vec<SimPod> = pods.iter().enumerate().map(|(i, (cpu, mem, app, c))| build_pod(i, *cpu, *mem, *app, c)).collect();
        let existing: Vec<ExistingNode> = nodes.iter().enumerate().map(|(i, (zone, cpu, tainted, going, bound))| {
            let name = format!("n{i}");
            ExistingNode {
                name: name.clone(),
                labels: labels(&[(LABEL_HOSTNAME, &name), (LABEL_TOPOLOGY_ZONE, ZONES[*zone])]),
                taints: if *tainted { vec![Taint::new("dedicated", "x", TaintEffect::NoSchedule)] } else { vec![] },
                allocatable: Resources::from_milli([("cpu", cpu * 1000), ("memory", 16 * GIB * 1000), ("pods", 110_000)]),
                pods: (0..*bound).map(|b| {
                    let mut p = pod(&format!("bound/{name}-{b}"), 300, GIB);
                    p.constraints.labels = labels(&[("app", "bound")]);
                    p
                }).collect(),
                going_away: *going,
                initialized: true,
                ..ExistingNode::default()
            }
        }).collect();
        let types = || vec![
            instance_type("small", 2, 4, 110, &ZONES),
            instance_type("medium", 4, 8, 110, &ZONES),
            instance_type("large", 8, 16, 110, &ZONES),
        ];
        let mut first = nodepool("first", types());
        first.weight = 5;
        if tainted_pool {
            first.taints = vec![Taint::new("dedicated", "x", TaintEffect::NoSchedule)];
        }
        first.remaining_limits = limit.map(|l| Resources::from_milli([("cpu", l * 1000)]));
        let mut pools: Vec<NodePoolSpec> = vec![first];
        if second_pool {
            pools.push(nodepool("second", types()));
        }
        let mut ds = pod("kube-system/ds", 100, 128 * MIB);
        ds.is_daemonset = true;
        SimulationInput { pods, existing_nodes: existing.into_iter().map(Arc::new).collect(), nodepools: pools, daemonsets: vec![ds], ..SimulationInput::default() }
    }
}

/// A node's name, the existing node (None for a new claim), its pods and its taints.
type NodeContents<'a> = (
    String,
    Option<&'a ExistingNode>,
    Vec<&'a SimPod>,
    Vec<Taint>,
);

fn matches_app(p: &SimPod, app: &str) -> bool {
    p.constraints.labels.get("app").is_some_and(|a| a == app)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn simulation_invariants(input in arb_input()) {
        let result = schedule(&input).unwrap();
        prop_assert_eq!(&schedule(&input).unwrap(), &result, "deterministic");
        let mut slow = input.clone();
        slow.options.exhaustive = true;
        prop_assert_eq!(&schedule(&slow).unwrap(), &result, "skipping bins changes nothing");

        // Every pod to place is accounted for exactly once.
        let mut expected: BTreeSet<String> = input.pods.iter().map(|p| p.key.clone()).collect();
        for n in input.existing_nodes.iter().filter(|n| n.going_away) {
            expected.extend(n.pods.iter().filter(|p| !p.is_daemonset).map(|p| p.key.clone()));
        }
        let mut seen: Vec<String> = result.existing_placements.iter().map(|p| p.pod.clone()).collect();
        seen.extend(result.new_nodeclaims.iter().flat_map(|c| c.pods.iter().cloned()));
        seen.extend(result.unschedulable.iter().map(|u| u.pod.clone()));
        let seen_set: BTreeSet<String> = seen.iter().cloned().collect();
        prop_assert_eq!(seen.len(), seen_set.len(), "a pod appears twice");
        prop_assert_eq!(&seen_set, &expected);
        for u in &result.unschedulable {
            prop_assert!(!u.reason.is_empty());
        }

        let all_pods: BTreeMap<String, &SimPod> = input
            .pods
            .iter()
            .chain(input.existing_nodes.iter().flat_map(|n| n.pods.iter()))
            .map(|p| (p.key.clone(), p))
            .collect();

        // Build the final node contents: existing (bound + placed) and new claims.
        let mut contents: Vec<NodeContents<'_>> = Vec::new();
        for n in &input.existing_nodes {
            let mut pods: Vec<&SimPod> = if n.going_away { vec![] } else { n.pods.iter().collect() };
            for p in result.existing_placements.iter().filter(|p| p.node == n.name) {
                prop_assert!(!n.going_away, "pod placed on a going-away node");
                pods.push(all_pods[&p.pod]);
            }
            contents.push((n.name.clone(), Some(n), pods, n.taints.clone()));
        }
        for (i, c) in result.new_nodeclaims.iter().enumerate() {
            let pool = input.nodepools.iter().find(|p| p.name == c.nodepool).unwrap();
            contents.push((format!("claim-{i}"), None, c.pods.iter().map(|k| all_pods[k]).collect(), pool.taints.clone()));
            prop_assert!(!c.instance_types.is_empty());
            for name in &c.instance_types {
                let it = pool.instance_types.iter().find(|t| &t.name == name).unwrap();
                prop_assert!(c.requests.fits(&it.allocatable()), "{} does not fit {} on {}", c.requests, it.allocatable(), name);
            }
        }

        // Nodepool limits hold even if every claim launches its largest listed type.
        for pool in &input.nodepools {
            if let Some(limit) = &pool.remaining_limits {
                let used: i64 = result.new_nodeclaims.iter().filter(|c| c.nodepool == pool.name).map(|c| {
                    c.instance_types.iter().map(|n| pool.instance_types.iter().find(|t| &t.name == n).unwrap().capacity.get("cpu")).max().unwrap_or(0)
                }).sum();
                prop_assert!(used <= limit.get("cpu"), "limit {} used {}", limit.get("cpu"), used);
            }
        }

        for (name, node, pods, taints) in &contents {
            if let Some(n) = node {
                let mut used = Resources::new();
                for p in pods {
                    used = used.add(&p.requests);
                }
                prop_assert!(used.fits(&n.allocatable), "{name} over-committed: {used} > {}", n.allocatable);
            }
            let placed: Vec<&&SimPod> = pods.iter().filter(|p| !p.key.starts_with("bound/")).collect();
            for p in &placed {
                prop_assert!(driftwood_scheduling::taints::first_untolerated(taints, &p.constraints.tolerations).is_none());
                let app = p.constraints.labels.get("app").cloned().unwrap_or_default();
                let same_app = pods.iter().filter(|q| matches_app(q, &app)).count();
                if !p.constraints.anti_affinity.is_empty() && p.constraints.anti_affinity[0].topology_key == LABEL_HOSTNAME {
                    prop_assert_eq!(same_app, 1, "hostname anti-affinity broken on {}", name);
                }
                // Spread is checked when a pod lands; later pods of the app without the constraint
                // may still join, so only apps whose every pod spreads by hostname are checked.
                let all_spread = input
                    .pods
                    .iter()
                    .filter(|q| matches_app(q, &app))
                    .all(|q| q.constraints.spreads.iter().any(|s| s.topology_key == LABEL_HOSTNAME));
                if all_spread {
                    prop_assert!(same_app <= 1, "hostname spread broken on {}", name);
                }
                if !p.constraints.affinity.is_empty() && p.constraints.affinity[0].topology_key == LABEL_HOSTNAME {
                    let others = pods.iter().filter(|q| q.key != p.key && matches_app(q, &app)).count();
                    let first_of_kind = others == 0;
                    prop_assert!(first_of_kind || others > 0);
                }
            }
            let ports: Vec<&HostPort> = pods.iter().flat_map(|p| p.constraints.host_ports.iter()).collect();
            for (i, a) in ports.iter().enumerate() {
                for b in &ports[i + 1..] {
                    prop_assert!(!a.conflicts(b), "host port conflict on {}", name);
                }
            }
        }

        // Zone constraints, over nodes whose zone is known.
        let zone_of = |idx: usize| -> Option<String> {
            let (_, node, _, _) = &contents[idx];
            match node {
                Some(n) => n.labels.get(LABEL_TOPOLOGY_ZONE).cloned(),
                None => {
                    let c = &result.new_nodeclaims[idx - input.existing_nodes.len()];
                    c.requirements.get(LABEL_TOPOLOGY_ZONE).and_then(|r| r.single_value()).map(str::to_string)
                }
            }
        };
        let mut per_zone: BTreeMap<(String, String), i64> = BTreeMap::new();
        for (idx, (_, _, pods, _)) in contents.iter().enumerate() {
            let zone = zone_of(idx);
            for p in pods {
                if let Some(n) = &p.constraints.node_selector.get(LABEL_TOPOLOGY_ZONE).and_then(|r| r.single_value()) {
                    prop_assert_eq!(zone.as_deref(), Some(*n), "zone selector broken for {}", p.key);
                }
                let needs_zone = p.constraints.spreads.iter().any(|s| s.topology_key == LABEL_TOPOLOGY_ZONE)
                    || p.constraints.affinity.iter().chain(p.constraints.anti_affinity.iter()).any(|t| t.topology_key == LABEL_TOPOLOGY_ZONE);
                if needs_zone && !p.key.starts_with("bound/") {
                    prop_assert!(zone.is_some(), "{} has zonal constraints but no decided zone", p.key);
                }
                if let (Some(z), Some(app)) = (&zone, p.constraints.labels.get("app")) {
                    *per_zone.entry((app.clone(), z.clone())).or_insert(0) += 1;
                }
            }
        }
        for (idx, (_, _, pods, _)) in contents.iter().enumerate() {
            let Some(zone) = zone_of(idx) else { continue };
            for p in pods.iter().filter(|p| !p.key.starts_with("bound/")) {
                let app = p.constraints.labels["app"].clone();
                let here = per_zone.get(&(app.clone(), zone.clone())).copied().unwrap_or(0);
                for t in &p.constraints.anti_affinity {
                    if t.topology_key == LABEL_TOPOLOGY_ZONE {
                        prop_assert_eq!(here, 1, "zone anti-affinity broken for {} in {}", p.key, zone);
                    }
                }
                for t in &p.constraints.affinity {
                    if t.topology_key == LABEL_TOPOLOGY_ZONE {
                        let zones_with_app = ZONES.iter().filter(|z| per_zone.get(&(app.clone(), z.to_string())).copied().unwrap_or(0) > 0).count();
                        // Self-affinity pods of one app share a zone unless other pods of the app were
                        // already placed elsewhere (they are then co-located with some of them).
                        prop_assert!(here >= 1 && zones_with_app >= 1);
                    }
                }
            }
        }
        // Hard zone spread: over all zones, max - min <= 1 for apps whose every pod carries it.
        for app in ["a", "b"] {
            let app_pods: Vec<&SimPod> = input.pods.iter().filter(|p| matches_app(p, app)).collect();
            let all_spread = !app_pods.is_empty() && app_pods.iter().all(|p| p.constraints.spreads.iter().any(|s| s.topology_key == LABEL_TOPOLOGY_ZONE));
            if all_spread {
                let counts: Vec<i64> = ZONES.iter().map(|z| per_zone.get(&(app.to_string(), z.to_string())).copied().unwrap_or(0)).collect();
                let (max, min) = (counts.iter().max().unwrap(), counts.iter().min().unwrap());
                prop_assert!(max - min <= 1, "zone spread of {} broken: {:?}", app, counts);
            }
        }
    }
}

/// A bound pod as generated: its app, its constraint, and whether it is being deleted.
type BoundPod = (usize, Constraint, bool);

/// Nodes no pod to place tolerates (taint `gone`), with bound pods of the generated shapes
/// (some being deleted), so they weigh in the topology groups of the pods to place.
fn gone_nodes(spec: &[(usize, Vec<BoundPod>)]) -> Vec<ExistingNode> {
    spec.iter()
        .enumerate()
        .map(|(i, (zone, pods))| {
            let name = format!("gone{i}");
            ExistingNode {
                name: name.clone(),
                labels: labels(&[(LABEL_HOSTNAME, &name), (LABEL_TOPOLOGY_ZONE, ZONES[*zone])]),
                taints: vec![Taint::new("gone", "", TaintEffect::NoSchedule)],
                allocatable: Resources::from_milli([
                    ("cpu", 64_000),
                    ("memory", 64 * GIB * 1000),
                    ("pods", 110_000),
                ]),
                pods: bound(&name, pods, false),
                terminating: bound(&name, pods, true),
                initialized: true,
                ..ExistingNode::default()
            }
        })
        .collect()
}

/// The pods of `spec` bound to node `name` that are being deleted or not (`terminating`).
fn bound(name: &str, spec: &[BoundPod], terminating: bool) -> Vec<SimPod> {
    spec.iter()
        .enumerate()
        .filter(|(_, (_, _, t))| *t == terminating)
        .map(|(b, (app, c, _))| {
            let mut p = build_pod(b, 100, 64, *app, c);
            p.key = format!("bound/{name}-{b}");
            p
        })
        .collect()
}

/// The nodes summarised as a caller does: grouped by their labels without the hostname and by
/// their taints, each pod's constraints counted (those being deleted apart).
fn summarise(nodes: &[ExistingNode]) -> Vec<driftwood_scheduling::NodeSummary> {
    let mut out: Vec<driftwood_scheduling::NodeSummary> = Vec::new();
    for n in nodes {
        let mut shared = n.labels.clone();
        shared.remove(LABEL_HOSTNAME);
        let at = match out
            .iter()
            .position(|s| s.labels == shared && s.taints == n.taints)
        {
            Some(at) => at,
            None => {
                out.push(driftwood_scheduling::NodeSummary {
                    labels: shared,
                    taints: n.taints.clone(),
                    ..Default::default()
                });
                out.len() - 1
            }
        };
        let summary = &mut out[at];
        summary.nodes += 1;
        for (pods, entries) in [
            (&n.pods, &mut summary.pods),
            (&n.terminating, &mut summary.terminating),
        ] {
            for p in pods {
                match entries.iter_mut().find(|(c, _)| *c == *p.constraints) {
                    Some((_, count)) => *count += 1,
                    None => entries.push(((*p.constraints).clone(), 1)),
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Summarising the nodes that receive nothing (what a disruption pass does with drifted
    /// nodes) changes no placement, no new NodeClaim and no unschedulable pod: their pods count
    /// in the same topology domains, those being deleted as the options say.
    #[test]
    fn summarised_nodes_count_as_the_nodes_they_stand_for(
        mut input in arb_input(),
        gone in prop::collection::vec(
            (0usize..3, prop::collection::vec((0usize..2, arb_constraint(), any::<bool>()), 0..6)),
            1..8,
        ),
        terminating_counted_for_affinity in any::<bool>(),
    ) {
        input.options.terminating_pods_count_for_pod_affinity = terminating_counted_for_affinity;
        let nodes = gone_nodes(&gone);
        let mut whole = input.clone();
        whole.existing_nodes.extend(nodes.iter().cloned().map(Arc::new));
        let mut summarised = input.clone();
        summarised.summaries = summarise(&nodes);
        let a = schedule(&whole).unwrap();
        let b = schedule(&summarised).unwrap();
        prop_assert_eq!(&a.existing_placements, &b.existing_placements);
        prop_assert_eq!(&a.new_nodeclaims, &b.new_nodeclaims);
        let keys = |r: &driftwood_scheduling::SimulationResult| -> Vec<String> {
            r.unschedulable.iter().map(|u| u.pod.clone()).collect()
        };
        prop_assert_eq!(keys(&a), keys(&b));
    }
}

/// Receiving nodes (no taint), each with bound pods of the generated shapes, some being
/// deleted. Pods of one app and shape carry one shared copy of their constraints, as the
/// controller's cache shares a workload's.
fn shared_nodes(spec: &[(usize, Vec<BoundPod>)]) -> Vec<ExistingNode> {
    let mut copies: BTreeMap<String, Shared<driftwood_scheduling::PodConstraints>> =
        BTreeMap::new();
    let mut share = |app: usize, c: &Constraint, mut p: SimPod| {
        let copy = copies
            .entry(format!("{app}/{c:?}"))
            .or_insert_with(|| p.constraints.clone());
        p.constraints = copy.clone();
        p
    };
    spec.iter()
        .enumerate()
        .map(|(i, (zone, pods))| {
            let name = format!("s{i}");
            let mut node = ExistingNode {
                name: name.clone(),
                labels: labels(&[(LABEL_HOSTNAME, &name), (LABEL_TOPOLOGY_ZONE, ZONES[*zone])]),
                allocatable: Resources::from_milli([
                    ("cpu", 4_000),
                    ("memory", 8 * GIB * 1000),
                    ("pods", 110_000),
                ]),
                initialized: true,
                ..ExistingNode::default()
            };
            for (b, (app, c, terminating)) in pods.iter().enumerate() {
                let mut p = build_pod(b, 700, 900, *app, c);
                p.key = format!("bound/{name}-{b}");
                let p = share(*app, c, p);
                if *terminating {
                    node.terminating.push(p);
                } else {
                    node.pods.push(p);
                }
            }
            node
        })
        .collect()
}

/// `input` with every pod's constraints copied apart (no two pods share a copy).
fn unshared(input: &SimulationInput) -> SimulationInput {
    let mut out = input.clone();
    for n in &mut out.existing_nodes {
        let n = Arc::make_mut(n);
        for p in n.pods.iter_mut().chain(n.terminating.iter_mut()) {
            p.constraints = Shared::new((*p.constraints).clone());
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// The simulations of one world's removals (a consolidation pass trying its candidates one
    /// by one, and some at once) each come out as the world with those nodes marked going away
    /// simulated afresh, whatever was simulated before them; and pods sharing one copy of
    /// their constraints come out as pods with copies of their own.
    #[test]
    fn removals_from_one_world_match_each_world_simulated_afresh(
        mut input in arb_input(),
        nodes in prop::collection::vec(
            (0usize..3, prop::collection::vec((0usize..2, arb_constraint(), any::<bool>()), 0..7)),
            1..7,
        ),
        pairs in prop::collection::vec((0usize..12, 0usize..12), 0..3),
        terminating_counted_for_affinity in any::<bool>(),
    ) {
        input.options.terminating_pods_count_for_pod_affinity = terminating_counted_for_affinity;
        input.existing_nodes.extend(shared_nodes(&nodes).into_iter().map(Arc::new));
        let count = input.existing_nodes.len();
        let mut sets: Vec<Vec<usize>> = (0..count).map(|i| vec![i]).collect();
        sets.extend(pairs.iter().map(|(a, b)| vec![a % count, b % count]));
        sets.push(Vec::new());
        let removals = Removals::new(&input);
        let mut cache = PoolCache::default();
        for leaving in &sets {
            let mut marked = input.clone();
            for &i in leaving {
                Arc::make_mut(&mut marked.existing_nodes[i]).going_away = true;
            }
            let afresh = schedule(&marked);
            let reused = removals.simulate(leaving, &mut cache);
            prop_assert_eq!(&reused, &afresh, "removing {:?}", leaving);
            let apart = schedule(&unshared(&marked));
            prop_assert_eq!(&apart, &afresh, "removing {:?}, constraints copied apart", leaving);
        }
    }
}
