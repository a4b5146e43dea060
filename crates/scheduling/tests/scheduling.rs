//! The simulation's fit rules and unschedulable reasons, one behaviour per test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use driftwood_api::wellknown::{
    LABEL_CAPACITY_TYPE, LABEL_HOSTNAME, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_TOPOLOGY_ZONE,
};
use driftwood_scheduling::pod::{HostPort, NamespaceSelection, PodAffinityTerm, TopologySpread};
use driftwood_scheduling::testkit::{GIB, instance_type, labels, nodepool, pod};
use driftwood_scheduling::{
    ExistingNode, InstanceType, NewNodeClaim, NodePoolSpec, Requirement, Requirements, Resources,
    SimPod, SimulationInput, SimulationOptions, SimulationResult, Taint, TaintEffect, Toleration,
    schedule,
};
use std::sync::Arc;

const ZONES: [&str; 3] = ["z1", "z2", "z3"];

fn types() -> Vec<InstanceType> {
    vec![
        instance_type("small", 2, 4, 110, &ZONES),
        instance_type("medium", 4, 8, 110, &ZONES),
        instance_type("large", 8, 16, 110, &ZONES),
    ]
}

fn pool() -> NodePoolSpec {
    nodepool("default", types())
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

fn claim_of<'a>(r: &'a SimulationResult, pod: &str) -> &'a NewNodeClaim {
    r.new_nodeclaims
        .iter()
        .find(|c| c.pods.iter().any(|p| p == pod))
        .unwrap_or_else(|| panic!("{pod} not on a claim: {r:#?}"))
}

fn reason<'a>(r: &'a SimulationResult, pod: &str) -> &'a str {
    &r.unschedulable
        .iter()
        .find(|u| u.pod == pod)
        .unwrap_or_else(|| panic!("{pod} not unschedulable: {r:#?}"))
        .reason
}

fn node(name: &str, zone: &str, cpu: &str, mem: &str) -> ExistingNode {
    ExistingNode {
        name: name.into(),
        labels: labels(&[(LABEL_HOSTNAME, name), (LABEL_TOPOLOGY_ZONE, zone)]),
        allocatable: Resources::parse([("cpu", cpu), ("memory", mem), ("pods", "110")]).unwrap(),
        initialized: true,
        ..ExistingNode::default()
    }
}

fn zone_of(c: &NewNodeClaim) -> String {
    c.requirements
        .get(LABEL_TOPOLOGY_ZONE)
        .and_then(|r| r.single_value())
        .unwrap_or("?")
        .to_string()
}

fn sel(k: &str, v: &str) -> Option<Requirements> {
    Some(Requirements::from_labels(&labels(&[(k, v)])))
}

fn term(key: &str, k: &str, v: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        topology_key: key.into(),
        selector: sel(k, v),
        namespaces: NamespaceSelection::default(),
    }
}

fn labelled(key: &str, cpu: i64, l: &[(&str, &str)]) -> SimPod {
    let mut p = pod(key, cpu, GIB);
    p.constraints.labels = labels(l);
    p
}

#[test]
fn existing_capacity_is_used_before_new_nodeclaims() {
    let mut n = node("n1", "z1", "4", "16Gi");
    n.pods.push(pod("ns/bound", 3000, GIB));
    // Largest first: b (1 core) takes the free core of n1, a opens a NodeClaim.
    let r = run(
        vec![pod("ns/a", 500, GIB), pod("ns/b", 1000, GIB)],
        vec![pool()],
        vec![n],
    );
    assert_eq!(r.existing_placements.len(), 1, "{r:#?}");
    assert_eq!(r.existing_placements[0].pod, "ns/b");
    assert_eq!(r.new_nodeclaims.len(), 1);
    assert_eq!(r.new_nodeclaims[0].pods, vec!["ns/a".to_string()]);
    assert_eq!(
        r.new_nodeclaims[0].instance_types,
        vec!["small", "medium", "large"]
    );
}

#[test]
fn pods_of_a_going_away_node_move_and_nothing_lands_on_it() {
    let mut old = node("old", "z1", "4", "16Gi");
    old.going_away = true;
    old.pods.push(pod("ns/moving", 1000, GIB));
    let mut ds = pod("kube-system/ds", 100, GIB);
    ds.is_daemonset = true;
    old.pods.push(ds);
    let spare = node("spare", "z2", "4", "16Gi");
    let r = run(vec![pod("ns/new", 100, GIB)], vec![], vec![old, spare]);
    let placed: Vec<(&str, &str)> = r
        .existing_placements
        .iter()
        .map(|p| (p.pod.as_str(), p.node.as_str()))
        .collect();
    assert!(placed.contains(&("ns/moving", "spare")), "{placed:?}");
    assert!(placed.contains(&("ns/new", "spare")), "{placed:?}");
    assert_eq!(placed.len(), 2, "daemonset pods are not moved");
    assert!(r.unschedulable.is_empty());
}

#[test]
fn disruption_shape_reports_replacement_needed() {
    let mut old = node("old", "z1", "4", "16Gi");
    old.going_away = true;
    old.pods.push(pod("ns/big", 3000, GIB));
    let full = node("full", "z1", "1", "16Gi");
    let r = run(vec![], vec![pool()], vec![old.clone(), full.clone()]);
    assert_eq!(r.new_nodeclaims.len(), 1);
    assert_eq!(r.new_nodeclaims[0].instance_types[0], "medium");
    let r = run(vec![], vec![], vec![old, full]);
    assert!(
        reason(&r, "ns/big").contains("insufficient free cpu"),
        "{r:#?}"
    );
    assert!(reason(&r, "ns/big").contains("no NodePool"), "{r:#?}");
}

#[test]
fn node_selector_selects_existing_nodes_and_narrows_new_claims() {
    let mut p = pod("ns/a", 100, GIB);
    p.constraints.node_selector =
        Requirements::from_labels(&labels(&[(LABEL_TOPOLOGY_ZONE, "z2")]));
    let r = run(
        vec![p.clone()],
        vec![pool()],
        vec![node("n1", "z1", "4", "16Gi")],
    );
    assert!(r.existing_placements.is_empty());
    assert_eq!(zone_of(claim_of(&r, "ns/a")), "z2");
    let r = run(
        vec![p],
        vec![pool()],
        vec![node("n1", "z1", "4", "16Gi"), node("n2", "z2", "4", "16Gi")],
    );
    assert_eq!(r.existing_placements[0].node, "n2");
}

#[test]
fn custom_labels_must_be_defined_by_the_nodepool() {
    let mut p = pod("ns/a", 100, GIB);
    p.constraints.node_selector = Requirements::from_labels(&labels(&[("team", "red")]));
    let r = run(vec![p.clone()], vec![pool()], vec![]);
    let why = reason(&r, "ns/a");
    assert!(
        why.contains("incompatible with nodepool \"default\"") && why.contains("team"),
        "{why}"
    );
    let mut labelled_pool = pool();
    labelled_pool.labels = labels(&[("team", "red")]);
    let r = run(vec![p.clone()], vec![labelled_pool], vec![]);
    assert!(r.unschedulable.is_empty());
    let mut wrong = pool();
    wrong.labels = labels(&[("team", "blue")]);
    let r = run(vec![p], vec![wrong], vec![]);
    assert!(reason(&r, "ns/a").contains("team"));
}

