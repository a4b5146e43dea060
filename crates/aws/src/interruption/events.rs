//! The EventBridge events an interruption queue receives, written as EC2 and AWS Health send
//! them (envelope `version`/`id`/`detail-type`/`source`/`account`/`time`/`region`/`resources`
//! and each kind's `detail`): what the simulated account puts on its queue, and what tests send
//! to moto's SQS. The event `id` is derived from its content, so a simulation repeats.

use crate::fnv::fnv1a64;
use jiff::Timestamp;
use serde_json::{Value, json};

/// The account and region events come from (the simulated account's, unless told).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventOrigin {
    pub account: String,
    pub region: String,
}

impl Default for EventOrigin {
    fn default() -> Self {
        Self {
            account: "111122223333".to_string(),
            region: "us-west-2".to_string(),
        }
    }
}

impl EventOrigin {
    fn instance_arn(&self, instance_id: &str) -> String {
        format!(
            "arn:aws:ec2:{}:{}:instance/{instance_id}",
            self.region, self.account
        )
    }

    fn envelope(
        &self,
        source: &str,
        detail_type: &str,
        resources: Vec<String>,
        time: Timestamp,
        detail: Value,
    ) -> String {
        let time = time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let seed = format!("{detail_type}|{}|{time}", resources.join(","));
        let a = fnv1a64(seed.as_bytes());
        let b = fnv1a64(format!("{a}{seed}").as_bytes());
        let id = format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        );
        json!({
            "version": "0",
            "id": id,
            "detail-type": detail_type,
            "source": source,
            "account": self.account,
            "time": time,
            "region": self.region,
            "resources": resources,
            "detail": detail,
        })
        .to_string()
    }

    /// EC2 Spot Instance Interruption Warning: the instance is reclaimed two minutes after
    /// `time`.
    pub fn spot_interruption(&self, instance_id: &str, time: Timestamp) -> String {
        self.envelope(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            vec![self.instance_arn(instance_id)],
            time,
            json!({"instance-id": instance_id, "instance-action": "terminate"}),
        )
    }

    /// EC2 Instance Rebalance Recommendation.
    pub fn rebalance_recommendation(&self, instance_id: &str, time: Timestamp) -> String {
        self.envelope(
            "aws.ec2",
            "EC2 Instance Rebalance Recommendation",
            vec![self.instance_arn(instance_id)],
            time,
            json!({"instance-id": instance_id}),
        )
    }

    /// EC2 Capacity Reservation Instance Interruption Warning.
    pub fn capacity_reservation_interruption(&self, instance_id: &str, time: Timestamp) -> String {
        self.envelope(
            "aws.ec2",
            "EC2 Capacity Reservation Instance Interruption Warning",
            vec![self.instance_arn(instance_id)],
            time,
            json!({"instance-id": instance_id, "instance-action": "terminate"}),
        )
    }

    /// EC2 Instance State-change Notification to `state`.
    pub fn state_change(&self, instance_id: &str, state: &str, time: Timestamp) -> String {
        self.envelope(
            "aws.ec2",
            "EC2 Instance State-change Notification",
            vec![self.instance_arn(instance_id)],
            time,
            json!({"instance-id": instance_id, "state": state}),
        )
    }

    /// AWS Health Event: an EC2 scheduled change (instance retirement) for `instance_ids`,
    /// starting a day after `time`.
    pub fn scheduled_change(&self, instance_ids: &[&str], time: Timestamp) -> String {
        let start = time
            .checked_add(jiff::SignedDuration::from_hours(24))
            .unwrap_or(time);
        let end = start
            .checked_add(jiff::SignedDuration::from_hours(2))
            .unwrap_or(start);
        let format = |t: Timestamp| t.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string();
        self.envelope(
            "aws.health",
            "AWS Health Event",
            instance_ids.iter().map(|id| self.instance_arn(id)).collect(),
            time,
            json!({
                "eventArn": format!("arn:aws:health:{}::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_{}", self.region, time.as_second()),
                "service": "EC2",
                "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                "eventTypeCategory": "scheduledChange",
                "startTime": format(start),
                "endTime": format(end),
                "eventDescription": [{
                    "language": "en_US",
                    "latestDescription": "EC2 has detected degradation of the underlying hardware hosting your Amazon EC2 instance; it is scheduled for retirement.",
                }],
                "affectedEntities": instance_ids.iter().map(|id| json!({"entityValue": id})).collect::<Vec<_>>(),
            }),
        )
    }
}

/// [`EventOrigin::spot_interruption`] from the default origin.
pub fn spot_interruption(instance_id: &str, time: Timestamp) -> String {
    EventOrigin::default().spot_interruption(instance_id, time)
}

/// [`EventOrigin::rebalance_recommendation`] from the default origin.
pub fn rebalance_recommendation(instance_id: &str, time: Timestamp) -> String {
    EventOrigin::default().rebalance_recommendation(instance_id, time)
}

/// [`EventOrigin::capacity_reservation_interruption`] from the default origin.
pub fn capacity_reservation_interruption(instance_id: &str, time: Timestamp) -> String {
    EventOrigin::default().capacity_reservation_interruption(instance_id, time)
}

/// [`EventOrigin::state_change`] from the default origin.
pub fn state_change(instance_id: &str, state: &str, time: Timestamp) -> String {
    EventOrigin::default().state_change(instance_id, state, time)
}

/// [`EventOrigin::scheduled_change`] from the default origin.
pub fn scheduled_change(instance_ids: &[&str], time: Timestamp) -> String {
    EventOrigin::default().scheduled_change(instance_ids, time)
}
