//! NodePool validation: template, disruption budgets, limits, weight.

use super::labels::{check_key_syntax, check_value_syntax, restricted_rule};
use super::rules::{self, MAX_BUDGETS, WEIGHT_RANGE};
use super::template::{
    check_expire_after, check_node_class_ref, check_requirements, check_taints,
    check_termination_grace_period,
};
use super::{Collector, Validate, ValidationReport};
use crate::cron::CronSchedule;
use crate::nodepool::{LIMIT_NODES, NodePool, STATIC_UNSUPPORTED_MESSAGE};

impl Validate for NodePool {
    fn validate(&self) -> ValidationReport {
        let mut c = Collector::new("NodePool", self.metadata.name.as_deref());
        let template = &self.spec.template;
        for (key, value) in &template.metadata.labels {
            let field = format!("spec.template.metadata.labels[{key}]");
            if check_key_syntax(&mut c, &field, key)
                && let Some(rule) = restricted_rule(key)
            {
                c.invalid(&field, key, rule);
            }
            check_value_syntax(&mut c, &field, value);
        }
        for key in template.metadata.annotations.keys() {
            check_key_syntax(
                &mut c,
                &format!("spec.template.metadata.annotations[{key}]"),
                key,
            );
        }
        let spec = &template.spec;
        check_requirements(
            &mut c,
            "spec.template.spec.requirements",
            &spec.requirements,
        );
        check_taints(&mut c, "spec.template.spec.taints", &spec.taints);
        check_taints(
            &mut c,
            "spec.template.spec.startupTaints",
            &spec.startup_taints,
        );
        check_node_class_ref(
            &mut c,
            "spec.template.spec.nodeClassRef",
            &spec.node_class_ref,
        );
        check_expire_after(&mut c, "spec.template.spec.expireAfter", &spec.expire_after);
        check_termination_grace_period(
            &mut c,
            "spec.template.spec.terminationGracePeriod",
            spec.termination_grace_period.as_deref(),
        );

        let disruption = &self.spec.disruption;
        c.pattern(
            "spec.disruption.consolidateAfter",
            &disruption.consolidate_after.0,
            rules::NILLABLE_DURATION_PATTERN,
            "must be a duration (e.g. 30s, 1m) or \"Never\"",
        );
        c.one_of(
            "spec.disruption.consolidationPolicy",
            &disruption.consolidation_policy,
            rules::CONSOLIDATION_POLICIES,
        );
        if disruption.budgets.len() > MAX_BUDGETS {
            c.error(
                "spec.disruption.budgets",
                format!("must have at most {MAX_BUDGETS} items"),
            );
        }
        for (i, budget) in disruption.budgets.iter().enumerate() {
            let field = format!("spec.disruption.budgets[{i}]");
            c.pattern(
                &format!("{field}.nodes"),
                &budget.nodes,
                rules::BUDGET_NODES_PATTERN,
                "must be a non-negative node count or a percentage from 0% to 100%",
            );
            for (j, reason) in budget.reasons.iter().flatten().enumerate() {
                c.one_of(
                    &format!("{field}.reasons[{j}]"),
                    reason,
                    rules::DISRUPTION_REASONS,
                );
            }
            if budget.schedule.is_some() != budget.duration.is_some() {
                c.error(
                    field.clone(),
                    "'schedule' must be set with 'duration' (a budget with a schedule needs a duration, and a duration needs a schedule)",
                );
            }
            if let Some(schedule) = &budget.schedule
                && let Err(e) = CronSchedule::parse(schedule)
            {
                c.invalid(
                    format!("{field}.schedule"),
                    schedule,
                    format!(
                        "must be a 5-field cron expression (UTC) or an @-macro: {}",
                        e.reason
                    ),
                );
            }
            if let Some(duration) = &budget.duration {
                c.pattern(
                    &format!("{field}.duration"),
                    duration,
                    rules::BUDGET_DURATION_PATTERN,
                    "must be hours and/or minutes, e.g. 8h, 30m or 1h30m",
                );
            }
        }
        for (name, quantity) in &self.spec.limits {
            c.pattern(
                &format!("spec.limits[{name}]"),
                &quantity.0,
                rules::QUANTITY_PATTERN,
                "must be a resource quantity (e.g. 1000, 100k, 5000Gi)",
            );
        }
        check_static(&mut c, self);
        if let Some(weight) = self.spec.weight {
            let (lo, hi) = WEIGHT_RANGE;
            if !(lo..=hi).contains(&i64::from(weight)) {
                c.invalid(
                    "spec.weight",
                    weight.to_string(),
                    format!("must be between {lo} and {hi}"),
                );
            }
        }
        c.finish()
    }
}

/// A static NodePool (`spec.replicas`): Karpenter's rules for it (no weight, no limit but
/// `nodes`, not negative), and driftwood's refusal to manage it.
fn check_static(c: &mut Collector, pool: &NodePool) {
    let Some(replicas) = pool.spec.replicas else {
        return;
    };
    if replicas < 0 {
        c.invalid(
            "spec.replicas",
            replicas.to_string(),
            "must not be negative",
        );
    }
    c.invalid(
        "spec.replicas",
        replicas.to_string(),
        STATIC_UNSUPPORTED_MESSAGE,
    );
    if let Some(weight) = pool.spec.weight {
        c.invalid(
            "spec.weight",
            weight.to_string(),
            "'weight' is not supported on a static NodePool (spec.replicas set)",
        );
    }
    for name in pool
        .spec
        .limits
        .keys()
        .filter(|k| k.as_str() != LIMIT_NODES)
    {
        c.invalid(
            format!("spec.limits[{name}]"),
            name,
            "only 'limits.nodes' is supported on a static NodePool (spec.replicas set)",
        );
    }
}
