//! Property tests of the embedded API server over its HTTP listener (raw HTTP/1.1 on a TCP
//! socket, so paths and bodies reach it exactly as generated):
//!
//! * mutated NodePool, EC2NodeClass, Pod, Node, Deployment and PodDisruptionBudget bodies
//!   (fields deleted, values replaced by other JSON types, huge and negative numbers, empty,
//!   10k-character and unicode strings, duplicated list items, deep nesting, broken text) sent
//!   as create, update, merge / JSON / strategic-merge patch and server-side apply (to the
//!   object or its `/status`), with `fieldValidation` Strict, Warn, Ignore, none or garbage,
//!   and sometimes `dryRun=All`;
//! * arbitrary methods, paths, query strings (selectors, resourceVersion, limit, continue,
//!   watch, timeoutSeconds, ... with garbage values), content types and bodies of random bytes.
//!
//! For every request: an answer within a bounded time; a refusal is a well-formed `Status`
//! (kind Status, apiVersion v1, status Failure, `code` equal to the HTTP status, a message),
//! never a 5xx; a refused (or dry-run) write stores nothing (the server's resourceVersion does
//! not move, a refused create's name is 404, a refused update leaves the object's
//! resourceVersion as it was); a NodePool or EC2NodeClass the server stores passes
//! `driftwood validate` too. Afterwards valid creates still work.
//!
//! 256 cases per property by default (about 2 s in a debug build). A longer campaign (5,000
//! cases: about 30 s), with the answers tallied by kind, write and code:
//!
//! ```text
//! PROPTEST_CASES=5000 cargo test --locked -p driftwood-sim --test apiserver -- fuzz --nocapture
//! ```
//!
//! A failure prints proptest's minimized case; keep it as a plain test at the end of this file.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use driftwood_sim::ApiServer;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

use crate::raw_http::{Reply, exchange};
use crate::server;

/// Every request must be answered within this (debug build, 2 cores, other tests running).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Cases per property: `PROPTEST_CASES`, else 256.
fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    // A fixed seed in the default suite, so that a run is the same run everywhere; a longer
    // campaign (PROPTEST_CASES set) explores new inputs each time unless PROPTEST_RNG_SEED is
    // set too.
    let rng_seed = match std::env::var("PROPTEST_CASES") {
        Ok(_) => Config::default().rng_seed,
        Err(_) => proptest::test_runner::RngSeed::Fixed(0x0d21_f700d),
    };
    Config {
        cases,
        failure_persistence: None,
        rng_seed,
        ..Config::default()
    }
}

/// Sends a request; a failure to answer in time is a test failure.
async fn send(
    address: SocketAddr,
    method: &str,
    target: &[u8],
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Reply, TestCaseError> {
    let shown = String::from_utf8_lossy(target);
    match tokio::time::timeout(
        REQUEST_TIMEOUT,
        exchange(
            address,
            method,
            target,
            &content_type
                .map(|c| ("Content-Type", c))
                .into_iter()
                .collect::<Vec<_>>(),
            body,
        ),
    )
    .await
    {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(error)) => Err(TestCaseError::fail(format!(
            "{method} {shown}: no answer: {error}"
        ))),
        Err(_) => Err(TestCaseError::fail(format!(
            "{method} {shown}: no answer within {REQUEST_TIMEOUT:?}"
        ))),
    }
}

