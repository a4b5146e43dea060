//! When an EC2NodeClass's selectors are resolved against the cloud again: when its spec
//! changed (a new generation, or a new object under the same name), when the last resolution
//! failed (after that class's own backoff), and otherwise once a minute — the shortest of
//! Karpenter's nodeclass refresh intervals (subnets every minute; AMIs and security groups
//! every 5 minutes when found). Between those the status from the last resolution stands, so
//! a busy cluster costs no Describe calls.

use driftwood_api::EC2NodeClass;
use driftwood_api::ec2nodeclass::EC2NodeClassStatus;
use jiff::{SignedDuration, Timestamp};

/// How long a successful resolution stands.
pub const REFRESH: SignedDuration = SignedDuration::from_secs(60);

/// One class's last resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub uid: Option<String>,
    pub generation: Option<i64>,
    pub at: Timestamp,
    pub result: Result<EC2NodeClassStatus, String>,
}

impl Resolution {
    /// `result` for `class` as it is, resolved at `at`.
    pub fn of(
        class: &EC2NodeClass,
        at: Timestamp,
        result: Result<EC2NodeClassStatus, String>,
    ) -> Self {
        Self {
            uid: class.metadata.uid.clone(),
            generation: class.metadata.generation,
            at,
            result,
        }
    }
}

/// Whether `class` must be resolved again at `now`, given its last resolution.
pub fn due(class: &EC2NodeClass, last: Option<&Resolution>, now: Timestamp) -> bool {
    let Some(last) = last else {
        return true;
    };
    last.uid != class.metadata.uid
        || last.generation != class.metadata.generation
        || last.result.is_err()
        || now >= last.at + REFRESH
        // The clock went back: resolve rather than trust a resolution from the future.
        || now < last.at
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(generation: i64) -> EC2NodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default", "uid": "u1", "generation": generation},
            "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                     "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}
        }))
        .expect("class")
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_704_067_200 + seconds).expect("time")
    }

    #[test]
    fn a_class_is_resolved_again_on_a_spec_change_a_failure_or_after_a_minute() {
        let c = class(1);
        assert!(due(&c, None, at(0)), "never resolved");
        let ok = Resolution::of(&c, at(0), Ok(EC2NodeClassStatus::default()));
        assert!(
            !due(&c, Some(&ok), at(1)),
            "pod events do not resolve again"
        );
        assert!(!due(&c, Some(&ok), at(59)));
        assert!(due(&c, Some(&ok), at(60)), "refresh interval");
        assert!(due(&class(2), Some(&ok), at(1)), "spec changed");
        let mut recreated = class(1);
        recreated.metadata.uid = Some("u2".into());
        assert!(
            due(&recreated, Some(&ok), at(1)),
            "deleted and created again"
        );
        let failed = Resolution::of(&c, at(0), Err("throttled".into()));
        assert!(
            due(&c, Some(&failed), at(1)),
            "a failure is retried (after its backoff)"
        );
        assert!(due(&c, Some(&ok), at(-5)), "clock went back");
    }
}
