//! `driftwood explain`: for one NodeClaim, whether it is drifted and exactly what moved (from
//! the stamped per-field hashes and the class status), and what blocks its replacement now
//! (in-flight command, candidate filters, budget and its window, the controller's last
//! simulation verdict).

use crate::budget::{allowed_disruptions, budget_counts, format_utc};
use crate::candidate::{NodeView, budget_members, check_candidate};
use crate::drift::{NODECLASS_STAMP, NODEPOOL_STAMP, StampKeys, stamp_comparison, stamped_hashes};
use driftwood_api::condition::Conditions;
use driftwood_api::hash::{HashComparison, ec2nodeclass_hashes, nodepool_hashes};
use driftwood_api::wellknown::{CONDITION_DISRUPTION_REASON, CONDITION_DRIFTED, REASON_DRIFTED};
use driftwood_api::{EC2NodeClass, NodeClaim, NodePool};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Everything explain looks at.
pub struct ExplainInput<'a> {
    pub nodeclaim: &'a NodeClaim,
    pub view: &'a NodeView,
    pub nodepool: Option<&'a NodePool>,
    pub nodeclass: Option<&'a EC2NodeClass>,
    /// Views of every NodeClaim of the same NodePool (for the budget).
    pub pool_views: &'a [NodeView],
    pub pdb_allowed: &'a BTreeMap<String, i32>,
    /// The controller's last DisruptionBlocked message for this NodeClaim, if any.
    pub last_blocked_event: Option<&'a str>,
    /// The controller's last Unconsolidatable message for this NodeClaim, if any.
    pub last_unconsolidatable_event: Option<&'a str>,
    /// UTC seconds.
    pub now: i64,
    /// For a NodeClaim being deleted: what its drain looks at.
    pub drain: Option<DrainExplain>,
}

/// What a node's drain and termination wait for.
#[derive(Debug, Clone, Default)]
pub struct DrainExplain {
    /// The node's pods as drain sees them.
    pub pods: Vec<crate::drain::DrainPod>,
    /// When the terminationGracePeriod ends (UTC seconds), if the NodeClaim has one.
    pub deadline: Option<i64>,
    /// The node's VolumeAttachments of persistent volumes not yet detached.
    pub volume_attachments: Vec<String>,
}

/// The drain rules acting on a node now, one line each.
fn drain_lines(drain: &DrainExplain, now: i64) -> Vec<String> {
    use crate::drain::{STUCK_TERMINATING_SECONDS, plan_drain};
    let mut lines = Vec::new();
    for pod in &drain.pods {
        if let Some(at) = pod.deletion_timestamp
            && now - at > STUCK_TERMINATING_SECONDS
        {
            lines.push(format!(
                "pod {} terminating for {} past its deletion time, no longer waited for",
                pod.key(),
                crate::budget::compact_duration(now - at)
            ));
        }
    }
    let plan = plan_drain(&drain.pods, drain.deadline, now);
    for forced in &plan.delete {
        lines.push(format!(
            "pod {} deleted now with {}s of grace: the terminationGracePeriod ends at {}",
            forced.pod,
            forced.grace_period_seconds,
            drain.deadline.map(format_utc).unwrap_or_default()
        ));
    }
    for key in &plan.waiting_for {
        let Some(pod) = drain.pods.iter().find(|p| &p.key() == key) else {
            continue;
        };
        let why = if pod.terminating {
            "terminating".to_string()
        } else if pod.do_not_disrupt {
            "karpenter.sh/do-not-disrupt".to_string()
        } else if plan
            .wave
            .is_some_and(|w| w != crate::drain::DrainWave::of_pod(pod))
        {
            format!(
                "in a later wave than {}",
                plan.wave.map(|w| w.to_string()).unwrap_or_default()
            )
        } else {
            "its PodDisruptionBudget or pacing allows no eviction now".to_string()
        };
        lines.push(format!("waiting for pod {key}: {why}"));
    }
    if let Some(deadline) = drain.deadline {
        lines.push(format!(
            "terminationGracePeriod: every pod still here is deleted in time to be gone by {}",
            format_utc(deadline)
        ));
    }
    if plan.drained && !drain.volume_attachments.is_empty() {
        let past = drain.deadline.is_some_and(|d| now > d);
        lines.push(if past {
            format!(
                "{} VolumeAttachment(s) still attached ({}), no longer waited for: the terminationGracePeriod has ended",
                drain.volume_attachments.len(),
                drain.volume_attachments.join(", ")
            )
        } else {
            format!(
                "waiting for {} VolumeAttachment(s) to detach before the instance is terminated: {}",
                drain.volume_attachments.len(),
                drain.volume_attachments.join(", ")
            )
        });
    }
    if plan.drained && drain.volume_attachments.is_empty() {
        lines.push("drained: the instance is being terminated".to_string());
    }
    lines
}

