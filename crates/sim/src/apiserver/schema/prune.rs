//! Pruning, as kube-apiserver prunes a custom resource before defaulting: fields its structural
//! schema does not declare are dropped (and reported, for `fieldValidation`), unless the schema
//! preserves unknown fields there; `null` in a field that is not `nullable` is dropped too.

use driftwood_api::wellknown::OBJECT_META_FIELDS;
use serde_json::Value;

use super::cause::{child, index};

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool) == Some(true)
}

/// Prunes `value` (the whole object when `resource` is true, or an embedded resource) against
/// `schema`, appending the path of each unknown field dropped to `unknown`.
pub fn prune(
    schema: &Value,
    value: &mut Value,
    path: &str,
    resource: bool,
    unknown: &mut Vec<String>,
) {
    match value {
        Value::Object(map) => {
            let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
            let embedded = resource || flag(schema, "x-kubernetes-embedded-resource");
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|s| s.is_object());
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let field_path = child(path, &key);
                if embedded
                    && (key == "apiVersion" || key == "kind")
                    && !properties.is_some_and(|p| p.contains_key(&key))
                {
                    continue;
                }
                if embedded && key == "metadata" {
                    if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                        let extra: Vec<String> = meta
                            .keys()
                            .filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str()))
                            .cloned()
                            .collect();
                        for extra in extra {
                            meta.remove(&extra);
                            unknown.push(child(&field_path, &extra));
                        }
                    }
                    continue;
                }
                let field_schema = properties.and_then(|p| p.get(&key)).or(additional);
                match field_schema {
                    Some(field_schema) => {
                        if map.get(&key).is_some_and(Value::is_null)
                            && !flag(field_schema, "nullable")
                        {
                            map.remove(&key);
                        } else if let Some(field) = map.get_mut(&key) {
                            prune(field_schema, field, &field_path, false, unknown);
                        }
                    }
                    None if preserve => {}
                    None => {
                        map.remove(&key);
                        unknown.push(field_path);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune(item_schema, item, &index(path, i), false, unknown);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "name": {"type": "string", "nullable": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "parts": {"type": "array", "items": {"type": "object", "properties": {"weight": {"type": "integer"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}}
            }}
        }})
    }

    #[test]
    fn unknown_fields_are_dropped_and_named_with_their_path() {
        let mut object = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w", "bogus": 1},
            "spec": {"size": 1, "sise": 2, "labels": {"a": "b"}, "parts": [{"weight": 1, "wieght": 2}],
                     "free": {"anything": {"goes": true}},
                     "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "extra": 1}},
            "other": true});
        let mut unknown = Vec::new();
        prune(&schema(), &mut object, "", true, &mut unknown);
        assert_eq!(
            unknown,
            vec![
                "metadata.bogus",
                "other",
                "spec.parts[0].wieght",
                "spec.sise",
                "spec.template.extra"
            ]
        );
        assert_eq!(object["spec"]["parts"], json!([{"weight": 1}]));
        assert_eq!(object["spec"]["free"], json!({"anything": {"goes": true}}));
        assert_eq!(object["spec"]["template"]["kind"], "Pod");
        assert_eq!(object["metadata"], json!({"name": "w"}));
    }

    /// "null values for fields that either don't specify the nullable flag, or give it a false
    /// value, will be pruned before defaulting happens" (Kubernetes docs, CRD defaulting).
    #[test]
    fn null_is_dropped_unless_nullable() {
        let mut object = json!({"spec": {"size": null, "name": null}});
        let mut unknown = Vec::new();
        prune(&schema(), &mut object, "", true, &mut unknown);
        assert!(unknown.is_empty());
        assert_eq!(object["spec"], json!({"name": null}));
    }
}
