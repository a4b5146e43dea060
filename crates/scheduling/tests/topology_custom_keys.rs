//! Topology spread and pod (anti-)affinity on label keys other than zone and hostname, as
//! Karpenter schedules them: the domains of a key are the values NodePools allow and existing
//! nodes carry, and a new NodeClaim is narrowed to the allowed domain with the fewest matching
//! pods. Tests re-expressed from Karpenter's `pkg/controllers/provisioning/scheduling/
//! topology_test.go` name the test they come from.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use driftwood_api::wellknown::{
    CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, LABEL_ARCH, LABEL_CAPACITY_TYPE, LABEL_HOSTNAME,
    LABEL_TOPOLOGY_ZONE,
};
use driftwood_scheduling::pod::{NamespaceSelection, PodAffinityTerm, TopologySpread};
use driftwood_scheduling::testkit::{GIB, instance_type, labels, nodepool, pod};
use driftwood_scheduling::{
    ExistingNode, InstanceType, NewNodeClaim, NodePoolSpec, Requirement, Requirements, Resources,
    SimPod, SimulationInput, SimulationResult, Taint, TaintEffect, schedule,
};

const ZONES: [&str; 3] = ["z1", "z2", "z3"];
const KEY: &str = "fake-label";

fn types() -> Vec<InstanceType> {
    vec![
        instance_type("small", 2, 4, 110, &ZONES),
        instance_type("medium", 4, 8, 110, &ZONES),
        instance_type("large", 8, 16, 110, &ZONES),
    ]
}

/// The test types plus arm64 copies (`<name>-arm`).
fn types_two_arches() -> Vec<InstanceType> {
    let mut out = types();
    for mut t in types() {
        t.name = format!("{}-arm", t.name);
        let mut reqs = Requirements::new();
        for (k, r) in t.requirements.iter() {
            if k != LABEL_ARCH {
                reqs.add(k, r.clone());
            }
        }
        reqs.add(LABEL_ARCH, Requirement::is_in(["arm64"]));
        t.requirements = reqs;
        out.push(t);
    }
    out
}

fn run(pods: Vec<SimPod>, pools: Vec<NodePoolSpec>, nodes: Vec<ExistingNode>) -> SimulationResult {
    schedule(&SimulationInput {
        pods,
        nodepools: pools,
        existing_nodes: nodes.into_iter().map(Arc::new).collect(),
        ..SimulationInput::default()
    })
    .unwrap()
}

fn sel(k: &str, v: &str) -> Option<Requirements> {
    Some(Requirements::from_labels(&labels(&[(k, v)])))
}

fn spread_on(key: &str, max_skew: i32, hard: bool) -> TopologySpread {
    TopologySpread {
        topology_key: key.into(),
        max_skew,
        hard,
        selector: sel("app", "web"),
        min_domains: None,
    }
}

/// `count` pods `ns/<prefix><i>` labelled app=web, `cpu_milli` each, spread on `key`.
fn spread_pods(prefix: &str, count: usize, cpu_milli: i64, s: &TopologySpread) -> Vec<SimPod> {
    (0..count)
        .map(|i| {
            let mut p = pod(&format!("ns/{prefix}{i:02}"), cpu_milli, GIB);
            p.constraints.labels = labels(&[("app", "web")]);
            p.constraints.spreads.push(s.clone());
            p
        })
        .collect()
}

fn pool_with(name: &str, key: &str, values: &[&str]) -> NodePoolSpec {
    let mut p = nodepool(name, types());
    p.requirements
        .add(key, Requirement::is_in(values.iter().copied()));
    p
}

fn value_of(c: &NewNodeClaim, key: &str) -> String {
    c.requirements
        .get(key)
        .and_then(|r| r.single_value())
        .unwrap_or("?")
        .to_string()
}

/// Pods per value of `key` over the new NodeClaims (claims not narrowed to one value count
/// under "?").
fn per_value(r: &SimulationResult, key: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for c in &r.new_nodeclaims {
        *out.entry(value_of(c, key)).or_insert(0) += c.pods.len();
    }
    out
}

