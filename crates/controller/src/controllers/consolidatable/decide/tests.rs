//! The marker's decisions: Karpenter's pod-event and Consolidatable cases, and the pass that
//! looks only at what changed held equal to the one that looks at every NodeClaim.

use super::*;
use driftwood_scheduling::testkit::seeded;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

const T0: i64 = 1_800_000_000;

fn time(at: i64) -> String {
    jiff::Timestamp::from_second(at).unwrap().to_string()
}

fn pool(name: &str, consolidate_after: &str, replicas: Option<i64>) -> Arc<NodePool> {
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "disruption": {"consolidateAfter": consolidate_after},
                "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}
            }
        }))
        .unwrap(),
    )
}

/// A NodeClaim of `pool`, launched as instance `id`, on `node` by its status when given,
/// initialized at `initialized`, with a last pod event and a Consolidatable condition.
struct ClaimSpec<'a> {
    pool: &'a str,
    id: Option<u64>,
    node_name: Option<&'a str>,
    initialized: Option<i64>,
    last_pod_event: Option<i64>,
    consolidatable: bool,
    deleting: bool,
}

fn claim(name: &str, c: &ClaimSpec<'_>) -> Arc<NodeClaim> {
    let mut conditions = Vec::new();
    if let Some(at) = c.initialized {
        conditions.push(json!({"type": "Initialized", "status": "True", "reason": "Initialized", "message": "", "lastTransitionTime": time(at)}));
    }
    if c.consolidatable {
        conditions.push(json!({"type": "Consolidatable", "status": "True", "reason": "Consolidatable", "message": "", "lastTransitionTime": time(T0)}));
    }
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {
                "name": name,
                "labels": {"karpenter.sh/nodepool": c.pool},
                "deletionTimestamp": c.deleting.then(|| time(T0)),
            },
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {
                "providerID": c.id.map(|i| format!("aws:///us-west-2a/i-{i}")),
                "nodeName": c.node_name,
                "lastPodEventTime": c.last_pod_event.map(time),
                "conditions": conditions,
            }
        }))
        .unwrap(),
    )
}

fn node(name: &str, id: Option<u64>) -> Arc<Node> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"providerID": id.map(|i| format!("aws:///us-west-2a/i-{i}"))}
        }))
        .unwrap(),
    )
}

fn pod(name: &str, uid: &str, node: &str, daemonset: bool) -> Arc<Pod> {
    let owners = if daemonset {
        json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds", "controller": true}])
    } else {
        json!([])
    };
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": uid, "ownerReferences": owners},
            "spec": {"containers": [{"name": "c"}], "nodeName": node},
            "status": {"phase": "Running"}
        }))
        .unwrap(),
    )
}

fn sorted(mut marks: Vec<Mark>) -> Vec<Mark> {
    marks.sort_by(|a, b| a.nodeclaim.cmp(&b.nodeclaim));
    marks
}

/// A cache with NodePool `default` (`consolidate_after`), Node `n1` and NodeClaim `c1` on it,
/// initialized at T0; and `c1`'s spec.
fn one_claim_on_n1(consolidate_after: &str) -> (Snapshot, ClaimSpec<'static>) {
    let mut s = Snapshot::default();
    s.apply("default".into(), pool("default", consolidate_after, None));
    s.apply("n1".into(), node("n1", Some(1)));
    let spec = ClaimSpec {
        pool: "default",
        id: Some(1),
        node_name: Some("n1"),
        initialized: Some(T0),
        last_pod_event: None,
        consolidatable: false,
        deleting: false,
    };
    s.apply("c1".into(), claim("c1", &spec));
    (s, spec)
}

/// Karpenter's pod events controller "should set the lastPodEventTime when given a
/// scheduled pod" and "should not update lastPodEventTime when the last event is within the
/// dedupe timeout"; the NodeClaim disruption controller "should add the status condition after
/// consolidateAfter since the last pod event" — through the pass that looks at what changed.
#[test]
fn a_pod_bound_is_an_event_and_consolidatable_follows_consolidate_after() {
    let (mut s, spec) = one_claim_on_n1("30s");
    let mut memory = Memory::default();
    // First seen: no event; Consolidatable due 30 s after initialization.
    let first = decide_changed(&s, &mut memory, T0 + 5);
    assert!(first.marks.is_empty());
    assert_eq!(first.next_at, Some(T0 + 30));
    // A pod bound: an event now, and the window starts again from it.
    s.apply("default/p".into(), pod("p", "u1", "n1", false));
    let bound = decide_changed(&s, &mut memory, T0 + 10);
    assert_eq!(
        bound.marks,
        vec![Mark {
            nodeclaim: "c1".into(),
            pod_event: true,
            consolidatable: None
        }]
    );
    assert_eq!(bound.next_at, Some(T0 + 40));
    let written = ClaimSpec {
        last_pod_event: Some(T0 + 10),
        ..spec
    };
    s.apply("c1".into(), claim("c1", &written));
    assert!(decide_changed(&s, &mut memory, T0 + 11).marks.is_empty());
    // A DaemonSet pod is no event; another pod within 10 s of the last event is not written.
    s.apply("default/ds".into(), pod("ds", "u2", "n1", true));
    assert!(decide_changed(&s, &mut memory, T0 + 12).marks.is_empty());
    s.apply("default/q".into(), pod("q", "u3", "n1", false));
    assert!(decide_changed(&s, &mut memory, T0 + 15).marks.is_empty());
    // Nothing changed, and the window ran out: looked at for that alone, and marked.
    let due = decide_changed(&s, &mut memory, T0 + 40);
    assert_eq!(
        due.marks,
        vec![Mark {
            nodeclaim: "c1".into(),
            pod_event: false,
            consolidatable: Some(true)
        }]
    );
    assert_eq!(due.next_at, None);
}

