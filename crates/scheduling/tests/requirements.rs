//! The requirement algebra: operators, intersection, compatibility, and its laws (proptest).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use driftwood_scheduling::requirements::{Operator, Requirement, RequirementError, Requirements};
use proptest::prelude::*;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn reqs(items: &[(&str, &str, &[&str])]) -> Requirements {
    let owned: Vec<(String, String, Vec<String>)> = items
        .iter()
        .map(|(k, o, v)| (k.to_string(), o.to_string(), s(v)))
        .collect();
    Requirements::from_node_selector_requirements(
        owned
            .iter()
            .map(|(k, o, v)| (k.as_str(), o.as_str(), v.as_slice(), None)),
    )
    .unwrap()
}

#[test]
fn every_operator_matches_as_kubernetes_does() {
    let r = |op, vals: &[&str]| Requirement::new("k", op, &s(vals)).unwrap();
    let in_ab = r(Operator::In, &["a", "b"]);
    assert!(in_ab.matches(Some("a")) && !in_ab.matches(Some("c")) && !in_ab.matches(None));
    let not_in = r(Operator::NotIn, &["a"]);
    assert!(!not_in.matches(Some("a")) && not_in.matches(Some("c")) && not_in.matches(None));
    let exists = r(Operator::Exists, &[]);
    assert!(exists.matches(Some("x")) && !exists.matches(None));
    let dne = r(Operator::DoesNotExist, &[]);
    assert!(!dne.matches(Some("x")) && dne.matches(None));
    let gt = r(Operator::Gt, &["4"]);
    assert!(
        gt.matches(Some("5"))
            && !gt.matches(Some("4"))
            && !gt.matches(Some("abc"))
            && !gt.matches(None)
    );
    let lt = r(Operator::Lt, &["4"]);
    assert!(lt.matches(Some("3")) && !lt.matches(Some("4")) && lt.matches(Some("-10")));
    let gte = r(Operator::Gte, &["4"]);
    assert!(gte.matches(Some("4")) && !gte.matches(Some("3")));
    let lte = r(Operator::Lte, &["4"]);
    assert!(lte.matches(Some("4")) && !lte.matches(Some("5")));
    assert_eq!(in_ab.operator(), Operator::In);
    assert_eq!(not_in.operator(), Operator::NotIn);
    assert_eq!(exists.operator(), Operator::Exists);
    assert_eq!(dne.operator(), Operator::DoesNotExist);
    assert_eq!(gt.operator(), Operator::Gte);
    assert_eq!(lt.operator(), Operator::Lte);
}

#[test]
fn bad_operators_and_values_are_typed_errors_naming_the_key() {
    let vals = s(&["a"]);
    let err =
        Requirements::from_node_selector_requirements([("zone", "Near", vals.as_slice(), None)])
            .unwrap_err();
    assert_eq!(
        err,
        RequirementError::UnknownOperator {
            key: "zone".into(),
            operator: "Near".into()
        }
    );
    assert!(err.to_string().contains("zone") && err.to_string().contains("Near"));
    let none: Vec<String> = vec![];
    assert!(matches!(
        Requirements::from_node_selector_requirements([("k", "In", none.as_slice(), None)]),
        Err(RequirementError::BadValues { .. })
    ));
    assert!(matches!(
        Requirements::from_node_selector_requirements([("k", "Exists", vals.as_slice(), None)]),
        Err(RequirementError::BadValues { .. })
    ));
    let word = s(&["four"]);
    assert!(matches!(
        Requirements::from_node_selector_requirements([("k", "Gt", word.as_slice(), None)]),
        Err(RequirementError::BadValues { .. })
    ));
    assert!(matches!(
        Requirements::from_node_selector_requirements([("k", "In", vals.as_slice(), Some(0))]),
        Err(RequirementError::BadMinValues { .. })
    ));
    let ok = Requirements::from_node_selector_requirements([("k", "In", vals.as_slice(), Some(1))])
        .unwrap();
    assert_eq!(ok.get("k").unwrap().min_values(), Some(1));
}