/// A node labelled with `extra`, `cpu` allocatable, holding `pods`.
fn node_with(name: &str, extra: &[(&str, &str)], cpu: &str, pods: Vec<SimPod>) -> ExistingNode {
    let mut l = labels(&[(LABEL_HOSTNAME, name), (LABEL_TOPOLOGY_ZONE, "z1")]);
    l.extend(labels(extra));
    ExistingNode {
        name: name.into(),
        labels: l,
        allocatable: Resources::parse([("cpu", cpu), ("memory", "64Gi"), ("pods", "110")]).unwrap(),
        pods,
        initialized: true,
        ..ExistingNode::default()
    }
}

fn web_pod(key: &str) -> SimPod {
    let mut p = pod(key, 100, GIB);
    p.constraints.labels = labels(&[("app", "web")]);
    p
}

fn taint(key: &str) -> Taint {
    Taint {
        key: key.into(),
        value: "v".into(),
        effect: TaintEffect::NoSchedule,
    }
}

/// The od-spot-split blueprint (Karpenter blueprints): a spot NodePool allowing
/// `capacity-spread` 2..5 and an on-demand one allowing 1; a Deployment spread on the key with
/// maxSkew 1 gets one pod per value, so four spot pods for one on-demand.
#[test]
fn spread_on_a_custom_key_splits_pods_between_nodepools_by_their_values() {
    let key = "capacity-spread";
    let mut spot = pool_with("node-spot", key, &["2", "3", "4", "5"]);
    spot.requirements.add(
        LABEL_CAPACITY_TYPE,
        Requirement::is_in([CAPACITY_TYPE_SPOT]),
    );
    let mut od = pool_with("node-od", key, &["1"]);
    od.requirements.add(
        LABEL_CAPACITY_TYPE,
        Requirement::is_in([CAPACITY_TYPE_ON_DEMAND]),
    );
    let s = spread_on(key, 1, true);
    let r = run(
        spread_pods("p", 5, 512, &s),
        vec![spot.clone(), od.clone()],
        vec![],
    );
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert_eq!(
        per_value(&r, key),
        BTreeMap::from([1, 2, 3, 4, 5].map(|v| (v.to_string(), 1))),
        "{r:#?}"
    );
    for c in &r.new_nodeclaims {
        let want = if value_of(c, key) == "1" {
            "node-od"
        } else {
            "node-spot"
        };
        assert_eq!(c.nodepool, want, "{c:#?}");
    }

    // Ten replicas: two per value, eight spot and two on-demand.
    let r = run(spread_pods("p", 10, 512, &s), vec![spot, od], vec![]);
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert!(per_value(&r, key).values().all(|n| *n == 2), "{r:#?}");
    let on_pool = |name: &str| -> usize {
        r.new_nodeclaims
            .iter()
            .filter(|c| c.nodepool == name)
            .map(|c| c.pods.len())
            .sum()
    };
    assert_eq!((on_pool("node-spot"), on_pool("node-od")), (8, 2));
}

/// Karpenter: "should balance pods across a label (NodeTaintsPolicy=ignore)". Two existing
/// (tainted, full) nodes carry values foo and bar, the NodePool's template label gives baz: the
/// minimum is over three domains, so only one pod can go to baz.
#[test]
fn values_of_existing_nodes_are_domains_even_when_the_pod_cannot_use_them() {
    let mut p = nodepool("default", types());
    p.labels = labels(&[(KEY, "baz")]);
    let mut foo = node_with("foo", &[(KEY, "foo")], "100m", vec![]);
    foo.taints.push(taint("taintname"));
    let mut bar = node_with("bar", &[(KEY, "bar")], "100m", vec![]);
    bar.taints.push(taint("taintname"));
    let r = run(
        spread_pods("p", 5, 1000, &spread_on(KEY, 1, true)),
        vec![p],
        vec![foo, bar],
    );
    assert_eq!(per_value(&r, KEY), BTreeMap::from([("baz".to_string(), 1)]));
    assert_eq!(r.unschedulable.len(), 4, "{r:#?}");
    assert!(
        r.unschedulable[0].reason.contains(KEY),
        "{}",
        r.unschedulable[0].reason
    );
}

/// Karpenter: "should balance pods across a label when discovered from the nodepool
/// (NodeTaintsPolicy=ignore)". A tainted NodePool the pods do not tolerate still contributes its
/// value: one pod goes to foo, the second would exceed the skew.
#[test]
fn values_of_a_nodepool_the_pod_cannot_use_are_domains() {
    let default = pool_with("default", KEY, &["foo"]);
    let mut tainted = pool_with("tainted", KEY, &["bar"]);
    tainted.taints.push(taint("taint-key"));
    let r = run(
        spread_pods("p", 2, 100, &spread_on(KEY, 1, true)),
        vec![default, tainted],
        vec![],
    );
    assert_eq!(per_value(&r, KEY), BTreeMap::from([("foo".to_string(), 1)]));
    assert_eq!(r.unschedulable.len(), 1, "{r:#?}");
}

