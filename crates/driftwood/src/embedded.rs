//! The embedded cluster with the real controllers: the simulated cluster (API server,
//! scheduler, kubelets, workload controllers, simulated EC2/SSM/IAM) on one virtual clock, and
//! driftwood's controllers talking to it through the kube-rs client and to the simulated EC2
//! through the production AWS provider.

use crate::api_faults::{ApiFaults, FaultyService, ProcessGate};
use anyhow::Context as _;
use driftwood_aws::{AwsPorts, AwsSettings};
use driftwood_controller::client_metrics::{ClientMetrics, ClientMetricsLayer};
use driftwood_controller::fence::{Fence, FenceLayer};
use driftwood_controller::rbac::ApiCall;
use driftwood_controller::runtime::Controllers;
use driftwood_controller::{Context, Process, ProcessConfig, Settings};
use driftwood_sim::{SimCluster, SimClusterOptions};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The embedded cluster plus controllers.
pub struct Embedded {
    pub cluster: SimCluster,
    pub settings: Settings,
    controllers: Option<Running>,
    /// Every API request the controllers (and replicas) have sent.
    api_calls: ApiCallRecorder,
    /// Another cloud the controllers launch into instead of the simulated account.
    cloud: Option<ExternalCloud>,
    /// Faults armed between the controllers and the API server.
    pub api_faults: ApiFaults,
    /// Controller processes started so far (each gets its own name seed).
    incarnations: u64,
}

/// A cloud other than the simulated account (e.g. the aws-sdk-rust adapter pointed at moto's
/// server): the ports the provider talks through and the settings it runs with.
#[derive(Clone)]
pub struct ExternalCloud {
    pub ports: AwsPorts,
    pub settings: AwsSettings,
}

impl Drop for Embedded {
    /// Stops the controllers before the cluster they watch (see `SimCluster`'s drop).
    fn drop(&mut self) {
        self.controllers = None;
    }
}

/// One incarnation of the controller process (its cache, watches, context and controllers).
pub struct Running {
    /// Stopped first (between passes; aborted if a pass is still under way), then the watches.
    controllers: Controllers,
    process: Process,
}

impl Running {
    /// The process's shared context.
    pub fn ctx(&self) -> &Context {
        &self.process.ctx
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.controllers.cancel();
    }
}

/// Everything a controller process is built from.
struct ProcessTemplate {
    client: kube::Client,
    /// The request families `client` counts into.
    client_metrics: ClientMetrics,
    /// Guards `client` and the cloud (open for the single controller process).
    fence: Fence,
    clock: Arc<dyn driftwood_cloud::Clock>,
    ports: AwsPorts,
    /// The simulated account's cluster name (discovery tags).
    cluster_name: String,
    /// The simulated account's region.
    region: String,
    kubernetes_version: String,
    settings: Settings,
    /// Provider settings for an external cloud (`None`: the simulated account's).
    aws_settings: Option<AwsSettings>,
}

impl ProcessTemplate {
    /// A fresh controller process: new cache, provider, context and controller tasks.
    fn start(&self, seed: u64) -> Running {
        let aws = self.aws_settings.clone().unwrap_or_else(|| {
            let mut settings =
                AwsSettings::new(&self.cluster_name, &self.region, &self.kubernetes_version);
            // The simulated account has the interruption queue (named after the cluster).
            settings.interruption_queue = Some(self.cluster_name.clone());
            settings
        });
        let process = Process::start(ProcessConfig {
            client: self.client.clone(),
            clock: self.clock.clone(),
            ports: self.ports.clone(),
            aws,
            settings: self.settings.clone(),
            name_seed: self.settings.name_seed ^ seed,
            fence: self.fence.clone(),
            metric_sources: driftwood_controller::metrics::MetricSources {
                client: self.client_metrics.clone(),
                external: Vec::new(),
            },
        });
        let controllers = process.spawn_controllers();
        Running {
            controllers,
            process,
        }
    }
}

