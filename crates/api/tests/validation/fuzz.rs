//! Property tests of the entry point `driftwood validate` uses (`parse_documents`, then
//! `validate` on each of our objects): manifests made by mutating valid NodePools and
//! EC2NodeClasses (the public walkthrough's, with its placeholders filled, and a few written
//! here to cover many fields), plus arbitrary text and bytes. Whatever the input: no panic, and
//! every problem is reported naming the object (kind and name where there is one) and a field.
//!
//! 256 cases per property by default (about 2 s in a debug build). A longer campaign (5,000
//! cases: about 45 s):
//!
//! ```text
//! PROPTEST_CASES=5000 cargo test --locked -p driftwood-api --test validation -- fuzz
//! ```
//!
//! A failure prints proptest's minimized input; keep it as a plain test.

use driftwood_api::manifest::{Document, ManifestError, parse_documents};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};
use std::path::Path;
use std::sync::OnceLock;

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

/// Fills the walkthrough's placeholders as its instructions do with sed.
fn fill_placeholders(text: &str) -> String {
    text.replace("<<CLUSTER_NAME>>", "demo")
        .replace("<<KARPENTER_NODE_IAM_ROLE_NAME>>", "KarpenterNodeRole-demo")
        .replace("<<AMD64PREVAMI>>", "ami-0a1b2c3d4e5f60718")
        .replace("<<ARM64PREVAMI>>", "ami-0f1e2d3c4b5a69788")
}

/// The walkthrough's manifests (../shared/fixtures/blueprints beside the checkout, as CI lays
/// it out), filled in, one JSON object per document.
fn walkthrough_objects() -> Vec<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/blueprints");
    let mut out = Vec::new();
    for case in [
        "update-nodes-with-drift",
        "update-nodes-with-drift-name-terms",
    ] {
        let path = root.join(case).join("latest-current-ami.yaml");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (the walkthrough's fixtures)", path.display()));
        for document in driftwood_api::manifest::split_documents(&fill_placeholders(&text)) {
            out.push(document.unwrap());
        }
    }
    out
}

/// Valid objects written here to cover many fields: budgets with schedules and reasons,
/// requirements with every operator and minValues, taints, limits, weight; kubelet, block
/// devices, tags, metadata options and alias / name / id / tag AMI terms.
fn written_objects() -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "everything", "labels": {"team": "a"}},
            "spec": {
                "weight": 50,
                "limits": {"cpu": "1000", "memory": "1000Gi", "nvidia.com/gpu": 8},
                "disruption": {
                    "consolidationPolicy": "WhenEmpty",
                    "consolidateAfter": "30s",
                    "budgets": [
                        {"nodes": "10%"},
                        {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h", "reasons": ["Drifted", "Underutilized"]},
                        {"nodes": "3", "reasons": ["Empty"]},
                        {"nodes": "100%", "schedule": "@daily", "duration": "1h30m"}
                    ]
                },
                "template": {
                    "metadata": {"labels": {"intent": "apps", "node.kubernetes.io/role": "web"}, "annotations": {"example.com/owner": "team-a"}},
                    "spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "everything"},
                        "expireAfter": "Never",
                        "terminationGracePeriod": "48h",
                        "taints": [{"key": "dedicated", "value": "apps", "effect": "NoSchedule"}],
                        "startupTaints": [{"key": "example.com/not-ready", "effect": "NoExecute"}],
                        "requirements": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
                            {"key": "karpenter.k8s.aws/instance-family", "operator": "NotIn", "values": ["t2", "t3"]},
                            {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"},
                            {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 2},
                            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["2"]},
                            {"key": "karpenter.k8s.aws/instance-memory", "operator": "Lt", "values": ["262144"]},
                            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gte", "values": ["5"]},
                            {"key": "karpenter.k8s.aws/instance-network-bandwidth", "operator": "Lte", "values": ["64"]},
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"], "minValues": 1}
                        ]
                    }
                }
            }
        }),
        json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "small"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []
            }}}
        }),
        json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "everything"},
            "spec": {
                "amiFamily": "AL2023",
                "amiSelectorTerms": [{"alias": "al2023@v20250715"}],
                "role": "KarpenterNodeRole-demo",
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo", "tier": "private"}}, {"id": "subnet-0123456789abcdef0"}],
                "securityGroupSelectorTerms": [{"name": "nodes"}, {"id": "sg-0123456789abcdef0"}],
                "tags": {"team": "a", "KubernetesVersion": "1.31", "unicode-ü": "värde"},
                "userData": "#!/bin/bash\necho hello\n",
                "associatePublicIPAddress": false,
                "detailedMonitoring": true,
                "instanceStorePolicy": "RAID0",
                "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 2, "httpTokens": "required"},
                "blockDeviceMappings": [
                    {"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "iops": 3000, "throughput": 125, "encrypted": true, "deleteOnTermination": true}},
                    {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "1Ti", "volumeType": "io2", "iops": 10000, "kmsKeyID": "arn:aws:kms:us-east-1:111122223333:key/abc", "snapshotID": "snap-0123456789abcdef0"}}
                ],
                "kubelet": {
                    "maxPods": 110,
                    "podsPerCore": 10,
                    "clusterDNS": ["10.100.0.10"],
                    "systemReserved": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"},
                    "kubeReserved": {"cpu": "200m", "memory": "200Mi"},
                    "evictionHard": {"memory.available": "5%", "nodefs.available": "10%"},
                    "evictionSoft": {"memory.available": "500Mi"},
                    "evictionSoftGracePeriod": {"memory.available": "1m"},
                    "evictionMaxPodGracePeriod": 60,
                    "imageGCHighThresholdPercent": 85,
                    "imageGCLowThresholdPercent": 80,
                    "cpuCFSQuota": true
                }
            }
        }),
        json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "by-name"},
            "spec": {
                "amiFamily": "Bottlerocket",
                "amiSelectorTerms": [{"name": "bottlerocket-aws-k8s-1.31-x86_64-*", "owner": "amazon"}, {"tags": {"team": "a"}}, {"id": "ami-0123456789abcdef0"}],
                "instanceProfile": "KarpenterNodeInstanceProfile",
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]
            }
        }),
    ]
}

