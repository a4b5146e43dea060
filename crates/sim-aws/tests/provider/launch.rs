//! Launch: the cheapest compatible offering, fallback after insufficient capacity, the
//! unavailable-offerings TTL, tags, labels and the NodeClaim fields a launch fills in.

use std::collections::BTreeSet;

use driftwood_api::NodeSelectorRequirementWithMinValues as Req;
use driftwood_api::requirement::OP_IN;
use driftwood_aws::NodeClassSource;
use driftwood_aws::ports::{
    DescribeInstancesInput, DescribeLaunchTemplatesInput, Ec2Api, PricingApi,
};
use driftwood_cloud::{CloudError, CloudProvider, OfferingKey};
use driftwood_scheduling::{InstanceType, Requirements};
use driftwood_sim_aws::MachineSource;

use crate::common::*;

/// Whether the instance type's labels meet `reqs` (each key the type decides).
fn allows(it: &InstanceType, reqs: &[Req]) -> bool {
    it.requirements
        .intersects(&Requirements::from_api(reqs).unwrap())
        .is_ok()
}

/// The cheapest available offering the requirements allow (what launch should pick).
fn cheapest(catalog: &[InstanceType], reqs: &[Req], capacity_type: &str) -> OfferingKey {
    let mut best: Option<(f64, OfferingKey)> = None;
    let zones = Requirements::from_api(reqs).unwrap();
    let zones = zones.get("topology.kubernetes.io/zone");
    for it in catalog.iter().filter(|it| allows(it, reqs)) {
        for o in it.offerings.iter().filter(|o| {
            o.available && o.capacity_type == capacity_type && zones.is_none_or(|z| z.has(&o.zone))
        }) {
            if best.as_ref().is_none_or(|(p, _)| o.price < *p) {
                best = Some((o.price, OfferingKey::new(&it.name, &o.zone, capacity_type)));
            }
        }
    }
    best.unwrap().1
}

async fn walkthrough_env() -> (Env, Vec<String>) {
    walkthrough_env_with(driftwood_sim_aws::Realism::aws()).await
}

async fn walkthrough_env_with(realism: driftwood_sim_aws::Realism) -> (Env, Vec<String>) {
    let env = env_with("1.29", 42, start(), realism);
    let amd = env
        .sim
        .image_id_by_name("amazon-eks-node-1.29-v20251120")
        .unwrap();
    let arm = env
        .sim
        .image_id_by_name("amazon-eks-arm64-node-1.29-v20251120")
        .unwrap();
    env.resolve(class(
        "latest-current-ami",
        vec![id_term(&amd), id_term(&arm)],
        None,
    ))
    .await;
    (env, vec![amd, arm])
}

fn launched_offering(claim: &driftwood_api::NodeClaim) -> OfferingKey {
    let l = claim.metadata.labels.as_ref().unwrap();
    OfferingKey::new(
        &l["node.kubernetes.io/instance-type"],
        &l["topology.kubernetes.io/zone"],
        &l["karpenter.sh/capacity-type"],
    )
}

#[tokio::test(start_paused = true)]
async fn launch_picks_the_cheapest_compatible_offering() {
    let (env, amis) = walkthrough_env().await;
    let catalog = env
        .provider
        .instance_types_for_class("latest-current-ami")
        .await
        .unwrap();
    let reqs = walkthrough_requirements();
    let expected = cheapest(&catalog, &reqs, "spot");

    let launched = env
        .provider
        .create(&claim("nc-1", "latest-current-ami", reqs, "1"))
        .await
        .unwrap();
    assert_eq!(launched_offering(&launched), expected);
    let labels = launched.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["kubernetes.io/arch"], "amd64");
    assert_eq!(
        labels["intent"], "latest-current-ami",
        "claim labels are kept"
    );
    assert!(
        ["4", "8", "16", "32", "48", "64"]
            .contains(&labels["karpenter.k8s.aws/instance-cpu"].as_str())
    );
    let status = launched.status.as_ref().unwrap();
    assert_eq!(
        status.image_id.as_deref(),
        Some(amis[0].as_str()),
        "the amd64 AMI"
    );
    let pid = status.provider_id.clone().unwrap();
    assert!(
        pid.starts_with(&format!("aws:///{}/i-", expected.zone)),
        "{pid}"
    );
    assert!(status.capacity.contains_key("cpu") && status.allocatable.contains_key("pods"));
    let ann = launched.metadata.annotations.as_ref().unwrap();
    let class = env.classes.node_class("latest-current-ami").unwrap();
    let hashes = driftwood_api::hash::ec2nodeclass_hashes(
        &class,
        &env.provider.settings().cluster_ca_bundle,
    );
    assert_eq!(ann["karpenter.k8s.aws/ec2nodeclass-hash"], hashes.hash);
    assert_eq!(
        ann["karpenter.k8s.aws/ec2nodeclass-hash-version"],
        driftwood_api::hash::EC2NODECLASS_HASH_VERSION
    );
    assert_eq!(
        ann["driftwood.sh/ec2nodeclass-field-hashes"],
        hashes.fields_annotation()
    );

    let instance_id = pid.rsplit('/').next().unwrap().to_string();
    let describe = || {
        env.sim.describe_instances(DescribeInstancesInput {
            instance_ids: vec![instance_id.clone()],
            filters: Vec::new(),
        })
    };
    // EC2 is eventually consistent: the id CreateFleet returned is not found at first.
    assert!(describe().await.unwrap_err().is_not_found());
    env.settle();
    let inst = describe().await.unwrap().remove(0);
    let tag = |k: &str| {
        inst.tags
            .iter()
            .find(|t| t.key == k)
            .map(|t| t.value.clone())
    };
    assert_eq!(
        tag("karpenter.sh/nodepool").as_deref(),
        Some("latest-current-ami")
    );
    // Karpenter's launch tags name nothing of the one NodeClaim: tagged at registration.
    assert_eq!(tag("karpenter.sh/nodeclaim"), None);
    assert_eq!(tag("Name"), None);
    assert_eq!(
        tag("karpenter.k8s.aws/ec2nodeclass").as_deref(),
        Some("latest-current-ami")
    );
    assert_eq!(tag("kubernetes.io/cluster/demo").as_deref(), Some("owned"));
    assert_eq!(tag("eks:eks-cluster-name").as_deref(), Some("demo"));
    assert_eq!(inst.state, "pending");
    assert_eq!(inst.instance_lifecycle.as_deref(), Some("spot"));

    let lts = env
        .sim
        .describe_launch_templates(DescribeLaunchTemplatesInput::default())
        .await
        .unwrap();
    assert_eq!(
        lts.len(),
        1,
        "one launch template for the one AMI group launched"
    );
    assert!(
        lts[0]
            .launch_template_name
            .starts_with("karpenter.k8s.aws/")
    );
    assert!(
        lts[0]
            .data
            .user_data
            .contains("/etc/eks/bootstrap.sh 'demo'"),
        "AL2 inferred from the ids"
    );
    assert!(
        lts[0]
            .data
            .user_data
            .contains("karpenter.sh/unregistered=:NoExecute")
    );

    // A second launch with the same configuration reuses the template.
    env.provider
        .create(&claim(
            "nc-2",
            "latest-current-ami",
            walkthrough_requirements(),
            "1",
        ))
        .await
        .unwrap();
    let lts = env
        .sim
        .describe_launch_templates(DescribeLaunchTemplatesInput::default())
        .await
        .unwrap();
    assert_eq!(
        lts.len(),
        1,
        "same AMI and configuration: the template is reused"
    );
}

