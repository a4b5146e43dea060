//! What a kubelet registers for a machine: the Node object (name, labels, taints, capacity,
//! allocatable, nodeInfo, addresses), computed purely from the machine and its instance type.

use std::collections::BTreeMap;

use driftwood_api::wellknown::{
    LABEL_ARCH, LABEL_INSTANCE_CPU, LABEL_INSTANCE_MEMORY, LABEL_NODEPOOL, LABEL_OS,
    TAINT_NODE_NOT_READY, TAINT_UNREGISTERED_KEY,
};
use driftwood_aws::instance_types::{CatalogOptions, capacity, pods};
use driftwood_aws::overhead::{allocatable, base_resources, overhead};
use driftwood_aws::ports::InstanceTypeDescription;
use driftwood_scheduling::Resources;
use driftwood_scheduling::resources::{EPHEMERAL_STORAGE, MEMORY};
use driftwood_sim_aws::Machine;
use jiff::Timestamp;
use serde_json::{Value, json};

/// The hostname label.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";

/// Max pods when nothing better is known (the kubelet's default).
const DEFAULT_MAX_PODS: i64 = 110;

/// A small deterministic hash for picking patch versions and the like (the api crate's FNV-1a).
pub fn fnv64(text: &str) -> u64 {
    driftwood_api::hash::fnv1a64(text.as_bytes())
}

/// The node name for a machine: its private DNS name, or one derived from the instance id
/// (`ip-10-x-y-z.<region>.compute.internal`) when EC2 gave none.
pub fn node_name(machine: &Machine) -> String {
    if !machine.private_dns_name.is_empty() {
        return machine.private_dns_name.clone();
    }
    let hash = fnv64(&machine.instance_id);
    let region = machine
        .zone
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .to_string();
    let region = if region.is_empty() {
        "us-west-2".to_string()
    } else {
        region
    };
    format!(
        "ip-10-{}-{}-{}.{region}.compute.internal",
        hash % 256,
        (hash >> 8) % 256,
        (hash >> 16) % 254 + 1
    )
}

/// `v1.29` → `v1.29.<patch>`, the patch picked deterministically from the minor version.
pub fn kubelet_version(kubernetes_version: &str) -> String {
    let minor = kubernetes_version.trim_start_matches('v');
    let patch = fnv64(minor) % 10 + 5;
    format!("v{minor}.{patch}")
}

/// osImage and kernelVersion for an image name.
pub fn os_image_and_kernel(image_name: &str, arch: &str) -> (String, String) {
    let machine_arch = if arch == "arm64" { "aarch64" } else { "x86_64" };
    if image_name.starts_with("bottlerocket") {
        let version = image_name
            .split('-')
            .find_map(|part| {
                part.strip_prefix('v')
                    .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
            })
            .unwrap_or("1.21.0");
        (
            format!("Bottlerocket OS {version} (aws-k8s)"),
            "6.1.102".to_string(),
        )
    } else if image_name.contains("al2023") {
        (
            "Amazon Linux 2023.5.20240805".to_string(),
            format!("6.1.102-108.177.amzn2023.{machine_arch}"),
        )
    } else if image_name.starts_with("amazon-eks") {
        (
            "Amazon Linux 2".to_string(),
            format!("5.10.223-212.873.amzn2.{machine_arch}"),
        )
    } else {
        ("Linux".to_string(), "6.1.0".to_string())
    }
}

/// Capacity and allocatable of a node (devices and network resources, GPUs, Neuron, EFA, pod
/// ENIs, among them, in both, as their device plugins report them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeResources {
    /// What the machine has.
    pub capacity: Resources,
    /// What pods may use (capacity minus kube-reserved, system-reserved and eviction threshold).
    pub allocatable: Resources,
}

