//! `SimCluster`: the whole embedded cluster on one virtual clock — the API server with the
//! driftwood CRDs, the Deployment/ReplicaSet and DaemonSet controllers, the scheduler, and
//! kubelets over a simulated EC2 account whose timestamps come from the same clock.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use driftwood_aws::AwsPorts;
use driftwood_sim_aws::{SimAws, SimConfig, sim_ports};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;

use crate::apiserver::{ApiServer, ApiServerConfig, HttpServer};
use crate::clock::{SharedClock, VirtualClock};
use crate::daemonset::DaemonSetController;
use crate::kubelet::{KubeletConfig, KubeletTimings, Kubelets, kubelet_version};
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::workloads::WorkloadControllers;

/// How to build the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimClusterOptions {
    /// Kubernetes minor version, e.g. `1.29`.
    pub kubernetes_version: String,
    /// Seed of the simulated AWS account (ids, prices).
    pub seed: u64,
    /// Cluster name (subnet/security-group discovery tags, node role).
    pub cluster_name: String,
    /// What the virtual clock reads at start.
    pub start_time: Timestamp,
    /// From a Node's registration to Ready.
    pub node_ready_delay: Duration,
    /// From binding to a pod Running and Ready.
    pub pod_start_delay: Duration,
    /// The longest a terminating pod lingers.
    pub pod_termination_cap: Duration,
    /// From a node letting go of its volumes to its VolumeAttachments being detached.
    pub volume_detach_delay: Duration,
    /// From launch to the instance running (pending → running).
    pub machine_launch_delay: Duration,
    /// From termination to the instance gone (shutting-down → terminated).
    pub machine_termination_delay: Duration,
    /// How often pending pods are retried without changes.
    pub scheduler_retry_interval: Duration,
    /// The simulated account's region and zones (empty: us-west-2 and its three zones).
    pub region: Option<String>,
    pub zones: Vec<String>,
}

impl Default for SimClusterOptions {
    fn default() -> Self {
        let start_time = driftwood_sim_aws::default_start_time();
        Self {
            kubernetes_version: "1.29".to_string(),
            seed: 42,
            cluster_name: "driftwood-demo".to_string(),
            start_time,
            node_ready_delay: Duration::from_secs(5),
            pod_start_delay: Duration::from_secs(2),
            pod_termination_cap: Duration::from_secs(2),
            volume_detach_delay: Duration::from_secs(10),
            machine_launch_delay: Duration::from_secs(30),
            machine_termination_delay: Duration::from_secs(30),
            scheduler_retry_interval: Duration::from_secs(5),
            region: None,
            zones: Vec::new(),
        }
    }
}

/// Starting the cluster failed.
#[derive(Debug, thiserror::Error)]
pub enum SimClusterError {
    /// The driftwood CRDs could not be generated.
    #[error("generating the driftwood CRDs: {0}")]
    Crd(#[from] driftwood_api::crd::CrdError),
    /// The API server rejected a bootstrap object.
    #[error("installing {object}: {source}")]
    Install {
        /// What was being installed.
        object: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// The running components; dropping them stops them.
#[derive(Debug)]
struct Components {
    _workloads: WorkloadControllers,
    _daemon_sets: DaemonSetController,
    _scheduler: Scheduler,
    _kubelets: Kubelets,
}

/// One embedded cluster: API server, controllers, scheduler, kubelets and simulated AWS, all
/// on one clock.
pub struct SimCluster {
    api: ApiServer,
    aws: Arc<SimAws>,
    clock: SharedClock,
    options: SimClusterOptions,
    components: Option<Components>,
}

impl Drop for SimCluster {
    /// Stops the components before the API server they watch: a watcher outliving its
    /// in-process server would re-watch in a tight loop and stall a multi-threaded runtime's
    /// shutdown.
    fn drop(&mut self) {
        self.components = None;
    }
}

impl std::fmt::Debug for SimCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimCluster")
            .field("options", &self.options)
            .field("running", &self.components.is_some())
            .finish_non_exhaustive()
    }
}

fn signed(duration: Duration) -> SignedDuration {
    SignedDuration::try_from(duration).unwrap_or(SignedDuration::MAX)
}

impl SimCluster {
    /// Build and start everything on the current tokio runtime (pause tokio time first for a
    /// virtual clock that only moves when the runtime is idle).
    pub async fn start(options: SimClusterOptions) -> Result<Self, SimClusterError> {
        Self::start_with_fleet(options, None).await
    }

    /// Like [`SimCluster::start`], with the kubelets joining Nodes for the machines of `fleet`
    /// (another EC2, e.g. moto's server) instead of the simulated account's. The simulated
    /// account still exists (its ports stay available) but runs no machines of its own.
    pub async fn start_with_fleet(
        options: SimClusterOptions,
        fleet: Option<Arc<dyn crate::kubelet::MachineFleet>>,
    ) -> Result<Self, SimClusterError> {
        let mut cluster = Self::create(options).await?;
        cluster.start_components(fleet);
        Ok(cluster)
    }

