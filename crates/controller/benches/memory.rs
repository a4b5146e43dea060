//! The controller's own memory at fleet scale, without the simulator: a watch cache holding
//! 5,000 Nodes, 5,000 drifted NodeClaims and 100,000 Pods shaped like a Deployment's (as
//! the API server returns them, trimmed as the watch cache trims them), then one
//! disruption decision pass over it (views, the scheduling world, the plan). The process's
//! resident set size (Linux /proc) gives what the cache holds and the peak of the pass.
//!
//! `cargo bench -p driftwood-controller --bench memory` (release profile). Sizes can be changed
//! with DRIFTWOOD_MEMORY_NODES and DRIFTWOOD_MEMORY_PODS_PER_NODE.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use driftwood_api::nodepool::{Budget, NodePool, NodePoolSpec};
use driftwood_controller::simulation::existing_nodes;
use driftwood_controller::state::{Snapshot, Store};
use driftwood_disruption::plan::{PlannerInput, plan_drift};
use driftwood_disruption::views::{node_view, pdb_allowed};
use driftwood_scheduling::SimulationInput;
use driftwood_scheduling::testkit;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// A field of /proc/self/status in bytes (`VmRSS`, `VmHWM`), Linux only.
fn status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status (Linux)");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<usize>().ok())
        .map(|kib| kib * 1024)
        .unwrap_or(0)
}

fn rss() -> usize {
    status_bytes("VmRSS")
}

/// Resets the peak RSS (VmHWM) to the current RSS.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak() -> usize {
    status_bytes("VmHWM")
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const ZONES: [&str; 3] = ["us-west-2a", "us-west-2b", "us-west-2c"];

fn node(i: usize) -> serde_json::Value {
    let name = format!("ip-10-0-{}-{}.us-west-2.compute.internal", i / 250, i % 250);
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": format!("node-uid-{i:06}"), "resourceVersion": "12345",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {
                "kubernetes.io/hostname": name, "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m5.4xlarge", "topology.kubernetes.io/zone": ZONES[i % 3],
                "topology.kubernetes.io/region": "us-west-2", "karpenter.sh/nodepool": "default",
                "karpenter.sh/capacity-type": "on-demand", "karpenter.sh/registered": "true",
                "karpenter.sh/initialized": "true", "karpenter.k8s.aws/ec2nodeclass": "default",
                "karpenter.k8s.aws/instance-family": "m5", "karpenter.k8s.aws/instance-size": "4xlarge",
                "karpenter.k8s.aws/instance-cpu": "16", "karpenter.k8s.aws/instance-memory": "65536",
                "karpenter.k8s.aws/instance-category": "m", "karpenter.k8s.aws/instance-generation": "5"
            },
            "annotations": {"alpha.kubernetes.io/provided-node-ip": "10.0.0.1", "karpenter.sh/nodepool-hash": "123456789"},
            "finalizers": ["karpenter.sh/termination"],
            "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": format!("default-{i:05}"), "uid": format!("nc-uid-{i:06}")}]
        },
        "spec": {"providerID": format!("aws:///{}/i-{i:017x}", ZONES[i % 3])},
        "status": {
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "234", "ephemeral-storage": "20Gi"},
            "allocatable": {"cpu": "15890m", "memory": "62Gi", "pods": "234", "ephemeral-storage": "18Gi"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available", "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure", "message": "kubelet has no disk pressure", "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID", "message": "kubelet has sufficient PID available", "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"machineID": "ec2", "systemUUID": "ec2", "bootID": "b", "kernelVersion": "6.1.0", "osImage": "Amazon Linux 2023",
                         "containerRuntimeVersion": "containerd://1.7.0", "kubeletVersion": "v1.33.0", "kubeProxyVersion": "v1.33.0",
                         "operatingSystem": "linux", "architecture": "amd64"}
        }
    })
}

