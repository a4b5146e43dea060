//! EC2NodeClass status (resolved AMIs, subnets, security groups, instance profile, readiness)
//! kept current by re-resolving periodically, a finalizer so a class in use is not deleted from
//! under its nodes, and NodePool status (resources, NodeClassReady, Ready).

use super::Outcome;
use crate::api::{add_finalizer, modify, modify_status, remove_finalizer};
use crate::context::Context;
use crate::events::EventType;
use crate::simulation::nodepool_usage;
use driftwood_api::condition::{Condition, Conditions, STATUS_FALSE, STATUS_TRUE, set_condition};
use driftwood_api::ec2nodeclass::EC2NodeClassStatus;
use driftwood_api::wellknown::{CONDITION_NODECLASS_READY, CONDITION_READY};
use driftwood_api::{EC2NodeClass, NodePool, NodePoolStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::Api;
use std::collections::BTreeMap;

/// The finalizer Karpenter puts on EC2NodeClasses.
pub const FINALIZER_NODECLASS: &str = "karpenter.k8s.aws/termination";

/// Whether two statuses say the same thing (ignoring condition timestamps).
fn same_status(a: &EC2NodeClassStatus, b: &EC2NodeClassStatus) -> bool {
    let strip = |s: &EC2NodeClassStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time = None;
            c.observed_generation = None;
        }
        s.conditions.sort_by(|x, y| x.type_.cmp(&y.type_));
        s
    };
    strip(a) == strip(b)
}

/// Keeps transition times of conditions whose status did not change.
fn carry_transition_times(old: &[Condition], new: &mut [Condition]) {
    for c in new.iter_mut() {
        if let Some(prev) = old
            .iter()
            .find(|p| p.type_ == c.type_ && p.status == c.status)
        {
            c.last_transition_time
                .clone_from(&prev.last_transition_time);
        }
    }
}

pub async fn pass(ctx: Context) -> Outcome {
    let snapshot = ctx.state.snapshot();
    let api: Api<EC2NodeClass> = Api::all(ctx.client.clone());
    for (name, class) in &snapshot.store.nodeclasses {
        if class.metadata.deletion_timestamp.is_some() {
            let users: Vec<&String> = snapshot
                .store
                .nodeclaims
                .iter()
                .filter(|(_, c)| c.spec.node_class_ref.name == *name)
                .map(|(n, _)| n)
                .collect();
            if users.is_empty() {
                if let Err(error) = ctx.nodeclasses.cleanup(class).await {
                    tracing::warn!(ec2nodeclass = %name, %error, "cleanup failed; will retry");
                    continue;
                }
                let _ = modify(&api, name, |c| remove_finalizer(c, FINALIZER_NODECLASS)).await;
            } else {
                ctx.events
                    .publish(
                        class.as_ref(),
                        EventType::Normal,
                        "WaitingOnNodeClaimTermination",
                        &format!(
                            "Waiting on NodeClaim termination for {}",
                            users
                                .iter()
                                .take(5)
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )
                    .await;
            }
            continue;
        }
        if !class
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER_NODECLASS)
        {
            let _ = modify(&api, name, |c| add_finalizer(c, FINALIZER_NODECLASS)).await;
        }
        match ctx.nodeclasses.resolve(class).await {
            Ok(mut status) => {
                let old = class.status.clone().unwrap_or_default();
                carry_transition_times(&old.conditions, &mut status.conditions);
                if !same_status(&old, &status) {
                    let ready = status
                        .conditions
                        .iter()
                        .find(|c| c.type_ == CONDITION_READY)
                        .map(|c| (c.status.clone(), c.message.clone()));
                    let written = modify_status(&api, name, |c| {
                        c.status = Some(status.clone());
                        true
                    })
                    .await;
                    match (written, ready) {
                        (Ok(_), Some((state, message))) => {
                            let amis: Vec<&str> =
                                status.amis.iter().map(|a| a.id.as_str()).collect();
                            tracing::info!(ec2nodeclass = %name, ready = %state, amis = %amis.join(","), message = %message.unwrap_or_default(), "updated ec2nodeclass status");
                        }
                        (Err(error), _) => {
                            tracing::warn!(ec2nodeclass = %name, %error, "could not write status")
                        }
                        _ => {}
                    }
                }
            }
            Err(error) => {
                tracing::warn!(ec2nodeclass = %name, %error, "could not resolve ec2nodeclass")
            }
        }
    }

    report_pods_state(&ctx, &snapshot);

    report_pods_state(&ctx, &snapshot);

    // NodePool status: resources in use and readiness of the class.
    let pools: Api<NodePool> = Api::all(ctx.client.clone());
    for (name, pool) in &snapshot.store.nodepools {
        let usage = nodepool_usage(&snapshot, name);
        let mut resources: BTreeMap<String, Quantity> = usage
            .names()
            .map(|r| {
                (
                    r.to_string(),
                    Quantity(driftwood_scheduling::resources::format_amount(
                        r,
                        usage.get(r),
                    )),
                )
            })
            .collect();
        let node_count = snapshot.nodeclaims_by_nodepool.get(name).map_or(0, |v| {
            v.iter()
                .filter(|n| {
                    snapshot
                        .store
                        .nodeclaims
                        .get(*n)
                        .is_some_and(|c| c.metadata.deletion_timestamp.is_none())
                })
                .count()
        });
        resources.insert("nodes".into(), Quantity(node_count.to_string()));
        let class_name = &pool.spec.template.spec.node_class_ref.name;
        let class_ready = snapshot
            .nodeclass(class_name)
            .is_some_and(|c| c.is_true(CONDITION_READY));
        let current = pool.status.clone().unwrap_or_default();
        let mut status = NodePoolStatus {
            resources,
            ..current.clone()
        };
        let now = ctx.now();
        let (state, reason, message) = if class_ready {
            (STATUS_TRUE, "NodeClassReady", String::new())
        } else {
            (
                STATUS_FALSE,
                "NodeClassNotReady",
                format!("EC2NodeClass {class_name:?} is missing or not ready"),
            )
        };
        set_condition(
            &mut status.conditions,
            CONDITION_NODECLASS_READY,
            state,
            reason,
            &message,
            now.clone(),
            pool.metadata.generation,
        );
        set_condition(
            &mut status.conditions,
            CONDITION_READY,
            state,
            if class_ready { "Ready" } else { reason },
            &message,
            now,
            pool.metadata.generation,
        );
        if status != current {
            let _ = modify_status(&pools, name, |p| {
                p.status = Some(status.clone());
                true
            })
            .await;
        }
    }
    Outcome::idle()
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
