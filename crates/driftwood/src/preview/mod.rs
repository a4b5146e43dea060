//! `driftwood preview`: what a change to NodePools or EC2NodeClasses will do to a live fleet,
//! found by doing it on a copy. The live cluster is read (lists only) and copied into the
//! embedded cluster — its nodes, instances, images, subnets, pods where they run, budgets and
//! PDBs — then the change is applied there at the given time and driftwood's own controllers
//! run on virtual time until the rollout completes or the horizon passes. Nothing is written
//! to the live cluster or the cloud.

pub mod aws_read;
pub mod cloud;
pub mod live;
pub mod objects;
pub mod report;
pub mod timing;

use anyhow::Context as _;
use driftwood_api::condition::Conditions as _;
use driftwood_api::wellknown::{CONDITION_DRIFTED, CONDITION_INITIALIZED, CONDITION_READY};
use driftwood_controller::state::{Snapshot, spawn_watchers};
use driftwood_controller::{ClusterState, Settings};
use driftwood_sim::SimClusterOptions;
use jiff::{SignedDuration, Timestamp};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::demo::track::Tracker;
use crate::embedded::Embedded;
use live::LiveCluster;
pub use report::Preview;

/// How to preview.
#[derive(Debug, Clone)]
pub struct PreviewOptions {
    /// When the change is applied (budget schedules are evaluated against it); `None`: now.
    pub at: Option<Timestamp>,
    /// The longest the copy runs after the change.
    pub horizon: Duration,
    /// The cluster name the copy's instances are tagged with.
    pub cluster_name: String,
    /// The simulated account's seed (the ids of images the change selects anew).
    pub seed: u64,
    /// What names (aliases, SSM parameters, image names) resolve to in the copy (`--ami`).
    pub amis: Vec<cloud::AmiOverride>,
    /// What AWS answered when the change was resolved through it ([`aws_read::resolve`]);
    /// `None`: the simulated account resolves what the change selects anew.
    pub aws_answers: Option<aws_read::Answers>,
}

impl Default for PreviewOptions {
    fn default() -> Self {
        Self {
            at: None,
            horizon: Duration::from_secs(24 * 3600),
            cluster_name: "preview".to_string(),
            seed: 1,
            amis: Vec::new(),
            aws_answers: None,
        }
    }
}

/// How long the copy runs before the change: the node class controller resolves the copied
/// classes and the drift marker looks at every node once.
const SETTLE: Duration = Duration::from_secs(60);
/// What the embedded cluster adds between a machine running and its NodeClaim initialized,
/// beyond the kubelet's ready delay (registration, the lifecycle controller's passes, API
/// latency): measured there as 37 s from creation to Initialized for 30 s + 5 s of delays.
const COPY_OVERHEAD: Duration = Duration::from_secs(2);
/// A rollout is not called complete sooner than this after the change (drift marking and the
/// node classes' resolution of new terms happen within it).
const MARKING_GRACE: i64 = 30;

fn claim_in_flight(claim: &driftwood_api::NodeClaim) -> bool {
    claim.metadata.deletion_timestamp.is_some()
        || !claim
            .condition(CONDITION_INITIALIZED)
            .is_some_and(|c| c.is_true())
}

