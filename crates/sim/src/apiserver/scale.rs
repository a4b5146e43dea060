//! The `scale` subresource of Deployments and ReplicaSets (autoscaling/v1 Scale), as used
//! by `kubectl scale`.

use http::Method;
use serde_json::{Value, json};

use super::core::{ApiCore, CoreRequest, meta_str, metadata, parse_body};
use super::error::ApiError;
use super::resources::ResourceInfo;
use super::selectors::labels_of;
use super::write::{apply_patch, media_type};

/// The Scale view of a workload object.
pub fn scale_of(object: &Value) -> Value {
    let meta = metadata(object);
    let selector = object
        .pointer("/spec/selector")
        .map(|selector| {
            let labels = labels_of(&json!({"metadata": {"labels": selector.get("matchLabels").cloned().unwrap_or(json!({}))}}));
            labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
        })
        .unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
            "creationTimestamp": meta.get("creationTimestamp"),
        },
        "spec": {"replicas": object.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)},
        "status": {
            "replicas": object.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0),
            "selector": selector,
        },
    })
}

impl ApiCore {
    /// GET, PUT or PATCH on NAME/scale.
    pub(super) fn scale(
        &mut self,
        info: &ResourceInfo,
        version: &str,
        namespace: Option<&str>,
        name: &str,
        request: &CoreRequest,
    ) -> Result<Value, ApiError> {
        let existing = self.get_object(info, namespace, name)?;
        let current = scale_of(&existing);
        let wanted = if request.method == Method::GET {
            return Ok(current);
        } else if request.method == Method::PUT {
            parse_body(request)?
        } else if request.method == Method::PATCH {
            let scale_info = ResourceInfo {
                kind: "Scale".into(),
                strategic_merge: true,
                ..info.clone()
            };
            apply_patch(
                &scale_info,
                name,
                &media_type(&request.content_type),
                &request.body,
                &current,
            )?
        } else {
            return Err(ApiError::method_not_allowed(format!(
                "{} is not supported on {}",
                request.method, request.path
            )));
        };
        if let Some(requested) = meta_str(&wanted, "resourceVersion")
            && !requested.is_empty()
            && Some(requested) != meta_str(&existing, "resourceVersion")
        {
            return Err(ApiError::conflict(&info.group, &info.plural, name));
        }
        let replicas = wanted
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .filter(|r| *r >= 0)
            .ok_or_else(|| {
                ApiError::invalid(
                    "Scale",
                    name,
                    "spec.replicas",
                    "must be a non-negative integer",
                )
            })?;
        let mut updated = (*existing).clone();
        if let Some(spec) = updated.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("replicas".into(), json!(replicas));
        }
        let stored = self.finish_update(info, version, &existing, updated, false)?;
        Ok(scale_of(&stored))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_view_reports_replicas_and_selector() {
        let deployment = json!({
            "metadata": {"name": "web", "namespace": "default", "resourceVersion": "4"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "tier": "front"}}},
            "status": {"replicas": 2}
        });
        let scale = scale_of(&deployment);
        assert_eq!(scale["spec"]["replicas"], 3);
        assert_eq!(scale["status"]["replicas"], 2);
        assert_eq!(scale["status"]["selector"], "app=web,tier=front");
        assert_eq!(scale["metadata"]["resourceVersion"], "4");
    }
}
