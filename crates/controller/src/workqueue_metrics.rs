//! controller-runtime's work-queue and worker metrics (`workqueue_*`,
//! `controller_runtime_active_workers`, `_max_concurrent_reconciles`, `_reconcile_panics_total`
//! ...) for the one loop driver. Each controller is one queue holding at most one item (its
//! next pass) and one worker: a wake-up is an add, the wait from the first wake-up to the pass
//! is the time in the queue, the pass is the work, and a pass that asks to run again after a
//! delay (its own requeue, or its backoff after failing) is a retry, as controller-runtime
//! counts a delayed add (the period's timed pass is a resync, not counted).

use driftwood_cloud::metric_registry::DeclaredRegistry;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::metrics::Labels;

/// controller-runtime's work-queue duration buckets: 10 ns to 1,000 s, by tens.
fn queue_histogram() -> Histogram {
    Histogram::new(exponential_buckets(10e-9, 10.0, 12))
}

/// Every loop started, with when its running pass started (none while it waits).
#[derive(Clone, Default, Debug)]
struct Running(Arc<Mutex<BTreeMap<&'static str, Option<Instant>>>>);

impl Running {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<&'static str, Option<Instant>>> {
        // A panic while the map was held leaves it usable: every write is one insert or remove.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The work-queue and worker families, one series set per controller.
#[derive(Clone, Debug)]
pub struct LoopMetrics {
    pub adds: Family<Labels, Counter>,
    pub depth: Family<Labels, Gauge>,
    pub queue_duration: Family<Labels, Histogram, fn() -> Histogram>,
    pub work_duration: Family<Labels, Histogram, fn() -> Histogram>,
    pub retries: Family<Labels, Counter>,
    pub active_workers: Family<Labels, Gauge>,
    pub max_concurrent_reconciles: Family<Labels, Gauge>,
    pub panics: Family<Labels, Counter>,
    /// Never incremented, as in Karpenter: no pass has a deadline (controller-runtime counts
    /// here only under its `ReconciliationTimeout` option, which Karpenter does not set).
    pub timeouts: Family<Labels, Counter>,
    /// Never incremented: every failed pass is retried (controller-runtime counts here only a
    /// `reconcile.TerminalError`, which is not requeued).
    pub terminal_errors: Family<Labels, Counter>,
    running: Running,
}

/// The gauges [`UnfinishedWork`] writes at scrape time, with their help.
const UNFINISHED: [(&str, &str); 2] = [
    (
        "workqueue_unfinished_work_seconds",
        "Seconds of work in passes running now (not yet observed in \
         workqueue_work_duration_seconds), by controller",
    ),
    (
        "workqueue_longest_running_processor_seconds",
        "Seconds the longest-running pass has run, by controller",
    ),
];

fn queue_labels(controller: &str) -> Labels {
    vec![
        ("controller".into(), controller.into()),
        ("name".into(), controller.into()),
    ]
}

fn controller_labels(controller: &str) -> Labels {
    vec![("controller".into(), controller.into())]
}

impl LoopMetrics {
    /// The families, registered in `registry`.
    pub fn register(registry: &mut DeclaredRegistry) -> Self {
        let metrics = Self {
            adds: Family::default(),
            depth: Family::default(),
            queue_duration: Family::new_with_constructor(queue_histogram),
            work_duration: Family::new_with_constructor(queue_histogram),
            retries: Family::default(),
            active_workers: Family::default(),
            max_concurrent_reconciles: Family::default(),
            panics: Family::default(),
            timeouts: Family::default(),
            terminal_errors: Family::default(),
            running: Running::default(),
        };
        registry.metric(
            "workqueue_adds",
            "Wake-ups of a controller's loop (adds to its queue), by controller",
            metrics.adds.clone(),
        );
        registry.metric(
            "workqueue_depth",
            "Passes waiting to start (0 or 1: a loop queues at most its next pass), by \
             controller",
            metrics.depth.clone(),
        );
        registry.metric(
            "workqueue_queue_duration_seconds",
            "Time from a loop's first wake-up to the start of the pass it asked for, by \
             controller",
            metrics.queue_duration.clone(),
        );
        registry.metric(
            "workqueue_work_duration_seconds",
            "Time a pass took, by controller",
            metrics.work_duration.clone(),
        );
        registry.metric(
            "workqueue_retries",
            "Passes requeued after a delay (the pass's own requeue, or the backoff of a failed \
             pass), by controller",
            metrics.retries.clone(),
        );
        registry.metric(
            "controller_runtime_active_workers",
            "Passes running now (0 or 1), by controller",
            metrics.active_workers.clone(),
        );
        registry.metric(
            "controller_runtime_max_concurrent_reconciles",
            "The most passes a controller runs at once (1: each controller is one loop)",
            metrics.max_concurrent_reconciles.clone(),
        );
        registry.metric(
            "controller_runtime_reconcile_panics",
            "Passes that panicked (recovered: counted as failed and retried), by controller",
            metrics.panics.clone(),
        );
        registry.metric(
            "controller_runtime_reconcile_timeouts",
            "Passes cut off at a deadline, by controller (none: passes have no deadline)",
            metrics.timeouts.clone(),
        );
        registry.metric(
            "controller_runtime_terminal_reconcile_errors",
            "Failed passes not retried, by controller (none: every failed pass is retried)",
            metrics.terminal_errors.clone(),
        );
        registry.collector(
            &UNFINISHED.map(|(name, _)| (name, MetricType::Gauge)),
            Box::new(UnfinishedWork(metrics.running.clone())),
        );
        metrics
    }

    /// A loop named `controller` has started: its one worker and empty queue are exported.
    pub fn started(&self, controller: &'static str) {
        self.running.lock().insert(controller, None);
        self.max_concurrent_reconciles
            .get_or_create(&controller_labels(controller))
            .set(1);
        self.active_workers
            .get_or_create(&controller_labels(controller))
            .set(0);
        self.depth.get_or_create(&depth_labels(controller)).set(0);
        // The counters start at 0, as client_golang exports a counter from its first use.
        for family in [&self.adds, &self.retries] {
            family.get_or_create(&queue_labels(controller)).inc_by(0);
        }
        for family in [&self.panics, &self.timeouts, &self.terminal_errors] {
            family
                .get_or_create(&controller_labels(controller))
                .inc_by(0);
        }
    }

    /// Something woke `controller` (its first wake-up since the last pass queues the pass).
    pub fn added(&self, controller: &'static str) {
        self.adds.get_or_create(&queue_labels(controller)).inc();
        self.depth.get_or_create(&depth_labels(controller)).set(1);
    }

    /// `controller`'s pass starts after `queued_seconds` in the queue.
    pub fn pass_started(&self, controller: &'static str, queued_seconds: f64) {
        self.depth.get_or_create(&depth_labels(controller)).set(0);
        self.queue_duration
            .get_or_create(&queue_labels(controller))
            .observe(queued_seconds);
        self.active_workers
            .get_or_create(&controller_labels(controller))
            .set(1);
        self.running.lock().insert(controller, Some(Instant::now()));
    }

    /// `controller`'s pass is over after `seconds` of work; `panicked` if it panicked.
    pub fn pass_finished(&self, controller: &'static str, seconds: f64, panicked: bool) {
        self.running.lock().insert(controller, None);
        self.active_workers
            .get_or_create(&controller_labels(controller))
            .set(0);
        self.work_duration
            .get_or_create(&queue_labels(controller))
            .observe(seconds);
        if panicked {
            self.panics
                .get_or_create(&controller_labels(controller))
                .inc();
        }
    }

    /// `controller`'s pass has asked to run again after a delay (its own requeue, or its
    /// backoff after failing): controller-runtime counts a delayed add as a retry.
    pub fn retried(&self, controller: &'static str) {
        self.retries.get_or_create(&queue_labels(controller)).inc();
    }
}

/// `workqueue_depth` carries controller-runtime's `priority` label too: "0", the priority of
/// every item a reconcile or a watch event adds (Karpenter runs controller-runtime's priority
/// queue, its default).
fn depth_labels(controller: &str) -> Labels {
    let mut labels = queue_labels(controller);
    labels.push(("priority".into(), "0".into()));
    labels
}

/// `workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds`, read
/// at scrape time from the passes running then (with one worker per loop, both are the running
/// pass's age; 0 for a loop waiting for its next pass).
#[derive(Debug)]
struct UnfinishedWork(Running);

impl Collector for UnfinishedWork {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let ages: Vec<(&'static str, f64)> = {
            let running = self.0.lock();
            running
                .iter()
                .map(|(name, since)| (*name, since.map_or(0.0, |s| s.elapsed().as_secs_f64())))
                .collect()
        };
        for (name, help) in UNFINISHED {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (controller, age) in &ages {
                let gauge = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
                gauge.set(*age);
                gauge.encode(family.encode_family(&queue_labels(controller))?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(registry: &prometheus_client::registry::Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn a_loop_is_one_queue_with_one_worker() {
        let mut declared = DeclaredRegistry::new();
        let metrics = LoopMetrics::register(&mut declared);
        assert_eq!(declared.declared().len(), 12);
        let registry = declared.registry();
        metrics.started("drift");
        let text = render(registry);
        assert!(
            text.contains("controller_runtime_max_concurrent_reconciles{controller=\"drift\"} 1")
        );
        assert!(
            text.contains("workqueue_depth{controller=\"drift\",name=\"drift\",priority=\"0\"} 0")
        );
        assert!(text.contains(
            "workqueue_unfinished_work_seconds{controller=\"drift\",name=\"drift\"} 0.0"
        ));

        metrics.added("drift");
        let text = render(registry);
        assert!(text.contains("workqueue_adds_total{controller=\"drift\",name=\"drift\"} 1"));
        assert!(
            text.contains("workqueue_depth{controller=\"drift\",name=\"drift\",priority=\"0\"} 1")
        );

        metrics.pass_started("drift", 0.25);
        let text = render(registry);
        assert!(
            text.contains("workqueue_depth{controller=\"drift\",name=\"drift\",priority=\"0\"} 0")
        );
        assert!(text.contains("controller_runtime_active_workers{controller=\"drift\"} 1"));
        let running =
            "workqueue_longest_running_processor_seconds{controller=\"drift\",name=\"drift\"} ";
        let age: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(running))
            .unwrap()
            .parse()
            .unwrap();
        assert!(age > 0.0, "{text}");
        assert!(text.contains(
            "workqueue_queue_duration_seconds_sum{controller=\"drift\",name=\"drift\"} 0.25"
        ));

        metrics.pass_finished("drift", 0.5, true);
        metrics.retried("drift");
        let text = render(registry);
        assert!(text.contains("controller_runtime_active_workers{controller=\"drift\"} 0"));
        assert!(text.contains(
            "workqueue_longest_running_processor_seconds{controller=\"drift\",name=\"drift\"} 0.0"
        ));
        assert!(text.contains(
            "workqueue_work_duration_seconds_count{controller=\"drift\",name=\"drift\"} 1"
        ));
        assert!(text.contains("controller_runtime_reconcile_panics_total{controller=\"drift\"} 1"));
        assert!(text.contains("workqueue_retries_total{controller=\"drift\",name=\"drift\"} 1"));
        assert!(
            text.contains("controller_runtime_reconcile_timeouts_total{controller=\"drift\"} 0")
        );
    }
}
