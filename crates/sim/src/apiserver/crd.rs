//! CustomResourceDefinitions: turning a CRD into a served resource, and its status.

use serde_json::{Value, json};

use super::error::ApiError;
use super::resources::{PrinterColumn, ResourceInfo, VersionInfo};

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn strings(object: &Value, pointer: &str) -> Vec<String> {
    object
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Validate a CRD and describe the resource it defines.
pub fn resource_from_crd(crd: &Value) -> Result<ResourceInfo, ApiError> {
    let name = text(crd, "/metadata/name");
    let invalid = |field: &str, rule: &str| {
        ApiError::invalid("CustomResourceDefinition", name, field, rule.to_string())
    };
    let group = text(crd, "/spec/group");
    let plural = text(crd, "/spec/names/plural");
    let kind = text(crd, "/spec/names/kind");
    if group.is_empty() {
        return Err(invalid("spec.group", "Required value"));
    }
    if plural.is_empty() {
        return Err(invalid("spec.names.plural", "Required value"));
    }
    if kind.is_empty() {
        return Err(invalid("spec.names.kind", "Required value"));
    }
    if name != format!("{plural}.{group}") {
        return Err(invalid(
            "metadata.name",
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let scope = text(crd, "/spec/scope");
    let namespaced = match scope {
        "Namespaced" => true,
        "Cluster" => false,
        _ => {
            return Err(invalid(
                "spec.scope",
                "Unsupported value: must be Cluster or Namespaced",
            ));
        }
    };
    let mut versions = Vec::new();
    let mut storage = Vec::new();
    for version in crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let version_name = text(version, "/name");
        if version_name.is_empty() {
            return Err(invalid("spec.versions[].name", "Required value"));
        }
        if version.get("storage").and_then(Value::as_bool) == Some(true) {
            storage.push(version_name.to_string());
        }
        if version.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let columns = version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|columns| {
                columns
                    .iter()
                    .map(|c| PrinterColumn {
                        name: text(c, "/name").to_string(),
                        column_type: text(c, "/type").to_string(),
                        json_path: text(c, "/jsonPath").to_string(),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        description: text(c, "/description").to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        versions.push(VersionInfo {
            name: version_name.to_string(),
            schema: version
                .pointer("/schema/openAPIV3Schema")
                .cloned()
                .map(std::sync::Arc::new),
            columns,
            status_subresource: version.pointer("/subresources/status").is_some(),
        });
    }
    if versions.is_empty() {
        return Err(invalid(
            "spec.versions",
            "must have at least one served version",
        ));
    }
    if storage.len() != 1 {
        return Err(invalid(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
    }
    let singular = match text(crd, "/spec/names/singular") {
        "" => kind.to_lowercase(),
        s => s.to_string(),
    };
    Ok(ResourceInfo {
        group: group.to_string(),
        versions,
        plural: plural.to_string(),
        singular,
        kind: kind.to_string(),
        namespaced,
        short_names: strings(crd, "/spec/names/shortNames"),
        categories: strings(crd, "/spec/names/categories"),
        extra_subresources: Vec::new(),
        strategic_merge: false,
        custom: true,
    })
}

/// The status a real API server reports once a CRD is established.
pub fn established_status(crd: &Value, now: &str) -> Value {
    let mut names = crd
        .pointer("/spec/names")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Some(map) = names.as_object_mut()
        && !map.contains_key("singular")
    {
        let singular = text(crd, "/spec/names/kind").to_lowercase();
        map.insert("singular".into(), json!(singular));
    }
    json!({
        "acceptedNames": names,
        "storedVersions": crd.pointer("/spec/versions").and_then(Value::as_array).map(|versions| {
            versions.iter().filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true)).filter_map(|v| v.get("name").cloned()).collect::<Vec<_>>()
        }).unwrap_or_default(),
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "default": {}, "properties": {
                            "size": {"type": "integer", "default": 3},
                            "parts": {"type": "array", "items": {"type": "object", "properties": {"weight": {"type": "integer", "default": 1}}}}
                        }}
                    }}}
                }]
            }
        })
    }

    #[test]
    fn crd_becomes_a_namespaced_resource_with_status_and_columns() {
        let info = resource_from_crd(&crd()).unwrap();
        assert_eq!(info.kind, "Widget");
        assert_eq!(info.singular, "widget");
        assert!(info.namespaced && info.custom && info.has_status());
        assert_eq!(info.versions[0].columns[0].json_path, ".spec.size");
    }

    #[test]
    fn mismatched_name_is_invalid() {
        let mut bad = crd();
        bad["metadata"]["name"] = json!("gadgets.example.com");
        let error = resource_from_crd(&bad).unwrap_err();
        assert_eq!(error.code, 422);
        assert!(error.message.contains("metadata.name"), "{}", error.message);
    }
}
