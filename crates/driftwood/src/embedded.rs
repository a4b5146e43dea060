//! The embedded cluster with the real controllers: the simulated cluster (API server,
//! scheduler, kubelets, workload controllers, simulated EC2/SSM/IAM) on one virtual clock, and
//! driftwood's controllers talking to it through the kube-rs client and to the simulated EC2
//! through the production AWS provider.

use anyhow::Context as _;
use driftwood_cloud::{AwsProvider, AwsSettings};
use driftwood_controller::events::Events;
use driftwood_controller::metrics::Metrics;
use driftwood_controller::{ClusterState, Context, NameGenerator, Settings};
use driftwood_sim::{SimCluster, SimClusterOptions};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// The embedded cluster plus controllers.
pub struct Embedded {
    pub cluster: SimCluster,
    pub settings: Settings,
    controllers: Option<Running>,
}

/// One incarnation of the controller process (its cache, tasks and context).
pub struct Running {
    pub ctx: Context,
    handles: Vec<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for handle in &self.handles {
            handle.abort();
        }
    }
}

impl Embedded {
    /// Starts the simulated cluster and the controllers.
    pub async fn start(options: SimClusterOptions, settings: Settings) -> anyhow::Result<Self> {
        let cluster = SimCluster::start(options)
            .await
            .context("starting the embedded cluster")?;
        let mut embedded = Self {
            cluster,
            settings,
            controllers: None,
        };
        embedded.start_controllers();
        Ok(embedded)
    }

    /// Starts a fresh controller process (new cache, new tasks), as after a restart.
    pub fn start_controllers(&mut self) {
        let client = self.cluster.client();
        let clock = self.cluster.cloud_clock();
        let state = ClusterState::new();
        let options = self.cluster.options();
        let aws_settings = AwsSettings::new(
            &options.cluster_name,
            "us-west-2",
            &options.kubernetes_version,
        );
        let provider = Arc::new(AwsProvider::new(
            self.cluster.aws_ports(),
            aws_settings,
            clock.clone(),
            Arc::new(state.clone()),
        ));
        let mut settings = self.settings.clone();
        if settings.cluster_name.is_empty() {
            settings.cluster_name.clone_from(&options.cluster_name);
        }
        let ctx = Context {
            client: client.clone(),
            state: state.clone(),
            clock: clock.clone(),
            cloud: provider.clone(),
            nodeclasses: provider,
            events: Events::new(client.clone(), clock),
            metrics: Metrics::new(),
            names: Arc::new(NameGenerator::new(
                settings.name_seed ^ rand_seed(&self.controllers),
            )),
            settings: Arc::new(settings),
        };
        let mut handles = driftwood_controller::state::spawn_watchers(&client, &state);
        handles.extend(driftwood_controller::runtime::spawn_controllers(&ctx));
        self.controllers = Some(Running { ctx, handles });
    }

    /// Stops the controllers abruptly (a crash): whatever they were doing is cut off.
    pub fn kill_controllers(&mut self) {
        self.controllers = None;
    }

    /// The running controllers' context.
    pub fn ctx(&self) -> Option<&Context> {
        self.controllers.as_ref().map(|r| &r.ctx)
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

/// A different name seed per controller incarnation, so a restarted controller does not
/// reuse the names its predecessor generated.
fn rand_seed(previous: &Option<Running>) -> u64 {
    if previous.is_some() { 0x5eed } else { 0 }
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