/// Karpenter: "should balance pods across a label (NodeAffinityPolicy=honor)". The existing
/// nodes with foo and bar do not match the pods' node selector, so (nodeAffinityPolicy Honor,
/// the default) their values are not domains: all five pods go to baz.
#[test]
fn values_of_nodes_the_pod_cannot_select_are_not_domains() {
    let mut p = nodepool("default", types());
    p.labels = labels(&[(KEY, "baz"), ("selector", "value")]);
    let foo = node_with(
        "foo",
        &[(KEY, "foo"), ("selector", "mismatch")],
        "100m",
        vec![],
    );
    let bar = node_with(
        "bar",
        &[(KEY, "bar"), ("selector", "mismatch")],
        "100m",
        vec![],
    );
    let mut pods = spread_pods("p", 5, 1000, &spread_on(KEY, 1, true));
    for p in &mut pods {
        p.constraints.node_selector = Requirements::from_labels(&labels(&[("selector", "value")]));
    }
    let r = run(pods, vec![p], vec![foo, bar]);
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert_eq!(per_value(&r, KEY), BTreeMap::from([("baz".to_string(), 5)]));
}

/// Karpenter: "should schedule to the non-minimum domain if its all that's available" (on zones
/// there; here on a custom key). r1 and r2 hold one pod each on full nodes, the NodePool only
/// allows r3: with maxSkew 5, six pods fit in r3 and the rest fail.
#[test]
fn the_only_available_domain_takes_pods_up_to_max_skew() {
    let nodes = vec![
        node_with("n1", &[(KEY, "r1")], "1", vec![web_pod("ns/old1")]),
        node_with("n2", &[(KEY, "r2")], "1", vec![web_pod("ns/old2")]),
    ];
    let r = run(
        spread_pods("p", 10, 1100, &spread_on(KEY, 5, true)),
        vec![pool_with("default", KEY, &["r3"])],
        nodes,
    );
    assert_eq!(per_value(&r, KEY), BTreeMap::from([("r3".to_string(), 6)]));
    assert_eq!(r.unschedulable.len(), 4, "{r:#?}");
}

/// Karpenter: "should not violate max-skew when unsat = do not schedule" (zones there). r1 holds
/// one pod, the NodePool allows r2 and r3: two pods each, the other six fail.
#[test]
fn do_not_schedule_never_exceeds_max_skew() {
    let nodes = vec![node_with(
        "n1",
        &[(KEY, "r1")],
        "1",
        vec![web_pod("ns/old1")],
    )];
    let r = run(
        spread_pods("p", 10, 1100, &spread_on(KEY, 1, true)),
        vec![pool_with("default", KEY, &["r2", "r3"])],
        nodes,
    );
    assert_eq!(
        per_value(&r, KEY),
        BTreeMap::from([("r2".to_string(), 2), ("r3".to_string(), 2)])
    );
    assert_eq!(r.unschedulable.len(), 6, "{r:#?}");
}

/// Like the zone case of `scheduling.rs`: ScheduleAnyway on a custom key is a preference.
#[test]
fn schedule_anyway_on_a_custom_key_is_a_preference() {
    let nodes = || vec![node_with("n2", &[(KEY, "r2")], "50m", vec![])];
    let only_r1 = || vec![pool_with("default", KEY, &["r1"])];
    let r = run(
        spread_pods("p", 3, 100, &spread_on(KEY, 1, true)),
        only_r1(),
        nodes(),
    );
    assert_eq!(r.unschedulable.len(), 2, "{r:#?}");
    let r = run(
        spread_pods("p", 3, 100, &spread_on(KEY, 1, false)),
        only_r1(),
        nodes(),
    );
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert_eq!(per_value(&r, KEY), BTreeMap::from([("r1".to_string(), 3)]));
}

