//! Prometheus metrics under Karpenter's names, so existing dashboards and alerts work; the
//! ones Karpenter has no counterpart for under `driftwood_`.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::state_metrics::StateGauges;
use crate::summary::Summary;
use driftwood_cloud::metric_registry::DeclaredRegistry;

/// Label pairs of one series.
pub type Labels = Vec<(String, String)>;

/// A histogram family with its buckets' constructor.
pub type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Families another crate keeps (the AWS SDK's request metrics): registers them in a registry.
pub type ExternalFamilies = Arc<dyn Fn(&mut DeclaredRegistry) + Send + Sync>;

/// What feeds a process's metrics besides its controllers: the request families its Kubernetes
/// client counts into ([`crate::client_metrics::ClientMetricsLayer`]), and families kept
/// elsewhere.
#[derive(Clone, Default)]
pub struct MetricSources {
    pub client: crate::client_metrics::ClientMetrics,
    pub external: Vec<ExternalFamilies>,
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

fn reconcile_histogram() -> Histogram {
    Histogram::new(driftwood_cloud::buckets::DURATION_BUCKETS)
}

/// Karpenter's node-lifetime buckets: 15 minutes to 30 days.
fn lifetime_histogram() -> Histogram {
    const MINUTE: f64 = 60.0;
    const HOUR: f64 = 60.0 * MINUTE;
    const DAY: f64 = 24.0 * HOUR;
    Histogram::new([
        15.0 * MINUTE,
        30.0 * MINUTE,
        45.0 * MINUTE,
        HOUR,
        2.0 * HOUR,
        4.0 * HOUR,
        6.0 * HOUR,
        8.0 * HOUR,
        10.0 * HOUR,
        12.0 * HOUR,
        16.0 * HOUR,
        20.0 * HOUR,
        DAY,
        2.0 * DAY,
        3.0 * DAY,
        5.0 * DAY,
        10.0 * DAY,
        15.0 * DAY,
        20.0 * DAY,
        25.0 * DAY,
        30.0 * DAY,
    ])
}

/// Go's name for an architecture (Karpenter's `goarch` label): amd64, arm64.
fn go_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Every metric driftwood exports.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    pub nodeclaims_created: Family<Labels, Counter>,
    pub nodeclaims_launched: Family<Labels, Counter>,
    pub nodeclaims_registered: Family<Labels, Counter>,
    pub nodeclaims_initialized: Family<Labels, Counter>,
    pub nodeclaims_terminated: Family<Labels, Counter>,
    pub nodeclaims_disrupted: Family<Labels, Counter>,
    /// `karpenter_pods_disruption_initiated_total` (Karpenter after v1.14.1): the reschedulable
    /// pods of each NodeClaim counted in `nodeclaims_disrupted`, with its labels.
    pub pods_disruption_initiated: Family<Labels, Counter>,
    pub nodeclaims_unhealthy_disrupted: Family<Labels, Counter>,
    pub nodeclaims_drifted: Family<Labels, Counter>,
    pub nodes_created: Family<Labels, Counter>,
    pub nodes_terminated: Family<Labels, Counter>,
    pub nodes_drained: Family<Labels, Counter>,
    pub pods_drained: Family<Labels, Counter>,
    /// `karpenter_pods_eviction_requests_total{code}`: Eviction API requests by answer.
    pub pods_eviction_requests: Family<Labels, Counter>,
    pub voluntary_disruption_decisions: Family<Labels, Counter>,
    pub voluntary_disruption_decisions_by_nodepool: Family<Labels, Counter>,
    pub voluntary_disruption_failed_validations: Family<Labels, Counter>,
    pub voluntary_disruption_consolidation_timeouts: Family<Labels, Counter>,
    pub voluntary_disruption_evaluation_duration: Family<Labels, Histogram, fn() -> Histogram>,
    pub voluntary_disruption_eligible_nodes: Family<Labels, Gauge>,
    pub nodepools_allowed_disruptions: Family<Labels, Gauge>,
    /// `karpenter_nodepools_nodes_consuming_budgets{nodepool,reason}`: the pool's nodes already
    /// disrupting, which its budget's allowance is spent on.
    pub nodepools_nodes_consuming_budgets: Family<Labels, Gauge>,
    /// `karpenter_voluntary_disruption_queue_failures_total{decision,reason,consolidation_type}`:
    /// replacements of an enqueued disruption command that did not initialize before it failed.
    pub voluntary_disruption_queue_failures: Family<Labels, Counter>,
    /// `karpenter_consolidation_score{decision,nodepool,policy}`: the scores of consolidation
    /// moves in Balanced pools.
    pub consolidation_score: Family<Labels, Histogram, fn() -> Histogram>,
    /// `karpenter_consolidation_moves_total{decision,nodepool,policy}`: consolidation moves
    /// scored, approved or rejected.
    pub consolidation_moves: Family<Labels, Counter>,
    /// `driftwood_nodepool_rollout_nodes{nodepool,state}`: each pool's live nodes by rollout
    /// state (`status.rollout`), set by the disruption loop every pass.
    pub rollout_nodes: Family<Labels, Gauge>,
    /// `driftwood_nodepool_rollout_complete` / `_paused{nodepool}`: 1 or 0.
    pub rollout_complete: Family<Labels, Gauge>,
    pub rollout_paused: Family<Labels, Gauge>,
    pub rollout_halted: Family<Labels, Gauge>,
    pub rollout_wave: Family<Labels, Gauge>,
    pub reconcile_total: Family<Labels, Counter>,
    pub reconcile_errors: Family<Labels, Counter>,
    pub reconcile_time: Family<Labels, Histogram, fn() -> Histogram>,
    pub object_errors: Family<Labels, Counter>,
    pub scheduling_duration: Family<Labels, Histogram, fn() -> Histogram>,
    /// `karpenter_scheduler_unschedulable_pods_count{controller}`: pods the last provisioning
    /// simulation could not place.
    pub scheduler_unschedulable_pods: Family<Labels, Gauge>,
    /// `karpenter_scheduler_ignored_pods_count`: pods the last provisioning pass could not read,
    /// so did not simulate.
    pub scheduler_ignored_pods: Gauge,
    pub build_info: Family<Labels, Gauge>,
    pub nodepools_usage: Family<Labels, Gauge<f64, AtomicU64>>,
    pub nodepools_limit: Family<Labels, Gauge<f64, AtomicU64>>,
    pub cluster_state_node_count: Gauge,
    pub cluster_state_synced: Gauge,
    /// `karpenter_cluster_state_unsynced_time_seconds`: how long the state has not been synced
    /// (0 once it is), from the first observation that found it unsynced.
    pub cluster_state_unsynced_time: Gauge<f64, AtomicU64>,
    unsynced_since: Arc<std::sync::Mutex<Option<jiff::Timestamp>>>,
    /// `leader_election_master_status{name}`: 1 while this replica leads, 0 standing by.
    pub leader_election_master_status: Family<Labels, Gauge>,
    /// `leader_election_slowpath_total{name}`: renewals the leader made by reading the lease
    /// again after its optimistic renewal was refused (client-go's slow path).
    pub leader_election_slowpath: Family<Labels, Counter>,
    /// client-go's request families, kept by the layer on the controllers' client.
    pub client: crate::client_metrics::ClientMetrics,
    /// The cloud provider call and instance-type families ([`crate::metered_cloud`]).
    pub cloud: crate::metered_cloud::CloudMetrics,
    pub interruption_received_messages: Family<Labels, Counter>,
    pub interruption_deleted_messages: Counter,
    /// `karpenter_interruption_instance_status_unhealthy_total{category}`: each instance and
    /// failed status category counted once while it stays unhealthy.
    pub interruption_instance_status_unhealthy: Family<Labels, Counter>,
    /// `controller_runtime_conversion_webhook_panics_total`: registered at 0 as
    /// controller-runtime's manager registers it; driftwood serves no conversion webhook.
    pub conversion_webhook_panics: Counter,
    pub interruption_message_queue_duration: Histogram,
    /// The per-node, per-pod and utilization gauges, written from the state at scrape time.
    pub state_gauges: StateGauges,
    /// `karpenter_pods_startup_duration_seconds`: pod creation to Ready, for pods seen pending.
    pub pod_startup: Summary,
    /// `karpenter_pods_bound_duration_seconds`: pod creation to bound, for pods seen unbound.
    pub pod_bound: Histogram,
    /// `karpenter_pods_provisioning_startup_duration_seconds`: from when the provisioner first
    /// found the pod room to Ready.
    pub pod_provisioning_startup: Histogram,
    /// `karpenter_pods_provisioning_bound_duration_seconds`: from when the provisioner first
    /// found the pod room to bound.
    pub pod_provisioning_bound: Histogram,
    /// `karpenter_pods_scheduling_decision_duration_seconds`: from the provisioner first seeing
    /// a pod to its first decision on it.
    pub pod_scheduling_decision: Histogram,
    /// `karpenter_nodes_lifetime_duration_seconds{nodepool}`: creation to the finalizer's
    /// removal.
    pub node_lifetime: Family<Labels, Histogram, fn() -> Histogram>,
    /// `karpenter_nodeclaims_termination_duration_seconds{nodepool}`: the NodeClaim's deletion
    /// to its finalizer's removal.
    pub nodeclaim_termination: Family<Labels, Histogram, fn() -> Histogram>,
    /// `karpenter_nodeclaims_instance_termination_duration_seconds{nodepool}`: InstanceTerminating
    /// to the instance gone.
    pub instance_termination: Family<Labels, Histogram, fn() -> Histogram>,
    /// `karpenter_nodes_termination_duration_seconds{nodepool}`: deletion to finalizer removal.
    pub node_termination: Summary,
    /// operatorpkg's `operator_*_status_condition_*` and `operator_*_termination_*` counters
    /// and histograms (their gauges are written with the state's, at scrape time).
    pub conditions: crate::condition_metrics::ConditionMetrics,
    /// controller-runtime's `workqueue_*` and worker families, kept by the loop driver.
    pub loops: crate::workqueue_metrics::LoopMetrics,
    /// Each controller's latest scheduling simulation (`karpenter_scheduler_queue_depth`,
    /// `_unfinished_work_seconds`).
    pub scheduler_progress: crate::scheduler_metrics::SchedulerProgress,
    /// `karpenter_nodepools_cost_total` and `_cost_tracker_errors_total`, at scrape time.
    pub cost: crate::cost_metrics::NodePoolCost,
    /// The time of the last [`Metrics::observe_state`] (the summaries' windows end there).
    observed_at: Arc<std::sync::Mutex<Option<jiff::Timestamp>>>,
    /// The length of the last exposition written: the next one is given room for about
    /// that much at once, instead of growing by doubling (at 5,000 nodes, 90 MiB of text in a
    /// buffer of 128 MiB).
    last_scrape_len: Arc<std::sync::atomic::AtomicUsize>,
    /// Every family registered, with its type: a family with no series yet is left out of the
    /// exposition (as client_golang leaves out an empty vector), but it is still exported.
    declared: Arc<Vec<(&'static str, MetricType)>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// The metrics of a process fed by its controllers alone.
    pub fn new() -> Self {
        Self::with_sources(MetricSources::default())
    }

    /// The metrics of a process fed by `sources` too.
    pub fn with_sources(sources: MetricSources) -> Self {
        let MetricSources { client, external } = sources;
        let mut registry = DeclaredRegistry::new();
        let conditions = crate::condition_metrics::ConditionMetrics::register(&mut registry);
        let loops = crate::workqueue_metrics::LoopMetrics::register(&mut registry);
        let cloud = crate::metered_cloud::CloudMetrics::register(&mut registry);
        client.register(&mut registry);
        let state_gauges = StateGauges::default();
        let cost = crate::cost_metrics::NodePoolCost::new(state_gauges.clone(), cloud.clone());
        registry.collector(&crate::cost_metrics::FAMILIES, Box::new(cost.clone()));
        let scheduler_progress = crate::scheduler_metrics::SchedulerProgress::default();
        registry.collector(
            &crate::scheduler_metrics::FAMILIES,
            Box::new(scheduler_progress.clone()),
        );
        for families in &external {
            families(&mut registry);
        }
        let metrics = Self {
            client,
            conditions,
            loops,
            scheduler_progress,
            cost,
            registry: Arc::new(Registry::default()),
            nodeclaims_created: Family::default(),
            nodeclaims_launched: Family::default(),
            nodeclaims_registered: Family::default(),
            nodeclaims_initialized: Family::default(),
            nodeclaims_terminated: Family::default(),
            nodeclaims_disrupted: Family::default(),
            pods_disruption_initiated: Family::default(),
            nodeclaims_unhealthy_disrupted: Family::default(),
            nodeclaims_drifted: Family::default(),
            nodes_created: Family::default(),
            nodes_terminated: Family::default(),
            nodes_drained: Family::default(),
            pods_drained: Family::default(),
            pods_eviction_requests: Family::default(),
            voluntary_disruption_decisions: Family::default(),
            voluntary_disruption_decisions_by_nodepool: Family::default(),
            voluntary_disruption_failed_validations: Family::default(),
            voluntary_disruption_consolidation_timeouts: Family::default(),
            voluntary_disruption_evaluation_duration: Family::new_with_constructor(
                duration_histogram,
            ),
            voluntary_disruption_eligible_nodes: Family::default(),
            nodepools_allowed_disruptions: Family::default(),
            nodepools_nodes_consuming_budgets: Family::default(),
            voluntary_disruption_queue_failures: Family::default(),
            consolidation_score: Family::new_with_constructor(|| {
                Histogram::new([0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0])
            }),
            consolidation_moves: Family::default(),
            rollout_nodes: Family::default(),
            rollout_complete: Family::default(),
            rollout_paused: Family::default(),
            rollout_halted: Family::default(),
            rollout_wave: Family::default(),
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_histogram),
            object_errors: Family::default(),
            scheduling_duration: Family::new_with_constructor(duration_histogram),
            scheduler_unschedulable_pods: Family::default(),
            scheduler_ignored_pods: Gauge::default(),
            build_info: Family::default(),
            nodepools_usage: Family::default(),
            nodepools_limit: Family::default(),
            cluster_state_node_count: Gauge::default(),
            cluster_state_synced: Gauge::default(),
            cluster_state_unsynced_time: Gauge::default(),
            unsynced_since: Arc::default(),
            leader_election_master_status: Family::default(),
            leader_election_slowpath: Family::default(),
            cloud,
            interruption_received_messages: Family::default(),
            interruption_deleted_messages: Counter::default(),
            interruption_instance_status_unhealthy: Family::default(),
            conversion_webhook_panics: Counter::default(),
            interruption_message_queue_duration: duration_histogram(),
            state_gauges,
            pod_startup: Summary::new(
                "karpenter_pods_startup_duration_seconds",
                "The time from pod creation until the pod is running.",
                &[],
            ),
            pod_bound: reconcile_histogram(),
            pod_provisioning_startup: reconcile_histogram(),
            pod_provisioning_bound: reconcile_histogram(),
            pod_scheduling_decision: reconcile_histogram(),
            node_lifetime: Family::new_with_constructor(lifetime_histogram),
            nodeclaim_termination: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1.0, 2.0, 12))
            }),
            instance_termination: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1.0, 2.0, 11))
            }),
            node_termination: Summary::new(
                "karpenter_nodes_termination_duration_seconds",
                "The time taken between a node's deletion request and the removal of its \
                 finalizer",
                &["nodepool"],
            ),
            observed_at: Arc::default(),
            last_scrape_len: Arc::default(),
            declared: Arc::default(),
        };
        let counters = [
            (
                "controller_runtime_reconcile",
                "Controller passes, by controller and result (success or error)",
                &metrics.reconcile_total,
            ),
            (
                "controller_runtime_reconcile_errors",
                "Failed steps of controller passes, by controller (each retried)",
                &metrics.reconcile_errors,
            ),
            (
                "driftwood_object_errors",
                "Failed steps on one object (a write or cloud call), by controller and step; \
                 each is retried for that object after its backoff",
                &metrics.object_errors,
            ),
            (
                "karpenter_nodeclaims_created",
                "NodeClaims created, by reason and nodepool",
                &metrics.nodeclaims_created,
            ),
            (
                "driftwood_nodeclaims_launched",
                "NodeClaims launched",
                &metrics.nodeclaims_launched,
            ),
            (
                "driftwood_nodeclaims_registered",
                "NodeClaims registered",
                &metrics.nodeclaims_registered,
            ),
            (
                "driftwood_nodeclaims_initialized",
                "NodeClaims initialized",
                &metrics.nodeclaims_initialized,
            ),
            (
                "karpenter_nodeclaims_terminated",
                "NodeClaims terminated",
                &metrics.nodeclaims_terminated,
            ),
            (
                "karpenter_nodeclaims_disrupted",
                "NodeClaims disrupted, by reason, nodepool, capacity type, consolidation policy and \
                 termination mode",
                &metrics.nodeclaims_disrupted,
            ),
            (
                "karpenter_pods_disruption_initiated",
                "Reschedulable pods of the NodeClaims disrupted (DaemonSet and static pods left \
                 out), by the NodeClaim's reason, nodepool, capacity type, consolidation policy \
                 and termination mode",
                &metrics.pods_disruption_initiated,
            ),
            (
                "karpenter_nodeclaims_unhealthy_disrupted",
                "NodeClaims replaced by node repair, by condition, nodepool, capacity type and image",
                &metrics.nodeclaims_unhealthy_disrupted,
            ),
            (
                "driftwood_nodeclaims_drifted",
                "NodeClaims marked drifted, by type",
                &metrics.nodeclaims_drifted,
            ),
            (
                "karpenter_nodes_created",
                "Nodes registered",
                &metrics.nodes_created,
            ),
            (
                "karpenter_nodes_terminated",
                "Nodes terminated",
                &metrics.nodes_terminated,
            ),
            (
                "karpenter_nodes_drained",
                "Nodes drained",
                &metrics.nodes_drained,
            ),
            (
                "karpenter_pods_drained",
                "Pods evicted or deleted during drain",
                &metrics.pods_drained,
            ),
            (
                "karpenter_pods_eviction_requests",
                "Eviction API requests, by the answer's status code (200 for an accepted \
                 eviction)",
                &metrics.pods_eviction_requests,
            ),
            (
                "karpenter_voluntary_disruption_decisions",
                "Disruption decisions, by decision, reason and consolidation type",
                &metrics.voluntary_disruption_decisions,
            ),
            (
                "karpenter_voluntary_disruption_decisions_by_nodepool",
                "Disruption decisions, by nodepool, decision, reason and consolidation type",
                &metrics.voluntary_disruption_decisions_by_nodepool,
            ),
            (
                "karpenter_voluntary_disruption_failed_validations",
                "Consolidation commands abandoned at validation, by consolidation type",
                &metrics.voluntary_disruption_failed_validations,
            ),
            (
                "karpenter_interruption_received_messages",
                "Interruption queue messages received, by message type",
                &metrics.interruption_received_messages,
            ),
            (
                "karpenter_interruption_instance_status_unhealthy",
                "Unhealthy instances found through EC2 DescribeInstanceStatus, each instance and failed category once, by category",
                &metrics.interruption_instance_status_unhealthy,
            ),
            (
                "karpenter_voluntary_disruption_consolidation_timeouts",
                "Consolidation searches that ran out of time, by consolidation type",
                &metrics.voluntary_disruption_consolidation_timeouts,
            ),
        ];
        for (name, help, family) in counters {
            registry.metric(name, help, family.clone());
        }
        registry.collector(&[], Box::new(metrics.state_gauges.clone()));
        registry.metric(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            metrics.reconcile_time.clone(),
        );
        registry.metric(
            "karpenter_voluntary_disruption_eligible_nodes",
            "Nodes eligible for disruption, by reason",
            metrics.voluntary_disruption_eligible_nodes.clone(),
        );
        registry.metric(
            "karpenter_nodepools_allowed_disruptions",
            "The number of nodes of a NodePool that may be disrupting at once, by reason (its \
             active budgets' smallest limit; 2147483647 when none limits it)",
            metrics.nodepools_allowed_disruptions.clone(),
        );
        registry.metric(
            "karpenter_nodepools_nodes_consuming_budgets",
            "The number of nodes of a NodePool consuming its disruption budget now, by reason",
            metrics.nodepools_nodes_consuming_budgets.clone(),
        );
        registry.metric(
            "karpenter_consolidation_score",
            "Scores of consolidation moves in Balanced NodePools ((savings share) / (disruption \
             share); a move passes at 1/k), by decision, nodepool and policy",
            metrics.consolidation_score.clone(),
        );
        registry.metric(
            "karpenter_consolidation_moves",
            "Consolidation moves scored, by decision (approved or rejected), nodepool and policy",
            metrics.consolidation_moves.clone(),
        );
        registry.metric(
            "karpenter_voluntary_disruption_queue_failures",
            "Replacements of enqueued disruption commands that failed to initialize, by decision, \
             reason and consolidation type",
            metrics.voluntary_disruption_queue_failures.clone(),
        );
        registry.metric(
            "driftwood_nodepool_rollout_nodes",
            "A NodePool's live nodes by rollout state (up_to_date, drifted, disrupting; blocked \
             counts drifted nodes held by something other than a full budget), as its \
             status.rollout says",
            metrics.rollout_nodes.clone(),
        );
        registry.metric(
            "driftwood_nodepool_rollout_complete",
            "1 when every node of the NodePool is up to date and none is disrupting (the \
             RolloutComplete condition), else 0",
            metrics.rollout_complete.clone(),
        );
        registry.metric(
            "driftwood_nodepool_rollout_paused",
            "1 when the NodePool's rollout is paused (driftwood.sh/rollout-paused), else 0",
            metrics.rollout_paused.clone(),
        );
        registry.metric(
            "driftwood_nodepool_rollout_halted",
            "1 while the NodePool's rollout is halted by a failed health gate of its rollout \
             policy (until driftwood rollout resume), by gate, else 0",
            metrics.rollout_halted.clone(),
        );
        registry.metric(
            "driftwood_nodepool_rollout_wave",
            "The wave (from 1) the NodePool's rollout policy is in, while a rollout with waves \
             is under way",
            metrics.rollout_wave.clone(),
        );
        registry.metric(
            "karpenter_scheduler_scheduling_duration_seconds",
            "Duration of scheduling simulations, by controller (provisioner)",
            metrics.scheduling_duration.clone(),
        );
        registry.metric(
            "karpenter_scheduler_unschedulable_pods_count",
            "Pods the last provisioning simulation could not place, by controller",
            metrics.scheduler_unschedulable_pods.clone(),
        );
        registry.metric(
            "karpenter_scheduler_ignored_pods_count",
            "Pods the last provisioning pass could not read (a malformed quantity, a negative \
             request), so did not simulate",
            metrics.scheduler_ignored_pods.clone(),
        );
        registry.metric(
            "karpenter_build_info",
            "A constant 1, labeled by the version, toolchain, architecture and commit driftwood \
             was built from (Karpenter's label names)",
            metrics.build_info.clone(),
        );
        registry.metric(
            "karpenter_nodepools_usage",
            "Resources provisioned for a NodePool (its status.resources), by nodepool and \
             resource type (cpu in cores, memory in bytes)",
            metrics.nodepools_usage.clone(),
        );
        registry.metric(
            "karpenter_nodepools_limit",
            "A NodePool's spec.limits, by nodepool and resource type",
            metrics.nodepools_limit.clone(),
        );
        registry.metric(
            "karpenter_cluster_state_node_count",
            "Nodes in the controller's cluster state",
            metrics.cluster_state_node_count.clone(),
        );
        registry.metric(
            "karpenter_cluster_state_synced",
            "1 when the controller's cluster state has synced with the API server, else 0",
            metrics.cluster_state_synced.clone(),
        );
        registry.metric(
            "karpenter_cluster_state_unsynced_time_seconds",
            "Seconds the cluster state has not been synced (0 once it is)",
            metrics.cluster_state_unsynced_time.clone(),
        );
        registry.metric(
            "leader_election_master_status",
            "1 while this replica holds the lease named by `name`, 0 while it stands by",
            metrics.leader_election_master_status.clone(),
        );
        registry.metric(
            "leader_election_slowpath",
            "Renewals of the lease named by `name` that had to read it again after the \
             optimistic renewal was refused (client-go's slow path)",
            metrics.leader_election_slowpath.clone(),
        );
        metrics.observe_leading(false);
        registry.collector(&[], Box::new(crate::process_metrics::ProcessCollector));
        Metrics::set(
            &metrics.build_info,
            &[
                ("version", env!("CARGO_PKG_VERSION")),
                ("goversion", "rust"),
                ("goarch", go_arch(std::env::consts::ARCH)),
                (
                    "commit",
                    option_env!("DRIFTWOOD_COMMIT").unwrap_or("unspecified"),
                ),
            ],
            1,
        );
        registry.metric(
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of a disruption method's evaluation, by reason and consolidation type",
            metrics.voluntary_disruption_evaluation_duration.clone(),
        );
        registry.metric(
            "karpenter_nodes_lifetime_duration_seconds",
            "The lifetime of nodes, creation to the removal of their finalizer, by nodepool",
            metrics.node_lifetime.clone(),
        );
        registry.metric(
            "karpenter_nodeclaims_termination_duration_seconds",
            "A NodeClaim's deletion to the removal of its finalizer, by nodepool",
            metrics.nodeclaim_termination.clone(),
        );
        registry.metric(
            "karpenter_nodeclaims_instance_termination_duration_seconds",
            "The start of a NodeClaim's instance termination to the instance gone, by nodepool",
            metrics.instance_termination.clone(),
        );
        registry.metric(
            "karpenter_pods_bound_duration_seconds",
            "The time from a pod's creation until it is bound to a node, for pods seen unbound",
            metrics.pod_bound.clone(),
        );
        registry.metric(
            "karpenter_pods_provisioning_startup_duration_seconds",
            "The time from when Karpenter first thinks the pod can schedule until the pod is \
             running. Note: this calculated from a point in memory, not by the pod creation \
             timestamp.",
            metrics.pod_provisioning_startup.clone(),
        );
        registry.metric(
            "karpenter_pods_provisioning_bound_duration_seconds",
            "The time from when Karpenter first thinks the pod can schedule until it binds. Note: \
             this calculated from a point in memory, not by the pod creation timestamp.",
            metrics.pod_provisioning_bound.clone(),
        );
        registry.metric(
            "karpenter_pods_scheduling_decision_duration_seconds",
            "The time it takes for Karpenter to first try to schedule a pod after it's been seen.",
            metrics.pod_scheduling_decision.clone(),
        );
        registry.metric(
            "controller_runtime_conversion_webhook_panics",
            "Total number of conversion webhook panics (driftwood serves no conversion webhook)",
            metrics.conversion_webhook_panics.clone(),
        );
        registry.metric(
            "karpenter_interruption_deleted_messages",
            "Interruption queue messages deleted after they were handled",
            metrics.interruption_deleted_messages.clone(),
        );
        registry.metric(
            "karpenter_interruption_message_queue_duration_seconds",
            "Time from an interruption event to its message being handled and deleted",
            metrics.interruption_message_queue_duration.clone(),
        );
        let (registry, declared) = registry.into_parts();
        Self {
            registry: Arc::new(registry),
            declared: Arc::new(declared),
            ..metrics
        }
    }

    /// Increments a counter family for `pairs`.
    pub fn inc(family: &Family<Labels, Counter>, pairs: &[(&str, &str)]) {
        family.get_or_create(&labels(pairs)).inc();
    }

    /// Sets a gauge family for `pairs`.
    pub fn set(family: &Family<Labels, Gauge>, pairs: &[(&str, &str)], value: i64) {
        family.get_or_create(&labels(pairs)).set(value);
    }

    /// Karpenter's two budget gauges of one disruption method (`reason` as Karpenter's
    /// disruption reason spells it, `Drifted`, `Underutilized`, `Empty`: unlike its other
    /// disruption metrics, it does not lowercase it here) for each
    /// NodePool: the nodes it allows disrupting at once (its active budgets' smallest limit,
    /// `i32::MAX` when none limits it, as Karpenter reports an unbounded budget) and the nodes
    /// already disrupting that consume it.
    pub fn report_budgets(
        &self,
        reason: &str,
        budgets: &[driftwood_disruption::budget::AllowedDisruptions],
    ) {
        for budget in budgets {
            let pairs = [("nodepool", budget.nodepool.as_str()), ("reason", reason)];
            let limit = budget.limit.map_or(i64::from(i32::MAX), |l| {
                i64::try_from(l).unwrap_or(i64::MAX)
            });
            Self::set(&self.nodepools_allowed_disruptions, &pairs, limit);
            Self::set(
                &self.nodepools_nodes_consuming_budgets,
                &pairs,
                i64::try_from(budget.disrupting).unwrap_or(i64::MAX),
            );
        }
    }

    /// Records `seconds` in a histogram family for `pairs`.
    pub fn observe(
        family: &Family<Labels, Histogram, fn() -> Histogram>,
        pairs: &[(&str, &str)],
        seconds: f64,
    ) {
        family.get_or_create(&labels(pairs)).observe(seconds);
    }

    /// Refreshes the gauges read from the cluster state (NodePools' usage and limits, the
    /// state's node count and sync), as Karpenter's metrics controllers keep them; called on
    /// each scrape, so a NodePool that is gone leaves no series behind.
    pub fn observe_state(
        &self,
        snapshot: &crate::state::Snapshot,
        synced: bool,
        now: jiff::Timestamp,
    ) {
        self.state_gauges.observe(snapshot.clone(), now);
        self.cost.set_synced(synced);
        // Once every NodePool is listed, a deleted pool's instance types leave the gauges.
        if synced {
            self.cloud
                .forget_catalogs_of_gone_pools(|pool| snapshot.store.nodepools.contains_key(pool));
        }
        *self
            .observed_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(now);
        self.cluster_state_synced.set(i64::from(synced));
        {
            let mut since = self
                .unsynced_since
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let unsynced_for = if synced {
                *since = None;
                0.0
            } else {
                let start = *since.get_or_insert(now);
                now.duration_since(start).as_secs_f64()
            };
            self.cluster_state_unsynced_time.set(unsynced_for);
        }
        self.cluster_state_node_count
            .set(i64::try_from(snapshot.store.nodes.len()).unwrap_or(i64::MAX));
        self.nodepools_usage.clear();
        self.nodepools_limit.clear();
        for (name, pool) in &snapshot.store.nodepools {
            let usage = pool.status.as_ref().map(|s| &s.resources);
            for (family, list) in [
                (&self.nodepools_usage, usage),
                (&self.nodepools_limit, Some(&pool.spec.limits)),
            ] {
                let Some(resources) = list.and_then(|l| {
                    driftwood_scheduling::Resources::from_quantities(l)
                        .inspect_err(|error| {
                            tracing::debug!(nodepool = %name, %error, "unreadable resources in metrics");
                        })
                        .ok()
                }) else {
                    continue;
                };
                for resource in resources.names() {
                    // Karpenter's resource_type; cpu in cores.
                    let resource_type = crate::state_metrics::resource_type(resource);
                    #[allow(clippy::cast_precision_loss)]
                    let value = resources.get(resource) as f64 / 1000.0;
                    family
                        .get_or_create(&labels(&[
                            ("resource_type", &resource_type),
                            ("nodepool", name),
                        ]))
                        .set(value);
                }
            }
        }
    }

    /// The families registered (names as OpenMetrics writes their descriptors: a counter
    /// without `_total`) and their types, series or not; the collectors' families (per node,
    /// per pod, process) and the summaries are always written and not listed.
    pub fn declared(&self) -> &[(&'static str, MetricType)] {
        &self.declared
    }

    /// The value of label `key` of `object`, or "" (Karpenter's metric labels `zone` and
    /// `capacity_type` are the object's well-known labels, empty when it has none).
    pub fn label_of<'a, K: kube::ResourceExt>(object: Option<&'a K>, key: &str) -> &'a str {
        object
            .and_then(|o| o.meta().labels.as_ref())
            .and_then(|l| l.get(key))
            .map_or("", String::as_str)
    }

    /// Counts NodeClaim `nodeclaim` of `nodepool` disrupted for `reason` (snake case) in
    /// `karpenter_nodeclaims_disrupted_total`, and its reschedulable pods in
    /// `karpenter_pods_disruption_initiated_total`, labelled as Karpenter labels both since
    /// v1.14.1: `capacity_type`, `consolidation_policy` (the NodePool's, snake case, for the
    /// consolidation reasons; empty otherwise) and `termination_mode` (`graceful` without a
    /// terminationGracePeriod, `forceful` with a zero one, `eventual` otherwise).
    pub fn count_disrupted(
        &self,
        snapshot: &crate::state::Snapshot,
        nodeclaim: &str,
        nodepool: &str,
        reason: &str,
    ) {
        let claim = snapshot.store.nodeclaims.get(nodeclaim).map(AsRef::as_ref);
        let policy = if matches!(reason, "empty" | "underutilized") {
            snapshot
                .store
                .nodepools
                .get(nodepool)
                .map(|p| {
                    driftwood_disruption::repair::snake_case(
                        &p.spec.disruption.consolidation_policy,
                    )
                })
                .unwrap_or_default()
        } else {
            String::new()
        };
        let mode = match claim.and_then(|c| c.spec.termination_grace_period.as_deref()) {
            None => "graceful",
            Some(period) => match driftwood_api::duration::parse_go_duration(period) {
                Ok(0) => "forceful",
                _ => "eventual",
            },
        };
        let pods = claim
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.node_name.as_deref())
            .and_then(|node| snapshot.pods_by_node.get(node))
            .map_or(0, |keys| {
                keys.iter()
                    .filter_map(|k| snapshot.store.pods.get(k))
                    .filter(|p| driftwood_disruption::views::is_reschedulable(p))
                    .count()
            });
        let pairs = [
            ("reason", reason),
            ("nodepool", nodepool),
            (
                "capacity_type",
                Self::label_of(claim, driftwood_api::wellknown::LABEL_CAPACITY_TYPE),
            ),
            ("consolidation_policy", policy.as_str()),
            ("termination_mode", mode),
        ];
        Self::inc(&self.nodeclaims_disrupted, &pairs);
        self.pods_disruption_initiated
            .get_or_create(&labels(&pairs))
            .inc_by(u64::try_from(pods).unwrap_or(u64::MAX));
    }

    /// The `leader_election_slowpath_total` counter of driftwood's lease, for the election.
    pub fn leader_slowpath(&self) -> Counter {
        self.leader_election_slowpath
            .get_or_create(&labels(&[("name", crate::leader::LEASE_NAME)]))
            .clone()
    }

    /// Sets `leader_election_master_status` for driftwood's lease.
    pub fn observe_leading(&self, leading: bool) {
        Self::set(
            &self.leader_election_master_status,
            &[("name", crate::leader::LEASE_NAME)],
            i64::from(leading),
        );
    }

    /// Sets the rollout gauges to `pools` (name, status, complete), and drops the series of
    /// pools no longer listed.
    pub fn observe_rollouts<'a>(
        &self,
        pools: impl IntoIterator<Item = (&'a str, &'a driftwood_api::RolloutStatus, bool)>,
    ) {
        let pools: Vec<_> = pools.into_iter().collect();
        for family in [
            &self.rollout_nodes,
            &self.rollout_complete,
            &self.rollout_paused,
            &self.rollout_halted,
            &self.rollout_wave,
        ] {
            family.clear();
        }
        for (nodepool, status, complete) in pools {
            for (state, count) in [
                ("up_to_date", status.up_to_date),
                ("drifted", status.drifted),
                ("disrupting", status.disrupting),
                ("blocked", status.blocked),
            ] {
                Self::set(
                    &self.rollout_nodes,
                    &[("nodepool", nodepool), ("state", state)],
                    count,
                );
            }
            Self::set(
                &self.rollout_complete,
                &[("nodepool", nodepool)],
                i64::from(complete),
            );
            Self::set(
                &self.rollout_paused,
                &[("nodepool", nodepool)],
                i64::from(status.paused),
            );
            if let Some(policy) = &status.policy {
                let halted = policy.halted.as_ref();
                Self::set(
                    &self.rollout_halted,
                    &[
                        ("nodepool", nodepool),
                        ("gate", halted.map_or("", |h| h.gate.as_str())),
                    ],
                    i64::from(halted.is_some()),
                );
                if policy.started_at.is_some() {
                    Self::set(
                        &self.rollout_wave,
                        &[("nodepool", nodepool)],
                        policy.wave.saturating_add(1),
                    );
                }
            }
        }
    }

    /// The exposition in OpenMetrics text (the encoder's own format), the summaries last.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.scrape_room());
        if let Err(error) = encode(&mut out, &self.registry) {
            tracing::error!(%error, "encoding the metrics failed");
            out.clear();
        }
        // The summaries go before the end marker, written in place (no copy of the rest).
        let eof = out.ends_with("# EOF\n");
        if eof {
            out.truncate(out.len() - "# EOF\n".len());
        }
        self.render_summaries(&mut out);
        if eof {
            out.push_str("# EOF\n");
        }
        self.last_scrape_len
            .store(out.len(), std::sync::atomic::Ordering::Relaxed);
        out
    }

    /// Room for a scrape: a little more than the last one's length (series come and go between
    /// scrapes).
    fn scrape_room(&self) -> usize {
        let last = self
            .last_scrape_len
            .load(std::sync::atomic::Ordering::Relaxed);
        last + last / 16
    }

    /// The Prometheus text 0.0.4 exposition, rewritten from OpenMetrics line by line as it is
    /// encoded (one copy of the text, not two).
    fn render_prometheus(&self) -> String {
        let mut out = String::with_capacity(self.scrape_room());
        let mut writer = crate::exposition::PrometheusText::new(&mut out);
        if let Err(error) = encode(&mut writer, &self.registry) {
            tracing::error!(%error, "encoding the metrics failed");
            writer.discard();
            drop(writer);
            out.clear();
            writer = crate::exposition::PrometheusText::new(&mut out);
        }
        let mut summaries = String::new();
        self.render_summaries(&mut summaries);
        writer.push(&summaries);
        writer.finish();
        self.last_scrape_len
            .store(out.len(), std::sync::atomic::Ordering::Relaxed);
        out
    }

    fn render_summaries(&self, out: &mut String) {
        let now = self
            .observed_at
            .lock()
            .map_or_else(|e| *e.into_inner(), |guard| *guard);
        for summary in [&self.pod_startup, &self.node_termination] {
            summary.render(now, out);
        }
    }

    /// A scrape: the state-derived gauges refreshed from `state` at `now`, then the exposition
    /// in `format`. What /metrics serves.
    pub fn scrape(
        &self,
        state: &crate::state::ClusterState,
        now: jiff::Timestamp,
        format: crate::exposition::Exposition,
    ) -> String {
        let synced = state.synced();
        state.read(|s| self.observe_state(s, synced, now));
        self.render_as(format)
    }

    /// The exposition in `format` (/metrics answers in the format the scraper asks for).
    pub fn render_as(&self, format: crate::exposition::Exposition) -> String {
        match format {
            crate::exposition::Exposition::OpenMetrics => self.render(),
            crate::exposition::Exposition::Prometheus => self.render_prometheus(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_karpenter_names() {
        let metrics = Metrics::new();
        Metrics::inc(
            &metrics.nodeclaims_disrupted,
            &[("reason", "drifted"), ("nodepool", "default")],
        );
        Metrics::set(
            &metrics.nodepools_allowed_disruptions,
            &[("nodepool", "default"), ("reason", "Drifted")],
            3,
        );
        Metrics::observe(
            &metrics.scheduling_duration,
            &[("controller", "provisioner")],
            0.25,
        );
        let text = metrics.render_as(crate::exposition::Exposition::Prometheus);
        assert!(
            text.contains("# TYPE karpenter_build_info gauge\nkarpenter_build_info{version=\""),
            "{text}"
        );
        assert!(
            text.contains(
                "karpenter_nodeclaims_disrupted_total{reason=\"drifted\",nodepool=\"default\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "karpenter_nodepools_allowed_disruptions{nodepool=\"default\",reason=\"Drifted\"} 3"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "karpenter_scheduler_scheduling_duration_seconds_count{controller=\"provisioner\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn rollout_gauges_follow_each_pass_and_drop_a_pool_that_is_gone() {
        let metrics = Metrics::new();
        let midway = driftwood_api::RolloutStatus {
            up_to_date: 3,
            drifted: 4,
            disrupting: 2,
            blocked: 1,
            ..Default::default()
        };
        let paused = driftwood_api::RolloutStatus {
            drifted: 5,
            paused: true,
            ..Default::default()
        };
        let halted = driftwood_api::RolloutStatus {
            drifted: 5,
            disrupting: 0,
            policy: Some(driftwood_api::nodepool::RolloutPolicyStatus {
                started_at: Some("2026-07-20T09:00:00Z".into()),
                started: 1,
                halted: Some(driftwood_api::nodepool::RolloutHalt {
                    gate: "Restarts".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        metrics.observe_rollouts([
            ("general", &midway, false),
            ("gpu", &paused, false),
            ("web", &halted, false),
        ]);
        let text = metrics.render_as(crate::exposition::Exposition::Prometheus);
        for line in [
            "driftwood_nodepool_rollout_nodes{nodepool=\"general\",state=\"up_to_date\"} 3",
            "driftwood_nodepool_rollout_nodes{nodepool=\"general\",state=\"drifted\"} 4",
            "driftwood_nodepool_rollout_nodes{nodepool=\"general\",state=\"disrupting\"} 2",
            "driftwood_nodepool_rollout_nodes{nodepool=\"general\",state=\"blocked\"} 1",
            "driftwood_nodepool_rollout_complete{nodepool=\"general\"} 0",
            "driftwood_nodepool_rollout_paused{nodepool=\"gpu\"} 1",
            "driftwood_nodepool_rollout_halted{nodepool=\"web\",gate=\"Restarts\"} 1",
            "driftwood_nodepool_rollout_wave{nodepool=\"web\"} 1",
        ] {
            assert!(text.contains(line), "no {line}\n{text}");
        }
        let done = driftwood_api::RolloutStatus {
            up_to_date: 9,
            ..Default::default()
        };
        metrics.observe_rollouts([("general", &done, true)]);
        let text = metrics.render_as(crate::exposition::Exposition::Prometheus);
        assert!(text.contains("driftwood_nodepool_rollout_complete{nodepool=\"general\"} 1"));
        assert!(!text.contains("nodepool=\"gpu\""), "{text}");
    }

    #[test]
    fn unsynced_time_counts_from_the_first_unsynced_observation_and_resets_on_sync() {
        let metrics = Metrics::new();
        let snapshot = crate::state::ClusterState::default().snapshot();
        let at = |s: i64| jiff::Timestamp::from_second(1_700_000_000 + s).unwrap();
        let value = |m: &Metrics| {
            m.render_as(crate::exposition::Exposition::Prometheus)
                .lines()
                .find_map(|l| l.strip_prefix("karpenter_cluster_state_unsynced_time_seconds "))
                .map(str::to_string)
        };
        metrics.observe_state(&snapshot, false, at(0));
        metrics.observe_state(&snapshot, false, at(42));
        assert_eq!(value(&metrics).as_deref(), Some("42.0"));
        metrics.observe_state(&snapshot, true, at(50));
        assert_eq!(value(&metrics).as_deref(), Some("0.0"));
        metrics.observe_state(&snapshot, false, at(60));
        metrics.observe_state(&snapshot, false, at(65));
        assert_eq!(value(&metrics).as_deref(), Some("5.0"));
    }

    /// The Prometheus text written while encoding is the OpenMetrics exposition rewritten
    /// afterwards, summaries included.
    #[test]
    fn prometheus_text_is_the_openmetrics_exposition_rewritten() {
        let metrics = Metrics::new();
        Metrics::inc(
            &metrics.nodeclaims_disrupted,
            &[("reason", "drifted"), ("nodepool", "default")],
        );
        metrics.observe_state(
            &crate::state::ClusterState::default().snapshot(),
            true,
            jiff::Timestamp::from_second(1_700_000_000).unwrap(),
        );
        let open = metrics.render_as(crate::exposition::Exposition::OpenMetrics);
        assert!(open.ends_with("# EOF\n"));
        assert!(open.contains("# TYPE karpenter_pods_startup_duration_seconds summary"));
        // The process's own figures move between two renders.
        let steady = |text: &str| {
            text.lines()
                .filter(|l| !l.starts_with("process_"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let written = steady(&metrics.render_as(crate::exposition::Exposition::Prometheus));
        let rewritten = steady(&crate::exposition::openmetrics_to_prometheus(&open));
        assert_eq!(written.len(), rewritten.len());
        for (w, r) in written.iter().zip(&rewritten) {
            assert_eq!(w, r);
        }
    }

    /// A deleted NodePool's instance types leave the cloud provider gauges once the state is
    /// synced (before, a pool not listed yet is not taken for deleted).
    #[test]
    fn a_deleted_pools_instance_types_leave_the_gauges_once_synced() {
        let metrics = Metrics::new();
        let mut snapshot = crate::state::ClusterState::default().snapshot();
        snapshot.apply(
            "general".into(),
            Arc::new(driftwood_api::NodePool::new("general", Default::default())),
        );
        let catalog = |name: &str| {
            Arc::new(vec![driftwood_scheduling::InstanceType {
                name: name.into(),
                requirements: Default::default(),
                capacity: driftwood_scheduling::Resources::from_milli([("cpu", 4000)]),
                overhead: Default::default(),
                offerings: vec![],
            }])
        };
        metrics.cloud.keep_catalog("general", &catalog("m5.large"));
        metrics.cloud.keep_catalog("gpu", &catalog("p4d.24xlarge"));
        let cpu_series = |m: &Metrics| {
            m.render_as(crate::exposition::Exposition::Prometheus)
                .lines()
                .filter(|l| l.starts_with("karpenter_cloudprovider_instance_type_cpu_cores{"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
        metrics.observe_state(&snapshot, false, now);
        assert_eq!(cpu_series(&metrics).len(), 2);
        metrics.observe_state(&snapshot, true, now);
        assert_eq!(
            cpu_series(&metrics),
            ["karpenter_cloudprovider_instance_type_cpu_cores{instance_type=\"m5.large\"} 4.0"]
        );
    }

    #[test]
    fn a_replica_stands_by_until_it_leads_and_process_figures_are_exported() {
        let metrics = Metrics::new();
        let text = metrics.render_as(crate::exposition::Exposition::Prometheus);
        assert!(
            text.contains("leader_election_master_status{name=\"karpenter-leader-election\"} 0"),
            "{text}"
        );
        metrics.observe_leading(true);
        let text = metrics.render_as(crate::exposition::Exposition::Prometheus);
        assert!(
            text.contains("leader_election_master_status{name=\"karpenter-leader-election\"} 1"),
            "{text}"
        );
        if cfg!(target_os = "linux") {
            for line in [
                "# TYPE process_cpu_seconds_total counter",
                "# TYPE process_resident_memory_bytes gauge",
                "# TYPE process_open_fds gauge",
                "# TYPE process_start_time_seconds gauge",
            ] {
                assert!(text.contains(line), "no {line}\n{text}");
            }
        }
    }

    /// Karpenter's disruption budget gauges: the budget's limit (not what is left of it), the
    /// nodes consuming it, and 2147483647 when no budget limits the pool.
    #[test]
    fn budgets_report_their_limit_and_the_nodes_consuming_it() {
        let pool = |budgets: serde_json::Value| -> driftwood_api::NodePool {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
                "spec": {"disruption": {"budgets": budgets}, "template": {"spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"},
                    "requirements": []}}}
            }))
            .unwrap()
        };
        let metrics = Metrics::new();
        let limited = driftwood_disruption::budget::allowed_disruptions(
            &pool(serde_json::json!([{"nodes": "10%"}])),
            "Drifted",
            30,
            2,
            0,
        );
        assert_eq!(limited.allowed, 1);
        metrics.report_budgets("Drifted", &[limited]);
        let unlimited = driftwood_disruption::budget::allowed_disruptions(
            &pool(serde_json::json!([{"nodes": "0", "reasons": ["Empty"]}])),
            "Underutilized",
            30,
            0,
            0,
        );
        metrics.report_budgets("Underutilized", &[unlimited]);
        let text = metrics.render_as(crate::exposition::Exposition::Prometheus);
        for line in [
            "karpenter_nodepools_allowed_disruptions{nodepool=\"p\",reason=\"Drifted\"} 3\n",
            "karpenter_nodepools_nodes_consuming_budgets{nodepool=\"p\",reason=\"Drifted\"} 2\n",
            "karpenter_nodepools_allowed_disruptions{nodepool=\"p\",reason=\"Underutilized\"} 2147483647\n",
            "karpenter_nodepools_nodes_consuming_budgets{nodepool=\"p\",reason=\"Underutilized\"} 0\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}
