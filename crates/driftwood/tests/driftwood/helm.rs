//! deploy/chart through Helm's own engine (helm_python: Helm v4's Go SDK): it lints clean; it
//! renders the same roles as the kustomization; every documented value changes what it should
//! (and the ones documented as ignored change nothing); the rendered manifests pass a server
//! dry run; and `helm install` / `upgrade` / `uninstall` work against `driftwood sim serve`,
//! whose API server reads what Helm's client-go sends (release Secrets in protobuf, objects by
//! server-side apply), with the installed controller's pods Running on nodes driftwood launched.

use super::blueprints;
use super::deploy::{deployed_grants, role_grants, sim_serve, sim_serve_log};
use super::kubectl::{kubectl, kubectl_binary};
use super::repo_root;
use driftwood_controller::rbac::Scope;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Python with helm_python, as scripts/test installed it (DRIFTWOOD_TEST_PYTHON) or python3. A
/// missing helm_python fails the test: it is a required tool, never a skip.
fn python() -> String {
    let python = std::env::var("DRIFTWOOD_TEST_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let found = Command::new(&python)
        .args(["-c", "import helm_python, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "helm_python is required by this test (scripts/test installs it with \
         `pip install helm-python-sdk`); `{python} -c 'import helm_python'` failed"
    );
    python
}

fn chart() -> PathBuf {
    repo_root().join("deploy/chart")
}

/// Runs helm/render.py with `args`; its one JSON object.
fn helm(args: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/driftwood/helm/render.py");
    let out = Command::new(python())
        .arg(script)
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "render.py {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "render.py {args:?} printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The values every render needs (the controller does not start without them).
fn required() -> Value {
    json!({"settings": {
        "clusterName": "my-cluster",
        "clusterEndpoint": "https://EXAMPLED539D4633E53DE1B71EXAMPLE.gr7.us-west-2.eks.amazonaws.com",
    }})
}

/// `base` with `overlay` merged in (objects by key, anything else replaced).
fn merged(mut base: Value, overlay: &Value) -> Value {
    match (&mut base, overlay) {
        (Value::Object(base_map), Value::Object(overlay_map)) => {
            for (key, value) in overlay_map {
                let slot = base_map.entry(key.clone()).or_insert(Value::Null);
                *slot = merged(slot.take(), value);
            }
            base
        }
        _ => overlay.clone(),
    }
}

/// Renders the chart as release `driftwood` in kube-system: the manifests, or Helm's error.
fn render(values: &Value) -> Result<Vec<Value>, String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("values.json");
    std::fs::write(&file, serde_json::to_vec(values).unwrap()).unwrap();
    let out = helm(&[
        "render",
        chart().to_str().unwrap(),
        file.to_str().unwrap(),
        "driftwood",
        "kube-system",
    ]);
    match out.get("error").and_then(Value::as_str) {
        Some(error) => Err(error.to_string()),
        None => Ok(out["manifests"].as_array().unwrap().clone()),
    }
}

fn render_ok(overlay: &Value) -> Vec<Value> {
    render(&merged(required(), overlay)).unwrap_or_else(|e| panic!("render {overlay}: {e}"))
}

fn of_kind<'a>(manifests: &'a [Value], kind: &str) -> Vec<&'a Value> {
    manifests.iter().filter(|m| m["kind"] == kind).collect()
}

fn one<'a>(manifests: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(manifests, kind);
    assert_eq!(found.len(), 1, "one {kind}: {found:#?}");
    found[0]
}

fn container(manifests: &[Value]) -> &Value {
    &one(manifests, "Deployment")["spec"]["template"]["spec"]["containers"][0]
}

