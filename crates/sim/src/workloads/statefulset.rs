//! The StatefulSet controller: one pod per ordinal (`<name>-<i>`), never two at once — a
//! replacement for ordinal i is created only once the old pod is gone — in order (OrderedReady:
//! ordinal i waits for 0..i to be Ready; Parallel: all at once), with a PersistentVolumeClaim
//! per ordinal and claim template, each pre-bound to a PersistentVolume of its own (the
//! simulated provisioner). Planning is pure; `reconcile` applies it via the API.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::{
    Context, WorkloadError, is_terminating, label_selector_string, owned_by, pod_is_ready,
};

/// The label naming a StatefulSet pod (as Kubernetes sets it).
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";

/// What the StatefulSet controller should do.
#[derive(Debug, Clone, PartialEq)]
pub struct StatefulSetPlan {
    /// Ordinals whose pod to create now.
    pub create: Vec<i32>,
    /// Pods to delete (ordinals at or above the replica count), by name.
    pub delete: Vec<String>,
    /// Claims to create (name, template index, ordinal).
    pub claims: Vec<(String, usize, i32)>,
    /// The status to report.
    pub status: StatefulSetStatus,
}

/// The ordinal of a pod named `<set>-<i>`.
fn ordinal(set: &str, pod: &str) -> Option<i32> {
    pod.strip_prefix(set)?.strip_prefix('-')?.parse().ok()
}

/// The claim of template `template` for ordinal `i`: `<template>-<set>-<i>`.
pub fn claim_name(template: &str, set: &str, i: i32) -> String {
    format!("{template}-{set}-{i}")
}

/// Plan one StatefulSet given the pods it owns (any phase) and the claims that exist.
pub fn plan_stateful_set(
    sts: &StatefulSet,
    owned: &[&Pod],
    claims: &BTreeSet<String>,
) -> StatefulSetPlan {
    let name = sts.name_any();
    let spec = sts.spec.as_ref();
    let desired = spec.and_then(|s| s.replicas).unwrap_or(1).max(0);
    let parallel = spec.and_then(|s| s.pod_management_policy.as_deref()) == Some("Parallel");
    let by_ordinal: BTreeMap<i32, &Pod> = owned
        .iter()
        .filter_map(|p| ordinal(&name, &p.name_any()).map(|i| (i, *p)))
        .collect();
    let mut create = Vec::new();
    for i in 0..desired {
        if by_ordinal.contains_key(&i) {
            continue; // present, or still terminating: never two pods for one ordinal
        }
        let predecessors_ready = (0..i).all(|j| {
            by_ordinal
                .get(&j)
                .is_some_and(|p| !is_terminating(p) && pod_is_ready(p))
        });
        if parallel || predecessors_ready {
            create.push(i);
        }
        if !parallel {
            break;
        }
    }
    let delete = by_ordinal
        .iter()
        .filter(|(i, p)| **i >= desired && !is_terminating(p))
        .map(|(_, p)| p.name_any())
        .collect();
    let templates: Vec<String> = spec
        .and_then(|s| s.volume_claim_templates.as_ref())
        .into_iter()
        .flatten()
        .map(|t| t.metadata.name.clone().unwrap_or_default())
        .collect();
    let mut missing_claims = Vec::new();
    for i in 0..desired {
        for (t, template) in templates.iter().enumerate() {
            let claim = claim_name(template, &name, i);
            if !claims.contains(&claim) {
                missing_claims.push((claim, t, i));
            }
        }
    }
    let active: Vec<&&Pod> = by_ordinal.values().filter(|p| !is_terminating(p)).collect();
    let ready = i32::try_from(active.iter().filter(|p| pod_is_ready(p)).count()).unwrap_or(0);
    let replicas = i32::try_from(active.len()).unwrap_or(0);
    StatefulSetPlan {
        create,
        delete,
        claims: missing_claims,
        status: StatefulSetStatus {
            replicas,
            ready_replicas: Some(ready),
            available_replicas: Some(ready),
            current_replicas: Some(replicas),
            observed_generation: sts.metadata.generation,
            ..Default::default()
        },
    }
}

