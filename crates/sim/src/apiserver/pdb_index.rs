//! The PDB controller's index: for every PodDisruptionBudget, the pods its selector picks with
//! the tallies its status is computed from, updated on each pod and PDB write, so that a pod
//! write recomputes the status of the budgets that pod is in without reading the namespace.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::pdb::{Member, SelectedPods, selector_of};
use super::selectors::LabelSelector;

/// One indexed budget.
#[derive(Debug, Default)]
struct Indexed {
    /// `spec.selector` as written (Null when absent): a write that keeps it keeps the members.
    written_selector: Value,
    /// The parsed selector; None selects nothing.
    selector: Option<LabelSelector>,
    pods: SelectedPods,
}

/// Every PDB's selected pods, by namespace and name.
#[derive(Debug, Default)]
pub struct PdbIndex {
    budgets: HashMap<String, BTreeMap<String, Indexed>>,
}

impl PdbIndex {
    /// A pod was created or changed: update the budgets of its namespace. Returns the names of
    /// the budgets whose status may change (the pod joined, left, or changed as a member).
    pub fn pod_written(&mut self, namespace: &str, name: &str, pod: &Value) -> Vec<String> {
        let Some(budgets) = self.budgets.get_mut(namespace) else {
            return Vec::new();
        };
        let mut touched = Vec::new();
        let mut member: Option<Member> = None;
        for (budget, indexed) in budgets.iter_mut() {
            let selects = indexed
                .selector
                .as_ref()
                .is_some_and(|s| s.matches_object(pod));
            if selects {
                let now = member.get_or_insert_with(|| Member::of(pod));
                if indexed.pods.get(name) != Some(now) {
                    indexed.pods.put(name, now.clone());
                    touched.push(budget.clone());
                }
            } else if indexed.pods.remove(name) {
                touched.push(budget.clone());
            }
        }
        touched
    }

    /// A pod is gone: the names of the budgets it was a member of.
    pub fn pod_removed(&mut self, namespace: &str, name: &str) -> Vec<String> {
        let Some(budgets) = self.budgets.get_mut(namespace) else {
            return Vec::new();
        };
        budgets
            .iter_mut()
            .filter_map(|(budget, indexed)| indexed.pods.remove(name).then(|| budget.clone()))
            .collect()
    }

    /// A budget was created or changed. When its selector is new or changed, its members are
    /// found again among `namespace_pods` (the namespace's pods).
    pub fn budget_written<'a>(
        &mut self,
        namespace: &str,
        name: &str,
        budget: &Value,
        namespace_pods: impl Iterator<Item = &'a Value>,
    ) {
        let written_selector = budget
            .pointer("/spec/selector")
            .cloned()
            .unwrap_or(Value::Null);
        let indexed = self
            .budgets
            .entry(namespace.to_string())
            .or_default()
            .entry(name.to_string())
            .or_default();
        if indexed.selector.is_some() && indexed.written_selector == written_selector {
            return;
        }
        let pods: Vec<&Value> = namespace_pods.collect();
        indexed.pods = SelectedPods::of(budget, &pods);
        indexed.selector = selector_of(budget);
        indexed.written_selector = written_selector;
    }

    /// A budget is gone.
    pub fn budget_removed(&mut self, namespace: &str, name: &str) {
        if let Some(budgets) = self.budgets.get_mut(namespace) {
            budgets.remove(name);
            if budgets.is_empty() {
                self.budgets.remove(namespace);
            }
        }
    }

    /// The names of the budgets of `namespace`.
    pub fn budgets_in(&self, namespace: &str) -> impl Iterator<Item = &String> {
        self.budgets
            .get(namespace)
            .into_iter()
            .flat_map(BTreeMap::keys)
    }

    /// The pods the budget `namespace/name` selects.
    pub fn selected(&self, namespace: &str, name: &str) -> Option<&SelectedPods> {
        self.budgets.get(namespace)?.get(name).map(|i| &i.pods)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, app: &str, ready: bool) -> Value {
        json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": app},
                "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": true, "uid": "u", "apiVersion": "apps/v1"}]},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        })
    }

    fn budget(app: &str) -> Value {
        json!({"metadata": {"name": "b", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}}})
    }

    /// The index, after any sequence of writes, holds what a fresh look at the namespace finds.
    #[test]
    fn the_index_follows_writes_as_a_fresh_look_would() {
        let mut index = PdbIndex::default();
        let mut pods: BTreeMap<String, Value> = BTreeMap::new();
        let fresh = |pods: &BTreeMap<String, Value>, budget: &Value| {
            SelectedPods::of(budget, &pods.values().collect::<Vec<_>>())
        };
        pods.insert("a".into(), pod("a", "web", true));
        let web = budget("web");
        index.budget_written("default", "b", &web, pods.values());
        assert_eq!(index.selected("default", "b"), Some(&fresh(&pods, &web)));

        // A new member, a member turning ready, an unrelated pod, a member leaving by label.
        for (name, app, ready, touches) in [
            ("b", "web", false, true),
            ("b", "web", true, true),
            ("b", "web", true, false),
            ("c", "db", true, false),
            ("a", "db", true, true),
        ] {
            let written = pod(name, app, ready);
            pods.insert(name.into(), written.clone());
            let touched = index.pod_written("default", name, &written);
            assert_eq!(!touched.is_empty(), touches, "{name} {app} {ready}");
            assert_eq!(index.selected("default", "b"), Some(&fresh(&pods, &web)));
        }
        pods.remove("b");
        assert_eq!(index.pod_removed("default", "b"), vec!["b".to_string()]);
        assert_eq!(index.pod_removed("default", "c"), Vec::<String>::new());
        assert_eq!(index.selected("default", "b"), Some(&fresh(&pods, &web)));

        // A new selector finds its members again; the same one keeps them.
        let db = budget("db");
        index.budget_written("default", "b", &db, pods.values());
        assert_eq!(index.selected("default", "b"), Some(&fresh(&pods, &db)));
        assert_eq!(
            index.selected("default", "b").map(SelectedPods::len),
            Some(2)
        );
        index.budget_removed("default", "b");
        assert_eq!(index.selected("default", "b"), None);
    }

    /// A budget without a selector, or with one that does not parse, selects nothing.
    #[test]
    fn a_missing_or_broken_selector_selects_nothing() {
        let mut index = PdbIndex::default();
        let a = pod("a", "web", true);
        let broken = json!({"metadata": {"name": "b"}, "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Nope"}]}}});
        index.budget_written("default", "b", &broken, [&a].into_iter());
        assert!(index.pod_written("default", "a", &a).is_empty());
        assert_eq!(
            index.selected("default", "b").map(SelectedPods::len),
            Some(0)
        );
        let none = json!({"metadata": {"name": "c"}, "spec": {}});
        index.budget_written("default", "c", &none, [&a].into_iter());
        assert_eq!(
            index.selected("default", "c").map(SelectedPods::len),
            Some(0)
        );
    }
}
