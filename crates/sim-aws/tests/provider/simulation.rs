//! The simulation itself: SSM paths, ids, determinism, fault knobs.

use driftwood_aws::ports::{
    AwsError, DescribeImagesInput, DescribeInstanceTypeOfferingsInput, Ec2Api, Filter, codes,
};
use driftwood_cloud::CloudProvider;
use driftwood_sim_aws::AMAZON_EKS_ACCOUNT;

use crate::common::*;

#[tokio::test(start_paused = true)]
async fn ssm_public_parameters_exist_for_every_version_and_family() {
    let env = env();
    for v in ["1.28", "1.29", "1.30", "1.31", "1.32"] {
        for path in [
            format!("/aws/service/eks/optimized-ami/{v}/amazon-linux-2/recommended/image_id"),
            format!("/aws/service/eks/optimized-ami/{v}/amazon-linux-2-arm64/recommended/image_id"),
            format!("/aws/service/eks/optimized-ami/{v}/amazon-linux-2-gpu/recommended/image_id"),
            format!(
                "/aws/service/eks/optimized-ami/{v}/amazon-linux-2023/x86_64/standard/recommended/image_id"
            ),
            format!(
                "/aws/service/eks/optimized-ami/{v}/amazon-linux-2023/arm64/standard/recommended/image_id"
            ),
            format!(
                "/aws/service/eks/optimized-ami/{v}/amazon-linux-2023/x86_64/nvidia/recommended/image_id"
            ),
            format!(
                "/aws/service/eks/optimized-ami/{v}/amazon-linux-2023/x86_64/neuron/recommended/image_id"
            ),
            format!("/aws/service/bottlerocket/aws-k8s-{v}/x86_64/latest/image_id"),
            format!("/aws/service/bottlerocket/aws-k8s-{v}/arm64/latest/image_id"),
            format!("/aws/service/bottlerocket/aws-k8s-{v}-nvidia/x86_64/latest/image_id"),
            format!("/aws/service/bottlerocket/aws-k8s-{v}-nvidia/arm64/latest/image_id"),
            format!(
                "/aws/service/eks/optimized-ami/{v}/amazon-linux-2/amazon-eks-node-{v}-v20250715/image_id"
            ),
        ] {
            let p = env.sim.ssm_get_parameter(&path).unwrap();
            let img = env.sim.image(&p.value).unwrap();
            assert_eq!(img.kubernetes_version.as_deref(), Some(v));
            assert_eq!(img.image.owner_id, AMAZON_EKS_ACCOUNT);
            assert!(p.value.starts_with("ami-") && p.value.len() == 21);
        }
    }
    let err = env
        .sim
        .ssm_get_parameter(
            "/aws/service/eks/optimized-ami/1.99/amazon-linux-2/recommended/image_id",
        )
        .unwrap_err();
    assert_eq!(err.code, codes::PARAMETER_NOT_FOUND);
}

#[tokio::test(start_paused = true)]
async fn publishing_a_release_moves_latest_but_not_pinned() {
    let env = env();
    let latest = "/aws/service/eks/optimized-ami/1.29/amazon-linux-2/recommended/image_id";
    let pinned = "/aws/service/eks/optimized-ami/1.29/amazon-linux-2/amazon-eks-node-1.29-v20251209/image_id";
    let before = env.sim.ssm_get_parameter(latest).unwrap();
    assert_eq!(
        before.value,
        env.sim.ssm_get_parameter(pinned).unwrap().value
    );
    env.sim.publish_release_at("v20260801", "1.51.0", start());
    let after = env.sim.ssm_get_parameter(latest).unwrap();
    assert_ne!(after.value, before.value);
    assert_eq!(after.version, before.version + 1);
    assert_eq!(
        env.sim.ssm_get_parameter(pinned).unwrap().value,
        before.value
    );
    assert_eq!(
        env.sim.image(&after.value).unwrap().image.name,
        "amazon-eks-node-1.29-v20260801"
    );
}

