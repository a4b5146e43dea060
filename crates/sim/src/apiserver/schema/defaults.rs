//! Defaulting: the `default`s a structural schema declares, filled in where the object lacks
//! the field, recursively (after pruning, before validation).

use serde_json::{Map, Value};

/// Fill in `default`s declared by `schema`, recursively, where `object` lacks the field.
pub fn apply_defaults(schema: &Value, object: &mut Value) {
    match object {
        Value::Object(map) => default_map(schema, map),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

fn default_map(schema: &Value, map: &mut Map<String, Value>) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (field, field_schema) in properties {
            if !map.contains_key(field)
                && let Some(default) = field_schema.get("default")
            {
                map.insert(field.clone(), default.clone());
            }
            if let Some(value) = map.get_mut(field) {
                apply_defaults(field_schema, value);
            }
        }
    }
    if let Some(additional) = schema.get("additionalProperties").filter(|s| s.is_object()) {
        let declared: Vec<String> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        for (field, value) in map.iter_mut() {
            if !declared.contains(field) {
                apply_defaults(additional, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "default": {}, "properties": {
                "size": {"type": "integer", "default": 3},
                "parts": {"type": "array", "items": {"type": "object", "properties": {"weight": {"type": "integer", "default": 1}}}}
            }}
        }})
    }

    #[test]
    fn defaults_apply_recursively() {
        let schema = schema();
        let mut object = json!({"metadata": {"name": "w"}});
        apply_defaults(&schema, &mut object);
        assert_eq!(object["spec"], json!({"size": 3}));
        let mut object = json!({"spec": {"size": 5, "parts": [{}, {"weight": 7}]}});
        apply_defaults(&schema, &mut object);
        assert_eq!(
            object["spec"],
            json!({"size": 5, "parts": [{"weight": 1}, {"weight": 7}]})
        );
    }
}
