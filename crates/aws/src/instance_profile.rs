//! Instance profile for an EC2NodeClass: used as given, or derived from the role (created,
//! tagged and attached when missing).

use super::fnv::fnv1a64;
use crate::ports::{AwsError, CreateInstanceProfileInput, IamApi, Tag, codes};

/// The deterministic name of the instance profile driftwood manages for `role` in a cluster:
/// `<cluster>_<hash of region and role>`.
pub fn managed_instance_profile_name(cluster: &str, region: &str, role: &str) -> String {
    let hash = fnv1a64(format!("{region}/{role}").as_bytes());
    format!("{cluster}_{hash}")
}

/// Tags put on a managed instance profile.
pub fn managed_instance_profile_tags(cluster: &str, region: &str, node_class: &str) -> Vec<Tag> {
    vec![
        Tag::new(format!("kubernetes.io/cluster/{cluster}"), "owned"),
        Tag::new("karpenter.sh/managed-by", cluster),
        Tag::new("karpenter.k8s.aws/ec2nodeclass", node_class),
        Tag::new("topology.kubernetes.io/region", region),
    ]
}

/// Why the instance profile is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstanceProfileError {
    #[error("instance profile {name:?} does not exist")]
    ProfileNotFound { name: String },
    #[error("role {role:?} does not exist ({detail})")]
    RoleNotFound { role: String, detail: String },
    #[error("the class sets neither role nor instanceProfile")]
    Unspecified,
    #[error(transparent)]
    Api(#[from] AwsError),
}

/// Returns the profile name to launch with: `instance_profile` when given (checked to exist),
/// else the managed profile for `role`, created and attached to the role if needed.
pub async fn ensure_instance_profile(
    iam: &dyn IamApi,
    cluster: &str,
    region: &str,
    node_class: &str,
    role: Option<&str>,
    instance_profile: Option<&str>,
) -> Result<String, InstanceProfileError> {
    if let Some(name) = instance_profile {
        return match iam.get_instance_profile(name).await {
            Ok(p) => Ok(p.instance_profile_name),
            Err(e) if e.is_not_found() => Err(InstanceProfileError::ProfileNotFound {
                name: name.to_string(),
            }),
            Err(e) => Err(e.into()),
        };
    }
    let Some(role) = role else {
        return Err(InstanceProfileError::Unspecified);
    };
    let role = role.rsplit('/').next().unwrap_or(role);
    let name = managed_instance_profile_name(cluster, region, role);
    let profile = match iam.get_instance_profile(&name).await {
        Ok(p) => p,
        Err(e) if e.is_not_found() => {
            let input = CreateInstanceProfileInput {
                instance_profile_name: name.clone(),
                path: "/".to_string(),
                tags: managed_instance_profile_tags(cluster, region, node_class),
            };
            match iam.create_instance_profile(input).await {
                Ok(p) => p,
                Err(e) if e.code == codes::ENTITY_ALREADY_EXISTS => {
                    iam.get_instance_profile(&name).await?
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(e) => return Err(e.into()),
    };
    if profile.roles.iter().any(|r| r == role) {
        return Ok(name);
    }
    for other in &profile.roles {
        iam.remove_role_from_instance_profile(&name, other).await?;
    }
    match iam.add_role_to_instance_profile(&name, role).await {
        Ok(()) => Ok(name),
        Err(e) if e.is_not_found() => Err(InstanceProfileError::RoleNotFound {
            role: role.to_string(),
            detail: e.message,
        }),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_is_deterministic_and_role_specific() {
        let a = managed_instance_profile_name("demo", "us-west-2", "KarpenterNodeRole-demo");
        assert_eq!(
            a,
            managed_instance_profile_name("demo", "us-west-2", "KarpenterNodeRole-demo")
        );
        assert_ne!(
            a,
            managed_instance_profile_name("demo", "us-west-2", "other")
        );
        assert!(a.starts_with("demo_"));
    }
}
