//! The whole embedded cluster on virtual time: machines launched through the simulated EC2
//! join as Nodes, the scheduler binds pods, kubelets run them, DaemonSets cover every node.

use std::collections::BTreeSet;
use std::time::Duration;

use driftwood_aws::ports::{
    CreateFleetInput, CreateLaunchTemplateInput, Ec2Api, FleetLaunchTemplateConfig, FleetOverride,
    LaunchTemplateData, Tag, TagSpecification,
};
use driftwood_sim::{SimCluster, SimClusterOptions};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{EvictParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// Poll `probe` every half second of virtual time until it yields, at most ten virtual minutes.
async fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    for _ in 0..1200 {
        if let Some(value) = probe() {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Launch one on-demand instance in `zone` through CreateFleet; returns its instance id.
async fn launch(
    cluster: &SimCluster,
    instance_type: &str,
    zone: &str,
    tags: &[(&str, &str)],
) -> String {
    let aws = cluster.aws();
    let image = aws.eks_ami("al2", "latest", "1.29", "amd64").unwrap();
    let subnet = aws
        .subnets()
        .into_iter()
        .find(|s| s.availability_zone == zone)
        .unwrap();
    let groups: Vec<String> = aws
        .security_groups()
        .into_iter()
        .map(|g| g.group_id)
        .collect();
    let template = format!("lt-{instance_type}-{zone}-{}", tags.len());
    let _ = aws
        .create_launch_template(CreateLaunchTemplateInput {
            launch_template_name: template.clone(),
            launch_template_data: LaunchTemplateData {
                image_id: image,
                security_group_ids: groups,
                ..Default::default()
            },
            tag_specifications: vec![],
        })
        .await;
    let tags = tags
        .iter()
        .map(|(k, v)| Tag {
            key: (*k).to_string(),
            value: (*v).to_string(),
        })
        .collect();
    let output = aws
        .create_fleet(CreateFleetInput {
            type_: "instant".to_string(),
            launch_template_configs: vec![FleetLaunchTemplateConfig {
                launch_template_name: template,
                version: "$Latest".to_string(),
                overrides: vec![FleetOverride {
                    instance_type: instance_type.to_string(),
                    subnet_id: subnet.subnet_id,
                    availability_zone: zone.to_string(),
                    ..Default::default()
                }],
            }],
            total_target_capacity: 1,
            default_target_capacity_type: "on-demand".to_string(),
            tag_specifications: vec![TagSpecification {
                resource_type: "instance".to_string(),
                tags,
            }],
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(output.errors.is_empty(), "{:?}", output.errors);
    output.instances[0].instance_ids[0].clone()
}

fn node_of(cluster: &SimCluster, instance_id: &str) -> Option<Node> {
    cluster
        .api_server()
        .list::<Node>(None)
        .into_iter()
        .find(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .is_some_and(|p| p.ends_with(instance_id))
        })
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn taint_keys(node: &Node) -> BTreeSet<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .collect()
}

fn pod_running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && driftwood_sim::workloads::pod_is_ready(pod)
}

fn pods_with(cluster: &SimCluster, app: &str) -> Vec<Pod> {
    cluster
        .api_server()
        .list::<Pod>(Some("default"))
        .into_iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .is_some_and(|a| a == app)
        })
        .collect()
}

async fn ready_node(cluster: &SimCluster, instance_type: &str, zone: &str) -> Node {
    let id = launch(cluster, instance_type, zone, &[]).await;
    eventually("the node to be Ready", || {
        node_of(cluster, &id).filter(is_ready)
    })
    .await
}

fn deployment(name: &str, replicas: i32, cpu: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "pause", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                                                       "resources": {"requests": {"cpu": cpu}}}]}}}
    }))
    .unwrap()
}

