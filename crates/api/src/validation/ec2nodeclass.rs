//! EC2NodeClass validation: selector terms, role / instanceProfile, tags, block devices,
//! metadata options, kubelet.

use super::ec2nodeclass_options::check_launch_options;
use super::kubelet::{check_ebs_values, check_kubelet_values};
use super::rules::{self, HOP_LIMIT_RANGE, MAX_BLOCK_DEVICE_MAPPINGS, MAX_SELECTOR_TERMS};
use super::{Collector, Validate, ValidationReport, quoted_list};
use crate::ec2nodeclass::{
    ALIAS_FAMILIES, AMI_FAMILIES, AMI_FAMILY_CUSTOM, AmiSelectorTerm, EC2NodeClass,
};
use std::collections::BTreeMap;

/// The warning given when amiFamily is absent and no alias implies it (driftwood accepts this,
/// Karpenter does not).
pub const INFERRED_FAMILY_WARNING: &str = "amiFamily is not set and no alias term implies it; driftwood \
     infers the family from the resolved images' names (Custom when it cannot), where Karpenter would \
     reject this EC2NodeClass";

/// A selector term reduced to what the shared checks need: its tags and which other fields
/// (by name) are set.
type TermShape<'a> = (BTreeMap<String, String>, Vec<(&'a str, bool)>);

