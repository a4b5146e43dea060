//! Provider drift of a NodeClaim against its EC2NodeClass, checked in Karpenter's order:
//! NodeClassDrift (static hash), AMIDrift, SecurityGroupDrift, SubnetDrift. Pure.

use std::collections::{BTreeMap, BTreeSet};

use driftwood_api::NodeSelectorRequirementWithMinValues as Requirement;
use driftwood_api::hash::{HashComparison, TemplateHashes, compare_stamped};
use driftwood_api::wellknown::{DRIFT_AMI, DRIFT_NODECLASS, DRIFT_SECURITY_GROUP, DRIFT_SUBNET};
use driftwood_scheduling::Requirements;

/// What changed between the node and its class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderDrift {
    /// The class's static fields changed since the node was launched.
    NodeClass {
        stamped_hash: String,
        current_hash: String,
        /// The spec fields that changed (JSON names), when per-field hashes were stamped.
        changed_fields: Vec<String>,
    },
    /// The node's image is no longer one the class resolves to for its instance type.
    Ami {
        node_image: String,
        current_images: Vec<String>,
    },
    /// The node's subnet is no longer selected.
    Subnet {
        node_subnet: String,
        current_subnets: Vec<String>,
    },
    /// The node's security groups differ from the selected ones.
    SecurityGroup {
        node_groups: Vec<String>,
        current_groups: Vec<String>,
    },
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
            Self::NodeClass {
                stamped_hash,
                current_hash,
                changed_fields,
            } => {
                let what = if changed_fields.is_empty() {
                    "static fields".to_string()
                } else {
                    format!("spec.{}", changed_fields.join(", spec."))
                };
                format!(
                    "EC2NodeClass {what} changed (hash {stamped_hash} at launch, {current_hash} now)"
                )
            }
            Self::Ami {
                node_image,
                current_images,
            } => match current_images.first() {
                Some(new) => format!(
                    "AMI {node_image} → {new}: the class now resolves to {}",
                    current_images.join(", ")
                ),
                None => format!(
                    "AMI {node_image} → none: the class resolves no AMI for this instance type"
                ),
            },
            Self::Subnet {
                node_subnet,
                current_subnets,
            } => format!(
                "subnet {node_subnet} is no longer selected (selected: {})",
                current_subnets.join(", ")
            ),
            Self::SecurityGroup {
                node_groups,
                current_groups,
            } => format!(
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

/// What provider drift compares an EC2NodeClass's nodes against: worked out once per version
/// of the class and shared by the checks of all its NodeClaims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassDrift {
    /// The class's current static hashes.
    pub hashes: TemplateHashes,
    /// The AMIs its status lists, in order, each with its requirements read (or why they
    /// cannot be read).
    pub amis: Vec<(String, Result<Requirements, String>)>,
    /// The subnets and security groups its status lists.
    pub subnets: Vec<String>,
    pub security_groups: Vec<String>,
}

impl ClassDrift {
    /// The class's side of drift from its hashes and what its status lists.
    pub fn new(
        hashes: TemplateHashes,
        amis: &[ClassAmi],
        subnets: Vec<String>,
        security_groups: Vec<String>,
    ) -> Self {
        Self {
            hashes,
            amis: amis
                .iter()
                .map(|ami| {
                    let read = Requirements::from_api(&ami.requirements).map_err(|e| e.to_string());
                    (ami.id.clone(), read)
                })
                .collect(),
            subnets,
            security_groups,
        }
    }
}

/// Everything provider drift looks at, borrowed from the class's [`ClassDrift`], the NodeClaim
/// and its instance (a pass checks every NodeClaim: nothing is copied per NodeClaim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftInputs<'a> {
    /// What the class resolves to now, and the hash version this build computes.
    pub class: &'a ClassDrift,
    pub current_version: &'a str,
    /// The hash, hash version and per-field hashes stamped on the NodeClaim at launch.
    pub stamped_hash: Option<&'a str>,
    pub stamped_version: Option<&'a str>,
    pub stamped_fields: Option<&'a str>,
    /// The running instance's image, subnet and security groups.
    pub node_image: &'a str,
    pub node_subnet: &'a str,
    pub node_security_groups: Vec<&'a str>,
    /// The node's labels (instance type, arch, ...) for AMI compatibility.
    pub node_labels: &'a BTreeMap<String, String>,
}

