//! Deciding `waitFor` conditions and `expect` assertions over a snapshot and what the tracker
//! saw. Pure: each returns what does not hold, in words.

use super::scenario::{Expect, WaitFor};
use super::track::{Tracker, is_pool_node, ready_by_app};
use driftwood_api::condition::Conditions;
use driftwood_api::wellknown::{CONDITION_DRIFTED, LABEL_NODE_INITIALIZED, LABEL_NODEPOOL};
use driftwood_controller::state::Snapshot;
use k8s_openapi::api::core::v1::Node;
use std::collections::BTreeMap;

/// Ready and desired replicas of each Deployment (by name), as the runner read them.
pub type DeploymentReadiness = BTreeMap<String, (i32, i32)>;

/// A node's kubelet version (e.g. `v1.30.4-eks-...`).
pub fn kubelet_version(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.kubelet_version.clone())
        .unwrap_or_default()
}

/// Whether a kubelet version string is on minor `version` (`1.30` matches `v1.30.4-eks`).
pub fn on_version(kubelet: &str, version: &str) -> bool {
    kubelet
        .trim_start_matches('v')
        .strip_prefix(version)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('-'))
}

/// NodePool nodes by kubelet version.
pub fn pool_versions(snapshot: &Snapshot) -> Vec<String> {
    snapshot
        .store
        .nodes
        .values()
        .filter(|n| is_pool_node(n))
        .map(|n| kubelet_version(n))
        .collect()
}

fn all_on_version(snapshot: &Snapshot, version: &str) -> Option<String> {
    let versions = pool_versions(snapshot);
    if !versions.is_empty() && versions.iter().all(|v| on_version(v, version)) {
        None
    } else {
        Some(format!(
            "all NodePool nodes on v{version} (now: {})",
            if versions.is_empty() {
                "no nodes".to_string()
            } else {
                versions.join(", ")
            }
        ))
    }
}

/// Initialized NodePool nodes not being deleted.
pub fn initialized_nodes(snapshot: &Snapshot) -> Vec<&Node> {
    snapshot
        .store
        .nodes
        .values()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_NODE_INITIALIZED))
                .is_some_and(|v| v == "true")
        })
        .map(|n| n.as_ref())
        .collect()
}

/// Initialized NodePool nodes (not being deleted) that run no workload pod: no pod other than
/// DaemonSet and mirror pods, finished or terminating ones.
pub fn empty_nodes(snapshot: &Snapshot) -> Vec<String> {
    initialized_nodes(snapshot)
        .into_iter()
        .filter(|n| crate::demo::track::is_pool_node(n))
        .filter_map(|n| n.metadata.name.clone())
        .filter(|name| {
            snapshot.pods_on(name).iter().all(|p| {
                driftwood_disruption::views::is_daemonset_pod(p)
                    || driftwood_disruption::views::is_mirror_pod(p)
                    || driftwood_disruption::views::is_terminal_pod(p)
                    || p.is_terminating()
            })
        })
        .collect()
}

