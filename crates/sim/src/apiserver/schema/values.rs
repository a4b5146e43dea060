//! Value validation against a structural schema, as kube-apiserver's OpenAPI validator does it:
//! types, `required`, `enum`, string lengths, `pattern`, `format: date-time`, numeric bounds,
//! item and property counts, list types `set` and `map`, `allOf`/`anyOf`/`oneOf`/`not`, and the
//! `x-kubernetes-validations` rules of every node. Subtrees equal to the stored object's are not
//! validated again (CRD validation ratcheting, on by default since Kubernetes 1.30).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use regex::Regex;
use serde_json::{Map, Value};

use super::cause::{Cause, child, index, key, type_name};
use super::cel;

/// A compiled regular expression (cached: schema patterns and the regexes of CEL rules repeat on
/// every write); None when it does not compile.
pub(super) fn pattern(source: &str) -> Option<Arc<Regex>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Arc<Regex>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    let mut cache = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .entry(source.to_string())
        .or_insert_with(|| Regex::new(source).ok().map(Arc::new))
        .clone()
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool) == Some(true)
}

fn number(schema: &Value, name: &str) -> Option<f64> {
    schema.get(name).and_then(Value::as_f64)
}

fn count(schema: &Value, name: &str) -> Option<u64> {
    schema.get(name).and_then(Value::as_u64)
}

/// Whether `value` has the schema's `type` (an absent type accepts anything).
fn has_type(schema: &Value, value: &Value) -> Result<(), String> {
    if flag(schema, "x-kubernetes-int-or-string") {
        return match value {
            Value::String(_) => Ok(()),
            Value::Number(n) if n.is_i64() || n.is_u64() => Ok(()),
            _ => Err("integer or string".to_string()),
        };
    }
    let Some(want) = schema.get("type").and_then(Value::as_str) else {
        return Ok(());
    };
    let ok = match want {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        _ => true,
    };
    if ok { Ok(()) } else { Err(want.to_string()) }
}

fn valid_date_time(text: &str) -> bool {
    text.parse::<jiff::Timestamp>().is_ok()
}

/// Validates `value` at `path` against `schema`; `old` is the stored value at the same path on
/// an update. Appends what is wrong to `causes`.
pub fn validate(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    if old == Some(value) {
        return;
    }
    if value.is_null() {
        if !flag(schema, "nullable")
            && (schema.get("type").is_some() || flag(schema, "x-kubernetes-int-or-string"))
        {
            let want = has_type(schema, value).err().unwrap_or_default();
            causes.push(Cause::wrong_type(path, value, &want));
        }
        return;
    }
    if let Err(want) = has_type(schema, value) {
        causes.push(Cause::wrong_type(path, value, &want));
        return;
    }
    let before = causes.len();
    constraints(schema, value, path, causes);
    for combinator in ["allOf", "anyOf", "oneOf"] {
        let Some(branches) = schema.get(combinator).and_then(Value::as_array) else {
            continue;
        };
        let results: Vec<Vec<Cause>> = branches
            .iter()
            .map(|branch| {
                let mut branch_causes = Vec::new();
                if let Err(want) = has_type(branch, value) {
                    branch_causes.push(Cause::wrong_type(path, value, &want));
                } else {
                    constraints(branch, value, path, &mut branch_causes);
                }
                branch_causes
            })
            .collect();
        let passing = results.iter().filter(|r| r.is_empty()).count();
        match combinator {
            "allOf" => causes.extend(results.into_iter().flatten()),
            "anyOf" if passing == 0 && !results.is_empty() => {
                causes.push(Cause::invalid(
                    path,
                    value,
                    "must validate at least one schema (anyOf)",
                ));
                causes.extend(results.into_iter().flatten());
            }
            "oneOf" if passing != 1 && !results.is_empty() => {
                causes.push(Cause::invalid(
                    path,
                    value,
                    "must validate one and only one schema (oneOf)",
                ));
            }
            _ => {}
        }
    }
    if let Some(not) = schema.get("not") {
        let mut inner = Vec::new();
        if has_type(not, value).is_ok() {
            constraints(not, value, path, &mut inner);
            if inner.is_empty() {
                causes.push(Cause::invalid(
                    path,
                    value,
                    "must not validate the schema (not)",
                ));
            }
        }
    }
    match value {
        Value::Object(map) => children_of_object(schema, map, old, path, causes),
        Value::Array(items) => children_of_array(schema, items, old, path, causes),
        _ => {}
    }
    // Rules run on values that are well formed themselves, as kube-apiserver skips CEL on a
    // value its schema already rejected.
    if causes.len() == before
        && let Some(rules) = schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
    {
        let label = schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_else(|| type_name(value));
        cel::check(rules, value, old, path, label, causes);
    }
}