fn unschedulable_message(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find_map(|c| {
            (c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable"))
            .then(|| c.message.clone().unwrap_or_default())
        })
}

#[tokio::test(start_paused = true)]
async fn a_launched_machine_joins_becomes_ready_and_runs_a_deployment() {
    let cluster = SimCluster::start(SimClusterOptions::default())
        .await
        .unwrap();
    let start = cluster.clock().now();
    let id = launch(&cluster, "m5.large", "us-west-2a", &[]).await;
    let node = eventually("the node to join", || node_of(&cluster, &id)).await;
    let info = node
        .status
        .as_ref()
        .and_then(|s| s.node_info.clone())
        .unwrap();
    assert!(
        info.kubelet_version.starts_with("v1.29."),
        "{}",
        info.kubelet_version
    );
    assert_eq!(info.os_image, "Amazon Linux 2");
    assert!(
        info.container_runtime_version
            .starts_with("containerd://1.7.")
    );
    let name = node.metadata.name.clone().unwrap();
    assert!(
        name.starts_with("ip-10-") && name.ends_with(".us-west-2.compute.internal"),
        "{name}"
    );
    let labels = node.metadata.labels.clone().unwrap();
    assert_eq!(labels["node.kubernetes.io/instance-type"], "m5.large");
    assert_eq!(labels["topology.kubernetes.io/zone"], "us-west-2a");
    assert_eq!(labels["kubernetes.io/hostname"], name);
    assert_eq!(labels["karpenter.sh/capacity-type"], "on-demand");
    assert!(!is_ready(&node), "a node starts NotReady");
    assert!(taint_keys(&node).contains("node.kubernetes.io/not-ready"));
    assert!(
        !taint_keys(&node).contains("karpenter.sh/unregistered"),
        "not launched by a provisioner"
    );
    // The machine needed its 30 s launch delay on the same clock the API server stamps with.
    let joined: jiff::Timestamp = node
        .metadata
        .creation_timestamp
        .clone()
        .unwrap()
        .0
        .to_string()
        .parse()
        .unwrap();
    assert!(joined.duration_since(start) >= jiff::SignedDuration::from_secs(30));

    let node = eventually("the node to be Ready", || {
        node_of(&cluster, &id).filter(is_ready)
    })
    .await;
    assert!(taint_keys(&node).is_empty(), "{:?}", taint_keys(&node));
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.clone())
        .unwrap();
    assert_eq!(allocatable["pods"].0, "29");

    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), "default");
    deployments
        .create(&PostParams::default(), &deployment("web", 3, "512m"))
        .await
        .unwrap();
    let pods = eventually("three running pods", || {
        let pods = pods_with(&cluster, "web");
        (pods.len() == 3 && pods.iter().all(pod_running)).then_some(pods)
    })
    .await;
    for pod in &pods {
        assert_eq!(
            pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            Some(name.as_str())
        );
        let status = pod.status.clone().unwrap();
        assert!(status.pod_ip.is_some());
        let containers = status.container_statuses.unwrap();
        assert!(containers[0].ready && containers[0].started == Some(true));
        assert!(containers[0].image.contains("pause"));
    }
    let ips: BTreeSet<_> = pods
        .iter()
        .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
        .collect();
    assert_eq!(ips.len(), 3, "pod IPs are distinct");
}