/// A refusal must be a well-formed Status, and never a server error.
fn check_reply(what: &str, method: &str, reply: &Reply) -> Result<(), TestCaseError> {
    if (200..300).contains(&reply.code) || method == "HEAD" || reply.streaming {
        return Ok(());
    }
    prop_assert!(
        reply.code < 500,
        "{what}: server error {}: {}",
        reply.code,
        String::from_utf8_lossy(&reply.body)
    );
    prop_assert!(
        reply
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/json")),
        "{what}: {} without a JSON content type: {:?}",
        reply.code,
        reply.headers
    );
    let status: Value = serde_json::from_slice(&reply.body).map_err(|e| {
        TestCaseError::fail(format!(
            "{what}: {} body is not JSON ({e}): {:?}",
            reply.code,
            String::from_utf8_lossy(&reply.body)
        ))
    })?;
    prop_assert_eq!(&status["kind"], "Status", "{}: {}", what, status);
    prop_assert_eq!(&status["apiVersion"], "v1", "{}: {}", what, status);
    prop_assert_eq!(&status["status"], "Failure", "{}: {}", what, status);
    prop_assert_eq!(
        status["code"].as_u64(),
        Some(u64::from(reply.code)),
        "{}: {}",
        what,
        status
    );
    let message = status["message"].as_str().unwrap_or_default();
    prop_assert!(!message.is_empty(), "{what}: no message: {status}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Generated values and mutations (as in crates/api/tests/validation/fuzz.rs).

/// A stand-in string replaced, after serialization, by a number literal too large for any
/// integer or float.
const HUGE: &str = "__driftwood_fuzz_huge__";

fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        Just(json!(-1)),
        Just(json!(i64::MIN)),
        Just(json!(u64::MAX)),
        Just(json!(2_147_483_648_i64)),
        Just(json!(1e308)),
        Just(json!(HUGE)),
        Just(json!("")),
        "\\PC{0,40}".prop_map(Value::String),
        "[a-z0-9%.*@/ -]{0,12}".prop_map(Value::String),
        (any::<char>(), 10_000usize..10_050).prop_map(|(c, n)| json!(c.to_string().repeat(n))),
        Just(json!("150%")),
        Just(json!("100Gi")),
        Just(json!("-1")),
        Just(json!("1h")),
        Just(json!("NoSchedule")),
        Just(json!("delete")),
        Just(json!("replace")),
        Just(json!("2026-01-01T00:00:00Z")),
        Just(
            json!([{"apiVersion": "v1", "kind": "Pod", "name": "seed", "uid": "x", "controller": true}])
        ),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn nested(depth: usize, array: bool) -> Value {
    let mut value = json!("bottom");
    for _ in 0..depth {
        value = if array {
            json!([value])
        } else {
            json!({ "a": value })
        };
    }
    value
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete,
    Replace(Value),
    Nest { depth: usize, array: bool },
    DuplicateItem,
    InsertKey(String, Value),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => Just(Mutation::Delete),
        6 => any_value().prop_map(Mutation::Replace),
        1 => (1usize..300, any::<bool>()).prop_map(|(depth, array)| Mutation::Nest { depth, array }),
        2 => Just(Mutation::DuplicateItem),
        3 => (key(), any_value()).prop_map(|(k, v)| Mutation::InsertKey(k, v)),
    ]
}

/// Keys to add: unknown ones, metadata the server owns or checks, strategic-merge directives.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => "[a-zA-Z]{1,12}",
        1 => "\\PC{0,8}",
        2 => prop::sample::select(&[
            "resourceVersion",
            "uid",
            "generation",
            "generateName",
            "namespace",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "finalizers",
            "ownerReferences",
            "managedFields",
            "labels",
            "annotations",
            "status",
            "$patch",
            "$retainKeys",
            "$setElementOrder/containers",
            "$deleteFromPrimitiveList/finalizers",
        ][..])
        .prop_map(str::to_string),
    ]
}

fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                pointers(child, format!("{at}/{escaped}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                pointers(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

fn split_pointer(pointer: &str) -> Option<(&str, String)> {
    let (parent, last) = pointer.rsplit_once('/')?;
    Some((parent, last.replace("~1", "/").replace("~0", "~")))
}

fn pick_pointer(value: &Value, selector: usize) -> String {
    let mut all = Vec::new();
    pointers(value, String::new(), &mut all);
    all[selector % all.len()].clone()
}

fn apply(value: &mut Value, selector: usize, mutation: &Mutation) {
    let pointer = pick_pointer(value, selector);
    match mutation {
        Mutation::Delete => {
            if let Some((parent, last)) = split_pointer(&pointer) {
                match value.pointer_mut(parent) {
                    Some(Value::Object(map)) => {
                        map.remove(&last);
                    }
                    Some(Value::Array(items)) => {
                        if let Ok(i) = last.parse::<usize>()
                            && i < items.len()
                        {
                            items.remove(i);
                        }
                    }
                    _ => {}
                }
            }
        }
        Mutation::Replace(new) => {
            if let Some(target) = value.pointer_mut(&pointer) {
                *target = new.clone();
            }
        }
        Mutation::Nest { depth, array } => {
            if let Some(target) = value.pointer_mut(&pointer) {
                *target = nested(*depth, *array);
            }
        }
        Mutation::DuplicateItem => {
            let (list, index) = match value.pointer(&pointer) {
                Some(Value::Array(_)) => (pointer.clone(), 0),
                _ => match split_pointer(&pointer) {
                    Some((parent, last)) => (parent.to_string(), last.parse().unwrap_or(0)),
                    None => return,
                },
            };
            if let Some(Value::Array(items)) = value.pointer_mut(&list)
                && let Some(item) = items.get(index).cloned()
            {
                items.push(item);
            }
        }
        Mutation::InsertKey(key, new) => match value.pointer_mut(&pointer) {
            Some(Value::Object(map)) => {
                map.insert(key.clone(), new.clone());
            }
            Some(Value::Array(items)) => items.push(new.clone()),
            _ => {}
        },
    }
}

#[derive(Debug, Clone)]
enum TextEdit {
    None,
    Insert(usize, String),
    Truncate(usize),
}

fn noise() -> impl Strategy<Value = String> {
    prop_oneof![
        "[-:{}\\[\\],'\"#&*!|>%@` \n\ta-z0-9]{0,30}",
        Just("\n---\n".to_string()),
        Just("&a [*a, *a]".to_string()),
        Just("\u{0}\u{1}\u{ff}".to_string()),
        Just("}}}}".to_string()),
    ]
}

fn text_edit() -> impl Strategy<Value = TextEdit> {
    prop_oneof![
        8 => Just(TextEdit::None),
        1 => (any::<usize>(), noise()).prop_map(|(at, s)| TextEdit::Insert(at, s)),
        1 => any::<usize>().prop_map(TextEdit::Truncate),
    ]
}

fn render(value: &Value, yaml: bool, edit: &TextEdit) -> Vec<u8> {
    let text = if yaml {
        serde_yaml::to_string(value).unwrap()
    } else {
        serde_json::to_string(value).unwrap()
    };
    let text = text
        .replace(&format!("\"{HUGE}\""), "1e400")
        .replace(HUGE, "123456789012345678901234567890123456789");
    let at = |i: usize| {
        let mut i = i % (text.len() + 1);
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    match edit {
        TextEdit::None => text.into_bytes(),
        TextEdit::Insert(i, noise) => {
            let i = at(*i);
            format!("{}{noise}{}", &text[..i], &text[i..]).into_bytes()
        }
        TextEdit::Truncate(i) => text.as_bytes()[..at(*i)].to_vec(),
    }
}

// ---------------------------------------------------------------------------------------------
// The kinds and their valid objects.

struct Kind {
    name: &'static str,
    collection: &'static str,
    object: fn(&str) -> Value,
}

fn nodepool(name: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "weight": 10,
            "limits": {"cpu": "1000", "memory": "1000Gi"},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s",
                "budgets": [{"nodes": "10%"}, {"nodes": "0", "schedule": "0 9 * * *", "duration": "8h", "reasons": ["Drifted"]}]},
            "template": {
                "metadata": {"labels": {"intent": "apps"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "expireAfter": "720h",
                    "taints": [{"key": "dedicated", "value": "apps", "effect": "NoSchedule"}],
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "karpenter.k8s.aws/instance-family", "operator": "NotIn", "values": ["t2"]},
                        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["2"]},
                        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"},
                        {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 2}
                    ]
                }
            }
        }
    })
}

fn nodeclass(name: &str) -> Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
        "spec": {
            "amiFamily": "AL2023",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "role": "KarpenterNodeRole-demo",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}, {"id": "subnet-0123456789abcdef0"}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "tags": {"team": "a"},
            "metadataOptions": {"httpEndpoint": "enabled", "httpPutResponseHopLimit": 2, "httpTokens": "required"},
            "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "iops": 3000}}],
            "kubelet": {"maxPods": 110, "systemReserved": {"cpu": "100m"}, "evictionHard": {"memory.available": "5%"},
                        "imageGCHighThresholdPercent": 85, "imageGCLowThresholdPercent": 80}
        }
    })
}

fn pod_spec() -> Value {
    json!({
        "containers": [{"name": "app", "image": "registry.example/app:1",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        "ports": [{"containerPort": 8080}], "env": [{"name": "A", "value": "b"}]}],
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "apps", "effect": "NoSchedule"}],
        "nodeSelector": {"kubernetes.io/arch": "amd64"},
        "terminationGracePeriodSeconds": 30
    })
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}}, "spec": pod_spec()})
}

fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"providerID": format!("aws:///us-east-1a/i-{name}"), "taints": [{"key": "a", "value": "b", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}
    })
}

fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec()}
        }
    })
}

fn pdb(name: &str) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    })
}

const KINDS: &[Kind] = &[
    Kind {
        name: "NodePool",
        collection: "/apis/karpenter.sh/v1/nodepools",
        object: nodepool,
    },
    Kind {
        name: "EC2NodeClass",
        collection: "/apis/karpenter.k8s.aws/v1/ec2nodeclasses",
        object: nodeclass,
    },
    Kind {
        name: "Pod",
        collection: "/api/v1/namespaces/default/pods",
        object: pod,
    },
    Kind {
        name: "Node",
        collection: "/api/v1/nodes",
        object: node,
    },
    Kind {
        name: "Deployment",
        collection: "/apis/apps/v1/namespaces/default/deployments",
        object: deployment,
    },
    Kind {
        name: "PodDisruptionBudget",
        collection: "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        object: pdb,
    },
];

