//! Strategic merge patch for the built-in types: lists keyed by a merge key (containers by
//! name, conditions by type, ...) merge element-wise, `finalizers` merge as a set, and
//! everything else follows JSON merge patch. Supports the `$patch` (replace/delete),
//! `$deleteFromPrimitiveList/…`, `$setElementOrder/…` and `$retainKeys` directives.

use serde_json::{Map, Value};

use super::error::ApiError;

/// How a list-valued field is patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// Elements are maps merged by this key.
    MergeByKey(&'static str),
    /// Elements are primitives merged as a set.
    PrimitiveSet,
    /// The patch list replaces the original (atomic).
    Replace,
}

/// The strategy the Kubernetes built-in types declare for a list field of this name.
/// (`taints` and `tolerations` declare none, so they are replaced as a whole.)
pub fn list_strategy(field: &str) -> ListStrategy {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates"
        | "containerStatuses"
        | "initContainerStatuses"
        | "ephemeralContainerStatuses" => ListStrategy::MergeByKey("name"),
        "conditions" | "addresses" => ListStrategy::MergeByKey("type"),
        "ports" => ListStrategy::MergeByKey("containerPort"),
        "volumeMounts" => ListStrategy::MergeByKey("mountPath"),
        "volumeDevices" => ListStrategy::MergeByKey("devicePath"),
        "podIPs" | "hostIPs" | "hostAliases" => ListStrategy::MergeByKey("ip"),
        "ownerReferences" => ListStrategy::MergeByKey("uid"),
        "topologySpreadConstraints" => ListStrategy::MergeByKey("topologyKey"),
        "finalizers" | "podCIDRs" => ListStrategy::PrimitiveSet,
        _ => ListStrategy::Replace,
    }
}

/// Apply a strategic merge patch to `original`.
pub fn strategic_merge(original: &Value, patch: &Value) -> Result<Value, ApiError> {
    match (original, patch) {
        (Value::Object(original), Value::Object(patch)) => Ok(merge_maps(original, patch)?
            .map(Value::Object)
            .unwrap_or(Value::Null)),
        (_, Value::Object(patch)) => Ok(strip_directives(&Value::Object(patch.clone()))),
        _ => Err(ApiError::bad_request(
            "strategic merge patch must be a JSON object",
        )),
    }
}

/// Merge two maps; `None` means the map itself is deleted (`$patch: delete`).
fn merge_maps(
    original: &Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<Option<Map<String, Value>>, ApiError> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("delete") => return Ok(None),
        Some("replace") => {
            return Ok(match strip_directives(&Value::Object(patch.clone())) {
                Value::Object(map) => Some(map),
                _ => Some(Map::new()),
            });
        }
        Some("merge") | None => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown patch type {other:?} in $patch directive"
            )));
        }
    }
    let mut result = original.clone();
    let mut deletions: Vec<(&str, &Value)> = Vec::new();
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            deletions.push((field, value));
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() {
            result.remove(key);
            continue;
        }
        let merged = match result.get(key) {
            Some(existing) => merge_field(key, existing, value)?,
            None => Some(strip_directives(value)),
        };
        match merged {
            Some(merged) => {
                result.insert(key.clone(), merged);
            }
            None => {
                result.remove(key);
            }
        }
    }
    for (field, values) in deletions {
        let remove: Vec<&Value> = values
            .as_array()
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        if let Some(Value::Array(items)) = result.get_mut(field) {
            items.retain(|item| !remove.contains(&item));
        }
    }
    Ok(Some(result))
}

fn merge_field(field: &str, original: &Value, patch: &Value) -> Result<Option<Value>, ApiError> {
    match (original, patch) {
        (Value::Object(original), Value::Object(patch)) => {
            Ok(merge_maps(original, patch)?.map(Value::Object))
        }
        (Value::Array(original), Value::Array(patch)) => {
            Ok(Some(Value::Array(merge_lists(field, original, patch)?)))
        }
        _ => Ok(Some(strip_directives(patch))),
    }
}

fn merge_lists(field: &str, original: &[Value], patch: &[Value]) -> Result<Vec<Value>, ApiError> {
    let replace_marker = patch.iter().any(|item| {
        item.get("$patch").and_then(Value::as_str) == Some("replace")
            && item.as_object().is_some_and(|m| m.len() == 1)
    });
    if replace_marker {
        return Ok(patch
            .iter()
            .filter(|item| item.get("$patch").is_none())
            .map(strip_directives)
            .collect());
    }
    let strategy = match list_strategy(field) {
        // Two types name a list `ports`: a container's (keyed by containerPort) and a
        // Service's (keyed by port, with no containerPort). The elements tell them apart.
        ListStrategy::MergeByKey("containerPort")
            if patch
                .iter()
                .chain(original)
                .any(|p| p.get("containerPort").is_none() && p.get("port").is_some()) =>
        {
            ListStrategy::MergeByKey("port")
        }
        strategy => strategy,
    };
    match strategy {
        ListStrategy::Replace => Ok(patch.iter().map(strip_directives).collect()),
        ListStrategy::PrimitiveSet => {
            let mut result = original.to_vec();
            for item in patch {
                if !result.contains(item) {
                    result.push(item.clone());
                }
            }
            Ok(result)
        }
        ListStrategy::MergeByKey(key) => {
            let mut result = original.to_vec();
            for item in patch {
                let Some(item_map) = item.as_object() else {
                    return Err(ApiError::bad_request(format!(
                        "strategic merge patch: elements of {field} must be objects keyed by {key}"
                    )));
                };
                let Some(id) = item_map.get(key) else {
                    return Err(ApiError::bad_request(format!(
                        "strategic merge patch: an element of {field} is missing its merge key {key}"
                    )));
                };
                let position = result
                    .iter()
                    .position(|existing| existing.get(key) == Some(id));
                let delete = item_map.get("$patch").and_then(Value::as_str) == Some("delete");
                match (position, delete) {
                    (Some(at), true) => {
                        result.remove(at);
                    }
                    (None, true) => {}
                    (Some(at), false) => {
                        if let Some(Value::Object(existing)) = result.get(at) {
                            match merge_maps(existing, item_map)? {
                                Some(merged) => result[at] = Value::Object(merged),
                                None => {
                                    result.remove(at);
                                }
                            }
                        }
                    }
                    (None, false) => result.push(strip_directives(item)),
                }
            }
            Ok(result)
        }
    }
}

