//! Defaults and validation mirroring Karpenter's CRD and CEL rules. Each problem names the
//! object, the field path and the rule that was broken.

mod ec2nodeclass;
mod ec2nodeclass_options;
mod kubelet;
mod labels;
mod nodeclaim;
mod nodepool;
pub mod rules;
mod template;

use std::fmt;

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the field, e.g. `spec.disruption.budgets[0].nodes`.
    pub field: String,
    /// The rule, stated as a user can act on it.
    pub rule: String,
    /// The offending value, when there is one to show.
    pub value: Option<String>,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(f, "{}: Invalid value: {value:?}: {}", self.field, self.rule),
            None => write!(f, "{}: {}", self.field, self.rule),
        }
    }
}

/// Something accepted but worth telling the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldWarning {
    pub field: String,
    pub message: String,
}

impl fmt::Display for FieldWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The outcome of validating one object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ValidationReport {
    /// `Kind "name"`, e.g. `NodePool "default"`.
    pub object: String,
    pub errors: Vec<FieldError>,
    pub warnings: Vec<FieldWarning>,
}

impl ValidationReport {
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    /// Turns the report into a `Result`, keeping warnings out of the error path.
    pub fn into_result(self) -> Result<Vec<FieldWarning>, ValidationError> {
        if self.errors.is_empty() {
            Ok(self.warnings)
        } else {
            Err(ValidationError {
                object: self.object,
                errors: self.errors,
            })
        }
    }
}

/// An object broke one or more rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationError {
    pub object: String,
    pub errors: Vec<FieldError>,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is invalid: ", self.object)?;
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// Objects that can be validated.
pub trait Validate {
    fn validate(&self) -> ValidationReport;
}

/// Collects errors and warnings while walking an object.
pub(crate) struct Collector {
    report: ValidationReport,
}

impl Collector {
    pub(crate) fn new(kind: &str, name: Option<&str>) -> Self {
        let object = match name {
            Some(name) if !name.is_empty() => format!("{kind} {name:?}"),
            _ => format!("{kind} (unnamed)"),
        };
        Self {
            report: ValidationReport {
                object,
                ..Default::default()
            },
        }
    }

    pub(crate) fn error(&mut self, field: impl Into<String>, rule: impl Into<String>) {
        self.report.errors.push(FieldError {
            field: field.into(),
            rule: rule.into(),
            value: None,
        });
    }

    pub(crate) fn invalid(
        &mut self,
        field: impl Into<String>,
        value: impl Into<String>,
        rule: impl Into<String>,
    ) {
        self.report.errors.push(FieldError {
            field: field.into(),
            rule: rule.into(),
            value: Some(value.into()),
        });
    }

    pub(crate) fn warn(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.report.warnings.push(FieldWarning {
            field: field.into(),
            message: message.into(),
        });
    }

    /// Checks `value` against a pattern, reporting `rule` when it does not match.
    pub(crate) fn pattern(&mut self, field: &str, value: &str, pattern: &str, rule: &str) -> bool {
        let ok = rules::matches(pattern, value);
        if !ok {
            self.invalid(field, value, format!("{rule} (pattern {pattern})"));
        }
        ok
    }

    pub(crate) fn one_of(&mut self, field: &str, value: &str, allowed: &[&str]) -> bool {
        let ok = allowed.contains(&value);
        if !ok {
            self.invalid(
                field,
                value,
                format!("must be one of {}", quoted_list(allowed)),
            );
        }
        ok
    }

    pub(crate) fn finish(self) -> ValidationReport {
        self.report
    }
}

pub(crate) fn quoted_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("{i:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub use ec2nodeclass::INFERRED_FAMILY_WARNING;