fn claim_conditions() -> serde_json::Value {
    let mut conditions: Vec<serde_json::Value> = ["Launched", "Registered", "Initialized", "Ready"]
        .iter()
        .map(|t| json!({"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}))
        .collect();
    conditions.push(
        json!({"type": "Drifted", "status": "True", "reason": "AMIDrift",
        "message": "AMI ami-0123 → ami-0456", "lastTransitionTime": "2026-01-02T00:00:00Z"}),
    );
    serde_json::Value::Array(conditions)
}

fn pod_conditions() -> serde_json::Value {
    [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|t| json!({"type": t, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}))
    .collect()
}

fn nodeclaim(i: usize, node: &str) -> serde_json::Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {
            "name": format!("default-{i:05}"), "uid": format!("nc-uid-{i:06}"), "resourceVersion": "12345",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.4xlarge",
                       "topology.kubernetes.io/zone": ZONES[i % 3], "karpenter.sh/capacity-type": "on-demand",
                       "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"},
            "annotations": {"karpenter.sh/nodepool-hash": "123456789", "karpenter.sh/nodepool-hash-version": "v3",
                            "karpenter.k8s.aws/ec2nodeclass-hash": "987654321", "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4"},
            "finalizers": ["karpenter.sh/termination"],
            "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "default", "uid": "pool-uid"}]
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.4xlarge", "m5a.4xlarge", "m6i.4xlarge", "m6a.4xlarge", "m7i.4xlarge"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
            ],
            "resources": {"requests": {"cpu": "10", "memory": "20Gi", "pods": "25"}},
            "expireAfter": "720h"
        },
        "status": {
            "providerID": format!("aws:///{}/i-{i:017x}", ZONES[i % 3]), "nodeName": node,
            "imageID": "ami-0123456789abcdef0",
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "234", "ephemeral-storage": "20Gi"},
            "allocatable": {"cpu": "15890m", "memory": "62Gi", "pods": "234", "ephemeral-storage": "18Gi"},
            "conditions": claim_conditions()
        }
    })
}

fn pod(i: usize, p: usize, node: &str) -> serde_json::Value {
    let app = format!("app-{}", (i * 7 + p) % 200);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("{app}-6d4b75cb6d-{i:05}{p:02}"), "namespace": "default",
            "uid": format!("pod-uid-{i:06}-{p:02}"), "resourceVersion": "12345", "generateName": format!("{app}-6d4b75cb6d-"),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": app, "pod-template-hash": "6d4b75cb6d"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-6d4b75cb6d"),
                                 "uid": format!("rs-uid-{app}"), "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "nodeName": node, "serviceAccountName": "default", "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30, "priority": 0, "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
            "containers": [{
                "name": "app", "image": "public.ecr.aws/nginx/nginx:1.27", "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "volumeMounts": [{"name": "kube-api-access-abcde", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}]
            }],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
                                           "labelSelector": {"matchLabels": {"app": app}}}],
            "volumes": [{"name": "kube-api-access-abcde", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
            ]}}]
        },
        "status": {
            "phase": "Running", "qosClass": "Burstable", "hostIP": "10.0.0.1", "podIP": format!("10.1.{}.{}", i % 250, p),
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": pod_conditions(),
            "containerStatuses": [{"name": "app", "ready": true, "started": true, "restartCount": 0,
                                   "image": "public.ecr.aws/nginx/nginx:1.27", "imageID": "public.ecr.aws/nginx/nginx@sha256:0123456789abcdef",
                                   "containerID": "containerd://0123456789abcdef", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]
        }
    })
}

/// The object as the watch cache keeps it (trimmed, then typed).
fn cached<K: serde::de::DeserializeOwned>(mut object: serde_json::Value, is_pod: bool) -> K {
    driftwood_controller::state::trim::trim(&mut object, is_pod);
    serde_json::from_value(object).expect("a valid object")
}

