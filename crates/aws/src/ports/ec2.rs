//! EC2 port: the describe/launch/terminate calls the provider needs, with plain request and
//! response structs mirroring the EC2 API shapes.

use async_trait::async_trait;
use jiff::Timestamp;

use super::AwsError;

/// An EC2 filter: a name (`tag:KEY`, `tag-key`, `image-id`, `name`, ...) and the values any of
/// which may match.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Filter {
    pub name: String,
    pub values: Vec<String>,
}

impl Filter {
    /// A filter with one name and these values.
    pub fn new(
        name: impl Into<String>,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            name: name.into(),
            values: values.into_iter().map(Into::into).collect(),
        }
    }
}

/// A resource tag.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag {
    pub key: String,
    pub value: String,
}

impl Tag {
    /// A tag with this key and value.
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
        }
    }
}

/// Tags to apply to a resource type created by a call (`instance`, `volume`, `launch-template`,
/// `fleet`, `network-interface`, `spot-instances-request`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagSpecification {
    pub resource_type: String,
    pub tags: Vec<Tag>,
}

// ---------------------------------------------------------------- images

/// DescribeImages request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeImagesInput {
    pub image_ids: Vec<String>,
    /// `self`, `amazon`, `aws-marketplace` or account IDs; empty means any owner.
    pub owners: Vec<String>,
    pub filters: Vec<Filter>,
    pub include_deprecated: bool,
}

/// An AMI.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Image {
    pub image_id: String,
    pub name: String,
    pub description: String,
    pub owner_id: String,
    pub image_owner_alias: Option<String>,
    /// `x86_64`, `arm64`, `i386`, `x86_64_mac`, ...
    pub architecture: String,
    /// ISO 8601, e.g. `2024-08-17T04:12:33.000Z`.
    pub creation_date: String,
    /// ISO 8601 deprecation time, when set.
    pub deprecation_time: Option<String>,
    /// `available`, `pending`, `failed`, ...
    pub state: String,
    pub platform_details: String,
    pub tags: Vec<Tag>,
}

// ---------------------------------------------------------------- network

/// DescribeSubnets request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeSubnetsInput {
    pub subnet_ids: Vec<String>,
    pub filters: Vec<Filter>,
}

/// A subnet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subnet {
    pub subnet_id: String,
    pub vpc_id: String,
    pub availability_zone: String,
    pub availability_zone_id: String,
    pub cidr_block: String,
    pub available_ip_address_count: i64,
    pub map_public_ip_on_launch: bool,
    pub tags: Vec<Tag>,
}

/// DescribeSecurityGroups request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeSecurityGroupsInput {
    pub group_ids: Vec<String>,
    pub filters: Vec<Filter>,
}

/// A security group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityGroup {
    pub group_id: String,
    pub group_name: String,
    pub description: String,
    pub vpc_id: String,
    pub tags: Vec<Tag>,
}

// ---------------------------------------------------------------- instance types

/// DescribeInstanceTypes request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeInstanceTypesInput {
    pub instance_types: Vec<String>,
    pub filters: Vec<Filter>,
}

/// One GPU model of an instance type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuDeviceInfo {
    pub name: String,
    pub manufacturer: String,
    pub count: i64,
    pub memory_mib: i64,
}

/// One kind of ML accelerator of an instance type (an Inferentia/Trainium Neuron device or an
/// inference accelerator).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcceleratorInfo {
    pub name: String,
    pub manufacturer: String,
    pub count: i64,
    /// NeuronCores per Neuron device (`CoreInfo.Count`); 0 for inference accelerators.
    pub cores_per_device: i64,
}

