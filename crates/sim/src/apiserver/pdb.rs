//! The disruption-budget logic: the "PDB controller" (status from matching pods) and the
//! eviction decision, as pure functions over plain JSON objects.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::selectors::LabelSelector;

/// Is the pod Ready (condition Ready=True)?
pub fn pod_is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some("Ready")
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
}

/// Does the PDB's selector match the pod? A missing selector matches nothing; an empty one
/// matches every pod in the namespace (policy/v1 semantics).
pub fn selects(pdb: &Value, pod: &Value) -> bool {
    selector_of(pdb).is_some_and(|s| s.matches_object(pod))
}

fn pod_name(pod: &Value) -> &str {
    pod.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Resolve an int-or-percent against `total`, rounding percentages up.
fn scaled(value: &Value, total: i64) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let percent: i64 = s.strip_suffix('%')?.trim().parse().ok()?;
            Some(percent.saturating_mul(total).saturating_add(99) / 100)
        }
        _ => None,
    }
}

/// A controller reference: (kind, name) of the owner with `controller: true`.
pub fn controller_of(pod: &Value) -> Option<(String, String)> {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|r| {
            (
                r.get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                r.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            )
        })
}

/// What the status of a PDB needs to know of one pod its selector picks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Ready=True.
    pub ready: bool,
    /// It has a deletionTimestamp.
    pub terminating: bool,
    /// Its controller, as (kind, name).
    pub controller: Option<(String, String)>,
}

impl Member {
    /// The member facts of `pod`.
    pub fn of(pod: &Value) -> Self {
        Self {
            ready: pod_is_ready(pod),
            terminating: pod.pointer("/metadata/deletionTimestamp").is_some(),
            controller: controller_of(pod),
        }
    }

    fn counts_healthy(&self) -> bool {
        self.ready && !self.terminating
    }
}

/// The pods one PDB selects, by name, with the tallies its status is computed from; kept up to
/// date pod by pod, so that a status is computed without looking at the namespace's pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectedPods {
    members: HashMap<String, Member>,
    /// How many members each controller has.
    controllers: HashMap<(String, String), usize>,
    /// Members without a controller.
    uncontrolled: usize,
    /// Members Ready and not terminating.
    ready_live: usize,
}

impl SelectedPods {
    /// The pods of `namespace_pods` that `pdb`'s selector picks (a missing or unparsable
    /// selector picks none; an empty one picks all).
    pub fn of(pdb: &Value, namespace_pods: &[&Value]) -> Self {
        let mut selected = Self::default();
        if let Some(selector) = selector_of(pdb) {
            for pod in namespace_pods {
                if selector.matches_object(pod) {
                    selected.put(pod_name(pod), Member::of(pod));
                }
            }
        }
        selected
    }

    /// Add the pod `name`, or replace what is known of it.
    pub fn put(&mut self, name: &str, member: Member) {
        self.remove(name);
        match &member.controller {
            Some(controller) => *self.controllers.entry(controller.clone()).or_default() += 1,
            None => self.uncontrolled += 1,
        }
        if member.counts_healthy() {
            self.ready_live += 1;
        }
        self.members.insert(name.to_string(), member);
    }

    /// Forget the pod `name`; whether it was a member.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(member) = self.members.remove(name) else {
            return false;
        };
        match &member.controller {
            Some(controller) => {
                if let Some(count) = self.controllers.get_mut(controller) {
                    *count = count.saturating_sub(1);
                    if *count == 0 {
                        self.controllers.remove(controller);
                    }
                }
            }
            None => self.uncontrolled = self.uncontrolled.saturating_sub(1),
        }
        if member.counts_healthy() {
            self.ready_live = self.ready_live.saturating_sub(1);
        }
        true
    }

    /// What is known of the member `name`.
    pub fn get(&self, name: &str) -> Option<&Member> {
        self.members.get(name)
    }

    /// How many pods are selected.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Are no pods selected?
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

/// A PDB's selector; None when it has none or it does not parse (it then selects nothing).
pub fn selector_of(pdb: &Value) -> Option<LabelSelector> {
    match pdb.pointer("/spec/selector") {
        None | Some(Value::Null) => None,
        Some(selector) => LabelSelector::from_structured(selector).ok(),
    }
}