/// A controller replica under leader election (see [`Embedded::start_replica`]).
pub struct Replica {
    pub identity: String,
    election: JoinHandle<()>,
    running: Arc<Mutex<Option<Running>>>,
    /// Its election's renewals by the slow path (the replica's process counts them in
    /// `leader_election_slowpath_total`; an embedded term's metrics start afresh).
    slowpath: driftwood_controller::leader::Counter,
}

impl Replica {
    /// Whether this replica holds the lease and runs the controllers.
    pub fn is_leading(&self) -> bool {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// How many times its election renewed the lease by reading it again.
    pub fn slowpath_renewals(&self) -> u64 {
        self.slowpath.get()
    }

    /// The leading replica's metrics as a scrape of /metrics in OpenMetrics text would read
    /// them (None while standing by).
    pub fn metrics_text(&self) -> Option<String> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|r| {
                let ctx = r.ctx();
                ctx.metrics.scrape(
                    &ctx.state,
                    ctx.clock.now(),
                    driftwood_controller::exposition::Exposition::OpenMetrics,
                )
            })
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.election.abort();
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}

impl Embedded {
    /// Starts the simulated cluster and the controllers.
    pub async fn start(options: SimClusterOptions, settings: Settings) -> anyhow::Result<Self> {
        Self::start_with_cloud(options, settings, None, None).await
    }

    /// The API server and the simulated account with nothing running yet (no kubelet,
    /// scheduler, workload controller or driftwood controller): what is created now is found
    /// as it was when [`Embedded::start_all`] starts them.
    pub async fn prepare(options: SimClusterOptions, settings: Settings) -> anyhow::Result<Self> {
        let cluster = SimCluster::create(options)
            .await
            .context("starting the embedded cluster")?;
        Ok(Self {
            cluster,
            settings,
            controllers: None,
            api_calls: ApiCallRecorder::default(),
            cloud: None,
            api_faults: ApiFaults::default(),
            incarnations: 0,
        })
    }

    /// Starts what [`Embedded::prepare`] left stopped: the cluster's components, then the
    /// controllers.
    pub fn start_all(&mut self) {
        self.cluster.start_components(None);
        if self.controllers.is_none() {
            self.start_controllers();
        }
    }

    /// Starts the cluster with the controllers launching into `cloud` and the kubelets joining
    /// Nodes for `fleet`'s machines (both `None`: the simulated account, as [`Embedded::start`]).
    pub async fn start_with_cloud(
        options: SimClusterOptions,
        settings: Settings,
        cloud: Option<ExternalCloud>,
        fleet: Option<Arc<dyn driftwood_sim::kubelet::MachineFleet>>,
    ) -> anyhow::Result<Self> {
        let cluster = SimCluster::start_with_fleet(options, fleet)
            .await
            .context("starting the embedded cluster")?;
        let mut embedded = Self {
            cluster,
            settings,
            controllers: None,
            api_calls: ApiCallRecorder::default(),
            cloud,
            api_faults: ApiFaults::default(),
            incarnations: 0,
        };
        embedded.start_controllers();
        Ok(embedded)
    }

    /// Starts a fresh controller process (new cache, new tasks), as after a restart.
    pub fn start_controllers(&mut self) {
        // A different name seed per incarnation, so a restarted controller does not reuse the
        // names its predecessors generated.
        let seed = if self.incarnations == 0 {
            0
        } else {
            0x5eed_u64.wrapping_mul(self.incarnations)
        };
        self.incarnations += 1;
        let identity = format!("controller-{}", self.incarnations);
        self.controllers = Some(self.process_template(&identity, Fence::open()).start(seed));
    }

    /// Whether the single controller process (not a replica) is running.
    pub fn controllers_running(&self) -> bool {
        self.controllers.is_some()
    }

