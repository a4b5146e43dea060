//! Reading manifests as `kubectl apply -f` does: multi-document YAML (and `kind: List`), each
//! document recognised as one of our three kinds or passed over as another kind.

use crate::ec2nodeclass::EC2NodeClass;
use crate::nodeclaim::NodeClaim;
use crate::nodepool::NodePool;
use crate::validation::{FieldError, FieldWarning, Validate, ValidationReport};
use kube::CustomResourceExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A document that could not be read as a Kubernetes object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("document {index}: not valid YAML: {message}")]
    Yaml { index: usize, message: String },
    #[error("document {index}: {message}")]
    NotAnObject { index: usize, message: String },
    #[error("{object}: field {field}: {message}")]
    Field {
        object: String,
        field: String,
        message: String,
    },
}

/// One of the resources driftwood owns.
#[derive(Debug, Clone, PartialEq)]
pub enum KarpenterObject {
    NodePool(Box<NodePool>),
    NodeClaim(Box<NodeClaim>),
    EC2NodeClass(Box<EC2NodeClass>),
}

impl KarpenterObject {
    pub fn validate(&self) -> ValidationReport {
        match self {
            Self::NodePool(o) => o.validate(),
            Self::NodeClaim(o) => o.validate(),
            Self::EC2NodeClass(o) => o.validate(),
        }
    }
}

/// One of our kinds as read from a manifest, with the fields it carried that the schema does
/// not know (they would be dropped silently otherwise; the API server rejects them) and the
/// fields whose values look like unfilled `<<PLACEHOLDER>>`s.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedObject {
    pub object: KarpenterObject,
    pub unknown_fields: Vec<String>,
    pub placeholders: Vec<(String, String)>,
}

impl ParsedObject {
    /// Validation of the typed object plus one error per unknown field.
    pub fn validate(&self) -> ValidationReport {
        let mut report = self.object.validate();
        for field in &self.unknown_fields {
            report.errors.push(FieldError {
                field: field.clone(),
                rule: "unknown field (not in the CRD schema; check its spelling and indentation)"
                    .into(),
                value: None,
            });
        }
        for (field, value) in &self.placeholders {
            report.warnings.push(FieldWarning {
                field: field.clone(),
                message: format!(
                    "{value:?} looks like an unfilled placeholder (replace it before applying)"
                ),
            });
        }
        report
    }
}

/// A document from a manifest stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Document {
    /// One of our kinds, typed.
    Karpenter(ParsedObject),
    /// Any other kind (Deployment, ...), kept as JSON.
    Other {
        api_version: String,
        kind: String,
        name: String,
        value: Value,
    },
}

/// Splits a YAML stream into JSON objects, unwrapping `kind: List`. Empty documents are skipped.
pub fn split_documents(text: &str) -> Vec<Result<Value, ManifestError>> {
    let mut out = Vec::new();
    for (index, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = match serde_yaml::Value::deserialize_from(doc) {
            Ok(v) => v,
            Err(e) => {
                out.push(Err(ManifestError::Yaml {
                    index,
                    message: e.to_string(),
                }));
                // A syntax error stops the YAML stream; later documents cannot be trusted.
                break;
            }
        };
        if value.is_null() {
            continue;
        }
        let json = match serde_json::to_value(&value) {
            Ok(v) => v,
            Err(e) => {
                out.push(Err(ManifestError::NotAnObject {
                    index,
                    message: e.to_string(),
                }));
                continue;
            }
        };
        let is_list = json
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k == "List" || k.ends_with("List"))
            && json.get("items").is_some_and(Value::is_array);
        if is_list {
            for item in json
                .get("items")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                out.push(check_object(index, item.clone()));
            }
        } else {
            out.push(check_object(index, json));
        }
    }
    out
}

trait DeserializeFrom {
    fn deserialize_from(
        de: serde_yaml::Deserializer<'_>,
    ) -> Result<serde_yaml::Value, serde_yaml::Error>;
}

impl DeserializeFrom for serde_yaml::Value {
    fn deserialize_from(
        de: serde_yaml::Deserializer<'_>,
    ) -> Result<serde_yaml::Value, serde_yaml::Error> {
        serde::Deserialize::deserialize(de)
    }
}

