//! CreateLaunchTemplate and CreateFleet parameters read into the port's inputs:
//! `LaunchTemplateData.…` (user data base64-decoded, security groups from
//! `SecurityGroupId.N` or the first network interface, which also carries the public-IP
//! choice) and `LaunchTemplateConfigs.N.…`, `TargetCapacitySpecification.…`.

use base64::Engine as _;
use driftwood_aws::ports::{
    BlockDeviceMapping, CreateFleetInput, CreateLaunchTemplateInput, FleetLaunchTemplateConfig,
    FleetOverride, LaunchTemplateData, MetadataOptions,
};

use super::inputs::tag_specifications;
use crate::wire::error::WireError;
use crate::wire::form::Scope;

fn text(p: &Scope<'_>, name: &str) -> Option<String> {
    p.get(name).map(str::to_string)
}

pub(crate) fn create_launch_template(
    p: &Scope<'_>,
) -> Result<CreateLaunchTemplateInput, WireError> {
    Ok(CreateLaunchTemplateInput {
        launch_template_name: p.required("LaunchTemplateName")?.to_string(),
        launch_template_data: launch_template_data(&p.sub("LaunchTemplateData"))?,
        tag_specifications: tag_specifications(p),
    })
}

fn launch_template_data(d: &Scope<'_>) -> Result<LaunchTemplateData, WireError> {
    let user_data = match d.get("UserData") {
        None => String::new(),
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .map_err(|e| {
                    WireError::invalid(&d.key("UserData"), encoded, format!("not base64: {e}"))
                })?;
            String::from_utf8_lossy(&bytes).into_owned()
        }
    };
    let profile = d.sub("IamInstanceProfile");
    let iam_instance_profile_name = match (profile.get("Name"), profile.get("Arn")) {
        (Some(name), _) => name.to_string(),
        (None, Some(arn)) => arn.rsplit('/').next().unwrap_or(arn).to_string(),
        (None, None) => String::new(),
    };
    let interface = d.entries("NetworkInterface").into_iter().next();
    let mut security_group_ids = d.strings("SecurityGroupId");
    if let Some(nic) = &interface {
        security_group_ids.extend(nic.strings("SecurityGroupId"));
    }
    let associate_public_ip_address = match &interface {
        Some(nic) => nic.bool("AssociatePublicIpAddress")?,
        None => None,
    };
    let metadata = d.sub("MetadataOptions");
    let metadata_options = if d.has("MetadataOptions") {
        Some(MetadataOptions {
            http_endpoint: text(&metadata, "HttpEndpoint"),
            http_protocol_ipv6: text(&metadata, "HttpProtocolIpv6"),
            http_put_response_hop_limit: metadata.int("HttpPutResponseHopLimit")?,
            http_tokens: text(&metadata, "HttpTokens"),
        })
    } else {
        None
    };
    let mut block_device_mappings = Vec::new();
    for b in d.entries("BlockDeviceMapping") {
        let ebs = b.sub("Ebs");
        block_device_mappings.push(BlockDeviceMapping {
            device_name: b.get("DeviceName").unwrap_or_default().to_string(),
            volume_size_gib: ebs.int("VolumeSize")?,
            volume_type: text(&ebs, "VolumeType"),
            iops: ebs.int("Iops")?,
            throughput: ebs.int("Throughput")?,
            encrypted: ebs.bool("Encrypted")?,
            kms_key_id: text(&ebs, "KmsKeyId"),
            snapshot_id: text(&ebs, "SnapshotId"),
            delete_on_termination: ebs.bool("DeleteOnTermination")?,
        });
    }
    Ok(LaunchTemplateData {
        image_id: d.get("ImageId").unwrap_or_default().to_string(),
        user_data,
        iam_instance_profile_name,
        security_group_ids,
        block_device_mappings,
        metadata_options,
        monitoring_enabled: d.sub("Monitoring").bool("Enabled")?.unwrap_or(false),
        associate_public_ip_address,
        tag_specifications: tag_specifications(d),
    })
}

pub(crate) fn create_fleet(p: &Scope<'_>) -> Result<CreateFleetInput, WireError> {
    let mut launch_template_configs = Vec::new();
    for c in p.entries("LaunchTemplateConfigs") {
        let spec = c.sub("LaunchTemplateSpecification");
        let mut overrides = Vec::new();
        for o in c.entries("Overrides") {
            overrides.push(FleetOverride {
                instance_type: o.get("InstanceType").unwrap_or_default().to_string(),
                subnet_id: o.get("SubnetId").unwrap_or_default().to_string(),
                availability_zone: o.get("AvailabilityZone").unwrap_or_default().to_string(),
                image_id: text(&o, "ImageId"),
                priority: o.float("Priority")?,
            });
        }
        launch_template_configs.push(FleetLaunchTemplateConfig {
            launch_template_name: spec.required("LaunchTemplateName")?.to_string(),
            version: spec.get("Version").unwrap_or("$Default").to_string(),
            overrides,
        });
    }
    if launch_template_configs.is_empty() {
        return Err(WireError::MissingParameter(
            "LaunchTemplateConfigs".to_string(),
        ));
    }
    let capacity = p.sub("TargetCapacitySpecification");
    let total = capacity
        .int("TotalTargetCapacity")?
        .ok_or_else(|| WireError::MissingParameter(capacity.key("TotalTargetCapacity")))?;
    Ok(CreateFleetInput {
        type_: p.get("Type").unwrap_or("maintain").to_string(),
        launch_template_configs,
        total_target_capacity: total,
        default_target_capacity_type: capacity
            .get("DefaultTargetCapacityType")
            .unwrap_or("on-demand")
            .to_string(),
        spot_allocation_strategy: text(&p.sub("SpotOptions"), "AllocationStrategy"),
        on_demand_allocation_strategy: text(&p.sub("OnDemandOptions"), "AllocationStrategy"),
        tag_specifications: tag_specifications(p),
        context: text(p, "Context"),
    })
}
