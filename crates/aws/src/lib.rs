//! driftwood-aws: the AWS provider — AMI, subnet and security-group resolution, instance
//! profile, the instance-type catalog, launch through launch templates and CreateFleet, and
//! provider drift — written against narrow EC2/SSM/IAM/pricing ports (the aws-sdk-rust adapter
//! is driftwood-cloud-aws; the simulated account is driftwood-sim-aws). It implements the
//! neutral `driftwood_cloud::CloudProvider`.

pub mod ami;
pub mod ami_family;
pub mod batcher;
pub mod catalog_cache;
pub mod catalog_fetch;
pub mod claim_view;
pub mod class_view;
pub mod cleanup;
pub mod drift;
#[cfg(test)]
mod drift_conformance;
pub mod failure_counts;
pub mod filters;
pub mod fnv;
pub mod instance_profile;
pub mod instance_types;
pub mod interruption;
pub mod launch_pacer;
pub mod launch_plan;
pub mod launcher;
pub mod network;
pub mod node_classes;
pub mod overhead;
pub mod ports;
pub mod price_book;
pub mod price_estimate;
pub mod provider;
pub mod quantity;
pub mod repair;
pub mod selector_text;
pub mod settings;
pub mod status;
pub mod unavailable;
pub mod userdata;
pub mod wildcard;

pub use drift::ProviderDrift;
pub use node_classes::{InMemoryNodeClasses, NodeClassSource};
pub use provider::{AwsPorts, AwsProvider};
pub use settings::AwsSettings;
pub use unavailable::UnavailableOfferings;
