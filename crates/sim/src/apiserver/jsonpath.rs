//! The small JSONPath subset printer columns use: `.a.b`, `.a[0]`, `.a[*].b`, and filters like
//! `.status.conditions[?(@.type=="Ready")].status`, optionally wrapped in `{}`.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    Filter { field: String, equals: String },
}

fn parse(path: &str) -> Option<Vec<Step>> {
    let path = path.trim();
    let path = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path);
    let path = path.strip_prefix('$').unwrap_or(path);
    let mut steps = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            // A field runs to the next unescaped '.' or '['; `\.` is a literal dot, as in
            // `.metadata.labels.karpenter\.sh/nodepool`.
            let mut field = String::new();
            let mut end = after.len();
            let mut chars = after.char_indices().peekable();
            while let Some((index, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            field.push(escaped);
                        }
                    }
                    '.' | '[' => {
                        end = index;
                        break;
                    }
                    other => field.push(other),
                }
            }
            if !field.is_empty() {
                steps.push(Step::Field(field));
            }
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = find_closing_bracket(after)?;
            let inner = after[..end].trim();
            rest = &after[end + 1..];
            if inner == "*" {
                steps.push(Step::All);
            } else if let Ok(index) = inner.parse::<usize>() {
                steps.push(Step::Index(index));
            } else if let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')'))
            {
                let (lhs, rhs) = filter.split_once("==")?;
                let field = lhs.trim().strip_prefix("@.")?.to_string();
                let equals = rhs
                    .trim()
                    .trim_matches(|c| c == '"' || c == '\'')
                    .to_string();
                steps.push(Step::Filter { field, equals });
            } else {
                let key = inner.trim_matches(|c| c == '"' || c == '\'');
                steps.push(Step::Field(key.to_string()));
            }
        } else {
            return None;
        }
    }
    Some(steps)
}

fn find_closing_bracket(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (index, c) in text.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ']' if depth == 0 => return Some(index),
            ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Evaluate `path` against `object`; every match, in document order.
pub fn evaluate(object: &Value, path: &str) -> Vec<Value> {
    let Some(steps) = parse(path) else {
        return Vec::new();
    };
    let mut current = vec![object.clone()];
    for step in &steps {
        let mut next = Vec::new();
        for value in &current {
            match step {
                Step::Field(name) => next.extend(value.get(name).cloned()),
                Step::Index(index) => next.extend(value.get(index).cloned()),
                Step::All => match value {
                    Value::Array(items) => next.extend(items.iter().cloned()),
                    Value::Object(map) => next.extend(map.values().cloned()),
                    _ => {}
                },
                Step::Filter { field, equals } => {
                    if let Value::Array(items) = value {
                        next.extend(
                            items
                                .iter()
                                .filter(|item| match item.get(field) {
                                    Some(Value::String(s)) => s == equals,
                                    Some(other) => equals.as_str() == other.to_string().as_str(),
                                    None => false,
                                })
                                .cloned(),
                        );
                    }
                }
            }
        }
        current = next;
    }
    current
}

/// Evaluate to a single cell value: the first match, or null when nothing matches.
pub fn evaluate_one(object: &Value, path: &str) -> Value {
    let matches = evaluate(object, path);
    match matches.len() {
        0 => Value::Null,
        1 => matches.into_iter().next().unwrap_or(Value::Null),
        _ => Value::String(
            matches
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(","),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_dots_are_part_of_the_field() {
        let object = serde_json::json!({"metadata": {"labels": {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.large"}}});
        assert_eq!(
            evaluate_one(&object, ".metadata.labels.karpenter\\.sh/nodepool"),
            serde_json::json!("default")
        );
        assert_eq!(
            evaluate_one(
                &object,
                ".metadata.labels.node\\.kubernetes\\.io/instance-type"
            ),
            serde_json::json!("m5.large")
        );
    }
    use serde_json::json;

    #[test]
    fn filters_fields_and_indexes() {
        let object = json!({
            "spec": {"nodeClassRef": {"name": "default"}},
            "status": {"conditions": [
                {"type": "Launched", "status": "True"},
                {"type": "Ready", "status": "False"}
            ]}
        });
        assert_eq!(
            evaluate_one(&object, ".spec.nodeClassRef.name"),
            json!("default")
        );
        assert_eq!(
            evaluate_one(&object, ".status.conditions[?(@.type==\"Ready\")].status"),
            json!("False")
        );
        assert_eq!(
            evaluate_one(&object, "{.status.conditions[0].type}"),
            json!("Launched")
        );
        assert_eq!(
            evaluate_one(&object, ".status.conditions[*].type"),
            json!("Launched,Ready")
        );
        assert_eq!(evaluate_one(&object, ".missing.field"), Value::Null);
        assert_eq!(evaluate_one(&object, "garbage[[["), Value::Null);
    }
}
