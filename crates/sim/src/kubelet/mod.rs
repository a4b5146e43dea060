//! Simulated kubelets: one per running machine of a [`MachineFleet`]. They register Nodes,
//! make them Ready after a delay, run the pods bound to them, finish terminating pods, and
//! take the Node away when the machine is gone — all through a `kube::Client`.

mod attention;
pub mod node_lease;
pub mod node_template;
pub mod plan;
pub mod pod_watch;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use driftwood_aws::ports::InstanceTypeDescription;
use driftwood_sim_aws::{Machine, MachineSource, SimAws};
use futures::StreamExt as _;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod, Taint};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::clock::SharedClock;
use crate::watch_cache::{Changes, WatchCache};

use attention::Attention;
use node_lease::{LeaseBook, LeaseWrite, LiveNode};
pub use node_template::{MachineFacts, NodeResources, kubelet_version, node_name};
pub use plan::{KubeletAction, KubeletPlan, KubeletTimings, NodeFault};
use pod_watch::{PodKey, PodWatch};

/// Where kubelets find their machines and what those machines are.
pub trait MachineFleet: Send + Sync {
    /// The machines that are running now.
    fn running_machines(&self) -> Vec<Arc<Machine>>;
    /// The instance type's description, when known.
    fn instance_type(&self, name: &str) -> Option<InstanceTypeDescription>;
    /// The name of an image, when known.
    fn image_name(&self, image_id: &str) -> Option<String>;
    /// The machines whose kubelets misbehave, by provider ID.
    fn node_faults(&self) -> BTreeMap<String, NodeFault> {
        BTreeMap::new()
    }
}

impl MachineFleet for SimAws {
    fn running_machines(&self) -> Vec<Arc<Machine>> {
        MachineSource::running_machines(self)
    }

    fn instance_type(&self, name: &str) -> Option<InstanceTypeDescription> {
        driftwood_sim_aws::instance_catalog::describe(name).cloned()
    }

    fn image_name(&self, image_id: &str) -> Option<String> {
        self.image(image_id).map(|i| i.image.name)
    }

    fn node_faults(&self) -> BTreeMap<String, NodeFault> {
        SimAws::node_faults(self)
    }
}

/// Kubelet settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletConfig {
    /// Delays.
    pub timings: KubeletTimings,
    /// How often the machine list is polled.
    pub machine_poll_interval: Duration,
    /// Kubernetes minor version used when a machine's image does not say (e.g. `1.29`).
    pub kubernetes_version: String,
    /// How often the kubelets renew their Node Leases.
    pub node_lease_renew_interval: Duration,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            timings: KubeletTimings::default(),
            machine_poll_interval: Duration::from_secs(1),
            kubernetes_version: "1.29".to_string(),
            node_lease_renew_interval: node_lease::DEFAULT_RENEW_INTERVAL,
        }
    }
}

/// The running kubelets; dropping this stops them.
#[derive(Debug)]
pub struct Kubelets {
    task: JoinHandle<()>,
}

impl Kubelets {
    /// Start the kubelets on the current tokio runtime.
    pub fn spawn(
        client: Client,
        fleet: Arc<dyn MachineFleet>,
        clock: SharedClock,
        config: KubeletConfig,
    ) -> Self {
        let task = tokio::spawn(run(client, fleet, clock, config));
        Self { task }
    }
}

