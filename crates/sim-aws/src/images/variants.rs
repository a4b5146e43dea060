//! One image of a release: its EC2 name, architecture, description, SSM public parameters
//! (`recommended`/`latest` and pinned) and how long before the release time it was created, as
//! AWS names them for AL2, AL2023, Bottlerocket and Windows.

/// Which operating-system family a release belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// AL2 and AL2023 (one `vYYYYMMDD` release builds both).
    Eks,
    Bottlerocket,
    Windows,
}

/// An image as named and published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantImage {
    pub name: String,
    /// EC2 architecture (`x86_64`, `arm64`).
    pub arch: &'static str,
    pub description: String,
    /// The parameter that follows the newest release (`recommended`, `latest`, Windows').
    pub latest_path: String,
    /// The parameter naming this release's image, when the family has one.
    pub pinned_path: Option<String>,
    /// Minutes before the release time the image was created: the standard AL2 image is
    /// created last (0), so a name pattern over a Kubernetes version picks it among its release.
    pub minutes_before: i64,
    pub windows: bool,
}

/// The image `variant` (a data key such as `al2023-arm64-nvidia`, `nvidia-aarch64` or
/// `2022-Core`) of `release` for Kubernetes `k8s`; `None` for a key the simulation does not know.
pub fn variant_image(
    family: Family,
    release: &str,
    k8s: &str,
    variant: &str,
    commit: &str,
) -> Option<VariantImage> {
    match family {
        Family::Eks => eks(release, k8s, variant),
        Family::Bottlerocket => bottlerocket(release, k8s, variant, commit),
        Family::Windows => windows(release, k8s, variant),
    }
}

fn eks(tag: &str, k8s: &str, variant: &str) -> Option<VariantImage> {
    let eks = format!("/aws/service/eks/optimized-ami/{k8s}");
    let al2 = |dir: &str, prefix: &str, arch: &'static str, what: &str, minutes: i64| {
        let name = format!("{prefix}-{k8s}-{tag}");
        VariantImage {
            latest_path: format!("{eks}/{dir}/recommended/image_id"),
            pinned_path: Some(format!("{eks}/{dir}/{name}/image_id")),
            description: format!(
                "EKS Kubernetes Worker AMI{what} with AmazonLinux2 image (k8s: {k8s})"
            ),
            name,
            arch,
            minutes_before: minutes,
            windows: false,
        }
    };
    match variant {
        "al2-x86_64" => Some(al2("amazon-linux-2", "amazon-eks-node", "x86_64", "", 0)),
        "al2-arm64" => Some(al2(
            "amazon-linux-2-arm64",
            "amazon-eks-arm64-node",
            "arm64",
            " for arm64",
            5,
        )),
        "al2-x86_64-gpu" => Some(al2(
            "amazon-linux-2-gpu",
            "amazon-eks-gpu-node",
            "x86_64",
            " with GPU support",
            10,
        )),
        other => {
            let rest = other.strip_prefix("al2023-")?;
            let (arch, flavour) = rest.split_once('-')?;
            let arch: &'static str = match arch {
                "x86_64" => "x86_64",
                "arm64" => "arm64",
                _ => return None,
            };
            let order = match flavour {
                "standard" => 0,
                "nvidia" => 1,
                "neuron" => 2,
                _ => return None,
            };
            let name = format!("amazon-eks-node-al2023-{arch}-{flavour}-{k8s}-{tag}");
            let dir = format!("{eks}/amazon-linux-2023/{arch}/{flavour}");
            Some(VariantImage {
                latest_path: format!("{dir}/recommended/image_id"),
                pinned_path: Some(format!("{dir}/{name}/image_id")),
                description: format!(
                    "EKS-optimized Kubernetes node based on Amazon Linux 2023 ({flavour}), ({k8s}) {tag}"
                ),
                name,
                arch,
                minutes_before: 20 + 5 * order + if arch == "arm64" { 15 } else { 0 },
                windows: false,
            })
        }
    }
}

