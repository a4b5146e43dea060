//! Instances EC2 itself reports unhealthy, as Karpenter's AWS provider finds them (its
//! `instancestatus` provider, polled once a minute with or without an interruption queue):
//! DescribeInstanceStatus asked three times — instances whose instance check is impaired, whose
//! system check is impaired, and those with an event scheduled that reboots, stops or retires
//! them — and of each instance returned, the failing details: a scheduled event at once, a
//! failed check once it has failed for [`UNHEALTHY_THRESHOLD`].

use crate::ports::{
    AwsError, DescribeInstanceStatusInput, Ec2Api, Filter, InstanceStatus, StatusCheck,
};
use driftwood_cloud::Clock;
use jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// How often the instance statuses are read (Karpenter's `InstanceStatusInterval`).
pub const POLL_INTERVAL: Duration = Duration::from_secs(60);

/// How long a status check must have failed before the instance counts as unhealthy (a
/// scheduled event counts at once).
pub const UNHEALTHY_THRESHOLD: Duration = Duration::from_secs(120);

/// The event codes that make an instance unhealthy.
pub const UNHEALTHY_EVENT_CODES: [&str; 5] = [
    "instance-reboot",
    "system-reboot",
    "system-maintenance",
    "instance-retirement",
    "instance-stop",
];

/// Which of an instance's checks failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// The instance status check (the instance's own software or network).
    InstanceStatus,
    /// The system status check (the host underneath).
    SystemStatus,
    /// A scheduled event (reboot, stop, retirement, maintenance).
    EventStatus,
    /// The attached EBS volumes' check: read, but acted on by no one (as in Karpenter).
    EbsStatus,
}

impl Category {
    /// The `category` label of `karpenter_interruption_instance_status_unhealthy_total`.
    pub fn label(self) -> &'static str {
        match self {
            Self::InstanceStatus => "InstanceStatus",
            Self::SystemStatus => "SystemStatus",
            Self::EventStatus => "EventStatus",
            Self::EbsStatus => "EBSStatus",
        }
    }
}

/// An instance EC2 reports unhealthy: the categories that failed (long enough), and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnhealthyInstance {
    pub instance_id: String,
    pub categories: BTreeSet<Category>,
    /// The earliest failure of those categories.
    pub impaired_since: Timestamp,
}

/// The three DescribeInstanceStatus requests, in order.
pub fn requests() -> [DescribeInstanceStatusInput; 3] {
    let one = |name: &str, values: &[&str]| DescribeInstanceStatusInput {
        filters: vec![Filter {
            name: name.to_string(),
            values: values.iter().map(|v| (*v).to_string()).collect(),
        }],
    };
    [
        one("instance-status.status", &["impaired"]),
        one("system-status.status", &["impaired"]),
        one("event.code", &UNHEALTHY_EVENT_CODES),
    ]
}

/// The unhealthy instances of what the requests returned (an instance returned by more than
/// one request is read once, as first returned), at `now`.
pub fn unhealthy(statuses: &[InstanceStatus], now: Timestamp) -> Vec<UnhealthyInstance> {
    let mut seen = BTreeSet::new();
    statuses
        .iter()
        .filter(|s| seen.insert(s.instance_id.as_str()))
        .filter_map(|s| unhealthy_one(s, now))
        .collect()
}

fn unhealthy_one(status: &InstanceStatus, now: Timestamp) -> Option<UnhealthyInstance> {
    let threshold =
        jiff::SignedDuration::try_from(UNHEALTHY_THRESHOLD).unwrap_or(jiff::SignedDuration::MAX);
    // Category → the earliest failure counted in it.
    let mut failing: BTreeMap<Category, Timestamp> = BTreeMap::new();
    let mut note = |category: Category, since: Timestamp| {
        failing
            .entry(category)
            .and_modify(|t| *t = (*t).min(since))
            .or_insert(since);
    };
    let checks = [
        (Category::InstanceStatus, &status.instance_status),
        (Category::SystemStatus, &status.system_status),
        (Category::EbsStatus, &status.attached_ebs_status),
    ];
    for (category, check) in checks {
        for detail in check.iter().flat_map(|c: &StatusCheck| &c.details) {
            if detail.status != "failed" {
                continue;
            }
            // A failed detail without a time has failed since the epoch, as the SDK's zero
            // time reads in Karpenter: past the threshold.
            let since = detail.impaired_since.unwrap_or(Timestamp::UNIX_EPOCH);
            if now.duration_since(since) >= threshold {
                note(category, since);
            }
        }
    }
    // Every event returned counts, from now (the request asked for the unhealthy codes only).
    if !status.events.is_empty() {
        note(Category::EventStatus, now);
    }
    let impaired_since = failing.values().min().copied()?;
    Some(UnhealthyInstance {
        instance_id: status.instance_id.clone(),
        categories: failing.into_keys().collect(),
        impaired_since,
    })
}