/// A server with driftwood's CRDs, one valid `seed` object of each kind, on a TCP port.
async fn serve() -> (ApiServer, driftwood_sim::apiserver::HttpServer, SocketAddr) {
    let api = server();
    let crds: kube::Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = kube::Api::all(api.client());
    for crd in driftwood_api::crd::crds().unwrap() {
        crds.create(&Default::default(), &crd).await.unwrap();
    }
    let http = api
        .serve_http(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let address = http.address();
    for kind in KINDS {
        let body = serde_json::to_vec(&(kind.object)("seed")).unwrap();
        let reply = send(
            address,
            "POST",
            kind.collection.as_bytes(),
            Some("application/json"),
            &body,
        )
        .await
        .unwrap();
        assert_eq!(
            reply.code,
            201,
            "{}: {}",
            kind.name,
            String::from_utf8_lossy(&reply.body)
        );
    }
    (api, http, address)
}

/// A valid create after the campaign: the server is still healthy.
async fn still_healthy(address: SocketAddr) {
    let reply = send(address, "GET", b"/healthz", None, b"").await.unwrap();
    assert_eq!(reply.code, 200);
    for kind in KINDS {
        let body = serde_json::to_vec(&(kind.object)("after-the-fuzz")).unwrap();
        let reply = send(
            address,
            "POST",
            kind.collection.as_bytes(),
            Some("application/json"),
            &body,
        )
        .await
        .unwrap();
        assert_eq!(
            reply.code,
            201,
            "{}: {}",
            kind.name,
            String::from_utf8_lossy(&reply.body)
        );
    }
}

/// Valid creates after a campaign that may have deleted anything it could (CRDs, namespaces):
/// a namespace, a pod in it and a node.
async fn still_serving_builtin_kinds(address: SocketAddr) {
    for target in ["/healthz", "/version", "/api/v1/nodes"] {
        let reply = send(address, "GET", target.as_bytes(), None, b"")
            .await
            .unwrap();
        assert_eq!(reply.code, 200, "{target}");
    }
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "after-the-fuzz"}});
    let mut in_namespace = pod("after-the-fuzz");
    in_namespace["metadata"]["namespace"] = json!("after-the-fuzz");
    for (collection, object) in [
        ("/api/v1/namespaces", namespace),
        ("/api/v1/namespaces/after-the-fuzz/pods", in_namespace),
        ("/api/v1/nodes", node("after-the-fuzz")),
    ] {
        let body = serde_json::to_vec(&object).unwrap();
        let reply = send(
            address,
            "POST",
            collection.as_bytes(),
            Some("application/json"),
            &body,
        )
        .await
        .unwrap();
        assert_eq!(
            reply.code,
            201,
            "{collection}: {}",
            String::from_utf8_lossy(&reply.body)
        );
    }
}

/// The resourceVersion of a stored object, or None when it is not found (404).
async fn stored_version(
    address: SocketAddr,
    collection: &str,
    name: &str,
) -> Result<Option<String>, TestCaseError> {
    let target = format!("{collection}/{}", encode(name));
    let reply = send(address, "GET", target.as_bytes(), None, b"").await?;
    check_reply(&format!("GET {target}"), "GET", &reply)?;
    match reply.code {
        404 => Ok(None),
        200 => {
            let object: Value = serde_json::from_slice(&reply.body)
                .map_err(|e| TestCaseError::fail(format!("GET {target}: {e}")))?;
            Ok(object["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_string))
        }
        code => Err(TestCaseError::fail(format!("GET {target}: {code}"))),
    }
}

/// Percent-encodes everything but unreserved characters.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Mutated objects through every write.

#[derive(Debug, Clone, Copy)]
enum Write {
    Create,
    Update,
    MergePatch,
    StrategicMergePatch,
    JsonPatch,
    Apply { fresh: bool, manager: bool },
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        3 => Just(Write::Create),
        2 => Just(Write::Update),
        2 => Just(Write::MergePatch),
        2 => Just(Write::StrategicMergePatch),
        2 => Just(Write::JsonPatch),
        2 => (any::<bool>(), prop::bool::weighted(0.85))
            .prop_map(|(fresh, manager)| Write::Apply { fresh, manager }),
    ]
}

fn field_validation() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        3 => Just(None),
        3 => Just(Some("Strict".to_string())),
        2 => Just(Some("Warn".to_string())),
        2 => Just(Some("Ignore".to_string())),
        1 => "\\PC{0,6}".prop_map(Some),
    ]
}

#[derive(Debug, Clone)]
struct JsonPatchOp {
    op: &'static str,
    path: usize,
    from: usize,
    value: Option<Value>,
    garbage_path: Option<String>,
}

