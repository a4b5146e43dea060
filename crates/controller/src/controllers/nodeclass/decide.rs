//! What the nodeclass controller writes, from the cache and this pass's resolution of each
//! EC2NodeClass: finalizers, cleanup of deleted classes no NodeClaim uses any more, class
//! status, and NodePool status (resources in use, NodeClassReady, Ready).

use crate::simulation::nodepool_usage;
use crate::state::Snapshot;
use driftwood_api::EC2NodeClass;
use driftwood_api::NodePoolStatus;
use driftwood_api::condition::{Condition, Conditions, STATUS_FALSE, STATUS_TRUE, set_condition};
use driftwood_api::ec2nodeclass::{ClassRolloutStatus, EC2NodeClassStatus};
use driftwood_api::nodepool::{REASON_STATIC_UNSUPPORTED, STATIC_UNSUPPORTED_MESSAGE};
use driftwood_api::wellknown::{
    ANNOTATION_EC2NODECLASS_HASH, CONDITION_DRIFTED, CONDITION_NODECLASS_READY, CONDITION_READY,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::collections::{BTreeMap, BTreeSet};

/// The finalizer Karpenter puts on EC2NodeClasses.
pub const FINALIZER_NODECLASS: &str = "karpenter.k8s.aws/termination";

/// One write (or cloud call) the controller wants.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Put the termination finalizer on a class.
    AddFinalizer { class: String },
    /// A deleted class no NodeClaim uses: delete its cloud resources, then release it.
    CleanUp { class: String },
    /// A deleted class still in use: say which NodeClaims it waits for (up to five).
    WaitForNodeClaims {
        class: String,
        nodeclaims: Vec<String>,
    },
    /// Write a class's resolved status.
    ClassStatus {
        class: String,
        status: EC2NodeClassStatus,
    },
    /// Write a NodePool's status.
    NodePoolStatus {
        nodepool: String,
        status: Box<NodePoolStatus>,
    },
}

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

/// How the class's nodes stand against it: counted, on its current hash and images, drifted.
pub fn class_rollout(
    snapshot: &Snapshot,
    name: &str,
    class: &EC2NodeClass,
    status: &EC2NodeClassStatus,
) -> ClassRolloutStatus {
    let hash = class
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_EC2NODECLASS_HASH));
    let images: BTreeSet<&str> = status.amis.iter().map(|a| a.id.as_str()).collect();
    let mut out = ClassRolloutStatus::default();
    for claim in
        snapshot.store.nodeclaims.values().filter(|c| {
            c.spec.node_class_ref.name == name && c.metadata.deletion_timestamp.is_none()
        })
    {
        out.nodes += 1;
        let drifted = claim.is_true(CONDITION_DRIFTED);
        out.drifted += i64::from(drifted);
        let on_hash = hash.is_some()
            && claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_EC2NODECLASS_HASH))
                == hash;
        let on_image = claim
            .status
            .as_ref()
            .and_then(|s| s.image_id.as_deref())
            .is_some_and(|i| images.contains(i));
        out.up_to_date += i64::from(on_hash && on_image && !drifted);
    }
    out
}