#[test]
fn required_node_affinity_terms_are_ored() {
    let mut p = pod("ns/a", 100, GIB);
    p.constraints.required_terms = vec![
        Requirements::from_labels(&labels(&[(LABEL_INSTANCE_TYPE, "nonexistent")])),
        Requirements::from_labels(&labels(&[(LABEL_INSTANCE_TYPE, "large")])),
    ];
    let r = run(vec![p], vec![pool()], vec![]);
    assert_eq!(claim_of(&r, "ns/a").instance_types, vec!["large"]);
}

#[test]
fn requirement_no_instance_type_satisfies_is_named() {
    let mut p = pod("ns/a", 100, GIB);
    p.constraints.node_selector =
        Requirements::from_labels(&labels(&[(LABEL_INSTANCE_TYPE, "huge")]));
    let r = run(vec![p], vec![pool()], vec![]);
    let why = reason(&r, "ns/a");
    assert!(
        why.contains(
            "no instance type satisfies requirement node.kubernetes.io/instance-type In [huge]"
        ),
        "{why}"
    );
}

/// Issue 18: a NodePool asking for a category its class does not offer (a GPU pool on a catalog
/// without GPUs) used to be told "no instance type satisfies requirement karpenter.sh/nodepool
/// In [default]". The message now names the requirement that removed the last candidates, and
/// whose it is.
#[test]
fn the_requirement_that_removed_the_last_instance_types_is_named() {
    let mut gpu_pool = pool();
    gpu_pool.requirements.add(
        LABEL_INSTANCE_TYPE,
        Requirement::is_in(["large".to_string(), "small".to_string()]),
    );
    gpu_pool.requirements.add(
        "karpenter.k8s.aws/instance-gpu-count",
        Requirement::exists(),
    );
    // As the AWS provider models them: a type without GPUs has no GPU-count label.
    for t in std::sync::Arc::make_mut(&mut gpu_pool.instance_types) {
        t.requirements.add(
            "karpenter.k8s.aws/instance-gpu-count",
            Requirement::does_not_exist(),
        );
    }
    let mut p = pod("ns/a", 100, GIB);
    p.constraints.node_selector =
        Requirements::from_labels(&labels(&[("karpenter.sh/nodepool", "default")]));
    let r = run(vec![p], vec![gpu_pool], vec![]);
    let why = reason(&r, "ns/a");
    assert!(
        why.contains(
            "no instance type satisfies requirement karpenter.k8s.aws/instance-gpu-count Exists (the nodepool's requirement;"
        ),
        "{why}"
    );
    assert!(!why.contains("karpenter.sh/nodepool In"), "{why}");
}

#[test]
fn preferred_node_affinity_is_honoured_then_relaxed() {
    let pref = |zone: &str| {
        let mut p = pod(&format!("ns/{zone}"), 100, GIB);
        p.constraints.preferred_terms = vec![(
            10,
            Requirements::from_labels(&labels(&[(LABEL_TOPOLOGY_ZONE, zone)])),
        )];
        p
    };
    let r = run(
        vec![pref("z3")],
        vec![pool()],
        vec![node("n1", "z1", "4", "16Gi")],
    );
    assert_eq!(
        zone_of(claim_of(&r, "ns/z3")),
        "z3",
        "preference beats existing capacity in another zone"
    );
    let r = run(
        vec![pref("z9")],
        vec![pool()],
        vec![node("n1", "z1", "4", "16Gi")],
    );
    assert_eq!(
        r.existing_placements.len(),
        1,
        "impossible preference is relaxed"
    );
}

#[test]
fn taints_block_unless_tolerated() {
    let mut tainted = pool();
    tainted.taints = vec![Taint::new("dedicated", "gpu", TaintEffect::NoSchedule)];
    let r = run(vec![pod("ns/a", 100, GIB)], vec![tainted.clone()], vec![]);
    let why = reason(&r, "ns/a");
    assert!(
        why.contains("taint dedicated=gpu:NoSchedule is not tolerated"),
        "{why}"
    );

    let mut equal = pod("ns/eq", 100, GIB);
    equal.constraints.tolerations = vec![Toleration::equal(
        "dedicated",
        "gpu",
        Some(TaintEffect::NoSchedule),
    )];
    let mut wrong_value = pod("ns/wrong", 100, GIB);
    wrong_value.constraints.tolerations = vec![Toleration::equal("dedicated", "cpu", None)];
    let mut exists = pod("ns/exists", 100, GIB);
    exists.constraints.tolerations = vec![Toleration::exists(Some("dedicated"), None)];
    let mut all = pod("ns/all", 100, GIB);
    all.constraints.tolerations = vec![Toleration::exists(None, None)];
    let mut wrong_effect = pod("ns/effect", 100, GIB);
    wrong_effect.constraints.tolerations = vec![Toleration::exists(
        Some("dedicated"),
        Some(TaintEffect::NoExecute),
    )];
    let r = run(
        vec![equal, wrong_value, exists, all, wrong_effect],
        vec![tainted],
        vec![],
    );
    let bad: Vec<&str> = r.unschedulable.iter().map(|u| u.pod.as_str()).collect();
    assert_eq!(
        bad,
        vec!["ns/effect", "ns/wrong"]
            .into_iter()
            .filter(|p| bad.contains(p))
            .collect::<Vec<_>>()
    );
    assert_eq!(bad.len(), 2, "{r:#?}");
}

#[test]
fn no_execute_blocks_and_prefer_no_schedule_is_ignored() {
    let mut n1 = node("n1", "z1", "4", "16Gi");
    n1.taints = vec![Taint::new("evict", "", TaintEffect::NoExecute)];
    let mut n2 = node("n2", "z1", "4", "16Gi");
    n2.taints = vec![Taint::new("soft", "", TaintEffect::PreferNoSchedule)];
    let r = run(vec![pod("ns/a", 100, GIB)], vec![], vec![n1, n2]);
    assert_eq!(r.existing_placements[0].node, "n2");
    let mut n1 = node("n1", "z1", "4", "16Gi");
    n1.taints = vec![Taint::new("evict", "", TaintEffect::NoExecute)];
    let r = run(vec![pod("ns/a", 100, GIB)], vec![], vec![n1]);
    assert!(
        reason(&r, "ns/a").contains("taint evict:NoExecute is not tolerated"),
        "{r:#?}"
    );
}

#[test]
fn startup_taints_need_no_toleration() {
    let mut p = pool();
    p.startup_taints = vec![Taint::new(
        "cilium.io/agent-not-ready",
        "",
        TaintEffect::NoExecute,
    )];
    let r = run(vec![pod("ns/a", 100, GIB)], vec![p], vec![]);
    assert!(r.unschedulable.is_empty());
    let mut n = node("n1", "z1", "4", "16Gi");
    let startup = Taint::new("cilium.io/agent-not-ready", "", TaintEffect::NoExecute);
    n.taints = vec![
        startup.clone(),
        Taint::new("node.kubernetes.io/not-ready", "", TaintEffect::NoSchedule),
    ];
    n.startup_taints = vec![startup];
    n.initialized = false;
    let r = run(vec![pod("ns/a", 100, GIB)], vec![], vec![n.clone()]);
    assert_eq!(
        r.existing_placements.len(),
        1,
        "uninitialized node: startup and ephemeral taints ignored"
    );
    n.initialized = true;
    let r = run(vec![pod("ns/a", 100, GIB)], vec![], vec![n]);
    assert_eq!(r.unschedulable.len(), 1);
}

