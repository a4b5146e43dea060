//! deploy/: the kustomization renders; its ClusterRole and Role grant exactly the controllers'
//! permission table and everything a walkthrough run asks the API server for; the IAM policy
//! grants exactly the AWS actions the cloud ports call; the rendered manifests apply (server
//! dry run) against `driftwood sim serve`.

use super::kubectl::{Server, kubectl_binary};
use super::repo_root;
use driftwood::embedded::{Embedded, fill};
use driftwood_api::wellknown::LABEL_NODE_INITIALIZED;
use driftwood_controller::rbac::{ApiCall, PERMISSIONS, Scope};
use driftwood_controller::state::{Snapshot, spawn_watchers};
use driftwood_controller::{ClusterState, Settings};
use driftwood_sim::SimClusterOptions;
use serde::Deserialize as _;
use serde_yaml::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The namespace deploy/kustomization.yaml installs into (SYSTEM_NAMESPACE, the Role's).
const SYSTEM_NAMESPACE: &str = "kube-system";

// ---------------------------------------------------------------------------------------------
// RBAC

/// (scope, group, resource, verb) of every rule of deploy/'s ClusterRole and Role.
pub fn deployed_grants() -> BTreeSet<(Scope, String, String, String)> {
    let mut grants = BTreeSet::new();
    for (file, kind, scope) in [
        ("clusterrole.yaml", "ClusterRole", Scope::Cluster),
        ("role.yaml", "Role", Scope::SystemNamespace),
    ] {
        let text = std::fs::read_to_string(repo_root().join("deploy").join(file)).unwrap();
        let role: Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(role["kind"].as_str(), Some(kind), "{file}");
        if scope == Scope::SystemNamespace {
            assert_eq!(
                role["metadata"]["namespace"].as_str(),
                Some(SYSTEM_NAMESPACE),
                "{file}"
            );
        }
        grants.extend(role_grants(&role, scope, file));
    }
    grants
}

/// (scope, group, resource, verb) of every rule of one Role or ClusterRole (`what` names it in
/// failures): plain grants, no wildcards, no resource names.
pub fn role_grants(
    role: &Value,
    scope: Scope,
    what: &str,
) -> BTreeSet<(Scope, String, String, String)> {
    let mut grants = BTreeSet::new();
    let strings = |v: &Value| -> Vec<String> {
        v.as_sequence()
            .unwrap_or_else(|| panic!("{what}: expected a list, got {v:?}"))
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    for rule in role["rules"].as_sequence().unwrap() {
        assert!(
            rule.get("resourceNames").is_none() && rule.get("nonResourceURLs").is_none(),
            "{what}: rules are plain group/resource/verb grants"
        );
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    assert!(
                        verb != "*" && resource != "*" && group != "*",
                        "{what}: no wildcards"
                    );
                    grants.insert((scope, group.clone(), resource.clone(), verb));
                }
            }
        }
    }
    grants
}

fn table_grants() -> BTreeSet<(Scope, String, String, String)> {
    PERMISSIONS
        .iter()
        .flat_map(|p| {
            p.verbs.iter().map(move |v| {
                (
                    p.scope,
                    p.group.to_string(),
                    p.resource.to_string(),
                    v.verb.to_string(),
                )
            })
        })
        .collect()
}

fn deploy_allows(grants: &BTreeSet<(Scope, String, String, String)>, call: &ApiCall) -> bool {
    let key = |scope| {
        (
            scope,
            call.group.clone(),
            call.resource.clone(),
            call.verb.clone(),
        )
    };
    grants.contains(&key(Scope::Cluster))
        || (call.namespace.as_deref() == Some(SYSTEM_NAMESPACE)
            && grants.contains(&key(Scope::SystemNamespace)))
}

#[test]
fn deployed_roles_grant_exactly_the_permission_table() {
    let deployed = deployed_grants();
    let table = table_grants();
    let missing: Vec<_> = table.difference(&deployed).collect();
    let extra: Vec<_> = deployed.difference(&table).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "deploy/clusterrole.yaml + role.yaml differ from driftwood_controller::rbac::PERMISSIONS\n\
         in the table but not deployed: {missing:?}\ndeployed but not in the table: {extra:?}"
    );
}

