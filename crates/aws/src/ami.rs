//! AMI resolution: turns amiSelectorTerms into the images nodes launch with, newest image per
//! requirement set (architecture, accelerator) first, deprecated images last.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use driftwood_api::NodeSelectorRequirementWithMinValues as Requirement;
use driftwood_api::ec2nodeclass::AmiSelectorTerm;
use driftwood_api::requirement::OP_IN;
use driftwood_api::wellknown::LABEL_ARCH;
use driftwood_scheduling::Requirements;
use jiff::Timestamp;

use super::ami_family::{
    AliasError, AmiFamily, alias_parameters, check_kubernetes_version, parse_alias,
};
use super::filters::tag_filters;
use crate::ports::{
    AwsError, DescribeImagesInput, Ec2Api, Filter, GetParameterInput, Image, SsmApi,
};

/// One image a class resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedAmi {
    pub id: String,
    pub name: String,
    /// `amd64` or `arm64`.
    pub arch: String,
    pub creation_date: String,
    pub deprecated: bool,
    /// Requirements an instance type must meet to use this image.
    pub requirements: Vec<Requirement>,
}

/// Why a term resolved nothing (or could not be used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnmatchedTerm {
    /// Position in amiSelectorTerms.
    pub index: usize,
    /// Why: "matched no image", or the alias error.
    pub detail: String,
}

/// The outcome of resolving a class's amiSelectorTerms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AmiResolution {
    /// The chosen images, one per requirement set, in preference order.
    pub amis: Vec<ResolvedAmi>,
    /// Terms that matched nothing.
    pub unmatched: Vec<UnmatchedTerm>,
    /// The family the images imply when the class gives no amiFamily and no alias.
    pub inferred_family: Option<AmiFamily>,
}

/// Maps an EC2 architecture to the Kubernetes one; `None` for architectures nodes cannot use.
pub fn kube_arch(ec2_arch: &str) -> Option<&'static str> {
    match ec2_arch {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    }
}

/// Owners queried for a name/tags term: the term's owner, else self and amazon for name terms.
pub fn term_owners(term: &AmiSelectorTerm) -> Vec<String> {
    match (&term.owner, &term.name) {
        (Some(owner), _) => vec![owner.clone()],
        (None, Some(_)) => vec!["self".to_string(), "amazon".to_string()],
        (None, None) => Vec::new(),
    }
}

fn is_deprecated(image: &Image, now: Timestamp) -> bool {
    image
        .deprecation_time
        .as_deref()
        .and_then(|t| t.parse::<Timestamp>().ok())
        .is_some_and(|t| t <= now)
}

fn candidate(
    image: &Image,
    requirements: Option<&[Requirement]>,
    now: Timestamp,
) -> Option<ResolvedAmi> {
    if image.state != "available" {
        return None;
    }
    let arch = kube_arch(&image.architecture)?;
    let requirements = match requirements {
        Some(r) => r.to_vec(),
        None => vec![Requirement::new(LABEL_ARCH, OP_IN, &[arch])],
    };
    Some(ResolvedAmi {
        id: image.image_id.clone(),
        name: image.name.clone(),
        arch: arch.to_string(),
        creation_date: image.creation_date.clone(),
        deprecated: is_deprecated(image, now),
        requirements,
    })
}

fn creation_key(date: &str) -> (Option<Timestamp>, String) {
    (date.parse::<Timestamp>().ok(), date.to_string())
}

fn requirements_key(reqs: &[Requirement]) -> String {
    let mut parts: Vec<String> = reqs
        .iter()
        .map(|r| format!("{}|{}|{}", r.key, r.operator, r.values.join(",")))
        .collect();
    parts.sort();
    parts.join(";")
}

