//! Leader election on a coordination.k8s.io/v1 Lease: only the leader runs the controllers; a
//! standby takes over when the lease is not renewed within its duration.

use crate::api::{is_conflict, is_not_found};
use driftwood_cloud::Clock;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use std::sync::Arc;
use std::time::Duration;

/// The Lease Karpenter uses.
pub const LEASE_NAME: &str = "karpenter-leader-election";

/// What to do with the lease now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseAction {
    /// Nobody holds it (or the holder let it lapse): take it.
    Acquire,
    /// We hold it: renew.
    Renew,
    /// Someone else holds a live lease.
    Follow { holder: String },
}

/// Decides from the lease as read (None: absent) at `now` (UTC seconds).
pub fn decide(lease: Option<&LeaseSpec>, identity: &str, now: i64) -> LeaseAction {
    let Some(spec) = lease else {
        return LeaseAction::Acquire;
    };
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder == identity {
        return LeaseAction::Renew;
    }
    let renewed = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| t.0.as_second());
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    match renewed {
        Some(at) if !holder.is_empty() && now < at + duration => LeaseAction::Follow { holder },
        _ => LeaseAction::Acquire,
    }
}

/// Whether a leader whose renewal just failed (an API error, not a lost race) keeps leading: yes
/// while its last successful renewal is younger than the renew deadline, two thirds of the
/// lease (controller-runtime's 10 s of 15 s). One failed write then does not restart the
/// controllers, and the leader still steps down before its lease can lapse and a standby take
/// over.
pub fn keeps_leading(last_renewed: Option<i64>, now: i64, lease_duration: Duration) -> bool {
    let deadline = i64::try_from(lease_duration.as_secs() * 2 / 3).unwrap_or(i64::MAX);
    last_renewed.is_some_and(|at| now - at < deadline)
}

/// Campaigns for the lease: `on_change(true)` when this replica becomes leader,
/// `on_change(false)` when it loses the lease. Runs until aborted.
pub async fn run_election(
    client: Client,
    namespace: &str,
    identity: String,
    clock: Arc<dyn Clock>,
    lease_duration: Duration,
    mut on_change: impl FnMut(bool),
) {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let mut leading = false;
    let mut last_renewed: Option<i64> = None;
    let retry = lease_duration / 3;
    loop {
        let now = clock.now();
        let current = match api.get(LEASE_NAME).await {
            Ok(lease) => Some(lease),
            Err(e) if is_not_found(&e) => None,
            Err(error) => {
                tracing::warn!(lease = LEASE_NAME, %error, "reading leader lease failed");
                if leading && !keeps_leading(last_renewed, now.as_second(), lease_duration) {
                    leading = false;
                    tracing::info!(identity = %identity, "lost leader lease (renew deadline passed)");
                    on_change(false);
                }
                tokio::time::sleep(retry).await;
                continue;
            }
        };
        let action = decide(
            current.as_ref().and_then(|l| l.spec.as_ref()),
            &identity,
            now.as_second(),
        );
        let won = match action {
            LeaseAction::Follow { .. } => false,
            LeaseAction::Acquire | LeaseAction::Renew => {
                let mut spec = current
                    .as_ref()
                    .and_then(|l| l.spec.clone())
                    .unwrap_or_default();
                if action == LeaseAction::Acquire {
                    spec.acquire_time = Some(MicroTime(now));
                    spec.lease_transitions =
                        Some(spec.lease_transitions.unwrap_or(0) + i32::from(current.is_some()));
                }
                spec.holder_identity = Some(identity.clone());
                spec.renew_time = Some(MicroTime(now));
                spec.lease_duration_seconds =
                    Some(i32::try_from(lease_duration.as_secs()).unwrap_or(15));
                let result = match current {
                    Some(mut lease) => {
                        lease.spec = Some(spec);
                        api.replace(LEASE_NAME, &PostParams::default(), &lease)
                            .await
                    }
                    None => {
                        let lease = Lease {
                            metadata: ObjectMeta {
                                name: Some(LEASE_NAME.into()),
                                namespace: Some(namespace.into()),
                                ..Default::default()
                            },
                            spec: Some(spec),
                        };
                        api.create(&PostParams::default(), &lease).await
                    }
                };
                match result {
                    Ok(_) => {
                        last_renewed = Some(now.as_second());
                        true
                    }
                    Err(e) if is_conflict(&e) => false,
                    Err(error) => {
                        tracing::warn!(lease = LEASE_NAME, %error, "writing leader lease failed");
                        leading && keeps_leading(last_renewed, now.as_second(), lease_duration)
                    }
                }
            }
        };
        if won != leading {
            leading = won;
            if won {
                tracing::info!(identity = %identity, "acquired leader lease");
            } else {
                tracing::info!(identity = %identity, "lost leader lease");
            }
            on_change(won);
        }
        tokio::time::sleep(retry).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by `driftwood chaos`: one 429 on a renewal made the leader step down and restart
    /// its controllers; controller-runtime keeps leading until its renew deadline.
    #[test]
    fn a_failed_renewal_keeps_leading_until_the_renew_deadline() {
        let lease = Duration::from_secs(15);
        assert!(keeps_leading(Some(100), 105, lease));
        assert!(keeps_leading(Some(100), 109, lease));
        assert!(!keeps_leading(Some(100), 110, lease));
        assert!(!keeps_leading(None, 100, lease));
    }

    fn spec(holder: &str, renewed: i64, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            renew_time: Some(MicroTime(
                k8s_openapi::jiff::Timestamp::from_second(renewed).unwrap(),
            )),
            lease_duration_seconds: Some(duration),
            ..Default::default()
        }
    }

    #[test]
    fn decisions() {
        assert_eq!(decide(None, "a", 100), LeaseAction::Acquire);
        assert_eq!(
            decide(Some(&spec("a", 90, 15)), "a", 100),
            LeaseAction::Renew
        );
        assert_eq!(
            decide(Some(&spec("b", 90, 15)), "a", 100),
            LeaseAction::Follow { holder: "b".into() }
        );
        assert_eq!(
            decide(Some(&spec("b", 80, 15)), "a", 100),
            LeaseAction::Acquire,
            "lapsed"
        );
        assert_eq!(
            decide(Some(&spec("", 99, 15)), "a", 100),
            LeaseAction::Acquire,
            "released"
        );
    }
}
