//! Requirement algebra over label keys: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte with
//! minValues; exact intersection; and the compatibility checks used for scheduling and drift.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use driftwood_api::wellknown::is_well_known_label;
use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use thiserror::Error;

/// A node-selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    /// The label is present with one of the values.
    In,
    /// The label is absent or has none of the values.
    NotIn,
    /// The label is present (any value).
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label is an integer greater than the value.
    Gt,
    /// The label is an integer less than the value.
    Lt,
    /// The label is an integer greater than or equal to the value.
    Gte,
    /// The label is an integer less than or equal to the value.
    Lte,
}

impl Operator {
    /// Parses the Kubernetes spelling (`"In"`, `"NotIn"`, ...).
    pub fn parse(text: &str) -> Result<Self, RequirementError> {
        Ok(match text {
            "In" => Self::In,
            "NotIn" => Self::NotIn,
            "Exists" => Self::Exists,
            "DoesNotExist" => Self::DoesNotExist,
            "Gt" => Self::Gt,
            "Lt" => Self::Lt,
            "Gte" => Self::Gte,
            "Lte" => Self::Lte,
            other => {
                return Err(RequirementError::UnknownOperator {
                    key: String::new(),
                    operator: other.to_string(),
                });
            }
        })
    }

    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::In => "In",
            Self::NotIn => "NotIn",
            Self::Exists => "Exists",
            Self::DoesNotExist => "DoesNotExist",
            Self::Gt => "Gt",
            Self::Lt => "Lt",
            Self::Gte => "Gte",
            Self::Lte => "Lte",
        }
    }
}

/// A requirement that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RequirementError {
    /// The operator is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte.
    #[error(
        "requirement on key {key:?}: unknown operator {operator:?} (expected In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte)"
    )]
    UnknownOperator {
        /// The label key.
        key: String,
        /// The operator as written.
        operator: String,
    },
    /// The number or shape of values does not suit the operator.
    #[error("requirement on key {key:?} with operator {operator}: {rule}")]
    BadValues {
        /// The label key.
        key: String,
        /// The operator.
        operator: &'static str,
        /// The rule broken.
        rule: String,
    },
    /// minValues is not a positive count.
    #[error("requirement on key {key:?}: minValues must be at least 1, got {min_values}")]
    BadMinValues {
        /// The label key.
        key: String,
        /// The value given.
        min_values: i64,
    },
}

/// The set of label values (and possibly absence of the label) that one key may take.
///
/// It is kept in a normal form so that equal sets compare equal:
/// * `complement == false`: the allowed values are exactly `values` (bounds are folded in);
/// * `complement == true`: every value except `values` is allowed, further limited to integers in
///   `min..=max` when a bound is set;
/// * `allow_absent`: whether a node without the label satisfies it (true for NotIn and
///   DoesNotExist, false for In, Exists, Gt, Lt...).
///
/// `min_values` asks a NodeClaim's instance types to span at least that many distinct values.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Requirement {
    complement: bool,
    values: BTreeSet<String>,
    min: Option<i64>,
    max: Option<i64>,
    allow_absent: bool,
    min_values: Option<usize>,
}

impl Requirement {
    /// `In values`.
    pub fn is_in<S: Into<String>>(values: impl IntoIterator<Item = S>) -> Self {
        Self::raw(
            false,
            values.into_iter().map(Into::into).collect(),
            None,
            None,
            false,
        )
    }

    /// `NotIn values`.
    pub fn not_in<S: Into<String>>(values: impl IntoIterator<Item = S>) -> Self {
        Self::raw(
            true,
            values.into_iter().map(Into::into).collect(),
            None,
            None,
            true,
        )
    }

    /// `Exists`.
    pub fn exists() -> Self {
        Self::raw(true, BTreeSet::new(), None, None, false)
    }

    /// `DoesNotExist`.
    pub fn does_not_exist() -> Self {
        Self::raw(false, BTreeSet::new(), None, None, true)
    }

    /// An integer label within `min..=max` (either bound optional).
    pub fn between(min: Option<i64>, max: Option<i64>) -> Self {
        Self::raw(true, BTreeSet::new(), min, max, false)
    }

