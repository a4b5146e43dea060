//! Leader election on a coordination.k8s.io/v1 Lease, as client-go's elector does it: only the
//! leader runs the controllers and writes (the [`Fence`]); expiry is judged on this replica's
//! own clock from when it observed the lease record change, never from the holder's
//! timestamps (clocks differ between machines); renewals are patches with the last written
//! resourceVersion as precondition (no GET + PUT), and when that is refused because the lease
//! changed (a lost answer to our own write, someone else's label), the leader reads it again and
//! renews if it still holds it (client-go's slow path); the leader steps down at its renew deadline
//! when renewals fail, before a standby can take over; a leader that shuts down releases the
//! lease so a standby takes over at once.

use crate::api::{is_conflict, is_not_found, precondition_patch};
use crate::fence::Fence;
use driftwood_cloud::Clock;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
pub use prometheus_client::metrics::counter::Counter;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The Lease Karpenter uses.
pub const LEASE_NAME: &str = "karpenter-leader-election";

/// controller-runtime's defaults, which Karpenter keeps: a lease lasts 15 s, the leader gives up
/// 10 s after its last successful renewal, and every replica tries every 2 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Timings {
    /// Timings for a lease of `lease_duration`, in controller-runtime's proportions (renew
    /// deadline 2/3 of it, retry period 2/15 of it).
    pub fn for_lease(lease_duration: Duration) -> Self {
        Self {
            lease_duration,
            renew_deadline: lease_duration * 2 / 3,
            retry_period: (lease_duration * 2 / 15).max(Duration::from_millis(100)),
        }
    }
}

impl Default for Timings {
    fn default() -> Self {
        Self::for_lease(Duration::from_secs(15))
    }
}

/// What to do with the lease now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseAction {
    /// Nobody holds it (released, or the holder let it lapse by our clock): take it.
    Acquire,
    /// We hold it: renew.
    Renew,
    /// Someone else holds a live lease.
    Follow { holder: String },
}

/// The lease record as last seen, and when (by this replica's clock) it last changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// Holder, renew time and transitions as read: any change means the holder is alive.
    record: (String, Option<String>, Option<i32>),
    /// When this replica first saw `record`.
    pub seen_at: Timestamp,
}

impl Observation {
    /// `previous` if `spec` is the record it saw, else `spec` seen now.
    pub fn update(previous: Option<Observation>, spec: Option<&LeaseSpec>, now: Timestamp) -> Self {
        let record = spec.map_or_else(Default::default, |s| {
            (
                s.holder_identity.clone().unwrap_or_default(),
                s.renew_time.as_ref().map(|t| t.0.to_string()),
                s.lease_transitions,
            )
        });
        match previous {
            Some(p) if p.record == record => p,
            _ => Self {
                record,
                seen_at: now,
            },
        }
    }
}

/// Decides from the lease as read (None: absent) and when its record was first seen here.
pub fn decide(
    lease: Option<&LeaseSpec>,
    observed: &Observation,
    identity: &str,
    now: Timestamp,
) -> LeaseAction {
    let Some(spec) = lease else {
        return LeaseAction::Acquire;
    };
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder == identity {
        return LeaseAction::Renew;
    }
    if holder.is_empty() {
        return LeaseAction::Acquire;
    }
    let duration =
        SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(15).max(1)));
    if now < observed.seen_at + duration {
        LeaseAction::Follow { holder }
    } else {
        LeaseAction::Acquire
    }
}

/// The spec we write when taking or renewing the lease.
fn our_spec(
    current: Option<&LeaseSpec>,
    identity: &str,
    acquiring: bool,
    now: Timestamp,
    lease_duration: Duration,
) -> LeaseSpec {
    let mut spec = current.cloned().unwrap_or_default();
    if acquiring {
        spec.acquire_time = Some(MicroTime(now));
        spec.lease_transitions =
            Some(spec.lease_transitions.unwrap_or(0) + i32::from(current.is_some()));
    }
    spec.holder_identity = Some(identity.to_string());
    spec.renew_time = Some(MicroTime(now));
    spec.lease_duration_seconds = Some(i32::try_from(lease_duration.as_secs()).unwrap_or(15));
    spec
}

