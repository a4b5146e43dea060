//! The drift marker: sets and clears Drifted on NodeClaims — NodePoolDrifted,
//! RequirementsDrifted, InstanceTypeNotFound, then the provider's reasons — naming what moved.
//! A check that cannot be judged now (a provider error, an unresolved class) changes nothing.

use super::Outcome;
use crate::api::{clear_claim_condition, modify_status, nodeclaims, set_claim_condition};
use crate::context::Context;
use crate::events::EventType;
use crate::metrics::Metrics;
use driftwood_api::condition::STATUS_TRUE;
use driftwood_api::hash::nodepool_hashes;
use driftwood_api::wellknown::{CONDITION_DRIFTED, LABEL_NODEPOOL};
use driftwood_api::{NodeClaim, NodePool};
use driftwood_disruption::drift::{
    DriftFinding, DriftMarking, INSTANCE_TYPE_CHECK_MIN_AGE_SECONDS,
    INSTANCE_TYPE_CHECK_TTL_SECONDS, Verdict, core_drift, drift_marking, instance_type_drift,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// NodeClaims (by uid) whose instance type was found, and when: they are not checked again for
/// InstanceTypeNotFound until the TTL passes (a found drift is never remembered).
#[derive(Clone, Default)]
pub struct InstanceTypeChecks(Arc<Mutex<HashMap<String, i64>>>);

impl InstanceTypeChecks {
    fn fresh(&self, uid: &str, now: i64) -> bool {
        self.0
            .lock()
            .ok()
            .and_then(|m| m.get(uid).copied())
            .is_some_and(|at| now - at < INSTANCE_TYPE_CHECK_TTL_SECONDS)
    }

    fn remember(&self, uid: &str, now: i64) {
        if let Ok(mut m) = self.0.lock() {
            m.retain(|_, at| now - *at < INSTANCE_TYPE_CHECK_TTL_SECONDS);
            m.insert(uid.to_string(), now);
        }
    }
}

/// InstanceTypeNotFound for `claim`, when it is due: only a NodeClaim older than an hour, not
/// found fine within the last 30 minutes. A failure to list instance types is `Unknown`.
async fn instance_type_verdict(
    ctx: &Context,
    checks: &InstanceTypeChecks,
    claim: &NodeClaim,
    pool: &NodePool,
) -> Verdict {
    let now = ctx.now_seconds();
    let created = claim
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0.as_second());
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    if now - created <= INSTANCE_TYPE_CHECK_MIN_AGE_SECONDS || checks.fresh(&uid, now) {
        return Verdict::NotDrifted;
    }
    match ctx.cloud.instance_types(pool).await {
        Ok(types) => {
            let types: Vec<_> = types.iter().map(|t| t.to_scheduling()).collect();
            let verdict = Verdict::from_finding(instance_type_drift(claim, &types));
            if verdict == Verdict::NotDrifted {
                checks.remember(&uid, now);
            }
            verdict
        }
        Err(error) => Verdict::Unknown(format!("listing instance types: {error}")),
    }
}

/// One pass over every NodeClaim.
pub async fn pass(ctx: Context, checks: InstanceTypeChecks) -> Outcome {
    let snapshot = ctx.state.snapshot();
    let api = nodeclaims(&ctx.client);
    for (name, claim) in &snapshot.store.nodeclaims {
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let pool_name = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_NODEPOOL));
        let Some(pool) = pool_name.and_then(|p| snapshot.nodepool(p)) else {
            continue;
        };
        let verdict = if ctx.settings.feature_gates.drift {
            let instance_type = instance_type_verdict(&ctx, &checks, claim, pool).await;
            match core_drift(claim, pool, &nodepool_hashes(pool), instance_type) {
                // Nothing before the provider decided: ask it.
                Verdict::NotDrifted => match ctx.cloud.is_drifted(claim).await {
                    Ok(drift) => Verdict::from_finding(drift.map(|d| DriftFinding {
                        reason: d.reason().to_string(),
                        message: d.message(),
                    })),
                    Err(error) => Verdict::Unknown(error.to_string()),
                },
                decided => decided,
            }
        } else {
            Verdict::NotDrifted
        };
        if let Verdict::Unknown(why) = &verdict {
            tracing::debug!(nodeclaim = %name, %why, "drift cannot be judged now; Drifted left as it is");
        }
        let marking = drift_marking(claim, &verdict, ctx.settings.feature_gates.drift);
        let now = ctx.now();
        let written = match &marking {
            DriftMarking::Keep => continue,
            DriftMarking::Set(f) => {
                modify_status(&api, name, |c| {
                    set_claim_condition(
                        c,
                        CONDITION_DRIFTED,
                        STATUS_TRUE,
                        &f.reason,
                        &f.message,
                        now.clone(),
                    )
                })
                .await
            }
            DriftMarking::Clear => {
                modify_status(&api, name, |c| clear_claim_condition(c, CONDITION_DRIFTED)).await
            }
        };
        match (written, marking) {
            (Ok(Some(updated)), DriftMarking::Set(f)) => {
                let pool = pool_name.map_or("", String::as_str);
                tracing::info!(nodeclaim = %name, nodepool = %pool, reason = %f.reason, message = %f.message, "marked nodeclaim as drifted");
                Metrics::inc(
                    &ctx.metrics.nodeclaims_drifted,
                    &[("type", &f.reason), ("nodepool", pool)],
                );
                ctx.events
                    .publish(
                        &updated,
                        EventType::Normal,
                        "Drifted",
                        &format!("{}: {}", f.reason, f.message),
                    )
                    .await;
            }
            (Ok(Some(_)), DriftMarking::Clear) => {
                tracing::info!(nodeclaim = %name, "nodeclaim is no longer drifted")
            }
            (Err(error), _) => {
                tracing::warn!(nodeclaim = %name, %error, "could not update Drifted")
            }
            _ => {}
        }
    }
    Outcome::idle()
}
