//! The tagging controller (Karpenter's `nodeclaim.tagging`): once a NodeClaim has registered,
//! its instance is tagged with what only registration knows — `Name` (the Node's name),
//! `karpenter.sh/nodeclaim` and `eks:eks-cluster-name` — and the NodeClaim is annotated
//! `karpenter.k8s.aws/tagged` so it is not tagged again. Launches carry none of the NodeClaim's
//! own tags, so a pool's launches made together are one CreateFleet call.
//!
//! One CreateTags a second at most, as Karpenter paces it: CreateTags draws on the same account
//! limits as the launches. An instance not found (terminated, or not yet visible to EC2's
//! eventually consistent reads) is no error, as in Karpenter: its NodeClaim is looked at again
//! when it changes.

pub mod decide;

use super::Outcome;
use crate::api::modify;
use crate::context::Context;
use driftwood_api::NodeClaim;
use driftwood_api::wellknown::{ANNOTATION_CLUSTER_NAME_TAGGED, ANNOTATION_INSTANCE_TAGGED};
use driftwood_cloud::CloudError;
use jiff::{SignedDuration, Timestamp};
use kube::api::Api;
use std::collections::HashMap;
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

/// What the loop keeps between passes: when the next instance may be looked at (so a pass woken
/// early waits out the pace), and the NodeClaims whose instance was not found, with the
/// resourceVersion they had then.
#[derive(Debug, Default, Clone)]
pub struct Memory(Arc<Mutex<Remembered>>);

#[derive(Debug, Default)]
struct Remembered {
    next: Option<Timestamp>,
    not_found: HashMap<String, Option<String>>,
}

impl Memory {
    fn lock(&self) -> std::sync::MutexGuard<'_, Remembered> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long to wait before the next instance at `now`; none when it may go now.
    fn wait(&self, now: Timestamp) -> Option<Duration> {
        let next = self.lock().next?;
        (now < next).then(|| Duration::try_from(next.duration_since(now)).unwrap_or(TAG_INTERVAL))
    }

    /// The next instance waits `interval` from `now`.
    fn next_after(&self, now: Timestamp, interval: Duration) {
        let next = now + SignedDuration::try_from(interval).unwrap_or_default();
        self.lock().next = Some(next);
    }

    /// `claim`'s instance was not found: leave it until the NodeClaim changes.
    fn not_found(&self, name: &str, claim: &NodeClaim) {
        self.lock()
            .not_found
            .insert(name.to_string(), claim.metadata.resource_version.clone());
    }

    /// Whether `claim` is left alone: its instance was not found and it has not changed since.
    fn leaves(&self, name: &str, claim: &NodeClaim) -> bool {
        self.lock()
            .not_found
            .get(name)
            .is_some_and(|version| *version == claim.metadata.resource_version)
    }

    /// Forget the NodeClaims that are gone or no longer due.
    fn forget_unless(&self, due: impl Fn(&str) -> bool) {
        let mut remembered = self.lock();
        if !remembered.not_found.is_empty() {
            remembered.not_found.retain(|name, _| due(name));
        }
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
            // A due NodeClaim's change wakes the loop too: one whose instance was not found is
            // looked at again then.
            let version = claim
                .metadata
                .resource_version
                .as_deref()
                .unwrap_or_default();
            names ^= driftwood_api::hash::fnv1a64(name.as_bytes())
                ^ driftwood_api::hash::fnv1a64(version.as_bytes()).rotate_left(17);
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

/// One pass: tags the first NodeClaim due (not backing off, not left alone after its instance
/// was not found), and comes back when the pace allows the next while more are due.
pub async fn pass(ctx: Context, memory: Memory) -> Outcome {
    let now = ctx.clock.now();
    if let Some(wait) = memory.wait(now) {
        return Outcome::again_in(wait);
    }
    let (name, claim, more) = {
        let snapshot = ctx.state.snapshot();
        memory.forget_unless(|name| {
            snapshot
                .store
                .nodeclaims
                .get(name)
                .is_some_and(|claim| decide::is_taggable(claim))
        });
        let mut due = decide::due(&snapshot).filter(|(name, claim)| {
            ctx.retries.ready(CONTROLLER, name, now) && !memory.leaves(name, claim)
        });
        let Some((name, claim)) = due.next() else {
            return Outcome::idle();
        };
        (name.clone(), claim.clone(), due.next().is_some())
    };
    let mut result = tag(&ctx, &name, &claim).await;
    if let Err(TagError::Cloud(error)) = &result
        && error.is_not_found()
    {
        tracing::debug!(controller = CONTROLLER, nodeclaim = %name, %error, "instance not found; tagging waits for the NodeClaim to change");
        memory.not_found(&name, &claim);
        result = Ok(false);
    }
    let interval = match result {
        Ok(false) => LOOK_INTERVAL,
        Ok(true) | Err(_) => TAG_INTERVAL,
    };
    memory.next_after(now, interval);
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
        let memory = Memory::default();
        let t0 = Timestamp::from_second(1_000).unwrap();
        assert_eq!(memory.wait(t0), None, "the first goes at once");
        memory.next_after(t0, TAG_INTERVAL);
        assert_eq!(
            memory.wait(t0 + SignedDuration::from_millis(300)),
            Some(Duration::from_millis(700))
        );
        assert_eq!(memory.wait(t0 + SignedDuration::from_secs(1)), None);
        memory.next_after(t0, LOOK_INTERVAL);
        assert_eq!(memory.wait(t0 + SignedDuration::from_millis(100)), None);
    }

    /// From Karpenter's tagging controller (`Reconcile` ignores a NodeClaimNotFoundError: no
    /// error, no requeue): a NodeClaim whose instance was not found is left alone until it
    /// changes, and forgotten once it is gone.
    #[test]
    fn a_claim_whose_instance_was_not_found_waits_for_a_change() {
        let memory = Memory::default();
        let mut claim = NodeClaim::new("default-abcde", Default::default());
        claim.metadata.resource_version = Some("7".to_string());
        assert!(!memory.leaves("default-abcde", &claim));
        memory.not_found("default-abcde", &claim);
        assert!(memory.leaves("default-abcde", &claim));
        claim.metadata.resource_version = Some("8".to_string());
        assert!(!memory.leaves("default-abcde", &claim), "changed since");
        memory.forget_unless(|_| false);
        claim.metadata.resource_version = Some("7".to_string());
        assert!(!memory.leaves("default-abcde", &claim), "forgotten");
    }
}
