//! What happens after writes, before the request returns: CRDs (un)registered, garbage
//! collection of dependents whose owners are gone, and the status of the PDBs whose pods changed.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};

use super::core::ApiCore;
use super::crd;
use super::pdb;
use super::resources::{ResourceInfo, ResourceKey};
use super::store::{name_of, owner_uids};

/// Safety bound on cascade rounds (each round handles all queued work).
const MAX_ROUNDS: usize = 1_000;

impl ApiCore {
    /// Run the cascade until nothing is left to do.
    pub(super) fn settle(&mut self) {
        for _ in 0..MAX_ROUNDS {
            let mut worked = false;
            if self.crds_changed {
                self.crds_changed = false;
                self.sync_crds();
                worked = true;
            }
            if !self.removed_uids.is_empty() {
                let removed = std::mem::take(&mut self.removed_uids);
                self.collect_garbage(&removed);
                worked = true;
            }
            if !self.dirty_pdbs.is_empty() {
                for (namespace, name) in std::mem::take(&mut self.dirty_pdbs) {
                    self.refresh_pdb(&namespace, &name);
                }
                worked = true;
            }
            if !worked {
                return;
            }
        }
        tracing::warn!("API server cascade did not settle after {MAX_ROUNDS} rounds");
    }

    /// Make the registry serve exactly the stored CRDs; drop objects of removed CRDs.
    fn sync_crds(&mut self) {
        let crd_key = ResourceKey::new("apiextensions.k8s.io", "customresourcedefinitions");
        let wanted: Vec<ResourceInfo> = self
            .store
            .list(&crd_key, None)
            .filter_map(|(_, object)| crd::resource_from_crd(object).ok())
            .collect();
        let wanted_keys: BTreeSet<ResourceKey> = wanted.iter().map(ResourceInfo::key).collect();
        let stale: Vec<ResourceInfo> = self
            .registry
            .all()
            .filter(|info| info.custom && !wanted_keys.contains(&info.key()))
            .cloned()
            .collect();
        for info in stale {
            let names: Vec<(String, String)> = self
                .store
                .list(&info.key(), None)
                .map(|(name, _)| name.clone())
                .collect();
            for (namespace, name) in names {
                self.remove(&info, &namespace, &name, false);
            }
            self.registry.remove(&info.key());
        }
        for info in wanted {
            let builtin_clash = self
                .registry
                .get(&info.key())
                .is_some_and(|existing| !existing.custom);
            if !builtin_clash {
                self.registry.insert(info);
            }
        }
    }

    /// Background garbage collection: dependents of removed owners are deleted when no owner
    /// remains (or lose the reference when the owner was deleted with `Orphan`).
    fn collect_garbage(&mut self, removed: &[(String, bool)]) {
        let removed_uids: BTreeSet<&str> = removed
            .iter()
            .map(|(uid, _)| uid.as_str())
            .filter(|uid| !uid.is_empty())
            .collect();
        if removed_uids.is_empty() {
            return;
        }
        let orphaning: BTreeSet<&str> = removed
            .iter()
            .filter(|(_, orphan)| *orphan)
            .map(|(uid, _)| uid.as_str())
            .collect();
        let mut found: BTreeSet<(ResourceKey, (String, String))> = BTreeSet::new();
        for uid in &removed_uids {
            found.extend(self.store.dependents_of(uid));
        }
        let mut dependents: Vec<(ResourceInfo, Arc<Value>)> = Vec::new();
        for (key, (namespace, name)) in found {
            let (Some(info), Some(object)) = (
                self.registry.get(&key),
                self.store.get(&key, &namespace, &name),
            ) else {
                continue;
            };
            dependents.push((info.clone(), Arc::clone(object)));
        }
        for (info, object) in dependents {
            let owners = owner_uids(&object);
            let orphaned_by_policy = owners.iter().any(|uid| orphaning.contains(uid.as_str()));
            let live_owner = owners.iter().any(|uid| {
                !removed_uids.contains(uid.as_str()) && self.store.locate_uid(uid).is_some()
            });
            let (namespace, name) = name_of(&object);
            if orphaned_by_policy || live_owner {
                let mut kept = (*object).clone();
                if let Some(Value::Array(refs)) = kept.pointer_mut("/metadata/ownerReferences") {
                    refs.retain(|r| {
                        !r.get("uid")
                            .and_then(Value::as_str)
                            .is_some_and(|uid| removed_uids.contains(uid))
                    });
                }
                if let Some(meta) = kept.get_mut("metadata").and_then(Value::as_object_mut)
                    && meta
                        .get("ownerReferences")
                        .and_then(Value::as_array)
                        .is_some_and(Vec::is_empty)
                {
                    meta.remove("ownerReferences");
                }
                self.commit(&info, kept);
            } else {
                let version = info
                    .versions
                    .first()
                    .map(|v| v.name.clone())
                    .unwrap_or_default();
                let ns = if info.namespaced {
                    Some(namespace.as_str())
                } else {
                    None
                };
                let _ = self.delete_object(
                    &info,
                    &version,
                    ns,
                    &name,
                    &json!({"propagationPolicy": "Background"}),
                );
            }
        }
    }

    /// Desired replicas of a pod controller (ReplicaSet, Deployment) in `namespace`.
    fn controller_scale(&self, namespace: &str, kind: &str, name: &str) -> Option<i64> {
        let lookup = |plural: &str, name: &str| {
            self.store
                .get(&ResourceKey::new("apps", plural), namespace, name)
                .cloned()
        };
        match kind {
            "ReplicaSet" => {
                let replica_set = lookup("replicasets", name)?;
                if let Some(("Deployment", deployment)) = pdb::controller_of(&replica_set)
                    .as_ref()
                    .map(|(k, n)| (k.as_str(), n.as_str()))
                    && let Some(deployment) = lookup("deployments", deployment)
                {
                    return Some(
                        deployment
                            .pointer("/spec/replicas")
                            .and_then(Value::as_i64)
                            .unwrap_or(1),
                    );
                }
                Some(
                    replica_set
                        .pointer("/spec/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(1),
                )
            }
            "Deployment" => lookup("deployments", name).map(|d| {
                d.pointer("/spec/replicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(1)
            }),
            _ => None,
        }
    }

    /// The PDB controller: recompute the status of the PDB `namespace/name` from the pods the
    /// index says it selects.
    fn refresh_pdb(&mut self, namespace: &str, name: &str) {
        let pdb_key = ResourceKey::new("policy", "poddisruptionbudgets");
        let Some(budget) = self.store.get(&pdb_key, namespace, name).cloned() else {
            return;
        };
        let Some(selected) = self.pdb_index.selected(namespace, name) else {
            return;
        };
        let now = self.now_string();
        let scale_of = |kind: &str, name: &str| self.controller_scale(namespace, kind, name);
        let status = pdb::compute_status(&budget, selected, &scale_of, &now);
        if budget.get("status") != Some(&status) {
            let mut updated = (*budget).clone();
            if let Some(map) = updated.as_object_mut() {
                map.insert("status".into(), status);
            }
            self.store.put(&pdb_key, updated);
        }
    }
}
