//! Node selector requirements with Karpenter's `minValues`, shared by NodePool and NodeClaim.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const OP_IN: &str = "In";
pub const OP_NOT_IN: &str = "NotIn";
pub const OP_EXISTS: &str = "Exists";
pub const OP_DOES_NOT_EXIST: &str = "DoesNotExist";
pub const OP_GT: &str = "Gt";
pub const OP_LT: &str = "Lt";
pub const OP_GTE: &str = "Gte";
pub const OP_LTE: &str = "Lte";

/// Every operator a requirement may use.
pub const OPERATORS: &[&str] = &[
    OP_IN,
    OP_NOT_IN,
    OP_EXISTS,
    OP_DOES_NOT_EXIST,
    OP_GT,
    OP_LT,
    OP_GTE,
    OP_LTE,
];

/// A node selector requirement (key, operator, values) with an optional minimum number of
/// distinct values the launch must keep flexible.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    /// The label key that the selector applies to.
    pub key: String,
    /// A key's relationship to a set of values: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte.
    pub operator: String,
    /// An array of string values. In/NotIn need at least one; Exists/DoesNotExist none;
    /// Gt/Lt/Gte/Lte exactly one integer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The minimum number of unique values required for this key (1-50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<i64>,
}

impl NodeSelectorRequirementWithMinValues {
    pub fn new(key: &str, operator: &str, values: &[&str]) -> Self {
        Self {
            key: key.to_string(),
            operator: operator.to_string(),
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }
}
