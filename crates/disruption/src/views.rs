//! Builds the planners' views from Kubernetes objects: NodeClaim + Node + its pods + PDBs →
//! [`NodeView`], a pod → [`DrainPod`], PDBs → disruptionsAllowed by key.

use crate::cached_pod::CachedPod;
use crate::candidate::{NodeView, PodView};
use crate::drain::DrainPod;
use crate::drift::DriftFinding;
use driftwood_api::condition::Conditions;
use driftwood_api::nodeclaim::NodeClaim;
use driftwood_api::wellknown::{
    ANNOTATION_DO_NOT_DISRUPT, ANNOTATION_DO_NOT_REPAIR, CONDITION_CONSOLIDATABLE,
    CONDITION_DISRUPTION_REASON, CONDITION_DRIFTED, CONDITION_INITIALIZED, LABEL_NODEPOOL,
    TAINT_DISRUPTED_KEY,
};
use driftwood_scheduling::pod::label_selector;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use std::collections::BTreeMap;

pub use crate::cached_pod::ANNOTATION_MIRROR_POD;
/// Priority classes whose pods are drained last.
pub const CRITICAL_PRIORITY_CLASSES: &[&str] = &["system-cluster-critical", "system-node-critical"];

fn key(namespace: Option<&String>, name: Option<&String>) -> String {
    format!(
        "{}/{}",
        namespace.map_or("", String::as_str),
        name.map_or("", String::as_str)
    )
}

fn annotated_true(annotations: Option<&BTreeMap<String, String>>, key: &str) -> bool {
    annotations
        .and_then(|a| a.get(key))
        .is_some_and(|v| v == "true")
}

/// Owned by a DaemonSet.
pub fn is_daemonset_pod(pod: &CachedPod) -> bool {
    pod.is_daemonset()
}

/// A static pod (its mirror in the API): owned by its Node (ownerReference `v1` `Node`, as the
/// kubelet sets it; Karpenter's IsOwnedByNode), or annotated `kubernetes.io/config.mirror`. The
/// kubelet owns it: it is never evicted, never rescheduled and left out of the PDB check.
pub fn is_mirror_pod(pod: &CachedPod) -> bool {
    pod.shape.mirror
}

/// A pod that moves when its node goes: neither terminal nor terminating, nor a DaemonSet's,
/// nor a static pod. Karpenter's IsReschedulable also takes a terminating StatefulSet pod
/// (its replacement must wait for it to go); the planner here does not simulate pods already
/// terminating.
pub fn is_reschedulable(pod: &CachedPod) -> bool {
    !pod.is_terminating() && !is_terminal_pod(pod) && !is_daemonset_pod(pod) && !is_mirror_pod(pod)
}

/// Phase Succeeded or Failed.
pub fn is_terminal_pod(pod: &CachedPod) -> bool {
    pod.is_terminal()
}

/// Whether the pod tolerates karpenter.sh/disrupted:NoSchedule.
pub fn tolerates_disrupted(pod: &CachedPod) -> bool {
    pod.shape.tolerates_disrupted
}

/// Whether `pdb` covers `pod`: same namespace, and its selector (matchLabels and
/// matchExpressions) matches the pod's labels. A PDB without a selector covers nothing.
pub fn pdb_selects(pdb: &PodDisruptionBudget, pod: &CachedPod) -> bool {
    if pdb.metadata.namespace.as_deref().unwrap_or_default() != pod.namespace() {
        return false;
    }
    let selector = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
    matches!(label_selector(selector), Ok(Some(requirements)) if requirements.matches_labels(pod.labels()))
}

/// The keys (namespace/name) of the PDBs whose selector matches `pod`.
pub fn matching_pdbs(pod: &CachedPod, pdbs: &[PodDisruptionBudget]) -> Vec<String> {
    pdbs.iter()
        .filter(|pdb| pdb_selects(pdb, pod))
        .map(|pdb| key(pdb.metadata.namespace.as_ref(), pdb.metadata.name.as_ref()))
        .collect()
}