/// One election: its client (not fenced: the lease is how it holds the fence), namespace,
/// identity, clock, timings and the fence it opens and closes.
pub struct Election {
    pub client: Client,
    pub namespace: String,
    pub identity: String,
    pub clock: Arc<dyn Clock>,
    pub timings: Timings,
    pub fence: Fence,
    /// Counts renewals by the slow path (`leader_election_slowpath_total`).
    pub slowpath: Counter,
}

/// Campaigns for the lease until `cancel` fires: `on_change(true)` when this replica becomes
/// leader, `on_change(false)` when it loses the lease (the fence is closed before). On
/// cancellation a leader releases the lease (Karpenter's LeaderElectionReleaseOnCancel).
pub async fn run_election(
    election: Election,
    cancel: CancellationToken,
    mut on_change: impl FnMut(bool),
) {
    let Election {
        client,
        namespace,
        identity,
        clock,
        timings,
        fence,
        slowpath,
    } = election;
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    // While leading: the lease as we last wrote it (its resourceVersion is the precondition of
    // the next renewal) and the deadline of the fence.
    let mut held: Option<Lease> = None;
    let mut observed: Option<Observation> = None;
    let mut leading = false;
    let renew_deadline =
        SignedDuration::try_from(timings.renew_deadline).unwrap_or(SignedDuration::from_secs(10));
    loop {
        let now = clock.now();
        let result = match held.take() {
            Some(lease) => renew(&api, lease, &identity, now, timings, &slowpath).await,
            None => campaign(&api, &mut observed, &identity, now, timings).await,
        };
        match result {
            Ok(Some(lease)) => {
                fence.hold_until(now + renew_deadline);
                if !leading {
                    leading = true;
                    tracing::info!(identity = %identity, lease = LEASE_NAME, "acquired leader lease");
                    on_change(true);
                }
                observed = Some(Observation::update(None, lease.spec.as_ref(), now));
                held = Some(lease);
            }
            Ok(None) => {}
            Err(Lost::Conflict) => {
                leading = false;
                lose(
                    &fence,
                    &identity,
                    "another replica wrote the lease",
                    &mut on_change,
                );
            }
            Err(Lost::Failed { lease, error }) => {
                if fence.allows_writes() {
                    tracing::warn!(identity = %identity, lease = LEASE_NAME, %error, "renewing the leader lease failed; retrying before the renew deadline");
                    held = Some(*lease);
                } else {
                    leading = false;
                    lose(
                        &fence,
                        &identity,
                        "renew deadline passed without a successful renewal",
                        &mut on_change,
                    );
                }
            }
        }
        tokio::select! {
            () = cancel.cancelled() => {
                if let Some(lease) = held {
                    fence.close();
                    release(&api, lease, &identity, clock.now()).await;
                }
                return;
            }
            () = tokio::time::sleep(timings.retry_period) => {}
        }
    }
}

fn lose(fence: &Fence, identity: &str, why: &str, on_change: &mut impl FnMut(bool)) {
    fence.close();
    tracing::warn!(identity = %identity, lease = LEASE_NAME, reason = why, "lost leader lease; writes stopped");
    on_change(false);
}

/// Why a leader's renewal did not go through.
enum Lost {
    /// The lease changed under us: someone else holds it now.
    Conflict,
    /// The write failed (API down, throttled): retry until the renew deadline.
    Failed {
        lease: Box<Lease>,
        error: kube::Error,
    },
}