    /// `Gt n`: an integer label strictly greater than `n`.
    pub fn gt(n: i64) -> Self {
        match n.checked_add(1) {
            Some(min) => Self::between(Some(min), None),
            None => Self::unsatisfiable(),
        }
    }

    /// `Lt n`: an integer label strictly less than `n`.
    pub fn lt(n: i64) -> Self {
        match n.checked_sub(1) {
            Some(max) => Self::between(None, Some(max)),
            None => Self::unsatisfiable(),
        }
    }

    /// Nothing satisfies it (not even absence of the label).
    pub fn unsatisfiable() -> Self {
        Self::raw(false, BTreeSet::new(), None, None, false)
    }

    /// Builds a requirement from an operator and its values, checking the values suit it.
    pub fn new(key: &str, operator: Operator, values: &[String]) -> Result<Self, RequirementError> {
        let bad = |rule: &str| RequirementError::BadValues {
            key: key.to_string(),
            operator: operator.as_str(),
            rule: rule.to_string(),
        };
        match operator {
            Operator::In if values.is_empty() => Err(bad("needs at least one value")),
            // As in Karpenter, `NotIn []` excludes nothing but needs the label: Exists.
            Operator::NotIn if values.is_empty() => Ok(Self::exists()),
            Operator::In => Ok(Self::is_in(values.iter().cloned())),
            Operator::NotIn => Ok(Self::not_in(values.iter().cloned())),
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                Err(bad("takes no values"))
            }
            Operator::Exists => Ok(Self::exists()),
            Operator::DoesNotExist => Ok(Self::does_not_exist()),
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
                let [value] = values else {
                    return Err(bad("needs exactly one integer value"));
                };
                let n: i64 = value
                    .trim()
                    .parse()
                    .map_err(|_| bad(&format!("value {value:?} is not an integer")))?;
                Ok(match operator {
                    Operator::Gt => Self::gt(n),
                    Operator::Lt => Self::lt(n),
                    Operator::Gte => Self::between(Some(n), None),
                    _ => Self::between(None, Some(n)),
                })
            }
        }
    }

    /// Returns the requirement with `min_values` set.
    pub fn with_min_values(mut self, min_values: Option<usize>) -> Self {
        self.min_values = min_values;
        self
    }

    fn raw(
        complement: bool,
        values: BTreeSet<String>,
        min: Option<i64>,
        max: Option<i64>,
        allow_absent: bool,
    ) -> Self {
        let mut r = Self {
            complement,
            values,
            min,
            max,
            allow_absent,
            min_values: None,
        };
        r.normalize();
        r
    }

    fn normalize(&mut self) {
        if let (Some(lo), Some(hi)) = (self.min, self.max)
            && lo > hi
        {
            self.complement = false;
            self.values.clear();
            self.min = None;
            self.max = None;
            return;
        }
        let (min, max) = (self.min, self.max);
        if !self.complement {
            if min.is_some() || max.is_some() {
                self.values.retain(|v| within(v, min, max));
            }
            self.min = None;
            self.max = None;
        } else if min.is_some() || max.is_some() {
            // Excluded values outside the bounds are excluded anyway.
            self.values.retain(|v| within(v, min, max));
            if let (Some(lo), Some(hi)) = (min, max) {
                let excluded: BTreeSet<i64> =
                    self.values.iter().filter_map(|v| v.parse().ok()).collect();
                let width = i128::from(hi) - i128::from(lo) + 1;
                if excluded.len() as i128 >= width {
                    // Every integer in range is excluded: no value is left.
                    self.complement = false;
                    self.values.clear();
                    self.min = None;
                    self.max = None;
                }
            }
        }
    }

    /// Whether a label with this value satisfies the requirement.
    pub fn has(&self, value: &str) -> bool {
        if self.complement {
            !self.values.contains(value)
                && ((self.min.is_none() && self.max.is_none()) || within(value, self.min, self.max))
        } else {
            self.values.contains(value)
        }
    }

    /// Whether a node whose label is `value` (`None`: no such label) satisfies the requirement.
    pub fn matches(&self, value: Option<&str>) -> bool {
        match value {
            Some(v) => self.has(v),
            None => self.allow_absent,
        }
    }

    /// Whether a node without the label satisfies it (NotIn, DoesNotExist).
    pub fn allows_absent(&self) -> bool {
        self.allow_absent
    }

    /// Whether Karpenter reads this requirement as one a node without the label meets: its
    /// operator is NotIn or DoesNotExist once normalized. Besides NotIn and DoesNotExist proper,
    /// that is a requirement no value meets (an empty `In`, `In [a]` with `In [b]`, `Gt 5` with
    /// `Lt 3`) and a NotIn list intersected with Exists. Used for requirement drift only, where
    /// Karpenter's strict compatibility lets such keys be missing.
    pub fn karpenter_allows_missing(&self) -> bool {
        self.allow_absent
            || !self.has_any_value()
            || (self.complement
                && !self.values.is_empty()
                && self.min.is_none()
                && self.max.is_none())
    }

    /// Whether some label value satisfies it (ignores absence).
    pub fn has_any_value(&self) -> bool {
        self.complement || !self.values.is_empty()
    }

    /// Whether nothing, not even absence of the label, satisfies it.
    pub fn is_unsatisfiable(&self) -> bool {
        !self.has_any_value() && !self.allow_absent
    }

    /// The allowed values when the set is finite (`In`), else `None`.
    pub fn finite_values(&self) -> Option<&BTreeSet<String>> {
        if self.complement {
            None
        } else {
            Some(&self.values)
        }
    }

    /// The single allowed value, when exactly one is allowed.
    pub fn single_value(&self) -> Option<&str> {
        match (self.complement, self.values.len()) {
            (false, 1) => self.values.iter().next().map(String::as_str),
            _ => None,
        }
    }

    /// A label value that satisfies the requirement, as Karpenter picks one for a launched
    /// node's custom labels: a single `In` value as it is; the first (in sorted order) of several;
    /// for `Exists`, `NotIn`, `Gt`, `Lt`, `Gte` and `Lte` an integer generated from `seed` within
    /// the bounds (`[0, i64::MAX]` when unbounded, as Karpenter draws from non-negative numbers)
    /// that no `NotIn` excludes. `None` when no value satisfies it (`DoesNotExist`, an empty `In`).
    pub fn any_value(&self, seed: u64) -> Option<String> {
        if !self.complement {
            return self.values.iter().next().cloned();
        }
        let hi = self.max.unwrap_or(i64::MAX);
        let lo = match self.min {
            Some(lo) => lo,
            // Karpenter draws from [0, upper]; a negative upper bound leaves only negatives.
            None => 0.min(hi),
        };
        if lo > hi {
            return None;
        }
        let width = (i128::from(hi) - i128::from(lo) + 1) as u128;
        let offset = u128::from(seed) % width;
        let mut candidate = i128::from(lo) + offset as i128;
        // At most |excluded| + 1 steps find a value no NotIn excludes (normalize guarantees one).
        for _ in 0..=self.values.len() {
            let text = candidate.to_string();
            if !self.values.contains(&text) {
                return Some(text);
            }
            candidate = if candidate >= i128::from(hi) {
                i128::from(lo)
            } else {
                candidate + 1
            };
        }
        None
    }

    /// The minimum number of distinct values instance types must span, if any.
    pub fn min_values(&self) -> Option<usize> {
        self.min_values
    }

    /// The operator that best describes the normal form.
    pub fn operator(&self) -> Operator {
        if self.complement {
            if self.min.is_some() {
                Operator::Gte
            } else if self.max.is_some() {
                Operator::Lte
            } else if self.values.is_empty() {
                Operator::Exists
            } else {
                Operator::NotIn
            }
        } else if self.values.is_empty() && self.allow_absent {
            Operator::DoesNotExist
        } else {
            Operator::In
        }
    }

    /// The exact intersection: a value satisfies the result iff it satisfies both.
    /// `min_values` is the larger of the two.
    pub fn intersection(&self, other: &Requirement) -> Requirement {
        let min = max_opt(self.min, other.min);
        let max = min_opt(self.max, other.max);
        let values: BTreeSet<String> = match (self.complement, other.complement) {
            (true, true) => self.values.union(&other.values).cloned().collect(),
            (true, false) => other
                .values
                .iter()
                .filter(|v| self.has(v))
                .cloned()
                .collect(),
            (false, true) => self
                .values
                .iter()
                .filter(|v| other.has(v))
                .cloned()
                .collect(),
            (false, false) => self.values.intersection(&other.values).cloned().collect(),
        };
        let complement = self.complement && other.complement;
        let mut out = Requirement {
            complement,
            values,
            min: if complement { min } else { None },
            max: if complement { max } else { None },
            allow_absent: self.allow_absent && other.allow_absent,
            min_values: self.min_values.max(other.min_values),
        };
        if complement {
            out.normalize();
        }
        out
    }

    /// Whether some value (or absence) satisfies both, without building the intersection.
    pub fn intersects(&self, other: &Requirement) -> bool {
        if self.allow_absent && other.allow_absent {
            return true;
        }
        match (self.complement, other.complement) {
            (false, false) => self.values.iter().any(|v| other.values.contains(v)),
            (true, false) => other.values.iter().any(|v| self.has(v)),
            (false, true) => self.values.iter().any(|v| other.has(v)),
            (true, true) => {
                let lo = max_opt(self.min, other.min);
                let hi = min_opt(self.max, other.max);
                match (lo, hi) {
                    (None, None) => true,
                    (Some(l), Some(h)) if l > h => false,
                    (l, h) => {
                        // Some integer in [l, h] must be excluded by neither set; finitely many are excluded.
                        let start = l.unwrap_or_else(|| {
                            h.map_or(0, |h| {
                                h.saturating_sub(
                                    self.values.len() as i64 + other.values.len() as i64 + 1,
                                )
                            })
                        });
                        let mut candidate = start;
                        loop {
                            if h.is_some_and(|h| candidate > h) {
                                return false;
                            }
                            let text = candidate.to_string();
                            if !self.values.contains(&text) && !other.values.contains(&text) {
                                return true;
                            }
                            match candidate.checked_add(1) {
                                Some(next) => candidate = next,
                                None => return false,
                            }
                        }
                    }
                }
            }
        }
    }
}

