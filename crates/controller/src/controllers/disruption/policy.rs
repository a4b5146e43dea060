//! The rollout policies' part of a disruption pass: each NodePool's facts read from the
//! snapshot (its counts, the health of the pods on the nodes this rollout made, its PDBs at
//! zero), the policy's verdict, and the progress written before the disruptions it allows.

use crate::state::Snapshot;
use driftwood_api::nodepool::{NodePool, RolloutPolicyStatus};
use driftwood_api::rollout_policy::RolloutPolicy;
use driftwood_api::wellknown::LABEL_TOPOLOGY_ZONE;
use driftwood_disruption::cached_pod::CachedPod;
use driftwood_disruption::candidate::NodeView;
use driftwood_disruption::plan::PolicyCap;
use driftwood_disruption::policy::ZoneFacts;
use driftwood_disruption::policy::{
    PodHealth, PolicyHold, PolicyPass, PoolFacts, gate_failures, policy_pass, rollout_target,
};
use driftwood_disruption::rollout::pool_rollout;
use std::collections::{BTreeMap, BTreeSet};

/// The progress this controller last wrote for a pool, and the resourceVersions around the
/// write: while the snapshot still shows the version from before, it is stale and the written
/// progress stands in for it.
#[derive(Debug, Clone)]
pub(super) struct Written {
    pub before: Option<String>,
    pub progress: Option<RolloutPolicyStatus>,
}

/// One pool's verdict this pass.
#[derive(Debug, Clone)]
pub(super) struct PoolPolicy {
    pub pass: PolicyPass,
    /// The pool's NodeClaims by zone.
    pub zones: BTreeMap<String, BTreeSet<String>>,
}

impl PoolPolicy {
    /// The cap the planner spends, with why no more.
    pub fn cap(&self) -> Option<PolicyCap> {
        if self.pass.cap.is_none() && self.pass.zone.is_none() {
            return None;
        }
        let cap = self.pass.cap.unwrap_or(usize::MAX);
        Some(PolicyCap {
            cap,
            only: self.pass.zone.as_ref().map(|zone| {
                (
                    zone.clone(),
                    self.zones.get(zone).cloned().unwrap_or_default(),
                )
            }),
            halts: self
                .pass
                .hold
                .as_ref()
                .is_some_and(PolicyHold::holds_the_rollout),
            detail: match &self.pass.hold {
                Some(hold) => hold.to_string(),
                None => format!("the rollout policy lets this pass start {cap} disruption(s)"),
            },
        })
    }
}

/// A query gate's last reading: when (UTC seconds) and the largest sample, or why none.
pub(super) type Reading = (i64, Result<Option<f64>, String>);

/// How often a pool's query gate is asked again.
pub(super) const QUERY_EVERY_SECONDS: i64 = 15;

/// The pools whose query gate should be read this pass (a rollout under way, no reading
/// younger than [`QUERY_EVERY_SECONDS`]), with their query.
pub(super) fn queries_due(
    snapshot: &Snapshot,
    readings: &BTreeMap<String, Reading>,
    now: i64,
) -> Vec<(String, String)> {
    snapshot
        .store
        .nodepools
        .iter()
        .filter(|(name, _)| {
            readings
                .get(*name)
                .is_none_or(|(at, _)| now.saturating_sub(*at) >= QUERY_EVERY_SECONDS)
        })
        .filter(|(_, pool)| {
            pool.status
                .as_ref()
                .and_then(|s| s.rollout.as_ref())
                .and_then(|r| r.policy.as_ref())
                .is_some_and(|p| p.started_at.is_some())
        })
        .filter_map(|(name, pool)| {
            let gate = RolloutPolicy::of(pool).ok()?.gates.query?;
            Some((name.clone(), gate.query))
        })
        .collect()
}

/// What each pool's policy lets this pass start, by pool; a pool backing off after failed
/// replacements starts nothing (its backoff replaces any policy cap), the others go on.
pub(super) fn caps(
    policies: &BTreeMap<String, PoolPolicy>,
    backoffs: &BTreeMap<String, driftwood_api::nodepool::RolloutBackoff>,
    now: i64,
) -> BTreeMap<String, PolicyCap> {
    let mut caps: BTreeMap<String, PolicyCap> = policies
        .iter()
        .filter_map(|(pool, p)| Some((pool.clone(), p.cap()?)))
        .collect();
    for (pool, backoff) in backoffs {
        if let Some(held) = driftwood_disruption::backoff::cap(backoff, now) {
            caps.insert(pool.clone(), held);
        }
    }
    caps
}