/// Provider drift's facts owned, as tests write them: [`DriftFacts::check`] judges them.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DriftFacts {
    pub current: TemplateHashes,
    pub current_version: String,
    pub stamped_hash: Option<String>,
    pub stamped_version: Option<String>,
    pub stamped_fields: Option<String>,
    pub node_image: String,
    pub node_subnet: String,
    pub node_security_groups: Vec<String>,
    pub node_labels: BTreeMap<String, String>,
    pub class_amis: Vec<ClassAmi>,
    pub class_subnets: Vec<String>,
    pub class_security_groups: Vec<String>,
}

#[cfg(test)]
impl DriftFacts {
    /// `judge` applied to these facts as [`DriftInputs`].
    pub(crate) fn check<R>(&self, judge: impl FnOnce(&DriftInputs<'_>) -> R) -> R {
        let class = ClassDrift::new(
            self.current.clone(),
            &self.class_amis,
            self.class_subnets.clone(),
            self.class_security_groups.clone(),
        );
        judge(&DriftInputs {
            class: &class,
            current_version: &self.current_version,
            stamped_hash: self.stamped_hash.as_deref(),
            stamped_version: self.stamped_version.as_deref(),
            stamped_fields: self.stamped_fields.as_deref(),
            node_image: &self.node_image,
            node_subnet: &self.node_subnet,
            node_security_groups: self
                .node_security_groups
                .iter()
                .map(String::as_str)
                .collect(),
            node_labels: &self.node_labels,
        })
    }
}

/// Why provider drift could not be judged: the class side a check needs is not resolved (an
/// empty status list) or the NodeClaim lacks what the check compares. The Drifted condition is
/// then left as it is, never cleared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot judge {check} drift: {reason}")]
pub struct DriftUnknown {
    /// `AMI`, `security group`, `subnet`.
    pub check: &'static str,
    pub reason: String,
}

fn unknown(check: &'static str, reason: &str) -> DriftUnknown {
    DriftUnknown {
        check,
        reason: reason.to_string(),
    }
}

/// NodeClassDrift: the class's static hash moved (same hash version; another version or no
/// stamp re-stamps instead).
fn nodeclass_drift(i: &DriftInputs<'_>) -> Option<ProviderDrift> {
    let comparison = compare_stamped(
        i.stamped_hash,
        i.stamped_version,
        i.stamped_fields,
        &i.class.hashes,
        i.current_version,
    );
    match comparison {
        HashComparison::Changed { changed } => Some(ProviderDrift::NodeClass {
            stamped_hash: i.stamped_hash.unwrap_or_default().to_string(),
            current_hash: i.class.hashes.hash.clone(),
            changed_fields: changed,
        }),
        _ => None,
    }
}

/// AMIDrift: the node's image is not the first AMI of the class status compatible with its
/// instance type (as Karpenter maps status AMIs to instance types: first compatible wins).
fn ami_drift(i: &DriftInputs<'_>) -> Result<Option<ProviderDrift>, DriftUnknown> {
    if i.class.amis.is_empty() {
        return Err(unknown("AMI", "the EC2NodeClass status lists no AMIs"));
    }
    if i.node_image.is_empty() {
        return Err(unknown("AMI", "the instance reports no image id"));
    }
    // An AMI whose requirements cannot be read leaves drift unjudged: read as "suits no
    // instance type", it would make every node running it drifted.
    let mut compatible: Vec<&str> = Vec::new();
    for (id, requirements) in &i.class.amis {
        let requirements = requirements.as_ref().map_err(|e| {
            unknown(
                "AMI",
                &format!("the requirements of {id} in the EC2NodeClass status: {e}"),
            )
        })?;
        if requirements.matches_labels(i.node_labels) {
            compatible.push(id);
        }
    }
    Ok(
        (compatible.first() != Some(&i.node_image)).then(|| ProviderDrift::Ami {
            node_image: i.node_image.to_string(),
            current_images: compatible.into_iter().map(str::to_string).collect(),
        }),
    )
}

/// SecurityGroupDrift: the instance's security groups are not exactly the selected ones.
fn security_group_drift(i: &DriftInputs<'_>) -> Result<Option<ProviderDrift>, DriftUnknown> {
    if i.class.security_groups.is_empty() {
        return Err(unknown(
            "security group",
            "the EC2NodeClass status lists no security groups",
        ));
    }
    let node: BTreeSet<&str> = i.node_security_groups.iter().copied().collect();
    let class: BTreeSet<&str> = i.class.security_groups.iter().map(String::as_str).collect();
    Ok((node != class).then(|| ProviderDrift::SecurityGroup {
        node_groups: node.into_iter().map(str::to_string).collect(),
        current_groups: class.into_iter().map(str::to_string).collect(),
    }))
}

/// SubnetDrift: the instance's subnet is no longer selected.
fn subnet_drift(i: &DriftInputs<'_>) -> Result<Option<ProviderDrift>, DriftUnknown> {
    if i.class.subnets.is_empty() {
        return Err(unknown(
            "subnet",
            "the EC2NodeClass status lists no subnets",
        ));
    }
    Ok(
        (!i.class.subnets.iter().any(|s| s == i.node_subnet)).then(|| ProviderDrift::Subnet {
            node_subnet: i.node_subnet.to_string(),
            current_subnets: i.class.subnets.clone(),
        }),
    )
}

/// The first provider drift in Karpenter's order: NodeClassDrift (static hash), AMIDrift, then
/// SecurityGroupDrift before SubnetDrift. A check that cannot be judged (the class side is not
/// resolved) is an error, not "no drift": the caller leaves the Drifted condition as it is.
/// As in Karpenter, the security-group and subnet checks are both judged before either result
/// counts, so an unresolved subnet list hides a security-group drift.
pub fn provider_drift(i: &DriftInputs<'_>) -> Result<Option<ProviderDrift>, DriftUnknown> {
    if let Some(drift) = nodeclass_drift(i) {
        return Ok(Some(drift));
    }
    if let Some(drift) = ami_drift(i)? {
        return Ok(Some(drift));
    }
    let groups = security_group_drift(i)?;
    let subnet = subnet_drift(i)?;
    Ok(groups.or(subnet))
}

/// Every provider drift that can be judged, in Karpenter's order (for explanations; marking
/// uses [`provider_drift`]).
pub fn provider_drifts(i: &DriftInputs<'_>) -> Vec<ProviderDrift> {
    let mut out: Vec<ProviderDrift> = nodeclass_drift(i).into_iter().collect();
    for check in [ami_drift, security_group_drift, subnet_drift] {
        out.extend(check(i).ok().flatten());
    }
    out
}

#[cfg(test)]
mod tests {
    use driftwood_api::requirement::OP_IN;

