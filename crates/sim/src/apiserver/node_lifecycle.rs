//! What kube-controller-manager's node lifecycle controller does to a Node that users see:
//! `spec.unschedulable` (a cordon, `kubectl cordon` / `drain`) carries the
//! `node.kubernetes.io/unschedulable:NoSchedule` taint, added when the node is cordoned and
//! removed when it is uncordoned (TaintNodesByCondition). The embedded server applies it with
//! the write that changes `spec.unschedulable`, where kube-controller-manager follows within
//! moments; schedulers and driftwood's provisioner then see a cordoned node as tainted, as they
//! do on a real cluster.

use serde_json::{Value, json};

/// The taint a cordoned node carries.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Make `node`'s unschedulable taint follow its `spec.unschedulable`.
pub fn sync_unschedulable_taint(node: &mut Value) {
    let cordoned = node
        .pointer("/spec/unschedulable")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let is_ours = |taint: &Value| {
        taint.get("key").and_then(Value::as_str) == Some(UNSCHEDULABLE_TAINT)
            && taint.get("effect").and_then(Value::as_str) == Some("NoSchedule")
    };
    let Some(node) = node.as_object_mut() else {
        return;
    };
    let spec = node.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    let has = spec
        .get("taints")
        .and_then(Value::as_array)
        .is_some_and(|taints| taints.iter().any(is_ours));
    match (cordoned, has) {
        (true, false) => {
            let taints = spec.entry("taints").or_insert_with(|| json!([]));
            if let Some(taints) = taints.as_array_mut() {
                taints.push(json!({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}));
            }
        }
        (false, true) => {
            if let Some(taints) = spec.get_mut("taints").and_then(Value::as_array_mut) {
                taints.retain(|taint| !is_ours(taint));
                if taints.is_empty() {
                    spec.remove("taints");
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_taint_follows_the_cordon_and_leaves_other_taints_alone() {
        let mut node = json!({"metadata": {"name": "n"}, "spec": {
            "unschedulable": true,
            "taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}});
        sync_unschedulable_taint(&mut node);
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
                   {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}])
        );
        // Idempotent.
        let again = node.clone();
        sync_unschedulable_taint(&mut node);
        assert_eq!(node, again);

        node["spec"]["unschedulable"] = json!(false);
        sync_unschedulable_taint(&mut node);
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
        );

        let mut plain = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        sync_unschedulable_taint(&mut plain);
        sync_unschedulable_taint(&mut plain);
        assert_eq!(
            plain["spec"]["taints"],
            json!([{"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}])
        );
        plain["spec"]
            .as_object_mut()
            .unwrap()
            .remove("unschedulable");
        sync_unschedulable_taint(&mut plain);
        assert_eq!(plain["spec"].get("taints"), None);
    }
}