/// disruptionsAllowed of each PDB by namespace/name (0 when the status is not computed yet).
pub fn pdb_allowed(pdbs: &[PodDisruptionBudget]) -> BTreeMap<String, i32> {
    pdbs.iter()
        .map(|pdb| {
            let allowed = pdb.status.as_ref().map_or(0, |s| s.disruptions_allowed);
            (
                key(pdb.metadata.namespace.as_ref(), pdb.metadata.name.as_ref()),
                allowed,
            )
        })
        .collect()
}

/// Whether a pod's `karpenter.sh/do-not-disrupt` annotation protects it at `now` (UTC seconds),
/// as Karpenter reads it: `"true"` forever; a Go duration (`"30m"`, `"1h30m"`, Karpenter v1.12+)
/// for that long after the pod started (`status.startTime`; a pod not started yet is
/// protected); anything else — not a duration, zero or negative — is ignored.
pub fn pod_do_not_disrupt(pod: &CachedPod, now: i64) -> bool {
    let Some(value) = pod.shape.do_not_disrupt.as_deref() else {
        return false;
    };
    if value == "true" {
        return true;
    }
    let Ok(seconds) = driftwood_api::duration::parse_go_duration(value) else {
        return false;
    };
    if seconds == 0 {
        return false;
    }
    let started = pod.started.map(|t| t.as_second());
    started.is_none_or(|start| now - start < i64::try_from(seconds).unwrap_or(i64::MAX))
}

/// Whether the pod reports Ready=False (a pod with no Ready condition is not unhealthy).
fn explicitly_not_ready(pod: &CachedPod) -> bool {
    pod.ready.is_some_and(|c| c.is_false)
}

/// Whether `pdb` can never allow an eviction, whatever its status says (Karpenter's fully
/// blocking PDB): `maxUnavailable: 0` or `"0%"`, or `minAvailable: "100%"`.
pub fn pdb_fully_blocking(pdb: &PodDisruptionBudget) -> bool {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let Some(spec) = pdb.spec.as_ref() else {
        return false;
    };
    matches!(spec.max_unavailable.as_ref(), Some(IntOrString::Int(0)))
        || matches!(spec.max_unavailable.as_ref(), Some(IntOrString::String(s)) if s == "0%")
        || matches!(spec.min_available.as_ref(), Some(IntOrString::String(s)) if s == "100%")
}

/// Whether a pod on a node being deleted needs room elsewhere now, so the provisioner launches
/// for it before it is evicted (Karpenter's IsCurrentlyReschedulable): active, or a
/// StatefulSet's pod already terminating (its replacement cannot start before it is gone); not
/// a DaemonSet's or static pod; not protected by `karpenter.sh/do-not-disrupt` at `now`; and
/// not held by PDBs that can never let it go (a fully blocking PDB, or several PDBs on one
/// evictable pod). Capacity for a pod that will not leave would stand empty.
pub fn is_currently_reschedulable(pod: &CachedPod, pdbs: &[PodDisruptionBudget], now: i64) -> bool {
    let terminating = pod.is_terminating();
    let active = !terminating && !is_terminal_pod(pod);
    let statefulset_leaving = terminating && pod.has_owner_kind("StatefulSet");
    if !(active || statefulset_leaving) || is_daemonset_pod(pod) || is_mirror_pod(pod) {
        return false;
    }
    if pod_do_not_disrupt(pod, now) {
        return false;
    }
    let evictable = active && !tolerates_disrupted(pod);
    if !evictable {
        return true;
    }
    let matching: Vec<&PodDisruptionBudget> =
        pdbs.iter().filter(|pdb| pdb_selects(pdb, pod)).collect();
    if matching.len() > 1 {
        return false;
    }
    matching.into_iter().all(|pdb| {
        let evicts_unhealthy = pdb
            .spec
            .as_ref()
            .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
            == Some("AlwaysAllow")
            && explicitly_not_ready(pod);
        evicts_unhealthy || !pdb_fully_blocking(pdb)
    })
}

