//! An interruption queue message's body (an EventBridge event) parsed as Karpenter's AWS
//! provider parses it: the envelope's `version`/`source`/`detail-type` pick the kind, the
//! `detail` names the instances; kinds Karpenter does not act on, and events filtered out
//! (a health event that is not an EC2 scheduled change, a state change to `running`), are a
//! no-op that is still deleted from the queue.

use jiff::Timestamp;
use serde::Deserialize;

/// What a message says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// EC2 Spot Instance Interruption Warning: the instance is reclaimed in two minutes.
    SpotInterrupted,
    /// EC2 Instance Rebalance Recommendation: the instance is at elevated risk of interruption.
    RebalanceRecommendation,
    /// AWS Health Event, EC2 scheduled change: maintenance will stop or retire the instance.
    ScheduledChange,
    /// EC2 Instance State-change Notification: `stopping` or `stopped`.
    InstanceStopped,
    /// EC2 Instance State-change Notification: `shutting-down` or `terminated`.
    InstanceTerminated,
    /// EC2 Capacity Reservation Instance Interruption Warning.
    CapacityReservationInterrupted,
    /// DescribeInstanceStatus: the instance status check has failed for two minutes.
    InstanceStatus,
    /// DescribeInstanceStatus: the system status check has failed for two minutes.
    SystemStatus,
    /// DescribeInstanceStatus: an event is scheduled that reboots, stops or retires it.
    EventStatus,
    /// Anything else (unknown kinds, filtered events, an empty body).
    NoOp,
}

/// What the controller does for a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Delete the NodeClaim: cordon, drain and terminate, with capacity launched for its pods.
    CordonAndDrain,
    /// The same, with the NodeClaim's termination deadline set to now first, so the drain does
    /// not wait on PodDisruptionBudgets (a failed instance or host does not serve its pods).
    ForcefulTermination,
    /// Record an event only.
    NoAction,
}

impl Kind {
    /// The `message_type` label of `karpenter_interruption_received_messages_total` and the
    /// reason of `karpenter_nodeclaims_disrupted_total`, as Karpenter names them.
    pub fn label(self) -> &'static str {
        match self {
            Self::SpotInterrupted => "spot_interrupted",
            Self::RebalanceRecommendation => "rebalance_recommendation",
            Self::ScheduledChange => "scheduled_change",
            Self::InstanceStopped => "instance_stopped",
            Self::InstanceTerminated => "instance_terminated",
            Self::CapacityReservationInterrupted => "capacity_reservation_interrupted",
            Self::InstanceStatus => "instance_status",
            Self::SystemStatus => "system_status",
            Self::EventStatus => "event_status",
            Self::NoOp => "no_op",
        }
    }

    /// What the controller does for this kind (a rebalance recommendation is only reported; a
    /// failed status check terminates forcefully), as in Karpenter.
    pub fn action(self) -> Action {
        match self {
            Self::RebalanceRecommendation | Self::NoOp => Action::NoAction,
            Self::InstanceStatus | Self::SystemStatus => Action::ForcefulTermination,
            _ => Action::CordonAndDrain,
        }
    }

    /// The event recorded on the NodeClaim and its Node: reason, whether it is a warning, and
    /// its message (Karpenter's words); none for a no-op.
    pub fn event(self) -> Option<(&'static str, bool, &'static str)> {
        Some(match self {
            Self::SpotInterrupted => (
                "SpotInterrupted",
                true,
                "Spot interruption warning was triggered",
            ),
            Self::RebalanceRecommendation => (
                "SpotRebalanceRecommendation",
                false,
                "Spot rebalance recommendation was triggered",
            ),
            Self::ScheduledChange
            | Self::InstanceStatus
            | Self::SystemStatus
            | Self::EventStatus => (
                "InstanceUnhealthy",
                true,
                "An unhealthy warning was triggered for the instance",
            ),
            Self::InstanceStopped => ("InstanceStopping", true, "Instance is stopping"),
            Self::InstanceTerminated => ("InstanceTerminating", true, "Instance is terminating"),
            Self::CapacityReservationInterrupted => (
                "CapacityReservationInstanceInterrupted",
                true,
                "Capacity Reservation interruption warning was triggered",
            ),
            Self::NoOp => return None,
        })
    }
}

/// A parsed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub kind: Kind,
    /// The EventBridge event's `id`.
    pub id: String,
    /// The instances it is about (`i-…`).
    pub instance_ids: Vec<String>,
    /// When the event happened (the envelope's `time`), if it said.
    pub time: Option<Timestamp>,
}

impl Message {
    fn no_op(id: String, time: Option<Timestamp>) -> Self {
        Self {
            kind: Kind::NoOp,
            id,
            instance_ids: Vec::new(),
            time,
        }
    }
}

