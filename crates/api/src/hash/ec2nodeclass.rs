//! The EC2NodeClass static hash: the spec without the selector-term lists (they drift through
//! AMI/subnet/security-group resolution instead) and ipPrefixCount, with amiFamily taken as the
//! effective family (explicit, or implied by an alias), metadataOptions defaulted, and the
//! cluster CA bundle the nodes bootstrap with (as Karpenter v1.12+ hashes it).

use super::TemplateHashes;
use super::canonical::{canonical_hash, normalize};
use crate::ec2nodeclass::{EC2NodeClass, MetadataOptions};
use serde_json::{Value, json};

/// driftwood's EC2NodeClass hash version (Karpenter v1.14's is "v5"; see
/// NODEPOOL_HASH_VERSION). dw-v2: the cluster CA bundle is hashed, lists are sets, empty strings
/// are absent.
pub const EC2NODECLASS_HASH_VERSION: &str = "dw-v2";

/// The per-field name under which the cluster CA bundle is hashed.
pub const CLUSTER_CA_BUNDLE_FIELD: &str = "clusterCABundle";

const EXCLUDED_FIELDS: &[&str] = &[
    "amiSelectorTerms",
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "capacityReservationSelectorTerms",
    "ipPrefixCount",
];

/// Hashes an EC2NodeClass's static spec together with the cluster CA bundle its nodes are
/// bootstrapped with (empty when unknown), so a new cluster CA drifts every node.
pub fn ec2nodeclass_hashes(class: &EC2NodeClass, cluster_ca_bundle: &str) -> TemplateHashes {
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
    spec.insert(CLUSTER_CA_BUNDLE_FIELD.into(), json!(cluster_ca_bundle));
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
        let a = ec2nodeclass_hashes_of(&base());
        let mut b = base();
        b.spec.ami_selector_terms[0].id = Some("ami-2".into());
        b.spec.subnet_selector_terms[0]
            .tags
            .insert("x".into(), "y".into());
        assert_eq!(a, ec2nodeclass_hashes_of(&b));
    }

    #[test]
    fn default_metadata_options_equal_absent() {
        let mut a = base();
        a.spec.metadata_options = None;
        let mut b = base();
        b.spec.metadata_options = Some(MetadataOptions::default());
        assert_eq!(ec2nodeclass_hashes_of(&a), ec2nodeclass_hashes_of(&b));
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
        assert_eq!(ec2nodeclass_hashes_of(&a), ec2nodeclass_hashes_of(&b));
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
        let (ha, hb) = (ec2nodeclass_hashes_of(&a), ec2nodeclass_hashes_of(&b));
        assert_ne!(ha.hash, hb.hash);
        assert_eq!(
            changed_fields(&ha.fields, &hb.fields),
            vec!["tags".to_string()]
        );
    }

    fn ec2nodeclass_hashes_of(class: &EC2NodeClass) -> TemplateHashes {
        ec2nodeclass_hashes(class, "Q0E=")
    }

    /// Karpenter v1.12+ (EC2NodeClass hash v5): "should update the drift hash when the CA
    /// bundle changes" (nodeclass hash controller suite).
    #[test]
    fn cluster_ca_bundle_is_hashed_and_named() {
        let (a, b) = (
            ec2nodeclass_hashes(&base(), "old-ca"),
            ec2nodeclass_hashes(&base(), "new-ca"),
        );
        assert_ne!(a.hash, b.hash);
        assert_eq!(
            changed_fields(&a.fields, &b.fields),
            vec![CLUSTER_CA_BUNDLE_FIELD.to_string()]
        );
    }

    /// Karpenter: "should not change hash when blockDeviceMappings are re-ordered" and
    /// "... when tags are re-ordered"; ipPrefixCount is not hashed.
    #[test]
    fn block_device_order_and_ip_prefix_count_do_not_matter() {
        let mut a = base();
        a.spec.block_device_mappings = serde_json::from_value(serde_json::json!([
            {"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "20Gi"}},
            {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "100Gi"}}
        ]))
        .unwrap();
        let mut b = a.clone();
        b.spec.block_device_mappings.reverse();
        assert_eq!(ec2nodeclass_hashes_of(&a), ec2nodeclass_hashes_of(&b));
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
            let (ha, hb) = (ec2nodeclass_hashes_of(&a), ec2nodeclass_hashes_of(&b));
            prop_assert_ne!(&ha.hash, &hb.hash);
            prop_assert_eq!(changed_fields(&ha.fields, &hb.fields), vec![expected.to_string()]);
        }
    }
}