fn pod_ready(pod: &driftwood_disruption::cached_pod::CachedPod) -> bool {
    pod.is_ready()
}

/// Initialized nodes whose kubelet version starts with `version` and that run 3 Ready
/// walkthrough pods.
fn nodes_serving_the_workload(s: &Snapshot, version: &str) -> Vec<String> {
    s.store
        .nodes
        .iter()
        .filter(|(_, n)| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_NODE_INITIALIZED))
                .is_some_and(|v| v == "true")
                && n.status
                    .as_ref()
                    .and_then(|st| st.node_info.as_ref())
                    .is_some_and(|i| i.kubelet_version.starts_with(version))
        })
        .filter(|(name, _)| {
            s.pods_on(name)
                .iter()
                .filter(|p| {
                    p.labels()
                        .get("app")
                        .is_some_and(|a| a == "latest-current-ami")
                        && !p.is_terminating()
                        && pod_ready(p)
                })
                .count()
                == 3
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// Advances virtual time a second at a time until `done`, at most `max`.
async fn wait_until(
    observer: &ClusterState,
    what: &str,
    max: Duration,
    done: impl Fn(&Snapshot) -> bool,
) {
    for _ in 0..max.as_secs() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if done(&observer.snapshot()) {
            return;
        }
    }
    panic!("timed out after {max:?} of virtual time waiting for: {what}");
}

#[tokio::test(start_paused = true)]
async fn every_api_call_of_the_walkthrough_and_upgrade_is_granted_by_deploy() {
    let options = SimClusterOptions {
        kubernetes_version: "1.29".into(),
        ..SimClusterOptions::default()
    };
    let mut embedded = Embedded::start(options, Settings::default())
        .await
        .expect("embedded cluster starts");
    // As deployed: two replicas under leader election.
    embedded.kill_controllers();
    let lease = Duration::from_secs(15);
    let leader = embedded.start_replica("driftwood-a", lease);
    let standby = embedded.start_replica("driftwood-b", lease);
    let observer = ClusterState::new();
    let observer_tasks = spawn_watchers(&embedded.cluster.client(), &observer);
    observer.wait_synced().await;

    let fixture = |file: &str| {
        std::fs::read_to_string(
            super::blueprints()
                .join("update-nodes-with-drift")
                .join(file),
        )
        .unwrap()
    };
    let values = embedded.walkthrough_values("1.29").unwrap();
    for file in ["latest-current-ami.yaml", "workload.yaml"] {
        embedded
            .apply_yaml(&fill(&fixture(file), &values))
            .await
            .unwrap();
    }
    wait_until(
        &observer,
        "3 pods on an initialized v1.29 node",
        Duration::from_secs(600),
        |s| !nodes_serving_the_workload(s, "v1.29.").is_empty(),
    )
    .await;
    let old_nodes: BTreeSet<String> = observer.snapshot().store.nodes.keys().cloned().collect();
    // The upgrade: the next version's AMIs and the tag bumped.
    let values = embedded.walkthrough_values("1.30").unwrap();
    let upgraded = fixture("latest-current-ami.yaml")
        .replace("KubernetesVersion: \"1.31\"", "KubernetesVersion: \"1.32\"");
    embedded
        .apply_yaml(&fill(&upgraded, &values))
        .await
        .unwrap();
    wait_until(
        &observer,
        "the old node gone and 3 pods on a v1.30 node",
        Duration::from_secs(1800),
        |s| {
            old_nodes.iter().all(|n| !s.store.nodes.contains_key(n))
                && !nodes_serving_the_workload(s, "v1.30.").is_empty()
        },
    )
    .await;
    assert!(leader.is_leading() && !standby.is_leading());

    let calls = embedded.recorded_api_calls();
    let described: Vec<String> = calls.iter().map(ToString::to_string).collect();
    // The recording saw the run: watches, creations, status writes, evictions, the lease.
    for expected in [
        "watch core/pods (cluster-wide)",
        "create karpenter.sh/nodeclaims (cluster-wide)",
        "patch karpenter.sh/nodeclaims/status (cluster-wide)",
        "watch storage.k8s.io/volumeattachments (cluster-wide)",
        "delete karpenter.sh/nodeclaims (cluster-wide)",
        // Renewals are patches with a resourceVersion precondition, never GET + PUT.
        "patch coordination.k8s.io/leases in namespace kube-system",
        "get coordination.k8s.io/leases in namespace kube-system",
    ] {
        assert!(
            described.iter().any(|d| d == expected),
            "{expected} not recorded; recorded:\n{}",
            described.join("\n")
        );
    }
    // Writes patch the watch cache's object with its resourceVersion as precondition: a GET
    // only after a conflict (the cache lagged), not one per write as before.
    let counts = embedded.recorded_api_call_counts();
    let count = |wanted: &str| -> u64 {
        counts
            .iter()
            .filter(|(call, _)| {
                let text = call.to_string();
                wanted
                    .split('|')
                    .any(|w| text.starts_with(&format!("{w} ")))
            })
            .map(|(_, n)| *n)
            .sum()
    };
    let patches = count(
        "patch karpenter.sh/nodeclaims|patch karpenter.sh/nodeclaims/status|patch core/nodes",
    );
    let gets = count("get karpenter.sh/nodeclaims|get core/nodes");
    assert!(patches >= 10, "{counts:#?}");
    assert!(
        gets * 5 <= patches,
        "{gets} GETs for {patches} patches of NodeClaims and Nodes: writes read first\n{counts:#?}"
    );
    let grants = deployed_grants();
    let refused: Vec<&String> = calls
        .iter()
        .zip(&described)
        .filter(|(call, _)| !deploy_allows(&grants, call))
        .map(|(_, d)| d)
        .collect();
    assert!(
        refused.is_empty(),
        "the controllers made API calls deploy/'s ClusterRole and Role do not grant:\n{refused:#?}"
    );
    for task in observer_tasks {
        task.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// IAM

/// Each cloud port operation (port file, trait method) and the IAM actions it needs.
const PORT_ACTIONS: &[(&str, &str, &[&str])] = &[
    ("ec2.rs", "describe_images", &["ec2:DescribeImages"]),
    ("ec2.rs", "describe_subnets", &["ec2:DescribeSubnets"]),
    (
        "ec2.rs",
        "describe_security_groups",
        &["ec2:DescribeSecurityGroups"],
    ),
    (
        "ec2.rs",
        "describe_instance_types",
        &["ec2:DescribeInstanceTypes"],
    ),
    (
        "ec2.rs",
        "describe_instance_type_offerings",
        &["ec2:DescribeInstanceTypeOfferings"],
    ),
    (
        "ec2.rs",
        "describe_spot_price_history",
        &["ec2:DescribeSpotPriceHistory"],
    ),
    // Tags the template on create.
    (
        "ec2.rs",
        "create_launch_template",
        &["ec2:CreateLaunchTemplate", "ec2:CreateTags"],
    ),
    (
        "ec2.rs",
        "describe_launch_templates",
        &["ec2:DescribeLaunchTemplates"],
    ),
    (
        "ec2.rs",
        "delete_launch_template",
        &["ec2:DeleteLaunchTemplate"],
    ),
    // CreateFleet (type instant) launches through RunInstances, tags on create, and passes
    // the node role in the launch template's instance profile.
    (
        "ec2.rs",
        "create_fleet",
        &[
            "ec2:CreateFleet",
            "ec2:RunInstances",
            "ec2:CreateTags",
            "iam:PassRole",
        ],
    ),
    ("ec2.rs", "describe_instances", &["ec2:DescribeInstances"]),
    (
        "ec2.rs",
        "describe_instance_status",
        &["ec2:DescribeInstanceStatus"],
    ),
    ("ec2.rs", "terminate_instances", &["ec2:TerminateInstances"]),
    ("ec2.rs", "create_tags", &["ec2:CreateTags"]),
    ("ssm.rs", "get_parameter", &["ssm:GetParameter"]),
    (
        "iam.rs",
        "get_instance_profile",
        &["iam:GetInstanceProfile"],
    ),
    // Created with tags.
    (
        "iam.rs",
        "create_instance_profile",
        &["iam:CreateInstanceProfile", "iam:TagInstanceProfile"],
    ),
    (
        "iam.rs",
        "add_role_to_instance_profile",
        &["iam:AddRoleToInstanceProfile", "iam:PassRole"],
    ),
    (
        "iam.rs",
        "remove_role_from_instance_profile",
        &["iam:RemoveRoleFromInstanceProfile"],
    ),
    (
        "iam.rs",
        "delete_instance_profile",
        &["iam:DeleteInstanceProfile"],
    ),
    // The Pricing API's GetProducts, reduced to on-demand prices.
    ("pricing.rs", "on_demand_prices", &["pricing:GetProducts"]),
    // The interruption queue (only with --interruption-queue).
    ("sqs.rs", "get_queue_url", &["sqs:GetQueueUrl"]),
    ("sqs.rs", "receive_message", &["sqs:ReceiveMessage"]),
    ("sqs.rs", "delete_message", &["sqs:DeleteMessage"]),
];

/// (port file, method) of every `async fn` in crates/aws/src/ports/*.rs (the port traits).
fn port_operations() -> BTreeSet<(String, String)> {
    let dir = repo_root().join("crates/aws/src/ports");
    let mut operations = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if !file.ends_with(".rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines() {
            let Some(rest) = line.trim_start().split_once("async fn ").map(|(_, r)| r) else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            operations.insert((file.clone(), name));
        }
    }
    operations
}

fn policy_actions() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo_root().join("deploy/iam-policy.json")).unwrap();
    let policy: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut actions = BTreeSet::new();
    for statement in policy["Statement"].as_array().unwrap() {
        assert_eq!(statement["Effect"], "Allow", "{statement}");
        assert!(statement.get("NotAction").is_none(), "{statement}");
        match &statement["Action"] {
            serde_json::Value::String(a) => {
                actions.insert(a.clone());
            }
            serde_json::Value::Array(list) => {
                actions.extend(list.iter().map(|a| a.as_str().unwrap().to_string()));
            }
            other => panic!("statement without Action: {other}"),
        }
    }
    actions
}

