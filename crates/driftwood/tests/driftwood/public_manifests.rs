//! Issue 18: every NodePool/EC2NodeClass of the public Karpenter manifests (the AWS provider's
//! examples/v1 and the Karpenter blueprints; the corpus and its upstream paths are in
//! tests/data/public-manifests/README.md) provisions on the embedded cluster with a small
//! workload that selects it, and stays put: the same Nodes, NodeClaims and pods at the end, no
//! NodeClaim Drifted or disrupting, no disruption event, the safety invariants held every
//! second. The suite stays 30 minutes of virtual time (six times the corpus's longest
//! `consolidateAfter`, 5m, and thirty node-class refreshes); the long run stays 2 h:
//! `DRIFTWOOD_PUBLIC_MANIFESTS_STAY_MINUTES=120` (README gives the command).
//!
//! Cases listed in `KNOWN_GAPS` are expected to fail today; the test fails when one of them
//! passes (take it off the list) or when any other case fails. Cases in `UPSTREAM_BROKEN` are
//! manifests Karpenter v1.14 itself refuses as written; they must fail the same way. One test
//! runs every case, each on a fresh cluster with its own virtual clock (up to 4 at a time), and
//! prints `public manifests: N passed, M failed`. `DRIFTWOOD_PUBLIC_MANIFESTS=<part of a case
//! name>` runs only the matching cases; `DRIFTWOOD_PUBLIC_MANIFESTS_VERBOSE=1` prints each
//! cluster and the controllers' events once provisioning has settled.

use super::e2e::harness::{Harness, describe, pod_ready};
use driftwood_api::condition::Conditions;
use driftwood_api::wellknown::{
    CONDITION_DISRUPTION_REASON, CONDITION_DRIFTED, CONDITION_INITIALIZED, CONDITION_READY,
    LABEL_NODEPOOL,
};
use driftwood_controller::Settings;
use driftwood_controller::state::Snapshot;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The cluster's Kubernetes version, unless the case's `kubernetes-version` file names another
/// (the walkthrough harness's version).
const KUBERNETES_VERSION: &str = "1.29";
/// How long the workload may take to be Running (virtual time).
const PROVISION_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// How long nothing may change once it is (virtual time), unless
/// `DRIFTWOOD_PUBLIC_MANIFESTS_STAY_MINUTES` says otherwise.
const STAY_PUT: Duration = Duration::from_secs(30 * 60);

fn stay_put() -> Duration {
    std::env::var("DRIFTWOOD_PUBLIC_MANIFESTS_STAY_MINUTES")
        .ok()
        .and_then(|m| m.parse::<u64>().ok())
        .map_or(STAY_PUT, |m| Duration::from_secs(m * 60))
}
/// Observation step while staying put: the controllers' timers fire on their own schedule
/// whatever the step; the step only sets how often the invariants are checked.
const STAY_PUT_STEP: Duration = Duration::from_secs(1);

/// Cases expected to fail today for a gap in driftwood or its simulation: (case, cause, a piece
/// of the failure message that shows it). Take a case off when it passes (the test fails until
/// then). A known gap that fails for another reason is noted in the summary.
const KNOWN_GAPS: &[(&str, &str, &str)] = &[(
    "blueprints/static-nodepool",
    "NodePool spec.replicas (static capacity) not supported",
    "static capacity (spec.replicas) is not supported by driftwood",
)];

/// Cases Karpenter v1.14 itself refuses, or cannot provision, as upstream wrote them: (case,
/// why, a piece of the failure message that shows it). They must fail that way; the test fails
/// if one passes or fails otherwise.
const UPSTREAM_BROKEN: &[(&str, &str, &str)] = &[
    (
        "provider-examples-v1/windows-custom-userdata",
        "its nodeClassRef.group is karpenter.k8s.aws/v1; Karpenter v1.14's NodePool CRD requires \
         the group to match ^[^/]*$, so kubectl apply is refused",
        "nodeClassRef.group in body should match '^[^/]*$'",
    ),
    (
        "blueprints/userdata",
        "alias al2023@2023.0.20230222 names no EKS AMI release (those are vYYYYMMDD), so Karpenter \
         finds no SSM parameter for it and the EC2NodeClass never resolves an AMI",
        "no AMI matched amiSelectorTerms[0] {alias: al2023@2023.0.20230222}",
    ),
];

