//! Launch templates, fleets and instances through the wire: what the SDK adapter sends is read
//! back into exactly the port input (the account stores it), and the effects of CreateFleet,
//! TerminateInstances and CreateTags are what DescribeInstances then reports, directly and
//! through the wire alike.

use driftwood_aws::ports::{
    BlockDeviceMapping, CreateFleetInput, CreateLaunchTemplateInput, CreateTagsInput,
    DescribeInstancesInput, DescribeLaunchTemplatesInput, Ec2Api, Filter,
    FleetLaunchTemplateConfig, FleetOverride, FleetOverrideRef, InstanceStateChange,
    LaunchTemplate, LaunchTemplateData, MetadataOptions, Tag, TagSpecification, codes,
    instance_state,
};
use driftwood_sim_aws::DISCOVERY_TAG;
use jiff::SignedDuration;

use crate::common::{CLUSTER, Env, env};

fn subnet_in(env: &Env, zone: &str) -> String {
    env.sim
        .subnets()
        .into_iter()
        .find(|s| s.availability_zone == zone)
        .unwrap()
        .subnet_id
}

fn group(env: &Env) -> String {
    env.sim
        .security_groups()
        .into_iter()
        .find(|g| g.tags.iter().any(|t| t.key == DISCOVERY_TAG))
        .unwrap()
        .group_id
}

/// Template data using every field the adapter sends.
fn full_data(env: &Env) -> LaunchTemplateData {
    LaunchTemplateData {
        image_id: env
            .sim
            .eks_ami("al2023", "latest", "1.29", "amd64")
            .unwrap(),
        user_data: "#!/bin/bash\nset -e\necho 'héllo & <bye>' > /tmp/x\r\n+%=".to_string(),
        iam_instance_profile_name: "demo_1234".to_string(),
        security_group_ids: vec![group(env)],
        block_device_mappings: vec![BlockDeviceMapping {
            device_name: "/dev/xvda".to_string(),
            volume_size_gib: Some(20),
            volume_type: Some("gp3".to_string()),
            iops: Some(3000),
            throughput: Some(125),
            encrypted: Some(true),
            kms_key_id: Some("arn:aws:kms:us-west-2:111122223333:key/k".to_string()),
            snapshot_id: Some("snap-0123".to_string()),
            delete_on_termination: Some(true),
        }],
        metadata_options: Some(MetadataOptions {
            http_endpoint: Some("enabled".to_string()),
            http_protocol_ipv6: Some("disabled".to_string()),
            http_put_response_hop_limit: Some(1),
            http_tokens: Some("required".to_string()),
        }),
        monitoring_enabled: true,
        associate_public_ip_address: Some(false),
        tag_specifications: vec![
            TagSpecification {
                resource_type: "instance".to_string(),
                tags: vec![
                    Tag::new("karpenter.sh/nodepool", "default"),
                    Tag::new("Name", "x y+z"),
                ],
            },
            TagSpecification {
                resource_type: "volume".to_string(),
                tags: vec![Tag::new("karpenter.sh/nodepool", "default")],
            },
        ],
    }
}

