//! The karpenter.k8s.aws/v1 EC2NodeClass: how nodes are launched on EC2 (AMIs, subnets, security
//! groups, role, user data, tags, kubelet, block devices, metadata options).

use crate::condition::{Condition, Conditions};
pub use crate::ec2nodeclass_options::{
    ConnectionTracking, CpuOptions, NetworkInterface, PlacementGroupSelector,
};
use crate::requirement::NodeSelectorRequirementWithMinValues;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const AMI_FAMILY_AL2: &str = "AL2";
pub const AMI_FAMILY_AL2023: &str = "AL2023";
pub const AMI_FAMILY_BOTTLEROCKET: &str = "Bottlerocket";
pub const AMI_FAMILY_CUSTOM: &str = "Custom";
pub const AMI_FAMILY_WINDOWS2019: &str = "Windows2019";
pub const AMI_FAMILY_WINDOWS2022: &str = "Windows2022";
pub const AMI_FAMILY_WINDOWS2025: &str = "Windows2025";
/// Every amiFamily value.
pub const AMI_FAMILIES: &[&str] = &[
    AMI_FAMILY_AL2,
    AMI_FAMILY_AL2023,
    AMI_FAMILY_BOTTLEROCKET,
    AMI_FAMILY_CUSTOM,
    AMI_FAMILY_WINDOWS2019,
    AMI_FAMILY_WINDOWS2022,
    AMI_FAMILY_WINDOWS2025,
];
/// Alias families (the part before `@`) and the amiFamily each implies.
pub const ALIAS_FAMILIES: &[(&str, &str)] = &[
    ("al2", AMI_FAMILY_AL2),
    ("al2023", AMI_FAMILY_AL2023),
    ("bottlerocket", AMI_FAMILY_BOTTLEROCKET),
    ("windows2019", AMI_FAMILY_WINDOWS2019),
    ("windows2022", AMI_FAMILY_WINDOWS2022),
    ("windows2025", AMI_FAMILY_WINDOWS2025),
];

/// How nodes are launched on EC2.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "karpenter.k8s.aws",
    version = "v1",
    kind = "EC2NodeClass",
    plural = "ec2nodeclasses",
    singular = "ec2nodeclass",
    derive = "PartialEq",
    status = "EC2NodeClassStatus",
    shortname = "ec2nc",
    shortname = "ec2ncs",
    category = "karpenter",
    doc = "EC2NodeClass is the Schema for the EC2NodeClass API",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Nodes","type":"integer","jsonPath":".status.rollout.nodes"}"#,
    printcolumn = r#"{"name":"Up-To-Date","type":"integer","jsonPath":".status.rollout.upToDate"}"#,
    printcolumn = r#"{"name":"Drifted","type":"integer","jsonPath":".status.rollout.drifted"}"#,
    printcolumn = r#"{"name":"Role","type":"string","priority":1,"jsonPath":".spec.role"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassSpec {
    /// Kubelet settings rendered into user data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    /// Which subnets nodes may launch into.
    #[serde(default)]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Which security groups nodes get.
    #[serde(default)]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// Which capacity reservations nodes may use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservation_selector_terms: Vec<CapacityReservationSelectorTerm>,
    /// Whether instances get a public IP address.
    #[serde(
        default,
        rename = "associatePublicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    /// Which AMIs nodes boot from.
    #[serde(default)]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// The AMI family: the user-data format and default block devices. Implied by an alias term;
    /// inferred from the resolved images when absent (driftwood accepts its absence, see
    /// validation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    /// User data merged with the family's bootstrap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// IAM role for the nodes; an instance profile is made for it. Exclusive with instanceProfile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// An existing instance profile. Exclusive with role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// Tags applied to instances, volumes, launch templates.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Block device mappings of the instances.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    /// RAID0 to combine instance stores into one volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<String>,
    /// Whether detailed CloudWatch monitoring is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    /// Instance metadata service options.
    #[serde(
        default = "default_metadata_options_some",
        skip_serializing_if = "Option::is_none"
    )]
    pub metadata_options: Option<MetadataOptions>,
    /// Reserved-capacity context (passed to CreateFleet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The placement group instances launch into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group_selector: Option<PlacementGroupSelector>,
    /// How many IPv4 prefixes (or IPv6 prefixes on an IPv6 cluster) the primary interface gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_prefix_count: Option<i32>,
    /// The network interfaces of the instances (EFA, multiple network cards).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_interfaces: Vec<NetworkInterface>,
    /// Connection tracking timeouts of the primary interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
    /// CPU options (nested virtualization).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_options: Option<CpuOptions>,
}

fn default_metadata_options_some() -> Option<MetadataOptions> {
    Some(MetadataOptions::default())
}

/// Selects subnets by tags or id.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct SubnetSelectorTerm {
    /// Tags to match (`*` as a value matches any value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// A subnet id; exclusive with the other fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// Selects security groups by tags, id or name.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupSelectorTerm {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A security group name (matched as group-name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Selects capacity reservations by tags, id or owner.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationSelectorTerm {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    /// `open` or `targeted` reservations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<String>,
}

