//! Offerings (instance type × zone × capacity type) recently refused for lack of capacity; they
//! count as unavailable for a TTL (3 minutes, like Karpenter). Time is passed in, never read.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};

/// How long an offering stays unavailable after an insufficient-capacity error.
pub const UNAVAILABLE_OFFERING_TTL: SignedDuration = SignedDuration::from_secs(180);

pub use driftwood_cloud::OfferingKey;

/// Offerings marked unavailable, each until an expiry instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnavailableOfferings {
    until: BTreeMap<OfferingKey, Timestamp>,
}

impl UnavailableOfferings {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks `key` unavailable from `now` for [`UNAVAILABLE_OFFERING_TTL`].
    pub fn mark(&mut self, key: OfferingKey, now: Timestamp) {
        let until = now.checked_add(UNAVAILABLE_OFFERING_TTL).unwrap_or(now);
        self.until.insert(key, until);
    }

    /// Whether `key` is unavailable at `now`.
    pub fn is_unavailable(&self, key: &OfferingKey, now: Timestamp) -> bool {
        self.until.get(key).is_some_and(|until| now < *until)
    }

    /// Drops entries that expired by `now`.
    pub fn prune(&mut self, now: Timestamp) {
        self.until.retain(|_, until| now < *until);
    }

    /// The offerings unavailable at `now`.
    pub fn unavailable_at(&self, now: Timestamp) -> Vec<OfferingKey> {
        self.until
            .iter()
            .filter(|(_, until)| now < **until)
            .map(|(k, _)| k.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_after_three_minutes() {
        let t0: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let key = OfferingKey::new("m5.large", "us-west-2a", "spot");
        let mut cache = UnavailableOfferings::new();
        cache.mark(key.clone(), t0);
        assert!(cache.is_unavailable(&key, t0));
        assert!(cache.is_unavailable(&key, t0 + SignedDuration::from_secs(179)));
        assert!(!cache.is_unavailable(&key, t0 + SignedDuration::from_secs(180)));
        assert!(
            !cache.is_unavailable(&OfferingKey::new("m5.large", "us-west-2a", "on-demand"), t0)
        );
        cache.prune(t0 + SignedDuration::from_secs(181));
        assert!(cache.unavailable_at(t0).is_empty());
    }
}