#[test]
fn iam_policy_grants_exactly_the_actions_the_cloud_ports_call() {
    let operations = port_operations();
    assert!(operations.len() >= 15, "parsed {operations:?}");
    let table: BTreeSet<(String, String)> = PORT_ACTIONS
        .iter()
        .map(|(f, m, _)| (f.to_string(), m.to_string()))
        .collect();
    let unmapped: Vec<_> = operations.difference(&table).collect();
    assert!(
        unmapped.is_empty(),
        "port operations without IAM actions (add them to deploy/iam-policy.json and PORT_ACTIONS): {unmapped:?}"
    );
    let stale: Vec<_> = table.difference(&operations).collect();
    assert!(
        stale.is_empty(),
        "PORT_ACTIONS names operations the ports no longer have: {stale:?}"
    );
    let needed: BTreeSet<String> = PORT_ACTIONS
        .iter()
        .flat_map(|(_, _, actions)| actions.iter().map(ToString::to_string))
        .collect();
    let granted = policy_actions();
    let missing: Vec<_> = needed.difference(&granted).collect();
    let unused: Vec<_> = granted.difference(&needed).collect();
    assert!(
        missing.is_empty() && unused.is_empty(),
        "deploy/iam-policy.json: missing {missing:?}; granted but unused {unused:?}"
    );
    assert!(
        granted.iter().all(|a| !a.contains('*')),
        "no wildcard actions"
    );
}

