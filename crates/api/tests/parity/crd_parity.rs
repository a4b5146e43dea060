//! CRD parity with Karpenter v1.14: driftwood's generated CRDs (NodePool, NodeClaim,
//! EC2NodeClass) against facts taken from Karpenter's own CRDs — per field path its type,
//! format, enum, pattern, bounds, required fields, default and CEL rule expressions
//! (`tests/data/karpenter-crd-facts.json`, written by `scripts/karpenter-crd-facts` from
//! aws/karpenter-provider-aws v1.14.1). Every difference is either fixed or listed, with why,
//! in `tests/data/crd-parity-known-differences.txt`; a new difference fails, and so does a
//! listed one that no longer exists (remove it from the list).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

const KEYS: &[&str] = &[
    "type",
    "format",
    "enum",
    "pattern",
    "maxItems",
    "minItems",
    "maxLength",
    "minLength",
    "minimum",
    "maximum",
    "maxProperties",
    "minProperties",
    "default",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "nullable",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
];

/// The facts of every field path of `schema`, as the facts script flattens them.
fn flatten(schema: &Value, path: &str, out: &mut BTreeMap<String, BTreeMap<String, Value>>) {
    // Whole numbers compare as integers (schemars writes bounds as 1.0, Karpenter's YAML as 1).
    let whole = |v: &Value| match v.as_f64() {
        Some(x) if v.is_f64() && x.fract() == 0.0 && x.abs() < 1e15 => serde_json::json!(x as i64),
        _ => v.clone(),
    };
    let mut facts: BTreeMap<String, Value> = KEYS
        .iter()
        .filter_map(|k| schema.get(*k).map(|v| ((*k).to_string(), whole(v))))
        .collect();
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        let mut names: Vec<&str> = required.iter().filter_map(Value::as_str).collect();
        names.sort_unstable();
        facts.insert("required".into(), serde_json::json!(names));
    }
    let mut rules: Vec<&str> = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("rule").and_then(Value::as_str))
        .collect();
    if !rules.is_empty() {
        rules.sort_unstable();
        facts.insert("rules".into(), serde_json::json!(rules));
    }
    out.insert(
        if path.is_empty() {
            ".".to_string()
        } else {
            path.to_string()
        },
        facts,
    );
    for (name, child) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let child_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        flatten(child, &child_path, out);
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        flatten(items, &format!("{path}[]"), out);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        flatten(values, &format!("{path}{{}}"), out);
    }
}

/// `crd path what` for every difference (`what` is `missing`, `extra` or a fact's key).
fn differences() -> BTreeSet<String> {
    let facts: Value =
        serde_json::from_str(include_str!("../data/karpenter-crd-facts.json")).unwrap();
    let mut found = BTreeSet::new();
    for crd in driftwood_api::crd::crds().unwrap() {
        let name = crd.metadata.name.clone().unwrap();
        let version = crd.spec.versions.iter().find(|v| v.name == "v1").unwrap();
        let schema = serde_json::to_value(
            version
                .schema
                .as_ref()
                .unwrap()
                .open_api_v3_schema
                .as_ref()
                .unwrap(),
        )
        .unwrap();
        let mut ours = BTreeMap::new();
        flatten(&schema, "", &mut ours);
        let theirs: BTreeMap<String, BTreeMap<String, Value>> =
            serde_json::from_value(facts["crds"][&name].clone()).unwrap();
        for (path, their_facts) in &theirs {
            let Some(our_facts) = ours.get(path) else {
                found.insert(format!("{name} {path} missing"));
                continue;
            };
            let keys: BTreeSet<&String> = their_facts.keys().chain(our_facts.keys()).collect();
            for key in keys {
                if their_facts.get(key) != our_facts.get(key) {
                    found.insert(format!("{name} {path} {key}"));
                }
            }
        }
        for path in ours.keys().filter(|p| !theirs.contains_key(*p)) {
            found.insert(format!("{name} {path} extra"));
        }
    }
    found
}

/// Karpenter test source: the CRDs in pkg/apis/crds of aws/karpenter-provider-aws v1.14.1.
#[test]
fn generated_crds_match_karpenters_or_the_difference_is_listed_with_why() {
    let known: BTreeSet<String> = include_str!("../data/crd-parity-known-differences.txt")
        .lines()
        .map(|line| {
            line.split('#')
                .next()
                .unwrap_or_default()
                .trim()
                .to_string()
        })
        .filter(|line| !line.is_empty())
        .collect();
    let found = differences();
    let new: Vec<&String> = found.difference(&known).collect();
    let gone: Vec<&String> = known.difference(&found).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "differences from Karpenter v1.14's CRDs not listed in tests/data/crd-parity-known-differences.txt:\n  {}\nlisted but gone (remove them):\n  {}",
        new.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  "),
        gone.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  "),
    );
}
