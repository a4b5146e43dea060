//! The Deployment controller: one ReplicaSet per pod template (named by its hash), rolled
//! with the RollingUpdate (maxSurge / maxUnavailable) or Recreate strategy, old ReplicaSets
//! pruned past `revisionHistoryLimit`, status aggregated. Planning is pure.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::hash::{POD_TEMPLATE_HASH, template_hash};
use super::{Context, WorkloadError, label_selector_string, owned_by};

const REVISION: &str = "deployment.kubernetes.io/revision";

/// What the Deployment controller should do.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeploymentPlan {
    /// A new ReplicaSet for the current template.
    pub create: Option<ReplicaSet>,
    /// Existing ReplicaSets to resize: (name, replicas).
    pub scale: Vec<(String, i32)>,
    /// Old, empty ReplicaSets beyond the history limit.
    pub delete: Vec<String>,
    /// The status to report.
    pub status: DeploymentStatus,
}

fn resolve(value: Option<&IntOrString>, total: i32, round_up: bool, default_percent: i32) -> i32 {
    let percent = |p: i32| {
        let scaled = i64::from(p) * i64::from(total);
        let value = if round_up {
            (scaled + 99) / 100
        } else {
            scaled / 100
        };
        i32::try_from(value.clamp(0, i64::from(MAX_REPLICAS))).unwrap_or(MAX_REPLICAS)
    };
    match value {
        Some(IntOrString::Int(n)) => (*n).clamp(0, MAX_REPLICAS),
        Some(IntOrString::String(s)) => s
            .trim_end_matches('%')
            .trim()
            .parse::<i32>()
            .map(percent)
            .unwrap_or(0)
            .max(0),
        None => percent(default_percent),
    }
}

/// Replica counts are clamped to this so the arithmetic below cannot overflow.
const MAX_REPLICAS: i32 = 100_000;

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(0)
        .clamp(0, MAX_REPLICAS)
}

fn status_field(
    rs: &ReplicaSet,
    field: fn(&k8s_openapi::api::apps::v1::ReplicaSetStatus) -> Option<i32>,
) -> i32 {
    rs.status
        .as_ref()
        .and_then(field)
        .unwrap_or(0)
        .clamp(0, MAX_REPLICAS)
}

fn revision(rs: &ReplicaSet) -> i64 {
    rs.annotations()
        .get(REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The ReplicaSet a Deployment creates for its current template.
pub fn new_replica_set(
    deployment: &Deployment,
    hash: &str,
    replicas: i32,
    revision: i64,
) -> ReplicaSet {
    let spec = deployment.spec.clone().unwrap_or_default();
    let mut template = spec.template.clone();
    template
        .metadata
        .get_or_insert_default()
        .labels
        .get_or_insert_default()
        .insert(POD_TEMPLATE_HASH.into(), hash.into());
    let mut selector = spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_default()
        .insert(POD_TEMPLATE_HASH.into(), hash.into());
    let mut labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(POD_TEMPLATE_HASH.into(), hash.into());
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{}-{hash}", deployment.name_any())),
            namespace: deployment.namespace(),
            labels: Some(labels),
            annotations: Some(
                [(REVISION.to_string(), revision.to_string())]
                    .into_iter()
                    .collect(),
            ),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: deployment.name_any(),
                uid: deployment.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: spec.min_ready_seconds,
            selector,
            template: Some(template),
        }),
        status: None,
    }
}

