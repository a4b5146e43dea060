//! Cleanup when an EC2NodeClass is deleted: its launch templates, and the instance profile
//! driftwood created for its role (once no live instance uses it).

use driftwood_api::EC2NodeClass;

use super::AwsSettings;
use super::instance_profile::managed_instance_profile_name;
use crate::ports::{
    AwsError, DescribeInstancesInput, DescribeLaunchTemplatesInput, Ec2Api, Filter, IamApi,
    instance_state,
};

/// What a cleanup removed, and whether anything is left for a later attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    pub deleted_launch_templates: Vec<String>,
    pub deleted_instance_profile: Option<String>,
    /// Live instances launched from the class; while any remain, the profile is kept.
    pub remaining_instances: Vec<String>,
}

impl CleanupReport {
    /// Whether the class's cloud resources are all gone (its finalizer may be removed).
    pub fn done(&self) -> bool {
        self.remaining_instances.is_empty()
    }
}

/// Deletes the class's launch templates and, when no instance launched from it is still
/// alive, the instance profile driftwood manages for its role. Idempotent.
pub async fn cleanup_node_class(
    ec2: &dyn Ec2Api,
    iam: &dyn IamApi,
    settings: &AwsSettings,
    class: &EC2NodeClass,
) -> Result<CleanupReport, AwsError> {
    let name = class.metadata.name.clone().unwrap_or_default();
    let mut report = CleanupReport::default();
    let templates = ec2
        .describe_launch_templates(DescribeLaunchTemplatesInput {
            launch_template_names: Vec::new(),
            filters: vec![
                Filter::new(
                    "tag:karpenter.k8s.aws/cluster",
                    [settings.cluster_name.as_str()],
                ),
                Filter::new("tag:karpenter.k8s.aws/ec2nodeclass", [name.as_str()]),
            ],
        })
        .await?;
    for lt in templates {
        match ec2.delete_launch_template(&lt.launch_template_name).await {
            Ok(()) => report
                .deleted_launch_templates
                .push(lt.launch_template_name),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    let live = ec2
        .describe_instances(DescribeInstancesInput {
            instance_ids: Vec::new(),
            filters: vec![
                Filter::new("tag:karpenter.k8s.aws/ec2nodeclass", [name.as_str()]),
                Filter::new(
                    format!("tag:kubernetes.io/cluster/{}", settings.cluster_name),
                    ["owned"],
                ),
                Filter::new(
                    "instance-state-name",
                    [
                        instance_state::PENDING,
                        instance_state::RUNNING,
                        instance_state::STOPPING,
                        instance_state::STOPPED,
                    ],
                ),
            ],
        })
        .await?;
    report.remaining_instances = live.into_iter().map(|i| i.instance_id).collect();
    let Some(role) = class
        .spec
        .role
        .as_deref()
        .filter(|_| class.spec.instance_profile.is_none())
    else {
        return Ok(report);
    };
    if !report.remaining_instances.is_empty() {
        return Ok(report);
    }
    let role = role.rsplit('/').next().unwrap_or(role);
    let profile = managed_instance_profile_name(&settings.cluster_name, &settings.region, role);
    match iam.get_instance_profile(&profile).await {
        Ok(p) => {
            for r in &p.roles {
                iam.remove_role_from_instance_profile(&profile, r).await?;
            }
            match iam.delete_instance_profile(&profile).await {
                Ok(()) => report.deleted_instance_profile = Some(profile),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e),
    }
    Ok(report)
}
