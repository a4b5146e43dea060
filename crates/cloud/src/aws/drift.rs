//! Provider drift of a NodeClaim against its EC2NodeClass, checked in order: NodeClassDrift
//! (static hash), AMIDrift, SubnetDrift, SecurityGroupDrift. Pure.

use std::collections::BTreeSet;

use driftwood_api::NodeSelectorRequirementWithMinValues as Requirement;
use driftwood_api::wellknown::{DRIFT_AMI, DRIFT_NODECLASS, DRIFT_SECURITY_GROUP, DRIFT_SUBNET};

use super::requirements::{LabelValues, requirements_allow};

/// What changed between the node and its class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderDrift {
    /// The class's static fields changed since the node was launched.
    NodeClass { stamped_hash: String, current_hash: String },
    /// The node's image is no longer one the class resolves to for its instance type.
    Ami { node_image: String, current_images: Vec<String> },
    /// The node's subnet is no longer selected.
    Subnet { node_subnet: String, current_subnets: Vec<String> },
    /// The node's security groups differ from the selected ones.
    SecurityGroup { node_groups: Vec<String>, current_groups: Vec<String> },
}

impl ProviderDrift {
    /// The Drifted condition reason (`NodeClassDrift`, `AMIDrift`, `SubnetDrift`,
    /// `SecurityGroupDrift`).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NodeClass { .. } => DRIFT_NODECLASS,
            Self::Ami { .. } => DRIFT_AMI,
            Self::Subnet { .. } => DRIFT_SUBNET,
            Self::SecurityGroup { .. } => DRIFT_SECURITY_GROUP,
        }
    }

    /// A human message saying what changed.
    pub fn message(&self) -> String {
        match self {
            Self::NodeClass { stamped_hash, current_hash } => format!(
                "EC2NodeClass static fields changed (hash {stamped_hash} at launch, {current_hash} now)"
            ),
            Self::Ami { node_image, current_images } => match current_images.first() {
                Some(new) => format!("AMI {node_image} → {new}: the class now resolves to {}", current_images.join(", ")),
                None => format!("AMI {node_image} → none: the class resolves no AMI for this instance type"),
            },
            Self::Subnet { node_subnet, current_subnets } => format!(
                "subnet {node_subnet} is no longer selected (selected: {})",
                current_subnets.join(", ")
            ),
            Self::SecurityGroup { node_groups, current_groups } => format!(
                "security groups [{}] → [{}]",
                node_groups.join(", "),
                current_groups.join(", ")
            ),
        }
    }
}

/// An AMI the class resolves to, with the requirements an instance type must meet to use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassAmi {
    pub id: String,
    pub requirements: Vec<Requirement>,
}

/// Everything provider drift looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftInputs {
    /// The class's current static hash and hash version (its own annotations).
    pub class_hash: Option<String>,
    pub class_hash_version: Option<String>,
    /// The hash and version stamped on the NodeClaim at launch.
    pub claim_hash: Option<String>,
    pub claim_hash_version: Option<String>,
    /// The running instance's image, subnet and security groups.
    pub node_image: String,
    pub node_subnet: String,
    pub node_security_groups: Vec<String>,
    /// The node's labels (instance type, arch, ...) for AMI compatibility.
    pub node_labels: LabelValues,
    /// What the class resolves to now (its status).
    pub class_amis: Vec<ClassAmi>,
    pub class_subnets: Vec<String>,
    pub class_security_groups: Vec<String>,
}