/// Compute a PDB's status from the pods it selects. `scale_of(kind, name)` returns the
/// desired replica count of a pod controller; pods without a known controller count as one.
pub fn compute_status(
    pdb: &Value,
    pods: &SelectedPods,
    scale_of: &dyn Fn(&str, &str) -> Option<i64>,
    now: &str,
) -> Value {
    let previous = pdb.get("status").cloned().unwrap_or_else(|| json!({}));
    let mut disrupted: Map<String, Value> = previous
        .get("disruptedPods")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    disrupted.retain(|name, _| pods.members.get(name).is_some_and(|m| !m.terminating));

    let min_available = pdb.pointer("/spec/minAvailable");
    let max_unavailable = pdb.pointer("/spec/maxUnavailable");
    let uses_scale = max_unavailable.is_some() || min_available.is_some_and(Value::is_string);
    let expected = if uses_scale {
        let owned = pods.controllers.keys().fold(0i64, |total, (kind, name)| {
            total.saturating_add(scale_of(kind, name).unwrap_or(1))
        });
        owned.saturating_add(i64::try_from(pods.uncontrolled).unwrap_or(i64::MAX))
    } else {
        i64::try_from(pods.len()).unwrap_or(i64::MAX)
    };
    let desired = match (min_available, max_unavailable) {
        (_, Some(max)) => expected.saturating_sub(scaled(max, expected).unwrap_or(0)),
        (Some(min), None) => scaled(min, expected).unwrap_or(0),
        (None, None) => expected,
    }
    .max(0);
    // Disrupted pods (evicted, not yet seen terminating) do not count as healthy.
    let disrupted_healthy = disrupted
        .keys()
        .filter(|name| pods.members.get(*name).is_some_and(Member::counts_healthy))
        .count();
    let healthy =
        i64::try_from(pods.ready_live.saturating_sub(disrupted_healthy)).unwrap_or(i64::MAX);
    let allowed = healthy.saturating_sub(desired).max(0);
    let (condition_status, reason, message) = if allowed > 0 {
        ("True", "SufficientPods", String::new())
    } else {
        ("False", "InsufficientPods", String::new())
    };
    let previous_condition = previous
        .get("conditions")
        .and_then(Value::as_array)
        .and_then(|c| {
            c.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionAllowed"))
        });
    let transition = match previous_condition {
        Some(c) if c.get("status").and_then(Value::as_str) == Some(condition_status) => c
            .get("lastTransitionTime")
            .cloned()
            .unwrap_or_else(|| json!(now)),
        _ => json!(now),
    };
    let mut status = json!({
        "observedGeneration": pdb.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": allowed,
        "expectedPods": expected,
        "conditions": [{
            "type": "DisruptionAllowed",
            "status": condition_status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": transition,
            "observedGeneration": pdb.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        }],
    });
    if !disrupted.is_empty()
        && let Some(map) = status.as_object_mut()
    {
        map.insert("disruptedPods".into(), Value::Object(disrupted));
    }
    status
}

/// What an eviction request should do.
#[derive(Debug, Clone, PartialEq)]
pub enum EvictionOutcome {
    /// Delete the pod without touching any budget.
    DeleteWithoutBudget,
    /// Delete the pod and charge the budget at this index of the matching PDBs.
    DeleteCharging(usize),
}

