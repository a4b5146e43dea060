//! Template hashing for drift: a stable hash of the NodePool template and of the EC2NodeClass
//! static spec, plus per-field hashes so a later comparison can name what changed.
//!
//! Hashes are independent of map order and of the order of set-like lists, treat an absent
//! field like an empty one, and compare durations by value ("720h" equals "720h0m0s").

mod canonical;
mod ec2nodeclass;
mod nodepool;

pub use canonical::{canonical_hash, fnv1a64, normalize};
pub use ec2nodeclass::{EC2NODECLASS_HASH_VERSION, ec2nodeclass_hashes};
pub use nodepool::{NODEPOOL_HASH_VERSION, nodepool_hashes};

use std::collections::BTreeMap;

/// The hash of a template and of each of its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateHashes {
    /// Hash of the whole template (decimal u64, as Karpenter writes it).
    pub hash: String,
    /// Hash of each field present, keyed by its JSON name (labels, taints, userData, ...).
    pub fields: BTreeMap<String, String>,
}

impl TemplateHashes {
    /// The per-field hashes as the JSON an annotation carries.
    pub fn fields_annotation(&self) -> String {
        serde_json::to_string(&self.fields).unwrap_or_default()
    }
}

/// How a stamped hash compares with the current one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashComparison {
    /// Same hash version and same hash: no drift.
    Unchanged,
    /// Stamped with another hash version (an upgrade, or another controller stamped it): the
    /// object must be re-stamped, never drifted, on this evidence.
    VersionMismatch,
    /// No hash stamped at all: re-stamp, do not drift.
    NotStamped,
    /// Same version, different hash. `changed` names the fields when per-field hashes were
    /// stamped (empty when they were not).
    Changed { changed: Vec<String> },
}

/// Compares what was stamped on an object (hash, version and per-field annotation as read
/// from its annotations) with the current hashes.
pub fn compare_stamped(
    stamped_hash: Option<&str>,
    stamped_version: Option<&str>,
    stamped_fields: Option<&str>,
    current: &TemplateHashes,
    current_version: &str,
) -> HashComparison {
    let Some(stamped_hash) = stamped_hash else {
        return HashComparison::NotStamped;
    };
    if stamped_version != Some(current_version) {
        return HashComparison::VersionMismatch;
    }
    if stamped_hash == current.hash {
        return HashComparison::Unchanged;
    }
    let changed = stamped_fields
        .and_then(parse_fields_annotation)
        .map(|fields| changed_fields(&fields, &current.fields))
        .unwrap_or_default();
    HashComparison::Changed { changed }
}

/// Parses a per-field hash annotation; `None` when it is absent or malformed.
pub fn parse_fields_annotation(value: &str) -> Option<BTreeMap<String, String>> {
    serde_json::from_str(value).ok()
}

/// The fields whose hashes differ between what was stamped and what is current (a field present
/// on one side only counts as changed), sorted by name.
pub fn changed_fields(
    stamped: &BTreeMap<String, String>,
    current: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut names: Vec<&String> = stamped.keys().chain(current.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| stamped.get(*n) != current.get(*n))
        .cloned()
        .collect()
}
