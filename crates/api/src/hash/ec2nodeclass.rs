//! The EC2NodeClass static hash: the spec without the selector-term lists (they drift through
//! AMI/subnet/security-group resolution instead), with amiFamily taken as the effective family
//! (explicit, or implied by an alias) and metadataOptions defaulted.

use super::TemplateHashes;
use super::canonical::{canonical_hash, normalize, sort_as_set};
use crate::ec2nodeclass::{EC2NodeClass, MetadataOptions};
use serde_json::{Value, json};

/// driftwood's EC2NodeClass hash version (Karpenter's is "v4"; see NODEPOOL_HASH_VERSION).
pub const EC2NODECLASS_HASH_VERSION: &str = "dw-v1";

const EXCLUDED_FIELDS: &[&str] = &[
    "amiSelectorTerms",
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "capacityReservationSelectorTerms",
];

/// Hashes an EC2NodeClass's static spec.
pub fn ec2nodeclass_hashes(class: &EC2NodeClass) -> TemplateHashes {
    let mut spec = match serde_json::to_value(&class.spec) {
        Ok(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    for field in EXCLUDED_FIELDS {
        spec.remove(*field);
    }
    spec.insert("amiFamily".into(), json!(class.spec.effective_ami_family()));
    let metadata_options = class.spec.metadata_options.clone().unwrap_or_default();
    spec.insert(
        "metadataOptions".into(),
        serde_json::to_value(metadata_options).unwrap_or(Value::Null),
    );
    if spec.get("metadataOptions")
        == serde_json::to_value(MetadataOptions::default())
            .ok()
            .as_ref()
    {
        // Defaults and absence are the same configuration.
        spec.remove("metadataOptions");
    }
    if let Some(mappings) = spec.get_mut("blockDeviceMappings") {
        sort_as_set(mappings);
    }
    let whole = normalize(Value::Object(spec.clone()));
    TemplateHashes {
        hash: canonical_hash(&whole),
        fields: spec
            .into_iter()
            .map(|(name, value)| (name, canonical_hash(&normalize(value))))
            .filter(|(_, hash)| hash != &canonical_hash(&Value::Null))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ec2nodeclass::{AmiSelectorTerm, EC2NodeClassSpec, SubnetSelectorTerm};
    use crate::hash::changed_fields;
    use proptest::prelude::*;

    fn base() -> EC2NodeClass {
        EC2NodeClass::new(
            "default",
            EC2NodeClassSpec {
                role: Some("KarpenterNodeRole".into()),
                ami_selector_terms: vec![AmiSelectorTerm {
                    id: Some("ami-1".into()),
                    ..Default::default()
                }],
                subnet_selector_terms: vec![SubnetSelectorTerm {
                    tags: [("karpenter.sh/discovery".to_string(), "c".to_string())].into(),
                    id: None,
                }],
                ..Default::default()
            },
        )
    }

    #[test]
    fn selector_terms_are_not_hashed() {
        let a = ec2nodeclass_hashes(&base());
        let mut b = base();
        b.spec.ami_selector_terms[0].id = Some("ami-2".into());
        b.spec.subnet_selector_terms[0]
            .tags
            .insert("x".into(), "y".into());
        assert_eq!(a, ec2nodeclass_hashes(&b));
    }

    #[test]
    fn default_metadata_options_equal_absent() {
        let mut a = base();
        a.spec.metadata_options = None;
        let mut b = base();
        b.spec.metadata_options = Some(MetadataOptions::default());
        assert_eq!(ec2nodeclass_hashes(&a), ec2nodeclass_hashes(&b));
    }

    #[test]
    fn alias_implied_family_equals_explicit() {
        let mut a = base();
        a.spec.ami_selector_terms = vec![AmiSelectorTerm {
            alias: Some("al2023@latest".into()),
            ..Default::default()
        }];
        let mut b = a.clone();
        b.spec.ami_family = Some("AL2023".into());
        assert_eq!(ec2nodeclass_hashes(&a), ec2nodeclass_hashes(&b));
    }

    #[test]
    fn walkthrough_tag_bump_names_tags() {
        let mut a = base();
        a.spec
            .tags
            .insert("KubernetesVersion".into(), "1.31".into());
        let mut b = a.clone();
        b.spec
            .tags
            .insert("KubernetesVersion".into(), "1.32".into());
        let (ha, hb) = (ec2nodeclass_hashes(&a), ec2nodeclass_hashes(&b));
        assert_ne!(ha.hash, hb.hash);
        assert_eq!(
            changed_fields(&ha.fields, &hb.fields),
            vec!["tags".to_string()]
        );
    }

    proptest! {
        #[test]
        fn static_field_changes_are_named(field in 0usize..6, text in "[a-z]{1,12}") {
            let a = base();
            let mut b = base();
            let expected = match field {
                0 => { b.spec.user_data = Some(text.clone()); "userData" }
                1 => { b.spec.tags.insert(text.clone(), text.clone()); "tags" }
                2 => { b.spec.detailed_monitoring = Some(true); "detailedMonitoring" }
                3 => { b.spec.role = Some(format!("role-{text}")); "role" }
                4 => { b.spec.context = Some(text.clone()); "context" }
                _ => { b.spec.associate_public_ip_address = Some(false); "associatePublicIPAddress" }
            };
            let (ha, hb) = (ec2nodeclass_hashes(&a), ec2nodeclass_hashes(&b));
            prop_assert_ne!(&ha.hash, &hb.hash);
            prop_assert_eq!(changed_fields(&ha.fields, &hb.fields), vec![expected.to_string()]);
        }
    }
}