#[test]
fn zone_topology_spread_balances_and_is_strict() {
    let spread = |i: usize, hard: bool| {
        let mut p = labelled(&format!("ns/p{i}"), 100, &[("app", "web")]);
        p.constraints.spreads.push(TopologySpread {
            topology_key: LABEL_TOPOLOGY_ZONE.into(),
            max_skew: 1,
            hard,
            selector: sel("app", "web"),
            min_domains: None,
        });
        p
    };
    let r = run(
        (0..6).map(|i| spread(i, true)).collect(),
        vec![pool()],
        vec![],
    );
    assert!(r.unschedulable.is_empty());
    let mut per_zone = std::collections::BTreeMap::new();
    for c in &r.new_nodeclaims {
        *per_zone.entry(zone_of(c)).or_insert(0) += c.pods.len();
    }
    assert_eq!(
        per_zone.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2],
        "{per_zone:?}"
    );

    // Only z1 can be launched: DoNotSchedule refuses the second pod, ScheduleAnyway does not.
    let mut z1_only = pool();
    z1_only.requirements = Requirements::from_labels(&labels(&[(LABEL_TOPOLOGY_ZONE, "z1")]));
    // z2 exists (an existing node too small for the pods) so it counts as a domain.
    let existing = node("n-z2", "z2", "50m", "16Gi");
    let r = run(
        (0..2).map(|i| spread(i, true)).collect(),
        vec![z1_only.clone()],
        vec![existing.clone()],
    );
    assert_eq!(r.unschedulable.len(), 1, "{r:#?}");
    assert!(
        reason(&r, &r.unschedulable[0].pod).contains("zonal topology"),
        "{r:#?}"
    );
    let r = run(
        (0..3).map(|i| spread(i, false)).collect(),
        vec![z1_only],
        vec![existing],
    );
    assert!(r.unschedulable.is_empty(), "{r:#?}");
}

#[test]
fn hostname_spread_and_anti_affinity_put_pods_on_distinct_nodes() {
    let mut pods = Vec::new();
    for i in 0..3 {
        let mut p = labelled(&format!("ns/s{i}"), 100, &[("app", "s")]);
        p.constraints.spreads.push(TopologySpread {
            topology_key: LABEL_HOSTNAME.into(),
            max_skew: 1,
            hard: true,
            selector: sel("app", "s"),
            min_domains: None,
        });
        pods.push(p);
        let mut q = labelled(&format!("ns/a{i}"), 100, &[("app", "a")]);
        q.constraints
            .anti_affinity
            .push(term(LABEL_HOSTNAME, "app", "a"));
        pods.push(q);
    }
    let r = run(pods, vec![pool()], vec![]);
    assert!(r.unschedulable.is_empty());
    assert_eq!(r.new_nodeclaims.len(), 3, "{r:#?}");
    for c in &r.new_nodeclaims {
        assert_eq!(c.pods.iter().filter(|p| p.starts_with("ns/s")).count(), 1);
        assert_eq!(c.pods.iter().filter(|p| p.starts_with("ns/a")).count(), 1);
    }
}

#[test]
fn anti_affinity_is_symmetric_with_bound_pods() {
    let mut n = node("n1", "z1", "4", "16Gi");
    let mut guard = labelled("ns/guard", 100, &[("app", "guard")]);
    guard
        .constraints
        .anti_affinity
        .push(term(LABEL_HOSTNAME, "app", "web"));
    n.pods.push(guard);
    let r = run(
        vec![labelled("ns/web", 100, &[("app", "web")])],
        vec![],
        vec![n.clone()],
    );
    assert!(reason(&r, "ns/web").contains("anti-affinity"), "{r:#?}");
    let r = run(
        vec![labelled("ns/other", 100, &[("app", "other")])],
        vec![],
        vec![n],
    );
    assert_eq!(r.existing_placements.len(), 1);
}

#[test]
fn pod_affinity_colocates_on_hostname_and_zone() {
    let mut n = node("n1", "z2", "4", "16Gi");
    n.pods.push(labelled("ns/db", 100, &[("app", "db")]));
    let mut host = pod("ns/host", 100, GIB);
    host.constraints
        .affinity
        .push(term(LABEL_HOSTNAME, "app", "db"));
    let mut zonal = pod("ns/zonal", 3950, GIB);
    zonal
        .constraints
        .affinity
        .push(term(LABEL_TOPOLOGY_ZONE, "app", "db"));
    let r = run(vec![host, zonal], vec![pool()], vec![n]);
    assert_eq!(
        r.existing_placements
            .iter()
            .map(|p| p.pod.as_str())
            .collect::<Vec<_>>(),
        vec!["ns/host"]
    );
    assert_eq!(zone_of(claim_of(&r, "ns/zonal")), "z2");

    // Self-affinity: the first pod may go anywhere, the rest follow it.
    let pods: Vec<SimPod> = (0..4)
        .map(|i| {
            let mut p = labelled(&format!("ns/g{i}"), 1000, &[("grp", "x")]);
            p.constraints
                .affinity
                .push(term(LABEL_TOPOLOGY_ZONE, "grp", "x"));
            p
        })
        .collect();
    let r = run(pods, vec![pool()], vec![]);
    let zones: std::collections::BTreeSet<String> = r.new_nodeclaims.iter().map(zone_of).collect();
    assert_eq!(zones.len(), 1, "{r:#?}");

    let mut orphan = pod("ns/orphan", 100, GIB);
    orphan
        .constraints
        .affinity
        .push(term(LABEL_HOSTNAME, "app", "missing"));
    let r = run(vec![orphan], vec![pool()], vec![]);
    assert!(
        reason(&r, "ns/orphan").contains("no pod matches it anywhere"),
        "{r:#?}"
    );
}

#[test]
fn host_ports_conflict() {
    let hp = |key: &str| {
        let mut p = pod(key, 100, GIB);
        p.constraints.host_ports = vec![HostPort {
            port: 9100,
            protocol: "TCP".into(),
            ip: "0.0.0.0".into(),
        }];
        p
    };
    let r = run(vec![hp("ns/a"), hp("ns/b")], vec![pool()], vec![]);
    assert_eq!(r.new_nodeclaims.len(), 2);
    let r = run(
        vec![hp("ns/a"), hp("ns/b")],
        vec![],
        vec![node("n1", "z1", "4", "16Gi")],
    );
    assert!(reason(&r, "ns/b").contains("host port"), "{r:#?}");
}

#[test]
fn daemonsets_reduce_new_node_capacity_when_they_would_run_there() {
    let only_small = || nodepool("default", vec![instance_type("small", 2, 4, 110, &ZONES)]);
    let mut ds = pod("kube-system/agent", 1000, GIB);
    ds.is_daemonset = true;
    let input = |ds: Vec<SimPod>, np: NodePoolSpec| SimulationInput {
        pods: vec![pod("ns/a", 1500, GIB)],
        nodepools: vec![np],
        daemonsets: ds,
        ..SimulationInput::default()
    };
    let r = schedule(&input(vec![ds.clone()], only_small())).unwrap();
    let why = reason(&r, "ns/a");
    assert!(
        why.contains("daemonset overhead") && why.contains("cpu needs 1500m"),
        "{why}"
    );

    // A daemonset that does not tolerate the pool's taint does not run there.
    let mut tainted = only_small();
    tainted.taints = vec![Taint::new("dedicated", "x", TaintEffect::NoSchedule)];
    let mut p = pod("ns/a", 1500, GIB);
    p.constraints.tolerations = vec![Toleration::exists(Some("dedicated"), None)];
    let mut i = input(vec![ds.clone()], tainted);
    i.pods = vec![p];
    let r = schedule(&i).unwrap();
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert!(r.new_nodeclaims[0].daemonset_requests.is_zero());

    // A daemonset selecting arm64 does not run on an amd64-only pool.
    let mut arm = ds;
    arm.constraints.node_selector =
        Requirements::from_labels(&labels(&[("kubernetes.io/arch", "arm64")]));
    let mut amd = only_small();
    amd.requirements = Requirements::from_labels(&labels(&[("kubernetes.io/arch", "amd64")]));
    let r = schedule(&input(vec![arm], amd)).unwrap();
    assert!(r.unschedulable.is_empty(), "{r:#?}");
}

