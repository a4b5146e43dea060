//! The drift marker: sets and clears Drifted on NodeClaims — NodePoolDrifted,
//! RequirementsDrifted, InstanceTypeNotFound, then the provider's reasons — naming what moved.
//! A check that cannot be judged now (a provider error, an unresolved class) changes nothing.

mod decide;
mod memory;

pub use decide::{Candidate, Mark, candidates, candidates_named, decide};
pub use memory::DriftMemory;

use super::Outcome;
use crate::api::{clear_claim_condition, modify_status, nodeclaims, set_claim_condition};
use crate::context::Context;
use crate::events::EventType;
use crate::metrics::Metrics;
use crate::state::{Kind, Snapshot, read_keys};
use driftwood_api::condition::STATUS_TRUE;
use driftwood_api::hash::{TemplateHashes, nodepool_hashes};
use driftwood_api::wellknown::CONDITION_DRIFTED;
use driftwood_api::{NodeClaim, NodePool};
use driftwood_disruption::drift::{
    DriftFinding, INSTANCE_TYPE_CHECK_MIN_AGE_SECONDS, INSTANCE_TYPE_CHECK_TTL_SECONDS, Verdict,
    core_drift, instance_type_drift,
};
use futures::StreamExt as _;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memory::{ReadKeys, Scope, Versions};

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
            let verdict = Verdict::from_finding(instance_type_drift(claim, &types));
            if verdict == Verdict::NotDrifted {
                checks.remember(&uid, now);
            }
            verdict
        }
        Err(error) => Verdict::Unknown(format!("listing instance types: {error}")),
    }
}

/// Judges one NodeClaim: NodePoolDrifted, RequirementsDrifted and InstanceTypeNotFound first;
/// only when none of those holds is the cloud provider asked.
async fn judge(
    ctx: &Context,
    checks: &InstanceTypeChecks,
    claim: &NodeClaim,
    pool: &NodePool,
    pool_hashes: &TemplateHashes,
) -> Verdict {
    let instance_type = instance_type_verdict(ctx, checks, claim, pool).await;
    match core_drift(claim, pool, pool_hashes, instance_type) {
        Verdict::NotDrifted => match ctx.cloud.is_drifted(claim).await {
            Ok(drift) => Verdict::from_finding(drift.map(|d| DriftFinding {
                reason: d.reason,
                message: d.message,
            })),
            Err(error) => Verdict::Unknown(error.to_string()),
        },
        decided => decided,
    }
}

/// What wakes the drift marker before its period: a change to a NodeClaim, or to what a
/// verdict reads of a NodePool or an EC2NodeClass (not the status counts driftwood rewrites
/// as the fleet changes; [`read_keys`]). O(NodePools + classes), and never a pod event: during
/// a rollout pods change many times a second.
pub fn wake_signature(snapshot: &Snapshot) -> Vec<u64> {
    let mut signature = snapshot.changes_of_kinds(&[Kind::NodeClaim]);
    signature.extend(
        snapshot
            .store
            .nodepools
            .values()
            .map(|p| read_keys::nodepool_spec_key(p)),
    );
    signature.extend(
        snapshot
            .store
            .nodeclasses
            .values()
            .map(|c| read_keys::nodeclass_resolved_key(c)),
    );
    signature
}

/// How soon a pass that could not judge a NodeClaim (a provider error, an instance not listed
/// yet) runs again for it.
const UNKNOWN_AGAIN_AFTER: Duration = Duration::from_secs(5);