fn within(value: &str, min: Option<i64>, max: Option<i64>) -> bool {
    match value.parse::<i64>() {
        Ok(n) => min.is_none_or(|lo| n >= lo) && max.is_none_or(|hi| n <= hi),
        Err(_) => false,
    }
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, values: &BTreeSet<String>| -> fmt::Result {
            f.write_str("[")?;
            for (i, v) in values.iter().enumerate() {
                if i > 0 {
                    f.write_str(" ")?;
                }
                f.write_str(v)?;
            }
            f.write_str("]")
        };
        if self.complement {
            match (self.min, self.max) {
                (None, None) if self.values.is_empty() => f.write_str("Exists")?,
                (None, None) => {
                    f.write_str("NotIn ")?;
                    list(f, &self.values)?;
                }
                (lo, hi) => {
                    let mut parts = Vec::new();
                    if let Some(lo) = lo {
                        parts.push(format!("Gte {lo}"));
                    }
                    if let Some(hi) = hi {
                        parts.push(format!("Lte {hi}"));
                    }
                    f.write_str(&parts.join(" and "))?;
                    if !self.values.is_empty() {
                        f.write_str(" and NotIn ")?;
                        list(f, &self.values)?;
                    }
                }
            }
            if self.allow_absent
                && (self.min.is_some() || self.max.is_some() || self.values.is_empty())
            {
                f.write_str(" or absent")?;
            } else if !self.allow_absent
                && !self.values.is_empty()
                && self.min.is_none()
                && self.max.is_none()
            {
                f.write_str(" (label required)")?;
            }
        } else if self.values.is_empty() {
            f.write_str(if self.allow_absent {
                "DoesNotExist"
            } else {
                "In []"
            })?;
        } else {
            f.write_str("In ")?;
            list(f, &self.values)?;
        }
        if let Some(n) = self.min_values {
            write!(f, " (minValues {n})")?;
        }
        Ok(())
    }
}