/// Plan one Deployment given the ReplicaSets it owns.
pub fn plan_deployment(deployment: &Deployment, owned: &[&ReplicaSet]) -> DeploymentPlan {
    let spec = deployment.spec.clone().unwrap_or_default();
    let desired = spec.replicas.unwrap_or(1).clamp(0, MAX_REPLICAS);
    let hash = template_hash(&spec.template);
    let strategy = spec.strategy.clone().unwrap_or_default();
    let recreate = strategy.type_.as_deref() == Some("Recreate");
    let rolling = strategy.rolling_update.unwrap_or_default();
    let surge = resolve(rolling.max_surge.as_ref(), desired, true, 25);
    let mut unavailable = resolve(rolling.max_unavailable.as_ref(), desired, false, 25);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    let mut old: Vec<&ReplicaSet> = owned
        .iter()
        .copied()
        .filter(|rs| rs.labels().get(POD_TEMPLATE_HASH) != Some(&hash))
        .collect();
    old.sort_by_key(|rs| (revision(rs), rs.name_any()));
    let current = owned
        .iter()
        .copied()
        .find(|rs| rs.labels().get(POD_TEMPLATE_HASH) == Some(&hash));
    let mut plan = DeploymentPlan::default();
    let paused = spec.paused == Some(true);

    // A conservative count of a ReplicaSet's pods: its spec, or more while its controller
    // has not yet removed pods above a lowered spec.
    let actual = |rs: &ReplicaSet| spec_replicas(rs).max(status_field(rs, |s| Some(s.replicas)));
    let new_current = current.map_or(0, spec_replicas);
    let old_total: i32 = old
        .iter()
        .map(|rs| spec_replicas(rs))
        .fold(0, i32::saturating_add);
    let old_actual: i32 = old.iter().map(|rs| actual(rs)).fold(0, i32::saturating_add);
    let old_pods: i32 = old
        .iter()
        .map(|rs| status_field(rs, |s| Some(s.replicas)))
        .fold(0, i32::saturating_add);
    let new_target = if paused {
        new_current
    } else if recreate {
        if old_total > 0 || old_pods > 0 {
            0
        } else {
            desired
        }
    } else if new_current >= desired {
        desired
    } else {
        let room = desired + surge - old_actual.saturating_add(current.map_or(0, actual));
        new_current + room.clamp(0, desired - new_current)
    };
    match current {
        None => {
            let next_revision = old.iter().map(|rs| revision(rs)).max().unwrap_or(0) + 1;
            plan.create = Some(new_replica_set(
                deployment,
                &hash,
                new_target,
                next_revision,
            ));
        }
        Some(rs) if spec_replicas(rs) != new_target => plan.scale.push((rs.name_any(), new_target)),
        Some(_) => {}
    }

    if !paused {
        let mut targets: Vec<(String, i32, i32)> = old
            .iter()
            .map(|rs| {
                (
                    rs.name_any(),
                    spec_replicas(rs),
                    status_field(rs, |s| s.available_replicas).min(spec_replicas(rs)),
                )
            })
            .collect();
        if recreate {
            for target in &mut targets {
                target.1 = 0;
            }
        } else {
            let min_available = desired - unavailable;
            let new_available = current
                .map_or(0, |rs| status_field(rs, |s| s.available_replicas))
                .min(new_target);
            let mut max_down = old_total
                .saturating_add(new_target)
                .saturating_sub(min_available)
                .saturating_sub((new_target - new_available).max(0));
            for (_, target, available) in &mut targets {
                let cut = (*target - *available).clamp(0, max_down.max(0));
                *target -= cut;
                max_down -= cut;
            }
            let available_all: i32 = targets
                .iter()
                .map(|(_, target, available)| (*available).min(*target))
                .fold(0, i32::saturating_add)
                .saturating_add(new_available);
            let mut scale_down = (available_all - min_available).min(max_down).max(0);
            for (_, target, _) in &mut targets {
                let cut = (*target).min(scale_down);
                *target -= cut;
                scale_down -= cut;
            }
        }
        for (rs, (name, target, _)) in old.iter().zip(&targets) {
            if *target != spec_replicas(rs) {
                plan.scale.push((name.clone(), *target));
            }
        }
        let history =
            usize::try_from(spec.revision_history_limit.unwrap_or(10).max(0)).unwrap_or(0);
        let empty: Vec<&&ReplicaSet> = old
            .iter()
            .filter(|rs| spec_replicas(rs) == 0 && status_field(rs, |s| Some(s.replicas)) == 0)
            .collect();
        if empty.len() > history {
            plan.delete = empty
                .iter()
                .take(empty.len() - history)
                .map(|rs| rs.name_any())
                .collect();
        }
    }

    let sum = |f: fn(&k8s_openapi::api::apps::v1::ReplicaSetStatus) -> Option<i32>| -> i32 {
        owned
            .iter()
            .map(|rs| status_field(rs, f))
            .fold(0, i32::saturating_add)
    };
    let available = sum(|s| s.available_replicas);
    let updated = current.map_or(0, |rs| status_field(rs, |s| Some(s.replicas)));
    let complete = updated == desired && available >= desired && old_pods == 0;
    let previous = deployment.status.clone().unwrap_or_default();
    let condition = |type_: &str, status: bool, reason: &str, message: String| {
        let status_text = if status { "True" } else { "False" };
        let kept = previous
            .conditions
            .as_ref()
            .and_then(|c| {
                c.iter().find(|c| {
                    c.type_ == type_
                        && c.status == status_text
                        && c.reason.as_deref() == Some(reason)
                })
            })
            .cloned();
        kept.unwrap_or(DeploymentCondition {
            type_: type_.into(),
            status: status_text.into(),
            reason: Some(reason.into()),
            message: Some(message),
            last_transition_time: None,
            last_update_time: None,
        })
    };
    let has_minimum = available >= desired - unavailable;
    let name = deployment.name_any();
    plan.status = DeploymentStatus {
        observed_generation: deployment.metadata.generation,
        replicas: Some(sum(|s| Some(s.replicas))),
        updated_replicas: Some(updated),
        ready_replicas: Some(sum(|s| s.ready_replicas)),
        available_replicas: Some(available),
        unavailable_replicas: Some((desired - available).max(0)),
        terminating_replicas: Some(sum(|s| s.terminating_replicas)),
        collision_count: None,
        conditions: Some(vec![
            condition(
                "Available",
                has_minimum,
                if has_minimum {
                    "MinimumReplicasAvailable"
                } else {
                    "MinimumReplicasUnavailable"
                },
                format!(
                    "Deployment {} minimum availability.",
                    if has_minimum { "has" } else { "does not have" }
                ),
            ),
            condition(
                "Progressing",
                true,
                if complete {
                    "NewReplicaSetAvailable"
                } else {
                    "ReplicaSetUpdated"
                },
                format!(
                    "ReplicaSet \"{name}-{hash}\" {}.",
                    if complete {
                        "has successfully progressed"
                    } else {
                        "is progressing"
                    }
                ),
            ),
        ]),
    };
    plan
}

