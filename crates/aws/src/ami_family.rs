//! AMI families: aliases (`family@version`), the SSM public parameter paths each resolves
//! through, the requirements each image variant carries, and inference of the family from an
//! image name.

use driftwood_api::NodeSelectorRequirementWithMinValues as Requirement;
use driftwood_api::ec2nodeclass as api;
use driftwood_api::requirement::{OP_DOES_NOT_EXIST, OP_EXISTS, OP_IN};
use driftwood_api::wellknown::{
    LABEL_ARCH, LABEL_INSTANCE_ACCELERATOR_COUNT, LABEL_INSTANCE_GPU_COUNT,
};

/// An operating-system family of node images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AmiFamily {
    Al2,
    Al2023,
    Bottlerocket,
    Windows2019,
    Windows2022,
    Windows2025,
    Custom,
}

impl AmiFamily {
    /// The amiFamily spelling (`AL2`, `AL2023`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Al2 => api::AMI_FAMILY_AL2,
            Self::Al2023 => api::AMI_FAMILY_AL2023,
            Self::Bottlerocket => api::AMI_FAMILY_BOTTLEROCKET,
            Self::Windows2019 => api::AMI_FAMILY_WINDOWS2019,
            Self::Windows2022 => api::AMI_FAMILY_WINDOWS2022,
            Self::Windows2025 => api::AMI_FAMILY_WINDOWS2025,
            Self::Custom => api::AMI_FAMILY_CUSTOM,
        }
    }

    /// Parses an amiFamily value (`AL2`, `AL2023`, `Bottlerocket`, `Windows2019`,
    /// `Windows2022`, `Windows2025`, `Custom`).
    pub fn from_spec(value: &str) -> Option<Self> {
        [
            Self::Al2,
            Self::Al2023,
            Self::Bottlerocket,
            Self::Windows2019,
            Self::Windows2022,
            Self::Windows2025,
            Self::Custom,
        ]
        .into_iter()
        .find(|f| f.as_str().eq_ignore_ascii_case(value))
    }

    /// Parses the family part of an alias (`al2`, `al2023`, `bottlerocket`, `windows2019`,
    /// `windows2022`, `windows2025`).
    pub fn from_alias(value: &str) -> Option<Self> {
        match value.to_ascii_lowercase().as_str() {
            "al2" => Some(Self::Al2),
            "al2023" => Some(Self::Al2023),
            "bottlerocket" => Some(Self::Bottlerocket),
            "windows2019" => Some(Self::Windows2019),
            "windows2022" => Some(Self::Windows2022),
            "windows2025" => Some(Self::Windows2025),
            _ => None,
        }
    }

    /// Infers the family from an image name (`amazon-eks-node-al2023-*` → AL2023,
    /// `amazon-eks-*node-*` → AL2, `bottlerocket-*` → Bottlerocket, EKS Windows images →
    /// Windows, anything else → Custom).
    pub fn infer_from_image_name(name: &str) -> Self {
        if name.starts_with("amazon-eks-node-al2023-") {
            Self::Al2023
        } else if name.starts_with("amazon-eks-node-")
            || name.starts_with("amazon-eks-arm64-node-")
            || name.starts_with("amazon-eks-gpu-node-")
        {
            Self::Al2
        } else if name.starts_with("bottlerocket-") {
            Self::Bottlerocket
        } else if name.starts_with("Windows_Server-2019-") && name.contains("EKS_Optimized") {
            Self::Windows2019
        } else if name.starts_with("Windows_Server-2022-") && name.contains("EKS_Optimized") {
            Self::Windows2022
        } else if name.starts_with("Windows_Server-2025-") && name.contains("EKS_Optimized") {
            Self::Windows2025
        } else {
            Self::Custom
        }
    }

    /// The OS label value nodes of this family get.
    pub fn os(self) -> &'static str {
        match self {
            Self::Windows2019 | Self::Windows2022 | Self::Windows2025 => "windows",
            _ => "linux",
        }
    }
}

