//! Builds EC2 filters from selector tags: `KEY: VALUE` → `tag:KEY=VALUE`, `KEY: "*"` → `tag-key=KEY`.

use std::collections::BTreeMap;

use crate::ports::Filter;

/// EC2 filters selecting resources carrying every tag in `tags` (`*` meaning "key exists").
pub fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| {
            if v == "*" {
                Filter::new("tag-key", [k.as_str()])
            } else {
                Filter::new(format!("tag:{k}"), [v.as_str()])
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_means_key_exists() {
        let tags = BTreeMap::from([
            ("a".to_string(), "*".to_string()),
            ("b".to_string(), "x".to_string()),
        ]);
        assert_eq!(
            tag_filters(&tags),
            vec![Filter::new("tag-key", ["a"]), Filter::new("tag:b", ["x"])]
        );
    }
}