#[tokio::test(start_paused = true)]
async fn pods_that_fit_nowhere_are_marked_unschedulable_and_retried_when_nodes_change() {
    let cluster = SimCluster::start(SimClusterOptions::default())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let pod = |name: &str, cpu: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}}))
        .unwrap()
    };
    pods.create(&PostParams::default(), &pod("early", "100m"))
        .await
        .unwrap();
    let message = eventually("early to be unschedulable", || {
        cluster
            .api_server()
            .get::<Pod>("default", "early")
            .as_ref()
            .and_then(unschedulable_message)
    })
    .await;
    assert_eq!(message, "no nodes available to schedule pods");

    let node = ready_node(&cluster, "m5.large", "us-west-2a").await;
    let name = node.metadata.name.clone().unwrap();
    eventually("early to run once a node is there", || {
        cluster
            .api_server()
            .get::<Pod>("default", "early")
            .filter(pod_running)
    })
    .await;

    pods.create(&PostParams::default(), &pod("huge", "64"))
        .await
        .unwrap();
    let message = eventually("huge to be unschedulable", || {
        cluster
            .api_server()
            .get::<Pod>("default", "huge")
            .as_ref()
            .and_then(unschedulable_message)
    })
    .await;
    assert_eq!(message, "0/1 nodes are available: 1 Insufficient cpu.");
    // kube-scheduler's FailedScheduling event, in the core view `kubectl describe pod` reads.
    let event = eventually("a FailedScheduling event for huge", || {
        cluster
            .api_server()
            .list::<k8s_openapi::api::core::v1::Event>(Some("default"))
            .into_iter()
            .find(|e| e.involved_object.name.as_deref() == Some("huge"))
    })
    .await;
    assert_eq!(event.reason.as_deref(), Some("FailedScheduling"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.message.as_deref(), Some(message.as_str()));
    assert_eq!(
        event.reporting_component.as_deref(),
        Some("default-scheduler")
    );

    let nodes: Api<Node> = Api::all(cluster.client());
    let taint =
        json!({"spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}});
    nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(&taint))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("late", "100m"))
        .await
        .unwrap();
    let message = eventually("late to be unschedulable", || {
        cluster
            .api_server()
            .get::<Pod>("default", "late")
            .as_ref()
            .and_then(unschedulable_message)
    })
    .await;
    assert_eq!(
        message,
        "0/1 nodes are available: 1 node(s) had untolerated taint {karpenter.sh/disrupted: }."
    );

    nodes
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"taints": null}})),
        )
        .await
        .unwrap();
    let late = eventually("late to run once the taint is gone", || {
        cluster
            .api_server()
            .get::<Pod>("default", "late")
            .filter(pod_running)
    })
    .await;
    assert_eq!(late.spec.unwrap().node_name.as_deref(), Some(name.as_str()));
    let huge = cluster.api_server().get::<Pod>("default", "huge").unwrap();
    assert!(
        huge.spec.unwrap().node_name.is_none(),
        "the huge pod still fits nowhere"
    );
}

#[tokio::test(start_paused = true)]
async fn evicted_pods_are_replaced_and_a_terminated_machine_takes_its_pods_away() {
    let cluster = SimCluster::start(SimClusterOptions::default())
        .await
        .unwrap();
    let id = launch(&cluster, "m5.large", "us-west-2b", &[]).await;
    let node = eventually("the node to be Ready", || {
        node_of(&cluster, &id).filter(is_ready)
    })
    .await;
    let node_name = node.metadata.name.clone().unwrap();
    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), "default");
    deployments
        .create(&PostParams::default(), &deployment("api", 2, "250m"))
        .await
        .unwrap();
    let before = eventually("two running pods", || {
        let pods = pods_with(&cluster, "api");
        (pods.len() == 2 && pods.iter().all(pod_running)).then_some(pods)
    })
    .await;
    let victim = before[0].metadata.name.clone().unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    pods.evict(&victim, &EvictParams::default()).await.unwrap();
    let after = eventually(
        "a replacement to run and the evicted pod to be gone",
        || {
            let pods = pods_with(&cluster, "api");
            let names: BTreeSet<String> = pods
                .iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            (pods.len() == 2 && !names.contains(&victim) && pods.iter().all(pod_running))
                .then_some(names)
        },
    )
    .await;
    assert!(after.contains(before[1].metadata.name.as_ref().unwrap()));

    let nodes: Api<Node> = Api::all(cluster.client());
    let hold = json!({"metadata": {"finalizers": ["example.com/hold"]}});
    nodes
        .patch(&node_name, &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();
    cluster
        .aws()
        .terminate_instances(vec![id.clone()])
        .await
        .unwrap();
    let held = eventually("the node to be NotReady and held by its finalizer", || {
        node_of(&cluster, &id).filter(|n| n.metadata.deletion_timestamp.is_some() && !is_ready(n))
    })
    .await;
    assert!(taint_keys(&held).contains("node.kubernetes.io/unreachable"));
    let ready = held
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready").cloned());
    assert_eq!(ready.map(|c| c.status).as_deref(), Some("Unknown"));
    nodes
        .patch(
            &node_name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually("the node to go away", || {
        node_of(&cluster, &id).is_none().then_some(())
    })
    .await;
    let replacements = eventually(
        "pods of the gone node deleted and replacements pending",
        || {
            let pods = pods_with(&cluster, "api");
            let none_on_node = pods.iter().all(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(node_name.as_str())
            });
            (pods.len() == 2
                && none_on_node
                && pods.iter().all(|p| unschedulable_message(p).is_some()))
            .then_some(pods)
        },
    )
    .await;
    assert!(
        replacements
            .iter()
            .all(|p| !after.contains(p.metadata.name.as_ref().unwrap()))
    );
}