/// Selects AMIs: by alias (family@version), id, name (+owner), tags, or SSM parameter.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct AmiSelectorTerm {
    /// `family@version`, e.g. al2023@latest or al2@v20240807; the only term when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// An AMI id; exclusive with the other fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// An image name, EC2 wildcards allowed ('*-1.27-*').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Owner account id or alias (self, amazon); default self and amazon for name terms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// An SSM parameter whose value is an AMI id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

impl AmiSelectorTerm {
    /// The (family, version) of an alias term, e.g. ("al2023", "latest").
    pub fn alias_parts(&self) -> Option<(&str, &str)> {
        self.alias.as_deref().and_then(|a| a.split_once('@'))
    }
}

/// Kubelet settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    #[serde(default, rename = "clusterDNS", skip_serializing_if = "Vec::is_empty")]
    pub cluster_dns: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_per_core: Option<i32>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub system_reserved: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kube_reserved: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_hard: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    #[serde(
        default,
        rename = "imageGCHighThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_high_threshold_percent: Option<i32>,
    #[serde(
        default,
        rename = "imageGCLowThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_low_threshold_percent: Option<i32>,
    #[serde(
        default,
        rename = "cpuCFSQuota",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota: Option<bool>,
}

/// A block device of the instance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    /// Whether this is the root volume (at most one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root_volume: bool,
}

/// An EBS volume.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_initialization_rate: Option<i32>,
    /// Volume size as a quantity (e.g. 20Gi).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<String>,
    /// standard, io1, io2, gp2, sc1, st1 or gp3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
}

/// Instance metadata service options, with Karpenter's defaults.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    #[serde(default = "default_enabled")]
    pub http_endpoint: String,
    #[serde(default = "default_disabled", rename = "httpProtocolIPv6")]
    pub http_protocol_ipv6: String,
    #[serde(default = "default_hop_limit")]
    pub http_put_response_hop_limit: i64,
    #[serde(default = "default_required")]
    pub http_tokens: String,
}

impl Default for MetadataOptions {
    fn default() -> Self {
        Self {
            http_endpoint: default_enabled(),
            http_protocol_ipv6: default_disabled(),
            http_put_response_hop_limit: default_hop_limit(),
            http_tokens: default_required(),
        }
    }
}

fn default_enabled() -> String {
    "enabled".to_string()
}
fn default_disabled() -> String {
    "disabled".to_string()
}
fn default_hop_limit() -> i64 {
    1
}
fn default_required() -> String {
    "required".to_string()
}

/// How an EC2NodeClass's nodes stand against it now (driftwood's own; Karpenter's CRD has no
/// such field and its API server would prune it).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassRolloutStatus {
    /// NodeClaims of the class (not being deleted).
    #[serde(default)]
    pub nodes: i64,
    /// Of them, launched from the class as it is now (its hash) and running one of the images
    /// it resolves to now.
    #[serde(default)]
    pub up_to_date: i64,
    /// Of them, marked Drifted.
    #[serde(default)]
    pub drifted: i64,
}

/// Observed state: what the selectors resolve to now.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<SubnetStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<SecurityGroupStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<CapacityReservationStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<AmiStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// AMIsReady, SubnetsReady, SecurityGroupsReady, InstanceProfileReady, Ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// driftwood's own: how the class's nodes stand against it now (docs/rollout-status.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<ClassRolloutStatus>,
}

#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct SubnetStatus {
    pub id: String,
    pub zone: String,
    #[serde(default, rename = "zoneID", skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
}

#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupStatus {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A capacity reservation the class's terms resolve to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationStatus {
    pub id: String,
    pub availability_zone: String,
    pub instance_type: String,
    #[serde(rename = "ownerID")]
    pub owner_id: String,
    /// `open` or `targeted`.
    pub instance_match_criteria: String,
    /// When the reservation ends, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    /// Whether the reservation's capacity may be reclaimed (interruptible reservations).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interruptible: bool,
    /// `default` or `capacity-block`.
    #[serde(default = "default_reservation_type")]
    pub reservation_type: String,
    /// `active` or `expiring`.
    #[serde(default = "default_reservation_state")]
    pub state: String,
}

fn default_reservation_type() -> String {
    "default".to_string()
}

fn default_reservation_state() -> String {
    "active".to_string()
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiStatus {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Requirements an instance type must meet to use this AMI (e.g. kubernetes.io/arch).
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
}

impl EC2NodeClassSpec {
    /// The family an alias term implies, or the explicit amiFamily.
    pub fn effective_ami_family(&self) -> Option<String> {
        if let Some(family) = &self.ami_family {
            return Some(family.clone());
        }
        self.ami_selector_terms
            .iter()
            .find_map(AmiSelectorTerm::alias_parts)
            .and_then(|(alias, _)| {
                ALIAS_FAMILIES
                    .iter()
                    .find(|(a, _)| a.eq_ignore_ascii_case(alias))
            })
            .map(|(_, family)| family.to_string())
    }
}

impl Conditions for EC2NodeClass {
    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or(&[])
    }
}
