//! The CloudProvider trait and the AWS provider logic (AMI/subnet/security-group resolution,
//! instance-type catalog, launch, provider drift), written against narrow EC2/SSM/IAM ports.

pub mod aws;
pub mod clock;
pub mod ports;
pub mod provider;

pub use aws::drift::ProviderDrift;
pub use aws::instance_types::{InstanceTypeInfo, Offering};
pub use aws::overhead::{Overhead, Resources};
pub use aws::unavailable::{OfferingKey, UnavailableOfferings};
pub use aws::{AwsPorts, AwsProvider, AwsSettings, InMemoryNodeClasses, NodeClassSource};
pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use provider::{CloudError, CloudProvider};
