//! Status conditions as Karpenter writes them (type, status, reason, message, lastTransitionTime,
//! observedGeneration) and helpers to read and set them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const STATUS_TRUE: &str = "True";
pub const STATUS_FALSE: &str = "False";
pub const STATUS_UNKNOWN: &str = "Unknown";

/// One status condition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Type of condition in CamelCase (e.g. Ready, Drifted).
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    /// A programmatic identifier for the reason of the last transition (CamelCase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human readable message with details about the transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Last time the condition transitioned from one status to another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The metadata.generation the condition was set based upon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    pub fn is_true(&self) -> bool {
        self.status == STATUS_TRUE
    }
}

/// Read access to a list of conditions.
pub trait Conditions {
    fn conditions(&self) -> &[Condition];

    fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions().iter().find(|c| c.type_ == type_)
    }

    /// Whether the condition is present with status True.
    fn is_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(Condition::is_true)
    }
}

impl Conditions for Vec<Condition> {
    fn conditions(&self) -> &[Condition] {
        self
    }
}

/// Sets a condition, keeping lastTransitionTime when the status did not change. Returns whether
/// anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Time,
    observed_generation: Option<i64>,
) -> bool {
    let reason = Some(reason.to_string());
    let message = Some(message.to_string());
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            let changed = existing.status != status
                || existing.reason != reason
                || existing.message != message
                || existing.observed_generation != observed_generation;
            if existing.status != status {
                existing.last_transition_time = Some(now);
            }
            existing.status = status.to_string();
            existing.reason = reason;
            existing.message = message;
            existing.observed_generation = observed_generation;
            changed
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason,
                message,
                last_transition_time: Some(now),
                observed_generation,
            });
            true
        }
    }
}

/// Removes a condition. Returns whether it was present.
pub fn clear_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    before != conditions.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn set_keeps_transition_time_when_status_unchanged() {
        let mut conditions = Vec::new();
        assert!(set_condition(
            &mut conditions,
            "Drifted",
            STATUS_TRUE,
            "AMIDrift",
            "a",
            t(10),
            None
        ));
        assert!(set_condition(
            &mut conditions,
            "Drifted",
            STATUS_TRUE,
            "AMIDrift",
            "b",
            t(20),
            None
        ));
        assert_eq!(conditions[0].last_transition_time, Some(t(10)));
        assert!(!set_condition(
            &mut conditions,
            "Drifted",
            STATUS_TRUE,
            "AMIDrift",
            "b",
            t(30),
            None
        ));
        assert!(set_condition(
            &mut conditions,
            "Drifted",
            STATUS_FALSE,
            "NotDrifted",
            "b",
            t(40),
            None
        ));
        assert_eq!(conditions[0].last_transition_time, Some(t(40)));
        assert!(!conditions.is_true("Drifted"));
        assert!(clear_condition(&mut conditions, "Drifted"));
        assert!(conditions.condition("Drifted").is_none());
    }
}