/// Reconcile one Deployment against fresh API reads.
pub async fn reconcile(
    deployment: Arc<Deployment>,
    context: Arc<Context>,
) -> Result<Action, WorkloadError> {
    let namespace = deployment.namespace().unwrap_or_default();
    let deployments: Api<Deployment> = Api::namespaced(context.client.clone(), &namespace);
    let Some(deployment) = super::live(&deployments, &deployment.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let replica_sets: Api<ReplicaSet> = Api::namespaced(context.client.clone(), &namespace);
    let selector = deployment
        .spec
        .as_ref()
        .map(|s| label_selector_string(&s.selector))
        .unwrap_or_default();
    let listed = replica_sets
        .list(&ListParams::default().labels(&selector))
        .await?;
    let uid = deployment.metadata.uid.clone().unwrap_or_default();
    let owned: Vec<&ReplicaSet> = listed
        .items
        .iter()
        .filter(|rs| owned_by(rs.meta(), &uid))
        .collect();
    let plan = plan_deployment(&deployment, &owned);
    if let Some(rs) = &plan.create {
        replica_sets.create(&PostParams::default(), rs).await?;
    }
    for (name, replicas) in &plan.scale {
        let patch = json!({"spec": {"replicas": replicas}});
        replica_sets
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    for name in &plan.delete {
        replica_sets
            .delete(name, &DeleteParams::background())
            .await?;
    }
    if deployment.status.as_ref() != Some(&plan.status) {
        let patch = super::exact_status_patch(deployment.status.as_ref(), &plan.status);
        deployments
            .patch_status(
                &deployment.name_any(),
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

    fn deployment(replicas: i32, image: &str, strategy: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "d-uid", "generation": 1},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "strategy": strategy,
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "w", "image": image}]}}}
        }))
        .unwrap()
    }

    fn with_status(mut rs: ReplicaSet, replicas: i32, available: i32) -> ReplicaSet {
        rs.spec.as_mut().unwrap().replicas = Some(replicas);
        rs.status = Some(k8s_openapi::api::apps::v1::ReplicaSetStatus {
            replicas,
            available_replicas: Some(available),
            ready_replicas: Some(available),
            ..Default::default()
        });
        rs
    }

    fn rolling(surge: i32, unavailable: i32) -> serde_json::Value {
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
    }

    #[test]
    fn first_reconcile_creates_a_full_size_replica_set() {
        let d = deployment(4, "nginx:1", rolling(1, 0));
        let plan = plan_deployment(&d, &[]);
        let rs = plan.create.unwrap();
        assert_eq!(rs.spec.as_ref().unwrap().replicas, Some(4));
        assert!(rs.name_any().starts_with("web-"));
        assert_eq!(rs.annotations()[REVISION], "1");
        assert_eq!(rs.spec.unwrap().selector.match_labels.unwrap().len(), 2);
    }

    #[test]
    fn rolling_update_surges_then_scales_old_down_within_availability() {
        let old_d = deployment(4, "nginx:1", rolling(1, 0));
        let old_hash = template_hash(&old_d.spec.as_ref().unwrap().template);
        let old = with_status(new_replica_set(&old_d, &old_hash, 4, 1), 4, 4);
        let d = deployment(4, "nginx:2", rolling(1, 0));
        let plan = plan_deployment(&d, &[&old]);
        assert_eq!(
            plan.create
                .as_ref()
                .unwrap()
                .spec
                .as_ref()
                .unwrap()
                .replicas,
            Some(1),
            "surge of one"
        );
        assert!(plan.scale.is_empty(), "no availability to spare yet");

        let hash = template_hash(&d.spec.as_ref().unwrap().template);
        let new = with_status(new_replica_set(&d, &hash, 1, 2), 1, 1);
        let plan = plan_deployment(&d, &[&old, &new]);
        assert_eq!(
            plan.scale,
            vec![(old.name_any(), 3)],
            "one new available pod frees one old pod"
        );

        let old = with_status(new_replica_set(&old_d, &old_hash, 3, 1), 3, 3);
        let plan = plan_deployment(&d, &[&old, &new]);
        assert_eq!(plan.scale, vec![(new.name_any(), 2)], "then surge again");
    }

    #[test]
    fn recreate_scales_old_to_zero_before_the_new_one_grows() {
        let old_d = deployment(2, "nginx:1", json!({"type": "Recreate"}));
        let old_hash = template_hash(&old_d.spec.as_ref().unwrap().template);
        let old = with_status(new_replica_set(&old_d, &old_hash, 2, 1), 2, 2);
        let d = deployment(2, "nginx:2", json!({"type": "Recreate"}));
        let plan = plan_deployment(&d, &[&old]);
        assert_eq!(plan.create.unwrap().spec.unwrap().replicas, Some(0));
        assert_eq!(plan.scale, vec![(old.name_any(), 0)]);
    }

    #[test]
    fn absurd_sizes_do_not_overflow() {
        let d = deployment(
            i32::MAX,
            "nginx:1",
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": i32::MAX, "maxUnavailable": "100%"}}),
        );
        let old_d = deployment(1, "nginx:0", rolling(1, 0));
        let old_hash = template_hash(&old_d.spec.as_ref().unwrap().template);
        let old = with_status(
            new_replica_set(&old_d, &old_hash, i32::MAX, 1),
            i32::MAX,
            i32::MAX,
        );
        let plan = plan_deployment(&d, &[&old, &old]);
        assert_eq!(
            plan.create.unwrap().spec.unwrap().replicas,
            Some(0),
            "old pods fill the surge"
        );
        assert_eq!(plan.status.available_replicas, Some(2 * MAX_REPLICAS));
    }

    #[test]
    fn status_aggregates_replica_sets() {
        let d = deployment(2, "nginx:1", rolling(1, 0));
        let hash = template_hash(&d.spec.as_ref().unwrap().template);
        let rs = with_status(new_replica_set(&d, &hash, 2, 1), 2, 2);
        let plan = plan_deployment(&d, &[&rs]);
        assert!(plan.create.is_none() && plan.scale.is_empty());
        assert_eq!(plan.status.available_replicas, Some(2));
        assert_eq!(plan.status.updated_replicas, Some(2));
        let progressing = &plan.status.conditions.unwrap()[1];
        assert_eq!(
            progressing.reason.as_deref(),
            Some("NewReplicaSetAvailable")
        );
    }
}