async fn stored(env: &Env, name: &str) -> LaunchTemplate {
    let mut found = env
        .sim
        .describe_launch_templates(DescribeLaunchTemplatesInput {
            launch_template_names: vec![name.to_string()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    found.remove(0)
}

#[tokio::test]
async fn launch_templates_round_trip_and_are_stored_as_sent() {
    let env = env().await;
    let full = CreateLaunchTemplateInput {
        launch_template_name: "karpenter.k8s.aws/123".to_string(),
        launch_template_data: full_data(&env),
        tag_specifications: vec![TagSpecification {
            resource_type: "launch-template".to_string(),
            tags: vec![Tag::new(
                format!("kubernetes.io/cluster/{CLUSTER}"),
                "owned",
            )],
        }],
    };
    let plain = CreateLaunchTemplateInput {
        launch_template_name: "plain".to_string(),
        launch_template_data: LaunchTemplateData {
            image_id: full.launch_template_data.image_id.clone(),
            security_group_ids: vec![group(&env), "sg-other".to_string()],
            ..Default::default()
        },
        tag_specifications: vec![],
    };
    for input in [full, plain] {
        let created = env
            .wire
            .ec2
            .create_launch_template(input.clone())
            .await
            .unwrap();
        let stored = stored(&env, &input.launch_template_name).await;
        assert_eq!(stored.data, input.launch_template_data, "read back as sent");
        assert_eq!(created, stored);
        assert_eq!(stored.create_time, env.sim.now());
        let again = env
            .wire
            .ec2
            .create_launch_template(input.clone())
            .await
            .unwrap_err();
        assert_eq!(again.code, codes::LAUNCH_TEMPLATE_NAME_ALREADY_EXISTS);
    }

    for input in [
        DescribeLaunchTemplatesInput::default(),
        DescribeLaunchTemplatesInput {
            launch_template_names: vec!["plain".to_string()],
            ..Default::default()
        },
        DescribeLaunchTemplatesInput {
            filters: vec![Filter::new(
                format!("tag:kubernetes.io/cluster/{CLUSTER}"),
                ["owned"],
            )],
            ..Default::default()
        },
    ] {
        let direct: Vec<LaunchTemplate> = env
            .sim
            .describe_launch_templates(input.clone())
            .await
            .unwrap()
            .into_iter()
            .map(|t| LaunchTemplate {
                data: LaunchTemplateData::default(),
                ..t
            })
            .collect();
        let wire = env
            .wire
            .ec2
            .describe_launch_templates(input.clone())
            .await
            .unwrap();
        assert!(!direct.is_empty(), "{input:?}");
        assert_eq!(wire, direct, "{input:?}");
    }

    env.wire.ec2.delete_launch_template("plain").await.unwrap();
    assert_eq!(env.sim.launch_template_names(), ["karpenter.k8s.aws/123"]);
    let gone = env
        .wire
        .ec2
        .describe_launch_templates(DescribeLaunchTemplatesInput {
            launch_template_names: vec!["plain".to_string()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(gone.code, codes::LAUNCH_TEMPLATE_NAME_NOT_FOUND);
    assert!(gone.is_not_found());
    let twice = env
        .wire
        .ec2
        .delete_launch_template("plain")
        .await
        .unwrap_err();
    assert_eq!(twice.code, codes::LAUNCH_TEMPLATE_NAME_NOT_FOUND);
}

fn fleet(env: &Env, capacity_type: &str) -> CreateFleetInput {
    let (a, b) = (subnet_in(env, "us-west-2a"), subnet_in(env, "us-west-2b"));
    let over = |t: &str, zone: &str, subnet: &str, priority: f64| FleetOverride {
        instance_type: t.to_string(),
        subnet_id: subnet.to_string(),
        availability_zone: zone.to_string(),
        image_id: None,
        priority: Some(priority),
    };
    CreateFleetInput {
        type_: "instant".to_string(),
        launch_template_configs: vec![FleetLaunchTemplateConfig {
            launch_template_name: "lt-fleet".to_string(),
            version: "$Latest".to_string(),
            overrides: vec![
                over("c5.large", "us-west-2a", &a, 0.5),
                over("m5.large", "us-west-2a", &a, 1.0),
                over("m5.large", "us-west-2b", &b, 2.0),
            ],
        }],
        total_target_capacity: 1,
        default_target_capacity_type: capacity_type.to_string(),
        spot_allocation_strategy: Some("price-capacity-optimized".to_string()),
        on_demand_allocation_strategy: Some("lowest-price".to_string()),
        tag_specifications: vec![TagSpecification {
            resource_type: "instance".to_string(),
            tags: vec![
                Tag::new("karpenter.sh/nodepool", "default"),
                Tag::new("karpenter.sh/nodeclaim", format!("default-{capacity_type}")),
            ],
        }],
        context: None,
    }
}

#[tokio::test]
async fn fleets_launch_instances_that_describe_terminate_and_tag_through_the_wire() {
    let env = env().await;
    let data = full_data(&env);
    env.wire
        .ec2
        .create_launch_template(CreateLaunchTemplateInput {
            launch_template_name: "lt-fleet".to_string(),
            launch_template_data: data,
            tag_specifications: vec![],
        })
        .await
        .unwrap();
    env.sim
        .inject_insufficient_capacity("c5.large", "us-west-2a", "on-demand");

    let out = env
        .wire
        .ec2
        .create_fleet(fleet(&env, "on-demand"))
        .await
        .unwrap();
    assert!(out.fleet_id.starts_with("fleet-"), "{}", out.fleet_id);
    assert_eq!(out.errors.len(), 1, "{out:?}");
    let error = &out.errors[0];
    assert_eq!(error.error_code, codes::INSUFFICIENT_INSTANCE_CAPACITY);
    assert_eq!(error.lifecycle, "on-demand");
    assert_eq!(
        error.launch_template_and_overrides,
        FleetOverrideRef {
            instance_type: "c5.large".to_string(),
            availability_zone: "us-west-2a".to_string(),
            subnet_id: subnet_in(&env, "us-west-2a"),
        }
    );
    assert_eq!(out.instances.len(), 1, "{out:?}");
    let launched = &out.instances[0];
    assert_eq!(launched.instance_type, "m5.large");
    assert_eq!(launched.lifecycle, "on-demand");
    assert_eq!(
        launched.launch_template_and_overrides.availability_zone,
        "us-west-2a"
    );
    let id = launched.instance_ids[0].clone();
    let account_view = env.sim.instances();
    let instance = account_view.iter().find(|i| i.instance_id == id).unwrap();
    assert_eq!(instance.iam_instance_profile.as_deref(), Some("demo_1234"));
    assert!(
        instance
            .tags
            .contains(&Tag::new("karpenter.sh/nodeclaim", "default-on-demand"))
    );

    let by_id = DescribeInstancesInput {
        instance_ids: vec![id.clone()],
        ..Default::default()
    };
    let by_tag = DescribeInstancesInput {
        filters: vec![
            Filter::new("tag:karpenter.sh/nodepool", ["default"]),
            Filter::new(
                "instance-state-name",
                ["pending", "running", "shutting-down"],
            ),
        ],
        ..Default::default()
    };
    let same = |env: &Env, input: DescribeInstancesInput, state: &'static str| {
        let (sim, wire) = (env.sim.clone(), env.wire.ec2.clone());
        async move {
            let direct = sim.describe_instances(input.clone()).await.unwrap();
            let through = wire.describe_instances(input.clone()).await.unwrap();
            assert!(!direct.is_empty(), "{input:?}");
            assert!(direct.iter().all(|i| i.state == state), "{direct:?}");
            assert_eq!(through, direct, "{input:?}");
        }
    };
    same(&env, by_id.clone(), instance_state::PENDING).await;
    env.advance(SignedDuration::from_secs(31));
    same(&env, by_id.clone(), instance_state::RUNNING).await;
    same(&env, by_tag.clone(), instance_state::RUNNING).await;

    // Spot: the lifecycle comes back on the fleet answer and the instance.
    let spot = env
        .wire
        .ec2
        .create_fleet(fleet(&env, "spot"))
        .await
        .unwrap();
    assert_eq!(spot.instances[0].lifecycle, "spot");
    let spot_id = spot.instances[0].instance_ids[0].clone();
    let spot_input = DescribeInstancesInput {
        instance_ids: vec![spot_id],
        ..Default::default()
    };
    let described = env
        .wire
        .ec2
        .describe_instances(spot_input.clone())
        .await
        .unwrap();
    assert_eq!(described[0].instance_lifecycle.as_deref(), Some("spot"));
    assert_eq!(
        described,
        env.sim.describe_instances(spot_input).await.unwrap()
    );

    env.wire
        .ec2
        .create_tags(CreateTagsInput {
            resources: vec![id.clone()],
            tags: vec![
                Tag::new("karpenter.sh/registered", "true"),
                Tag::new("Name", "n & m"),
            ],
        })
        .await
        .unwrap();
    let tagged = env.sim.describe_instances(by_id.clone()).await.unwrap();
    assert!(
        tagged[0]
            .tags
            .contains(&Tag::new("karpenter.sh/registered", "true"))
    );
    assert!(tagged[0].tags.contains(&Tag::new("Name", "n & m")));
    same(&env, by_id.clone(), instance_state::RUNNING).await;

    let changes = env
        .wire
        .ec2
        .terminate_instances(vec![id.clone()])
        .await
        .unwrap();
    assert_eq!(
        changes,
        [InstanceStateChange {
            instance_id: id.clone(),
            previous_state: instance_state::RUNNING.to_string(),
            current_state: instance_state::SHUTTING_DOWN.to_string(),
        }]
    );
    same(&env, by_id, instance_state::SHUTTING_DOWN).await;

    let unknown = env
        .wire
        .ec2
        .describe_instances(DescribeInstancesInput {
            instance_ids: vec!["i-00000000000000000".to_string()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code, codes::INSTANCE_ID_NOT_FOUND);
    let bad_tag = env
        .wire
        .ec2
        .create_tags(CreateTagsInput {
            resources: vec!["vol-1".to_string()],
            tags: vec![Tag::new("a", "b")],
        })
        .await
        .unwrap_err();
    assert_eq!(bad_tag.code, "InvalidID");
}

/// DescribeInstanceStatus through the SDK adapter and the wire reads back exactly what the
/// account reports directly: a running instance's passing checks, a failed system check with
/// the time it began, a scheduled event; and the three requests of Karpenter's instance status
/// provider each find their instance.
#[tokio::test]
async fn instance_statuses_read_the_same_through_the_wire() {
    use driftwood_aws::interruption::instance_status::{Category, list_unhealthy, requests};
    use driftwood_aws::ports::DescribeInstanceStatusInput;
    use driftwood_cloud::Clock as _;
    use driftwood_sim_aws::faults::Impairment;
    let env = env().await;
    env.wire
        .ec2
        .create_launch_template(CreateLaunchTemplateInput {
            launch_template_name: "lt-fleet".to_string(),
            launch_template_data: full_data(&env),
            tag_specifications: vec![],
        })
        .await
        .unwrap();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let out = env
            .sim
            .create_fleet(fleet(&env, "on-demand"))
            .await
            .unwrap();
        ids.push(out.instances[0].instance_ids[0].clone());
    }
    env.advance(SignedDuration::from_secs(31));
    let failed_at = env.clock.now();
    env.sim.set_impairment(
        &ids[0],
        Some(Impairment {
            system_check_failed_since: Some(failed_at),
            ..Impairment::default()
        }),
    );
    env.sim.set_impairment(
        &ids[1],
        Some(Impairment {
            scheduled_event: Some("instance-retirement".to_string()),
            ..Impairment::default()
        }),
    );
    let mut inputs = vec![DescribeInstanceStatusInput::default()];
    inputs.extend(requests());
    for input in inputs {
        let direct = env
            .sim
            .describe_instance_status(input.clone())
            .await
            .unwrap();
        let through = env
            .wire
            .ec2
            .describe_instance_status(input.clone())
            .await
            .unwrap();
        assert_eq!(through, direct, "{input:?}");
    }
    let all = env
        .sim
        .describe_instance_status(DescribeInstanceStatusInput::default())
        .await
        .unwrap();
    assert_eq!(all.len(), 3);
    let [instance_impaired, system_impaired, scheduled] = requests();
    let found = |input| {
        let sim = env.sim.clone();
        async move {
            sim.describe_instance_status(input)
                .await
                .unwrap()
                .into_iter()
                .map(|s| s.instance_id)
                .collect::<Vec<_>>()
        }
    };
    assert!(
        found(instance_impaired).await.is_empty(),
        "every instance check passes"
    );
    assert_eq!(found(system_impaired).await, vec![ids[0].clone()]);
    assert_eq!(found(scheduled).await, vec![ids[1].clone()]);
    // Read as the provider reads it: the event at once; the failed check after two minutes.
    let names = |u: Vec<driftwood_aws::interruption::instance_status::UnhealthyInstance>| {
        u.into_iter()
            .map(|u| (u.instance_id, u.categories.into_iter().collect::<Vec<_>>()))
            .collect::<Vec<_>>()
    };
    let now = list_unhealthy(env.wire.ec2.as_ref(), env.clock.now())
        .await
        .unwrap();
    assert_eq!(
        names(now),
        vec![(ids[1].clone(), vec![Category::EventStatus])]
    );
    env.advance(SignedDuration::from_secs(120));
    let mut later = names(
        list_unhealthy(env.wire.ec2.as_ref(), env.clock.now())
            .await
            .unwrap(),
    );
    later.sort();
    let mut expected = vec![
        (ids[0].clone(), vec![Category::SystemStatus]),
        (ids[1].clone(), vec![Category::EventStatus]),
    ];
    expected.sort();
    assert_eq!(later, expected);
}