/// Every pool's verdict: pools without a policy and without progress to keep are left out.
/// `readings` are the query gates' last answers, by pool.
pub(super) fn decide(
    snapshot: &Snapshot,
    views: &[NodeView],
    written: &BTreeMap<String, Written>,
    readings: &BTreeMap<String, Reading>,
    now: i64,
) -> BTreeMap<String, PoolPolicy> {
    let mut out = BTreeMap::new();
    for (name, pool) in snapshot.store.nodepools.iter() {
        if pool.is_static() {
            continue;
        }
        let last = last_progress(pool, written.get(name));
        let parsed = RolloutPolicy::of(pool);
        // Most pools have no policy and nothing to keep: nothing to count for them.
        if last.is_none() && parsed.as_ref().is_ok_and(RolloutPolicy::is_empty) {
            continue;
        }
        let counts = pool_rollout(pool, views, &[]).status;
        let zoned = parsed.as_ref().is_ok_and(|p| p.zone_order.is_some());
        let (zones, zone_facts) = if zoned {
            pool_zones(snapshot, views, name)
        } else {
            (BTreeMap::new(), Vec::new())
        };
        let mut facts = PoolFacts {
            total: usize::try_from(counts.up_to_date + counts.drifted + counts.disrupting)
                .unwrap_or(0),
            drifted: usize::try_from(counts.drifted).unwrap_or(0),
            disrupting: usize::try_from(counts.disrupting).unwrap_or(0),
            failing: Vec::new(),
            zones: zone_facts,
            gate_unknown: None,
            target: rollout_target(
                pool,
                snapshot
                    .nodeclass(&pool.spec.template.spec.node_class_ref.name)
                    .map(|c| c.as_ref()),
            ),
        };
        let pass = match parsed {
            Err(error) => {
                if facts.drifted == 0 && last.is_none() {
                    continue;
                }
                PolicyPass {
                    progress: last.clone(),
                    cap: Some(0),
                    hold: Some(PolicyHold::Invalid {
                        message: error.to_string(),
                    }),
                    halted_now: None,
                    wave_started: None,
                    zone: None,
                    zone_started: None,
                    deadline_at_risk: None,
                    retargeted: None,
                }
            }
            Ok(policy) => {
                if !policy.waves.is_empty() {
                    let started_at = last
                        .as_ref()
                        .and_then(|p| p.started_at.as_deref())
                        .and_then(driftwood_disruption::policy::seconds);
                    if let Some(started_at) = started_at {
                        let (pods, pdbs) = new_nodes_health(snapshot, views, name, started_at);
                        facts.failing = gate_failures(&policy.gates, &pods, &pdbs, now);
                    }
                    if let Some(gate) = &policy.gates.query {
                        match readings.get(name).map(|(_, r)| r) {
                            Some(Ok(Some(value))) if *value > gate.max_value() => {
                                facts.failing.push(driftwood_disruption::policy::GateFailure {
                                    gate: "Query",
                                    message: format!(
                                        "query {:?} returned {value} (the policy allows at most {})",
                                        gate.query, gate.max
                                    ),
                                });
                            }
                            Some(Ok(_)) => {}
                            Some(Err(error)) => facts.gate_unknown = Some(error.clone()),
                            None => {
                                facts.gate_unknown =
                                    Some(format!("query {:?} not read yet", gate.query));
                            }
                        }
                    }
                }
                policy_pass(&policy, last.as_ref(), &facts, now)
            }
        };
        out.insert(name.clone(), PoolPolicy { pass, zones });
    }
    out
}

/// The pool's NodeClaims by zone (their `topology.kubernetes.io/zone` label), and per zone the
/// nodes, drifted and disrupting counted as the rollout status counts them.
fn pool_zones(
    snapshot: &Snapshot,
    views: &[NodeView],
    nodepool: &str,
) -> (BTreeMap<String, BTreeSet<String>>, Vec<ZoneFacts>) {
    let mut members: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut facts: BTreeMap<String, ZoneFacts> = BTreeMap::new();
    for view in views.iter().filter(|v| v.nodepool == nodepool) {
        let Some(zone) = snapshot
            .store
            .nodeclaims
            .get(&view.nodeclaim)
            .and_then(|c| c.metadata.labels.as_ref())
            .and_then(|l| l.get(LABEL_TOPOLOGY_ZONE))
        else {
            continue;
        };
        members
            .entry(zone.clone())
            .or_default()
            .insert(view.nodeclaim.clone());
        let entry = facts.entry(zone.clone()).or_insert_with(|| ZoneFacts {
            zone: zone.clone(),
            ..ZoneFacts::default()
        });
        entry.nodes += 1;
        if view.disrupting || view.deleting {
            entry.disrupting += 1;
        } else if view.drift.is_some() {
            entry.drifted += 1;
        }
    }
    (members, facts.into_values().collect())
}

