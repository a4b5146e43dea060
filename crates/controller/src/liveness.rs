//! Liveness of the controller loops, for /healthz: each loop under the driver notes when it
//! last completed a pass; a loop that has not completed one for many of its periods is stuck
//! (a deadlock, a call that never returns, a starved runtime), and /healthz fails so that the
//! kubelet restarts the process.

use crate::state::poisoned;
use jiff::{SignedDuration, Timestamp};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many periods a loop may go without completing a pass...
pub const STUCK_PERIODS: u32 = 10;
/// ...and never less than this (a disruption pass at 5,000 nodes takes minutes).
pub const STUCK_AT_LEAST: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy)]
struct Beat {
    last: Timestamp,
    allowed: SignedDuration,
}

/// The running loops' last completed passes. Cheap to clone (an `Arc`).
#[derive(Clone, Default, Debug)]
pub struct Liveness {
    loops: Arc<Mutex<BTreeMap<&'static str, Beat>>>,
}

impl Liveness {
    /// `name` (a loop of `period`) completed a pass, or started, at `now`.
    pub fn beat(&self, name: &'static str, period: Duration, now: Timestamp) {
        let allowed = (period * STUCK_PERIODS).max(STUCK_AT_LEAST);
        let allowed = SignedDuration::try_from(allowed).unwrap_or(SignedDuration::MAX);
        self.loops
            .lock()
            .unwrap_or_else(|e| poisoned("liveness", e))
            .insert(name, Beat { last: now, allowed });
    }

    /// `name` stopped (this replica no longer leads, or it shuts down).
    pub fn forget(&self, name: &'static str) {
        self.loops
            .lock()
            .unwrap_or_else(|e| poisoned("liveness", e))
            .remove(name);
    }

    /// The loops that have not completed a pass within their allowance, with how long ago.
    pub fn stuck(&self, now: Timestamp) -> Vec<(&'static str, SignedDuration)> {
        self.loops
            .lock()
            .unwrap_or_else(|e| poisoned("liveness", e))
            .iter()
            .filter_map(|(name, beat)| {
                let since = now.duration_since(beat.last);
                (since > beat.allowed).then_some((*name, since))
            })
            .collect()
    }
}

/// Forgets its loop when dropped (the loop's task ended or was aborted).
pub struct LoopGuard {
    pub liveness: Liveness,
    pub name: &'static str,
}

impl Drop for LoopGuard {
    fn drop(&mut self) {
        self.liveness.forget(self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_704_067_200 + seconds).expect("time")
    }

    #[test]
    fn a_loop_is_stuck_after_ten_periods_and_at_least_ten_minutes() {
        let liveness = Liveness::default();
        liveness.beat("lifecycle", Duration::from_secs(10), at(0));
        liveness.beat("disruption", Duration::from_secs(120), at(0));
        assert!(liveness.stuck(at(600)).is_empty());
        assert_eq!(
            liveness.stuck(at(601)),
            vec![("lifecycle", SignedDuration::from_secs(601))]
        );
        liveness.beat("lifecycle", Duration::from_secs(10), at(601));
        assert!(liveness.stuck(at(1200)).is_empty());
        assert_eq!(
            liveness
                .stuck(at(1201))
                .iter()
                .map(|s| s.0)
                .collect::<Vec<_>>(),
            ["disruption"],
            "ten periods of 2 minutes"
        );
        {
            let _guard = LoopGuard {
                liveness: liveness.clone(),
                name: "disruption",
            };
        }
        assert!(
            liveness.stuck(at(1201)).is_empty(),
            "a stopped loop is not stuck"
        );
    }
}