fn json_patch_op() -> impl Strategy<Value = JsonPatchOp> {
    (
        prop_oneof![
            Just("add"),
            Just("remove"),
            Just("replace"),
            Just("move"),
            Just("copy"),
            Just("test"),
            Just("explode"),
        ],
        any::<usize>(),
        any::<usize>(),
        prop::option::of(any_value()),
        prop::option::weighted(
            0.15,
            prop_oneof![
                "\\PC{0,12}",
                Just("/-".to_string()),
                Just("/spec/-".to_string())
            ],
        ),
    )
        .prop_map(|(op, path, from, value, garbage_path)| JsonPatchOp {
            op,
            path,
            from,
            value,
            garbage_path,
        })
}

#[derive(Debug, Clone)]
struct ObjectCase {
    kind: usize,
    mutations: Vec<(usize, Mutation)>,
    write: Write,
    field_validation: Option<String>,
    dry_run: bool,
    /// Updates and patches go to the `/status` subresource.
    status: bool,
    yaml: bool,
    edit: TextEdit,
    patch: Vec<JsonPatchOp>,
}

fn object_case() -> impl Strategy<Value = ObjectCase> {
    (
        0..KINDS.len(),
        prop::collection::vec((any::<usize>(), mutation()), 0..4),
        write(),
        field_validation(),
        (prop::bool::weighted(0.1), prop::bool::weighted(0.2)),
        any::<bool>(),
        text_edit(),
        prop::collection::vec(json_patch_op(), 1..4),
    )
        .prop_map(
            |(kind, mutations, write, field_validation, (dry_run, status), yaml, edit, patch)| {
                ObjectCase {
                    kind,
                    mutations,
                    write,
                    field_validation,
                    dry_run,
                    status: status && !matches!(write, Write::Create),
                    yaml,
                    edit,
                    patch,
                }
            },
        )
}

static FRESH: AtomicUsize = AtomicUsize::new(0);

/// Answers by kind, write and HTTP code, to show (and check) that the cases reach both sides.
type Tally = Mutex<BTreeMap<String, usize>>;

fn count(tally: &Tally, key: String) {
    *tally
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(key)
        .or_default() += 1;
}

async fn object_request(
    api: &ApiServer,
    address: SocketAddr,
    case: ObjectCase,
    tally: &Tally,
) -> Result<(), TestCaseError> {
    let kind = &KINDS[case.kind];
    let fresh = format!("fuzz-{}", FRESH.fetch_add(1, Ordering::Relaxed));
    let creates = matches!(case.write, Write::Create | Write::Apply { fresh: true, .. });
    let name = if creates { fresh.as_str() } else { "seed" };
    let object_path = if case.status {
        format!("{}/{name}/status", kind.collection)
    } else {
        format!("{}/{name}", kind.collection)
    };
    let base = (kind.object)(name);
    let mut value = base.clone();
    for (selector, mutation) in &case.mutations {
        apply(&mut value, *selector, mutation);
    }
    let (method, target, content_type, body) = match case.write {
        Write::Create => (
            "POST",
            kind.collection.to_string(),
            "application/json",
            render(&value, false, &case.edit),
        ),
        Write::Update => (
            "PUT",
            object_path.clone(),
            "application/json",
            render(&value, false, &case.edit),
        ),
        Write::MergePatch => (
            "PATCH",
            object_path.clone(),
            "application/merge-patch+json",
            render(&value, false, &case.edit),
        ),
        Write::StrategicMergePatch => (
            "PATCH",
            object_path.clone(),
            "application/strategic-merge-patch+json",
            render(&value, false, &case.edit),
        ),
        Write::JsonPatch => {
            let ops: Vec<Value> = case
                .patch
                .iter()
                .map(|op| {
                    let path = op
                        .garbage_path
                        .clone()
                        .unwrap_or_else(|| pick_pointer(&base, op.path));
                    let mut object =
                        json!({"op": op.op, "path": path, "from": pick_pointer(&base, op.from)});
                    if let Some(v) = &op.value {
                        object["value"] = v.clone();
                    }
                    object
                })
                .collect();
            (
                "PATCH",
                object_path.clone(),
                "application/json-patch+json",
                render(&Value::Array(ops), false, &case.edit),
            )
        }
        Write::Apply { manager, .. } => {
            let mut target = object_path.clone();
            if manager {
                target.push_str("?fieldManager=fuzz&force=true");
            }
            (
                "PATCH",
                target,
                "application/apply-patch+yaml",
                render(&value, case.yaml, &case.edit),
            )
        }
    };
    let mut query = Vec::new();
    if let Some(validation) = &case.field_validation {
        query.push(format!("fieldValidation={}", encode(validation)));
    }
    if case.dry_run {
        query.push("dryRun=All".to_string());
    }
    let target = match (query.is_empty(), target.contains('?')) {
        (true, _) => target,
        (false, true) => format!("{target}&{}", query.join("&")),
        (false, false) => format!("{target}?{}", query.join("&")),
    };
    let before = if creates {
        None
    } else {
        stored_version(address, kind.collection, name).await?
    };
    let server_version = api.resource_version();
    let reply = send(
        address,
        method,
        target.as_bytes(),
        Some(content_type),
        &body,
    )
    .await?;
    let what = format!(
        "{method} {target} ({content_type}) {}",
        String::from_utf8_lossy(&body)
            .chars()
            .take(2000)
            .collect::<String>()
    );
    check_reply(&what, method, &reply)?;
    count(
        tally,
        format!("{} {:?} {}", kind.name, case.write, reply.code),
    );
    let refused = !(200..300).contains(&reply.code);
    if refused || case.dry_run {
        prop_assert_eq!(
            api.resource_version(),
            server_version,
            "{}: answered {} yet something was written",
            what,
            reply.code
        );
        let after = stored_version(address, kind.collection, name).await?;
        prop_assert_eq!(after, before, "{}: {}", what, reply.code);
    } else {
        let object: Value = serde_json::from_slice(&reply.body)
            .map_err(|e| TestCaseError::fail(format!("{what}: {} not JSON: {e}", reply.code)))?;
        prop_assert!(
            object["metadata"]["resourceVersion"].is_string(),
            "{what}: {object}"
        );
        if matches!(kind.name, "NodePool" | "EC2NodeClass") && !case.dry_run {
            agrees_with_driftwood_validate(&what, object)?;
        }
    }
    Ok(())
}

