//! Shared pieces of the scenario tests: manifests (an EC2NodeClass, NodePools, Deployments,
//! PDBs), and readings of the cluster (events, NodeClaims per pool, drift conditions).

use super::harness::{Harness, pod_ready};
use driftwood_api::NodeClaim;
use driftwood_api::condition::Conditions;
use driftwood_api::wellknown::{
    CONDITION_DISRUPTION_REASON, CONDITION_DRIFTED, CONDITION_INITIALIZED, LABEL_NODEPOOL,
};
use driftwood_controller::Settings;
use driftwood_controller::state::Snapshot;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use std::time::Duration;

pub const MINUTE: Duration = Duration::from_secs(60);

/// A 1.29 cluster with the `default` EC2NodeClass (the 1.29 AMIs by id) applied.
pub async fn cluster(settings: Settings) -> Harness {
    let mut h = Harness::start("1.29", settings).await;
    let values = h.embedded.walkthrough_values("1.29").unwrap();
    h.apply(&driftwood::embedded::fill(NODECLASS, &values))
        .await;
    h.wait_until("the EC2NodeClass ready", MINUTE, |s| {
        s.nodeclass("default")
            .is_some_and(|c| c.is_true(driftwood_api::wellknown::CONDITION_READY))
    })
    .await;
    h
}

/// The `default` EC2NodeClass of [`cluster`], its AMI and names as walkthrough placeholders.
pub const NODECLASS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - id: <<AMD64PREVAMI>>
  role: "<<KARPENTER_NODE_IAM_ROLE_NAME>>"
  securityGroupSelectorTerms:
  - tags:
      karpenter.sh/discovery: <<CLUSTER_NAME>>
  subnetSelectorTerms:
  - tags:
      karpenter.sh/discovery: <<CLUSTER_NAME>>
"#;

/// A NodePool on the `default` class offering 4-cpu amd64 c/m instances, labelled
/// `pool: <name>`, with `spec_extra` (indented YAML under `spec:`, e.g. limits, weight,
/// disruption) and `template_extra` (indented under `template.spec:`).
pub fn nodepool(name: &str, spec_extra: &str, template_extra: &str) -> String {
    format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
{spec_extra}
  template:
    metadata:
      labels:
        pool: {name}
    spec:
{template_extra}
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
      - key: karpenter.k8s.aws/instance-category
        operator: In
        values: ["c", "m"]
      - key: karpenter.k8s.aws/instance-cpu
        operator: In
        values: ["4"]
      - key: kubernetes.io/arch
        operator: In
        values: ["amd64"]
      - key: karpenter.sh/capacity-type
        operator: In
        values: ["on-demand"]
"#
    )
}

/// A Deployment `app` of `replicas` pods requesting `cpu` each, selecting nodes of `pool`
/// (or none when `pool` is empty), with `pod_extra` indented under the pod template's spec and
/// `annotations` on its pods.
pub fn deployment(app: &str, replicas: usize, cpu: &str, pool: &str, pod_extra: &str) -> String {
    deployment_annotated(app, replicas, cpu, pool, pod_extra, "{}")
}

pub fn deployment_annotated(
    app: &str,
    replicas: usize,
    cpu: &str,
    pool: &str,
    pod_extra: &str,
    annotations: &str,
) -> String {
    let selector = if pool.is_empty() {
        String::new()
    } else {
        format!("      nodeSelector:\n        pool: {pool}\n")
    };
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {app}
  namespace: default
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {app}
  template:
    metadata:
      labels:
        app: {app}
      annotations: {annotations}
    spec:
{selector}{pod_extra}
      containers:
      - name: main
        image: public.ecr.aws/eks-distro/kubernetes/pause:v1.33.0-eks-1-33-4
        resources:
          requests:
            cpu: "{cpu}"
            memory: 256Mi
"#
    )
}

/// A PDB over `app` with minAvailable `min`.
pub fn pdb(app: &str, min: i32) -> String {
    format!(
        r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {app}
  namespace: default
spec:
  minAvailable: {min}
  selector:
    matchLabels:
      app: {app}
"#
    )
}

