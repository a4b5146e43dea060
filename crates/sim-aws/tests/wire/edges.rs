//! Requests the SDK adapter never sends: unknown actions and targets, malformed bodies, bad
//! values, a GET with a query string (the AWS CLI's shape of a query call), each answered with
//! the protocol's error shape and never a panic; and the shape of what the SDK does send.

use driftwood_aws::ports::{
    CreateLaunchTemplateInput, DescribeSubnetsInput, Ec2Api, GetParameterInput, LaunchTemplateData,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{env, json, query, text};

/// The `<Code>` of an XML error answer.
fn code(body: &str) -> &str {
    body.split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map(|(code, _)| code)
        .unwrap_or_default()
}

#[tokio::test]
async fn bad_query_requests_get_ec2_and_iam_error_documents() {
    let env = env().await;
    let sim = &env.sim;
    let cases = [
        ("Action=RunInstances&Version=2016-11-15", "InvalidAction"),
        ("Action=Nope&Version=2016-11-15&", "InvalidAction"),
        ("Version=2016-11-15", "MissingAction"),
        ("Action=DescribeSubnets&Version=1999-01-01", "NoSuchVersion"),
        (
            "Action=DescribeSubnets&Version=2016-11-15&Filter.1.Name=%zz",
            "MalformedQueryString",
        ),
        (
            "Action=DescribeSubnets&Version=2016-11-15&Filter.1.Name=%C3%28",
            "MalformedQueryString",
        ),
        (
            "Action=DescribeSubnets&Version=2016-11-15&MaxResults=ten",
            "InvalidParameterValue",
        ),
        (
            "Action=DescribeSubnets&Version=2016-11-15&NextToken=forged",
            "InvalidNextToken",
        ),
        (
            "Action=TerminateInstances&Version=2016-11-15",
            "MissingParameter",
        ),
        (
            "Action=CreateLaunchTemplate&Version=2016-11-15",
            "MissingParameter",
        ),
        (
            "Action=CreateLaunchTemplate&Version=2016-11-15&LaunchTemplateName=x&LaunchTemplateData.UserData=%21%21",
            "InvalidParameterValue",
        ),
        (
            "Action=CreateFleet&Version=2016-11-15&LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName=x\
             &TargetCapacitySpecification.TotalTargetCapacity=1.5",
            "InvalidParameterValue",
        ),
        (
            "Action=DescribeImages&Version=2016-11-15&IncludeDeprecated=maybe",
            "InvalidParameterValue",
        ),
    ];
    for (body, expected) in cases {
        let answer = query(sim, body).await;
        let text = text(&answer);
        assert_eq!(answer.status, 400, "{body}: {text}");
        assert!(text.contains("<Response><Errors><Error>"), "{body}: {text}");
        assert!(text.contains("<RequestID>"), "{body}: {text}");
        assert_eq!(code(&text), expected, "{body}: {text}");
    }
    let binary = driftwood_sim_aws::wire::handle(
        sim,
        driftwood_sim_aws::wire::WireRequest {
            method: "POST",
            path: "/",
            query: None,
            content_type: None,
            amz_target: None,
            body: &[0xff, 0xfe, b'=', 0x00],
        },
    )
    .await;
    assert_eq!(binary.status, 400);
    assert_eq!(code(&text(&binary)), "MalformedQueryString");

    for (body, expected, status) in [
        ("Action=ListRoles&Version=2010-05-08", "InvalidAction", 400),
        (
            "Action=GetInstanceProfile&Version=2010-05-08",
            "ValidationError",
            400,
        ),
        (
            "Action=GetInstanceProfile&InstanceProfileName=none",
            "NoSuchEntity",
            404,
        ),
    ] {
        let answer = query(sim, body).await;
        let text = text(&answer);
        assert_eq!(answer.status, status, "{body}: {text}");
        assert!(text.contains("<ErrorResponse xmlns=\"https://iam.amazonaws.com/doc/2010-05-08/\"><Error><Type>Sender</Type>"), "{text}");
        assert_eq!(code(&text), expected, "{body}: {text}");
    }
}

#[tokio::test]
async fn bad_json_requests_get_typed_json_errors() {
    let env = env().await;
    let sim = &env.sim;
    for (target, body, expected) in [
        ("AmazonSSM.PutParameter", "{}", "UnknownOperationException"),
        (
            "AmazonEC2.DescribeThings",
            "{}",
            "UnknownOperationException",
        ),
        ("nonsense", "{}", "UnknownOperationException"),
        (
            "AmazonSSM.GetParameter",
            "{not json",
            "SerializationException",
        ),
        (
            "AmazonSSM.GetParameter",
            r#"{"Name":7}"#,
            "SerializationException",
        ),
        ("AmazonSSM.GetParameter", "{}", "ValidationException"),
        (
            "AmazonSSM.GetParameter",
            r#"{"Name":"/nope"}"#,
            "ParameterNotFound",
        ),
        (
            "AWSPriceListService.GetProducts",
            r#"{"ServiceCode":"AmazonEC2","NextToken":"x"}"#,
            "InvalidNextTokenException",
        ),
        (
            "AWSPriceListService.GetProducts",
            r#"{"ServiceCode":"AmazonEC2","FormatVersion":"aws_v2"}"#,
            "ValidationException",
        ),
    ] {
        let answer = json(sim, target, body).await;
        assert_eq!(answer.status, 400, "{target} {body}");
        assert_eq!(answer.content_type, "application/x-amz-json-1.1");
        let parsed: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(parsed["__type"], expected, "{target} {body}: {parsed}");
        assert!(parsed["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(
            answer
                .headers
                .iter()
                .any(|(k, v)| *k == "x-amzn-errortype" && v == expected),
            "{:?}",
            answer.headers
        );
    }
}

#[tokio::test]
async fn a_get_with_a_query_string_works_over_http() {
    let env = env().await;
    let host = env.server.url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let request = format!(
        "GET /?Action=DescribeSubnets&Version=2016-11-15&Filter.1.Name=availability-zone&Filter.1.Value.1=us-west-2b HTTP/1.1\r\n\
         Host: {host}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains(
            "<DescribeSubnetsResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
        )
    );
    assert_eq!(answer.matches("<subnetId>").count(), 1, "{answer}");
    assert!(answer.contains("<availabilityZone>us-west-2b</availabilityZone>"));
}

#[tokio::test]
async fn the_sdk_posts_forms_and_json_to_the_root_path() {
    let env = env().await;
    env.wire
        .ec2
        .describe_subnets(DescribeSubnetsInput::default())
        .await
        .unwrap();
    env.wire.iam.get_instance_profile("none").await.unwrap_err();
    env.wire
        .ssm
        .get_parameter(GetParameterInput {
            name: "/nope".to_string(),
            with_decryption: false,
        })
        .await
        .unwrap_err();
    let seen = env.server.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    for s in &seen {
        assert_eq!((s.method.as_str(), s.path.as_str()), ("POST", "/"), "{s:?}");
    }
    assert_eq!(
        seen[0].content_type.as_deref(),
        Some("application/x-www-form-urlencoded")
    );
    assert!(
        seen[0]
            .body
            .starts_with("Action=DescribeSubnets&Version=2016-11-15")
    );
    assert!(
        seen[1]
            .body
            .starts_with("Action=GetInstanceProfile&Version=2010-05-08")
    );
    assert_eq!(
        seen[2].content_type.as_deref(),
        Some("application/x-amz-json-1.1")
    );
    assert_eq!(seen[2].target.as_deref(), Some("AmazonSSM.GetParameter"));
}

#[tokio::test]
async fn launch_templates_are_also_described_by_id() {
    let env = env().await;
    let image_id = env
        .sim
        .eks_ami("al2023", "latest", "1.29", "amd64")
        .unwrap();
    let mut ids = Vec::new();
    for name in ["a", "b"] {
        let created = env
            .sim
            .create_launch_template(CreateLaunchTemplateInput {
                launch_template_name: name.to_string(),
                launch_template_data: LaunchTemplateData {
                    image_id: image_id.clone(),
                    ..Default::default()
                },
                tag_specifications: vec![],
            })
            .await
            .unwrap();
        ids.push(created.launch_template_id);
    }
    let one = query(
        &env.sim,
        &format!(
            "Action=DescribeLaunchTemplates&Version=2016-11-15&LaunchTemplateId.1={}",
            ids[1]
        ),
    )
    .await;
    let body = text(&one);
    assert_eq!(one.status, 200, "{body}");
    assert_eq!(body.matches("<launchTemplateName>").count(), 1, "{body}");
    assert!(body.contains("<launchTemplateName>b</launchTemplateName>"));
    let missing = query(
        &env.sim,
        "Action=DescribeLaunchTemplates&Version=2016-11-15&LaunchTemplateId.1=lt-0",
    )
    .await;
    assert_eq!(missing.status, 400);
    assert_eq!(code(&text(&missing)), "InvalidLaunchTemplateId.NotFound");
}