/// Karpenter v1.14 counts `limits.nodes` for every NodePool (its scheduler's "should not
/// schedule if the nodepool's node limit is reached"): with two nodes left, six pods that each
/// need a whole node get two NodeClaims and the rest are told the limit is reached.
#[test]
fn a_nodes_limit_caps_the_number_of_new_nodeclaims() {
    let mut limited = pool();
    limited.remaining_limits = Some(Resources::parse([("nodes", "2")]).unwrap());
    let pods: Vec<SimPod> = (0..6)
        .map(|i| pod(&format!("ns/p{i}"), 7000, GIB))
        .collect();
    let r = run(pods, vec![limited], vec![]);
    assert_eq!(r.new_nodeclaims.len(), 2, "{r:#?}");
    assert_eq!(r.unschedulable.len(), 4);
    assert!(
        r.unschedulable[0].reason.contains("limits reached"),
        "{}",
        r.unschedulable[0].reason
    );
    // Only what the NodePool limits is printed, a used-up limit as 0 (unlimited resources less
    // what the two claims reserve are no figures: they printed as ~9.2e18 before).
    for u in &r.unschedulable {
        assert!(
            u.reason.contains("remaining nodes=0") && !u.reason.contains("memory="),
            "{}",
            u.reason
        );
    }
}

#[test]
fn nodepool_limits_are_respected_and_reported() {
    let mut limited = pool();
    limited.remaining_limits = Some(Resources::parse([("cpu", "4")]).unwrap());
    let pods: Vec<SimPod> = (0..3)
        .map(|i| pod(&format!("ns/p{i}"), 3000, GIB))
        .collect();
    let r = run(pods, vec![limited], vec![]);
    assert_eq!(r.new_nodeclaims.len(), 1, "{r:#?}");
    assert_eq!(r.new_nodeclaims[0].instance_types, vec!["medium"]);
    assert_eq!(r.unschedulable.len(), 2);
    assert!(
        r.unschedulable[0].reason.contains("limits reached"),
        "{}",
        r.unschedulable[0].reason
    );
}

#[test]
fn heavier_nodepools_are_tried_first() {
    let mut heavy = nodepool("heavy", types());
    heavy.weight = 10;
    let light = nodepool("a-light", types());
    let r = run(
        vec![pod("ns/a", 100, GIB)],
        vec![light.clone(), heavy.clone()],
        vec![],
    );
    assert_eq!(r.new_nodeclaims[0].nodepool, "heavy");
    assert!(
        r.new_nodeclaims[0]
            .requirements
            .get(LABEL_NODEPOOL)
            .unwrap()
            .has("heavy")
    );
    let mut p = pod("ns/b", 100, GIB);
    p.constraints.node_selector =
        Requirements::from_labels(&labels(&[(LABEL_NODEPOOL, "a-light")]));
    let r = run(vec![p], vec![heavy, light], vec![]);
    assert_eq!(r.new_nodeclaims[0].nodepool, "a-light");
}

#[test]
fn instance_types_are_cheapest_first_and_bounded() {
    let many: Vec<InstanceType> = (0..100)
        .rev()
        .map(|i| instance_type(&format!("t{i:03}"), i + 1, 2 * (i + 1), 110, &ZONES))
        .collect();
    let input = SimulationInput {
        pods: vec![pod("ns/a", 1500, GIB)],
        nodepools: vec![nodepool("default", many)],
        options: SimulationOptions {
            max_instance_types: 5,
            ..SimulationOptions::default()
        },
        ..SimulationInput::default()
    };
    let r = schedule(&input).unwrap();
    assert_eq!(
        r.new_nodeclaims[0].instance_types,
        vec!["t001", "t002", "t003", "t004", "t005"]
    );
    assert_eq!(r.new_nodeclaims[0].requests.get("cpu"), 1500);
    let it = r.new_nodeclaims[0]
        .requirements
        .get(LABEL_INSTANCE_TYPE)
        .unwrap();
    assert_eq!(it.finite_values().unwrap().len(), 5);
    assert!(it.has("t001") && !it.has("t006"));
}

#[test]
fn capacity_type_requirement_limits_offerings() {
    let mut p = pod("ns/a", 100, GIB);
    p.constraints.node_selector =
        Requirements::from_labels(&labels(&[(LABEL_CAPACITY_TYPE, "spot")]));
    let r = run(vec![p], vec![pool()], vec![]);
    assert!(
        claim_of(&r, "ns/a")
            .requirements
            .get(LABEL_CAPACITY_TYPE)
            .unwrap()
            .single_value()
            == Some("spot")
    );
    let mut np = nodepool("od", vec![instance_type("x", 2, 4, 110, &ZONES)]);
    for it in std::sync::Arc::make_mut(&mut np.instance_types) {
        it.offerings.retain(|o| o.capacity_type == "on-demand");
    }
    let mut p = pod("ns/b", 100, GIB);
    p.constraints.node_selector =
        Requirements::from_labels(&labels(&[(LABEL_CAPACITY_TYPE, "spot")]));
    let r = run(vec![p], vec![np], vec![]);
    assert!(
        reason(&r, "ns/b").contains("karpenter.sh/capacity-type"),
        "{r:#?}"
    );
}

#[test]
fn min_values_keeps_enough_instance_types_or_explains() {
    let mut np = pool();
    np.requirements.add(
        LABEL_INSTANCE_TYPE,
        Requirement::exists().with_min_values(Some(2)),
    );
    let r = run(vec![pod("ns/a", 100, GIB)], vec![np.clone()], vec![]);
    assert!(r.new_nodeclaims[0].instance_types.len() >= 2);
    // A 5-core pod only fits "large": one value left, minValues 2 fails.
    let r = run(vec![pod("ns/b", 5000, GIB)], vec![np], vec![]);
    assert!(reason(&r, "ns/b").contains("minValues 2"), "{r:#?}");
}

#[test]
fn resources_too_large_for_any_type_are_explained() {
    let r = run(vec![pod("ns/huge", 64_000, GIB)], vec![pool()], vec![]);
    let why = reason(&r, "ns/huge");
    assert!(
        why.contains("no instance type has room") && why.contains("cpu needs 64"),
        "{why}"
    );
    let mut gpu = SimPod::new(
        "ns/gpu",
        Resources::parse([("cpu", "1"), ("nvidia.com/gpu", "1")]).unwrap(),
    );
    gpu.priority = 1;
    let mut gpu_type = instance_type("g", 8, 32, 110, &ZONES);
    gpu_type.capacity.set("nvidia.com/gpu", 1000);
    let r = run(vec![gpu.clone()], vec![pool()], vec![]);
    assert!(reason(&r, "ns/gpu").contains("nvidia.com/gpu"), "{r:#?}");
    let r = run(vec![gpu], vec![nodepool("gpu", vec![gpu_type])], vec![]);
    assert_eq!(claim_of(&r, "ns/gpu").instance_types, vec!["g"]);
}

#[test]
fn spread_on_a_key_nothing_defines_is_reported() {
    let mut p = pod("ns/a", 100, GIB);
    p.constraints.spreads.push(TopologySpread {
        topology_key: "rack".into(),
        max_skew: 1,
        hard: true,
        selector: sel("app", "a"),
        min_domains: None,
    });
    // Custom keys are supported (tests/topology_custom_keys.rs); no NodePool or node gives
    // "rack" a value, so the pod has no domain to go to.
    let r = run(vec![p], vec![pool()], vec![]);
    assert!(reason(&r, "ns/a").contains("topology key rack"), "{r:#?}");
}