#[tokio::test(start_paused = true)]
async fn same_seed_same_world_other_seed_other_ids() {
    let a = env_for("1.29", 7);
    let b = env_for("1.29", 7);
    let c = env_for("1.29", 8);
    let name = "amazon-eks-node-1.29-v20250715";
    assert_eq!(a.sim.image_id_by_name(name), b.sim.image_id_by_name(name));
    assert_ne!(a.sim.image_id_by_name(name), c.sim.image_id_by_name(name));
    let la = launch_default(&a).await;
    let lb = launch_default(&b).await;
    assert_eq!(la.status, lb.status);
    assert_eq!(la.metadata.labels, lb.metadata.labels);
}

#[tokio::test(start_paused = true)]
async fn offerings_have_gaps_and_filters_work() {
    let env = env();
    let offerings = env
        .sim
        .describe_instance_type_offerings(DescribeInstanceTypeOfferingsInput {
            location_type: "availability-zone".to_string(),
            filters: vec![Filter::new("instance-type", ["d3.*"])],
        })
        .await
        .unwrap();
    assert!(!offerings.is_empty());
    assert!(
        offerings.iter().all(|o| o.location != "us-west-2c"),
        "d3 is not offered in us-west-2c"
    );
    let images = env
        .sim
        .describe_images(DescribeImagesInput {
            owners: vec!["amazon".to_string()],
            filters: vec![Filter::new(
                "name",
                ["amazon-eks-node-al2023-*-standard-1.30-*"],
            )],
            ..Default::default()
        })
        .await
        .unwrap();
    // Every AL2023 release that built 1.30 (94 in the data), both architectures; the
    // deprecated ones (over two years old) are left out unless asked for.
    let all = env
        .sim
        .describe_images(DescribeImagesInput {
            owners: vec!["amazon".to_string()],
            filters: vec![Filter::new(
                "name",
                ["amazon-eks-node-al2023-*-standard-1.30-*"],
            )],
            include_deprecated: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 2 * 94);
    assert!(!images.is_empty() && images.len() < all.len());
}

#[tokio::test(start_paused = true)]
async fn injected_errors_surface_with_their_aws_code() {
    let env = env();
    env.resolve(class("c", vec![alias_term("al2@latest")], None))
        .await;
    env.sim.inject_error(
        "CreateFleet",
        AwsError::new(codes::INTERNAL_ERROR, "We encountered an internal error."),
    );
    let err = env
        .provider
        .create(&claim("nc", "c", walkthrough_requirements(), "1"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("InternalError"), "{err}");
    // One-shot: the next launch works.
    env.provider
        .create(&claim("nc", "c", walkthrough_requirements(), "1"))
        .await
        .unwrap();
}

async fn launch_default(e: &Env) -> driftwood_api::NodeClaim {
    e.resolve(class("c", vec![alias_term("al2@latest")], None))
        .await;
    e.provider
        .create(&claim("nc", "c", walkthrough_requirements(), "1"))
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn walkthrough_placeholders_resolve_to_real_images() {
    let env = env();
    let amd = env.sim.eks_ami("al2", "latest", "1.28", "amd64").unwrap();
    let arm = env.sim.eks_ami("al2", "latest", "1.28", "arm64").unwrap();
    assert_eq!(
        env.sim.image(&amd).unwrap().image.name,
        "amazon-eks-node-1.28-v20251112"
    );
    assert_eq!(
        env.sim.image(&arm).unwrap().image.name,
        "amazon-eks-arm64-node-1.28-v20251112"
    );
    let pinned = env
        .sim
        .eks_ami("al2023", "v20240625", "1.30", "arm64")
        .unwrap();
    assert_eq!(
        env.sim.image(&pinned).unwrap().image.name,
        "amazon-eks-node-al2023-arm64-standard-1.30-v20240625"
    );
    assert_eq!(env.sim.eks_ami("ubuntu", "latest", "1.30", "amd64"), None);
}