/// Renders the explanation as text.
pub fn explain(input: &ExplainInput<'_>) -> String {
    let claim = input.nodeclaim;
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let mut out = String::new();
    let node = input.view.node.as_deref().unwrap_or("(not registered)");
    let _ = writeln!(
        out,
        "NodeClaim {name} (node {node}, nodepool {:?})",
        input.view.nodepool
    );

    // Drift.
    match claim.condition(CONDITION_DRIFTED).filter(|c| c.is_true()) {
        Some(c) => {
            let since = c
                .last_transition_time
                .as_ref()
                .map(|t| format_utc(t.0.as_second()))
                .unwrap_or_default();
            let _ = writeln!(out, "Drifted: yes, since {since}");
            let _ = writeln!(
                out,
                "  reason:  {}",
                c.reason.as_deref().unwrap_or_default()
            );
            let _ = writeln!(
                out,
                "  message: {}",
                c.message.as_deref().unwrap_or_default()
            );
        }
        None => {
            let _ = writeln!(out, "Drifted: no");
        }
    }
    for line in what_moved(input) {
        let _ = writeln!(out, "  {line}");
    }
    replacement(input, &mut out);
    if claim.metadata.deletion_timestamp.is_none() {
        consolidation(input, &mut out);
    }
    out
}

/// The replacement section: what drift's replacement of the node waits for.
fn replacement(input: &ExplainInput<'_>, out: &mut String) {
    let claim = input.nodeclaim;
    let _ = writeln!(out, "Replacement:");
    if claim.metadata.deletion_timestamp.is_some() {
        let _ = writeln!(out, "  being deleted: draining and terminating");
        for line in input.drain.iter().flat_map(|d| drain_lines(d, input.now)) {
            let _ = writeln!(out, "    {line}");
        }
        return;
    }
    if let Some(c) = claim.condition(CONDITION_DISRUPTION_REASON) {
        let replacements = crate::command::InFlight::replacements_of(claim).join(",");
        let _ = writeln!(
            out,
            "  in flight: {} — waiting for replacement(s) [{replacements}] to initialize, then this node is drained and deleted",
            c.message.as_deref().unwrap_or_default()
        );
        return;
    }
    if input.view.drift.is_none() {
        let _ = writeln!(out, "  nothing to do: the node is not drifted");
        return;
    }
    let mut blocked = false;
    if input.view.eventual {
        let _ = writeln!(
            out,
            "  drift is eventual: the NodeClaim has a terminationGracePeriod, so pods with do-not-disrupt or a PodDisruptionBudget at zero do not hold it; the drain honours them until the period ends"
        );
    }
    if let Err(reason) = check_candidate(input.view, input.pdb_allowed) {
        let _ = writeln!(out, "  blocked: {reason}");
        blocked = true;
    }
    if let Some(pool) = input.nodepool.filter(|p| p.rollout_paused()) {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let _ = writeln!(
            out,
            "  blocked: {}",
            crate::candidate::Blocked::Paused { nodepool: name }
        );
        blocked = true;
    }
    if let Some(pool) = input.nodepool {
        let members: Vec<&NodeView> = input.pool_views.iter().collect();
        let (total, disrupting) = budget_counts(budget_members(&members));
        let budget = allowed_disruptions(pool, REASON_DRIFTED, total, disrupting, input.now);
        let _ = writeln!(out, "  budget: {budget}");
        for b in budget.budgets.iter().filter(|b| b.applies && !b.active) {
            if let Some(at) = b.window_change_at {
                let _ = writeln!(
                    out,
                    "    budget[{}] (nodes: {:?}) is outside its window; it opens at {}",
                    b.index,
                    b.nodes,
                    format_utc(at)
                );
            }
        }
        if budget.allowed == 0 {
            let _ = writeln!(
                out,
                "  blocked: no allowed disruptions for reason Drifted in nodepool {:?} right now",
                budget.nodepool
            );
            blocked = true;
        }
    }
    if let Some(event) = input.last_blocked_event {
        let _ = writeln!(out, "  last controller verdict: {event}");
        blocked |= event.contains("not all pods would schedule");
    }
    if !blocked {
        let _ = writeln!(
            out,
            "  nothing blocks it: it will be replaced in the next disruption pass (about every 10s)"
        );
    }
}