/// One pass: judge the candidates whose NodeClaim, NodePool or EC2NodeClass changed since
/// their last verdict (every candidate once per drift interval), decide the marks, write them.
/// Between full passes, only the NodeClaims changed since the last pass are looked at
/// ([`memory::Scope`]).
pub async fn pass(ctx: Context, checks: InstanceTypeChecks, memory: DriftMemory) -> Outcome {
    let snapshot = ctx.state.snapshot();
    let enabled = ctx.settings.feature_gates.drift;
    let interval = i64::try_from(ctx.settings.drift_interval.as_secs()).unwrap_or(i64::MAX);
    let mut remembered = memory.start(
        ctx.now_seconds(),
        interval,
        &snapshot.tracked::<NodeClaim>(),
        ReadKeys::of(&snapshot),
        enabled,
    );
    let looked_at = match remembered.scope() {
        Scope::Only(names) => candidates_named(&snapshot, names),
        Scope::All | Scope::Everything => candidates(&snapshot),
    };
    let mut verdicts = BTreeMap::new();
    let mut again = BTreeSet::new();
    if enabled {
        // Each NodePool's template is hashed once per pass, not once per NodeClaim.
        let mut pool_hashes: BTreeMap<&str, TemplateHashes> = BTreeMap::new();
        for candidate in &looked_at {
            let uid = candidate.claim.metadata.uid.as_deref().unwrap_or_default();
            let versions = Versions::of(candidate, remembered.keys());
            let verdict = match remembered.reusable(uid, &versions) {
                Some(verdict) => verdict,
                None => {
                    let pool_name = candidate
                        .nodepool
                        .metadata
                        .name
                        .as_deref()
                        .unwrap_or_default();
                    let hashes = pool_hashes
                        .entry(pool_name)
                        .or_insert_with(|| nodepool_hashes(candidate.nodepool));
                    judge(&ctx, &checks, candidate.claim, candidate.nodepool, hashes).await
                }
            };
            if let Verdict::Unknown(why) = &verdict {
                tracing::debug!(nodeclaim = %candidate.name, %why, "drift cannot be judged now; Drifted left as it is");
                again.insert(candidate.name.to_string());
            }
            remembered.record(uid, versions, &verdict);
            verdicts.insert(candidate.name.to_string(), verdict);
        }
    }
    let unknown = !again.is_empty();
    let api = nodeclaims(&ctx.client);
    // Each mark is one NodeClaim's status: they go to the API server together, a few dozen at
    // a time (one after another, marking 1,000 NodeClaims at a managed control plane's ~10 ms
    // a write took 16 s, and the first disruption pass saw a sixteenth of them).
    let marks = decide(&looked_at, &verdicts, enabled);
    let names: Vec<String> = marks.iter().map(|m| m.nodeclaim().to_string()).collect();
    let failed: Vec<bool> =
        futures::stream::iter(marks.into_iter().map(|m| write_mark(&ctx, &api, m)))
            .buffered(MARKS_AT_ONCE)
            .collect()
            .await;
    let mut errors = 0u32;
    for (name, failed) in names.into_iter().zip(failed) {
        if failed {
            errors = errors.saturating_add(1);
            again.insert(name);
        }
    }
    remembered.finish(again);
    let outcome = if unknown {
        Outcome::again_in(UNKNOWN_AGAIN_AFTER)
    } else {
        Outcome::idle()
    };
    outcome.with_errors(errors)
}

/// How many Drifted marks are written at once.
const MARKS_AT_ONCE: usize = 32;

/// Writes one mark; returns whether it failed (logged with its NodeClaim, redone next pass).
async fn write_mark(ctx: &Context, api: &kube::Api<NodeClaim>, mark: Mark) -> bool {
    let now = ctx.now();
    match mark {
        Mark::Set {
            nodeclaim,
            nodepool,
            finding,
        } => {
            let written = modify_status(&ctx.state, api, &nodeclaim, |c| {
                set_claim_condition(
                    c,
                    CONDITION_DRIFTED,
                    STATUS_TRUE,
                    &finding.reason,
                    &finding.message,
                    now.clone(),
                )
            })
            .await;
            match written {
                Ok(Some(updated)) => {
                    tracing::info!(%nodeclaim, %nodepool, reason = %finding.reason, detail = %finding.message, "marked nodeclaim as drifted");
                    Metrics::inc(
                        &ctx.metrics.nodeclaims_drifted,
                        &[("type", &finding.reason), ("nodepool", &nodepool)],
                    );
                    ctx.events
                        .publish(
                            &updated,
                            EventType::Normal,
                            "Drifted",
                            &format!("{}: {}", finding.reason, finding.message),
                        )
                        .await;
                    false
                }
                Ok(None) => false,
                Err(error) => {
                    tracing::warn!(%nodeclaim, %error, "could not update Drifted");
                    true
                }
            }
        }
        Mark::Clear { nodeclaim } => {
            match modify_status(&ctx.state, api, &nodeclaim, |c| {
                clear_claim_condition(c, CONDITION_DRIFTED)
            })
            .await
            {
                Ok(Some(_)) => {
                    tracing::info!(%nodeclaim, "nodeclaim is no longer drifted");
                    false
                }
                Ok(None) => false,
                Err(error) => {
                    tracing::warn!(%nodeclaim, %error, "could not update Drifted");
                    true
                }
            }
        }
    }
}
