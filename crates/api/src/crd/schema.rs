//! Navigation and editing of a CRD's JSON schema by field path, for adding the rules a derived
//! schema cannot express.

use serde_json::{Value, json};

/// A JSON-schema node with navigation by field path ("spec.template.metadata"; "[]" enters
/// array items, "{}" enters additionalProperties).
pub(super) struct Schema<'a>(pub(super) &'a mut Value);

impl Schema<'_> {
    pub(super) fn at(&mut self, path: &str) -> Result<&mut serde_json::Map<String, Value>, String> {
        let mut node: &mut Value = self.0;
        for part in path.split('.').filter(|p| !p.is_empty()) {
            node = match part {
                "[]" => node.get_mut("items"),
                "{}" => node.get_mut("additionalProperties"),
                field => node.get_mut("properties").and_then(|p| p.get_mut(field)),
            }
            .ok_or_else(|| path.to_string())?;
        }
        node.as_object_mut().ok_or_else(|| path.to_string())
    }

    pub(super) fn set(&mut self, path: &str, key: &str, value: Value) -> Result<(), String> {
        self.at(path)?.insert(key.to_string(), value);
        Ok(())
    }

    /// Makes `field` of the object at `parent` required (and drops any serde-derived default).
    pub(super) fn require(&mut self, parent: &str, field: &str) -> Result<(), String> {
        self.at(&format!("{parent}.{field}"))?.remove("default");
        let node = self.at(parent)?;
        let required = node.entry("required").or_insert_with(|| json!([]));
        if let Some(list) = required.as_array_mut()
            && !list.iter().any(|v| v == field)
        {
            list.push(json!(field));
        }
        Ok(())
    }

    pub(super) fn pattern(&mut self, path: &str, pattern: &str) -> Result<(), String> {
        self.set(path, "pattern", json!(pattern))
    }

    pub(super) fn enumeration(&mut self, path: &str, values: &[&str]) -> Result<(), String> {
        self.set(path, "enum", json!(values))
    }

    pub(super) fn cel(&mut self, path: &str, rule: &str, message: &str) -> Result<(), String> {
        let node = self.at(path)?;
        let list = node
            .entry("x-kubernetes-validations")
            .or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            list.push(json!({ "rule": rule, "message": message }));
        }
        Ok(())
    }

    /// Sets `minimum` and `maximum` of the number at `path`.
    pub(super) fn range(&mut self, path: &str, (lo, hi): (i64, i64)) -> Result<(), String> {
        self.set(path, "minimum", json!(lo))?;
        self.set(path, "maximum", json!(hi))
    }

    /// Removes `key` from the node at `path` (e.g. a serde-derived default placed elsewhere).
    pub(super) fn unset(&mut self, path: &str, key: &str) -> Result<(), String> {
        self.at(path)?.remove(key);
        Ok(())
    }
}

/// Drops every `nullable: true` the derive puts on optional fields: Karpenter's schemas have
/// none, so a `null` is pruned by the API server (read as absent) as it is under Karpenter's.
pub(super) fn strip_nullable(node: &mut Value) {
    match node {
        Value::Object(map) => {
            map.remove("nullable");
            map.values_mut().for_each(strip_nullable);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nullable),
        _ => {}
    }
}
