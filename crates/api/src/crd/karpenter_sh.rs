//! The schema rules of the karpenter.sh CRDs: NodePool and NodeClaim.

use super::common::{condition_rules, quantity_map_rules};
use super::schema::Schema;
use crate::validation::rules;
use serde_json::json;

/// The rules of a requirement list. A NodeClaim carries its NodePool's name as a requirement, so
/// only a NodePool's requirements may not name `karpenter.sh/nodepool` (as in Karpenter's CRDs).
fn requirement_rules(s: &mut Schema, path: &str, nodepool_key_allowed: bool) -> Result<(), String> {
    s.set(path, "maxItems", json!(rules::MAX_REQUIREMENTS))?;
    let item = format!("{path}.[]");
    s.pattern(&format!("{item}.key"), rules::LABEL_KEY_PATTERN)?;
    s.set(&format!("{item}.key"), "maxLength", json!(316))?;
    s.enumeration(&format!("{item}.operator"), rules::OPERATORS_SCHEMA_ORDER)?;
    s.unset(&format!("{item}.minValues"), "format")?;
    s.set(path, "x-kubernetes-list-type", json!("atomic"))?;
    let values = format!("{item}.values");
    s.set(&values, "x-kubernetes-list-type", json!("atomic"))?;
    // Karpenter's schema puts the label-value bounds on the list itself, where an API server
    // applies no string rule; kept there so values are accepted exactly as Karpenter accepts
    // them (driftwood validate checks each value).
    s.pattern(&values, rules::LABEL_VALUE_PATTERN)?;
    s.set(&values, "maxLength", json!(rules::LABEL_VALUE_MAX_LENGTH))?;
    s.set(
        &format!("{item}.minValues"),
        "minimum",
        json!(rules::MIN_VALUES_RANGE.0),
    )?;
    s.set(
        &format!("{item}.minValues"),
        "maximum",
        json!(rules::MIN_VALUES_RANGE.1),
    )?;
    s.cel(
        path,
        "self.all(x, x.operator == 'In' ? has(x.values) && x.values.size() != 0 : true)",
        "requirements with operator 'In' must have a value defined",
    )?;
    s.cel(
        path,
        "self.all(x, (x.operator in ['Gt', 'Lt', 'Gte', 'Lte']) ? (has(x.values) && x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
        "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value",
    )?;
    s.cel(
        path,
        "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
        "requirements with 'minValues' must have at least that many values specified in the 'values' field",
    )?;
    if nodepool_key_allowed {
        s.cel(
            path,
            "self.all(x, x.key != 'kubernetes.io/hostname')",
            "requirement key 'kubernetes.io/hostname' is restricted",
        )
    } else {
        s.cel(
            path,
            "self.all(x, x.key != 'karpenter.sh/nodepool' && x.key != 'kubernetes.io/hostname')",
            "requirement keys 'karpenter.sh/nodepool' and 'kubernetes.io/hostname' are restricted",
        )
    }
}

/// Taints: a known effect, a key (and a value) of the label-key form.
fn taint_rules(s: &mut Schema, path: &str) -> Result<(), String> {
    s.set(path, "x-kubernetes-list-type", json!("atomic"))?;
    s.enumeration(&format!("{path}.[].effect"), rules::TAINT_EFFECTS)?;
    s.pattern(&format!("{path}.[].key"), rules::LABEL_KEY_PATTERN)?;
    s.set(&format!("{path}.[].key"), "minLength", json!(1))?;
    s.pattern(&format!("{path}.[].value"), rules::LABEL_KEY_PATTERN)
}

/// A node class reference: group, kind and name not empty, a group without `/`.
fn node_class_ref_rules(s: &mut Schema, path: &str) -> Result<(), String> {
    for field in ["group", "kind", "name"] {
        s.cel(
            &format!("{path}.{field}"),
            "self != ''",
            &format!("{field} may not be empty"),
        )?;
    }
    s.pattern(&format!("{path}.group"), rules::GROUP_PATTERN)
}

