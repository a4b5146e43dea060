//! Built-in kinds checked as kube-apiserver checks them: the body must decode as the kind (types
//! and resource quantities), object metadata must be well formed (label and annotation keys and
//! values, finalizers; for every kind, custom ones too), and the rules of the kinds driftwood's
//! controllers and users write most: Node taints, pod specs (in Pods and in workload
//! templates: containers, tolerations, resources), the pod fields an update may not change, and
//! a workload's selector (matching its template, immutable).

use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::builtin_kinds::{self, KindVisitor};
use super::error::ApiError;
use super::schema::Cause;
use super::schema::cause::{child, index};

const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const PREFIX_PART: &str = "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const DNS_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const QUANTITY: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];
/// Annotations may take 256 KiB in all.
const ANNOTATIONS_LIMIT: usize = 256 * 1024;

fn regex(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

fn name_part(text: &str) -> bool {
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    regex(&CELL, r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").is_some_and(|r| r.is_match(text))
}

fn dns_subdomain(text: &str) -> bool {
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    regex(
        &CELL,
        r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    )
    .is_some_and(|r| r.is_match(text))
}

fn dns_label(text: &str) -> bool {
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    text.len() <= 63
        && regex(&CELL, r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").is_some_and(|r| r.is_match(text))
}

/// Whether `text` is a resource quantity Kubernetes parses.
fn quantity(text: &str) -> bool {
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    regex(&CELL, driftwood_api::validation::rules::QUANTITY_PATTERN)
        .is_some_and(|r| r.is_match(text))
}

/// What is wrong with a qualified name (label/annotation key, finalizer, taint key).
fn qualified_name_errors(name: &str) -> Vec<String> {
    if name.matches('/').count() > 1 {
        return vec![format!(
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        )];
    }
    let (prefix, part) = match name.split_once('/') {
        Some((prefix, part)) => (Some(prefix), part),
        None => (None, name),
    };
    let mut errors = Vec::new();
    match prefix {
        Some("") => errors.push("prefix part must be non-empty".to_string()),
        Some(prefix) if prefix.len() > 253 => {
            errors.push("prefix part must be no more than 253 characters".to_string())
        }
        Some(prefix) if !dns_subdomain(prefix) => errors.push(PREFIX_PART.to_string()),
        _ => {}
    }
    if part.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else {
        if part.len() > 63 {
            errors.push("name part must be no more than 63 characters".to_string());
        }
        if !name_part(part) {
            errors.push(NAME_PART.to_string());
        }
    }
    errors
}

fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !name_part(value) {
        errors.push(LABEL_VALUE.to_string());
    }
    errors
}

/// `Unsupported value: "x": supported values: "a", "b"`.
fn unsupported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let supported: Vec<Value> = supported.iter().map(|v| Value::from(*v)).collect();
    Cause::not_supported(field, &Value::from(value), &supported)
}

fn invalid_each(causes: &mut Vec<Cause>, field: &str, value: &str, errors: Vec<String>) {
    for error in errors {
        causes.push(Cause::invalid(
            field,
            &Value::String(value.to_string()),
            error,
        ));
    }
}

fn strings(map: Option<&Value>) -> impl Iterator<Item = (&String, &str)> {
    map.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default()))
}

/// ObjectMeta of any kind: labels, annotations, finalizers.
pub fn metadata(object: &Value, causes: &mut Vec<Cause>) {
    metadata_at(object.get("metadata"), "metadata", causes);
}

fn metadata_at(metadata: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    let labels_path = child(path, "labels");
    for (name, value) in strings(metadata.and_then(|m| m.get("labels"))) {
        invalid_each(causes, &labels_path, name, qualified_name_errors(name));
        invalid_each(causes, &labels_path, value, label_value_errors(value));
    }
    let annotations_path = child(path, "annotations");
    let mut total = 0;
    for (name, value) in strings(metadata.and_then(|m| m.get("annotations"))) {
        invalid_each(
            causes,
            &annotations_path,
            &name.to_lowercase(),
            qualified_name_errors(name),
        );
        total += name.len() + value.len();
    }
    if total > ANNOTATIONS_LIMIT {
        causes.push(Cause::too_long(&annotations_path, ANNOTATIONS_LIMIT as u64));
    }
    let finalizers_path = child(path, "finalizers");
    for (i, finalizer) in metadata
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let text = finalizer.as_str().unwrap_or_default();
        invalid_each(
            causes,
            &index(&finalizers_path, i),
            text,
            qualified_name_errors(text),
        );
    }
}