/// Karpenter: "should respect minDomains constraints" (zones there). Two values and minDomains
/// 3: the global minimum counts as 0, so each value takes one pod and the third fails.
#[test]
fn min_domains_on_a_custom_key() {
    let mut s = spread_on(KEY, 1, true);
    s.min_domains = Some(3);
    let r = run(
        spread_pods("p", 3, 100, &s),
        vec![pool_with("default", KEY, &["r1", "r2"])],
        vec![],
    );
    assert_eq!(
        per_value(&r, KEY),
        BTreeMap::from([("r1".to_string(), 1), ("r2".to_string(), 1)])
    );
    assert_eq!(r.unschedulable.len(), 1, "{r:#?}");
    // Karpenter: "satisfied minDomains constraints (equal) should allow expected pod
    // scheduling": three values, eleven pods, 4/4/3.
    let r = run(
        spread_pods("p", 11, 100, &s),
        vec![pool_with("default", KEY, &["r1", "r2", "r3"])],
        vec![],
    );
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    let mut counts: Vec<usize> = per_value(&r, KEY).into_values().collect();
    counts.sort_unstable();
    assert_eq!(counts, vec![3, 4, 4]);
}

/// Karpenter: "should limit spread options by node affinity (capacity type)". The capacity
/// type's domains come from the offerings; pods that require spot spread over spot only. Then,
/// with three such pods bound on a spot node, pods allowing both end 5 on-demand / 4 spot.
#[test]
fn spread_on_capacity_type_honours_the_pods_node_affinity() {
    let s = spread_on(LABEL_CAPACITY_TYPE, 1, true);
    let mut spot_only = spread_pods("p", 3, 100, &s);
    for p in &mut spot_only {
        p.constraints.node_selector.add(
            LABEL_CAPACITY_TYPE,
            Requirement::is_in([CAPACITY_TYPE_SPOT]),
        );
    }
    let r = run(
        spot_only.clone(),
        vec![nodepool("default", types())],
        vec![],
    );
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert_eq!(
        per_value(&r, LABEL_CAPACITY_TYPE),
        BTreeMap::from([(CAPACITY_TYPE_SPOT.to_string(), 3)])
    );

    let spot_node = node_with(
        "spot",
        &[(LABEL_CAPACITY_TYPE, CAPACITY_TYPE_SPOT)],
        "300m",
        spot_only,
    );
    let r = run(
        spread_pods("q", 6, 100, &s),
        vec![nodepool("default", types())],
        vec![spot_node],
    );
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    let mut counts = per_value(&r, LABEL_CAPACITY_TYPE);
    *counts.entry(CAPACITY_TYPE_SPOT.to_string()).or_insert(0) += 3;
    assert_eq!(
        counts,
        BTreeMap::from([
            (CAPACITY_TYPE_ON_DEMAND.to_string(), 5),
            (CAPACITY_TYPE_SPOT.to_string(), 4)
        ])
    );
}

/// Karpenter: "Combined Zonal and Capacity Type Topology: should spread pods while respecting
/// both constraints": every NodeClaim is narrowed to one zone and one capacity type, and neither
/// spread is skewed by more than one.
#[test]
fn spread_on_capacity_type_and_zone_together() {
    for count in [2, 5, 19] {
        let mut pods = spread_pods("p", count, 100, &spread_on(LABEL_CAPACITY_TYPE, 1, true));
        for p in &mut pods {
            p.constraints
                .spreads
                .push(spread_on(LABEL_TOPOLOGY_ZONE, 1, true));
        }
        let r = run(pods, vec![nodepool("default", types())], vec![]);
        assert!(r.unschedulable.is_empty(), "{r:#?}");
        for key in [LABEL_CAPACITY_TYPE, LABEL_TOPOLOGY_ZONE] {
            let counts = per_value(&r, key);
            assert!(!counts.contains_key("?"), "{key}: {counts:?}");
            let max = counts.values().max().copied().unwrap_or(0);
            let min = counts.values().min().copied().unwrap_or(0);
            let domains = if key == LABEL_TOPOLOGY_ZONE { 3 } else { 2 };
            let min = if counts.len() < domains { 0 } else { min };
            assert!(max - min <= 1, "{count} pods, {key}: {counts:?}");
        }
    }
}

fn affinity_term(key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        topology_key: key.into(),
        selector: sel("security", "s2"),
        namespaces: NamespaceSelection::default(),
    }
}

