//! The account behaves like real AWS by default: DescribeInstances is eventually consistent,
//! the documented request rate limits apply, every call takes its latency, and calls are
//! counted per action; `without_realism` turns all of it off.

use std::sync::Arc;
use std::time::Duration;

use driftwood_aws::ports::{
    AwsError, CreateFleetInput, CreateLaunchTemplateInput, DescribeImagesInput,
    DescribeInstancesInput, DescribeLaunchTemplatesInput, DescribeSubnetsInput, Ec2Api, Filter,
    FleetLaunchTemplateConfig, FleetOverride, GetParameterInput, IamApi, LaunchTemplateData,
    SsmApi, Tag, TagSpecification, codes, instance_state,
};
use driftwood_cloud::ManualClock;
use driftwood_sim_aws::rate_limits::THROTTLING_EXCEPTION;
use driftwood_sim_aws::{CallCount, MachineSource, Realism, SimAws, SimConfig};
use jiff::SignedDuration;

use crate::common::*;

/// Launches `capacity` instances tagged `test=tag` straight through the EC2 port (a launch
/// template, then an instant fleet over every subnet and a few types); returns their ids.
async fn launch_n(sim: &SimAws, tag: &str, capacity: i64) -> Result<Vec<String>, AwsError> {
    let image_id = sim
        .image_id_by_name("amazon-eks-node-1.29-v20251120")
        .unwrap();
    let name = format!("lt-{tag}");
    sim.create_launch_template(CreateLaunchTemplateInput {
        launch_template_name: name.clone(),
        launch_template_data: LaunchTemplateData {
            image_id,
            ..Default::default()
        },
        tag_specifications: Vec::new(),
    })
    .await?;
    let overrides = sim
        .subnets()
        .iter()
        .flat_map(|s| {
            ["m5.large", "c5.large", "m6i.large"].map(|t| FleetOverride {
                instance_type: t.to_string(),
                subnet_id: s.subnet_id.clone(),
                availability_zone: s.availability_zone.clone(),
                ..Default::default()
            })
        })
        .collect();
    let out = sim
        .create_fleet(CreateFleetInput {
            type_: "instant".to_string(),
            launch_template_configs: vec![FleetLaunchTemplateConfig {
                launch_template_name: name,
                version: "$Latest".to_string(),
                overrides,
            }],
            total_target_capacity: capacity,
            default_target_capacity_type: "on-demand".to_string(),
            tag_specifications: vec![TagSpecification {
                resource_type: "instance".to_string(),
                tags: vec![Tag::new("test", tag)],
            }],
            ..Default::default()
        })
        .await?;
    Ok(out
        .instances
        .into_iter()
        .flat_map(|i| i.instance_ids)
        .collect())
}

async fn launch(sim: &SimAws, tag: &str) -> String {
    launch_n(sim, tag, 1).await.unwrap().remove(0)
}

fn by_id(id: &str) -> DescribeInstancesInput {
    DescribeInstancesInput {
        instance_ids: vec![id.to_string()],
        filters: Vec::new(),
    }
}

fn by_tag(tag: &str) -> DescribeInstancesInput {
    DescribeInstancesInput {
        instance_ids: Vec::new(),
        filters: vec![Filter::new("tag:test", [tag])],
    }
}

#[tokio::test(start_paused = true)]
async fn a_launched_instance_is_described_only_after_its_visibility_delay() {
    let env = env();
    let id = launch(&env.sim, "a").await;
    assert!(
        env.sim.instances().iter().any(|i| i.instance_id == id),
        "the account itself knows it at once"
    );
    let mut waited_ms = 0;
    loop {
        match env.sim.describe_instances(by_id(&id)).await {
            Err(e) => {
                assert_eq!(e.code, codes::INSTANCE_ID_NOT_FOUND);
                assert!(
                    env.sim
                        .describe_instances(by_tag("a"))
                        .await
                        .unwrap()
                        .is_empty()
                );
            }
            Ok(found) => {
                assert_eq!(found.len(), 1);
                assert_eq!(found[0].instance_id, id);
                assert_eq!(found[0].state, instance_state::PENDING);
                let listed = env.sim.describe_instances(by_tag("a")).await.unwrap();
                assert_eq!(listed.len(), 1, "visible by filter at the same moment");
                break;
            }
        }
        assert!(waited_ms < 5_000, "still invisible after {waited_ms} ms");
        env.clock.advance(SignedDuration::from_millis(250));
        waited_ms += 250;
    }
    assert!(waited_ms >= 1_000, "visible after only {waited_ms} ms");
}