fn bottlerocket(version: &str, k8s: &str, variant: &str, commit: &str) -> Option<VariantImage> {
    let (flavour, name_arch) = match variant.split_once('-') {
        Some((flavour, arch)) => (format!("-{flavour}"), arch),
        None => (String::new(), variant),
    };
    let arch: &'static str = match name_arch {
        "x86_64" => "x86_64",
        "aarch64" => "arm64",
        _ => return None,
    };
    let name = format!("bottlerocket-aws-k8s-{k8s}{flavour}-{name_arch}-v{version}-{commit}");
    let dir = format!("/aws/service/bottlerocket/aws-k8s-{k8s}{flavour}/{arch}");
    Some(VariantImage {
        latest_path: format!("{dir}/latest/image_id"),
        pinned_path: Some(format!("{dir}/{version}/image_id")),
        description: name.clone(),
        minutes_before: if arch == "arm64" { 35 } else { 40 }
            + if flavour.is_empty() { 0 } else { 10 },
        name,
        arch,
        windows: false,
    })
}

fn windows(release: &str, k8s: &str, variant: &str) -> Option<VariantImage> {
    let (year, edition) = variant.split_once('-')?;
    if !matches!(year, "2019" | "2022" | "2025") || !matches!(edition, "Core" | "Full") {
        return None;
    }
    let base = format!("Windows_Server-{year}-English-{edition}-EKS_Optimized-{k8s}");
    Some(VariantImage {
        latest_path: format!("/aws/service/ami-windows-latest/{base}/image_id"),
        pinned_path: None,
        description: format!(
            "Microsoft Windows Server {year} {edition} optimized for EKS, Kubernetes {k8s}"
        ),
        name: format!("{base}-{release}"),
        arch: "x86_64",
        minutes_before: if edition == "Full" { 60 } else { 65 },
        windows: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths_look_real() {
        let al2 = variant_image(Family::Eks, "v20240817", "1.29", "al2-x86_64", "").unwrap();
        assert_eq!(al2.name, "amazon-eks-node-1.29-v20240817");
        assert_eq!(
            al2.pinned_path.as_deref(),
            Some(
                "/aws/service/eks/optimized-ami/1.29/amazon-linux-2/amazon-eks-node-1.29-v20240817/image_id"
            )
        );
        let neuron =
            variant_image(Family::Eks, "v20250715", "1.33", "al2023-x86_64-neuron", "").unwrap();
        assert_eq!(
            neuron.latest_path,
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/neuron/recommended/image_id"
        );
        let br = variant_image(
            Family::Bottlerocket,
            "1.39.1",
            "1.30",
            "nvidia-aarch64",
            "0a1b2c3d",
        )
        .unwrap();
        assert_eq!(
            br.name,
            "bottlerocket-aws-k8s-1.30-nvidia-aarch64-v1.39.1-0a1b2c3d"
        );
        assert_eq!(br.arch, "arm64");
        assert_eq!(
            br.latest_path,
            "/aws/service/bottlerocket/aws-k8s-1.30-nvidia/arm64/latest/image_id"
        );
        let win = variant_image(Family::Windows, "2025.07.16", "1.30", "2022-Full", "").unwrap();
        assert_eq!(
            win.name,
            "Windows_Server-2022-English-Full-EKS_Optimized-1.30-2025.07.16"
        );
        assert_eq!(
            win.latest_path,
            "/aws/service/ami-windows-latest/Windows_Server-2022-English-Full-EKS_Optimized-1.30/image_id"
        );
        assert!(variant_image(Family::Eks, "v1", "1.29", "al2023-s390x-standard", "").is_none());
    }

    #[test]
    fn standard_al2_is_created_last_in_its_release() {
        let keys = [
            "al2-arm64",
            "al2-x86_64-gpu",
            "al2023-x86_64-standard",
            "al2023-x86_64-nvidia",
            "al2023-x86_64-neuron",
            "al2023-arm64-standard",
            "al2023-arm64-nvidia",
        ];
        for key in keys {
            let v = variant_image(Family::Eks, "v1", "1.29", key, "").unwrap();
            assert!(v.minutes_before > 0, "{key}");
        }
    }
}