/// The consolidation section: whether the node is Consolidatable, which method would take it,
/// and what holds it (policy, candidate filters, the reason's budget, the last verdict).
fn consolidation(input: &ExplainInput<'_>, out: &mut String) {
    use crate::consolidatable::{Consolidatable, consolidatable};
    use driftwood_api::wellknown::{
        CONDITION_CONSOLIDATABLE, CONDITION_INITIALIZED, REASON_EMPTY, REASON_UNDERUTILIZED,
    };
    let _ = writeln!(out, "Consolidation:");
    let claim = input.nodeclaim;
    let Some(pool) = input.nodepool else {
        let _ = writeln!(out, "  no: its NodePool was not found");
        return;
    };
    if pool.is_static() {
        let _ = writeln!(out, "  no: a static NodePool is never consolidated");
        return;
    }
    let disruption = &pool.spec.disruption;
    let _ = writeln!(
        out,
        "  policy: {}, consolidateAfter {}",
        disruption.consolidation_policy, disruption.consolidate_after.0
    );
    let after = disruption.consolidate_after.seconds().ok().flatten();
    let initialized_at = claim
        .condition(CONDITION_INITIALIZED)
        .filter(|c| c.is_true())
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0.as_second());
    let last_event = claim
        .status
        .as_ref()
        .and_then(|s| s.last_pod_event_time.as_ref())
        .map(|t| t.0.as_second());
    let shown = claim
        .condition(CONDITION_CONSOLIDATABLE)
        .filter(|c| c.is_true())
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| format_utc(t.0.as_second()));
    match (
        consolidatable(after, initialized_at, last_event, input.now),
        shown,
    ) {
        (_, Some(since)) => {
            let _ = writeln!(out, "  Consolidatable: yes, since {since}");
        }
        (Consolidatable::At(at), None) => {
            let _ = writeln!(
                out,
                "  Consolidatable: not yet — consolidateAfter runs from the last pod event ({}) until {}",
                last_event
                    .or(initialized_at)
                    .map(format_utc)
                    .unwrap_or_default(),
                format_utc(at)
            );
        }
        (Consolidatable::Yes, None) => {
            let _ = writeln!(
                out,
                "  Consolidatable: due — consolidateAfter has passed; the condition is set on the next pass"
            );
        }
        (Consolidatable::No, None) if after.is_none() => {
            let _ = writeln!(out, "  Consolidatable: no — consolidateAfter is Never");
            return;
        }
        (Consolidatable::No, None) => {
            let _ = writeln!(
                out,
                "  Consolidatable: no — the NodeClaim is not initialized"
            );
            return;
        }
    }
    let empty = crate::consolidation::cost::is_empty(input.view);
    let reason = if empty {
        let _ = writeln!(
            out,
            "  empty: yes — emptiness deletes it (no replacement), many such nodes per pass"
        );
        REASON_EMPTY
    } else {
        let moving = input.view.pods.iter().filter(|p| p.reschedulable).count();
        if disruption.consolidation_policy == driftwood_api::nodepool::CONSOLIDATION_WHEN_EMPTY {
            let _ = writeln!(
                out,
                "  kept: {moving} pod(s) to move and the policy is WhenEmpty (only empty nodes are consolidated)"
            );
            return;
        }
        let _ = writeln!(
            out,
            "  underutilized?: {moving} pod(s) would move; multi- and single-node consolidation delete it if they fit elsewhere, or replace it with one cheaper node"
        );
        REASON_UNDERUTILIZED
    };
    let graceful = NodeView {
        eventual: false,
        ..input.view.clone()
    };
    if let Err(why) = check_candidate(&graceful, input.pdb_allowed) {
        let _ = writeln!(out, "  blocked: {why}");
    }
    let members: Vec<&NodeView> = input.pool_views.iter().collect();
    let (total, disrupting) = budget_counts(budget_members(&members));
    let budget = allowed_disruptions(pool, reason, total, disrupting, input.now);
    let _ = writeln!(out, "  budget: {budget}");
    if budget.allowed == 0 {
        let _ = writeln!(
            out,
            "  blocked: no allowed disruptions for reason {reason} in nodepool {:?} right now",
            budget.nodepool
        );
    }
    if let Some(event) = input.last_unconsolidatable_event {
        let _ = writeln!(out, "  last controller verdict: {event}");
    }
}