fn env(manifests: &[Value], name: &str) -> Option<String> {
    container(manifests)["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str().map(str::to_string))
}

#[test]
fn the_chart_lints_clean_with_helms_engine() {
    let report = helm(&["lint", chart().to_str().unwrap()]);
    assert_eq!(report["errors"], json!([]), "{report:#}");
    assert_eq!(report["warnings"], json!([]), "{report:#}");
}

/// One source of truth for RBAC: the chart's ClusterRole and Role grant what deploy/'s do
/// (which the deploy tests hold equal to the controllers' permission table), under the same
/// names for a release named driftwood; the chart's CRDs are deploy/crds's.
#[test]
fn the_chart_renders_the_kustomizations_roles_and_crds() {
    let manifests = render_ok(&json!({}));
    let cluster_role = one(&manifests, "ClusterRole");
    let role = one(&manifests, "Role");
    assert_eq!(role["metadata"]["namespace"], "kube-system");
    let to_yaml = |v: &Value| serde_yaml::to_value(v).unwrap();
    let mut grants = role_grants(&to_yaml(cluster_role), Scope::Cluster, "chart ClusterRole");
    grants.extend(role_grants(
        &to_yaml(role),
        Scope::SystemNamespace,
        "chart Role",
    ));
    let deployed = deployed_grants();
    assert_eq!(
        grants.symmetric_difference(&deployed).collect::<Vec<_>>(),
        Vec::<&(Scope, String, String, String)>::new(),
        "the chart's roles and deploy/'s differ"
    );
    for (file, kind) in [("clusterrole.yaml", "ClusterRole"), ("role.yaml", "Role")] {
        let text = std::fs::read_to_string(repo_root().join("deploy").join(file)).unwrap();
        let deployed: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(
            one(&manifests, kind)["metadata"]["name"].as_str(),
            deployed["metadata"]["name"].as_str(),
            "{kind} name"
        );
    }
    let crds: Vec<String> = of_kind(&manifests, "CustomResourceDefinition")
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        crds.len(),
        3,
        "nodepools, nodeclaims, ec2nodeclasses: {crds:?}"
    );
    for entry in std::fs::read_dir(repo_root().join("deploy/crds")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            std::fs::read(chart().join("crds").join(name)).unwrap(),
            "deploy/chart/crds/{name:?} is a copy of deploy/crds/{name:?}"
        );
    }
}

#[test]
fn rendering_without_the_cluster_settings_names_them() {
    let error = render(&json!({})).unwrap_err();
    assert!(error.contains("settings.clusterName"), "{error}");
    let error = render(&json!({"settings": {"clusterName": "c"}})).unwrap_err();
    assert!(error.contains("settings.clusterEndpoint"), "{error}");
}

