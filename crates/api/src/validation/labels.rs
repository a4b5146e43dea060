//! Label key/value syntax and the label domains a NodePool may not claim.

use super::Collector;
use super::rules::{LABEL_KEY_PATTERN, matches};
use crate::wellknown::{self, LABEL_HOSTNAME, LABEL_NODEPOOL};

/// Checks a label key's syntax; returns false (with an error) when it is malformed.
pub(crate) fn check_key_syntax(c: &mut Collector, field: &str, key: &str) -> bool {
    let (prefix, name) = key
        .rsplit_once('/')
        .map_or((None, key), |(p, n)| (Some(p), n));
    if key.is_empty()
        || !matches(LABEL_KEY_PATTERN, key)
        || name.len() > 63
        || prefix.is_some_and(|p| p.len() > 253)
    {
        c.invalid(
            field,
            key,
            "must be a qualified name: an optional DNS subdomain prefix and '/', then at most 63 \
             characters of [A-Za-z0-9-_.] starting and ending with an alphanumeric character",
        );
        return false;
    }
    true
}

/// Checks a label value's syntax.
pub(crate) fn check_value_syntax(c: &mut Collector, field: &str, value: &str) {
    let ok = value.is_empty()
        || (value.len() <= 63
            && value
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'))
            && value
                .chars()
                .next()
                .is_some_and(|ch| ch.is_ascii_alphanumeric())
            && value
                .chars()
                .last()
                .is_some_and(|ch| ch.is_ascii_alphanumeric()));
    if !ok {
        c.invalid(
            field,
            value,
            "a label value must be empty or at most 63 characters of [A-Za-z0-9-_.] starting and ending \
             with an alphanumeric character",
        );
    }
}

/// The restricted-domain rule a label key breaks, if any. `allow_nodepool` admits
/// karpenter.sh/nodepool (requirements may select on it? no: Karpenter forbids it in both).
pub(crate) fn restricted_rule(key: &str) -> Option<String> {
    if key == LABEL_NODEPOOL {
        return Some(format!(
            "label {LABEL_NODEPOOL:?} is restricted (driftwood sets it)"
        ));
    }
    if key == LABEL_HOSTNAME {
        return Some(format!("label {LABEL_HOSTNAME:?} is restricted"));
    }
    let (domain, _) = key.split_once('/')?;
    if wellknown::is_well_known_label(key)
        || [
            wellknown::LABEL_INSTANCE_TYPE_BETA,
            wellknown::LABEL_TOPOLOGY_ZONE_BETA,
            wellknown::LABEL_TOPOLOGY_REGION_BETA,
            wellknown::LABEL_ARCH_BETA,
            wellknown::LABEL_OS_BETA,
        ]
        .contains(&key)
    {
        return None;
    }
    if wellknown::ALLOWED_LABEL_DOMAINS
        .iter()
        .any(|allowed| domain == *allowed || domain.ends_with(&format!(".{allowed}")))
    {
        return None;
    }
    wellknown::RESTRICTED_LABEL_DOMAINS
        .iter()
        .find(|restricted| domain == **restricted || domain.ends_with(&format!(".{restricted}")))
        .map(|restricted| format!("label domain {restricted:?} is restricted"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_domains() {
        assert!(restricted_rule("karpenter.sh/nodepool").is_some());
        assert!(restricted_rule("kubernetes.io/hostname").is_some());
        assert!(restricted_rule("karpenter.sh/custom").is_some());
        assert!(restricted_rule("foo.kubernetes.io/bar").is_some());
        assert!(restricted_rule("example.k8s.io/x").is_some());
        assert!(restricted_rule("karpenter.k8s.aws/whatever").is_some());
        assert!(restricted_rule("karpenter.sh/capacity-type").is_none());
        assert!(restricted_rule("karpenter.k8s.aws/instance-category").is_none());
        assert!(restricted_rule("node.kubernetes.io/instance-type").is_none());
        assert!(restricted_rule("node-restriction.kubernetes.io/team").is_none());
        assert!(restricted_rule("kops.k8s.io/ig").is_none());
        assert!(restricted_rule("intent").is_none());
        assert!(restricted_rule("example.com/team").is_none());
    }
}
