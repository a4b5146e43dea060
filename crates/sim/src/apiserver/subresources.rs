//! The pod subresources that are actions: `eviction` (policy/v1, honouring disruption
//! budgets) and `binding` (assigning a pod to a node).

use serde_json::{Value, json};

use super::core::{ApiCore, meta_str};
use super::error::ApiError;
use super::pdb::{self, EvictionOutcome};
use super::resources::{ResourceInfo, ResourceKey};

fn created_status() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

impl ApiCore {
    /// POST pods/NAME/eviction.
    pub(super) fn evict(
        &mut self,
        pods: &ResourceInfo,
        namespace: &str,
        name: &str,
        eviction: &Value,
    ) -> Result<Value, ApiError> {
        if let Some(body_name) = meta_str(eviction, "name")
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "name in URL does not match name in Eviction object: {name} != {body_name}"
            )));
        }
        let pod = self.get_object(pods, Some(namespace), name)?;
        if eviction
            .pointer("/deleteOptions/dryRun")
            .and_then(Value::as_array)
            .is_some_and(|modes| modes.iter().any(|m| m == "All"))
        {
            self.dry_run = true;
        }
        let pdb_key = ResourceKey::new("policy", "poddisruptionbudgets");
        let matching: Vec<std::sync::Arc<Value>> = self
            .store
            .list(&pdb_key, Some(namespace))
            .filter(|(_, budget)| pdb::selects(budget, &pod))
            .map(|(_, budget)| std::sync::Arc::clone(budget))
            .collect();
        let refs: Vec<&Value> = matching.iter().map(|b| b.as_ref()).collect();
        if let EvictionOutcome::DeleteCharging(index) = pdb::decide_eviction(&pod, &refs)?
            && let (Some(budget), Some(info)) =
                (matching.get(index), self.registry.get(&pdb_key).cloned())
        {
            let now = self.now_string();
            let mut charged = (**budget).clone();
            let allowed = charged
                .pointer("/status/disruptionsAllowed")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if let Some(status) = charged.get_mut("status").and_then(Value::as_object_mut) {
                status.insert("disruptionsAllowed".into(), json!(allowed - 1));
                let disrupted = status.entry("disruptedPods").or_insert_with(|| json!({}));
                if let Some(map) = disrupted.as_object_mut() {
                    map.insert(name.to_string(), json!(now));
                }
            }
            self.commit(&info, charged);
        }
        let options = eviction
            .get("deleteOptions")
            .filter(|o| o.is_object())
            .cloned()
            .unwrap_or_else(|| json!({}));
        self.delete_object(pods, "v1", Some(namespace), name, &options)?;
        Ok(created_status())
    }

    /// POST pods/NAME/binding.
    pub(super) fn bind(
        &mut self,
        pods: &ResourceInfo,
        namespace: &str,
        name: &str,
        binding: &Value,
    ) -> Result<Value, ApiError> {
        let node = binding
            .pointer("/target/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if node.is_empty() {
            return Err(ApiError::invalid(
                "Binding",
                name,
                "target.name",
                "Required value",
            ));
        }
        let pod = self.get_object(pods, Some(namespace), name)?;
        if let Some(assigned) = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            return Err(ApiError::conflict_message(format!(
                "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is already assigned to node \"{assigned}\""
            )));
        }
        if pod.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(ApiError::conflict_message(format!(
                "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is being deleted, cannot be assigned to a host"
            )));
        }
        let now = self.now_string();
        let mut bound = (*pod).clone();
        if let Some(spec) = bound.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("nodeName".into(), json!(node));
        }
        if let Some(map) = bound.as_object_mut() {
            let status = map.entry("status").or_insert_with(|| json!({}));
            if let Some(status) = status.as_object_mut() {
                let conditions = status.entry("conditions").or_insert_with(|| json!([]));
                if let Some(conditions) = conditions.as_array_mut() {
                    conditions
                        .retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
                    conditions.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}));
                }
            }
        }
        self.commit(pods, bound);
        Ok(created_status())
    }
}
