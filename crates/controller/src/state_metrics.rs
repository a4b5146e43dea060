//! The gauges Karpenter derives from cluster state — per node (`karpenter_nodes_*`), per pod
//! (`karpenter_pods_state`) and the cluster's utilization — written at scrape time from the
//! snapshot the scrape took: no series outlives its object, and no label set is kept between
//! scrapes (at 5,000 nodes and 100,000 pods these are most of the exposition's series).
//!
//! Label names and values are Karpenter's (`pkg/controllers/metrics/node` and `…/pod`): per
//! node every well-known label under its name after the `/`, snake-cased (`zone`, `arch`,
//! `capacity_type`, `instance_type`, `nodepool`, `instance_cpu`, …), with `node_name`, `phase`
//! and `managed`, and `resource_type` where it applies. A label whose value is empty is left
//! out of the line: Prometheus stores an empty label as no label, so queries see the same
//! series, and the lines are shorter (a node carries about 35 well-known labels, most of them
//! unset).

use std::sync::{Arc, LazyLock, Mutex};

use driftwood_api::wellknown;
use driftwood_disruption::cached_pod::CachedPod;
use driftwood_scheduling::Resources;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use crate::state::Snapshot;

/// The well-known label keys with the metric label names Karpenter gives them.
static WELL_KNOWN: LazyLock<Vec<(&'static str, String)>> = LazyLock::new(|| {
    wellknown::WELL_KNOWN_LABELS
        .iter()
        .filter_map(|key| {
            let (_, name) = key.split_once('/')?;
            Some((*key, snake_case(name)))
        })
        .collect()
});

/// Karpenter's metric label spelling: lower case, `-` as `_`.
fn snake_case(name: &str) -> String {
    name.to_lowercase().replace('-', "_")
}

/// Karpenter's `resource_type` label value for a resource name (`ephemeral-storage` →
/// `ephemeral_storage`).
pub fn resource_type(resource: &str) -> String {
    snake_case(resource)
}

/// A quantity as Karpenter reports it: cpu in cores, everything else in units.
#[allow(clippy::cast_precision_loss)]
fn value_of(resources: &Resources, resource: &str) -> f64 {
    resources.get(resource) as f64 / 1000.0
}

