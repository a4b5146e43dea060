//! The EC2NodeClass launch options beyond images, subnets and security groups: network
//! interfaces, placement group, CPU options and connection tracking (Karpenter v1.14's API).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `interfaceType` of a network interface: a regular (ENA) interface.
pub const INTERFACE_TYPE_INTERFACE: &str = "interface";
/// `interfaceType` of a network interface: an EFA device without IP addresses.
pub const INTERFACE_TYPE_EFA_ONLY: &str = "efa-only";
/// Every `interfaceType` value.
pub const INTERFACE_TYPES: &[&str] = &[INTERFACE_TYPE_INTERFACE, INTERFACE_TYPE_EFA_ONLY];
/// Every `cpuOptions.nestedVirtualization` value.
pub const NESTED_VIRTUALIZATION_VALUES: &[&str] = &["enabled", "disabled"];
/// At most this many network interfaces.
pub const MAX_NETWORK_INTERFACES: usize = 150;
/// Bounds (seconds) of the connection tracking timeouts.
pub const TCP_ESTABLISHED_TIMEOUT_RANGE: (i64, i64) = (60, 432_000);
pub const UDP_STREAM_TIMEOUT_RANGE: (i64, i64) = (60, 180);
pub const UDP_TIMEOUT_RANGE: (i64, i64) = (30, 60);

/// One network interface of the launched instance, by network card and device index.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    /// The network card the interface is attached to (0 is the primary card).
    pub network_card_index: i32,
    /// The device index on that card (0 is the primary interface).
    pub device_index: i32,
    /// `interface` (ENA) or `efa-only`.
    pub interface_type: String,
}

/// Selects the placement group instances launch into, by name or by id (exactly one).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementGroupSelector {
    /// The placement group's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The placement group's id (pg-…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// CPU options of the launched instance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuOptions {
    /// Whether nested virtualization is enabled (`enabled` or `disabled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_virtualization: Option<String>,
}

/// Connection tracking timeouts (seconds) of the primary network interface.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionTracking {
    /// Idle timeout of established TCP flows (60-432000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_established_timeout: Option<i32>,
    /// Idle timeout of UDP flows seen in both directions more than once (60-180).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_stream_timeout: Option<i32>,
    /// Idle timeout of other UDP flows (30-60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_timeout: Option<i32>,
}
