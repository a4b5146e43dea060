//! Canonical JSON encoding and its FNV-1a 64-bit hash.

use serde_json::Value;

/// Normalizes a value for hashing with the semantics of Karpenter's hash options (zero values
/// ignored, slices as sets): drops nulls, empty strings, empty objects and empty arrays (absent
/// and empty mean the same, so a taint with `value: ""` equals one without), and sorts every
/// array as a set (order and repeats do not matter: `kubelet.clusterDNS`, taints, block device
/// mappings), recursively.
pub fn normalize(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let map: serde_json::Map<String, Value> = map
                .into_iter()
                .map(|(k, v)| (k, normalize(v)))
                .filter(|(_, v)| !is_empty(v))
                .collect();
            Value::Object(map)
        }
        Value::Array(items) => {
            let mut set = Value::Array(
                items
                    .into_iter()
                    .map(normalize)
                    .filter(|v| !v.is_null())
                    .collect(),
            );
            sort_as_set(&mut set);
            set
        }
        other => other,
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Sorts an array by the canonical encoding of its items (for set-like lists such as taints).
pub fn sort_as_set(value: &mut Value) {
    if let Value::Array(items) = value {
        items.sort_by_cached_key(encode);
        items.dedup();
    }
}

/// Canonical text of a value: object keys sorted, no whitespace.
pub fn encode(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(*k) {
                    write(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// FNV-1a 64-bit hash of `bytes`: driftwood's one stable hash (template hashes, generated
/// label values, deterministic names); the same on every platform and release.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

/// FNV-1a 64 of the canonical encoding, as a decimal string.
pub fn canonical_hash(value: &Value) -> String {
    fnv1a64(encode(value).as_bytes()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_matter() {
        let a: Value = serde_json::from_str(r#"{"a":1,"b":{"x":1,"y":2}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"b":{"y":2,"x":1},"a":1}"#).unwrap();
        assert_eq!(canonical_hash(&a), canonical_hash(&b));
    }

    #[test]
    fn absent_equals_empty() {
        assert_eq!(
            canonical_hash(&normalize(
                json!({"a": 1, "labels": {}, "taints": [], "x": null})
            )),
            canonical_hash(&normalize(json!({"a": 1})))
        );
    }

    #[test]
    fn values_matter() {
        assert_ne!(
            canonical_hash(&json!({"a": 1})),
            canonical_hash(&json!({"a": 2}))
        );
        assert_ne!(
            canonical_hash(&json!({"a": "1"})),
            canonical_hash(&json!({"a": 1}))
        );
        assert_ne!(
            canonical_hash(&json!([1, 2])),
            canonical_hash(&json!([2, 1]))
        );
    }

    /// Karpenter hashes with SlicesAsSets and IgnoreZeroValue (hashstructure options): list
    /// order does not matter and an empty string is the same as no value.
    #[test]
    fn lists_are_sets_and_empty_strings_are_absent() {
        assert_eq!(
            canonical_hash(&normalize(
                json!({"clusterDNS": ["10.0.0.10", "10.0.0.11"]})
            )),
            canonical_hash(&normalize(
                json!({"clusterDNS": ["10.0.0.11", "10.0.0.10"]})
            ))
        );
        assert_eq!(
            canonical_hash(&normalize(
                json!({"taints": [{"key": "a", "value": "", "effect": "NoSchedule"}]})
            )),
            canonical_hash(&normalize(
                json!({"taints": [{"key": "a", "effect": "NoSchedule"}]})
            ))
        );
        assert_ne!(
            canonical_hash(&normalize(json!({"taints": [{"key": "a", "value": "x"}]}))),
            canonical_hash(&normalize(json!({"taints": [{"key": "a"}]})))
        );
    }
}
