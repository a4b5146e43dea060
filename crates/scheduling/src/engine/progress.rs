//! What a running simulation tells whoever watches it: the pods it has still to try, and once
//! done, its pending pods by effective zone.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// The pods a running simulation has still to try, and what it found of its pending pods;
/// shared with whoever watches it.
#[derive(Debug, Default)]
pub struct SolveProgress {
    queue_depth: AtomicUsize,
    pending_by_effective_zone: Mutex<BTreeMap<String, u32>>,
}

impl SolveProgress {
    /// The pods still to try (0 once the simulation finished).
    pub fn queue_depth(&self) -> usize {
        self.queue_depth.load(Ordering::Relaxed)
    }

    /// Notes that `pods` are still to try.
    pub(super) fn set_queue_depth(&self, pods: usize) {
        self.queue_depth.store(pods, Ordering::Relaxed);
    }

    /// The pending pods given to the simulation by effective zone (a zone's name, `flexible`
    /// or `none`; see the engine's `effective_zone`), once it finished; empty before.
    pub fn pending_by_effective_zone(&self) -> BTreeMap<String, u32> {
        self.pending_by_effective_zone
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Notes the finished simulation's pending pods by effective zone.
    pub(super) fn set_pending_by_effective_zone(&self, counts: BTreeMap<String, u32>) {
        *self
            .pending_by_effective_zone
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = counts;
    }
}
