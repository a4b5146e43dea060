//! One clock for the whole embedded cluster: lets the sim's clocks serve as
//! `driftwood_cloud::Clock`, so API objects and the simulated EC2 read the same (virtual) time.

use std::sync::Arc;

use jiff::Timestamp;

use crate::clock::{Clock, SharedClock, VirtualClock, WallClock};

impl driftwood_cloud::Clock for VirtualClock {
    fn now(&self) -> Timestamp {
        Clock::now(self)
    }
}

impl driftwood_cloud::Clock for WallClock {
    fn now(&self) -> Timestamp {
        Clock::now(self)
    }
}

/// Any shared sim clock seen through the cloud crate's `Clock` trait.
#[derive(Debug, Clone)]
pub struct CloudClock(pub SharedClock);

impl driftwood_cloud::Clock for CloudClock {
    fn now(&self) -> Timestamp {
        self.0.now()
    }
}

/// The same clock as both a sim clock and a cloud clock.
pub fn shared_clocks(clock: SharedClock) -> (SharedClock, Arc<dyn driftwood_cloud::Clock>) {
    let cloud: Arc<dyn driftwood_cloud::Clock> = Arc::new(CloudClock(Arc::clone(&clock)));
    (clock, cloud)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn both_views_read_the_same_virtual_time() {
        let base: Timestamp = "2024-08-20T00:00:00Z".parse().unwrap();
        let (sim, cloud) = shared_clocks(Arc::new(VirtualClock::starting_at(base)));
        tokio::time::advance(std::time::Duration::from_secs(42)).await;
        assert_eq!(sim.now(), cloud.now());
        assert_eq!(cloud.now().to_string(), "2024-08-20T00:00:42Z");
    }
}
