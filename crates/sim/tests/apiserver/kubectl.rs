//! kubectl (a real client) against the HTTP server: apply, get (tables, -o wide, -o yaml),
//! patch, label, taint, drain (eviction), delete and api-resources.

use std::path::PathBuf;
use std::process::Command;

use driftwood_sim::{ApiServer, ApiServerConfig, PodTermination};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::{node, ready_pod};

const MANIFEST: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.25
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 2
  selector:
    matchLabels: {app: web}
"#;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, default: 3}
"#;

const WIDGET: &str = r#"
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  size: 9
"#;

struct Kubectl {
    kubeconfig: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let kubeconfig = self.kubeconfig.clone();
        let args: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
        tokio::task::spawn_blocking(move || {
            let output = Command::new("/usr/bin/kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(&args)
                .output()
                .expect("kubectl runs");
            (
                output.status.success(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        })
        .await
        .unwrap()
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (success, stdout, stderr) = self.run(args).await;
        assert!(success, "kubectl {args:?} failed:\n{stdout}\n{stderr}");
        println!("$ kubectl {}\n{stdout}", args.join(" "));
        stdout
    }

    fn file(&self, name: &str, contents: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, contents).unwrap();
        path.to_string_lossy().into_owned()
    }
}

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

fn row<'a>(output: &'a str, first: &str) -> Vec<&'a str> {
    output
        .lines()
        .map(words)
        .find(|w| w.first() == Some(&first))
        .unwrap_or_else(|| panic!("no row {first} in\n{output}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_the_embedded_api_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = ApiServerConfig {
        pod_termination: PodTermination::Immediate,
        ..ApiServerConfig::default()
    };
    let api = ApiServer::new(config);
    let kubeconfig = dir.path().join("kubeconfig");
    let _http = api.serve_with_kubeconfig(&kubeconfig).await.unwrap();
    let kubectl = Kubectl {
        kubeconfig,
        dir: dir.path().to_path_buf(),
    };
    let client = api.client();

    let manifest = kubectl.file("web.yaml", MANIFEST);
    let out = kubectl.ok(&["apply", "-f", &manifest]).await;
    assert!(
        out.contains("deployment.apps/web created")
            && out.contains("poddisruptionbudget.policy/web created"),
        "{out}"
    );
    let out = kubectl.ok(&["apply", "-f", &manifest]).await;
    assert!(out.contains("deployment.apps/web unchanged"), "{out}");
    let crd = kubectl.file("crd.yaml", CRD);
    assert!(
        kubectl
            .ok(&["apply", "-f", &crd])
            .await
            .contains("customresourcedefinition.apiextensions.k8s.io/widgets.example.com created")
    );
    let widget = kubectl.file("widget.yaml", WIDGET);
    assert!(
        kubectl
            .ok(&["apply", "-f", &widget])
            .await
            .contains("widget.example.com/w1 created")
    );

    let resized = kubectl.file(
        "widget-resized.yaml",
        &WIDGET.replace("size: 9", "size: 11"),
    );
    let out = kubectl
        .ok(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &resized,
        ])
        .await;
    assert!(
        out.contains("widget.example.com/w1 serverside-applied"),
        "{out}"
    );
    let out = kubectl
        .ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.size}"])
        .await;
    assert_eq!(out.trim(), "11");
    kubectl
        .ok(&["apply", "--server-side", "--force-conflicts", "-f", &widget])
        .await;

    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(&PostParams::default(), &node("ip-10-0-0-7"))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["web-a", "web-b", "web-c"] {
        ready_pod(&pods, name, json!({"app": "web"})).await;
        crate::bind(&client, name, "ip-10-0-0-7").await;
    }

    let out = kubectl.ok(&["get", "nodes", "-o", "wide"]).await;
    assert_eq!(
        words(out.lines().next().unwrap()),
        [
            "NAME",
            "STATUS",
            "ROLES",
            "AGE",
            "VERSION",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "OS-IMAGE",
            "KERNEL-VERSION",
            "CONTAINER-RUNTIME"
        ]
    );
    let node_row = row(&out, "ip-10-0-0-7");
    assert_eq!(
        (node_row[1], node_row[2], node_row[4], node_row[5]),
        ("Ready", "<none>", "v1.29.15", "10.0.0.7")
    );

    let out = kubectl.ok(&["get", "pods", "-o", "wide"]).await;
    assert_eq!(
        words(out.lines().next().unwrap()),
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES"
        ]
    );
    let pod_row = row(&out, "web-a");
    assert_eq!(
        (pod_row[1], pod_row[2], pod_row[3], pod_row[6]),
        ("0/1", "Running", "0", "ip-10-0-0-7")
    );

    let out = kubectl.ok(&["get", "deployments", "-o", "wide"]).await;
    assert_eq!(row(&out, "web")[..4], ["web", "0/3", "0", "0"]);
    let out = kubectl.ok(&["get", "pdb"]).await;
    assert_eq!(row(&out, "web")[..4], ["web", "2", "N/A", "1"]);
    let out = kubectl.ok(&["get", "wd"]).await;
    assert_eq!(words(out.lines().next().unwrap()), ["NAME", "SIZE", "AGE"]);
    assert_eq!(row(&out, "w1")[1], "9");

    let out = kubectl
        .ok(&["get", "deployment", "web", "-o", "yaml"])
        .await;
    assert!(
        out.contains("replicas: 3")
            && out.contains("kubectl.kubernetes.io/last-applied-configuration"),
        "{out}"
    );
    assert!(
        kubectl
            .ok(&[
                "patch",
                "deployment",
                "web",
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"replicas":5}}"#
            ])
            .await
            .contains("deployment.apps/web patched")
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    assert_eq!(
        deployments.get("web").await.unwrap().spec.unwrap().replicas,
        Some(5)
    );

    assert!(
        kubectl
            .ok(&["label", "pod", "web-a", "tier=front"])
            .await
            .contains("pod/web-a labeled")
    );
    assert_eq!(
        kubectl
            .ok(&["get", "pods", "-l", "tier=front", "-o", "name"])
            .await
            .trim(),
        "pod/web-a"
    );
    assert!(
        kubectl
            .ok(&["taint", "nodes", "ip-10-0-0-7", "dedicated=gpu:NoSchedule"])
            .await
            .contains("tainted")
    );
    assert!(
        kubectl
            .ok(&["taint", "nodes", "ip-10-0-0-7", "dedicated=gpu:NoSchedule-"])
            .await
            .contains("untainted")
    );
    assert!(
        nodes
            .get("ip-10-0-0-7")
            .await
            .unwrap()
            .spec
            .unwrap()
            .taints
            .unwrap_or_default()
            .is_empty()
    );

    let out = kubectl.ok(&["describe", "pod", "web-b"]).await;
    assert!(
        out.contains("web-b") && out.contains("ip-10-0-0-7") && out.contains("Running"),
        "{out}"
    );
    let out = kubectl.ok(&["describe", "node", "ip-10-0-0-7"]).await;
    assert!(out.contains("Taints:") && out.contains("Ready"), "{out}");
    let (drained, stdout, stderr) = kubectl
        .run(&["drain", "ip-10-0-0-7", "--force", "--timeout=2s"])
        .await;
    println!("$ kubectl drain ip-10-0-0-7 --force --timeout=2s\n{stdout}{stderr}");
    assert!(!drained, "the budget must block the drain");
    assert!(
        stderr.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{stderr}"
    );
    assert_eq!(
        pods.list(&Default::default()).await.unwrap().items.len(),
        2,
        "exactly one disruption was allowed"
    );
    assert!(
        nodes
            .get("ip-10-0-0-7")
            .await
            .unwrap()
            .spec
            .unwrap()
            .unschedulable
            == Some(true),
        "drain cordons first"
    );
    // The node lifecycle controller's taint follows the cordon (TaintNodesByCondition).
    let tainted = |node: k8s_openapi::api::core::v1::Node| {
        node.spec
            .and_then(|spec| spec.taints)
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unschedulable" && t.effect == "NoSchedule")
    };
    assert!(tainted(nodes.get("ip-10-0-0-7").await.unwrap()));
    assert!(
        kubectl
            .ok(&["uncordon", "ip-10-0-0-7"])
            .await
            .contains("uncordoned")
    );
    assert!(!tainted(nodes.get("ip-10-0-0-7").await.unwrap()));
    assert!(
        kubectl
            .ok(&["delete", "pdb", "web"])
            .await
            .contains("poddisruptionbudget.policy \"web\" deleted")
    );
    let out = kubectl
        .ok(&["drain", "ip-10-0-0-7", "--force", "--timeout=20s"])
        .await;
    assert!(out.contains("node/ip-10-0-0-7 drained"), "{out}");
    assert!(
        pods.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let out = kubectl.ok(&["delete", "widget", "w1"]).await;
    assert!(out.contains("widget.example.com \"w1\" deleted"), "{out}");
    let out = kubectl.ok(&["api-resources"]).await;
    assert_eq!(
        row(&out, "poddisruptionbudgets"),
        [
            "poddisruptionbudgets",
            "pdb",
            "policy/v1",
            "true",
            "PodDisruptionBudget"
        ]
    );
    assert_eq!(
        row(&out, "widgets"),
        ["widgets", "wd", "example.com/v1", "true", "Widget"]
    );
    // `kubectl auth can-i`: a SelfSubjectAccessReview, allowed (the embedded cluster has no
    // authorization), never stored.
    assert_eq!(
        kubectl
            .ok(&["auth", "can-i", "create", "pods", "-n", "kube-system"])
            .await
            .trim(),
        "yes"
    );
    assert_eq!(
        kubectl
            .ok(&["auth", "can-i", "get", "/healthz"])
            .await
            .trim(),
        "yes"
    );
    let (listed, _, stderr) = kubectl.run(&["get", "selfsubjectaccessreviews"]).await;
    assert!(!listed, "reviews are only created: {stderr}");
    let out = kubectl.ok(&["version", "-o", "json"]).await;
    assert!(out.contains("\"gitVersion\": \"v1.29.15\""), "{out}");
    let (found, _, stderr) = kubectl.run(&["get", "pod", "nope"]).await;
    assert!(
        !found && stderr.contains("pods \"nope\" not found"),
        "{stderr}"
    );
}