/// Events the controllers record when they disrupt (or try to disrupt) a node.
fn is_disruption_event(reason: &str) -> bool {
    reason.starts_with("Disruption")
        || matches!(
            reason,
            "Drifted"
                | "Evicted"
                | "FailedDraining"
                | "Expired"
                | "Empty"
                | "Underutilized"
                | "WaitingOnNodeClaimTermination"
        )
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/public-manifests")
}

/// Every case directory (`<source>/<case>`), sorted.
fn cases() -> Vec<String> {
    let mut out = Vec::new();
    let root = corpus();
    for source in std::fs::read_dir(&root).expect("the corpus directory") {
        let source = source.expect("a corpus entry").path();
        if !source.is_dir() {
            continue;
        }
        for case in std::fs::read_dir(&source).expect("a source directory") {
            let case = case.expect("a case entry").path();
            if case.join("manifests.yaml").is_file() {
                let rel = case.strip_prefix(&root).expect("under the corpus");
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

/// The placeholders of the upstream manifests, filled as their instructions say (the
/// walkthrough's values for the cluster name, node role and AMI ids), in this order.
fn placeholders(h: &Harness, kubernetes_version: &str) -> Vec<(String, String)> {
    let cluster = h.embedded.cluster.options().cluster_name.clone();
    let role = format!("KarpenterNodeRole-{cluster}");
    let mut out = vec![
        // examples/v1's placeholder AMI ids: the amd64 and arm64 EKS AMIs.
        (
            "id: ami-123".to_string(),
            "id: <<AMD64PREVAMI>>".to_string(),
        ),
        (
            "id: ami-456".to_string(),
            "id: <<ARM64PREVAMI>>".to_string(),
        ),
    ];
    // The walkthrough's AMI ids are the AL2 ones, published up to Kubernetes 1.32.
    out.extend(
        h.embedded
            .walkthrough_values(kubernetes_version)
            .unwrap_or_default(),
    );
    out.extend([
        ("<<CLUSTER_NAME>>".to_string(), cluster.clone()),
        ("<<KARPENTER_NODE_IAM_ROLE_NAME>>".to_string(), role.clone()),
        ("${CLUSTER_NAME}".to_string(), cluster.clone()),
        ("$CLUSTER_NAME".to_string(), cluster.clone()),
        ("$KARPENTER_NODE_IAM_ROLE_NAME".to_string(), role.clone()),
        ("${module.eks.cluster_name}".to_string(), cluster),
        ("${module.karpenter.node_iam_role_name}".to_string(), role),
        ("<<AZ>>".to_string(), "us-west-2a".to_string()),
        ("<<AWS_REGION>>".to_string(), "us-west-2".to_string()),
    ]);
    out
}

fn fill(text: &str, values: &[(String, String)]) -> String {
    values
        .iter()
        .fold(text.to_string(), |t, (k, v)| t.replace(k.as_str(), v))
}

/// (kind, name, object) of each object in a YAML stream.
fn objects(text: &str) -> Result<Vec<(String, String, serde_json::Value)>, String> {
    driftwood_api::manifest::split_documents(text)
        .into_iter()
        .map(|doc| {
            let doc = doc.map_err(|e| format!("parsing: {e}"))?;
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            let name = doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            Ok((kind, name, doc))
        })
        .collect()
}

/// A Deployment of the workload: its name, replicas and pod selector.
struct Workload {
    name: String,
    replicas: usize,
    labels: BTreeMap<String, String>,
}

fn workloads(text: &str) -> Result<Vec<Workload>, String> {
    Ok(objects(text)?
        .into_iter()
        .filter(|(kind, _, _)| kind == "Deployment")
        .map(|(_, name, doc)| Workload {
            name,
            replicas: doc["spec"]["replicas"]
                .as_u64()
                .and_then(|r| usize::try_from(r).ok())
                .unwrap_or(1),
            labels: doc["spec"]["selector"]["matchLabels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect())
}

/// The workload's pods: (pod, node, pool of the node, running and ready).
fn workload_pods(s: &Snapshot, workloads: &[Workload]) -> Vec<(String, String, String, bool)> {
    let mut out = Vec::new();
    for pod in s.store.pods.values() {
        let labels = pod.labels().clone();
        if !workloads
            .iter()
            .any(|w| w.labels.iter().all(|(k, v)| labels.get(k) == Some(v)))
        {
            continue;
        }
        if pod.is_terminating() {
            continue;
        }
        let node = pod
            .node_name
            .as_deref()
            .map(str::to_string)
            .unwrap_or_default();
        let pool = s
            .store
            .nodes
            .get(&node)
            .and_then(|n| n.metadata.labels.as_ref()?.get(LABEL_NODEPOOL).cloned())
            .unwrap_or_default();
        let running = pod.phase.map(|phase| phase.as_str()) == Some("Running") && pod_ready(pod);
        out.push((pod.name.to_string(), node, pool, running));
    }
    out.sort();
    out
}

/// Whether every replica is Running and Ready on a node of one of `pools`.
fn all_running(s: &Snapshot, workloads: &[Workload], pools: &BTreeSet<String>) -> bool {
    let pods = workload_pods(s, workloads);
    let wanted: usize = workloads.iter().map(|w| w.replicas).sum();
    pods.len() == wanted
        && pods
            .iter()
            .all(|(_, _, pool, running)| *running && pools.contains(pool))
}

/// Whether provisioning has settled: the workload running and every NodeClaim initialized with
/// its Node (a NodeClaim launched for a pod that then landed elsewhere is still coming up).
fn settled(s: &Snapshot, workloads: &[Workload], pools: &BTreeSet<String>) -> bool {
    all_running(s, workloads, pools)
        && s.store.nodeclaims.values().all(|c| {
            c.metadata.deletion_timestamp.is_none()
                && c.is_true(CONDITION_INITIALIZED)
                && s.node_of(c).is_some()
        })
}

/// What stays put: NodeClaim names, Node names, and (pod, node) of the workload.
#[derive(Debug, PartialEq, Eq)]
struct Placement {
    nodeclaims: BTreeSet<String>,
    nodes: BTreeSet<String>,
    pods: BTreeSet<(String, String)>,
}

fn placement(s: &Snapshot, workloads: &[Workload]) -> Placement {
    Placement {
        nodeclaims: s.store.nodeclaims.keys().cloned().collect(),
        nodes: s.store.nodes.keys().cloned().collect(),
        pods: workload_pods(s, workloads)
            .into_iter()
            .map(|(pod, node, _, _)| (pod, node))
            .collect(),
    }
}

/// The first sign of a disruption in a snapshot: a NodeClaim Drifted, disrupting or deleted.
fn disruption_sign(s: &Snapshot) -> Option<String> {
    for (name, claim) in &s.store.nodeclaims {
        if let Some(c) = claim.condition(CONDITION_DRIFTED).filter(|c| c.is_true()) {
            return Some(format!(
                "nodeclaim {name} Drifted ({}: {})",
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default()
            ));
        }
        if let Some(c) = claim.condition(CONDITION_DISRUPTION_REASON) {
            return Some(format!(
                "nodeclaim {name} disrupting ({})",
                c.reason.clone().unwrap_or_default()
            ));
        }
        if claim.metadata.deletion_timestamp.is_some() {
            return Some(format!("nodeclaim {name} deleted"));
        }
    }
    None
}

/// The controllers' events (every namespace) as `reason about kind/name: note`.
async fn controller_events(h: &Harness) -> Vec<(String, String)> {
    Api::<Event>::all(h.embedded.cluster.client())
        .list(&ListParams::default())
        .await
        .map(|list| list.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.reporting_controller.as_deref()
                == Some(driftwood_controller::events::REPORTING_CONTROLLER)
        })
        .map(|e| {
            let about = e
                .regarding
                .as_ref()
                .map(|r| {
                    format!(
                        "{}/{}",
                        r.kind.clone().unwrap_or_default(),
                        r.name.clone().unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            let reason = e.reason.clone().unwrap_or_default();
            let line = format!(
                "{reason} about {about}: {}",
                e.note.clone().unwrap_or_default()
            );
            (reason, line)
        })
        .collect()
}

/// Runs the invariants check, turning its panic into an error.
fn invariants(h: &mut Harness, s: &Snapshot) -> Result<(), String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.check_invariants(s))).map_err(
        |panic| {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
                .unwrap_or_default();
            format!(
                "safety invariant broken: {}",
                message.lines().next().unwrap_or_default()
            )
        },
    )
}

/// `Type=Status(reason: message)` of each condition that is not True.
fn not_true<'a>(
    conditions: impl Iterator<Item = &'a driftwood_api::condition::Condition>,
) -> Vec<String> {
    conditions
        .filter(|c| c.status != "True")
        .map(|c| {
            format!(
                "{}={}({}: {})",
                c.type_,
                c.status,
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default()
            )
        })
        .collect()
}

/// Why a pending workload is not running yet: the EC2NodeClass conditions, the NodeClaims'
/// conditions, and the controllers' events (the first lines of each).
async fn why_not_running(h: &Harness, s: &Snapshot, workloads: &[Workload]) -> String {
    let mut out = Vec::new();
    for (name, class) in &s.store.nodeclasses {
        if !class.is_true(CONDITION_READY) {
            let false_conditions =
                not_true(class.status.iter().flat_map(|st| st.conditions.iter()));
            out.push(format!(
                "EC2NodeClass {name} not Ready: {}",
                if false_conditions.is_empty() {
                    "no status".to_string()
                } else {
                    false_conditions.join(" ")
                }
            ));
        }
    }
    for (name, claim) in &s.store.nodeclaims {
        let pending = not_true(claim.status.iter().flat_map(|st| st.conditions.iter()));
        if !pending.is_empty() {
            out.push(format!("NodeClaim {name}: {}", pending.join(" ")));
        }
    }
    let pods = workload_pods(s, workloads);
    let running: Vec<String> = workloads
        .iter()
        .map(|w| {
            let up = pods
                .iter()
                .filter(|p| p.3 && p.0.starts_with(&format!("{}-", w.name)))
                .count();
            format!("{}: {up}/{} pods running", w.name, w.replicas)
        })
        .collect();
    out.push(format!(
        "{}; {} nodeclaims, {} nodes",
        running.join(", "),
        s.store.nodeclaims.len(),
        s.store.nodes.len()
    ));
    // One line per distinct (reason, note), NodeClaim names aside.
    let mut seen = BTreeSet::new();
    let mut more = 0;
    for (reason, line) in controller_events(h).await {
        let note = line.split_once(": ").map_or(line.as_str(), |(_, n)| n);
        let key = format!("{reason} {}", without_nodeclaim_names(s, note));
        if !seen.insert(key) {
            continue;
        }
        if seen.len() > 8 {
            more += 1;
        } else {
            out.push(format!("event {line}"));
        }
    }
    if more > 0 {
        out.push(format!("({more} more distinct events)"));
    }
    // The scheduler's last word on a pending pod.
    if let Ok(list) = Api::<Event>::namespaced(h.embedded.cluster.client(), "default")
        .list(&ListParams::default())
        .await
        && let Some(note) = list
            .items
            .iter()
            .rev()
            .find(|e| e.reason.as_deref() == Some("FailedScheduling"))
            .and_then(|e| e.note.clone())
    {
        out.push(format!("FailedScheduling: {note}"));
    }
    out.join("\n    ")
}

/// `text` without the names of NodeClaims, so that one message repeated per NodeClaim reads as one.
fn without_nodeclaim_names(s: &Snapshot, text: &str) -> String {
    text.split_whitespace()
        .filter(|word| {
            let bare = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '-');
            !s.store.nodeclaims.contains_key(bare)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One case: provision, then [`stay_put`] of virtual time with nothing changing.
async fn run_case(case: &str) -> Result<String, String> {
    let dir = corpus().join(case);
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).map_err(|e| format!("reading {name}: {e}"))
    };
    let manifests = read("manifests.yaml")?;
    let workload = read("workload.yaml")?;
    let pools: BTreeSet<String> = objects(&manifests)?
        .into_iter()
        .filter(|(kind, _, _)| kind == "NodePool")
        .map(|(_, name, _)| name)
        .collect();
    let workloads = workloads(&workload)?;
    if pools.is_empty() || workloads.is_empty() {
        return Err("the case has no NodePool or no Deployment".to_string());
    }

    let version = std::fs::read_to_string(dir.join("kubernetes-version"))
        .map_or_else(|_| KUBERNETES_VERSION.to_string(), |v| v.trim().to_string());
    let wall = Instant::now();
    let mut h = Harness::start(&version, Settings::default()).await;
    let values = placeholders(&h, &version);
    h.embedded
        .apply_yaml(&fill(&manifests, &values))
        .await
        .map_err(|e| format!("applying manifests.yaml: {e:#}"))?;
    h.embedded
        .apply_yaml(&fill(&workload, &values))
        .await
        .map_err(|e| format!("applying workload.yaml: {e:#}"))?;

    // Provisioned: every replica Running on a node of the case's NodePools.
    // A launch that keeps failing makes a new NodeClaim each time: stop early on such churn.
    let replicas: usize = workloads.iter().map(|w| w.replicas).sum();
    let mut claims_seen = BTreeSet::new();
    let mut provisioned_after = None;
    for second in 1..=PROVISION_TIMEOUT.as_secs() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let s = h.snapshot();
        invariants(&mut h, &s)?;
        claims_seen.extend(s.store.nodeclaims.keys().cloned());
        if settled(&s, &workloads, &pools) {
            provisioned_after = Some(second);
            break;
        }
        if claims_seen.len() > 2 * replicas + 4 {
            return Err(format!(
                "{} NodeClaims created for {replicas} pods in {second}s (launches keep failing):\n    {}",
                claims_seen.len(),
                why_not_running(&h, &s, &workloads).await
            ));
        }
    }
    let s = h.snapshot();
    let Some(provisioned_after) = provisioned_after else {
        return Err(format!(
            "workload not running on {pools:?} after {PROVISION_TIMEOUT:?} of virtual time:\n    {}",
            why_not_running(&h, &s, &workloads).await
        ));
    };
    let provision_wall = wall.elapsed().as_secs_f64();
    let stay_started = Instant::now();
    let before = placement(&s, &workloads);
    if std::env::var_os("DRIFTWOOD_PUBLIC_MANIFESTS_VERBOSE").is_some() {
        println!("{case} settled:\n{}", describe(&s));
        for (_, line) in controller_events(&h).await {
            println!("{case} event {line}");
        }
    }
    let events_before: BTreeSet<String> = controller_events(&h)
        .await
        .into_iter()
        .map(|(_, line)| line)
        .collect();

    // Quiet time.
    let stay = stay_put();
    for _ in 0..stay.as_secs() / STAY_PUT_STEP.as_secs() {
        tokio::time::sleep(STAY_PUT_STEP).await;
        let s = h.snapshot();
        invariants(&mut h, &s)?;
        if let Some(sign) = disruption_sign(&s) {
            let at = h.embedded.cluster.clock().now();
            return Err(format!("{sign} at {at}\n{}", describe(&s)));
        }
    }
    let s = h.snapshot();
    let after = placement(&s, &workloads);
    let mut problems = Vec::new();
    if after.nodeclaims != before.nodeclaims {
        problems.push(format!(
            "nodeclaims changed: {:?} -> {:?}",
            before.nodeclaims, after.nodeclaims
        ));
    }
    if after.nodes != before.nodes {
        problems.push(format!(
            "nodes changed: {:?} -> {:?}",
            before.nodes, after.nodes
        ));
    }
    if after.pods != before.pods {
        problems.push(format!(
            "workload pods changed: {:?} -> {:?}",
            before.pods, after.pods
        ));
    }
    if !all_running(&s, &workloads, &pools) {
        problems.push("workload pods no longer all running".to_string());
    }
    let disruption_events: Vec<String> = controller_events(&h)
        .await
        .into_iter()
        .filter(|(reason, line)| is_disruption_event(reason) && !events_before.contains(line))
        .map(|(_, line)| line)
        .collect();
    if !disruption_events.is_empty() {
        problems.push(format!("disruption events: {disruption_events:?}"));
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok(format!(
        "{} nodeclaims, {} pods, settled after {provisioned_after}s of virtual time \
         ({provision_wall:.1}s wall), stayed put {}m ({:.1}s wall)",
        before.nodeclaims.len(),
        before.pods.len(),
        stay.as_secs() / 60,
        stay_started.elapsed().as_secs_f64()
    ))
}

/// Runs one case on a fresh single-threaded runtime with paused (virtual) time.
fn run_case_on_own_runtime(case: &str) -> Result<String, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a tokio runtime")
        .block_on(run_case(case))
}

/// Every case, on up to 4 threads (each case on its own runtime and virtual clock); the
/// results in case order, with each case's wall time.
fn run_cases(cases: &[String]) -> Vec<(String, Result<String, String>, f64)> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(case) = cases.get(i) else { break };
                    let started = Instant::now();
                    let result = run_case_on_own_runtime(case);
                    let wall = started.elapsed().as_secs_f64();
                    match &result {
                        Ok(summary) => println!("PASS {case} ({wall:.1}s): {summary}"),
                        Err(reason) => println!("FAIL {case} ({wall:.1}s): {reason}"),
                    }
                    results
                        .lock()
                        .expect("results")
                        .push((case.clone(), result, wall));
                }
            });
        }
    });
    let mut results = results.into_inner().expect("results");
    results.sort_by(|a, b| a.0.cmp(&b.0));
    results
}

