//! The sim kubelets' view of moto's EC2: a poller keeps the running instances the cluster
//! launched (and their instance types and images) so kubelets join Nodes for them.

use driftwood_api::wellknown::LABEL_NODEPOOL;
use driftwood_aws::claim_view::node_labels;
use driftwood_aws::instance_types::instance_type_labels;
use driftwood_aws::ports::{
    DescribeImagesInput, DescribeInstanceTypesInput, DescribeInstancesInput, DescribeSubnetsInput,
    Ec2Api, Filter, InstanceTypeDescription,
};
use driftwood_sim::kubelet::MachineFleet;
use driftwood_sim_aws::Machine;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::{Moto, apply_launch_template_security_groups};

/// moto's running instances as machines.
pub struct MotoFleet {
    machines: Mutex<Vec<Machine>>,
    images: Mutex<BTreeMap<String, String>>,
    types: BTreeMap<String, InstanceTypeDescription>,
}

impl MachineFleet for MotoFleet {
    fn running_machines(&self) -> Vec<std::sync::Arc<Machine>> {
        self.machines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .map(std::sync::Arc::new)
            .collect()
    }

    fn instance_type(&self, name: &str) -> Option<InstanceTypeDescription> {
        self.types.get(name).cloned()
    }

    fn image_name(&self, image_id: &str) -> Option<String> {
        self.images
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(image_id)
            .cloned()
    }
}

/// `1.29` from `amazon-eks-node-1.29-v20240807`.
fn image_kubernetes_version(name: &str) -> Option<String> {
    name.split('-')
        .find(|part| part.starts_with("1.") && part[2..].chars().all(|c| c.is_ascii_digit()))
        .map(ToString::to_string)
}

impl MotoFleet {
    /// The fleet of `moto`'s instances, and the poller that refreshes it every second (of
    /// tokio time) until aborted.
    pub async fn start(moto: &Moto) -> (Arc<Self>, tokio::task::JoinHandle<()>) {
        let ports = moto.ports().await;
        let types = ports
            .ec2
            .describe_instance_types(DescribeInstanceTypesInput::default())
            .await
            .unwrap()
            .into_iter()
            .map(|d| (d.instance_type.clone(), d))
            .collect();
        let fleet = Arc::new(Self {
            machines: Mutex::default(),
            images: Mutex::default(),
            types,
        });
        let zone_ids: BTreeMap<String, String> = ports
            .ec2
            .describe_subnets(DescribeSubnetsInput::default())
            .await
            .unwrap()
            .into_iter()
            .map(|s| (s.availability_zone, s.availability_zone_id))
            .collect();
        let raw = moto.ec2().await;
        let seed = moto.seed.clone();
        let polled = fleet.clone();
        let poller = tokio::spawn(async move {
            loop {
                apply_launch_template_security_groups(&raw, &seed.cluster, &seed.security_group)
                    .await;
                match poll(&*ports.ec2, &polled, &seed.region, &zone_ids).await {
                    Ok(machines) => {
                        *polled
                            .machines
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner) = machines;
                    }
                    // The kubelets keep the last list; RUST_LOG=warn shows why it is stale.
                    Err(error) => tracing::warn!(%error, "polling moto's instances failed"),
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        (fleet, poller)
    }
}

async fn poll(
    ec2: &dyn Ec2Api,
    fleet: &MotoFleet,
    region: &str,
    zone_ids: &BTreeMap<String, String>,
) -> Result<Vec<Machine>, driftwood_aws::ports::AwsError> {
    let instances = ec2
        .describe_instances(DescribeInstancesInput {
            instance_ids: Vec::new(),
            filters: vec![
                Filter::new("tag-key", [LABEL_NODEPOOL]),
                Filter::new("instance-state-name", ["running"]),
            ],
        })
        .await?;
    let unknown: Vec<String> = {
        let images = fleet.images.lock().unwrap_or_else(PoisonError::into_inner);
        instances
            .iter()
            .map(|i| i.image_id.clone())
            .filter(|id| !images.contains_key(id))
            .collect()
    };
    if !unknown.is_empty() {
        let described = ec2
            .describe_images(DescribeImagesInput {
                image_ids: unknown,
                ..Default::default()
            })
            .await?;
        let mut images = fleet.images.lock().unwrap_or_else(PoisonError::into_inner);
        for image in described {
            images.insert(image.image_id, image.name);
        }
    }
    let images = fleet.images.lock().unwrap_or_else(PoisonError::into_inner);
    let mut machines: Vec<Machine> = instances
        .into_iter()
        .map(|i| {
            let tags: BTreeMap<String, String> = i
                .tags
                .iter()
                .map(|t| (t.key.clone(), t.value.clone()))
                .collect();
            let capacity_type = i
                .instance_lifecycle
                .clone()
                .unwrap_or_else(|| "on-demand".to_string());
            let type_labels = fleet
                .types
                .get(&i.instance_type)
                .and_then(|d| instance_type_labels(d, "linux"))
                .unwrap_or_default();
            let zone_id = zone_ids
                .get(&i.availability_zone)
                .map_or("", String::as_str);
            let mut labels = node_labels(
                &type_labels,
                &i.availability_zone,
                zone_id,
                region,
                &capacity_type,
            );
            if let Some(pool) = tags.get(LABEL_NODEPOOL) {
                labels.insert(LABEL_NODEPOOL.to_string(), pool.clone());
            }
            Machine {
                provider_id: format!("aws:///{}/{}", i.availability_zone, i.instance_id),
                instance_id: i.instance_id.clone(),
                instance_type: i.instance_type.clone(),
                zone: i.availability_zone.clone(),
                capacity_type,
                kubernetes_version: images
                    .get(&i.image_id)
                    .and_then(|n| image_kubernetes_version(n)),
                image_id: i.image_id,
                launch_time: i.launch_time,
                private_dns_name: i.private_dns_name,
                private_ip: i.private_ip_address,
                labels,
                tags,
            }
        })
        .collect();
    machines.sort_by(|a, b| {
        a.launch_time
            .cmp(&b.launch_time)
            .then_with(|| a.instance_id.cmp(&b.instance_id))
    });
    Ok(machines)
}

#[test]
fn kubernetes_version_from_an_eks_image_name() {
    assert_eq!(
        image_kubernetes_version("amazon-eks-arm64-node-1.30-v20240917").as_deref(),
        Some("1.30")
    );
    assert_eq!(image_kubernetes_version("al2023-ami-minimal"), None);
}