/// One instance type as DescribeInstanceTypes reports it (nested AWS structures flattened).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InstanceTypeDescription {
    pub instance_type: String,
    pub current_generation: bool,
    pub bare_metal: bool,
    /// `nitro` or `xen`; absent for bare metal.
    pub hypervisor: Option<String>,
    /// `on-demand`, `spot`.
    pub supported_usage_classes: Vec<String>,
    /// ProcessorInfo.SupportedArchitectures: `x86_64`, `arm64`.
    pub supported_architectures: Vec<String>,
    /// ProcessorInfo.Manufacturer: `Intel`, `AMD`, `AWS`.
    pub processor_manufacturer: Option<String>,
    pub sustained_clock_speed_ghz: Option<f64>,
    pub default_vcpus: i64,
    pub memory_mib: i64,
    pub maximum_network_interfaces: i64,
    pub ipv4_addresses_per_interface: i64,
    pub network_performance: String,
    /// InstanceStorageInfo.TotalSizeInGB, when the type has instance store.
    pub instance_storage_total_gb: Option<i64>,
    /// EbsOptimizedInfo.MaximumBandwidthInMbps, for types EBS-optimized by default (what
    /// Karpenter labels `instance-ebs-bandwidth` with).
    pub ebs_bandwidth_mbps: Option<i64>,
    /// The primary network card's baseline bandwidth in Mbps (`instance-network-bandwidth`).
    pub network_bandwidth_mbps: Option<i64>,
    /// NetworkInfo.EncryptionInTransitSupported.
    pub encryption_in_transit_supported: bool,
    pub gpus: Vec<GpuDeviceInfo>,
    /// NeuronInfo.NeuronDevices (manufacturer `aws`) when present, else
    /// InferenceAcceleratorInfo.Accelerators.
    pub accelerators: Vec<AcceleratorInfo>,
    /// NetworkInfo.EfaInfo.MaximumEfaInterfaces (0 without EFA).
    pub efa_max_interfaces: i64,
    /// Branch ENIs for security groups per pod (`vpc.amazonaws.com/pod-eni`) on trunking-capable
    /// types. DescribeInstanceTypes does not report it: Karpenter ships it in a generated table;
    /// the simulated account fills it from the same public table, the AWS adapter leaves 0.
    pub branch_interfaces: i64,
}

/// DescribeInstanceTypeOfferings request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeInstanceTypeOfferingsInput {
    /// `region`, `availability-zone` or `availability-zone-id`.
    pub location_type: String,
    pub filters: Vec<Filter>,
}

/// One instance type offered in one location.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceTypeOffering {
    pub instance_type: String,
    pub location_type: String,
    pub location: String,
}

/// DescribeSpotPriceHistory request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeSpotPriceHistoryInput {
    pub instance_types: Vec<String>,
    /// e.g. `Linux/UNIX`.
    pub product_descriptions: Vec<String>,
    pub availability_zone: Option<String>,
    pub start_time: Option<Timestamp>,
}

/// One spot price point.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpotPrice {
    pub instance_type: String,
    pub availability_zone: String,
    pub product_description: String,
    /// Decimal USD per hour, as AWS returns it (a string).
    pub spot_price: String,
    pub timestamp: Timestamp,
}

// ---------------------------------------------------------------- launch templates

/// An EBS block device mapping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockDeviceMapping {
    pub device_name: String,
    pub volume_size_gib: Option<i64>,
    pub volume_type: Option<String>,
    pub iops: Option<i64>,
    pub throughput: Option<i64>,
    pub encrypted: Option<bool>,
    pub kms_key_id: Option<String>,
    pub snapshot_id: Option<String>,
    pub delete_on_termination: Option<bool>,
}

/// Instance metadata service options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataOptions {
    pub http_endpoint: Option<String>,
    pub http_protocol_ipv6: Option<String>,
    pub http_put_response_hop_limit: Option<i64>,
    pub http_tokens: Option<String>,
}

/// RequestLaunchTemplateData.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchTemplateData {
    pub image_id: String,
    /// Plain text; the SDK adapter base64-encodes it as EC2 requires.
    pub user_data: String,
    pub iam_instance_profile_name: String,
    pub security_group_ids: Vec<String>,
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    pub metadata_options: Option<MetadataOptions>,
    pub monitoring_enabled: bool,
    pub associate_public_ip_address: Option<bool>,
    pub tag_specifications: Vec<TagSpecification>,
}