#[test]
fn intersection_examples() {
    let a = Requirement::is_in(["a", "b", "c"]);
    let b = Requirement::not_in(["b"]);
    assert_eq!(a.intersection(&b), Requirement::is_in(["a", "c"]));
    assert_eq!(
        Requirement::gt(2).intersection(&Requirement::lt(5)),
        Requirement::between(Some(3), Some(4))
    );
    assert!(
        Requirement::gt(4)
            .intersection(&Requirement::lt(5))
            .is_unsatisfiable()
    );
    assert_eq!(
        Requirement::is_in(["1", "5", "x"]).intersection(&Requirement::gt(3)),
        Requirement::is_in(["5"])
    );
    assert_eq!(
        Requirement::not_in(["a"]).intersection(&Requirement::does_not_exist()),
        Requirement::does_not_exist()
    );
    assert!(
        Requirement::exists()
            .intersection(&Requirement::does_not_exist())
            .is_unsatisfiable()
    );
    // NotIn ∩ Exists still requires the label.
    let ne = Requirement::not_in(["a"]).intersection(&Requirement::exists());
    assert!(!ne.matches(None) && ne.matches(Some("b")) && !ne.matches(Some("a")));
    // minValues keeps the larger.
    let mv = Requirement::exists()
        .with_min_values(Some(2))
        .intersection(&Requirement::exists().with_min_values(Some(5)));
    assert_eq!(mv.min_values(), Some(5));
}

#[test]
fn strict_compatibility_is_requirement_drift() {
    let node = Requirements::from_labels(&driftwood_scheduling::testkit::labels(&[
        ("topology.kubernetes.io/zone", "z1"),
        ("team", "a"),
    ]));
    // Widening an In list does not drift.
    assert!(
        node.strictly_compatible(&reqs(&[(
            "topology.kubernetes.io/zone",
            "In",
            &["z1", "z2"]
        )]))
        .is_ok()
    );
    // Narrowing past the node's value drifts.
    assert!(
        node.strictly_compatible(&reqs(&[("topology.kubernetes.io/zone", "In", &["z2"])]))
            .is_err()
    );
    // A key the node lacks: In / Exists drift, NotIn / DoesNotExist do not.
    assert!(
        node.strictly_compatible(&reqs(&[("gpu", "In", &["yes"])]))
            .is_err()
    );
    assert!(
        node.strictly_compatible(&reqs(&[("gpu", "Exists", &[])]))
            .is_err()
    );
    assert!(
        node.strictly_compatible(&reqs(&[("gpu", "NotIn", &["yes"])]))
            .is_ok()
    );
    assert!(
        node.strictly_compatible(&reqs(&[("gpu", "DoesNotExist", &[])]))
            .is_ok()
    );
    // Well-known labels are not excused in the strict form.
    assert!(
        node.strictly_compatible(&reqs(&[("kubernetes.io/arch", "In", &["amd64"])]))
            .is_err()
    );
    // DoesNotExist on a key the node has drifts.
    assert!(
        node.strictly_compatible(&reqs(&[("team", "DoesNotExist", &[])]))
            .is_err()
    );
    let err = node
        .strictly_compatible(&reqs(&[("gpu", "In", &["yes"])]))
        .unwrap_err();
    assert!(err.to_string().contains("gpu"), "{err}");
}

#[test]
fn scheduling_compatibility_allows_undefined_well_known_labels() {
    let pool = reqs(&[("team", "In", &["a"])]);
    assert!(
        pool.compatible_for_scheduling(&reqs(&[("kubernetes.io/arch", "In", &["arm64"])]))
            .is_ok()
    );
    assert!(
        pool.compatible_for_scheduling(&reqs(&[("custom", "In", &["x"])]))
            .is_err()
    );
    assert!(
        pool.compatible_for_scheduling(&reqs(&[("custom", "NotIn", &["x"])]))
            .is_ok()
    );
    assert!(
        pool.compatible_for_scheduling(&reqs(&[("team", "In", &["b"])]))
            .is_err()
    );
    assert!(
        pool.compatible_for_scheduling(&reqs(&[("team", "In", &["a", "b"])]))
            .is_ok()
    );
}

#[test]
fn labels_match_requirements() {
    let labels = driftwood_scheduling::testkit::labels(&[("a", "1"), ("b", "x")]);
    assert!(
        reqs(&[
            ("a", "Gt", &["0"]),
            ("b", "In", &["x"]),
            ("c", "DoesNotExist", &[])
        ])
        .matches_labels(&labels)
    );
    let miss = reqs(&[("c", "Exists", &[])]);
    assert_eq!(miss.first_mismatch(&labels).map(|(k, _)| k), Some("c"));
}