/// The conditions of `wait` that do not hold yet (empty: done).
pub fn unmet(
    wait: &WaitFor,
    snapshot: &Snapshot,
    tracker: &Tracker,
    deployments: &DeploymentReadiness,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(version) = &wait.all_nodes_on_version {
        out.extend(all_on_version(snapshot, version));
    }
    if let Some(count) = wait.initialized_nodes {
        let now = initialized_nodes(snapshot).len();
        if now != count {
            out.push(format!("{count} initialized nodes (now {now})"));
        }
    }
    if let Some(want) = &wait.ready_pods {
        let now = ready_by_app(snapshot).get(&want.app).copied().unwrap_or(0);
        if now < want.count {
            out.push(format!(
                "{} ready pods of app {} (now {now})",
                want.count, want.app
            ));
        }
    }
    if let Some(name) = &wait.deployment_ready {
        match deployments.get(name) {
            Some((ready, desired)) if ready >= desired => {}
            Some((ready, desired)) => {
                out.push(format!("deployment {name} ready ({ready}/{desired})"))
            }
            None => out.push(format!("deployment {name} ready (not found)")),
        }
    }
    if wait.old_nodes_gone == Some(true) {
        let left = tracker.old_nodes_left(snapshot);
        if !tracker.started() {
            out.push("the rollout's old nodes gone (no rollout started: apply, patch or publishAmi first)".into());
        } else if left > 0 {
            out.push(format!("the rollout's old nodes gone ({left} left)"));
        }
    }
    if let Some(count) = wait.empty_nodes {
        let now = empty_nodes(snapshot).len();
        if now != count {
            out.push(format!("{count} empty nodes (now {now})"));
        }
    }
    if let Some(count) = wait.drifted_nodes {
        let now = snapshot
            .store
            .nodeclaims
            .values()
            .filter(|c| c.is_true(CONDITION_DRIFTED))
            .count();
        if now < count {
            out.push(format!("{count} drifted nodeclaims (now {now})"));
        }
    }
    if let Some(want) = &wait.rollout_reason {
        let condition = snapshot
            .nodepool(&want.nodepool)
            .and_then(|p| p.status.as_ref())
            .and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == driftwood_api::wellknown::CONDITION_ROLLOUT_COMPLETE)
            });
        let now = condition
            .and_then(|c| c.reason.as_deref())
            .unwrap_or("none");
        if now != want.reason {
            out.push(format!(
                "nodepool {} rollout reason {} (now {now})",
                want.nodepool, want.reason
            ));
        }
    }
    out
}