/// A pod as the disruption planner sees it at `now` (UTC seconds).
pub fn pod_view(pod: &CachedPod, pdbs: &[PodDisruptionBudget], now: i64) -> PodView {
    let terminating = pod.is_terminating();
    let active = !terminating && !is_terminal_pod(pod);
    let matching = matching_pdbs(pod, pdbs);
    let always_allow = |key: &String| {
        pdbs.iter().any(|pdb| {
            &self::key(pdb.metadata.namespace.as_ref(), pdb.metadata.name.as_ref()) == key
                && pdb
                    .spec
                    .as_ref()
                    .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
                    == Some("AlwaysAllow")
        })
    };
    PodView {
        key: pod.key(),
        reschedulable: is_reschedulable(pod),
        do_not_disrupt: active && pod_do_not_disrupt(pod, now),
        pdb_exempt: !active || is_mirror_pod(pod) || tolerates_disrupted(pod),
        unhealthy_evictable: matching.len() == 1
            && explicitly_not_ready(pod)
            && matching.first().is_some_and(always_allow),
        pdbs: matching,
        deletion_cost: pod.shape.deletion_cost,
        priority: pod.shape.priority,
    }
}

/// A pod as drain sees it at `now` (UTC seconds).
pub fn drain_pod(pod: &CachedPod, now: i64) -> DrainPod {
    DrainPod {
        namespace: pod.namespace().to_string(),
        name: pod.name.to_string(),
        daemonset: is_daemonset_pod(pod),
        mirror: is_mirror_pod(pod),
        terminal: is_terminal_pod(pod),
        terminating: pod.is_terminating(),
        deletion_timestamp: pod.deleted.map(|t| t.as_second()),
        critical: pod
            .shape
            .priority_class_name
            .as_deref()
            .is_some_and(|c| CRITICAL_PRIORITY_CLASSES.contains(&c)),
        tolerates_disrupted: tolerates_disrupted(pod),
        do_not_disrupt: pod_do_not_disrupt(pod, now),
        grace_period_seconds: pod.shape.grace_period_seconds,
        owner: controller_key(pod),
        pdb_protected: false,
    }
}

/// `Kind/namespace/name` of the pod's ReplicaSet or StatefulSet controller.
pub fn controller_key(pod: &CachedPod) -> Option<String> {
    pod.shape
        .owners
        .iter()
        .find(|o| matches!(o.kind.as_str(), "ReplicaSet" | "StatefulSet"))
        .map(|o| format!("{}/{}/{}", o.kind, pod.namespace(), o.name))
}

/// How long a pod may be not Ready and still count as "on its way" (a replacement starting).
/// Pods not Ready for longer are broken for reasons of their own and do not hold a drain.
pub const STARTING_WINDOW_SECONDS: i64 = 300;

/// Availability of every ReplicaSet/StatefulSet from all pods at `now` (UTC seconds): how many
/// exist, and how many are terminating or are not Ready yet but were created within the
/// starting window.
pub fn owner_availability<'a>(
    pods: impl IntoIterator<Item = &'a CachedPod>,
    now: i64,
) -> BTreeMap<String, crate::drain::OwnerAvailability> {
    let mut out: BTreeMap<String, crate::drain::OwnerAvailability> = BTreeMap::new();
    for pod in pods {
        if is_terminal_pod(pod) {
            continue;
        }
        let Some(owner) = controller_key(pod) else {
            continue;
        };
        let ready = !pod.is_terminating() && pod.is_ready();
        // A pod still terminating long past its deletion time (a finalizer nobody removes, a
        // hung runtime) is one the drain no longer waits for and its controller has already
        // replaced: counting it as unavailable would hold every later eviction of its owner
        // back for ever (found by `driftwood chaos`, seed 20 of update-nodes-with-drift).
        let stuck = pod
            .deleted
            .is_some_and(|t| now - t.as_second() > crate::drain::STUCK_TERMINATING_SECONDS);
        if stuck {
            continue;
        }
        let terminating = pod.is_terminating();
        let young = pod
            .created
            .is_some_and(|t| now - t.as_second() < STARTING_WINDOW_SECONDS);
        let entry = out.entry(owner).or_default();
        entry.total += 1;
        entry.unavailable += usize::from(terminating || (!ready && young));
    }
    out
}