/// The two pods of Karpenter's arch tests: hostname-spread, the first requires arm64 and asks
/// for more cpu (so it is placed first).
fn arch_pods() -> (SimPod, SimPod) {
    let spread = TopologySpread {
        topology_key: LABEL_HOSTNAME.into(),
        max_skew: 1,
        hard: true,
        selector: sel("security", "s2"),
        min_domains: None,
    };
    let mut first = pod("ns/aff1", 2000, GIB);
    first.constraints.labels = labels(&[("security", "s2")]);
    first.constraints.spreads.push(spread.clone());
    first
        .constraints
        .node_selector
        .add(LABEL_ARCH, Requirement::is_in(["arm64"]));
    let mut second = pod("ns/aff2", 1000, GIB);
    second.constraints.labels = labels(&[("security", "s2")]);
    second.constraints.spreads.push(spread);
    (first, second)
}

fn arch_of(r: &SimulationResult, pod: &str) -> (String, String) {
    let c = r
        .new_nodeclaims
        .iter()
        .find(|c| c.pods.iter().any(|p| p == pod))
        .unwrap_or_else(|| panic!("{pod} not on a claim: {r:#?}"));
    let arches: Vec<String> = c
        .instance_types
        .iter()
        .map(|t| {
            if t.ends_with("-arm") {
                "arm64"
            } else {
                "amd64"
            }
            .to_string()
        })
        .collect();
    assert!(arches.windows(2).all(|w| w[0] == w[1]), "{c:#?}");
    (
        arches.first().cloned().unwrap_or_default(),
        c.nodepool.clone() + &c.pods.join(","),
    )
}

/// Karpenter: "should respect pod affinity (arch)": the second pod follows the first to arm64
/// (an instance types' label), on another node because of the hostname spread.
#[test]
fn pod_affinity_on_an_instance_type_label() {
    let (first, mut second) = arch_pods();
    second.constraints.affinity.push(affinity_term(LABEL_ARCH));
    let r = run(
        vec![first, second],
        vec![nodepool("default", types_two_arches())],
        vec![],
    );
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    let (a1, node1) = arch_of(&r, "ns/aff1");
    let (a2, node2) = arch_of(&r, "ns/aff2");
    assert_eq!((a1.as_str(), a2.as_str()), ("arm64", "arm64"));
    assert_ne!(node1, node2);
}

/// Karpenter: "should not violate pod anti-affinity (arch)": the second pod avoids the first's
/// arm64.
#[test]
fn pod_anti_affinity_on_an_instance_type_label() {
    let (first, mut second) = arch_pods();
    second
        .constraints
        .anti_affinity
        .push(affinity_term(LABEL_ARCH));
    let r = run(
        vec![first, second],
        vec![nodepool("default", types_two_arches())],
        vec![],
    );
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert_eq!(arch_of(&r, "ns/aff1").0, "arm64");
    assert_eq!(arch_of(&r, "ns/aff2").0, "amd64");
}

/// Self anti-affinity on a custom key (Karpenter: "should not violate pod anti-affinity on
/// zone", on a custom key): one pod per value, the third of two values fails; a bound pod's
/// anti-affinity keeps a pod it selects out of its value (Karpenter: "should not violate pod
/// anti-affinity on zone (inverse w/existing nodes)").
#[test]
fn pod_anti_affinity_on_a_custom_key() {
    let anti = PodAffinityTerm {
        topology_key: KEY.into(),
        selector: sel("app", "web"),
        namespaces: NamespaceSelection::default(),
    };
    let pods: Vec<SimPod> = (0..3)
        .map(|i| {
            let mut p = web_pod(&format!("ns/p{i}"));
            p.constraints.anti_affinity.push(anti.clone());
            p
        })
        .collect();
    let r = run(pods, vec![pool_with("default", KEY, &["r1", "r2"])], vec![]);
    assert_eq!(
        per_value(&r, KEY),
        BTreeMap::from([("r1".to_string(), 1), ("r2".to_string(), 1)])
    );
    assert_eq!(r.unschedulable.len(), 1, "{r:#?}");

    let mut owner = pod("ns/owner", 100, GIB);
    owner.constraints.anti_affinity.push(anti);
    let nodes = vec![node_with("n1", &[(KEY, "r1")], "4", vec![owner])];
    let r = run(
        vec![web_pod("ns/web")],
        vec![pool_with("default", KEY, &["r1", "r2"])],
        nodes,
    );
    assert!(r.existing_placements.is_empty(), "{r:#?}");
    assert_eq!(per_value(&r, KEY), BTreeMap::from([("r2".to_string(), 1)]));
}

