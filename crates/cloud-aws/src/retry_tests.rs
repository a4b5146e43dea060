//! The adapter against a scripted EC2 endpoint: throttled calls are retried with backoff until
//! they succeed, and describe calls follow NextToken to the last page.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use driftwood_aws::ports::{DescribeSubnetsInput, Ec2Api, codes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::{SdkMetrics, SdkOptions, load_sdk_config, sdk_ports};

const THROTTLED: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>r1</RequestID></Response>"#;

fn page(subnet: &str, zone: &str, next: Option<&str>) -> String {
    let next = next
        .map(|t| format!("<nextToken>{t}</nextToken>"))
        .unwrap_or_default();
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeSubnetsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r2</requestId><subnetSet><item><subnetId>{subnet}</subnetId><availabilityZone>{zone}</availabilityZone><availableIpAddressCount>250</availableIpAddressCount></item></subnetSet>{next}</DescribeSubnetsResponse>"#
    )
}

/// Serves `responses` (status, body) in order, one per request, recording each request body.
async fn scripted(responses: Vec<(u16, String)>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    tokio::spawn(async move {
        let mut responses = responses.into_iter();
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut request = Vec::new();
            let mut buf = [0u8; 8192];
            // Headers, then the body by Content-Length.
            loop {
                let n = socket.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        record.lock().unwrap().push(text[end + 4..].to_string());
                        break;
                    }
                }
            }
            let Some((status, body)) = responses.next() else {
                return;
            };
            let reply = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(reply.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    (url, seen)
}

async fn ec2(url: &str, max_attempts: u32, metrics: &SdkMetrics) -> Arc<dyn Ec2Api> {
    let options = SdkOptions {
        region: Some("us-west-2".to_string()),
        endpoint_url: Some(url.to_string()),
        max_attempts,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        static_credentials: Some(("AKID".to_string(), "secret".to_string())),
        ..SdkOptions::default()
    };
    sdk_ports(&load_sdk_config(&options).await.unwrap(), None, metrics).ec2
}

#[tokio::test]
async fn throttled_calls_are_retried_and_pages_followed() {
    let (url, seen) = scripted(vec![
        (503, THROTTLED.to_string()),
        (503, THROTTLED.to_string()),
        (200, page("subnet-1", "us-west-2a", Some("token-2"))),
        (503, THROTTLED.to_string()),
        (200, page("subnet-2", "us-west-2b", None)),
    ])
    .await;
    let metrics = SdkMetrics::default();
    let mut registry = driftwood_cloud::metric_registry::DeclaredRegistry::new();
    metrics.register(&mut registry);
    let subnets = ec2(&url, 4, &metrics)
        .await
        .describe_subnets(DescribeSubnetsInput::default())
        .await
        .unwrap();
    let ids: Vec<_> = subnets.iter().map(|s| s.subnet_id.as_str()).collect();
    assert_eq!(ids, ["subnet-1", "subnet-2"]);
    assert_eq!(subnets[1].availability_zone, "us-west-2b");
    assert_eq!(subnets[0].available_ip_address_count, 250);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(seen.iter().all(|b| b.contains("Action=DescribeSubnets")));
    assert!(!seen[2].contains("NextToken"));
    assert!(seen[3].contains("NextToken=token-2") && seen[4].contains("NextToken=token-2"));
    // Two calls (one per page), five attempts: the throttling shows per attempt.
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry.registry()).unwrap();
    let series = "{service=\"EC2\",action=\"DescribeSubnets\",code=";
    for line in [
        format!("aws_sdk_go_request_total{series}\"200\"}} 2"),
        format!("aws_sdk_go_request_attempt_total{series}\"503\"}} 3"),
        format!("aws_sdk_go_request_attempt_total{series}\"200\"}} 2"),
        format!("aws_sdk_go_request_retry_count_sum{series}\"200\"}} 3.0"),
        format!("aws_sdk_go_request_attempt_duration_seconds_count{series}\"200\"}} 5"),
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
    }
}

#[tokio::test]
async fn throttling_past_the_attempts_surfaces_the_code() {
    let (url, seen) = scripted(vec![
        (503, THROTTLED.to_string()),
        (503, THROTTLED.to_string()),
        (503, THROTTLED.to_string()),
    ])
    .await;
    let metrics = SdkMetrics::default();
    let err = ec2(&url, 2, &metrics)
        .await
        .describe_subnets(DescribeSubnetsInput::default())
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::REQUEST_LIMIT_EXCEEDED);
    // One call that failed with the last attempt's code, after one retry.
    let call = |code: &str| {
        vec![
            ("service".to_string(), "EC2".to_string()),
            ("action".to_string(), "DescribeSubnets".to_string()),
            ("code".to_string(), code.to_string()),
        ]
    };
    assert_eq!(metrics.requests.get_or_create(&call("503")).get(), 1);
    assert_eq!(metrics.attempts.get_or_create(&call("503")).get(), 2);
    assert!(err.is_throttled());
    assert!(
        err.message.starts_with("DescribeSubnets: "),
        "{}",
        err.message
    );
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_network_failure() {
    let metrics = SdkMetrics::default();
    let err = ec2("http://127.0.0.1:1", 1, &metrics)
        .await
        .describe_subnets(DescribeSubnetsInput::default())
        .await
        .unwrap_err();
    assert_eq!(err.code, crate::error::CODE_NETWORK);
    // No answer: code -1, as aws-sdk-go-prometheus labels a call without a response.
    let call = vec![
        ("service".to_string(), "EC2".to_string()),
        ("action".to_string(), "DescribeSubnets".to_string()),
        ("code".to_string(), "-1".to_string()),
    ];
    assert_eq!(metrics.requests.get_or_create(&call).get(), 1);
}
