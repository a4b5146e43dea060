//! The AWS provider through the real SDK against moto: resolve an EC2NodeClass, launch through
//! CreateFleet, read the instance back, AMIDrift and SubnetDrift, terminate (and ask which
//! instances are still live, by `instance-id` filter), collect an orphan;
//! and EC2/SSM/IAM error codes arriving as the ports' codes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use driftwood_api::ec2nodeclass::{
    AmiSelectorTerm, EC2NodeClassSpec, SecurityGroupSelectorTerm, SubnetSelectorTerm,
};
use driftwood_api::nodeclaim::{NodeClaimSpec, ResourceRequirements};
use driftwood_api::requirement::OP_IN;
use driftwood_api::wellknown::LABEL_NODEPOOL;
use driftwood_api::{EC2NodeClass, NodeClaim, NodeSelectorRequirementWithMinValues as Req};
use driftwood_aws::ports::{
    DescribeInstanceStatusInput, DescribeInstancesInput, DescribeLaunchTemplatesInput,
    GetParameterInput, Instance, codes,
};
use driftwood_aws::{AwsPorts, AwsProvider, AwsSettings, InMemoryNodeClasses, ProviderDrift};
use driftwood_cloud::{CloudProvider, SystemClock};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{Moto, Seed, apply_launch_template_security_groups};

struct Env {
    moto: Moto,
    ports: AwsPorts,
    classes: Arc<InMemoryNodeClasses>,
    provider: AwsProvider,
}

impl Env {
    async fn start(kubernetes_version: &str) -> Self {
        let moto = Moto::start("demo");
        let ports = moto.ports().await;
        let classes = Arc::new(InMemoryNodeClasses::new());
        let provider = AwsProvider::new(
            ports.clone(),
            AwsSettings::new("demo", &moto.seed.region, kubernetes_version),
            Arc::new(SystemClock),
            classes.clone(),
        );
        Self {
            moto,
            ports,
            classes,
            provider,
        }
    }

    fn seed(&self) -> &Seed {
        &self.moto.seed
    }

    async fn resolve(&self, mut class: EC2NodeClass) -> EC2NodeClass {
        let resolution = self.provider.resolve_node_class(&class).await.unwrap();
        class.status = Some(resolution.status);
        self.classes.upsert(class.clone());
        class
    }
}

fn discovery() -> BTreeMap<String, String> {
    BTreeMap::from([("karpenter.sh/discovery".to_string(), "demo".to_string())])
}

fn id_term(id: &str) -> AmiSelectorTerm {
    AmiSelectorTerm {
        id: Some(id.to_string()),
        ..Default::default()
    }
}

