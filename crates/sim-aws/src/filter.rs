//! Applies EC2 filters to simulated resources: every filter must match; a filter matches when
//! any of its values (EC2 wildcards allowed) equals any value the resource has for that name.

use driftwood_aws::ports::{Filter, Tag};
use driftwood_aws::wildcard::wildcard_match;

/// Whether a resource passes `filters`. `values_of(name)` returns the resource's values for a
/// filter name, or `None` when the name is not supported (which matches nothing).
pub fn filters_match(filters: &[Filter], values_of: impl Fn(&str) -> Option<Vec<String>>) -> bool {
    filters.iter().all(|f| {
        let Some(have) = values_of(&f.name) else {
            return false;
        };
        f.values
            .iter()
            .any(|want| have.iter().any(|h| wildcard_match(want, h)))
    })
}

/// The values tag filters see: `tag:KEY` → the tag's value, `tag-key` → every key.
pub fn tag_values(tags: &[Tag], name: &str) -> Option<Vec<String>> {
    if name == "tag-key" {
        return Some(tags.iter().map(|t| t.key.clone()).collect());
    }
    let key = name.strip_prefix("tag:")?;
    Some(
        tags.iter()
            .filter(|t| t.key == key)
            .map(|t| t.value.clone())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_wildcards() {
        let tags = vec![Tag::new("karpenter.sh/discovery", "demo")];
        let values = |n: &str| match n {
            "name" => Some(vec!["amazon-eks-node-1.27-v1".to_string()]),
            other => tag_values(&tags, other),
        };
        assert!(filters_match(
            &[Filter::new("tag:karpenter.sh/discovery", ["demo"])],
            values
        ));
        assert!(filters_match(
            &[Filter::new("tag-key", ["karpenter.sh/discovery"])],
            values
        ));
        assert!(!filters_match(
            &[Filter::new("tag:karpenter.sh/discovery", ["other"])],
            values
        ));
        assert!(filters_match(&[Filter::new("name", ["*-1.27-*"])], values));
        assert!(!filters_match(&[Filter::new("unknown", ["x"])], values));
        assert!(filters_match(&[], values));
    }
}
