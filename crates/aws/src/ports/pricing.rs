//! Pricing port: on-demand prices per instance type (the AWS Pricing API's GetProducts, reduced
//! to what the provider needs). Spot prices come from EC2 DescribeSpotPriceHistory.

use async_trait::async_trait;

use super::AwsError;

/// The hourly on-demand price of one instance type in a region (USD).
#[derive(Debug, Clone, PartialEq)]
pub struct OnDemandPrice {
    pub instance_type: String,
    pub price_per_hour: f64,
}

/// On-demand pricing lookup.
#[async_trait]
pub trait PricingApi: Send + Sync {
    /// Linux on-demand prices for every instance type offered in `region`.
    async fn on_demand_prices(&self, region: &str) -> Result<Vec<OnDemandPrice>, AwsError>;
}