/// A body that is not an EventBridge event of a kind it claims to be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("interruption message is not an EventBridge event: {0}")]
    Envelope(String),
    #[error("interruption message's time {time:?} is not an RFC 3339 timestamp")]
    Time { time: String },
    #[error("interruption message ({kind}) has an unreadable detail: {message}")]
    Detail { kind: &'static str, message: String },
}

/// The EventBridge envelope.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    version: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    source: String,
    #[serde(default, rename = "detail-type")]
    detail_type: String,
    #[serde(default)]
    time: Option<String>,
    #[serde(default)]
    detail: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct InstanceDetail {
    #[serde(rename = "instance-id")]
    instance_id: String,
}

#[derive(Deserialize)]
struct StateChangeDetail {
    #[serde(rename = "instance-id")]
    instance_id: String,
    state: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HealthDetail {
    #[serde(default)]
    service: String,
    #[serde(default)]
    event_type_category: String,
    #[serde(default)]
    affected_entities: Vec<AffectedEntity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AffectedEntity {
    #[serde(default)]
    entity_value: String,
}

fn detail<T: serde::de::DeserializeOwned>(
    kind: &'static str,
    value: Option<serde_json::Value>,
) -> Result<T, ParseError> {
    serde_json::from_value(value.unwrap_or(serde_json::Value::Null)).map_err(|e| {
        ParseError::Detail {
            kind,
            message: e.to_string(),
        }
    })
}

/// Parses a message body. An empty body, an unknown kind and a filtered event are a
/// [`Kind::NoOp`]; a body that is not an event, or whose detail does not read as its kind's,
/// is an error.
pub fn parse(body: &str) -> Result<Message, ParseError> {
    if body.trim().is_empty() {
        return Ok(Message::no_op(String::new(), None));
    }
    let envelope: Envelope =
        serde_json::from_str(body).map_err(|e| ParseError::Envelope(e.to_string()))?;
    let time = match envelope.time.as_deref() {
        None | Some("") => None,
        Some(text) => Some(text.parse::<Timestamp>().map_err(|_| ParseError::Time {
            time: text.to_string(),
        })?),
    };
    let id = envelope.id;
    let message = |kind: Kind, instance_ids: Vec<String>| Message {
        kind,
        id: id.clone(),
        instance_ids,
        time,
    };
    if envelope.version != "0" {
        return Ok(Message::no_op(id, time));
    }
    Ok(
        match (envelope.source.as_str(), envelope.detail_type.as_str()) {
            ("aws.ec2", "EC2 Spot Instance Interruption Warning") => {
                let d: InstanceDetail = detail("spot_interrupted", envelope.detail)?;
                message(Kind::SpotInterrupted, vec![d.instance_id])
            }
            ("aws.ec2", "EC2 Instance Rebalance Recommendation") => {
                let d: InstanceDetail = detail("rebalance_recommendation", envelope.detail)?;
                message(Kind::RebalanceRecommendation, vec![d.instance_id])
            }
            ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning") => {
                let d: InstanceDetail =
                    detail("capacity_reservation_interrupted", envelope.detail)?;
                message(Kind::CapacityReservationInterrupted, vec![d.instance_id])
            }
            ("aws.ec2", "EC2 Instance State-change Notification") => {
                let d: StateChangeDetail = detail("state_change", envelope.detail)?;
                match d.state.to_lowercase().as_str() {
                    "stopping" | "stopped" | "shutting-down" | "terminated" => {
                        // Karpenter compares the exact state for "stopped": other spellings of
                        // an accepted state count as terminated.
                        let kind = if matches!(d.state.as_str(), "stopping" | "stopped") {
                            Kind::InstanceStopped
                        } else {
                            Kind::InstanceTerminated
                        };
                        message(kind, vec![d.instance_id])
                    }
                    _ => Message::no_op(id, time),
                }
            }
            ("aws.health", "AWS Health Event") => {
                let d: HealthDetail = detail("scheduled_change", envelope.detail)?;
                if d.service == "EC2" && d.event_type_category == "scheduledChange" {
                    message(
                        Kind::ScheduledChange,
                        d.affected_entities
                            .into_iter()
                            .map(|e| e.entity_value)
                            .filter(|v| !v.is_empty())
                            .collect(),
                    )
                } else {
                    Message::no_op(id, time)
                }
            }
            _ => Message::no_op(id, time),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interruption::events;

    fn at() -> Timestamp {
        "2026-11-26T10:00:00Z".parse().unwrap()
    }

    /// Each kind as EC2 and AWS Health send it reads back as the kind, its instances and its
    /// time (the bodies come from [`events`], which writes them as EventBridge does).
    #[test]
    fn every_kind_reads_back() {
        let cases = [
            (
                events::spot_interruption("i-1", at()),
                Kind::SpotInterrupted,
            ),
            (
                events::rebalance_recommendation("i-1", at()),
                Kind::RebalanceRecommendation,
            ),
            (
                events::capacity_reservation_interruption("i-1", at()),
                Kind::CapacityReservationInterrupted,
            ),
            (
                events::state_change("i-1", "stopping", at()),
                Kind::InstanceStopped,
            ),
            (
                events::state_change("i-1", "stopped", at()),
                Kind::InstanceStopped,
            ),
            (
                events::state_change("i-1", "shutting-down", at()),
                Kind::InstanceTerminated,
            ),
            (
                events::state_change("i-1", "terminated", at()),
                Kind::InstanceTerminated,
            ),
            (
                events::scheduled_change(&["i-1"], at()),
                Kind::ScheduledChange,
            ),
        ];
        for (body, kind) in cases {
            let message = parse(&body).unwrap_or_else(|e| panic!("{body}: {e}"));
            assert_eq!(message.kind, kind, "{body}");
            assert_eq!(message.instance_ids, ["i-1"], "{body}");
            assert_eq!(message.time, Some(at()));
            assert!(!message.id.is_empty());
        }
    }

    /// Karpenter's interruption suite: "should delete a state change message when the state
    /// isn't in accepted states" (`creating`: a no-op), and "should delete a message when the
    /// message can't be parsed" (a body of another shape: a no-op, still deleted). A health
    /// event about another service, or not a scheduled change, is a no-op too; a scheduled
    /// change names every affected instance.
    #[test]
    fn filtered_and_unknown_events_are_no_ops() {
        let no_op = |body: &str| parse(body).map(|m| m.kind);
        assert_eq!(
            no_op(&events::state_change("i-1", "creating", at())),
            Ok(Kind::NoOp)
        );
        assert_eq!(
            no_op(&events::state_change("i-1", "running", at())),
            Ok(Kind::NoOp)
        );
        assert_eq!(
            no_op(r#"{"field1":"value1","field2":"value2"}"#),
            Ok(Kind::NoOp)
        );
        assert_eq!(no_op(""), Ok(Kind::NoOp));
        let health = |service: &str, category: &str| {
            events::scheduled_change(&["i-1"], at())
                .replace("\"service\":\"EC2\"", &format!("\"service\":\"{service}\""))
                .replace(
                    "\"eventTypeCategory\":\"scheduledChange\"",
                    &format!("\"eventTypeCategory\":\"{category}\""),
                )
        };
        assert_eq!(no_op(&health("RDS", "scheduledChange")), Ok(Kind::NoOp));
        assert_eq!(no_op(&health("EC2", "issue")), Ok(Kind::NoOp));
        let two = parse(&events::scheduled_change(&["i-1", "i-2"], at())).unwrap();
        assert_eq!(two.instance_ids, ["i-1", "i-2"]);
        // Karpenter's exact comparison: an upper-case STOPPING is accepted, as terminated.
        assert_eq!(
            no_op(&events::state_change("i-1", "STOPPING", at())),
            Ok(Kind::InstanceTerminated)
        );
    }

    /// A body that is not JSON, a time that is not a timestamp, or a detail of the wrong shape
    /// is an error naming what is wrong.
    #[test]
    fn malformed_messages_are_errors() {
        assert!(matches!(parse("not json"), Err(ParseError::Envelope(_))));
        let bad_time =
            events::spot_interruption("i-1", at()).replace("2026-11-26T10:00:00Z", "yesterday");
        assert_eq!(
            parse(&bad_time),
            Err(ParseError::Time {
                time: "yesterday".to_string()
            })
        );
        let no_instance = r#"{"version":"0","id":"x","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":{}}"#;
        let error = parse(no_instance).unwrap_err();
        assert!(
            error.to_string().contains("spot_interrupted")
                && error.to_string().contains("instance-id"),
            "{error}"
        );
    }

    #[test]
    fn kinds_act_and_report_as_karpenter() {
        assert_eq!(Kind::RebalanceRecommendation.action(), Action::NoAction);
        assert_eq!(Kind::SpotInterrupted.action(), Action::CordonAndDrain);
        assert_eq!(Kind::ScheduledChange.action(), Action::CordonAndDrain);
        assert_eq!(Kind::InstanceStopped.action(), Action::CordonAndDrain);
        assert_eq!(Kind::NoOp.event(), None);
        assert_eq!(
            Kind::RebalanceRecommendation.event().map(|e| e.1),
            Some(false),
            "a rebalance recommendation is a Normal event"
        );
    }
}
