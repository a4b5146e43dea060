//! Loads the SDK configuration (region, credentials, endpoint, retries, timeouts, TLS) and
//! builds the four port implementations from it.

use std::sync::Arc;
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
use driftwood_aws::AwsPorts;

use crate::metrics::{MetricsInterceptor, SdkMetrics};
use crate::{SdkEc2, SdkIam, SdkPricing, SdkSqs, SdkSsm};

/// How the SDK is set up. Everything left `None` comes from the standard chain: `AWS_REGION`
/// / profile / IMDS for the region; environment, web identity (IRSA), the EKS Pod Identity
/// agent, profiles, SSO and IMDS for credentials; `AWS_ENDPOINT_URL` and
/// `AWS_ENDPOINT_URL_<SERVICE>` for endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdkOptions {
    /// The region, overriding the chain.
    pub region: Option<String>,
    /// One endpoint for every service (e.g. moto's server), overriding the chain.
    pub endpoint_url: Option<String>,
    /// Attempts per call, the first included. Throttling (`RequestLimitExceeded`,
    /// `Throttling`), 5xx and transient network errors are retried with exponential backoff
    /// and jitter.
    pub max_attempts: u32,
    /// The first retry's backoff.
    pub initial_backoff: Duration,
    /// The longest backoff between attempts.
    pub max_backoff: Duration,
    /// How long one attempt may take.
    pub attempt_timeout: Duration,
    /// Fixed access key id and secret instead of the credential chain (emulators, tests).
    pub static_credentials: Option<(String, String)>,
    /// The Pricing API's endpoint, overriding `endpoint_url` for it (an emulator without the
    /// Pricing API; `AWS_ENDPOINT_URL_PRICING` does the same from the environment).
    pub pricing_endpoint_url: Option<String>,
}

impl Default for SdkOptions {
    fn default() -> Self {
        Self {
            region: None,
            endpoint_url: None,
            max_attempts: 8,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            attempt_timeout: Duration::from_secs(30),
            static_credentials: None,
            pricing_endpoint_url: None,
        }
    }
}

/// Why the SDK could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SdkSetupError {
    /// No region from the options nor the standard chain.
    #[error(
        "no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION, a profile's region, or run where IMDS answers)"
    )]
    NoRegion,
    /// A zero attempt count.
    #[error("AWS max attempts must be at least 1, got 0")]
    ZeroAttempts,
}

/// Loads the SDK configuration for `options`.
pub async fn load_sdk_config(options: &SdkOptions) -> Result<SdkConfig, SdkSetupError> {
    if options.max_attempts == 0 {
        return Err(SdkSetupError::ZeroAttempts);
    }
    let http_client = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let retry = RetryConfig::standard()
        .with_max_attempts(options.max_attempts)
        .with_initial_backoff(options.initial_backoff)
        .with_max_backoff(options.max_backoff);
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(10))
        .operation_attempt_timeout(options.attempt_timeout)
        .build();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(http_client)
        .retry_config(retry)
        .timeout_config(timeouts);
    if let Some(region) = &options.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let Some((id, secret)) = &options.static_credentials {
        loader = loader.credentials_provider(aws_sdk_ec2::config::Credentials::new(
            id.clone(),
            secret.clone(),
            None,
            None,
            "driftwood-static",
        ));
    }
    if let Some(url) = &options.endpoint_url {
        loader = loader.endpoint_url(url.clone());
    }
    let config = loader.load().await;
    if config.region().is_none() {
        return Err(SdkSetupError::NoRegion);
    }
    Ok(config)
}

/// The region whose Pricing API endpoint serves `region` (the API lives in three regions).
pub fn pricing_region(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "cn-northwest-1"
    } else if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("eu-") || region.starts_with("me-") || region.starts_with("af-") {
        "eu-central-1"
    } else {
        "us-east-1"
    }
}

/// The EC2, SSM, IAM, SQS and Pricing ports over the SDK (`pricing_endpoint_url`: see
/// [`SdkOptions::pricing_endpoint_url`]), every call counted and timed in `metrics`.
pub fn sdk_ports(
    config: &SdkConfig,
    pricing_endpoint_url: Option<&str>,
    metrics: &SdkMetrics,
) -> AwsPorts {
    let region = config.region().map(ToString::to_string).unwrap_or_default();
    let interceptor = MetricsInterceptor::new(metrics.clone());
    let mut pricing_config = aws_sdk_pricing::config::Builder::from(config)
        .region(Region::new(pricing_region(&region)))
        .interceptor(interceptor.clone());
    if let Some(url) = pricing_endpoint_url {
        pricing_config = pricing_config.endpoint_url(url);
    }
    let pricing_config = pricing_config.build();
    AwsPorts {
        ec2: Arc::new(SdkEc2::new(aws_sdk_ec2::Client::from_conf(
            aws_sdk_ec2::config::Builder::from(config)
                .interceptor(interceptor.clone())
                .build(),
        ))),
        ssm: Arc::new(SdkSsm::new(aws_sdk_ssm::Client::from_conf(
            aws_sdk_ssm::config::Builder::from(config)
                .interceptor(interceptor.clone())
                .build(),
        ))),
        iam: Arc::new(SdkIam::new(aws_sdk_iam::Client::from_conf(
            aws_sdk_iam::config::Builder::from(config)
                .interceptor(interceptor.clone())
                .build(),
        ))),
        sqs: Arc::new(SdkSqs::new(aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::config::Builder::from(config)
                .interceptor(interceptor)
                .build(),
        ))),
        pricing: Arc::new(SdkPricing::new(aws_sdk_pricing::Client::from_conf(
            pricing_config,
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pricing_endpoint_region_per_partition_and_continent() {
        assert_eq!(pricing_region("us-west-2"), "us-east-1");
        assert_eq!(pricing_region("ca-central-1"), "us-east-1");
        assert_eq!(pricing_region("eu-west-1"), "eu-central-1");
        assert_eq!(pricing_region("me-south-1"), "eu-central-1");
        assert_eq!(pricing_region("ap-northeast-1"), "ap-south-1");
        assert_eq!(pricing_region("cn-north-1"), "cn-northwest-1");
    }

    #[tokio::test]
    async fn zero_attempts_is_refused() {
        let options = SdkOptions {
            max_attempts: 0,
            ..SdkOptions::default()
        };
        assert_eq!(
            load_sdk_config(&options).await.err(),
            Some(SdkSetupError::ZeroAttempts)
        );
    }
}