/// Capacity and allocatable from the instance type's description, as Karpenter computes them
/// (EKS kube-reserved formula, ENI-limited max pods, 20Gi root volume).
pub fn node_resources(description: &InstanceTypeDescription) -> NodeResources {
    let capacity = capacity(description, &CatalogOptions::default());
    let allocatable = overhead(
        description.default_vcpus,
        pods(&capacity),
        &capacity,
        &Default::default(),
    )
    .map(|o| allocatable(&capacity, &o))
    .unwrap_or_else(|_| capacity.clone());
    NodeResources {
        capacity,
        allocatable,
    }
}

/// Capacity from the machine's instance labels when the instance type is unknown.
pub fn node_resources_from_labels(labels: &BTreeMap<String, String>) -> NodeResources {
    let number = |key: &str| labels.get(key).and_then(|v| v.parse::<i64>().ok());
    let capacity = base_resources(
        number(LABEL_INSTANCE_CPU).unwrap_or(2) * 1000,
        number(LABEL_INSTANCE_MEMORY).unwrap_or(4096) * (1 << 20),
        20 * (1 << 30),
        DEFAULT_MAX_PODS,
    );
    NodeResources {
        allocatable: capacity.clone(),
        capacity,
    }
}

/// A node's resource list as the kubelet reports it: cpu in cores or millicores, memory and
/// storage in Ki, everything else in whole units.
fn quantities(resources: &Resources) -> Value {
    let mut out = serde_json::Map::new();
    for (name, milli) in &resources.0 {
        let milli = (*milli).max(0);
        let text = match name.as_str() {
            MEMORY | EPHEMERAL_STORAGE => format!("{}Ki", milli / 1000 / 1024),
            _ if milli % 1000 == 0 => (milli / 1000).to_string(),
            _ => format!("{milli}m"),
        };
        out.insert(name.clone(), Value::String(text));
    }
    Value::Object(out)
}

/// Everything a kubelet knows about its machine beyond the `Machine` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineFacts {
    /// Capacity and allocatable.
    pub resources: NodeResources,
    /// The image's name (empty when unknown).
    pub image_name: String,
}

/// Was the machine launched by a Karpenter-compatible provisioner (it then registers with the
/// `karpenter.sh/unregistered:NoExecute` taint)?
pub fn launched_by_karpenter(machine: &Machine) -> bool {
    machine.tags.contains_key(LABEL_NODEPOOL) || machine.tags.contains_key("karpenter.sh/nodeclaim")
}

