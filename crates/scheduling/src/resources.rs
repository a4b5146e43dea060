//! Resource lists (cpu, memory, pods, ephemeral-storage, extended resources) held as exact
//! integer milli-units, with the arithmetic the scheduler needs.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use thiserror::Error;

use crate::quantity::{QuantityError, format_bytes_milli, format_milli, parse_quantity_milli};

/// Resource name of CPU (cores).
pub const CPU: &str = "cpu";
/// Resource name of memory (bytes).
pub const MEMORY: &str = "memory";
/// Resource name of the pod count a node accepts.
pub const PODS: &str = "pods";
/// Resource name of local ephemeral storage (bytes).
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// `nodes`: not a resource of any node, but a NodePool limit (`spec.limits.nodes`) that every
/// node counts as one against.
pub const NODES: &str = "nodes";

/// A quantity of one named resource could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("resource {resource:?}: {source}")]
pub struct ResourceError {
    /// The resource name, e.g. `memory`.
    pub resource: String,
    /// What was wrong with its quantity.
    #[source]
    pub source: QuantityError,
}

/// A list of resources, each an exact amount in milli-units (`cpu` 1500 = 1.5 cores,
/// `memory` 1024000 = 1024 bytes, `pods` 1000 = one pod).
///
/// Missing names are zero. Arithmetic saturates instead of overflowing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Resources(pub BTreeMap<String, i64>);

impl Resources {
    /// An empty list (everything zero).
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a list from `(name, milli-units)` pairs; repeated names are added.
    pub fn from_milli<'a>(pairs: impl IntoIterator<Item = (&'a str, i64)>) -> Self {
        let mut out = Self::new();
        for (name, value) in pairs {
            out.add_one(name, value);
        }
        out
    }

    /// Parses `(name, quantity)` pairs such as `("cpu", "500m")`, `("memory", "1Gi")`.
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ResourceError> {
        let mut out = Self::new();
        for (name, text) in pairs {
            let value = parse_quantity_milli(text).map_err(|source| ResourceError {
                resource: name.to_string(),
                source,
            })?;
            out.add_one(name, value);
        }
        Ok(out)
    }

    /// Parses a Kubernetes resource list (`requests`, `allocatable`, `overhead`...).
    pub fn from_quantities(list: &BTreeMap<String, Quantity>) -> Result<Self, ResourceError> {
        Self::parse(list.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))
    }

    /// The amount of `name` in milli-units (0 when absent).
    pub fn get(&self, name: &str) -> i64 {
        self.0.get(name).copied().unwrap_or(0)
    }

    /// Sets `name` to `milli`.
    pub fn set(&mut self, name: &str, milli: i64) {
        self.0.insert(name.to_string(), milli);
    }

    /// Adds `milli` to `name`.
    pub fn add_one(&mut self, name: &str, milli: i64) {
        let slot = self.0.entry(name.to_string()).or_insert(0);
        *slot = slot.saturating_add(milli);
    }

    /// `self + other`, name by name.
    pub fn add(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        for (name, value) in &other.0 {
            out.add_one(name, *value);
        }
        out
    }

    /// `self - other`, name by name (may go negative).
    pub fn sub(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        for (name, value) in &other.0 {
            out.add_one(name, value.saturating_neg());
        }
        out
    }

    /// Name-by-name maximum of `self` and `other`.
    pub fn max(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        for (name, value) in &other.0 {
            let slot = out.0.entry(name.clone()).or_insert(0);
            *slot = (*slot).max(*value);
        }
        out
    }

    /// Whether every amount in `self` is at most the same amount in `capacity`.
    pub fn fits(&self, capacity: &Resources) -> bool {
        self.0
            .iter()
            .all(|(name, value)| *value <= capacity.get(name))
    }

    /// Names whose amount in `self` exceeds `capacity`, in name order.
    pub fn exceeding(&self, capacity: &Resources) -> Vec<String> {
        self.0
            .iter()
            .filter(|(name, value)| **value > capacity.get(name))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Whether every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.0.values().all(|v| *v == 0)
    }

    /// Names with a non-zero amount.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0
            .iter()
            .filter(|(_, v)| **v != 0)
            .map(|(k, _)| k.as_str())
    }
}

/// Formats one amount for humans: cores for cpu, binary bytes for memory/storage, counts otherwise.
pub fn format_amount(name: &str, milli: i64) -> String {
    match name {
        MEMORY | EPHEMERAL_STORAGE => format_bytes_milli(milli),
        _ => format_milli(milli),
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (name, value) in self.0.iter().filter(|(_, v)| **v != 0) {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{name}={}", format_amount(name, *value))?;
        }
        if first {
            f.write_str("(none)")?;
        }
        Ok(())
    }
}