fn class(ami_terms: Vec<AmiSelectorTerm>, subnets: Vec<SubnetSelectorTerm>) -> EC2NodeClass {
    let spec = EC2NodeClassSpec {
        ami_selector_terms: ami_terms,
        role: Some("KarpenterNodeRole-demo".to_string()),
        subnet_selector_terms: subnets,
        security_group_selector_terms: vec![SecurityGroupSelectorTerm {
            tags: discovery(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut c = EC2NodeClass::new("latest-current-ami", spec);
    c.metadata.generation = Some(1);
    c
}

fn tagged_subnets() -> Vec<SubnetSelectorTerm> {
    vec![SubnetSelectorTerm {
        tags: discovery(),
        id: None,
    }]
}

fn claim(name: &str) -> NodeClaim {
    let requirements = vec![
        Req::new(
            "karpenter.k8s.aws/instance-category",
            OP_IN,
            &["c", "m", "r"],
        ),
        Req::new("karpenter.k8s.aws/instance-cpu", OP_IN, &["4", "8"]),
        Req::new("karpenter.sh/capacity-type", OP_IN, &["spot", "on-demand"]),
        Req::new("kubernetes.io/os", OP_IN, &["linux"]),
        Req::new("kubernetes.io/arch", OP_IN, &["amd64"]),
    ];
    let mut spec = NodeClaimSpec {
        requirements,
        ..Default::default()
    };
    spec.node_class_ref.name = "latest-current-ami".to_string();
    spec.node_class_ref.kind = "EC2NodeClass".to_string();
    spec.node_class_ref.group = "karpenter.k8s.aws".to_string();
    spec.resources = Some(ResourceRequirements {
        requests: BTreeMap::from([("cpu".to_string(), Quantity("1".to_string()))]),
    });
    let mut c = NodeClaim::new(name, spec);
    c.metadata.labels = Some(BTreeMap::from([(
        LABEL_NODEPOOL.to_string(),
        "latest-current-ami".to_string(),
    )]));
    c
}

/// The class's resolved AMI ids, sorted.
fn sorted_amis(class: &EC2NodeClass) -> Vec<String> {
    let mut ids: Vec<String> = class
        .status
        .iter()
        .flat_map(|s| s.amis.iter().map(|a| a.id.clone()))
        .collect();
    ids.sort();
    ids
}

/// These seeded AMIs' ids, sorted.
fn sorted_ids(seed: &Seed, names: &[&str]) -> Vec<String> {
    let mut ids: Vec<String> = names.iter().map(|n| seed.ami(n)).collect();
    ids.sort();
    ids
}

fn instance_id(claim: &NodeClaim) -> String {
    let provider_id = claim.status.as_ref().unwrap().provider_id.clone().unwrap();
    provider_id.rsplit('/').next().unwrap().to_string()
}

/// The instance `id` as EC2 (moto) describes it, and its tags by key.
async fn described(env: &Env, id: &str) -> (Instance, BTreeMap<String, String>) {
    let instance = env
        .ports
        .ec2
        .describe_instances(DescribeInstancesInput {
            instance_ids: vec![id.to_string()],
            filters: vec![],
        })
        .await
        .unwrap()
        .remove(0);
    let tags = instance
        .tags
        .iter()
        .map(|t| (t.key.clone(), t.value.clone()))
        .collect();
    (instance, tags)
}

#[tokio::test]
async fn resolve_launch_read_back_drift_terminate_and_collect_an_orphan() {
    let env = Env::start("1.29").await;
    let seed = env.seed().clone();
    let old_amd = seed.ami("amazon-eks-node-1.29-v20240807");
    let old_arm = seed.ami("amazon-eks-arm64-node-1.29-v20240807");

    // Resolve the walkthrough's class (AMI ids, role, discovery tags): status filled, Ready.
    let resolved = env
        .resolve(class(
            vec![id_term(&old_amd), id_term(&old_arm)],
            tagged_subnets(),
        ))
        .await;
    let status = resolved.status.clone().unwrap();
    assert_eq!(
        sorted_amis(&resolved),
        sorted_ids(
            &seed,
            &[
                "amazon-eks-node-1.29-v20240807",
                "amazon-eks-arm64-node-1.29-v20240807"
            ]
        )
    );
    let subnets: std::collections::BTreeSet<_> =
        status.subnets.iter().map(|s| s.id.clone()).collect();
    assert_eq!(
        subnets,
        seed.subnets.values().cloned().collect(),
        "only the tagged subnets, not {}",
        seed.untagged_subnet
    );
    assert_eq!(
        status
            .security_groups
            .iter()
            .map(|g| g.id.clone())
            .collect::<Vec<_>>(),
        vec![seed.security_group.clone()]
    );
    let profile = status.instance_profile.clone().expect("instance profile");
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "True", "{:?}", status.conditions);
    let raw_iam = driftwood_cloud_aws::aws_sdk_iam::Client::new(
        &driftwood_cloud_aws::load_sdk_config(&env.moto.sdk_options())
            .await
            .unwrap(),
    );
    let in_moto = raw_iam
        .get_instance_profile()
        .instance_profile_name(&profile)
        .send()
        .await
        .unwrap();
    let roles: Vec<_> = in_moto
        .instance_profile()
        .unwrap()
        .roles()
        .iter()
        .map(|r| r.role_name().to_string())
        .collect();
    assert_eq!(roles, vec![seed.role.clone()]);

    // Launch through CreateFleet and read the instance back.
    let launched = env.provider.create(&claim("nc-1")).await.unwrap();
    let id = instance_id(&launched);
    let (instance, tags) = described(&env, &id).await;
    assert_eq!(instance.image_id, old_amd);
    assert!(seed.subnets.values().any(|s| *s == instance.subnet_id));
    assert_eq!(instance.vpc_id, seed.vpc);
    // Launch tags name nothing of the one NodeClaim (identical launches batch into one
    // CreateFleet); registration tags it, through the SDK's CreateTags.
    assert_eq!(tags.get("karpenter.sh/nodeclaim"), None);
    let mut registered = launched.clone();
    registered.status.as_mut().unwrap().node_name = Some("ip-10-0-1-1.ec2.internal".into());
    env.provider.tag_instance(&registered).await.unwrap();
    let (_, tagged) = described(&env, &id).await;
    assert_eq!(tagged["karpenter.sh/nodeclaim"], "nc-1");
    assert_eq!(tagged["Name"], "ip-10-0-1-1.ec2.internal");
    assert_eq!(tagged["eks:eks-cluster-name"], "demo");
    assert_eq!(tags["karpenter.sh/nodepool"], "latest-current-ami");
    assert_eq!(tags["kubernetes.io/cluster/demo"], "owned");
    let labels = launched.metadata.labels.clone().unwrap();
    assert_eq!(
        labels["node.kubernetes.io/instance-type"],
        instance.instance_type
    );
    assert_eq!(
        labels["topology.kubernetes.io/zone"],
        instance.availability_zone
    );
    let read_back = env
        .provider
        .get(
            launched
                .status
                .as_ref()
                .unwrap()
                .provider_id
                .as_ref()
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        read_back.status.as_ref().unwrap().image_id.as_deref(),
        Some(old_amd.as_str())
    );

    // DescribeInstanceStatus through the SDK: moto reports the running instance with both
    // checks passing (and, not implementing the status filters, answers each of the three
    // requests with every running instance), so none is unhealthy.
    let statuses = env
        .ports
        .ec2
        .describe_instance_status(DescribeInstanceStatusInput::default())
        .await
        .unwrap();
    let status = statuses
        .iter()
        .find(|s| s.instance_id == id)
        .expect("the running instance has a status");
    assert_eq!(status.state, "running");
    assert_eq!(status.availability_zone, instance.availability_zone);
    for check in [&status.instance_status, &status.system_status] {
        let check = check.as_ref().expect("reported");
        assert_eq!(check.status, "ok");
        assert!(
            check.details.iter().all(|d| d.status == "passed"),
            "{check:?}"
        );
    }
    let unhealthy = driftwood_aws::interruption::instance_status::list_unhealthy(
        env.ports.ec2.as_ref(),
        jiff::Timestamp::now(),
    )
    .await
    .unwrap();
    assert!(unhealthy.is_empty(), "{unhealthy:?}");

    // moto departs from EC2 here: CreateFleet ignores the launch template's security groups.
    // EC2 would have attached the class's group; do what EC2 does, then nothing has drifted.
    let groups: Vec<_> = instance
        .security_groups
        .iter()
        .map(|g| g.group_id.clone())
        .collect();
    assert_ne!(
        groups,
        vec![seed.security_group.clone()],
        "moto now applies launch-template security groups; drop this fix-up"
    );
    let raw = env.moto.ec2().await;
    assert_eq!(
        apply_launch_template_security_groups(&raw, "demo", &seed.security_group).await,
        vec![id.clone()]
    );
    assert_eq!(env.provider.provider_drift(&launched).await.unwrap(), None);

    // AMIDrift: the class now selects the 1.30 images.
    let new_amd = seed.ami("amazon-eks-node-1.30-v20240917");
    let new_arm = seed.ami("amazon-eks-arm64-node-1.30-v20240917");
    env.resolve(class(
        vec![id_term(&new_amd), id_term(&new_arm)],
        tagged_subnets(),
    ))
    .await;
    match env.provider.provider_drift(&launched).await.unwrap() {
        Some(drift @ ProviderDrift::Ami { .. }) => {
            assert_eq!(drift.reason(), "AMIDrift");
            let ProviderDrift::Ami {
                node_image,
                current_images,
            } = drift
            else {
                unreachable!()
            };
            assert_eq!(node_image, old_amd);
            assert!(current_images.contains(&new_amd), "{current_images:?}");
        }
        other => panic!("expected AMIDrift, got {other:?}"),
    }

    // SubnetDrift: back to the old images, but only a subnet in another zone is selected.
    let other_subnet = seed
        .subnets
        .iter()
        .find(|(zone, _)| **zone != instance.availability_zone)
        .map(|(_, id)| id.clone())
        .unwrap();
    env.resolve(class(
        vec![id_term(&old_amd), id_term(&old_arm)],
        vec![SubnetSelectorTerm {
            tags: BTreeMap::new(),
            id: Some(other_subnet.clone()),
        }],
    ))
    .await;
    match env.provider.provider_drift(&launched).await.unwrap() {
        Some(drift @ ProviderDrift::Subnet { .. }) => {
            assert_eq!(drift.reason(), "SubnetDrift");
        }
        other => panic!("expected SubnetDrift, got {other:?}"),
    }

    // Terminate: gone for the provider; a second delete says NotFound.
    env.resolve(class(
        vec![id_term(&old_amd), id_term(&old_arm)],
        tagged_subnets(),
    ))
    .await;
    env.provider.delete(&launched).await.unwrap();
    let after = env
        .ports
        .ec2
        .describe_instances(DescribeInstancesInput {
            instance_ids: vec![id.clone()],
            filters: vec![],
        })
        .await
        .unwrap();
    assert!(
        ["shutting-down", "terminated"].contains(&after[0].state.as_str()),
        "{}",
        after[0].state
    );
    assert!(
        env.provider
            .delete(&launched)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        env.provider
            .get(
                launched
                    .status
                    .as_ref()
                    .unwrap()
                    .provider_id
                    .as_ref()
                    .unwrap()
            )
            .await
            .unwrap_err()
            .is_not_found()
    );

    // An orphan: an instance whose NodeClaim is gone is listed, then collected.
    let orphan = env.provider.create(&claim("nc-orphan")).await.unwrap();
    let orphan_id = instance_id(&orphan);
    // Termination's question through the SDK, by an `instance-id` filter: of the terminated
    // instance, the orphan and one never launched, only the orphan is live (no NotFound for
    // the unknown id, as a filter answers).
    let pid = |c: &NodeClaim| c.status.as_ref().unwrap().provider_id.clone().unwrap();
    let asked = BTreeSet::from([
        pid(&launched),
        pid(&orphan),
        format!("aws:///{}a/i-0123456789abcdef0", seed.region),
    ]);
    assert_eq!(
        env.provider.live_among(&asked).await.unwrap(),
        BTreeSet::from([pid(&orphan)])
    );
    let listed = env.provider.list().await.unwrap();
    let view = listed
        .iter()
        .find(|c| instance_id(c) == orphan_id)
        .expect("the orphan is listed");
    assert!(
        listed.iter().all(|c| instance_id(c) != id),
        "terminated instance listed"
    );
    env.provider.delete(view).await.unwrap();
    assert!(
        env.provider
            .list()
            .await
            .unwrap()
            .iter()
            .all(|c| instance_id(c) != orphan_id)
    );
}

#[tokio::test]
async fn name_terms_and_aliases_resolve_through_describe_images_and_ssm() {
    let env = Env::start("1.29").await;
    let seed = env.seed().clone();
    // The name-terms walkthrough: '*-1.27-*' owned by amazon (or self).
    let by_name = env
        .resolve(class(
            vec![
                AmiSelectorTerm {
                    name: Some("*-1.27-*".to_string()),
                    owner: Some("self".to_string()),
                    ..Default::default()
                },
                AmiSelectorTerm {
                    name: Some("*-1.27-*".to_string()),
                    owner: Some("amazon".to_string()),
                    ..Default::default()
                },
            ],
            tagged_subnets(),
        ))
        .await;
    assert_eq!(
        sorted_amis(&by_name),
        sorted_ids(
            &seed,
            &[
                "amazon-eks-node-1.27-v20240501",
                "amazon-eks-arm64-node-1.27-v20240501"
            ]
        )
    );

    // al2@latest for Kubernetes 1.29 through the public SSM parameters (seeded into moto,
    // which has none of its own and refuses PutParameter under /aws/).
    let by_alias = env
        .resolve(class(
            vec![AmiSelectorTerm {
                alias: Some("al2@latest".to_string()),
                ..Default::default()
            }],
            tagged_subnets(),
        ))
        .await;
    assert_eq!(
        sorted_amis(&by_alias),
        sorted_ids(
            &seed,
            &[
                "amazon-eks-node-1.29-v20240807",
                "amazon-eks-arm64-node-1.29-v20240807"
            ]
        )
    );
}

#[tokio::test]
async fn aws_error_codes_arrive_as_the_ports_codes() {
    let env = Env::start("1.29").await;
    let missing_instance = env
        .ports
        .ec2
        .describe_instances(DescribeInstancesInput {
            instance_ids: vec!["i-0123456789abcdef0".to_string()],
            filters: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(missing_instance.code, codes::INSTANCE_ID_NOT_FOUND);
    assert!(missing_instance.is_not_found());
    let missing_template = env
        .ports
        .ec2
        .describe_launch_templates(DescribeLaunchTemplatesInput {
            launch_template_names: vec!["karpenter.k8s.aws/nope".to_string()],
            filters: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(missing_template.code, codes::LAUNCH_TEMPLATE_NAME_NOT_FOUND);
    let missing_parameter = env
        .ports
        .ssm
        .get_parameter(GetParameterInput {
            name: "/aws/service/eks/optimized-ami/1.99/amazon-linux-2/recommended/image_id"
                .to_string(),
            with_decryption: false,
        })
        .await
        .unwrap_err();
    assert_eq!(missing_parameter.code, codes::PARAMETER_NOT_FOUND);
    let missing_profile = env
        .ports
        .iam
        .get_instance_profile("nope")
        .await
        .unwrap_err();
    assert_eq!(missing_profile.code, codes::NO_SUCH_ENTITY);
    // moto has no Pricing API: the call fails (and the provider estimates prices instead,
    // which the launch above relies on).
    assert!(
        env.ports
            .pricing
            .on_demand_prices(&env.seed().region)
            .await
            .is_err()
    );
    // moto never reports insufficient capacity; the ICE paths (offering marked unavailable,
    // fallback to the next offering) are tested against the simulated EC2.
}
