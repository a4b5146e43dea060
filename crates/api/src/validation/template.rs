//! Checks shared by NodePool templates and NodeClaims: requirements, taints, nodeClassRef,
//! expireAfter and terminationGracePeriod.

use super::labels::{check_key_syntax, check_value_syntax, restricted_rule};
use super::rules::{self, MAX_REQUIREMENTS, MIN_VALUES_RANGE};
use super::{Collector, quoted_list};
use crate::duration::NillableDuration;
use crate::nodeclaim::NodeClassReference;
use crate::requirement::{
    NodeSelectorRequirementWithMinValues, OP_DOES_NOT_EXIST, OP_EXISTS, OP_GT, OP_GTE, OP_IN,
    OP_LT, OP_LTE, OP_NOT_IN, OPERATORS,
};
use k8s_openapi::api::core::v1::Taint;

pub(crate) fn check_requirements(
    c: &mut Collector,
    path: &str,
    requirements: &[NodeSelectorRequirementWithMinValues],
) {
    if requirements.len() > MAX_REQUIREMENTS {
        c.error(
            path,
            format!(
                "must have at most {MAX_REQUIREMENTS} items, has {}",
                requirements.len()
            ),
        );
    }
    for (i, r) in requirements.iter().enumerate() {
        let field = format!("{path}[{i}]");
        if check_key_syntax(c, &format!("{field}.key"), &r.key)
            && let Some(rule) = restricted_rule(&r.key)
        {
            c.invalid(format!("{field}.key"), &r.key, rule);
        }
        if !c.one_of(&format!("{field}.operator"), &r.operator, OPERATORS) {
            continue;
        }
        let values = &r.values;
        match r.operator.as_str() {
            OP_IN | OP_NOT_IN => {
                // Karpenter's schema requires a value for In only; `NotIn []` means Exists.
                if values.is_empty() && r.operator == OP_IN {
                    c.error(
                        format!("{field}.values"),
                        format!(
                            "requirements with operator '{}' must have a value defined",
                            r.operator
                        ),
                    );
                }
                for (j, v) in values.iter().enumerate() {
                    check_value_syntax(c, &format!("{field}.values[{j}]"), v);
                }
            }
            // Karpenter's schema accepts values here and its scheduling ignores them: a warning.
            OP_EXISTS | OP_DOES_NOT_EXIST if !values.is_empty() => {
                c.warn(
                    format!("{field}.values"),
                    format!(
                        "values are ignored with operator '{}' (the requirement is on the key alone)",
                        r.operator
                    ),
                );
            }
            OP_GT | OP_LT | OP_GTE | OP_LTE => {
                let single_integer =
                    values.len() == 1 && values[0].parse::<i64>().is_ok_and(|n| n >= 0);
                if !single_integer {
                    c.invalid(
                        format!("{field}.values"),
                        format!("{values:?}"),
                        format!(
                            "requirements with operator '{}' must have a single non-negative integer value",
                            r.operator
                        ),
                    );
                }
            }
            _ => {}
        }
        if let Some(min) = r.min_values {
            let (lo, hi) = MIN_VALUES_RANGE;
            if !(lo..=hi).contains(&min) {
                c.invalid(
                    format!("{field}.minValues"),
                    min.to_string(),
                    format!("must be between {lo} and {hi}"),
                );
            } else if r.operator == OP_IN && (values.len() as i64) < min {
                c.invalid(
                    format!("{field}.minValues"),
                    min.to_string(),
                    "requirements with 'minValues' must have at least that many values specified in the 'values' field",
                );
            }
        }
    }
}

pub(crate) fn check_taints(c: &mut Collector, path: &str, taints: &[Taint]) {
    for (i, t) in taints.iter().enumerate() {
        let field = format!("{path}[{i}]");
        check_key_syntax(c, &format!("{field}.key"), &t.key);
        if let Some(value) = &t.value {
            check_value_syntax(c, &format!("{field}.value"), value);
        }
        if !rules::TAINT_EFFECTS.contains(&t.effect.as_str()) {
            c.invalid(
                format!("{field}.effect"),
                &t.effect,
                format!("must be one of {}", quoted_list(rules::TAINT_EFFECTS)),
            );
        }
    }
}

pub(crate) fn check_node_class_ref(c: &mut Collector, path: &str, reference: &NodeClassReference) {
    for (name, value) in [
        ("group", &reference.group),
        ("kind", &reference.kind),
        ("name", &reference.name),
    ] {
        if value.is_empty() {
            c.error(format!("{path}.{name}"), format!("{name} may not be empty"));
        }
    }
    // A group is an API group, never group/version (`karpenter.k8s.aws/v1` is refused by
    // Karpenter's CRD, as by the API server).
    c.pattern(
        &format!("{path}.group"),
        &reference.group,
        rules::GROUP_PATTERN,
        "must be an API group without a version",
    );
}

pub(crate) fn check_expire_after(c: &mut Collector, field: &str, value: &NillableDuration) {
    c.pattern(
        field,
        &value.0,
        rules::NILLABLE_DURATION_PATTERN,
        "must be a duration of hours, minutes and seconds (e.g. 720h) or \"Never\"",
    );
}

pub(crate) fn check_termination_grace_period(c: &mut Collector, field: &str, value: Option<&str>) {
    if let Some(value) = value {
        c.pattern(
            field,
            value,
            rules::DURATION_PATTERN,
            "must be a duration of hours, minutes and seconds (e.g. 48h)",
        );
    }
}