/// Orders candidates (non-deprecated first, newest first, then name and id) and keeps the first
/// image of each requirement set. Pure.
pub fn select_newest(candidates: Vec<ResolvedAmi>) -> Vec<ResolvedAmi> {
    // Each creation date is parsed once, not once per comparison (thousands of images match a
    // wide name pattern).
    let mut keyed: Vec<_> = candidates
        .into_iter()
        .map(|c| (Reverse(creation_key(&c.creation_date)), c))
        .collect();
    keyed.sort_by(|(ka, a), (kb, b)| {
        a.deprecated
            .cmp(&b.deprecated)
            .then_with(|| ka.cmp(kb))
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.id.cmp(&b.id))
    });
    // The newest image of each requirement set (an image serving two variants stays twice,
    // once per set).
    let mut seen_reqs = BTreeSet::new();
    keyed
        .into_iter()
        .map(|(_, c)| c)
        .filter(|c| seen_reqs.insert(requirements_key(&c.requirements)))
        .collect()
}

/// The requirements of `ami` in the scheduling model; `None` when one cannot be read (such an
/// image suits no instance type).
pub fn ami_requirements(ami: &ResolvedAmi) -> Option<Requirements> {
    Requirements::from_api(&ami.requirements).ok()
}

/// The images of `amis` an instance type with `requirements` may use, in preference order: each
/// of the image's requirements is met by some value the type allows, or by the type not having
/// the label when the requirement admits that (`NotIn`, `DoesNotExist`).
pub fn compatible_amis<'a>(
    amis: &'a [ResolvedAmi],
    requirements: &Requirements,
) -> Vec<&'a ResolvedAmi> {
    amis.iter()
        .filter(|a| {
            ami_requirements(a).is_some_and(|ami| requirements.compatible(&ami, |_| false).is_ok())
        })
        .collect()
}

