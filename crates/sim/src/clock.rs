//! The one source of "now" for the embedded cluster: a wall clock, or a virtual clock that
//! follows tokio time (so tests with paused tokio time drive every timestamp).

use std::fmt::Debug;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

/// Something that can tell the current time.
pub trait Clock: Send + Sync + Debug {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

/// The system's real time.
#[derive(Debug, Default, Clone, Copy)]
pub struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that starts at `base` and advances with `tokio::time::Instant`, so pausing and
/// advancing tokio time (`tokio::time::pause`, `advance`, auto-advance) moves it.
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

/// A clock that only moves when told to (handy for pure unit tests).
#[derive(Debug)]
pub struct ManualClock {
    now: std::sync::Mutex<Timestamp>,
}

impl ManualClock {
    /// A manual clock reading `now`.
    pub fn new(now: Timestamp) -> Self {
        Self {
            now: std::sync::Mutex::new(now),
        }
    }

    /// Move the clock forward by `by`.
    pub fn advance(&self, by: SignedDuration) {
        if let Ok(mut now) = self.now.lock() {
            *now = now.checked_add(by).unwrap_or(Timestamp::MAX);
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        self.now
            .lock()
            .map(|now| *now)
            .unwrap_or(Timestamp::UNIX_EPOCH)
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
