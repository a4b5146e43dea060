//! Which NodeClaims' instances are due their registration tags (Karpenter's `isTaggable`).

use crate::state::Snapshot;
use driftwood_api::NodeClaim;
use driftwood_api::wellknown::{ANNOTATION_CLUSTER_NAME_TAGGED, ANNOTATION_INSTANCE_TAGGED};
use driftwood_aws::launcher::instance_id_from_provider_id;

/// Whether `claim`'s instance is to be tagged now: not both tagged annotations yet, its Node's
/// name known, not being deleted, and a providerID that names an EC2 instance (one that does
/// not is left alone until it changes, not retried).
pub fn is_taggable(claim: &NodeClaim) -> bool {
    let annotations = claim.metadata.annotations.as_ref();
    let annotated = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .is_some_and(|v| v == "true")
    };
    if annotated(ANNOTATION_INSTANCE_TAGGED) && annotated(ANNOTATION_CLUSTER_NAME_TAGGED) {
        return false;
    }
    let Some(status) = claim.status.as_ref() else {
        return false;
    };
    if status.node_name.as_deref().unwrap_or_default().is_empty() {
        return false;
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return false;
    }
    status
        .provider_id
        .as_deref()
        .and_then(instance_id_from_provider_id)
        .is_some()
}

/// The NodeClaims whose instances are due their tags, in name order (read lazily: a pass takes
/// the first it may try).
pub fn due(snapshot: &Snapshot) -> impl Iterator<Item = (&String, &std::sync::Arc<NodeClaim>)> {
    snapshot
        .store
        .nodeclaims
        .iter()
        .filter(|(_, claim)| is_taggable(claim))
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_api::NodeClaimStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::collections::BTreeMap;

    fn claim(provider_id: &str, node_name: &str) -> NodeClaim {
        let mut claim = NodeClaim::new("default-abcde", Default::default());
        claim.status = Some(NodeClaimStatus {
            provider_id: Some(provider_id.to_string()),
            node_name: (!node_name.is_empty()).then(|| node_name.to_string()),
            ..Default::default()
        });
        claim
    }

    const PROVIDER_ID: &str = "aws:///us-west-2a/i-0123456789abcdef0";

    /// Karpenter's tagging suite: "should tag taggable instances" (a registered NodeClaim).
    #[test]
    fn a_registered_nodeclaim_is_taggable() {
        assert!(is_taggable(&claim(PROVIDER_ID, "ip-10-0-0-1.ec2.internal")));
    }

    /// "shouldn't tag instances without a Node".
    #[test]
    fn a_nodeclaim_without_a_node_is_not_taggable() {
        assert!(!is_taggable(&claim(PROVIDER_ID, "")));
        let mut unlaunched = claim(PROVIDER_ID, "node");
        unlaunched.status = None;
        assert!(!is_taggable(&unlaunched));
    }

    /// "shouldn't tag nodeclaim with a malformed provderID".
    #[test]
    fn a_malformed_provider_id_is_not_taggable() {
        assert!(!is_taggable(&claim("Bad providerID", "node")));
        assert!(!is_taggable(&claim("aws:///us-west-2a/", "node")));
    }

    /// "shouldn't tag nodeclaim with deletion timestamp set".
    #[test]
    fn a_deleting_nodeclaim_is_not_taggable() {
        let mut deleting = claim(PROVIDER_ID, "node");
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        assert!(!is_taggable(&deleting));
    }

    /// Karpenter's `isTaggable`: tagged only when both annotations say so (one written by an
    /// older version that did not tag the cluster name is tagged again).
    #[test]
    fn only_both_annotations_end_the_tagging() {
        let with = |pairs: &[(&str, &str)]| {
            let mut c = claim(PROVIDER_ID, "node");
            c.metadata.annotations = Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                    .collect::<BTreeMap<_, _>>(),
            );
            is_taggable(&c)
        };
        assert!(with(&[(ANNOTATION_INSTANCE_TAGGED, "true")]));
        assert!(with(&[
            (ANNOTATION_INSTANCE_TAGGED, "true"),
            (ANNOTATION_CLUSTER_NAME_TAGGED, "false")
        ]));
        assert!(!with(&[
            (ANNOTATION_INSTANCE_TAGGED, "true"),
            (ANNOTATION_CLUSTER_NAME_TAGGED, "true")
        ]));
    }
}