#[test]
fn same_input_same_output_regardless_of_nodepool_order() {
    let pods: Vec<SimPod> = (0..40)
        .map(|i| pod(&format!("ns/p{i:02}"), 100 + (i * 37 % 900), GIB))
        .collect();
    let a = run(
        pods.clone(),
        vec![nodepool("a", types()), nodepool("b", types())],
        vec![],
    );
    let b = run(
        pods.clone(),
        vec![nodepool("b", types()), nodepool("a", types())],
        vec![],
    );
    assert_eq!(a, b);
    let mut reversed = pods;
    reversed.reverse();
    let c = run(
        reversed,
        vec![nodepool("a", types()), nodepool("b", types())],
        vec![],
    );
    assert_eq!(a, c, "pod input order does not matter either");
}

#[test]
fn bin_packs_many_small_pods_onto_few_nodes() {
    let pods: Vec<SimPod> = (0..30)
        .map(|i| pod(&format!("ns/p{i:02}"), 500, GIB / 2))
        .collect();
    let r = run(pods, vec![pool()], vec![]);
    assert!(r.unschedulable.is_empty());
    // 15 cores of pods fit two large (8-core) nodes.
    assert_eq!(r.new_nodeclaims.len(), 2, "{r:#?}");
    assert_eq!(r.new_nodeclaims[0].instance_types, vec!["large"]);
}

#[test]
fn numeric_operators_select_instance_types_by_label() {
    let mut p = pod("ns/a", 100, GIB);
    let four = vec!["4".to_string()];
    p.constraints.required_terms = vec![
        Requirements::from_node_selector_requirements([(
            "karpenter.k8s.aws/instance-cpu",
            "Gt",
            four.as_slice(),
            None,
        )])
        .unwrap(),
    ];
    let r = run(vec![p], vec![pool()], vec![]);
    assert_eq!(claim_of(&r, "ns/a").instance_types, vec!["large"]);
    let mut q = pod("ns/b", 100, GIB);
    q.constraints.required_terms = vec![
        Requirements::from_node_selector_requirements([(
            "karpenter.k8s.aws/instance-cpu",
            "Lte",
            four.as_slice(),
            None,
        )])
        .unwrap(),
    ];
    let r = run(vec![q], vec![pool()], vec![]);
    assert_eq!(claim_of(&r, "ns/b").instance_types, vec!["small", "medium"]);
}

#[test]
fn undefined_well_known_labels_are_allowed_on_new_claims() {
    let mut p = pod("ns/a", 100, GIB);
    p.constraints.node_selector =
        Requirements::from_labels(&labels(&[("kubernetes.io/arch", "amd64")]));
    let r = run(vec![p], vec![pool()], vec![]);
    assert!(r.unschedulable.is_empty());
    let mut arm = pod("ns/arm", 100, GIB);
    arm.constraints.node_selector =
        Requirements::from_labels(&labels(&[("kubernetes.io/arch", "arm64")]));
    let r = run(vec![arm], vec![pool()], vec![]);
    assert!(
        reason(&r, "ns/arm").contains("kubernetes.io/arch In [arm64]"),
        "{r:#?}"
    );
}

#[test]
fn preferred_pod_affinity_and_anti_affinity_are_relaxed_when_impossible() {
    let mut n = node("n1", "z1", "4", "16Gi");
    n.pods.push(labelled("ns/cache", 100, &[("app", "cache")]));
    // Prefers to be with the cache: lands on n1 rather than a new node.
    let mut near = pod("ns/near", 100, GIB);
    near.constraints.preferred_affinity = vec![(50, term(LABEL_HOSTNAME, "app", "cache"))];
    // Prefers to avoid the cache, but only n1 exists and no NodePool: relaxed onto n1.
    let mut away = pod("ns/away", 100, GIB);
    away.constraints.preferred_anti_affinity = vec![(50, term(LABEL_HOSTNAME, "app", "cache"))];
    let r = run(vec![near.clone(), away.clone()], vec![], vec![n.clone()]);
    assert_eq!(r.existing_placements.len(), 2, "{r:#?}");
    // With a NodePool, the anti-affinity preference is honoured by a new node.
    let r = run(vec![near, away], vec![pool()], vec![n]);
    assert_eq!(
        r.existing_placements
            .iter()
            .map(|p| p.pod.as_str())
            .collect::<Vec<_>>(),
        vec!["ns/near"]
    );
    assert_eq!(claim_of(&r, "ns/away").pods.len(), 1);
}

#[test]
fn schedule_anyway_hostname_spread_is_a_preference() {
    let soft = |i: usize| {
        let mut p = labelled(&format!("ns/s{i}"), 100, &[("app", "s")]);
        p.constraints.spreads.push(TopologySpread {
            topology_key: LABEL_HOSTNAME.into(),
            max_skew: 1,
            hard: false,
            selector: sel("app", "s"),
            min_domains: None,
        });
        p
    };
    let r = run(
        (0..3).map(soft).collect(),
        vec![],
        vec![node("n1", "z1", "4", "16Gi")],
    );
    assert_eq!(r.existing_placements.len(), 3, "{r:#?}");
    let r = run((0..3).map(soft).collect(), vec![pool()], vec![]);
    assert_eq!(
        r.new_nodeclaims.len(),
        3,
        "honoured when new nodes can be made"
    );
}

#[test]
fn min_domains_treats_missing_domains_as_empty() {
    // Only z1 can launch and one z1 pod exists; minDomains 3 means the global minimum is 0,
    // so a second pod in z1 would make skew 2 > 1.
    let mut z1_only = pool();
    z1_only.requirements = Requirements::from_labels(&labels(&[(LABEL_TOPOLOGY_ZONE, "z1")]));
    let spread = |i: usize, min_domains: Option<i32>| {
        let mut p = labelled(&format!("ns/p{i}"), 100, &[("app", "web")]);
        p.constraints.spreads.push(TopologySpread {
            topology_key: LABEL_TOPOLOGY_ZONE.into(),
            max_skew: 1,
            hard: true,
            selector: sel("app", "web"),
            min_domains,
        });
        p
    };
    let r = run(
        vec![spread(0, None), spread(1, None)],
        vec![z1_only.clone()],
        vec![],
    );
    assert!(r.unschedulable.is_empty(), "one domain: skew stays 0");
    let r = run(
        vec![spread(0, Some(3)), spread(1, Some(3))],
        vec![z1_only],
        vec![],
    );
    assert_eq!(r.unschedulable.len(), 1, "{r:#?}");
}

#[test]
fn affinity_terms_look_in_the_right_namespaces() {
    let mut n = node("n1", "z1", "4", "16Gi");
    let mut db = labelled("data/db", 100, &[("app", "db")]);
    db.constraints.namespace = "data".into();
    n.pods.push(db);
    let mut same_ns = pod("web/same", 100, GIB);
    same_ns
        .constraints
        .affinity
        .push(term(LABEL_HOSTNAME, "app", "db"));
    let r = run(vec![same_ns], vec![], vec![n.clone()]);
    assert!(
        reason(&r, "web/same").contains("pod affinity"),
        "default is the pod's own namespace: {r:#?}"
    );
    let mut listed = pod("web/listed", 100, GIB);
    let mut t = term(LABEL_HOSTNAME, "app", "db");
    t.namespaces.names.insert("data".into());
    listed.constraints.affinity.push(t);
    let mut by_label = pod("web/bylabel", 100, GIB);
    let mut t = term(LABEL_HOSTNAME, "app", "db");
    t.namespaces.selector = Some(Requirements::from_labels(&labels(&[("tier", "storage")])));
    by_label.constraints.affinity.push(t);
    let input = SimulationInput {
        pods: vec![listed, by_label],
        existing_nodes: vec![Arc::new(n)],
        namespace_labels: [("data".to_string(), labels(&[("tier", "storage")]))]
            .into_iter()
            .collect(),
        ..SimulationInput::default()
    };
    let r = schedule(&input).unwrap();
    assert_eq!(r.existing_placements.len(), 2, "{r:#?}");
}

