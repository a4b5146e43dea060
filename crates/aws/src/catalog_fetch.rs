//! Fetches the raw EC2 data the instance-type catalog is built from: types, zonal offerings,
//! latest spot prices and on-demand prices.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::instance_types::CatalogData;
use super::price_estimate::estimate_on_demand_prices;
use crate::ports::{
    AwsError, DescribeInstanceTypeOfferingsInput, DescribeInstanceTypesInput,
    DescribeSpotPriceHistoryInput, Ec2Api, PricingApi,
};

/// Describes everything the catalog needs for `region`.
pub async fn fetch_catalog_data(
    ec2: &dyn Ec2Api,
    pricing: &dyn PricingApi,
    region: &str,
) -> Result<CatalogData, AwsError> {
    let descriptions = ec2
        .describe_instance_types(DescribeInstanceTypesInput::default())
        .await?;
    let offerings = ec2
        .describe_instance_type_offerings(DescribeInstanceTypeOfferingsInput {
            location_type: "availability-zone".to_string(),
            filters: Vec::new(),
        })
        .await?;
    let mut offered_zones: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for o in offerings {
        offered_zones
            .entry(o.instance_type)
            .or_default()
            .insert(o.location);
    }
    let spot = ec2
        .describe_spot_price_history(DescribeSpotPriceHistoryInput {
            product_descriptions: vec!["Linux/UNIX".to_string()],
            ..Default::default()
        })
        .await?;
    let mut latest: BTreeMap<(String, String), (Timestamp, f64)> = BTreeMap::new();
    for p in spot {
        let Ok(price) = p.spot_price.parse::<f64>() else {
            continue;
        };
        let key = (p.instance_type.clone(), p.availability_zone.clone());
        if latest.get(&key).is_none_or(|(t, _)| p.timestamp >= *t) {
            latest.insert(key, (p.timestamp, price));
        }
    }
    let spot_prices = latest.into_iter().map(|(k, (_, p))| (k, p)).collect();
    let listed = match pricing.on_demand_prices(region).await {
        Ok(prices) if !prices.is_empty() => prices,
        Ok(_) => {
            tracing::warn!(
                region,
                "the Pricing API listed no on-demand prices for the region; using prices estimated from vCPU and memory"
            );
            estimate_on_demand_prices(&descriptions)
        }
        Err(e) => {
            tracing::warn!(
                region,
                error = %e,
                "the Pricing API is unavailable; using on-demand prices estimated from vCPU and memory"
            );
            estimate_on_demand_prices(&descriptions)
        }
    };
    let on_demand_prices = listed
        .into_iter()
        .map(|p| (p.instance_type, p.price_per_hour))
        .collect();
    Ok(CatalogData {
        descriptions,
        offered_zones,
        spot_prices,
        on_demand_prices,
    })
}
