//! EC2 describe calls: the SDK adapter through the wire returns what the port returns
//! directly, filters, ids and pagination included.

use driftwood_aws::ports::{
    DescribeImagesInput, DescribeInstanceTypeOfferingsInput, DescribeInstanceTypesInput,
    DescribeSecurityGroupsInput, DescribeSpotPriceHistoryInput, DescribeSubnetsInput, Ec2Api,
    Filter, InstanceTypeDescription, codes,
};
use driftwood_sim_aws::{AMAZON_EKS_ACCOUNT, DISCOVERY_TAG};

use crate::common::{CLUSTER, env};

#[tokio::test]
async fn subnets_and_security_groups_round_trip() {
    let env = env().await;
    let extra = env.sim.add_subnet(
        "us-west-2b",
        12,
        vec![driftwood_aws::ports::Tag::new(
            "Name",
            "a <quoted> & 'odd' \"name\"",
        )],
    );
    for input in [
        DescribeSubnetsInput::default(),
        DescribeSubnetsInput {
            filters: vec![Filter::new(format!("tag:{DISCOVERY_TAG}"), [CLUSTER])],
            ..Default::default()
        },
        DescribeSubnetsInput {
            subnet_ids: vec![extra.clone()],
            ..Default::default()
        },
        DescribeSubnetsInput {
            filters: vec![Filter::new(
                "availability-zone",
                ["us-west-2a", "us-west-2c"],
            )],
            ..Default::default()
        },
    ] {
        let direct = env.sim.describe_subnets(input.clone()).await.unwrap();
        let wire = env.wire.ec2.describe_subnets(input.clone()).await.unwrap();
        assert!(!direct.is_empty(), "{input:?}");
        assert_eq!(wire, direct, "{input:?}");
    }
    let missing = env
        .wire
        .ec2
        .describe_subnets(DescribeSubnetsInput {
            subnet_ids: vec!["subnet-0000000000000000".to_string()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code, codes::SUBNET_ID_NOT_FOUND);

    let group = env.sim.add_security_group("extra", vec![]);
    for input in [
        DescribeSecurityGroupsInput::default(),
        DescribeSecurityGroupsInput {
            filters: vec![Filter::new(format!("tag:{DISCOVERY_TAG}"), [CLUSTER])],
            ..Default::default()
        },
        DescribeSecurityGroupsInput {
            group_ids: vec![group.clone()],
            ..Default::default()
        },
    ] {
        let direct = env
            .sim
            .describe_security_groups(input.clone())
            .await
            .unwrap();
        let wire = env
            .wire
            .ec2
            .describe_security_groups(input.clone())
            .await
            .unwrap();
        assert!(!direct.is_empty(), "{input:?}");
        assert_eq!(wire, direct, "{input:?}");
    }
}

#[tokio::test]
async fn images_round_trip_with_owners_filters_and_deprecation() {
    let env = env().await;
    let name_filter = |pattern: &str| Filter::new("name", [pattern]);
    let inputs = [
        DescribeImagesInput {
            owners: vec!["amazon".to_string()],
            filters: vec![name_filter("amazon-eks-node-1.29-*")],
            ..Default::default()
        },
        DescribeImagesInput {
            owners: vec![AMAZON_EKS_ACCOUNT.to_string()],
            filters: vec![name_filter("amazon-eks-node-al2023-arm64-standard-1.30-*")],
            include_deprecated: true,
            ..Default::default()
        },
        DescribeImagesInput {
            filters: vec![
                name_filter("bottlerocket-aws-k8s-1.29-x86_64-*"),
                Filter::new("architecture", ["x86_64"]),
            ],
            ..Default::default()
        },
    ];
    for input in inputs {
        let direct = env.sim.describe_images(input.clone()).await.unwrap();
        let wire = env.wire.ec2.describe_images(input.clone()).await.unwrap();
        assert!(!direct.is_empty(), "{input:?}");
        assert_eq!(wire, direct, "{input:?}");
    }
    // A custom image with tags, found by id and by tag.
    let custom = env.sim.add_custom_image(
        "team-golden-1",
        "arm64",
        env.sim.now(),
        vec![driftwood_aws::ports::Tag::new("team", "a&b")],
        Some("1.29"),
    );
    for input in [
        DescribeImagesInput {
            image_ids: vec![custom.clone()],
            ..Default::default()
        },
        DescribeImagesInput {
            owners: vec!["self".to_string()],
            filters: vec![Filter::new("tag:team", ["a&b"])],
            ..Default::default()
        },
    ] {
        let direct = env.sim.describe_images(input.clone()).await.unwrap();
        let wire = env.wire.ec2.describe_images(input.clone()).await.unwrap();
        assert_eq!(direct.len(), 1);
        assert_eq!(wire, direct);
    }
    let missing = env
        .wire
        .ec2
        .describe_images(DescribeImagesInput {
            image_ids: vec!["ami-00000000000000000".to_string()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code, codes::AMI_ID_NOT_FOUND);
}

/// What the SDK adapter can read back of an instance type: everything but the branch ENI count
/// (DescribeInstanceTypes does not report it; the adapter leaves 0).
fn readable(mut t: InstanceTypeDescription) -> InstanceTypeDescription {
    t.branch_interfaces = 0;
    t
}

#[tokio::test]
async fn every_instance_type_round_trips_across_pages() {
    let env = env().await;
    let before = env.calls("DescribeInstanceTypes");
    let direct = env
        .sim
        .describe_instance_types(DescribeInstanceTypesInput::default())
        .await
        .unwrap();
    let wire = env
        .wire
        .ec2
        .describe_instance_types(DescribeInstanceTypesInput::default())
        .await
        .unwrap();
    assert!(direct.len() > 1300, "{}", direct.len());
    let direct: Vec<_> = direct.into_iter().map(readable).collect();
    assert_eq!(wire.len(), direct.len());
    for (w, d) in wire.iter().zip(&direct) {
        assert_eq!(w, d);
    }
    // GPUs, Neuron devices, other accelerators, local NVMe, EFA and metal among them.
    for name in [
        "p4d.24xlarge",
        "inf2.xlarge",
        "trn1.32xlarge",
        "dl2q.24xlarge",
        "c5.metal",
        "m5d.large",
    ] {
        assert!(wire.iter().any(|t| t.instance_type == name), "{name}");
    }
    assert!(
        wire.iter()
            .any(|t| !t.accelerators.is_empty() && t.accelerators[0].manufacturer != "aws")
    );
    let pages = env.calls("DescribeInstanceTypes") - before - 1;
    assert_eq!(
        pages as usize,
        direct.len().div_ceil(100),
        "one call per page of 100"
    );

    let input = DescribeInstanceTypesInput {
        instance_types: vec!["m5.large".to_string(), "c7g.large".to_string()],
        filters: vec![Filter::new(
            "processor-info.supported-architecture",
            ["arm64"],
        )],
    };
    let direct = env
        .sim
        .describe_instance_types(input.clone())
        .await
        .unwrap();
    let wire = env.wire.ec2.describe_instance_types(input).await.unwrap();
    assert_eq!(direct.len(), 1);
    assert_eq!(wire, direct.into_iter().map(readable).collect::<Vec<_>>());
    let unknown = env
        .wire
        .ec2
        .describe_instance_types(DescribeInstanceTypesInput {
            instance_types: vec!["m99.huge".to_string()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code, codes::INVALID_PARAMETER_VALUE);
}

#[tokio::test]
async fn offerings_and_spot_prices_round_trip() {
    let env = env().await;
    for input in [
        DescribeInstanceTypeOfferingsInput {
            location_type: "availability-zone".to_string(),
            filters: vec![],
        },
        DescribeInstanceTypeOfferingsInput {
            location_type: "availability-zone-id".to_string(),
            filters: vec![Filter::new("instance-type", ["c7i.*", "m5.large"])],
        },
        DescribeInstanceTypeOfferingsInput::default(),
    ] {
        let direct = env
            .sim
            .describe_instance_type_offerings(input.clone())
            .await
            .unwrap();
        let wire = env
            .wire
            .ec2
            .describe_instance_type_offerings(input.clone())
            .await
            .unwrap();
        assert!(!direct.is_empty(), "{input:?}");
        assert_eq!(wire, direct, "{input:?}");
    }
    for input in [
        DescribeSpotPriceHistoryInput {
            product_descriptions: vec!["Linux/UNIX".to_string()],
            start_time: Some(env.sim.now()),
            ..Default::default()
        },
        DescribeSpotPriceHistoryInput {
            instance_types: vec!["m5.large".to_string(), "c7i.large".to_string()],
            availability_zone: Some("us-west-2a".to_string()),
            ..Default::default()
        },
    ] {
        let direct = env
            .sim
            .describe_spot_price_history(input.clone())
            .await
            .unwrap();
        let wire = env
            .wire
            .ec2
            .describe_spot_price_history(input.clone())
            .await
            .unwrap();
        assert!(!direct.is_empty(), "{input:?}");
        assert_eq!(wire, direct, "{input:?}");
    }
}
