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

    /// Holds `object` back until `until` without counting a failure (the cloud gave it a turn:
    /// a throttled launch waiting for its slot). Its backoff, if any, stays as it was.
    pub fn defer(&self, controller: &'static str, object: &str, until: Timestamp) {
        let mut failing = self
            .failing
            .lock()
            .unwrap_or_else(|e| poisoned("retries", e));
        let entry = failing
            .entry((controller, object.to_string()))
            .or_insert(Failing {
                failures: 0,
                not_before: until,
            });
        entry.not_before = until;
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
        let delay = jittered(
            OBJECT_BACKOFF
                .delay(failures)
                .unwrap_or(OBJECT_BACKOFF.base),
            controller,
            object,
            failures,
        );
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

/// `delay` scaled into [delay/2, delay] by a hash of the object and its failure count: objects
/// that failed together (a burst of launches throttled by EC2) retry spread out instead of all
/// at once, so a rate-limited API's refill is used as it comes rather than wasted between
/// synchronized bursts (found with the simulated account's rate limits: 1,000 launches retrying
/// in lockstep got 50 through per burst). Repeatable: no randomness.
fn jittered(delay: Duration, controller: &str, object: &str, failures: u32) -> Duration {
    let hash = driftwood_api::hash::fnv1a64(format!("{controller}/{object}/{failures}").as_bytes());
    let fraction = 0.5 + 0.5 * (hash % 1024) as f64 / 1023.0;
    delay.mul_f64(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_704_067_200 + seconds).expect("timestamp")
    }

    /// When `controller` may try `object` again after its latest failure (at `from`): the first
    /// whole second it is ready.
    fn ready_after(
        retries: &ObjectRetries,
        controller: &'static str,
        object: &str,
        from: i64,
    ) -> i64 {
        (from..from + 400)
            .find(|t| retries.ready(controller, object, at(*t)))
            .expect("ready within the cap")
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
        // a waits (up to 1 s); b, never failed, is ready; the same object under another
        // controller is not held back.
        assert!(!retries.ready("lifecycle", "nodeclaim/a", at(0)));
        assert!(retries.ready("lifecycle", "nodeclaim/b", at(0)));
        assert!(retries.ready("termination", "nodeclaim/a", at(0)));
        assert!(retries.ready("lifecycle", "nodeclaim/a", at(1)));
        // Doubling, each delay between half and all of 1, 2, 4, 8 s.
        let mut from = 1;
        for full in [2, 4, 8] {
            retries.record(
                &metrics,
                "lifecycle",
                "nodeclaim/a",
                "launch",
                at(from),
                &failed,
            );
            let waited = ready_after(&retries, "lifecycle", "nodeclaim/a", from) - from;
            assert!(waited >= full / 2 && waited <= full, "{waited} of {full}");
            from += waited;
        }
        assert_eq!(retries.failures("lifecycle", "nodeclaim/a"), 4);
        assert_eq!(retries.backing_off("lifecycle"), 1);
        let text = metrics.render();
        assert!(
            text.contains(
                "driftwood_object_errors_total{controller=\"lifecycle\",step=\"launch\"} 4"
            ),
            "{text}"
        );
        let ok: Result<(), &str> = Ok(());
        assert!(!retries.record(
            &metrics,
            "lifecycle",
            "nodeclaim/a",
            "launch",
            at(from),
            &ok
        ));
        assert_eq!(retries.failures("lifecycle", "nodeclaim/a"), 0);
        assert!(retries.ready("lifecycle", "nodeclaim/a", at(from)));
    }

    /// Objects that failed together come back spread out, not in one burst.
    #[test]
    fn objects_that_failed_together_retry_spread_out() {
        let retries = ObjectRetries::default();
        let metrics = Metrics::new();
        let failed: Result<(), &str> = Err("RequestLimitExceeded");
        let mut first_ready = std::collections::BTreeSet::new();
        for i in 0..100 {
            let object = format!("nodeclaim/c{i}");
            for _ in 0..6 {
                retries.record(&metrics, "lifecycle", &object, "launch", at(0), &failed);
            }
            first_ready.insert(ready_after(&retries, "lifecycle", &object, 0));
        }
        // The sixth failure waits 16-32 s: the 100 objects come back over many seconds.
        assert!(
            first_ready.iter().all(|t| (16..=32).contains(t)),
            "{first_ready:?}"
        );
        assert!(first_ready.len() >= 10, "{first_ready:?}");
    }

    #[test]
    fn the_backoff_is_capped_at_five_minutes() {
        let retries = ObjectRetries::default();
        let metrics = Metrics::new();
        let failed: Result<(), &str> = Err("boom");
        for _ in 0..30 {
            retries.record(&metrics, "gc", "nodeclaim/a", "delete", at(0), &failed);
        }
        assert!(!retries.ready("gc", "nodeclaim/a", at(149)));
        assert!(retries.ready("gc", "nodeclaim/a", at(300)));
    }
}
