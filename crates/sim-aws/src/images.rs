//! The simulated EKS-optimized AMIs (AL2, AL2023, Bottlerocket; amd64 and arm64; Kubernetes
//! 1.27–1.34) and the SSM public parameters that name them.

use std::collections::BTreeMap;

use driftwood_aws::ports::{Image, Tag};
use jiff::{SignedDuration, Timestamp};

use crate::ids::{hex_id, resource_id};

/// The account that owns the EKS-optimized AMIs.
pub const AMAZON_EKS_ACCOUNT: &str = "602401143452";
/// Kubernetes minor versions the simulation publishes images for.
pub const KUBERNETES_VERSIONS: &[&str] = &[
    "1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34",
];

/// One EKS AMI release: the AL2/AL2023 release tag and the Bottlerocket version shipped with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// e.g. `v20240817`.
    pub eks_tag: String,
    /// e.g. `1.20.5` (no `v`).
    pub bottlerocket_version: String,
    /// When the release's images were created.
    pub created: Timestamp,
}

impl Release {
    /// A release with these versions, created at `created`.
    pub fn new(eks_tag: &str, bottlerocket_version: &str, created: Timestamp) -> Self {
        Self {
            eks_tag: eks_tag.to_string(),
            bottlerocket_version: bottlerocket_version.to_string(),
            created,
        }
    }
}

/// The releases present when a simulation starts (the last one is "latest").
pub fn default_releases() -> Vec<Release> {
    [
        ("v20240703", "1.20.3", "2024-07-03T03:10:00Z"),
        ("v20240729", "1.20.4", "2024-07-29T03:10:00Z"),
        ("v20240807", "1.20.5", "2024-08-07T03:10:00Z"),
        ("v20240817", "1.21.0", "2024-08-17T03:10:00Z"),
    ]
    .into_iter()
    .filter_map(|(tag, br, at)| {
        at.parse::<Timestamp>()
            .ok()
            .map(|t| Release::new(tag, br, t))
    })
    .collect()
}

/// An image plus what the simulation knows about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimImage {
    pub image: Image,
    /// The Kubernetes minor version the image's kubelet runs (None for custom images).
    pub kubernetes_version: Option<String>,
}

/// One image variant of a release: its name, EC2 architecture, SSM paths (latest and pinned),
/// and creation offset within the release.
struct Variant {
    name: String,
    arch: &'static str,
    latest_path: String,
    pinned_path: String,
    offset_minutes: i64,
    description: String,
}

fn variants(k8s: &str, r: &Release, seed: u64) -> Vec<Variant> {
    let tag = &r.eks_tag;
    let br = &r.bottlerocket_version;
    let eks = format!("/aws/service/eks/optimized-ami/{k8s}");
    let commit = hex_id(seed, &format!("bottlerocket/{br}"), 8);
    let al2023 = |arch: &'static str, minutes: i64| Variant {
        name: format!("amazon-eks-node-al2023-{arch}-standard-{k8s}-{tag}"),
        arch,
        latest_path: format!("{eks}/amazon-linux-2023/{arch}/standard/recommended/image_id"),
        pinned_path: format!(
            "{eks}/amazon-linux-2023/{arch}/standard/amazon-eks-node-al2023-{arch}-standard-{k8s}-{tag}/image_id"
        ),
        offset_minutes: minutes,
        description: format!(
            "EKS-optimized Kubernetes node based on Amazon Linux 2023, ({k8s}) {tag}"
        ),
    };
    let bottlerocket = |arch: &'static str, name_arch: &str, minutes: i64| Variant {
        name: format!("bottlerocket-aws-k8s-{k8s}-{name_arch}-v{br}-{commit}"),
        arch,
        latest_path: format!("/aws/service/bottlerocket/aws-k8s-{k8s}/{arch}/latest/image_id"),
        pinned_path: format!("/aws/service/bottlerocket/aws-k8s-{k8s}/{arch}/{br}/image_id"),
        offset_minutes: minutes,
        description: format!("bottlerocket-aws-k8s-{k8s}-{name_arch}-v{br}-{commit}"),
    };
    vec![
        bottlerocket("x86_64", "x86_64", 0),
        bottlerocket("arm64", "aarch64", 5),
        al2023("x86_64", 60),
        al2023("arm64", 65),
        Variant {
            name: format!("amazon-eks-node-{k8s}-{tag}"),
            arch: "x86_64",
            latest_path: format!("{eks}/amazon-linux-2/recommended/image_id"),
            pinned_path: format!("{eks}/amazon-linux-2/amazon-eks-node-{k8s}-{tag}/image_id"),
            offset_minutes: 120,
            description: format!(
                "EKS Kubernetes Worker AMI with AmazonLinux2 image, (k8s: {k8s}, containerd)"
            ),
        },
        Variant {
            name: format!("amazon-eks-arm64-node-{k8s}-{tag}"),
            arch: "arm64",
            latest_path: format!("{eks}/amazon-linux-2-arm64/recommended/image_id"),
            pinned_path: format!(
                "{eks}/amazon-linux-2-arm64/amazon-eks-arm64-node-{k8s}-{tag}/image_id"
            ),
            offset_minutes: 125,
            description: format!(
                "EKS Kubernetes Worker AMI for arm64 with AmazonLinux2 image, (k8s: {k8s})"
            ),
        },
    ]
}