/// The constraints of one schema node on the value itself (not its children).
fn constraints(schema: &Value, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        causes.push(Cause::not_supported(path, value, allowed));
    }
    match value {
        Value::String(text) => {
            let length = text.chars().count() as u64;
            if let Some(max) = count(schema, "maxLength")
                && length > max
            {
                causes.push(Cause::too_long(path, max));
            }
            if let Some(min) = count(schema, "minLength")
                && length < min
            {
                causes.push(Cause::invalid(
                    path,
                    value,
                    format!("{path} in body should be at least {min} chars long"),
                ));
            }
            if let Some(source) = schema.get("pattern").and_then(Value::as_str)
                && let Some(regex) = pattern(source)
                && !regex.is_match(text)
            {
                causes.push(Cause::invalid(
                    path,
                    value,
                    format!("{path} in body should match '{source}'"),
                ));
            }
            if schema.get("format").and_then(Value::as_str) == Some("date-time")
                && !valid_date_time(text)
            {
                causes.push(Cause::invalid(
                    path,
                    value,
                    format!("{path} in body must be of type date-time: {value}"),
                ));
            }
        }
        Value::Number(n) => {
            let Some(x) = n.as_f64() else { return };
            let exclusive_min = flag(schema, "exclusiveMinimum");
            let exclusive_max = flag(schema, "exclusiveMaximum");
            if let Some(min) = number(schema, "minimum")
                && (x < min || (exclusive_min && x == min))
            {
                let relation = if exclusive_min {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                causes.push(Cause::invalid(
                    path,
                    value,
                    format!("{path} in body should be {relation} {}", schema["minimum"]),
                ));
            }
            if let Some(max) = number(schema, "maximum")
                && (x > max || (exclusive_max && x == max))
            {
                let relation = if exclusive_max {
                    "less than"
                } else {
                    "less than or equal to"
                };
                causes.push(Cause::invalid(
                    path,
                    value,
                    format!("{path} in body should be {relation} {}", schema["maximum"]),
                ));
            }
            if let Some(factor) = number(schema, "multipleOf")
                && factor > 0.0
                && (x / factor).fract() != 0.0
            {
                causes.push(Cause::invalid(
                    path,
                    value,
                    format!(
                        "{path} in body should be a multiple of {}",
                        schema["multipleOf"]
                    ),
                ));
            }
        }
        Value::Array(items) => {
            if let Some(max) = count(schema, "maxItems")
                && items.len() as u64 > max
            {
                causes.push(Cause::too_many(path, items.len(), max));
            }
            if let Some(min) = count(schema, "minItems")
                && (items.len() as u64) < min
            {
                causes.push(Cause::invalid(
                    path,
                    value,
                    format!("{path} in body should have at least {min} items"),
                ));
            }
        }
        Value::Object(map) => {
            if let Some(max) = count(schema, "maxProperties")
                && map.len() as u64 > max
            {
                causes.push(Cause::too_many(path, map.len(), max));
            }
            if let Some(min) = count(schema, "minProperties")
                && (map.len() as u64) < min
            {
                causes.push(Cause::invalid(
                    path,
                    value,
                    format!("{path} in body should have at least {min} properties"),
                ));
            }
            for required in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(name) = required.as_str()
                    && !map.contains_key(name)
                {
                    causes.push(Cause::required(&child(path, name), None));
                }
            }
        }
        _ => {}
    }
}

fn children_of_object(
    schema: &Value,
    map: &Map<String, Value>,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|s| s.is_object());
    for (name, field) in map {
        let old_field = old.and_then(|o| o.get(name));
        if let Some(field_schema) = properties.and_then(|p| p.get(name)) {
            // metadata of a resource is ObjectMeta, checked by the server's own rules.
            if path.is_empty() && name == "metadata" {
                continue;
            }
            validate(field_schema, field, old_field, &child(path, name), causes);
        } else if let Some(field_schema) = additional {
            validate(field_schema, field, old_field, &key(path, name), causes);
        }
    }
}

/// The keys of an item of a `x-kubernetes-list-type: map` list.
fn map_key(schema: &Value, item: &Value) -> Option<Vec<Value>> {
    let keys = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)?;
    Some(
        keys.iter()
            .filter_map(Value::as_str)
            .map(|k| item.get(k).cloned().unwrap_or(Value::Null))
            .collect(),
    )
}

