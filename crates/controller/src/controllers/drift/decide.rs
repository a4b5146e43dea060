//! What the drift marker writes, from the cache and the verdicts judged this pass: which
//! NodeClaims it looks at, and for each a Drifted condition to set, clear or keep.

use crate::state::Snapshot;
use driftwood_api::lookup::ObjectLookups;
use driftwood_api::{NodeClaim, NodePool};
use driftwood_disruption::drift::{DriftFinding, DriftMarking, Verdict, drift_marking};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A NodeClaim the marker judges: not being deleted, with a NodePool that exists and is not
/// static (driftwood leaves static NodePools alone).
pub struct Candidate<'a> {
    pub name: &'a str,
    pub claim: &'a Arc<NodeClaim>,
    pub nodepool: &'a Arc<NodePool>,
}

/// Every NodeClaim to judge.
pub fn candidates(snapshot: &Snapshot) -> Vec<Candidate<'_>> {
    snapshot
        .store
        .nodeclaims
        .iter()
        .filter_map(|(name, claim)| candidate(snapshot, name, claim))
        .collect()
}

/// The NodeClaims to judge among `names` (a name not in the cache is skipped).
pub fn candidates_named<'a>(
    snapshot: &'a Snapshot,
    names: &BTreeSet<String>,
) -> Vec<Candidate<'a>> {
    names
        .iter()
        .filter_map(|name| snapshot.store.nodeclaims.get_key_value(name.as_str()))
        .filter_map(|(name, claim)| candidate(snapshot, name, claim))
        .collect()
}

fn candidate<'a>(
    snapshot: &'a Snapshot,
    name: &'a str,
    claim: &'a Arc<NodeClaim>,
) -> Option<Candidate<'a>> {
    if claim.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let nodepool = snapshot
        .nodepool(claim.nodepool_name()?)
        .filter(|p| !p.is_static())?;
    Some(Candidate {
        name,
        claim,
        nodepool,
    })
}

/// A change to one NodeClaim's Drifted condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    Set {
        nodeclaim: String,
        nodepool: String,
        finding: DriftFinding,
    },
    Clear {
        nodeclaim: String,
    },
}

impl Mark {
    /// The NodeClaim this mark is written to.
    pub fn nodeclaim(&self) -> &str {
        match self {
            Mark::Set { nodeclaim, .. } | Mark::Clear { nodeclaim } => nodeclaim,
        }
    }
}