#[tokio::test(start_paused = true)]
async fn daemon_sets_run_one_pod_on_every_node_they_select() {
    let cluster = SimCluster::start(SimClusterOptions::default())
        .await
        .unwrap();
    let a = ready_node(&cluster, "m5.large", "us-west-2a").await;
    let b = ready_node(&cluster, "c5.xlarge", "us-west-2b").await;
    let daemon_sets: Api<DaemonSet> = Api::namespaced(cluster.client(), "default");
    let ds = |name: &str, selector: serde_json::Value| -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"nodeSelector": selector, "containers": [{"name": "agent", "image": "agent:1",
                                           "resources": {"requests": {"cpu": "50m"}}}]}}}
        }))
        .unwrap()
    };
    daemon_sets
        .create(&PostParams::default(), &ds("logs", json!({})))
        .await
        .unwrap();
    daemon_sets
        .create(
            &PostParams::default(),
            &ds(
                "zonal",
                json!({"topology.kubernetes.io/zone": "us-west-2b"}),
            ),
        )
        .await
        .unwrap();
    let logs = eventually("a running logs pod per node", || {
        let pods = pods_with(&cluster, "logs");
        (pods.len() == 2 && pods.iter().all(pod_running)).then_some(pods)
    })
    .await;
    let nodes: BTreeSet<String> = logs
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    assert_eq!(
        nodes,
        BTreeSet::from([
            a.metadata.name.clone().unwrap(),
            b.metadata.name.clone().unwrap()
        ])
    );
    assert!(
        logs.iter()
            .all(|p| p.metadata.owner_references.as_ref().unwrap()[0].kind == "DaemonSet")
    );
    let zonal = eventually("one zonal pod", || {
        let pods = pods_with(&cluster, "zonal");
        (pods.len() == 1 && pods.iter().all(pod_running)).then_some(pods)
    })
    .await;
    assert_eq!(zonal[0].spec.as_ref().unwrap().node_name, b.metadata.name);
    let status = eventually("the logs status to count both pods ready", || {
        cluster
            .api_server()
            .get::<DaemonSet>("default", "logs")
            .and_then(|d| d.status)
            .filter(|s| s.number_ready == 2)
    })
    .await;
    assert_eq!(status.desired_number_scheduled, 2);
    assert_eq!(status.current_number_scheduled, 2);

    // A third node gets its own daemon pod.
    let c = ready_node(&cluster, "m5.large", "us-west-2c").await;
    eventually("a logs pod on the new node", || {
        pods_with(&cluster, "logs")
            .into_iter()
            .find(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()) == c.metadata.name)
            .filter(pod_running)
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn provisioner_launched_machines_register_with_the_unregistered_taint() {
    let cluster = SimCluster::start(SimClusterOptions::default())
        .await
        .unwrap();
    let id = launch(
        &cluster,
        "m5.large",
        "us-west-2a",
        &[("karpenter.sh/nodepool", "default")],
    )
    .await;
    let node = eventually("the node to be Ready", || {
        node_of(&cluster, &id).filter(is_ready)
    })
    .await;
    assert_eq!(
        taint_keys(&node),
        BTreeSet::from(["karpenter.sh/unregistered".to_string()])
    );
    assert_eq!(
        node.metadata.labels.as_ref().unwrap()["karpenter.sh/nodepool"],
        "default"
    );
    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), "default");
    deployments
        .create(&PostParams::default(), &deployment("held", 1, "100m"))
        .await
        .unwrap();
    let message = eventually("the pod to wait for registration", || {
        pods_with(&cluster, "held")
            .first()
            .and_then(unschedulable_message)
    })
    .await;
    assert_eq!(
        message,
        "0/1 nodes are available: 1 node(s) had untolerated taint {karpenter.sh/unregistered: }."
    );
}

