//! NodeClaim validation: requirements, taints, nodeClassRef, durations, resource requests.

use super::rules;
use super::template::{
    check_expire_after, check_node_class_ref, check_requirements, check_taints,
    check_termination_grace_period,
};
use super::{Collector, Validate, ValidationReport};
use crate::nodeclaim::NodeClaim;

impl Validate for NodeClaim {
    fn validate(&self) -> ValidationReport {
        let mut c = Collector::new("NodeClaim", self.metadata.name.as_deref());
        let spec = &self.spec;
        check_requirements(&mut c, "spec.requirements", &spec.requirements);
        check_taints(&mut c, "spec.taints", &spec.taints);
        check_taints(&mut c, "spec.startupTaints", &spec.startup_taints);
        check_node_class_ref(&mut c, "spec.nodeClassRef", &spec.node_class_ref);
        if let Some(expire_after) = &spec.expire_after {
            check_expire_after(&mut c, "spec.expireAfter", expire_after);
        }
        check_termination_grace_period(
            &mut c,
            "spec.terminationGracePeriod",
            spec.termination_grace_period.as_deref(),
        );
        for (name, quantity) in spec.resources.iter().flat_map(|r| &r.requests) {
            c.pattern(
                &format!("spec.resources.requests[{name}]"),
                &quantity.0,
                rules::QUANTITY_PATTERN,
                "must be a resource quantity",
            );
        }
        c.finish()
    }
}