/// What one node contributes.
struct NodeFigures {
    labels: Vec<(&'static str, String)>,
    allocatable: Resources,
    pod_requests: Resources,
    /// The series of each of [`NODE_FAMILIES`], in its order.
    families: [Vec<(String, f64)>; 6],
    lifetime_seconds: f64,
}

fn label(node: &Node, key: &str) -> String {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .cloned()
        .unwrap_or_default()
}

fn resources_of(
    list: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
    node: &str,
) -> Resources {
    list.and_then(|l| {
        Resources::from_quantities(l)
            .inspect_err(
                |error| tracing::debug!(%node, %error, "unreadable node resources in metrics"),
            )
            .ok()
    })
    .unwrap_or_default()
}

fn node_figures(snapshot: &Snapshot, name: &str, node: &Node, now: Timestamp) -> NodeFigures {
    let mut labels: Vec<(&'static str, String)> = WELL_KNOWN
        .iter()
        .map(|(key, metric_name)| (metric_name.as_str(), label(node, key)))
        .collect();
    let status = node.status.as_ref();
    labels.push(("node_name", name.to_string()));
    labels.push((
        "phase",
        status.and_then(|s| s.phase.clone()).unwrap_or_default(),
    ));
    labels.push(("managed", snapshot.nodeclaim_of(node).is_some().to_string()));
    labels.sort_by(|a, b| a.0.cmp(b.0));

    let allocatable = resources_of(status.and_then(|s| s.allocatable.as_ref()), name);
    let capacity = resources_of(status.and_then(|s| s.capacity.as_ref()), name);
    let mut overhead = Resources::new();
    for resource in capacity.names() {
        overhead.set(resource, capacity.get(resource) - allocatable.get(resource));
    }
    let mut pod_requests = Resources::new();
    let mut pod_limits = Resources::new();
    let mut daemon_requests = Resources::new();
    let mut daemon_limits = Resources::new();
    for key in snapshot.pods_by_node.get(name).into_iter().flatten() {
        let Some(pod) = snapshot.store.pods.get(key) else {
            continue;
        };
        if pod.is_terminal() {
            continue;
        }
        let (Some(requests), Some(limits)) = (&pod.shape.requests, &pod.shape.limits) else {
            tracing::debug!(pod = %key, "unreadable pod resources in metrics");
            continue;
        };
        pod_requests = pod_requests.add(requests);
        pod_limits = pod_limits.add(limits);
        if pod.is_daemonset() {
            daemon_requests = daemon_requests.add(requests);
            daemon_limits = daemon_limits.add(limits);
        }
    }
    NodeFigures {
        labels,
        families: [
            series_of(&allocatable),
            series_of(&pod_requests),
            series_of(&pod_limits),
            series_of(&daemon_requests),
            series_of(&daemon_limits),
            series_of(&overhead),
        ],
        allocatable,
        pod_requests,
        lifetime_seconds: node
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0.0, |t| now.duration_since(t.0).as_secs_f64()),
    }
}

/// The labels of `karpenter_pods_state` for one pod.
fn pod_labels(snapshot: &Snapshot, pod: &CachedPod) -> Vec<(&'static str, String)> {
    let node_name = pod.node().to_string();
    let node = snapshot.store.nodes.get(&node_name);
    let node_label = |key: &str| node.map(|n| label(n, key)).unwrap_or_default();
    let namespace = pod.namespace().to_string();
    let owner = pod
        .shape
        .owners
        .first()
        .map(|o| {
            format!(
                "/apis/{}/namespaces/{namespace}/{}s/{}",
                o.api_version,
                o.kind.to_lowercase(),
                o.name
            )
        })
        .unwrap_or_default();
    let ready = pod.is_ready();
    let nodepool = node_label(wellknown::LABEL_NODEPOOL);
    vec![
        ("arch", node_label(wellknown::LABEL_ARCH)),
        ("capacity_type", node_label(wellknown::LABEL_CAPACITY_TYPE)),
        ("instance_type", node_label(wellknown::LABEL_INSTANCE_TYPE)),
        ("managed", (!nodepool.is_empty()).to_string()),
        ("name", pod.name.to_string()),
        ("namespace", namespace),
        ("node", node_name.clone()),
        ("nodepool", nodepool),
        ("owner", owner),
        ("phase", phase(pod).to_string()),
        ("ready", ready.to_string()),
        ("scheduled", (!node_name.is_empty()).to_string()),
        ("zone", node_label(wellknown::LABEL_TOPOLOGY_ZONE)),
    ]
}

/// The scrape-time collector; [`StateGauges::observe`] hands it the snapshot to write from.
#[derive(Clone, Default)]
pub struct StateGauges {
    latest: Arc<Mutex<Option<(Snapshot, Timestamp)>>>,
    /// The pods this process saw pending and has not seen start since.
    pub seen_pending: SeenPending,
    /// When the provisioner first saw, decided on and found room for each waiting pod.
    pub scheduling: crate::pod_scheduling_times::PodSchedulingTimes,
}

/// The pods seen pending that have not become Ready or finished since (keys
/// `namespace/name`), as Karpenter's pod metrics controller keeps them: a running pod counts
/// as unstarted only if it was seen pending, so a pod that started long ago and then failed
/// its readiness probe is not months "unstarted".
#[derive(Clone, Default, Debug)]
pub struct SeenPending(Arc<Mutex<std::collections::HashSet<String>>>);

impl SeenPending {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        // Each write is one insert or remove: a panic elsewhere leaves the set usable.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Follows one pod change.
    pub fn note(&self, pod: &CachedPod) {
        let key = crate::state::object_key(Some(pod.namespace()), &pod.name);
        match phase(pod) {
            "Pending" => {
                self.lock().insert(key);
            }
            "Succeeded" | "Failed" => {
                self.lock().remove(&key);
            }
            _ if pod.ready_since().is_some() => {
                self.lock().remove(&key);
            }
            _ => {}
        }
    }

    fn contains(&self, key: &str) -> bool {
        self.lock().contains(key)
    }

    /// Forgets pods `snapshot` no longer has.
    fn prune(&self, snapshot: &Snapshot) {
        self.lock()
            .retain(|key| snapshot.store.pods.contains_key(key));
    }
}

impl std::fmt::Debug for StateGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateGauges").finish_non_exhaustive()
    }
}

impl StateGauges {
    /// The snapshot (cheap: shared maps) and time the next exposition is written from.
    pub fn observe(&self, snapshot: Snapshot, now: Timestamp) {
        *self.lock() = Some((snapshot, now));
    }

    /// The snapshot the next exposition is written from, if one was observed.
    pub fn latest(&self) -> Option<Snapshot> {
        self.lock().as_ref().map(|(snapshot, _)| snapshot.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Snapshot, Timestamp)>> {
        self.latest.lock().unwrap_or_else(|e| {
            self.latest.clear_poison();
            e.into_inner()
        })
    }
}

type Pairs<'a> = Vec<(&'a str, &'a str)>;

fn non_empty<'a>(labels: &'a [(&'static str, String)]) -> Pairs<'a> {
    labels
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (*k, v.as_str()))
        .collect()
}

fn encode_gauges<'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl Iterator<Item = (Pairs<'a>, f64)>,
) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        family.encode_family(&labels)?.encode_gauge(&value)?;
    }
    Ok(())
}