impl Drop for Kubelets {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Actions issued recently are not issued again until the caches have had a chance to see them.
const REISSUE_AFTER: Duration = Duration::from_secs(1);

fn facts_for(fleet: &dyn MachineFleet, machine: &Machine) -> MachineFacts {
    let resources = match fleet.instance_type(&machine.instance_type) {
        Some(description) => node_template::node_resources(&description),
        None => node_template::node_resources_from_labels(&machine.labels),
    };
    MachineFacts {
        resources,
        image_name: fleet.image_name(&machine.image_id).unwrap_or_default(),
    }
}

/// The running machines with their facts; facts depend only on the instance type and image,
/// so they are worked out once per pair.
fn poll_machines(fleet: &dyn MachineFleet) -> Vec<(Arc<Machine>, Arc<MachineFacts>)> {
    let mut facts: BTreeMap<(String, String), Arc<MachineFacts>> = BTreeMap::new();
    fleet
        .running_machines()
        .into_iter()
        .map(|m| {
            let known = facts
                .entry((m.instance_type.clone(), m.image_id.clone()))
                .or_insert_with(|| Arc::new(facts_for(fleet, &m)))
                .clone();
            (m, known)
        })
        .collect()
}

async fn run(
    client: Client,
    fleet: Arc<dyn MachineFleet>,
    clock: SharedClock,
    config: KubeletConfig,
) {
    let changed = Arc::new(Notify::new());
    let nodes: WatchCache<Node> = WatchCache::spawn_tracked(client.clone(), Arc::clone(&changed));
    let pods: WatchCache<Pod> = WatchCache::spawn_tracked(client.clone(), Arc::clone(&changed));
    let volumes: WatchCache<VolumeAttachment> =
        WatchCache::spawn_tracked(client.clone(), Arc::clone(&changed));
    let claims: WatchCache<PersistentVolumeClaim> =
        WatchCache::spawn_tracked(client.clone(), Arc::clone(&changed));
    nodes.ready().await;
    pods.ready().await;
    volumes.ready().await;
    claims.ready().await;
    let mut issued: BTreeMap<String, Timestamp> = BTreeMap::new();
    let mut machines: Vec<(Arc<Machine>, Arc<MachineFacts>)> = Vec::new();
    let mut running: HashSet<String> = HashSet::new();
    let mut machines_read_at: Option<Timestamp> = None;
    let mut faults = BTreeMap::new();
    let mut leases = LeaseBook::default();
    let mut lease_write_failed = false;
    let mut registrations_due: Option<Timestamp> = None;
    let mut node_gone = false;
    // What a pass looks at: the Nodes and pods that changed (their own events, a machine
    // starting, stopping or changing fault, a Node's change for its pods) or whose next step is
    // due. At fleet scale, planning every Node and pod of the cluster on every wake-up was most
    // of the simulation's time.
    let mut node_attention: Attention<String> = Attention::default();
    let mut states = plan::NodeStates::default();
    let mut watch = PodWatch::default();
    loop {
        let now = clock.now();
        // The machine list is polled (every machine_poll_interval), not rebuilt on every
        // Kubernetes event: at fleet scale that rebuild was most of the simulation's time.
        let polled = machines_read_at
            .is_none_or(|at| now.duration_since(at).unsigned_abs() >= config.machine_poll_interval);
        let mut machines_changed = BTreeSet::new();
        if polled {
            let polled_machines = poll_machines(fleet.as_ref());
            let polled_faults = fleet.node_faults();
            machines_changed =
                changed_machines(&machines, &faults, &polled_machines, &polled_faults);
            machines = polled_machines;
            faults = polled_faults;
            running = machines
                .iter()
                .map(|(m, _)| m.provider_id.clone())
                .collect();
            machines_read_at = Some(now);
        }
        // The changes are taken before the Nodes are read: a Node event landing in between is
        // then in what the pass reads, not consumed and missed.
        let (pod_changes, node_changes) = (pods.take_changes(), nodes.take_changes());
        let (volume_changes, claim_changes) = (volumes.take_changes(), claims.take_changes());
        // Every lease is renewed at the tick (and after a failed write); between ticks, only
        // the Nodes looked at get theirs created.
        let lease_tick = lease_write_failed || leases.is_due(now, config.node_lease_renew_interval);
        // The whole Node list is read only when something needs it: the machine poll
        // (registrations, machines mapped to Nodes), the lease tick, a relist.
        let register = polled || node_gone || registrations_due.is_some_and(|due| due <= now);
        let node_list = if register || lease_tick || node_changes.relisted {
            nodes.objects()
        } else {
            Vec::new()
        };
        if node_changes.relisted {
            let current: HashSet<&str> = node_list
                .iter()
                .filter_map(|n| n.metadata.name.as_deref())
                .collect();
            let gone: Vec<String> = states
                .names()
                .filter(|name| !current.contains(name.as_str()))
                .cloned()
                .collect();
            for name in current.iter().map(|n| (*n).to_string()).chain(gone) {
                node_attention.mark(name);
            }
        }
        for (_, name) in node_changes.touched {
            node_attention.mark(name);
        }
        if !machines_changed.is_empty() {
            for node in &node_list {
                let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.as_deref());
                if provider_id.is_some_and(|id| machines_changed.contains(id))
                    && let Some(name) = &node.metadata.name
                {
                    node_attention.mark(name.clone());
                }
            }
        }
        note_pod_changes(&mut watch, &pods, pod_changes);
        if !volume_changes.is_empty() || !claim_changes.is_empty() {
            watch.claims_changed();
        }
        node_gone = false;
        let mut plan = if register {
            let registered: HashSet<&str> = node_list
                .iter()
                .filter_map(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()))
                .collect();
            let named: HashSet<&str> = node_list
                .iter()
                .filter_map(|n| n.metadata.name.as_deref())
                .collect();
            let registrations = plan::plan_registrations(
                &machines,
                &|id| registered.contains(id),
                &|name| named.contains(name),
                now,
                &config.kubernetes_version,
                &faults,
            );
            registrations_due = registrations.next_due;
            registrations
        } else {
            KubeletPlan::default()
        };
        let mut looked_at: Vec<Arc<Node>> = Vec::new();
        for name in node_attention.take(now) {
            // Whatever became of the Node, its pods are looked at again.
            watch.node_changed(&name);
            let Some(node) = nodes.get("", &name) else {
                // Its machine, if it still runs, registers again (next pass).
                states.set(&name, None);
                node_gone = true;
                continue;
            };
            looked_at.push(Arc::clone(&node));
            let step = plan::plan_node(
                node,
                &|id| running.contains(id),
                &faults,
                now,
                &config.timings,
            );
            if let Some(due) = step.due {
                node_attention.at(name.clone(), due);
            }
            if !step.actions.is_empty() {
                node_attention.at(name.clone(), plan::plus(now, REISSUE_AFTER));
            }
            plan.actions.extend(step.actions);
            states.set(&name, Some(step.state));
        }
        for key in watch.take(now) {
            let Some(pod) = pods.get(&key.0, &key.1) else {
                continue;
            };
            let step = plan::plan_pod(&pod, &states, now, &config.timings);
            if let Some(due) = step.due {
                watch.look_again_at(key.clone(), due);
            }
            if let Some(action) = step.action {
                plan.actions.push(action);
                // Looked at again once the action may be issued again, should it not take.
                watch.look_again_at(key, plan::plus(now, REISSUE_AFTER));
            }
        }
        let claim_users: Vec<Arc<Pod>> = watch
            .claim_users()
            .filter_map(|(namespace, name)| pods.get(namespace, name))
            .collect();
        let attachments = volumes.objects();
        if !claim_users.is_empty() || !attachments.is_empty() {
            let node_list = if node_list.is_empty() {
                nodes.objects()
            } else {
                node_list.clone()
            };
            let attach = plan::plan_volumes(
                &attachments,
                &node_list,
                &claim_users,
                &claims.objects(),
                now,
                &config.timings,
            );
            // A pod whose volumes are not attached to its node yet does not start.
            plan.actions.retain(|action| match action {
                KubeletAction::StartPod {
                    namespace, name, ..
                } => !attach.waiting.contains(&format!("{namespace}/{name}")),
                _ => true,
            });
            plan.actions.extend(attach.plan.actions);
            plan.next_due = earliest(plan.next_due, attach.plan.next_due);
        }
        plan.next_due = earliest(plan.next_due, watch.next_due());
        plan.next_due = earliest(plan.next_due, node_attention.next_due());
        // The leases: renewed at their tick; created for Nodes that turned live (a Node or
        // machine change), or again after a failed write.
        let lease_nodes = if lease_tick { &node_list } else { &looked_at };
        let live = live_nodes(&running, lease_nodes, &faults);
        let (lease_writes, next_tick) = leases.plan(&live, now, config.node_lease_renew_interval);
        issued.retain(|_, at| now.duration_since(*at).unsigned_abs() < REISSUE_AFTER && *at <= now);
        let fresh: Vec<KubeletAction> = plan
            .actions
            .into_iter()
            .filter(|action| match issued.entry(action.key()) {
                std::collections::btree_map::Entry::Vacant(slot) => {
                    slot.insert(now);
                    true
                }
                std::collections::btree_map::Entry::Occupied(_) => false,
            })
            .collect();
        // Every node has its own kubelet (and the attach/detach controller works per volume):
        // one plan's actions touch distinct objects and go to the API server at once, as
        // separate processes' would. One after another, each write's latency would add up and
        // nodes launched together would turn Ready a write's latency apart per node.
        let actions = futures::stream::iter(fresh).for_each_concurrent(None, |action| {
            let client = client.clone();
            let now = clock.now();
            async move {
                if let Err(error) = execute(&client, now, action).await {
                    tracing::debug!(%error, "kubelet action failed; will retry");
                }
            }
        });
        let lease_writes = futures::stream::iter(lease_writes)
            .map(|write| write_lease(client.clone(), clock.now(), write))
            .buffer_unordered(usize::MAX)
            .collect::<Vec<_>>();
        let ((), outcomes) = futures::join!(actions, lease_writes);
        lease_write_failed = false;
        for outcome in outcomes {
            match outcome {
                LeaseOutcome::Held(node) => leases.holding(&node),
                LeaseOutcome::Lost(name) => {
                    leases.lost(&name);
                    lease_write_failed = true;
                }
                LeaseOutcome::Failed => lease_write_failed = true,
            }
        }
        // Wake for the next thing due, counted from now (the pass's writes took time).
        let after = clock.now();
        let until = |due: Timestamp| {
            if due <= after {
                Duration::from_millis(1)
            } else {
                due.duration_since(after)
                    .unsigned_abs()
                    .max(Duration::from_millis(1))
            }
        };
        let next_poll =
            machines_read_at.map_or(after, |at| plan::plus(at, config.machine_poll_interval));
        let mut wait = until(next_poll);
        for due in [plan.next_due, Some(next_tick), registrations_due]
            .into_iter()
            .flatten()
        {
            wait = wait.min(until(due));
        }
        if !issued.is_empty() || lease_write_failed {
            wait = wait.min(REISSUE_AFTER);
        }
        if node_gone {
            wait = Duration::from_millis(1);
        }
        crate::watch_cache::wait_for_change(&changed, wait).await;
    }
}

