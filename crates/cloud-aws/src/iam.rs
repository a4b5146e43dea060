//! The IAM port over aws-sdk-iam.

use async_trait::async_trait;
use aws_sdk_iam::Client;
use aws_sdk_iam::types as iam;
use driftwood_aws::ports::{AwsError, CreateInstanceProfileInput, IamApi, InstanceProfile, Tag};

use crate::error::aws_error;

/// The IAM port over the SDK client.
#[derive(Debug, Clone)]
pub struct SdkIam {
    client: Client,
}

impl SdkIam {
    /// The port over `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

fn profile(p: &iam::InstanceProfile) -> InstanceProfile {
    InstanceProfile {
        instance_profile_name: p.instance_profile_name().to_string(),
        instance_profile_id: p.instance_profile_id().to_string(),
        arn: p.arn().to_string(),
        path: p.path().to_string(),
        roles: p
            .roles()
            .iter()
            .map(|r| r.role_name().to_string())
            .collect(),
        tags: p
            .tags()
            .iter()
            .map(|t| Tag::new(t.key(), t.value()))
            .collect(),
    }
}

fn invalid_tag(e: impl std::fmt::Display) -> AwsError {
    AwsError::new(
        "InvalidRequest",
        format!("CreateInstanceProfile: bad tag: {e}"),
    )
}

#[async_trait]
impl IamApi for SdkIam {
    async fn get_instance_profile(&self, name: &str) -> Result<InstanceProfile, AwsError> {
        let out = self
            .client
            .get_instance_profile()
            .instance_profile_name(name)
            .send()
            .await
            .map_err(|e| aws_error("GetInstanceProfile", e))?;
        out.instance_profile().map(profile).ok_or_else(|| {
            AwsError::new(
                "InvalidResponse",
                format!("GetInstanceProfile {name}: no instance profile in the response"),
            )
        })
    }

    async fn create_instance_profile(
        &self,
        input: CreateInstanceProfileInput,
    ) -> Result<InstanceProfile, AwsError> {
        let tags = input
            .tags
            .iter()
            .map(|t| iam::Tag::builder().key(&t.key).value(&t.value).build())
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid_tag)?;
        let path = if input.path.is_empty() {
            "/"
        } else {
            &input.path
        };
        let out = self
            .client
            .create_instance_profile()
            .instance_profile_name(&input.instance_profile_name)
            .path(path)
            .set_tags((!tags.is_empty()).then_some(tags))
            .send()
            .await
            .map_err(|e| aws_error("CreateInstanceProfile", e))?;
        out.instance_profile().map(profile).ok_or_else(|| {
            AwsError::new(
                "InvalidResponse",
                format!(
                    "CreateInstanceProfile {}: no instance profile in the response",
                    input.instance_profile_name
                ),
            )
        })
    }

    async fn add_role_to_instance_profile(
        &self,
        profile: &str,
        role: &str,
    ) -> Result<(), AwsError> {
        self.client
            .add_role_to_instance_profile()
            .instance_profile_name(profile)
            .role_name(role)
            .send()
            .await
            .map_err(|e| aws_error("AddRoleToInstanceProfile", e))?;
        Ok(())
    }

    async fn remove_role_from_instance_profile(
        &self,
        profile: &str,
        role: &str,
    ) -> Result<(), AwsError> {
        self.client
            .remove_role_from_instance_profile()
            .instance_profile_name(profile)
            .role_name(role)
            .send()
            .await
            .map_err(|e| aws_error("RemoveRoleFromInstanceProfile", e))?;
        Ok(())
    }

    async fn delete_instance_profile(&self, name: &str) -> Result<(), AwsError> {
        self.client
            .delete_instance_profile()
            .instance_profile_name(name)
            .send()
            .await
            .map_err(|e| aws_error("DeleteInstanceProfile", e))?;
        Ok(())
    }
}
