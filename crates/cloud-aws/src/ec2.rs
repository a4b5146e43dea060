//! The EC2 port over aws-sdk-ec2: every describe call follows its pagination to the end.

use async_trait::async_trait;
use aws_sdk_ec2::Client;
use aws_sdk_ec2::types as ec2;
use base64::Engine as _;
use driftwood_aws::ports::{
    AcceleratorInfo, AwsError, CreateFleetError, CreateFleetInput, CreateFleetInstance,
    CreateFleetOutput, CreateLaunchTemplateInput, CreateTagsInput, DescribeImagesInput,
    DescribeInstanceStatusInput, DescribeInstanceTypeOfferingsInput, DescribeInstanceTypesInput,
    DescribeInstancesInput, DescribeLaunchTemplatesInput, DescribeSecurityGroupsInput,
    DescribeSpotPriceHistoryInput, DescribeSubnetsInput, Ec2Api, FleetOverrideRef, GpuDeviceInfo,
    GroupIdentifier, Image, Instance, InstanceStateChange, InstanceStatus, InstanceStatusEvent,
    InstanceTypeDescription, InstanceTypeOffering, LaunchTemplate, LaunchTemplateData,
    SecurityGroup, SpotPrice, StatusCheck, StatusCheckDetail, Subnet,
};

use crate::convert::{
    datetime, filters, narrow, tag_specifications, tags_from_ec2, tags_to_ec2, timestamp, wide,
};
use crate::error::aws_error;

/// The EC2 port over the SDK client.
#[derive(Debug, Clone)]
pub struct SdkEc2 {
    client: Client,
}

