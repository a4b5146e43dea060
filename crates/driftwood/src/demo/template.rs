//! Placeholder filling for scenario manifests: the walkthrough's `<<CLUSTER_NAME>>`-style
//! placeholders (a fixed table) and `{{name}}` / `{{name:arg}}` expressions such as
//! `{{amd64_ami:1.30}}`, resolved by a caller-supplied function.

/// A placeholder that could not be filled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("unclosed `{{{{` at byte {0}")]
    Unclosed(usize),
    #[error(
        "unknown placeholder {{{{{0}}}}} (known: cluster_name, node_role, amd64_ami:VERSION, arm64_ami:VERSION, al2023_amd64_ami:VERSION, al2023_arm64_ami:VERSION)"
    )]
    Unknown(String),
}

/// Replaces each `{{expr}}` by `resolve(name, arg)` (`arg` after the first `:`, trimmed).
pub fn fill_expressions(
    text: &str,
    mut resolve: impl FnMut(&str, Option<&str>) -> Option<String>,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut offset = 0;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or(TemplateError::Unclosed(offset + start))?;
        let expr = after[..end].trim();
        let (name, arg) = match expr.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (expr, None),
        };
        let value = resolve(name, arg).ok_or_else(|| TemplateError::Unknown(expr.to_string()))?;
        out.push_str(&value);
        let consumed = start + 2 + end + 2;
        offset += consumed;
        rest = &rest[consumed..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Replaces every `from` in order; names the first edit whose `from` does not occur.
pub fn apply_edits(text: &str, edits: &[(String, String)]) -> Result<String, String> {
    edits.iter().try_fold(text.to_string(), |t, (from, to)| {
        if t.contains(from.as_str()) {
            Ok(t.replace(from.as_str(), to))
        } else {
            Err(format!(
                "edit {from:?} → {to:?}: {from:?} does not occur in the manifest"
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(name: &str, arg: Option<&str>) -> Option<String> {
        match (name, arg) {
            ("cluster_name", None) => Some("demo".into()),
            ("amd64_ami", Some(v)) => Some(format!("ami-{}", v.replace('.', ""))),
            _ => None,
        }
    }

    #[test]
    fn fills_expressions_with_arguments() {
        let out = fill_expressions("id: {{ amd64_ami:1.30 }} c={{cluster_name}}!", resolver);
        assert_eq!(out.unwrap(), "id: ami-130 c=demo!");
    }

    #[test]
    fn unknown_and_unclosed_are_errors() {
        assert_eq!(
            fill_expressions("{{nope}}", resolver).unwrap_err(),
            TemplateError::Unknown("nope".into())
        );
        assert_eq!(
            fill_expressions("ab {{x", resolver).unwrap_err(),
            TemplateError::Unclosed(3)
        );
    }

    #[test]
    fn edits_must_match() {
        let edits = vec![("1.27".to_string(), "1.28".to_string())];
        assert_eq!(
            apply_edits("a-1.27-b 1.27", &edits).unwrap(),
            "a-1.28-b 1.28"
        );
        assert!(
            apply_edits("none", &edits)
                .unwrap_err()
                .contains("does not occur")
        );
    }
}