fn node_lease(
    cluster: &SimCluster,
    node: &str,
) -> Option<k8s_openapi::api::coordination::v1::Lease> {
    cluster
        .api_server()
        .list::<k8s_openapi::api::coordination::v1::Lease>(Some("kube-node-lease"))
        .into_iter()
        .find(|l| l.metadata.name.as_deref() == Some(node))
}

fn renewed_at(lease: &k8s_openapi::api::coordination::v1::Lease) -> jiff::Timestamp {
    let text = serde_json::to_value(lease).unwrap()["spec"]["renewTime"]
        .as_str()
        .unwrap()
        .to_string();
    text.parse().unwrap()
}

#[tokio::test(start_paused = true)]
async fn every_kubelet_keeps_a_node_lease_that_goes_with_its_node() {
    let cluster = SimCluster::start(SimClusterOptions::default())
        .await
        .unwrap();
    let id = launch(&cluster, "m5.large", "us-west-2a", &[]).await;
    let node = eventually("the node to be Ready", || {
        node_of(&cluster, &id).filter(is_ready)
    })
    .await;
    let name = node.metadata.name.clone().unwrap();
    let lease = eventually("the node's lease", || node_lease(&cluster, &name)).await;
    let spec = lease.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(name.as_str()));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    let owner = &lease.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Node", name.as_str())
    );
    assert_eq!(Some(&owner.uid), node.metadata.uid.as_ref());

    // Renewed every 10 s: a minute on, the lease is never more than 10 s old.
    let first = renewed_at(&lease);
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let now = cluster.clock().now();
        let renewed = renewed_at(&node_lease(&cluster, &name).unwrap());
        assert!(renewed > first);
        assert!(now.duration_since(renewed) <= jiff::SignedDuration::from_secs(10));
    }

    // A kubelet that stops posting status stops renewing: the lease runs out.
    cluster
        .aws()
        .set_node_fault(&id, Some(driftwood_sim::kubelet::NodeFault::NotReady));
    tokio::time::sleep(Duration::from_secs(15)).await;
    let stalled = renewed_at(&node_lease(&cluster, &name).unwrap());
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(renewed_at(&node_lease(&cluster, &name).unwrap()), stalled);
    assert!(cluster.clock().now().duration_since(stalled) > jiff::SignedDuration::from_secs(40));

    // It posts again: renewed again.
    cluster.aws().set_node_fault(&id, None);
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert!(renewed_at(&node_lease(&cluster, &name).unwrap()) > stalled);

    // The machine goes, the Node goes, and the garbage collector takes the lease with it.
    cluster
        .aws()
        .terminate_instances(vec![id.clone()])
        .await
        .unwrap();
    eventually("the node and its lease to be gone", || {
        (node_of(&cluster, &id).is_none() && node_lease(&cluster, &name).is_none()).then_some(())
    })
    .await;
}