#[test]
fn existing_nodes_convert_from_kubernetes_nodes() {
    let k8s: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "ip-1", "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true",
            "topology.kubernetes.io/zone": "z1"}},
        "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "58"}}
    }))
    .unwrap();
    let n = ExistingNode::from_node(&k8s, vec![]).unwrap();
    assert!(n.initialized);
    assert_eq!(n.allocatable.get("cpu"), 3920);
    assert_eq!(
        n.taints,
        vec![Taint::new("dedicated", "x", TaintEffect::NoSchedule)]
    );
    let bad: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "ip-2"},
        "status": {"allocatable": {"cpu": "many"}}
    }))
    .unwrap();
    let err = ExistingNode::from_node(&bad, vec![]).unwrap_err();
    assert!(
        err.to_string().contains("ip-2") && err.to_string().contains("allocatable"),
        "{err}"
    );
}

#[test]
fn existing_node_reasons_name_the_blocking_rule() {
    // Node selection.
    let mut p = pod("ns/sel", 100, GIB);
    p.constraints.node_selector =
        Requirements::from_labels(&labels(&[(LABEL_TOPOLOGY_ZONE, "z2")]));
    let r = run(vec![p], vec![], vec![node("n1", "z1", "4", "16Gi")]);
    let why = reason(&r, "ns/sel");
    assert!(
        why.contains("node label topology.kubernetes.io/zone does not satisfy In [z2]"),
        "{why}"
    );

    // Hostname spread and anti-affinity against pods already there.
    let mut n = node("n1", "z1", "4", "16Gi");
    n.pods.push(labelled("ns/web-0", 100, &[("app", "web")]));
    let mut spread = labelled("ns/spread", 100, &[("app", "web")]);
    spread.constraints.spreads.push(TopologySpread {
        topology_key: LABEL_HOSTNAME.into(),
        max_skew: 1,
        hard: true,
        selector: sel("app", "web"),
        min_domains: None,
    });
    let mut anti = labelled("ns/anti", 100, &[("app", "other")]);
    anti.constraints
        .anti_affinity
        .push(term(LABEL_HOSTNAME, "app", "web"));
    let r = run(vec![spread, anti], vec![], vec![n]);
    assert!(
        reason(&r, "ns/spread").contains("topology spread on kubernetes.io/hostname"),
        "{r:#?}"
    );
    assert!(reason(&r, "ns/spread").contains("maxSkew"), "{r:#?}");
    assert!(
        reason(&r, "ns/anti").contains("pod anti-affinity on kubernetes.io/hostname"),
        "{r:#?}"
    );
    assert!(
        reason(&r, "ns/anti").contains("a matching pod is already there"),
        "{r:#?}"
    );

    // Zonal constraints on a node without a zone label.
    let mut zoneless = node("bare", "z1", "4", "16Gi");
    zoneless.labels.remove(LABEL_TOPOLOGY_ZONE);
    let mut zonal = labelled("ns/zonal", 100, &[("app", "z")]);
    zonal.constraints.spreads.push(TopologySpread {
        topology_key: LABEL_TOPOLOGY_ZONE.into(),
        max_skew: 1,
        hard: true,
        selector: sel("app", "z"),
        min_domains: None,
    });
    let r = run(
        vec![zonal, pod("ns/plain", 100, GIB)],
        vec![],
        vec![zoneless],
    );
    assert!(
        reason(&r, "ns/zonal").contains("no topology.kubernetes.io/zone label"),
        "{r:#?}"
    );
    assert_eq!(
        r.existing_placements.len(),
        1,
        "unconstrained pods still use the node"
    );
}

/// Consolidation's simulation: a zone-spread workload's pods on a node going away, in a zone
/// with no other node, land together on one new node in that zone (not one node each).
#[test]
fn pods_leaving_a_zone_share_one_new_node_there() {
    let spread = |name: &str| {
        let mut p = labelled(name, 1000, &[("app", "web")]);
        p.constraints.spreads.push(TopologySpread {
            topology_key: LABEL_TOPOLOGY_ZONE.into(),
            max_skew: 1,
            hard: true,
            selector: sel("app", "web"),
            min_domains: None,
        });
        p
    };
    let mut a = node("a", "z1", "16", "32Gi");
    a.pods = vec![spread("ns/a0"), spread("ns/a1")];
    a.going_away = true;
    let mut b = node("b", "z2", "2", "8Gi");
    b.pods = vec![spread("ns/b0"), spread("ns/b1")];
    let mut c = node("c", "z3", "2", "8Gi");
    c.pods = vec![spread("ns/c0"), spread("ns/c1")];
    let r = run(vec![], vec![pool()], vec![a, b, c]);
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert_eq!(r.new_nodeclaims.len(), 1, "{r:#?}");
    assert_eq!(zone_of(&r.new_nodeclaims[0]), "z1");
    assert_eq!(r.new_nodeclaims[0].pods.len(), 2);
}

/// The pending pods of a simulation by effective zone, as its progress reports them once done.
fn by_effective_zone(
    pods: Vec<SimPod>,
    nodes: Vec<ExistingNode>,
) -> std::collections::BTreeMap<String, u32> {
    by_effective_zone_moving(pods, 0, nodes)
}

/// [`by_effective_zone`] with the first `moving_pods` pods those of Nodes being deleted.
fn by_effective_zone_moving(
    pods: Vec<SimPod>,
    moving_pods: usize,
    nodes: Vec<ExistingNode>,
) -> std::collections::BTreeMap<String, u32> {
    let progress = driftwood_scheduling::SolveProgress::default();
    assert!(progress.pending_by_effective_zone().is_empty());
    driftwood_scheduling::schedule_observed(
        &SimulationInput {
            pods,
            moving_pods,
            nodepools: vec![pool()],
            existing_nodes: nodes.into_iter().map(Arc::new).collect(),
            ..SimulationInput::default()
        },
        &mut driftwood_scheduling::PoolCache::default(),
        &progress,
    )
    .unwrap();
    progress.pending_by_effective_zone()
}

fn counts(pairs: &[(&str, u32)]) -> std::collections::BTreeMap<String, u32> {
    pairs.iter().map(|(z, n)| (z.to_string(), *n)).collect()
}

/// A node in `zone` holding a pod labelled `app=pod-label` (with `spread` when given).
fn node_with_labelled_pod(
    zone: &str,
    index: usize,
    spread: Option<TopologySpread>,
) -> ExistingNode {
    let mut n = node(&format!("n-{zone}-{index}"), zone, "4", "16Gi");
    let mut p = labelled(
        &format!("ns/existing-{zone}-{index}"),
        100,
        &[("app", "pod-label")],
    );
    p.constraints.spreads.extend(spread);
    n.pods.push(p);
    n
}

