//! Fault knobs: insufficient capacity per offering, one-shot API errors and throttling per
//! operation, launches that never leave `pending`, and what the kubelet of a machine does
//! wrong (never Ready, stops posting status, registers late).

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
    /// How many of the next CreateFleet calls find no capacity in their cheaper half of
    /// offerings (and launch from the rest, or fail if that is all there was).
    pub partial_fleet_failures: u32,
    /// How many of the next launched instances stay `pending` forever.
    pub stuck_launches: u32,
    /// What goes wrong with the kubelet of a machine, by instance id.
    pub node_faults: BTreeMap<String, NodeFault>,
    /// What goes wrong on every machine launched from an image, by image id (a new AMI that
    /// breaks the workload); a machine's own fault comes first.
    pub image_faults: BTreeMap<String, NodeFault>,
    /// What EC2's status checks and scheduled events report of an instance, by instance id
    /// (DescribeInstanceStatus); an instance not here passes its checks.
    pub impairments: BTreeMap<String, Impairment>,
}

/// What DescribeInstanceStatus reports wrong with one instance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Impairment {
    /// The instance status check has failed since then.
    pub instance_check_failed_since: Option<jiff::Timestamp>,
    /// The system status check (the host) has failed since then.
    pub system_check_failed_since: Option<jiff::Timestamp>,
    /// An event scheduled for it (`instance-retirement`, `system-maintenance`, ...).
    pub scheduled_event: Option<String>,
}

/// A machine whose kubelet misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeFault {
    /// It registers its Node but never reports Ready.
    NeverReady,
    /// It never registers a Node (bad user data, a wrong AMI, no route to the API server).
    NeverRegisters,
    /// It stops posting status: the Node goes Ready=Unknown and stays so.
    NotReady,
    /// It registers its Node no earlier than this.
    RegisterAfter(jiff::Timestamp),
    /// The Node is healthy but the pods crash-loop: Running, never Ready, restarting
    /// (`CrashLoopBackOff`), as on an AMI whose kernel or runtime breaks the workload.
    CrashLoopPods,
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
