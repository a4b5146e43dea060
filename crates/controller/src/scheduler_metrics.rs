//! Karpenter's gauges of a scheduling simulation under way, by controller and simulation:
//! `karpenter_scheduler_queue_depth` (the pods it has still to try; it stays, at 0, after the
//! simulation until the controller's next one starts) and
//! `karpenter_scheduler_unfinished_work_seconds` (how long it has run, while it runs), read at
//! scrape time from the simulation's [`SolveProgress`], and
//! `karpenter_scheduler_pending_pods_by_effective_zone_count` (its pending pods by effective
//! zone, once it is done, until the controller's next simulation starts). A simulation's
//! `scheduling_id` is a number random per process and its count in the process (Karpenter's is
//! a UUID).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use driftwood_scheduling::SolveProgress;

/// The metric names this module registers, with their types.
pub const FAMILIES: [(&str, MetricType); 3] = [
    ("karpenter_scheduler_queue_depth", MetricType::Gauge),
    (
        "karpenter_scheduler_unfinished_work_seconds",
        MetricType::Gauge,
    ),
    (
        "karpenter_scheduler_pending_pods_by_effective_zone_count",
        MetricType::Gauge,
    ),
];

/// A controller's latest simulation.
#[derive(Debug)]
struct Solve {
    id: String,
    started: Instant,
    running: bool,
    progress: Arc<SolveProgress>,
}

/// Each controller's latest simulation; cloned into the registry as its collector.
#[derive(Clone, Debug)]
pub struct SchedulerProgress {
    solves: Arc<Mutex<BTreeMap<&'static str, Solve>>>,
    /// Random per process, so an id is not reused by the next process (Karpenter's are UUIDs).
    process: u64,
    next_id: Arc<std::sync::atomic::AtomicU64>,
}

impl Default for SchedulerProgress {
    fn default() -> Self {
        use std::hash::{BuildHasher as _, Hasher as _};
        Self {
            solves: Arc::default(),
            process: std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish(),
            next_id: Arc::default(),
        }
    }
}

/// A simulation under way, as [`SchedulerProgress::start`] hands it out: dropped (finished,
/// failed or panicked), it stops counting its work.
#[derive(Debug)]
pub struct Running {
    owner: SchedulerProgress,
    controller: &'static str,
    id: String,
    /// What the simulation reports its progress to.
    pub progress: Arc<SolveProgress>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(solve) = self.owner.lock().get_mut(self.controller)
            && solve.id == self.id
        {
            solve.running = false;
        }
    }
}

impl SchedulerProgress {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<&'static str, Solve>> {
        // Each write replaces or updates one entry: a panic elsewhere leaves the map usable.
        self.solves.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `controller` starts a simulation: it replaces the controller's last one in the gauges.
    pub fn start(&self, controller: &'static str) -> Running {
        let number = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let id = format!("{:016x}-{number}", self.process);
        let progress = Arc::new(SolveProgress::default());
        self.lock().insert(
            controller,
            Solve {
                id: id.clone(),
                started: Instant::now(),
                running: true,
                progress: progress.clone(),
            },
        );
        Running {
            owner: self.clone(),
            controller,
            id,
            progress,
        }
    }
}

