//! `x-kubernetes-validations`: the CEL rules of a schema node, evaluated as kube-apiserver
//! evaluates them, with `self` the value and `oldSelf` the stored value on an update
//! (transition rules run only when there is one). Besides CEL's standard library and its
//! strings extension, the Kubernetes library functions the common CRDs use are provided:
//! `find`, `findAll` (regex), and `isSorted`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cel::extractors::This;
use cel::{Context, Env, Program};
use serde_json::Value;

use super::cause::{Cause, child};

fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    Arc::clone(ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // The strings extension only adds functions; if it ever failed to register, rules
        // using them report an evaluation error naming the function.
        let _ = env.add_extension(cel::extensions::strings);
        Arc::new(env)
    }))
}

/// Compiled rules by source, or why one does not compile.
type Programs = HashMap<String, Result<Arc<Program>, String>>;

/// A compiled rule (cached: the same rules run on every write of a kind).
fn program(rule: &str) -> Result<Arc<Program>, String> {
    static CACHE: OnceLock<Mutex<Programs>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    let mut cache = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .entry(rule.to_string())
        .or_insert_with(|| {
            env()
                .compile(rule)
                .map(Arc::new)
                .map_err(|e| format!("compilation failed: {e}"))
        })
        .clone()
}

fn regex(pattern: &str) -> Result<Arc<regex::Regex>, String> {
    super::values::pattern(pattern).ok_or_else(|| format!("invalid regular expression {pattern:?}"))
}

/// `s.find(re)`: the first match of `re` in `s`, or "".
fn find(This(this): This<Arc<String>>, pattern: Arc<String>) -> cel::ResolveResult {
    let re = regex(&pattern).map_err(|e| cel::ExecutionError::function_error("find", e))?;
    let found = re
        .find(&this)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    Ok(cel::Value::String(Arc::new(found)))
}

/// `s.findAll(re)`: every match of `re` in `s`.
fn find_all(This(this): This<Arc<String>>, pattern: Arc<String>) -> cel::ResolveResult {
    let re = regex(&pattern).map_err(|e| cel::ExecutionError::function_error("findAll", e))?;
    let found: Vec<cel::Value> = re
        .find_iter(&this)
        .map(|m| cel::Value::String(Arc::new(m.as_str().to_string())))
        .collect();
    Ok(cel::Value::List(Arc::new(found)))
}

/// `list.isSorted()`.
fn is_sorted(This(this): This<Arc<Vec<cel::Value>>>) -> bool {
    this.windows(2)
        .all(|w| w[0].partial_cmp(&w[1]).is_some_and(|o| o.is_le()))
}

fn context<'p, 'v>(value: &Value, old: Option<&Value>) -> Result<Context<'p, 'v>, String> {
    let mut context = Context::with_env(env());
    // A name the environment already declares keeps the environment's function.
    let _ = context.add_function("find", find);
    let _ = context.add_function("findAll", find_all);
    let _ = context.add_function("isSorted", is_sorted);
    let self_value = cel::to_value(value).map_err(|e| e.to_string())?;
    context.add_variable_from_value("self", self_value);
    if let Some(old) = old {
        let old_value = cel::to_value(old).map_err(|e| e.to_string())?;
        context.add_variable_from_value("oldSelf", old_value);
    }
    Ok(context)
}

/// `fieldPath` of a rule (`.spec.x`, `.x['y']`) appended to `path`.
fn rule_path(path: &str, field_path: Option<&str>) -> String {
    match field_path {
        Some(relative) if !relative.is_empty() => {
            let relative = relative
                .trim_start_matches('.')
                .replace("['", "[")
                .replace("']", "]");
            child(path, &relative)
        }
        _ => path.to_string(),
    }
}

/// Evaluates `rules` (the node's `x-kubernetes-validations`) on `value` at `path`; `label` is
/// the node's type as failures show it (`Invalid value: "object": …`).
pub fn check(
    rules: &[Value],
    value: &Value,
    old: Option<&Value>,
    path: &str,
    label: &str,
    causes: &mut Vec<Cause>,
) {
    let mut context: Option<Result<Context<'_, '_>, String>> = None;
    for rule in rules {
        let Some(source) = rule.get("rule").and_then(Value::as_str) else {
            continue;
        };
        let shown = format!("\"{label}\"");
        let program = match program(source) {
            Ok(program) => program,
            Err(error) => {
                causes.push(Cause::invalid_shown(
                    path,
                    &shown,
                    format!("{error} in rule: {source}"),
                ));
                continue;
            }
        };
        let transition = program.references().has_variable("oldSelf");
        let optional_old = rule.get("optionalOldSelf").and_then(Value::as_bool) == Some(true);
        if transition && old.is_none() && !optional_old {
            continue;
        }
        let context = context.get_or_insert_with(|| self::context(value, old));
        let context = match context {
            Ok(context) => context,
            Err(error) => {
                causes.push(Cause::invalid_shown(
                    path,
                    &shown,
                    format!("could not evaluate rules: {error}"),
                ));
                return;
            }
        };
        let field = rule_path(path, rule.get("fieldPath").and_then(Value::as_str));
        match program.execute(context) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => {
                let message = failure_message(rule, source, context);
                let cause = match rule.get("reason").and_then(Value::as_str) {
                    Some("FieldValueForbidden") => Cause::forbidden(&field, &message),
                    Some("FieldValueRequired") => Cause::required(&field, Some(&message)),
                    Some("FieldValueDuplicate") => Cause {
                        reason: "FieldValueDuplicate",
                        field: field.clone(),
                        message: format!("Duplicate value: {message}"),
                    },
                    _ => Cause::invalid_shown(&field, &shown, &message),
                };
                causes.push(cause);
            }
            Ok(other) => causes.push(Cause::invalid_shown(
                &field,
                &shown,
                format!("rule did not evaluate to a boolean ({other:?}): {source}"),
            )),
            Err(error) => causes.push(Cause::invalid_shown(
                &field,
                &shown,
                format!("{error} evaluating rule: {source}"),
            )),
        }
    }
}

