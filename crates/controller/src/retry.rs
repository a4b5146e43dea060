//! Per-object retry: a write or cloud call that failed for one object is logged naming the
//! object, counted for its controller and for the object, and not tried again for that object
//! until its exponential backoff has passed — while the controller goes on with every other
//! object (controller-runtime's per-item rate limiter, on the one clock).

use crate::controllers::driver::Backoff;
use crate::metrics::Metrics;
use crate::state::poisoned;
use jiff::{SignedDuration, Timestamp};
use std::collections::HashMap;
use std::fmt::Display;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The backoff of one object's failing step: 1 s, doubled per consecutive failure, at most
/// 5 minutes (controller-runtime's per-item limiter caps at 1000 s; a node lifecycle step that
/// failed for 5 minutes is retried often enough to notice a fixed cause).
pub const OBJECT_BACKOFF: Backoff = Backoff {
    base: Duration::from_secs(1),
    max: Duration::from_secs(300),
};

/// One object's failures so far and when it may be tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Failing {
    failures: u32,
    not_before: Timestamp,
}

/// The objects whose last attempt failed, by controller and object (`kind/name`). Cheap to
/// clone (an `Arc`).
#[derive(Clone, Default)]
pub struct ObjectRetries {
    failing: Arc<Mutex<HashMap<(&'static str, String), Failing>>>,
}

impl ObjectRetries {
    /// Whether `controller` may try `object` at `now` (it is not waiting out a backoff).
    pub fn ready(&self, controller: &'static str, object: &str, now: Timestamp) -> bool {
        let failing = self
            .failing
            .lock()
            .unwrap_or_else(|e| poisoned("retries", e));
        failing
            .get(&(controller, object.to_string()))
            .is_none_or(|f| now >= f.not_before)
    }

    /// How many times in a row `controller` has failed on `object`.
    pub fn failures(&self, controller: &'static str, object: &str) -> u32 {
        let failing = self
            .failing
            .lock()
            .unwrap_or_else(|e| poisoned("retries", e));
        failing
            .get(&(controller, object.to_string()))
            .map_or(0, |f| f.failures)
    }

    /// How many objects `controller` is backing off from.
    pub fn backing_off(&self, controller: &'static str) -> usize {
        let failing = self
            .failing
            .lock()
            .unwrap_or_else(|e| poisoned("retries", e));
        failing.keys().filter(|(c, _)| *c == controller).count()
    }

    /// Records one attempt of `step` on `object` by `controller`: a success forgets its
    /// failures; a failure is logged (naming the object, the step, how many times in a row and
    /// when it is tried again), counted in `driftwood_object_errors_total{controller,step}`,
    /// and backs the object off. Returns whether it failed.
    pub fn record<E: Display>(
        &self,
        metrics: &Metrics,
        controller: &'static str,
        object: &str,
        step: &str,
        now: Timestamp,
        result: &Result<(), E>,
    ) -> bool {
        let mut failing = self
            .failing
            .lock()
            .unwrap_or_else(|e| poisoned("retries", e));
        let key = (controller, object.to_string());
        let Err(error) = result else {
            failing.remove(&key);
            return false;
        };
        let failures = failing
            .get(&key)
            .map_or(0, |f| f.failures)
            .saturating_add(1);
        let delay = OBJECT_BACKOFF
            .delay(failures)
            .unwrap_or(OBJECT_BACKOFF.base);
        let not_before = now
            .checked_add(SignedDuration::try_from(delay).unwrap_or(SignedDuration::MAX))
            .unwrap_or(Timestamp::MAX);
        failing.insert(
            key,
            Failing {
                failures,
                not_before,
            },
        );
        drop(failing);
        tracing::warn!(
            controller,
            object,
            step,
            failures,
            retry_in = ?delay,
            %error,
            "step failed; retrying this object after its backoff"
        );
        Metrics::inc(
            &metrics.object_errors,
            &[("controller", controller), ("step", step)],
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_704_067_200 + seconds).expect("timestamp")
    }

    #[test]
    fn a_failing_object_backs_off_alone_and_a_success_forgets_it() {
        let retries = ObjectRetries::default();
        let metrics = Metrics::new();
        let failed: Result<(), &str> = Err("boom");
        assert!(retries.record(
            &metrics,
            "lifecycle",
            "nodeclaim/a",
            "launch",
            at(0),
            &failed
        ));
        // a waits 1 s; b, never failed, is ready.
        assert!(!retries.ready("lifecycle", "nodeclaim/a", at(0)));
        assert!(retries.ready("lifecycle", "nodeclaim/b", at(0)));
        assert!(retries.ready("lifecycle", "nodeclaim/a", at(1)));
        // The same object under another controller is not held back.
        assert!(retries.ready("termination", "nodeclaim/a", at(0)));
        // Doubling: 2 s after the second failure, 4 s after the third.
        retries.record(
            &metrics,
            "lifecycle",
            "nodeclaim/a",
            "launch",
            at(1),
            &failed,
        );
        assert!(!retries.ready("lifecycle", "nodeclaim/a", at(2)));
        assert!(retries.ready("lifecycle", "nodeclaim/a", at(3)));
        retries.record(
            &metrics,
            "lifecycle",
            "nodeclaim/a",
            "launch",
            at(3),
            &failed,
        );
        assert!(!retries.ready("lifecycle", "nodeclaim/a", at(6)));
        assert!(retries.ready("lifecycle", "nodeclaim/a", at(7)));
        assert_eq!(retries.failures("lifecycle", "nodeclaim/a"), 3);
        assert_eq!(retries.backing_off("lifecycle"), 1);
        let text = metrics.render();
        assert!(
            text.contains(
                "driftwood_object_errors_total{controller=\"lifecycle\",step=\"launch\"} 3"
            ),
            "{text}"
        );
        let ok: Result<(), &str> = Ok(());
        assert!(!retries.record(&metrics, "lifecycle", "nodeclaim/a", "launch", at(7), &ok));
        assert_eq!(retries.failures("lifecycle", "nodeclaim/a"), 0);
        assert!(retries.ready("lifecycle", "nodeclaim/a", at(7)));
    }

    #[test]
    fn the_backoff_is_capped_at_five_minutes() {
        let retries = ObjectRetries::default();
        let metrics = Metrics::new();
        let failed: Result<(), &str> = Err("boom");
        for _ in 0..30 {
            retries.record(&metrics, "gc", "nodeclaim/a", "delete", at(0), &failed);
        }
        assert!(!retries.ready("gc", "nodeclaim/a", at(299)));
        assert!(retries.ready("gc", "nodeclaim/a", at(300)));
    }
}
