//! The instance status controller (Karpenter's `interruption.instancestatus`, on with or
//! without an interruption queue): once a minute it reads the instances EC2's status checks
//! and scheduled events report unhealthy (DescribeInstanceStatus), and handles each failed
//! category of an instance of the cluster as an interruption message of its own — a failed
//! instance or system check terminates the NodeClaim forcefully (its termination deadline set
//! to now, so the drain does not wait on PodDisruptionBudgets: the host is not serving those
//! pods), a scheduled reboot, stop or retirement cordons and drains it as a scheduled change
//! does. Each instance and category is counted once in
//! `karpenter_interruption_instance_status_unhealthy_total` while it stays unhealthy, and
//! again if it recovers and fails later. In a dry run (`Settings::instance_status_dry_run`)
//! the instances are found and counted and nothing else is done, as Karpenter's
//! InstanceStatusDryRun does.

use super::Outcome;
use super::decide::{StatusPlan, decide_statuses};
use crate::context::Context;
use crate::metrics::Metrics;
use driftwood_aws::interruption::instance_status::{Category, InstanceStatusReader};
use driftwood_aws::ports::codes;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The controller's name (metrics, logs, backoff).
pub const CONTROLLER: &str = "interruption.instancestatus";

/// The (instance, category) pairs counted as unhealthy and still reported so; kept between
/// passes by the loop.
#[derive(Debug, Default, Clone)]
pub struct Seen(Arc<Mutex<BTreeSet<(String, Category)>>>);

impl Seen {
    /// Which of `found` (the pairs of the cluster's instances reported unhealthy now) were not
    /// counted yet; forgets the pairs no longer reported, so a relapse counts again.
    pub fn newly_unhealthy(&self, found: &BTreeSet<(String, Category)>) -> Vec<(String, Category)> {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.retain(|pair| found.contains(pair));
        found
            .iter()
            .filter(|pair| seen.insert((*pair).clone()))
            .cloned()
            .collect()
    }
}

/// Set once DescribeInstanceStatus was refused for want of permission: the controller stops
/// asking until the process restarts (as Karpenter's stops until its pod restarts).
#[derive(Debug, Default, Clone)]
pub struct Refused(Arc<AtomicBool>);

/// One poll of the instance statuses and the handling of what it found.
pub async fn pass(
    ctx: Context,
    reader: Arc<InstanceStatusReader>,
    seen: Seen,
    refused: Refused,
) -> Outcome {
    if refused.0.load(Ordering::Relaxed) {
        return Outcome::idle();
    }
    let unhealthy = match reader.unhealthy().await {
        Ok(unhealthy) => unhealthy,
        Err(error) if error.code == codes::UNAUTHORIZED_OPERATION => {
            tracing::error!(controller = CONTROLLER, %error, "ec2:DescribeInstanceStatus permission is not allowed, update the IAM policy and restart the controller to enable instance status health checks");
            refused.0.store(true, Ordering::Relaxed);
            return Outcome::idle();
        }
        Err(error) => {
            tracing::error!(controller = CONTROLLER, %error, "getting instance statuses");
            Metrics::inc(
                &ctx.metrics.object_errors,
                &[
                    ("controller", CONTROLLER),
                    ("step", "describe instance status"),
                ],
            );
            return Outcome::idle().with_errors(1);
        }
    };
    let snapshot = ctx.state.snapshot();
    let plans = decide_statuses(&snapshot, &unhealthy);
    let mut errors = 0u32;
    let mut handled = Vec::new();
    let dry_run = ctx.settings.instance_status_dry_run;
    for plan in &plans {
        let Some(claim) = &plan.claim else {
            continue;
        };
        if dry_run {
            tracing::debug!(controller = CONTROLLER, nodeclaim = %claim.nodeclaim, instance_id = %plan.instance_id, category = plan.category.label(), "dry run: leaving the unhealthy instance's NodeClaim alone");
            handled.push(plan);
        } else if super::act(&ctx, CONTROLLER, &snapshot, plan.kind, claim).await {
            handled.push(plan);
        } else {
            errors += 1;
        }
    }
    count_newly_unhealthy(&ctx, &seen, &handled);
    Outcome::idle().with_errors(errors)
}

/// Counts each (instance, category) of the cluster found unhealthy and handled the first time
/// it is, with Karpenter's log line (one whose handling failed is counted when it succeeds).
fn count_newly_unhealthy(ctx: &Context, seen: &Seen, handled: &[&StatusPlan]) {
    let found: BTreeSet<(String, Category)> = handled
        .iter()
        .map(|p| (p.instance_id.clone(), p.category))
        .collect();
    for (instance, category) in seen.newly_unhealthy(&found) {
        tracing::info!(
            controller = CONTROLLER,
            instance_id = %instance,
            category = category.label(),
            "detected unhealthy instance owned by cluster"
        );
        Metrics::inc(
            &ctx.metrics.interruption_instance_status_unhealthy,
            &[("category", category.label())],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, Category)]) -> BTreeSet<(String, Category)> {
        list.iter().map(|(i, c)| ((*i).to_string(), *c)).collect()
    }

    /// Karpenter's "should only emit the metric once across multiple reconciles for the same
    /// unhealthy instance", "should emit the metric for each unique unhealthy instance" and
    /// "should re-emit the metric when an instance recovers and becomes unhealthy again".
    #[test]
    fn each_unhealthy_instance_and_category_counts_once_until_it_recovers() {
        let seen = Seen::default();
        let a = ("i-a", Category::SystemStatus);
        let b = ("i-b", Category::EventStatus);
        assert_eq!(seen.newly_unhealthy(&pairs(&[a, b])).len(), 2);
        assert!(seen.newly_unhealthy(&pairs(&[a, b])).is_empty(), "again");
        // b recovers, then fails again: counted again; a still failing: not.
        assert!(seen.newly_unhealthy(&pairs(&[a])).is_empty());
        assert_eq!(
            seen.newly_unhealthy(&pairs(&[a, b])),
            vec![("i-b".to_string(), Category::EventStatus)]
        );
    }
}