pub(super) fn nodepool_rules(s: &mut Schema) -> Result<(), String> {
    let template = "spec.template";
    let spec = "spec.template.spec";
    requirement_rules(s, &format!("{spec}.requirements"), false)?;
    s.require(spec, "requirements")?;
    taint_rules(s, &format!("{spec}.taints"))?;
    taint_rules(s, &format!("{spec}.startupTaints"))?;
    node_class_ref_rules(s, &format!("{spec}.nodeClassRef"))?;
    // A NodePool's NodeClaims keep their class's group and kind (Karpenter's transition rules).
    for field in ["group", "kind"] {
        s.cel(
            &format!("{spec}.nodeClassRef"),
            &format!("self.{field} == oldSelf.{field}"),
            &format!("nodeClassRef.{field} is immutable"),
        )?;
    }
    let labels = format!("{template}.metadata.labels");
    s.set(&labels, "x-kubernetes-map-type", json!("atomic"))?;
    s.pattern(&format!("{labels}.{{}}"), rules::LABEL_VALUE_PATTERN)?;
    s.set(
        &format!("{labels}.{{}}"),
        "maxLength",
        json!(rules::LABEL_VALUE_MAX_LENGTH),
    )?;
    s.set(
        &format!("{template}.metadata.annotations"),
        "x-kubernetes-map-type",
        json!("granular"),
    )?;
    s.set(
        "spec.disruption.budgets",
        "x-kubernetes-list-type",
        json!("atomic"),
    )?;
    s.set(
        "spec.disruption.budgets.[].reasons",
        "x-kubernetes-list-type",
        json!("set"),
    )?;
    condition_rules(s, "status.conditions", true)?;
    quantity_map_rules(s, "status.resources")?;
    s.pattern(
        &format!("{spec}.expireAfter"),
        rules::NILLABLE_DURATION_PATTERN,
    )?;
    s.set(
        &format!("{spec}.expireAfter"),
        "default",
        json!(crate::nodepool::DEFAULT_EXPIRE_AFTER),
    )?;
    s.pattern(
        &format!("{spec}.terminationGracePeriod"),
        rules::DURATION_PATTERN,
    )?;
    s.cel(
        &format!("{template}.metadata.labels"),
        "self.all(x, x != 'karpenter.sh/nodepool' && x != 'kubernetes.io/hostname')",
        "labels 'karpenter.sh/nodepool' and 'kubernetes.io/hostname' are restricted",
    )?;
    s.cel(
        &format!("{template}.metadata.labels"),
        "self.all(x, x in ['karpenter.sh/capacity-type'] || !x.find('^([^/]+)').endsWith('karpenter.sh'))",
        "label domain \"karpenter.sh\" is restricted",
    )?;
    s.cel(
        &format!("{template}.metadata.labels"),
        "self.all(x, x.startsWith('karpenter.k8s.aws/instance-') || !x.find('^([^/]+)').endsWith('karpenter.k8s.aws'))",
        "label domain \"karpenter.k8s.aws\" is restricted",
    )?;
    s.cel(
        &format!("{template}.metadata.labels"),
        "self.all(x, x in ['kubernetes.io/arch', 'kubernetes.io/os', 'topology.kubernetes.io/zone', 'topology.kubernetes.io/region', 'beta.kubernetes.io/instance-type', 'beta.kubernetes.io/arch', 'beta.kubernetes.io/os', 'failure-domain.beta.kubernetes.io/zone', 'failure-domain.beta.kubernetes.io/region', 'node.kubernetes.io/windows-build'] || x.find('^([^/]+)').endsWith('node.kubernetes.io') || x.find('^([^/]+)').endsWith('node-restriction.kubernetes.io') || !x.find('^([^/]+)').endsWith('kubernetes.io'))",
        "label domain \"kubernetes.io\" is restricted",
    )?;
    s.cel(
        &format!("{template}.metadata.labels"),
        "self.all(x, x.find('^([^/]+)').endsWith('kops.k8s.io') || !x.find('^([^/]+)').endsWith('k8s.io'))",
        "label domain \"k8s.io\" is restricted",
    )?;

    let disruption = "spec.disruption";
    s.set(
        disruption,
        "default",
        json!({"consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "10%"}]}),
    )?;
    s.pattern(
        &format!("{disruption}.consolidateAfter"),
        rules::NILLABLE_DURATION_PATTERN,
    )?;
    s.enumeration(
        &format!("{disruption}.consolidationPolicy"),
        rules::CONSOLIDATION_POLICIES,
    )?;
    let budgets = format!("{disruption}.budgets");
    s.set(&budgets, "maxItems", json!(rules::MAX_BUDGETS))?;
    s.set(&budgets, "default", json!([{"nodes": "10%"}]))?;
    s.cel(
        &budgets,
        "self.all(x, has(x.schedule) == has(x.duration))",
        "'schedule' must be set with 'duration'",
    )?;
    s.pattern(&format!("{budgets}.[].nodes"), rules::BUDGET_NODES_PATTERN)?;
    s.set(
        &format!("{budgets}.[].nodes"),
        "default",
        json!(crate::nodepool::DEFAULT_BUDGET_NODES),
    )?;
    s.pattern(
        &format!("{budgets}.[].schedule"),
        rules::BUDGET_SCHEDULE_PATTERN,
    )?;
    s.pattern(
        &format!("{budgets}.[].duration"),
        rules::BUDGET_DURATION_PATTERN,
    )?;
    s.enumeration(
        &format!("{budgets}.[].reasons.[]"),
        rules::DISRUPTION_REASONS,
    )?;
    s.set(&format!("{budgets}.[].reasons"), "maxItems", json!(50))?;
    s.set(
        &format!("{template}.metadata.labels"),
        "maxProperties",
        json!(100),
    )?;
    s.pattern("spec.limits.{}", rules::QUANTITY_PATTERN)?;
    s.set("spec.weight", "minimum", json!(rules::WEIGHT_RANGE.0))?;
    s.set("spec.weight", "maximum", json!(rules::WEIGHT_RANGE.1))?;
    static_nodepool_rules(s)
}

/// A static NodePool (`replicas` set): a fixed node count, so no weight and no limit but
/// `nodes`, and a pool stays static or dynamic for life (Karpenter v1.14's NodePool rules).
fn static_nodepool_rules(s: &mut Schema) -> Result<(), String> {
    s.set("spec.replicas", "minimum", json!(0))?;
    s.cel(
        "spec",
        "has(self.replicas) == has(oldSelf.replicas)",
        "a NodePool cannot change between static (replicas set) and dynamic (replicas unset)",
    )?;
    s.cel(
        "spec",
        "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))",
        "a static NodePool (replicas set) may only limit 'nodes'",
    )?;
    s.cel(
        "spec",
        "!has(self.replicas) || !has(self.weight)",
        "a static NodePool (replicas set) may not set 'weight'",
    )
}

pub(super) fn nodeclaim_rules(s: &mut Schema) -> Result<(), String> {
    requirement_rules(s, "spec.requirements", true)?;
    // A NodeClaim's spec never changes once created (Karpenter: "spec is immutable").
    s.cel("spec", "self == oldSelf", "spec is immutable")?;
    s.require("spec", "requirements")?;
    taint_rules(s, "spec.taints")?;
    taint_rules(s, "spec.startupTaints")?;
    node_class_ref_rules(s, "spec.nodeClassRef")?;
    condition_rules(s, "status.conditions", true)?;
    for map in [
        "spec.resources.requests",
        "status.capacity",
        "status.allocatable",
    ] {
        quantity_map_rules(s, map)?;
    }
    s.pattern("spec.expireAfter", rules::NILLABLE_DURATION_PATTERN)?;
    s.pattern("spec.terminationGracePeriod", rules::DURATION_PATTERN)
}