/// Tell `watch` which pods changed since the last pass.
fn note_pod_changes(watch: &mut PodWatch, pods: &WatchCache<Pod>, changes: Changes) {
    if changes.relisted {
        let all = pods.objects();
        watch.relisted(all.iter().map(|pod| (key_of(pod), pod.as_ref())));
    } else {
        for key in changes.touched {
            let pod = pods.get(&key.0, &key.1);
            watch.pod_changed(key, pod.as_deref());
        }
    }
}

/// The earlier of two optional times.
fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn key_of(pod: &Pod) -> PodKey {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// The provider IDs of the machines that started or stopped running, or whose fault changed,
/// between two polls.
fn changed_machines(
    before: &[(Arc<Machine>, Arc<MachineFacts>)],
    faults_before: &BTreeMap<String, NodeFault>,
    now: &[(Arc<Machine>, Arc<MachineFacts>)],
    faults_now: &BTreeMap<String, NodeFault>,
) -> BTreeSet<String> {
    let ids = |machines: &[(Arc<Machine>, Arc<MachineFacts>)]| -> BTreeSet<String> {
        machines
            .iter()
            .map(|(m, _)| m.provider_id.clone())
            .collect()
    };
    let (before, now) = (ids(before), ids(now));
    let mut changed: BTreeSet<String> = before.symmetric_difference(&now).cloned().collect();
    for id in faults_before.keys().chain(faults_now.keys()) {
        if faults_before.get(id) != faults_now.get(id) {
            changed.insert(id.clone());
        }
    }
    changed
}

/// The registered nodes (of `nodes`) whose kubelets are posting status — their machine runs,
/// and has not been told to stop reporting — as (name, uid), borrowed from `nodes`.
fn live_nodes<'a>(
    running: &HashSet<String>,
    nodes: &'a [Arc<Node>],
    faults: &BTreeMap<String, NodeFault>,
) -> Vec<(&'a str, &'a str)> {
    nodes
        .iter()
        .filter(|n| {
            n.metadata.deletion_timestamp.is_none()
                && n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .is_some_and(|id| {
                        running.contains(id) && !matches!(faults.get(id), Some(NodeFault::NotReady))
                    })
        })
        .filter_map(|n| Some((n.metadata.name.as_deref()?, n.metadata.uid.as_deref()?)))
        .collect()
}

