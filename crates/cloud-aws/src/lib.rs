//! The aws-sdk-rust implementation of driftwood's cloud ports: EC2, SSM, IAM, SQS and the
//! Pricing API through the real SDK, with the standard credential chain (IRSA and EKS Pod Identity
//! included), endpoint override, retries with backoff on throttling and pagination everywhere.
//!
//! The provider logic lives in `driftwood-aws` and knows nothing of the SDK; this crate only
//! translates requests, responses and errors. Only the `driftwood` binary depends on it (behind
//! its default `aws` feature), so a development build of the other crates never compiles the
//! SDK.

mod config;
mod convert;
mod ec2;
mod error;
mod iam;
pub mod metrics;
mod pricing;
#[cfg(test)]
mod retry_tests;
mod sqs;
mod ssm;

pub use config::{SdkOptions, SdkSetupError, load_sdk_config, pricing_region, sdk_ports};
pub use ec2::SdkEc2;
pub use error::{
    CODE_INVALID_REQUEST, CODE_INVALID_RESPONSE, CODE_NETWORK, CODE_TIMEOUT, aws_error,
};
pub use iam::SdkIam;
pub use metrics::SdkMetrics;
pub use pricing::{SdkPricing, parse_on_demand_price};
pub use sqs::SdkSqs;
pub use ssm::SdkSsm;

/// The SDK crates, for callers (tests, tools) that need operations the ports do not have.
pub use {aws_config, aws_sdk_ec2, aws_sdk_iam, aws_sdk_sqs, aws_sdk_ssm};