/// What kind of instance an EKS-optimized image is built for (Karpenter's AMI variants).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// No GPU and no accelerator.
    Standard,
    /// An NVIDIA GPU (the instance has a GPU count).
    Nvidia,
    /// A Neuron device (the instance has an accelerator count).
    Neuron,
    /// Any instance of the architecture (Windows images).
    Any,
}

impl Variant {
    /// The requirements an instance type meets to use an image of this variant.
    pub fn requirements(self) -> Vec<Requirement> {
        match self {
            Variant::Standard => vec![
                Requirement::new(LABEL_INSTANCE_ACCELERATOR_COUNT, OP_DOES_NOT_EXIST, &[]),
                Requirement::new(LABEL_INSTANCE_GPU_COUNT, OP_DOES_NOT_EXIST, &[]),
            ],
            Variant::Nvidia => vec![Requirement::new(LABEL_INSTANCE_GPU_COUNT, OP_EXISTS, &[])],
            Variant::Neuron => vec![Requirement::new(
                LABEL_INSTANCE_ACCELERATOR_COUNT,
                OP_EXISTS,
                &[],
            )],
            Variant::Any => Vec::new(),
        }
    }
}

/// One SSM public parameter an alias resolves through: the architecture of the image it names
/// and the variants that image serves (the AL2 GPU image serves NVIDIA and Neuron instances,
/// Bottlerocket's x86_64 image standard and Neuron ones, as in Karpenter v1.14).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasParameter {
    pub path: String,
    /// `amd64` or `arm64`.
    pub arch: &'static str,
    pub variants: Vec<Variant>,
}

impl AliasParameter {
    /// One requirement set per variant, each with the architecture: an instance type may use
    /// the image when it meets any of them.
    pub fn requirement_sets(&self) -> Vec<Vec<Requirement>> {
        self.variants
            .iter()
            .map(|v| {
                let mut reqs = vec![arch_requirement(self.arch)];
                reqs.extend(v.requirements());
                reqs
            })
            .collect()
    }
}

/// Why an alias is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AliasError {
    #[error("alias {alias:?} is not of the form family@version")]
    Malformed { alias: String },
    #[error(
        "alias {alias:?} names unknown family {family:?} (want al2, al2023, bottlerocket, windows2019, windows2022 or windows2025)"
    )]
    UnknownFamily { alias: String, family: String },
    #[error(
        "alias {alias:?}: {family} images need Kubernetes {minimum} or later; the cluster runs {kubernetes_version}"
    )]
    KubernetesTooOld {
        alias: String,
        family: &'static str,
        minimum: &'static str,
        kubernetes_version: String,
    },
    #[error("alias {alias:?}: version {version:?} must be 'latest' or a release like {example}")]
    BadVersion {
        alias: String,
        version: String,
        example: &'static str,
    },
}

/// Checks that the cluster's Kubernetes version can run the alias's family: Windows Server 2025
/// EKS images exist from Kubernetes 1.35 on (as Karpenter v1.14 checks before resolving).
pub fn check_kubernetes_version(
    alias: &str,
    family: AmiFamily,
    kubernetes_version: &str,
) -> Result<(), AliasError> {
    let minor = kubernetes_version
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .and_then(|m| m.parse::<u32>().ok());
    match (family, minor) {
        (AmiFamily::Windows2025, Some(minor)) if minor < 35 => Err(AliasError::KubernetesTooOld {
            alias: alias.to_string(),
            family: family.as_str(),
            minimum: "1.35",
            kubernetes_version: kubernetes_version.to_string(),
        }),
        _ => Ok(()),
    }
}