fn bases() -> &'static [Value] {
    static BASES: OnceLock<Vec<Value>> = OnceLock::new();
    BASES.get_or_init(|| {
        let mut all = walkthrough_objects();
        all.extend(written_objects());
        all
    })
}

/// A stand-in string replaced, after serialization, by a number literal too large for any
/// Rust integer or float.
const HUGE: &str = "__driftwood_fuzz_huge__";

/// JSON values of every type, including the awkward ones.
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
        Just(json!(1e308)),
        Just(json!(HUGE)),
        Just(json!("")),
        "\\PC{0,40}".prop_map(Value::String),
        "[a-z0-9%.*@ -]{0,12}".prop_map(Value::String),
        (any::<char>(), 10_000usize..10_050).prop_map(|(c, n)| json!(c.to_string().repeat(n))),
        Just(json!("<<CLUSTER_NAME>>")),
        Just(json!("150%")),
        Just(json!("1h")),
        Just(json!("Never")),
        Just(json!("al2023@latest")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// `{"a": {"a": ... }}` or `[[[...]]]`, `depth` deep.
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
        1 => (1usize..400, any::<bool>()).prop_map(|(depth, array)| Mutation::Nest { depth, array }),
        2 => Just(Mutation::DuplicateItem),
        2 => (
            prop_oneof!["[a-zA-Z]{1,12}", "\\PC{0,8}", Just("spec".to_string())],
            any_value()
        )
            .prop_map(|(k, v)| Mutation::InsertKey(k, v)),
    ]
}

/// Every JSON pointer in `value` (the root is "").
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

/// The parent of a pointer and the last token, unescaped.
fn split_pointer(pointer: &str) -> Option<(&str, String)> {
    let (parent, last) = pointer.rsplit_once('/')?;
    Some((parent, last.replace("~1", "/").replace("~0", "~")))
}