#[test]
fn public_manifests_provision_and_stay_put() {
    let only = std::env::var("DRIFTWOOD_PUBLIC_MANIFESTS").ok();
    let all = cases();
    assert!(!all.is_empty(), "no case under {}", corpus().display());
    for (listed, _, _) in KNOWN_GAPS.iter().chain(UPSTREAM_BROKEN) {
        assert!(
            all.iter().any(|c| c == listed),
            "{listed} is listed in KNOWN_GAPS or UPSTREAM_BROKEN but is not a case"
        );
    }
    let selected: Vec<String> = all
        .into_iter()
        .filter(|c| only.as_deref().is_none_or(|o| c.contains(o)))
        .collect();
    let started = Instant::now();
    let results = run_cases(&selected);
    let wall = started.elapsed().as_secs_f64();

    let (mut passed, mut failed) = (0, Vec::new());
    let mut problems = Vec::new();
    for (case, result, _) in &results {
        let gap = KNOWN_GAPS.iter().find(|(c, _, _)| c == case);
        let broken = UPSTREAM_BROKEN.iter().find(|(c, _, _)| c == case);
        match (result, gap, broken) {
            (Ok(_), None, None) => passed += 1,
            (Ok(_), Some((_, cause, _)), _) => {
                passed += 1;
                problems.push(format!(
                    "{case} passes but KNOWN_GAPS lists it ({cause}): take it off the list"
                ));
            }
            (Ok(_), None, Some((_, why, _))) => {
                passed += 1;
                problems.push(format!(
                    "{case} passes, but Karpenter v1.14 does not accept it as upstream wrote it \
                     ({why}): driftwood should fail the same way"
                ));
            }
            (Err(reason), None, None) => {
                failed.push(format!("{case}: {reason}"));
                problems.push(format!("{case} fails: {reason}"));
            }
            (Err(reason), Some((_, cause, shows)), _) => {
                let note = if reason.contains(shows) {
                    String::new()
                } else {
                    format!(" [NOTE: fails differently from the known gap, which shows {shows:?}]")
                };
                failed.push(format!("{case} (known gap: {cause}){note}: {reason}"));
            }
            (Err(reason), None, Some((_, why, shows))) => {
                if reason.contains(shows) {
                    failed.push(format!("{case} (broken upstream: {why}): {reason}"));
                } else {
                    failed.push(format!("{case}: {reason}"));
                    problems.push(format!(
                        "{case} fails, but not as Karpenter would ({why}; expected {shows:?}): \
                         {reason}"
                    ));
                }
            }
        }
    }
    println!(
        "public manifests: {passed} passed, {} failed ({wall:.1}s)",
        failed.len()
    );
    for f in &failed {
        println!("  failed {}", f.lines().next().unwrap_or_default());
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