    /// The API server (with the driftwood CRDs) and the simulated account, with nothing
    /// running against them yet: objects created now are found by the controllers, scheduler
    /// and kubelets as they were, when [`SimCluster::start_components`] starts them.
    pub async fn create(options: SimClusterOptions) -> Result<Self, SimClusterError> {
        let clock: SharedClock = Arc::new(VirtualClock::starting_at(options.start_time));
        let mut config = ApiServerConfig::with_clock(Arc::clone(&clock));
        config.kubernetes_version = kubelet_version(&options.kubernetes_version);
        // A managed control plane's latency, on the cluster's (virtual) time.
        config.latency = crate::apiserver::RequestLatency::MANAGED;
        let api = ApiServer::new(config);
        let client = api.client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in driftwood_api::crd::crds()? {
            let object = crd.metadata.name.clone().unwrap_or_default();
            crds.create(&PostParams::default(), &crd)
                .await
                .map_err(|source| SimClusterError::Install { object, source })?;
        }
        let mut aws_config = SimConfig::new(&options.cluster_name, options.seed);
        aws_config.launch_delay = signed(options.machine_launch_delay);
        aws_config.termination_delay = signed(options.machine_termination_delay);
        if let Some(region) = &options.region {
            aws_config.region = region.clone();
        }
        if !options.zones.is_empty() {
            aws_config.zones = options.zones.clone();
        }
        let aws = Arc::new(SimAws::new(aws_config, Arc::clone(&clock)));
        // The interruption queue Karpenter's getting-started stack creates (named after the
        // cluster), with EventBridge routing the account's EC2 and Health events to it.
        aws.create_interruption_queue(&options.cluster_name);
        Ok(Self {
            api,
            aws,
            clock,
            options,
            components: None,
        })
    }

    /// Starts the workload controllers, scheduler and kubelets (the kubelets joining Nodes for
    /// `fleet`'s machines, or the simulated account's); a no-op when they run already.
    pub fn start_components(&mut self, fleet: Option<Arc<dyn crate::kubelet::MachineFleet>>) {
        if self.components.is_some() {
            return;
        }
        let options = &self.options;
        let client = self.api.client();
        let kubelet_config = KubeletConfig {
            timings: KubeletTimings {
                node_ready_delay: options.node_ready_delay,
                pod_start_delay: options.pod_start_delay,
                pod_termination_cap: options.pod_termination_cap,
                volume_detach_delay: options.volume_detach_delay,
            },
            kubernetes_version: options.kubernetes_version.clone(),
            ..KubeletConfig::default()
        };
        self.components = Some(Components {
            _workloads: WorkloadControllers::spawn(client.clone()),
            _daemon_sets: DaemonSetController::spawn(client.clone()),
            _scheduler: Scheduler::spawn(
                client.clone(),
                Arc::clone(&self.clock),
                SchedulerConfig {
                    retry_interval: options.scheduler_retry_interval,
                },
            ),
            _kubelets: Kubelets::spawn(
                client,
                fleet.unwrap_or_else(|| {
                    Arc::clone(&self.aws) as Arc<dyn crate::kubelet::MachineFleet>
                }),
                Arc::clone(&self.clock),
                kubelet_config,
            ),
        });
    }

    /// An in-process kube client (default namespace `default`).
    pub fn client(&self) -> kube::Client {
        self.api.client()
    }

    /// The API server (direct store reads, watch disconnects, HTTP serving).
    pub fn api_server(&self) -> &ApiServer {
        &self.api
    }

    /// The simulated AWS account.
    pub fn aws(&self) -> Arc<SimAws> {
        Arc::clone(&self.aws)
    }

    /// The simulated AWS account as the cloud provider's ports.
    pub fn aws_ports(&self) -> AwsPorts {
        sim_ports(&self.aws)
    }

    /// The cluster's clock.
    pub fn clock(&self) -> SharedClock {
        Arc::clone(&self.clock)
    }

    /// The options the cluster was started with.
    pub fn options(&self) -> &SimClusterOptions {
        &self.options
    }

    /// Serve the API over HTTP on `address` (port 0 picks a free port).
    pub async fn serve_http(&self, address: SocketAddr) -> std::io::Result<HttpServer> {
        self.api.serve_http(address).await
    }

    /// Serve on 127.0.0.1 with a free port and write a kubeconfig for it to `path`.
    pub async fn serve_with_kubeconfig(&self, path: &Path) -> std::io::Result<HttpServer> {
        self.api.serve_with_kubeconfig(path).await
    }

    /// Stop the controllers, scheduler and kubelets (the API server state stays readable).
    pub fn shutdown(&mut self) {
        self.components = None;
    }
}
