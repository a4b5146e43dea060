//! EC2NodeClass status: resolves the class's selectors through the ports and writes resolved
//! AMIs, subnets, security groups, the instance profile and the readiness conditions.

use driftwood_api::EC2NodeClass;
use driftwood_api::condition::{STATUS_FALSE, STATUS_TRUE, set_condition};
use driftwood_api::ec2nodeclass::{
    AmiStatus, EC2NodeClassStatus, SecurityGroupStatus, SubnetStatus,
};
use driftwood_api::wellknown::{
    CONDITION_AMIS_READY, CONDITION_INSTANCE_PROFILE_READY, CONDITION_READY,
    CONDITION_SECURITY_GROUPS_READY, CONDITION_SUBNETS_READY,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::AwsSettings;
use super::ami::{AmiResolution, resolve_amis};
use super::ami_family::AmiFamily;
use super::instance_profile::{InstanceProfileError, ensure_instance_profile};
use super::network::{
    SecurityGroupResolution, SubnetResolution, resolve_security_groups, resolve_subnets,
};
use super::selector_text::{ami_term_text, security_group_term_text, subnet_term_text};
use crate::ports::{AwsError, Ec2Api, IamApi, SsmApi};

/// Everything resolving a class produced: the status to write plus the typed AMI resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeClassResolution {
    pub status: EC2NodeClassStatus,
    pub amis: AmiResolution,
    /// The family user data is rendered for: amiFamily, the alias's family, or the inferred one.
    pub ami_family: AmiFamily,
    /// Whether every condition is True.
    pub ready: bool,
}

/// One condition before it is stamped with a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionOutcome {
    pub type_: &'static str,
    pub ok: bool,
    pub reason: String,
    pub message: String,
}

/// The family a class's nodes run: amiFamily when set, else the alias's family, else the
/// family inferred from the resolved images, else Custom.
pub fn effective_family(class: &EC2NodeClass, amis: &AmiResolution) -> AmiFamily {
    class
        .spec
        .effective_ami_family()
        .and_then(|f| AmiFamily::from_spec(&f))
        .or(amis.inferred_family)
        .unwrap_or(AmiFamily::Custom)
}

/// The AMIsReady outcome. Pure.
pub fn amis_condition(class: &EC2NodeClass, amis: &AmiResolution) -> ConditionOutcome {
    let terms = &class.spec.ami_selector_terms;
    let unmatched: Vec<String> = amis
        .unmatched
        .iter()
        .map(|u| {
            let text = terms.get(u.index).map(ami_term_text).unwrap_or_default();
            format!("amiSelectorTerms[{}] {text} ({})", u.index, u.detail)
        })
        .collect();
    if amis.amis.is_empty() {
        let message = if terms.is_empty() {
            "no amiSelectorTerms given".to_string()
        } else {
            format!("no AMI matched {}", unmatched.join("; "))
        };
        return ConditionOutcome {
            type_: CONDITION_AMIS_READY,
            ok: false,
            reason: "AMINotFound".to_string(),
            message,
        };
    }
    let ids: Vec<String> = amis
        .amis
        .iter()
        .map(|a| format!("{} ({}, {})", a.id, a.name, a.arch))
        .collect();
    let mut message = format!("resolved {}", ids.join(", "));
    if let Some(f) = amis.inferred_family {
        message.push_str(&format!(
            "; amiFamily not set, inferred {} from the image names",
            f.as_str()
        ));
    }
    if !unmatched.is_empty() {
        message.push_str(&format!("; unmatched: {}", unmatched.join("; ")));
    }
    ConditionOutcome {
        type_: CONDITION_AMIS_READY,
        ok: true,
        reason: "AMIsResolved".to_string(),
        message,
    }
}

/// The SubnetsReady outcome. Pure.
pub fn subnets_condition(class: &EC2NodeClass, subnets: &SubnetResolution) -> ConditionOutcome {
    let terms = &class.spec.subnet_selector_terms;
    if subnets.subnets.is_empty() {
        let named: Vec<String> = (0..terms.len())
            .map(|i| format!("subnetSelectorTerms[{i}] {}", subnet_term_text(&terms[i])))
            .collect();
        let message = if named.is_empty() {
            "no subnetSelectorTerms given".to_string()
        } else {
            format!("no subnet matched {}", named.join("; "))
        };
        return ConditionOutcome {
            type_: CONDITION_SUBNETS_READY,
            ok: false,
            reason: "SubnetsNotFound".to_string(),
            message,
        };
    }
    let ids: Vec<String> = subnets
        .subnets
        .iter()
        .map(|s| format!("{} ({})", s.subnet_id, s.availability_zone))
        .collect();
    ConditionOutcome {
        type_: CONDITION_SUBNETS_READY,
        ok: true,
        reason: "SubnetsResolved".to_string(),
        message: format!("resolved {}", ids.join(", ")),
    }
}

/// The SecurityGroupsReady outcome. Pure.
pub fn security_groups_condition(
    class: &EC2NodeClass,
    groups: &SecurityGroupResolution,
) -> ConditionOutcome {
    let terms = &class.spec.security_group_selector_terms;
    if groups.security_groups.is_empty() {
        let named: Vec<String> = (0..terms.len())
            .map(|i| {
                format!(
                    "securityGroupSelectorTerms[{i}] {}",
                    security_group_term_text(&terms[i])
                )
            })
            .collect();
        let message = if named.is_empty() {
            "no securityGroupSelectorTerms given".to_string()
        } else {
            format!("no security group matched {}", named.join("; "))
        };
        return ConditionOutcome {
            type_: CONDITION_SECURITY_GROUPS_READY,
            ok: false,
            reason: "SecurityGroupsNotFound".to_string(),
            message,
        };
    }
    let ids: Vec<String> = groups
        .security_groups
        .iter()
        .map(|g| format!("{} ({})", g.group_id, g.group_name))
        .collect();
    ConditionOutcome {
        type_: CONDITION_SECURITY_GROUPS_READY,
        ok: true,
        reason: "SecurityGroupsResolved".to_string(),
        message: format!("resolved {}", ids.join(", ")),
    }
}