const NODE_FAMILIES: [(&str, &str); 6] = [
    (
        "karpenter_nodes_allocatable",
        "Node allocatable are the resources allocatable by nodes.",
    ),
    (
        "karpenter_nodes_total_pod_requests",
        "Node total pod requests are the resources requested by pods bound to nodes, including \
         the DaemonSet pods.",
    ),
    (
        "karpenter_nodes_total_pod_limits",
        "Node total pod limits are the resources specified by pod limits, including the \
         DaemonSet pods.",
    ),
    (
        "karpenter_nodes_total_daemon_requests",
        "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.",
    ),
    (
        "karpenter_nodes_total_daemon_limits",
        "Node total daemon limits are the resources specified by DaemonSet pod limits.",
    ),
    (
        "karpenter_nodes_system_overhead",
        "Node system daemon overhead are the resources reserved for system overhead, the \
         difference between the node's capacity and allocatable values are reported by the \
         status.",
    ),
];

/// One node family's series for a node: (`resource_type`, value), in resource-name order.
fn series_of(resources: &Resources) -> Vec<(String, f64)> {
    resources
        .names()
        .map(|r| (resource_type(r), value_of(resources, r)))
        .collect()
}

impl Collector for StateGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        // Cloned, not taken: two scrapers at once (an HA pair of Prometheus servers) each get
        // the families. What the kept snapshot holds alive beyond the live state is one scrape
        // interval's changes (the maps are shared, not copied).
        let Some((snapshot, now)) = self.lock().clone() else {
            return Ok(());
        };
        let nodes: Vec<NodeFigures> = snapshot
            .store
            .nodes
            .iter()
            .map(|(name, node)| node_figures(&snapshot, name, node, now))
            .collect();
        for (index, (name, help)) in NODE_FAMILIES.iter().enumerate() {
            let series = nodes.iter().flat_map(|node| {
                let base = non_empty(&node.labels);
                node.families[index]
                    .iter()
                    .map(move |(resource_type, value)| {
                        let mut labels = base.clone();
                        labels.push(("resource_type", resource_type.as_str()));
                        labels.sort_by(|a, b| a.0.cmp(b.0));
                        (labels, *value)
                    })
            });
            encode_gauges(&mut encoder, name, help, series)?;
        }
        encode_gauges(
            &mut encoder,
            "karpenter_nodes_current_lifetime_seconds",
            "Node age in seconds",
            nodes
                .iter()
                .map(|n| (non_empty(&n.labels), n.lifetime_seconds)),
        )?;

        let mut allocatable = Resources::new();
        let mut requested = Resources::new();
        for node in &nodes {
            allocatable = allocatable.add(&node.allocatable);
            requested = requested.add(&node.pod_requests);
        }
        let utilization: Vec<(String, f64)> = allocatable
            .names()
            .filter(|r| allocatable.get(r) != 0)
            .map(|r| {
                #[allow(clippy::cast_precision_loss)]
                let percent = 100.0 * requested.get(r) as f64 / allocatable.get(r) as f64;
                (resource_type(r), percent)
            })
            .collect();
        encode_gauges(
            &mut encoder,
            "karpenter_cluster_utilization_percent",
            "Utilization of allocatable resources by pod requests",
            utilization
                .iter()
                .map(|(r, v)| (vec![("resource_type", r.as_str())], *v)),
        )?;

        // Pods waiting: not started (pending, or running but not Ready) and not bound, from
        // their creation, by name and namespace.
        self.seen_pending.prune(&snapshot);
        let waiting: Vec<(&str, &str, PodWait)> = snapshot
            .store
            .pods
            .iter()
            .filter_map(|(key, pod)| {
                let wait = pod_wait(pod, |_| self.seen_pending.contains(key))?;
                Some((&*pod.name, pod.namespace(), wait))
            })
            .collect();
        for (name, help, unbound_only) in [
            (
                "karpenter_pods_unstarted_time_seconds",
                "Seconds since a pod that has not started (pending, or running but not Ready) \
                 was created",
                false,
            ),
            (
                "karpenter_pods_unbound_time_seconds",
                "Seconds since a pending pod that is not bound to a node was created",
                true,
            ),
        ] {
            encode_gauges(
                &mut encoder,
                name,
                help,
                waiting
                    .iter()
                    .filter(|(_, _, wait)| !unbound_only || !wait.bound)
                    .map(|(pod, namespace, wait)| {
                        (
                            vec![("name", *pod), ("namespace", *namespace)],
                            now.duration_since(wait.created).as_secs_f64().max(0.0),
                        )
                    }),
            )?;
        }

        self.encode_provisioning(&mut encoder, &snapshot, &waiting, now)?;

        let pods: Vec<Vec<(&'static str, String)>> = snapshot
            .store
            .pods
            .values()
            .map(|pod| pod_labels(&snapshot, pod))
            .collect();
        crate::condition_metrics::encode_status_gauges(&mut encoder, &snapshot, now)?;
        encode_gauges(
            &mut encoder,
            "karpenter_pods_state",
            "Pod state is the current state of pods. This metric can be used several ways as it \
             is labeled by the pod name, namespace, owner, node, nodepool name, zone, \
             architecture, capacity type, instance type, pod phase, and pod readiness.",
            pods.iter().map(|labels| (non_empty(labels), 1.0)),
        )
    }
}