/// Why two requirement sets cannot be met together.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Incompatibility {
    /// The key has no value both sides accept.
    #[error("key {key:?}: {incoming} does not intersect {existing}")]
    NoCommonValue {
        /// The label key.
        key: String,
        /// The requirement being added.
        incoming: String,
        /// The requirement already in place.
        existing: String,
    },
    /// The key is required but the other side does not define it.
    #[error("key {key:?} ({incoming}) is not defined{hint}")]
    Undefined {
        /// The label key.
        key: String,
        /// The requirement that needs the key.
        incoming: String,
        /// Extra advice, possibly empty.
        hint: String,
    },
}

/// Requirements on several label keys; a node must satisfy all of them (AND).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Requirements(BTreeMap<String, Requirement>);

impl Requirements {
    /// No requirement at all.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds requirements from `(key, operator, values, minValues)` tuples, intersecting
    /// repeated keys. Unknown operators and malformed values give a typed error naming the key.
    pub fn from_node_selector_requirements<'a, I>(items: I) -> Result<Self, RequirementError>
    where
        I: IntoIterator<Item = (&'a str, &'a str, &'a [String], Option<i64>)>,
    {
        let mut out = Self::new();
        for (key, operator, values, min_values) in items {
            let op = Operator::parse(operator).map_err(|_| RequirementError::UnknownOperator {
                key: key.to_string(),
                operator: operator.to_string(),
            })?;
            let min_values = match min_values {
                None => None,
                Some(n) if n >= 1 => usize::try_from(n).ok(),
                Some(n) => {
                    return Err(RequirementError::BadMinValues {
                        key: key.to_string(),
                        min_values: n,
                    });
                }
            };
            out.add(
                key,
                Requirement::new(key, op, values)?.with_min_values(min_values),
            );
        }
        Ok(out)
    }

    /// Builds requirements from Karpenter's requirements with minValues (a NodePool's, a
    /// NodeClaim's, an AMI's).
    pub fn from_api(
        items: &[driftwood_api::NodeSelectorRequirementWithMinValues],
    ) -> Result<Self, RequirementError> {
        Self::from_node_selector_requirements(items.iter().map(|r| {
            (
                r.key.as_str(),
                r.operator.as_str(),
                r.values.as_slice(),
                r.min_values,
            )
        }))
    }

    /// Builds requirements from Kubernetes `NodeSelectorRequirement`s (no minValues).
    pub fn from_k8s(items: &[NodeSelectorRequirement]) -> Result<Self, RequirementError> {
        let empty: Vec<String> = Vec::new();
        Self::from_node_selector_requirements(items.iter().map(|r| {
            (
                r.key.as_str(),
                r.operator.as_str(),
                r.values.as_deref().unwrap_or(&empty),
                None,
            )
        }))
    }

    /// `key In [value]` for each label.
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> Self {
        let mut out = Self::new();
        for (k, v) in labels {
            out.add(k, Requirement::is_in([v.clone()]));
        }
        out
    }

    /// Intersects `requirement` into the requirement on `key`.
    pub fn add(&mut self, key: &str, requirement: Requirement) {
        match self.0.get_mut(key) {
            Some(existing) => *existing = existing.intersection(&requirement),
            None => {
                self.0.insert(key.to_string(), requirement);
            }
        }
    }

    /// The requirement on `key`, if any.
    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.0.get(key)
    }