impl Collector for SchedulerProgress {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        // (controller, simulation id, pods still to try, seconds run while running, pending
        // pods by effective zone once done), every controller's read under one lock.
        type Seen = (
            &'static str,
            String,
            i64,
            Option<f64>,
            BTreeMap<String, u32>,
        );
        let solves: Vec<Seen> = self
            .lock()
            .iter()
            .map(|(controller, solve)| {
                (
                    *controller,
                    solve.id.clone(),
                    i64::try_from(solve.progress.queue_depth()).unwrap_or(i64::MAX),
                    solve.running.then(|| solve.started.elapsed().as_secs_f64()),
                    solve.progress.pending_by_effective_zone(),
                )
            })
            .collect();
        let mut family = encoder.encode_descriptor(
            FAMILIES[0].0,
            "The number of pods currently waiting to be scheduled.",
            None,
            MetricType::Gauge,
        )?;
        for (controller, id, depth, _, _) in &solves {
            let labels = [("controller", *controller), ("scheduling_id", id.as_str())];
            ConstGauge::new(*depth).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            FAMILIES[1].0,
            "How many seconds of work has been done that is in progress and hasn't been \
             observed by scheduling_duration_seconds.",
            None,
            MetricType::Gauge,
        )?;
        for (controller, id, _, seconds, _) in &solves {
            let Some(seconds) = seconds else { continue };
            let labels = [("controller", *controller), ("scheduling_id", id.as_str())];
            ConstGauge::new(*seconds).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            FAMILIES[2].0,
            "Pending pods of the controller's latest finished simulation by effective zone: the \
             one zone their zone requirement and zonal topology constraints leave them, \
             'flexible' when several are left, 'none' when none is.",
            None,
            MetricType::Gauge,
        )?;
        for (controller, _, _, _, counts) in &solves {
            for (zone, pods) in counts {
                let labels = [("controller", *controller), ("zone", zone.as_str())];
                ConstGauge::new(i64::from(*pods)).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// A controller's planning simulations, watched as Karpenter's scheduler watches every
/// `Solve`: each one replaces the controller's last in the gauges above, and its duration is
/// observed in `karpenter_scheduler_scheduling_duration_seconds{controller}`. Set on the world a
/// controller's planners simulate ([`driftwood_scheduling::Observer`]).
pub struct ControllerSimulations {
    controller: &'static str,
    progress: SchedulerProgress,
    duration: crate::metrics::HistogramFamily,
}

impl ControllerSimulations {
    /// `controller`'s simulations, reported to `metrics`.
    pub fn new(metrics: &crate::metrics::Metrics, controller: &'static str) -> Self {
        Self {
            controller,
            progress: metrics.scheduler_progress.clone(),
            duration: metrics.scheduling_duration.clone(),
        }
    }
}

impl driftwood_scheduling::SimulationObserver for ControllerSimulations {
    fn started(&self) -> Box<dyn driftwood_scheduling::ObservedSimulation> {
        Box::new(WatchedSimulation {
            running: self.progress.start(self.controller),
            started: Instant::now(),
            controller: self.controller,
            duration: self.duration.clone(),
        })
    }
}

/// One simulation of [`ControllerSimulations`]: its duration is observed when it is dropped.
struct WatchedSimulation {
    running: Running,
    started: Instant,
    controller: &'static str,
    duration: crate::metrics::HistogramFamily,
}

impl driftwood_scheduling::ObservedSimulation for WatchedSimulation {
    fn progress(&self) -> &SolveProgress {
        &self.running.progress
    }
}

impl Drop for WatchedSimulation {
    fn drop(&mut self) {
        crate::metrics::Metrics::observe(
            &self.duration,
            &[("controller", self.controller)],
            self.started.elapsed().as_secs_f64(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    fn scrape(progress: &SchedulerProgress) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(progress.clone()));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    /// Karpenter's scheduler: while a simulation runs, its queue depth and unfinished work are
    /// exported under its id; once it is done the depth stays (0) and the work goes; the next
    /// simulation of the controller replaces it.
    #[test]
    fn a_simulation_is_seen_while_it_runs_and_its_depth_stays() {
        let progress = SchedulerProgress::default();
        assert!(!scrape(&progress).contains("karpenter_scheduler_queue_depth{"));
        let id = |n: u32| format!("scheduling_id=\"{:016x}-{n}\"", progress.process);
        let running = progress.start("provisioner");
        let text = scrape(&progress);
        assert!(
            text.contains(&format!(
                "karpenter_scheduler_queue_depth{{controller=\"provisioner\",{}}} 0",
                id(1)
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "karpenter_scheduler_unfinished_work_seconds{{controller=\"provisioner\",{}}}",
                id(1)
            )),
            "{text}"
        );
        drop(running);
        let text = scrape(&progress);
        assert!(text.contains(&format!("{}}} 0", id(1))), "{text}");
        assert!(
            !text.contains("karpenter_scheduler_unfinished_work_seconds{"),
            "{text}"
        );
        let second = progress.start("provisioner");
        let text = scrape(&progress);
        assert!(!text.contains(&id(1)), "{text}");
        assert!(text.contains(&id(2)), "{text}");
        // Another process numbers its simulations apart.
        assert_ne!(SchedulerProgress::default().process, progress.process);
        drop(second);
    }

    /// The depth is what the simulation reports: a real simulation of three pods leaves it at
    /// 0 when done; its three pending pods, free to go to any zone, count as `flexible`.
    #[test]
    fn the_depth_follows_the_simulation() {
        use driftwood_scheduling::testkit::{GIB, fake_instance_types, nodepool, pod};
        let progress = SchedulerProgress::default();
        let running = progress.start("provisioner");
        let input = driftwood_scheduling::SimulationInput {
            pods: (0..3)
                .map(|i| pod(&format!("default/p{i}"), 500, GIB))
                .collect(),
            nodepools: vec![nodepool("default", fake_instance_types(4))],
            ..Default::default()
        };
        let result = driftwood_scheduling::schedule_observed(
            &input,
            &mut driftwood_scheduling::PoolCache::default(),
            &running.progress,
        )
        .unwrap();
        assert!(result.unschedulable.is_empty());
        assert_eq!(running.progress.queue_depth(), 0);
        // Its pending pods by effective zone, until the controller's next simulation starts.
        drop(running);
        let zones = "karpenter_scheduler_pending_pods_by_effective_zone_count";
        let text = scrape(&progress);
        assert!(
            text.contains(&format!(
                "{zones}{{controller=\"provisioner\",zone=\"flexible\"}} 3"
            )),
            "{text}"
        );
        let _next = progress.start("provisioner");
        let text = scrape(&progress);
        assert!(text.contains(&format!("# TYPE {zones} gauge")), "{text}");
        assert!(!text.contains(&format!("{zones}{{")), "{text}");
    }

    /// The disruption controller's planning simulations are reported under its name, as
    /// Karpenter's disruption simulations are: each simulation of a watched world (and of a
    /// world cloned from it) observes its duration and replaces the last in the gauges; an
    /// unwatched world reports nothing; the answers are the same.
    #[test]
    fn a_watched_worlds_simulations_are_reported_under_their_controller() {
        use driftwood_scheduling::testkit::{GIB, fake_instance_types, nodepool, pod};
        let metrics = crate::metrics::Metrics::new();
        let mut world = driftwood_scheduling::SimulationInput {
            pods: (0..3)
                .map(|i| pod(&format!("default/p{i}"), 500, GIB))
                .collect(),
            nodepools: vec![nodepool("default", fake_instance_types(4))],
            ..Default::default()
        };
        let unwatched = driftwood_scheduling::schedule(&world).unwrap();
        let exposition =
            |m: &crate::metrics::Metrics| m.render_as(crate::exposition::Exposition::Prometheus);
        assert!(!exposition(&metrics).contains("controller=\"disruption\""));
        world.options.observer = driftwood_scheduling::Observer::new(Arc::new(
            ControllerSimulations::new(&metrics, "disruption"),
        ));
        let mut pools = driftwood_scheduling::PoolCache::default();
        assert_eq!(
            driftwood_scheduling::schedule_cached(&world, &mut pools).unwrap(),
            unwatched
        );
        let derived = world.clone();
        assert_eq!(derived, world);
        driftwood_scheduling::schedule_cached(&derived, &mut pools).unwrap();
        let text = exposition(&metrics);
        assert!(
            text.contains(
                "karpenter_scheduler_scheduling_duration_seconds_count{controller=\"disruption\"} 2"
            ),
            "{text}"
        );
        let depths: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("karpenter_scheduler_queue_depth{controller=\"disruption\""))
            .collect();
        assert_eq!(depths.len(), 1, "the latest simulation only: {depths:?}");
        assert!(depths[0].ends_with(" 0"), "{depths:?}");
        // Done: no unfinished work; its pending pods by effective zone stay.
        assert!(
            !text.contains("karpenter_scheduler_unfinished_work_seconds{controller=\"disruption\"")
        );
        assert!(text.contains(
            "karpenter_scheduler_pending_pods_by_effective_zone_count{controller=\"disruption\",zone=\"flexible\"} 3"
        ), "{text}");
    }
}