impl Validate for EC2NodeClass {
    fn validate(&self) -> ValidationReport {
        let mut c = Collector::new("EC2NodeClass", self.metadata.name.as_deref());
        let spec = &self.spec;

        match (&spec.role, &spec.instance_profile) {
            (Some(_), Some(_)) | (None, None) => c.error(
                "spec",
                "must specify exactly one of ['role', 'instanceProfile'] (found both or neither)",
            ),
            (Some(role), None) if role.is_empty() => c.error("spec.role", "role may not be empty"),
            (None, Some(profile)) if profile.is_empty() => {
                c.error("spec.instanceProfile", "instanceProfile may not be empty")
            }
            _ => {}
        }

        check_ami_terms(&mut c, &spec.ami_selector_terms);
        match (
            &spec.ami_family,
            spec.ami_selector_terms
                .iter()
                .find_map(AmiSelectorTerm::alias_parts),
        ) {
            (Some(family), alias) => {
                if c.one_of("spec.amiFamily", family, AMI_FAMILIES)
                    && let Some((alias_family, _)) = alias
                    && let Some((_, implied)) =
                        ALIAS_FAMILIES.iter().find(|(a, _)| *a == alias_family)
                    && implied != family
                    && family != AMI_FAMILY_CUSTOM
                {
                    c.invalid(
                        "spec.amiFamily",
                        family,
                        format!(
                            "must match the family of the alias term ({implied}), be {AMI_FAMILY_CUSTOM} or be omitted"
                        ),
                    );
                }
            }
            (None, None) => c.warn("spec.amiFamily", INFERRED_FAMILY_WARNING),
            (None, Some(_)) => {}
        }

        for (i, term) in spec.subnet_selector_terms.iter().enumerate() {
            if let Some(id) = &term.id {
                c.pattern(
                    &format!("spec.subnetSelectorTerms[{i}].id"),
                    id,
                    rules::SUBNET_ID_PATTERN,
                    "must be a subnet id",
                );
            }
        }
        for (i, term) in spec.security_group_selector_terms.iter().enumerate() {
            if let Some(id) = &term.id {
                c.pattern(
                    &format!("spec.securityGroupSelectorTerms[{i}].id"),
                    id,
                    rules::SECURITY_GROUP_ID_PATTERN,
                    "must be a security group id",
                );
            }
        }
        let subnet_terms: Vec<TermShape> = spec
            .subnet_selector_terms
            .iter()
            .map(|t| (t.tags.clone(), vec![("id", t.id.is_some())]))
            .collect();
        check_selector_terms(&mut c, "spec.subnetSelectorTerms", &subnet_terms, "subnet");
        let group_terms: Vec<_> = spec
            .security_group_selector_terms
            .iter()
            .map(|t| {
                (
                    t.tags.clone(),
                    vec![("id", t.id.is_some()), ("name", t.name.is_some())],
                )
            })
            .collect();
        check_selector_terms(
            &mut c,
            "spec.securityGroupSelectorTerms",
            &group_terms,
            "security group",
        );
        for (i, term) in spec.capacity_reservation_selector_terms.iter().enumerate() {
            let field = format!("spec.capacityReservationSelectorTerms[{i}].tags");
            check_tag_map(&mut c, &field, &term.tags, true);
        }
        check_launch_options(&mut c, spec);

        check_tag_map(&mut c, "spec.tags", &spec.tags, false);
        for key in spec.tags.keys() {
            let restricted = rules::RESTRICTED_TAG_KEYS.contains(&key.as_str())
                || rules::RESTRICTED_TAG_PREFIXES
                    .iter()
                    .any(|p| key.starts_with(p));
            if restricted {
                c.invalid(
                    format!("spec.tags[{key}]"),
                    key,
                    format!(
                        "tag contains a restricted tag key (driftwood sets {} and {}*)",
                        quoted_list(rules::RESTRICTED_TAG_KEYS),
                        rules::RESTRICTED_TAG_PREFIXES.join(", ")
                    ),
                );
            }
        }

        if spec.block_device_mappings.len() > MAX_BLOCK_DEVICE_MAPPINGS {
            c.error(
                "spec.blockDeviceMappings",
                format!("must have at most {MAX_BLOCK_DEVICE_MAPPINGS} items"),
            );
        }
        if spec
            .block_device_mappings
            .iter()
            .filter(|m| m.root_volume)
            .count()
            > 1
        {
            c.error(
                "spec.blockDeviceMappings",
                "must have only one blockDeviceMappings with rootVolume",
            );
        }
        for (i, mapping) in spec.block_device_mappings.iter().enumerate() {
            let field = format!("spec.blockDeviceMappings[{i}].ebs");
            let Some(ebs) = &mapping.ebs else { continue };
            if let Some(size) = &ebs.volume_size {
                c.pattern(
                    &format!("{field}.volumeSize"),
                    size,
                    rules::QUANTITY_PATTERN,
                    "must be a quantity such as 20Gi",
                );
            }
            if let Some(volume_type) = &ebs.volume_type {
                c.one_of(
                    &format!("{field}.volumeType"),
                    volume_type,
                    rules::VOLUME_TYPES,
                );
            }
            check_ebs_values(&mut c, &field, ebs);
            if ebs.snapshot_id.is_none() && ebs.volume_size.is_none() {
                c.error(
                    &field,
                    "ebs must specify at least one of ['volumeSize', 'snapshotID']",
                );
            }
        }
        if let Some(policy) = &spec.instance_store_policy {
            c.one_of(
                "spec.instanceStorePolicy",
                policy,
                rules::INSTANCE_STORE_POLICIES,
            );
        }
        if let Some(options) = &spec.metadata_options {
            c.one_of(
                "spec.metadataOptions.httpEndpoint",
                &options.http_endpoint,
                rules::HTTP_ENDPOINT_VALUES,
            );
            c.one_of(
                "spec.metadataOptions.httpProtocolIPv6",
                &options.http_protocol_ipv6,
                rules::HTTP_ENDPOINT_VALUES,
            );
            c.one_of(
                "spec.metadataOptions.httpTokens",
                &options.http_tokens,
                rules::HTTP_TOKENS_VALUES,
            );
            let (lo, hi) = HOP_LIMIT_RANGE;
            if !(lo..=hi).contains(&options.http_put_response_hop_limit) {
                c.invalid(
                    "spec.metadataOptions.httpPutResponseHopLimit",
                    options.http_put_response_hop_limit.to_string(),
                    format!("must be between {lo} and {hi}"),
                );
            }
        }
        if let Some(kubelet) = &spec.kubelet {
            check_kubelet_values(&mut c, kubelet);
            for (name, map) in [
                ("evictionHard", &kubelet.eviction_hard),
                ("evictionSoft", &kubelet.eviction_soft),
            ] {
                for key in map.keys() {
                    if !rules::EVICTION_SIGNALS.contains(&key.as_str()) {
                        c.invalid(
                            format!("spec.kubelet.{name}[{key}]"),
                            key,
                            format!("must be one of {}", quoted_list(rules::EVICTION_SIGNALS)),
                        );
                    }
                }
            }
            if kubelet.eviction_soft.keys().collect::<Vec<_>>()
                != kubelet
                    .eviction_soft_grace_period
                    .keys()
                    .collect::<Vec<_>>()
            {
                c.error(
                    "spec.kubelet.evictionSoftGracePeriod",
                    "evictionSoft and evictionSoftGracePeriod must name the same signals",
                );
            }
            if let (Some(high), Some(low)) = (
                kubelet.image_gc_high_threshold_percent,
                kubelet.image_gc_low_threshold_percent,
            ) && high <= low
            {
                c.invalid(
                    "spec.kubelet.imageGCHighThresholdPercent",
                    high.to_string(),
                    "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
                );
            }
            for (name, value) in [
                (
                    "imageGCHighThresholdPercent",
                    kubelet.image_gc_high_threshold_percent,
                ),
                (
                    "imageGCLowThresholdPercent",
                    kubelet.image_gc_low_threshold_percent,
                ),
            ] {
                if let Some(v) = value
                    && !(0..=100).contains(&v)
                {
                    c.invalid(
                        format!("spec.kubelet.{name}"),
                        v.to_string(),
                        "must be between 0 and 100",
                    );
                }
            }
            if let Some(max_pods) = kubelet.max_pods
                && max_pods < 0
            {
                c.invalid(
                    "spec.kubelet.maxPods",
                    max_pods.to_string(),
                    "must not be negative",
                );
            }
        }
        c.finish()
    }
}