/// CreateLaunchTemplate request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateLaunchTemplateInput {
    pub launch_template_name: String,
    pub launch_template_data: LaunchTemplateData,
    pub tag_specifications: Vec<TagSpecification>,
}

/// A launch template (its latest version's data included).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchTemplate {
    pub launch_template_id: String,
    pub launch_template_name: String,
    pub create_time: Timestamp,
    pub tags: Vec<Tag>,
    pub data: LaunchTemplateData,
}

/// DescribeLaunchTemplates request. Naming a template that does not exist fails with
/// `InvalidLaunchTemplateName.NotFoundException`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeLaunchTemplatesInput {
    pub launch_template_names: Vec<String>,
    pub filters: Vec<Filter>,
}

// ---------------------------------------------------------------- fleet

/// One override of a fleet launch template config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetOverride {
    pub instance_type: String,
    pub subnet_id: String,
    pub availability_zone: String,
    pub image_id: Option<String>,
    /// Lower is preferred (used with `prioritized` strategies).
    pub priority: Option<f64>,
}

/// One launch template and its overrides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetLaunchTemplateConfig {
    pub launch_template_name: String,
    /// `$Latest`, `$Default` or a number.
    pub version: String,
    pub overrides: Vec<FleetOverride>,
}

/// CreateFleet request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateFleetInput {
    /// `instant`, `request` or `maintain`.
    pub type_: String,
    pub launch_template_configs: Vec<FleetLaunchTemplateConfig>,
    pub total_target_capacity: i64,
    /// `spot` or `on-demand`.
    pub default_target_capacity_type: String,
    /// e.g. `price-capacity-optimized`.
    pub spot_allocation_strategy: Option<String>,
    /// e.g. `lowest-price`.
    pub on_demand_allocation_strategy: Option<String>,
    pub tag_specifications: Vec<TagSpecification>,
    pub context: Option<String>,
}

/// The override a fleet instance or error came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetOverrideRef {
    pub instance_type: String,
    pub availability_zone: String,
    pub subnet_id: String,
}

/// Instances launched by one override.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateFleetInstance {
    pub instance_ids: Vec<String>,
    pub instance_type: String,
    /// `spot` or `on-demand`.
    pub lifecycle: String,
    pub launch_template_and_overrides: FleetOverrideRef,
}

/// An override that failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateFleetError {
    pub error_code: String,
    pub error_message: String,
    pub lifecycle: String,
    pub launch_template_and_overrides: FleetOverrideRef,
}

/// CreateFleet response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateFleetOutput {
    pub fleet_id: String,
    pub instances: Vec<CreateFleetInstance>,
    pub errors: Vec<CreateFleetError>,
}

// ---------------------------------------------------------------- instances

/// Instance state names.
pub mod instance_state {
    pub const PENDING: &str = "pending";
    pub const RUNNING: &str = "running";
    pub const SHUTTING_DOWN: &str = "shutting-down";
    pub const TERMINATED: &str = "terminated";
    pub const STOPPING: &str = "stopping";
    pub const STOPPED: &str = "stopped";
}

/// A security group attached to an instance.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct GroupIdentifier {
    pub group_id: String,
    pub group_name: String,
}

/// An EC2 instance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instance {
    pub instance_id: String,
    pub instance_type: String,
    pub image_id: String,
    pub availability_zone: String,
    pub subnet_id: String,
    pub vpc_id: String,
    pub private_ip_address: String,
    pub private_dns_name: String,
    /// One of [`instance_state`].
    pub state: String,
    pub security_groups: Vec<GroupIdentifier>,
    pub tags: Vec<Tag>,
    pub launch_time: Timestamp,
    /// `spot` for spot instances; absent for on-demand.
    pub instance_lifecycle: Option<String>,
    pub architecture: String,
    pub iam_instance_profile: Option<String>,
    /// EC2's `Platform`: `windows` for Windows instances, absent for Linux ones.
    pub platform: Option<String>,
}

impl Instance {
    /// The `kubernetes.io/os` value of a Node on this instance.
    pub fn os(&self) -> &'static str {
        if self.platform.as_deref() == Some("windows") {
            "windows"
        } else {
            "linux"
        }
    }
}

