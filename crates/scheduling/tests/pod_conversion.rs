//! Converting Kubernetes Pods into SimPods: effective requests and constraints.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use driftwood_scheduling::{SimPod, TaintEffect};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}},
        "spec": spec
    }))
    .unwrap()
}

fn res(cpu: &str, mem: &str) -> serde_json::Value {
    json!({"requests": {"cpu": cpu, "memory": mem}})
}

#[test]
fn requests_sum_containers_and_take_the_init_maximum() {
    let p = SimPod::from_pod(&pod(json!({
        "containers": [{"name": "a", "resources": res("500m", "1Gi")}, {"name": "b", "resources": res("250m", "512Mi")}],
        "initContainers": [{"name": "i1", "resources": res("2", "128Mi")}, {"name": "i2", "resources": res("100m", "3Gi")}]
    })))
    .unwrap();
    assert_eq!(p.key, "ns/p");
    assert_eq!(p.requests.get("cpu"), 2_000);
    assert_eq!(p.requests.get("memory"), 3 * 1024 * 1024 * 1024 * 1000);
    assert_eq!(p.requests.get("pods"), 1_000);
}

#[test]
fn sidecars_add_to_containers_and_to_later_init_containers() {
    let p = SimPod::from_pod(&pod(json!({
        "containers": [{"name": "a", "resources": res("1", "1Gi")}],
        "initContainers": [
            {"name": "side", "restartPolicy": "Always", "resources": res("500m", "256Mi")},
            {"name": "init", "resources": res("1200m", "100Mi")}
        ]
    })))
    .unwrap();
    // containers + sidecar = 1.5 cpu; init after sidecar = 1.7 cpu.
    assert_eq!(p.requests.get("cpu"), 1_700);
    assert_eq!(p.requests.get("memory"), (1024 + 256) * 1024 * 1024 * 1000);
}

#[test]
fn limits_stand_in_for_missing_requests_and_overhead_is_added() {
    let p = SimPod::from_pod(&pod(json!({
        "containers": [{"name": "a", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}, "requests": {"memory": "1Gi"}}}],
        "overhead": {"cpu": "250m"}
    })))
    .unwrap();
    assert_eq!(p.requests.get("cpu"), 2_250);
    assert_eq!(p.requests.get("nvidia.com/gpu"), 1_000);
}

#[test]
fn constraints_are_read_once() {
    let p = SimPod::from_pod(&pod(json!({
        "containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}]}],
        "nodeSelector": {"team": "a"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, {"operator": "Exists"}],
        "priority": 7,
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]},
                    {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}
                ]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}},
                    {"weight": 50, "preference": {"matchExpressions": [{"key": "b", "operator": "Exists"}]}}
                ]
            },
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}
            ]}
        },
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["app"]}]
    })))
    .unwrap();
    let c = &p.constraints;
    assert_eq!(p.priority, 7);
    assert_eq!(c.host_ports.len(), 1);
    assert_eq!(c.host_ports[0].port, 8080);
    assert_eq!(c.host_ports[0].protocol, "TCP");
    assert!(c.node_selector.get("team").unwrap().has("a"));
    assert_eq!(c.required_terms.len(), 2);
    assert_eq!(c.preferred_terms[0].0, 50, "heaviest preference first");
    assert_eq!(c.tolerations.len(), 2);
    assert_eq!(c.tolerations[0].effect, Some(TaintEffect::NoSchedule));
    assert!(c.tolerations[1].key.is_none() && c.tolerations[1].exists);
    assert_eq!(c.anti_affinity.len(), 1);
    assert!(!c.spreads[0].hard);
    assert!(
        c.spreads[0]
            .selector
            .as_ref()
            .unwrap()
            .get("app")
            .unwrap()
            .has("web")
    );
}

#[test]
fn daemonset_pods_are_recognised() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "ds-x", "namespace": "kube-system",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "1"}]},
        "spec": {"containers": [{"name": "a"}]}
    }))
    .unwrap();
    assert!(SimPod::from_pod(&p).unwrap().is_daemonset);
}

#[test]
fn bad_input_names_pod_and_field() {
    let err = SimPod::from_pod(&pod(
        json!({"containers": [{"name": "a", "resources": res("lots", "1Gi")}]}),
    ))
    .unwrap_err();
    assert_eq!(err.pod, "ns/p");
    assert!(
        err.field.contains("spec.containers[0].resources.requests"),
        "{}",
        err.field
    );
    assert!(err.to_string().contains("cpu"), "{err}");

    // kube-apiserver's rule: a negative amount would make room out of nothing.
    let err = SimPod::from_pod(&pod(
        json!({"containers": [{"name": "a", "resources": res("-1", "1Gi")}]}),
    ))
    .unwrap_err();
    assert_eq!(err.field, "spec.containers[0].resources.requests[cpu]");
    assert_eq!(err.message, "must be greater than or equal to 0");
    let err = SimPod::from_pod(&pod(
        json!({"containers": [{"name": "a"}], "overhead": {"memory": "-1Mi"}}),
    ))
    .unwrap_err();
    assert_eq!(err.field, "spec.overhead[memory]");

    let err = SimPod::from_pod(&pod(
        json!({"containers": [], "tolerations": [{"key": "a", "operator": "Maybe"}]}),
    ))
    .unwrap_err();
    assert!(err.field.contains("spec.tolerations[0]"), "{err}");

    let err = SimPod::from_pod(&pod(
        json!({"containers": [], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "k", "operator": "Near", "values": ["x"]}]}]}}}}),
    ))
    .unwrap_err();
    assert!(err.to_string().contains("Near"), "{err}");

    let err = SimPod::from_pod(&pod(json!({"containers": [], "topologySpreadConstraints": [
        {"maxSkew": 0, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}]})))
    .unwrap_err();
    assert!(err.to_string().contains("maxSkew"), "{err}");

    let no_spec: Pod = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    assert!(SimPod::from_pod(&no_spec).is_err());
}
