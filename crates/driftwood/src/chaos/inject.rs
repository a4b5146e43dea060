//! The fault injector: each virtual second it draws, from one seeded generator, which faults
//! of the spec strike now, picks their targets from the cluster as it is, arms them in the
//! simulated EC2, the kubelets, the API layer in front of the controllers or the controller
//! processes themselves, and lifts the temporary ones when they are due. The controllers run
//! as two replicas under leader election, as a production install does.

use super::spec::{FaultKind, FaultSpec};
use crate::api_faults::WriteError;
use crate::embedded::{Embedded, Replica};
use driftwood_api::lookup::ObjectLookups;
use driftwood_api::wellknown::{
    ANNOTATION_DISRUPTION_REPLACEMENTS, LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE,
    LABEL_TOPOLOGY_ZONE, TAINT_DISRUPTED_KEY,
};
use driftwood_aws::launcher::instance_id_from_provider_id;
use driftwood_aws::ports::{AwsError, codes};
use driftwood_controller::state::Snapshot;
use driftwood_disruption::cached_pod::CachedPod;
use driftwood_sim::kubelet::NodeFault;
use driftwood_sim::kubelet::plan::{ANNOTATION_READY, ANNOTATION_TERMINATION};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How long a replica's lease lasts (controller-runtime's default).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);

/// One fault injected, for the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injected {
    /// Virtual time (seconds since the epoch).
    pub at: i64,
    pub kind: FaultKind,
    /// What it hit.
    pub detail: String,
}

impl Injected {
    /// `HH:MM:SS kind: detail`, as reports list it.
    pub fn line(&self) -> String {
        crate::demo::report::timeline_line(self.at, self.kind.name(), &self.detail)
    }
}

/// Something to undo later.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Undo {
    RestoreCapacity {
        instance_type: String,
        zone: String,
        capacity_type: String,
    },
    ClearNodeFault {
        instance_id: String,
    },
    PodReady {
        namespace: String,
        name: String,
    },
    StartReplica,
    /// Remove a PDB the fault applied over a workload that had none.
    DeletePdb {
        namespace: String,
        name: String,
    },
}

/// The injector's state over a run.
pub struct Injector {
    spec: FaultSpec,
    rng: ChaCha8Rng,
    /// When the steps started (the window counts from here).
    started: Option<i64>,
    lifted: bool,
    timed_done: BTreeSet<usize>,
    undo: Vec<(i64, Undo)>,
    replicas: Vec<Replica>,
    replicas_started: u32,
    /// Faults that hit the next machine to appear.
    armed_for_next_machine: Vec<FaultKind>,
    machines_seen: BTreeSet<String>,
    /// Every fault injected, in order.
    pub injected: Vec<Injected>,
    /// PDBs (namespace/name) an involuntary fault disrupted, until when.
    pub involuntary_until: BTreeMap<String, i64>,
    /// Every PDB is excused until then (a fault whose victims are not known one by one).
    pub all_involuntary_until: i64,
    /// Instances a fault terminated or interrupted (their NodeClaims may go before a drift
    /// replacement is up).
    pub terminated_instances: BTreeSet<String>,
    /// Spot instances warned of their interruption: when EC2 reclaims each (UTC seconds), its
    /// id and its Node.
    reclaims: Vec<(i64, String, Option<String>)>,
    /// Instances EC2 reports unhealthy (never picked again: a second report would restart the
    /// two minutes a failed check must last).
    impaired: BTreeSet<String>,
    /// Instances whose status check failed: the PDBs of the pods on their Node are excused
    /// every second while a NodeClaim holds the instance, and 5 minutes after (the forceful
    /// drain does not wait on PDBs, whenever it comes; the instance may register its Node only
    /// later, and pods that land on it meanwhile are its pods too).
    failing_hosts: Vec<String>,
    /// How many of the next replacements never become Ready.
    replacement_never_ready_armed: u32,
    /// Replacements already considered for that fault.
    replacements_seen: BTreeSet<String>,
    /// Temporary PDBs applied so far (names them).
    temporary_pdbs: u32,
}

/// The name prefix of a PDB `pdb-blocking` applied where the cluster had none.
pub const TEMPORARY_PDB_PREFIX: &str = "chaos-pdb-blocking-";

