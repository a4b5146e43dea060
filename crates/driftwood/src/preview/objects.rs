//! The copy's API objects: the live NodePools, EC2NodeClasses, NodeClaims (with their status),
//! Nodes, namespaces, PDBs and workloads created in the embedded API server before anything
//! runs there, with each Deployment's pods bound to the nodes they run on.
//!
//! Owner references are re-pointed at the copies (new uids). A Deployment's pods go to one
//! ReplicaSet named by the embedded controller's template hash, so that controller adopts it
//! instead of rolling the Deployment. DaemonSet and StatefulSet pods are left to their
//! controllers, which create them again in the copy (a StatefulSet's pods are placed by the
//! embedded scheduler, not necessarily where they run live).

use anyhow::Context as _;
use driftwood_api::{EC2NodeClass, NodeClaim, NodePool};
use driftwood_sim::workloads::deployment::new_replica_set;
use driftwood_sim::workloads::hash::{POD_TEMPLATE_HASH, template_hash};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use std::collections::BTreeMap;

use super::live::LiveCluster;

/// What was copied, for the report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ObjectsCopy {
    pub nodepools: usize,
    pub nodeclasses: usize,
    pub nodeclaims: usize,
    pub nodes: usize,
    pub pods_bound: usize,
    pub workloads: usize,
    pub pdbs: usize,
    /// Objects left out, with why.
    pub skipped: Vec<String>,
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Name, namespace, labels and annotations of `meta` (no uid, version or owners).
fn fresh(meta: &ObjectMeta, keep_finalizers: bool) -> ObjectMeta {
    let mut annotations = meta.annotations.clone();
    if let Some(a) = annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
    ObjectMeta {
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        labels: meta.labels.clone(),
        annotations,
        finalizers: if keep_finalizers {
            meta.finalizers.clone()
        } else {
            None
        },
        ..ObjectMeta::default()
    }
}

/// `owners` re-pointed at the copies' uids (kind/name → uid); owners without a copy dropped.
fn repoint(
    owners: Option<&Vec<OwnerReference>>,
    uids: &BTreeMap<(String, String), String>,
) -> Option<Vec<OwnerReference>> {
    let out: Vec<OwnerReference> = owners
        .into_iter()
        .flatten()
        .filter_map(|o| {
            let uid = uids.get(&(o.kind.clone(), o.name.clone()))?;
            Some(OwnerReference {
                uid: uid.clone(),
                ..o.clone()
            })
        })
        .collect();
    (!out.is_empty()).then_some(out)
}

fn uid_of(meta: &ObjectMeta) -> String {
    meta.uid.clone().unwrap_or_default()
}

/// Creates a copy of the untyped custom object `live` (metadata cleaned, `spec` kept) and
/// then, when `with_status`, its status.
async fn copy_custom<K: Resource<DynamicType = ()>>(
    client: &kube::Client,
    live: &DynamicObject,
    uids: &BTreeMap<(String, String), String>,
    with_status: bool,
) -> anyhow::Result<String> {
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let name = live.name_any();
    let mut meta = fresh(&live.metadata, with_status);
    meta.owner_references = repoint(live.metadata.owner_references.as_ref(), uids);
    let mut object = DynamicObject::new(&name, &resource);
    object.metadata = meta;
    if let Some(spec) = live.data.get("spec") {
        object.data = serde_json::json!({ "spec": spec });
    }
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("copying {} {name}", resource.kind))?;
    if with_status && let Some(status) = live.data.get("status") {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": status })),
        )
        .await
        .with_context(|| format!("copying {} {name}'s status", resource.kind))?;
    }
    Ok(uid_of(&created.metadata))
}

