//! Per-action call accounting: how many calls each API action received and how many of them
//! were refused as throttled, so a scenario can report AWS API calls per minute by action.

use std::collections::BTreeMap;

use driftwood_aws::ports::AwsError;

use crate::rate_limits::RateLimiter;

/// The calls one action received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCount {
    /// Every call, answered or refused.
    pub calls: u64,
    /// Calls refused as throttled: by the rate limits or by an injected throttling fault.
    pub throttled: u64,
}

/// The account's call counters and rate limit buckets (one lock: a call is counted and
/// admitted together).
#[derive(Debug, Clone, Default)]
pub struct Meter {
    pub limiter: RateLimiter,
    pub calls: BTreeMap<String, CallCount>,
}

impl Meter {
    /// Counts a call of `action`; returns how many calls of it came before (its sequence number).
    pub fn count(&mut self, action: &str) -> u64 {
        let entry = self.calls.entry(action.to_string()).or_default();
        entry.calls += 1;
        entry.calls - 1
    }

    /// Counts `error`, the answer to a call of `action`, when it is a throttling error.
    pub fn count_refusal(&mut self, action: &str, error: &AwsError) {
        if is_throttling(error) {
            self.calls.entry(action.to_string()).or_default().throttled += 1;
        }
    }
}

/// Whether `error` is a throttling answer of any of the simulated services.
pub fn is_throttling(error: &AwsError) -> bool {
    error.is_throttled()
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_aws::ports::codes;
    use driftwood_aws::ports::codes::THROTTLING_EXCEPTION;

    #[test]
    fn calls_and_throttled_calls_are_counted_per_action() {
        let mut m = Meter::default();
        assert_eq!(m.count("DescribeImages"), 0);
        assert_eq!(m.count("DescribeImages"), 1);
        m.count("CreateFleet");
        m.count_refusal(
            "DescribeImages",
            &AwsError::new(codes::REQUEST_LIMIT_EXCEEDED, "x"),
        );
        m.count_refusal("DescribeImages", &AwsError::new(THROTTLING_EXCEPTION, "x"));
        m.count_refusal("CreateFleet", &AwsError::new(codes::INTERNAL_ERROR, "x"));
        assert_eq!(
            m.calls["DescribeImages"],
            CallCount {
                calls: 2,
                throttled: 2
            }
        );
        assert_eq!(
            m.calls["CreateFleet"],
            CallCount {
                calls: 1,
                throttled: 0
            }
        );
    }
}
