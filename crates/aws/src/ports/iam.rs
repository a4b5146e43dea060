//! IAM port: the instance-profile calls used when an EC2NodeClass names a role.

use async_trait::async_trait;

use super::{AwsError, Tag};

/// An IAM instance profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceProfile {
    pub instance_profile_name: String,
    pub instance_profile_id: String,
    pub arn: String,
    pub path: String,
    /// Names of the roles attached (AWS allows at most one).
    pub roles: Vec<String>,
    pub tags: Vec<Tag>,
}

/// CreateInstanceProfile request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateInstanceProfileInput {
    pub instance_profile_name: String,
    pub path: String,
    pub tags: Vec<Tag>,
}

/// The IAM operations the provider needs.
#[async_trait]
pub trait IamApi: Send + Sync {
    /// GetInstanceProfile; `NoSuchEntity` when missing.
    async fn get_instance_profile(&self, name: &str) -> Result<InstanceProfile, AwsError>;
    /// CreateInstanceProfile; `EntityAlreadyExists` when present.
    async fn create_instance_profile(
        &self,
        input: CreateInstanceProfileInput,
    ) -> Result<InstanceProfile, AwsError>;
    /// AddRoleToInstanceProfile; `NoSuchEntity` when the role or profile is missing,
    /// `LimitExceeded` when the profile already has a role.
    async fn add_role_to_instance_profile(&self, profile: &str, role: &str)
    -> Result<(), AwsError>;
    /// RemoveRoleFromInstanceProfile.
    async fn remove_role_from_instance_profile(
        &self,
        profile: &str,
        role: &str,
    ) -> Result<(), AwsError>;
    /// DeleteInstanceProfile.
    async fn delete_instance_profile(&self, name: &str) -> Result<(), AwsError>;
}
