//! EC2NodeClass status (resolved AMIs, subnets, security groups, instance profile, readiness)
//! kept current by re-resolving periodically, a finalizer so a class in use is not deleted from
//! under its nodes, and NodePool status (resources, NodeClassReady, Ready). [`decide`] plans
//! the writes; [`pass`] resolves the classes, then carries them out.

mod decide;
pub mod refresh;

pub use decide::{Action, FINALIZER_NODECLASS, decide};
pub use refresh::{REFRESH, Resolution};

use super::Outcome;
use crate::api::{add_finalizer, modify, modify_status, remove_finalizer};
use crate::context::Context;
use crate::events::EventType;
use driftwood_api::condition::Conditions as _;
use driftwood_api::nodepool::{REASON_STATIC_UNSUPPORTED, STATIC_UNSUPPORTED_MESSAGE};
use driftwood_api::wellknown::CONDITION_READY;
use driftwood_api::{EC2NodeClass, NodePool};
use kube::api::Api;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The controller's name in logs, metrics and the per-object retries.
const CONTROLLER: &str = "nodeclass";

/// The nodeclass controller: remembers each class's last resolution between passes, so that
/// the cloud is asked again only when [`refresh::due`] says so. Cheap to clone.
#[derive(Clone, Default)]
pub struct NodeClassController {
    resolutions: Arc<tokio::sync::Mutex<BTreeMap<String, Resolution>>>,
}

impl NodeClassController {
    pub async fn pass(&self, ctx: Context) -> Outcome {
        let mut resolutions = self.resolutions.lock().await;
        pass(&ctx, &mut resolutions).await
    }
}

/// What wakes the nodeclass controller before its period: any change to an EC2NodeClass or a
/// NodePool (its resourceVersion: a status written changes what NodePool status says), or to
/// what NodePool status counts (NodeClaims created, launched, deleted; Nodes), or to what the
/// classes' rollout counts count (drift marked, images) — not pod events.
pub fn wake_signature(snapshot: &crate::state::Snapshot) -> Vec<u64> {
    let mut signature = Vec::with_capacity(2 * snapshot.store.nodeclasses.len() + 4);
    let version = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        driftwood_api::hash::fnv1a64(
            format!(
                "{}/{}/{}",
                meta.name.as_deref().unwrap_or_default(),
                meta.uid.as_deref().unwrap_or_default(),
                meta.resource_version.as_deref().unwrap_or_default(),
            )
            .as_bytes(),
        )
    };
    signature.extend(
        snapshot
            .store
            .nodeclasses
            .values()
            .map(|c| version(&c.metadata)),
    );
    signature.extend(
        snapshot
            .store
            .nodepools
            .values()
            .map(|p| version(&p.metadata)),
    );
    let claims = &snapshot.store.nodeclaims;
    signature.push(claims.len() as u64);
    signature.push(
        claims
            .values()
            .filter(|c| c.metadata.deletion_timestamp.is_some())
            .count() as u64,
    );
    signature.push(
        claims
            .values()
            .filter(|c| c.status.as_ref().is_some_and(|s| !s.capacity.is_empty()))
            .count() as u64,
    );
    signature.push(snapshot.store.nodes.len() as u64);
    // What the classes' rollout counts count: drift marked or cleared, images launched on.
    signature.push(
        claims
            .values()
            .filter(|c| c.is_true(driftwood_api::wellknown::CONDITION_DRIFTED))
            .count() as u64,
    );
    signature.push(claims.values().fold(0u64, |acc, c| {
        let image = c
            .status
            .as_ref()
            .and_then(|s| s.image_id.as_deref())
            .unwrap_or_default();
        acc.wrapping_add(driftwood_api::hash::fnv1a64(image.as_bytes()))
    }));
    signature
}