    use super::*;

    fn base() -> DriftFacts {
        DriftFacts {
            current: TemplateHashes {
                hash: "h1".to_string(),
                fields: BTreeMap::from([("userData".to_string(), "u1".to_string())]),
            },
            current_version: "v3".to_string(),
            stamped_hash: Some("h1".to_string()),
            stamped_version: Some("v3".to_string()),
            stamped_fields: Some(r#"{"userData":"u1"}"#.to_string()),
            node_image: "ami-a".to_string(),
            node_subnet: "subnet-1".to_string(),
            node_security_groups: vec!["sg-2".to_string(), "sg-1".to_string()],
            node_labels: BTreeMap::from([("kubernetes.io/arch".to_string(), "amd64".to_string())]),
            class_amis: vec![
                ClassAmi {
                    id: "ami-a".to_string(),
                    requirements: vec![Requirement::new("kubernetes.io/arch", OP_IN, &["amd64"])],
                },
                ClassAmi {
                    id: "ami-b".to_string(),
                    requirements: vec![Requirement::new("kubernetes.io/arch", OP_IN, &["arm64"])],
                },
            ],
            class_subnets: vec!["subnet-1".to_string(), "subnet-2".to_string()],
            class_security_groups: vec!["sg-1".to_string(), "sg-2".to_string()],
        }
    }

    /// An AMI requirement that cannot be read (an operator no version knows) leaves AMI drift
    /// unjudged rather than making the node running that AMI drifted.
    #[test]
    fn an_unreadable_ami_requirement_leaves_ami_drift_unjudged() {
        let mut i = base();
        i.class_amis[0].requirements =
            vec![Requirement::new("kubernetes.io/arch", "Near", &["amd64"])];
        let err = i.check(provider_drift).unwrap_err();
        assert_eq!(err.check, "AMI");
        assert!(err.reason.contains("ami-a"), "{err}");
    }

    #[test]
    fn no_drift_when_everything_matches() {
        assert_eq!(base().check(provider_drift), Ok(None));
    }

    #[test]
    fn each_reason_alone() {
        let mut i = base();
        i.current.hash = "h2".to_string();
        i.current
            .fields
            .insert("userData".to_string(), "u2".to_string());
        let d = i.check(provider_drift).unwrap().unwrap();
        assert_eq!(d.reason(), DRIFT_NODECLASS);
        assert!(
            d.message().contains("spec.userData changed"),
            "{}",
            d.message()
        );
        i.current_version = "v4".to_string();
        assert_eq!(
            i.check(provider_drift),
            Ok(None),
            "another hash version re-stamps, never drifts"
        );

        let mut i = base();
        i.node_image = "ami-b".to_string(); // arm64 image on an amd64 node: not compatible
        let d = i.check(provider_drift).unwrap().unwrap();
        assert_eq!(d.reason(), DRIFT_AMI);
        assert!(d.message().contains("ami-b → ami-a"));

        let mut i = base();
        i.class_subnets = vec!["subnet-3".to_string()];
        assert_eq!(
            i.check(provider_drift).unwrap().map(|d| d.reason()),
            Some(DRIFT_SUBNET)
        );

        let mut i = base();
        i.class_security_groups.push("sg-3".to_string());
        assert_eq!(
            i.check(provider_drift).unwrap().map(|d| d.reason()),
            Some(DRIFT_SECURITY_GROUP)
        );
    }

    #[test]
    fn unstamped_claims_do_not_drift_on_hash() {
        let mut i = base();
        i.stamped_hash = None;
        i.current.hash = "h2".to_string();
        assert_eq!(i.check(provider_drift), Ok(None));
    }

    #[test]
    fn all_drifts_are_listed_in_order() {
        let mut i = base();
        i.current.hash = "h2".to_string();
        i.node_image = "ami-old".to_string();
        i.class_security_groups = vec!["sg-9".to_string()];
        let reasons: Vec<&str> = i
            .check(provider_drifts)
            .iter()
            .map(ProviderDrift::reason)
            .collect();
        assert_eq!(reasons, [DRIFT_NODECLASS, DRIFT_AMI, DRIFT_SECURITY_GROUP]);
    }

    /// Karpenter provider suite: "should return an error if subnets are empty" and "... if the
    /// security groups are empty": unresolved status lists are errors, never "not drifted".
    #[test]
    fn empty_status_lists_cannot_be_judged() {
        let mut i = base();
        i.class_subnets.clear();
        assert_eq!(i.check(provider_drift).unwrap_err().check, "subnet");
        let mut i = base();
        i.class_security_groups.clear();
        assert_eq!(i.check(provider_drift).unwrap_err().check, "security group");
        let mut i = base();
        i.class_amis.clear();
        assert_eq!(i.check(provider_drift).unwrap_err().check, "AMI");
        // Static drift is judged before anything that needs the status.
        let mut i = base();
        i.class_amis.clear();
        i.current.hash = "h2".to_string();
        assert_eq!(
            i.check(provider_drift).unwrap().map(|d| d.reason()),
            Some(DRIFT_NODECLASS)
        );
    }

    /// Karpenter's order puts SecurityGroupDrift before SubnetDrift.
    #[test]
    fn security_groups_before_subnet() {
        let mut i = base();
        i.class_subnets = vec!["subnet-9".to_string()];
        i.class_security_groups = vec!["sg-9".to_string()];
        assert_eq!(
            i.check(provider_drift).unwrap().map(|d| d.reason()),
            Some(DRIFT_SECURITY_GROUP)
        );
    }

    /// An image the status lists, but not as the first AMI compatible with the node's type,
    /// has drifted (Karpenter maps each instance type to the first compatible status AMI).
    #[test]
    fn only_the_first_compatible_ami_is_current() {
        let mut i = base();
        i.class_amis.insert(
            0,
            ClassAmi {
                id: "ami-newer".to_string(),
                requirements: vec![Requirement::new("kubernetes.io/arch", OP_IN, &["amd64"])],
            },
        );
        let d = i.check(provider_drift).unwrap().unwrap();
        assert_eq!(d.reason(), DRIFT_AMI);
        assert!(d.message().contains("ami-a → ami-newer"), "{}", d.message());
    }

    #[test]
    fn order_is_nodeclass_first() {
        let mut i = base();
        i.current.hash = "h2".to_string();
        i.node_image = "ami-old".to_string();
        assert_eq!(
            i.check(provider_drift).unwrap().map(|d| d.reason()),
            Some(DRIFT_NODECLASS)
        );
    }
}