impl SdkEc2 {
    /// The port over `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

fn non_empty(v: &[String]) -> Option<Vec<String>> {
    (!v.is_empty()).then(|| v.to_vec())
}

fn image(i: &ec2::Image) -> Image {
    Image {
        image_id: i.image_id().unwrap_or_default().to_string(),
        name: i.name().unwrap_or_default().to_string(),
        description: i.description().unwrap_or_default().to_string(),
        owner_id: i.owner_id().unwrap_or_default().to_string(),
        image_owner_alias: i.image_owner_alias().map(ToString::to_string),
        architecture: i
            .architecture()
            .map(|a| a.as_str().to_string())
            .unwrap_or_default(),
        creation_date: i.creation_date().unwrap_or_default().to_string(),
        deprecation_time: i
            .deprecation_time()
            .filter(|t| !t.is_empty())
            .map(ToString::to_string),
        state: i
            .state()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default(),
        platform_details: i.platform_details().unwrap_or_default().to_string(),
        tags: tags_from_ec2(i.tags()),
    }
}

fn subnet(s: &ec2::Subnet) -> Subnet {
    Subnet {
        subnet_id: s.subnet_id().unwrap_or_default().to_string(),
        vpc_id: s.vpc_id().unwrap_or_default().to_string(),
        availability_zone: s.availability_zone().unwrap_or_default().to_string(),
        availability_zone_id: s.availability_zone_id().unwrap_or_default().to_string(),
        cidr_block: s.cidr_block().unwrap_or_default().to_string(),
        available_ip_address_count: wide(s.available_ip_address_count()),
        map_public_ip_on_launch: s.map_public_ip_on_launch().unwrap_or(false),
        tags: tags_from_ec2(s.tags()),
    }
}

fn security_group(g: &ec2::SecurityGroup) -> SecurityGroup {
    SecurityGroup {
        group_id: g.group_id().unwrap_or_default().to_string(),
        group_name: g.group_name().unwrap_or_default().to_string(),
        description: g.description().unwrap_or_default().to_string(),
        vpc_id: g.vpc_id().unwrap_or_default().to_string(),
        tags: tags_from_ec2(g.tags()),
    }
}

fn instance_type(t: &ec2::InstanceTypeInfo) -> InstanceTypeDescription {
    let processor = t.processor_info();
    let network = t.network_info();
    InstanceTypeDescription {
        instance_type: t
            .instance_type()
            .map(|i| i.as_str().to_string())
            .unwrap_or_default(),
        current_generation: t.current_generation().unwrap_or(false),
        bare_metal: t.bare_metal().unwrap_or(false),
        hypervisor: t.hypervisor().map(|h| h.as_str().to_string()),
        supported_usage_classes: t
            .supported_usage_classes()
            .iter()
            .map(|c| c.as_str().to_string())
            .collect(),
        supported_architectures: processor
            .map(|p| {
                p.supported_architectures()
                    .iter()
                    .map(|a| a.as_str().to_string())
                    .collect()
            })
            .unwrap_or_default(),
        processor_manufacturer: processor
            .and_then(|p| p.manufacturer())
            .map(ToString::to_string),
        sustained_clock_speed_ghz: processor.and_then(|p| p.sustained_clock_speed_in_ghz()),
        default_vcpus: wide(t.v_cpu_info().and_then(|v| v.default_v_cpus())),
        memory_mib: t.memory_info().and_then(|m| m.size_in_mib()).unwrap_or(0),
        maximum_network_interfaces: wide(network.and_then(|n| n.maximum_network_interfaces())),
        ipv4_addresses_per_interface: wide(network.and_then(|n| n.ipv4_addresses_per_interface())),
        network_performance: network
            .and_then(|n| n.network_performance())
            .unwrap_or_default()
            .to_string(),
        // Karpenter labels local NVMe only where the instance store is NVMe.
        instance_storage_total_gb: t
            .instance_storage_info()
            .filter(|s| s.nvme_support() != Some(&ec2::EphemeralNvmeSupport::Unsupported))
            .and_then(|s| s.total_size_in_gb()),
        ebs_bandwidth_mbps: t
            .ebs_info()
            .filter(|e| e.ebs_optimized_support() == Some(&ec2::EbsOptimizedSupport::Default))
            .and_then(|e| e.ebs_optimized_info())
            .and_then(|o| o.maximum_bandwidth_in_mbps())
            .map(i64::from),
        network_bandwidth_mbps: network
            .and_then(|n| n.network_cards().first())
            .and_then(|c| c.baseline_bandwidth_in_gbps())
            .map(|gbps| (gbps * 1000.0).round() as i64),
        encryption_in_transit_supported: network
            .and_then(|n| n.encryption_in_transit_supported())
            .unwrap_or(false),
        gpus: t
            .gpu_info()
            .map(|g| {
                g.gpus()
                    .iter()
                    .map(|d| GpuDeviceInfo {
                        name: d.name().unwrap_or_default().to_string(),
                        manufacturer: d.manufacturer().unwrap_or_default().to_string(),
                        count: wide(d.count()),
                        memory_mib: wide(d.memory_info().and_then(|m| m.size_in_mib())),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        accelerators: accelerators(t),
        efa_max_interfaces: wide(
            network
                .and_then(|n| n.efa_info())
                .and_then(|e| e.maximum_efa_interfaces()),
        ),
        branch_interfaces: 0,
    }
}

/// Neuron devices when the type has them (Karpenter prefers them), else inference
/// accelerators.
fn accelerators(t: &ec2::InstanceTypeInfo) -> Vec<AcceleratorInfo> {
    if let Some(neuron) = t.neuron_info().filter(|n| !n.neuron_devices().is_empty()) {
        return neuron
            .neuron_devices()
            .iter()
            .map(|d| AcceleratorInfo {
                name: d.name().unwrap_or_default().to_string(),
                manufacturer: "aws".to_string(),
                count: wide(d.count()),
                cores_per_device: wide(d.core_info().and_then(|c| c.count())),
            })
            .collect();
    }
    t.inference_accelerator_info()
        .map(|i| {
            i.accelerators()
                .iter()
                .map(|d| AcceleratorInfo {
                    name: d.name().unwrap_or_default().to_string(),
                    manufacturer: d.manufacturer().unwrap_or_default().to_string(),
                    count: wide(d.count()),
                    cores_per_device: 0,
                })
                .collect()
        })
        .unwrap_or_default()
}

fn launch_template_data(data: &LaunchTemplateData) -> ec2::RequestLaunchTemplateData {
    let block_devices: Vec<_> = data
        .block_device_mappings
        .iter()
        .map(|b| {
            ec2::LaunchTemplateBlockDeviceMappingRequest::builder()
                .device_name(&b.device_name)
                .ebs(
                    ec2::LaunchTemplateEbsBlockDeviceRequest::builder()
                        .set_volume_size(b.volume_size_gib.map(narrow))
                        .set_volume_type(b.volume_type.as_deref().map(ec2::VolumeType::from))
                        .set_iops(b.iops.map(narrow))
                        .set_throughput(b.throughput.map(narrow))
                        .set_encrypted(b.encrypted)
                        .set_kms_key_id(b.kms_key_id.clone())
                        .set_snapshot_id(b.snapshot_id.clone())
                        .set_delete_on_termination(b.delete_on_termination)
                        .build(),
                )
                .build()
        })
        .collect();
    let metadata = data.metadata_options.as_ref().map(|m| {
        ec2::LaunchTemplateInstanceMetadataOptionsRequest::builder()
            .set_http_endpoint(
                m.http_endpoint
                    .as_deref()
                    .map(ec2::LaunchTemplateInstanceMetadataEndpointState::from),
            )
            .set_http_protocol_ipv6(
                m.http_protocol_ipv6
                    .as_deref()
                    .map(ec2::LaunchTemplateInstanceMetadataProtocolIpv6::from),
            )
            .set_http_put_response_hop_limit(m.http_put_response_hop_limit.map(narrow))
            .set_http_tokens(
                m.http_tokens
                    .as_deref()
                    .map(ec2::LaunchTemplateHttpTokensState::from),
            )
            .build()
    });
    let tag_specs: Vec<_> = data
        .tag_specifications
        .iter()
        .filter(|s| !s.tags.is_empty())
        .map(|s| {
            ec2::LaunchTemplateTagSpecificationRequest::builder()
                .resource_type(ec2::ResourceType::from(s.resource_type.as_str()))
                .set_tags(Some(tags_to_ec2(&s.tags)))
                .build()
        })
        .collect();
    let mut builder = ec2::RequestLaunchTemplateData::builder()
        .image_id(&data.image_id)
        .monitoring(
            ec2::LaunchTemplatesMonitoringRequest::builder()
                .enabled(data.monitoring_enabled)
                .build(),
        )
        .set_block_device_mappings((!block_devices.is_empty()).then_some(block_devices))
        .set_metadata_options(metadata)
        .set_tag_specifications((!tag_specs.is_empty()).then_some(tag_specs));
    if !data.user_data.is_empty() {
        builder = builder
            .user_data(base64::engine::general_purpose::STANDARD.encode(data.user_data.as_bytes()));
    }
    if !data.iam_instance_profile_name.is_empty() {
        builder = builder.iam_instance_profile(
            ec2::LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                .name(&data.iam_instance_profile_name)
                .build(),
        );
    }
    match data.associate_public_ip_address {
        // EC2 takes a public-IP choice only on a network interface, and then the security
        // groups must move onto that interface too.
        Some(public) => {
            builder = builder.network_interfaces(
                ec2::LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                    .device_index(0)
                    .associate_public_ip_address(public)
                    .set_groups(non_empty(&data.security_group_ids))
                    .build(),
            );
        }
        None => {
            builder = builder.set_security_group_ids(non_empty(&data.security_group_ids));
        }
    }
    builder.build()
}

fn launch_template(t: &ec2::LaunchTemplate) -> LaunchTemplate {
    LaunchTemplate {
        launch_template_id: t.launch_template_id().unwrap_or_default().to_string(),
        launch_template_name: t.launch_template_name().unwrap_or_default().to_string(),
        create_time: timestamp(t.create_time()),
        tags: tags_from_ec2(t.tags()),
        data: LaunchTemplateData::default(),
    }
}

fn override_ref(o: Option<&ec2::LaunchTemplateAndOverridesResponse>) -> FleetOverrideRef {
    let o = o.and_then(|o| o.overrides());
    FleetOverrideRef {
        instance_type: o
            .and_then(|o| o.instance_type())
            .map(|t| t.as_str().to_string())
            .unwrap_or_default(),
        availability_zone: o
            .and_then(|o| o.availability_zone())
            .unwrap_or_default()
            .to_string(),
        subnet_id: o
            .and_then(|o| o.subnet_id())
            .unwrap_or_default()
            .to_string(),
    }
}

fn fleet_output(
    out: &aws_sdk_ec2::operation::create_fleet::CreateFleetOutput,
) -> CreateFleetOutput {
    CreateFleetOutput {
        fleet_id: out.fleet_id().unwrap_or_default().to_string(),
        instances: out
            .instances()
            .iter()
            .map(|i| CreateFleetInstance {
                instance_ids: i.instance_ids().to_vec(),
                instance_type: i
                    .instance_type()
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_default(),
                lifecycle: i
                    .lifecycle()
                    .map(|l| l.as_str().to_string())
                    .unwrap_or_else(|| "on-demand".to_string()),
                launch_template_and_overrides: override_ref(i.launch_template_and_overrides()),
            })
            .collect(),
        errors: out
            .errors()
            .iter()
            .map(|e| CreateFleetError {
                error_code: e.error_code().unwrap_or_default().to_string(),
                error_message: e.error_message().unwrap_or_default().to_string(),
                lifecycle: e
                    .lifecycle()
                    .map(|l| l.as_str().to_string())
                    .unwrap_or_default(),
                launch_template_and_overrides: override_ref(e.launch_template_and_overrides()),
            })
            .collect(),
    }
}

/// The instance profile's name from its ARN (`arn:aws:iam::ACCOUNT:instance-profile/PATH/NAME`).
fn profile_name(arn: &str) -> String {
    arn.rsplit('/').next().unwrap_or(arn).to_string()
}

fn instance(i: &ec2::Instance) -> Instance {
    Instance {
        instance_id: i.instance_id().unwrap_or_default().to_string(),
        instance_type: i
            .instance_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default(),
        image_id: i.image_id().unwrap_or_default().to_string(),
        availability_zone: i
            .placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or_default()
            .to_string(),
        subnet_id: i.subnet_id().unwrap_or_default().to_string(),
        vpc_id: i.vpc_id().unwrap_or_default().to_string(),
        private_ip_address: i.private_ip_address().unwrap_or_default().to_string(),
        private_dns_name: i.private_dns_name().unwrap_or_default().to_string(),
        state: i
            .state()
            .and_then(|s| s.name())
            .map(|n| n.as_str().to_string())
            .unwrap_or_default(),
        security_groups: i
            .security_groups()
            .iter()
            .map(|g| GroupIdentifier {
                group_id: g.group_id().unwrap_or_default().to_string(),
                group_name: g.group_name().unwrap_or_default().to_string(),
            })
            .collect(),
        tags: tags_from_ec2(i.tags()),
        launch_time: timestamp(i.launch_time()),
        instance_lifecycle: i.instance_lifecycle().map(|l| l.as_str().to_string()),
        architecture: i
            .architecture()
            .map(|a| a.as_str().to_string())
            .unwrap_or_default(),
        iam_instance_profile: i
            .iam_instance_profile()
            .and_then(|p| p.arn())
            .map(profile_name),
        platform: i.platform().map(|p| p.as_str().to_string()),
    }
}

#[async_trait]
impl Ec2Api for SdkEc2 {
    async fn describe_images(&self, input: DescribeImagesInput) -> Result<Vec<Image>, AwsError> {
        let images = self
            .client
            .describe_images()
            .set_image_ids(non_empty(&input.image_ids))
            .set_owners(non_empty(&input.owners))
            .set_filters(filters(&input.filters))
            .include_deprecated(input.include_deprecated)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| aws_error("DescribeImages", e))?;
        Ok(images.iter().map(image).collect())
    }

    async fn describe_subnets(&self, input: DescribeSubnetsInput) -> Result<Vec<Subnet>, AwsError> {
        let subnets = self
            .client
            .describe_subnets()
            .set_subnet_ids(non_empty(&input.subnet_ids))
            .set_filters(filters(&input.filters))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| aws_error("DescribeSubnets", e))?;
        Ok(subnets.iter().map(subnet).collect())
    }

    async fn describe_security_groups(
        &self,
        input: DescribeSecurityGroupsInput,
    ) -> Result<Vec<SecurityGroup>, AwsError> {
        let groups = self
            .client
            .describe_security_groups()
            .set_group_ids(non_empty(&input.group_ids))
            .set_filters(filters(&input.filters))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| aws_error("DescribeSecurityGroups", e))?;
        Ok(groups.iter().map(security_group).collect())
    }

    async fn describe_instance_types(
        &self,
        input: DescribeInstanceTypesInput,
    ) -> Result<Vec<InstanceTypeDescription>, AwsError> {
        let types = (!input.instance_types.is_empty()).then(|| {
            input
                .instance_types
                .iter()
                .map(|t| ec2::InstanceType::from(t.as_str()))
                .collect()
        });
        let described = self
            .client
            .describe_instance_types()
            .set_instance_types(types)
            .set_filters(filters(&input.filters))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| aws_error("DescribeInstanceTypes", e))?;
        Ok(described.iter().map(instance_type).collect())
    }

    async fn describe_instance_type_offerings(
        &self,
        input: DescribeInstanceTypeOfferingsInput,
    ) -> Result<Vec<InstanceTypeOffering>, AwsError> {
        let location = (!input.location_type.is_empty())
            .then(|| ec2::LocationType::from(input.location_type.as_str()));
        let offerings = self
            .client
            .describe_instance_type_offerings()
            .set_location_type(location)
            .set_filters(filters(&input.filters))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| aws_error("DescribeInstanceTypeOfferings", e))?;
        Ok(offerings
            .iter()
            .map(|o| InstanceTypeOffering {
                instance_type: o
                    .instance_type()
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_default(),
                location_type: o
                    .location_type()
                    .map(|l| l.as_str().to_string())
                    .unwrap_or_default(),
                location: o.location().unwrap_or_default().to_string(),
            })
            .collect())
    }