/// Pod labels a controller sets per pod or per revision: never part of a workload's selector.
const UNSTABLE_POD_LABELS: &[&str] = &[
    "pod-template-hash",
    "controller-revision-hash",
    "statefulset.kubernetes.io/pod-name",
    "apps.kubernetes.io/pod-index",
];

/// Whether `pdb` is one the injector applied itself.
fn is_temporary_pdb(pdb: &PodDisruptionBudget) -> bool {
    pdb.metadata
        .name
        .as_deref()
        .is_some_and(|n| n.starts_with(TEMPORARY_PDB_PREFIX))
}

fn pick<'a, T>(rng: &mut ChaCha8Rng, items: &'a [T]) -> Option<&'a T> {
    if items.is_empty() {
        None
    } else {
        items.get(rng.random_range(0..items.len()))
    }
}

/// The instance id of an `aws:///zone/i-...` provider ID (empty if it is none).
fn instance_id(provider_id: &str) -> &str {
    instance_id_from_provider_id(provider_id).unwrap_or_default()
}

impl Injector {
    /// An injector for `spec` drawing from `seed`; stops `embedded`'s single controller process
    /// and starts two replicas in its place.
    pub fn start(spec: FaultSpec, seed: u64, embedded: &mut Embedded) -> Self {
        let mut injector = Self {
            spec,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0xc4a0_5c4a_05c4_a05c),
            started: None,
            lifted: false,
            timed_done: BTreeSet::new(),
            undo: Vec::new(),
            replicas: Vec::new(),
            replicas_started: 0,
            armed_for_next_machine: Vec::new(),
            machines_seen: BTreeSet::new(),
            injected: Vec::new(),
            involuntary_until: BTreeMap::new(),
            all_involuntary_until: i64::MIN,
            terminated_instances: BTreeSet::new(),
            reclaims: Vec::new(),
            impaired: BTreeSet::new(),
            failing_hosts: Vec::new(),
            replacement_never_ready_armed: 0,
            replacements_seen: BTreeSet::new(),
            temporary_pdbs: 0,
        };
        embedded.kill_controllers();
        injector.start_replica(embedded);
        injector.start_replica(embedded);
        injector
    }

    fn start_replica(&mut self, embedded: &Embedded) {
        self.replicas_started += 1;
        let identity = format!("driftwood-{}", self.replicas_started);
        tracing::info!(%identity, "chaos: controller replica started");
        self.replicas
            .push(embedded.start_replica(&identity, LEASE_DURATION));
    }

    /// The faults window starts now (the scenario's start).
    pub fn begin(&mut self, now: i64) {
        self.started.get_or_insert(now);
    }

    /// When the window ends (None before it started).
    pub fn window_end(&self) -> Option<i64> {
        self.started
            .map(|s| s + i64::try_from(self.spec.window.as_secs()).unwrap_or(i64::MAX))
    }

    /// Whether faults are being injected at `now`.
    pub fn active(&self, now: i64) -> bool {
        self.window_end().is_some_and(|end| now < end) && !self.lifted
    }

    /// Whether the window is over and every fault has been lifted.
    pub fn lifted(&self) -> bool {
        self.lifted
    }

    /// The leading replica's identity and its reconcile counters (for failure reports).
    pub fn leader_state(&self) -> String {
        self.replicas
            .iter()
            .map(|r| {
                let counters: Vec<String> = r
                    .metrics_text()
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.starts_with("controller_runtime_reconcile_total"))
                    .map(str::to_string)
                    .collect();
                format!(
                    "{} ({}): {}",
                    r.identity,
                    if r.is_leading() {
                        "leading"
                    } else {
                        "standing by"
                    },
                    counters.join("; ")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The spec.
    pub fn spec(&self) -> &FaultSpec {
        &self.spec
    }

    /// Whether PDB `key` is excused at `now` (an involuntary fault disrupted it).
    pub fn excused(&self, key: &str, now: i64) -> bool {
        now <= self.all_involuntary_until
            || self.involuntary_until.get(key).is_some_and(|u| now <= *u)
    }

    /// One virtual second: replace crashed processes, undo what is due, lift everything at the
    /// window's end, and inject what strikes now.
    pub async fn second(&mut self, now: i64, embedded: &mut Embedded, snapshot: &Snapshot) {
        for identity in embedded.api_faults.take_crashed() {
            tracing::info!(%identity, "chaos: controller replica crashed");
            self.replicas.retain(|r| r.identity != identity);
            let delay = self.rng.random_range(5..30);
            self.undo.push((now + delay, Undo::StartReplica));
        }
        let due: Vec<Undo> = {
            let (due, later): (Vec<_>, Vec<_>) =
                self.undo.drain(..).partition(|(at, _)| *at <= now);
            self.undo = later;
            due.into_iter().map(|(_, u)| u).collect()
        };
        for undo in due {
            self.apply_undo(undo, embedded).await;
        }
        self.reclaim_due(now, embedded, snapshot);
        self.excuse_failing_hosts(now, snapshot);
        self.arm_new_machines(now, embedded);
        self.arm_new_replacements(embedded, snapshot);
        let Some(start) = self.started else {
            return;
        };
        if !self.active(now) {
            if !self.lifted {
                self.lift(embedded).await;
            }
            return;
        }
        let mut strikes = Vec::new();
        for (i, timed) in self.spec.at.iter().enumerate() {
            let at = start + i64::try_from(timed.after.as_secs()).unwrap_or(i64::MAX);
            if at <= now && !self.timed_done.contains(&i) {
                strikes.push((Some(i), timed.fault));
            }
        }
        for (kind, rate) in &self.spec.rates.clone() {
            if *rate > 0.0 && self.rng.random_bool((rate / 3600.0).min(1.0)) {
                strikes.push((None, *kind));
            }
        }
        for (timed, kind) in strikes {
            if let Some(i) = timed {
                self.timed_done.insert(i);
            }
            if let Some(detail) = self.inject(kind, now, embedded, snapshot).await {
                tracing::info!(fault = kind.name(), %detail, "chaos: fault injected");
                self.injected.push(Injected {
                    at: now,
                    kind,
                    detail,
                });
            }
        }
    }

    /// Lifts every temporary fault (the window is over).
    async fn lift(&mut self, embedded: &mut Embedded) {
        self.lifted = true;
        embedded.api_faults.clear();
        embedded.cluster.aws().clear_faults();
        self.armed_for_next_machine.clear();
        self.replacement_never_ready_armed = 0;
        let pending: Vec<Undo> = self.undo.drain(..).map(|(_, u)| u).collect();
        for undo in pending {
            self.apply_undo(undo, embedded).await;
        }
        while self.replicas.len() < 2 {
            self.start_replica(embedded);
        }
    }

    async fn apply_undo(&mut self, undo: Undo, embedded: &mut Embedded) {
        match undo {
            Undo::RestoreCapacity {
                instance_type,
                zone,
                capacity_type,
            } => embedded
                .cluster
                .aws()
                .restore_capacity(&instance_type, &zone, &capacity_type),
            Undo::ClearNodeFault { instance_id } => {
                embedded.cluster.aws().set_node_fault(&instance_id, None);
            }
            Undo::PodReady { namespace, name } => {
                let pods: Api<Pod> = Api::namespaced(embedded.cluster.client(), &namespace);
                let patch =
                    serde_json::json!({"metadata": {"annotations": {ANNOTATION_READY: null}}});
                if let Err(error) = pods
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    tracing::debug!(%error, pod = %name, "chaos: pod already gone");
                }
            }
            Undo::StartReplica => {
                if self.replicas.len() < 2 {
                    self.start_replica(embedded);
                }
            }
            Undo::DeletePdb { namespace, name } => {
                let pdbs: Api<PodDisruptionBudget> =
                    Api::namespaced(embedded.cluster.client(), &namespace);
                if let Err(error) = pdbs.delete(&name, &DeleteParams::default()).await {
                    tracing::warn!(%error, pdb = %format!("{namespace}/{name}"), "chaos: could not remove the temporary PDB");
                }
            }
        }
    }

    /// Applies faults armed for "the next machine" to machines that appeared since.
    fn arm_new_machines(&mut self, now: i64, embedded: &Embedded) {
        let aws = embedded.cluster.aws();
        let fresh: Vec<String> = aws
            .instances()
            .into_iter()
            .map(|i| i.instance_id)
            .filter(|id| !self.machines_seen.contains(id))
            .collect();
        for id in fresh {
            self.machines_seen.insert(id.clone());
            let Some(kind) = (!self.armed_for_next_machine.is_empty())
                .then(|| self.armed_for_next_machine.remove(0))
            else {
                continue;
            };
            match kind {
                FaultKind::NodeNeverRegisters => {
                    aws.set_node_fault(&id, Some(NodeFault::NeverRegisters));
                }
                _ => {
                    let delay = self.rng.random_range(60..300);
                    let at = jiff::Timestamp::from_second(now + delay)
                        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
                    aws.set_node_fault(&id, Some(NodeFault::RegisterAfter(at)));
                    self.undo
                        .push((now + delay + 1, Undo::ClearNodeFault { instance_id: id }));
                }
            }
        }
    }

    /// Makes armed replacements (NodeClaims a disruption command waits for, launched since)
    /// never become Ready.
    fn arm_new_replacements(&mut self, embedded: &Embedded, snapshot: &Snapshot) {
        let waited_for: Vec<&str> = snapshot
            .store
            .nodeclaims
            .values()
            .filter_map(|c| c.annotation(ANNOTATION_DISRUPTION_REPLACEMENTS))
            .flat_map(|r| r.split(','))
            .filter(|r| !r.is_empty())
            .collect();
        for name in waited_for {
            let Some(claim) = snapshot.store.nodeclaims.get(name) else {
                continue;
            };
            let Some(provider) = claim
                .status
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .filter(|p| !p.is_empty())
            else {
                continue;
            };
            if !self.replacements_seen.insert(name.to_string()) {
                continue;
            }
            if self.replacement_never_ready_armed > 0 {
                self.replacement_never_ready_armed -= 1;
                embedded
                    .cluster
                    .aws()
                    .set_node_fault(instance_id(provider), Some(NodeFault::NeverReady));
                tracing::info!(
                    nodeclaim = name,
                    "chaos: replacement will never become Ready"
                );
            }
        }
    }

    /// PDBs (namespace/name) selecting any pod bound to `node`.
    fn pdbs_on_node(snapshot: &Snapshot, node: &str) -> Vec<String> {
        let pods: Vec<&CachedPod> = snapshot
            .pods_by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|key| snapshot.store.pods.get(key))
            .map(AsRef::as_ref)
            .collect();
        super::invariants::pdbs_selecting(snapshot, &pods)
    }

    /// `pdb-blocking` where the cluster has no PDB of its own: a PDB with `maxUnavailable: 0`
    /// over one workload's pods for 2–10 min, so that its pods cannot be evicted until it is
    /// removed. It is held to the PDB invariant like any other, except while an earlier
    /// involuntary fault may still take pods it covers.
    async fn apply_blocking_pdb(
        &mut self,
        now: i64,
        embedded: &Embedded,
        snapshot: &Snapshot,
    ) -> Option<String> {
        // (namespace, the labels its pods share but for per-pod and per-revision ones).
        let workloads: BTreeSet<(String, BTreeMap<String, String>)> = snapshot
            .store
            .pods
            .values()
            .filter(|p| !p.is_terminating())
            .filter_map(|p| {
                let owned = p.has_owner_kind("ReplicaSet") || p.has_owner_kind("StatefulSet");
                let selector: BTreeMap<String, String> = p
                    .labels()
                    .iter()
                    .filter(|(k, _)| !UNSTABLE_POD_LABELS.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                (owned && !selector.is_empty()).then(|| (p.namespace().to_string(), selector))
            })
            .collect();
        let choices: Vec<&(String, BTreeMap<String, String>)> = workloads.iter().collect();
        let (namespace, selector) = (*pick(&mut self.rng, &choices)?).clone();
        self.temporary_pdbs += 1;
        let name = format!("{TEMPORARY_PDB_PREFIX}{}", self.temporary_pdbs);
        let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": selector}},
        }))
        .ok()?;
        let api: Api<PodDisruptionBudget> = Api::namespaced(embedded.cluster.client(), &namespace);
        if let Err(error) = api.create(&PostParams::default(), &pdb).await {
            tracing::warn!(%error, pdb = %format!("{namespace}/{name}"), "chaos: could not apply the temporary PDB");
            return None;
        }
        let minutes = self.rng.random_range(2..10);
        self.undo.push((
            now + minutes * 60,
            Undo::DeletePdb {
                namespace: namespace.clone(),
                name: name.clone(),
            },
        ));
        let key = format!("{namespace}/{name}");
        let in_flight = self
            .involuntary_until
            .values()
            .copied()
            .chain([self.all_involuntary_until])
            .max()
            .unwrap_or(i64::MIN);
        if in_flight >= now {
            self.excuse(vec![key.clone()], in_flight);
        }
        let selector: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
        Some(format!(
            "PDB {key} (maxUnavailable 0 over {}) for {minutes}m",
            selector.join(",")
        ))
    }

    /// Spot instances whose two minutes ran out: one driftwood did not terminate in time was
    /// reclaimed by EC2 with its pods (involuntary: its PDBs are excused from then on). One
    /// driftwood drained and terminated within the warning excuses nothing.
    fn reclaim_due(&mut self, now: i64, embedded: &Embedded, snapshot: &Snapshot) {
        let (due, later): (Vec<_>, Vec<_>) =
            self.reclaims.drain(..).partition(|(at, _, _)| *at <= now);
        self.reclaims = later;
        for (_, id, node) in due {
            if !embedded.cluster.aws().reclaimed_by_ec2(&id) {
                continue;
            }
            tracing::info!(instance = %id, "chaos: spot instance reclaimed by EC2 before it was terminated");
            if let Some(node) = &node {
                let pdbs = Self::pdbs_on_node(snapshot, node);
                self.excuse(pdbs, now + 600);
            }
        }
    }

    /// Excuses the PDBs of the pods on each failing host a NodeClaim still holds.
    fn excuse_failing_hosts(&mut self, now: i64, snapshot: &Snapshot) {
        let hosts = std::mem::take(&mut self.failing_hosts);
        for id in hosts {
            let claim = snapshot.store.nodeclaims.values().find(|c| {
                c.status
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .is_some_and(|p| instance_id(p) == id)
            });
            let Some(claim) = claim else {
                continue;
            };
            if let Some(node) = claim.status.as_ref().and_then(|s| s.node_name.as_deref()) {
                let pdbs = Self::pdbs_on_node(snapshot, node);
                self.excuse(pdbs, now + 300);
            }
            self.failing_hosts.push(id);
        }
    }

    fn excuse(&mut self, pdbs: Vec<String>, until: i64) {
        for pdb in pdbs {
            let entry = self.involuntary_until.entry(pdb).or_insert(until);
            *entry = (*entry).max(until);
        }
    }

    /// Running spot instances of the pools, as (instance id, node name if registered).
    fn spot_machines(snapshot: &Snapshot) -> Vec<(String, Option<String>)> {
        use driftwood_api::lookup::ObjectLookups as _;
        Self::machines_where(snapshot, |c| {
            c.label(driftwood_api::wellknown::LABEL_CAPACITY_TYPE) == Some("spot")
        })
    }

    /// Running pool instances as (instance id, node name if registered).
    fn pool_machines(snapshot: &Snapshot) -> Vec<(String, Option<String>)> {
        Self::machines_where(snapshot, |_| true)
    }

    /// The instances of the NodeClaims (not being deleted) that `keep` accepts, as (instance
    /// id, node name if registered).
    fn machines_where(
        snapshot: &Snapshot,
        keep: impl Fn(&driftwood_api::NodeClaim) -> bool,
    ) -> Vec<(String, Option<String>)> {
        snapshot
            .store
            .nodeclaims
            .values()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .filter(|c| keep(c))
            .filter_map(|c| {
                let status = c.status.as_ref()?;
                let provider = status.provider_id.as_deref().filter(|p| !p.is_empty())?;
                Some((
                    instance_id(provider).to_string(),
                    status.node_name.clone().filter(|n| !n.is_empty()),
                ))
            })
            .collect()
    }

    /// Injects one fault of `kind`; what it hit, or None when it found no target.
    async fn inject(
        &mut self,
        kind: FaultKind,
        now: i64,
        embedded: &mut Embedded,
        snapshot: &Snapshot,
    ) -> Option<String> {
        let aws = embedded.cluster.aws();
        let rng = &mut self.rng;
        match kind {
            FaultKind::InsufficientCapacity => {
                let claims: Vec<_> = snapshot.store.nodeclaims.values().collect();
                let claim = pick(rng, &claims)?;
                let label = |key| claim.label(key).unwrap_or_default().to_string();
                let instance_type = label(LABEL_INSTANCE_TYPE);
                let zone = label(LABEL_TOPOLOGY_ZONE);
                let capacity_type = label(LABEL_CAPACITY_TYPE);
                if instance_type.is_empty() || zone.is_empty() {
                    return None;
                }
                aws.inject_insufficient_capacity(&instance_type, &zone, &capacity_type);
                let minutes = rng.random_range(5..20);
                self.undo.push((
                    now + minutes * 60,
                    Undo::RestoreCapacity {
                        instance_type: instance_type.clone(),
                        zone: zone.clone(),
                        capacity_type: capacity_type.clone(),
                    },
                ));
                Some(format!(
                    "no {capacity_type} capacity for {instance_type} in {zone} for {minutes}m"
                ))
            }
            FaultKind::FleetPartialFailure => {
                aws.fail_next_fleets_partially(1);
                Some("the next CreateFleet finds no capacity in its cheaper half".into())
            }
            FaultKind::CloudThrottling => {
                let ops = [
                    "CreateFleet",
                    "DescribeInstances",
                    "TerminateInstances",
                    "CreateLaunchTemplate",
                    "DescribeLaunchTemplates",
                    "DescribeImages",
                    "DescribeSubnets",
                    "DescribeInstanceStatus",
                ];
                let op = *pick(rng, &ops)?;
                let calls = rng.random_range(1..6);
                aws.throttle(op, calls);
                Some(format!("{op} throttled for {calls} calls"))
            }
            FaultKind::CloudServerError => {
                let ops = [
                    "CreateFleet",
                    "DescribeInstances",
                    "TerminateInstances",
                    "CreateTags",
                    "DescribeInstanceStatus",
                ];
                let op = *pick(rng, &ops)?;
                let code = if rng.random_bool(0.5) {
                    codes::INTERNAL_ERROR
                } else {
                    "Unavailable"
                };
                aws.inject_error(op, AwsError::new(code, "injected server error"));
                Some(format!("{op} fails once with {code}"))
            }
            FaultKind::LaunchTemplateNotFound => {
                let names = aws.launch_template_names();
                let name = pick(rng, &names)?.clone();
                aws.forget_launch_template(&name);
                Some(format!("launch template {name} deleted"))
            }
            FaultKind::InstanceNeverRunning => {
                aws.stick_next_launches(1);
                Some("the next instance launched stays pending".into())
            }
            FaultKind::InstanceTerminated => {
                let machines = Self::pool_machines(snapshot);
                let (id, node) = pick(rng, &machines)?.clone();
                if !aws.terminate_from_outside(&id) {
                    return None;
                }
                self.terminated_instances.insert(id.clone());
                if let Some(node) = &node {
                    let pdbs = Self::pdbs_on_node(snapshot, node);
                    self.excuse(pdbs, now + 600);
                }
                Some(format!(
                    "instance {id} (node {}) terminated from outside",
                    node.as_deref().unwrap_or("not registered")
                ))
            }
            FaultKind::SpotInterruption => {
                let machines = Self::spot_machines(snapshot);
                let (id, node) = pick(rng, &machines)?.clone();
                if !aws.interrupt_spot(&id) {
                    return None;
                }
                // Interrupted from outside: driftwood deleting its NodeClaim at once, even
                // mid-way through a drift command whose replacement is not up yet, is the
                // answer to EC2's warning, not a breach of replacement-first.
                self.terminated_instances.insert(id.clone());
                self.reclaims.push((now + 120, id.clone(), node.clone()));
                Some(format!(
                    "spot interruption warning for instance {id} (node {}); EC2 reclaims it in 2m",
                    node.as_deref().unwrap_or("not registered")
                ))
            }
            FaultKind::ImpairedInstance => {
                use driftwood_sim_aws::faults::Impairment;
                let machines: Vec<(String, Option<String>)> = Self::pool_machines(snapshot)
                    .into_iter()
                    .filter(|(id, _)| !self.impaired.contains(id))
                    .collect();
                let (id, node) = pick(rng, &machines)?.clone();
                let since = jiff::Timestamp::from_second(now).ok()?;
                let (impairment, what, forceful) = match rng.random_range(0..3) {
                    0 => (
                        Impairment {
                            system_check_failed_since: Some(since),
                            ..Impairment::default()
                        },
                        "its system status check fails".to_string(),
                        true,
                    ),
                    1 => (
                        Impairment {
                            instance_check_failed_since: Some(since),
                            ..Impairment::default()
                        },
                        "its instance status check fails".to_string(),
                        true,
                    ),
                    _ => {
                        let codes = [
                            "instance-retirement",
                            "system-maintenance",
                            "system-reboot",
                            "instance-reboot",
                            "instance-stop",
                        ];
                        let code = (*pick(rng, &codes)?).to_string();
                        (
                            Impairment {
                                scheduled_event: Some(code.clone()),
                                ..Impairment::default()
                            },
                            format!("an {code} event is scheduled for it"),
                            false,
                        )
                    }
                };
                aws.set_impairment(&id, Some(impairment.clone()));
                self.impaired.insert(id.clone());
                // A failed host takes its kubelet with it.
                if impairment.system_check_failed_since.is_some() {
                    aws.set_node_fault(&id, Some(NodeFault::NotReady));
                }
                // Its NodeClaim is deleted without waiting for a drift replacement (the answer
                // to EC2, not a breach of replacement-first); a failed check is a forceful
                // termination, which does not wait on PDBs (two minutes for the check to count,
                // then the drain): its Node's PDBs are excused while it is there.
                self.terminated_instances.insert(id.clone());
                if forceful {
                    if let Some(node) = &node {
                        let pdbs = Self::pdbs_on_node(snapshot, node);
                        self.excuse(pdbs, now + 300);
                    }
                    self.failing_hosts.push(id.clone());
                }
                Some(format!(
                    "instance {id} (node {}) reported unhealthy by EC2: {what}",
                    node.as_deref().unwrap_or("not registered")
                ))
            }
            FaultKind::ApiConflict | FaultKind::ApiThrottling | FaultKind::ApiServerError => {
                let error = match kind {
                    FaultKind::ApiConflict => WriteError::Conflict,
                    FaultKind::ApiThrottling => WriteError::TooManyRequests,
                    _ if rng.random_bool(0.5) => WriteError::Internal,
                    _ => WriteError::Unavailable,
                };
                let count = rng.random_range(1..6);
                embedded.api_faults.fail_next_writes(error, count);
                Some(format!(
                    "the controllers' next {count} writes fail with {error:?}"
                ))
            }
            FaultKind::ApiSlow => {
                let count = rng.random_range(1..20);
                let by = Duration::from_millis(rng.random_range(200..5000));
                embedded.api_faults.slow_next_requests(count, by);
                Some(format!(
                    "the controllers' next {count} requests take {by:?} longer"
                ))
            }
            FaultKind::WatchClosed => {
                embedded.cluster.api_server().disconnect_watches();
                Some("every watch closed".into())
            }
            FaultKind::WatchExpired => {
                embedded.cluster.api_server().expire_watches();
                Some("every watch expired (410)".into())
            }
            FaultKind::ControllerCrash => {
                if embedded.api_faults.crash_pending() {
                    return None;
                }
                let writes = rng.random_range(1..30);
                embedded.api_faults.crash_after_writes(writes);
                Some(format!(
                    "the process making the {writes}th write from now dies"
                ))
            }
            FaultKind::LeaderFailover => {
                let leader = self.replicas.iter().position(Replica::is_leading)?;
                let replica = self.replicas.remove(leader);
                let identity = replica.identity.clone();
                drop(replica);
                let delay = self.rng.random_range(5..30);
                self.undo.push((now + delay, Undo::StartReplica));
                Some(format!("leader {identity} killed"))
            }
            FaultKind::NodeNeverRegisters | FaultKind::KubeletSlowRegistration => {
                self.armed_for_next_machine.push(kind);
                Some("armed for the next machine".into())
            }
            FaultKind::ReplacementNeverReady => {
                self.replacement_never_ready_armed += 1;
                Some("armed for the next replacement".into())
            }
            FaultKind::NodeNotReady => {
                let machines = Self::pool_machines(snapshot);
                // Prefer a node being drained (NotReady mid-drain).
                let draining: Vec<(String, Option<String>)> = machines
                    .iter()
                    .filter(|(_, node)| {
                        node.as_ref()
                            .and_then(|n| snapshot.store.nodes.get(n))
                            .and_then(|n| n.spec.as_ref())
                            .and_then(|s| s.taints.as_ref())
                            .is_some_and(|t| t.iter().any(|t| t.key == TAINT_DISRUPTED_KEY))
                    })
                    .cloned()
                    .collect();
                let from = if !draining.is_empty() && rng.random_bool(0.5) {
                    &draining
                } else {
                    &machines
                };
                let (id, node) = pick(rng, from)?.clone();
                let node = node?;
                let minutes = rng.random_range(1..8);
                aws.set_node_fault(&id, Some(NodeFault::NotReady));
                self.undo
                    .push((now + minutes * 60, Undo::ClearNodeFault { instance_id: id }));
                let pdbs = Self::pdbs_on_node(snapshot, &node);
                self.excuse(pdbs, now + minutes * 60 + 300);
                Some(format!("node {node} NotReady for {minutes}m"))
            }
            FaultKind::PodSlowTermination | FaultKind::PodStuckTerminating => {
                let pods: Vec<&CachedPod> = snapshot
                    .store
                    .pods
                    .values()
                    .map(AsRef::as_ref)
                    .filter(|p| !p.is_terminating() && p.node_name.is_some())
                    .filter(|p| p.has_owner_kind("ReplicaSet") || p.has_owner_kind("StatefulSet"))
                    .collect();
                let pod = *pick(rng, &pods)?;
                let namespace = pod.namespace().to_string();
                let name = pod.name.to_string();
                let value = if kind == FaultKind::PodStuckTerminating {
                    "never"
                } else {
                    "full-grace"
                };
                let api: Api<Pod> = Api::namespaced(embedded.cluster.client(), &namespace);
                let patch = serde_json::json!({"metadata": {"annotations": {ANNOTATION_TERMINATION: value}}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .ok()?;
                Some(format!("pod {namespace}/{name} will terminate: {value}"))
            }
            FaultKind::PdbBlocking => {
                let pdbs: Vec<String> = snapshot
                    .store
                    .pdbs
                    .iter()
                    .filter(|(_, pdb)| !is_temporary_pdb(pdb))
                    .map(|(key, _)| key.clone())
                    .collect();
                if pdbs.is_empty() {
                    return self.apply_blocking_pdb(now, embedded, snapshot).await;
                }
                let key = pick(rng, &pdbs)?.clone();
                let pdb = snapshot.store.pdbs.get(&key)?;
                let pods = super::invariants::pods_of_pdb(snapshot, pdb);
                let ready: Vec<&CachedPod> = pods
                    .into_iter()
                    .filter(|p| super::invariants::pod_ready(p))
                    .collect();
                let pod = *pick(rng, &ready)?;
                let namespace = pod.namespace().to_string();
                let name = pod.name.to_string();
                let api: Api<Pod> = Api::namespaced(embedded.cluster.client(), &namespace);
                let patch =
                    serde_json::json!({"metadata": {"annotations": {ANNOTATION_READY: "false"}}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .ok()?;
                let status = serde_json::json!({"status": {"conditions": [
                    {"type": "Ready", "status": "False"},
                    {"type": "ContainersReady", "status": "False"}
                ]}});
                api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&status))
                    .await
                    .ok()?;
                let minutes = rng.random_range(2..10);
                self.undo.push((
                    now + minutes * 60,
                    Undo::PodReady {
                        namespace,
                        name: name.clone(),
                    },
                ));
                self.excuse(vec![key.clone()], now + minutes * 60 + 120);
                Some(format!("PDB {key}: pod {name} unready for {minutes}m"))
            }
        }
    }
}