/// DescribeInstances request. Naming an unknown ID fails with `InvalidInstanceID.NotFound`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeInstancesInput {
    pub instance_ids: Vec<String>,
    pub filters: Vec<Filter>,
}

/// DescribeInstanceStatus request: the statuses of running instances matching every filter
/// (`instance-status.status`, `system-status.status`, `event.code`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeInstanceStatusInput {
    pub filters: Vec<Filter>,
}

/// One status check's detail (`reachability`): `passed`, `failed`, `insufficient-data` or
/// `initializing`, and since when it has been failing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusCheckDetail {
    pub name: String,
    pub status: String,
    pub impaired_since: Option<Timestamp>,
}

/// One status check of an instance: its summary (`ok`, `impaired`, `insufficient-data`,
/// `not-applicable`, `initializing`) and details.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusCheck {
    pub status: String,
    pub details: Vec<StatusCheckDetail>,
}

/// An event scheduled for an instance (`instance-reboot`, `system-reboot`,
/// `system-maintenance`, `instance-retirement`, `instance-stop`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceStatusEvent {
    pub code: String,
    pub description: String,
    pub not_before: Option<Timestamp>,
}

/// One instance's status checks and scheduled events, as DescribeInstanceStatus returns them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceStatus {
    pub instance_id: String,
    pub availability_zone: String,
    /// The instance's state (`running`, ...).
    pub state: String,
    pub instance_status: Option<StatusCheck>,
    pub system_status: Option<StatusCheck>,
    pub attached_ebs_status: Option<StatusCheck>,
    pub events: Vec<InstanceStatusEvent>,
}

/// One instance's state transition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceStateChange {
    pub instance_id: String,
    pub previous_state: String,
    pub current_state: String,
}

/// CreateTags request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateTagsInput {
    pub resources: Vec<String>,
    pub tags: Vec<Tag>,
}

/// The EC2 operations the provider needs.
#[async_trait]
pub trait Ec2Api: Send + Sync {
    async fn describe_images(&self, input: DescribeImagesInput) -> Result<Vec<Image>, AwsError>;
    async fn describe_subnets(&self, input: DescribeSubnetsInput) -> Result<Vec<Subnet>, AwsError>;
    async fn describe_security_groups(
        &self,
        input: DescribeSecurityGroupsInput,
    ) -> Result<Vec<SecurityGroup>, AwsError>;
    async fn describe_instance_types(
        &self,
        input: DescribeInstanceTypesInput,
    ) -> Result<Vec<InstanceTypeDescription>, AwsError>;
    async fn describe_instance_type_offerings(
        &self,
        input: DescribeInstanceTypeOfferingsInput,
    ) -> Result<Vec<InstanceTypeOffering>, AwsError>;
    async fn describe_spot_price_history(
        &self,
        input: DescribeSpotPriceHistoryInput,
    ) -> Result<Vec<SpotPrice>, AwsError>;
    async fn create_launch_template(
        &self,
        input: CreateLaunchTemplateInput,
    ) -> Result<LaunchTemplate, AwsError>;
    async fn describe_launch_templates(
        &self,
        input: DescribeLaunchTemplatesInput,
    ) -> Result<Vec<LaunchTemplate>, AwsError>;
    async fn delete_launch_template(&self, launch_template_name: &str) -> Result<(), AwsError>;
    async fn create_fleet(&self, input: CreateFleetInput) -> Result<CreateFleetOutput, AwsError>;
    async fn describe_instances(
        &self,
        input: DescribeInstancesInput,
    ) -> Result<Vec<Instance>, AwsError>;
    async fn terminate_instances(
        &self,
        instance_ids: Vec<String>,
    ) -> Result<Vec<InstanceStateChange>, AwsError>;
    async fn create_tags(&self, input: CreateTagsInput) -> Result<(), AwsError>;
    /// Every page of DescribeInstanceStatus.
    async fn describe_instance_status(
        &self,
        input: DescribeInstanceStatusInput,
    ) -> Result<Vec<InstanceStatus>, AwsError>;
}