/// Decodes the body as the kind's type, as kube-apiserver decodes a built-in write: a wrong type
/// or a malformed quantity is a 400 naming the kind.
pub fn decode(group: &str, version: &str, kind: &str, object: &Value) -> Result<(), ApiError> {
    struct Decode<'a>(&'a Value);
    impl KindVisitor for Decode<'_> {
        type Output = Result<(), String>;
        fn visit<T: schemars::JsonSchema + serde::de::DeserializeOwned>(
            &mut self,
        ) -> Result<(), String> {
            match T::deserialize(self.0) {
                Ok(_) => Ok(()),
                // Go's decoder takes a missing field or a null as the zero value; required
                // fields are validation's business, not decoding's.
                Err(error)
                    if error.to_string().starts_with("missing field")
                        || error.to_string().starts_with("invalid type: null") =>
                {
                    Ok(())
                }
                Err(error) => Err(error.to_string()),
            }
        }
    }
    let cannot = |detail: String| {
        ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {detail}"
        ))
    };
    if let Some(Err(error)) = builtin_kinds::visit(group, kind, &mut Decode(object)) {
        return Err(cannot(error));
    }
    let holds_quantities = matches!(
        (group, kind),
        (
            "",
            "Pod" | "Node" | "PersistentVolumeClaim" | "PersistentVolume"
        ) | (
            "apps",
            "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
        )
    );
    if holds_quantities && let Some(bad) = first_bad_quantity(object) {
        return Err(cannot(format!("{QUANTITY} (got {bad:?})")));
    }
    Ok(())
}

/// A quantity under any `resources`, `capacity`, `allocatable` or `hard` map that does not parse.
fn first_bad_quantity(value: &Value) -> Option<String> {
    match value {
        Value::Object(map) => map.iter().find_map(|(name, field)| {
            let holds_quantities = matches!(
                name.as_str(),
                "requests" | "limits" | "capacity" | "allocatable" | "hard" | "overhead"
            );
            if holds_quantities && let Some(quantities) = field.as_object() {
                let bad = quantities.values().find_map(|q| match q {
                    Value::String(text) if !quantity(text) => Some(text.clone()),
                    Value::String(_) | Value::Number(_) => None,
                    other => Some(other.to_string()),
                });
                if bad.is_some() {
                    return bad;
                }
            }
            first_bad_quantity(field)
        }),
        Value::Array(items) => items.iter().find_map(first_bad_quantity),
        _ => None,
    }
}

/// The kind's own rules (metadata excluded). `old` is the stored object on an update.
pub fn validate(
    group: &str,
    kind: &str,
    object: &Value,
    old: Option<&Value>,
    causes: &mut Vec<Cause>,
) {
    match (group, kind) {
        ("", "Node") => node(object, old, causes),
        ("", "Pod") => {
            if let Some(spec) = object.get("spec") {
                pod_spec(spec, "spec", causes);
            } else {
                causes.push(Cause::required("spec.containers", None));
            }
            if let Some(old) = old {
                pod_update(object, old, causes);
            }
        }
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            workload(object, old, causes)
        }
        ("policy", "PodDisruptionBudget") => {
            let spec = object.get("spec");
            if spec.and_then(|s| s.get("minAvailable")).is_some()
                && spec.and_then(|s| s.get("maxUnavailable")).is_some()
            {
                causes.push(Cause::invalid(
                    "spec",
                    object.get("spec").unwrap_or(&Value::Null),
                    "minAvailable and maxUnavailable cannot be both set",
                ));
            }
        }
        _ => {}
    }
}

fn node(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let taints = object.pointer("/spec/taints").and_then(Value::as_array);
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, taint) in taints.into_iter().flatten().enumerate() {
        let path = index("spec.taints", i);
        let taint_key = taint.get("key").and_then(Value::as_str).unwrap_or_default();
        invalid_each(
            causes,
            &child(&path, "key"),
            taint_key,
            qualified_name_errors(taint_key),
        );
        if let Some(value) = taint.get("value").and_then(Value::as_str) {
            invalid_each(
                causes,
                &child(&path, "value"),
                value,
                label_value_errors(value),
            );
        }
        let effect = taint
            .get("effect")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if effect.is_empty() {
            causes.push(Cause::required(&child(&path, "effect"), None));
        } else if !TAINT_EFFECTS.contains(&effect) {
            causes.push(unsupported(&child(&path, "effect"), effect, TAINT_EFFECTS));
        }
        if seen.contains(&(taint_key, effect)) {
            causes.push(Cause::duplicate(
                &path,
                &Value::String(format!("{taint_key}:{effect}")),
            ));
        }
        seen.push((taint_key, effect));
    }
    let provider = |o: &Value| {
        o.pointer("/spec/providerID")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    if let Some(old) = old {
        let (before, after) = (provider(old), provider(object));
        if !before.is_empty() && before != after {
            causes.push(Cause::forbidden(
                "spec.providerID",
                "node updates may not change providerID except from \"\" to valid",
            ));
        }
    }
}

