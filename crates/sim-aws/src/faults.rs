//! Fault knobs: insufficient capacity per offering, one-shot API errors and throttling per
//! operation.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use driftwood_aws::ports::{AwsError, codes};
use driftwood_cloud::OfferingKey;

/// Injected faults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    /// Offerings CreateFleet refuses with InsufficientInstanceCapacity.
    pub insufficient_capacity: BTreeSet<OfferingKey>,
    /// Errors returned by the next calls of an operation (`CreateFleet`, `DescribeImages`, ...).
    pub queued_errors: BTreeMap<String, VecDeque<AwsError>>,
    /// How many more calls of an operation are throttled (RequestLimitExceeded).
    pub throttled_calls: BTreeMap<String, u32>,
}

impl Faults {
    /// The error the next call of `operation` must fail with, consuming it.
    pub fn take(&mut self, operation: &str) -> Option<AwsError> {
        if let Some(n) = self.throttled_calls.get_mut(operation)
            && *n > 0
        {
            *n -= 1;
            return Some(AwsError::new(
                codes::REQUEST_LIMIT_EXCEEDED,
                "Request limit exceeded.",
            ));
        }
        self.queued_errors
            .get_mut(operation)
            .and_then(VecDeque::pop_front)
    }

    /// Whether `offering` has no capacity.
    pub fn lacks_capacity(&self, offering: &OfferingKey) -> bool {
        self.insufficient_capacity.contains(offering)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_then_queued_then_clear() {
        let mut f = Faults::default();
        f.throttled_calls.insert("CreateFleet".to_string(), 1);
        f.queued_errors
            .entry("CreateFleet".to_string())
            .or_default()
            .push_back(AwsError::new(codes::INTERNAL_ERROR, "boom"));
        assert_eq!(
            f.take("CreateFleet").unwrap().code,
            codes::REQUEST_LIMIT_EXCEEDED
        );
        assert_eq!(f.take("CreateFleet").unwrap().code, codes::INTERNAL_ERROR);
        assert_eq!(f.take("CreateFleet"), None);
        assert_eq!(f.take("DescribeImages"), None);
    }
}