fn check_object(index: usize, value: Value) -> Result<Value, ManifestError> {
    let Some(map) = value.as_object() else {
        return Err(ManifestError::NotAnObject {
            index,
            message: "expected a mapping with apiVersion and kind".into(),
        });
    };
    for field in ["apiVersion", "kind"] {
        if !map.get(field).is_some_and(Value::is_string) {
            return Err(ManifestError::NotAnObject {
                index,
                message: format!("missing or non-string field {field:?}"),
            });
        }
    }
    Ok(value)
}

/// Reads every document of a YAML stream.
pub fn parse_documents(text: &str) -> Vec<Result<Document, ManifestError>> {
    split_documents(text)
        .into_iter()
        .map(|doc| doc.and_then(parse_document))
        .collect()
}

/// Types one JSON object.
pub fn parse_document(value: Value) -> Result<Document, ManifestError> {
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let object = format!("{kind} {name:?}");
    let (typed, schema) = match (api_version.as_str(), kind.as_str()) {
        ("karpenter.sh/v1", "NodePool") => (
            KarpenterObject::NodePool(Box::new(typed(&object, value.clone())?)),
            NodePool::crd(),
        ),
        ("karpenter.sh/v1", "NodeClaim") => (
            KarpenterObject::NodeClaim(Box::new(typed(&object, value.clone())?)),
            NodeClaim::crd(),
        ),
        ("karpenter.k8s.aws/v1", "EC2NodeClass") => (
            KarpenterObject::EC2NodeClass(Box::new(typed(&object, value.clone())?)),
            EC2NodeClass::crd(),
        ),
        (group, "NodePool" | "NodeClaim" | "EC2NodeClass") if group.starts_with("karpenter") => {
            return Err(ManifestError::Field {
                object,
                field: "apiVersion".into(),
                message: format!(
                    "{api_version:?} is not served; driftwood speaks karpenter.sh/v1 and karpenter.k8s.aws/v1"
                ),
            });
        }
        _ => {
            return Ok(Document::Other {
                api_version,
                kind,
                name,
                value,
            });
        }
    };
    let mut unknown_fields = unknown_top_level_fields(&value);
    if let Some(schema) = schema
        .spec
        .versions
        .first()
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| serde_json::to_value(s).ok())
    {
        for field in ["spec", "status"] {
            if let (Some(v), Some(s)) = (
                value.get(field),
                schema.pointer(&format!("/properties/{field}")),
            ) {
                find_unknown_fields(v, s, field, &mut unknown_fields);
            }
        }
    }
    let mut placeholders = Vec::new();
    find_placeholders(&value, "", &mut placeholders);
    Ok(Document::Karpenter(ParsedObject {
        object: typed,
        unknown_fields,
        placeholders,
    }))
}