/// What the server stored, `driftwood validate` accepts too (the two check the same Karpenter
/// rules from the same types). Two known differences:
/// - a selector term `{tags: {}}` passes the CRD's `has(x.tags)` (as in Karpenter), where
///   `driftwood validate` reads empty tags as none;
/// - a requirement value that is no label value (`߽`): Karpenter's CRD puts `pattern` and
///   `maxLength` on the `values` array, where they check nothing, so kube-apiserver (and the
///   embedded server) store it; `driftwood validate` refuses it, since no node label can have
///   that value.
fn agrees_with_driftwood_validate(what: &str, stored: Value) -> Result<(), TestCaseError> {
    let text = stored.to_string();
    match driftwood_api::manifest::parse_document(stored) {
        Ok(driftwood_api::manifest::Document::Karpenter(parsed)) => {
            let empty_tags = text.contains(r#""tags":{}"#);
            let errors: Vec<_> = parsed
                .validate()
                .errors
                .into_iter()
                .filter(|e| !(empty_tags && e.rule.starts_with("expected at least one, got none")))
                .filter(|e| {
                    !(e.field.contains(".requirements[")
                        && e.field.contains("].values[")
                        && e.rule.starts_with("a label value must be"))
                })
                .collect();
            prop_assert!(
                errors.is_empty(),
                "{what}: stored {text}, which driftwood validate refuses: {errors:?}"
            );
        }
        other => {
            return Err(TestCaseError::fail(format!(
                "{what}: stored {text}, which driftwood validate cannot read: {other:?}"
            )));
        }
    }
    Ok(())
}

#[test]
fn mutated_objects_are_refused_with_a_status_and_not_stored() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (api, http, address) = runtime.block_on(serve());
    let mut runner = TestRunner::new(config());
    let tally = Tally::default();
    let outcome = runner.run(&object_case(), |case| {
        runtime.block_on(object_request(&api, address, case, &tally))
    });
    if let Err(error) = outcome {
        panic!("{error}");
    }
    let tally = tally.into_inner().unwrap();
    eprintln!("answers: {tally:#?}");
    let accepted = tally
        .keys()
        .any(|key| key.ends_with(" 200") || key.ends_with(" 201"));
    let refused = tally
        .keys()
        .any(|key| key.ends_with(" 400") || key.ends_with(" 422"));
    assert!(accepted && refused, "{tally:#?}");
    runtime.block_on(still_healthy(address));
    drop(http);
}

// ---------------------------------------------------------------------------------------------
// Arbitrary requests.

const SEGMENTS: &[&str] = &[
    "api",
    "apis",
    "v1",
    "namespaces",
    "default",
    "pods",
    "nodes",
    "seed",
    "apps",
    "deployments",
    "policy",
    "poddisruptionbudgets",
    "karpenter.sh",
    "nodepools",
    "karpenter.k8s.aws",
    "ec2nodeclasses",
    "nodeclaims",
    "status",
    "scale",
    "eviction",
    "binding",
    "events",
    "openapi",
    "v3",
    "version",
    "healthz",
    "..",
    "%",
    "%2F",
];