// ---------------------------------------------------------------------------------------------
// kustomize and kubectl

fn rendered() -> String {
    let out = Command::new(kubectl_binary())
        .arg("kustomize")
        .arg(repo_root().join("deploy"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize deploy/ failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects
        .iter()
        .filter(|o| o["kind"].as_str() == Some(kind))
        .collect()
}

#[test]
fn kustomization_renders_the_controller_deployment() {
    let objects = documents(&rendered());
    let kinds: BTreeSet<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    for kind in [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
    ] {
        assert!(kinds.contains(kind), "{kind} not rendered: {kinds:?}");
    }
    let crds: BTreeSet<&str> = find(&objects, "CustomResourceDefinition")
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str())
        .collect();
    assert_eq!(
        crds,
        BTreeSet::from([
            "ec2nodeclasses.karpenter.k8s.aws",
            "nodeclaims.karpenter.sh",
            "nodepools.karpenter.sh"
        ])
    );
    for object in &objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        let namespaced = !matches!(
            kind,
            "CustomResourceDefinition" | "ClusterRole" | "ClusterRoleBinding"
        );
        assert_eq!(
            object["metadata"]["namespace"].as_str(),
            namespaced.then_some(SYSTEM_NAMESPACE),
            "{kind} namespace"
        );
    }

    let account = find(&objects, "ServiceAccount")[0];
    let role_arn = account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
        .as_str()
        .unwrap();
    assert!(role_arn.starts_with("arn:aws:iam::"), "{role_arn}");

    let deployment = find(&objects, "Deployment")[0];
    assert_eq!(deployment["spec"]["replicas"].as_i64(), Some(2));
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"].as_str(), Some("driftwood"));
    assert_eq!(
        pod["priorityClassName"].as_str(),
        Some("system-cluster-critical")
    );
    assert!(pod["topologySpreadConstraints"].as_sequence().is_some());
    assert!(
        pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            .as_sequence()
            .is_some()
    );
    let container = &pod["containers"][0];
    assert_eq!(container["args"][0].as_str(), Some("controller"));
    let env: BTreeSet<&str> = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    for name in [
        "CLUSTER_NAME",
        "CLUSTER_ENDPOINT",
        "LOG_LEVEL",
        "FEATURE_GATES",
        "SYSTEM_NAMESPACE",
    ] {
        assert!(env.contains(name), "env {name} missing: {env:?}");
    }
    let system_namespace = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str() == Some("SYSTEM_NAMESPACE"))
        .unwrap();
    assert_eq!(
        system_namespace["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
        Some("metadata.namespace")
    );
    // The settings ConfigMap is referenced under its generated (hashed) name.
    let config_map = find(&objects, "ConfigMap")[0]["metadata"]["name"]
        .as_str()
        .unwrap();
    let cluster_name = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str() == Some("CLUSTER_NAME"))
        .unwrap();
    assert_eq!(
        cluster_name["valueFrom"]["configMapKeyRef"]["name"].as_str(),
        Some(config_map)
    );
    let ports: BTreeSet<i64> = container["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|p| p["containerPort"].as_i64())
        .collect();
    assert_eq!(ports, BTreeSet::from([8080, 8081]));
    assert_eq!(
        container["livenessProbe"]["httpGet"]["path"].as_str(),
        Some("/healthz")
    );
    assert_eq!(
        container["readinessProbe"]["httpGet"]["path"].as_str(),
        Some("/readyz")
    );
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"].as_bool(), Some(true));
    assert_eq!(security["runAsNonRoot"].as_bool(), Some(true));
    assert_eq!(security["allowPrivilegeEscalation"].as_bool(), Some(false));
    assert_eq!(security["capabilities"]["drop"][0].as_str(), Some("ALL"));
    assert!(
        container["resources"]["requests"]["memory"]
            .as_str()
            .is_some()
    );

    let pdb = find(&objects, "PodDisruptionBudget")[0];
    assert_eq!(pdb["spec"]["maxUnavailable"].as_i64(), Some(1));
    let service = find(&objects, "Service")[0];
    assert_eq!(service["spec"]["ports"][0]["port"].as_i64(), Some(8080));
}

