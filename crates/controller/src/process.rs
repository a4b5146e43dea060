//! The controller process, wired once for every runtime (`driftwood controller` against a real
//! cluster and AWS, and each controller process of the embedded cluster): a watch cache, the AWS
//! provider reading node classes from it, the context every controller shares, and the watches
//! that fill the cache. The controllers themselves start with [`Process::spawn_controllers`],
//! only while leading.

use crate::context::{Context, NameGenerator};
use crate::events::Events;
use crate::fence::{Fence, FencedCloud};
use crate::metered_cloud::MeteredCloud;
use crate::metrics::Metrics;
use crate::runtime::{Controllers, spawn_controllers};
use crate::settings::Settings;
use crate::state::{ClusterState, spawn_watchers};
use driftwood_aws::{AwsPorts, AwsProvider, AwsSettings};
use driftwood_cloud::Clock;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// What a controller process is built from.
pub struct ProcessConfig {
    pub client: kube::Client,
    pub clock: Arc<dyn Clock>,
    /// The cloud's APIs (aws-sdk-rust, or the simulated account).
    pub ports: AwsPorts,
    pub aws: AwsSettings,
    pub settings: Settings,
    /// Seeds NodeClaim names (fixed in simulations so a run repeats).
    pub name_seed: u64,
    /// Whether this process may write now: [`Fence::open`] without leader election; under
    /// election the same fence must also guard `client` ([`crate::fence::FenceLayer`]).
    pub fence: Fence,
    /// What else feeds the process's metrics: the request families `client` counts into
    /// through [`crate::client_metrics::ClientMetricsLayer`], and the cloud SDK's.
    pub metric_sources: crate::metrics::MetricSources,
}

/// A running controller process: its context and the watches feeding its cache. Dropping it
/// stops the watches.
pub struct Process {
    pub ctx: Context,
    watchers: Vec<JoinHandle<()>>,
}

impl Process {
    /// Builds the context and starts the watches.
    pub fn start(config: ProcessConfig) -> Self {
        let ProcessConfig {
            client,
            clock,
            ports,
            aws,
            settings,
            name_seed,
            fence,
            mut metric_sources,
        } = config;
        let state = ClusterState::new();
        let provider = Arc::new(AwsProvider::new(
            ports,
            aws,
            clock.clone(),
            Arc::new(state.clone()),
        ));
        provider.start_background();
        let interruption = provider.interruption_queue().map(Arc::new);
        let instance_status = Some(Arc::new(provider.instance_status_reader()));
        metric_sources
            .external
            .push(crate::aws_provider_metrics::source(
                provider.failure_counts(),
                provider.batcher_metrics(),
                provider.user_data_sizes(),
            ));
        let metrics = Metrics::with_sources(metric_sources);
        let ctx = Context {
            client: client.clone(),
            state: state.clone(),
            clock: clock.clone(),
            cloud: Arc::new(MeteredCloud::new(
                Arc::new(FencedCloud::new(provider.clone(), fence)),
                metrics.cloud.clone(),
            )),
            nodeclasses: provider,
            events: Events::new(client.clone(), clock),
            metrics,
            names: Arc::new(NameGenerator::new(name_seed)),
            retries: Default::default(),
            liveness: Default::default(),
            interruption,
            instance_status,
            settings: Arc::new(settings),
        };
        state.on_pod_change(crate::state_metrics::pod_startup_observer(
            &ctx.metrics,
            ctx.clock.clone(),
        ));
        let conditions = ctx.metrics.conditions.clone();
        let clock = ctx.clock.clone();
        state.on_status_change(Arc::new(move |old, new| {
            conditions.record(old, new, clock.now());
        }));
        let watchers = spawn_watchers(&client, &state);
        Self { ctx, watchers }
    }

    /// Starts the controllers (call while leading).
    pub fn spawn_controllers(&self) -> Controllers {
        spawn_controllers(&self.ctx)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        for handle in &self.watchers {
            handle.abort();
        }
    }
}
