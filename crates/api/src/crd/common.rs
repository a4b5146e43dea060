//! Schema rules shared by the three CRDs: status conditions and resource quantity maps.

use super::schema::Schema;
use crate::validation::rules;
use serde_json::json;

/// Status conditions: a status of True/False/Unknown, a
/// type of the qualified-name form, bounded reason and message, a non-negative generation.
/// (Karpenter also requires reason, message and lastTransitionTime and patterns the reason;
/// driftwood leaves those out so no status write of its own can be refused.)
/// `keyed`: the list is a map keyed by type (karpenter.sh kinds; the EC2NodeClass's is not).
pub(super) fn condition_rules(s: &mut Schema, path: &str, keyed: bool) -> Result<(), String> {
    if keyed {
        s.set(path, "x-kubernetes-list-type", json!("map"))?;
        s.set(path, "x-kubernetes-list-map-keys", json!(["type"]))?;
    }
    let item = format!("{path}.[]");
    s.enumeration(&format!("{item}.status"), &["True", "False", "Unknown"])?;
    s.pattern(&format!("{item}.type"), rules::CONDITION_TYPE_PATTERN)?;
    s.set(&format!("{item}.type"), "maxLength", json!(316))?;
    s.set(&format!("{item}.reason"), "maxLength", json!(1024))?;
    s.set(&format!("{item}.message"), "maxLength", json!(32768))?;
    s.set(&format!("{item}.observedGeneration"), "minimum", json!(0))
}

/// A map of resource quantities: each value of the quantity form.
pub(super) fn quantity_map_rules(s: &mut Schema, path: &str) -> Result<(), String> {
    s.pattern(&format!("{path}.{{}}"), rules::QUANTITY_PATTERN)
}
