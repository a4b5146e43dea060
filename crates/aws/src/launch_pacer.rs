//! Launches paced to EC2's instance rate once EC2 throttles them. EC2 charges every launched
//! instance to a resource token bucket (RunInstances: 1,000 instances, refilled 2 a second;
//! "Request throttling for the Amazon EC2 API"). A fleet coming up empties it within a minute,
//! and from then on every launch beyond the refill is answered `RequestLimitExceeded`: thousands
//! of NodeClaims retrying on their own backoffs make tens of thousands of refused calls (a
//! call storm on the account) and launch late, each waiting out a backoff grown to minutes.
//!
//! After a throttled launch the pacer hands out slots at the refill rate, one per NodeClaim, in
//! the order they asked: a NodeClaim given a slot is told to come back at it (no call is made
//! before), and launches then. When every slot handed out has passed, pacing stops and launches
//! go straight through again until EC2 next throttles one. A launch throttled while pacing (two
//! turns fell into one CreateFleet of two instances, or the account's bucket is spent by
//! someone else too) goes to the back of the queue; the others keep their turns (a refused call
//! takes no tokens, so the bucket has them for the next). Either way EC2 sees at most the
//! refill rate of calls.

use jiff::{SignedDuration, Timestamp};
use std::collections::HashMap;
use std::sync::Mutex;

/// The time between two paced launches: EC2's RunInstances resource bucket refills 2
/// instances a second.
pub const LAUNCH_INTERVAL: SignedDuration = SignedDuration::from_millis(500);

/// How long a slot is kept for a NodeClaim that does not come back for it (deleted, or
/// launched elsewhere) before it is forgotten.
const SLOT_KEPT_FOR: SignedDuration = SignedDuration::from_secs(600);

/// Whether a launch may go now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Make the call.
    Go,
    /// Come back at this time (the NodeClaim's slot).
    WaitUntil(Timestamp),
}

/// Slots for launches while EC2 throttles them. Shared by every launch of one provider.
#[derive(Debug)]
pub struct LaunchPacer {
    interval: SignedDuration,
    state: Mutex<Pacing>,
}

#[derive(Debug, Default)]
struct Pacing {
    /// The next free slot; None while not pacing.
    next_slot: Option<Timestamp>,
    /// Each waiting NodeClaim's slot (every one before `next_slot`).
    slots: HashMap<String, Timestamp>,
    /// Slots handed out so far (the forgotten ones are swept every 1,024).
    handed_out: u64,
}

impl Default for LaunchPacer {
    fn default() -> Self {
        Self::new(LAUNCH_INTERVAL)
    }
}