impl StateGauges {
    /// Karpenter's in-memory pod times as gauges, by pod name and namespace: since the
    /// provisioner first found a waiting pod room (`provisioning_unstarted`, and
    /// `provisioning_unbound` while unbound), and since it first saw a pod it has not decided
    /// on yet (`provisioning_scheduling_undecided`, while unbound).
    fn encode_provisioning(
        &self,
        encoder: &mut DescriptorEncoder,
        snapshot: &Snapshot,
        waiting: &[(&str, &str, PodWait)],
        now: Timestamp,
    ) -> std::fmt::Result {
        // A pod gone from the snapshot is forgotten, unless its times are newer than the
        // snapshot (it was created since).
        self.scheduling.retain(|key, times| {
            snapshot.store.pods.contains_key(key)
                || [times.acked, times.decided, times.schedulable]
                    .into_iter()
                    .flatten()
                    .any(|at| at >= now)
        });
        let since = |at: Timestamp| now.duration_since(at).as_secs_f64().max(0.0);
        let schedulable: Vec<(&str, &str, bool, f64)> = waiting
            .iter()
            .filter_map(|(name, namespace, wait)| {
                let key = crate::state::object_key(Some(namespace), name);
                let uid = snapshot.store.pods.get(&key)?.uid.as_deref();
                let at = self
                    .scheduling
                    .get_for(&key, uid.unwrap_or_default())?
                    .schedulable?;
                Some((*name, *namespace, wait.bound, since(at)))
            })
            .collect();
        for (name, help, unbound_only) in [
            (
                "karpenter_pods_provisioning_unstarted_time_seconds",
                "The time from when Karpenter first thinks the pod can schedule until the pod is \
                 running. Note: this calculated from a point in memory, not by the pod creation \
                 timestamp.",
                false,
            ),
            (
                "karpenter_pods_provisioning_unbound_time_seconds",
                "The time from when Karpenter first thinks the pod can schedule until it binds. \
                 Note: this calculated from a point in memory, not by the pod creation timestamp.",
                true,
            ),
        ] {
            encode_gauges(
                encoder,
                name,
                help,
                schedulable
                    .iter()
                    .filter(|(_, _, bound, _)| !unbound_only || !bound)
                    .map(|(pod, namespace, _, seconds)| {
                        (vec![("name", *pod), ("namespace", *namespace)], *seconds)
                    }),
            )?;
        }
        let undecided: Vec<(String, f64)> = self
            .scheduling
            .all()
            .into_iter()
            .filter_map(|(key, uid, times)| {
                let acked = times.acked.filter(|_| times.decided.is_none())?;
                let pod = snapshot.store.pods.get(&key)?;
                let same_pod = uid.is_empty() || pod.uid.as_deref() == Some(uid.as_str());
                (same_pod && pod.scheduled_since().is_none()).then(|| (key, since(acked)))
            })
            .collect();
        encode_gauges(
            encoder,
            "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
            "The time from when Karpenter has seen a pod without making a scheduling decision \
             for the pod. Note: this calculated from a point in memory, not by the pod creation \
             timestamp.",
            undecided.iter().map(|(key, seconds)| {
                let (namespace, name) = key.split_once('/').unwrap_or(("", key.as_str()));
                (vec![("name", name), ("namespace", namespace)], *seconds)
            }),
        )
    }
}

/// A pod that has not started: when it was created, and whether it is bound yet.
struct PodWait {
    created: Timestamp,
    bound: bool,
}

/// The pod's phase ("Pending" before its status has one).
fn phase(pod: &CachedPod) -> &'static str {
    pod.phase_name()
}

