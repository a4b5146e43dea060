//! controller-runtime's work-queue and worker metrics (`workqueue_*`,
//! `controller_runtime_active_workers`, `_max_concurrent_reconciles`, `_reconcile_panics_total`
//! ...) for the one loop driver. Each controller is one queue holding at most one item (its
//! next pass) and one worker: a wake-up is an add, the wait from the first wake-up to the pass
//! is the time in the queue, the pass is the work, and a pass that asks to run again after a
//! delay (its own requeue, or its backoff after failing) is a retry, as controller-runtime
//! counts a delayed add (the period's timed pass is a resync, not counted). The `controller`
//! label is Karpenter's name for the work: where two loops do the work of one Karpenter
//! controller (drift and the Consolidatable marker are both `nodeclaim.disruption`), they are
//! its two workers — its depth, active workers and unfinished work add up, its longest-running
//! pass is the longer of theirs.

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

/// One loop as the metrics see it: the Karpenter controller whose work it does (the
/// `controller` and `name` labels) and its own name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Worker {
    pub controller: &'static str,
    pub name: &'static str,
}

impl Worker {
    /// A loop that is a Karpenter controller of the same name on its own.
    pub const fn alone(name: &'static str) -> Self {
        Self {
            controller: name,
            name,
        }
    }
}

/// A started loop's state: its controller, whether its next pass is queued, and when its
/// running pass started (none while it waits).
#[derive(Clone, Copy, Debug)]
struct WorkerState {
    controller: &'static str,
    queued: bool,
    since: Option<Instant>,
}

/// Every started loop's state, by its own name.
type Workers = BTreeMap<&'static str, WorkerState>;

/// Every loop started, by its own name.
#[derive(Clone, Default, Debug)]
struct Running(Arc<Mutex<Workers>>);

/// A controller's workers, queued passes and running passes.
type WorkerCounts = (i64, i64, i64);