/// What became of one lease write.
enum LeaseOutcome {
    /// The lease exists (created, found existing, or renewed).
    Held(LiveNode),
    /// The lease is not known to be held (not there to renew, or the renewal failed): the next
    /// pass creates it, renewing the one it finds.
    Lost(String),
    /// Any other failure: logged, and the write is repeated on a later pass.
    Failed,
}

async fn write_lease(client: Client, now: Timestamp, write: LeaseWrite) -> LeaseOutcome {
    let api: Api<Lease> = Api::namespaced(client.clone(), node_lease::NODE_LEASE_NAMESPACE);
    match write {
        LeaseWrite::Create(node) => {
            let lease: Lease = match serde_json::from_value(node_lease::lease_for(&node, now)) {
                Ok(lease) => lease,
                Err(error) => {
                    tracing::warn!(node = %node.name, %error, "kubelet: node lease not built");
                    return LeaseOutcome::Failed;
                }
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => LeaseOutcome::Held(node),
                // Made by an earlier kubelet of this node (a restart): renew it instead.
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    Box::pin(write_lease(client, now, LeaseWrite::Renew(node))).await
                }
                Err(error) => {
                    tracing::debug!(node = %node.name, %error, "kubelet: node lease not created; will retry");
                    LeaseOutcome::Failed
                }
            }
        }
        LeaseWrite::Renew(node) => {
            let patch = Patch::Merge(node_lease::renewal(now));
            match api.patch(&node.name, &PatchParams::default(), &patch).await {
                Ok(_) => LeaseOutcome::Held(node),
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    LeaseOutcome::Lost(node.name)
                }
                // Forgotten, so the next pass creates it (finding it, then renewing it).
                Err(error) => {
                    tracing::debug!(node = %node.name, %error, "kubelet: node lease not renewed; will retry");
                    LeaseOutcome::Lost(node.name)
                }
            }
        }
    }
}