fn drifted(snapshot: &Snapshot) -> Vec<String> {
    snapshot
        .store
        .nodeclaims
        .iter()
        .filter(|(_, c)| c.condition(CONDITION_DRIFTED).is_some_and(|c| c.is_true()))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Ready pods (and all pods) per workload, `namespace/Kind/name` (a Deployment's pods by
/// their ReplicaSet's Deployment, named by stripping the template hash).
fn ready_by_workload(snapshot: &Snapshot) -> BTreeMap<String, (i32, i32)> {
    let mut out: BTreeMap<String, (i32, i32)> = BTreeMap::new();
    for pod in snapshot.store.pods.values() {
        let Some(owner) = pod.shape.owners.iter().find(|o| o.controller) else {
            continue;
        };
        let workload = match owner.kind.as_str() {
            "ReplicaSet" => {
                let hash = pod
                    .labels()
                    .get("pod-template-hash")
                    .cloned()
                    .unwrap_or_default();
                let name = owner
                    .name
                    .strip_suffix(&format!("-{hash}"))
                    .unwrap_or(&owner.name);
                format!("Deployment/{name}")
            }
            "DaemonSet" => continue,
            kind => format!("{kind}/{}", owner.name),
        };
        let entry = out
            .entry(format!("{}/{workload}", pod.namespace()))
            .or_default();
        entry.0 += i32::from(crate::demo::track::pod_ready(pod));
        entry.1 += 1;
    }
    out
}

/// The change as the copy takes it: each object without what the live API server set on it
/// (`kubectl get -o yaml` output carries its resourceVersion, uid, managedFields and status,
/// which would be preconditions and conflicts in the copy), as JSON documents.
fn change_for_copy(change: &str) -> anyhow::Result<String> {
    let mut out = Vec::new();
    for document in driftwood_api::manifest::split_documents(change) {
        let mut value = document?;
        if let Some(object) = value.as_object_mut() {
            object.remove("status");
            if let Some(meta) = object
                .get_mut("metadata")
                .and_then(serde_json::Value::as_object_mut)
            {
                for field in [
                    "resourceVersion",
                    "uid",
                    "creationTimestamp",
                    "generation",
                    "managedFields",
                    "selfLink",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                ] {
                    meta.remove(field);
                }
            }
        }
        out.push(serde_json::to_string(&value)?);
    }
    Ok(out.join("\n---\n"))
}

/// The EC2NodeClasses in the change.
pub fn change_classes(change: &str) -> anyhow::Result<Vec<driftwood_api::EC2NodeClass>> {
    let mut out = Vec::new();
    for document in driftwood_api::manifest::split_documents(change) {
        let value = document?;
        if value.get("kind").and_then(serde_json::Value::as_str) == Some("EC2NodeClass") {
            let name = value
                .pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_string();
            out.push(
                serde_json::from_value(value)
                    .with_context(|| format!("reading EC2NodeClass {name} in the change"))?,
            );
        }
    }
    Ok(out)
}

/// Runs the preview of `change` (YAML documents) against the live cluster behind `live`.
pub async fn preview(
    live: &kube::Client,
    change: &str,
    change_names: &[String],
    options: &PreviewOptions,
) -> anyhow::Result<Preview> {
    let cluster = LiveCluster::read(live).await?;
    preview_on_copy(&cluster, change, change_names, options).await
}

/// Runs the preview of `change` on a copy of `cluster` (already read). Run it on a runtime
/// with paused time: the copy's clock moves as fast as the machine goes.
pub async fn preview_on_copy(
    cluster: &LiveCluster,
    change: &str,
    change_names: &[String],
    options: &PreviewOptions,
) -> anyhow::Result<Preview> {
    let cluster = cluster.clone();
    let timing = timing::launch_to_ready(&cluster);
    let at = options.at.unwrap_or_else(Timestamp::now);
    let defaults = SimClusterOptions::default();
    // The copy's machines take the measured time less what the copy adds itself: the
    // kubelet's registration-to-ready delay and its own registration and initialization.
    let launch = timing
        .median
        .saturating_sub(defaults.node_ready_delay + COPY_OVERHEAD)
        .max(Duration::from_secs(1));
    let start = at - SignedDuration::try_from(SETTLE).unwrap_or_default();
    let sim_options = SimClusterOptions {
        kubernetes_version: cluster.kubernetes_version.clone(),
        seed: options.seed,
        cluster_name: options.cluster_name.clone(),
        start_time: start,
        machine_launch_delay: launch,
        region: cluster.region(),
        zones: cloud::zones(&cluster),
        ..defaults
    };
    let mut embedded = Embedded::prepare(sim_options, Settings::default()).await?;
    let cloud_copy = cloud::copy_cloud(&embedded.cluster.aws(), &cluster, &options.cluster_name);
    let objects_copy = objects::copy_objects(&embedded.cluster.client(), &cluster)
        .await
        .context("copying the live cluster into the embedded one")?;
    embedded.start_all();
    let observer = ClusterState::new();
    let watchers = spawn_watchers(&embedded.cluster.client(), &observer);
    observer.wait_synced().await;
    let now = |embedded: &Embedded| embedded.cluster.clock().now().as_second();
    while now(&embedded) < at.as_second() {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let already_drifted = drifted(&observer.snapshot());
    let changed_classes = change_classes(change)?;
    let aws = embedded.cluster.aws();
    let mut notes = Vec::new();
    if let Some(answers) = &options.aws_answers {
        notes.extend(aws_read::import(&aws, answers, &cluster.kubernetes_version));
    }
    notes.extend(cloud::apply_ami_overrides(
        &aws,
        &cluster.kubernetes_version,
        &options.amis,
    ));
    notes.extend(cloud::add_images_named_by_id(
        &aws,
        &cluster,
        &changed_classes,
    ));

    let applied = embedded
        .apply_yaml(&change_for_copy(change)?)
        .await
        .context("applying the change to the copy")?;
    let applied_at = now(&embedded);
    let mut tracker = Tracker::new();
    tracker.start_rollout(applied_at, &observer.snapshot());
    let mut fewest: BTreeMap<String, (i32, i32)> = ready_by_workload(&observer.snapshot());
    let horizon = applied_at + i64::try_from(options.horizon.as_secs()).unwrap_or(i64::MAX);
    let mut complete = false;
    let mut changes = observer.subscribe();
    loop {
        let snapshot = observer.snapshot();
        let t = now(&embedded);
        tracker.observe(t, &snapshot);
        for (workload, (ready, total)) in ready_by_workload(&snapshot) {
            let entry = fewest.entry(workload).or_insert((ready, total));
            entry.0 = entry.0.min(ready);
            entry.1 = entry.1.max(total);
        }
        let pending_drift = !drifted(&snapshot).is_empty();
        let in_flight = snapshot
            .store
            .nodeclaims
            .values()
            .any(|c| claim_in_flight(c));
        if t >= applied_at + MARKING_GRACE && !pending_drift && !in_flight {
            complete = true;
            break;
        }
        if t >= horizon {
            break;
        }
        // Waiting on something that moves slowly (a budget window, a PDB): look again after
        // 30 s, or as soon as the cluster changes (a wave starting is seen when it starts).
        if pending_drift && !in_flight {
            changes.borrow_and_update();
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(30)) => {}
                _ = changes.changed() => {}
            }
            // Changes come in bursts: look at the second they settle in.
            tokio::time::sleep(Duration::from_secs(1)).await;
        } else {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    let events = match report::blocked_events(&embedded.cluster.client()).await {
        Ok(events) => events,
        Err(error) => {
            tracing::warn!(%error, "reading the copy's DisruptionBlocked events failed");
            notes.push(format!(
                "what held nodes back is not known: reading the copy's events failed: {error}"
            ));
            BTreeMap::new()
        }
    };
    let snapshot = observer.snapshot();
    for class in &changed_classes {
        let name = class.metadata.name.clone().unwrap_or_default();
        let ready = snapshot
            .nodeclass(&name)
            .and_then(|c| c.condition(CONDITION_READY).cloned());
        if !ready.as_ref().is_some_and(|c| c.is_true()) {
            complete = false;
            notes.push(format!(
                "EC2NodeClass {name} is not Ready after the change ({}): its nodes' drift is not decided and nothing launches from it",
                ready.and_then(|c| c.message).unwrap_or_else(|| "no Ready condition".to_string())
            ));
        }
    }
    for task in watchers {
        task.abort();
    }
    Ok(report::build(report::Inputs {
        live: &cluster,
        change_names,
        applied,
        applied_at,
        finished_at: now(&embedded),
        complete,
        tracker: &tracker,
        fewest,
        already_drifted,
        blocked: events,
        timing,
        cloud: cloud_copy,
        objects: objects_copy,
        final_snapshot: &snapshot,
        resolved_through_aws: options.aws_answers.is_some(),
        notes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_from_kubectl_get_loses_what_the_live_server_set() {
        let change = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata:\n  name: default\n  resourceVersion: \"42\"\n  uid: abc\n  generation: 3\n  labels: {team: a}\nspec:\n  role: r\nstatus:\n  amis: []\n";
        let cleaned = change_for_copy(change).unwrap();
        let value: serde_json::Value = serde_json::from_str(&cleaned).unwrap();
        assert_eq!(
            value["metadata"],
            serde_json::json!({"name": "default", "labels": {"team": "a"}})
        );
        assert_eq!(value["spec"]["role"], "r");
        assert!(value.get("status").is_none());
    }

    #[test]
    fn replacements_in_flight_hold_completion() {
        let claim: driftwood_api::NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "a"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
        }))
        .unwrap();
        assert!(claim_in_flight(&claim));
    }
}