fn arb_requirement() -> impl Strategy<Value = Requirement> {
    let vals = prop::collection::btree_set(
        prop::sample::select(vec!["a", "b", "c", "1", "2", "3", "7"]),
        1..4,
    );
    prop_oneof![
        vals.clone()
            .prop_map(|v| Requirement::is_in(v.into_iter().map(String::from))),
        vals.prop_map(|v| Requirement::not_in(v.into_iter().map(String::from))),
        Just(Requirement::exists()),
        Just(Requirement::does_not_exist()),
        (-1i64..8).prop_map(Requirement::gt),
        (-1i64..8).prop_map(Requirement::lt),
        (-1i64..8).prop_map(|n| Requirement::between(Some(n), None)),
        (-1i64..8).prop_map(|n| Requirement::between(None, Some(n))),
    ]
}

fn probes() -> Vec<Option<&'static str>> {
    vec![
        None,
        Some("a"),
        Some("b"),
        Some("c"),
        Some("d"),
        Some("0"),
        Some("1"),
        Some("2"),
        Some("3"),
        Some("5"),
        Some("7"),
        Some("-3"),
    ]
}

proptest! {
    /// Launch labels (Karpenter's `Any`): the value picked for a requirement, and for any
    /// intersection of two, satisfies it whenever some value does, for every seed.
    #[test]
    fn any_value_satisfies_the_requirement(a in arb_requirement(), b in arb_requirement(), seed in any::<u64>()) {
        for r in [a.clone(), a.intersection(&b)] {
            match r.any_value(seed) {
                Some(v) => prop_assert!(r.has(&v), "{} does not admit {}", r, v),
                None => prop_assert!(!r.has_any_value(), "{} admits a value but none was picked", r),
            }
        }
    }

    #[test]
    fn intersection_is_commutative(a in arb_requirement(), b in arb_requirement()) {
        prop_assert_eq!(a.intersection(&b), b.intersection(&a));
    }

    #[test]
    fn intersection_is_idempotent(a in arb_requirement(), b in arb_requirement()) {
        prop_assert_eq!(a.intersection(&a), a.clone());
        let ab = a.intersection(&b);
        prop_assert_eq!(ab.intersection(&b), ab.clone());
    }

    #[test]
    fn intersection_is_associative(a in arb_requirement(), b in arb_requirement(), c in arb_requirement()) {
        prop_assert_eq!(a.intersection(&b).intersection(&c), a.intersection(&b.intersection(&c)));
    }

    #[test]
    fn intersection_has_set_semantics(a in arb_requirement(), b in arb_requirement()) {
        let ab = a.intersection(&b);
        for v in probes() {
            prop_assert_eq!(ab.matches(v), a.matches(v) && b.matches(v), "value {:?}", v);
        }
    }

    #[test]
    fn empty_intersection_means_nothing_satisfies_both(a in arb_requirement(), b in arb_requirement()) {
        let ab = a.intersection(&b);
        prop_assert_eq!(a.intersects(&b), !ab.is_unsatisfiable());
        if ab.is_unsatisfiable() {
            for v in probes() {
                prop_assert!(!(a.matches(v) && b.matches(v)), "value {:?}", v);
            }
            for n in -20i64..20 {
                let text = n.to_string();
                prop_assert!(!(a.has(&text) && b.has(&text)));
            }
        }
    }

    #[test]
    fn requirements_intersection_commutes(keys in prop::collection::vec((prop::sample::select(vec!["k1", "k2", "k3"]), arb_requirement()), 0..4),
                                          other in prop::collection::vec((prop::sample::select(vec!["k1", "k2", "k3"]), arb_requirement()), 0..4)) {
        let mut a = Requirements::new();
        for (k, r) in keys { a.add(k, r); }
        let mut b = Requirements::new();
        for (k, r) in other { b.add(k, r); }
        prop_assert_eq!(a.intersection(&b), b.intersection(&a));
        prop_assert_eq!(a.intersection(&a), a.clone());
        prop_assert_eq!(a.intersects(&b).is_ok(), b.intersects(&a).is_ok());
    }
}
