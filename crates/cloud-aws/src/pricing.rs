//! The pricing port over the AWS Pricing API (GetProducts for AmazonEC2, Linux, shared
//! tenancy, on-demand, no pre-installed software), paginated.

use async_trait::async_trait;
use aws_sdk_pricing::Client;
use aws_sdk_pricing::types::{Filter, FilterType};
use driftwood_aws::ports::{AwsError, OnDemandPrice, PricingApi};
use serde_json::Value;

use crate::error::aws_error;

/// The pricing port over the SDK client (which must point at a Pricing API region).
#[derive(Debug, Clone)]
pub struct SdkPricing {
    client: Client,
}

impl SdkPricing {
    /// The port over `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// The instance type and hourly USD price of one GetProducts price-list document, when it
/// is an on-demand price of an instance.
pub fn parse_on_demand_price(document: &str) -> Option<OnDemandPrice> {
    let doc: Value = serde_json::from_str(document).ok()?;
    let instance_type = doc
        .pointer("/product/attributes/instanceType")?
        .as_str()?
        .to_string();
    let on_demand = doc.pointer("/terms/OnDemand")?.as_object()?;
    let price_per_hour = on_demand
        .values()
        .filter_map(|term| term.get("priceDimensions")?.as_object())
        .flat_map(|dims| dims.values())
        .filter(|dim| dim.get("unit").and_then(Value::as_str) == Some("Hrs"))
        .filter_map(|dim| {
            dim.pointer("/pricePerUnit/USD")?
                .as_str()?
                .parse::<f64>()
                .ok()
        })
        .find(|p| *p > 0.0)?;
    Some(OnDemandPrice {
        instance_type,
        price_per_hour,
    })
}

fn term(field: &str, value: &str) -> Result<Filter, AwsError> {
    Filter::builder()
        .r#type(FilterType::TermMatch)
        .field(field)
        .value(value)
        .build()
        .map_err(|e| AwsError::new("InvalidRequest", format!("GetProducts filter: {e}")))
}

#[async_trait]
impl PricingApi for SdkPricing {
    async fn on_demand_prices(&self, region: &str) -> Result<Vec<OnDemandPrice>, AwsError> {
        let filters = vec![
            term("regionCode", region)?,
            term("operatingSystem", "Linux")?,
            term("tenancy", "Shared")?,
            term("preInstalledSw", "NA")?,
            term("capacitystatus", "Used")?,
            term("licenseModel", "No License required")?,
        ];
        let pages = self
            .client
            .get_products()
            .service_code("AmazonEC2")
            .set_filters(Some(filters))
            .format_version("aws_v1")
            .into_paginator()
            .send()
            .try_collect()
            .await
            .map_err(|e| aws_error("GetProducts", e))?;
        let mut prices: std::collections::BTreeMap<String, f64> = Default::default();
        for page in &pages {
            for document in page.price_list() {
                if let Some(p) = parse_on_demand_price(document) {
                    prices.entry(p.instance_type).or_insert(p.price_per_hour);
                }
            }
        }
        Ok(prices
            .into_iter()
            .map(|(instance_type, price_per_hour)| OnDemandPrice {
                instance_type,
                price_per_hour,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_hourly_on_demand_price_of_a_price_list_document() {
        let doc = r#"{"product":{"attributes":{"instanceType":"m5.large","operatingSystem":"Linux"}},
          "terms":{"OnDemand":{"X.JRTCKXETXF":{"priceDimensions":{"X.JRTCKXETXF.6YS6EN2CT7":
            {"unit":"Hrs","pricePerUnit":{"USD":"0.0960000000"}}}}}}}"#;
        let p = parse_on_demand_price(doc).unwrap();
        assert_eq!(p.instance_type, "m5.large");
        assert!((p.price_per_hour - 0.096).abs() < 1e-12);
    }

    #[test]
    fn documents_without_an_hourly_price_are_skipped() {
        assert!(parse_on_demand_price("not json").is_none());
        assert!(parse_on_demand_price(r#"{"product":{"attributes":{}}}"#).is_none());
        let zero = r#"{"product":{"attributes":{"instanceType":"m5.large"}},
          "terms":{"OnDemand":{"a":{"priceDimensions":{"b":{"unit":"Hrs","pricePerUnit":{"USD":"0.0000000000"}}}}}}}"#;
        assert!(parse_on_demand_price(zero).is_none());
    }
}
