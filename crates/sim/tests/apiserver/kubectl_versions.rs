//! The oldest and the newest kubectl on the machine (1.27 and 1.33 here) against the HTTP
//! server with driftwood's CRDs: bad NodePools refused naming the field (strict field
//! validation, which kubectl 1.27 learns from `/openapi/v2` and later ones from `/openapi/v3`),
//! `explain` from the published schemas, server-side and client-side apply, diff, edit, and the
//! events driftwood writes through events.k8s.io/v1 in `get events` and `describe`.

use std::path::{Path, PathBuf};
use std::process::Command;

use driftwood_sim::{ApiServer, ApiServerConfig};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;

const BAD_NODEPOOLS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bad-budget}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["4", "8"]}
  disruption:
    budgets:
    - nodes: "150%"
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: misspelled}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirments:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: no-class}
spec:
  template:
    spec:
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
"#;

const GOOD_NODEPOOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: good}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
  disruption:
    budgets:
    - nodes: "20%"
"#;

/// The kubectl the test command chose (DRIFTWOOD_TEST_KUBECTL, else the one on PATH).
fn default_kubectl() -> PathBuf {
    let named = std::env::var("DRIFTWOOD_TEST_KUBECTL").unwrap_or_else(|_| "kubectl".to_string());
    let path = Path::new(&named);
    if path.components().count() > 1 {
        return path.to_path_buf();
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(&named))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("kubectl is required by this test (scripts/test installs it)"))
}

/// The oldest and the newest `kubectl.1.NN` installed beside kubectl. With CI=true both must be
/// there (this machine kind has 1.27 … 1.33); elsewhere the default kubectl alone is used.
fn kubectl_versions() -> Vec<PathBuf> {
    let kubectl = default_kubectl();
    let dir = std::fs::canonicalize(&kubectl)
        .ok()
        .and_then(|real| real.parent().map(Path::to_path_buf));
    let mut versioned: Vec<(u32, PathBuf)> = dir
        .and_then(|dir| std::fs::read_dir(dir).ok())
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let minor = name.strip_prefix("kubectl.1.")?.parse::<u32>().ok()?;
            Some((minor, entry.path()))
        })
        .collect();
    versioned.sort();
    match (versioned.first(), versioned.last()) {
        (Some(oldest), Some(newest)) if oldest.0 != newest.0 => {
            vec![oldest.1.clone(), newest.1.clone()]
        }
        _ if std::env::var("CI").as_deref() == Ok("true") => panic!(
            "CI needs kubectl 1.27 and the newest side by side (kubectl.1.NN beside {})",
            kubectl.display()
        ),
        _ => vec![kubectl],
    }
}

