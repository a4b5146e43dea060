//! Integration tests of the embedded API server through the real kube-rs client and kubectl.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![recursion_limit = "256"]

mod crud;
mod custom;
mod eviction;
mod fuzz;
mod kubectl;
mod kubectl_versions;
mod patches;
mod protobuf;
mod raw_http;
mod robustness;
mod stress;
mod tables;
mod validation;
mod watches;
mod workloads;

use driftwood_sim::{ApiServer, ApiServerConfig};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// A fresh server on the wall clock.
pub fn server() -> ApiServer {
    ApiServer::new(ApiServerConfig::default())
}

/// A pod manifest with labels.
pub fn pod(name: &str, labels: Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
    }))
    .unwrap()
}

/// A node manifest.
pub fn node(name: &str) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.29.15", "osImage": "Bottlerocket OS 1.20.0", "kernelVersion": "6.1.0", "containerRuntimeVersion": "containerd://1.7.0", "architecture": "amd64", "operatingSystem": "linux", "bootID": "", "kubeProxyVersion": "", "machineID": "", "systemUUID": ""},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}]
        }
    }))
    .unwrap()
}

/// Create a pod and mark it Running and Ready (as a kubelet would).
pub async fn ready_pod(pods: &Api<Pod>, name: &str, labels: Value) -> Pod {
    pods.create(&PostParams::default(), &pod(name, labels))
        .await
        .unwrap();
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap()
}

/// The HTTP status code of a kube error (panics on other errors).
pub fn code_of(error: kube::Error) -> u16 {
    match error {
        kube::Error::Api(status) => status.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}
mod cluster;

/// Binds a pod in `default` to `node` through the `binding` subresource (a pod's nodeName cannot
/// be changed by an update).
pub async fn bind(client: &kube::Client, pod: &str, node: &str) {
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                         "target": {"kind": "Node", "name": node}});
    let request = http::Request::post(format!("/api/v1/namespaces/default/pods/{pod}/binding"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&binding).unwrap())
        .unwrap();
    client.request_text(request).await.unwrap();
}