/// `kubectl apply --server-side` with two field managers, as Flux's kustomize-controller and
/// Argo CD's server-side sync rely on: a second manager changing a field the first applied
/// conflicts (kubectl prints kube-apiserver's message) until it forces; a field the first
/// stops applying is removed, one the second owns stays; `managedFields` names both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_with_two_field_managers() {
    let dir = tempfile::tempdir().unwrap();
    let api = ApiServer::new(ApiServerConfig::default());
    let kubeconfig = dir.path().join("kubeconfig");
    let _http = api.serve_with_kubeconfig(&kubeconfig).await.unwrap();
    let kubectl = Kubectl {
        kubeconfig,
        dir: dir.path().to_path_buf(),
    };
    let config_map = |data: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n{data}")
    };
    let team_a = kubectl.file("a.yaml", &config_map("  a: \"1\"\n  shared: from-a\n"));
    let out = kubectl
        .ok(&[
            "apply",
            "--server-side",
            "--field-manager=team-a",
            "-f",
            &team_a,
        ])
        .await;
    assert!(
        out.contains("configmap/settings serverside-applied"),
        "{out}"
    );

    let team_b = kubectl.file("b.yaml", &config_map("  b: \"2\"\n  shared: from-b\n"));
    let (applied, _, stderr) = kubectl
        .run(&[
            "apply",
            "--server-side",
            "--field-manager=team-b",
            "-f",
            &team_b,
        ])
        .await;
    assert!(!applied, "a conflict");
    assert!(
        stderr.contains("Apply failed with 1 conflict: conflict with \"team-a\": .data.shared"),
        "{stderr}"
    );
    kubectl
        .ok(&[
            "apply",
            "--server-side",
            "--field-manager=team-b",
            "--force-conflicts",
            "-f",
            &team_b,
        ])
        .await;
    let data = |out: String| -> serde_json::Value { serde_json::from_str(&out).unwrap() };
    let cm = data(kubectl.ok(&["get", "cm", "settings", "-o", "json"]).await);
    assert_eq!(cm["data"], json!({"a": "1", "b": "2", "shared": "from-b"}));

    // team-a stops applying `a` and `shared`: `a` goes, `shared` (team-b's now) stays.
    let team_a = kubectl.file("a.yaml", &config_map("  c: \"3\"\n"));
    kubectl
        .ok(&[
            "apply",
            "--server-side",
            "--field-manager=team-a",
            "-f",
            &team_a,
        ])
        .await;
    let cm = data(
        kubectl
            .ok(&[
                "get",
                "cm",
                "settings",
                "-o",
                "json",
                "--show-managed-fields",
            ])
            .await,
    );
    assert_eq!(cm["data"], json!({"b": "2", "c": "3", "shared": "from-b"}));
    let owners: Vec<(String, Vec<String>)> = cm["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            (
                entry["manager"].as_str().unwrap().to_string(),
                entry["fieldsV1"]["f:data"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .cloned()
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        owners,
        vec![
            ("team-a".to_string(), vec!["f:c".to_string()]),
            (
                "team-b".to_string(),
                vec!["f:b".to_string(), "f:shared".to_string()]
            ),
        ]
    );
    // A client-side edit (kubectl's own manager, an Update) takes the field it changes.
    kubectl
        .ok(&["patch", "cm", "settings", "-p", r#"{"data":{"b":"9"}}"#])
        .await;
    let (applied, _, stderr) = kubectl
        .run(&[
            "apply",
            "--server-side",
            "--field-manager=team-b",
            "-f",
            &team_b,
        ])
        .await;
    assert!(!applied);
    assert!(
        stderr.contains("conflict with \"kubectl-patch\" using v1"),
        "{stderr}"
    );
}