/// `message`, else the value of `messageExpression`, else `failed rule: <rule>`.
fn failure_message(rule: &Value, source: &str, context: &Context<'_, '_>) -> String {
    if let Some(message) = rule
        .get("message")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
    {
        return message.to_string();
    }
    if let Some(expression) = rule.get("messageExpression").and_then(Value::as_str)
        && let Ok(program) = program(expression)
        && let Ok(cel::Value::String(message)) = program.execute(context)
        && !message.trim().is_empty()
    {
        return message.to_string();
    }
    format!("failed rule: {source}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(rule: &str, value: Value, old: Option<Value>) -> Vec<Cause> {
        let mut causes = Vec::new();
        check(
            &[json!({"rule": rule, "message": "nope"})],
            &value,
            old.as_ref(),
            "spec.x",
            "object",
            &mut causes,
        );
        causes
    }

    /// The rules of Karpenter's CRDs, with the Kubernetes library functions they use.
    #[test]
    fn karpenter_rules_evaluate() {
        assert!(
            run(
                "self.find('^[^@]+') in ['al2', 'al2023']",
                json!("al2023@latest"),
                None
            )
            .is_empty()
        );
        assert_eq!(
            run(
                "self.find('^[^@]+') in ['al2', 'al2023']",
                json!("windows2019@latest"),
                None
            )
            .len(),
            1
        );
        assert!(
            run(
                "self.split('@')[0] in ['al2','al2023']",
                json!("al2@v1"),
                None
            )
            .is_empty()
        );
        let gt = "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)";
        assert!(run(gt, json!([{"operator": "Gt", "values": ["3"]}]), None).is_empty());
        assert_eq!(
            run(gt, json!([{"operator": "Gt", "values": ["3", "4"]}]), None)[0].message,
            "Invalid value: \"object\": nope"
        );
        assert!(
            run(
                "self.all(k, k != '' && self[k] != '')",
                json!({"a": "b"}),
                None
            )
            .is_empty()
        );
        assert_eq!(
            run(
                "has(self.role) != has(self.instanceProfile)",
                json!({"role": "r", "instanceProfile": "p"}),
                None
            )
            .len(),
            1
        );
        assert!(
            run(
                "self.matches('^[a-zA-Z0-9]+@.+$')",
                json!("al2023@latest"),
                None
            )
            .is_empty()
        );
    }

    #[test]
    fn transition_rules_run_only_on_update() {
        assert!(run("self == oldSelf", json!("a"), None).is_empty());
        assert!(run("self == oldSelf", json!("a"), Some(json!("a"))).is_empty());
        assert_eq!(
            run("self == oldSelf", json!("b"), Some(json!("a"))).len(),
            1
        );
    }

    #[test]
    fn failures_use_message_expression_reason_and_field_path() {
        let mut causes = Vec::new();
        let rules = [
            json!({"rule": "self.size() < 2", "messageExpression": "'has ' + string(self.size()) + ' items'",
                            "reason": "FieldValueForbidden", "fieldPath": ".items"}),
        ];
        check(
            &rules,
            &json!({"a": 1, "b": 2}),
            None,
            "spec",
            "object",
            &mut causes,
        );
        assert_eq!(causes, vec![Cause::forbidden("spec.items", "has 2 items")]);
        let mut causes = Vec::new();
        check(
            &[json!({"rule": "self.x > 1"})],
            &json!({}),
            None,
            "spec",
            "object",
            &mut causes,
        );
        assert!(
            causes[0].message.contains("evaluating rule: self.x > 1"),
            "{:?}",
            causes
        );
        let mut causes = Vec::new();
        check(
            &[json!({"rule": "self.("})],
            &json!({}),
            None,
            "spec",
            "object",
            &mut causes,
        );
        assert!(
            causes[0].message.contains("compilation failed"),
            "{:?}",
            causes
        );
    }
}
