//! Fetches the raw EC2 data the instance-type catalog is built from: types, zonal offerings
//! and latest spot prices. On-demand prices come from the provider's `PriceBook`, which never
//! makes a launch wait for the Pricing API.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::instance_types::CatalogData;
use crate::ports::{
    AwsError, DescribeInstanceTypeOfferingsInput, DescribeInstanceTypesInput,
    DescribeSpotPriceHistoryInput, Ec2Api,
};

/// Describes everything the catalog needs from EC2; `on_demand` prices the described types.
pub async fn fetch_catalog_data(
    ec2: &dyn Ec2Api,
    on_demand: impl FnOnce(&[crate::ports::InstanceTypeDescription]) -> BTreeMap<String, f64>,
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
    let on_demand_prices = on_demand(&descriptions);
    Ok(CatalogData {
        descriptions,
        offered_zones,
        spot_prices,
        on_demand_prices,
    })
}