/// Reads the instance statuses through `ec2` and returns the unhealthy instances at `now`.
pub async fn list_unhealthy(
    ec2: &dyn Ec2Api,
    now: Timestamp,
) -> Result<Vec<UnhealthyInstance>, AwsError> {
    let mut statuses = Vec::new();
    for request in requests() {
        statuses.extend(ec2.describe_instance_status(request).await?);
    }
    Ok(unhealthy(&statuses, now))
}

/// The account's instance statuses, read on the provider's EC2 port and clock.
#[derive(Clone)]
pub struct InstanceStatusReader {
    ec2: Arc<dyn Ec2Api>,
    clock: Arc<dyn Clock>,
}

impl InstanceStatusReader {
    pub fn new(ec2: Arc<dyn Ec2Api>, clock: Arc<dyn Clock>) -> Self {
        Self { ec2, clock }
    }

    /// The instances EC2 reports unhealthy now.
    pub async fn unhealthy(&self) -> Result<Vec<UnhealthyInstance>, AwsError> {
        list_unhealthy(self.ec2.as_ref(), self.clock.now()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::{InstanceStatusEvent, StatusCheckDetail};

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn check(status: &str, since: Option<i64>) -> Option<StatusCheck> {
        Some(StatusCheck {
            status: if status == "failed" {
                "impaired".into()
            } else {
                "ok".into()
            },
            details: vec![StatusCheckDetail {
                name: "reachability".into(),
                status: status.into(),
                impaired_since: since.map(at),
            }],
        })
    }

    fn status(id: &str) -> InstanceStatus {
        InstanceStatus {
            instance_id: id.into(),
            availability_zone: "us-west-2a".into(),
            state: "running".into(),
            instance_status: check("passed", None),
            system_status: check("passed", None),
            ..InstanceStatus::default()
        }
    }

    /// A failed check counts once it has failed for two minutes (Karpenter's
    /// `UnhealthyThreshold`), not before.
    #[test]
    fn a_failed_check_counts_after_two_minutes() {
        let now = 10_000;
        let mut s = status("i-1");
        s.instance_status = check("failed", Some(now - 119));
        assert!(unhealthy(&[s.clone()], at(now)).is_empty(), "119 s");
        s.instance_status = check("failed", Some(now - 120));
        let found = unhealthy(&[s], at(now));
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].categories,
            BTreeSet::from([Category::InstanceStatus])
        );
        assert_eq!(found[0].impaired_since, at(now - 120));
    }

    /// From Karpenter's instancestatus provider test "should return all impairment details": each
    /// failing category is named, an event counts at once (from now), the earliest failure is
    /// the instance's.
    #[test]
    fn events_count_at_once_and_each_category_is_named() {
        let now = 10_000;
        let mut s = status("i-1");
        s.system_status = check("failed", Some(now - 600));
        s.events = vec![InstanceStatusEvent {
            code: "instance-retirement".into(),
            description: "The instance is running on degraded hardware".into(),
            not_before: Some(at(now + 86_400)),
        }];
        let found = unhealthy(&[s], at(now));
        assert_eq!(
            found[0].categories,
            BTreeSet::from([Category::SystemStatus, Category::EventStatus])
        );
        assert_eq!(found[0].impaired_since, at(now - 600));
    }

    /// From "should not return healthy statuses": initializing and insufficient-data are
    /// healthy; and an instance returned by two of the requests is read once.
    #[test]
    fn only_failed_details_count_and_duplicates_are_read_once() {
        let now = 10_000;
        let mut healthy = status("i-1");
        healthy.instance_status = check("initializing", Some(now - 900));
        healthy.system_status = check("insufficient-data", Some(now - 900));
        let mut sick = status("i-2");
        sick.instance_status = check("failed", Some(now - 300));
        let found = unhealthy(&[healthy, sick.clone(), sick], at(now));
        assert_eq!(
            found
                .iter()
                .map(|u| u.instance_id.as_str())
                .collect::<Vec<_>>(),
            ["i-2"]
        );
    }

    #[test]
    fn the_three_requests_are_karpenters_filters() {
        let [instance, system, events] = requests();
        assert_eq!(instance.filters[0].name, "instance-status.status");
        assert_eq!(instance.filters[0].values, ["impaired"]);
        assert_eq!(system.filters[0].name, "system-status.status");
        assert_eq!(events.filters[0].name, "event.code");
        assert_eq!(events.filters[0].values, UNHEALTHY_EVENT_CODES);
    }
}