/// Collects string values written like `<<NAME>>`, as the walkthrough's templates are.
fn find_placeholders(value: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::String(s) if s.contains("<<") && s.contains(">>") => {
            out.push((path.to_string(), s.clone()))
        }
        Value::Object(map) => {
            for (key, child) in map {
                let child_path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                find_placeholders(child, &child_path, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                find_placeholders(item, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The fields an object may carry besides what is in `spec`, `status` and `metadata`.
const TOP_LEVEL_FIELDS: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status"];

/// Unknown fields outside `spec` and `status`: at the top level (a field indented one level too
/// little) and in `metadata`. An empty key is shown as `""`.
fn unknown_top_level_fields(value: &Value) -> Vec<String> {
    let shown = |key: &str| {
        if key.is_empty() {
            "\"\"".to_string()
        } else {
            key.to_string()
        }
    };
    let mut out = Vec::new();
    for key in value.as_object().into_iter().flat_map(|m| m.keys()) {
        if !TOP_LEVEL_FIELDS.contains(&key.as_str()) {
            out.push(shown(key));
        }
    }
    let metadata = value.get("metadata").and_then(Value::as_object);
    for key in metadata.into_iter().flat_map(|m| m.keys()) {
        if !crate::wellknown::OBJECT_META_FIELDS.contains(&key.as_str()) {
            out.push(format!("metadata.{}", shown(key)));
        }
    }
    out
}

/// Collects the paths of fields in `value` that `schema` does not declare.
fn find_unknown_fields(value: &Value, schema: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true)
            {
                return;
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            for (key, child) in map {
                match (properties.and_then(|p| p.get(key)), additional) {
                    (Some(child_schema), _) => {
                        find_unknown_fields(child, child_schema, &format!("{path}.{key}"), out)
                    }
                    (None, Some(child_schema)) if child_schema.is_object() => {
                        find_unknown_fields(child, child_schema, &format!("{path}[{key}]"), out)
                    }
                    (None, _) if properties.is_some() => out.push(format!("{path}.{key}")),
                    (None, _) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    find_unknown_fields(item, item_schema, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

fn typed<T: DeserializeOwned>(object: &str, value: Value) -> Result<T, ManifestError> {
    serde_path_to_error::deserialize(value).map_err(|e| ManifestError::Field {
        object: object.to_string(),
        field: e.path().to_string(),
        message: e.inner().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lists_and_skips_empty_documents() {
        let text = "---\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: b}\n";
        let docs = parse_documents(text);
        assert_eq!(docs.len(), 2);
        assert!(matches!(&docs[1], Ok(Document::Other { name, .. }) if name == "b"));
    }

    #[test]
    fn type_errors_name_the_field() {
        let text = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec:\n  weight: heavy\n  template:\n    spec:\n      nodeClassRef: {group: g, kind: k, name: n}\n";
        let docs = parse_documents(text);
        let err = docs[0].as_ref().unwrap_err().to_string();
        assert!(
            err.contains("NodePool \"np\"") && err.contains("spec.weight"),
            "{err}"
        );
    }

    #[test]
    fn unknown_fields_are_errors_naming_the_path() {
        let text = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec:\n  template:\n    spec:\n      expireAftr: 1h\n      nodeClassRef: {group: g, kind: k, name: n}\n      requirements: [{key: a, operator: Exists, vaules: [x]}]\n  limits: {cpu: 10}\n";
        let Ok(Document::Karpenter(parsed)) = parse_documents(text).remove(0) else {
            panic!("expected NodePool")
        };
        assert_eq!(
            parsed.unknown_fields,
            vec![
                "spec.template.spec.expireAftr".to_string(),
                "spec.template.spec.requirements[0].vaules".to_string()
            ]
        );
        let report = parsed.validate();
        assert!(!report.is_valid());
        assert!(report.errors.iter().any(
            |e| e.field == "spec.template.spec.expireAftr" && e.rule.contains("unknown field")
        ));
    }

    /// Found by the validate fuzz test: a field indented one level too little (next to `spec`)
    /// or misspelled in `metadata` passed `driftwood validate`, though a strict API server
    /// refuses it.
    #[test]
    fn unknown_fields_outside_spec_are_errors_too() {
        let text = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np, lables: {a: b}}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: g, kind: k, name: n}\n      requirements: []\nlimits: {cpu: 10}\n";
        let Ok(Document::Karpenter(parsed)) = parse_documents(text).remove(0) else {
            panic!("expected NodePool")
        };
        assert_eq!(
            parsed.unknown_fields,
            vec!["limits".to_string(), "metadata.lables".to_string()]
        );
        assert!(!parsed.validate().is_valid());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for text in [
            "{",
            "- a\n- b",
            "just text",
            "apiVersion: 3\nkind: x",
            "kind: [",
            "\t\t:",
        ] {
            let docs = parse_documents(text);
            assert!(docs.iter().all(|d| d.is_err()), "{text:?} → {docs:?}");
        }
    }

    #[test]
    fn old_api_versions_are_named() {
        let text =
            "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: np}\nspec: {}\n";
        let err = parse_documents(text).remove(0).unwrap_err().to_string();
        assert!(
            err.contains("apiVersion") && err.contains("v1beta1"),
            "{err}"
        );
    }
}