    async fn describe_spot_price_history(
        &self,
        input: DescribeSpotPriceHistoryInput,
    ) -> Result<Vec<SpotPrice>, AwsError> {
        let types = (!input.instance_types.is_empty()).then(|| {
            input
                .instance_types
                .iter()
                .map(|t| ec2::InstanceType::from(t.as_str()))
                .collect()
        });
        let prices = self
            .client
            .describe_spot_price_history()
            .set_instance_types(types)
            .set_product_descriptions(non_empty(&input.product_descriptions))
            .set_availability_zone(input.availability_zone.clone())
            .set_start_time(input.start_time.map(datetime))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| aws_error("DescribeSpotPriceHistory", e))?;
        Ok(prices
            .iter()
            .map(|p| SpotPrice {
                instance_type: p
                    .instance_type()
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_default(),
                availability_zone: p.availability_zone().unwrap_or_default().to_string(),
                product_description: p
                    .product_description()
                    .map(|d| d.as_str().to_string())
                    .unwrap_or_default(),
                spot_price: p.spot_price().unwrap_or_default().to_string(),
                timestamp: timestamp(p.timestamp()),
            })
            .collect())
    }

    async fn create_launch_template(
        &self,
        input: CreateLaunchTemplateInput,
    ) -> Result<LaunchTemplate, AwsError> {
        let out = self
            .client
            .create_launch_template()
            .launch_template_name(&input.launch_template_name)
            .launch_template_data(launch_template_data(&input.launch_template_data))
            .set_tag_specifications(tag_specifications(&input.tag_specifications))
            .send()
            .await
            .map_err(|e| aws_error("CreateLaunchTemplate", e))?;
        let mut created = out
            .launch_template()
            .map(launch_template)
            .unwrap_or_else(|| LaunchTemplate {
                launch_template_name: input.launch_template_name.clone(),
                ..LaunchTemplate::default()
            });
        created.data = input.launch_template_data;
        Ok(created)
    }

    async fn describe_launch_templates(
        &self,
        input: DescribeLaunchTemplatesInput,
    ) -> Result<Vec<LaunchTemplate>, AwsError> {
        let templates = self
            .client
            .describe_launch_templates()
            .set_launch_template_names(non_empty(&input.launch_template_names))
            .set_filters(filters(&input.filters))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| aws_error("DescribeLaunchTemplates", e))?;
        Ok(templates.iter().map(launch_template).collect())
    }

    async fn delete_launch_template(&self, launch_template_name: &str) -> Result<(), AwsError> {
        self.client
            .delete_launch_template()
            .launch_template_name(launch_template_name)
            .send()
            .await
            .map_err(|e| aws_error("DeleteLaunchTemplate", e))?;
        Ok(())
    }

    async fn create_fleet(&self, input: CreateFleetInput) -> Result<CreateFleetOutput, AwsError> {
        let configs: Vec<_> = input
            .launch_template_configs
            .iter()
            .map(|c| {
                let overrides = c
                    .overrides
                    .iter()
                    .map(|o| {
                        ec2::FleetLaunchTemplateOverridesRequest::builder()
                            .instance_type(ec2::InstanceType::from(o.instance_type.as_str()))
                            .subnet_id(&o.subnet_id)
                            .availability_zone(&o.availability_zone)
                            .set_image_id(o.image_id.clone())
                            .set_priority(o.priority)
                            .build()
                    })
                    .collect();
                ec2::FleetLaunchTemplateConfigRequest::builder()
                    .launch_template_specification(
                        ec2::FleetLaunchTemplateSpecificationRequest::builder()
                            .launch_template_name(&c.launch_template_name)
                            .version(&c.version)
                            .build(),
                    )
                    .set_overrides(Some(overrides))
                    .build()
            })
            .collect();
        let mut request = self
            .client
            .create_fleet()
            .r#type(ec2::FleetType::from(input.type_.as_str()))
            .set_launch_template_configs(Some(configs))
            .target_capacity_specification(
                ec2::TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(narrow(input.total_target_capacity))
                    .default_target_capacity_type(ec2::DefaultTargetCapacityType::from(
                        input.default_target_capacity_type.as_str(),
                    ))
                    .build(),
            )
            .set_tag_specifications(tag_specifications(&input.tag_specifications))
            .set_context(input.context.clone());
        if let Some(strategy) = &input.spot_allocation_strategy {
            request = request.spot_options(
                ec2::SpotOptionsRequest::builder()
                    .allocation_strategy(ec2::SpotAllocationStrategy::from(strategy.as_str()))
                    .build(),
            );
        }
        if let Some(strategy) = &input.on_demand_allocation_strategy {
            request = request.on_demand_options(
                ec2::OnDemandOptionsRequest::builder()
                    .allocation_strategy(ec2::FleetOnDemandAllocationStrategy::from(
                        strategy.as_str(),
                    ))
                    .build(),
            );
        }
        let out = request
            .send()
            .await
            .map_err(|e| aws_error("CreateFleet", e))?;
        Ok(fleet_output(&out))
    }

    async fn describe_instances(
        &self,
        input: DescribeInstancesInput,
    ) -> Result<Vec<Instance>, AwsError> {
        let reservations = self
            .client
            .describe_instances()
            .set_instance_ids(non_empty(&input.instance_ids))
            .set_filters(filters(&input.filters))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| aws_error("DescribeInstances", e))?;
        Ok(reservations
            .iter()
            .flat_map(|r| r.instances().iter().map(instance))
            .collect())
    }

    async fn terminate_instances(
        &self,
        instance_ids: Vec<String>,
    ) -> Result<Vec<InstanceStateChange>, AwsError> {
        let out = self
            .client
            .terminate_instances()
            .set_instance_ids(Some(instance_ids))
            .send()
            .await
            .map_err(|e| aws_error("TerminateInstances", e))?;
        let state = |s: Option<&ec2::InstanceState>| {
            s.and_then(|s| s.name())
                .map(|n| n.as_str().to_string())
                .unwrap_or_default()
        };
        Ok(out
            .terminating_instances()
            .iter()
            .map(|c| InstanceStateChange {
                instance_id: c.instance_id().unwrap_or_default().to_string(),
                previous_state: state(c.previous_state()),
                current_state: state(c.current_state()),
            })
            .collect())
    }

    async fn create_tags(&self, input: CreateTagsInput) -> Result<(), AwsError> {
        self.client
            .create_tags()
            .set_resources(Some(input.resources))
            .set_tags(Some(tags_to_ec2(&input.tags)))
            .send()
            .await
            .map_err(|e| aws_error("CreateTags", e))?;
        Ok(())
    }

    async fn describe_instance_status(
        &self,
        input: DescribeInstanceStatusInput,
    ) -> Result<Vec<InstanceStatus>, AwsError> {
        let statuses: Vec<ec2::InstanceStatus> = self
            .client
            .describe_instance_status()
            .set_filters(filters(&input.filters))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| aws_error("DescribeInstanceStatus", e))?;
        Ok(statuses.iter().map(instance_status).collect())
    }
}