/// The marks to write to `candidates`, given each judged NodeClaim's verdict (a NodeClaim
/// without a verdict is left as it is). With the Drift gate off, every Drifted condition is
/// cleared.
pub fn decide(
    candidates: &[Candidate<'_>],
    verdicts: &BTreeMap<String, Verdict>,
    drift_enabled: bool,
) -> Vec<Mark> {
    let off = Verdict::NotDrifted;
    candidates
        .iter()
        .filter_map(|c| {
            let verdict = if drift_enabled {
                verdicts.get(c.name)?
            } else {
                &off
            };
            match drift_marking(c.claim, verdict, drift_enabled) {
                DriftMarking::Keep => None,
                DriftMarking::Set(finding) => Some(Mark::Set {
                    nodeclaim: c.name.to_string(),
                    nodepool: c.nodepool.metadata.name.clone().unwrap_or_default(),
                    finding,
                }),
                DriftMarking::Clear => Some(Mark::Clear {
                    nodeclaim: c.name.to_string(),
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Store;
    use serde_json::json;

    fn claim(
        name: &str,
        pool: &str,
        drifted: Option<(&str, &str)>,
        deleting: bool,
    ) -> Arc<NodeClaim> {
        let mut conditions = vec![
            json!({"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}),
        ];
        if let Some((reason, message)) = drifted {
            conditions.push(json!({"type": "Drifted", "status": "True", "reason": reason, "message": message, "lastTransitionTime": "2024-01-01T00:00:00Z"}));
        }
        let mut meta = json!({"name": name, "labels": {"karpenter.sh/nodepool": pool}});
        if deleting {
            meta["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        Arc::new(serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta,
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
            "status": {"conditions": conditions}
        })).expect("nodeclaim"))
    }

    fn snapshot(claims: Vec<Arc<NodeClaim>>) -> Snapshot {
        let mut store = Store::default();
        store.nodepools.insert("default".into(), Arc::new(serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "n"}, "requirements": []}}}
        })).expect("nodepool")));
        for c in claims {
            store
                .nodeclaims
                .insert(c.metadata.name.clone().unwrap_or_default(), c);
        }
        Snapshot::new(store)
    }

    fn finding(reason: &str, message: &str) -> DriftFinding {
        DriftFinding {
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// Karpenter drift suite "should remove the status condition from the nodeClaim if the
    /// nodeClaim is no longer drifted" and "should not detect drift if the nodePool does not
    /// exist"; a new finding is set, the same finding is not written again, and with the Drift
    /// gate off (driftwood's setting) every mark is cleared.
    #[test]
    fn marks_follow_the_verdicts_and_the_gate() {
        let snapshot = snapshot(vec![
            claim("new-drift", "default", None, false),
            claim("healed", "default", Some(("AMIDrift", "old")), false),
            claim(
                "same",
                "default",
                Some(("AMIDrift", "ami-1 → ami-2")),
                false,
            ),
            claim("unjudged", "default", Some(("AMIDrift", "x")), false),
            claim("deleting", "default", None, true),
            claim("orphan", "missing-pool", None, false),
        ]);
        let verdicts: BTreeMap<String, Verdict> = [
            (
                "new-drift",
                Verdict::Drifted(finding("NodePoolDrifted", "spec.template.labels changed")),
            ),
            ("healed", Verdict::NotDrifted),
            (
                "same",
                Verdict::Drifted(finding("AMIDrift", "ami-1 → ami-2")),
            ),
            ("deleting", Verdict::Drifted(finding("AMIDrift", "x"))),
            ("orphan", Verdict::Drifted(finding("AMIDrift", "x"))),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(
            decide(&candidates(&snapshot), &verdicts, true),
            vec![
                Mark::Clear {
                    nodeclaim: "healed".into()
                },
                Mark::Set {
                    nodeclaim: "new-drift".into(),
                    nodepool: "default".into(),
                    finding: finding("NodePoolDrifted", "spec.template.labels changed"),
                },
            ]
        );
        let names: Vec<&str> = candidates(&snapshot).iter().map(|c| c.name).collect();
        assert_eq!(names, ["healed", "new-drift", "same", "unjudged"]);
        // Gate off: every Drifted condition goes, whatever the verdicts.
        let cleared: Vec<Mark> = decide(&candidates(&snapshot), &BTreeMap::new(), false);
        assert_eq!(
            cleared,
            ["healed", "same", "unjudged"].map(|n| Mark::Clear {
                nodeclaim: n.into()
            })
        );
    }

    /// The marker wakes for a NodeClaim change or a NodePool spec change, not for pods (it never
    /// reads them) nor NodePool status; a verdict is remembered at the NodeClaim's version and
    /// at what it read of its NodePool and class.
    #[test]
    fn wakes_for_the_kinds_a_verdict_reads_and_not_for_pods() {
        let mut s = snapshot(vec![claim("a", "default", None, false)]);
        let before = super::super::wake_signature(&s);
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n"}
        }))
        .expect("pod");
        s.apply("default/p".into(), Arc::new(pod));
        assert_eq!(super::super::wake_signature(&s), before);
        let versions = |s: &Snapshot| {
            let c = candidates(s);
            super::super::memory::Versions::of(&c[0], &super::super::memory::ReadKeys::of(s))
        };
        let at_first = versions(&s);
        // The nodeclass controller rewrites the NodePool's status as its NodeClaims are
        // counted: neither a wake nor a reason to judge again.
        let mut counted = (**s.nodepool("default").expect("nodepool")).clone();
        counted.metadata.resource_version = Some("9".into());
        counted.status = Some(serde_json::from_value(json!({"nodes": 3})).expect("status"));
        s.apply("default".into(), Arc::new(counted.clone()));
        assert_eq!(
            super::super::wake_signature(&s),
            before,
            "NodePool status counts"
        );
        assert_eq!(versions(&s), at_first, "NodePool status counts");
        counted.spec.template.spec.requirements =
            vec![serde_json::from_value(
            json!({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}),
        )
        .expect("requirement")];
        s.apply("default".into(), Arc::new(counted));
        assert_ne!(
            super::super::wake_signature(&s),
            before,
            "a NodePool spec change"
        );
        assert_ne!(versions(&s), at_first, "a NodePool spec change");
        let before = super::super::wake_signature(&s);
        let at_first = versions(&s);
        let mut changed = (*claim("a", "default", None, false)).clone();
        changed.metadata.resource_version = Some("2".into());
        s.apply("a".into(), Arc::new(changed));
        assert_ne!(super::super::wake_signature(&s), before);
        assert_ne!(versions(&s), at_first);
    }

    /// A verdict that cannot be judged now (a provider error) changes nothing.
    #[test]
    fn an_unknown_verdict_keeps_the_mark() {
        let snapshot = snapshot(vec![claim("a", "default", Some(("AMIDrift", "x")), false)]);
        let verdicts = [("a".to_string(), Verdict::Unknown("ec2 throttled".into()))].into();
        assert!(decide(&candidates(&snapshot), &verdicts, true).is_empty());
    }
}
