//! The Pricing API over awsJson1_1: GetProducts for `AmazonEC2`, from the simulated on-demand
//! prices (the `PricingApi` port), as `aws_v1` price-list documents (one JSON text per
//! product: attributes and an hourly `OnDemand` term), filtered by the request's terms and
//! paginated (`MaxResults`, at most and by default 100; `NextToken`).

use std::collections::BTreeMap;

use driftwood_aws::ports::{OnDemandPrice, PricingApi};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::{Failure, WireError};
use super::json::body;
use super::paging::page;
use crate::ids::hex_id;
use crate::state::SimAws;

/// GetProducts' largest (and default) page.
const PAGE_SIZE: usize = 100;
/// The on-demand offer term and its hourly rate code, as in AWS's price list.
const ON_DEMAND_TERM: &str = "JRTCKXETXF";
const HOURLY_RATE: &str = "6YS6EN2CT7";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GetProductsRequest {
    service_code: Option<String>,
    #[serde(default)]
    filters: Vec<Filter>,
    format_version: Option<String>,
    next_token: Option<String>,
    max_results: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Filter {
    #[serde(rename = "Type")]
    kind: Option<String>,
    field: String,
    value: String,
}

impl Filter {
    /// Whether a product whose attribute is `have` (absent: `None`) passes this filter.
    fn passes(&self, have: Option<&str>) -> Result<bool, WireError> {
        let have = have.map(str::to_ascii_lowercase);
        let want = self.value.to_ascii_lowercase();
        let any_of = || {
            want.split(',')
                .map(str::trim)
                .any(|w| have.as_deref() == Some(w))
        };
        Ok(match self.kind.as_deref().unwrap_or("TERM_MATCH") {
            "TERM_MATCH" | "EQUALS" => have.as_deref() == Some(want.as_str()),
            "CONTAINS" => have.is_some_and(|h| h.contains(&want)),
            "ANY_OF" => any_of(),
            "NONE_OF" => !any_of(),
            other => {
                return Err(WireError::invalid(
                    "Filters.Type",
                    other,
                    "not TERM_MATCH, EQUALS, CONTAINS, ANY_OF or NONE_OF",
                ));
            }
        })
    }
}

/// Answers Pricing `operation`.
pub(crate) async fn handle(sim: &SimAws, operation: &str, raw: &[u8]) -> Result<Value, Failure> {
    if operation != "GetProducts" {
        return Err(WireError::UnknownOperation(format!("AWSPriceListService.{operation}")).into());
    }
    let request: GetProductsRequest = body(raw)?;
    let service = request
        .service_code
        .ok_or_else(|| WireError::MissingParameter("ServiceCode".to_string()))?;
    let format = request.format_version.as_deref().unwrap_or("aws_v1");
    if format != "aws_v1" {
        return Err(WireError::invalid("FormatVersion", format, "only aws_v1 is offered").into());
    }
    let region = request
        .filters
        .iter()
        .find(|f| {
            f.field.eq_ignore_ascii_case("regionCode")
                && matches!(f.kind.as_deref(), None | Some("TERM_MATCH" | "EQUALS"))
        })
        .map(|f| f.value.clone())
        .unwrap_or_else(|| sim.config().region.clone());
    let prices = if service == "AmazonEC2" {
        sim.on_demand_prices(&region).await?
    } else {
        Vec::new()
    };
    let mut selected = Vec::new();
    for price in prices {
        let attributes = attributes(&region, &price.instance_type);
        let mut keep = true;
        for f in &request.filters {
            let have = attributes
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(&f.field))
                .map(|(_, v)| v.as_str());
            keep &= f.passes(have)?;
        }
        if keep {
            selected.push((price, attributes));
        }
    }
    let page = page(
        selected,
        request.next_token.as_deref(),
        request.max_results.map(|n| n.min(PAGE_SIZE as i64)),
        Some(PAGE_SIZE),
    )?;
    let documents: Vec<String> = page
        .items
        .into_iter()
        .map(|(price, attributes)| document(sim, &region, &price, attributes).to_string())
        .collect();
    let mut answer = json!({ "FormatVersion": "aws_v1", "PriceList": documents });
    if let (Some(token), Some(object)) = (page.next_token, answer.as_object_mut()) {
        object.insert("NextToken".to_string(), Value::String(token));
    }
    Ok(answer)
}

