//! What the embedded cluster's kubelets see: the running machines, each with its provider ID,
//! instance type, zone, capacity type, image and the Kubernetes version that image runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use driftwood_api::wellknown::{
    LABEL_CAPACITY_TYPE, LABEL_NODEPOOL, LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE,
    LABEL_TOPOLOGY_ZONE_ID,
};
use driftwood_aws::instance_types::instance_type_labels;
use driftwood_aws::launcher::provider_id;
use driftwood_aws::ports::instance_state;
use jiff::Timestamp;

use crate::state::SimAws;

/// A running machine a kubelet can join to the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub instance_id: String,
    /// `aws:///ZONE/INSTANCE-ID`.
    pub provider_id: String,
    pub instance_type: String,
    pub zone: String,
    /// `spot` or `on-demand`.
    pub capacity_type: String,
    pub image_id: String,
    /// The Kubernetes minor version of the image (e.g. `1.29`), when known.
    pub kubernetes_version: Option<String>,
    pub launch_time: Timestamp,
    pub private_dns_name: String,
    pub private_ip: String,
    /// Labels the Node should carry (instance type labels, zone, region, capacity type, nodepool).
    pub labels: BTreeMap<String, String>,
    /// The instance's tags.
    pub tags: BTreeMap<String, String>,
}

/// The kubelets' view of the simulated EC2.
pub trait MachineSource: Send + Sync {
    /// Machines in state `running`, by launch time then id (shared: a poll copies no machine).
    fn running_machines(&self) -> Vec<Arc<Machine>>;
}

impl MachineSource for SimAws {
    fn running_machines(&self) -> Vec<Arc<Machine>> {
        let now = self.now();
        let st = self.lock();
        let mut built = self
            .machines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let zones = &self.config.zones;
        let mut type_labels: std::collections::HashMap<String, BTreeMap<String, String>> =
            std::collections::HashMap::new();
        let mut out: Vec<Arc<Machine>> = st
            .instances
            .values()
            .filter(|s| self.state_at(s, now) == instance_state::RUNNING)
            .map(|s| {
                if let Some(machine) = built.get(&s.instance.instance_id) {
                    return machine.clone();
                }
                let i = self.observe(s, now);
                // Each type's labels once per call, not once per machine.
                let mut labels = type_labels
                    .entry(format!("{}/{}", i.instance_type, i.os()))
                    .or_insert_with(|| {
                        st.instance_types
                            .get(&i.instance_type)
                            .and_then(|d| instance_type_labels(&d.description, i.os()))
                            .unwrap_or_default()
                    })
                    .clone();
                let capacity_type = i
                    .instance_lifecycle
                    .clone()
                    .unwrap_or_else(|| "on-demand".to_string());
                labels.insert(LABEL_TOPOLOGY_ZONE.to_string(), i.availability_zone.clone());
                labels.insert(
                    LABEL_TOPOLOGY_REGION.to_string(),
                    self.config.region.clone(),
                );
                if let Some(idx) = zones.iter().position(|z| *z == i.availability_zone) {
                    labels.insert(
                        LABEL_TOPOLOGY_ZONE_ID.to_string(),
                        crate::network::zone_id(&self.config.region, idx),
                    );
                }
                labels.insert(LABEL_CAPACITY_TYPE.to_string(), capacity_type.clone());
                let tags: BTreeMap<String, String> = i
                    .tags
                    .iter()
                    .map(|t| (t.key.clone(), t.value.clone()))
                    .collect();
                if let Some(pool) = tags.get(LABEL_NODEPOOL) {
                    labels.insert(LABEL_NODEPOOL.to_string(), pool.clone());
                }
                let machine = Arc::new(Machine {
                    provider_id: provider_id(&i.availability_zone, &i.instance_id),
                    instance_id: i.instance_id.clone(),
                    instance_type: i.instance_type.clone(),
                    zone: i.availability_zone.clone(),
                    capacity_type,
                    image_id: i.image_id.clone(),
                    kubernetes_version: s.kubernetes_version.clone(),
                    launch_time: i.launch_time,
                    private_dns_name: i.private_dns_name.clone(),
                    private_ip: i.private_ip_address.clone(),
                    labels,
                    tags,
                });
                built.insert(i.instance_id.clone(), machine.clone());
                machine
            })
            .collect();
        // Forget machines that stopped running.
        if built.len() > out.len() {
            let running: std::collections::HashSet<&str> =
                out.iter().map(|m| m.instance_id.as_str()).collect();
            built.retain(|id, _| running.contains(id.as_str()));
        }
        out.sort_by(|a, b| {
            a.launch_time
                .cmp(&b.launch_time)
                .then_with(|| a.instance_id.cmp(&b.instance_id))
        });
        out
    }
}
