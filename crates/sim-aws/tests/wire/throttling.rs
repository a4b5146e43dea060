//! Throttling and server errors reach the SDK as AWS sends them: retried with backoff, and
//! surfacing with their code once the attempts run out; the account's own rate limits too.

use driftwood_aws::ports::{AwsError, DescribeSubnetsInput, GetParameterInput, codes};
use driftwood_sim_aws::{Realism, SimConfig};

use crate::common::{CLUSTER, env, env_with};

#[tokio::test]
async fn throttled_calls_are_retried_then_surface_as_throttled() {
    let env = env().await;
    env.sim.throttle("DescribeSubnets", 2);
    let subnets = env
        .wire
        .ec2
        .describe_subnets(DescribeSubnetsInput::default())
        .await
        .unwrap();
    assert_eq!(subnets.len(), 3);
    let count = env.sim.api_calls()["DescribeSubnets"];
    assert_eq!(
        (count.calls, count.throttled),
        (3, 2),
        "retried after each throttle"
    );

    env.sim.throttle("DescribeSubnets", 10);
    let err = env
        .wire
        .ec2
        .describe_subnets(DescribeSubnetsInput::default())
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::REQUEST_LIMIT_EXCEEDED);
    assert!(err.is_throttled());
    assert_eq!(
        env.sim.api_calls()["DescribeSubnets"].calls,
        6,
        "three attempts"
    );

    env.sim.throttle("GetParameter", 10);
    let ssm = env
        .wire
        .ssm
        .get_parameter(GetParameterInput {
            name: "/aws/service/eks/optimized-ami/1.29/amazon-linux-2/recommended/image_id"
                .to_string(),
            with_decryption: false,
        })
        .await
        .unwrap_err();
    // The fault knob throttles with EC2's code whatever the service; the SDK still retries it.
    assert!(ssm.is_throttled(), "{ssm:?}");
    assert_eq!(env.sim.api_calls()["GetParameter"].calls, 3);

    env.sim.throttle("GetInstanceProfile", 10);
    let iam = env.wire.iam.get_instance_profile("p").await.unwrap_err();
    assert!(iam.is_throttled(), "{iam:?}");
}

#[tokio::test]
async fn internal_errors_are_retried_and_other_errors_are_not() {
    let env = env().await;
    env.sim.inject_error(
        "DescribeSubnets",
        AwsError::new(codes::INTERNAL_ERROR, "An internal error has occurred"),
    );
    assert_eq!(
        env.wire
            .ec2
            .describe_subnets(DescribeSubnetsInput::default())
            .await
            .unwrap()
            .len(),
        3
    );
    assert_eq!(env.sim.api_calls()["DescribeSubnets"].calls, 2);

    env.sim.inject_error(
        "DescribeSubnets",
        AwsError::new(
            "UnauthorizedOperation",
            "You are not authorized <to> do this",
        ),
    );
    let err = env
        .wire
        .ec2
        .describe_subnets(DescribeSubnetsInput::default())
        .await
        .unwrap_err();
    assert_eq!(err.code, "UnauthorizedOperation");
    assert_eq!(
        err.message,
        "DescribeSubnets: You are not authorized <to> do this"
    );
    assert_eq!(
        env.sim.api_calls()["DescribeSubnets"].calls,
        3,
        "not retried"
    );
}

#[tokio::test]
async fn the_accounts_rate_limits_throttle_through_the_wire() {
    let realism = Realism {
        latency: false,
        ..Realism::aws()
    };
    let env = env_with(SimConfig::new(CLUSTER, 7).with_realism(realism), 1).await;
    let mut throttled = None;
    for n in 0..400 {
        if let Err(e) = env
            .wire
            .ec2
            .describe_subnets(DescribeSubnetsInput::default())
            .await
        {
            throttled = Some((n, e));
            break;
        }
    }
    let (n, err) = throttled.expect("the bucket runs dry");
    assert!(n > 10, "a burst first ({n})");
    assert_eq!(err.code, codes::REQUEST_LIMIT_EXCEEDED);
    assert_eq!(env.sim.api_calls()["DescribeSubnets"].throttled, 1);
}