/// The Node a kubelet registers for `machine` at `now` (not Ready yet).
pub fn node_for_machine(
    machine: &Machine,
    facts: &MachineFacts,
    default_kubernetes_version: &str,
    now: Timestamp,
) -> Value {
    let name = node_name(machine);
    let mut labels = machine.labels.clone();
    labels.insert(LABEL_HOSTNAME.to_string(), name.clone());
    labels
        .entry(LABEL_OS.to_string())
        .or_insert_with(|| "linux".to_string());
    labels
        .entry(LABEL_ARCH.to_string())
        .or_insert_with(|| "amd64".to_string());
    labels.insert(
        "beta.kubernetes.io/instance-type".to_string(),
        machine.instance_type.clone(),
    );
    let arch = labels.get(LABEL_ARCH).cloned().unwrap_or_default();
    let os = labels.get(LABEL_OS).cloned().unwrap_or_default();
    let mut taints = Vec::new();
    if launched_by_karpenter(machine) {
        taints.push(json!({"key": TAINT_UNREGISTERED_KEY, "effect": "NoExecute"}));
    }
    taints.push(
        json!({"key": TAINT_NODE_NOT_READY, "effect": "NoSchedule", "timeAdded": now.to_string()}),
    );
    let version = machine
        .kubernetes_version
        .as_deref()
        .unwrap_or(default_kubernetes_version);
    let (os_image, kernel) = os_image_and_kernel(&facts.image_name, &arch);
    let runtime_patch = fnv64(&facts.image_name) % 20;
    let now_text = now.to_string();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now_text, "lastTransitionTime": now_text})
    };
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": machine.private_ip,
                "node.alpha.kubernetes.io/ttl": "0",
            },
        },
        "spec": {"providerID": machine.provider_id, "taints": taints},
        "status": {
            "capacity": quantities(&facts.resources.capacity),
            "allocatable": quantities(&facts.resources.allocatable),
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "False", "KubeletNotReady", "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": machine.private_ip},
                {"type": "InternalDNS", "address": name},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": arch,
                "bootID": format!("{:016x}", fnv64(&format!("boot/{}", machine.instance_id))),
                "containerRuntimeVersion": format!("containerd://1.7.{runtime_patch}"),
                "kernelVersion": kernel,
                "kubeProxyVersion": kubelet_version(version),
                "kubeletVersion": kubelet_version(version),
                "machineID": format!("{:032x}", u128::from(fnv64(&machine.instance_id))),
                "operatingSystem": os,
                "osImage": os_image,
                "systemUUID": format!("ec2{:029x}", u128::from(fnv64(&format!("uuid/{}", machine.instance_id)))),
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        Machine {
            instance_id: "i-0123456789abcdef0".to_string(),
            provider_id: "aws:///us-west-2a/i-0123456789abcdef0".to_string(),
            instance_type: "m5.large".to_string(),
            zone: "us-west-2a".to_string(),
            capacity_type: "on-demand".to_string(),
            image_id: "ami-1".to_string(),
            kubernetes_version: Some("1.29".to_string()),
            launch_time: Timestamp::UNIX_EPOCH,
            private_dns_name: String::new(),
            private_ip: "10.0.1.5".to_string(),
            labels: BTreeMap::from([(LABEL_ARCH.to_string(), "arm64".to_string())]),
            tags: BTreeMap::new(),
        }
    }

    #[test]
    fn names_are_ec2_style_and_deterministic() {
        let name = node_name(&machine());
        assert!(name.starts_with("ip-10-"), "{name}");
        assert!(name.ends_with(".us-west-2.compute.internal"), "{name}");
        assert_eq!(name, node_name(&machine()));
        let mut other = machine();
        other.instance_id = "i-0fedcba9876543210".to_string();
        assert_ne!(name, node_name(&other));
    }

    #[test]
    fn kubelet_versions_carry_a_stable_patch() {
        let version = kubelet_version("1.29");
        assert!(version.starts_with("v1.29."), "{version}");
        assert_eq!(version, kubelet_version("v1.29"));
    }

    #[test]
    fn os_images_follow_the_image_family() {
        assert_eq!(
            os_image_and_kernel("amazon-eks-node-1.29-v20240817", "amd64").0,
            "Amazon Linux 2"
        );
        assert!(
            os_image_and_kernel(
                "amazon-eks-node-al2023-x86_64-standard-1.29-v20240817",
                "amd64"
            )
            .0
            .starts_with("Amazon Linux 2023")
        );
        assert_eq!(
            os_image_and_kernel(
                "bottlerocket-aws-k8s-1.29-aarch64-v1.21.0-abcd1234",
                "arm64"
            )
            .0,
            "Bottlerocket OS 1.21.0 (aws-k8s)"
        );
    }

    #[test]
    fn karpenter_machines_register_with_the_unregistered_taint() {
        let facts = MachineFacts {
            resources: node_resources_from_labels(&BTreeMap::new()),
            image_name: String::new(),
        };
        let plain = node_for_machine(&machine(), &facts, "1.29", Timestamp::UNIX_EPOCH);
        let taints = plain["spec"]["taints"].as_array().unwrap();
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0]["key"], TAINT_NODE_NOT_READY);
        let mut managed = machine();
        managed
            .tags
            .insert(LABEL_NODEPOOL.to_string(), "default".to_string());
        let node = node_for_machine(&managed, &facts, "1.29", Timestamp::UNIX_EPOCH);
        assert_eq!(node["spec"]["taints"][0]["key"], TAINT_UNREGISTERED_KEY);
        assert_eq!(node["metadata"]["labels"][LABEL_ARCH], "arm64");
        assert_eq!(node["status"]["nodeInfo"]["architecture"], "arm64");
        assert_eq!(node["status"]["capacity"]["cpu"], "2");
        assert_eq!(node["status"]["capacity"]["pods"], "110");
    }
}
