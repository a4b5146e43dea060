//! The simulated EKS-optimized AMIs (AL2, AL2023, Bottlerocket, Windows; every variant and
//! architecture of every Kubernetes version each release was built for) and the SSM public
//! parameters that name them, built from public release facts (data/ami-releases.json).

mod facts;
mod variants;

use std::collections::BTreeMap;

use driftwood_aws::ports::{Image, Tag};
use jiff::{SignedDuration, Timestamp};

use crate::ids::{hex_id, resource_id};

pub use facts::newest_release;
pub use variants::Family;

/// The account that owns the EKS-optimized Linux AMIs (us-west-2).
pub const AMAZON_EKS_ACCOUNT: &str = "602401143452";
/// The account that owns Amazon's Windows AMIs.
pub const AMAZON_WINDOWS_ACCOUNT: &str = "801119661308";
/// When a simulation starts unless told otherwise: just after the newest release in the data
/// (EKS AMI release v20260714), so every release in the data is published at the start.
pub const DEFAULT_START_TIME: &str = "2026-07-20T00:00:00Z";
/// When a public AMI is deprecated: EC2 caps a public AMI's deprecation time at two years after
/// its creation (EnableImageDeprecation) and public AMIs carry that default.
pub const DEPRECATION_AFTER: SignedDuration = SignedDuration::from_hours(2 * 365 * 24);

/// [`DEFAULT_START_TIME`] as a timestamp.
pub fn default_start_time() -> Timestamp {
    DEFAULT_START_TIME.parse().unwrap_or(Timestamp::UNIX_EPOCH)
}

/// One release of one family: the images it built, per Kubernetes version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    pub family: Family,
    /// `v20250715`, `1.39.1` (no `v`) or `2025.07.16`.
    pub name: String,
    /// When the release's last image was created (it is published then).
    pub created: Timestamp,
    /// Kubernetes minor version → variant keys (see `variants::variant_image`).
    pub builds: BTreeMap<String, Vec<String>>,
}

impl Release {
    /// A new AL2/AL2023 release `tag` created at `at`, rebuilding every Kubernetes version with
    /// every variant it was ever built with in the data (for tests and scenarios: a release
    /// after the data's newest, e.g. on Kubernetes 1.29 whose AL2 builds have ended).
    pub fn new_eks(tag: &str, at: Timestamp) -> Self {
        let mut builds: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in &facts::facts().eks {
            for (k8s, b) in &r.kubernetes {
                let have = builds.entry(k8s.clone()).or_default();
                for v in &b.variants {
                    if !have.contains(v) {
                        have.push(v.clone());
                    }
                }
            }
        }
        Self {
            family: Family::Eks,
            name: tag.to_string(),
            created: at,
            builds,
        }
    }