/// The InstanceProfileReady outcome. Pure.
pub fn instance_profile_condition(
    profile: &Result<String, InstanceProfileError>,
) -> ConditionOutcome {
    let (ok, reason, message) = match profile {
        Ok(name) => (
            true,
            "InstanceProfileResolved",
            format!("using instance profile {name}"),
        ),
        Err(InstanceProfileError::ProfileNotFound { .. }) => {
            (false, "InstanceProfileNotFound", profile_err_text(profile))
        }
        Err(InstanceProfileError::RoleNotFound { .. }) => {
            (false, "RoleNotFound", profile_err_text(profile))
        }
        Err(InstanceProfileError::Unspecified) => (
            false,
            "InstanceProfileUnspecified",
            profile_err_text(profile),
        ),
        Err(InstanceProfileError::Api(_)) => {
            (false, "InstanceProfileError", profile_err_text(profile))
        }
    };
    ConditionOutcome {
        type_: CONDITION_INSTANCE_PROFILE_READY,
        ok,
        reason: reason.to_string(),
        message,
    }
}

fn profile_err_text(profile: &Result<String, InstanceProfileError>) -> String {
    match profile {
        Ok(_) => String::new(),
        Err(e) => format!("spec.role/spec.instanceProfile: {e}"),
    }
}

/// The Ready outcome summarising the others. Pure.
pub fn ready_condition(parts: &[ConditionOutcome]) -> ConditionOutcome {
    let failing: Vec<String> = parts
        .iter()
        .filter(|p| !p.ok)
        .map(|p| format!("{}=False ({}: {})", p.type_, p.reason, p.message))
        .collect();
    if failing.is_empty() {
        ConditionOutcome {
            type_: CONDITION_READY,
            ok: true,
            reason: "Ready".to_string(),
            message: String::new(),
        }
    } else {
        ConditionOutcome {
            type_: CONDITION_READY,
            ok: false,
            reason: "UnhealthyDependents".to_string(),
            message: failing.join("; "),
        }
    }
}

/// Resolves `class` through the ports and computes its status, keeping transition times of
/// conditions that did not change. Transient API errors (throttling, outages) are returned as
/// errors so the caller retries without flipping conditions; an instance-profile API error is
/// reported in the condition.
pub async fn resolve_node_class(
    ec2: &dyn Ec2Api,
    ssm: &dyn SsmApi,
    iam: &dyn IamApi,
    settings: &AwsSettings,
    class: &EC2NodeClass,
    now: Timestamp,
) -> Result<NodeClassResolution, AwsError> {
    let spec = &class.spec;
    let explicit = spec.ami_family.as_deref().and_then(AmiFamily::from_spec);
    let amis = resolve_amis(
        ec2,
        ssm,
        &spec.ami_selector_terms,
        explicit,
        &settings.kubernetes_version,
        now,
    )
    .await?;
    let subnets = resolve_subnets(ec2, &spec.subnet_selector_terms).await?;
    let groups = resolve_security_groups(ec2, &spec.security_group_selector_terms).await?;
    let class_name = class.metadata.name.clone().unwrap_or_default();
    let profile = ensure_instance_profile(
        iam,
        &settings.cluster_name,
        &settings.region,
        &class_name,
        spec.role.as_deref(),
        spec.instance_profile.as_deref(),
    )
    .await;
    if let Err(InstanceProfileError::Api(e)) = &profile
        && e.is_throttled()
    {
        return Err(e.clone());
    }
    let mut parts = vec![
        amis_condition(class, &amis),
        subnets_condition(class, &subnets),
        security_groups_condition(class, &groups),
        instance_profile_condition(&profile),
    ];
    parts.push(ready_condition(&parts));
    let ready = parts.iter().all(|p| p.ok);

    let mut status = class.status.clone().unwrap_or_default();
    status.amis = amis
        .amis
        .iter()
        .map(|a| AmiStatus {
            id: a.id.clone(),
            name: Some(a.name.clone()),
            requirements: a.requirements.clone(),
            deprecated: a.deprecated,
        })
        .collect();
    status.subnets = subnets
        .subnets
        .iter()
        .map(|s| SubnetStatus {
            id: s.subnet_id.clone(),
            zone: s.availability_zone.clone(),
            zone_id: Some(s.availability_zone_id.clone()).filter(|z| !z.is_empty()),
        })
        .collect();
    status.security_groups = groups
        .security_groups
        .iter()
        .map(|g| SecurityGroupStatus {
            id: g.group_id.clone(),
            name: Some(g.group_name.clone()),
        })
        .collect();
    status.instance_profile = profile.as_ref().ok().cloned();
    let generation = class.metadata.generation;
    for p in &parts {
        let value = if p.ok { STATUS_TRUE } else { STATUS_FALSE };
        set_condition(
            &mut status.conditions,
            p.type_,
            value,
            &p.reason,
            &p.message,
            Time(now),
            generation,
        );
    }
    let ami_family = effective_family(class, &amis);
    Ok(NodeClassResolution {
        status,
        amis,
        ami_family,
        ready,
    })
}