impl Running {
    fn lock(&self) -> MutexGuard<'_, Workers> {
        // A panic while the map was held leaves it usable: every write is one field set.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Changes `worker`'s state by `change` and returns its controller's workers, queued
    /// passes and running passes, with the map still locked: the caller writes the gauges
    /// before it lets go, so two workers of one controller never write them out of order.
    fn update(
        &self,
        worker: Worker,
        change: impl FnOnce(&mut WorkerState),
    ) -> (MutexGuard<'_, Workers>, WorkerCounts) {
        let mut all = self.lock();
        let state = all.entry(worker.name).or_insert(WorkerState {
            controller: worker.controller,
            queued: false,
            since: None,
        });
        change(state);
        let mut counts = (0, 0, 0);
        for state in all.values().filter(|s| s.controller == worker.controller) {
            counts.0 += 1;
            counts.1 += i64::from(state.queued);
            counts.2 += i64::from(state.since.is_some());
        }
        (all, counts)
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

    /// `worker` has started: its controller's workers, queue and counters are exported.
    pub fn started(&self, worker: Worker) {
        let controller = worker.controller;
        let (_held, (workers, queued, active)) = self.running.update(worker, |s| {
            s.queued = false;
            s.since = None;
        });
        self.max_concurrent_reconciles
            .get_or_create(&controller_labels(controller))
            .set(workers);
        self.active_workers
            .get_or_create(&controller_labels(controller))
            .set(active);
        self.depth
            .get_or_create(&depth_labels(controller))
            .set(queued);
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

    /// Something woke `worker` (its first wake-up since the last pass queues the pass).
    pub fn added(&self, worker: Worker) {
        self.adds
            .get_or_create(&queue_labels(worker.controller))
            .inc();
        let (_held, (_, queued, _)) = self.running.update(worker, |s| s.queued = true);
        self.depth
            .get_or_create(&depth_labels(worker.controller))
            .set(queued);
    }

    /// `worker`'s pass starts after `queued_seconds` in the queue.
    pub fn pass_started(&self, worker: Worker, queued_seconds: f64) {
        let controller = worker.controller;
        let (_held, (_, queued, active)) = self.running.update(worker, |s| {
            s.queued = false;
            s.since = Some(Instant::now());
        });
        self.depth
            .get_or_create(&depth_labels(controller))
            .set(queued);
        self.queue_duration
            .get_or_create(&queue_labels(controller))
            .observe(queued_seconds);
        self.active_workers
            .get_or_create(&controller_labels(controller))
            .set(active);
    }

    /// `worker`'s pass is over after `seconds` of work; `panicked` if it panicked.
    pub fn pass_finished(&self, worker: Worker, seconds: f64, panicked: bool) {
        let controller = worker.controller;
        let (_held, (_, _, active)) = self.running.update(worker, |s| s.since = None);
        self.active_workers
            .get_or_create(&controller_labels(controller))
            .set(active);
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
/// at scrape time from the passes running then, per controller: the sum of its running passes'
/// ages and the oldest of them (0 for a controller whose workers all wait for their next pass).
#[derive(Debug)]
struct UnfinishedWork(Running);

impl Collector for UnfinishedWork {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        // controller -> (sum of ages, oldest).
        let mut ages: BTreeMap<&'static str, (f64, f64)> = BTreeMap::new();
        for state in self.0.lock().values() {
            let age = state.since.map_or(0.0, |s| s.elapsed().as_secs_f64());
            let entry = ages.entry(state.controller).or_default();
            entry.0 += age;
            entry.1 = entry.1.max(age);
        }
        for (i, (name, help)) in UNFINISHED.into_iter().enumerate() {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (controller, (sum, oldest)) in &ages {
                let gauge = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
                gauge.set(if i == 0 { *sum } else { *oldest });
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
        let drift = Worker::alone("drift");
        metrics.started(drift);
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

        metrics.added(drift);
        let text = render(registry);
        assert!(text.contains("workqueue_adds_total{controller=\"drift\",name=\"drift\"} 1"));
        assert!(
            text.contains("workqueue_depth{controller=\"drift\",name=\"drift\",priority=\"0\"} 1")
        );

        metrics.pass_started(drift, 0.25);
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

        metrics.pass_finished(drift, 0.5, true);
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

    /// Two loops doing the work of one Karpenter controller are its two workers: one series
    /// set under its name, two concurrent reconciles, depth and active workers counted over
    /// both, the longest-running pass the older one.
    #[test]
    fn two_loops_of_one_controller_are_its_two_workers() {
        let mut declared = DeclaredRegistry::new();
        let metrics = LoopMetrics::register(&mut declared);
        let registry = declared.registry();
        let drift = Worker {
            controller: "nodeclaim.disruption",
            name: "drift",
        };
        let marker = Worker {
            controller: "nodeclaim.disruption",
            name: "nodeclaim.consolidation",
        };
        metrics.started(drift);
        metrics.started(marker);
        let gauge = |text: &str, series: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(series).map(str::trim))
                .unwrap_or_else(|| panic!("{series} in\n{text}"))
                .parse()
                .unwrap()
        };
        let depth = "workqueue_depth{controller=\"nodeclaim.disruption\",name=\"nodeclaim.disruption\",priority=\"0\"}";
        let active = "controller_runtime_active_workers{controller=\"nodeclaim.disruption\"}";
        let longest = "workqueue_longest_running_processor_seconds{controller=\"nodeclaim.disruption\",name=\"nodeclaim.disruption\"}";
        let text = render(registry);
        assert_eq!(
            gauge(
                &text,
                "controller_runtime_max_concurrent_reconciles{controller=\"nodeclaim.disruption\"}"
            ),
            2.0
        );
        assert!(!text.contains("\"drift\""), "{text}");
        metrics.added(drift);
        metrics.added(marker);
        metrics.added(marker);
        assert_eq!(gauge(&render(registry), depth), 2.0);
        metrics.pass_started(drift, 0.1);
        let text = render(registry);
        assert_eq!((gauge(&text, depth), gauge(&text, active)), (1.0, 1.0));
        metrics.pass_started(marker, 0.1);
        assert_eq!(gauge(&render(registry), active), 2.0);
        metrics.pass_finished(drift, 0.2, false);
        let text = render(registry);
        assert_eq!(gauge(&text, active), 1.0);
        assert!(gauge(&text, longest) > 0.0, "the marker's pass still runs");
        metrics.pass_finished(marker, 0.2, false);
        let text = render(registry);
        assert_eq!((gauge(&text, active), gauge(&text, longest)), (0.0, 0.0));
        assert!(text.contains(
            "workqueue_work_duration_seconds_count{controller=\"nodeclaim.disruption\",name=\"nodeclaim.disruption\"} 2"
        ));
        assert!(text.contains(
            "workqueue_adds_total{controller=\"nodeclaim.disruption\",name=\"nodeclaim.disruption\"} 3"
        ));
    }
}