/// Decide an eviction of `pod` given the PDBs (in its namespace) whose selector matches it.
pub fn decide_eviction(pod: &Value, matching: &[&Value]) -> Result<EvictionOutcome, ApiError> {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    let terminating = pod.pointer("/metadata/deletionTimestamp").is_some();
    if terminating || matches!(phase, "Succeeded" | "Failed" | "Pending") || matching.is_empty() {
        return Ok(EvictionOutcome::DeleteWithoutBudget);
    }
    if matching.len() > 1 {
        return Err(ApiError::internal(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    let pdb = matching[0];
    let pdb_name = pdb
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let status_int = |field: &str| {
        pdb.pointer(&format!("/status/{field}"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let allowed = status_int("disruptionsAllowed");
    if allowed < 0 {
        return Err(ApiError::forbidden("pdb disruptions allowed is negative"));
    }
    let healthy = status_int("currentHealthy");
    let desired = status_int("desiredHealthy");
    if !pod_is_ready(pod) {
        let policy = pdb
            .pointer("/spec/unhealthyPodEvictionPolicy")
            .and_then(Value::as_str);
        if policy == Some("AlwaysAllow") || healthy >= desired {
            return Ok(EvictionOutcome::DeleteWithoutBudget);
        }
    }
    if allowed == 0 {
        return Err(ApiError::too_many_requests(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            json!({
                "reason": "DisruptionBudget",
                "message": format!("The disruption budget {pdb_name} needs {desired} healthy pods and has {healthy} currently"),
            }),
        ));
    }
    Ok(EvictionOutcome::DeleteCharging(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool, owner: Option<&str>) -> Value {
        let mut pod = json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        });
        if let Some(owner) = owner {
            pod["metadata"]["ownerReferences"] = json!([{"kind": "ReplicaSet", "name": owner, "controller": true, "uid": "u", "apiVersion": "apps/v1"}]);
        }
        pod
    }

    fn pdb(spec: Value) -> Value {
        let mut spec = spec;
        spec["selector"] = json!({"matchLabels": {"app": "web"}});
        json!({"metadata": {"name": "web", "namespace": "default", "generation": 1}, "spec": spec})
    }

    #[test]
    fn min_available_integer_counts_matching_pods() {
        let pods = [
            pod("a", true, None),
            pod("b", true, None),
            pod("c", false, None),
        ];
        let refs: Vec<&Value> = pods.iter().collect();
        let budget = pdb(json!({"minAvailable": 1}));
        let status = compute_status(
            &budget,
            &SelectedPods::of(&budget, &refs),
            &|_, _| None,
            "t",
        );
        assert_eq!(status["currentHealthy"], 2);
        assert_eq!(status["desiredHealthy"], 1);
        assert_eq!(status["disruptionsAllowed"], 1);
        assert_eq!(status["expectedPods"], 3);
    }

    #[test]
    fn max_unavailable_percent_uses_owner_scale() {
        let pods = [pod("a", true, Some("rs")), pod("b", true, Some("rs"))];
        let refs: Vec<&Value> = pods.iter().collect();
        let budget = pdb(json!({"maxUnavailable": "25%"}));
        let status = compute_status(
            &budget,
            &SelectedPods::of(&budget, &refs),
            &|_, _| Some(4),
            "t",
        );
        assert_eq!(status["expectedPods"], 4);
        assert_eq!(status["desiredHealthy"], 3);
        assert_eq!(status["disruptionsAllowed"], 0);
    }

    #[test]
    fn absurd_budgets_do_not_overflow() {
        let pods = [pod("a", true, Some("rs"))];
        let refs: Vec<&Value> = pods.iter().collect();
        let budget = pdb(json!({"maxUnavailable": "9223372036854775807%"}));
        let selected = SelectedPods::of(&budget, &refs);
        let status = compute_status(&budget, &selected, &|_, _| Some(i64::MAX), "t");
        assert_eq!(status["expectedPods"], i64::MAX);
        assert_eq!(status["disruptionsAllowed"], 0);
    }

    /// A pod the eviction API charged to the budget (in `disruptedPods`) is not healthy while it
    /// still runs, and leaves the map once it is terminating.
    #[test]
    fn disrupted_pods_are_not_healthy_and_leave_when_terminating() {
        let mut budget = pdb(json!({"minAvailable": 1}));
        budget["status"] = json!({"disruptedPods": {"a": "t0"}});
        let status_of = |pods: &[Value]| {
            let refs: Vec<&Value> = pods.iter().collect();
            compute_status(
                &budget,
                &SelectedPods::of(&budget, &refs),
                &|_, _| None,
                "t",
            )
        };
        let mut pods = [pod("a", true, None), pod("b", true, None)];
        let status = status_of(&pods);
        assert_eq!(status["currentHealthy"], 1);
        assert_eq!(status["disruptionsAllowed"], 0);
        assert_eq!(status["disruptedPods"], json!({"a": "t0"}));

        pods[0]["metadata"]["deletionTimestamp"] = json!("t1");
        let status = status_of(&pods);
        assert_eq!(status["currentHealthy"], 1);
        assert_eq!(status["expectedPods"], 2);
        assert!(status.get("disruptedPods").is_none());
    }

    #[test]
    fn eviction_blocked_when_no_disruptions_allowed() {
        let mut budget = pdb(json!({"minAvailable": 2}));
        budget["status"] =
            json!({"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2});
        let error = decide_eviction(&pod("a", true, None), &[&budget]).unwrap_err();
        assert_eq!(error.code, 429);
        assert_eq!(
            error.message,
            "Cannot evict pod as it would violate the pod's disruption budget."
        );
        budget["status"]["disruptionsAllowed"] = json!(1);
        assert_eq!(
            decide_eviction(&pod("a", true, None), &[&budget]).unwrap(),
            EvictionOutcome::DeleteCharging(0)
        );
        assert_eq!(
            decide_eviction(&pod("a", true, None), &[&budget, &budget])
                .unwrap_err()
                .code,
            500
        );
    }

    #[test]
    fn unready_pod_evicted_freely_when_budget_is_healthy() {
        let mut budget = pdb(json!({"minAvailable": 1}));
        budget["status"] =
            json!({"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1});
        assert_eq!(
            decide_eviction(&pod("c", false, None), &[&budget]).unwrap(),
            EvictionOutcome::DeleteWithoutBudget
        );
    }
}