/// The pool's NodeClaims (not being deleted).
pub fn claims_of<'a>(s: &'a Snapshot, pool: &str) -> Vec<&'a NodeClaim> {
    s.store
        .nodeclaims
        .values()
        .filter(|c| {
            c.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_NODEPOOL))
                .is_some_and(|p| p == pool)
        })
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| c.as_ref())
        .collect()
}

pub fn name(claim: &NodeClaim) -> String {
    claim.metadata.name.clone().unwrap_or_default()
}

/// The EC2 instance ID of a launched NodeClaim (empty before launch).
pub fn instance_of(claim: &NodeClaim) -> String {
    claim
        .status
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .and_then(driftwood_aws::launcher::instance_id_from_provider_id)
        .unwrap_or_default()
        .to_string()
}

/// The pool's initialized NodeClaims.
pub fn initialized_of<'a>(s: &'a Snapshot, pool: &str) -> Vec<&'a NodeClaim> {
    claims_of(s, pool)
        .into_iter()
        .filter(|c| c.is_true(CONDITION_INITIALIZED))
        .collect()
}

/// The Drifted condition's (reason, message) when Drifted=True.
pub fn drift(claim: &NodeClaim) -> Option<(String, String)> {
    claim
        .condition(CONDITION_DRIFTED)
        .filter(|c| c.is_true())
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

pub fn disrupting(claim: &NodeClaim) -> bool {
    claim.condition(CONDITION_DISRUPTION_REASON).is_some()
}

/// Ready, non-terminating pods of `app`.
pub fn ready_pods(s: &Snapshot, app: &str) -> usize {
    s.store
        .pods
        .values()
        .filter(|p| p.labels().get("app").is_some_and(|a| a == app))
        .filter(|p| !p.is_terminating() && pod_ready(p))
        .count()
}

/// Every events.k8s.io/v1 Event in `namespace`.
pub async fn events(h: &Harness, namespace: &str) -> Vec<Event> {
    Api::<Event>::namespaced(h.embedded.cluster.client(), namespace)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// driftwood's events whose `regarding` names `name`, as (reason, note).
pub async fn events_about(h: &Harness, namespace: &str, name: &str) -> Vec<(String, String)> {
    events(h, namespace)
        .await
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        // driftwood's own events (the embedded kube-scheduler records its FailedScheduling too).
        .filter(|e| {
            e.reporting_controller.as_deref()
                == Some(driftwood_controller::events::REPORTING_CONTROLLER)
        })
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// Advances virtual time by `d` while checking the invariants.
pub async fn idle(h: &mut Harness, d: Duration) {
    let steps = d.as_secs();
    for _ in 0..steps {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let s = h.snapshot();
        h.check_invariants(&s);
    }
}

/// Seconds of virtual time now.
pub fn now(h: &Harness) -> i64 {
    h.embedded.cluster.clock().now().as_second()
}

/// `driftwood explain NODECLAIM` as the CLI computes it, from the observer's snapshot and the
/// events in `default` (the inputs built the way crates/driftwood/src/cmd/explain.rs does).
pub async fn explain(h: &Harness, claim_name: &str) -> String {
    use driftwood_disruption::explain::{ExplainInput, explain};
    use driftwood_disruption::views::{node_view, pdb_allowed};
    let s = h.snapshot();
    let claim = s
        .store
        .nodeclaims
        .get(claim_name)
        .unwrap_or_else(|| panic!("no nodeclaim {claim_name}"));
    let pdbs: Vec<_> = s.store.pdbs.values().map(|p| (**p).clone()).collect();
    let node = s.node_of(claim).map(|n| (**n).clone());
    let pods: Vec<std::sync::Arc<driftwood_disruption::cached_pod::CachedPod>> = node
        .as_ref()
        .and_then(|n| n.metadata.name.clone())
        .map(|n| s.pods_on(&n).into_iter().cloned().collect())
        .unwrap_or_default();
    let pod_refs: Vec<&driftwood_disruption::cached_pod::CachedPod> =
        pods.iter().map(AsRef::as_ref).collect();
    let view = node_view(claim, node.as_ref(), &pod_refs, &pdbs, now(h));
    let pool_name = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_NODEPOOL))
        .cloned()
        .unwrap_or_default();
    let pool = s.nodepool(&pool_name).map(|p| (**p).clone());
    let class = s
        .nodeclass(&claim.spec.node_class_ref.name)
        .map(|c| (**c).clone());
    let pool_views: Vec<_> = s
        .store
        .nodeclaims
        .values()
        .filter(|c| {
            c.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_NODEPOOL))
                == Some(&pool_name)
        })
        .map(|c| node_view(c, s.node_of(c).map(|n| n.as_ref()), &[], &pdbs, now(h)))
        .collect();
    let last_blocked = events(h, "default")
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("DisruptionBlocked"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(claim_name))
        .max_by_key(|e| e.event_time.as_ref().map(|t| t.0))
        .and_then(|e| e.note);
    let allowed = pdb_allowed(&pdbs);
    let drain = match (&claim.metadata.deletion_timestamp, node.as_ref()) {
        (Some(_), Some(n)) => {
            let node_name = n.metadata.name.clone().unwrap_or_default();
            let attachments =
                driftwood_controller::controllers::termination::volume_attachments_on(
                    &s,
                    &node_name,
                    now(h),
                )
                .into_iter()
                .map(str::to_string)
                .collect();
            Some(driftwood_disruption::views::drain_explain(
                claim,
                &pod_refs,
                &pdbs,
                attachments,
                now(h),
            ))
        }
        _ => None,
    };
    explain(&ExplainInput {
        nodeclaim: claim,
        view: &view,
        nodepool: pool.as_ref(),
        nodeclass: class.as_ref(),
        pool_views: &pool_views,
        pdb_allowed: &allowed,
        last_unconsolidatable_event: None,
        last_blocked_event: last_blocked.as_deref(),
        now: now(h),
        drain,
    })
}