/// Each documented value, set as a Karpenter user would, changes what docs/deploy.md says it
/// does; a wrongly typed value is refused by values.schema.json, naming it.
#[test]
fn each_documented_value_changes_what_it_should() {
    type Check = fn(&[Value]) -> bool;
    let cases: &[(&str, Value, Check)] = &[
        ("replicas", json!({"replicas": 1}), |m| {
            one(m, "Deployment")["spec"]["replicas"] == 1
        }),
        (
            "serviceAccount.annotations (IRSA)",
            json!({"serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/x"}}}),
            |m| {
                one(m, "ServiceAccount")["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
                    == "arn:aws:iam::111122223333:role/x"
            },
        ),
        (
            "serviceAccount.create=false, name",
            json!({"serviceAccount": {"create": false, "name": "mine"}}),
            |m| {
                of_kind(m, "ServiceAccount").is_empty()
                    && one(m, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
                        == "mine"
                    && one(m, "ClusterRoleBinding")["subjects"][0]["name"] == "mine"
            },
        ),
        (
            "settings.clusterName",
            json!({"settings": {"clusterName": "prod-1"}}),
            |m| env(m, "CLUSTER_NAME").as_deref() == Some("prod-1"),
        ),
        (
            "settings.interruptionQueue",
            json!({"settings": {"interruptionQueue": "prod-1"}}),
            |m| env(m, "INTERRUPTION_QUEUE").as_deref() == Some("prod-1"),
        ),
        (
            "settings.featureGates.nodeRepair",
            json!({"settings": {"featureGates": {"nodeRepair": true}}}),
            |m| env(m, "FEATURE_GATES").is_some_and(|g| g.contains("NodeRepair=true")),
        ),
        (
            "dashboards.enabled, labels, namespace",
            json!({"dashboards": {"enabled": true, "labels": {"grafana_dashboard": "1"}, "namespace": "monitoring"}}),
            |m| {
                let Some(map) = of_kind(m, "ConfigMap").first().copied() else {
                    return false;
                };
                let shipped: Value = serde_json::from_str(
                    map["data"]["driftwood-rollouts.json"]
                        .as_str()
                        .unwrap_or_default(),
                )
                .unwrap_or_default();
                let file: Value = serde_json::from_str(
                    &std::fs::read_to_string(chart().join("dashboards/driftwood-rollouts.json"))
                        .unwrap(),
                )
                .unwrap();
                map["metadata"]["labels"]["grafana_dashboard"] == "1"
                    && map["metadata"]["namespace"] == "monitoring"
                    && shipped == file
            },
        ),
        ("logLevel", json!({"logLevel": "debug"}), |m| {
            env(m, "LOG_LEVEL").as_deref() == Some("debug")
        }),
        (
            "controller.metrics.port",
            json!({"controller": {"metrics": {"port": 9000}}}),
            |m| {
                env(m, "METRICS_PORT").as_deref() == Some("9000")
                    && one(m, "Service")["spec"]["ports"][0]["port"] == 9000
            },
        ),
        (
            "controller.healthProbe.port",
            json!({"controller": {"healthProbe": {"port": 9001}}}),
            |m| env(m, "HEALTH_PROBE_PORT").as_deref() == Some("9001"),
        ),
        (
            "controller.image",
            json!({"controller": {"image": {"repository": "registry.example/dw", "tag": "1.2.3"}}}),
            |m| container(m)["image"] == "registry.example/dw:1.2.3",
        ),
        (
            "controller.resources",
            json!({"controller": {"resources": {"limits": {"memory": "2Gi"}}}}),
            |m| container(m)["resources"]["limits"]["memory"] == "2Gi",
        ),
        (
            "tolerations",
            json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
            |m| {
                one(m, "Deployment")["spec"]["template"]["spec"]["tolerations"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t["key"] == "dedicated"))
            },
        ),
        (
            "nodeSelector",
            json!({"nodeSelector": {"role": "system"}}),
            |m| {
                one(m, "Deployment")["spec"]["template"]["spec"]["nodeSelector"]["role"] == "system"
            },
        ),
        (
            "priorityClassName",
            json!({"priorityClassName": "high"}),
            |m| one(m, "Deployment")["spec"]["template"]["spec"]["priorityClassName"] == "high",
        ),
        (
            "podLabels",
            json!({"podLabels": {"team": "platform"}}),
            |m| {
                one(m, "Deployment")["spec"]["template"]["metadata"]["labels"]["team"] == "platform"
            },
        ),
        (
            "podAnnotations",
            json!({"podAnnotations": {"a": "b"}}),
            |m| one(m, "Deployment")["spec"]["template"]["metadata"]["annotations"]["a"] == "b",
        ),
        (
            "additionalLabels",
            json!({"additionalLabels": {"cost-center": "42"}}),
            |m| {
                m.iter()
                    .filter(|o| o["kind"] != "CustomResourceDefinition")
                    .all(|o| o["metadata"]["labels"]["cost-center"] == "42")
            },
        ),
        (
            "podDisruptionBudget.maxUnavailable",
            json!({"podDisruptionBudget": {"maxUnavailable": "50%"}}),
            |m| one(m, "PodDisruptionBudget")["spec"]["maxUnavailable"] == "50%",
        ),
        (
            "serviceMonitor.enabled",
            json!({"serviceMonitor": {"enabled": true}}),
            |m| of_kind(m, "ServiceMonitor").len() == 1,
        ),
        ("hostNetwork", json!({"hostNetwork": true}), |m| {
            one(m, "Deployment")["spec"]["template"]["spec"]["hostNetwork"] == true
        }),
        (
            "controller.env",
            json!({"controller": {"env": [{"name": "AWS_REGION", "value": "eu-west-1"}]}}),
            |m| env(m, "AWS_REGION").as_deref() == Some("eu-west-1"),
        ),
    ];
    let baseline = render_ok(&json!({}));
    for (what, overlay, check) in cases {
        let manifests = render_ok(overlay);
        assert!(
            !check(&baseline),
            "{what}: the baseline already satisfies the check"
        );
        assert!(check(&manifests), "{what} had no effect: {overlay}");
    }

    // Documented as ignored (driftwood does not support them yet): accepted, and nothing
    // changes.
    for (what, overlay) in [
        (
            "batchMaxDuration",
            json!({"settings": {"batchMaxDuration": "20s"}}),
        ),
        (
            "vmMemoryOverheadPercent",
            json!({"settings": {"vmMemoryOverheadPercent": 0.1}}),
        ),
        ("reservedENIs", json!({"settings": {"reservedENIs": "1"}})),
        (
            "eksControlPlane",
            json!({"settings": {"eksControlPlane": true}}),
        ),
    ] {
        assert_eq!(
            render_ok(&overlay),
            baseline,
            "{what} is documented as ignored"
        );
    }

    // The schema refuses a wrongly typed value, naming it.
    let error = render(&merged(required(), &json!({"replicas": "two"}))).unwrap_err();
    assert!(error.contains("replicas"), "{error}");
}