/// Splits and checks an alias, returning its family and version.
pub fn parse_alias(alias: &str) -> Result<(AmiFamily, String), AliasError> {
    let Some((family, version)) = alias.split_once('@') else {
        return Err(AliasError::Malformed {
            alias: alias.to_string(),
        });
    };
    let Some(parsed) = AmiFamily::from_alias(family) else {
        return Err(AliasError::UnknownFamily {
            alias: alias.to_string(),
            family: family.to_string(),
        });
    };
    let version = version.trim();
    let ok = match parsed {
        _ if version == "latest" => true,
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => false,
        _ => version.len() > 1 && version.starts_with('v'),
    };
    if !ok {
        let example = match parsed {
            AmiFamily::Bottlerocket => "v1.20.5",
            AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
                "latest (the only version)"
            }
            _ => "v20240807",
        };
        return Err(AliasError::BadVersion {
            alias: alias.to_string(),
            version: version.to_string(),
            example,
        });
    }
    Ok((parsed, version.to_string()))
}

fn arch_requirement(arch: &str) -> Requirement {
    Requirement::new(LABEL_ARCH, OP_IN, &[arch])
}

/// The SSM public parameters an alias of `family` at `version` resolves through for a cluster
/// running Kubernetes `k8s` (e.g. `1.29`).
pub fn alias_parameters(family: AmiFamily, version: &str, k8s: &str) -> Vec<AliasParameter> {
    let eks = format!("/aws/service/eks/optimized-ami/{k8s}");
    let latest = version == "latest";
    use Variant::{Any, Neuron, Nvidia, Standard};
    let p = |path: String, arch: &'static str, variants: &[Variant]| AliasParameter {
        path,
        arch,
        variants: variants.to_vec(),
    };
    match family {
        AmiFamily::Al2 => {
            let variant = |dir: &str, prefix: &str| {
                if latest {
                    format!("{eks}/{dir}/recommended/image_id")
                } else {
                    format!("{eks}/{dir}/{prefix}-{k8s}-{version}/image_id")
                }
            };
            vec![
                p(
                    variant("amazon-linux-2", "amazon-eks-node"),
                    "amd64",
                    &[Standard],
                ),
                p(
                    variant("amazon-linux-2-arm64", "amazon-eks-arm64-node"),
                    "arm64",
                    &[Standard],
                ),
                p(
                    variant("amazon-linux-2-gpu", "amazon-eks-gpu-node"),
                    "amd64",
                    &[Neuron, Nvidia],
                ),
            ]
        }
        AmiFamily::Al2023 => {
            let variant = |arch: &str, flavour: &str| {
                let dir = format!("{eks}/amazon-linux-2023/{arch}/{flavour}");
                if latest {
                    format!("{dir}/recommended/image_id")
                } else {
                    format!(
                        "{dir}/amazon-eks-node-al2023-{arch}-{flavour}-{k8s}-{version}/image_id"
                    )
                }
            };
            vec![
                p(variant("x86_64", "standard"), "amd64", &[Standard]),
                p(variant("arm64", "standard"), "arm64", &[Standard]),
                p(variant("x86_64", "nvidia"), "amd64", &[Nvidia]),
                p(variant("x86_64", "neuron"), "amd64", &[Neuron]),
                p(variant("arm64", "nvidia"), "arm64", &[Nvidia]),
            ]
        }
        AmiFamily::Bottlerocket => {
            let release = if latest {
                "latest".to_string()
            } else {
                version.trim_start_matches('v').to_string()
            };
            let variant = |flavour: &str, arch: &str| {
                format!(
                    "/aws/service/bottlerocket/aws-k8s-{k8s}{flavour}/{arch}/{release}/image_id"
                )
            };
            vec![
                p(variant("", "x86_64"), "amd64", &[Standard, Neuron]),
                p(variant("", "arm64"), "arm64", &[Standard]),
                p(variant("-nvidia", "x86_64"), "amd64", &[Nvidia]),
                p(variant("-nvidia", "arm64"), "arm64", &[Nvidia]),
            ]
        }
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            let year = match family {
                AmiFamily::Windows2019 => "2019",
                AmiFamily::Windows2022 => "2022",
                _ => "2025",
            };
            vec![p(
                format!(
                    "/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id"
                ),
                "amd64",
                &[Any],
            )]
        }
        AmiFamily::Custom => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Karpenter v1.14 (amifamily/ami.go): Windows Server 2025 needs EKS 1.35 or later.
    #[test]
    fn windows2025_needs_kubernetes_1_35() {
        let error = check_kubernetes_version("windows2025@latest", AmiFamily::Windows2025, "1.34")
            .unwrap_err();
        assert!(
            error.to_string().contains("Kubernetes 1.35 or later"),
            "{error}"
        );
        assert!(
            check_kubernetes_version("windows2025@latest", AmiFamily::Windows2025, "1.35").is_ok()
        );
        assert!(
            check_kubernetes_version("windows2022@latest", AmiFamily::Windows2022, "1.29").is_ok()
        );
        assert_eq!(
            AmiFamily::from_alias("windows2025"),
            Some(AmiFamily::Windows2025)
        );
        assert_eq!(
            AmiFamily::from_spec("Windows2025").map(AmiFamily::os),
            Some("windows")
        );
    }

    #[test]
    fn al2_latest_paths() {
        let ps = alias_parameters(AmiFamily::Al2, "latest", "1.29");
        assert_eq!(
            ps[0].path,
            "/aws/service/eks/optimized-ami/1.29/amazon-linux-2/recommended/image_id"
        );
        assert_eq!(
            ps[1].path,
            "/aws/service/eks/optimized-ami/1.29/amazon-linux-2-arm64/recommended/image_id"
        );
    }

    #[test]
    fn pinned_paths() {
        let ps = alias_parameters(AmiFamily::Al2, "v20240807", "1.29");
        assert_eq!(
            ps[0].path,
            "/aws/service/eks/optimized-ami/1.29/amazon-linux-2/amazon-eks-node-1.29-v20240807/image_id"
        );
        let ps = alias_parameters(AmiFamily::Al2023, "v20240807", "1.29");
        assert_eq!(
            ps[1].path,
            "/aws/service/eks/optimized-ami/1.29/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.29-v20240807/image_id"
        );
        let ps = alias_parameters(AmiFamily::Bottlerocket, "v1.20.5", "1.29");
        assert_eq!(
            ps[0].path,
            "/aws/service/bottlerocket/aws-k8s-1.29/x86_64/1.20.5/image_id"
        );
        let ps = alias_parameters(AmiFamily::Al2023, "latest", "1.30");
        assert_eq!(
            ps[0].path,
            "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/standard/recommended/image_id"
        );
    }

    #[test]
    fn alias_parsing() {
        assert_eq!(
            parse_alias("al2023@latest").unwrap(),
            (AmiFamily::Al2023, "latest".to_string())
        );
        assert_eq!(
            parse_alias("AL2@v20240807").unwrap(),
            (AmiFamily::Al2, "v20240807".to_string())
        );
        assert!(matches!(
            parse_alias("al2"),
            Err(AliasError::Malformed { .. })
        ));
        assert!(matches!(
            parse_alias("ubuntu@latest"),
            Err(AliasError::UnknownFamily { .. })
        ));
        assert!(matches!(
            parse_alias("windows2022@v1"),
            Err(AliasError::BadVersion { .. })
        ));
        assert!(matches!(
            parse_alias("al2@20240807"),
            Err(AliasError::BadVersion { .. })
        ));
    }

    #[test]
    fn family_inference() {
        assert_eq!(
            AmiFamily::infer_from_image_name("amazon-eks-node-1.29-v20240817"),
            AmiFamily::Al2
        );
        assert_eq!(
            AmiFamily::infer_from_image_name("amazon-eks-arm64-node-1.29-v20240817"),
            AmiFamily::Al2
        );
        assert_eq!(
            AmiFamily::infer_from_image_name(
                "amazon-eks-node-al2023-x86_64-standard-1.29-v20240817"
            ),
            AmiFamily::Al2023
        );
        assert_eq!(
            AmiFamily::infer_from_image_name("bottlerocket-aws-k8s-1.29-x86_64-v1.20.5-a3e8bda1"),
            AmiFamily::Bottlerocket
        );
        assert_eq!(
            AmiFamily::infer_from_image_name("my-golden-image"),
            AmiFamily::Custom
        );
    }
}
