//! One reason a write is invalid, worded and classified as kube-apiserver words it (the
//! `field.Error` of apimachinery): the cause list of a `422 Invalid` Status.

use serde_json::{Value, json};

/// One invalid field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, …
    pub reason: &'static str,
    /// The field, in kube-apiserver's path form (`spec.budgets[0].nodes`).
    pub field: String,
    /// What kubectl prints after the field.
    pub message: String,
}

/// How a value shows in an `Invalid value:` message: strings quoted, numbers and booleans
/// as written, compound values by their type.
pub fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "\"null\"".to_string(),
        Value::Array(_) => "\"array\"".to_string(),
        Value::Object(_) => "\"object\"".to_string(),
    }
}

/// The JSON type name of a value, as type errors name it.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "string",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Cause {
    /// `Invalid value: <value>: <detail>`.
    pub fn invalid(field: &str, value: &Value, detail: impl AsRef<str>) -> Self {
        Self::invalid_shown(field, &shown(value), detail)
    }

    /// `Invalid value: <shown>: <detail>` with the value already rendered.
    pub fn invalid_shown(field: &str, shown: &str, detail: impl AsRef<str>) -> Self {
        Self {
            reason: "FieldValueInvalid",
            field: field.to_string(),
            message: format!("Invalid value: {shown}: {}", detail.as_ref()),
        }
    }

    /// `Invalid value: "<type>": <field> in body must be of type <want>: "<type>"`.
    pub fn wrong_type(field: &str, value: &Value, want: &str) -> Self {
        let actual = type_name(value);
        Self {
            reason: "FieldValueTypeInvalid",
            field: field.to_string(),
            message: format!(
                "Invalid value: \"{actual}\": {field} in body must be of type {want}: \"{actual}\""
            ),
        }
    }

    /// `Required value` (with an optional detail).
    pub fn required(field: &str, detail: Option<&str>) -> Self {
        Self {
            reason: "FieldValueRequired",
            field: field.to_string(),
            message: match detail {
                Some(detail) if !detail.is_empty() => format!("Required value: {detail}"),
                _ => "Required value".to_string(),
            },
        }
    }

    /// `Unsupported value: <value>: supported values: "a", "b"`.
    pub fn not_supported(field: &str, value: &Value, supported: &[Value]) -> Self {
        let list = supported
            .iter()
            .map(|v| match v {
                Value::String(s) => format!("{s:?}"),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ");
        Self {
            reason: "FieldValueNotSupported",
            field: field.to_string(),
            message: format!(
                "Unsupported value: {}: supported values: {list}",
                shown(value)
            ),
        }
    }

    /// `Too long: may not be more than <n> bytes`.
    pub fn too_long(field: &str, max: u64) -> Self {
        Self {
            reason: "FieldValueTooLong",
            field: field.to_string(),
            message: format!("Too long: may not be more than {max} bytes"),
        }
    }

    /// `Too many: <count>: must have at most <max> items`.
    pub fn too_many(field: &str, count: usize, max: u64) -> Self {
        Self {
            reason: "FieldValueTooMany",
            field: field.to_string(),
            message: format!("Too many: {count}: must have at most {max} items"),
        }
    }

    /// `Duplicate value: <value>`.
    pub fn duplicate(field: &str, value: &Value) -> Self {
        Self {
            reason: "FieldValueDuplicate",
            field: field.to_string(),
            message: format!("Duplicate value: {value}"),
        }
    }

    /// `Forbidden: <detail>`.
    pub fn forbidden(field: &str, detail: &str) -> Self {
        Self {
            reason: "FieldValueForbidden",
            field: field.to_string(),
            message: format!("Forbidden: {detail}"),
        }
    }

    /// `field: message`, as kubectl prints one cause.
    pub fn line(&self) -> String {
        if self.field.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.field, self.message)
        }
    }

    /// The entry in a Status's `details.causes`.
    pub fn to_status_cause(&self) -> Value {
        json!({"reason": self.reason, "message": self.message, "field": self.field})
    }
}

/// `a.b`, `a[0]`, `a[key]`: kube-apiserver's field paths.
pub fn child(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// `path[index]`.
pub fn index(path: &str, index: usize) -> String {
    format!("{path}[{index}]")
}

/// `path[key]` (map entries under additionalProperties).
pub fn key(path: &str, key: &str) -> String {
    format!("{path}[{key}]")
}
