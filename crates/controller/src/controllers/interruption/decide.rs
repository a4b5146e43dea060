//! What the interruption controllers do with a batch of messages, or with the instances EC2
//! reports unhealthy, decided from the cache: for each message (each instance's failed
//! category), the NodeClaims of the instances it names (found by instance ID), the event each
//! gets, the spot offering to mark unavailable, whether to set the termination deadline to now
//! and whether to delete the NodeClaim (cordon, drain, terminate) — as Karpenter's AWS
//! interruption and instance status controllers do.

use crate::state::Snapshot;
use driftwood_api::lookup::ObjectLookups;
use driftwood_api::wellknown::ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP;
use driftwood_api::wellknown::{LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_TOPOLOGY_ZONE};
use driftwood_aws::interruption::instance_status::{Category, UnhealthyInstance};
use driftwood_aws::interruption::{Action, Kind, Received};
use driftwood_cloud::OfferingKey;
use jiff::Timestamp;

/// What to do for one NodeClaim a message is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimAction {
    pub nodeclaim: String,
    /// Its Node, if it registered one.
    pub node: Option<String>,
    pub nodepool: String,
    pub capacity_type: String,
    /// The spot offering a spot interruption warning takes out of use for a while.
    pub unavailable: Option<OfferingKey>,
    /// Set the NodeClaim's termination deadline to now before deleting it, so the drain does
    /// not wait on PodDisruptionBudgets (a failed status check; not when already set).
    pub deadline_now: bool,
    /// Delete the NodeClaim (the kind asks for it, and it is not being deleted already).
    pub delete: bool,
}

/// What to do for one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessagePlan {
    pub message_id: String,
    pub receipt_handle: String,
    /// The message's kind; none when it could not be read (`unreadable` says why).
    pub kind: Option<Kind>,
    pub unreadable: Option<String>,
    /// When the event happened, as the message says.
    pub time: Option<Timestamp>,
    /// The NodeClaims of the instances it names (instances of no NodeClaim are skipped).
    pub claims: Vec<ClaimAction>,
}

/// What to do for the NodeClaim of `instance` (none when no NodeClaim has it) on a message of
/// `kind`: the spot offering a spot interruption takes out of use, the termination deadline a
/// failed status check sets to now (once), and the deletion (once).
pub fn claim_action(snapshot: &Snapshot, kind: Kind, instance: &str) -> Option<ClaimAction> {
    let claim = snapshot.nodeclaim_by_instance(instance)?;
    let unavailable = (kind == Kind::SpotInterrupted)
        .then(|| {
            Some(OfferingKey::new(
                claim.label(LABEL_INSTANCE_TYPE)?,
                claim.label(LABEL_TOPOLOGY_ZONE)?,
                "spot",
            ))
        })
        .flatten();
    let action = kind.action();
    let stamped = claim
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP));
    Some(ClaimAction {
        nodeclaim: claim.metadata.name.clone().unwrap_or_default(),
        node: snapshot
            .node_of(claim)
            .and_then(|n| n.metadata.name.clone()),
        nodepool: claim.nodepool_name().unwrap_or_default().to_string(),
        capacity_type: claim
            .label(LABEL_CAPACITY_TYPE)
            .unwrap_or_default()
            .to_string(),
        unavailable,
        deadline_now: action == Action::ForcefulTermination && !stamped,
        delete: matches!(action, Action::CordonAndDrain | Action::ForcefulTermination)
            && claim.metadata.deletion_timestamp.is_none(),
    })
}

/// What the instance status poller does for one unhealthy instance's failed category.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusPlan {
    pub instance_id: String,
    pub category: Category,
    pub kind: Kind,
    /// The instance's NodeClaim; none when no NodeClaim has the instance (not the cluster's).
    pub claim: Option<ClaimAction>,
}

/// The message kind of a failed status category; none for the attached EBS volumes' check,
/// which Karpenter reads but does not act on.
pub fn kind_of(category: Category) -> Option<Kind> {
    match category {
        Category::InstanceStatus => Some(Kind::InstanceStatus),
        Category::SystemStatus => Some(Kind::SystemStatus),
        Category::EventStatus => Some(Kind::EventStatus),
        Category::EbsStatus => None,
    }
}

/// Plans what EC2 reported unhealthy against `snapshot`: one plan per instance and failed
/// category, the forceful categories (instance, system) first, as each is handled as its own
/// message.
pub fn decide_statuses(snapshot: &Snapshot, unhealthy: &[UnhealthyInstance]) -> Vec<StatusPlan> {
    let mut plans = Vec::new();
    for instance in unhealthy {
        for &category in &instance.categories {
            let Some(kind) = kind_of(category) else {
                continue;
            };
            plans.push(StatusPlan {
                instance_id: instance.instance_id.clone(),
                category,
                kind,
                claim: claim_action(snapshot, kind, &instance.instance_id),
            });
        }
    }
    plans
}

