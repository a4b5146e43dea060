//! What `driftwood preview` reads from the live cluster: one list of each kind it copies, and
//! nothing else. Every request is a list (the test counts them in the server's audit log).

use anyhow::Context as _;
use driftwood_api::{EC2NodeClass, NodeClaim, NodePool};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::NamespaceResourceScope;
use serde::de::DeserializeOwned;

/// The live cluster as read, each kind as listed. NodePools, EC2NodeClasses and NodeClaims
/// stay untyped so that fields driftwood does not model are copied too.
#[derive(Debug, Default, Clone)]
pub struct LiveCluster {
    /// The API server's Kubernetes minor version, e.g. `1.29`.
    pub kubernetes_version: String,
    pub nodepools: Vec<DynamicObject>,
    pub nodeclasses: Vec<DynamicObject>,
    pub nodeclaims: Vec<DynamicObject>,
    pub nodes: Vec<Node>,
    pub namespaces: Vec<Namespace>,
    pub pods: Vec<Pod>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub deployments: Vec<Deployment>,
    pub replica_sets: Vec<ReplicaSet>,
    pub stateful_sets: Vec<StatefulSet>,
    pub daemon_sets: Vec<DaemonSet>,
}

async fn list_all<K>(client: &kube::Client) -> anyhow::Result<Vec<K>>
where
    K: kube::Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    let kind = K::kind(&K::DynamicType::default()).to_string();
    Ok(api
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing {kind} in the live cluster"))?
        .items)
}

async fn list_dynamic<K>(client: &kube::Client) -> anyhow::Result<Vec<DynamicObject>>
where
    K: kube::Resource<DynamicType = ()>,
{
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    Ok(api
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing {} in the live cluster", resource.kind))?
        .items)
}

impl LiveCluster {
    /// Reads the live cluster (lists only).
    pub async fn read(client: &kube::Client) -> anyhow::Result<Self> {
        let version = client
            .apiserver_version()
            .await
            .context("reading the live cluster's version")?;
        let minor: String = version
            .minor
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        Ok(Self {
            kubernetes_version: format!("{}.{minor}", version.major),
            nodepools: list_dynamic::<NodePool>(client).await?,
            nodeclasses: list_dynamic::<EC2NodeClass>(client).await?,
            nodeclaims: list_dynamic::<NodeClaim>(client).await?,
            nodes: Api::<Node>::all(client.clone())
                .list(&ListParams::default())
                .await
                .context("listing Nodes in the live cluster")?
                .items,
            namespaces: Api::<Namespace>::all(client.clone())
                .list(&ListParams::default())
                .await
                .context("listing Namespaces in the live cluster")?
                .items,
            pods: list_all(client).await?,
            pdbs: list_all(client).await?,
            deployments: list_all(client).await?,
            replica_sets: list_all(client).await?,
            stateful_sets: list_all(client).await?,
            daemon_sets: list_all(client).await?,
        })
    }

    /// The region the cluster's nodes run in (from their region label), if they say.
    pub fn region(&self) -> Option<String> {
        self.nodes.iter().find_map(|n| {
            n.metadata
                .labels
                .as_ref()?
                .get(driftwood_api::wellknown::LABEL_TOPOLOGY_REGION)
                .cloned()
        })
    }
}