/// Remove `$`-directives (and null map entries) from a value inserted wholesale.
fn strip_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|item| item.get("$patch").and_then(Value::as_str) != Some("delete"))
                .map(strip_directives)
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Service's ports merge by `port` (its patchMergeKey), a container's by `containerPort`.
    #[test]
    fn service_ports_merge_by_port_and_container_ports_by_container_port() {
        let service = serde_json::json!({"spec": {"ports": [
            {"name": "http", "port": 80, "targetPort": 8080},
            {"name": "metrics", "port": 9090}]}});
        let patch = serde_json::json!({"spec": {"ports": [{"port": 80, "targetPort": 8081}]}});
        let merged = strategic_merge(&service, &patch).unwrap();
        assert_eq!(
            merged["spec"]["ports"],
            serde_json::json!([
                {"name": "http", "port": 80, "targetPort": 8081},
                {"name": "metrics", "port": 9090}])
        );
        let pod = serde_json::json!({"ports": [{"containerPort": 80, "name": "a"}]});
        let patch = serde_json::json!({"ports": [{"containerPort": 80, "name": "b"}]});
        assert_eq!(
            strategic_merge(&pod, &patch).unwrap()["ports"],
            serde_json::json!([{"containerPort": 80, "name": "b"}])
        );
    }
    use serde_json::json;

    #[test]
    fn conditions_merge_by_type() {
        let original = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "MemoryPressure", "status": "False"}
        ]}});
        let patch = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady"},
            {"type": "DiskPressure", "status": "False"}
        ]}});
        let merged = strategic_merge(&original, &patch).unwrap();
        assert_eq!(
            merged["status"]["conditions"],
            json!([
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                {"type": "MemoryPressure", "status": "False"},
                {"type": "DiskPressure", "status": "False"}
            ])
        );
    }

    #[test]
    fn containers_merge_by_name_and_env_by_name() {
        let original = json!({"spec": {"containers": [
            {"name": "app", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "sidecar", "image": "s:1"}
        ]}});
        let patch = json!({"spec": {"containers": [
            {"name": "app", "image": "a:2", "env": [{"name": "Y", "value": "2"}]},
            {"name": "sidecar", "$patch": "delete"}
        ]}});
        let merged = strategic_merge(&original, &patch).unwrap();
        assert_eq!(
            merged["spec"]["containers"],
            json!([{"name": "app", "image": "a:2", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}])
        );
    }

    #[test]
    fn taints_are_replaced_as_kubernetes_declares_no_merge_key() {
        let original = json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}});
        let patch = json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}});
        let merged = strategic_merge(&original, &patch).unwrap();
        assert_eq!(
            merged["spec"]["taints"],
            json!([{"key": "b", "effect": "NoExecute"}])
        );
    }

    #[test]
    fn finalizers_merge_as_a_set_and_can_be_deleted() {
        let original = json!({"metadata": {"finalizers": ["a", "b"]}});
        let added =
            strategic_merge(&original, &json!({"metadata": {"finalizers": ["b", "c"]}})).unwrap();
        assert_eq!(added["metadata"]["finalizers"], json!(["a", "b", "c"]));
        let removed = strategic_merge(
            &added,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
        )
        .unwrap();
        assert_eq!(removed["metadata"]["finalizers"], json!(["b", "c"]));
    }

    #[test]
    fn null_deletes_and_replace_directive_replaces() {
        let original = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        let merged =
            strategic_merge(&original, &json!({"metadata": {"labels": {"a": null}}})).unwrap();
        assert_eq!(merged["metadata"]["labels"], json!({"b": "2"}));
        let replaced = strategic_merge(
            &original,
            &json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
        )
        .unwrap();
        assert_eq!(replaced["metadata"]["labels"], json!({"c": "3"}));
    }

    #[test]
    fn non_object_patch_is_rejected() {
        assert_eq!(
            strategic_merge(&json!({}), &json!([1])).unwrap_err().code,
            400
        );
        assert_eq!(
            strategic_merge(
                &json!({"spec": {"containers": []}}),
                &json!({"spec": {"containers": [1]}})
            )
            .unwrap_err()
            .code,
            400
        );
    }
}
