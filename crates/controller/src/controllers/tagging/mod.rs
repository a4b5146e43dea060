//! The tagging controller (Karpenter's `nodeclaim.tagging`): once a NodeClaim has registered,
//! its instance is tagged with what only registration knows — `Name` (the Node's name),
//! `karpenter.sh/nodeclaim` and `eks:eks-cluster-name` — and the NodeClaim is annotated
//! `karpenter.k8s.aws/tagged` so it is not tagged again. Launches carry none of the NodeClaim's
//! own tags, so a pool's launches made together are one CreateFleet call.
//!
//! One CreateTags a second at most, as Karpenter paces it: CreateTags draws on the same account
//! limits as the launches. An instance that is gone is an error of its NodeClaim (logged,
//! counted, backed off up to 5 minutes) until garbage collection removes the NodeClaim;
//! Karpenter ignores it.

pub mod decide;

use super::Outcome;
use crate::api::modify;
use crate::context::Context;
use driftwood_api::NodeClaim;
use driftwood_api::wellknown::{ANNOTATION_CLUSTER_NAME_TAGGED, ANNOTATION_INSTANCE_TAGGED};
use driftwood_cloud::CloudError;
use jiff::{SignedDuration, Timestamp};
use kube::api::Api;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The controller's name (logs, metrics, backoff).
pub const CONTROLLER: &str = "nodeclaim.tagging";

/// After a CreateTags (or a failed attempt), the next waits this long (Karpenter sleeps a
/// second after each CreateTags: it draws on the account's limits as the launches do).
pub const TAG_INTERVAL: Duration = Duration::from_secs(1);

/// After an instance found tagged already (one DescribeInstances, no CreateTags), the next
/// waits this long: NodeClaims tagged before (by Karpenter, or an older driftwood) are gone
/// through at ten a second, half the Describe bucket's refill.
pub const LOOK_INTERVAL: Duration = Duration::from_millis(100);

/// When the next instance may be looked at; kept between passes, so a pass woken early waits
/// out the pace.
#[derive(Debug, Default, Clone)]
pub struct Pace(Arc<Mutex<Option<Timestamp>>>);

impl Pace {
    /// How long to wait before the next instance at `now`; none when it may go now.
    fn wait(&self, now: Timestamp) -> Option<Duration> {
        let next = (*self.0.lock().unwrap_or_else(PoisonError::into_inner))?;
        (now < next).then(|| Duration::try_from(next.duration_since(now)).unwrap_or(TAG_INTERVAL))
    }

    /// The next instance waits `interval` from `now`.
    fn next_after(&self, now: Timestamp, interval: Duration) {
        let next = now + SignedDuration::try_from(interval).unwrap_or_default();
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(next);
    }
}

/// What wakes the loop: which NodeClaims are due their tags (their count, and their names
/// hashed together, so one tagged and another registered within one look still wake it).
pub fn wake_signature(snapshot: &crate::state::Snapshot) -> Vec<u64> {
    let mut due = 0u64;
    let mut names = 0u64;
    for (name, claim) in &snapshot.store.nodeclaims {
        if decide::is_taggable(claim) {
            due += 1;
            names ^= driftwood_api::hash::fnv1a64(name.as_bytes());
        }
    }
    vec![due, names]
}

/// Why one NodeClaim was not tagged.
#[derive(Debug, thiserror::Error)]
enum TagError {
    #[error("tagging its instance: {0}")]
    Cloud(#[from] CloudError),
    #[error("annotating it tagged: {0}")]
    Api(#[from] kube::Error),
}

/// One pass: tags the first NodeClaim due (not backing off), and comes back when the pace
/// allows the next while more are due.
pub async fn pass(ctx: Context, pace: Pace) -> Outcome {
    let now = ctx.clock.now();
    if let Some(wait) = pace.wait(now) {
        return Outcome::again_in(wait);
    }
    let (name, claim, more) = {
        let snapshot = ctx.state.snapshot();
        let mut due = decide::due(&snapshot);
        let Some((name, claim)) = due.find(|(name, _)| ctx.retries.ready(CONTROLLER, name, now))
        else {
            return Outcome::idle();
        };
        (name.clone(), claim.clone(), due.next().is_some())
    };
    let result = tag(&ctx, &name, &claim).await;
    let interval = match result {
        Ok(false) => LOOK_INTERVAL,
        Ok(true) | Err(_) => TAG_INTERVAL,
    };
    pace.next_after(now, interval);
    let failed = ctx.retries.record(
        &ctx.metrics,
        CONTROLLER,
        &name,
        "tag instance",
        ctx.clock.now(),
        &result.map(|_| ()),
    );
    let outcome = if more || failed {
        Outcome::again_in(interval)
    } else {
        Outcome::idle()
    };
    outcome.with_errors(u32::from(failed))
}

/// Tags `claim`'s instance, then annotates the NodeClaim (a retry after a failed annotation
/// finds the tags in place and only annotates). Returns whether tags were written.
async fn tag(ctx: &Context, name: &str, claim: &NodeClaim) -> Result<bool, TagError> {
    let written = ctx.cloud.tag_instance(claim).await?;
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    modify(&ctx.state, &api, name, |c| {
        let annotations = c.metadata.annotations.get_or_insert_with(Default::default);
        let mut changed = false;
        for key in [ANNOTATION_INSTANCE_TAGGED, ANNOTATION_CLUSTER_NAME_TAGGED] {
            if annotations.get(key).map(String::as_str) != Some("true") {
                annotations.insert(key.to_string(), "true".to_string());
                changed = true;
            }
        }
        changed
    })
    .await?;
    tracing::debug!(controller = CONTROLLER, nodeclaim = %name, written, "tagged instance");
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Karpenter's pace: a second after a CreateTags whatever wakes the loop meanwhile; a
    /// tenth of one after an instance found tagged already.
    #[test]
    fn the_pace_is_a_second_after_a_write_and_a_tenth_after_a_look() {
        let pace = Pace::default();
        let t0 = Timestamp::from_second(1_000).unwrap();
        assert_eq!(pace.wait(t0), None, "the first goes at once");
        pace.next_after(t0, TAG_INTERVAL);
        assert_eq!(
            pace.wait(t0 + SignedDuration::from_millis(300)),
            Some(Duration::from_millis(700))
        );
        assert_eq!(pace.wait(t0 + SignedDuration::from_secs(1)), None);
        pace.next_after(t0, LOOK_INTERVAL);
        assert_eq!(pace.wait(t0 + SignedDuration::from_millis(100)), None);
    }
}
