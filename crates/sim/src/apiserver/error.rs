//! API errors and their rendering as Kubernetes `Status` objects.

use serde_json::{Value, json};

use super::schema::Cause;

/// A failed API request, rendered to the client as a `meta.k8s.io/v1` Status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `AlreadyExists`, ...).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// Optional `details` (name, group, kind, causes).
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// Attach `details` naming the object.
    pub fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": group, "kind": kind}));
        self
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 404 NotFound for a named object of `resource` (e.g. `pods "x" not found`).
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified(group, resource);
        Self::new(404, "NotFound", format!("{qualified} \"{name}\" not found"))
            .with_details(group, resource, name)
    }

    /// 404 NotFound for an unknown path.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource (path {path})"),
        )
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified(group, resource);
        Self::new(
            409,
            "AlreadyExists",
            format!("{qualified} \"{name}\" already exists"),
        )
        .with_details(group, resource, name)
    }

    /// 409 Conflict on a stale resourceVersion.
    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified(group, resource);
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qualified} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
        .with_details(group, resource, name)
    }

    /// 409 Conflict with a custom message.
    pub fn conflict_message(message: impl Into<String>) -> Self {
        Self::new(409, "Conflict", message)
    }

    /// 410 Gone / Expired: the requested resourceVersion is older than the event log keeps.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    /// 409 Conflict of a server-side apply: `details` carries the conflicting fields as causes.
    pub fn apply_conflict(message: impl Into<String>, details: Value) -> Self {
        let mut error = Self::new(409, "Conflict", message);
        error.details = Some(details);
        error
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 422 Invalid, naming the object and the offending field.
    pub fn invalid(kind: &str, name: &str, field: &str, rule: impl Into<String>) -> Self {
        let rule = rule.into();
        let mut error = Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {field}: {rule}"),
        );
        error.details = Some(json!({
            "name": name,
            "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": rule, "field": field}],
        }));
        error
    }

    /// 422 Invalid with every cause, worded as kube-apiserver words it:
    /// `Kind.group "name" is invalid: field: message` (several causes in brackets).
    pub fn invalid_causes(group: &str, kind: &str, name: &str, causes: &[Cause]) -> Self {
        let lines: Vec<String> = causes.iter().map(Cause::line).collect();
        let listed = match lines.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut error = Self::new(
            422,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid: {listed}"),
        );
        error.details = Some(json!({
            "name": name,
            "group": group,
            "kind": kind,
            "causes": causes.iter().map(Cause::to_status_cause).collect::<Vec<_>>(),
        }));
        error
    }

    /// 400 BadRequest for fields a strict request sent that the schema does not declare.
    pub fn unknown_fields(kind: &str, version: &str, fields: &[String]) -> Self {
        let listed: Vec<String> = fields
            .iter()
            .map(|f| format!("unknown field {f:?}"))
            .collect();
        Self::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
            listed.join(", ")
        ))
    }

    /// 429 TooManyRequests (eviction blocked by a disruption budget).
    pub fn too_many_requests(message: impl Into<String>, cause: Value) -> Self {
        let mut error = Self::new(429, "TooManyRequests", message);
        error.details = Some(json!({"causes": [cause]}));
        error
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` object sent to the client.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let (Some(details), Some(map)) = (&self.details, status.as_object_mut()) {
            map.insert("details".to_string(), details.clone());
        }
        status
    }
}

/// `resource.group`, or just `resource` for the core group.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// A `Status` reporting success (returned by deletes that removed the object).
pub fn success_status(group: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "group": group, "kind": kind, "uid": uid},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_the_object_like_kubernetes() {
        let status = ApiError::not_found("", "pods", "web-1").to_status();
        assert_eq!(status["message"], "pods \"web-1\" not found");
        assert_eq!(status["code"], 404);
        assert_eq!(status["reason"], "NotFound");
        let status = ApiError::not_found("apps", "deployments", "web").to_status();
        assert_eq!(status["message"], "deployments.apps \"web\" not found");
    }
}