/// When a deleted NodeClaim's terminationGracePeriod ends (UTC seconds): Karpenter's
/// termination-timestamp annotation, else deletion time + period. None without a period.
pub fn termination_deadline(nodeclaim: &NodeClaim) -> Option<i64> {
    if let Some(stamped) =
        nodeclaim.metadata.annotations.as_ref().and_then(|a| {
            a.get(driftwood_api::wellknown::ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP)
        })
    {
        return stamped
            .parse::<k8s_openapi::jiff::Timestamp>()
            .ok()
            .map(|t| t.as_second());
    }
    let grace = driftwood_api::duration::parse_go_duration(
        nodeclaim.spec.termination_grace_period.as_deref()?,
    )
    .ok()?;
    let deleted = nodeclaim
        .metadata
        .deletion_timestamp
        .as_ref()?
        .0
        .as_second();
    deleted.checked_add(i64::try_from(grace).ok()?)
}

/// What `explain` shows of a deleted NodeClaim's drain: its node's pods, the deadline, and the
/// node's VolumeAttachments of persistent volumes still attached (by name).
pub fn drain_explain(
    nodeclaim: &NodeClaim,
    pods: &[&CachedPod],
    pdbs: &[PodDisruptionBudget],
    volume_attachments: Vec<String>,
    now: i64,
) -> crate::explain::DrainExplain {
    crate::explain::DrainExplain {
        pods: pods
            .iter()
            .map(|p| DrainPod {
                pdb_protected: !matching_pdbs(p, pdbs).is_empty(),
                ..drain_pod(p, now)
            })
            .collect(),
        deadline: termination_deadline(nodeclaim),
        volume_attachments,
    }
}

