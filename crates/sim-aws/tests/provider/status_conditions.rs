//! EC2NodeClass status: resolved subnets, groups and instance profile, and conditions that say
//! which selector matched nothing.

use driftwood_api::ec2nodeclass::{SecurityGroupSelectorTerm, SubnetSelectorTerm};
use driftwood_api::wellknown::{
    CONDITION_AMIS_READY, CONDITION_INSTANCE_PROFILE_READY, CONDITION_READY,
    CONDITION_SECURITY_GROUPS_READY, CONDITION_SUBNETS_READY,
};
use driftwood_aws::instance_profile::managed_instance_profile_name;
use driftwood_aws::ports::codes;
use std::collections::BTreeMap;

use crate::common::*;

#[tokio::test(start_paused = true)]
async fn ready_class_lists_subnets_groups_and_profile() {
    let env = env();
    let class = env
        .resolve(class("c", vec![alias_term("al2023@latest")], None))
        .await;
    let status = class.status.as_ref().unwrap();
    assert_eq!(status.subnets.len(), 3);
    let zones: Vec<&str> = status.subnets.iter().map(|s| s.zone.as_str()).collect();
    assert!(zones.contains(&"us-west-2a") && zones.contains(&"us-west-2c"));
    assert!(status.subnets.iter().all(|s| {
        s.zone_id
            .as_deref()
            .is_some_and(|z| z.starts_with("usw2-az"))
    }));
    assert_eq!(
        status.security_groups.len(),
        1,
        "only the discovery-tagged group"
    );
    assert!(
        status.security_groups[0]
            .name
            .as_deref()
            .unwrap()
            .starts_with("eks-cluster-sg-demo-")
    );
    let profile = managed_instance_profile_name(CLUSTER, "us-west-2", ROLE);
    assert_eq!(status.instance_profile.as_deref(), Some(profile.as_str()));
    let created = env.sim.instance_profile(&profile).unwrap();
    assert_eq!(created.roles, [ROLE]);
    assert!(
        created
            .tags
            .iter()
            .any(|t| t.key == "kubernetes.io/cluster/demo" && t.value == "owned")
    );
    for c in [
        CONDITION_AMIS_READY,
        CONDITION_SUBNETS_READY,
        CONDITION_SECURITY_GROUPS_READY,
        CONDITION_INSTANCE_PROFILE_READY,
        CONDITION_READY,
    ] {
        assert!(condition(&class, c).is_true(), "{c}");
    }
    // Resolving again reuses the profile.
    let again = env.resolve(class.clone()).await;
    assert_eq!(
        again.status.as_ref().unwrap().instance_profile.as_deref(),
        Some(profile.as_str())
    );
}