/// A realistic values file (IRSA, interruption queue, resources, tolerations, one replica,
/// ServiceMonitor off) renders manifests the embedded API server accepts with a server dry run.
#[test]
fn rendered_chart_applies_with_server_dry_run_against_sim_serve() {
    let manifests = render_ok(&json!({
        "replicas": 1,
        "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/driftwood"}},
        "settings": {"interruptionQueue": "my-cluster", "featureGates": {"nodeRepair": true}},
        "controller": {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
    }));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let file = dir.path().join("chart.yaml");
    let text: Vec<String> = manifests
        .iter()
        .map(|m| serde_yaml::to_string(m).unwrap())
        .collect();
    std::fs::write(&file, text.join("---\n")).unwrap();
    let _server = sim_serve(&kubeconfig, &[]);
    let out = Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", "--dry-run=server", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let applied = stdout
        .lines()
        .filter(|l| l.ends_with("(server dry run)"))
        .count();
    assert_eq!(applied, manifests.len(), "{stdout}");
}

/// What a failed wait shows: the pods described, the NodeClaims and Nodes, the events, and the
/// end of the server's log.
fn cluster_state(kubeconfig: &Path) -> String {
    let show = |args: &[&str]| {
        let out = Command::new(kubectl_binary())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .output()
            .map(|o| {
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            })
            .unwrap_or_else(|e| format!("kubectl did not run: {e}"));
        format!("--- kubectl {}\n{out}", args.join(" "))
    };
    let log = std::fs::read_to_string(sim_serve_log(kubeconfig)).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(200).collect();
    [
        show(&["describe", "pods", "-n", "kube-system"]),
        show(&["get", "nodeclaims,nodes", "-o", "wide"]),
        show(&["get", "ec2nodeclasses", "-o", "yaml"]),
        show(&["get", "events", "-A", "--sort-by=.lastTimestamp"]),
        format!(
            "--- the server's log, last {} lines\n{}",
            tail.len(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ),
    ]
    .join("\n")
}

/// Polls `kubectl args` (wall time) until `done`; on timeout, fails with the cluster's state.
fn wait_for(kubeconfig: &Path, args: &[&str], limit: Duration, done: impl Fn(&str) -> bool) {
    let start = Instant::now();
    loop {
        let out = kubectl(kubeconfig, args, None);
        if done(&out) {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "kubectl {args:?} never satisfied the condition within {limit:?}; last output:\n{out}\n{}",
            cluster_state(kubeconfig)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `helm install`, `helm upgrade` with a changed value and `helm uninstall` through Helm's
/// engine into `driftwood sim serve`: the release Secrets are stored (client-go writes them in
/// protobuf), the controller's pods reach Running on a node driftwood launched for them (the
/// image is not pulled: the embedded kubelet runs pods as it always does), the upgrade's value
/// reaches the Deployment, and uninstall removes the release's objects and history.
#[test]
fn helm_install_upgrade_and_uninstall_against_sim_serve() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let _server = sim_serve(
        &kubeconfig,
        &[
            "--metrics-port",
            "0",
            "--instance-launch-seconds",
            "1",
            "--instance-termination-seconds",
            "1",
            "--node-ready-seconds",
            "1",
        ],
    );
    // Capacity for the controller's pods: the walkthrough's NodeClass and NodePool.
    let (amd, arm) = (
        super::kubectl::ssm("1.29", "amazon-linux-2"),
        super::kubectl::ssm("1.29", "amazon-linux-2-arm64"),
    );
    let text = std::fs::read_to_string(
        blueprints().join("update-nodes-with-drift/latest-current-ami.yaml"),
    )
    .unwrap()
    .replace("<<CLUSTER_NAME>>", "driftwood-demo")
    .replace(
        "<<KARPENTER_NODE_IAM_ROLE_NAME>>",
        "KarpenterNodeRole-driftwood-demo",
    )
    .replace("<<AMD64PREVAMI>>", &amd)
    .replace("<<ARM64PREVAMI>>", &arm);
    kubectl(&kubeconfig, &["apply", "-f", "-"], Some(&text));

    // On the embedded cluster every node is one driftwood launched: let the controller's pods
    // go there (on a real cluster the default affinity keeps them off such nodes).
    let values = merged(
        required(),
        &json!({
            "replicas": 1,
            "affinity": {"nodeAffinity": null},
            "nodeSelector": null,
            "logLevel": "info",
            "podAnnotations": {"example.com/first-install": "yes"},
        }),
    );
    let values_file = dir.path().join("values.json");
    std::fs::write(&values_file, serde_json::to_vec(&values).unwrap()).unwrap();
    let chart = chart();
    let (chart, values_path, kubeconfig_path) = (
        chart.to_str().unwrap(),
        values_file.to_str().unwrap(),
        kubeconfig.to_str().unwrap(),
    );
    let installed = helm(&[
        "install",
        chart,
        values_path,
        "driftwood",
        "kube-system",
        kubeconfig_path,
    ]);
    assert_eq!(installed["release"]["status"], "deployed", "{installed:#}");
    assert_eq!(installed["release"]["revision"], 1, "{installed:#}");
    let secrets = kubectl(
        &kubeconfig,
        &[
            "get",
            "secrets",
            "-n",
            "kube-system",
            "-l",
            "owner=helm,name=driftwood",
            "-o",
            "name",
        ],
        None,
    );
    assert_eq!(
        secrets.trim(),
        "secret/sh.helm.release.v1.driftwood.v1",
        "{secrets}"
    );
    for object in [
        "deployment/driftwood",
        "serviceaccount/driftwood",
        "service/driftwood",
        "role/driftwood",
        "poddisruptionbudget/driftwood",
    ] {
        kubectl(&kubeconfig, &["get", "-n", "kube-system", object], None);
    }
    kubectl(&kubeconfig, &["get", "clusterrole/driftwood"], None);
    wait_for(
        &kubeconfig,
        &[
            "get",
            "pods",
            "-n",
            "kube-system",
            "-l",
            "app.kubernetes.io/instance=driftwood",
            "--no-headers",
        ],
        Duration::from_secs(90),
        |out| out.lines().count() == 1 && out.contains(" Running "),
    );

    // Upgrade with a changed value and one left out: revision 2, the Deployment follows, and
    // the annotation Helm no longer applies is gone (server-side apply removes what its
    // manager stops applying; a merge would have kept it).
    let mut upgraded_values = merged(values, &json!({"logLevel": "debug"}));
    upgraded_values["podAnnotations"] = json!({});
    std::fs::write(&values_file, serde_json::to_vec(&upgraded_values).unwrap()).unwrap();
    let upgraded = helm(&[
        "upgrade",
        chart,
        values_path,
        "driftwood",
        "kube-system",
        kubeconfig_path,
    ]);
    assert_eq!(upgraded["release"]["revision"], 2, "{upgraded:#}");
    assert_eq!(upgraded["release"]["status"], "deployed", "{upgraded:#}");
    let level = kubectl(
        &kubeconfig,
        &[
            "get",
            "deployment/driftwood",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].env[?(@.name==\"LOG_LEVEL\")].value}",
        ],
        None,
    );
    assert_eq!(level, "debug");
    let annotations = kubectl(
        &kubeconfig,
        &[
            "get",
            "deployment/driftwood",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.spec.template.metadata.annotations}",
        ],
        None,
    );
    assert!(
        !annotations.contains("first-install"),
        "the dropped value is gone: {annotations}"
    );
    let history = kubectl(
        &kubeconfig,
        &[
            "get",
            "secrets",
            "-n",
            "kube-system",
            "-l",
            "owner=helm",
            "-o",
            "name",
        ],
        None,
    );
    assert_eq!(history.lines().count(), 2, "{history}");

    let uninstalled = helm(&["uninstall", "driftwood", "kube-system", kubeconfig_path]);
    assert!(uninstalled.get("error").is_none(), "{uninstalled:#}");
    let left = kubectl(
        &kubeconfig,
        &[
            "get",
            "deployments,services,serviceaccounts,roles,poddisruptionbudgets,secrets",
            "-n",
            "kube-system",
            "-l",
            "app.kubernetes.io/instance=driftwood",
            "-o",
            "name",
        ],
        None,
    );
    assert_eq!(left.trim(), "", "uninstall leaves nothing of the release");
    let history = kubectl(
        &kubeconfig,
        &[
            "get",
            "secrets",
            "-n",
            "kube-system",
            "-l",
            "owner=helm",
            "-o",
            "name",
        ],
        None,
    );
    assert_eq!(history.trim(), "", "uninstall removes the release history");
}