/// Creates the copies in dependency order, through `client` (the embedded API server).
pub async fn copy_objects(
    client: &kube::Client,
    live: &LiveCluster,
) -> anyhow::Result<ObjectsCopy> {
    let mut copy = ObjectsCopy::default();
    let mut uids: BTreeMap<(String, String), String> = BTreeMap::new();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for namespace in &live.namespaces {
        let name = namespace.name_any();
        if namespaces.get_opt(&name).await?.is_some() {
            continue;
        }
        let object = Namespace {
            metadata: fresh(&namespace.metadata, false),
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("copying Namespace {name}"))?;
    }
    for class in &live.nodeclasses {
        let uid = copy_custom::<EC2NodeClass>(client, class, &uids, false).await?;
        uids.insert(("EC2NodeClass".into(), class.name_any()), uid);
        copy.nodeclasses += 1;
    }
    for pool in &live.nodepools {
        let uid = copy_custom::<NodePool>(client, pool, &uids, false).await?;
        uids.insert(("NodePool".into(), pool.name_any()), uid);
        copy.nodepools += 1;
    }
    for claim in &live.nodeclaims {
        if claim.metadata.deletion_timestamp.is_some() {
            copy.skipped
                .push(format!("NodeClaim {}: being deleted", claim.name_any()));
            continue;
        }
        let uid = copy_custom::<NodeClaim>(client, claim, &uids, true).await?;
        uids.insert(("NodeClaim".into(), claim.name_any()), uid);
        copy.nodeclaims += 1;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    for node in &live.nodes {
        let name = node.name_any();
        if node.metadata.deletion_timestamp.is_some() {
            copy.skipped.push(format!("Node {name}: being deleted"));
            continue;
        }
        let mut metadata = fresh(&node.metadata, true);
        metadata.owner_references = repoint(node.metadata.owner_references.as_ref(), &uids);
        let object = Node {
            metadata,
            spec: node.spec.clone(),
            status: None,
        };
        let created = nodes
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("copying Node {name}"))?;
        uids.insert(("Node".into(), name.clone()), uid_of(&created.metadata));
        if let Some(status) = &node.status {
            nodes
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({ "status": status })),
                )
                .await
                .with_context(|| format!("copying Node {name}'s status"))?;
        }
        copy.nodes += 1;
    }
    for pdb in &live.pdbs {
        let namespace = pdb.namespace().unwrap_or_default();
        let api: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &namespace);
        let object = PodDisruptionBudget {
            metadata: fresh(&pdb.metadata, false),
            spec: pdb.spec.clone(),
            status: None,
        };
        api.create(&PostParams::default(), &object)
            .await
            .with_context(|| {
                format!("copying PodDisruptionBudget {namespace}/{}", pdb.name_any())
            })?;
        copy.pdbs += 1;
    }
    // Deployments, each with the one ReplicaSet its pods are given to.
    let mut replica_set_of_deployment: BTreeMap<(String, String), (String, String, String)> =
        BTreeMap::new();
    for deployment in &live.deployments {
        let namespace = deployment.namespace().unwrap_or_default();
        let name = deployment.name_any();
        let api: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
        let object = Deployment {
            metadata: fresh(&deployment.metadata, false),
            spec: deployment.spec.clone(),
            status: None,
        };
        let created = api
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("copying Deployment {namespace}/{name}"))?;
        let Some(spec) = created.spec.as_ref() else {
            continue;
        };
        let hash = template_hash(&spec.template);
        let replica_set = new_replica_set(&created, &hash, spec.replicas.unwrap_or(1), 1);
        let rs_api: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
            Api::namespaced(client.clone(), &namespace);
        let rs = rs_api
            .create(&PostParams::default(), &replica_set)
            .await
            .with_context(|| format!("copying Deployment {namespace}/{name}'s ReplicaSet"))?;
        replica_set_of_deployment.insert(
            (namespace.clone(), name.clone()),
            (rs.name_any(), uid_of(&rs.metadata), hash),
        );
        copy.workloads += 1;
    }
    for set in &live.stateful_sets {
        let namespace = set.namespace().unwrap_or_default();
        let api: Api<StatefulSet> = Api::namespaced(client.clone(), &namespace);
        let object = StatefulSet {
            metadata: fresh(&set.metadata, false),
            spec: set.spec.clone(),
            status: None,
        };
        api.create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("copying StatefulSet {namespace}/{}", set.name_any()))?;
        copy.workloads += 1;
    }
    for set in &live.daemon_sets {
        let namespace = set.namespace().unwrap_or_default();
        let api: Api<DaemonSet> = Api::namespaced(client.clone(), &namespace);
        let object = DaemonSet {
            metadata: fresh(&set.metadata, false),
            spec: set.spec.clone(),
            status: None,
        };
        api.create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("copying DaemonSet {namespace}/{}", set.name_any()))?;
        copy.workloads += 1;
    }
    // The Deployment owning each live ReplicaSet.
    let deployment_of_rs: BTreeMap<(String, String), String> = live
        .replica_sets
        .iter()
        .filter_map(|rs| {
            let owner = rs
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.kind == "Deployment")?;
            Some((
                (rs.namespace().unwrap_or_default(), rs.name_any()),
                owner.name.clone(),
            ))
        })
        .collect();
    for pod in &live.pods {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let finished = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed");
        if finished || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let controller = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true));
        let mut metadata = fresh(&pod.metadata, false);
        match controller.map(|o| o.kind.as_str()) {
            // Their controllers make them again in the copy.
            Some("DaemonSet" | "StatefulSet") => continue,
            Some("ReplicaSet") => {
                let owner = controller.map(|o| o.name.clone()).unwrap_or_default();
                let Some(deployment) = deployment_of_rs.get(&(namespace.clone(), owner.clone()))
                else {
                    copy.skipped.push(format!(
                        "Pod {namespace}/{name}: its ReplicaSet {owner} has no Deployment"
                    ));
                    continue;
                };
                let Some((rs_name, rs_uid, hash)) =
                    replica_set_of_deployment.get(&(namespace.clone(), deployment.clone()))
                else {
                    continue;
                };
                metadata
                    .labels
                    .get_or_insert_default()
                    .insert(POD_TEMPLATE_HASH.to_string(), hash.clone());
                metadata.owner_references = Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: rs_name.clone(),
                    uid: rs_uid.clone(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]);
            }
            _ => {
                metadata.owner_references = repoint(pod.metadata.owner_references.as_ref(), &uids);
            }
        }
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let object = Pod {
            metadata,
            spec: pod.spec.clone(),
            status: None,
        };
        api.create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("copying Pod {namespace}/{name}"))?;
        if let Some(status) = &pod.status {
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "status": status })),
            )
            .await
            .with_context(|| format!("copying Pod {namespace}/{name}'s status"))?;
        }
        copy.pods_bound += 1;
    }
    Ok(copy)
}