fn children_of_array(
    schema: &Value,
    items: &[Value],
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
    let old_items = old.and_then(Value::as_array);
    match list_type {
        Some("set") => {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    causes.push(Cause::duplicate(&index(path, i), item));
                }
            }
        }
        Some("map") => {
            let keys: Vec<Option<Vec<Value>>> =
                items.iter().map(|item| map_key(schema, item)).collect();
            for (i, k) in keys.iter().enumerate() {
                if k.is_some() && keys[..i].contains(k) {
                    let shown: Map<String, Value> = schema
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(|name| {
                            (
                                name.to_string(),
                                items[i].get(name).cloned().unwrap_or(Value::Null),
                            )
                        })
                        .collect();
                    causes.push(Cause::duplicate(&index(path, i), &Value::Object(shown)));
                }
            }
        }
        _ => {}
    }
    let Some(item_schema) = schema.get("items") else {
        return;
    };
    for (i, item) in items.iter().enumerate() {
        // Items of a map list correlate with the stored item of the same keys; others do not.
        let old_item = match list_type {
            Some("map") => old_items.and_then(|olds| {
                let wanted = map_key(schema, item);
                olds.iter().find(|o| map_key(schema, o) == wanted)
            }),
            _ => None,
        };
        validate(item_schema, item, old_item, &index(path, i), causes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "required": ["spec"], "properties": {
            "spec": {"type": "object", "required": ["ref"], "properties": {
                "ref": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}}},
                "nodes": {"type": "string", "pattern": "^((100|[0-9]{1,2})%|[0-9]+)$"},
                "operator": {"type": "string", "enum": ["In", "NotIn"]},
                "weight": {"type": "integer", "minimum": 1, "maximum": 100},
                "key": {"type": "string", "maxLength": 5},
                "values": {"type": "array", "maxItems": 2, "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "quantity": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true,
                             "pattern": "^[0-9]+(m|Mi|Gi)?$"},
                "when": {"type": "string", "format": "date-time"},
                "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
                "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                               "items": {"type": "object", "properties": {"type": {"type": "string"}}}},
                "immutable": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]}
            }}
        }})
    }

    fn check(value: Value, old: Option<Value>) -> Vec<String> {
        let mut causes = Vec::new();
        validate(&schema(), &value, old.as_ref(), "", &mut causes);
        causes.iter().map(Cause::line).collect()
    }

    #[test]
    fn a_valid_object_has_no_causes() {
        let ok = json!({"spec": {"ref": {"name": "a"}, "nodes": "10%", "operator": "In", "weight": 10, "key": "abc",
                                 "values": ["a", "b"], "quantity": "100m", "when": "2024-01-01T00:00:00Z",
                                 "labels": {"x": "abc"}, "conditions": [{"type": "A"}, {"type": "B"}]}});
        assert_eq!(check(ok.clone(), None), Vec::<String>::new());
        let mut number = ok;
        number["spec"]["quantity"] = json!(3);
        assert_eq!(check(number, None), Vec::<String>::new());
    }

    /// Each rule, worded as kube-apiserver words it.
    #[test]
    fn every_constraint_names_its_field() {
        let bad = json!({"spec": {"ref": {"name": ""}, "nodes": "150%", "operator": "Foo", "weight": 0, "key": "abcdef",
                                  "values": ["a", "a", "b"], "quantity": true, "when": "yesterday",
                                  "labels": {"x": "abcd"}, "conditions": [{"type": "A"}, {"type": "A"}]}});
        assert_eq!(
            check(bad, None),
            vec![
                "spec.conditions[1]: Duplicate value: {\"type\":\"A\"}",
                "spec.key: Too long: may not be more than 5 bytes",
                "spec.labels[x]: Too long: may not be more than 3 bytes",
                "spec.nodes: Invalid value: \"150%\": spec.nodes in body should match '^((100|[0-9]{1,2})%|[0-9]+)$'",
                "spec.operator: Unsupported value: \"Foo\": supported values: \"In\", \"NotIn\"",
                "spec.quantity: Invalid value: \"boolean\": spec.quantity in body must be of type integer or string: \"boolean\"",
                "spec.ref.name: Invalid value: \"\": spec.ref.name in body should be at least 1 chars long",
                "spec.values: Too many: 3: must have at most 2 items",
                "spec.values[1]: Duplicate value: \"a\"",
                "spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1",
                "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\"",
            ]
        );
    }

    #[test]
    fn required_and_wrong_types() {
        assert_eq!(check(json!({}), None), vec!["spec: Required value"]);
        assert_eq!(
            check(json!({"spec": "x"}), None),
            vec![
                "spec: Invalid value: \"string\": spec in body must be of type object: \"string\""
            ]
        );
        assert_eq!(
            check(json!({"spec": []}), None),
            vec!["spec: Invalid value: \"array\": spec in body must be of type object: \"array\""]
        );
        assert_eq!(
            check(json!({"spec": {}}), None),
            vec!["spec.ref: Required value"]
        );
    }

    /// Ratcheting: an unchanged invalid value stays; transition rules see the stored value.
    #[test]
    fn updates_check_what_changed() {
        let stored = json!({"spec": {"ref": {"name": "a"}, "nodes": "150%", "immutable": "x"}});
        let mut update = stored.clone();
        update["spec"]["weight"] = json!(5);
        assert_eq!(
            check(update.clone(), Some(stored.clone())),
            Vec::<String>::new()
        );
        update["spec"]["immutable"] = json!("y");
        assert_eq!(
            check(update, Some(stored)),
            vec!["spec.immutable: Invalid value: \"string\": immutable"]
        );
    }
}