fn zone_spread(min_domains: Option<i32>) -> TopologySpread {
    TopologySpread {
        topology_key: LABEL_TOPOLOGY_ZONE.into(),
        max_skew: 1,
        hard: true,
        selector: sel("app", "pod-label"),
        min_domains,
    }
}

/// Karpenter's "Pending Pods by Effective Zone Metric / should report zone of pods correctly"
/// (scheduling suite_test.go), its entries without volumes (the engine models no volume
/// topology): a pod's zone when its strict zone requirement or its own zonal topology leaves
/// one, `flexible` when several, `none` when none.
#[test]
fn pending_pods_are_counted_by_effective_zone() {
    let in_zone = |key: &str, zone: &str| {
        let mut p = pod(key, 100, GIB);
        p.constraints.node_selector =
            Requirements::from_labels(&labels(&[(LABEL_TOPOLOGY_ZONE, zone)]));
        p
    };
    // when pods are flexible to zones
    assert_eq!(
        by_effective_zone(vec![pod("ns/a", 100, GIB), pod("ns/b", 100, GIB)], vec![]),
        counts(&[("flexible", 2)])
    );
    // when pods are restricted to a zone
    assert_eq!(
        by_effective_zone(
            (0..3).map(|i| in_zone(&format!("ns/p{i}"), "z2")).collect(),
            vec![]
        ),
        counts(&[("z2", 3)])
    );
    // when multiple pods have different zone constraints
    assert_eq!(
        by_effective_zone(vec![in_zone("ns/a", "z1"), in_zone("ns/b", "z2")], vec![]),
        counts(&[("z1", 1), ("z2", 1)])
    );
    // when pod has preferred zone affinity: preferences are not strict
    let mut preferring = pod("ns/a", 100, GIB);
    preferring.constraints.preferred_terms = vec![(
        1,
        Requirements::from_labels(&labels(&[(LABEL_TOPOLOGY_ZONE, "z1")])),
    )];
    assert_eq!(
        by_effective_zone(vec![preferring], vec![]),
        counts(&[("flexible", 1)])
    );
    // when pods have required pod affinity
    let mut follower = pod("ns/a", 100, GIB);
    follower
        .constraints
        .affinity
        .push(term(LABEL_TOPOLOGY_ZONE, "app", "pod-label"));
    assert_eq!(
        by_effective_zone(vec![follower], vec![node_with_labelled_pod("z1", 0, None)]),
        counts(&[("z1", 1)])
    );
    // when pods have required pod anti-affinity
    let mut avoider = pod("ns/a", 100, GIB);
    avoider
        .constraints
        .anti_affinity
        .push(term(LABEL_TOPOLOGY_ZONE, "app", "pod-label"));
    assert_eq!(
        by_effective_zone(
            vec![avoider.clone()],
            vec![
                node_with_labelled_pod("z1", 0, None),
                node_with_labelled_pod("z2", 0, None)
            ]
        ),
        counts(&[("z3", 1)])
    );
    // when pods have restricting TSCs
    let mut spreading = labelled("ns/a", 100, &[("app", "pod-label")]);
    spreading.constraints.spreads.push(zone_spread(None));
    assert_eq!(
        by_effective_zone(
            vec![spreading],
            vec![
                node_with_labelled_pod("z1", 0, Some(zone_spread(None))),
                node_with_labelled_pod("z2", 0, Some(zone_spread(None))),
            ]
        ),
        counts(&[("z3", 1)])
    );
    // a spread is checked in every zone, not only the ones a preference names: flexible
    let mut spreading_preferring = labelled("ns/a", 100, &[("app", "pod-label")]);
    spreading_preferring
        .constraints
        .spreads
        .push(zone_spread(None));
    spreading_preferring.constraints.preferred_terms = vec![(
        1,
        Requirements::from_labels(&labels(&[(LABEL_TOPOLOGY_ZONE, "z1")])),
    )];
    assert_eq!(
        by_effective_zone(vec![spreading_preferring], vec![]),
        counts(&[("flexible", 1)])
    );
    let two_per_zone: Vec<ExistingNode> = ZONES
        .iter()
        .flat_map(|z| (0..2).map(move |i| node_with_labelled_pod(z, i, None)))
        .collect();
    // when TSC is unsatisfiable (minDomains 4 of 3 zones: the minimum counts as 0)
    let mut unsatisfiable = pod("ns/a", 100, GIB);
    unsatisfiable.constraints.spreads.push(zone_spread(Some(4)));
    assert_eq!(
        by_effective_zone(vec![unsatisfiable], two_per_zone.clone()),
        counts(&[("none", 1)])
    );
    // when pod affinity is unsatisfiable
    let mut lonely = pod("ns/a", 100, GIB);
    lonely
        .constraints
        .affinity
        .push(term(LABEL_TOPOLOGY_ZONE, "nonexistent", "label"));
    assert_eq!(
        by_effective_zone(vec![lonely], vec![]),
        counts(&[("none", 1)])
    );
    // when pod anti-affinity is unsatisfiable
    assert_eq!(
        by_effective_zone(vec![avoider], two_per_zone),
        counts(&[("none", 1)])
    );
}

/// Karpenter counts pending pods only: the running pods of Nodes being deleted (given first,
/// or on a node going away) are placed but not counted, and a zone requirement listing zones
/// no term allows leaves `none`.
#[test]
fn pods_of_nodes_going_away_are_not_counted_by_effective_zone() {
    let mut moving = pod("ns/moving-first", 100, GIB);
    moving.constraints.node_selector =
        Requirements::from_labels(&labels(&[(LABEL_TOPOLOGY_ZONE, "z3")]));
    assert_eq!(
        by_effective_zone_moving(vec![moving, pod("ns/pending", 100, GIB)], 1, vec![]),
        counts(&[("flexible", 1)])
    );
    let mut old = node("old", "z1", "4", "16Gi");
    old.going_away = true;
    old.pods.push(pod("ns/moving", 1000, GIB));
    let mut pinned = pod("ns/pinned", 100, GIB);
    pinned.constraints.node_selector =
        Requirements::from_labels(&labels(&[(LABEL_TOPOLOGY_ZONE, "z1")]));
    pinned
        .constraints
        .anti_affinity
        .push(term(LABEL_TOPOLOGY_ZONE, "app", "pod-label"));
    assert_eq!(
        by_effective_zone(
            vec![pod("ns/new", 100, GIB), pinned],
            vec![old, node_with_labelled_pod("z1", 0, None)]
        ),
        counts(&[("flexible", 1), ("none", 1)])
    );
}

/// Karpenter's "should allow two nodes to be created when two pods with matching affinities
/// have incompatible selectors" (topology_test.go), where driftwood differs on purpose: two
/// pods of a zonal affinity group that selects itself, one required in z2 and one in z3.
/// Karpenter's simulation lets the second start the group again in z3; kube-scheduler, which
/// binds the pods, refuses it once the first is bound in z2 (a matching pod exists), so the
/// node Karpenter launches for it stays empty. driftwood keeps kube-scheduler's rule: the
/// second pod is unschedulable, with the affinity named, and no node is launched for it.
#[test]
fn a_self_selecting_affinity_does_not_start_again_where_kube_scheduler_would_refuse_it() {
    let member = |key: &str, zone: &str| {
        let mut p = labelled(key, 100, &[("security", "s1")]);
        p.constraints
            .affinity
            .push(term(LABEL_TOPOLOGY_ZONE, "security", "s1"));
        p.constraints.required_terms = vec![Requirements::from_labels(&labels(&[(
            LABEL_TOPOLOGY_ZONE,
            zone,
        )]))];
        p
    };
    let r = run(
        vec![member("ns/pod1", "z2"), member("ns/pod2", "z3")],
        vec![pool()],
        vec![],
    );
    assert_eq!(r.new_nodeclaims.len(), 1, "{r:#?}");
    assert_eq!(zone_of(claim_of(&r, "ns/pod1")), "z2");
    assert!(reason(&r, "ns/pod2").contains("affinity"), "{r:#?}");
    // A pod that may go where the group's pods are joins them.
    let mut n = node("n1", "z1", "4", "16Gi");
    n.pods
        .push(labelled("ns/existing", 100, &[("security", "s1")]));
    let r = run(vec![member("ns/pod3", "z1")], vec![pool()], vec![n]);
    assert_eq!(r.existing_placements.len(), 1, "{r:#?}");
}