/// `yaml`, a NodePool of [`nodepool`] named `name`, with `annotations` on its metadata.
pub fn with_annotations(yaml: &str, name: &str, annotations: &[(&str, &str)]) -> String {
    let lines: String = annotations
        .iter()
        .map(|(k, v)| format!("    {k}: \"{v}\"\n"))
        .collect();
    let head = format!("metadata:\n  name: {name}\n");
    assert!(yaml.contains(&head), "no {head:?} in\n{yaml}");
    yaml.replace(&head, &format!("{head}  annotations:\n{lines}"))
}

/// Drifts every node of NodePool `pool` (its YAML `yaml`, of [`nodepool`]): a label added to
/// its template. Returns the YAML applied.
pub async fn drift_template(h: &Harness, yaml: &str, pool: &str) -> String {
    edit(
        h,
        yaml,
        &format!("        pool: {pool}\n"),
        &format!("        pool: {pool}\n        rollout: next\n"),
    )
    .await
}

/// Whether every NodeClaim of `original` is gone and `pool` has `n` initialized nodes and `n`
/// ready pods of the app named like it.
pub fn replaced(
    s: &Snapshot,
    original: &std::collections::BTreeSet<String>,
    pool: &str,
    n: usize,
) -> bool {
    s.store.nodeclaims.keys().all(|c| !original.contains(c))
        && initialized_of(s, pool).len() == n
        && ready_pods(s, pool) == n
}

/// Re-applies the NodePool YAML with `from` replaced by `to` (must occur).
pub async fn edit(h: &Harness, yaml: &str, from: &str, to: &str) -> String {
    assert!(yaml.contains(from), "{from:?} not in\n{yaml}");
    let edited = yaml.replace(from, to);
    h.apply(&edited).await;
    edited
}

/// A DaemonSet `agent` (100m, 64Mi) in `default`: a pod on every node.
pub const DAEMONSET: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  namespace: default
spec:
  selector:
    matchLabels:
      app: agent
  template:
    metadata:
      labels:
        app: agent
    spec:
      containers:
      - name: agent
        image: public.ecr.aws/eks-distro/kubernetes/pause:v1.33.0-eks-1-33-4
        resources:
          requests:
            cpu: 100m
            memory: 64Mi
"#;