fn check_ami_terms(c: &mut Collector, terms: &[AmiSelectorTerm]) {
    let path = "spec.amiSelectorTerms";
    if terms.is_empty() {
        c.error(path, "must have at least 1 item");
    }
    if terms.len() > MAX_SELECTOR_TERMS {
        c.error(
            path,
            format!("must have at most {MAX_SELECTOR_TERMS} items"),
        );
    }
    let has_alias = terms.iter().any(|t| t.alias.is_some());
    if has_alias && terms.len() > 1 {
        c.error(path, "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms");
    }
    for (i, term) in terms.iter().enumerate() {
        let field = format!("{path}[{i}]");
        let set = [
            ("tags", !term.tags.is_empty()),
            ("id", term.id.is_some()),
            ("name", term.name.is_some()),
            ("alias", term.alias.is_some()),
            ("ssmParameter", term.ssm_parameter.is_some()),
        ];
        if !set.iter().any(|(_, s)| *s) {
            c.error(
                &field,
                "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
            );
        }
        let others = set.iter().filter(|(_, s)| *s).count() + usize::from(term.owner.is_some());
        if term.id.is_some() && others > 1 {
            c.error(&field, "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms");
        }
        if term.alias.is_some() && others > 1 {
            c.error(&field, "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms");
        }
        if term.owner.is_some() && term.name.is_none() && term.tags.is_empty() {
            c.error(
                format!("{field}.owner"),
                "'owner' may only be set with 'name' or 'tags'",
            );
        }
        check_tag_map(c, &format!("{field}.tags"), &term.tags, true);
        if let Some(id) = &term.id {
            c.pattern(
                &format!("{field}.id"),
                id,
                rules::AMI_ID_PATTERN,
                "must be an AMI id",
            );
        }
        if let Some(alias) = &term.alias {
            let alias_field = format!("{field}.alias");
            if alias.len() > 30 {
                c.invalid(&alias_field, alias, "must be at most 30 characters");
            } else if c.pattern(
                &alias_field,
                alias,
                rules::ALIAS_PATTERN,
                "must be family@version, e.g. al2023@latest",
            ) && let Some((family, version)) = alias.split_once('@')
            {
                let families: Vec<&str> = ALIAS_FAMILIES.iter().map(|(a, _)| *a).collect();
                if !families.contains(&family) {
                    c.invalid(
                        &alias_field,
                        alias,
                        format!(
                            "family is not supported, must be one of the following: {}",
                            quoted_list(&families)
                        ),
                    );
                } else if family.starts_with("windows") && version != "latest" {
                    c.invalid(
                        &alias_field,
                        alias,
                        "windows families may only specify version 'latest'",
                    );
                }
            }
        }
    }
}

/// Checks tag / id (/ name) selector terms: at least one field, id exclusive, no empty tags.
fn check_selector_terms(c: &mut Collector, path: &str, terms: &[TermShape], what: &str) {
    if terms.is_empty() {
        c.error(path, "must have at least 1 item");
    }
    if terms.len() > MAX_SELECTOR_TERMS {
        c.error(
            path,
            format!("must have at most {MAX_SELECTOR_TERMS} items"),
        );
    }
    for (i, (tags, fields)) in terms.iter().enumerate() {
        let field = format!("{path}[{i}]");
        let names: Vec<&str> = std::iter::once("tags")
            .chain(fields.iter().map(|(n, _)| *n))
            .collect();
        let set_count = usize::from(!tags.is_empty()) + fields.iter().filter(|(_, s)| *s).count();
        if set_count == 0 {
            c.error(
                &field,
                format!("expected at least one, got none, {}", bracket_list(&names)),
            );
        }
        let id_set = fields.iter().any(|(n, s)| *n == "id" && *s);
        if id_set && set_count > 1 {
            c.error(
                &field,
                format!("'id' is mutually exclusive, cannot be set with a combination of other fields in a {what} selector term"),
            );
        }
        check_tag_map(c, &format!("{field}.tags"), tags, true);
    }
}

fn check_tag_map(c: &mut Collector, path: &str, tags: &BTreeMap<String, String>, selector: bool) {
    if selector && tags.len() > rules::MAX_SELECTOR_TAGS {
        c.error(
            path,
            format!(
                "must have at most {} tags in one selector term",
                rules::MAX_SELECTOR_TAGS
            ),
        );
    }
    for (key, value) in tags {
        if key.is_empty() {
            c.error(path, "empty tag keys aren't supported");
        } else if selector && value.is_empty() {
            c.invalid(
                format!("{path}[{key}]"),
                value,
                "empty tag values aren't supported in a selector (use \"*\" to match any value)",
            );
        }
    }
}

fn bracket_list(items: &[&str]) -> String {
    format!(
        "[{}]",
        items
            .iter()
            .map(|i| format!("'{i}'"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}