fn apply(value: &mut Value, selector: usize, mutation: &Mutation) {
    let mut all = Vec::new();
    pointers(value, String::new(), &mut all);
    let pointer = all[selector % all.len()].clone();
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
            // Duplicate the item the pointer names in its list, or the first item of the list it
            // names.
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
        Mutation::InsertKey(key, new) => {
            if let Some(Value::Object(map)) = value.pointer_mut(&pointer) {
                map.insert(key.clone(), new.clone());
            } else if let Some(Value::Array(items)) = value.pointer_mut(&pointer) {
                items.push(new.clone());
            }
        }
    }
}

#[derive(Debug, Clone)]
enum TextEdit {
    None,
    Insert(usize, String),
    Truncate(usize),
}

fn yaml_noise() -> impl Strategy<Value = String> {
    prop_oneof![
        "[-:{}\\[\\],'\"#&*!|>%@` \n\ta-z0-9]{0,30}",
        Just("\n---\n".to_string()),
        Just("\n- \n".to_string()),
        Just(": : :".to_string()),
        Just("&a [*a, *a]".to_string()),
        Just("!!binary AAAA".to_string()),
        Just("\t".to_string()),
    ]
}

fn text_edit() -> impl Strategy<Value = TextEdit> {
    prop_oneof![
        6 => Just(TextEdit::None),
        2 => (any::<usize>(), yaml_noise()).prop_map(|(at, s)| TextEdit::Insert(at, s)),
        1 => any::<usize>().prop_map(TextEdit::Truncate),
    ]
}

/// A base object, mutated, then written as YAML or JSON and maybe edited as text.
fn mutated_manifest() -> impl Strategy<Value = String> {
    let count = bases().len();
    (
        0..count,
        prop::collection::vec((any::<usize>(), mutation()), 1..5),
        any::<bool>(),
        text_edit(),
    )
        .prop_map(|(base, mutations, as_json, edit)| {
            let mut value = bases()[base].clone();
            for (selector, mutation) in &mutations {
                apply(&mut value, *selector, mutation);
            }
            let text = if as_json {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                serde_yaml::to_string(&value).unwrap()
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
                TextEdit::None => text,
                TextEdit::Insert(i, noise) => {
                    let i = at(i);
                    format!("{}{noise}{}", &text[..i], &text[i..])
                }
                TextEdit::Truncate(i) => text[..at(i)].to_string(),
            }
        })
}

/// Whole documents that start from nothing: arbitrary text, bytes (read lossily, as a file
/// would be after a failed UTF-8 check), YAML-ish noise, and our kinds with arbitrary bodies.
fn arbitrary_manifest() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,200}",
        prop::collection::vec(any::<u8>(), 0..300)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        prop::collection::vec(yaml_noise(), 0..12).prop_map(|parts| parts.concat()),
        (
            prop_oneof![
                Just(("karpenter.sh/v1", "NodePool")),
                Just(("karpenter.k8s.aws/v1", "EC2NodeClass")),
                Just(("karpenter.sh/v1", "NodeClaim")),
                Just(("karpenter.sh/v1beta1", "NodePool")),
                Just(("v1", "List")),
            ],
            any_value(),
            any_value(),
        )
            .prop_map(|((api_version, kind), metadata, spec)| {
                let mut object = Map::new();
                object.insert("apiVersion".into(), json!(api_version));
                object.insert("kind".into(), json!(kind));
                object.insert("metadata".into(), metadata);
                object.insert("spec".into(), spec.clone());
                object.insert("items".into(), json!([spec]));
                serde_yaml::to_string(&Value::Object(object)).unwrap()
            }),
    ]
}

/// Looks like a field path: `spec.x`, `metadata.name`, `spec.tags[k]`, ...
fn is_field_path(field: &str) -> bool {
    ["spec", "metadata", "status", "apiVersion", "kind"]
        .iter()
        .any(|root| {
            field == *root
                || field.starts_with(&format!("{root}."))
                || field.starts_with(&format!("{root}["))
        })
}

/// `Kind "name"` as errors should name the object, when the document has a non-empty string
/// name.
fn expected_object(value: &Value) -> Option<String> {
    let kind = value.get("kind")?.as_str()?;
    let name = value.pointer("/metadata/name")?.as_str()?;
    (!name.is_empty()).then(|| format!("{kind} {name:?}"))
}