    /// Whether `key` is constrained.
    pub fn has(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Iterates `(key, requirement)` in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Requirement)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of keys constrained.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no key is constrained.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Key-by-key intersection.
    pub fn intersection(&self, other: &Requirements) -> Requirements {
        let mut out = self.clone();
        for (k, r) in &other.0 {
            out.add(k, r.clone());
        }
        out
    }

    /// Whether every key of `self` is also constrained in `other` at least as tightly, i.e.
    /// `other ∩ self == other` (adding `self` to `other` changes nothing).
    pub fn is_implied_by(&self, other: &Requirements) -> bool {
        self.0
            .iter()
            .all(|(k, r)| other.0.get(k).is_some_and(|o| o.intersection(r) == *o))
    }

    /// The first key whose requirement is unsatisfiable, if any.
    pub fn first_unsatisfiable(&self) -> Option<(&str, &Requirement)> {
        self.iter().find(|(_, r)| r.is_unsatisfiable())
    }

    /// Whether a node with exactly these labels satisfies every requirement (kube-scheduler's rule).
    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.first_mismatch(labels).is_none()
    }

    /// The first requirement the labels do not satisfy, if any.
    pub fn first_mismatch(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Option<(&str, &Requirement)> {
        self.iter()
            .find(|(k, r)| !r.matches(labels.get(*k).map(String::as_str)))
    }

    /// Keys present on both sides must have a common value, except where both sides accept
    /// absence of the label. Keys present on one side only are allowed.
    pub fn intersects(&self, incoming: &Requirements) -> Result<(), Incompatibility> {
        match self.first_conflict(incoming) {
            None => Ok(()),
            Some((key, existing, incoming)) => Err(Incompatibility::NoCommonValue {
                key: key.to_string(),
                incoming: incoming.to_string(),
                existing: existing.to_string(),
            }),
        }
    }

    /// The first key both name without a common value (the key, `self`'s requirement and
    /// `incoming`'s), None when they intersect: [`Self::intersects`] without writing out why
    /// not, for callers that only filter (a launch plan tries every instance type).
    pub fn first_conflict<'a>(
        &'a self,
        incoming: &'a Requirements,
    ) -> Option<(&'a str, &'a Requirement, &'a Requirement)> {
        let (small, large, small_is_incoming) = if self.0.len() <= incoming.0.len() {
            (self, incoming, false)
        } else {
            (incoming, self, true)
        };
        small.0.iter().find_map(|(key, a)| {
            let b = large.0.get(key)?;
            if a.intersects(b) {
                return None;
            }
            let (existing, incoming) = if small_is_incoming { (b, a) } else { (a, b) };
            Some((key.as_str(), existing, incoming))
        })
    }

    /// Compatibility where `self` describes a node (or NodeClaim) and `incoming` what is asked
    /// of it. Every incoming key must be defined by `self` unless the incoming requirement
    /// accepts absence (NotIn, DoesNotExist) or `allow_undefined(key)` holds; shared keys must
    /// intersect.
    pub fn compatible(
        &self,
        incoming: &Requirements,
        allow_undefined: impl Fn(&str) -> bool,
    ) -> Result<(), Incompatibility> {
        for (key, r) in &incoming.0 {
            if !self.0.contains_key(key) && !r.allows_absent() && !allow_undefined(key) {
                return Err(Incompatibility::Undefined {
                    key: key.clone(),
                    incoming: r.to_string(),
                    hint: String::new(),
                });
            }
        }
        self.intersects(incoming)
    }

    /// Scheduling form: well-known labels may be undefined on `self` (they are decided at launch).
    pub fn compatible_for_scheduling(
        &self,
        incoming: &Requirements,
    ) -> Result<(), Incompatibility> {
        self.compatible(incoming, is_well_known_label)
    }

    /// Strict form used for requirement drift: every key of `incoming` (the NodePool's
    /// requirements) must be present on `self` (the node's labels as requirements) unless its
    /// operator reads as NotIn or DoesNotExist in Karpenter's normal form
    /// ([`Requirement::karpenter_allows_missing`]), and shared keys must intersect.
    pub fn strictly_compatible(&self, incoming: &Requirements) -> Result<(), Incompatibility> {
        for (key, r) in &incoming.0 {
            if !self.0.contains_key(key) && !r.karpenter_allows_missing() {
                return Err(Incompatibility::Undefined {
                    key: key.clone(),
                    incoming: r.to_string(),
                    hint: String::new(),
                });
            }
        }
        self.intersects(incoming)
    }
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, r)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{k} {r}")?;
        }
        Ok(())
    }
}
