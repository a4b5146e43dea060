//! Custom resources admitted as kube-apiserver admits them against their CRD's structural
//! schema: unknown fields pruned (reported as warnings, or refused under strict field
//! validation), `default`s applied, then every value constraint and CEL rule checked, with
//! unchanged subtrees of an update not checked again (ratcheting).

pub mod cause;
mod cel;
mod defaults;
mod prune;
mod values;

pub use cause::Cause;
pub use defaults::apply_defaults;

use serde_json::Value;

use super::error::ApiError;

/// The `fieldValidation` of a write request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Unknown fields are dropped silently.
    Ignore,
    /// Unknown fields are dropped with a warning each (the server's default).
    #[default]
    Warn,
    /// Unknown fields fail the request.
    Strict,
}

impl FieldValidation {
    /// Reads the query parameter (absent: `Warn`).
    pub fn parse(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Ignore") => Ok(Self::Ignore),
            Some("Strict") => Ok(Self::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// Why a custom resource was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// Strict field validation found fields the schema does not declare (their paths).
    UnknownFields(Vec<String>),
    /// Values break the schema or its rules.
    Invalid(Vec<Cause>),
}

/// Prunes, defaults and validates `object` against `schema` (the version's openAPIV3Schema);
/// `old` is the stored object on an update. Returns the warnings to send.
pub fn admit(
    schema: &Value,
    object: &mut Value,
    old: Option<&Value>,
    validation: FieldValidation,
) -> Result<Vec<String>, Rejection> {
    let mut unknown = Vec::new();
    prune::prune(schema, object, "", true, &mut unknown);
    if validation == FieldValidation::Strict && !unknown.is_empty() {
        return Err(Rejection::UnknownFields(unknown));
    }
    apply_defaults(schema, object);
    let mut causes = Vec::new();
    values::validate(schema, object, old, "", &mut causes);
    if !causes.is_empty() {
        return Err(Rejection::Invalid(causes));
    }
    Ok(match validation {
        FieldValidation::Warn => unknown
            .iter()
            .map(|field| format!("unknown field {field:?}"))
            .collect(),
        _ => Vec::new(),
    })
}