#[test]
fn without_preferences_keeps_what_is_required() {
    let zone = |z: &str| Requirements::from_labels(&labels(&[(LABEL_TOPOLOGY_ZONE, z)]));
    let mut p = labelled("ns/p", 100, &[("app", "p")]);
    p.constraints.preferred_affinity = vec![(50, term(LABEL_TOPOLOGY_ZONE, "app", "web"))];
    p.constraints.preferred_anti_affinity = vec![(20, term(LABEL_HOSTNAME, "app", "p"))];
    p.constraints.preferred_terms = vec![(10, zone("z1"))];
    p.constraints.required_terms = vec![zone("z2")];
    p.constraints.anti_affinity = vec![term(LABEL_HOSTNAME, "app", "p")];
    for (hard, key) in [(false, LABEL_HOSTNAME), (true, LABEL_TOPOLOGY_ZONE)] {
        p.constraints.spreads.push(TopologySpread {
            topology_key: key.into(),
            max_skew: 1,
            hard,
            selector: sel("app", "p"),
            min_domains: None,
        });
    }
    assert!(p.constraints.has_preferences());
    let required = p.constraints.without_preferences();
    assert!(!required.has_preferences());
    assert!(required.preferred_terms.is_empty());
    assert!(required.preferred_affinity.is_empty() && required.preferred_anti_affinity.is_empty());
    assert_eq!(required.required_terms, vec![zone("z2")]);
    assert_eq!(required.anti_affinity.len(), 1);
    assert_eq!(required.spreads.len(), 1);
    assert_eq!(required.spreads[0].topology_key, LABEL_TOPOLOGY_ZONE);
    assert_eq!(required.labels, p.constraints.labels);
    assert!(!pod("ns/plain", 100, GIB).constraints.has_preferences());
}

/// A zone spread of `app: web`, at most one apart, refusing otherwise.
fn web_spread(key: &str, cpu: i64) -> SimPod {
    let mut p = labelled(key, cpu, &[("app", "web")]);
    p.constraints.spreads.push(TopologySpread {
        topology_key: LABEL_TOPOLOGY_ZONE.into(),
        max_skew: 1,
        hard: true,
        selector: sel("app", "web"),
        min_domains: None,
    });
    p
}

fn with_terminating_pods_counted(
    pods: Vec<SimPod>,
    pools: Vec<NodePoolSpec>,
    nodes: Vec<ExistingNode>,
    counted_for_affinity: bool,
) -> SimulationResult {
    schedule(&SimulationInput {
        pods,
        nodepools: pools,
        existing_nodes: nodes.into_iter().map(Arc::new).collect(),
        options: SimulationOptions {
            terminating_pods_count_for_pod_affinity: counted_for_affinity,
            ..SimulationOptions::default()
        },
        ..SimulationInput::default()
    })
    .unwrap()
}

/// After Karpenter's topology suite, "should only count running/scheduled pods with matching
/// labels scheduled to nodes with a corresponding domain" (its pod being deleted is ignored),
/// and its cluster state, which releases a pod's requests only once the pod is terminal.
/// kube-scheduler's PodTopologySpread skips pods being deleted too, so both ways of counting
/// them agree here.
#[test]
fn a_terminating_pod_holds_its_requests_but_counts_for_no_spread() {
    // z1: two web pods being deleted (3 of 4 cores held); z2: one running web pod.
    let mut a = node("a", "z1", "4", "16Gi");
    a.terminating
        .push(labelled("ns/old-0", 1500, &[("app", "web")]));
    a.terminating
        .push(labelled("ns/old-1", 1500, &[("app", "web")]));
    let mut b = node("b", "z2", "4", "16Gi");
    b.pods.push(labelled("ns/web-0", 1500, &[("app", "web")]));
    for counted_for_affinity in [false, true] {
        // Counting the pods being deleted, z1 would hold 2 and the pod would have to go to z2;
        // uncounted, z1 holds 0, z2 holds 1, and only z1 keeps the skew at 1. The core left on
        // `a` takes it.
        let r = with_terminating_pods_counted(
            vec![web_spread("ns/new", 1000)],
            vec![pool()],
            vec![a.clone(), b.clone()],
            counted_for_affinity,
        );
        assert_eq!(r.existing_placements.len(), 1, "{r:#?}");
        assert_eq!(r.existing_placements[0].node, "a", "{r:#?}");
        // A pod larger than that core needs a new node in z1: the pods being deleted still
        // hold their requests.
        let r = with_terminating_pods_counted(
            vec![web_spread("ns/big", 1500)],
            vec![pool()],
            vec![a.clone(), b.clone()],
            counted_for_affinity,
        );
        assert!(r.existing_placements.is_empty(), "{r:#?}");
        assert_eq!(r.new_nodeclaims.len(), 1, "{r:#?}");
        assert_eq!(zone_of(&r.new_nodeclaims[0]), "z1", "{r:#?}");
    }
}

/// Karpenter's simulation ignores a pod being deleted for the incoming pod's anti-affinity
/// (`IgnoredForTopology`); kube-scheduler's InterPodAffinity does not (the pod is on its node
/// until it is gone). Either way the pod being deleted still keeps away the pods its own
/// required anti-affinity selects (Karpenter's cluster state keeps it among the pods with
/// anti-affinity until it is terminal).
#[test]
fn a_terminating_pod_counts_for_pod_affinity_only_where_kube_scheduler_counts_it() {
    let mut n = node("n1", "z1", "4", "16Gi");
    n.terminating
        .push(labelled("ns/db-old", 100, &[("app", "db")]));
    let mut avoids_db = labelled("ns/web", 100, &[("app", "web")]);
    avoids_db
        .constraints
        .anti_affinity
        .push(term(LABEL_HOSTNAME, "app", "db"));
    let karpenter =
        with_terminating_pods_counted(vec![avoids_db.clone()], vec![], vec![n.clone()], false);
    assert_eq!(karpenter.existing_placements.len(), 1, "{karpenter:#?}");
    let kube_scheduler = with_terminating_pods_counted(vec![avoids_db], vec![], vec![n], true);
    assert!(
        reason(&kube_scheduler, "ns/web").contains("anti-affinity"),
        "{kube_scheduler:#?}"
    );

    let mut guarded = node("n2", "z1", "4", "16Gi");
    let mut guard = labelled("ns/guard-old", 100, &[("app", "guard")]);
    guard
        .constraints
        .anti_affinity
        .push(term(LABEL_HOSTNAME, "app", "web"));
    guarded.terminating.push(guard);
    for counted_for_affinity in [false, true] {
        let r = with_terminating_pods_counted(
            vec![labelled("ns/web", 100, &[("app", "web")])],
            vec![],
            vec![guarded.clone()],
            counted_for_affinity,
        );
        assert!(reason(&r, "ns/web").contains("anti-affinity"), "{r:#?}");
    }
}
