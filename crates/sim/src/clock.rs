//! The embedded cluster's "now": the one [`Clock`] trait (driftwood-cloud's), with the system
//! clock, or a virtual clock that follows tokio time (so tests with paused tokio time drive
//! every timestamp).

use jiff::{SignedDuration, Timestamp};

pub use driftwood_cloud::clock::{Clock, ManualClock, SharedClock, SystemClock};

/// Virtual time: `base` plus the tokio time elapsed since it was made (paused tokio time
/// makes a simulated hour pass in a moment).
#[derive(Debug, Clone, Copy)]
pub struct VirtualClock {
    base: Timestamp,
    start: tokio::time::Instant,
}

impl VirtualClock {
    /// A virtual clock reading `base` now.
    pub fn starting_at(base: Timestamp) -> Self {
        Self {
            base,
            start: tokio::time::Instant::now(),
        }
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Timestamp {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.start);
        let elapsed = SignedDuration::try_from(elapsed).unwrap_or(SignedDuration::MAX);
        self.base.checked_add(elapsed).unwrap_or(Timestamp::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn virtual_clock_follows_paused_tokio_time() {
        let base: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let clock = VirtualClock::starting_at(base);
        assert_eq!(clock.now(), base);
        tokio::time::advance(std::time::Duration::from_secs(90)).await;
        assert_eq!(clock.now().to_string(), "2026-01-01T00:01:30Z");
    }

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let base: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let clock = ManualClock::new(base);
        clock.advance(SignedDuration::from_secs(5));
        assert_eq!(clock.now().to_string(), "2026-01-01T00:00:05Z");
    }
}