/// Starts `driftwood sim serve` with `extra` arguments, writing its kubeconfig to `kubeconfig`.
pub fn sim_serve(kubeconfig: &Path, extra: &[&str]) -> Server {
    let log = std::fs::File::create(sim_serve_log(kubeconfig)).expect("sim serve's log file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_driftwood"))
        .args(["sim", "serve", "--port", "0", "--log-level", "info"])
        .args(extra)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("sim serve starts");
    let stdout = child.stdout.take().unwrap();
    let server = Server(child);
    let mut lines = BufReader::new(stdout).lines();
    lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.starts_with("export KUBECONFIG="))
        .expect("export line");
    std::thread::spawn(move || lines.for_each(drop));
    server
}

/// Where [`sim_serve`] writes the server's log (info level): beside `kubeconfig`, for a failing
/// test to show.
pub fn sim_serve_log(kubeconfig: &Path) -> std::path::PathBuf {
    kubeconfig.with_file_name("sim-serve.log")
}

#[test]
fn rendered_manifests_apply_with_server_dry_run_against_sim_serve() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let manifests = dir.path().join("driftwood.yaml");
    std::fs::write(&manifests, rendered()).unwrap();
    let _server = sim_serve(&kubeconfig, &[]);
    let out = Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", "--dry-run=server", "-f"])
        .arg(&manifests)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "kubectl apply --dry-run=server failed:\n{stdout}\n{stderr}"
    );
    let objects = documents(&std::fs::read_to_string(&manifests).unwrap());
    let applied = stdout
        .lines()
        .filter(|l| l.ends_with("(server dry run)"))
        .count();
    assert_eq!(applied, objects.len(), "{stdout}");
}