const OUR_KINDS: [&str; 3] = ["NodePool", "NodeClaim", "EC2NodeClass"];

/// Runs the library entry point of `driftwood validate` on `text` (`parse_documents`, then
/// `validate` on each of our objects) and checks every outcome.
fn check(text: &str) -> Result<(), TestCaseError> {
    let documents = parse_documents(text);
    // parse_documents is split_documents then parse_document; redo it one document at a time
    // to know which object each outcome is about.
    let split = driftwood_api::manifest::split_documents(text);
    prop_assert_eq!(documents.len(), split.len());
    for (document, value) in documents.into_iter().zip(split) {
        let expected = value.as_ref().ok().and_then(expected_object);
        match document {
            Err(ManifestError::Yaml { message, .. })
            | Err(ManifestError::NotAnObject { message, .. }) => {
                prop_assert!(!message.is_empty());
            }
            Err(ManifestError::Field {
                object,
                field,
                message,
            }) => {
                let kind = object.split(' ').next().unwrap_or_default();
                prop_assert!(
                    OUR_KINDS.contains(&kind),
                    "error does not name the object's kind: {object:?}"
                );
                if let Some(expected) = &expected {
                    prop_assert_eq!(&object, expected);
                }
                // A required top-level field that is missing is reported at the root, with the
                // field named in the message: `NodePool "x": field .: missing field `spec``.
                let missing_at_root = field == "." && message.starts_with("missing field");
                prop_assert!(
                    field == "apiVersion" || is_field_path(&field) || missing_at_root,
                    "{object}: field {field:?} is not a field path: {message}"
                );
                prop_assert!(!message.is_empty());
            }
            Ok(Document::Other { .. }) => {}
            Ok(Document::Karpenter(parsed)) => {
                let report = parsed.validate();
                let kind = report.object.split(' ').next().unwrap_or_default();
                prop_assert!(
                    OUR_KINDS.contains(&kind),
                    "report does not name the kind: {:?}",
                    report.object
                );
                if let Some(expected) = &expected {
                    prop_assert_eq!(&report.object, expected);
                }
                for error in &report.errors {
                    // An unknown field may sit at the top level, beside `spec`.
                    let unknown =
                        error.rule.starts_with("unknown field") && !error.field.is_empty();
                    prop_assert!(
                        is_field_path(&error.field) || unknown,
                        "{}: error without a field path: {error:?}",
                        report.object
                    );
                    prop_assert!(!error.rule.is_empty(), "{error:?}");
                }
                // Placeholder warnings name wherever the placeholder sits, even in a field the
                // schema does not have (`a[0]`).
                for warning in &report.warnings {
                    prop_assert!(
                        !warning.field.is_empty() && !warning.message.is_empty(),
                        "{}: warning without a field path: {warning:?}",
                        report.object
                    );
                }
                if let Err(invalid) = report.clone().into_result() {
                    prop_assert!(invalid.to_string().starts_with(&report.object));
                }
            }
        }
    }
    Ok(())
}

#[test]
fn the_starting_manifests_are_valid() {
    for base in bases() {
        let text = serde_yaml::to_string(&base).unwrap();
        let docs = parse_documents(&text);
        let Ok(Document::Karpenter(parsed)) = &docs[0] else {
            panic!("{text}: {docs:?}")
        };
        let report = parsed.validate();
        assert!(report.is_valid(), "{text}\n{report:#?}");
    }
}

#[test]
fn mutated_manifests_are_reported_not_panicked_on() {
    let mut runner = TestRunner::new(config());
    runner
        .run(&mutated_manifest(), |text| check(&text))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn arbitrary_text_is_reported_not_panicked_on() {
    let mut runner = TestRunner::new(config());
    runner
        .run(&arbitrary_manifest(), |text| check(&text))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn several_mutated_documents_in_one_stream() {
    let mut runner = TestRunner::new(Config {
        cases: config().cases / 4 + 1,
        ..config()
    });
    runner
        .run(&prop::collection::vec(mutated_manifest(), 1..4), |texts| {
            let stream = texts
                .iter()
                .map(|t| t.trim_start_matches("---\n"))
                .collect::<Vec<_>>()
                .join("\n---\n");
            check(&stream)
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
