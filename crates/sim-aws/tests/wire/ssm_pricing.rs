//! SSM parameters and Pricing API prices through the wire (awsJson1_1).

use driftwood_aws::ports::{GetParameterInput, OnDemandPrice, PricingApi, SsmApi, codes};

use crate::common::{env, json, text};

const AL2_1_29: &str = "/aws/service/eks/optimized-ami/1.29/amazon-linux-2/recommended/image_id";

#[tokio::test]
async fn parameters_round_trip_and_missing_ones_are_not_found() {
    let env = env().await;
    let input = GetParameterInput {
        name: AL2_1_29.to_string(),
        with_decryption: false,
    };
    let direct = env.sim.get_parameter(input.clone()).await.unwrap();
    let wire = env.wire.ssm.get_parameter(input).await.unwrap();
    assert!(direct.value.starts_with("ami-"), "{direct:?}");
    assert_eq!(wire, direct);

    env.sim.put_parameter("team/custom", "v & <w>");
    let custom = GetParameterInput {
        name: "team/custom".to_string(),
        with_decryption: true,
    };
    assert_eq!(
        env.wire.ssm.get_parameter(custom.clone()).await.unwrap(),
        env.sim.get_parameter(custom).await.unwrap()
    );

    let missing = env
        .wire
        .ssm
        .get_parameter(GetParameterInput {
            name: "/aws/service/eks/optimized-ami/0.1/none/image_id".to_string(),
            with_decryption: false,
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code, codes::PARAMETER_NOT_FOUND);
    assert!(missing.is_not_found());
}

#[tokio::test]
async fn get_parameters_splits_found_and_invalid_names() {
    let env = env().await;
    let answer = json(
        &env.sim,
        "AmazonSSM.GetParameters",
        &format!(r#"{{"Names":["{AL2_1_29}","/nope"]}}"#),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", text(&answer));
    let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(body["Parameters"][0]["Name"], AL2_1_29);
    assert_eq!(
        body["Parameters"][0]["ARN"],
        format!("arn:aws:ssm:us-west-2::parameter{AL2_1_29}")
    );
    assert_eq!(body["InvalidParameters"], serde_json::json!(["/nope"]));
}

fn sorted(mut prices: Vec<OnDemandPrice>) -> Vec<OnDemandPrice> {
    prices.sort_by(|a, b| a.instance_type.cmp(&b.instance_type));
    prices
}

#[tokio::test]
async fn pricing_returns_the_on_demand_prices_page_by_page() {
    let env = env().await;
    let direct = sorted(env.sim.on_demand_prices("us-west-2").await.unwrap());
    let before = env.calls("GetProducts");
    let wire = sorted(
        env.wire
            .pricing
            .on_demand_prices("us-west-2")
            .await
            .unwrap(),
    );
    assert!(direct.len() > 1300);
    assert_eq!(wire, direct);
    assert_eq!(
        (env.calls("GetProducts") - before) as usize,
        direct.len().div_ceil(100),
        "one call per page of 100"
    );
    assert!(
        env.wire
            .pricing
            .on_demand_prices("eu-west-1")
            .await
            .unwrap()
            .is_empty()
    );

    // Filters the adapter does not send narrow the list as AWS's do.
    let answer = json(
        &env.sim,
        "AWSPriceListService.GetProducts",
        r#"{"ServiceCode":"AmazonEC2","Filters":[
            {"Type":"TERM_MATCH","Field":"instanceType","Value":"m5.large"},
            {"Type":"TERM_MATCH","Field":"regionCode","Value":"us-west-2"}],
            "FormatVersion":"aws_v1","MaxResults":5}"#,
    )
    .await;
    let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    let list = body["PriceList"].as_array().unwrap();
    assert_eq!(list.len(), 1);
    let price = driftwood_cloud_aws::parse_on_demand_price(list[0].as_str().unwrap()).unwrap();
    assert_eq!(price.instance_type, "m5.large");
    assert_eq!(price.price_per_hour, 0.096);
    assert!(body.get("NextToken").is_none());
    let windows = json(
        &env.sim,
        "AWSPriceListService.GetProducts",
        r#"{"ServiceCode":"AmazonEC2","Filters":[
            {"Type":"TERM_MATCH","Field":"operatingSystem","Value":"Windows"}]}"#,
    )
    .await;
    let body: serde_json::Value = serde_json::from_slice(&windows.body).unwrap();
    assert_eq!(body["PriceList"], serde_json::json!([]));
}
