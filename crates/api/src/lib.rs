//! Karpenter v1 resource types (NodePool, NodeClaim, EC2NodeClass), well-known keys, defaults,
//! validation, template hashing and CRD generation. Pure: no client, no runtime, no I/O.

pub mod condition;
pub mod crd;
pub mod cron;
pub mod duration;
pub mod ec2nodeclass;
pub mod ec2nodeclass_options;
pub mod hash;
pub mod lookup;
pub mod manifest;
pub mod nodeclaim;
pub mod nodepool;
pub mod repair;
pub mod requirement;
pub mod rollout_policy;
pub mod validation;
pub mod wellknown;

pub use condition::{Condition, Conditions};
pub use ec2nodeclass::{EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus, NodeClassReference};
pub use nodepool::{Budget, NodePool, NodePoolSpec, NodePoolStatus, RolloutStatus};
pub use requirement::NodeSelectorRequirementWithMinValues;