/// Decides this pass. `resolved` holds each live class's resolution (an error leaves its status
/// alone); `now` stamps condition transitions.
pub fn decide(
    snapshot: &Snapshot,
    resolved: &BTreeMap<String, Result<EC2NodeClassStatus, String>>,
    now: &Time,
) -> Vec<Action> {
    let mut actions = Vec::new();
    for (name, class) in &snapshot.store.nodeclasses {
        if class.metadata.deletion_timestamp.is_some() {
            let users: Vec<String> = snapshot
                .store
                .nodeclaims
                .iter()
                .filter(|(_, c)| c.spec.node_class_ref.name == *name)
                .map(|(n, _)| n.clone())
                .take(5)
                .collect();
            actions.push(if users.is_empty() {
                Action::CleanUp {
                    class: name.clone(),
                }
            } else {
                Action::WaitForNodeClaims {
                    class: name.clone(),
                    nodeclaims: users,
                }
            });
            continue;
        }
        if !class
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER_NODECLASS)
        {
            actions.push(Action::AddFinalizer {
                class: name.clone(),
            });
        }
        // This pass's resolution, else (a failed or skipped one) the status as it is, with the
        // nodes counted again.
        let old = class.status.clone().unwrap_or_default();
        let mut status = match resolved.get(name) {
            Some(Ok(status)) => {
                let mut status = status.clone();
                carry_transition_times(&old.conditions, &mut status.conditions);
                status
            }
            _ if class.status.is_some() => old.clone(),
            _ => continue,
        };
        status.rollout = Some(class_rollout(snapshot, name, class, &status));
        if !same_status(&old, &status) {
            actions.push(Action::ClassStatus {
                class: name.clone(),
                status,
            });
        }
    }
    for (name, pool) in &snapshot.store.nodepools {
        let usage = nodepool_usage(snapshot, name);
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
        let node_count = snapshot.nodepool_usage.get(name).map_or(0, |u| u.claims());
        resources.insert("nodes".into(), Quantity(node_count.to_string()));
        let class_name = &pool.spec.template.spec.node_class_ref.name;
        let class = snapshot.nodeclass(class_name);
        let terminating = class.is_some_and(|c| c.metadata.deletion_timestamp.is_some());
        let class_ready = !terminating && class.is_some_and(|c| c.is_true(CONDITION_READY));
        let current = pool.status.clone().unwrap_or_default();
        let mut status = NodePoolStatus {
            resources,
            nodes: i64::from(node_count),
            ..current.clone()
        };
        let (state, reason, message) = if class_ready {
            (STATUS_TRUE, "NodeClassReady", String::new())
        } else if terminating {
            (
                STATUS_FALSE,
                "NodeClassNotReady",
                format!("EC2NodeClass {class_name:?} is terminating"),
            )
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
        // A static NodePool is left alone: Ready=False says why (driftwood validate says so too).
        let (state, reason, message) = if pool.is_static() {
            (
                STATUS_FALSE,
                REASON_STATIC_UNSUPPORTED,
                STATIC_UNSUPPORTED_MESSAGE.to_string(),
            )
        } else if class_ready {
            (state, "Ready", message)
        } else {
            (state, reason, message)
        };
        set_condition(
            &mut status.conditions,
            CONDITION_READY,
            state,
            reason,
            &message,
            now.clone(),
            pool.metadata.generation,
        );
        if status != current {
            actions.push(Action::NodePoolStatus {
                nodepool: name.clone(),
                status: Box::new(status),
            });
        }
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Store;
    use serde_json::json;
    use std::sync::Arc;

    fn now() -> Time {
        Time("2024-01-01T00:00:00Z".parse().expect("timestamp"))
    }

    fn class(name: &str, extra: serde_json::Value) -> Arc<driftwood_api::EC2NodeClass> {
        let mut class = json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": name, "finalizers": [FINALIZER_NODECLASS]},
            "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}
        });
        json_patch::merge(&mut class, &extra);
        Arc::new(serde_json::from_value(class).expect("class"))
    }

    fn ready_status(at: &str) -> EC2NodeClassStatus {
        serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": at}]}))
            .expect("status")
    }

    fn nodepool() -> Arc<driftwood_api::NodePool> {
        Arc::new(serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default", "generation": 3},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"}, "requirements": []}}}
        })).expect("nodepool"))
    }

    fn nodeclaim(name: &str, deleting: bool) -> Arc<driftwood_api::NodeClaim> {
        let mut meta = json!({"name": name, "labels": {"karpenter.sh/nodepool": "default"}});
        if deleting {
            meta["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        Arc::new(serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta,
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"}, "requirements": [],
                     "resources": {"requests": {"cpu": "1"}}},
            "status": {"capacity": {"cpu": "2", "memory": "4Gi"}}
        })).expect("nodeclaim"))
    }

    fn snapshot(
        class: Arc<driftwood_api::EC2NodeClass>,
        claims: Vec<Arc<driftwood_api::NodeClaim>>,
    ) -> Snapshot {
        let mut snapshot = Snapshot::new(Store::default());
        snapshot.apply("c".into(), class);
        snapshot.apply("default".into(), nodepool());
        for c in claims {
            snapshot.apply(c.metadata.name.clone().unwrap_or_default(), c);
        }
        snapshot
    }

    fn class_actions(actions: &[Action]) -> Vec<&Action> {
        actions
            .iter()
            .filter(|a| !matches!(a, Action::NodePoolStatus { .. }))
            .collect()
    }

    /// A class gets the finalizer; a resolved status is written only when it says something new
    /// (transition times of unchanged conditions are kept, so a re-resolution is no write).
    #[test]
    fn class_status_is_written_only_when_it_changes() {
        let bare = class("c", json!({"metadata": {"finalizers": null}}));
        let resolved = [("c".to_string(), Ok(ready_status("2024-06-01T00:00:00Z")))].into();
        let actions = decide(&snapshot(bare, vec![]), &resolved, &now());
        assert!(
            matches!(
                class_actions(&actions).as_slice(),
                [Action::AddFinalizer { .. }, Action::ClassStatus { .. }]
            ),
            "{actions:?}"
        );

        let current = class(
            "c",
            json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}],
                              "rollout": {"nodes": 0, "upToDate": 0, "drifted": 0}}}),
        );
        let actions = decide(&snapshot(current.clone(), vec![]), &resolved, &now());
        assert!(class_actions(&actions).is_empty(), "{actions:?}");
        // A resolution error changes nothing either.
        let failed = [("c".to_string(), Err("ec2 throttled".to_string()))].into();
        assert!(class_actions(&decide(&snapshot(current, vec![]), &failed, &now())).is_empty());
    }

    /// The class's nodes against it: on its hash and images, drifted, and those being deleted
    /// left out; a change in them is written even when the resolution failed.
    #[test]
    fn class_status_counts_its_nodes_on_its_hash_and_images() {
        let claim = |name: &str, hash: &str, image: &str, drifted: bool, deleting: bool| {
            let mut c = (*nodeclaim(name, deleting)).clone();
            c.metadata.annotations =
                Some([(ANNOTATION_EC2NODECLASS_HASH.to_string(), hash.to_string())].into());
            let status = c.status.get_or_insert_default();
            status.image_id = Some(image.to_string());
            if drifted {
                status.conditions = vec![serde_json::from_value(json!({"type": "Drifted", "status": "True", "reason": "AMIDrift", "message": ""})).unwrap()];
            }
            Arc::new(c)
        };
        let current = class(
            "c",
            json!({"metadata": {"annotations": {"karpenter.k8s.aws/ec2nodeclass-hash": "h2"}},
                   "status": {"amis": [{"id": "ami-new", "requirements": []}],
                              "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}),
        );
        let claims = vec![
            claim("up", "h2", "ami-new", false, false),
            claim("old-hash", "h1", "ami-new", false, false),
            claim("old-image", "h2", "ami-old", true, false),
            claim("drifted", "h2", "ami-new", true, false),
            claim("leaving", "h1", "ami-old", true, true),
        ];
        let failed = [("c".to_string(), Err("ec2 throttled".to_string()))].into();
        let actions = decide(&snapshot(current, claims), &failed, &now());
        let written = actions.iter().find_map(|a| match a {
            Action::ClassStatus { status, .. } => status.rollout.clone(),
            _ => None,
        });
        assert_eq!(
            written,
            Some(ClassRolloutStatus {
                nodes: 4,
                up_to_date: 1,
                drifted: 2,
            }),
            "{actions:?}"
        );
    }

    /// Karpenter (AWS) nodeclass suite "should not delete the EC2NodeClass until all associated
    /// NodeClaims are terminated".
    #[test]
    fn a_deleted_class_waits_for_its_nodeclaims_then_is_cleaned_up() {
        let deleted = class(
            "c",
            json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
        );
        let in_use = decide(
            &snapshot(deleted.clone(), vec![nodeclaim("a", true)]),
            &BTreeMap::new(),
            &now(),
        );
        assert_eq!(
            class_actions(&in_use),
            [&Action::WaitForNodeClaims {
                class: "c".into(),
                nodeclaims: vec!["a".into()]
            }]
        );
        let unused = decide(&snapshot(deleted, vec![]), &BTreeMap::new(), &now());
        assert_eq!(
            class_actions(&unused),
            [&Action::CleanUp { class: "c".into() }]
        );
    }

    /// Karpenter nodepool readiness suite "should have status condition on nodePool as ready if
    /// nodeClass is ready", "… as not ready when nodeClass does not exist" and "should mark
    /// NodeClassReady status condition on nodePool as NotReady if nodeClass is terminating";
    /// counter suite "should set Status.Nodes to 2 when two nodes exist" (a NodeClaim being
    /// deleted no longer counts).
    #[test]
    fn nodepool_status_follows_its_class_and_counts_live_nodeclaims() {
        let cond = |status: &NodePoolStatus, type_: &str| -> Option<Condition> {
            status.conditions.iter().find(|c| c.type_ == type_).cloned()
        };
        let pool_status = |actions: Vec<Action>| -> NodePoolStatus {
            actions
                .into_iter()
                .find_map(|a| match a {
                    Action::NodePoolStatus { status, .. } => Some(*status),
                    _ => None,
                })
                .expect("a nodepool status")
        };
        let ready = class(
            "c",
            json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}),
        );
        let status = pool_status(decide(
            &snapshot(
                ready.clone(),
                vec![
                    nodeclaim("a", false),
                    nodeclaim("b", false),
                    nodeclaim("c-old", true),
                ],
            ),
            &BTreeMap::new(),
            &now(),
        ));
        assert!(
            [CONDITION_READY, CONDITION_NODECLASS_READY]
                .iter()
                .all(|t| cond(&status, t).is_some_and(|c| c.is_true()))
        );
        assert_eq!(status.resources.get("nodes"), Some(&Quantity("2".into())));
        assert_eq!(status.nodes, 2);
        assert_eq!(status.resources.get("cpu"), Some(&Quantity("4".into())));

        let terminating = class(
            "c",
            json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}),
        );
        let status = pool_status(decide(
            &snapshot(terminating, vec![]),
            &BTreeMap::new(),
            &now(),
        ));
        let condition = cond(&status, CONDITION_NODECLASS_READY).expect("condition");
        assert_eq!(condition.status, STATUS_FALSE);
        assert!(
            condition
                .message
                .as_deref()
                .unwrap_or_default()
                .contains("terminating")
        );

        let mut missing = Snapshot::new(Store::default());
        missing.apply("default".into(), nodepool());
        let status = pool_status(decide(&missing, &BTreeMap::new(), &now()));
        assert_eq!(
            cond(&status, CONDITION_READY).map(|c| c.status),
            Some(STATUS_FALSE.to_string())
        );
    }

    /// A static NodePool (`spec.replicas`, Karpenter v1.14 static capacity) is left alone:
    /// Ready=False with reason StaticCapacityNotSupported, even with its class Ready, and its
    /// nodes are still counted.
    #[test]
    fn static_nodepool_is_not_ready_naming_static_capacity() {
        let ready = class(
            "c",
            json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}),
        );
        let mut snapshot = snapshot(ready, vec![nodeclaim("a", false)]);
        let mut pool = (*nodepool()).clone();
        pool.spec.replicas = Some(3);
        snapshot.apply("default".into(), Arc::new(pool));
        let status = decide(&snapshot, &BTreeMap::new(), &now())
            .into_iter()
            .find_map(|a| match a {
                Action::NodePoolStatus { status, .. } => Some(status),
                _ => None,
            })
            .expect("a nodepool status");
        let ready = status
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_READY)
            .expect("Ready");
        assert_eq!(ready.status, STATUS_FALSE);
        assert_eq!(ready.reason.as_deref(), Some(REASON_STATIC_UNSUPPORTED));
        assert!(
            ready
                .message
                .as_deref()
                .is_some_and(|m| m.contains("spec.replicas"))
        );
        assert_eq!(status.nodes, 1);
    }
}
