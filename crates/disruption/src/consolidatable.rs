//! The Consolidatable condition, as Karpenter's NodeClaim disruption controller keeps it: True
//! once `consolidateAfter` has passed since the NodeClaim's last pod event (or, with none, since
//! it initialized); absent while consolidation is off (`Never`), before initialization, or
//! inside the window — and when the window closes.

/// Karpenter's pod-event dedupe: a pod event within this long of the last recorded one is not
/// written again.
pub const POD_EVENT_DEDUPE_SECONDS: i64 = 10;

/// Where one NodeClaim's Consolidatable condition should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consolidatable {
    /// Set True.
    Yes,
    /// Absent; becomes True at this time (UTC seconds) unless a pod event comes first.
    At(i64),
    /// Absent for good (consolidation off, or the NodeClaim not initialized).
    No,
}

/// The condition for a NodeClaim at `now`: `consolidate_after` in seconds (None: `Never`),
/// when it initialized (None: not yet) and its last pod event (None: none recorded).
pub fn consolidatable(
    consolidate_after: Option<u64>,
    initialized_at: Option<i64>,
    last_pod_event: Option<i64>,
    now: i64,
) -> Consolidatable {
    let (Some(after), Some(initialized)) = (consolidate_after, initialized_at) else {
        return Consolidatable::No;
    };
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    if after == 0 {
        return Consolidatable::Yes;
    }
    let since = last_pod_event.unwrap_or(initialized);
    let at = since.saturating_add(after);
    if now >= at {
        Consolidatable::Yes
    } else {
        Consolidatable::At(at)
    }
}

/// Whether a pod event at `now` is written, given the last one recorded (Karpenter dedupes
/// events within [`POD_EVENT_DEDUPE_SECONDS`]).
pub fn record_pod_event(last_pod_event: Option<i64>, now: i64) -> bool {
    last_pod_event.is_none_or(|last| now - last >= POD_EVENT_DEDUPE_SECONDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Karpenter NodeClaim disruption "Consolidation" cases: "should remove the status condition
    /// from the nodeClaim when consolidateAfter is never", "... when the nodeClaim is not
    /// initialized", "should add the status condition after consolidateAfter since the last pod
    /// event", "should use the initialized time when lastPodEventTime is unset", "should remove
    /// the status condition when the nodeClaim lastPodEventTime is within consolidateAfter".
    #[test]
    fn consolidatable_follows_karpenters_rules() {
        assert_eq!(consolidatable(None, Some(0), None, 100), Consolidatable::No);
        assert_eq!(
            consolidatable(Some(30), None, None, 100),
            Consolidatable::No
        );
        assert_eq!(
            consolidatable(Some(30), Some(0), None, 29),
            Consolidatable::At(30)
        );
        assert_eq!(
            consolidatable(Some(30), Some(0), None, 30),
            Consolidatable::Yes
        );
        assert_eq!(
            consolidatable(Some(30), Some(0), Some(50), 60),
            Consolidatable::At(80)
        );
        assert_eq!(
            consolidatable(Some(30), Some(0), Some(50), 80),
            Consolidatable::Yes
        );
        assert_eq!(
            consolidatable(Some(0), Some(0), Some(50), 50),
            Consolidatable::Yes
        );
    }

    /// Karpenter pod events "should not update lastPodEventTime when the last event is within
    /// the dedupe timeout".
    #[test]
    fn pod_events_within_ten_seconds_are_not_rewritten() {
        assert!(record_pod_event(None, 5));
        assert!(!record_pod_event(Some(100), 109));
        assert!(record_pod_event(Some(100), 110));
    }
}