fn run(kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let output = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("$ {} {}\n{text}", kubectl.display(), args.join(" "));
    (output.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oldest_and_newest_kubectl_validate_explain_and_apply() {
    let dir = tempfile::tempdir().unwrap();
    let api = ApiServer::new(ApiServerConfig::default());
    let crds: Api<CustomResourceDefinition> = Api::all(api.client());
    for crd in driftwood_api::crd::crds().unwrap() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let kubeconfig = dir.path().join("kubeconfig");
    let _http = api.serve_with_kubeconfig(&kubeconfig).await.unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, BAD_NODEPOOLS).unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, GOOD_NODEPOOL).unwrap();
    let changed = dir.path().join("changed.yaml");
    std::fs::write(&changed, GOOD_NODEPOOL.replace("20%", "30%")).unwrap();
    let (bad, good, changed) = (
        bad.to_string_lossy().into_owned(),
        good.to_string_lossy().into_owned(),
        changed.to_string_lossy().into_owned(),
    );

    // A NodePool with an event written through events.k8s.io/v1, as driftwood writes them:
    // `kubectl describe` (which reads core/v1 events) lists it.
    let pools: Api<kube::api::DynamicObject> = Api::all_with(
        api.client(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"),
            "nodepools",
        ),
    );
    let mut described: kube::api::DynamicObject =
        serde_yaml::from_str(&GOOD_NODEPOOL.replace("name: good", "name: described")).unwrap();
    described = pools
        .create(&PostParams::default(), &described)
        .await
        .unwrap();
    let event: k8s_openapi::api::events::v1::Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "described.1", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "karpenter", "reportingInstance": "driftwood",
        "action": "Disrupting", "reason": "DisruptionBlocked", "type": "Normal",
        "note": "Cannot disrupt NodePool: a test event",
        "regarding": {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "described",
                      "uid": described.metadata.uid.clone().unwrap()}
    }))
    .unwrap();
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(api.client(), "default")
        .create(&PostParams::default(), &event)
        .await
        .unwrap();

    for kubectl in kubectl_versions() {
        let kubeconfig = kubeconfig.clone();
        let (bad, good, changed) = (bad.clone(), good.clone(), changed.clone());
        tokio::task::spawn_blocking(move || {
            let (ok, out) = run(&kubectl, &kubeconfig, &["apply", "-f", &bad]);
            assert!(!ok, "{out}");
            for expected in [
                "NodePool.karpenter.sh \"bad-budget\" is invalid: [spec.disruption.budgets[0].nodes: Invalid value: \"150%\"",
                "spec.template.spec.requirements: Invalid value: \"array\": requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value",
                "strict decoding error: unknown field \"spec.template.spec.requirments\"",
                "NodePool.karpenter.sh \"no-class\" is invalid: spec.template.spec.nodeClassRef: Required value",
            ] {
                assert!(out.contains(expected), "{} missing {expected:?} in\n{out}", kubectl.display());
            }
            let (ok, out) = run(&kubectl, &kubeconfig, &["get", "nodepools", "-o", "name"]);
            assert!(ok && out.trim() == "nodepool.karpenter.sh/described", "nothing is stored: {out}");
            let (ok, out) = run(&kubectl, &kubeconfig, &["describe", "nodepool", "described"]);
            assert!(ok && out.contains("Events:"), "{out}");
            assert!(
                out.lines().any(|l| l.contains("DisruptionBlocked") && l.contains("karpenter") && l.contains("Cannot disrupt NodePool: a test event")),
                "{out}"
            );
            let (ok, out) = run(&kubectl, &kubeconfig, &["get", "events", "-A"]);
            assert!(ok && out.contains("nodepool/described") && out.contains("DisruptionBlocked"), "{out}");

            let (ok, out) = run(&kubectl, &kubeconfig, &["explain", "nodepool.spec.disruption.budgets"]);
            assert!(ok, "{out}");
            assert!(out.contains("FIELD: budgets <[]Object>") && out.contains("nodes\t<string>"), "{out}");
            let (ok, out) = run(&kubectl, &kubeconfig, &["explain", "ec2nodeclass.spec.amiSelectorTerms.alias"]);
            assert!(ok && out.contains("KIND:       EC2NodeClass"), "{out}");
            let (ok, out) = run(&kubectl, &kubeconfig, &["explain", "pod.spec.tolerations"]);
            assert!(ok && out.contains("FIELD: tolerations <[]Toleration>"), "{out}");

            let (ok, out) = run(&kubectl, &kubeconfig, &["apply", "--server-side", "-f", &good]);
            assert!(ok && out.contains("nodepool.karpenter.sh/good serverside-applied"), "{out}");
            let (ok, out) = run(&kubectl, &kubeconfig, &["diff", "-f", &changed]);
            assert!(!ok && out.contains("-    - nodes: 20%") && out.contains("+    - nodes: 30%"), "{out}");
            let (ok, out) = run(&kubectl, &kubeconfig, &["apply", "--server-side", "-f", &changed]);
            assert!(ok, "{out}");
            let (ok, out) = run(&kubectl, &kubeconfig, &["get", "nodepool", "good", "-o", "jsonpath={.spec.disruption.budgets[0].nodes}"]);
            assert!(ok && out == "30%", "{out}");
            // `kubectl edit`, with an editor that changes the budget; then one that breaks it,
            // which the server refuses naming the field (kubectl keeps the edit in a file).
            let edit = |script: &str| {
                let output = Command::new(&kubectl)
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(["edit", "nodepool", "good"])
                    .env("KUBE_EDITOR", format!("sed -i {script}"))
                    .output()
                    .expect("kubectl edit runs");
                let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
                println!("$ kubectl edit nodepool good ({script})\n{text}");
                (output.status.success(), text)
            };
            let (ok, out) = edit("s/30%/40%/");
            assert!(ok && out.contains("nodepool.karpenter.sh/good edited"), "{out}");
            let (ok, out) = edit("s/40%/400%/");
            assert!(!ok && out.contains("nodepools.karpenter.sh \"good\" is invalid"), "{out}");
            // kubectl keeps the refused edit with the server's causes written above it.
            let kept = out
                .split('"')
                .find(|part| part.ends_with(".yaml") && part.contains("-edit-"))
                .unwrap_or_else(|| panic!("no kept copy named in {out}"));
            let kept = std::fs::read_to_string(kept).unwrap();
            assert!(kept.contains("spec.disruption.budgets[0].nodes: Invalid value: \"400%\""), "{kept}");
            let (ok, out) = run(&kubectl, &kubeconfig, &["get", "nodepool", "good", "-o", "jsonpath={.spec.disruption.budgets[0].nodes}"]);
            assert!(ok && out == "40%", "{out}");
            let (ok, out) = run(&kubectl, &kubeconfig, &["delete", "-f", &good]);
            assert!(ok, "{out}");
        })
        .await
        .unwrap();
    }
}