/// The product attributes of a Linux, shared-tenancy, on-demand instance of `instance_type`.
fn attributes(region: &str, instance_type: &str) -> BTreeMap<&'static str, String> {
    let family = instance_type.split('.').next().unwrap_or_default();
    [
        ("servicecode", "AmazonEC2"),
        ("regionCode", region),
        ("locationType", "AWS Region"),
        ("instanceType", instance_type),
        ("instanceFamily", family),
        ("operatingSystem", "Linux"),
        ("tenancy", "Shared"),
        ("preInstalledSw", "NA"),
        ("capacitystatus", "Used"),
        ("licenseModel", "No License required"),
        ("operation", "RunInstances"),
        ("marketoption", "OnDemand"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_string()))
    .collect()
}

/// One price-list document.
fn document(
    sim: &SimAws,
    region: &str,
    price: &OnDemandPrice,
    attributes: BTreeMap<&'static str, String>,
) -> Value {
    let sku = hex_id(
        sim.config().seed,
        &format!("sku/{region}/{}", price.instance_type),
        16,
    )
    .to_uppercase();
    let term = format!("{sku}.{ON_DEMAND_TERM}");
    let rate = format!("{term}.{HOURLY_RATE}");
    let usd = usd(price.price_per_hour);
    let published = sim.now().to_string();
    json!({
        "product": {
            "productFamily": "Compute Instance",
            "attributes": attributes,
            "sku": sku,
        },
        "serviceCode": "AmazonEC2",
        "terms": { "OnDemand": { term.clone(): {
            "priceDimensions": { rate.clone(): {
                "unit": "Hrs",
                "endRange": "Inf",
                "description": format!(
                    "${usd} per On Demand Linux {} Instance Hour",
                    price.instance_type
                ),
                "appliesTo": [],
                "rateCode": rate,
                "beginRange": "0",
                "pricePerUnit": { "USD": usd },
            }},
            "sku": sku,
            "effectiveDate": published,
            "offerTermCode": ON_DEMAND_TERM,
            "termAttributes": {},
        }}},
        "version": "sim",
        "publicationDate": published,
    })
}

/// A price as the price list writes it (ten decimals), or exactly when ten lose precision.
fn usd(price: f64) -> String {
    let ten = format!("{price:.10}");
    if ten.parse::<f64>() == Ok(price) {
        ten
    } else {
        price.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_keep_every_digit() {
        assert_eq!(usd(0.096), "0.0960000000");
        let odd = 0.123_456_789_012_345;
        assert_eq!(usd(odd).parse::<f64>(), Ok(odd));
    }

    #[test]
    fn filter_kinds() {
        let f = |kind: &str, value: &str| Filter {
            kind: Some(kind.to_string()),
            field: "operatingSystem".to_string(),
            value: value.to_string(),
        };
        assert_eq!(f("TERM_MATCH", "linux").passes(Some("Linux")), Ok(true));
        assert_eq!(f("TERM_MATCH", "Windows").passes(Some("Linux")), Ok(false));
        assert_eq!(f("TERM_MATCH", "Linux").passes(None), Ok(false));
        assert_eq!(f("CONTAINS", "inu").passes(Some("Linux")), Ok(true));
        assert_eq!(f("ANY_OF", "RHEL, Linux").passes(Some("Linux")), Ok(true));
        assert_eq!(f("NONE_OF", "Linux").passes(Some("Linux")), Ok(false));
        assert!(f("FUZZY", "x").passes(Some("Linux")).is_err());
    }
}