async fn get_parameter_value(ssm: &dyn SsmApi, name: &str) -> Result<Option<String>, AwsError> {
    match ssm
        .get_parameter(GetParameterInput {
            name: name.to_string(),
            with_decryption: false,
        })
        .await
    {
        Ok(p) => Ok(Some(p.value)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

async fn describe_by_ids(ec2: &dyn Ec2Api, ids: Vec<String>) -> Result<Vec<Image>, AwsError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    ec2.describe_images(DescribeImagesInput {
        filters: vec![Filter::new("image-id", ids)],
        include_deprecated: true,
        ..Default::default()
    })
    .await
}

/// Resolves one term to candidate images. Alias errors are returned as `Ok(Err(_))` so the
/// caller can report them against the term.
async fn resolve_term(
    ec2: &dyn Ec2Api,
    ssm: &dyn SsmApi,
    term: &AmiSelectorTerm,
    kubernetes_version: &str,
    now: Timestamp,
) -> Result<Result<Vec<ResolvedAmi>, AliasError>, AwsError> {
    if let Some(alias) = &term.alias {
        let (family, version) = match parse_alias(alias) {
            Ok(parts) => parts,
            Err(e) => return Ok(Err(e)),
        };
        if let Err(e) = check_kubernetes_version(alias, family, kubernetes_version) {
            return Ok(Err(e));
        }
        // Image id → the requirement sets it serves (one per variant).
        let mut by_id: BTreeMap<String, Vec<Vec<Requirement>>> = BTreeMap::new();
        for param in alias_parameters(family, &version, kubernetes_version) {
            if let Some(id) = get_parameter_value(ssm, &param.path).await? {
                by_id
                    .entry(id)
                    .or_default()
                    .extend(param.requirement_sets());
            }
        }
        let images = describe_by_ids(ec2, by_id.keys().cloned().collect()).await?;
        return Ok(Ok(images
            .iter()
            .flat_map(|img| {
                by_id
                    .get(&img.image_id)
                    .into_iter()
                    .flatten()
                    .filter_map(move |reqs| candidate(img, Some(reqs), now))
            })
            .collect()));
    }
    let images = if let Some(id) = &term.id {
        describe_by_ids(ec2, vec![id.clone()]).await?
    } else if let Some(param) = &term.ssm_parameter {
        match get_parameter_value(ssm, param).await? {
            Some(id) => describe_by_ids(ec2, vec![id]).await?,
            None => Vec::new(),
        }
    } else {
        let mut filters = tag_filters(&term.tags);
        if let Some(name) = &term.name {
            filters.push(Filter::new("name", [name.as_str()]));
        }
        if filters.is_empty() && term.owner.is_none() {
            return Ok(Ok(Vec::new()));
        }
        ec2.describe_images(DescribeImagesInput {
            owners: term_owners(term),
            filters,
            include_deprecated: true,
            ..Default::default()
        })
        .await?
    };
    Ok(Ok(images
        .iter()
        .filter_map(|img| candidate(img, None, now))
        .collect()))
}

/// Resolves every term; images from all terms compete, newest per requirement set wins.
/// `explicit_family` is the class's amiFamily; when absent and no alias is used, the family is
/// inferred from the chosen images' names.
pub async fn resolve_amis(
    ec2: &dyn Ec2Api,
    ssm: &dyn SsmApi,
    terms: &[AmiSelectorTerm],
    explicit_family: Option<AmiFamily>,
    kubernetes_version: &str,
    now: Timestamp,
) -> Result<AmiResolution, AwsError> {
    let mut all = Vec::new();
    let mut unmatched = Vec::new();
    for (index, term) in terms.iter().enumerate() {
        match resolve_term(ec2, ssm, term, kubernetes_version, now).await? {
            Ok(found) if found.is_empty() => unmatched.push(UnmatchedTerm {
                index,
                detail: "matched no image".to_string(),
            }),
            Ok(found) => all.extend(found),
            Err(e) => unmatched.push(UnmatchedTerm {
                index,
                detail: e.to_string(),
            }),
        }
    }
    let amis = select_newest(all);
    let has_alias = terms.iter().any(|t| t.alias.is_some());
    let inferred_family = if explicit_family.is_none() && !has_alias {
        infer_family(&amis)
    } else {
        None
    };
    Ok(AmiResolution {
        amis,
        unmatched,
        inferred_family,
    })
}

/// The family the images' names imply: the first image's family when all agree, else Custom.
pub fn infer_family(amis: &[ResolvedAmi]) -> Option<AmiFamily> {
    let families: BTreeSet<AmiFamily> = amis
        .iter()
        .map(|a| AmiFamily::infer_from_image_name(&a.name))
        .collect();
    match families.len() {
        0 => None,
        1 => families.into_iter().next(),
        _ => Some(AmiFamily::Custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ami(id: &str, arch: &str, date: &str, deprecated: bool) -> ResolvedAmi {
        ResolvedAmi {
            id: id.to_string(),
            name: format!("img-{id}"),
            arch: arch.to_string(),
            creation_date: date.to_string(),
            deprecated,
            requirements: vec![Requirement::new(LABEL_ARCH, OP_IN, &[arch])],
        }
    }

    #[test]
    fn newest_per_arch_deprecated_last() {
        let picked = select_newest(vec![
            ami("a1", "amd64", "2024-01-01T00:00:00.000Z", false),
            ami("a2", "amd64", "2024-03-01T00:00:00.000Z", false),
            ami("a3", "amd64", "2024-05-01T00:00:00.000Z", true),
            ami("b1", "arm64", "2024-02-01T00:00:00.000Z", false),
        ]);
        let ids: Vec<&str> = picked.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["a2", "b1"]);
    }

    #[test]
    fn inference_mixed_is_custom() {
        let mut a = ami("a", "amd64", "2024-01-01T00:00:00Z", false);
        a.name = "amazon-eks-node-1.29-v1".to_string();
        let mut b = ami("b", "arm64", "2024-01-01T00:00:00Z", false);
        b.name = "amazon-eks-arm64-node-1.29-v1".to_string();
        assert_eq!(infer_family(&[a.clone(), b.clone()]), Some(AmiFamily::Al2));
        b.name = "bottlerocket-aws-k8s-1.29-arm64-v1".to_string();
        assert_eq!(infer_family(&[a, b]), Some(AmiFamily::Custom));
        assert_eq!(infer_family(&[]), None);
    }
}
