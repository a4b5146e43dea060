//! The NodePool template hash: labels, annotations, taints, startupTaints, nodeClassRef,
//! expireAfter and terminationGracePeriod. Requirements are excluded (they drift through the
//! compatibility check instead), and limits, weight and disruption lie outside the template.

use super::TemplateHashes;
use super::canonical::{canonical_hash, normalize};
use crate::duration::parse_go_duration;
use crate::nodepool::NodePool;
use serde_json::{Value, json};

/// driftwood's NodePool hash version. It differs from Karpenter's ("v3"), so NodeClaims that
/// Karpenter stamped are re-stamped on adoption instead of being drifted. dw-v2: every list is
/// hashed as a set and empty strings as absent (Karpenter's hash options).
pub const NODEPOOL_HASH_VERSION: &str = "dw-v2";

/// Hashes a NodePool's template.
pub fn nodepool_hashes(nodepool: &NodePool) -> TemplateHashes {
    let template = &nodepool.spec.template;
    let spec = &template.spec;
    let taints = serde_json::to_value(&spec.taints).unwrap_or(Value::Null);
    let startup_taints = serde_json::to_value(&spec.startup_taints).unwrap_or(Value::Null);
    let fields = [
        ("labels", json!(template.metadata.labels)),
        ("annotations", json!(template.metadata.annotations)),
        ("taints", taints),
        ("startupTaints", startup_taints),
        (
            "nodeClassRef",
            serde_json::to_value(&spec.node_class_ref).unwrap_or(Value::Null),
        ),
        ("expireAfter", duration_value(&spec.expire_after.0)),
        (
            "terminationGracePeriod",
            spec.termination_grace_period
                .as_deref()
                .map_or(Value::Null, duration_value),
        ),
    ];
    let whole = normalize(Value::Object(
        fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    ));
    TemplateHashes {
        hash: canonical_hash(&whole),
        fields: fields
            .into_iter()
            .map(|(name, value)| (name.to_string(), canonical_hash(&normalize(value))))
            .collect(),
    }
}

/// A duration by value (seconds) when it parses, else its text ("Never" or an invalid value).
pub(super) fn duration_value(text: &str) -> Value {
    match parse_go_duration(text) {
        Ok(seconds) => json!(seconds),
        Err(_) => json!(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::changed_fields;
    use crate::nodepool::{Budget, NodePoolSpec};
    use k8s_openapi::api::core::v1::Taint;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use proptest::prelude::*;

    fn base() -> NodePool {
        let mut np = NodePool::new("default", NodePoolSpec::default());
        np.spec.template.spec.node_class_ref.name = "default".into();
        np.spec
            .template
            .metadata
            .labels
            .insert("intent".into(), "apps".into());
        np
    }

    fn taint(key: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: effect.into(),
            value: None,
            time_added: None,
        }
    }

    #[test]
    fn equivalent_durations_hash_equal() {
        let a = base();
        let mut b = base();
        b.spec.template.spec.expire_after.0 = "720h0m0s".into();
        assert_eq!(nodepool_hashes(&a), nodepool_hashes(&b));
    }

    #[test]
    fn label_change_names_labels() {
        let a = nodepool_hashes(&base());
        let mut np = base();
        np.spec
            .template
            .metadata
            .labels
            .insert("team".into(), "x".into());
        let b = nodepool_hashes(&np);
        assert_ne!(a.hash, b.hash);
        assert_eq!(
            changed_fields(&a.fields, &b.fields),
            vec!["labels".to_string()]
        );
    }

    #[test]
    fn requirements_are_not_hashed() {
        let a = nodepool_hashes(&base());
        let mut np = base();
        np.spec.template.spec.requirements.push(
            crate::requirement::NodeSelectorRequirementWithMinValues::new(
                "kubernetes.io/arch",
                "In",
                &["amd64"],
            ),
        );
        assert_eq!(a, nodepool_hashes(&np));
    }

    proptest! {
        #[test]
        fn taint_order_does_not_matter(keys in proptest::collection::btree_set("[a-z]{1,8}", 1..6), rotate in 0usize..6) {
            let mut a = base();
            let mut b = base();
            let taints: Vec<Taint> = keys.iter().map(|k| taint(k, "NoSchedule")).collect();
            let mut rotated = taints.clone();
            let len = rotated.len();
            rotated.rotate_left(rotate % len);
            a.spec.template.spec.taints = taints;
            b.spec.template.spec.taints = rotated;
            prop_assert_eq!(nodepool_hashes(&a), nodepool_hashes(&b));
        }

        #[test]
        fn limits_weight_and_budgets_never_change_the_hash(
            weight in 1i32..=100,
            cpu in 1u32..100_000,
            nodes in 0u32..=100,
            schedule in proptest::option::of(Just("0 9 * * *".to_string())),
        ) {
            let a = base();
            let mut b = base();
            b.spec.weight = Some(weight);
            b.spec.limits.insert("cpu".into(), Quantity(cpu.to_string()));
            b.spec.disruption.budgets = vec![Budget {
                nodes: format!("{nodes}%"),
                duration: schedule.as_ref().map(|_| "1h".to_string()),
                schedule,
                reasons: Some(vec!["Drifted".into()]),
            }];
            b.spec.disruption.consolidation_policy = "WhenEmpty".into();
            prop_assert_eq!(nodepool_hashes(&a), nodepool_hashes(&b));
        }

        #[test]
        fn any_hashed_field_change_changes_the_hash(field in 0usize..7, text in "[a-z]{1,10}") {
            let a = base();
            let mut b = base();
            let expected = match field {
                0 => { b.spec.template.metadata.labels.insert(format!("x-{text}"), text.clone()); "labels" }
                1 => { b.spec.template.metadata.annotations.insert(format!("x-{text}"), text.clone()); "annotations" }
                2 => { b.spec.template.spec.taints.push(taint(&text, "NoSchedule")); "taints" }
                3 => { b.spec.template.spec.startup_taints.push(taint(&text, "NoExecute")); "startupTaints" }
                4 => { b.spec.template.spec.node_class_ref.name = format!("nc-{text}"); "nodeClassRef" }
                5 => { b.spec.template.spec.expire_after.0 = format!("{}h", text.len() + 1); "expireAfter" }
                _ => { b.spec.template.spec.termination_grace_period = Some(format!("{}m", text.len())); "terminationGracePeriod" }
            };
            let (ha, hb) = (nodepool_hashes(&a), nodepool_hashes(&b));
            prop_assert_ne!(&ha.hash, &hb.hash);
            prop_assert_eq!(changed_fields(&ha.fields, &hb.fields), vec![expected.to_string()]);
        }
    }
}