/// Whether `pod` is waiting to start (pending, or running but not Ready after it was seen
/// pending: `seen_pending`; never a finished pod), and since when.
fn pod_wait(pod: &CachedPod, seen_pending: impl Fn(&CachedPod) -> bool) -> Option<PodWait> {
    let waiting = match phase(pod) {
        "Pending" => true,
        "Succeeded" | "Failed" => false,
        _ => pod.ready_since().is_none() && seen_pending(pod),
    };
    if !waiting {
        return None;
    }
    Some(PodWait {
        created: pod.created?,
        bound: phase(pod) != "Pending" || pod.scheduled_since().is_some(),
    })
}

/// `karpenter_pods_bound_duration_seconds` for one pod change: from the pod's creation to its
/// PodScheduled condition's transition, when a pod this controller saw unbound is bound (a pod
/// first seen bound is not counted; Karpenter also counts one first seen bound while still
/// pending).
pub fn pod_bound_seconds(old: Option<&CachedPod>, new: &CachedPod) -> Option<f64> {
    if old?.scheduled_since().is_some() {
        return None;
    }
    let bound = new.scheduled_since()?;
    let created = new.created?;
    let seconds = bound.duration_since(created).as_secs_f64();
    (seconds >= 0.0).then_some(seconds)
}

/// `karpenter_pods_startup_duration_seconds` for one pod change: from the pod's creation to its
/// Ready condition's transition, when a pod this controller saw not Ready becomes Ready (as
/// Karpenter's pod metrics controller, which observes only pods it saw pending; a pod first
/// seen Ready — at start, or after a relist — is not counted).
pub fn pod_startup_seconds(old: Option<&CachedPod>, new: &CachedPod) -> Option<f64> {
    let old = old?;
    if old.ready_since().is_some() {
        return None;
    }
    let ready = new.ready_since()?;
    let created = new.created?;
    let seconds = ready.duration_since(created).as_secs_f64();
    (seconds >= 0.0).then_some(seconds)
}