#[tokio::test(start_paused = true)]
async fn kubelets_see_a_running_machine_before_describe_does() {
    let clock = Arc::new(ManualClock::new(start()));
    let mut config = SimConfig::new(CLUSTER, 42).with_realism(Realism {
        visibility_delay: (SignedDuration::from_secs(5), SignedDuration::from_secs(5)),
        ..Realism::aws()
    });
    config.launch_delay = SignedDuration::ZERO;
    let sim = SimAws::new(config, clock.clone());
    let id = launch(&sim, "k").await;
    let machines = sim.running_machines();
    assert_eq!(machines.len(), 1);
    assert_eq!(machines[0].instance_id, id);
    assert!(sim.describe_instances(by_id(&id)).await.is_err());
    clock.advance(SignedDuration::from_secs(5));
    let found = sim.describe_instances(by_id(&id)).await.unwrap();
    assert_eq!(found[0].state, instance_state::RUNNING);
}

#[tokio::test(start_paused = true)]
async fn a_terminated_instance_shuts_down_then_stays_terminated_for_an_hour_then_vanishes() {
    let env = env();
    let id = launch(&env.sim, "t").await;
    env.settle();
    let change = env.sim.terminate_instances(vec![id.clone()]).await.unwrap();
    assert_eq!(change[0].current_state, instance_state::SHUTTING_DOWN);
    let state = |list: Vec<driftwood_aws::ports::Instance>| list[0].state.clone();
    assert_eq!(
        state(env.sim.describe_instances(by_id(&id)).await.unwrap()),
        instance_state::SHUTTING_DOWN
    );
    env.advance(29);
    assert_eq!(
        state(env.sim.describe_instances(by_id(&id)).await.unwrap()),
        instance_state::SHUTTING_DOWN
    );
    env.advance(1);
    assert_eq!(
        state(env.sim.describe_instances(by_id(&id)).await.unwrap()),
        instance_state::TERMINATED
    );
    env.advance(3599);
    assert_eq!(
        state(env.sim.describe_instances(by_tag("t")).await.unwrap()),
        instance_state::TERMINATED,
        "still listed just under an hour later"
    );
    env.advance(1);
    assert_eq!(
        env.sim
            .describe_instances(by_id(&id))
            .await
            .unwrap_err()
            .code,
        codes::INSTANCE_ID_NOT_FOUND
    );
    assert!(
        env.sim
            .describe_instances(by_tag("t"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(start_paused = true)]
async fn a_describe_action_bursts_100_then_is_throttled_and_refills_20_a_second() {
    let env = env();
    let subnets = || env.sim.describe_subnets(DescribeSubnetsInput::default());
    for _ in 0..100 {
        subnets().await.unwrap();
    }
    let refused = subnets().await.unwrap_err();
    assert_eq!(refused.code, codes::REQUEST_LIMIT_EXCEEDED);
    assert!(refused.is_throttled());
    // Each API has its own bucket.
    env.sim
        .describe_images(DescribeImagesInput {
            filters: vec![Filter::new("name", ["amazon-eks-node-1.29-v20251120"])],
            ..Default::default()
        })
        .await
        .unwrap();
    env.advance(1);
    for _ in 0..20 {
        subnets().await.unwrap();
    }
    assert!(subnets().await.unwrap_err().is_throttled());
    assert_eq!(
        env.sim.api_calls()["DescribeSubnets"],
        CallCount {
            calls: 122,
            throttled: 2
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_mutating_action_has_its_own_smaller_bucket() {
    let env = env();
    for _ in 0..100 {
        env.sim
            .describe_launch_templates(DescribeLaunchTemplatesInput::default())
            .await
            .unwrap();
    }
    assert!(
        env.sim
            .describe_launch_templates(DescribeLaunchTemplatesInput::default())
            .await
            .unwrap_err()
            .is_throttled()
    );
    // Refused or not, every request takes a token: 50 deletes of missing templates.
    for i in 0..50 {
        let e = env
            .sim
            .delete_launch_template(&format!("missing-{i}"))
            .await
            .unwrap_err();
        assert_eq!(e.code, codes::LAUNCH_TEMPLATE_NAME_NOT_FOUND);
    }
    let e = env
        .sim
        .delete_launch_template("one-more")
        .await
        .unwrap_err();
    assert_eq!(e.code, codes::REQUEST_LIMIT_EXCEEDED);
    env.advance(1);
    for i in 0..5 {
        let e = env
            .sim
            .delete_launch_template(&format!("later-{i}"))
            .await
            .unwrap_err();
        assert_eq!(e.code, codes::LAUNCH_TEMPLATE_NAME_NOT_FOUND, "5 refilled");
    }
    assert!(
        env.sim
            .delete_launch_template("sixth")
            .await
            .unwrap_err()
            .is_throttled()
    );
}

#[tokio::test(start_paused = true)]
async fn unfiltered_describe_instances_has_the_smaller_bucket() {
    let env = env();
    for _ in 0..50 {
        env.sim
            .describe_instances(DescribeInstancesInput::default())
            .await
            .unwrap();
    }
    assert!(
        env.sim
            .describe_instances(DescribeInstancesInput::default())
            .await
            .unwrap_err()
            .is_throttled()
    );
    assert!(
        env.sim.describe_instances(by_tag("x")).await.is_ok(),
        "a filtered call draws on the larger bucket"
    );
}

#[tokio::test(start_paused = true)]
async fn ssm_and_iam_throttle_with_their_own_codes() {
    let env = env();
    let get = || {
        env.sim.get_parameter(GetParameterInput {
            name: "/aws/service/eks/optimized-ami/1.29/amazon-linux-2/recommended/image_id"
                .to_string(),
            with_decryption: false,
        })
    };
    for _ in 0..40 {
        get().await.unwrap();
    }
    assert_eq!(get().await.unwrap_err().code, THROTTLING_EXCEPTION);
    for _ in 0..20 {
        let e = env.sim.get_instance_profile("none").await.unwrap_err();
        assert_eq!(e.code, codes::NO_SUCH_ENTITY);
    }
    let e = env.sim.get_instance_profile("none").await.unwrap_err();
    assert_eq!(e.code, codes::THROTTLING);
}

#[tokio::test(start_paused = true)]
async fn a_fleet_past_the_instance_bucket_is_refused_whole() {
    let env = env();
    let e = launch_n(&env.sim, "big", 1001).await.unwrap_err();
    assert_eq!(e.code, codes::REQUEST_LIMIT_EXCEEDED);
    assert!(env.sim.instances().is_empty(), "nothing launched");
    assert_eq!(launch_n(&env.sim, "small", 1).await.unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn faults_are_checked_before_the_rate_limits() {
    let env = env();
    for _ in 0..100 {
        env.sim
            .describe_subnets(DescribeSubnetsInput::default())
            .await
            .unwrap();
    }
    env.sim.inject_error(
        "DescribeSubnets",
        AwsError::new(codes::INTERNAL_ERROR, "boom"),
    );
    let e = env
        .sim
        .describe_subnets(DescribeSubnetsInput::default())
        .await
        .unwrap_err();
    assert_eq!(e.code, codes::INTERNAL_ERROR, "the fault, not the throttle");
    // A faulted call takes no token: a fresh bucket still allows 100 after one.
    env.sim.throttle("DescribeImages", 1);
    assert!(
        env.sim
            .describe_images(DescribeImagesInput::default())
            .await
            .unwrap_err()
            .is_throttled()
    );
    for _ in 0..100 {
        env.sim
            .describe_images(DescribeImagesInput {
                filters: vec![Filter::new("name", ["none"])],
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let calls = env.sim.api_calls();
    assert_eq!(
        calls["DescribeSubnets"],
        CallCount {
            calls: 101,
            throttled: 0
        },
        "an injected error is no throttle"
    );
    assert_eq!(
        calls["DescribeImages"],
        CallCount {
            calls: 101,
            throttled: 1
        }
    );
}

#[tokio::test(start_paused = true)]
async fn calls_take_their_latency_on_tokio_time() {
    let env = env();
    let t = tokio::time::Instant::now();
    env.sim
        .describe_subnets(DescribeSubnetsInput::default())
        .await
        .unwrap();
    let describe = t.elapsed();
    assert!(
        describe >= Duration::from_millis(20) && describe <= Duration::from_millis(80),
        "{describe:?}"
    );
    let t = tokio::time::Instant::now();
    launch(&env.sim, "l").await;
    let launch_time = t.elapsed();
    // CreateLaunchTemplate 50–150 ms, then CreateFleet 300–800 ms.
    assert!(
        launch_time >= Duration::from_millis(350) && launch_time <= Duration::from_millis(950),
        "{launch_time:?}"
    );
    assert_eq!(env.sim.fleet_calls(), 1);
    assert_eq!(env.sim.api_calls()["CreateFleet"].calls, 1);
}

#[tokio::test(start_paused = true)]
async fn without_realism_everything_is_instant_consistent_and_unlimited() {
    let env = env_with("1.29", 42, start(), Realism::off());
    assert_eq!(
        SimConfig::new(CLUSTER, 42).without_realism().realism,
        Realism::off()
    );
    let t = tokio::time::Instant::now();
    let id = launch(&env.sim, "off").await;
    assert_eq!(
        env.sim.describe_instances(by_id(&id)).await.unwrap().len(),
        1
    );
    for _ in 0..300 {
        env.sim
            .describe_subnets(DescribeSubnetsInput::default())
            .await
            .unwrap();
    }
    assert_eq!(t.elapsed(), Duration::ZERO);
    assert_eq!(
        env.sim.api_calls()["DescribeSubnets"].calls,
        300,
        "still counted"
    );
    assert_eq!(
        SimConfig::new(CLUSTER, 42).realism,
        Realism::aws(),
        "on by default"
    );
}

/// `driftwood preview` imports another account's instances with their ids; an account with
/// the same seed generates those very ids. A launch must never take one over.
#[tokio::test(start_paused = true)]
async fn a_launch_never_reuses_the_id_of_an_imported_instance() {
    let live = env();
    let taken = launch(&live.sim, "live").await;
    let copy = env();
    let imported = live
        .sim
        .instances()
        .into_iter()
        .find(|i| i.instance_id == taken)
        .unwrap();
    copy.sim.import_instance(imported, None);
    let launched = launch(&copy.sim, "copy").await;
    assert_ne!(launched, taken);
    let ids: Vec<String> = copy
        .sim
        .instances()
        .into_iter()
        .map(|i| i.instance_id)
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    let imported_tags = copy
        .sim
        .instances()
        .into_iter()
        .find(|i| i.instance_id == taken)
        .unwrap()
        .tags;
    assert!(
        imported_tags
            .iter()
            .any(|t| t.key == "test" && t.value == "live")
    );
}

/// An `instance-id` filter is answered by looking the named instances up; what it returns is
/// what a scan with the same filters returns: ids not found (never launched, or launched too
/// recently to be described) are left out without an error, the other filters still apply, and
/// a value with a wildcard is matched against every instance.
#[tokio::test(start_paused = true)]
async fn an_instance_id_filter_finds_what_a_scan_finds() {
    let env = env();
    let ids = launch_n(&env.sim, "f", 6).await.unwrap();
    env.clock.advance(SignedDuration::from_secs(10));
    env.sim
        .terminate_instances(vec![ids[0].clone(), ids[1].clone()])
        .await
        .unwrap();
    let late = launch(&env.sim, "late").await;
    let tagged = || DescribeInstancesInput {
        instance_ids: Vec::new(),
        filters: vec![Filter::new("tag-key", ["test"])],
    };
    let everything = env.sim.describe_instances(tagged()).await.unwrap();
    assert_eq!(everything.len(), 6, "the late one is not described yet");
    let scan = |wanted: &[&str], states: &[&str]| -> Vec<String> {
        everything
            .iter()
            .filter(|i| wanted.contains(&i.instance_id.as_str()))
            .filter(|i| states.is_empty() || states.contains(&i.state.as_str()))
            .map(|i| i.instance_id.clone())
            .collect()
    };
    let named = |values: &[&str], states: &[&str]| {
        let mut filters = vec![
            Filter::new("tag-key", ["test"]),
            Filter::new("instance-id", values.iter().copied()),
        ];
        if !states.is_empty() {
            filters.push(Filter::new("instance-state-name", states.iter().copied()));
        }
        DescribeInstancesInput {
            instance_ids: Vec::new(),
            filters,
        }
    };
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let wanted = [ids[0], ids[2], ids[4], late.as_str(), "i-0123456789abcdef0"];
    let live = [instance_state::PENDING, instance_state::RUNNING];
    for states in [&[][..], &live[..]] {
        let found: Vec<String> = env
            .sim
            .describe_instances(named(&wanted, states))
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.instance_id)
            .collect();
        assert_eq!(found, scan(&wanted, states), "states {states:?}");
    }
    let found = env
        .sim
        .describe_instances(named(&["i-*"], &live))
        .await
        .unwrap();
    assert_eq!(found.len(), 4, "a wildcard value scans: {found:?}");
    assert!(
        env.sim
            .describe_instances(named(&["i-0123456789abcdef0"], &[]))
            .await
            .unwrap()
            .is_empty()
    );
}