    /// A new Bottlerocket release `version` (with or without `v`) created at `at`, for every
    /// Kubernetes version of the newest Bottlerocket release in the data.
    pub fn new_bottlerocket(version: &str, at: Timestamp) -> Self {
        let builds = facts::facts()
            .bottlerocket
            .last()
            .map(|r| {
                r.kubernetes
                    .iter()
                    .map(|k| (k.clone(), r.variants.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            family: Family::Bottlerocket,
            name: version.trim_start_matches('v').to_string(),
            created: at,
            builds,
        }
    }
}

/// Every release in the data, oldest first. A Kubernetes version's Bottlerocket and Windows
/// images newer than its last standard AL2 image are left out: the simulated account treats
/// that AL2 build as the version's last, so a name pattern such as `*-1.27-*` with owner
/// `amazon` still resolves to AL2 (as the public "update nodes with drift" walkthrough expects).
pub fn catalog_releases() -> Vec<Release> {
    let f = facts::facts();
    let mut releases: Vec<Release> = f
        .eks
        .iter()
        .map(|r| Release {
            family: Family::Eks,
            name: r.release.clone(),
            created: r.created,
            builds: r
                .kubernetes
                .iter()
                .map(|(k, b)| (k.clone(), b.variants.clone()))
                .collect(),
        })
        .collect();
    let last_al2 = last_standard_al2(&releases);
    let capped = |k8s: &str, created: Timestamp| last_al2.get(k8s).is_none_or(|t| created < *t);
    for r in &f.bottlerocket {
        let builds: BTreeMap<String, Vec<String>> = r
            .kubernetes
            .iter()
            .filter(|k| capped(k, r.created))
            .map(|k| (k.clone(), r.variants.clone()))
            .collect();
        releases.push(Release {
            family: Family::Bottlerocket,
            name: r.version.clone(),
            created: r.created,
            builds,
        });
    }
    for r in &f.windows {
        let builds: BTreeMap<String, Vec<String>> = r
            .kubernetes
            .iter()
            .filter(|(k, _)| capped(k, r.created))
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect();
        releases.push(Release {
            family: Family::Windows,
            name: r.release.clone(),
            created: r.created,
            builds,
        });
    }
    releases.retain(|r| !r.builds.is_empty());
    releases.sort_by_key(|r| (r.created, r.family));
    releases
}

/// Per Kubernetes version, when its last standard (x86_64) AL2 image was created.
fn last_standard_al2(releases: &[Release]) -> BTreeMap<String, Timestamp> {
    let mut last = BTreeMap::new();
    for r in releases.iter().filter(|r| r.family == Family::Eks) {
        for (k8s, variants) in &r.builds {
            if variants.iter().any(|v| v == "al2-x86_64") {
                last.insert(k8s.clone(), r.created);
            }
        }
    }
    last
}

/// Every Kubernetes version some release in the data built images for, oldest first.
pub fn kubernetes_versions() -> Vec<String> {
    let mut versions: Vec<String> = catalog_releases()
        .iter()
        .flat_map(|r| r.builds.keys().cloned())
        .collect();
    versions.sort_by_key(|v| minor(v));
    versions.dedup();
    versions
}

fn minor(k8s: &str) -> u32 {
    k8s.split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

/// An image plus what the simulation knows about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimImage {
    pub image: Image,
    /// The Kubernetes minor version the image's kubelet runs (None for custom images).
    pub kubernetes_version: Option<String>,
}

/// Formats a timestamp as EC2 does (`2024-08-17T05:10:00.000Z`).
pub fn ec2_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S.000Z").to_string()
}

/// What publishing a release adds: its images, its pinned SSM parameters and the parameters
/// that follow the newest release (path → image id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReleaseImages {
    pub images: Vec<SimImage>,
    pub pinned: Vec<(String, String)>,
    pub latest: Vec<(String, String)>,
}

/// The images and SSM parameters of `release`. Pure.
pub fn release_images(seed: u64, release: &Release) -> ReleaseImages {
    let mut out = ReleaseImages::default();
    let commit = hex_id(seed, &format!("bottlerocket/{}", release.name), 8);
    for (k8s, keys) in &release.builds {
        for key in keys {
            let Some(v) = variants::variant_image(release.family, &release.name, k8s, key, &commit)
            else {
                continue;
            };
            let id = resource_id("ami", seed, &v.name);
            let created = release.created - SignedDuration::from_mins(v.minutes_before);
            let (owner, platform) = if v.windows {
                (AMAZON_WINDOWS_ACCOUNT, "Windows")
            } else {
                (AMAZON_EKS_ACCOUNT, "Linux/UNIX")
            };
            out.images.push(SimImage {
                image: Image {
                    image_id: id.clone(),
                    name: v.name,
                    description: v.description,
                    owner_id: owner.to_string(),
                    image_owner_alias: Some("amazon".to_string()),
                    architecture: v.arch.to_string(),
                    creation_date: ec2_time(created),
                    deprecation_time: Some(ec2_time(created + DEPRECATION_AFTER)),
                    state: "available".to_string(),
                    platform_details: platform.to_string(),
                    tags: vec![Tag::new("kubernetes-version", k8s.as_str())],
                },
                kubernetes_version: Some(k8s.clone()),
            });
            if let Some(path) = v.pinned_path {
                out.pinned.push((path, id.clone()));
            }
            out.latest.push((v.latest_path, id));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(family: Family, name: &str) -> Release {
        catalog_releases()
            .into_iter()
            .find(|r| r.family == family && r.name == name)
            .unwrap()
    }

    #[test]
    fn a_release_publishes_every_variant_with_real_looking_names() {
        let out = release_images(1, &release(Family::Eks, "v20250715"));
        let names: Vec<&str> = out.images.iter().map(|i| i.image.name.as_str()).collect();
        for name in [
            "amazon-eks-node-1.29-v20250715",
            "amazon-eks-arm64-node-1.29-v20250715",
            "amazon-eks-gpu-node-1.29-v20250715",
            "amazon-eks-node-al2023-x86_64-standard-1.33-v20250715",
            "amazon-eks-node-al2023-x86_64-neuron-1.33-v20250715",
            "amazon-eks-node-al2023-arm64-nvidia-1.33-v20250715",
        ] {
            assert!(names.contains(&name), "{name} missing");
        }
        assert!(out.pinned.iter().any(|(p, _)| p
            == "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.33-v20250715/image_id"));
        let img = &out.images[0].image;
        assert_eq!(img.creation_date.len(), "2024-08-17T03:10:00.000Z".len());
        let created: Timestamp = img.creation_date.parse().unwrap();
        let deprecated: Timestamp = img.deprecation_time.as_deref().unwrap().parse().unwrap();
        assert_eq!(deprecated.duration_since(created), DEPRECATION_AFTER);
    }

    #[test]
    fn windows_2025_exists_only_from_kubernetes_1_35() {
        for r in catalog_releases()
            .iter()
            .filter(|r| r.family == Family::Windows)
        {
            for (k8s, editions) in &r.builds {
                let has_2025 = editions.iter().any(|e| e.starts_with("2025"));
                assert!(!has_2025 || minor(k8s) >= 35, "{} {k8s}", r.name);
            }
        }
    }

    #[test]
    fn no_bottlerocket_or_windows_image_is_newer_than_its_versions_last_al2() {
        let releases = catalog_releases();
        let last = last_standard_al2(&releases);
        for r in releases.iter().filter(|r| r.family != Family::Eks) {
            for k8s in r.builds.keys() {
                if let Some(t) = last.get(k8s) {
                    assert!(r.created < *t, "{:?} {} {k8s}", r.family, r.name);
                }
            }
        }
        assert!(last.contains_key("1.27") && last.contains_key("1.28"));
    }

    #[test]
    fn new_releases_rebuild_every_version() {
        let at: Timestamp = "2026-08-01T00:00:00Z".parse().unwrap();
        let eks = Release::new_eks("v20260801", at);
        assert!(eks.builds["1.29"].contains(&"al2-x86_64".to_string()));
        assert!(eks.builds.contains_key("1.36"));
        let br = Release::new_bottlerocket("v1.51.0", at);
        assert_eq!(br.name, "1.51.0");
        assert!(br.builds.contains_key("1.34"));
        assert!(default_start_time() > newest_release().unwrap());
    }
}