/// Plans every received message against `snapshot`.
pub fn decide(snapshot: &Snapshot, received: &[Received]) -> Vec<MessagePlan> {
    received
        .iter()
        .map(|r| {
            let mut plan = MessagePlan {
                message_id: r.message_id.clone(),
                receipt_handle: r.receipt_handle.clone(),
                kind: None,
                unreadable: None,
                time: None,
                claims: Vec::new(),
            };
            let message = match &r.parsed {
                Ok(message) => message,
                Err(error) => {
                    plan.unreadable = Some(error.to_string());
                    return plan;
                }
            };
            plan.kind = Some(message.kind);
            plan.time = message.time;
            if message.kind == Kind::NoOp {
                return plan;
            }
            plan.claims = message
                .instance_ids
                .iter()
                .filter_map(|instance| claim_action(snapshot, message.kind, instance))
                .collect();
            plan
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_aws::interruption::{events, parse};
    use serde_json::json;
    use std::sync::Arc;

    fn at() -> Timestamp {
        "2026-11-26T10:00:00Z".parse().unwrap()
    }

    fn cluster(claims: &[(&str, &str, bool)]) -> Snapshot {
        let mut s = Snapshot::default();
        for (name, instance, deleting) in claims {
            let provider_id = format!("aws:///test-zone-1a/{instance}");
            let mut claim = json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": name, "labels": {
                    "karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "spot",
                    "node.kubernetes.io/instance-type": "t3.large", "topology.kubernetes.io/zone": "test-zone-1a"}},
                "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "c"}, "requirements": []},
                "status": {"providerID": provider_id}
            });
            if *deleting {
                claim["metadata"]["deletionTimestamp"] = json!("2026-11-26T09:00:00Z");
            }
            s.apply(
                (*name).into(),
                Arc::new(serde_json::from_value::<driftwood_api::NodeClaim>(claim).unwrap()),
            );
            s.apply(
                format!("node-{name}"),
                Arc::new(
                    serde_json::from_value::<k8s_openapi::api::core::v1::Node>(json!({
                        "metadata": {"name": format!("node-{name}")},
                        "spec": {"providerID": provider_id}
                    }))
                    .unwrap(),
                ),
            );
        }
        s
    }

    fn received(bodies: &[String]) -> Vec<Received> {
        bodies
            .iter()
            .enumerate()
            .map(|(i, body)| Received {
                message_id: format!("m{i}"),
                receipt_handle: format!("r{i}"),
                parsed: parse(body),
            })
            .collect()
    }

    /// Karpenter's interruption suite: "should delete the NodeClaim when receiving a spot
    /// interruption warning" and "should mark the ICE cache for the offering when getting a
    /// spot interruption warning" (type and zone from the NodeClaim's labels, capacity type
    /// spot); its Node is named for the events.
    #[test]
    fn a_spot_interruption_deletes_the_nodeclaim_and_marks_the_offering() {
        let s = cluster(&[("a", "i-0a", false)]);
        let plans = decide(&s, &received(&[events::spot_interruption("i-0a", at())]));
        assert_eq!(plans.len(), 1);
        assert_eq!(plans[0].kind, Some(Kind::SpotInterrupted));
        assert_eq!(plans[0].time, Some(at()));
        assert_eq!(
            plans[0].claims,
            [ClaimAction {
                nodeclaim: "a".into(),
                node: Some("node-a".into()),
                nodepool: "default".into(),
                capacity_type: "spot".into(),
                unavailable: Some(OfferingKey::new("t3.large", "test-zone-1a", "spot")),
                deadline_now: false,
                delete: true,
            }]
        );
    }

    fn sick(id: &str, categories: &[Category]) -> UnhealthyInstance {
        UnhealthyInstance {
            instance_id: id.into(),
            categories: categories.iter().copied().collect(),
            impaired_since: at(),
        }
    }

    /// Karpenter's instance status tests: "should forcefully terminate the NodeClaim when an
    /// instance is unhealthy due to EC2 system status checks" and "... has InstanceStatus check
    /// failure" (the deadline set to now, then deleted), "should NOT annotate the NodeClaim
    /// with a termination timestamp for scheduled maintenance events" (deleted, deadline left),
    /// "should forcefully terminate when an instance has both system status failure and a
    /// scheduled event" (the forceful category first); an EBS failure alone does nothing.
    #[test]
    fn failed_checks_terminate_forcefully_and_events_drain() {
        let s = cluster(&[
            ("a", "i-0a", false),
            ("b", "i-0b", false),
            ("c", "i-0c", false),
        ]);
        let plans = decide_statuses(
            &s,
            &[
                sick("i-0a", &[Category::SystemStatus, Category::EventStatus]),
                sick("i-0b", &[Category::EventStatus]),
                sick("i-0c", &[Category::EbsStatus]),
                sick("i-unknown", &[Category::InstanceStatus]),
            ],
        );
        // (instance, kind, the NodeClaim's (deadline now, delete)).
        type Got<'a> = (&'a str, Kind, Option<(bool, bool)>);
        let got: Vec<Got> = plans
            .iter()
            .map(|p| {
                (
                    p.instance_id.as_str(),
                    p.kind,
                    p.claim.as_ref().map(|c| (c.deadline_now, c.delete)),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("i-0a", Kind::SystemStatus, Some((true, true))),
                ("i-0a", Kind::EventStatus, Some((false, true))),
                ("i-0b", Kind::EventStatus, Some((false, true))),
                ("i-unknown", Kind::InstanceStatus, None),
            ]
        );
        assert_eq!(Kind::InstanceStatus.label(), "instance_status");
        assert_eq!(
            Kind::SystemStatus.event().map(|e| e.0),
            Some("InstanceUnhealthy")
        );
    }

    /// "should not re-annotate the NodeClaim on subsequent reconciles": a NodeClaim already
    /// given its deadline, and being deleted, gets neither again.
    #[test]
    fn a_deadline_is_set_once_and_a_deleting_claim_is_not_deleted_again() {
        let mut s = cluster(&[("a", "i-0a", true)]);
        let mut claim = (**s.store.nodeclaims.get("a").unwrap()).clone();
        claim.metadata.annotations = Some(
            [(
                ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP.to_string(),
                "2026-11-26T10:00:00Z".to_string(),
            )]
            .into(),
        );
        s.apply("a".into(), Arc::new(claim));
        let plans = decide_statuses(&s, &[sick("i-0a", &[Category::InstanceStatus])]);
        let claim = plans[0].claim.as_ref().unwrap();
        assert!(!claim.deadline_now && !claim.delete);
    }

    /// "should delete the NodeClaim when receiving a scheduled change message", "... a state
    /// change message" (terminated, stopped, stopping, shutting-down), "... a capacity
    /// reservation interruption warning"; a rebalance recommendation only reports; none of
    /// them marks an offering.
    #[test]
    fn each_kind_acts_as_karpenters() {
        let s = cluster(&[("a", "i-0a", false)]);
        let cases = [
            (events::scheduled_change(&["i-0a"], at()), true),
            (events::state_change("i-0a", "terminated", at()), true),
            (events::state_change("i-0a", "stopped", at()), true),
            (events::state_change("i-0a", "stopping", at()), true),
            (events::state_change("i-0a", "shutting-down", at()), true),
            (
                events::capacity_reservation_interruption("i-0a", at()),
                true,
            ),
            (events::rebalance_recommendation("i-0a", at()), false),
        ];
        for (body, delete) in cases {
            let plans = decide(&s, &received(std::slice::from_ref(&body)));
            assert_eq!(plans[0].claims.len(), 1, "{body}");
            assert_eq!(plans[0].claims[0].delete, delete, "{body}");
            assert_eq!(plans[0].claims[0].unavailable, None, "{body}");
        }
    }

    /// "should handle multiple messages that cause nodeClaim deletion" (each message its
    /// NodeClaim); "should not return an error when deleting a nodeClaim that is already
    /// deleted" (an unknown instance: nothing to do, the message is still deleted); a NodeClaim
    /// already being deleted gets its event but no second delete; an unreadable message is
    /// planned for deletion with why; a no-op names nothing.
    #[test]
    fn batches_unknown_instances_deleting_claims_and_unreadable_messages() {
        let names: Vec<(String, String)> = (0..100)
            .map(|i| (format!("c{i}"), format!("i-{i:04}")))
            .collect();
        let claims: Vec<(&str, &str, bool)> = names
            .iter()
            .map(|(n, i)| (n.as_str(), i.as_str(), false))
            .collect();
        let s = cluster(&claims);
        let bodies: Vec<String> = names
            .iter()
            .map(|(_, i)| events::spot_interruption(i, at()))
            .collect();
        let plans = decide(&s, &received(&bodies));
        assert_eq!(plans.len(), 100);
        assert!(
            plans
                .iter()
                .all(|p| p.claims.len() == 1 && p.claims[0].delete)
        );

        let s = cluster(&[("gone", "i-0b", true)]);
        let plans = decide(
            &s,
            &received(&[
                events::spot_interruption("i-unknown", at()),
                events::spot_interruption("i-0b", at()),
                "not json".to_string(),
                events::state_change("i-0b", "running", at()),
            ]),
        );
        assert!(plans[0].claims.is_empty() && plans[0].kind == Some(Kind::SpotInterrupted));
        assert_eq!(plans[1].claims.len(), 1);
        assert!(!plans[1].claims[0].delete, "already deleting");
        assert_eq!(plans[2].kind, None);
        assert!(plans[2].unreadable.is_some());
        assert_eq!(plans[3].kind, Some(Kind::NoOp));
        assert!(plans[3].claims.is_empty());
    }
}