#[tokio::test(start_paused = true)]
async fn insufficient_capacity_falls_back_and_marks_the_offering_for_three_minutes() {
    let (env, _) = walkthrough_env().await;
    let reqs = walkthrough_requirements();
    let catalog = env
        .provider
        .instance_types_for_class("latest-current-ami")
        .await
        .unwrap();
    let first = cheapest(&catalog, &reqs, "spot");
    env.sim
        .inject_insufficient_capacity(&first.instance_type, &first.zone, "spot");

    let launched = env
        .provider
        .create(&claim("nc-1", "latest-current-ami", reqs.clone(), "1"))
        .await
        .unwrap();
    let got = launched_offering(&launched);
    assert_ne!(got, first);
    assert_eq!(
        env.provider.unavailable_offerings(),
        std::slice::from_ref(&first)
    );

    // The catalog shows it unavailable; the next cheapest is what was launched.
    let catalog = env
        .provider
        .instance_types_for_class("latest-current-ami")
        .await
        .unwrap();
    assert_eq!(cheapest(&catalog, &reqs, "spot"), got);
    let it = catalog
        .iter()
        .find(|t| t.name == first.instance_type)
        .unwrap();
    assert!(
        !it.offerings
            .iter()
            .find(|o| o.zone == first.zone && o.capacity_type == "spot")
            .unwrap()
            .available
    );

    env.advance(180);
    assert!(env.provider.unavailable_offerings().is_empty());
    let catalog = env
        .provider
        .instance_types_for_class("latest-current-ami")
        .await
        .unwrap();
    assert_eq!(cheapest(&catalog, &reqs, "spot"), first);
}

