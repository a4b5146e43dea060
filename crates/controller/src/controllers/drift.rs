//! The drift marker: sets and clears Drifted on NodeClaims — NodePoolDrifted,
//! RequirementsDrifted, then the provider's reasons — naming what moved.

use super::Outcome;
use crate::api::{clear_claim_condition, modify_status, nodeclaims, set_claim_condition};
use crate::context::Context;
use crate::events::EventType;
use crate::metrics::Metrics;
use driftwood_api::condition::STATUS_TRUE;
use driftwood_api::hash::nodepool_hashes;
use driftwood_api::wellknown::{CONDITION_DRIFTED, LABEL_NODEPOOL};
use driftwood_disruption::drift::{DriftFinding, DriftMarking, drift_marking, find_drift};

/// One pass over every NodeClaim.
pub async fn pass(ctx: Context) -> Outcome {
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
        let finding = if ctx.settings.feature_gates.drift {
            let provider = match ctx.cloud.is_drifted(claim).await {
                Ok(drift) => drift.map(|d| DriftFinding {
                    reason: d.reason().to_string(),
                    message: d.message(),
                }),
                Err(error) => {
                    tracing::debug!(nodeclaim = %name, %error, "provider drift check failed");
                    None
                }
            };
            find_drift(claim, pool, &nodepool_hashes(pool), provider)
        } else {
            None
        };
        let marking = drift_marking(claim, finding, ctx.settings.feature_gates.drift);
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