fn main() {
    // `cargo bench` passes --bench; nothing else is taken.
    let nodes = env("DRIFTWOOD_MEMORY_NODES", 5_000);
    let per_node = env("DRIFTWOOD_MEMORY_PODS_PER_NODE", 20);
    let start = rss();
    let built = Instant::now();
    let mut snapshot = Snapshot::new(Store::default());
    let mut pool = NodePool::new("default", NodePoolSpec::default());
    pool.spec.disruption.budgets = vec![Budget {
        nodes: "10%".into(),
        ..Default::default()
    }];
    snapshot.apply("default".into(), Arc::new(pool.clone()));
    for i in 0..nodes {
        let node: k8s_openapi::api::core::v1::Node = cached(node(i), false);
        let name = node.metadata.name.clone().unwrap_or_default();
        let claim: driftwood_api::NodeClaim = cached(nodeclaim(i, &name), false);
        snapshot.apply(format!("default-{i:05}"), Arc::new(claim));
        for p in 0..per_node {
            let pod: k8s_openapi::api::core::v1::Pod = cached(pod(i, p, &name), true);
            let key = format!("default/{}", pod.metadata.name.clone().unwrap_or_default());
            snapshot.apply(key, Arc::new(pod));
        }
        snapshot.apply(name, Arc::new(node));
    }
    let cache = rss().saturating_sub(start);
    let build_time = built.elapsed();

    // One disruption decision pass, as the disruption controller makes it.
    reset_peak();
    let before_pass = rss();
    let passed = Instant::now();
    let view_of = snapshot.clone();
    let pdbs = Vec::new();
    let views: Vec<_> = view_of
        .store
        .nodeclaims
        .values()
        .map(|claim| {
            let node = view_of.node_of(claim);
            let pods = node
                .map(|n| view_of.pods_on(n.metadata.name.as_deref().unwrap_or_default()))
                .unwrap_or_default();
            let pods: Vec<&driftwood_disruption::cached_pod::CachedPod> =
                pods.iter().map(|p| p.as_ref()).collect();
            node_view(claim, node.map(|n| n.as_ref()), &pods, &pdbs, 1_767_225_600)
        })
        .collect();
    let viewed = passed.elapsed();
    let mut spec = testkit::nodepool("default", testkit::fake_instance_types(400));
    spec.labels = testkit::labels(&[("karpenter.sh/nodepool", "default")]);
    let world = SimulationInput {
        existing_nodes: existing_nodes(&view_of, false),
        nodepools: vec![spec],
        ..Default::default()
    };
    let worlded = passed.elapsed();
    let plan = plan_drift(PlannerInput {
        now: 1_767_225_600,
        nodes: &views,
        pdb_allowed: &pdb_allowed(&pdbs),
        policy_caps: &Default::default(),
        nodepools: &[pool],
        world,
    });
    let pass_time = passed.elapsed();
    let pass_peak = peak().saturating_sub(before_pass);
    drop(views);
    drop(view_of);

    // Two /metrics scrapes over the same state (the per-node and per-pod families are written
    // from the snapshot at scrape time): the first, and the next as a running controller's
    // scrapes are (given room for the last one's length at once).
    let metrics = driftwood_controller::metrics::Metrics::new();
    let now = jiff::Timestamp::from_second(1_767_225_600).expect("a valid time");
    let mut scrapes = Vec::new();
    for _ in 0..2 {
        reset_peak();
        let before_scrape = rss();
        let scraped = Instant::now();
        metrics.observe_state(&snapshot, true, now);
        let text = metrics.render_as(driftwood_controller::exposition::Exposition::Prometheus);
        let scrape_time = scraped.elapsed();
        let scrape_peak = peak().saturating_sub(before_scrape);
        let series = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .count();
        scrapes.push((series, text.len(), scrape_time, scrape_peak));
        drop(text);
    }

    let total_peak = cache + pass_peak;
    println!(
        "memory/cache: {nodes} nodes, {nodeclaims} nodeclaims, {pods} pods: {cache:.1} MiB ({per_pod:.0} bytes per pod incl. its share of nodes and nodeclaims), built in {build_time:.2?}",
        nodeclaims = nodes,
        pods = nodes * per_node,
        cache = mib(cache),
        per_pod = cache as f64 / (nodes * per_node).max(1) as f64,
    );
    println!(
        "memory/disruption_pass: {} commands, {} blocked; peak {:.1} MiB above the cache, in {pass_time:.2?} (node views {viewed:.2?}, scheduling world {world:.2?}, plan {plan_time:.2?})",
        plan.commands.len(),
        plan.blocked.len(),
        mib(pass_peak),
        world = worlded.saturating_sub(viewed),
        plan_time = pass_time.saturating_sub(worlded),
    );
    for (which, (series, text_len, scrape_time, scrape_peak)) in
        ["first", "next"].iter().zip(&scrapes)
    {
        println!(
            "memory/scrape ({which}): {series} series, {text_mib:.1} MiB of Prometheus text, in {scrape_time:.2?}; peak {:.1} MiB above the cache",
            mib(*scrape_peak),
            text_mib = mib(*text_len),
        );
    }
    println!(
        "memory/total: cache + pass peak = {:.1} MiB; process peak RSS {:.1} MiB (target: under 300 MB at 5,000 nodes / 100,000 pods)",
        mib(total_peak),
        mib(peak()),
    );
}