/// Formats a timestamp as EC2 does (`2024-08-17T05:10:00.000Z`).
pub fn ec2_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S.000Z").to_string()
}

/// The images and SSM parameters (path → image id) of `release` for every Kubernetes version.
/// Pinned parameters are always returned; `latest` parameters too (the caller decides whether
/// the release is the newest).
pub fn release_images(
    seed: u64,
    release: &Release,
) -> (
    Vec<SimImage>,
    BTreeMap<String, String>,
    BTreeMap<String, String>,
) {
    let mut images = Vec::new();
    let mut pinned = BTreeMap::new();
    let mut latest = BTreeMap::new();
    for (ki, k8s) in KUBERNETES_VERSIONS.iter().enumerate() {
        for v in variants(k8s, release, seed) {
            let id = resource_id("ami", seed, &v.name);
            let created = release.created + SignedDuration::from_mins(v.offset_minutes + ki as i64);
            let deprecation = created + SignedDuration::from_hours(2 * 365 * 24);
            images.push(SimImage {
                image: Image {
                    image_id: id.clone(),
                    name: v.name.clone(),
                    description: v.description,
                    owner_id: AMAZON_EKS_ACCOUNT.to_string(),
                    image_owner_alias: Some("amazon".to_string()),
                    architecture: v.arch.to_string(),
                    creation_date: ec2_time(created),
                    deprecation_time: Some(ec2_time(deprecation)),
                    state: "available".to_string(),
                    platform_details: "Linux/UNIX".to_string(),
                    tags: vec![Tag::new("kubernetes-version", *k8s)],
                },
                kubernetes_version: Some(k8s.to_string()),
            });
            pinned.insert(v.pinned_path, id.clone());
            latest.insert(v.latest_path, id);
        }
    }
    (images, pinned, latest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths_look_real() {
        let r = Release::new(
            "v20240817",
            "1.20.5",
            "2024-08-17T03:10:00Z".parse().unwrap(),
        );
        let (images, pinned, latest) = release_images(1, &r);
        let names: Vec<&str> = images.iter().map(|i| i.image.name.as_str()).collect();
        assert!(names.contains(&"amazon-eks-node-1.29-v20240817"));
        assert!(names.contains(&"amazon-eks-arm64-node-1.29-v20240817"));
        assert!(names.contains(&"amazon-eks-node-al2023-x86_64-standard-1.29-v20240817"));
        assert!(
            names
                .iter()
                .any(|n| n.starts_with("bottlerocket-aws-k8s-1.29-x86_64-v1.20.5-"))
        );
        assert_eq!(images.len(), KUBERNETES_VERSIONS.len() * 6);
        assert!(latest.contains_key(
            "/aws/service/eks/optimized-ami/1.29/amazon-linux-2-arm64/recommended/image_id"
        ));
        assert!(
            latest.contains_key("/aws/service/bottlerocket/aws-k8s-1.29/arm64/latest/image_id")
        );
        assert!(pinned.contains_key(
            "/aws/service/eks/optimized-ami/1.29/amazon-linux-2/amazon-eks-node-1.29-v20240817/image_id"
        ));
        assert_eq!(
            images[0].image.creation_date.len(),
            "2024-08-17T03:10:00.000Z".len()
        );
    }
}