/// A pod spec at `path` (a Pod's `spec`, a template's `spec.template.spec`).
fn pod_spec(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
    let containers = spec.get("containers").and_then(Value::as_array);
    if containers.is_none_or(|c| c.is_empty()) {
        causes.push(Cause::required(&child(path, "containers"), None));
    }
    let mut names: Vec<&str> = Vec::new();
    for list in ["initContainers", "containers"] {
        for (i, container) in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = index(&child(path, list), i);
            let name = container
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if name.is_empty() {
                causes.push(Cause::required(&child(&at, "name"), None));
            } else if !dns_label(name) {
                causes.push(Cause::invalid(
                    &child(&at, "name"),
                    &Value::from(name),
                    DNS_LABEL,
                ));
            } else if names.contains(&name) {
                causes.push(Cause::duplicate(&child(&at, "name"), &Value::from(name)));
            }
            names.push(name);
            if container
                .get("image")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .is_empty()
            {
                causes.push(Cause::required(&child(&at, "image"), None));
            }
        }
    }
    if let Some(policy) = spec.get("restartPolicy").and_then(Value::as_str) {
        let supported = ["Always", "OnFailure", "Never"];
        if !supported.contains(&policy) {
            causes.push(unsupported(
                &child(path, "restartPolicy"),
                policy,
                &supported,
            ));
        }
    }
    for (i, toleration) in spec
        .get("tolerations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = index(&child(path, "tolerations"), i);
        let toleration_key = toleration
            .get("key")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !toleration_key.is_empty() {
            invalid_each(
                causes,
                &child(&at, "key"),
                toleration_key,
                qualified_name_errors(toleration_key),
            );
        }
        let operator = toleration
            .get("operator")
            .and_then(Value::as_str)
            .unwrap_or("Equal");
        match operator {
            "Equal" | "" => {
                if toleration_key.is_empty() {
                    causes.push(Cause::invalid(&child(&at, "operator"), &Value::from(operator), "operator must be Exists when `key` is empty, which means \"match all values and all keys\""));
                }
            }
            "Exists" => {
                if toleration
                    .get("value")
                    .and_then(Value::as_str)
                    .is_some_and(|v| !v.is_empty())
                {
                    causes.push(Cause::invalid(
                        &child(&at, "operator"),
                        &Value::from(operator),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => {
                causes.push(unsupported(
                    &child(&at, "operator"),
                    other,
                    &["Equal", "Exists"],
                ));
            }
        }
        if let Some(effect) = toleration.get("effect").and_then(Value::as_str)
            && !effect.is_empty()
            && !TAINT_EFFECTS.contains(&effect)
        {
            causes.push(unsupported(&child(&at, "effect"), effect, TAINT_EFFECTS));
        }
    }
}

/// The pod spec with what an update may change blanked out (images, activeDeadlineSeconds,
/// tolerations, terminationGracePeriodSeconds, schedulingGates).
fn immutable_part(spec: &Value) -> Value {
    let mut spec = spec.clone();
    if let Some(map) = spec.as_object_mut() {
        for field in [
            "activeDeadlineSeconds",
            "tolerations",
            "terminationGracePeriodSeconds",
            "schedulingGates",
        ] {
            map.remove(field);
        }
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            for container in map
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(container) = container.as_object_mut() {
                    container.remove("image");
                }
            }
        }
    }
    spec
}

fn pod_update(object: &Value, old: &Value, causes: &mut Vec<Cause>) {
    let (Some(new_spec), Some(old_spec)) = (object.get("spec"), old.get("spec")) else {
        return;
    };
    if immutable_part(new_spec) != immutable_part(old_spec) {
        causes.push(Cause::forbidden(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
}

/// Label selector `matchLabels` matching `labels` (the common case; expressions are not checked).
fn selector_matches(selector: &Map<String, Value>, labels: Option<&Map<String, Value>>) -> bool {
    selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

fn workload(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let Some(spec) = object.get("spec") else {
        causes.push(Cause::required("spec.selector", None));
        return;
    };
    match spec.get("selector").and_then(Value::as_object) {
        None => causes.push(Cause::required("spec.selector", None)),
        Some(selector) => {
            let labels = spec
                .pointer("/template/metadata/labels")
                .and_then(Value::as_object);
            if !selector_matches(selector, labels) {
                causes.push(Cause::invalid(
                    "spec.template.metadata.labels",
                    &Value::Object(labels.cloned().unwrap_or_default()),
                    "`selector` does not match template `labels`",
                ));
            }
        }
    }
    if let Some(template) = spec.get("template") {
        metadata_at(template.get("metadata"), "spec.template.metadata", causes);
        match template.get("spec") {
            Some(pod) => pod_spec(pod, "spec.template.spec", causes),
            None => causes.push(Cause::required("spec.template.spec.containers", None)),
        }
    }
    if let Some(old) = old
        && old.pointer("/spec/selector") != spec.get("selector")
    {
        causes.push(Cause::invalid(
            "spec.selector",
            spec.get("selector").unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn causes(group: &str, kind: &str, object: Value, old: Option<Value>) -> Vec<String> {
        let mut causes = Vec::new();
        metadata(&object, &mut causes);
        validate(group, kind, &object, old.as_ref(), &mut causes);
        causes.iter().map(Cause::line).collect()
    }

    /// The objects the random-request run stored before: a 300-character label key, a taint
    /// with an empty key and effect `Weird`.
    #[test]
    fn a_bad_node_is_refused_naming_each_field() {
        let long = "a".repeat(300);
        let node = json!({"metadata": {"name": "n", "labels": {long.clone(): "x"}},
                          "spec": {"taints": [{"key": "", "effect": "Weird"}]}});
        assert_eq!(
            causes("", "Node", node, None),
            vec![
                format!("metadata.labels: Invalid value: {long:?}: name part must be no more than 63 characters"),
                "spec.taints[0].key: Invalid value: \"\": name part must be non-empty".to_string(),
                "spec.taints[0].effect: Unsupported value: \"Weird\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"".to_string(),
            ]
        );
    }

    #[test]
    fn qualified_names_follow_kubernetes() {
        assert!(qualified_name_errors("karpenter.sh/nodepool").is_empty());
        assert!(qualified_name_errors("app").is_empty());
        assert_eq!(qualified_name_errors("Bad_Prefix.com/x"), vec![PREFIX_PART]);
        assert!(qualified_name_errors("a/b/c")[0].starts_with("a qualified name must consist"));
        assert_eq!(qualified_name_errors("-x"), vec![NAME_PART]);
        assert!(label_value_errors("").is_empty());
        assert_eq!(label_value_errors("a b"), vec![LABEL_VALUE]);
    }

    #[test]
    fn pods_need_named_containers_with_images_and_keep_their_spec() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}, {"name": "c", "image": "x"}],
                         "tolerations": [{"operator": "Exists", "value": "v"}, {"key": "k", "operator": "Maybe"}]}});
        assert_eq!(
            causes("", "Pod", pod, None),
            vec![
                "spec.containers[0].image: Required value",
                "spec.containers[1].name: Duplicate value: \"c\"",
                "spec.tolerations[0].operator: Invalid value: \"Exists\": value must be empty when `operator` is 'Exists'",
                "spec.tolerations[1].operator: Unsupported value: \"Maybe\": supported values: \"Equal\", \"Exists\"",
            ]
        );
        let old = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "a"}]}});
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("b");
        new["spec"]["tolerations"] = json!([{"key": "k", "operator": "Exists"}]);
        assert!(causes("", "Pod", new.clone(), Some(old.clone())).is_empty());
        new["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "2"}});
        assert_eq!(
            causes("", "Pod", new, Some(old))[0].split(':').next(),
            Some("spec")
        );
    }

    #[test]
    fn workload_selectors_match_their_template_and_do_not_change() {
        let deployment = json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "api"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
        assert_eq!(
            causes("apps", "Deployment", deployment.clone(), None),
            vec![
                "spec.template.metadata.labels: Invalid value: \"object\": `selector` does not match template `labels`"
            ]
        );
        let mut fixed = deployment;
        fixed["spec"]["template"]["metadata"]["labels"]["app"] = json!("web");
        assert!(causes("apps", "Deployment", fixed.clone(), None).is_empty());
        let mut changed = fixed.clone();
        changed["spec"]["selector"]["matchLabels"]["tier"] = json!("x");
        changed["spec"]["template"]["metadata"]["labels"]["tier"] = json!("x");
        assert_eq!(
            causes("apps", "Deployment", changed, Some(fixed)),
            vec!["spec.selector: Invalid value: \"object\": field is immutable"]
        );
    }

    #[test]
    fn bodies_that_do_not_decode_as_the_kind_are_bad_requests() {
        let error = decode(
            "",
            "v1",
            "Node",
            &json!({"metadata": {"name": "n"}, "spec": "x"}),
        )
        .unwrap_err();
        assert_eq!(error.code, 400);
        assert!(
            error
                .message
                .starts_with("Node in version \"v1\" cannot be handled as a Node: "),
            "{}",
            error.message
        );
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "lots"}}}]}});
        let error = decode("", "v1", "Pod", &pod).unwrap_err();
        assert!(
            error.message.contains("quantities must match"),
            "{}",
            error.message
        );
        assert!(decode("", "v1", "Pod", &json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}})).is_ok());
    }
}
