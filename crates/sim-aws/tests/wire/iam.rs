//! The instance profile lifecycle through the wire: what the adapter reads back is the
//! account's profile, and each refusal arrives with IAM's code.

use driftwood_aws::ports::{CreateInstanceProfileInput, Tag, codes};

use crate::common::{CLUSTER, ROLE, env};

#[tokio::test]
async fn instance_profile_lifecycle() {
    let env = env().await;
    let iam = &env.wire.iam;
    let name = "demo_4871238742";
    let missing = iam.get_instance_profile(name).await.unwrap_err();
    assert_eq!(missing.code, codes::NO_SUCH_ENTITY);
    assert!(missing.is_not_found());

    let input = CreateInstanceProfileInput {
        instance_profile_name: name.to_string(),
        path: format!("/karpenter/us-west-2/{CLUSTER}/"),
        tags: vec![
            Tag::new(format!("kubernetes.io/cluster/{CLUSTER}"), "owned"),
            Tag::new("karpenter.k8s.aws/ec2nodeclass", "default & <more>"),
        ],
    };
    let created = iam.create_instance_profile(input.clone()).await.unwrap();
    assert_eq!(Some(created.clone()), env.sim.instance_profile(name));
    assert_eq!(created.path, input.path);
    assert_eq!(created.tags, input.tags);
    let again = iam.create_instance_profile(input).await.unwrap_err();
    assert_eq!(again.code, codes::ENTITY_ALREADY_EXISTS);

    iam.add_role_to_instance_profile(name, ROLE).await.unwrap();
    let got = iam.get_instance_profile(name).await.unwrap();
    assert_eq!(got.roles, [ROLE]);
    assert_eq!(Some(got), env.sim.instance_profile(name));
    let second = iam
        .add_role_to_instance_profile(name, ROLE)
        .await
        .unwrap_err();
    assert_eq!(second.code, codes::LIMIT_EXCEEDED);
    let no_role = iam
        .add_role_to_instance_profile(name, "NoSuchRole")
        .await
        .unwrap_err();
    assert_eq!(no_role.code, codes::NO_SUCH_ENTITY);

    let conflict = iam.delete_instance_profile(name).await.unwrap_err();
    assert_eq!(conflict.code, "DeleteConflict");
    iam.remove_role_from_instance_profile(name, ROLE)
        .await
        .unwrap();
    assert!(env.sim.instance_profile(name).unwrap().roles.is_empty());
    let not_attached = iam
        .remove_role_from_instance_profile(name, ROLE)
        .await
        .unwrap_err();
    assert_eq!(not_attached.code, codes::NO_SUCH_ENTITY);
    iam.delete_instance_profile(name).await.unwrap();
    assert_eq!(env.sim.instance_profile(name), None);
    let gone = iam.get_instance_profile(name).await.unwrap_err();
    assert_eq!(gone.code, codes::NO_SUCH_ENTITY);

    // The default path.
    let plain = iam
        .create_instance_profile(CreateInstanceProfileInput {
            instance_profile_name: "plain".to_string(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(plain.path, "/");
    assert_eq!(Some(plain), env.sim.instance_profile("plain"));
}
