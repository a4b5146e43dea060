//! Taints and tolerations as kube-scheduler applies them (NoSchedule and NoExecute block,
//! PreferNoSchedule never blocks).

use std::fmt;

use thiserror::Error;

/// A taint effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaintEffect {
    /// New pods that do not tolerate it are not scheduled.
    NoSchedule,
    /// A preference only; never blocks scheduling.
    PreferNoSchedule,
    /// Like NoSchedule, and running pods that do not tolerate it are evicted.
    NoExecute,
}

impl TaintEffect {
    /// Parses the Kubernetes spelling.
    pub fn parse(text: &str) -> Result<Self, TaintError> {
        match text {
            "NoSchedule" => Ok(Self::NoSchedule),
            "PreferNoSchedule" => Ok(Self::PreferNoSchedule),
            "NoExecute" => Ok(Self::NoExecute),
            other => Err(TaintError::UnknownEffect(other.to_string())),
        }
    }

    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSchedule => "NoSchedule",
            Self::PreferNoSchedule => "PreferNoSchedule",
            Self::NoExecute => "NoExecute",
        }
    }
}

/// A taint or toleration that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TaintError {
    /// The effect is not NoSchedule, PreferNoSchedule or NoExecute.
    #[error("unknown taint effect {0:?} (expected NoSchedule, PreferNoSchedule or NoExecute)")]
    UnknownEffect(String),
    /// The toleration operator is not Exists or Equal.
    #[error("unknown toleration operator {0:?} (expected Exists or Equal)")]
    UnknownOperator(String),
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value (may be empty).
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

impl Taint {
    /// A taint `key=value:effect`.
    pub fn new(key: &str, value: &str, effect: TaintEffect) -> Self {
        Self {
            key: key.to_string(),
            value: value.to_string(),
            effect,
        }
    }

    /// Converts a Kubernetes taint.
    pub fn from_k8s(t: &k8s_openapi::api::core::v1::Taint) -> Result<Self, TaintError> {
        Ok(Self {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: TaintEffect::parse(&t.effect)?,
        })
    }

    /// Whether the taint keeps untolerating pods off the node (NoSchedule or NoExecute).
    pub fn blocks_scheduling(&self) -> bool {
        self.effect != TaintEffect::PreferNoSchedule
    }
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect.as_str())
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

/// A pod toleration.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Toleration {
    /// Key; `None` (empty) with `exists == true` tolerates every taint.
    pub key: Option<String>,
    /// `true` for operator Exists, `false` for Equal.
    pub exists: bool,
    /// Value compared under Equal.
    pub value: String,
    /// Effect tolerated; `None` tolerates all effects.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Tolerates `key=value` with the given effect (operator Equal).
    pub fn equal(key: &str, value: &str, effect: Option<TaintEffect>) -> Self {
        Self {
            key: Some(key.to_string()),
            exists: false,
            value: value.to_string(),
            effect,
        }
    }

    /// Tolerates any value of `key` (operator Exists); `key == None` tolerates everything.
    pub fn exists(key: Option<&str>, effect: Option<TaintEffect>) -> Self {
        Self {
            key: key.map(str::to_string),
            exists: true,
            value: String::new(),
            effect,
        }
    }

    /// Converts a Kubernetes toleration.
    pub fn from_k8s(t: &k8s_openapi::api::core::v1::Toleration) -> Result<Self, TaintError> {
        let exists = match t.operator.as_deref() {
            None | Some("") | Some("Equal") => false,
            Some("Exists") => true,
            Some(other) => return Err(TaintError::UnknownOperator(other.to_string())),
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(e) => Some(TaintEffect::parse(e)?),
        };
        Ok(Self {
            key: t.key.clone().filter(|k| !k.is_empty()),
            exists,
            value: t.value.clone().unwrap_or_default(),
            effect,
        })
    }

    /// Whether this toleration tolerates `taint` (Kubernetes' ToleratesTaint).
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        match &self.key {
            None => self.exists,
            Some(k) if *k != taint.key => false,
            Some(_) => self.exists || self.value == taint.value,
        }
    }
}

/// The first taint that blocks scheduling and that no toleration tolerates, if any.
pub fn first_untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .find(|t| t.blocks_scheduling() && !tolerations.iter().any(|tol| tol.tolerates(t)))
}