fn delete_now() -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    }
}

async fn execute(
    client: &Client,
    now: Timestamp,
    action: KubeletAction,
) -> Result<(), kube::Error> {
    let node_api: Api<Node> = Api::all(client.clone());
    let params = PatchParams::default();
    match action {
        KubeletAction::RegisterNode(node) => {
            let node: Node = serde_json::from_value(node).map_err(kube::Error::SerdeError)?;
            node_api.create(&PostParams::default(), &node).await?;
        }
        KubeletAction::MarkNodeReady { node } => {
            let Some(updated) = set_node_ready(&node_api, &node, now, true).await? else {
                return Ok(());
            };
            rewrite_taints(&node_api, updated, plan::without_readiness_taints).await?;
        }
        KubeletAction::MarkNodeNotReady { node } => {
            let Some(updated) = set_node_ready(&node_api, &node, now, false).await? else {
                return Ok(());
            };
            rewrite_taints(&node_api, updated, |taints| {
                plan::with_unreachable_taint(taints, now)
            })
            .await?;
        }
        KubeletAction::DeleteNode { node } => {
            ignore_missing(
                node_api
                    .delete(&node, &DeleteParams::default())
                    .await
                    .map(|_| ()),
            )?;
        }
        KubeletAction::StartPod {
            namespace,
            name,
            status,
        } => {
            let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
            ignore_missing(
                api.patch_status(&name, &params, &Patch::Merge(json!({"status": status})))
                    .await
                    .map(|_| ()),
            )?;
        }
        KubeletAction::MarkPodNotReady { namespace, name } => {
            let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
            let Some(pod) = ignore_missing_value(api.get(&name).await)? else {
                return Ok(());
            };
            let mut conditions: Vec<Value> = pod
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|c| serde_json::to_value(c).ok())
                .collect();
            for condition in &mut conditions {
                if matches!(
                    condition.get("type").and_then(Value::as_str),
                    Some("Ready" | "ContainersReady")
                ) && let Some(map) = condition.as_object_mut()
                {
                    map.insert("status".into(), json!("False"));
                    map.insert("reason".into(), json!("NodeNotReady"));
                }
            }
            ignore_missing(
                api.patch_status(
                    &name,
                    &params,
                    &Patch::Merge(json!({"status": {"conditions": conditions}})),
                )
                .await
                .map(|_| ()),
            )?;
        }
        KubeletAction::RemovePod { namespace, name } => {
            let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
            ignore_missing(api.delete(&name, &delete_now()).await.map(|_| ()))?;
        }
        KubeletAction::MarkVolumeDetaching { name, since } => {
            let api: Api<VolumeAttachment> = Api::all(client.clone());
            let patch = json!({"metadata": {"annotations": {plan::DETACHING_SINCE: since}}});
            ignore_missing(
                api.patch(&name, &params, &Patch::Merge(patch))
                    .await
                    .map(|_| ()),
            )?;
        }
        KubeletAction::AttachVolume { name, volume, node } => {
            let api: Api<VolumeAttachment> = Api::all(client.clone());
            let attachment: VolumeAttachment = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"attacher": plan::ATTACHER, "nodeName": node, "source": {"persistentVolumeName": volume}}
            }))
            .map_err(kube::Error::SerdeError)?;
            match api.create(&PostParams::default(), &attachment).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => return Err(error),
            }
            let attached = json!({"status": {"attached": true}});
            ignore_missing(
                api.patch_status(&name, &params, &Patch::Merge(attached))
                    .await
                    .map(|_| ()),
            )?;
        }
        KubeletAction::DetachVolume { name } => {
            let api: Api<VolumeAttachment> = Api::all(client.clone());
            ignore_missing(api.delete(&name, &delete_now()).await.map(|_| ()))?;
        }
        KubeletAction::CollectOrphan {
            namespace,
            name,
            node,
        } => {
            if ignore_missing_value(node_api.get(&node).await)?.is_none() {
                let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
                ignore_missing(api.delete(&name, &delete_now()).await.map(|_| ()))?;
            }
        }
    }
    Ok(())
}