const QUERY_KEYS: &[&str] = &[
    "labelSelector",
    "fieldSelector",
    "resourceVersion",
    "resourceVersionMatch",
    "limit",
    "continue",
    "watch",
    "timeoutSeconds",
    "allowWatchBookmarks",
    "sendInitialEvents",
    "dryRun",
    "fieldManager",
    "fieldValidation",
    "force",
    "propagationPolicy",
    "gracePeriodSeconds",
    "orphanDependents",
];

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(SEGMENTS).prop_map(str::to_string),
        1 => "\\PC{0,12}".prop_map(|s| encode(&s)),
        1 => "[a-z0-9.%-]{0,12}",
    ]
}

fn query_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("true".to_string()),
        Just("1".to_string()),
        Just("-1".to_string()),
        Just("0".to_string()),
        Just("99999999999999999999999".to_string()),
        Just("18446744073709551615".to_string()),
        Just("app in (".to_string()),
        Just("a!=b,c notin (d),!e".to_string()),
        Just("metadata.name=seed".to_string()),
        Just("spec.nodeName=".to_string()),
        Just("All".to_string()),
        Just("NotOlderThan".to_string()),
        "\\PC{0,30}",
        "[=!,()a-z. -]{0,20}",
    ]
    .prop_map(|v| encode(&v))
}

/// A path the server serves (a collection, an object, a subresource), then maybe more.
fn path() -> impl Strategy<Value = Vec<String>> {
    let mut known: Vec<String> = Vec::new();
    for kind in KINDS {
        known.push(kind.collection.to_string());
        known.push(format!("{}/seed", kind.collection));
        known.push(format!("{}/seed/status", kind.collection));
    }
    known.extend(
        [
            "/api/v1/namespaces/default/pods/seed/eviction",
            "/api/v1/namespaces/default/pods/seed/binding",
            "/apis/apps/v1/namespaces/default/deployments/seed/scale",
            "/api/v1/namespaces",
            "/api/v1/namespaces/default",
            "/api/v1/pods",
            "/api/v1/namespaces/default/events",
            "/apis/events.k8s.io/v1/events",
            "/apis/karpenter.sh/v1/nodeclaims",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodepools.karpenter.sh",
            "/version",
            "/openapi/v3",
            "/openapi/v3/apis/karpenter.sh/v1",
            "/apis",
            "/api",
        ]
        .map(str::to_string),
    );
    prop_oneof![
        3 => (prop::sample::select(known), prop::collection::vec(segment(), 0..2)).prop_map(
            |(known, more)| {
                let mut segments: Vec<String> = known
                    .split('/')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                segments.extend(more);
                segments
            }
        ),
        1 => prop::collection::vec(segment(), 0..7),
    ]
}

#[derive(Debug, Clone)]
struct ArbitraryRequest {
    method: String,
    segments: Vec<String>,
    query: Vec<(String, String)>,
    raw_tail: Option<Vec<u8>>,
    content_type: Option<String>,
    body: Vec<u8>,
}

fn arbitrary_request() -> impl Strategy<Value = ArbitraryRequest> {
    let method = prop_oneof![
        6 => prop::sample::select(&["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"][..])
            .prop_map(str::to_string),
        1 => "[A-Z]{1,8}",
    ];
    let body = prop_oneof![
        Just(Vec::new()),
        prop::collection::vec(any::<u8>(), 0..200),
        noise().prop_map(String::into_bytes),
        (
            0..KINDS.len(),
            prop::collection::vec((any::<usize>(), mutation()), 0..3)
        )
            .prop_map(|(kind, mutations)| {
                let mut value = (KINDS[kind].object)("seed");
                for (selector, mutation) in &mutations {
                    apply(&mut value, *selector, mutation);
                }
                render(&value, false, &TextEdit::None)
            }),
    ];
    let content_type = prop::option::of(prop_oneof![
        Just("application/json".to_string()),
        Just("application/merge-patch+json".to_string()),
        Just("application/strategic-merge-patch+json".to_string()),
        Just("application/json-patch+json".to_string()),
        Just("application/apply-patch+yaml".to_string()),
        Just("application/yaml".to_string()),
        Just("application/vnd.kubernetes.protobuf".to_string()),
        "[ -~]{0,30}",
    ]);
    (
        method,
        path(),
        prop::collection::vec(
            (
                prop_oneof![
                    5 => prop::sample::select(QUERY_KEYS).prop_map(str::to_string),
                    1 => "\\PC{0,8}".prop_map(|k| encode(&k)),
                ],
                query_value(),
            ),
            0..5,
        ),
        // Bytes a URI may not hold, unencoded (hyper refuses such a request line itself).
        prop::option::weighted(
            0.1,
            prop::collection::vec(any::<u8>(), 1..20).prop_map(|bytes| {
                bytes
                    .into_iter()
                    .filter(|b| !b" \r\n".contains(b))
                    .collect::<Vec<u8>>()
            }),
        ),
        content_type,
        body,
    )
        .prop_map(
            |(method, segments, query, raw_tail, content_type, body)| ArbitraryRequest {
                method,
                segments,
                query,
                raw_tail,
                content_type,
                body,
            },
        )
}

