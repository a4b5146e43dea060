//! `driftwood explain NODECLAIM|NODE`: is it drifted, exactly what changed, and what blocks its
//! replacement right now — against any cluster the kubeconfig reaches.

use anyhow::{Context as _, bail};
use driftwood_api::{EC2NodeClass, NodeClaim, NodePool};
use driftwood_disruption::cached_pod::CachedPod;
use driftwood_disruption::explain::{ExplainInput, explain};
use driftwood_disruption::views::{drain_explain, node_view, pdb_allowed};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ListParams};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A NodeClaim name, or the name of a Node driftwood manages.
    name: String,
    #[command(flatten)]
    connection: super::rollout::Connection,
}

pub async fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let client = super::rollout::client(&args.connection).await?;
    let claims: Vec<NodeClaim> = Api::<NodeClaim>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing nodeclaims")?
        .items;
    let nodes: Vec<Node> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing nodes")?
        .items;
    let node_of = |claim: &NodeClaim| -> Option<Node> {
        let status = claim.status.as_ref()?;
        nodes
            .iter()
            .find(|n| {
                n.spec.as_ref().and_then(|s| s.provider_id.as_ref()) == status.provider_id.as_ref()
                    && status.provider_id.is_some()
                    || n.metadata.name == status.node_name
            })
            .cloned()
    };
    let Some(claim) = claims
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(&args.name))
        .or_else(|| {
            claims
                .iter()
                .find(|c| node_of(c).and_then(|n| n.metadata.name).as_deref() == Some(&args.name))
        })
    else {
        bail!(
            "no NodeClaim named {:?} and no NodeClaim whose node is {:?}",
            args.name,
            args.name
        );
    };
    let node = node_of(claim);
    let pods: Vec<Pod> = match node.as_ref().and_then(|n| n.metadata.name.clone()) {
        Some(node_name) => {
            Api::<Pod>::all(client.clone())
                .list(&ListParams::default().fields(&format!("spec.nodeName={node_name}")))
                .await
                .context("listing pods")?
                .items
        }
        None => Vec::new(),
    };
    let pdbs: Vec<PodDisruptionBudget> = Api::<PodDisruptionBudget>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing PDBs")?
        .items;
    let pool_name = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(driftwood_api::wellknown::LABEL_NODEPOOL))
        .cloned()
        .unwrap_or_default();
    let pool: Option<NodePool> = Api::<NodePool>::all(client.clone())
        .get_opt(&pool_name)
        .await
        .context("reading nodepool")?;
    let class: Option<EC2NodeClass> = Api::<EC2NodeClass>::all(client.clone())
        .get_opt(&claim.spec.node_class_ref.name)
        .await
        .context("reading ec2nodeclass")?;
    let cached: Vec<CachedPod> = pods.iter().map(CachedPod::from).collect();
    let pod_refs: Vec<&CachedPod> = cached.iter().collect();
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let view = node_view(claim, node.as_ref(), &pod_refs, &pdbs, now);
    let pool_views: Vec<_> = claims
        .iter()
        .filter(|c| {
            c.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(driftwood_api::wellknown::LABEL_NODEPOOL))
                == Some(&pool_name)
        })
        .map(|c| node_view(c, node_of(c).as_ref(), &[], &pdbs, now))
        .collect();
    let events = Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let claim_name = claim.metadata.name.clone().unwrap_or_default();
    let last_of = |reason: &str| {
        events
            .iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(&claim_name))
            .max_by_key(|e| e.event_time.as_ref().map(|t| t.0))
            .and_then(|e| e.note.clone())
    };
    let last_blocked = last_of("DisruptionBlocked");
    let last_unconsolidatable = last_of("Unconsolidatable");
    let allowed = pdb_allowed(&pdbs);
    let drain = match (&claim.metadata.deletion_timestamp, node.as_ref()) {
        (Some(_), Some(n)) => {
            let node_name = n.metadata.name.clone().unwrap_or_default();
            let attachments: Vec<String> = Api::<VolumeAttachment>::all(client.clone())
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
                .into_iter()
                .filter(|va| {
                    va.spec.node_name == node_name
                        && va.spec.source.persistent_volume_name.is_some()
                })
                .filter_map(|va| va.metadata.name)
                .collect();
            Some(drain_explain(claim, &pod_refs, &pdbs, attachments, now))
        }
        _ => None,
    };
    let text = explain(&ExplainInput {
        nodeclaim: claim,
        view: &view,
        nodepool: pool.as_ref(),
        nodeclass: class.as_ref(),
        pool_views: &pool_views,
        pdb_allowed: &allowed,
        last_unconsolidatable_event: last_unconsolidatable.as_deref(),
        last_blocked_event: last_blocked.as_deref(),
        now,
        drain,
    });
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}
