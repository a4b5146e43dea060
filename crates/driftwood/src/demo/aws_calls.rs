//! The simulated AWS account's API calls during each step of a scenario, by action, per
//! minute of cluster time, with the calls refused as throttled: what the controllers cost
//! against EC2's request-rate limits (the Describe bucket refills 20 calls a second).

use driftwood_sim_aws::calls::CallCount;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One action's calls in one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActionCalls {
    pub calls: u64,
    pub throttled: u64,
    pub per_minute: f64,
}

/// The calls made during one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepCalls {
    pub step: String,
    /// Cluster seconds the step took.
    pub seconds: i64,
    pub actions: BTreeMap<String, ActionCalls>,
}

impl StepCalls {
    /// The calls between two readings of the account's counters, `seconds` apart.
    pub fn between(
        step: &str,
        seconds: i64,
        before: &BTreeMap<String, CallCount>,
        after: &BTreeMap<String, CallCount>,
    ) -> Self {
        let minutes = (seconds.max(1) as f64) / 60.0;
        let actions = after
            .iter()
            .filter_map(|(action, now)| {
                let was = before.get(action).copied().unwrap_or_default();
                let calls = now.calls.saturating_sub(was.calls);
                let throttled = now.throttled.saturating_sub(was.throttled);
                (calls > 0).then(|| {
                    (
                        action.clone(),
                        ActionCalls {
                            calls,
                            throttled,
                            per_minute: calls as f64 / minutes,
                        },
                    )
                })
            })
            .collect();
        Self {
            step: step.to_string(),
            seconds,
            actions,
        }
    }

    /// Every call of the step.
    pub fn total(&self) -> u64 {
        self.actions.values().map(|a| a.calls).sum()
    }

    /// Calls refused as throttled.
    pub fn throttled(&self) -> u64 {
        self.actions.values().map(|a| a.throttled).sum()
    }
}

/// The table printed after a run: a line per step, its busiest actions per minute.
pub fn text(steps: &[StepCalls]) -> String {
    let mut out = String::new();
    if steps.iter().all(|s| s.actions.is_empty()) {
        return out;
    }
    let _ = writeln!(
        out,
        "AWS API calls (simulated account, per minute of cluster time):"
    );
    for step in steps {
        let mut busiest: Vec<(&String, &ActionCalls)> = step.actions.iter().collect();
        busiest.sort_by(|a, b| b.1.calls.cmp(&a.1.calls).then(a.0.cmp(b.0)));
        let top: Vec<String> = busiest
            .iter()
            .take(4)
            .map(|(action, c)| format!("{action} {:.1}", c.per_minute))
            .collect();
        let _ = writeln!(
            out,
            "  {:<28} {:>6}s {:>7} calls, {:>3} throttled  {}",
            step.step,
            step.seconds,
            step.total(),
            step.throttled(),
            top.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_counts_what_was_called_during_it_per_minute() {
        let count = |calls, throttled| CallCount { calls, throttled };
        let before = BTreeMap::from([("DescribeInstances".to_string(), count(10, 0))]);
        let after = BTreeMap::from([
            ("DescribeInstances".to_string(), count(40, 2)),
            ("CreateFleet".to_string(), count(6, 0)),
            ("DescribeImages".to_string(), count(0, 0)),
        ]);
        let step = StepCalls::between("rollout", 120, &before, &after);
        assert_eq!(step.total(), 36);
        assert_eq!(step.throttled(), 2);
        assert_eq!(step.actions["DescribeInstances"].per_minute, 15.0);
        assert_eq!(step.actions["CreateFleet"].per_minute, 3.0);
        assert!(!step.actions.contains_key("DescribeImages"));
        let text = text(&[step]);
        assert!(text.contains("rollout"), "{text}");
        assert!(
            text.contains("DescribeInstances 15.0, CreateFleet 3.0"),
            "{text}"
        );
    }
}