#[tokio::test(start_paused = true)]
async fn no_capacity_anywhere_is_insufficient_capacity_naming_the_offerings() {
    let (env, _) = walkthrough_env().await;
    let reqs = vec![
        Req::new("node.kubernetes.io/instance-type", OP_IN, &["m5.xlarge"]),
        Req::new("topology.kubernetes.io/zone", OP_IN, &["us-west-2b"]),
        Req::new("karpenter.sh/capacity-type", OP_IN, &["on-demand"]),
    ];
    env.sim
        .inject_insufficient_capacity("m5.xlarge", "us-west-2b", "on-demand");
    let err = env
        .provider
        .create(&claim("nc-1", "latest-current-ami", reqs.clone(), "1"))
        .await
        .unwrap_err();
    let expected = OfferingKey::new("m5.xlarge", "us-west-2b", "on-demand");
    match &err {
        CloudError::InsufficientCapacity { offerings, .. } => {
            assert_eq!(offerings, std::slice::from_ref(&expected))
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("m5.xlarge/us-west-2b/on-demand"));
    // While marked, the offering is not even tried.
    let calls = env.sim.fleet_calls();
    let err = env
        .provider
        .create(&claim("nc-2", "latest-current-ami", reqs, "1"))
        .await
        .unwrap_err();
    assert!(err.is_insufficient_capacity());
    assert_eq!(env.sim.fleet_calls(), calls);
}

/// The instances shutting down or terminated.
fn going(env: &Env) -> usize {
    env.sim
        .instances()
        .iter()
        .filter(|i| i.state == "shutting-down" || i.state == "terminated")
        .count()
}

/// How many `action` calls the simulated account has answered or throttled.
fn calls(env: &Env, action: &str) -> u64 {
    env.sim.api_calls().get(action).map_or(0, |c| c.calls)
}

/// The provider's batcher histograms, as Prometheus text (`size_*`, `window_*`).
fn batcher_histograms(env: &Env) -> String {
    let metrics = env.provider.batcher_metrics();
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register("size", "", metrics.size.clone());
    registry.register("window", "", metrics.window.clone());
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    text
}

/// Karpenter's TerminateInstances batcher suite: "should batch input into a single call"
/// (three deletes at once are one call, each caller answered for its instance), "should batch
/// input correctly when receiving multiple calls with the same instance id", and "should handle
/// partial terminations on batched call and recover with individual requests" (an instance EC2
/// does not know fails the whole call; each is then terminated on its own, so the unknown one
/// alone is NotFound). The window and size histograms observe each batch.
#[tokio::test(start_paused = true)]
async fn terminations_made_together_go_out_as_one_call() {
    let (env, _) = walkthrough_env().await;
    let reqs = walkthrough_requirements();
    let mut launched = Vec::new();
    for i in 0..5 {
        launched.push(
            env.provider
                .create(&claim(
                    &format!("nc-{i}"),
                    "latest-current-ami",
                    reqs.clone(),
                    "1",
                ))
                .await
                .unwrap(),
        );
    }
    env.settle();
    let before = calls(&env, "TerminateInstances");
    let results = futures::future::join_all([
        env.provider.delete(&launched[0]),
        env.provider.delete(&launched[1]),
        env.provider.delete(&launched[2]),
        env.provider.delete(&launched[2]),
    ])
    .await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(
        calls(&env, "TerminateInstances"),
        before + 1,
        "one call for the batch"
    );
    assert_eq!(going(&env), 3);

    // An instance EC2 does not know, with two it does.
    let mut unknown = launched[3].clone();
    unknown.status.as_mut().unwrap().provider_id =
        Some("aws:///us-west-2a/i-0000000000unknown".into());
    let before = calls(&env, "TerminateInstances");
    let results = futures::future::join_all([
        env.provider.delete(&launched[3]),
        env.provider.delete(&unknown),
        env.provider.delete(&launched[4]),
    ])
    .await;
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    assert!(
        results[1].as_ref().is_err_and(|e| e.is_not_found()),
        "{results:?}"
    );
    assert_eq!(
        calls(&env, "TerminateInstances"),
        before + 4,
        "the batch, then one each"
    );
    assert!(env.sim.running_machines().is_empty());

    let text = batcher_histograms(&env);
    assert!(
        text.contains("size_sum{batcher=\"terminate_instances\"} 7.0")
            && text.contains("size_count{batcher=\"terminate_instances\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("window_count{batcher=\"terminate_instances\"} 2"),
        "{text}"
    );
}

/// Karpenter's DescribeInstances batcher suite, "should batch input into a single call" and
/// "should batch input correctly when receiving multiple calls with the same instance id",
/// through the provider's `get`: four lookups of three instances at once, and one of an
/// instance EC2 does not know, are one DescribeInstances (an `instance-id` filter: the unknown
/// one is left out and is NotFound for its caller alone, with no call of its own — Karpenter's
/// batcher names ids, fails whole and describes each again); the batch-size histogram observes
/// the batch.
#[tokio::test(start_paused = true)]
async fn descriptions_made_together_go_out_as_one_call() {
    let (env, _) = walkthrough_env().await;
    let reqs = walkthrough_requirements();
    let mut ids = Vec::new();
    for i in 0..3 {
        let launched = env
            .provider
            .create(&claim(
                &format!("nc-{i}"),
                "latest-current-ami",
                reqs.clone(),
                "1",
            ))
            .await
            .unwrap();
        ids.push(launched.status.unwrap().provider_id.unwrap());
    }
    env.settle();
    let unknown = "aws:///us-west-2a/i-0000000000unknown".to_string();
    let before = calls(&env, "DescribeInstances");
    let results = futures::future::join_all([
        env.provider.get(&ids[0]),
        env.provider.get(&ids[1]),
        env.provider.get(&ids[2]),
        env.provider.get(&ids[2]),
        env.provider.get(&unknown),
    ])
    .await;
    for (result, id) in results.iter().zip([&ids[0], &ids[1], &ids[2], &ids[2]]) {
        let claim = result.as_ref().unwrap();
        assert_eq!(
            claim.status.as_ref().unwrap().provider_id.as_ref(),
            Some(id)
        );
    }
    assert!(
        results[4].as_ref().is_err_and(|e| e.is_not_found()),
        "{:?}",
        results[4]
    );
    assert_eq!(
        calls(&env, "DescribeInstances"),
        before + 1,
        "one call for the batch"
    );
    let text = batcher_histograms(&env);
    assert!(
        text.contains("size_sum{batcher=\"describe_instances\"} 5.0")
            && text.contains("size_count{batcher=\"describe_instances\"} 1"),
        "{text}"
    );
}

/// Karpenter's CreateFleet batcher suite, "should batch the same inputs into a single call"
/// and "should batch different inputs into multiple calls", through the provider: five
/// NodeClaims of one pool launched together are one CreateFleet (four in one zone and one in
/// another are two), each NodeClaim gets an instance of its own in the cheapest pool, and the
/// batch-size histogram observes each call.
#[tokio::test(start_paused = true)]
async fn launches_made_together_go_out_as_one_fleet() {
    let (env, _) = walkthrough_env().await;
    let mut reqs = walkthrough_requirements();
    reqs.push(Req::new(
        "karpenter.sh/capacity-type",
        OP_IN,
        &["on-demand"],
    ));
    // The launch template exists (a first launch made it): the five reach CreateFleet at once.
    env.provider
        .create(&claim("warm", "latest-current-ami", reqs.clone(), "1"))
        .await
        .unwrap();
    let before = calls(&env, "CreateFleet");
    let claims: Vec<_> = (0..5)
        .map(|i| claim(&format!("nc-{i}"), "latest-current-ami", reqs.clone(), "1"))
        .collect();
    let launched = futures::future::join_all(claims.iter().map(|c| env.provider.create(c))).await;
    let launched: Vec<_> = launched.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        calls(&env, "CreateFleet"),
        before + 1,
        "one call for the five"
    );
    let ids: std::collections::BTreeSet<_> = launched
        .iter()
        .map(|c| c.status.as_ref().unwrap().provider_id.clone().unwrap())
        .collect();
    assert_eq!(ids.len(), 5, "an instance each: {ids:?}");
    let offerings: std::collections::BTreeSet<_> = launched.iter().map(launched_offering).collect();
    let catalog = env
        .provider
        .instance_types_for_class("latest-current-ami")
        .await
        .unwrap();
    assert_eq!(
        offerings.into_iter().collect::<Vec<_>>(),
        [cheapest(&catalog, &reqs, "on-demand")],
        "the fleet's lowest-price pool takes them all"
    );

    let zone = |z: &str| {
        let mut r = reqs.clone();
        r.push(Req::new("topology.kubernetes.io/zone", OP_IN, &[z]));
        r
    };
    let before = calls(&env, "CreateFleet");
    let mut zonal: Vec<_> = (0..4)
        .map(|i| {
            claim(
                &format!("a-{i}"),
                "latest-current-ami",
                zone("us-west-2a"),
                "1",
            )
        })
        .collect();
    zonal.push(claim("b-0", "latest-current-ami", zone("us-west-2b"), "1"));
    let launched = futures::future::join_all(zonal.iter().map(|c| env.provider.create(c))).await;
    let zones: Vec<String> = launched
        .into_iter()
        .map(|c| c.unwrap().metadata.labels.unwrap()["topology.kubernetes.io/zone"].clone())
        .collect();
    assert_eq!(
        zones,
        [
            "us-west-2a",
            "us-west-2a",
            "us-west-2a",
            "us-west-2a",
            "us-west-2b"
        ]
    );
    assert_eq!(
        calls(&env, "CreateFleet"),
        before + 2,
        "one call per distinct request"
    );

    let text = batcher_histograms(&env);
    assert!(
        text.contains("size_sum{batcher=\"create_fleet\"} 11.0"),
        "{text}"
    );
}

/// Launches that need a launch template not known yet make sure of it one at a time (as
/// Karpenter's launch-template provider holds its lock): twenty launched together describe and
/// create it once, instead of twenty DescribeLaunchTemplates at once.
#[tokio::test(start_paused = true)]
async fn a_wave_of_launches_makes_sure_of_a_new_template_once() {
    let (env, _) = walkthrough_env().await;
    let calls = |action: &str| calls(&env, action);
    let claims: Vec<_> = (0..20)
        .map(|i| {
            claim(
                &format!("nc-{i}"),
                "latest-current-ami",
                walkthrough_requirements(),
                "1",
            )
        })
        .collect();
    let launched = futures::future::join_all(claims.iter().map(|c| env.provider.create(c))).await;
    assert!(launched.iter().all(Result::is_ok), "{launched:?}");
    assert_eq!(calls("DescribeLaunchTemplates"), 1);
    assert_eq!(calls("CreateLaunchTemplate"), 1);
}

/// Karpenter's tagging suite, "should tag taggable instances" (each entry: the instance
/// already has some of the tags, set by someone else, which are kept; the rest are added) and
/// "should gracefully handle missing instance".
#[tokio::test(start_paused = true)]
async fn registration_tags_fill_in_what_the_instance_lacks() {
    use driftwood_aws::ports::{CreateTagsInput, Tag};
    let (env, _) = walkthrough_env().await;
    let entries: [&[&str]; 7] = [
        &["Name", "eks:eks-cluster-name"],
        &["Name", "karpenter.sh/nodeclaim"],
        &["karpenter.sh/nodeclaim", "eks:eks-cluster-name"],
        &["Name"],
        &["karpenter.sh/nodeclaim"],
        &["eks:eks-cluster-name"],
        &["karpenter.sh/nodeclaim", "eks:eks-cluster-name", "Name"],
    ];
    for (i, custom) in entries.iter().enumerate() {
        let name = format!("nc-{i}");
        let mut launched = env
            .provider
            .create(&claim(
                &name,
                "latest-current-ami",
                walkthrough_requirements(),
                "1",
            ))
            .await
            .unwrap();
        env.settle();
        let pid = launched
            .status
            .as_ref()
            .unwrap()
            .provider_id
            .clone()
            .unwrap();
        let id = pid.rsplit('/').next().unwrap().to_string();
        if !custom.is_empty() {
            env.sim
                .create_tags(CreateTagsInput {
                    resources: vec![id.clone()],
                    tags: custom.iter().map(|k| Tag::new(*k, "custom-tag")).collect(),
                })
                .await
                .unwrap();
        }
        let before = calls(&env, "CreateTags");
        launched.status.as_mut().unwrap().node_name = Some(format!("ip-10-0-0-{i}.ec2.internal"));
        env.provider.tag_instance(&launched).await.unwrap();
        let after = calls(&env, "CreateTags");
        // eks:eks-cluster-name is a launch tag already: CreateTags only for the other two.
        let lacks = ["Name", "karpenter.sh/nodeclaim"]
            .iter()
            .any(|k| !custom.contains(k));
        assert_eq!(after - before, u64::from(lacks), "{custom:?}");
        let inst = env
            .sim
            .describe_instances(DescribeInstancesInput {
                instance_ids: vec![id],
                filters: Vec::new(),
            })
            .await
            .unwrap()
            .remove(0);
        let tag = |k: &str| {
            inst.tags
                .iter()
                .find(|t| t.key == k)
                .map(|t| t.value.clone())
        };
        for (key, wanted) in [
            ("Name", format!("ip-10-0-0-{i}.ec2.internal")),
            ("karpenter.sh/nodeclaim", name.clone()),
            ("eks:eks-cluster-name", "demo".to_string()),
        ] {
            let wanted = if custom.contains(&key) {
                "custom-tag".to_string()
            } else {
                wanted
            };
            assert_eq!(tag(key), Some(wanted), "{custom:?}: {key}");
        }
        // The instance gone: NotFound, nothing tagged.
        if i == 0 {
            env.provider.delete(&launched).await.unwrap();
            env.settle();
            let gone = env.provider.tag_instance(&launched).await;
            assert!(gone.is_err_and(|e| e.is_not_found()));
        }
    }
}

/// Karpenter's instance provider suite, "should emit a zone-dimensioned launch failure metric
/// for each CreateFleet offering error": each offering refused counts once by its zone, the
/// zone's ID (from the class's subnets, as the error does not carry it), the capacity type
/// and Karpenter's reason (a capacity error is no case of its own: LaunchFailed); and "should
/// emit a zone-dimensioned termination failure metric when TerminateInstances errors".
#[tokio::test(start_paused = true)]
async fn failed_launches_and_terminations_are_counted_by_zone() {
    use driftwood_aws::failure_counts::{LaunchFailure, TerminationFailure};
    let (env, _) = walkthrough_env().await;
    let reqs = vec![
        Req::new("node.kubernetes.io/instance-type", OP_IN, &["m5.xlarge"]),
        Req::new(
            "topology.kubernetes.io/zone",
            OP_IN,
            &["us-west-2b", "us-west-2c"],
        ),
        Req::new("karpenter.sh/capacity-type", OP_IN, &["on-demand"]),
    ];
    env.sim
        .inject_insufficient_capacity("m5.xlarge", "us-west-2b", "on-demand");
    let launched = env
        .provider
        .create(&claim("nc-1", "latest-current-ami", reqs, "1"))
        .await
        .unwrap();
    let counts = env.provider.failure_counts();
    assert_eq!(
        counts.launches(),
        [(
            LaunchFailure {
                zone: "us-west-2b".into(),
                zone_id: "usw2-az2".into(),
                capacity_type: "on-demand".into(),
                reason: "LaunchFailed",
            },
            1
        )]
    );
    assert!(counts.terminations().is_empty());
    // The batched call fails, and so does the instance's call of its own: one failure.
    for _ in 0..2 {
        env.sim.inject_error(
            "TerminateInstances",
            driftwood_aws::ports::AwsError::new("RequestLimitExceeded", "Request limit exceeded."),
        );
    }
    env.provider.delete(&launched).await.unwrap_err();
    assert_eq!(
        counts.terminations(),
        [(
            TerminationFailure {
                zone: "us-west-2c".into(),
                zone_id: "usw2-az3".into(),
            },
            1
        )]
    );
    // Terminated on the next try: nothing more counted.
    env.provider.delete(&launched).await.unwrap();
    assert_eq!(counts.terminations()[0].1, 1);
}

#[tokio::test(start_paused = true)]
async fn requests_too_big_for_every_type_launch_nothing() {
    let (env, _) = walkthrough_env().await;
    let err = env
        .provider
        .create(&claim(
            "nc",
            "latest-current-ami",
            walkthrough_requirements(),
            "500",
        ))
        .await
        .unwrap_err();
    assert!(err.is_insufficient_capacity(), "{err}");
    assert_eq!(env.sim.fleet_calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn class_not_ready_launches_nothing() {
    let env = env();
    env.resolve(class("broken", vec![name_term("*-1.99-*", None)], None))
        .await;
    let err = env
        .provider
        .create(&claim("nc", "broken", walkthrough_requirements(), "1"))
        .await
        .unwrap_err();
    match err {
        CloudError::NodeClassNotReady { name, message } => {
            assert_eq!(name, "broken");
            assert!(message.contains("AMIsReady=False"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    let err = env
        .provider
        .create(&claim("nc", "missing", walkthrough_requirements(), "1"))
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::NodeClassNotReady { .. }));
}

#[tokio::test(start_paused = true)]
async fn arm64_requirements_get_the_arm64_ami() {
    let (env, amis) = walkthrough_env().await;
    let reqs = vec![Req::new("kubernetes.io/arch", OP_IN, &["arm64"])];
    let launched = env
        .provider
        .create(&claim("nc", "latest-current-ami", reqs, "1"))
        .await
        .unwrap();
    assert_eq!(
        launched.status.as_ref().unwrap().image_id.as_deref(),
        Some(amis[1].as_str())
    );
    let it = &launched.metadata.labels.as_ref().unwrap()["node.kubernetes.io/instance-type"];
    assert!(it.contains('g'), "a Graviton type: {it}");
}

/// A Windows instance is a Windows machine everywhere it is read: EC2's `Platform` is `windows`,
/// the kubelet's machine and the provider's NodeClaim carry `kubernetes.io/os: windows`. (Read as
/// Linux, the Node a Windows kubelet registers would not match the Windows pods it was launched
/// for, and the provisioner would launch a second node for them.)
#[tokio::test(start_paused = true)]
async fn a_windows_instance_is_windows_to_ec2_the_kubelet_and_the_provider() {
    let env = env_with("1.29", 42, start(), driftwood_sim_aws::Realism::aws());
    env.resolve(class("win", vec![alias_term("windows2022@latest")], None))
        .await;
    let reqs = vec![
        Req::new("kubernetes.io/os", OP_IN, &["windows"]),
        Req::new("kubernetes.io/arch", OP_IN, &["amd64"]),
        Req::new("karpenter.sh/capacity-type", OP_IN, &["on-demand"]),
    ];
    let launched = env
        .provider
        .create(&claim("nc", "win", reqs, "1"))
        .await
        .unwrap();
    let pid = launched
        .status
        .as_ref()
        .unwrap()
        .provider_id
        .clone()
        .unwrap();
    env.advance(30);
    let machines = env.sim.running_machines();
    assert_eq!(machines.len(), 1);
    assert_eq!(machines[0].labels["kubernetes.io/os"], "windows");
    let described = env
        .sim
        .describe_instances(DescribeInstancesInput {
            instance_ids: vec![machines[0].instance_id.clone()],
            filters: Vec::new(),
        })
        .await
        .unwrap();
    assert_eq!(described[0].platform.as_deref(), Some("windows"));
    let got = env.provider.get(&pid).await.unwrap();
    assert_eq!(
        got.metadata.labels.as_ref().unwrap()["kubernetes.io/os"],
        "windows"
    );
}

#[tokio::test(start_paused = true)]
async fn instances_run_after_the_delay_and_kubelets_see_them() {
    let (env, _) = walkthrough_env().await;
    let launched = env
        .provider
        .create(&claim(
            "nc",
            "latest-current-ami",
            walkthrough_requirements(),
            "1",
        ))
        .await
        .unwrap();
    assert!(env.sim.running_machines().is_empty(), "still pending");
    env.advance(30);
    let machines = env.sim.running_machines();
    assert_eq!(machines.len(), 1);
    let m = &machines[0];
    assert_eq!(
        Some(m.provider_id.clone()),
        launched.status.as_ref().unwrap().provider_id
    );
    assert_eq!(m.kubernetes_version.as_deref(), Some("1.29"));
    assert_eq!(m.labels["karpenter.sh/nodepool"], "latest-current-ami");
    assert_eq!(m.labels["kubernetes.io/arch"], "amd64");
    assert_eq!(m.launch_time, start());

    // get/list/delete through the provider.
    let pid = m.provider_id.clone();
    let got = env.provider.get(&pid).await.unwrap();
    assert_eq!(
        got.metadata.name.as_deref(),
        Some(""),
        "the NodeClaim's name is tagged at registration"
    );
    let mut registered = launched.clone();
    registered.status.as_mut().unwrap().node_name = Some("ip-10-0-0-1.ec2.internal".into());
    env.provider.tag_instance(&registered).await.unwrap();
    let got = env.provider.get(&pid).await.unwrap();
    assert_eq!(got.metadata.name.as_deref(), Some("nc"));
    assert_eq!(
        got.metadata.labels.as_ref().unwrap()["node.kubernetes.io/instance-type"],
        m.instance_type
    );
    assert_eq!(env.provider.list().await.unwrap().len(), 1);
    env.provider.delete(&launched).await.unwrap();
    assert!(env.sim.running_machines().is_empty());
    assert!(env.provider.get(&pid).await.unwrap_err().is_not_found());
    assert!(
        env.provider
            .delete(&launched)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(env.provider.list().await.unwrap().is_empty());
}

/// Termination asks which of the instances it is terminating still exist: only those are
/// described (an `instance-id` filter, so one gone for good is left out instead of failing the
/// call, as Karpenter's DescribeInstances batcher asks), 500 to a call.
#[tokio::test(start_paused = true)]
async fn live_among_describes_only_the_named_instances_and_leaves_out_the_gone() {
    let (env, _) = walkthrough_env().await;
    let mut launched = Vec::new();
    for name in ["nc-a", "nc-b", "nc-c"] {
        let claim = claim(name, "latest-current-ami", walkthrough_requirements(), "1");
        launched.push(env.provider.create(&claim).await.unwrap());
    }
    env.advance(30);
    let pid =
        |c: &driftwood_api::NodeClaim| c.status.as_ref().unwrap().provider_id.clone().unwrap();
    let missing = "aws:///us-west-2a/i-0123456789abcdef0".to_string();
    let calls = |env: &Env| {
        env.sim
            .api_calls()
            .get("DescribeInstances")
            .map_or(0, |c| c.calls)
    };

    let nothing = env.provider.live_among(&BTreeSet::new()).await.unwrap();
    assert!(nothing.is_empty());

    let before = calls(&env);
    let asked = BTreeSet::from([pid(&launched[0]), pid(&launched[1]), missing.clone()]);
    let live = env.provider.live_among(&asked).await.unwrap();
    assert_eq!(live, BTreeSet::from([pid(&launched[0]), pid(&launched[1])]));
    assert_eq!(calls(&env) - before, 1, "one call for the three");

    env.provider.delete(&launched[0]).await.unwrap();
    let live = env.provider.live_among(&asked).await.unwrap();
    assert_eq!(
        live,
        BTreeSet::from([pid(&launched[1])]),
        "a shutting-down instance is not live"
    );

    // 1,001 names: three calls, and only the live one named comes back.
    let mut many: BTreeSet<String> = (0..1_000)
        .map(|i| format!("aws:///us-west-2a/i-{i:017x}"))
        .collect();
    many.insert(pid(&launched[2]));
    let before = calls(&env);
    let live = env.provider.live_among(&many).await.unwrap();
    assert_eq!(live, BTreeSet::from([pid(&launched[2])]));
    assert_eq!(calls(&env) - before, 3);
}

#[tokio::test(start_paused = true)]
async fn al2023_and_bottlerocket_classes_render_their_user_data() {
    let env = env();
    let mut c = class("al2023", vec![alias_term("al2023@latest")], None);
    c.spec.user_data = Some("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n".to_string());
    env.resolve(c).await;
    env.resolve(class("br", vec![alias_term("bottlerocket@latest")], None))
        .await;
    env.provider
        .create(&claim("a", "al2023", walkthrough_requirements(), "1"))
        .await
        .unwrap();
    env.provider
        .create(&claim("b", "br", walkthrough_requirements(), "1"))
        .await
        .unwrap();
    let lts = env
        .sim
        .describe_launch_templates(DescribeLaunchTemplatesInput::default())
        .await
        .unwrap();
    assert_eq!(lts.len(), 2);
    let al2023 = lts
        .iter()
        .find(|l| l.data.user_data.contains("MIME-Version"))
        .unwrap();
    assert_eq!(
        al2023
            .data
            .user_data
            .matches("Content-Type: application/node.eks.aws")
            .count(),
        2
    );
    assert!(al2023.data.user_data.contains("shutdownGracePeriod: 30s"));
    let br = lts
        .iter()
        .find(|l| l.data.user_data.contains("[settings.kubernetes]"))
        .unwrap();
    assert!(br.data.user_data.contains("cluster-name = \"demo\""));
    assert_eq!(
        br.data.block_device_mappings.len(),
        2,
        "Bottlerocket OS and data volumes"
    );
}

#[tokio::test(start_paused = true)]
async fn without_the_pricing_api_on_demand_prices_are_estimated_and_launch_still_works() {
    let (env, _) = walkthrough_env().await;
    env.sim.inject_error(
        "GetProducts",
        driftwood_aws::ports::AwsError::new(
            "AccessDeniedException",
            "not authorized to perform: pricing:GetProducts",
        ),
    );
    let catalog = env
        .provider
        .instance_types_for_class("latest-current-ami")
        .await
        .unwrap();
    let m5 = catalog.iter().find(|it| it.name == "m5.xlarge").unwrap();
    let on_demand = m5
        .offerings
        .iter()
        .find(|o| o.capacity_type == "on-demand")
        .expect("on-demand offerings survive a Pricing API failure");
    // 4 vCPU, 16 GiB at the estimate's rates (list price 0.192).
    assert!(
        (on_demand.price - 0.192).abs() < 0.01,
        "{}",
        on_demand.price
    );

    let mut reqs = walkthrough_requirements();
    for r in &mut reqs {
        if r.key == "karpenter.sh/capacity-type" {
            r.values = vec!["on-demand".to_string()];
        }
    }
    let launched = env
        .provider
        .create(&claim("nc-od", "latest-current-ami", reqs.clone(), "1"))
        .await
        .unwrap();
    // EC2 picks the lowest *list* price among the types the provider offered it, and the
    // provider ranked them by its estimates: whatever EC2 chose costs at most what the type
    // the estimates rank cheapest lists at. (The Pricing API fault was used up above.)
    let list: std::collections::BTreeMap<String, f64> = env
        .sim
        .on_demand_prices("us-west-2")
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.instance_type, p.price_per_hour))
        .collect();
    let chosen = launched_offering(&launched);
    let estimated_cheapest = cheapest(&catalog, &reqs, "on-demand");
    assert_eq!(chosen.capacity_type, "on-demand");
    let chosen_type = catalog
        .iter()
        .find(|it| it.name == chosen.instance_type)
        .unwrap();
    assert!(allows(chosen_type, &reqs), "{chosen:?}");
    assert!(
        list[&chosen.instance_type] <= list[&estimated_cheapest.instance_type],
        "{chosen:?} lists at {}, {estimated_cheapest:?} at {}",
        list[&chosen.instance_type],
        list[&estimated_cheapest.instance_type]
    );
}

#[tokio::test(start_paused = true)]
async fn a_launch_template_missing_at_create_fleet_is_recreated_and_the_launch_retried_once() {
    let (env, _) = walkthrough_env().await;
    let not_found = || {
        driftwood_aws::ports::AwsError::new(
            driftwood_aws::ports::codes::LAUNCH_TEMPLATE_NAME_NOT_FOUND,
            "The specified launch template, with template name x, does not exist.",
        )
    };
    env.sim.inject_error("CreateFleet", not_found());
    let launched = env
        .provider
        .create(&claim(
            "nc-lt",
            "latest-current-ami",
            walkthrough_requirements(),
            "1",
        ))
        .await
        .expect("recreated and retried once");
    assert!(launched.status.as_ref().unwrap().provider_id.is_some());

    // Only once: a template still missing on the retry fails the launch.
    env.sim.inject_error("CreateFleet", not_found());
    env.sim.inject_error("CreateFleet", not_found());
    let err = env
        .provider
        .create(&claim(
            "nc-lt2",
            "latest-current-ami",
            walkthrough_requirements(),
            "1",
        ))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("InvalidLaunchTemplateName.NotFoundException"),
        "{err}"
    );

    // A batch of eight that all find it missing: the first makes sure of it again, the others
    // find it confirmed, and the retries are one batch again.
    let calls = |action: &str| calls(&env, action);
    let (described, fleets) = (calls("DescribeLaunchTemplates"), calls("CreateFleet"));
    env.sim.inject_error("CreateFleet", not_found());
    let claims: Vec<_> = (0..8)
        .map(|i| {
            claim(
                &format!("nc-batch-{i}"),
                "latest-current-ami",
                walkthrough_requirements(),
                "1",
            )
        })
        .collect();
    let launched = futures::future::join_all(claims.iter().map(|c| env.provider.create(c))).await;
    assert!(launched.iter().all(Result::is_ok), "{launched:?}");
    assert_eq!(calls("DescribeLaunchTemplates"), described + 1);
    assert_eq!(calls("CreateFleet"), fleets + 2);
}

/// Private IPs (and so node names) stay unique past the point where the old address scheme
/// wrapped: at 5,000 nodes the embedded cluster launched instances whose node names were taken,
/// and 1,000 of them never registered. A terminated instance's address is free again.
#[tokio::test(start_paused = true)]
async fn private_addresses_are_unique_and_reused_only_after_termination() {
    // Without rate limits: 600 launches in one instant are far past CreateFleet's request
    // bucket (50, refilled 5/s); this is about addresses, not about pacing launches.
    let (env, _) = walkthrough_env_with(driftwood_sim_aws::Realism {
        rate_limits: false,
        ..driftwood_sim_aws::Realism::aws()
    })
    .await;
    let mut launched = Vec::new();
    for i in 0..600 {
        let claim = claim(
            &format!("nc-{i}"),
            "latest-current-ami",
            walkthrough_requirements(),
            "1",
        );
        launched.push(env.provider.create(&claim).await.unwrap());
    }
    env.advance(30);
    let addresses: std::collections::BTreeSet<String> = env
        .sim
        .running_machines()
        .iter()
        .map(|m| m.private_ip.clone())
        .collect();
    assert_eq!(addresses.len(), 600, "one address per instance");
    env.provider.delete(&launched[0]).await.unwrap();
    let again = env
        .provider
        .create(&claim(
            "nc-again",
            "latest-current-ami",
            walkthrough_requirements(),
            "1",
        ))
        .await
        .unwrap();
    env.advance(30);
    let names: Vec<String> = env
        .sim
        .running_machines()
        .iter()
        .map(|m| m.private_dns_name.clone())
        .collect();
    let unique: std::collections::BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "node names unique");
    assert!(again.status.is_some());
}

/// Chaos faults: an instance stuck in `pending`, one terminated from outside (a spot
/// interruption), a CreateFleet that finds its cheaper half of offerings without capacity, and
/// kubelet faults reported by provider ID.
#[tokio::test(start_paused = true)]
async fn fault_knobs_for_chaos_runs() {
    use driftwood_sim_aws::faults::NodeFault;
    let (env, _) = walkthrough_env().await;
    env.sim.stick_next_launches(1);
    let stuck = env
        .provider
        .create(&claim(
            "stuck",
            "latest-current-ami",
            walkthrough_requirements(),
            "1",
        ))
        .await
        .unwrap();
    env.advance(600);
    assert!(env.sim.running_machines().is_empty(), "stays pending");
    let pid = stuck.status.as_ref().unwrap().provider_id.clone().unwrap();
    let id = pid.rsplit('/').next().unwrap().to_string();
    assert_eq!(env.sim.instances()[0].state, "pending");

    env.sim.fail_next_fleets_partially(1);
    let cheapest = env
        .provider
        .create(&claim(
            "fallback",
            "latest-current-ami",
            walkthrough_requirements(),
            "1",
        ))
        .await
        .unwrap();
    assert_ne!(
        launched_offering(&cheapest),
        launched_offering(&stuck),
        "the partial failure fell through to a dearer offering"
    );

    env.sim.set_node_fault(&id, Some(NodeFault::NeverReady));
    assert_eq!(
        env.sim.node_faults().get(&pid),
        Some(&NodeFault::NeverReady)
    );
    env.sim.set_node_fault(&id, None);
    assert!(env.sim.node_faults().is_empty());

    env.advance(60);
    let running = env.sim.running_machines();
    assert_eq!(running.len(), 1, "the stuck one is still pending");
    assert!(env.sim.terminate_from_outside(&running[0].instance_id));
    assert!(
        !env.sim.terminate_from_outside(&running[0].instance_id),
        "once"
    );
    assert!(env.sim.running_machines().is_empty());

    let names = env.sim.launch_template_names();
    assert!(!names.is_empty());
    assert!(env.sim.forget_launch_template(&names[0]));
    assert!(!env.sim.launch_template_names().contains(&names[0]));
}

/// The simulated account's interruption queue: a spot interruption warning goes to it (once,
/// for a running spot instance only) and EC2 reclaims the instance two minutes later; a
/// received message is hidden for the visibility timeout and comes back if not deleted; a long
/// poll returns as soon as a message arrives; an instance terminated from outside sends its
/// state change.
#[tokio::test(start_paused = true)]
async fn spot_warnings_reach_the_interruption_queue_and_ec2_reclaims_two_minutes_later() {
    use driftwood_aws::interruption::{InterruptionQueue, Kind};
    let (env, _) = walkthrough_env().await;
    assert_eq!(
        env.sim.publish_event("{}"),
        0,
        "no queue yet: EventBridge sends nowhere"
    );
    env.sim.create_interruption_queue("demo");
    let queue = InterruptionQueue::new(driftwood_sim_aws::sim_ports(&env.sim).sqs, "demo");
    let id_of = |claim: &driftwood_api::NodeClaim| {
        let pid = claim.status.as_ref().unwrap().provider_id.clone().unwrap();
        pid.rsplit('/').next().unwrap().to_string()
    };
    let spot = env
        .provider
        .create(&claim(
            "nc-1",
            "latest-current-ami",
            walkthrough_requirements(),
            "1",
        ))
        .await
        .unwrap();
    let spot_id = id_of(&spot);
    assert!(!env.sim.interrupt_spot(&spot_id), "still pending");
    env.advance(60);
    let warned = env.sim.now();
    assert!(env.sim.interrupt_spot(&spot_id));
    assert!(!env.sim.interrupt_spot(&spot_id), "warned once");

    let first = queue.receive().await.unwrap();
    assert_eq!(first.len(), 1);
    let message = first[0].parsed.as_ref().unwrap();
    assert_eq!(message.kind, Kind::SpotInterrupted);
    assert_eq!(message.instance_ids, std::slice::from_ref(&spot_id));
    assert_eq!(message.time, Some(warned));
    // Not deleted: hidden for the 20 s visibility timeout, then received again.
    env.advance(10);
    let started = tokio::time::Instant::now();
    assert!(queue.receive().await.unwrap().is_empty(), "hidden");
    assert_eq!(
        started.elapsed(),
        std::time::Duration::from_secs(20),
        "an empty long poll waits 20 s"
    );
    env.advance(11);
    let again = queue.receive().await.unwrap();
    assert_eq!(again.len(), 1);
    assert_ne!(again[0].receipt_handle, first[0].receipt_handle);
    queue.delete(&first[0].receipt_handle).await.unwrap();
    assert_eq!(
        env.sim.queue_depth("demo"),
        1,
        "a stale receipt deletes nothing"
    );
    queue.delete(&again[0].receipt_handle).await.unwrap();
    assert_eq!(env.sim.queue_depth("demo"), 0);

    // Two minutes after the warning EC2 takes the instance.
    assert!(!env.sim.reclaimed_by_ec2(&spot_id));
    assert!(
        env.sim
            .running_machines()
            .iter()
            .any(|m| m.instance_id == spot_id)
    );
    env.advance(100);
    assert!(env.sim.reclaimed_by_ec2(&spot_id));
    assert!(
        !env.sim
            .running_machines()
            .iter()
            .any(|m| m.instance_id == spot_id)
    );
    let state = env
        .sim
        .describe_instances(DescribeInstancesInput {
            instance_ids: vec![spot_id.clone()],
            filters: Vec::new(),
        })
        .await
        .unwrap()
        .remove(0)
        .state;
    assert_eq!(state, "shutting-down");

    // On-demand instances are never interrupted; one terminated from outside reports it.
    let mut on_demand = walkthrough_requirements();
    on_demand.retain(|r| r.key != "karpenter.sh/capacity-type");
    on_demand.push(Req::new(
        "karpenter.sh/capacity-type",
        OP_IN,
        &["on-demand"],
    ));
    let od = env
        .provider
        .create(&claim("nc-2", "latest-current-ami", on_demand, "1"))
        .await
        .unwrap();
    let od_id = id_of(&od);
    env.advance(60);
    assert!(!env.sim.interrupt_spot(&od_id), "on-demand");
    // A long poll in progress returns when the message arrives.
    let waiting = tokio::spawn({
        let sqs = driftwood_sim_aws::sim_ports(&env.sim).sqs;
        async move { InterruptionQueue::new(sqs, "demo").receive().await }
    });
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let sent = tokio::time::Instant::now();
    assert!(env.sim.terminate_from_outside(&od_id));
    let got = waiting.await.unwrap().unwrap();
    assert!(sent.elapsed() < std::time::Duration::from_secs(1));
    assert_eq!(got.len(), 1);
    let message = got[0].parsed.as_ref().unwrap();
    assert_eq!(message.kind, Kind::InstanceTerminated);
    assert_eq!(message.instance_ids, [od_id]);
}

/// The catalog is described again once its TTL has passed; when nothing changed (no new type,
/// offering or price), the built catalog and its scheduling form are kept, not built again for
/// every NodePool and drift check that asks.
#[tokio::test(start_paused = true)]
async fn an_unchanged_catalog_described_again_keeps_the_built_catalog() {
    let (env, _) = walkthrough_env().await;
    let catalog = || async {
        env.provider
            .instance_types_for_class("latest-current-ami")
            .await
            .unwrap()
    };
    let described = || {
        env.sim
            .api_calls()
            .get("DescribeInstanceTypes")
            .map_or(0, |c| c.calls)
    };
    let ttl = driftwood_aws::provider::CATALOG_TTL.as_secs() + 1;
    // The first answer is priced before the Pricing API's list arrives (a background fetch);
    // the one after the TTL is priced from the list.
    catalog().await;
    env.advance(ttl);
    let listed = catalog().await;
    let before = described();
    env.advance(ttl);
    let again = catalog().await;
    assert!(described() > before, "described again after the TTL");
    assert!(
        std::sync::Arc::ptr_eq(&listed, &again),
        "unchanged data: the same built catalog"
    );
}

/// EC2 throttles a launch (its instance bucket spent): the NodeClaim is given a turn half a
/// second on, the next NodeClaim the turn after, and neither calls CreateFleet before its turn;
/// each launches at it, and once every turn has passed launches go straight through again.
#[tokio::test(start_paused = true)]
async fn launches_throttled_by_ec2_wait_their_turn_without_calling() {
    let (env, _) = walkthrough_env().await;
    let create = async |name: &'static str| {
        let claim = claim(name, "latest-current-ami", walkthrough_requirements(), "1");
        env.provider.create(&claim).await
    };
    env.sim.throttle("CreateFleet", 1);
    let before = env.sim.fleet_calls();
    let turn = |e: CloudError| match e {
        CloudError::Throttled { retry_at, .. } => retry_at,
        other => panic!("not held back: {other}"),
    };
    let now = driftwood_cloud::Clock::now(env.clock.as_ref());
    let a = turn(create("nc-a").await.unwrap_err());
    assert_eq!(a, now + jiff::SignedDuration::from_millis(500));
    let b = turn(create("nc-b").await.unwrap_err());
    assert_eq!(b, now + jiff::SignedDuration::from_millis(1000));
    // Before its turn, asking again makes no call.
    let calls = env.sim.fleet_calls();
    assert_eq!(turn(create("nc-b").await.unwrap_err()), b);
    assert_eq!(env.sim.fleet_calls(), calls);
    assert!(calls <= before + 1, "only the throttled call was made");
    env.clock.advance(jiff::SignedDuration::from_millis(500));
    create("nc-a").await.unwrap();
    env.clock.advance(jiff::SignedDuration::from_millis(500));
    create("nc-b").await.unwrap();
    env.clock.advance(jiff::SignedDuration::from_millis(600));
    create("nc-c").await.unwrap();
    assert_eq!(env.provider.launches_waiting(), 0);
}
