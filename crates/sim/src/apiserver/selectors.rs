//! Label and field selectors: parsing the query-string forms and matching objects.

use std::collections::BTreeMap;

use serde_json::Value;

use super::error::ApiError;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelRequirement {
    /// `key=value` / `key==value`.
    Equals(String, String),
    /// `key!=value` (also matches objects without the key).
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)` (also matches objects without the key).
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

/// A parsed label selector: all requirements must hold. Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// The requirements, ANDed.
    pub requirements: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// Parse the `labelSelector` query-string syntax.
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for term in split_top_level(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(term)?);
        }
        Ok(Self { requirements })
    }

    /// Build from a structured `metav1.LabelSelector` (`matchLabels` + `matchExpressions`).
    pub fn from_structured(selector: &Value) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
            for (key, value) in labels {
                let value = value.as_str().unwrap_or_default().to_string();
                requirements.push(LabelRequirement::Equals(key.clone(), value));
            }
        }
        if let Some(expressions) = selector.get("matchExpressions").and_then(Value::as_array) {
            for expression in expressions {
                let key = expression
                    .get("key")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let values: Vec<String> = expression
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|values| {
                        values
                            .iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                let operator = expression
                    .get("operator")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                requirements.push(match operator {
                    "In" => LabelRequirement::In(key, values),
                    "NotIn" => LabelRequirement::NotIn(key, values),
                    "Exists" => LabelRequirement::Exists(key),
                    "DoesNotExist" => LabelRequirement::DoesNotExist(key),
                    other => {
                        return Err(ApiError::bad_request(format!(
                            "label selector operator {other:?} is not one of In, NotIn, Exists, DoesNotExist"
                        )));
                    }
                });
            }
        }
        Ok(Self { requirements })
    }

    /// Does an object with these labels match?
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|key| labels.get(key).map(String::as_str))
    }

    /// Does an object whose label `key` is `label(key)` match?
    fn matches_with<'v>(&self, label: impl Fn(&str) -> Option<&'v str>) -> bool {
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                LabelRequirement::Equals(key, value) => label(key) == Some(value.as_str()),
                LabelRequirement::NotEquals(key, value) => label(key) != Some(value.as_str()),
                LabelRequirement::In(key, values) => {
                    label(key).is_some_and(|v| values.iter().any(|x| x == v))
                }
                LabelRequirement::NotIn(key, values) => {
                    label(key).is_none_or(|v| !values.iter().any(|x| x == v))
                }
                LabelRequirement::Exists(key) => label(key).is_some(),
                LabelRequirement::DoesNotExist(key) => label(key).is_none(),
            })
    }

    /// Does this object (its `metadata.labels`) match? Read in place, without copying the
    /// labels (the PDB controller asks this of every pod of a namespace).
    pub fn matches_object(&self, object: &Value) -> bool {
        let labels = object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        self.requirements.is_empty()
            || self.matches_with(|key| {
                labels
                    .and_then(|l| l.get(key))
                    .map(|v| v.as_str().unwrap_or_default())
            })
    }

    /// Does this selector match everything?
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// The `metadata.labels` of an object as a sorted map.
pub fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// Split on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (index, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_requirement(term: &str) -> Result<LabelRequirement, ApiError> {
    let invalid = || ApiError::bad_request(format!("unable to parse requirement: {term:?}"));
    if let Some(key) = term.strip_prefix('!') {
        let key = key.trim();
        check_key(key, term)?;
        return Ok(LabelRequirement::DoesNotExist(key.to_string()));
    }
    if let Some((key, value)) = term.split_once("!=") {
        let key = key.trim();
        check_key(key, term)?;
        return Ok(LabelRequirement::NotEquals(
            key.to_string(),
            value.trim().to_string(),
        ));
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        let key = key.trim();
        check_key(key, term)?;
        return Ok(LabelRequirement::Equals(
            key.to_string(),
            value.trim().to_string(),
        ));
    }
    let words: Vec<&str> = term.splitn(2, char::is_whitespace).collect();
    match words.as_slice() {
        [key] => {
            check_key(key, term)?;
            Ok(LabelRequirement::Exists((*key).to_string()))
        }
        [key, rest] => {
            let rest = rest.trim();
            let (operator, set) = rest
                .split_once(char::is_whitespace)
                .map(|(op, set)| (op, set.trim()))
                .or_else(|| rest.find('(').map(|at| (rest[..at].trim(), &rest[at..])))
                .ok_or_else(invalid)?;
            let inner = set
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(invalid)?;
            let values: Vec<String> = inner
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            check_key(key, term)?;
            match operator {
                "in" => Ok(LabelRequirement::In((*key).to_string(), values)),
                "notin" => Ok(LabelRequirement::NotIn((*key).to_string(), values)),
                _ => Err(invalid()),
            }
        }
        _ => Err(invalid()),
    }
}

fn check_key(key: &str, term: &str) -> Result<(), ApiError> {
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if valid {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "unable to parse requirement: invalid label key {key:?} in {term:?}"
        )))
    }
}

/// One `field=value` / `field!=value` term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// Dotted field path, e.g. `spec.nodeName`.
    pub field: String,
    /// The value compared against (missing fields read as "").
    pub value: String,
    /// `!=` rather than `=`.
    pub negated: bool,
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// The requirements, ANDed.
    pub requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parse `fieldSelector`, allowing only the `supported` fields (plus metadata.name and
    /// metadata.namespace).
    pub fn parse(text: &str, supported: &[&str]) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for term in text.split(',') {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let (field, value, negated) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{text}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            let allowed = field == "metadata.name"
                || field == "metadata.namespace"
                || supported.contains(&field);
            if !allowed {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            requirements.push(FieldRequirement {
                field: field.to_string(),
                value: value.trim().to_string(),
                negated,
            });
        }
        Ok(Self { requirements })
    }

    /// Does the object match every requirement?
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|requirement| {
            let actual = field_value(object, &requirement.field);
            (actual == requirement.value) != requirement.negated
        })
    }

    /// The name this selector pins (`metadata.name=x`), if any.
    pub fn exact_name(&self) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == "metadata.name" && !r.negated)
            .map(|r| r.value.as_str())
    }

    /// Does this selector match everything?
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// Read a dotted field as a string ("" when missing; numbers and booleans stringified).
fn field_value(object: &Value, path: &str) -> String {
    let mut current = object;
    for part in path.split('.') {
        match current.get(part) {
            Some(next) => current = next,
            None => return String::new(),
        }
    }
    match current {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn set_based_label_selectors_match_like_kubernetes() {
        let selector =
            LabelSelector::parse("app in (web, api),tier notin (db),!legacy,team").unwrap();
        assert!(selector.matches(&labels(&[("app", "web"), ("team", "a")])));
        assert!(
            !selector.matches(&labels(&[("app", "web")])),
            "team must exist"
        );
        assert!(!selector.matches(&labels(&[("app", "web"), ("team", "a"), ("legacy", "")])));
        assert!(!selector.matches(&labels(&[("app", "web"), ("team", "a"), ("tier", "db")])));
        assert!(!selector.matches(&labels(&[("app", "batch"), ("team", "a")])));
    }

    #[test]
    fn equality_selectors_and_not_equals_on_missing_keys() {
        let selector = LabelSelector::parse("app=web,env!=prod").unwrap();
        assert!(selector.matches(&labels(&[("app", "web")])));
        assert!(!selector.matches(&labels(&[("app", "web"), ("env", "prod")])));
        assert!(
            LabelSelector::parse("app==web")
                .unwrap()
                .matches(&labels(&[("app", "web")]))
        );
    }

    #[test]
    fn malformed_label_selector_is_a_bad_request() {
        assert_eq!(LabelSelector::parse("app in web").unwrap_err().code, 400);
        assert_eq!(LabelSelector::parse("a b c").unwrap_err().code, 400);
        assert_eq!(LabelSelector::parse("=x").unwrap_err().code, 400);
    }

    #[test]
    fn structured_selector_with_expressions() {
        let selector = LabelSelector::from_structured(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]
        }))
        .unwrap();
        assert!(selector.matches(&labels(&[("app", "web"), ("zone", "b")])));
        assert!(!selector.matches(&labels(&[("app", "web"), ("zone", "c")])));
    }

    #[test]
    fn field_selectors_on_pod_fields() {
        let pod = json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let supported = ["spec.nodeName", "status.phase"];
        assert!(
            FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed", &supported)
                .unwrap()
                .matches(&pod)
        );
        assert!(
            !FieldSelector::parse("spec.nodeName=", &supported)
                .unwrap()
                .matches(&pod)
        );
        assert_eq!(
            FieldSelector::parse("spec.bogus=x", &supported)
                .unwrap_err()
                .message,
            "field label not supported: spec.bogus"
        );
    }
}