/// The fields that moved, from the stamped per-field hashes and the class status.
fn what_moved(input: &ExplainInput<'_>) -> Vec<String> {
    let claim = input.nodeclaim;
    let changed = |keys: &StampKeys, current: &driftwood_api::hash::TemplateHashes, what: &str| {
        match stamp_comparison(claim, keys, current) {
            HashComparison::Changed { changed } if changed.is_empty() => {
                Some(format!("{what} changed since launch: unknown fields"))
            }
            HashComparison::Changed { changed } => Some(format!(
                "{what} changed since launch: {}",
                changed.join(", ")
            )),
            _ => None,
        }
    };
    let mut lines = Vec::new();
    if let Some(pool) = input.nodepool {
        lines.extend(changed(
            &NODEPOOL_STAMP,
            &nodepool_hashes(pool),
            "NodePool template",
        ));
    }
    if let Some(class) = input.nodeclass {
        lines.extend(changed(
            &NODECLASS_STAMP,
            // The hash controller stamps the class with what it computed (it knows the
            // cluster CA bundle); without its stamp, compute it without the CA.
            &stamped_hashes(class.metadata.annotations.as_ref(), &NODECLASS_STAMP)
                .unwrap_or_else(|| ec2nodeclass_hashes(class, "")),
            "EC2NodeClass spec",
        ));
        let image = claim.status.as_ref().and_then(|s| s.image_id.clone());
        let amis: Vec<String> = class
            .status
            .iter()
            .flat_map(|s| s.amis.iter().map(|a| a.id.clone()))
            .collect();
        if let Some(image) = image
            && !amis.is_empty()
            && !amis.contains(&image)
        {
            lines.push(format!(
                "AMI: node runs {image}; the class now resolves to {}",
                amis.join(", ")
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drift::{DriftFinding, nodepool_stamp};
    use driftwood_api::condition::{STATUS_TRUE, set_condition};
    use driftwood_api::nodeclaim::{NodeClaimSpec, NodeClaimStatus};
    use driftwood_api::nodepool::{Budget, NodePoolSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn time(s: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap())
    }

    fn setup() -> (NodePool, NodeClaim, NodeView) {
        let pool = NodePool::new("default", NodePoolSpec::default());
        let mut claim = NodeClaim::new("default-abcde", NodeClaimSpec::default());
        claim.metadata.annotations = Some(nodepool_stamp(&nodepool_hashes(&pool)));
        let mut status = NodeClaimStatus::default();
        set_condition(
            &mut status.conditions,
            CONDITION_DRIFTED,
            STATUS_TRUE,
            "NodePoolDrifted",
            "NodePool \"default\" template changed: spec.template.metadata.labels",
            time(1000),
            None,
        );
        claim.status = Some(status);
        let view = NodeView {
            nodeclaim: "default-abcde".into(),
            node: Some("ip-10-0-1-1".into()),
            nodepool: "default".into(),
            initialized: true,
            ready: true,
            drift: Some((
                1000,
                DriftFinding {
                    reason: "NodePoolDrifted".into(),
                    message: "m".into(),
                },
            )),
            ..Default::default()
        };
        (pool, claim, view)
    }

    #[test]
    fn names_the_changed_field_and_the_blocking_window() {
        let (mut pool, claim, view) = setup();
        pool.spec
            .template
            .metadata
            .labels
            .insert("team".into(), "x".into());
        pool.spec.disruption.budgets = vec![Budget {
            nodes: "0".into(),
            schedule: Some("0 9 * * *".into()),
            duration: Some("8h".into()),
            reasons: Some(vec!["Drifted".into()]),
        }];
        let now = driftwood_api::cron::days_from_civil(2026, 11, 21) * 86_400 + 10 * 3600;
        let text = explain(&ExplainInput {
            nodeclaim: &claim,
            view: &view,
            nodepool: Some(&pool),
            nodeclass: None,
            pool_views: std::slice::from_ref(&view),
            pdb_allowed: &BTreeMap::new(),
            last_unconsolidatable_event: None,
            last_blocked_event: None,
            now,
            drain: None,
        });
        assert!(
            text.contains("Drifted: yes, since 1970-01-01T00:16:40Z"),
            "{text}"
        );
        assert!(
            text.contains("NodePool template changed since launch: labels"),
            "{text}"
        );
        assert!(text.contains("blocked: no allowed disruptions"), "{text}");
        assert!(
            text.contains("window closes at 2026-11-21T17:00:00Z"),
            "{text}"
        );
    }

    /// Issue 28: explain says whether a node is Consolidatable, when it will be, which method
    /// would take it, and what holds it (policy, budget by reason, the last verdict).
    #[test]
    fn consolidation_is_explained() {
        let (mut pool, mut claim, mut view) = setup();
        view.drift = None;
        pool.spec.disruption.consolidate_after =
            driftwood_api::duration::NillableDuration("1m".into());
        let status = claim.status.get_or_insert_with(Default::default);
        status.conditions.clear();
        set_condition(
            &mut status.conditions,
            driftwood_api::wellknown::CONDITION_INITIALIZED,
            STATUS_TRUE,
            "Initialized",
            "",
            time(900),
            None,
        );
        status.last_pod_event_time = Some(time(1000));
        let text = |claim: &NodeClaim, view: &NodeView, pool: &NodePool, verdict| {
            explain(&ExplainInput {
                nodeclaim: claim,
                view,
                nodepool: Some(pool),
                nodeclass: None,
                pool_views: std::slice::from_ref(view),
                pdb_allowed: &BTreeMap::new(),
                last_unconsolidatable_event: verdict,
                last_blocked_event: None,
                now: 1030,
                drain: None,
            })
        };
        let out = text(&claim, &view, &pool, None);
        assert!(
            out.contains("policy: WhenEmptyOrUnderutilized, consolidateAfter 1m"),
            "{out}"
        );
        assert!(out.contains("Consolidatable: not yet"), "{out}");
        assert!(out.contains(&format_utc(1060)), "{out}");
        set_condition(
            &mut claim.status.as_mut().unwrap().conditions,
            driftwood_api::wellknown::CONDITION_CONSOLIDATABLE,
            STATUS_TRUE,
            "Consolidatable",
            "",
            time(1060),
            None,
        );
        view.consolidatable = true;
        let out = text(&claim, &view, &pool, None);
        assert!(out.contains("Consolidatable: yes"), "{out}");
        assert!(out.contains("empty: yes — emptiness deletes it"), "{out}");
        assert!(out.contains("Empty disruption(s)"), "{out}");
        view.pods = vec![crate::candidate::PodView {
            key: "default/web-1".into(),
            reschedulable: true,
            ..Default::default()
        }];
        let out = text(
            &claim,
            &view,
            &pool,
            Some("Can't replace with a cheaper node"),
        );
        assert!(out.contains("underutilized?: 1 pod(s) would move"), "{out}");
        assert!(
            out.contains("last controller verdict: Can't replace with a cheaper node"),
            "{out}"
        );
        pool.spec.disruption.consolidation_policy = "WhenEmpty".into();
        let out = text(&claim, &view, &pool, None);
        assert!(
            out.contains("kept: 1 pod(s) to move and the policy is WhenEmpty"),
            "{out}"
        );
        pool.spec.disruption.consolidate_after = driftwood_api::duration::NillableDuration::never();
        claim
            .status
            .as_mut()
            .unwrap()
            .conditions
            .retain(|c| c.type_ != "Consolidatable");
        let out = text(&claim, &view, &pool, None);
        assert!(
            out.contains("Consolidatable: no — consolidateAfter is Never"),
            "{out}"
        );
    }

    #[test]
    fn pdb_and_do_not_disrupt_are_named() {
        let (pool, claim, mut view) = setup();
        view.pods = vec![crate::candidate::PodView {
            key: "default/web-1".into(),
            reschedulable: true,
            pdbs: vec!["default/web".into()],
            ..Default::default()
        }];
        let pdbs = BTreeMap::from([("default/web".to_string(), 0)]);
        let text = explain(&ExplainInput {
            nodeclaim: &claim,
            view: &view,
            nodepool: Some(&pool),
            nodeclass: None,
            pool_views: std::slice::from_ref(&view),
            pdb_allowed: &pdbs,
            last_unconsolidatable_event: None,
            last_blocked_event: None,
            now: 2000,
            drain: None,
        });
        assert!(
            text.contains(
                "blocked: Cannot disrupt NodeClaim: pdb \"default/web\" prevents pod evictions"
            ),
            "{text}"
        );
        view.pods[0].do_not_disrupt = true;
        let text = explain(&ExplainInput {
            nodeclaim: &claim,
            view: &view,
            nodepool: Some(&pool),
            nodeclass: None,
            pool_views: std::slice::from_ref(&view),
            pdb_allowed: &pdbs,
            last_unconsolidatable_event: None,
            last_blocked_event: Some(
                "Cannot disrupt NodeClaim: not all pods would schedule, default/web-1 => incompatible",
            ),
            now: 2000,
            drain: None,
        });
        assert!(
            text.contains("has \"karpenter.sh/do-not-disrupt\" annotation"),
            "{text}"
        );
        assert!(
            text.contains(
                "last controller verdict: Cannot disrupt NodeClaim: not all pods would schedule"
            ),
            "{text}"
        );
    }

    #[test]
    fn free_to_go_and_in_flight() {
        let (pool, mut claim, view) = setup();
        let input = |claim: &NodeClaim| {
            explain(&ExplainInput {
                nodeclaim: claim,
                view: &view,
                nodepool: Some(&pool),
                nodeclass: None,
                pool_views: std::slice::from_ref(&view),
                pdb_allowed: &BTreeMap::new(),
                last_unconsolidatable_event: None,
                last_blocked_event: None,
                now: 2000,
                drain: None,
            })
        };
        assert!(
            input(&claim).contains("nothing blocks it"),
            "{}",
            input(&claim)
        );
        let status = claim.status.as_mut().unwrap();
        set_condition(
            &mut status.conditions,
            CONDITION_DISRUPTION_REASON,
            STATUS_TRUE,
            "Drifted",
            "NodePoolDrifted: m",
            time(1500),
            None,
        );
        claim.metadata.annotations.as_mut().unwrap().insert(
            driftwood_api::wellknown::ANNOTATION_DISRUPTION_REPLACEMENTS.into(),
            "default-xyz12".into(),
        );
        let text = input(&claim);
        assert!(
            text.contains("in flight") && text.contains("[default-xyz12]"),
            "{text}"
        );
    }

    /// Issue 14: explain names the drain rule acting on a node being deleted.
    #[test]
    fn drain_rules_are_named() {
        use crate::drain::DrainPod;
        let pod = |name: &str| DrainPod {
            namespace: "default".into(),
            name: name.into(),
            grace_period_seconds: 30,
            ..Default::default()
        };
        let now = 10_000;
        let drain = DrainExplain {
            pods: vec![
                DrainPod {
                    terminating: true,
                    deletion_timestamp: Some(now - 180),
                    ..pod("stuck")
                },
                DrainPod {
                    do_not_disrupt: true,
                    ..pod("precious")
                },
            ],
            deadline: Some(now + 600),
            volume_attachments: vec!["csi-a".into(), "csi-b".into()],
        };
        let lines = drain_lines(&drain, now).join("\n");
        assert!(
            lines.contains(
                "pod default/stuck terminating for 3m past its deletion time, no longer waited for"
            ),
            "{lines}"
        );
        assert!(
            lines.contains("waiting for pod default/precious: karpenter.sh/do-not-disrupt"),
            "{lines}"
        );
        assert!(lines.contains("terminationGracePeriod"), "{lines}");
        // Once the pods are gone, the volumes are what termination waits for.
        let drained = DrainExplain {
            pods: Vec::new(),
            ..drain.clone()
        };
        let lines = drain_lines(&drained, now).join("\n");
        assert!(
            lines.contains("waiting for 2 VolumeAttachment(s) to detach before the instance is terminated: csi-a, csi-b"),
            "{lines}"
        );
        let late = drain_lines(&drained, now + 601).join("\n");
        assert!(late.contains("no longer waited for"), "{late}");
    }

    #[test]
    fn a_paused_rollout_is_named_as_what_holds_the_node() {
        let (mut pool, claim, view) = setup();
        let input = |pool: &NodePool| {
            explain(&ExplainInput {
                nodeclaim: &claim,
                view: &view,
                nodepool: Some(pool),
                nodeclass: None,
                pool_views: std::slice::from_ref(&view),
                pdb_allowed: &BTreeMap::new(),
                last_unconsolidatable_event: None,
                last_blocked_event: None,
                now: 2000,
                drain: None,
            })
        };
        assert!(!input(&pool).contains("paused"), "{}", input(&pool));
        pool.metadata.annotations = Some(BTreeMap::from([(
            driftwood_api::wellknown::ANNOTATION_ROLLOUT_PAUSED.to_string(),
            "true".to_string(),
        )]));
        let text = input(&pool);
        assert!(
            text.contains(
                "blocked: Cannot disrupt NodeClaim: the rollout of nodepool \"default\" is paused"
            ),
            "{text}"
        );
    }
}