/// A mark that was not written is looked at again, its pod event seen again.
#[test]
fn a_pod_event_not_written_is_seen_again() {
    let (mut s, _) = one_claim_on_n1("Never");
    let mut memory = Memory::default();
    decide_changed(&s, &mut memory, T0);
    s.apply("default/p".into(), pod("p", "u1", "n1", false));
    let decision = decide_changed(&s, &mut memory, T0 + 20);
    assert_eq!(decision.marks.len(), 1);
    let before = decision.before["c1"];
    memory.unsee("c1", before);
    let again = decide_changed(&s, &mut memory, T0 + 21);
    assert_eq!(again.marks, decision.marks);
    // Written this time: nothing more.
    assert!(decide_changed(&s, &mut memory, T0 + 22).marks.is_empty());
}

/// The pass that looks only at what changed decides what the pass over every NodeClaim does,
/// over 3,000 generated changes (NodeClaims launched, registered by providerID or only by
/// node name, initialized, deleted; Nodes coming and going; pods bound and leaving, DaemonSet
/// pods among them; NodePools changing consolidateAfter or becoming static) with the clock
/// moving 0–20 s between passes and each pass's marks written back.
#[test]
fn looking_at_what_changed_decides_as_looking_at_everything() {
    let mut next = seeded(0xC0_50_1D_A7);
    let mut s = Snapshot::default();
    let mut memory = Memory::default();
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut now = T0;
    let mut marked = 0;
    let afters = ["0s", "15s", "30s", "Never"];
    for step in 0..3_000 {
        let i = next(8);
        match next(10) {
            0 => {
                let replicas = (next(6) == 0).then_some(2);
                let name = format!("pool{}", next(2));
                s.apply(
                    name.clone(),
                    pool(&name, afters[next(4) as usize], replicas),
                );
            }
            1 | 2 => {
                let pool = format!("pool{}", next(3));
                let registered = next(3);
                // Launched as an instance some Node may have, or one no Node has (found on
                // its node by name only).
                let id = (registered > 0).then_some(if next(2) == 0 { i } else { i + 100 });
                let node = format!("n{}", next(8));
                let spec = ClaimSpec {
                    pool: &pool,
                    id,
                    node_name: (registered == 2).then_some(node.as_str()),
                    initialized: (next(3) > 0).then(|| now - next(40) as i64),
                    last_pod_event: (next(2) == 0).then(|| now - next(40) as i64),
                    consolidatable: next(2) == 0,
                    deleting: next(12) == 0,
                };
                s.apply(format!("c{i}"), claim(&format!("c{i}"), &spec));
            }
            3 => s.delete::<NodeClaim>(&format!("c{i}")),
            4 => {
                // A Node with the providerID of the NodeClaim of its number, another's, or none.
                let id = match next(3) {
                    0 => Some(i),
                    1 => Some(next(8)),
                    _ => None,
                };
                s.apply(format!("n{i}"), node(&format!("n{i}"), id));
            }
            5 => s.delete::<Node>(&format!("n{i}")),
            6 | 7 => {
                let node = format!("n{}", next(8));
                let uid = format!("u{i}-{}", next(3));
                s.apply(
                    format!("default/p{i}"),
                    pod(&format!("p{i}"), &uid, &node, next(5) == 0),
                );
            }
            _ => s.delete::<Pod>(&format!("default/p{i}")),
        }
        if next(3) == 0 {
            continue;
        }
        now += next(21) as i64;
        let full = decide(&s, &seen, now);
        let changed = decide_changed(&s, &mut memory, now);
        assert_eq!(
            sorted(changed.marks.clone()),
            sorted(full.marks.clone()),
            "step {step}"
        );
        assert_eq!(changed.next_at, full.next_at, "step {step}");
        assert_eq!(memory.signatures, full.signatures, "step {step}");
        seen = full.signatures;
        // The marks written back, as the executor writes them.
        for mark in &full.marks {
            marked += 1;
            let old = Arc::clone(&s.store.nodeclaims[&mark.nodeclaim]);
            let mut claim = NodeClaim::clone(&old);
            let status = claim.status.get_or_insert_with(Default::default);
            if mark.pod_event {
                status.last_pod_event_time =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        jiff::Timestamp::from_second(now).unwrap(),
                    ));
            }
            match mark.consolidatable {
                Some(true) => {
                    crate::api::set_claim_condition(
                        &mut claim,
                        CONDITION_CONSOLIDATABLE,
                        "True",
                        CONDITION_CONSOLIDATABLE,
                        "",
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                            jiff::Timestamp::from_second(now).unwrap(),
                        ),
                    );
                }
                Some(false) => {
                    crate::api::clear_claim_condition(&mut claim, CONDITION_CONSOLIDATABLE);
                }
                None => {}
            }
            s.apply(mark.nodeclaim.clone(), Arc::new(claim));
        }
    }
    // The sequence exercised both kinds of marks.
    assert!(marked > 100, "{marked} marks");
}