impl LaunchPacer {
    /// A pacer handing out one slot per `interval` while pacing.
    pub fn new(interval: SignedDuration) -> Self {
        Self {
            interval,
            state: Mutex::new(Pacing::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Pacing> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `claim` may launch at `now`: straight away when not pacing; else at its slot,
    /// given one now if it has none.
    pub fn admit(&self, claim: &str, now: Timestamp) -> Admission {
        let mut pacing = self.state();
        if let Some(&slot) = pacing.slots.get(claim) {
            if now >= slot {
                pacing.slots.remove(claim);
                return Admission::Go;
            }
            return Admission::WaitUntil(slot);
        }
        let Some(next) = pacing.next_slot else {
            return Admission::Go;
        };
        if next <= now {
            // Every slot handed out (each before `next`) has passed: the queue is through.
            pacing.next_slot = None;
            pacing.slots.clear();
            return Admission::Go;
        }
        pacing.next_slot = Some(next.saturating_add(self.interval).unwrap_or(next));
        hand_out(&mut pacing, claim, next, now);
        Admission::WaitUntil(next)
    }

    /// EC2 throttled `claim`'s launch at `now`: pacing starts (the first slot one interval on,
    /// when the bucket has refilled one instance), or `claim` goes to the back of the queue. Its
    /// slot is returned.
    pub fn throttled(&self, claim: &str, now: Timestamp) -> Timestamp {
        let mut pacing = self.state();
        let after = |t: Timestamp| t.saturating_add(self.interval).unwrap_or(t);
        let next = match pacing.next_slot {
            Some(next) if next > now => next,
            _ => after(now),
        };
        pacing.next_slot = Some(after(next));
        hand_out(&mut pacing, claim, next, now);
        next
    }

    /// How many NodeClaims hold a slot (waiting to launch).
    pub fn waiting(&self) -> usize {
        self.state().slots.len()
    }
}

/// Gives `claim` the slot `slot`; every 1,024 slots, forgets those nobody came back for within
/// [`SLOT_KEPT_FOR`].
fn hand_out(pacing: &mut Pacing, claim: &str, slot: Timestamp, now: Timestamp) {
    pacing.handed_out += 1;
    if pacing.handed_out.is_multiple_of(1024) {
        let horizon = now.saturating_sub(SLOT_KEPT_FOR).unwrap_or(now);
        pacing.slots.retain(|_, slot| *slot >= horizon);
    }
    pacing.slots.insert(claim.to_string(), slot);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(1_800_000_000_000 + ms).unwrap()
    }

    #[test]
    fn launches_go_straight_through_until_one_is_throttled() {
        let pacer = LaunchPacer::default();
        for i in 0..100 {
            assert_eq!(pacer.admit(&format!("c{i}"), at(0)), Admission::Go);
        }
        assert_eq!(pacer.waiting(), 0);
    }

    /// After a throttled launch, the throttled NodeClaim and every later one get slots half a
    /// second apart in the order they asked; each goes at its slot and not before.
    #[test]
    fn after_a_throttle_each_claim_gets_its_own_slot_at_the_refill_rate() {
        let pacer = LaunchPacer::default();
        assert_eq!(pacer.throttled("a", at(0)), at(500));
        assert_eq!(pacer.admit("b", at(100)), Admission::WaitUntil(at(1000)));
        assert_eq!(pacer.admit("c", at(200)), Admission::WaitUntil(at(1500)));
        // Asking again before the slot changes nothing.
        assert_eq!(pacer.admit("b", at(900)), Admission::WaitUntil(at(1000)));
        assert_eq!(pacer.admit("a", at(500)), Admission::Go);
        assert_eq!(pacer.admit("b", at(1000)), Admission::Go);
        assert_eq!(pacer.waiting(), 1);
        // A newcomer queues behind c.
        assert_eq!(pacer.admit("d", at(1100)), Admission::WaitUntil(at(2000)));
        assert_eq!(pacer.admit("c", at(1600)), Admission::Go);
        assert_eq!(pacer.admit("d", at(2000)), Admission::Go);
        // Every slot has passed: pacing stops and launches go straight through.
        assert_eq!(pacer.admit("e", at(2600)), Admission::Go);
        assert_eq!(pacer.admit("f", at(2600)), Admission::Go);
        assert_eq!(pacer.waiting(), 0);
    }

    /// Once every slot handed out has passed, whether or not its NodeClaim came back for it,
    /// the queue is through: a newcomer goes at once, and so does a late comer.
    #[test]
    fn when_every_slot_has_passed_pacing_stops() {
        let pacer = LaunchPacer::default();
        pacer.throttled("a", at(0));
        assert_eq!(pacer.admit("b", at(0)), Admission::WaitUntil(at(1000)));
        assert_eq!(pacer.admit("c", at(1400)), Admission::WaitUntil(at(1500)));
        assert_eq!(pacer.admit("d", at(3000)), Admission::Go);
        assert_eq!(pacer.admit("b", at(3000)), Admission::Go);
        assert_eq!(pacer.waiting(), 0);
    }

    /// Slots nobody comes back for are forgotten once ten minutes have passed over them.
    #[test]
    fn slots_nobody_came_back_for_are_forgotten() {
        let pacer = LaunchPacer::default();
        // A throttle a second for 2,047 seconds, nobody coming back: slot i at i.5 s.
        for i in 0..2047 {
            assert_eq!(
                pacer.throttled(&format!("c{i}"), at(i * 1000)),
                at(i * 1000 + 500)
            );
        }
        // The 1,024th (at 1,023 s) swept the 423 older than ten minutes.
        assert_eq!(pacer.waiting(), 2047 - 423);
        // The 2,048th sweeps again: the 600 of the last ten minutes are left, and its own.
        pacer.throttled("last", at(2_047_000));
        assert_eq!(pacer.waiting(), 600 + 1);
    }

    /// Throttled again while pacing: the throttled NodeClaim goes to the back, the others keep
    /// their turns.
    #[test]
    fn a_launch_throttled_while_pacing_goes_to_the_back() {
        let pacer = LaunchPacer::default();
        pacer.throttled("a", at(0));
        assert_eq!(pacer.admit("b", at(0)), Admission::WaitUntil(at(1000)));
        assert_eq!(pacer.admit("a", at(500)), Admission::Go);
        // a's launch throttled again at 0.5 s: after b's turn.
        assert_eq!(pacer.throttled("a", at(500)), at(1500));
        assert_eq!(pacer.admit("b", at(1000)), Admission::Go);
        assert_eq!(pacer.admit("c", at(1000)), Admission::WaitUntil(at(2000)));
    }
}