/// The rendered container's args and env (ConfigMap keys and the namespace resolved as the
/// kubelet would) are accepted by the binary: it gets past argument parsing to the point
/// where it connects to the cluster.
#[test]
fn the_binary_accepts_the_rendered_containers_args_and_env() {
    let objects = documents(&rendered());
    let config_map = find(&objects, "ConfigMap")[0];
    let config_map_name = config_map["metadata"]["name"].as_str().unwrap();
    let deployment = find(&objects, "Deployment")[0];
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let mut command = Command::new(env!("CARGO_BIN_EXE_driftwood"));
    command.env_clear();
    for arg in container["args"].as_sequence().unwrap() {
        command.arg(arg.as_str().unwrap());
    }
    for var in container["env"].as_sequence().unwrap() {
        let name = var["name"].as_str().unwrap();
        let value = if let Some(value) = var["value"].as_str() {
            value.to_string()
        } else if let Some(key) = var["valueFrom"]["configMapKeyRef"]["key"].as_str() {
            assert_eq!(
                var["valueFrom"]["configMapKeyRef"]["name"].as_str(),
                Some(config_map_name),
                "{name}"
            );
            let optional = var["valueFrom"]["configMapKeyRef"]["optional"].as_bool() == Some(true);
            match config_map["data"][key].as_str() {
                Some(value) => value.to_string(),
                // As the kubelet does: a missing optional key leaves the variable unset.
                None if optional => continue,
                None => panic!("ConfigMap has no key {key} for {name}"),
            }
        } else if var["valueFrom"]["fieldRef"]["fieldPath"].as_str() == Some("metadata.namespace") {
            SYSTEM_NAMESPACE.to_string()
        } else if var["valueFrom"]["fieldRef"]["fieldPath"].as_str() == Some("metadata.name") {
            "driftwood-6f7c9d8b5-x2k4q".to_string()
        } else {
            panic!("env {name}: unexpected source {var:?}");
        };
        command.env(name, value);
    }
    // No cluster here (no in-cluster service account, no KUBECONFIG): the binary parsed
    // everything and stops where it connects to the Kubernetes API.
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("connecting to the Kubernetes API") && !stderr.contains("Usage:"),
        "expected the binary to get as far as connecting to the cluster, got:\n{stderr}"
    );
}