/// Renews the lease we hold with a patch whose precondition is the resourceVersion we wrote;
/// when the lease changed since (our previous renewal went through but its answer was lost,
/// or someone else wrote to the lease), reads it and renews it if we still hold it, counted in
/// `slowpath` (client-go's slow path).
async fn renew(
    api: &Api<Lease>,
    lease: Lease,
    identity: &str,
    now: Timestamp,
    timings: Timings,
    slowpath: &Counter,
) -> Result<Option<Lease>, Lost> {
    let held = lease.clone();
    match renew_from(api, lease, identity, now, timings).await {
        Err(Lost::Conflict) => {}
        done => return done,
    }
    let read = match api.get(LEASE_NAME).await {
        Ok(read) => read,
        Err(e) if is_not_found(&e) => return Err(Lost::Conflict),
        // Unread: try again (from the fast path) until the renew deadline.
        Err(error) => {
            return Err(Lost::Failed {
                lease: Box::new(held),
                error,
            });
        }
    };
    // Still ours, and in the same term: the holder, its acquire time and the transitions as
    // we last wrote them (a process that shares our identity and took the lease since is
    // another term, not us).
    let term = |l: &Lease| {
        l.spec.as_ref().map(|s| {
            (
                s.holder_identity.clone(),
                s.acquire_time.clone(),
                s.lease_transitions,
            )
        })
    };
    let holder = read
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref());
    if holder != Some(identity) || term(&read) != term(&held) {
        return Err(Lost::Conflict);
    }
    slowpath.inc();
    tracing::info!(identity = %identity, lease = LEASE_NAME, "the leader lease changed under its holder; renewing it as read");
    match renew_from(api, read.clone(), identity, now, timings).await {
        // Changed again between the read and the write: still ours as far as we know, so try
        // again until the renew deadline rather than step down at once.
        Err(Lost::Conflict) => Err(Lost::Failed {
            lease: Box::new(read),
            error: kube::Error::Service(
                "the leader lease changed again while it was being renewed".into(),
            ),
        }),
        done => done,
    }
}

/// One renewal of `lease` as read or last written.
async fn renew_from(
    api: &Api<Lease>,
    lease: Lease,
    identity: &str,
    now: Timestamp,
    timings: Timings,
) -> Result<Option<Lease>, Lost> {
    let mut renewed = lease.clone();
    renewed.spec = Some(our_spec(
        lease.spec.as_ref(),
        identity,
        false,
        now,
        timings.lease_duration,
    ));
    let Some(patch) = precondition_patch(&lease, &renewed) else {
        return Ok(Some(lease));
    };
    match api
        .patch(
            LEASE_NAME,
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await
    {
        Ok(written) => Ok(Some(written)),
        Err(e) if is_conflict(&e) || is_not_found(&e) => Err(Lost::Conflict),
        Err(error) => Err(Lost::Failed {
            lease: Box::new(lease),
            error,
        }),
    }
}

/// A standby's turn: read the lease, note when its record changed, and take it when it is
/// free or has not changed for a whole lease by our clock. Returns the lease when we took it.
async fn campaign(
    api: &Api<Lease>,
    observed: &mut Option<Observation>,
    identity: &str,
    now: Timestamp,
    timings: Timings,
) -> Result<Option<Lease>, Lost> {
    let current = match api.get(LEASE_NAME).await {
        Ok(lease) => Some(lease),
        Err(e) if is_not_found(&e) => None,
        Err(error) => {
            tracing::warn!(identity = %identity, lease = LEASE_NAME, %error, "reading leader lease failed");
            return Ok(None);
        }
    };
    let spec = current.as_ref().and_then(|l| l.spec.as_ref());
    let seen = Observation::update(observed.take(), spec, now);
    let action = decide(spec, &seen, identity, now);
    *observed = Some(seen);
    if let LeaseAction::Follow { .. } = action {
        return Ok(None);
    }
    let acquiring = action == LeaseAction::Acquire;
    let written = match current {
        Some(read) => {
            let mut ours = read.clone();
            ours.spec = Some(our_spec(
                read.spec.as_ref(),
                identity,
                acquiring,
                now,
                timings.lease_duration,
            ));
            match precondition_patch(&read, &ours) {
                Some(patch) => {
                    api.patch(
                        LEASE_NAME,
                        &PatchParams::default(),
                        &Patch::Json::<()>(patch),
                    )
                    .await
                }
                None => Ok(read),
            }
        }
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(LEASE_NAME.into()),
                    namespace: api.namespace().map(str::to_string),
                    ..Default::default()
                },
                spec: Some(our_spec(None, identity, true, now, timings.lease_duration)),
            };
            api.create(&PostParams::default(), &lease).await
        }
    };
    match written {
        Ok(lease) => Ok(Some(lease)),
        // Another standby was faster: follow it.
        Err(e) if is_conflict(&e) => Ok(None),
        Err(error) => {
            tracing::warn!(identity = %identity, lease = LEASE_NAME, %error, "taking the leader lease failed");
            Ok(None)
        }
    }
}

