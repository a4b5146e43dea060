//! How closely the simulated account behaves like real AWS: Describe* that see a new instance
//! only after a delay (eventual consistency), request rate limits, and per-call latency. On by
//! default; [`Realism::off`] gives the instant, unlimited account unit tests may want.

use driftwood_aws::fnv::fnv1a64;
use jiff::SignedDuration;

/// The realism knobs of a simulated account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Realism {
    /// The shortest and longest time a launched instance stays invisible to DescribeInstances
    /// (by id it is `InvalidInstanceID.NotFound`, by filter it is left out), drawn per instance
    /// from the seed. CreateFleet's own answer still names it, and the kubelets see it as soon
    /// as it runs: only the Describe API lags.
    ///
    /// EC2 documents this in "Eventual consistency in the Amazon EC2 API"
    /// (<https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html>): "if you run
    /// a command to modify or describe the resource that you just created, its ID might not have
    /// propagated throughout the system, and you will get an error responding that the resource
    /// does not exist" — `InvalidInstanceID.NotFound` after RunInstances is its first example.
    pub visibility_delay: (SignedDuration, SignedDuration),
    /// Whether the documented request rate limits apply (see [`crate::rate_limits`]).
    pub rate_limits: bool,
    /// Whether every port call takes its latency (see [`crate::rate_limits::ACTIONS`]) on tokio
    /// time: virtual time in the embedded cluster and in `start_paused` tests.
    pub latency: bool,
}

impl Realism {
    /// Like real AWS: instances visible to Describe 1–5 s after launch, rate limits, latency.
    pub const fn aws() -> Self {
        Self {
            visibility_delay: (SignedDuration::from_secs(1), SignedDuration::from_secs(5)),
            rate_limits: true,
            latency: true,
        }
    }

    /// An instant, consistent, unlimited account.
    pub const fn off() -> Self {
        Self {
            visibility_delay: (SignedDuration::ZERO, SignedDuration::ZERO),
            rate_limits: false,
            latency: false,
        }
    }

    /// How long instance `instance_id` of account `seed` stays invisible to Describe: a
    /// whole number of milliseconds in `visibility_delay`, the same for the same seed and id.
    pub fn visibility_delay_of(&self, seed: u64, instance_id: &str) -> SignedDuration {
        let (low, high) = self.visibility_delay;
        let low_ms = low.as_millis().max(0);
        let high_ms = high.as_millis().max(low_ms);
        let span = u64::try_from(high_ms - low_ms).unwrap_or(0);
        if span == 0 {
            return SignedDuration::from_millis(i64::try_from(low_ms).unwrap_or(0));
        }
        let draw = fnv1a64(format!("{seed}:visible:{instance_id}").as_bytes()) % (span + 1);
        let ms = low_ms + i128::from(draw);
        SignedDuration::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))
    }
}

impl Default for Realism {
    fn default() -> Self {
        Self::aws()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_delays_are_in_range_deterministic_and_spread() {
        let r = Realism::aws();
        let delays: Vec<SignedDuration> = (0..200)
            .map(|i| r.visibility_delay_of(7, &format!("i-{i:017x}")))
            .collect();
        assert!(
            delays
                .iter()
                .all(|d| *d >= SignedDuration::from_secs(1) && *d <= SignedDuration::from_secs(5))
        );
        assert_eq!(
            delays[3],
            r.visibility_delay_of(7, &format!("i-{:017x}", 3))
        );
        assert_ne!(
            delays.iter().min(),
            delays.iter().max(),
            "not one delay for all"
        );
        let other_seed: Vec<SignedDuration> = (0..200)
            .map(|i| r.visibility_delay_of(8, &format!("i-{i:017x}")))
            .collect();
        assert_ne!(delays, other_seed);
    }

    #[test]
    fn off_is_immediately_visible() {
        assert_eq!(
            Realism::off().visibility_delay_of(7, "i-0"),
            SignedDuration::ZERO
        );
        assert!(!Realism::off().rate_limits && !Realism::off().latency);
    }
}