/// Pod affinity on a custom key: the pod joins the value of the pod it selects, even on a new
/// node when the existing one is full.
#[test]
fn pod_affinity_on_a_custom_key() {
    let mut db = pod("ns/db", 100, GIB);
    db.constraints.labels = labels(&[("app", "db")]);
    let nodes = vec![
        node_with("n1", &[(KEY, "r1")], "1", vec![]),
        node_with("n2", &[(KEY, "r2")], "100m", vec![db]),
    ];
    let mut web = pod("ns/web", 500, GIB);
    web.constraints.affinity.push(PodAffinityTerm {
        topology_key: KEY.into(),
        selector: sel("app", "db"),
        namespaces: NamespaceSelection::default(),
    });
    let r = run(
        vec![web],
        vec![pool_with("default", KEY, &["r1", "r2"])],
        nodes,
    );
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert!(r.existing_placements.is_empty(), "{r:#?}");
    assert_eq!(per_value(&r, KEY), BTreeMap::from([("r2".to_string(), 1)]));
}

/// kube-scheduler (the embedded scheduler uses the simulation with existing nodes only): the
/// domains are the values of the nodes, pods spread over them, and a node without the label
/// cannot take a pod spread on it.
#[test]
fn spread_on_a_custom_key_over_existing_nodes_only() {
    let nodes = vec![
        node_with("a", &[(KEY, "ra")], "4", vec![]),
        node_with("b", &[(KEY, "rb")], "4", vec![]),
        node_with("unlabelled", &[], "4", vec![]),
    ];
    let r = run(
        spread_pods("p", 4, 100, &spread_on(KEY, 1, true)),
        vec![],
        nodes,
    );
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for p in &r.existing_placements {
        *per_node.entry(p.node.clone()).or_insert(0) += 1;
    }
    assert_eq!(
        per_node,
        BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 2)])
    );

    let only_unlabelled = vec![node_with("unlabelled", &[], "4", vec![])];
    let r = run(
        spread_pods("p", 1, 100, &spread_on(KEY, 1, true)),
        vec![],
        only_unlabelled,
    );
    assert!(
        r.unschedulable[0]
            .reason
            .contains(&format!("the node has no {KEY} label")),
        "{r:#?}"
    );
}

/// Karpenter answers a spread on a key no NodePool or node defines with an unsatisfiable
/// topology error; so does the simulation, naming the key.
#[test]
fn a_key_without_domains_makes_the_pod_unschedulable() {
    let r = run(
        spread_pods("p", 1, 100, &spread_on("rack", 1, true)),
        vec![nodepool("default", types())],
        vec![],
    );
    assert!(
        r.unschedulable[0]
            .reason
            .contains("no NodePool or existing node gives topology key rack a value"),
        "{r:#?}"
    );
    // ScheduleAnyway is dropped instead.
    let r = run(
        spread_pods("p", 1, 100, &spread_on("rack", 1, false)),
        vec![nodepool("default", types())],
        vec![],
    );
    assert!(r.unschedulable.is_empty(), "{r:#?}");
}

/// A NodePool that does not define a custom key cannot be narrowed to one of its values
/// (Karpenter refuses the undefined label), so only the pool that defines it is used.
#[test]
fn only_nodepools_defining_the_key_take_spread_pods() {
    let mut open = nodepool("a-open", types());
    open.weight = 100;
    let r = run(
        spread_pods("p", 4, 100, &spread_on(KEY, 1, true)),
        vec![open, pool_with("b-defines", KEY, &["r1", "r2"])],
        vec![],
    );
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert!(r.new_nodeclaims.iter().all(|c| c.nodepool == "b-defines"));
    assert_eq!(
        per_value(&r, KEY),
        BTreeMap::from([("r1".to_string(), 2), ("r2".to_string(), 2)])
    );
}

/// More values than a domain mask holds: a required constraint is reported as unsupported.
#[test]
fn a_key_with_too_many_values_is_reported() {
    let values: Vec<String> = (0..129).map(|i| format!("v{i}")).collect();
    let mut p = nodepool("default", types());
    p.requirements.add(KEY, Requirement::is_in(values));
    let r = run(
        spread_pods("p", 1, 100, &spread_on(KEY, 1, true)),
        vec![p],
        vec![],
    );
    assert!(
        r.unschedulable[0].reason.contains("not supported"),
        "{r:#?}"
    );
}