/// The assertions of `expect` that fail now (empty: all hold).
pub fn failed(expect: &Expect, snapshot: &Snapshot, tracker: &Tracker) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(want) = &expect.min_ready_pods {
        match tracker.min_ready.get(&want.app) {
            Some(min) if *min >= want.count => {}
            Some(min) => out.push(format!(
                "minReadyPods: app {} fell to {min} ready pods during the rollout (at least {} required)",
                want.app, want.count
            )),
            None => out.push(format!(
                "minReadyPods: no ready pod of app {} was seen during the rollout",
                want.app
            )),
        }
    }
    if let Some(max) = expect.max_disrupting
        && tracker.max_disrupting > max
    {
        out.push(format!(
            "maxDisrupting: {} nodes were disrupting at once (at most {max} allowed)",
            tracker.max_disrupting
        ));
    }
    if let Some(count) = expect.nodes {
        let now = snapshot
            .store
            .nodes
            .values()
            .filter(|n| is_pool_node(n))
            .count();
        if now != count {
            out.push(format!("nodes: {now} NodePool nodes (expected {count})"));
        }
    }
    if let Some(count) = expect.empty_nodes {
        let empty = empty_nodes(snapshot);
        if empty.len() != count {
            out.push(format!(
                "emptyNodes: {} empty NodePool nodes {empty:?} (expected {count})",
                empty.len()
            ));
        }
    }
    if let Some(reason) = &expect.disruption_reason_seen
        && !tracker.disruption_reasons.contains_key(reason)
    {
        let seen: Vec<&String> = tracker.disruption_reasons.keys().collect();
        out.push(format!(
            "disruptionReasonSeen: no NodeClaim was disrupted for {reason} (seen: {seen:?})"
        ));
    }
    if let Some(reason) = &expect.no_disruption_reason
        && let Some(claims) = tracker.disruption_reasons.get(reason)
    {
        out.push(format!(
            "noDisruptionReason: NodeClaims were disrupted for {reason}: {claims:?}"
        ));
    }
    if let Some(limit) = &expect.max_started_per_window {
        let mut starts: Vec<i64> = tracker
            .timeline
            .iter()
            .filter(|e| e.kind == super::track::EventKind::DisruptionStarted)
            .map(|e| e.at)
            .collect();
        starts.sort_unstable();
        let window = i64::try_from(limit.window.as_secs()).unwrap_or(i64::MAX);
        let busiest = (0..starts.len())
            .map(|i| {
                let n = starts[i..]
                    .iter()
                    .take_while(|t| **t < starts[i].saturating_add(window))
                    .count();
                (n, starts[i])
            })
            .max_by_key(|(n, at)| (*n, std::cmp::Reverse(*at)));
        if let Some((n, at)) = busiest
            && n > limit.count
        {
            out.push(format!(
                "maxStartedPerWindow: {n} disruptions started in the {}s from {} (at most {} allowed)",
                window,
                super::report::clock_time(at),
                limit.count
            ));
        }
    }
    if let Some(count) = expect.replaced_nodes {
        let now = tracker.replaced();
        if now != count {
            out.push(format!(
                "replacedNodes: {now} old nodes gone (expected {count})"
            ));
        }
    }
    if let Some(reason) = &expect.drift_reason_seen
        && !tracker.drift_reasons.contains(reason)
    {
        let seen: Vec<&String> = tracker.drift_reasons.iter().collect();
        out.push(format!(
            "driftReasonSeen: {reason} was not seen (seen: {seen:?})"
        ));
    }
    if let Some(text) = &expect.no_disruption_before {
        match text.parse::<k8s_openapi::jiff::Timestamp>() {
            Err(e) => out.push(format!(
                "noDisruptionBefore: {text:?} is not an RFC 3339 time: {e}"
            )),
            Ok(limit) => {
                if let Some(first) = tracker.first_disruption
                    && first < limit.as_second()
                {
                    let at = k8s_openapi::jiff::Timestamp::from_second(first)
                        .map(|t| t.to_string())
                        .unwrap_or_default();
                    out.push(format!(
                        "noDisruptionBefore: a node was disrupted at {at}, before {limit}"
                    ));
                }
            }
        }
    }
    if let Some(version) = &expect.all_nodes_on_version {
        out.extend(all_on_version(snapshot, version).map(|m| format!("allNodesOnVersion: {m}")));
    }
    if let Some(count) = expect.removed_nodes
        && tracker.removed() != count
    {
        let removed: Vec<&String> = tracker.removed_nodes.iter().collect();
        out.push(format!(
            "removedNodes: {} NodePool nodes were removed (expected {count}): {removed:?}",
            tracker.removed()
        ));
    }
    if let Some(count) = expect.drifted_node_claims
        && tracker.drifted_claims.len() != count
    {
        let reasons: Vec<&String> = tracker.drift_reasons.iter().collect();
        out.push(format!(
            "driftedNodeClaims: {} NodeClaims were Drifted (expected {count}; reasons {reasons:?})",
            tracker.drifted_claims.len()
        ));
    }
    if let Some(text) = &expect.drift_message_seen
        && !tracker
            .drift_messages
            .iter()
            .any(|m| m.contains(text.as_str()))
    {
        out.push(format!(
            "driftMessageSeen: no drift said {text:?} (seen: {:?})",
            tracker.drift_messages
        ));
    }
    if expect.nodes_match_node_pools {
        for (name, claim) in &snapshot.store.nodeclaims {
            let pool = claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_NODEPOOL))
                .and_then(|p| snapshot.nodepool(p));
            match pool {
                Some(pool) => {
                    if let Some(finding) =
                        driftwood_disruption::drift::requirements_drift(claim, pool)
                    {
                        out.push(format!("nodesMatchNodePools: {name}: {}", finding.message));
                    }
                }
                None => out.push(format!("nodesMatchNodePools: {name} has no NodePool")),
            }
        }
    }
    if let Some(limit) = expect.max_pending_pod_time
        && let Some((waited, pod)) = &tracker.max_pending
        && *waited > i64::try_from(limit.as_secs()).unwrap_or(i64::MAX)
    {
        out.push(format!(
            "maxPendingPodTime: pod {pod} waited {waited}s for capacity (at most {}s allowed)",
            limit.as_secs()
        ));
    }
    if expect.no_pod_evicted_before_replacement
        && let Some(evicted) = tracker.first_old_pod_terminating
        && tracker
            .first_replacement_initialized
            .is_none_or(|initialized| evicted < initialized)
    {
        out.push(format!(
            "noPodEvictedBeforeReplacement: a pod on an old node began terminating at +{}s, before any replacement was initialized ({})",
            evicted - tracker.rollout_start.unwrap_or(evicted),
            tracker
                .first_replacement_initialized
                .map_or("none yet".to_string(), |t| format!(
                    "+{}s",
                    t - tracker.rollout_start.unwrap_or(t)
                ))
        ));
    }
    if let Some(count) = expect.min_replacements_launched
        && tracker.replacements_launched.len() < count
    {
        out.push(format!(
            "minReplacementsLaunched: {} replacement NodeClaims launched (at least {count} expected)",
            tracker.replacements_launched.len()
        ));
    }
    if let Some(key) = &expect.every_node_labelled {
        let unlabelled: Vec<String> = snapshot
            .store
            .nodes
            .iter()
            .filter(|(_, n)| is_pool_node(n))
            .filter(|(_, n)| {
                n.metadata
                    .labels
                    .as_ref()
                    .is_none_or(|l| !l.contains_key(key))
            })
            .map(|(name, n)| {
                let it = n
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("node.kubernetes.io/instance-type"))
                    .cloned()
                    .unwrap_or_default();
                format!("{name} ({it})")
            })
            .collect();
        if !unlabelled.is_empty() {
            out.push(format!(
                "everyNodeLabelled: {key} missing on {unlabelled:?}"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_match_on_the_minor() {
        assert!(on_version("v1.30.4-eks-a737599", "1.30"));
        assert!(on_version("v1.30", "1.30"));
        assert!(!on_version("v1.300.1", "1.30"));
        assert!(!on_version("v1.29.6", "1.30"));
    }

    #[test]
    fn empty_cluster_meets_nothing_it_waits_for() {
        let snapshot = Snapshot::default();
        let tracker = Tracker::new();
        let wait = WaitFor {
            all_nodes_on_version: Some("1.30".into()),
            initialized_nodes: Some(1),
            old_nodes_gone: Some(true),
            ..WaitFor::default()
        };
        let unmet = unmet(&wait, &snapshot, &tracker, &BTreeMap::new());
        assert_eq!(unmet.len(), 3, "{unmet:?}");
        assert!(unmet[0].contains("no nodes"));
    }

    #[test]
    fn expectations_report_what_was_seen() {
        let snapshot = Snapshot::default();
        let mut tracker = Tracker::new();
        tracker.min_ready.insert("web".into(), 1);
        tracker.max_disrupting = 3;
        tracker.drift_reasons.insert("NodeClassDrift".into());
        let expect = Expect {
            min_ready_pods: Some(super::super::scenario::AppCount {
                app: "web".into(),
                count: 2,
            }),
            max_disrupting: Some(2),
            drift_reason_seen: Some("AMIDrift".into()),
            ..Expect::default()
        };
        let failed = failed(&expect, &snapshot, &tracker);
        assert_eq!(failed.len(), 3, "{failed:?}");
        assert!(failed[0].contains("fell to 1"));
        assert!(failed[2].contains("NodeClassDrift"));
    }

    #[test]
    fn starts_are_counted_in_every_sliding_window() {
        let snapshot = Snapshot::default();
        let mut tracker = Tracker::new();
        // Two at 0 s, two at 599 s, two at 600 s: 4 in the window from 0, 4 from 599.
        for (i, at) in [0, 0, 599, 599, 600, 600].into_iter().enumerate() {
            tracker.timeline.push(super::super::track::TimelineEvent {
                at: 1_784_505_600 + at,
                kind: super::super::track::EventKind::DisruptionStarted,
                subject: format!("claim-{i}"),
                detail: String::new(),
            });
        }
        let expect = |count| Expect {
            max_started_per_window: Some(super::super::scenario::CountPerWindow {
                count,
                window: std::time::Duration::from_secs(600),
            }),
            ..Expect::default()
        };
        assert!(failed(&expect(4), &snapshot, &tracker).is_empty());
        let failed = failed(&expect(3), &snapshot, &tracker);
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(
            failed[0].starts_with(
                "maxStartedPerWindow: 4 disruptions started in the 600s from 00:00:00"
            ),
            "{failed:?}"
        );
    }
}