fn owner(sts: &StatefulSet) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "StatefulSet".into(),
        name: sts.name_any(),
        uid: sts.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The pod of ordinal `i`: the template, named `<set>-<i>`, with a volume per claim template.
pub fn pod_for(sts: &StatefulSet, i: i32) -> Pod {
    let name = sts.name_any();
    let spec = sts.spec.clone().unwrap_or_default();
    let template_meta = spec.template.metadata.unwrap_or_default();
    let mut labels = template_meta.labels.unwrap_or_default();
    labels.insert(POD_NAME_LABEL.to_string(), format!("{name}-{i}"));
    let mut pod_spec = spec.template.spec.unwrap_or_default();
    pod_spec.hostname = Some(format!("{name}-{i}"));
    let volumes = pod_spec.volumes.get_or_insert_with(Vec::new);
    for template in spec.volume_claim_templates.iter().flatten() {
        let template_name = template.metadata.name.clone().unwrap_or_default();
        volumes.push(Volume {
            name: template_name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(&template_name, &name, i),
                read_only: None,
            }),
            ..Default::default()
        });
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{i}")),
            namespace: sts.namespace(),
            labels: Some(labels),
            annotations: template_meta.annotations,
            owner_references: Some(vec![owner(sts)]),
            ..ObjectMeta::default()
        },
        spec: Some(pod_spec),
        status: None,
    }
}

/// The claim `claim` from claim template `t`, pre-bound to its own volume
/// ([`volume_name`]).
pub fn claim_for(sts: &StatefulSet, claim: &str, t: usize) -> PersistentVolumeClaim {
    let template = sts
        .spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.as_ref())
        .and_then(|v| v.get(t))
        .cloned()
        .unwrap_or_default();
    let namespace = sts.namespace().unwrap_or_default();
    let mut spec = template.spec.unwrap_or_default();
    spec.volume_name = Some(volume_name(&namespace, claim));
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(claim.to_string()),
            namespace: Some(namespace),
            labels: template.metadata.labels,
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The PersistentVolume the simulated provisioner makes for a claim.
pub fn volume_name(namespace: &str, claim: &str) -> String {
    format!("pv-{namespace}-{claim}")
}

/// The volume for `claim`, bound to it, attached through the EBS CSI driver.
fn volume_for(claim: &PersistentVolumeClaim) -> PersistentVolume {
    let namespace = claim.namespace().unwrap_or_default();
    let name = claim.name_any();
    let capacity = claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.clone())
        .unwrap_or_default();
    serde_json::from_value(json!({
        "metadata": {"name": volume_name(&namespace, &name)},
        "spec": {
            "capacity": capacity,
            "accessModes": ["ReadWriteOnce"],
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": namespace, "name": name},
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": format!("vol-{namespace}-{name}")},
            "persistentVolumeReclaimPolicy": "Delete"
        }
    }))
    .unwrap_or_default()
}