async fn pass(ctx: &Context, resolutions: &mut BTreeMap<String, Resolution>) -> Outcome {
    let snapshot = ctx.state.snapshot();
    let now = ctx.clock.now();
    let mut errors = 0;
    resolutions.retain(|name, _| snapshot.store.nodeclasses.contains_key(name));
    for (name, class) in &snapshot.store.nodeclasses {
        if class.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let object = format!("ec2nodeclass/{name}");
        if !refresh::due(class, resolutions.get(name), now)
            || !ctx.retries.ready(CONTROLLER, &object, now)
        {
            continue;
        }
        let result = ctx.nodeclasses.resolve(class).await;
        if ctx.retries.record(
            &ctx.metrics,
            CONTROLLER,
            &object,
            "resolve",
            now,
            &result.as_ref().map(|_| ()),
        ) {
            errors += 1;
        }
        resolutions.insert(name.clone(), Resolution::of(class, now, result));
    }
    let resolved: BTreeMap<String, Result<_, String>> = resolutions
        .iter()
        .map(|(name, r)| (name.clone(), r.result.clone()))
        .collect();
    let classes: Api<EC2NodeClass> = Api::all(ctx.client.clone());
    let pools: Api<NodePool> = Api::all(ctx.client.clone());
    for action in decide(&snapshot, &resolved, &ctx.now()) {
        let (object, step, result): (String, &str, Result<(), String>) = match action {
            Action::AddFinalizer { class } => {
                let written = modify(&ctx.state, &classes, &class, |c| {
                    add_finalizer(c, FINALIZER_NODECLASS)
                })
                .await;
                (
                    format!("ec2nodeclass/{class}"),
                    "add-finalizer",
                    written.map(|_| ()).map_err(|e| e.to_string()),
                )
            }
            Action::CleanUp { class } => {
                let Some(object) = snapshot.store.nodeclasses.get(&class) else {
                    continue;
                };
                let key = format!("ec2nodeclass/{class}");
                if !ctx.retries.ready(CONTROLLER, &key, now) {
                    continue;
                }
                let result = match ctx.nodeclasses.cleanup(object).await {
                    Err(error) => Err(error),
                    Ok(()) => modify(&ctx.state, &classes, &class, |c| {
                        remove_finalizer(c, FINALIZER_NODECLASS)
                    })
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                };
                (key, "cleanup", result)
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
                continue;
            }
            Action::ClassStatus { class, status } => {
                let ready = status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == CONDITION_READY)
                    .map(|c| (c.status.clone(), c.message.clone()));
                let written = modify_status(&ctx.state, &classes, &class, |c| {
                    c.status = Some(status.clone());
                    true
                })
                .await;
                if let (Ok(_), Some((state, message))) = (&written, ready) {
                    let amis: Vec<&str> = status.amis.iter().map(|a| a.id.as_str()).collect();
                    tracing::info!(ec2nodeclass = %class, ready = %state, amis = %amis.join(","), detail = %message.unwrap_or_default(), "updated ec2nodeclass status");
                }
                (
                    format!("ec2nodeclass/{class}"),
                    "write-status",
                    written.map(|_| ()).map_err(|e| e.to_string()),
                )
            }
            Action::NodePoolStatus { nodepool, status } => {
                // Only the fields this controller owns: the disruption loop writes the rollout
                // (`status.rollout`, RolloutComplete) into the same status.
                let written = modify_status(&ctx.state, &pools, &nodepool, |p| {
                    let current = p.status.get_or_insert_with(Default::default);
                    let before = current.clone();
                    current.resources = status.resources.clone();
                    current.nodes = status.nodes;
                    current.node_class_observed_generation = status.node_class_observed_generation;
                    let owned_types = [
                        driftwood_api::wellknown::CONDITION_NODECLASS_READY,
                        driftwood_api::wellknown::CONDITION_READY,
                    ];
                    let owned = status
                        .conditions
                        .iter()
                        .filter(|c| owned_types.contains(&c.type_.as_str()));
                    for owned in owned {
                        match current
                            .conditions
                            .iter_mut()
                            .find(|c| c.type_ == owned.type_)
                        {
                            Some(c) => *c = owned.clone(),
                            None => current.conditions.push(owned.clone()),
                        }
                    }
                    *current != before
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
                (
                    format!("nodepool/{nodepool}"),
                    "write-status",
                    written.map(|_| ()).map_err(|e| e.to_string()),
                )
            }
        };
        if ctx
            .retries
            .record(&ctx.metrics, CONTROLLER, &object, step, now, &result)
        {
            errors += 1;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Snapshot, Store};
    use serde_json::json;

    /// The nodeclass controller used to wake (and resolve every class against the cloud) on any
    /// change in the cluster, pod events included; now pods do not wake it, classes, NodePools
    /// and NodeClaims do.
    #[test]
    fn pod_events_do_not_wake_the_nodeclass_controller() {
        let mut snapshot = Snapshot::new(Store::default());
        let class: EC2NodeClass = serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default", "uid": "u1", "resourceVersion": "1"},
            "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                     "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}
        }))
        .expect("class");
        snapshot.apply("default".into(), Arc::new(class.clone()));
        let seen = wake_signature(&snapshot);
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c"}]}
        }))
        .expect("pod");
        snapshot.apply("default/p".into(), Arc::new(pod));
        assert_eq!(wake_signature(&snapshot), seen, "a pod event");
        let mut changed = class;
        changed.metadata.resource_version = Some("2".into());
        snapshot.apply("default".into(), Arc::new(changed));
        assert_ne!(wake_signature(&snapshot), seen, "the class changed");
        let claim: driftwood_api::NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "default"}, "requirements": []}
        }))
        .expect("nodeclaim");
        let before = wake_signature(&snapshot);
        snapshot.apply("c".into(), Arc::new(claim));
        assert_ne!(wake_signature(&snapshot), before, "a NodeClaim created");
    }
}
