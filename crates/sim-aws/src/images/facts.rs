//! The public AMI release facts the simulated account is built from (data/ami-releases.json,
//! written by scripts/eks-ami-facts), parsed once.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use jiff::Timestamp;
use serde::Deserialize;

/// Every release in the data, per family, oldest first.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Facts {
    pub eks: Vec<EksRelease>,
    pub bottlerocket: Vec<BottlerocketRelease>,
    pub windows: Vec<WindowsRelease>,
}

/// One AL2/AL2023 release (`v20250715`).
#[derive(Debug, Clone, Deserialize)]
pub struct EksRelease {
    pub release: String,
    pub created: Timestamp,
    /// Kubernetes minor version → what was built for it.
    pub kubernetes: BTreeMap<String, EksBuild>,
}

/// The images one EKS release built for one Kubernetes version.
#[derive(Debug, Clone, Deserialize)]
pub struct EksBuild {
    /// `al2-x86_64`, `al2-arm64`, `al2-x86_64-gpu`, `al2023-<arch>-<standard|nvidia|neuron>`.
    pub variants: Vec<String>,
}

/// One Bottlerocket release (`1.39.1`).
#[derive(Debug, Clone, Deserialize)]
pub struct BottlerocketRelease {
    pub version: String,
    pub created: Timestamp,
    pub kubernetes: Vec<String>,
    /// `x86_64`, `aarch64`, `nvidia-x86_64`, `nvidia-aarch64`.
    pub variants: Vec<String>,
}

/// One monthly Windows EKS-optimized AMI release (`2025.07.16`).
#[derive(Debug, Clone, Deserialize)]
pub struct WindowsRelease {
    pub release: String,
    pub created: Timestamp,
    /// Kubernetes minor version → editions (`2022-Core`, `2019-Full`, ...).
    pub kubernetes: BTreeMap<String, Vec<String>>,
}

const DATA: &str = include_str!("../../data/ami-releases.json");

/// The facts (empty if the embedded data does not parse, which a test rules out).
pub fn facts() -> &'static Facts {
    static FACTS: OnceLock<Facts> = OnceLock::new();
    FACTS.get_or_init(|| parse(DATA).unwrap_or_default())
}

fn parse(text: &str) -> Result<Facts, serde_json::Error> {
    let mut facts: Facts = serde_json::from_str(text)?;
    facts.eks.sort_by_key(|r| r.created);
    facts.bottlerocket.sort_by_key(|r| r.created);
    facts.windows.sort_by_key(|r| r.created);
    Ok(facts)
}

/// The newest release time of any family in the data.
pub fn newest_release() -> Option<Timestamp> {
    let f = facts();
    [
        f.eks.last().map(|r| r.created),
        f.bottlerocket.last().map(|r| r.created),
        f.windows.last().map(|r| r.created),
    ]
    .into_iter()
    .flatten()
    .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_data_parses_and_spans_2024_to_2026() {
        let f = parse(DATA).unwrap();
        assert!(f.eks.len() > 90, "{}", f.eks.len());
        assert!(f.bottlerocket.len() > 40);
        assert!(f.windows.len() > 30);
        assert!(f.eks[0].created.to_string().starts_with("2024-01"));
        assert!(newest_release().unwrap().to_string().starts_with("2026-07"));
        let v20250715 = f.eks.iter().find(|r| r.release == "v20250715").unwrap();
        assert!(
            v20250715.kubernetes["1.33"]
                .variants
                .contains(&"al2023-arm64-standard".to_string())
        );
        assert!(f.bottlerocket.iter().any(|r| r.version == "1.39.1"));
    }
}
