//! A NodePool's own backoff after failed replacements (Karpenter's per-NodePool backoff RFC,
//! kubernetes-sigs/karpenter#3080): each replacement that never initializes doubles the pause
//! before the pool's next disruption, from 2 minutes up to 30; one that initializes ends it.
//! Other pools are never held.

use crate::budget::format_utc;
use crate::plan::PolicyCap;
use crate::policy::seconds;
use driftwood_api::nodepool::RolloutBackoff;

/// The first pause, and the longest.
pub const BACKOFF_BASE_SECONDS: i64 = 120;
pub const BACKOFF_MAX_SECONDS: i64 = 1800;

/// The pause after `failures` failures in a row.
pub fn delay(failures: i64) -> i64 {
    let doublings = u32::try_from(failures.saturating_sub(1).clamp(0, 16)).unwrap_or(16);
    BACKOFF_BASE_SECONDS
        .saturating_mul(1_i64 << doublings)
        .min(BACKOFF_MAX_SECONDS)
}

/// The backoff after one more failed replacement at `now`.
pub fn after_failure(last: Option<&RolloutBackoff>, now: i64, reason: &str) -> RolloutBackoff {
    let failures = last.map_or(0, |b| b.failures).saturating_add(1);
    RolloutBackoff {
        failures,
        until: format_utc(now.saturating_add(delay(failures))),
        reason: reason.to_string(),
    }
}

/// Until when `backoff` holds the pool at `now` (None: it does not).
pub fn holding(backoff: &RolloutBackoff, now: i64) -> Option<i64> {
    seconds(&backoff.until).filter(|until| *until > now)
}

/// The cap `backoff` puts on its pool at `now`: nothing starts (None: it does not hold it).
pub fn cap(backoff: &RolloutBackoff, now: i64) -> Option<PolicyCap> {
    holding(backoff, now).map(|until| PolicyCap {
        cap: 0,
        only: None,
        halts: false,
        detail: detail(backoff, until),
    })
}

/// What a held pool's candidates are told.
pub fn detail(backoff: &RolloutBackoff, until: i64) -> String {
    format!(
        "backing off after {} failed replacement(s) in a row (the last: {}); the next disruption may start at {}",
        backoff.failures,
        backoff.reason,
        format_utc(until)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000;

    #[test]
    fn each_failure_doubles_the_pause_up_to_thirty_minutes() {
        let delays: Vec<i64> = (1..=6).map(delay).collect();
        assert_eq!(delays, vec![120, 240, 480, 960, 1800, 1800]);
        let first = after_failure(
            None,
            T0,
            "replacement nodeclaims did not initialize in time",
        );
        assert_eq!(first.failures, 1);
        assert_eq!(holding(&first, T0 + 119), Some(T0 + 120));
        assert_eq!(holding(&first, T0 + 120), None);
        let second = after_failure(Some(&first), T0 + 600, "a replacement nodeclaim is gone");
        assert_eq!(
            (second.failures, holding(&second, T0 + 600)),
            (2, Some(T0 + 840))
        );
        let held = cap(&second, T0 + 600).unwrap();
        assert_eq!((held.cap, held.halts, held.only), (0, false, None));
        assert_eq!(held.detail, detail(&second, T0 + 840));
        assert_eq!(cap(&second, T0 + 840), None);
        assert!(detail(&second, T0 + 840).starts_with(
            "backing off after 2 failed replacement(s) in a row (the last: a replacement nodeclaim is gone)"
        ));
    }
}