#[tokio::test(start_paused = true)]
async fn ami_selector_matching_nothing_names_the_term() {
    let env = env();
    let class = env
        .resolve(class(
            "c",
            vec![
                name_term("*-1.99-*", Some("self")),
                name_term("*-1.99-*", Some("amazon")),
            ],
            Some("AL2"),
        ))
        .await;
    let c = condition(&class, CONDITION_AMIS_READY);
    assert!(!c.is_true());
    assert_eq!(c.reason.as_deref(), Some("AMINotFound"));
    let msg = c.message.as_deref().unwrap();
    assert!(
        msg.contains(r#"amiSelectorTerms[0] {name: "*-1.99-*", owner: self}"#),
        "{msg}"
    );
    assert!(
        msg.contains(r#"amiSelectorTerms[1] {name: "*-1.99-*", owner: amazon}"#),
        "{msg}"
    );
    let ready = condition(&class, CONDITION_READY);
    assert!(!ready.is_true());
    assert!(
        ready
            .message
            .as_deref()
            .unwrap()
            .contains("AMIsReady=False")
    );
    assert!(condition(&class, CONDITION_SUBNETS_READY).is_true());
}

#[tokio::test(start_paused = true)]
async fn bad_alias_is_reported_against_its_term() {
    let env = env();
    let class = env
        .resolve(class("c", vec![alias_term("ubuntu@latest")], None))
        .await;
    let c = condition(&class, CONDITION_AMIS_READY);
    assert!(!c.is_true());
    assert!(
        c.message.as_deref().unwrap().contains("unknown family"),
        "{:?}",
        c.message
    );
}

#[tokio::test(start_paused = true)]
async fn subnet_and_group_selectors_matching_nothing_name_the_term() {
    let env = env();
    let mut c = class("c", vec![alias_term("al2@latest")], None);
    let wrong = BTreeMap::from([(
        "karpenter.sh/discovery".to_string(),
        "other-cluster".to_string(),
    )]);
    c.spec.subnet_selector_terms = vec![SubnetSelectorTerm {
        tags: wrong.clone(),
        id: None,
    }];
    c.spec.security_group_selector_terms = vec![SecurityGroupSelectorTerm {
        tags: BTreeMap::new(),
        id: None,
        name: Some("nope".to_string()),
    }];
    let class = env.resolve(c).await;
    let s = condition(&class, CONDITION_SUBNETS_READY);
    assert_eq!(s.reason.as_deref(), Some("SubnetsNotFound"));
    assert!(
        s.message
            .as_deref()
            .unwrap()
            .contains("subnetSelectorTerms[0] {tags: {karpenter.sh/discovery: other-cluster}}")
    );
    let g = condition(&class, CONDITION_SECURITY_GROUPS_READY);
    assert_eq!(g.reason.as_deref(), Some("SecurityGroupsNotFound"));
    assert!(
        g.message
            .as_deref()
            .unwrap()
            .contains("securityGroupSelectorTerms[0] {name: nope}")
    );
    assert!(!condition(&class, CONDITION_READY).is_true());
    assert!(condition(&class, CONDITION_AMIS_READY).is_true());
}

#[tokio::test(start_paused = true)]
async fn group_by_name_and_subnet_by_id() {
    let env = env();
    let subnet = env.sim.subnets()[0].subnet_id.clone();
    let mut c = class("c", vec![alias_term("al2@latest")], None);
    c.spec.subnet_selector_terms = vec![SubnetSelectorTerm {
        tags: BTreeMap::new(),
        id: Some(subnet.clone()),
    }];
    c.spec.security_group_selector_terms = vec![SecurityGroupSelectorTerm {
        tags: BTreeMap::new(),
        id: None,
        name: Some("default".to_string()),
    }];
    let class = env.resolve(c).await;
    let status = class.status.as_ref().unwrap();
    assert_eq!(
        status
            .subnets
            .iter()
            .map(|s| s.id.clone())
            .collect::<Vec<_>>(),
        [subnet]
    );
    assert_eq!(status.security_groups[0].name.as_deref(), Some("default"));
}

#[tokio::test(start_paused = true)]
async fn missing_role_or_profile_is_not_ready() {
    let env = env();
    let mut c = class("c", vec![alias_term("al2@latest")], None);
    c.spec.role = Some("NoSuchRole".to_string());
    let class = env.resolve(c).await;
    let p = condition(&class, CONDITION_INSTANCE_PROFILE_READY);
    assert_eq!(p.reason.as_deref(), Some("RoleNotFound"));
    assert!(p.message.as_deref().unwrap().contains("NoSuchRole"));

    let mut c = self::class("c2", vec![alias_term("al2@latest")], None);
    c.spec.role = None;
    c.spec.instance_profile = Some("missing-profile".to_string());
    let class = env.resolve(c).await;
    let p = condition(&class, CONDITION_INSTANCE_PROFILE_READY);
    assert_eq!(p.reason.as_deref(), Some("InstanceProfileNotFound"));
    assert!(!condition(&class, CONDITION_READY).is_true());
}

#[tokio::test(start_paused = true)]
async fn throttling_is_an_error_not_a_condition() {
    let env = env();
    env.sim.throttle("DescribeSubnets", 1);
    let c = class("c", vec![alias_term("al2@latest")], None);
    let err = env.provider.resolve_node_class(&c).await.unwrap_err();
    assert_eq!(err.code, codes::REQUEST_LIMIT_EXCEEDED);
    assert!(err.is_throttled());
    // The next attempt succeeds.
    assert!(env.provider.resolve_node_class(&c).await.unwrap().ready);
}

/// Also Karpenter's launch template suite (after v1.14.1), "should record the rendered user
/// data size, keyed by nodeclass" and "should delete the user data gauge when the nodeclass
/// launch templates are deleted" (`karpenter_ec2nodeclasses_userdata_bytes`).
#[tokio::test(start_paused = true)]
async fn deleting_a_class_cleans_up_templates_then_the_profile() {
    use driftwood_aws::ports::{DescribeLaunchTemplatesInput, Ec2Api};
    use driftwood_cloud::CloudProvider;

    let env = env();
    let class = env
        .resolve(class("c", vec![alias_term("al2@latest")], None))
        .await;
    let launched = env
        .provider
        .create(&claim("nc", "c", walkthrough_requirements(), "1"))
        .await
        .unwrap();
    // The class is cleaned up only once its NodeClaims are gone, long after EC2's eventual
    // consistency lets DescribeInstances see this instance (a cleanup within those seconds
    // would miss it and delete the profile under it).
    env.settle();
    let profile = class
        .status
        .as_ref()
        .unwrap()
        .instance_profile
        .clone()
        .unwrap();

    let sizes = env.provider.user_data_sizes().sizes();
    assert_eq!(sizes.len(), 1, "{sizes:?}");
    assert_eq!(sizes[0].0, "c");
    // The AL2 bootstrap script as rendered (plain text, before base64).
    assert!(sizes[0].1 > 100, "{sizes:?}");

    let report = env.provider.cleanup_node_class(&class).await.unwrap();
    assert_eq!(report.deleted_launch_templates.len(), 1);
    assert!(env.provider.user_data_sizes().sizes().is_empty());
    assert!(!report.done(), "an instance still runs");
    assert!(env.sim.instance_profile(&profile).is_some());
    assert!(
        env.sim
            .describe_launch_templates(DescribeLaunchTemplatesInput::default())
            .await
            .unwrap()
            .is_empty()
    );

    env.provider.delete(&launched).await.unwrap();
    let report = env.provider.cleanup_node_class(&class).await.unwrap();
    assert!(report.done());
    assert_eq!(
        report.deleted_instance_profile.as_deref(),
        Some(profile.as_str())
    );
    assert!(env.sim.instance_profile(&profile).is_none());
    // Idempotent.
    assert_eq!(
        env.provider.cleanup_node_class(&class).await.unwrap(),
        Default::default()
    );
}
