//! Human-readable renderings of selector terms for condition messages, e.g.
//! `amiSelectorTerms[0] {name: "*-1.27-*", owner: self}`.

use std::collections::BTreeMap;

use driftwood_api::ec2nodeclass::{AmiSelectorTerm, SecurityGroupSelectorTerm, SubnetSelectorTerm};

fn quote(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '@' | ':'));
    if plain {
        value.to_string()
    } else {
        format!("{value:?}")
    }
}

fn render(fields: Vec<(&str, Option<&str>)>, tags: &BTreeMap<String, String>) -> String {
    let mut parts: Vec<String> = fields
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}: {}", quote(v))))
        .collect();
    if !tags.is_empty() {
        let inner: Vec<String> = tags
            .iter()
            .map(|(k, v)| format!("{}: {}", quote(k), quote(v)))
            .collect();
        parts.push(format!("tags: {{{}}}", inner.join(", ")));
    }
    format!("{{{}}}", parts.join(", "))
}

/// `{alias: al2023@latest}`, `{name: "*-1.27-*", owner: self}`, ...
pub fn ami_term_text(term: &AmiSelectorTerm) -> String {
    render(
        vec![
            ("alias", term.alias.as_deref()),
            ("id", term.id.as_deref()),
            ("name", term.name.as_deref()),
            ("owner", term.owner.as_deref()),
            ("ssmParameter", term.ssm_parameter.as_deref()),
        ],
        &term.tags,
    )
}

/// `{id: subnet-...}` or `{tags: {karpenter.sh/discovery: demo}}`.
pub fn subnet_term_text(term: &SubnetSelectorTerm) -> String {
    render(vec![("id", term.id.as_deref())], &term.tags)
}

/// `{id: sg-...}`, `{name: default}` or `{tags: {...}}`.
pub fn security_group_term_text(term: &SecurityGroupSelectorTerm) -> String {
    render(
        vec![("id", term.id.as_deref()), ("name", term.name.as_deref())],
        &term.tags,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_the_manifest() {
        let term = AmiSelectorTerm {
            name: Some("*-1.27-*".to_string()),
            owner: Some("self".to_string()),
            ..Default::default()
        };
        assert_eq!(ami_term_text(&term), r#"{name: "*-1.27-*", owner: self}"#);
        let term = SubnetSelectorTerm {
            tags: BTreeMap::from([("karpenter.sh/discovery".to_string(), "demo".to_string())]),
            ..Default::default()
        };
        assert_eq!(
            subnet_term_text(&term),
            "{tags: {karpenter.sh/discovery: demo}}"
        );
    }
}
