//! EC2NodeClass status (resolved AMIs, subnets, security groups, instance profile, readiness)
//! kept current by re-resolving periodically, a finalizer so a class in use is not deleted from
//! under its nodes, and NodePool status (resources, NodeClassReady, Ready). [`decide`] plans
//! the writes; [`pass`] resolves the classes, then carries them out.

mod decide;

pub use decide::{Action, FINALIZER_NODECLASS, decide};

use super::Outcome;
use crate::api::{add_finalizer, modify, modify_status, remove_finalizer};
use crate::context::Context;
use crate::events::EventType;
use driftwood_api::nodepool::{REASON_STATIC_UNSUPPORTED, STATIC_UNSUPPORTED_MESSAGE};
use driftwood_api::wellknown::CONDITION_READY;
use driftwood_api::{EC2NodeClass, NodePool};
use kube::api::Api;
use std::collections::BTreeMap;

pub async fn pass(ctx: Context) -> Outcome {
    let snapshot = ctx.state.snapshot();
    let mut resolved = BTreeMap::new();
    let mut errors = 0;
    for (name, class) in &snapshot.store.nodeclasses {
        if class.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let result = ctx.nodeclasses.resolve(class).await;
        if let Err(error) = &result {
            errors += 1;
            tracing::warn!(ec2nodeclass = %name, %error, "could not resolve ec2nodeclass");
        }
        resolved.insert(name.clone(), result);
    }
    let classes: Api<EC2NodeClass> = Api::all(ctx.client.clone());
    let pools: Api<NodePool> = Api::all(ctx.client.clone());
    for action in decide(&snapshot, &resolved, &ctx.now()) {
        match action {
            Action::AddFinalizer { class } => {
                let _ = modify(&classes, &class, |c| add_finalizer(c, FINALIZER_NODECLASS)).await;
            }
            Action::CleanUp { class } => {
                let Some(object) = snapshot.store.nodeclasses.get(&class) else {
                    continue;
                };
                if let Err(error) = ctx.nodeclasses.cleanup(object).await {
                    errors += 1;
                    tracing::warn!(ec2nodeclass = %class, %error, "cleanup failed; will retry");
                    continue;
                }
                let _ = modify(&classes, &class, |c| {
                    remove_finalizer(c, FINALIZER_NODECLASS)
                })
                .await;
            }
            Action::WaitForNodeClaims { class, nodeclaims } => {
                if let Some(object) = snapshot.store.nodeclasses.get(&class) {
                    ctx.events
                        .publish(
                            object.as_ref(),
                            EventType::Normal,
                            "WaitingOnNodeClaimTermination",
                            &format!(
                                "Waiting on NodeClaim termination for {}",
                                nodeclaims.join(", ")
                            ),
                        )
                        .await;
                }
            }
            Action::ClassStatus { class, status } => {
                let ready = status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == CONDITION_READY)
                    .map(|c| (c.status.clone(), c.message.clone()));
                let written = modify_status(&classes, &class, |c| {
                    c.status = Some(status.clone());
                    true
                })
                .await;
                match (written, ready) {
                    (Ok(_), Some((state, message))) => {
                        let amis: Vec<&str> = status.amis.iter().map(|a| a.id.as_str()).collect();
                        tracing::info!(ec2nodeclass = %class, ready = %state, amis = %amis.join(","), message = %message.unwrap_or_default(), "updated ec2nodeclass status");
                    }
                    (Err(error), _) => {
                        errors += 1;
                        tracing::warn!(ec2nodeclass = %class, %error, "could not write status")
                    }
                    _ => {}
                }
            }
            Action::NodePoolStatus { nodepool, status } => {
                let written = modify_status(&pools, &nodepool, |p| {
                    p.status = Some(status.clone());
                    true
                })
                .await;
                if written.is_ok()
                    && let Some(pool) = snapshot.store.nodepools.get(&nodepool)
                    && became_static_unsupported(pool, &status)
                {
                    ctx.events
                        .publish(
                            pool.as_ref(),
                            EventType::Warning,
                            REASON_STATIC_UNSUPPORTED,
                            STATIC_UNSUPPORTED_MESSAGE,
                        )
                        .await;
                }
            }
        }
    }
    report_pods_state(&ctx, &snapshot);
    Outcome::idle().with_errors(errors)
}

/// Whether `status` newly marks `pool` Ready=False for its static capacity (once per change).
fn became_static_unsupported(pool: &NodePool, status: &driftwood_api::NodePoolStatus) -> bool {
    let static_reason = |conditions: &[driftwood_api::Condition]| {
        conditions.iter().any(|c| {
            c.type_ == CONDITION_READY && c.reason.as_deref() == Some(REASON_STATIC_UNSUPPORTED)
        })
    };
    let before = pool
        .status
        .as_ref()
        .is_some_and(|s| static_reason(&s.conditions));
    !before && static_reason(&status.conditions)
}

/// karpenter_pods_state: one series per pod with its node, NodePool and phase.
fn report_pods_state(ctx: &Context, snapshot: &crate::state::Snapshot) {
    ctx.metrics.pods_state.clear();
    for pod in snapshot.store.pods.values() {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let nodepool = snapshot
            .store
            .nodes
            .get(&node)
            .and_then(|n| {
                n.metadata
                    .labels
                    .as_ref()?
                    .get(driftwood_api::wellknown::LABEL_NODEPOOL)
                    .cloned()
            })
            .unwrap_or_default();
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".into());
        crate::metrics::Metrics::set(
            &ctx.metrics.pods_state,
            &[
                ("name", pod.metadata.name.as_deref().unwrap_or_default()),
                (
                    "namespace",
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                ),
                ("node", &node),
                ("nodepool", &nodepool),
                ("phase", &phase),
            ],
            1,
        );
    }
}
