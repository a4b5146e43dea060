//! `SelfSubjectAccessReview`, so `kubectl auth can-i` answers: the embedded cluster has no
//! authorization (every request of every client is allowed), and says so in each review's
//! status. A review is validated as kube-apiserver validates one (exactly one of
//! resourceAttributes and nonResourceAttributes), answered at once and never stored.

use serde_json::{Value, json};

use super::error::ApiError;
use super::resources::ResourceInfo;

/// Why every review is allowed.
pub const REASON: &str = "the embedded cluster allows every request (it has no authorization)";

/// Answer a review: the spec as sent, `status.allowed: true`.
pub fn answer(info: &ResourceInfo, version: &str, review: Value) -> Result<Value, ApiError> {
    let kind = info.kind.as_str();
    let spec = review.get("spec").cloned().unwrap_or_else(|| json!({}));
    let resource = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    if resource.is_some() == non_resource.is_some() {
        return Err(ApiError::invalid(
            kind,
            "",
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    let mut metadata = review.get("metadata").cloned().unwrap_or_else(|| json!({}));
    if let Some(map) = metadata.as_object_mut() {
        map.insert("creationTimestamp".into(), Value::Null);
    }
    Ok(json!({
        "apiVersion": info.api_version(version),
        "kind": kind,
        "metadata": metadata,
        "spec": spec,
        "status": {"allowed": true, "reason": REASON},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::resources::{Registry, ResourceKey};

    fn info() -> ResourceInfo {
        Registry::builtin()
            .get(&ResourceKey::new(
                "authorization.k8s.io",
                "selfsubjectaccessreviews",
            ))
            .cloned()
            .unwrap()
    }

    #[test]
    fn a_review_is_allowed_and_echoes_its_spec() {
        let spec = json!({"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": "kube-system"}});
        let answer = answer(&info(), "v1", json!({"spec": spec})).unwrap();
        assert_eq!(answer["apiVersion"], "authorization.k8s.io/v1");
        assert_eq!(answer["kind"], "SelfSubjectAccessReview");
        assert_eq!(answer["spec"], spec);
        assert_eq!(answer["status"]["allowed"], true);
        assert_eq!(answer["status"]["reason"], REASON);
    }

    #[test]
    fn a_review_names_exactly_one_kind_of_attributes() {
        for spec in [
            json!({}),
            json!({"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/healthz", "verb": "get"}}),
        ] {
            let error = answer(&info(), "v1", json!({"spec": spec})).unwrap_err();
            assert_eq!(error.code, 422, "{spec}");
            assert!(error.message.contains("exactly one"), "{}", error.message);
        }
    }
}