/// An SDK instance status as the port's.
fn instance_status(s: &ec2::InstanceStatus) -> InstanceStatus {
    let detail = |name: Option<&ec2::StatusName>,
                  status: Option<&ec2::StatusType>,
                  since: Option<&aws_smithy_types::DateTime>| StatusCheckDetail {
        name: name.map(|n| n.as_str().to_string()).unwrap_or_default(),
        status: status.map(|s| s.as_str().to_string()).unwrap_or_default(),
        impaired_since: since.map(|t| timestamp(Some(t))),
    };
    let check =
        |status: Option<&ec2::SummaryStatus>, details: Vec<StatusCheckDetail>| StatusCheck {
            status: status.map(|s| s.as_str().to_string()).unwrap_or_default(),
            details,
        };
    let summary = |c: &ec2::InstanceStatusSummary| {
        let details = c.details().iter();
        check(
            c.status(),
            details
                .map(|d| detail(d.name(), d.status(), d.impaired_since()))
                .collect(),
        )
    };
    InstanceStatus {
        instance_id: s.instance_id().unwrap_or_default().to_string(),
        availability_zone: s.availability_zone().unwrap_or_default().to_string(),
        state: s
            .instance_state()
            .and_then(|st| st.name())
            .map(|n| n.as_str().to_string())
            .unwrap_or_default(),
        instance_status: s.instance_status().map(summary),
        system_status: s.system_status().map(summary),
        // The EBS check has its own detail type, read the same way.
        attached_ebs_status: s.attached_ebs_status().map(|c| {
            let details = c.details().iter();
            check(
                c.status(),
                details
                    .map(|d| detail(d.name(), d.status(), d.impaired_since()))
                    .collect(),
            )
        }),
        events: s
            .events()
            .iter()
            .map(|e| InstanceStatusEvent {
                code: e.code().map(|c| c.as_str().to_string()).unwrap_or_default(),
                description: e.description().unwrap_or_default().to_string(),
                not_before: e.not_before().map(|t| timestamp(Some(t))),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_ip_choice_moves_security_groups_onto_the_interface() {
        let data = LaunchTemplateData {
            image_id: "ami-1".into(),
            user_data: "#!/bin/bash\necho hi".into(),
            security_group_ids: vec!["sg-1".into()],
            associate_public_ip_address: Some(false),
            ..LaunchTemplateData::default()
        };
        let request = launch_template_data(&data);
        assert!(request.security_group_ids().is_empty());
        let nic = &request.network_interfaces()[0];
        assert_eq!(nic.groups(), ["sg-1"]);
        assert_eq!(nic.associate_public_ip_address(), Some(false));
        assert_eq!(nic.device_index(), Some(0));
        assert_eq!(
            request.user_data(),
            Some(
                base64::engine::general_purpose::STANDARD
                    .encode("#!/bin/bash\necho hi")
                    .as_str()
            )
        );
        let without = launch_template_data(&LaunchTemplateData {
            associate_public_ip_address: None,
            ..data
        });
        assert_eq!(without.security_group_ids(), ["sg-1"]);
        assert!(without.network_interfaces().is_empty());
    }

    #[test]
    fn instance_profile_name_comes_from_the_arn() {
        assert_eq!(
            profile_name("arn:aws:iam::123456789012:instance-profile/karpenter/c/np_123"),
            "np_123"
        );
    }
}
