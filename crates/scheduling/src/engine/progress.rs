//! How far a simulation under way is: the pods it has still to try, read by another thread
//! while it runs (Karpenter's `karpenter_scheduler_queue_depth`).

use std::sync::atomic::{AtomicUsize, Ordering};

/// The pods a running simulation has still to try; shared with whoever watches it.
#[derive(Debug, Default)]
pub struct SolveProgress {
    queue_depth: AtomicUsize,
}

impl SolveProgress {
    /// The pods still to try (0 once the simulation finished).
    pub fn queue_depth(&self) -> usize {
        self.queue_depth.load(Ordering::Relaxed)
    }

    pub(super) fn set_queue_depth(&self, pods: usize) {
        self.queue_depth.store(pods, Ordering::Relaxed);
    }
}
