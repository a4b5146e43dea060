//! The AWS provider: AMI, subnet and security-group resolution, instance profile, the
//! instance-type catalog, launch through launch templates and CreateFleet, and provider drift.

pub mod ami;
pub mod ami_family;
pub mod catalog_fetch;
pub mod claim_view;
pub mod class_view;
pub mod cleanup;
pub mod drift;
#[cfg(test)]
mod drift_conformance;
pub mod filters;
pub mod fnv;
pub mod instance_profile;
pub mod instance_types;
pub mod launch_plan;
pub mod launcher;
pub mod network;
pub mod node_classes;
pub mod overhead;
pub mod price_estimate;
pub mod provider;
pub mod quantity;
pub mod requirements;
pub mod selector_text;
pub mod settings;
pub mod status;
#[cfg(feature = "scheduling")]
pub mod to_scheduling;
pub mod unavailable;
pub mod userdata;
pub mod wildcard;

pub use node_classes::{InMemoryNodeClasses, NodeClassSource};
pub use provider::{AwsPorts, AwsProvider};
pub use settings::AwsSettings;