/// The pod hook that feeds `metrics`' pod startup summary (observations stamped with
/// `clock`'s time) and bound histograms, with their provisioning variants (timed from when the
/// provisioner first found the pod room), the pods seen pending, and the provisioner's pod
/// times: a pod waiting for capacity is acked, one that started or finished forgotten.
pub fn pod_startup_observer(
    metrics: &crate::metrics::Metrics,
    clock: Arc<dyn driftwood_cloud::Clock>,
) -> crate::state::PodHook {
    let summary = metrics.pod_startup.clone();
    let bound = metrics.pod_bound.clone();
    let provisioning_startup = metrics.pod_provisioning_startup.clone();
    let provisioning_bound = metrics.pod_provisioning_bound.clone();
    let seen_pending = metrics.state_gauges.seen_pending.clone();
    let scheduling = metrics.state_gauges.scheduling.clone();
    Arc::new(move |old, new| {
        seen_pending.note(new);
        let key = crate::state::object_key(Some(new.namespace()), &new.name);
        let uid = new.uid.as_deref().unwrap_or_default();
        if crate::controllers::provisioner::is_provisionable(new) {
            scheduling.ack(&key, uid, clock.now());
        }
        let schedulable = scheduling.get_for(&key, uid).and_then(|t| t.schedulable);
        let from_schedulable = |to: Timestamp| {
            let seconds = to.duration_since(schedulable?).as_secs_f64();
            (seconds >= 0.0).then_some(seconds)
        };
        if let Some(seconds) = pod_startup_seconds(old, new) {
            summary.observe(&[], seconds, clock.now());
            if let Some(seconds) = new.ready_since().and_then(from_schedulable) {
                provisioning_startup.observe(seconds);
            }
        }
        if let Some(seconds) = pod_bound_seconds(old, new) {
            bound.observe(seconds);
            if let Some(seconds) = new.scheduled_since().and_then(from_schedulable) {
                provisioning_bound.observe(seconds);
            }
        }
        if new.ready_since().is_some() || new.is_terminal() {
            scheduling.forget(&key);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Store;
    use driftwood_api::NodeClaim;
    use prometheus_client::registry::Registry;
    use serde_json::json;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    use k8s_openapi::api::core::v1::Pod;

    fn cached(pod: &Pod) -> CachedPod {
        CachedPod::from(pod)
    }

    fn pod(name: &str, node: &str, cpu: &str, extra: serde_json::Value) -> Pod {
        let mut value = json!({
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i",
                     "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"memory": "2Gi"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:09Z"}]}
        });
        json_patch::merge(&mut value, &extra);
        serde_json::from_value(value).unwrap()
    }

    fn scrape(snapshot: Snapshot, now: Timestamp) -> String {
        let gauges = StateGauges::default();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(gauges.clone()));
        gauges.observe(snapshot, now);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        out
    }

    /// Karpenter's "Node Metrics" suite (pkg/controllers/metrics/node/suite_test.go): "should
    /// update the allocatable metric", "should set the managed label on per-node metrics for
    /// Karpenter-managed nodes", "should update the node lifetime and cluster utilization
    /// metrics", and "should remove the node metric gauge when the node is deleted".
    #[test]
    fn per_node_gauges_carry_karpenters_labels_and_go_with_the_node() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {
                "karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "spot",
                "topology.kubernetes.io/zone": "us-west-2a", "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m5.large", "karpenter.k8s.aws/instance-cpu": "2"}},
            "spec": {"providerID": "aws:///us-west-2a/i-1"},
            "status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                       "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}}
        }))
        .unwrap();
        let unmanaged: Node = serde_json::from_value(json!({
            "metadata": {"name": "n2", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"allocatable": {"cpu": "2"}}
        }))
        .unwrap();
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "default-abc", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": "aws:///us-west-2a/i-1"}
        }))
        .unwrap();
        let app = pod(
            "app",
            "n1",
            "500m",
            json!({"metadata": {"ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "app-1", "uid": "u1"}]}}),
        );
        let daemon = pod(
            "ds",
            "n1",
            "100m",
            json!({"metadata": {"ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u2"}]}}),
        );
        let done = pod(
            "done",
            "n1",
            "4",
            json!({"status": {"phase": "Succeeded", "conditions": []}}),
        );
        let pending = pod(
            "pending",
            "",
            "1",
            json!({"spec": {"nodeName": null}, "status": {"phase": "Pending", "conditions": []}}),
        );
        let mut snapshot = Snapshot::new(Store::default());
        snapshot.apply("n1".into(), Arc::new(node));
        snapshot.apply("n2".into(), Arc::new(unmanaged));
        snapshot.apply("default-abc".into(), Arc::new(claim));
        for p in [app, daemon, done, pending] {
            let key = format!("default/{}", p.metadata.name.clone().unwrap());
            snapshot.apply(key, Arc::new(p));
        }
        let text = scrape(snapshot.clone(), at("2026-01-01T01:00:00Z"));
        let node_labels = "arch=\"amd64\",capacity_type=\"spot\",instance_cpu=\"2\",instance_type=\"m5.large\",managed=\"true\",node_name=\"n1\",nodepool=\"default\"";
        for line in [
            format!("karpenter_nodes_allocatable{{{node_labels},resource_type=\"cpu\",zone=\"us-west-2a\"}} 1.93"),
            format!("karpenter_nodes_allocatable{{{node_labels},resource_type=\"memory\",zone=\"us-west-2a\"}} 7516192768.0"),
            // The terminal pod is not counted; the DaemonSet pod is, in both families.
            format!("karpenter_nodes_total_pod_requests{{{node_labels},resource_type=\"cpu\",zone=\"us-west-2a\"}} 0.6"),
            format!("karpenter_nodes_total_pod_requests{{{node_labels},resource_type=\"pods\",zone=\"us-west-2a\"}} 2.0"),
            format!("karpenter_nodes_total_pod_limits{{{node_labels},resource_type=\"memory\",zone=\"us-west-2a\"}} 4294967296.0"),
            format!("karpenter_nodes_total_daemon_requests{{{node_labels},resource_type=\"cpu\",zone=\"us-west-2a\"}} 0.1"),
            format!("karpenter_nodes_total_daemon_limits{{{node_labels},resource_type=\"memory\",zone=\"us-west-2a\"}} 2147483648.0"),
            format!("karpenter_nodes_system_overhead{{{node_labels},resource_type=\"cpu\",zone=\"us-west-2a\"}} 0.07"),
            format!("karpenter_nodes_current_lifetime_seconds{{{node_labels},zone=\"us-west-2a\"}} 3600.0"),
            // Not Karpenter's: the node without a NodeClaim.
            "karpenter_nodes_allocatable{managed=\"false\",node_name=\"n2\",resource_type=\"cpu\"} 2.0".to_string(),
            // (0.6 requested of 3.93 allocatable cores.)
            "karpenter_cluster_utilization_percent{resource_type=\"cpu\"} 15.267175572519085".to_string(),
            "karpenter_pods_state{arch=\"amd64\",capacity_type=\"spot\",instance_type=\"m5.large\",managed=\"true\",name=\"app\",namespace=\"default\",node=\"n1\",nodepool=\"default\",owner=\"/apis/apps/v1/namespaces/default/replicasets/app-1\",phase=\"Running\",ready=\"true\",scheduled=\"true\",zone=\"us-west-2a\"} 1.0".to_string(),
            "karpenter_pods_state{managed=\"false\",name=\"pending\",namespace=\"default\",phase=\"Pending\",ready=\"false\",scheduled=\"false\"} 1.0".to_string(),
        ] {
            assert!(text.contains(&format!("{line}\n")), "{line}\nnot in\n{text}");
        }
        // No daemon series for a node without DaemonSet pods.
        assert!(!text.contains("karpenter_nodes_total_daemon_requests{managed=\"false\""));
        // A deleted node leaves no series.
        snapshot.delete::<Node>("n2");
        let text = scrape(snapshot, at("2026-01-01T01:00:00Z"));
        assert!(!text.contains("node_name=\"n2\""), "{text}");
    }

    /// Two scrapes of one observation (an HA pair of Prometheus servers scraping together)
    /// both get the state's families.
    #[test]
    fn two_scrapers_at_once_both_get_the_families() {
        let gauges = StateGauges::default();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(gauges.clone()));
        let mut snapshot = Snapshot::new(Store::default());
        snapshot.apply("default/p".into(), Arc::new(pod("p", "", "1", json!({}))));
        gauges.observe(snapshot, at("2026-01-01T01:00:00Z"));
        for _ in 0..2 {
            let mut out = String::new();
            prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
            assert!(out.contains("karpenter_pods_state{"), "{out}");
        }
    }

    #[test]
    fn a_pod_startup_is_counted_when_a_pod_seen_not_ready_turns_ready() {
        let not_ready = pod(
            "p",
            "n1",
            "1",
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        );
        let ready = pod("p", "n1", "1", json!({}));
        assert_eq!(
            pod_startup_seconds(Some(&cached(&not_ready)), &cached(&ready)),
            Some(9.0)
        );
        // First seen Ready (start-up, relist), or already Ready before: not a startup.
        assert_eq!(pod_startup_seconds(None, &cached(&ready)), None);
        assert_eq!(
            pod_startup_seconds(Some(&cached(&ready)), &cached(&ready)),
            None
        );
        assert_eq!(
            pod_startup_seconds(Some(&cached(&not_ready)), &cached(&not_ready)),
            None
        );
    }

    /// Karpenter's pod metrics suite (pkg/controllers/metrics/pod/suite_test.go): "should
    /// update the pod unstarted time metric" / "unbound time metric", and the gauges go once
    /// the pod starts; a pod running but not Ready is unstarted, not unbound.
    #[test]
    fn waiting_pods_export_their_unstarted_and_unbound_time() {
        let unbound = pod(
            "unbound",
            "",
            "1",
            json!({"spec": {"nodeName": null}, "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}),
        );
        let bound = pod(
            "bound",
            "n1",
            "1",
            json!({"status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}]}}),
        );
        let not_ready = pod(
            "starting",
            "n1",
            "1",
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        );
        let started = pod("started", "n1", "1", json!({}));
        let failed = pod(
            "failed",
            "",
            "1",
            json!({"spec": {"nodeName": null}, "status": {"phase": "Failed", "conditions": []}}),
        );
        // A pod that started long ago and is not Ready now (never seen pending here): not
        // unstarted.
        let unready = pod(
            "unready",
            "n1",
            "1",
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        );
        let gauges = StateGauges::default();
        // `starting` was seen pending, then running.
        let mut pending_then = not_ready.clone();
        pending_then.status.as_mut().unwrap().phase = Some("Pending".into());
        gauges.seen_pending.note(&cached(&pending_then));
        gauges.seen_pending.note(&cached(&not_ready));
        let mut snapshot = Snapshot::new(Store::default());
        for p in [unbound, bound, not_ready, started, failed, unready] {
            let key = format!("default/{}", p.metadata.name.clone().unwrap());
            snapshot.apply(key, Arc::new(p));
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(gauges.clone()));
        gauges.observe(snapshot, at("2026-01-01T00:01:00Z"));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let series = |family: &str| -> Vec<String> {
            text.lines()
                .filter(|l| l.starts_with(&format!("{family}{{")))
                .map(String::from)
                .collect()
        };
        assert_eq!(
            series("karpenter_pods_unstarted_time_seconds"),
            [
                "karpenter_pods_unstarted_time_seconds{name=\"bound\",namespace=\"default\"} 60.0",
                "karpenter_pods_unstarted_time_seconds{name=\"starting\",namespace=\"default\"} 60.0",
                "karpenter_pods_unstarted_time_seconds{name=\"unbound\",namespace=\"default\"} 60.0",
            ]
        );
        assert_eq!(
            series("karpenter_pods_unbound_time_seconds"),
            ["karpenter_pods_unbound_time_seconds{name=\"unbound\",namespace=\"default\"} 60.0"]
        );
    }

    /// "should update the pod bound duration metric": creation to PodScheduled, once, for a pod
    /// seen unbound.
    #[test]
    fn a_pod_bound_is_counted_when_a_pod_seen_unbound_is_scheduled() {
        let unbound = pod(
            "p",
            "",
            "1",
            json!({"spec": {"nodeName": null}, "status": {"phase": "Pending", "conditions": []}}),
        );
        let bound = pod(
            "p",
            "n1",
            "1",
            json!({"status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:04Z"}]}}),
        );
        assert_eq!(
            pod_bound_seconds(Some(&cached(&unbound)), &cached(&bound)),
            Some(4.0)
        );
        assert_eq!(pod_bound_seconds(None, &cached(&bound)), None);
        assert_eq!(
            pod_bound_seconds(Some(&cached(&bound)), &cached(&bound)),
            None
        );
        assert_eq!(
            pod_bound_seconds(Some(&cached(&unbound)), &cached(&unbound)),
            None
        );
    }

    /// Karpenter's pod metrics suite, "should create and delete provisioning undecided metrics
    /// based on scheduling simulations", "should update the pod bound and unbound time metrics"
    /// and "should update the pod startup and unstarted time metrics", for the provisioning
    /// variants: a pod the provisioner saw waiting is undecided until a simulation decides on
    /// it; then it is timed from when it was found room until bound and until Ready, and the
    /// histograms observe those times; a pod deleted leaves no series.
    #[test]
    fn provisioning_times_run_from_the_ack_and_from_the_room_found() {
        let metrics = crate::metrics::Metrics::new();
        let clock = Arc::new(driftwood_cloud::ManualClock::new(at(
            "2026-01-01T00:00:10Z",
        )));
        let hook = pod_startup_observer(&metrics, clock.clone());
        let gauges = &metrics.state_gauges;
        let waiting = pod(
            "p",
            "",
            "1",
            json!({"spec": {"nodeName": null}, "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}),
        );
        // First seen waiting at 10 s: acked.
        hook(None, &cached(&waiting));
        let scrape_at = |pod: &Pod, now: &str| {
            let mut snapshot = Snapshot::new(Store::default());
            snapshot.apply("default/p".into(), Arc::new(pod.clone()));
            gauges.observe(snapshot, at(now));
            let mut registry = Registry::default();
            registry.register_collector(Box::new(gauges.clone()));
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            text.lines()
                .filter(|l| l.starts_with("karpenter_pods_provisioning_"))
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            scrape_at(&waiting, "2026-01-01T00:00:40Z"),
            [
                "karpenter_pods_provisioning_scheduling_undecided_time_seconds{name=\"p\",namespace=\"default\"} 30.0"
            ]
        );
        // A simulation at 50 s finds it room: decided (40 s after the ack), schedulable.
        assert_eq!(
            gauges
                .scheduling
                .decide([], [("default/p", "")], at("2026-01-01T00:00:50Z")),
            [40.0]
        );
        assert_eq!(
            scrape_at(&waiting, "2026-01-01T00:01:00Z"),
            [
                "karpenter_pods_provisioning_unstarted_time_seconds{name=\"p\",namespace=\"default\"} 10.0",
                "karpenter_pods_provisioning_unbound_time_seconds{name=\"p\",namespace=\"default\"} 10.0",
            ]
        );
        // Bound at 70 s, Ready at 95 s: 20 s and 45 s from the room found.
        let bound = pod(
            "p",
            "n1",
            "1",
            json!({"status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:01:10Z"}]}}),
        );
        hook(Some(&cached(&waiting)), &cached(&bound));
        assert_eq!(
            scrape_at(&bound, "2026-01-01T00:01:20Z"),
            [
                "karpenter_pods_provisioning_unstarted_time_seconds{name=\"p\",namespace=\"default\"} 30.0"
            ]
        );
        let ready = pod(
            "p",
            "n1",
            "1",
            json!({"status": {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:01:10Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:01:35Z"}]}}),
        );
        hook(Some(&cached(&bound)), &cached(&ready));
        assert!(scrape_at(&ready, "2026-01-01T00:02:00Z").is_empty());
        assert_eq!(
            gauges.scheduling.get("default/p"),
            None,
            "forgotten once started"
        );
        let text = metrics.render();
        for line in [
            "karpenter_pods_provisioning_bound_duration_seconds_sum 20.0",
            "karpenter_pods_provisioning_bound_duration_seconds_count 1",
            "karpenter_pods_provisioning_startup_duration_seconds_sum 45.0",
            "karpenter_pods_provisioning_startup_duration_seconds_count 1",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        // A pod acked and then deleted leaves nothing behind.
        let other = pod(
            "q",
            "",
            "1",
            json!({"spec": {"nodeName": null}, "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}),
        );
        hook(None, &cached(&other));
        assert!(gauges.scheduling.get("default/q").is_some());
        scrape_at(&ready, "2026-01-01T00:03:00Z");
        assert_eq!(gauges.scheduling.get("default/q"), None);
    }
}
