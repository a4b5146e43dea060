//! Narrow async ports for the EC2, SSM, IAM, pricing and SQS operations the AWS provider needs.
//!
//! The request/response types mirror the AWS API shapes closely enough that an aws-sdk-rust
//! adapter maps them 1:1 (filters as name + values; pagination handled inside the adapter;
//! errors carry the AWS error code string).

pub mod ec2;
pub mod error;
pub mod iam;
pub mod pricing;
pub mod sqs;
pub mod ssm;

pub use ec2::*;
pub use error::{AwsError, codes, is_insufficient_capacity_code, is_not_found_code};
pub use iam::*;
pub use pricing::*;
pub use sqs::*;
pub use ssm::*;