    /// What starting a controller process called `identity` needs, detached from `self`: its
    /// client and cloud behind `fence`.
    fn process_template(&self, identity: &str, fence: Fence) -> ProcessTemplate {
        let options = self.cluster.options();
        let mut settings = self.settings.clone();
        if settings.cluster_name.is_empty() {
            settings.cluster_name.clone_from(&options.cluster_name);
        }
        let client_metrics = ClientMetrics::default();
        ProcessTemplate {
            client: self.controller_client(identity, fence.clone(), client_metrics.clone()),
            client_metrics,
            fence,
            clock: self.cluster.clock(),
            ports: self
                .cloud
                .as_ref()
                .map_or_else(|| self.cluster.aws_ports(), |c| c.ports.clone()),
            cluster_name: options.cluster_name.clone(),
            region: options
                .region
                .clone()
                .unwrap_or_else(|| "us-west-2".to_string()),
            kubernetes_version: options.kubernetes_version.clone(),
            settings,
            aws_settings: self.cloud.as_ref().map(|c| c.settings.clone()),
        }
    }

    /// Starts a controller replica that campaigns for the leader Lease (in `kube-system`) and
    /// runs the controllers only while it leads, as one replica of a Deployment would. Stop the
    /// default controllers first (`kill_controllers`) to run only replicas. Dropping the
    /// replica kills it: its controllers stop and its lease is left to lapse.
    pub fn start_replica(&self, identity: &str, lease_duration: Duration) -> Replica {
        let running: Arc<Mutex<Option<Running>>> = Arc::new(Mutex::new(None));
        let slot = running.clone();
        // The controllers' writes (API and cloud) pass the fence the election holds; the
        // election's own client does not.
        let fence = Fence::elected(self.cluster.clock());
        let template = self.process_template(identity, fence.clone());
        let seed = identity.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        let mut terms: u64 = 0;
        let slowpath = driftwood_controller::leader::Counter::default();
        let election = driftwood_controller::leader::Election {
            client: self.controller_client(identity, Fence::open(), ClientMetrics::default()),
            namespace: "kube-system".to_string(),
            identity: identity.to_string(),
            clock: self.cluster.clock(),
            timings: driftwood_controller::leader::Timings::for_lease(lease_duration),
            fence,
            slowpath: slowpath.clone(),
        };
        let election = tokio::spawn(driftwood_controller::leader::run_election(
            election,
            CancellationToken::new(),
            move |leading| {
                let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
                // Every term starts a fresh process with its own name seed: a replica that
                // leads again must not regenerate the names of its earlier term (a name freed
                // since would be reused while annotations still point at the old object —
                // found by `driftwood chaos`, seed 9 of update-nodes-with-drift).
                if leading {
                    terms += 1;
                }
                *slot = leading
                    .then(|| template.start(seed ^ terms.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
            },
        ));
        Replica {
            identity: identity.to_string(),
            election,
            running,
            slowpath,
        }
    }

    /// Stops the controllers abruptly (a crash): whatever they were doing is cut off.
    pub fn kill_controllers(&mut self) {
        self.controllers = None;
    }

    /// The running controllers' context.
    pub fn ctx(&self) -> Option<&Context> {
        self.controllers.as_ref().map(Running::ctx)
    }

    /// Server-side-applies every object of a YAML stream; returns `Kind/name` of each.
    pub async fn apply_yaml(&self, text: &str) -> anyhow::Result<Vec<String>> {
        apply_yaml(&self.cluster.client(), text).await
    }

    /// The walkthrough's placeholders filled as its instructions do: cluster name, node role,
    /// and the previous Kubernetes version's amd64/arm64 AL2 AMI ids from SSM.
    pub fn walkthrough_values(
        &self,
        kubernetes_version: &str,
    ) -> anyhow::Result<BTreeMap<String, String>> {
        let aws = self.cluster.aws();
        let cluster = self.cluster.options().cluster_name.clone();
        let ami = |path: String| -> anyhow::Result<String> {
            aws.ssm_get_parameter(&path)
                .map(|p| p.value)
                .map_err(|e| anyhow::anyhow!("{}: {}", e.code, e.message))
        };
        Ok(BTreeMap::from([
            ("<<CLUSTER_NAME>>".to_string(), cluster.clone()),
            (
                "<<KARPENTER_NODE_IAM_ROLE_NAME>>".to_string(),
                format!("KarpenterNodeRole-{cluster}"),
            ),
            (
                "<<AMD64PREVAMI>>".to_string(),
                ami(format!(
                    "/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2/recommended/image_id"
                ))?,
            ),
            (
                "<<ARM64PREVAMI>>".to_string(),
                ami(format!(
                    "/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2-arm64/recommended/image_id"
                ))?,
            ),
        ]))
    }
}

/// Replaces every placeholder in `text`.
pub fn fill(text: &str, values: &BTreeMap<String, String>) -> String {
    values
        .iter()
        .fold(text.to_string(), |t, (k, v)| t.replace(k, v))
}

/// Server-side-applies every object of a YAML stream (kinds found through discovery).
pub async fn apply_yaml(client: &kube::Client, text: &str) -> anyhow::Result<Vec<String>> {
    let mut applied = Vec::new();
    for document in driftwood_api::manifest::split_documents(text) {
        let value = document?;
        let object: DynamicObject =
            serde_json::from_value(value).context("reading a manifest object")?;
        let types = object
            .types
            .clone()
            .context("object without apiVersion/kind")?;
        let gvk = GroupVersionKind::try_from(&types).context("parsing apiVersion")?;
        let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .with_context(|| {
                format!(
                    "the cluster does not serve {}/{}",
                    types.api_version, types.kind
                )
            })?;
        let name = object
            .metadata
            .name
            .clone()
            .context("object without metadata.name")?;
        let api: Api<DynamicObject> = if capabilities.scope == kube::discovery::Scope::Namespaced {
            let namespace = object
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            Api::namespaced_with(client.clone(), &namespace, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        api.patch(
            &name,
            &PatchParams::apply("driftwood").force(),
            &Patch::Apply(&object),
        )
        .await
        .with_context(|| format!("applying {} {name}", types.kind))?;
        applied.push(format!("{}/{name}", types.kind));
    }
    Ok(applied)
}

impl Embedded {
    /// The RBAC attributes of every distinct API request the controllers and replicas have
    /// sent since the start, sorted (requests through `cluster.client()` are not counted).
    pub fn recorded_api_calls(&self) -> Vec<ApiCall> {
        self.api_calls.calls()
    }

    /// How many times the controllers sent each kind of request.
    pub fn recorded_api_call_counts(&self) -> BTreeMap<ApiCall, u64> {
        self.api_calls.counts()
    }

    /// A kube client for the controller process `identity`: the in-process API server behind
    /// the armed faults ([`ApiFaults`]) and a layer that records each request.
    fn controller_client(
        &self,
        identity: &str,
        fence: Fence,
        metrics: ClientMetrics,
    ) -> kube::Client {
        let recorder = self.api_calls.clone();
        let service = tower::ServiceBuilder::new()
            .layer(FenceLayer::new(fence))
            .layer(ClientMetricsLayer::new(metrics))
            .map_request(move |request: http::Request<kube::client::Body>| {
                recorder.record(&request);
                request
            })
            .service(FaultyService::new(
                self.cluster.api_server().service(),
                self.api_faults.clone(),
                ProcessGate::new(identity),
            ));
        kube::Client::new(service, "default")
    }
}

/// The distinct API requests seen, as RBAC attributes.
#[derive(Debug, Clone, Default)]
struct ApiCallRecorder(Arc<Mutex<BTreeMap<ApiCall, u64>>>);

impl ApiCallRecorder {
    fn record<B>(&self, request: &http::Request<B>) {
        let uri = request.uri();
        if let Some(call) = ApiCall::from_request(
            request.method().as_str(),
            uri.path(),
            uri.query().unwrap_or_default(),
        ) {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(call)
                .and_modify(|n| *n += 1)
                .or_insert(1);
        }
    }

    fn calls(&self) -> Vec<ApiCall> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    fn counts(&self) -> BTreeMap<ApiCall, u64> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