/// Reconcile one StatefulSet against fresh API reads.
pub async fn reconcile(
    sts: Arc<StatefulSet>,
    context: Arc<Context>,
) -> Result<Action, WorkloadError> {
    let namespace = sts.namespace().unwrap_or_default();
    let sets: Api<StatefulSet> = Api::namespaced(context.client.clone(), &namespace);
    let Some(sts) = super::live(&sets, &sts.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let pods: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let claims_api: Api<PersistentVolumeClaim> =
        Api::namespaced(context.client.clone(), &namespace);
    let volumes: Api<PersistentVolume> = Api::all(context.client.clone());
    let selector = sts
        .spec
        .as_ref()
        .map(|s| label_selector_string(&s.selector))
        .unwrap_or_default();
    let listed = pods.list(&ListParams::default().labels(&selector)).await?;
    let uid = sts.metadata.uid.clone().unwrap_or_default();
    let owned: Vec<&Pod> = listed
        .items
        .iter()
        .filter(|p| owned_by(p.meta(), &uid))
        .collect();
    let claims: BTreeSet<String> = claims_api
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    let plan = plan_stateful_set(&sts, &owned, &claims);
    for (claim, t, _) in &plan.claims {
        let pvc = claim_for(&sts, claim, *t);
        let created = claims_api.create(&PostParams::default(), &pvc).await?;
        let volume = volumes
            .create(&PostParams::default(), &volume_for(&created))
            .await?;
        let bound = json!({"status": {"phase": "Bound"}});
        volumes
            .patch_status(
                &volume.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&bound),
            )
            .await?;
        claims_api
            .patch_status(claim, &PatchParams::default(), &Patch::Merge(&bound))
            .await?;
    }
    for i in &plan.create {
        pods.create(&PostParams::default(), &pod_for(&sts, *i))
            .await?;
    }
    for name in &plan.delete {
        pods.delete(name, &DeleteParams::default()).await?;
    }
    if sts.status.as_ref() != Some(&plan.status) {
        let patch = super::exact_status_patch(sts.status.as_ref(), &plan.status);
        sets.patch_status(
            &sts.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sts(replicas: i32, policy: &str) -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "default", "uid": "sts-uid", "generation": 1},
            "spec": {"replicas": replicas, "podManagementPolicy": policy, "serviceName": "db",
                     "selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "pause"}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}}]}
        }))
        .unwrap()
    }

    fn pod(name: &str, ready: bool, terminating: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "deletionTimestamp": if terminating { Some("2026-01-01T00:00:00Z") } else { None }},
            "spec": {"containers": []},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap()
    }

    #[test]
    fn ordered_ready_creates_one_ordinal_at_a_time_with_its_claims() {
        let plan = plan_stateful_set(&sts(3, "OrderedReady"), &[], &BTreeSet::new());
        assert_eq!(plan.create, vec![0]);
        assert_eq!(
            plan.claims.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
            ["data-db-0", "data-db-1", "data-db-2"]
        );
        let zero = pod("db-0", false, false);
        let plan = plan_stateful_set(&sts(3, "OrderedReady"), &[&zero], &BTreeSet::new());
        assert!(plan.create.is_empty(), "db-1 waits for db-0 to be Ready");
        let zero = pod("db-0", true, false);
        let plan = plan_stateful_set(&sts(3, "OrderedReady"), &[&zero], &BTreeSet::new());
        assert_eq!(plan.create, vec![1]);
        assert_eq!(
            plan_stateful_set(&sts(3, "Parallel"), &[], &BTreeSet::new()).create,
            vec![0, 1, 2]
        );
    }

    /// A StatefulSet never runs two pods for one ordinal: the replacement of an evicted pod is
    /// created only once the old one is gone (so its volume can move without a multi-attach).
    #[test]
    fn a_terminating_pod_is_not_replaced_until_it_is_gone() {
        let old = pod("db-0", true, true);
        let plan = plan_stateful_set(&sts(1, "OrderedReady"), &[&old], &BTreeSet::new());
        assert!(plan.create.is_empty());
        let plan = plan_stateful_set(&sts(1, "OrderedReady"), &[], &BTreeSet::new());
        assert_eq!(plan.create, vec![0]);
    }

    #[test]
    fn pods_mount_their_ordinals_claims() {
        let p = pod_for(&sts(1, "OrderedReady"), 0);
        assert_eq!(p.metadata.name.as_deref(), Some("db-0"));
        let volumes = p.spec.unwrap().volumes.unwrap();
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "data-db-0"
        );
        let claim = claim_for(&sts(1, "OrderedReady"), "data-db-0", 0);
        assert_eq!(
            claim.spec.unwrap().volume_name.as_deref(),
            Some("pv-default-data-db-0")
        );
    }
}