/// The first provider drift found, in Karpenter's order. Checks whose class side is empty (the
/// class is not resolved yet) are skipped rather than drifting every node; hashes stamped under
/// another hash version never drift (they get re-stamped instead).
pub fn provider_drift(i: &DriftInputs) -> Option<ProviderDrift> {
    if let (Some(current), Some(stamped)) = (&i.class_hash, &i.claim_hash)
        && i.class_hash_version == i.claim_hash_version
        && current != stamped
    {
        return Some(ProviderDrift::NodeClass { stamped_hash: stamped.clone(), current_hash: current.clone() });
    }
    if !i.class_amis.is_empty() && !i.node_image.is_empty() {
        let compatible: Vec<String> = i
            .class_amis
            .iter()
            .filter(|a| requirements_allow(&a.requirements, &i.node_labels))
            .map(|a| a.id.clone())
            .collect();
        if !compatible.contains(&i.node_image) {
            return Some(ProviderDrift::Ami { node_image: i.node_image.clone(), current_images: compatible });
        }
    }
    if !i.class_subnets.is_empty() && !i.node_subnet.is_empty() && !i.class_subnets.contains(&i.node_subnet) {
        return Some(ProviderDrift::Subnet {
            node_subnet: i.node_subnet.clone(),
            current_subnets: i.class_subnets.clone(),
        });
    }
    if !i.class_security_groups.is_empty() {
        let node: BTreeSet<&String> = i.node_security_groups.iter().collect();
        let class: BTreeSet<&String> = i.class_security_groups.iter().collect();
        if node != class {
            return Some(ProviderDrift::SecurityGroup {
                node_groups: node.into_iter().cloned().collect(),
                current_groups: class.into_iter().cloned().collect(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use driftwood_api::requirement::OP_IN;

    use super::*;

    fn base() -> DriftInputs {
        DriftInputs {
            class_hash: Some("h1".to_string()),
            class_hash_version: Some("v3".to_string()),
            claim_hash: Some("h1".to_string()),
            claim_hash_version: Some("v3".to_string()),
            node_image: "ami-a".to_string(),
            node_subnet: "subnet-1".to_string(),
            node_security_groups: vec!["sg-2".to_string(), "sg-1".to_string()],
            node_labels: BTreeMap::from([(
                "kubernetes.io/arch".to_string(),
                BTreeSet::from(["amd64".to_string()]),
            )]),
            class_amis: vec![
                ClassAmi { id: "ami-a".to_string(), requirements: vec![Requirement::new("kubernetes.io/arch", OP_IN, &["amd64"])] },
                ClassAmi { id: "ami-b".to_string(), requirements: vec![Requirement::new("kubernetes.io/arch", OP_IN, &["arm64"])] },
            ],
            class_subnets: vec!["subnet-1".to_string(), "subnet-2".to_string()],
            class_security_groups: vec!["sg-1".to_string(), "sg-2".to_string()],
        }
    }

    #[test]
    fn no_drift_when_everything_matches() {
        assert_eq!(provider_drift(&base()), None);
    }

    #[test]
    fn each_reason_alone() {
        let mut i = base();
        i.class_hash = Some("h2".to_string());
        assert_eq!(provider_drift(&i).map(|d| d.reason()), Some(DRIFT_NODECLASS));
        i.class_hash_version = Some("v4".to_string());
        assert_eq!(provider_drift(&i), None, "another hash version re-stamps, never drifts");

        let mut i = base();
        i.node_image = "ami-b".to_string(); // arm64 image on an amd64 node: not compatible
        let d = provider_drift(&i).unwrap();
        assert_eq!(d.reason(), DRIFT_AMI);
        assert!(d.message().contains("ami-b → ami-a"));

        let mut i = base();
        i.class_subnets = vec!["subnet-3".to_string()];
        assert_eq!(provider_drift(&i).map(|d| d.reason()), Some(DRIFT_SUBNET));

        let mut i = base();
        i.class_security_groups.push("sg-3".to_string());
        assert_eq!(provider_drift(&i).map(|d| d.reason()), Some(DRIFT_SECURITY_GROUP));
    }

    #[test]
    fn order_is_nodeclass_first() {
        let mut i = base();
        i.class_hash = Some("h2".to_string());
        i.node_image = "ami-old".to_string();
        assert_eq!(provider_drift(&i).map(|d| d.reason()), Some(DRIFT_NODECLASS));
    }
}