/// Gives the lease up (holder cleared, a 1 s duration) so a standby takes over at its next
/// try instead of after a whole lease, as client-go's ReleaseOnCancel does.
async fn release(api: &Api<Lease>, lease: Lease, identity: &str, now: Timestamp) {
    let mut released = lease.clone();
    let spec = released.spec.get_or_insert_with(Default::default);
    spec.holder_identity = Some(String::new());
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(now));
    spec.acquire_time = Some(MicroTime(now));
    let Some(patch) = precondition_patch(&lease, &released) else {
        return;
    };
    match api
        .patch(
            LEASE_NAME,
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await
    {
        Ok(_) => tracing::info!(identity = %identity, lease = LEASE_NAME, "released leader lease"),
        Err(error) => {
            tracing::warn!(identity = %identity, lease = LEASE_NAME, %error, "releasing the leader lease failed; a standby takes over when it lapses")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).expect("time")
    }

    fn spec(holder: &str, renewed: i64, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            renew_time: Some(MicroTime(at(renewed))),
            lease_duration_seconds: Some(duration),
            ..Default::default()
        }
    }

    #[test]
    fn decisions() {
        let seen = |s: Option<&LeaseSpec>, t| Observation::update(None, s, at(t));
        assert_eq!(
            decide(None, &seen(None, 100), "a", at(100)),
            LeaseAction::Acquire
        );
        let mine = spec("a", 90, 15);
        assert_eq!(
            decide(Some(&mine), &seen(Some(&mine), 100), "a", at(100)),
            LeaseAction::Renew
        );
        let theirs = spec("b", 90, 15);
        assert_eq!(
            decide(Some(&theirs), &seen(Some(&theirs), 100), "a", at(100)),
            LeaseAction::Follow { holder: "b".into() }
        );
        let released = spec("", 99, 1);
        assert_eq!(
            decide(Some(&released), &seen(Some(&released), 100), "a", at(100)),
            LeaseAction::Acquire,
            "released"
        );
    }

    /// Expiry is judged on our clock from when we saw the record change, not from the holder's
    /// renewTime: a holder whose clock runs 10 minutes behind ours is not deposed while it
    /// renews, and a lease whose record stops changing lapses a whole duration after we saw it.
    #[test]
    fn expiry_is_judged_on_the_local_clock_from_the_observed_change() {
        // renewTime 600 s in our past (the holder's clock is behind), just observed: follow.
        let skewed = spec("b", 400, 15);
        let seen = Observation::update(None, Some(&skewed), at(1000));
        assert_eq!(
            decide(Some(&skewed), &seen, "a", at(1000)),
            LeaseAction::Follow { holder: "b".into() }
        );
        // The holder renews (renewTime moves, still in our past): observed again, still follow.
        let renewed = spec("b", 405, 15);
        let seen = Observation::update(Some(seen), Some(&renewed), at(1005));
        assert_eq!(seen.seen_at, at(1005));
        assert_eq!(
            decide(Some(&renewed), &seen, "a", at(1019)),
            LeaseAction::Follow { holder: "b".into() }
        );
        // No change for a whole lease by our clock: take it.
        let unchanged = Observation::update(Some(seen), Some(&renewed), at(1020));
        assert_eq!(unchanged.seen_at, at(1005));
        assert_eq!(
            decide(Some(&renewed), &unchanged, "a", at(1020)),
            LeaseAction::Acquire
        );
        // A renewTime in our future (the holder's clock is ahead) does not keep a dead holder
        // in place either.
        let ahead = spec("b", 5000, 15);
        let seen = Observation::update(None, Some(&ahead), at(1000));
        assert_eq!(
            decide(Some(&ahead), &seen, "a", at(1015)),
            LeaseAction::Acquire
        );
    }

    #[test]
    fn controller_runtime_timings() {
        let t = Timings::default();
        assert_eq!(t.lease_duration, Duration::from_secs(15));
        assert_eq!(t.renew_deadline, Duration::from_secs(10));
        assert_eq!(t.retry_period, Duration::from_secs(2));
    }
}