async fn arbitrary_exchange(
    api: &ApiServer,
    address: SocketAddr,
    request: ArbitraryRequest,
    tally: &Tally,
) -> Result<(), TestCaseError> {
    let mut target: Vec<u8> = if request.segments.is_empty() {
        b"/".to_vec()
    } else {
        request
            .segments
            .iter()
            .flat_map(|s| format!("/{s}").into_bytes())
            .collect()
    };
    if !request.query.is_empty() {
        let query: Vec<String> = request
            .query
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        target.push(b'?');
        target.extend_from_slice(query.join("&").as_bytes());
    }
    if let Some(raw) = &request.raw_tail {
        target.extend_from_slice(raw);
    }
    let server_version = api.resource_version();
    let reply = send(
        address,
        &request.method,
        &target,
        request.content_type.as_deref(),
        &request.body,
    )
    .await?;
    let what = format!(
        "{} {} ({:?}) {:?}",
        request.method,
        String::from_utf8_lossy(&target),
        request.content_type,
        String::from_utf8_lossy(&request.body)
    );
    // hyper refuses a request line it cannot parse with a bare 400 before the API server sees
    // it (as Go's net/http does for kube-apiserver).
    let refused_by_hyper = request.raw_tail.is_some() && reply.code == 400 && reply.body.is_empty();
    if refused_by_hyper {
        count(tally, "400 from hyper".to_string());
    } else {
        check_reply(&what, &request.method, &reply)?;
        let method = match request.method.as_str() {
            "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS" => &request.method,
            _ => "other",
        };
        count(tally, format!("{method} {}", reply.code));
    }
    let writes = !matches!(request.method.as_str(), "GET" | "HEAD" | "OPTIONS");
    if writes && !(200..300).contains(&reply.code) {
        prop_assert_eq!(
            api.resource_version(),
            server_version,
            "{}: answered {} yet something was written",
            what,
            reply.code
        );
    }
    Ok(())
}

#[test]
fn arbitrary_requests_get_a_status_and_the_server_stays_healthy() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (api, http, address) = runtime.block_on(serve());
    let mut runner = TestRunner::new(config());
    let tally = Tally::default();
    let outcome = runner.run(&arbitrary_request(), |request| {
        runtime.block_on(arbitrary_exchange(&api, address, request, &tally))
    });
    if let Err(error) = outcome {
        panic!("{error}");
    }
    let tally = tally.into_inner().unwrap();
    eprintln!("answers: {tally:#?}");
    for code in [" 200", " 404"] {
        assert!(tally.keys().any(|key| key.ends_with(code)), "{tally:#?}");
    }
    runtime.block_on(still_serving_builtin_kinds(address));
    drop(http);
}

// ---------------------------------------------------------------------------------------------
// Minimized inputs of bugs the properties found.

/// A JSON patch that moves a field to the root and then fails made json-patch's undo panic
/// (`unable to undo applied patches`): the server answered 500. Found by
/// `mutated_objects_are_refused_with_a_status_and_not_stored`.
#[tokio::test]
async fn a_json_patch_moving_to_the_root_then_failing_is_a_422() {
    let (api, _http, address) = serve().await;
    let collection = "/apis/apps/v1/namespaces/default/deployments";
    let before = api.resource_version();
    for patch in [
        r#"[{"op": "move", "from": "/apiVersion", "path": ""}, {"op": "remove", "path": "/apiVersion"}]"#,
        r#"[{"op": "move", "from": "/apiVersion", "path": ""}]"#,
        r#"[{"op": "copy", "from": "/spec", "path": ""}, {"op": "remove", "path": "/nothing"}]"#,
    ] {
        let reply = send(
            address,
            "PATCH",
            format!("{collection}/seed").as_bytes(),
            Some("application/json-patch+json"),
            patch.as_bytes(),
        )
        .await
        .unwrap();
        check_reply(patch, "PATCH", &reply).unwrap();
        assert!(
            (400..500).contains(&reply.code),
            "{patch}: {} {}",
            reply.code,
            String::from_utf8_lossy(&reply.body)
        );
    }
    assert_eq!(api.resource_version(), before);
}