/// Set the Ready condition (True, or Unknown when the kubelet went away) under the node's
/// current resourceVersion. Returns the updated node (None if the node is gone).
async fn set_node_ready(
    api: &Api<Node>,
    name: &str,
    now: Timestamp,
    ready: bool,
) -> Result<Option<Node>, kube::Error> {
    let Some(node) = ignore_missing_value(api.get(name).await)? else {
        return Ok(None);
    };
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let patched = plan::with_ready_condition(conditions, ready, now);
    let patch = json!({
        "metadata": {"resourceVersion": node.metadata.resource_version},
        "status": {"conditions": patched},
    });
    ignore_missing_value(
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await,
    )
}

/// Replace the node's taints with `rewrite(current)` under its resourceVersion (no write when
/// nothing changes).
async fn rewrite_taints(
    api: &Api<Node>,
    node: Node,
    rewrite: impl FnOnce(&[Taint]) -> Vec<Taint>,
) -> Result<(), kube::Error> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let rewritten = rewrite(&taints);
    if rewritten == taints {
        return Ok(());
    }
    let patch = json!({
        "metadata": {"resourceVersion": node.metadata.resource_version},
        "spec": {"taints": rewritten},
    });
    ignore_missing(
        api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(|_| ()),
    )
}

fn ignore_missing(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    ignore_missing_value(result).map(|_| ())
}

fn ignore_missing_value<T>(result: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(error),
    }
}