/// A managed node as the disruption planner sees it.
pub fn node_view(
    nodeclaim: &NodeClaim,
    node: Option<&Node>,
    pods: &[&CachedPod],
    pdbs: &[PodDisruptionBudget],
    now: i64,
) -> NodeView {
    let node_ready = node
        .and_then(|n| n.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    let node_tainted = node
        .and_then(|n| n.spec.as_ref())
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|taints| taints.iter().any(|t| t.key == TAINT_DISRUPTED_KEY));
    let do_not_disrupt = if node
        .is_some_and(|n| annotated_true(n.metadata.annotations.as_ref(), ANNOTATION_DO_NOT_DISRUPT))
    {
        Some("Node")
    } else if annotated_true(
        nodeclaim.metadata.annotations.as_ref(),
        ANNOTATION_DO_NOT_DISRUPT,
    ) {
        Some("NodeClaim")
    } else {
        None
    };
    let drift = nodeclaim
        .condition(CONDITION_DRIFTED)
        .filter(|c| c.is_true())
        .map(|c| {
            let since = c
                .last_transition_time
                .as_ref()
                .map_or(0, |t| t.0.as_second());
            let finding = DriftFinding {
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
            };
            (since, finding)
        });
    NodeView {
        nodeclaim: nodeclaim.metadata.name.clone().unwrap_or_default(),
        node: node.and_then(|n| n.metadata.name.clone()),
        nodepool: nodeclaim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_NODEPOOL))
            .cloned()
            .unwrap_or_default(),
        initialized: nodeclaim.is_true(CONDITION_INITIALIZED),
        ready: node_ready,
        deleting: nodeclaim.metadata.deletion_timestamp.is_some()
            || node.is_some_and(|n| n.metadata.deletion_timestamp.is_some()),
        disrupting: node_tainted || nodeclaim.condition(CONDITION_DISRUPTION_REASON).is_some(),
        disruption_reason: nodeclaim
            .condition(CONDITION_DISRUPTION_REASON)
            .and_then(|c| c.reason.clone()),
        do_not_disrupt,
        drift,
        pods: pods.iter().map(|p| pod_view(p, pdbs, now)).collect(),
        consolidatable: nodeclaim.is_true(CONDITION_CONSOLIDATABLE),
        unhealthy: None,
        do_not_repair: node.is_some_and(|n| {
            annotated_true(n.metadata.annotations.as_ref(), ANNOTATION_DO_NOT_REPAIR)
        }) || annotated_true(
            nodeclaim.metadata.annotations.as_ref(),
            ANNOTATION_DO_NOT_REPAIR,
        ),
        eventual: nodeclaim.spec.termination_grace_period.is_some(),
        replacements: crate::command::InFlight::replacements_of(nodeclaim),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use k8s_openapi::api::core::v1::Pod;

    fn typed(yaml: &str) -> Pod {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn pod(yaml: &str) -> CachedPod {
        CachedPod::from(&typed(yaml))
    }

    fn pdb(yaml: &str) -> PodDisruptionBudget {
        serde_yaml::from_str(yaml).unwrap()
    }

    const APP: &str = "metadata: {name: app-1, namespace: default, labels: {app: web}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: u}]}\nspec: {containers: [{name: c}]}\nstatus: {phase: Running}";

    /// Karpenter's scheduling suite, "Deleting Nodes": which pods of a node being deleted the
    /// provisioner launches for. "should re-schedule pods from a deleting node when pods are
    /// active"; "should not ... when pods are not active" (a ReplicaSet's terminating pod);
    /// "... owned by a DaemonSet"; "should reschedule ... not active and they are owned by a
    /// StatefulSet"; "should not reschedule ... blocked due to fully blocking PDBs" (0 max
    /// unavailable, 0%, 100% min available, multiple PDBs on the same pod).
    #[test]
    fn deleting_node_pods_reschedulable_like_karpenters_deleting_nodes_cases() {
        let active = pod(APP);
        assert!(is_currently_reschedulable(&active, &[], 0));
        let terminating = |kind: &str| {
            pod(&format!(
                "metadata: {{name: p, namespace: default, labels: {{app: web}}, deletionTimestamp: '2026-01-01T00:00:00Z', ownerReferences: [{{apiVersion: apps/v1, kind: {kind}, name: o, uid: u}}]}}\nspec: {{containers: [{{name: c}}]}}\nstatus: {{phase: Running}}"
            ))
        };
        assert!(!is_currently_reschedulable(
            &terminating("ReplicaSet"),
            &[],
            0
        ));
        assert!(!is_currently_reschedulable(
            &terminating("DaemonSet"),
            &[],
            0
        ));
        assert!(is_currently_reschedulable(
            &terminating("StatefulSet"),
            &[],
            0
        ));
        let ds = pod(
            "metadata: {name: ds-1, namespace: default, ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: ds, uid: u}]}\nspec: {containers: [{name: c}]}\nstatus: {phase: Running}",
        );
        assert!(!is_currently_reschedulable(&ds, &[], 0));
        let budget = |name: &str, rule: &str| {
            pdb(&format!(
                "metadata: {{name: {name}, namespace: default}}\nspec: {{selector: {{matchLabels: {{app: web}}}}, {rule}}}\nstatus: {{disruptionsAllowed: 0, currentHealthy: 1, desiredHealthy: 1, expectedPods: 1}}"
            ))
        };
        for rule in [
            "maxUnavailable: 0",
            "maxUnavailable: '0%'",
            "minAvailable: '100%'",
        ] {
            assert!(
                !is_currently_reschedulable(&active, &[budget("b", rule)], 0),
                "{rule} blocks for good"
            );
        }
        let two = [
            budget("pdb-1", "minAvailable: 1"),
            budget("pdb-2", "minAvailable: 1"),
        ];
        assert!(!is_currently_reschedulable(&active, &two, 0));
        // A PDB at zero only for now (minAvailable: 1 of 1) lets the pod go later: capacity is
        // launched for it, as Karpenter's filter looks at the rule, not the status.
        assert!(is_currently_reschedulable(
            &active,
            &[budget("b", "minAvailable: 1")],
            0
        ));
        // Protected by do-not-disrupt: never evicted, so nothing is launched for it.
        let protected = pod(
            "metadata: {name: app-2, namespace: default, annotations: {karpenter.sh/do-not-disrupt: 'true'}}\nspec: {containers: [{name: c}]}\nstatus: {phase: Running}",
        );
        assert!(!is_currently_reschedulable(&protected, &[], 0));
    }

    #[test]
    fn pdbs_match_by_selector_and_namespace() {
        let pdbs = vec![
            pdb(
                "metadata: {name: web, namespace: default}\nspec: {selector: {matchLabels: {app: web}}}\nstatus: {disruptionsAllowed: 1, currentHealthy: 3, desiredHealthy: 2, expectedPods: 3}",
            ),
            pdb(
                "metadata: {name: other, namespace: default}\nspec: {selector: {matchLabels: {app: db}}}",
            ),
            pdb(
                "metadata: {name: web, namespace: prod}\nspec: {selector: {matchLabels: {app: web}}}",
            ),
            pdb("metadata: {name: all, namespace: default}\nspec: {selector: {}}"),
        ];
        assert_eq!(
            matching_pdbs(&pod(APP), &pdbs),
            vec!["default/web", "default/all"]
        );
        let allowed = pdb_allowed(&pdbs);
        assert_eq!(allowed["default/web"], 1);
        assert_eq!(allowed["default/other"], 0);
    }

    /// matchExpressions count with matchLabels: `Exists` on a label the pod lacks excludes it,
    /// `NotIn` a value it does not have keeps it.
    #[test]
    fn pdb_selectors_read_match_expressions() {
        let web = pod(APP);
        let with = |expressions: &str| {
            pdb(&format!(
                "metadata: {{name: p, namespace: default}}\nspec: {{selector: {{matchLabels: {{app: web}}, matchExpressions: [{expressions}]}}}}"
            ))
        };
        assert!(pdb_selects(&with(""), &web));
        assert!(!pdb_selects(&with("{key: tier, operator: Exists}"), &web));
        assert!(pdb_selects(
            &with("{key: tier, operator: NotIn, values: [db]}"),
            &web
        ));
        assert!(!pdb_selects(
            &pdb("metadata: {name: none, namespace: default}\nspec: {}"),
            &web
        ));
    }

    /// Karpenter's PDB utils: the evictable set (DaemonSet pods checked; tolerating the
    /// disrupted taint, mirror and finished pods exempt) and `unhealthyPodEvictionPolicy:
    /// AlwaysAllow` letting an explicitly not-ready pod through.
    #[test]
    fn pdb_exemptions_follow_karpenters_evictable_set() {
        let pdbs = vec![pdb(
            "metadata: {name: web, namespace: default}\nspec: {selector: {matchLabels: {app: web}}, unhealthyPodEvictionPolicy: AlwaysAllow}",
        )];
        let healthy = pod(APP);
        let v = pod_view(&healthy, &pdbs, 0);
        assert!(!v.pdb_exempt && !v.unhealthy_evictable);
        let mut unready = typed(APP);
        unready.status.as_mut().unwrap().conditions =
            Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "Ready".into(),
                status: "False".into(),
                ..Default::default()
            }]);
        let unready = CachedPod::from(&unready);
        assert!(pod_view(&unready, &pdbs, 0).unhealthy_evictable);
        let without_policy = vec![pdb(
            "metadata: {name: web, namespace: default}\nspec: {selector: {matchLabels: {app: web}}}",
        )];
        assert!(!pod_view(&unready, &without_policy, 0).unhealthy_evictable);
        let tolerating = pod(
            "metadata: {name: app-2, namespace: default, labels: {app: web}}\nspec: {containers: [{name: c}], tolerations: [{key: karpenter.sh/disrupted, operator: Exists}]}\nstatus: {phase: Running}",
        );
        assert!(pod_view(&tolerating, &pdbs, 0).pdb_exempt);
        let daemon = pod(
            "metadata: {name: ds-1, namespace: default, labels: {app: web}, ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: ds, uid: u}]}\nspec: {containers: [{name: c}]}\nstatus: {phase: Running}",
        );
        let v = pod_view(&daemon, &pdbs, 0);
        assert!(
            !v.reschedulable && !v.pdb_exempt,
            "DaemonSet pods are PDB-checked"
        );
    }

    #[test]
    fn pod_kinds() {
        let app = pod(APP);
        let view = pod_view(&app, &[], 0);
        assert!(view.reschedulable && !view.do_not_disrupt);
        let ds = pod(
            "metadata: {name: ds-1, namespace: kube-system, ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: ds, uid: u}]}\nspec: {containers: [{name: c}], priorityClassName: system-node-critical}",
        );
        assert!(!pod_view(&ds, &[], 0).reschedulable);
        let d = drain_pod(&ds, 0);
        assert!(d.daemonset && d.critical);
        let done = pod(
            "metadata: {name: job, namespace: default, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}\nspec: {containers: [{name: c}]}\nstatus: {phase: Succeeded}",
        );
        let v = pod_view(&done, &[], 0);
        assert!(
            !v.reschedulable && !v.do_not_disrupt,
            "finished pods neither move nor block"
        );
        assert!(drain_pod(&done, 0).terminal);
        let mirror = pod(
            "metadata: {name: static, namespace: kube-system, annotations: {kubernetes.io/config.mirror: abc}}\nspec: {containers: [{name: c}]}",
        );
        assert!(drain_pod(&mirror, 0).mirror && !pod_view(&mirror, &[], 0).reschedulable);
        // Karpenter's IsOwnedByNode: a pod owned by its Node is static without the annotation
        // (never evicted, never moved, out of the PDB check); another owner named Node is not.
        let owned = pod(
            "metadata: {name: static, namespace: kube-system, labels: {app: web}, ownerReferences: [{apiVersion: v1, kind: Node, name: ip-10-0-0-1, uid: u}]}\nspec: {containers: [{name: c}]}",
        );
        let view = pod_view(&owned, &[], 0);
        assert!(drain_pod(&owned, 0).mirror && !view.reschedulable && view.pdb_exempt);
        let custom = pod(
            "metadata: {name: c, namespace: default, ownerReferences: [{apiVersion: example.com/v1, kind: Node, name: n, uid: u}]}\nspec: {containers: [{name: c}]}",
        );
        assert!(!drain_pod(&custom, 0).mirror && pod_view(&custom, &[], 0).reschedulable);
    }

    #[test]
    fn owner_availability_counts_starting_and_terminating_pods_only() {
        let at = |name: &str, created: &str, ready: bool, deleting: bool| {
            pod(&format!(
                "metadata: {{name: {name}, namespace: default, creationTimestamp: \"{created}\", {}ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: u, controller: true}}]}}\nspec: {{containers: [{{name: c}}]}}\nstatus: {{phase: Running, conditions: [{{type: Ready, status: \"{}\"}}]}}",
                if deleting {
                    "deletionTimestamp: \"2026-11-21T10:00:00Z\", "
                } else {
                    ""
                },
                if ready { "True" } else { "False" }
            ))
        };
        let now = "2026-11-21T10:00:00Z"
            .parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap()
            .as_second();
        let pods = [
            at("ready", "2026-11-21T09:00:00Z", true, false),
            at("starting", "2026-11-21T09:59:00Z", false, false),
            at("crashlooping", "2026-11-21T08:00:00Z", false, false),
            at("leaving", "2026-11-21T09:00:00Z", true, true),
        ];
        let availability = owner_availability(pods.iter(), now);
        let web = availability["ReplicaSet/default/web"];
        assert_eq!((web.total, web.unavailable), (4, 2));
    }

    /// Found by `driftwood chaos` (update-nodes-with-drift, seed 20): a pod that never finishes
    /// terminating held its owner's eviction pacing at "one unavailable" for ever, so the rest
    /// of a drifted node's pods were never evicted and the rollout never completed.
    #[test]
    fn a_pod_stuck_terminating_no_longer_counts_against_its_owner() {
        let at = |name: &str, deleted: &str| {
            pod(&format!(
                "metadata: {{name: {name}, namespace: default, creationTimestamp: \"2026-11-21T09:00:00Z\", deletionTimestamp: \"{deleted}\", ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: u, controller: true}}]}}\nspec: {{containers: [{{name: c}}]}}\nstatus: {{phase: Running, conditions: [{{type: Ready, status: \"True\"}}]}}"
            ))
        };
        let now = "2026-11-21T10:00:00Z"
            .parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap()
            .as_second();
        let leaving = at("leaving", "2026-11-21T09:59:30Z");
        let stuck = at("stuck", "2026-11-21T09:30:00Z");
        let availability = owner_availability([&leaving, &stuck], now);
        let web = availability["ReplicaSet/default/web"];
        assert_eq!((web.total, web.unavailable), (1, 1));
    }

    #[test]
    fn tolerations_of_the_disrupted_taint() {
        let exists_all = pod(
            "metadata: {name: a, namespace: d}\nspec: {containers: [{name: c}], tolerations: [{operator: Exists}]}",
        );
        assert!(tolerates_disrupted(&exists_all));
        let exact = pod(
            "metadata: {name: a, namespace: d}\nspec: {containers: [{name: c}], tolerations: [{key: karpenter.sh/disrupted, operator: Exists, effect: NoSchedule}]}",
        );
        assert!(tolerates_disrupted(&exact));
        let other = pod(
            "metadata: {name: a, namespace: d}\nspec: {containers: [{name: c}], tolerations: [{key: node.kubernetes.io/not-ready, operator: Exists}]}",
        );
        assert!(!tolerates_disrupted(&other));
        let noexec = pod(
            "metadata: {name: a, namespace: d}\nspec: {containers: [{name: c}], tolerations: [{key: karpenter.sh/disrupted, operator: Exists, effect: NoExecute}]}",
        );
        assert!(!tolerates_disrupted(&noexec));
    }

    fn started_pod(annotation: &str, started: i64) -> Pod {
        let mut p = typed(APP);
        p.metadata.annotations = Some(
            [(
                ANNOTATION_DO_NOT_DISRUPT.to_string(),
                annotation.to_string(),
            )]
            .into(),
        );
        p.status.get_or_insert_with(Default::default).start_time =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_second(started).unwrap(),
            ));
        p
    }

    /// Karpenter's pod utils suite "IsDoNotDisruptActive" (start time 10 minutes ago) and the
    /// drift suite "should not drift nodes until the longest duration-based do-not-disrupt
    /// grace period expires".
    #[test]
    fn do_not_disrupt_durations_count_from_the_pod_start() {
        let now = 1_800_000_000;
        let started = now - 600;
        for (annotation, active) in [
            ("true", true),
            ("15m", true),
            ("5m", false),
            ("10m", false), // exactly elapsed: no longer protected
            ("1h30m", true),
            ("invalid-format", false),
            ("0s", false),
            ("-5m", false),
            ("false", false),
        ] {
            let p = CachedPod::from(&started_pod(annotation, started));
            assert_eq!(pod_do_not_disrupt(&p, now), active, "{annotation}");
            assert_eq!(
                pod_view(&p, &[], now).do_not_disrupt,
                active,
                "{annotation}"
            );
            assert_eq!(drain_pod(&p, now).do_not_disrupt, active, "{annotation}");
        }
        // Not started yet: protected while the duration has not begun.
        let mut p = started_pod("5m", started);
        p.status.as_mut().unwrap().start_time = None;
        assert!(pod_do_not_disrupt(&CachedPod::from(&p), now));
        // A finished pod never blocks.
        let mut p = started_pod("true", started);
        p.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert!(!pod_view(&CachedPod::from(&p), &[], now).do_not_disrupt);
    }

    #[test]
    fn node_view_reads_conditions_taints_and_annotations() {
        let nc: NodeClaim = serde_yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: nc-1, labels: {karpenter.sh/nodepool: default}}\nspec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, requirements: []}\nstatus:\n  conditions:\n  - {type: Initialized, status: \"True\"}\n  - {type: Drifted, status: \"True\", reason: AMIDrift, message: m, lastTransitionTime: \"2026-11-21T09:00:00Z\"}\n",
        )
        .unwrap();
        let node: Node = serde_yaml::from_str(
            "metadata: {name: ip-10-0-0-1, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}\nspec: {taints: [{key: karpenter.sh/disrupted, effect: NoSchedule}]}\nstatus: {conditions: [{type: Ready, status: \"True\"}]}",
        )
        .unwrap();
        let app = pod(APP);
        let view = node_view(&nc, Some(&node), &[&app], &[], 0);
        assert_eq!(view.nodepool, "default");
        assert!(view.initialized && view.ready && view.disrupting && !view.deleting);
        assert_eq!(view.do_not_disrupt, Some("Node"));
        let (since, finding) = view.drift.unwrap();
        assert_eq!(finding.reason, "AMIDrift");
        assert_eq!(
            since,
            driftwood_api::cron::days_from_civil(2026, 11, 21) * 86_400 + 9 * 3600
        );
        assert_eq!(view.pods.len(), 1);
    }
}