/// The progress the pool's status shows, unless this controller has written a newer one the
/// snapshot has not caught up with.
fn last_progress(pool: &NodePool, written: Option<&Written>) -> Option<RolloutPolicyStatus> {
    let shown = pool
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.policy.clone());
    match written {
        Some(w) if w.before.is_some() && w.before == pool.metadata.resource_version => {
            w.progress.clone()
        }
        _ => shown,
    }
}

/// The pods on the nodes of `nodepool` made since `started_at` (up to date, created at or after
/// it) as the health gates read them, and the PodDisruptionBudgets of those pods allowing no
/// disruption, with since when.
fn new_nodes_health(
    snapshot: &Snapshot,
    views: &[NodeView],
    nodepool: &str,
    started_at: i64,
) -> (Vec<PodHealth>, Vec<(String, i64)>) {
    let mut pods = Vec::new();
    let mut pdb_keys = std::collections::BTreeSet::new();
    for view in views
        .iter()
        .filter(|v| v.nodepool == nodepool && v.drift.is_none() && !v.deleting && !v.disrupting)
    {
        let created = snapshot
            .store
            .nodeclaims
            .get(&view.nodeclaim)
            .and_then(|c| c.metadata.creation_timestamp.as_ref())
            .map(|t| t.0.as_second());
        if created.is_none_or(|c| c < started_at) {
            continue;
        }
        let Some(node) = view.node.as_deref() else {
            continue;
        };
        for pod in snapshot.pods_on(node) {
            if let Some(health) = pod_health(pod, node) {
                pods.push(health);
            }
        }
        pdb_keys.extend(view.pods.iter().flat_map(|p| p.pdbs.iter().cloned()));
    }
    let pdbs = pdb_keys
        .into_iter()
        .filter_map(|key| {
            let pdb = snapshot.store.pdbs.get(&key)?;
            let since = pdb
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "DisruptionAllowed" && c.status == "False")?
                .last_transition_time
                .0
                .as_second();
            Some((key, since))
        })
        .collect();
    (pods, pdbs)
}

/// A running or starting pod's health (None for a finished or terminating pod).
fn pod_health(pod: &CachedPod, node: &str) -> Option<PodHealth> {
    if pod.is_terminating() || pod.is_terminal() {
        return None;
    }
    // Unready time counts on the new node only: a pod bound but not yet started (no Ready
    // condition) is unready since it was bound, not since it was created — it may have waited
    // Pending for capacity elsewhere, which says nothing about the new node.
    let bound = pod.scheduled_since().map(|t| t.as_second());
    let created = pod.created.map(|t| t.as_second());
    let unready_since = match pod.ready {
        Some(c) if c.is_true => None,
        Some(c) => c.since.map(|t| t.as_second()).or(bound).or(created),
        None => bound.or(created),
    };
    Some(PodHealth {
        key: pod.key(),
        node: node.to_string(),
        unready_since,
        restarts: pod.restarts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: &str) -> CachedPod {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_str(&format!(
            r#"{{"metadata": {{"name": "web-1", "namespace": "shop", "creationTimestamp": "2026-07-20T09:00:00Z"}}, "status": {status}}}"#
        ))
        .unwrap();
        CachedPod::from(&pod)
    }

    fn at(text: &str) -> i64 {
        driftwood_disruption::policy::seconds(text).unwrap()
    }

    /// Found by a chaos run of a canary moved back: a pod evicted from the drifted node waited
    /// Pending for capacity for 7 minutes, landed on the new node, and the Unready gate halted
    /// the rollout at once, counting from the pod's creation.
    #[test]
    fn a_pod_not_started_yet_is_unready_since_it_was_bound_not_since_it_was_created() {
        let bound = pod(
            r#"{"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-07-20T09:07:00Z"}]}"#,
        );
        let health = pod_health(&bound, "n-new").unwrap();
        assert_eq!(health.unready_since, Some(at("2026-07-20T09:07:00Z")));
        assert_eq!(health.key, "shop/web-1");
        let unready = pod(
            r#"{"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-07-20T09:07:00Z"}, {"type": "Ready", "status": "False", "lastTransitionTime": "2026-07-20T09:07:30Z"}]}"#,
        );
        assert_eq!(
            pod_health(&unready, "n-new").unwrap().unready_since,
            Some(at("2026-07-20T09:07:30Z"))
        );
        let ready = pod(
            r#"{"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-07-20T09:07:30Z"}]}"#,
        );
        assert_eq!(pod_health(&ready, "n-new").unwrap().unready_since, None);
        // Nothing known but the pod itself: since its creation.
        assert_eq!(
            pod_health(&pod(r#"{"phase": "Pending"}"#), "n-new")
                .unwrap()
                .unready_since,
            Some(at("2026-07-20T09:00:00Z"))
        );
    }
}
