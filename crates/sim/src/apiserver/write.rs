//! Write verbs: create, update, patch (merge, JSON, strategic, apply) and delete, including
//! status-subresource rules, finalizers, graceful pod deletion and defaulting.

use std::sync::Arc;

use jiff::SignedDuration;
use serde_json::{Value, json};

use super::builtin_validation;
use super::core::{ApiCore, CoreRequest, PodTermination, meta_str, metadata, metadata_mut};
use super::crd;
use super::defaults;
use super::error::{ApiError, success_status};
use super::events;
use super::managed_fields;
use super::node_lifecycle;
use super::resources::{ResourceInfo, ResourceKey};
use super::schema::{self, Rejection};
use super::store::{name_of, uid_of};
use super::strategic_merge::strategic_merge;

const NAME_SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Namespaces that cannot be deleted.
const PROTECTED_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// Is `name` a valid DNS-subdomain-style object name?
fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !name.is_empty()
        && name.len() <= 253
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// Whether two objects are equal but for their metadata (and, with `skip_status`, status): an
/// update that changes anything else bumps `metadata.generation`. Compared in place.
fn same_but_metadata(a: &Value, b: &Value, skip_status: bool) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let compared = |key: &str| key != "metadata" && !(skip_status && key == "status");
    a.iter()
        .filter(|(key, _)| compared(key))
        .all(|(key, value)| b.get(key) == Some(value))
        && b.keys()
            .filter(|key| compared(key))
            .all(|key| a.contains_key(key))
}

fn finalizers_empty(object: &Value) -> bool {
    metadata(object)
        .get("finalizers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
}

/// The media type of a Content-Type header, lowercased, without parameters.
pub(super) fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Apply a JSON patch, JSON merge patch or (built-in types only) strategic merge patch to
/// `target`, returning the patched document.
pub(super) fn apply_patch(
    info: &ResourceInfo,
    name: &str,
    content_type: &str,
    body: &[u8],
    target: &Value,
) -> Result<Value, ApiError> {
    let mut patched = target.clone();
    match content_type {
        "application/json-patch+json" => {
            let patch: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            // `patched` is a copy dropped on error, so no undo is needed; json-patch's undo
            // panics on some patches (a move to the root, then a failing operation).
            json_patch::patch_unsafe(&mut patched, &patch).map_err(|e| {
                ApiError::invalid(
                    &info.kind,
                    name,
                    "patch",
                    format!("the JSON patch could not be applied: {e}"),
                )
            })?;
        }
        "application/merge-patch+json" => {
            let patch: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid merge patch: {e}")))?;
            if !patch.is_object() {
                return Err(ApiError::bad_request("merge patch must be a JSON object"));
            }
            json_patch::merge(&mut patched, &patch);
        }
        "application/strategic-merge-patch+json" if info.strategic_merge => {
            let patch: Value = serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("invalid strategic merge patch: {e}"))
            })?;
            patched = strategic_merge(&patched, &patch)?;
        }
        _ => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml{}",
                if info.strategic_merge {
                    ", application/strategic-merge-patch+json"
                } else {
                    ""
                }
            )));
        }
    }
    Ok(patched)
}

impl ApiCore {
    /// Store `object` and note what the cascade (PDBs, CRDs) must look at.
    pub(super) fn commit(&mut self, info: &ResourceInfo, mut object: Value) -> Arc<Value> {
        let key = info.key();
        if key == ResourceKey::new("", "nodes") {
            node_lifecycle::sync_unschedulable_taint(&mut object);
        }
        if self.dry_run {
            return Arc::new(object);
        }
        let (namespace, name) = name_of(&object);
        if key == ResourceKey::new("", "pods") {
            let touched = self.pdb_index.pod_written(&namespace, &name, &object);
            self.dirty_pdbs.extend(
                touched
                    .into_iter()
                    .map(|budget| (namespace.clone(), budget)),
            );
        } else if key == ResourceKey::new("policy", "poddisruptionbudgets") {
            let pods = self
                .store
                .list(&ResourceKey::new("", "pods"), Some(&namespace))
                .map(|(_, pod)| pod.as_ref());
            self.pdb_index
                .budget_written(&namespace, &name, &object, pods);
            self.dirty_pdbs.insert((namespace, name));
        } else if key == ResourceKey::new("apps", "replicasets")
            || key == ResourceKey::new("apps", "deployments")
        {
            // A budget's expected pods count its pods' controllers' scale: a scale change, or a
            // ReplicaSet changing hands, changes its status with no pod written.
            let budgets: Vec<String> = self.pdb_index.budgets_in(&namespace).cloned().collect();
            self.dirty_pdbs.extend(
                budgets
                    .into_iter()
                    .map(|budget| (namespace.clone(), budget)),
            );
        }
        if key == ResourceKey::new("apiextensions.k8s.io", "customresourcedefinitions") {
            self.crds_changed = true;
        }
        if let Some(other) = events::other_view(&key) {
            let converted = events::convert(&key, &object);
            self.store.put(&other, converted);
        }
        self.store.put(&key, object)
    }

    /// Who writes in the request being handled, as `managed_fields` sees it.
    fn writer<'a>(
        &self,
        info: &ResourceInfo,
        manager: &'a str,
        api_version: &'a str,
        time: &'a str,
        status_only: bool,
    ) -> managed_fields::Writer<'a> {
        managed_fields::Writer {
            manager,
            api_version,
            subresource: if status_only { "status" } else { "" },
            time,
            scope: if status_only {
                managed_fields::Scope::Status
            } else if info.has_status() {
                managed_fields::Scope::Main
            } else {
                managed_fields::Scope::Whole
            },
            strategic: info.strategic_merge,
        }
    }

    /// Record an update's (or a create's, `old` None) field ownership in `new`'s
    /// `managedFields`, as kube-apiserver does for every write with a manager. A write that sets
    /// `managedFields` to an empty list clears them; one that sends other entries replaces them.
    fn record_ownership(
        &self,
        info: &ResourceInfo,
        version: &str,
        old: Option<&Value>,
        new: &mut Value,
        status_only: bool,
    ) {
        let Some(manager) = self.field_manager.as_deref() else {
            return;
        };
        let base = match new.pointer("/metadata/managedFields") {
            Some(Value::Array(sent)) if sent.is_empty() => {
                if let Some(meta) = metadata_mut(new) {
                    meta.remove("managedFields");
                }
                return;
            }
            Some(_) => managed_fields::entries_of(new),
            None => old.map(managed_fields::entries_of).unwrap_or_default(),
        };
        let api_version = info.api_version(version);
        let time = self.now_string();
        let writer = self.writer(info, manager, &api_version, &time, status_only);
        let entries = managed_fields::record_update(&writer, base, old, new);
        managed_fields::set_entries(new, &entries);
    }

    /// Remove an object for good, queueing garbage collection of its dependents.
    pub(super) fn remove(
        &mut self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
        orphan: bool,
    ) -> Option<Arc<Value>> {
        let key = info.key();
        if self.dry_run {
            return self.store.get(&key, namespace, name).cloned();
        }
        let removed = self.store.remove(&key, namespace, name)?;
        if let Some(other) = events::other_view(&key) {
            self.store.remove(&other, namespace, name);
        }
        self.removed_uids
            .push((uid_of(&removed).to_string(), orphan));
        if key == ResourceKey::new("", "pods") {
            let touched = self.pdb_index.pod_removed(namespace, name);
            self.dirty_pdbs.extend(
                touched
                    .into_iter()
                    .map(|budget| (namespace.to_string(), budget)),
            );
        } else if key == ResourceKey::new("policy", "poddisruptionbudgets") {
            self.pdb_index.budget_removed(namespace, name);
        } else if key == ResourceKey::new("apps", "replicasets")
            || key == ResourceKey::new("apps", "deployments")
        {
            let budgets: Vec<String> = self.pdb_index.budgets_in(namespace).cloned().collect();
            self.dirty_pdbs.extend(
                budgets
                    .into_iter()
                    .map(|budget| (namespace.to_string(), budget)),
            );
        }
        if key == ResourceKey::new("apiextensions.k8s.io", "customresourcedefinitions") {
            self.crds_changed = true;
        }
        Some(removed)
    }

    fn generate_name(&mut self, info: &ResourceInfo, namespace: &str, prefix: &str) -> String {
        loop {
            let mut random = self.next_random();
            let mut name = prefix.to_string();
            for _ in 0..5 {
                let index =
                    usize::try_from(random % NAME_SUFFIX_ALPHABET.len() as u64).unwrap_or(0);
                name.push(char::from(NAME_SUFFIX_ALPHABET[index]));
                random /= NAME_SUFFIX_ALPHABET.len() as u64;
            }
            if self.store.get(&info.key(), namespace, &name).is_none() {
                return name;
            }
        }
    }

    fn check_type_meta(info: &ResourceInfo, object: &Value) -> Result<(), ApiError> {
        if let Some(kind) = object.get("kind").and_then(Value::as_str)
            && !kind.is_empty()
            && kind != info.kind
        {
            return Err(ApiError::bad_request(format!(
                "the kind {kind:?} in the request body does not match the resource {} (kind {:?})",
                info.plural, info.kind
            )));
        }
        if let Some(api_version) = object.get("apiVersion").and_then(Value::as_str)
            && !api_version.is_empty()
            && !info
                .versions
                .iter()
                .any(|v| info.api_version(&v.name) == api_version)
        {
            return Err(ApiError::bad_request(format!(
                "the apiVersion {api_version:?} in the request body is not served for {}",
                info.plural
            )));
        }
        Ok(())
    }

    /// Admits a write as kube-apiserver does: a custom resource is pruned, defaulted and
    /// validated against its version's schema (warnings kept for the response); a built-in kind
    /// must decode as its type, gets its defaults and is validated by its rules; every kind's
    /// metadata is checked. `old` is the stored object on an update.
    fn admit(
        &mut self,
        info: &ResourceInfo,
        version: &str,
        object: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let mut causes = Vec::new();
        if info.custom {
            if let Some(schema) = info.version(version).and_then(|v| v.schema.as_ref()) {
                match schema::admit(schema, object, old, self.field_validation) {
                    Ok(warnings) => self.warnings.extend(warnings),
                    Err(Rejection::UnknownFields(fields)) => {
                        return Err(ApiError::unknown_fields(&info.kind, version, &fields));
                    }
                    Err(Rejection::Invalid(invalid)) => causes = invalid,
                }
            }
        } else {
            builtin_validation::decode(&info.group, version, &info.kind, object)?;
            defaults::apply(&info.group, &info.plural, object);
            builtin_validation::validate(&info.group, &info.kind, object, old, &mut causes);
        }
        builtin_validation::metadata(object, &mut causes);
        if causes.is_empty() {
            return Ok(());
        }
        let name = meta_str(object, "name").unwrap_or_default();
        Err(ApiError::invalid_causes(
            &info.group,
            &info.kind,
            name,
            &causes,
        ))
    }

    /// Create an object (POST, or apply of an absent object).
    pub(super) fn create_object(
        &mut self,
        info: &ResourceInfo,
        version: &str,
        namespace: Option<&str>,
        mut object: Value,
    ) -> Result<Arc<Value>, ApiError> {
        Self::check_type_meta(info, &object)?;
        let api_version = info.api_version(version);
        let now = self.now_string();
        let uid = self.new_uid();
        let Some(map) = object.as_object_mut() else {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        };
        map.insert("apiVersion".into(), json!(api_version));
        map.insert("kind".into(), json!(info.kind));
        let path_namespace = namespace.unwrap_or_default().to_string();
        let Some(meta) = metadata_mut(&mut object) else {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        };
        let body_namespace = meta
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if info.namespaced {
            if !body_namespace.is_empty() && body_namespace != path_namespace {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            meta.insert("namespace".into(), json!(path_namespace));
        } else {
            meta.remove("namespace");
        }
        let mut name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let generate = meta
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        for field in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(field);
        }
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(now));
        meta.insert("generation".into(), json!(1));
        let stored_namespace = if info.namespaced {
            path_namespace.clone()
        } else {
            String::new()
        };
        if name.is_empty() {
            if generate.is_empty() {
                return Err(ApiError::invalid(
                    &info.kind,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
            name = self.generate_name(info, &stored_namespace, &generate);
            if let Some(meta) = metadata_mut(&mut object) {
                meta.insert("name".into(), json!(name));
            }
        }
        if !valid_name(&name) {
            return Err(ApiError::invalid(
                &info.kind,
                &name,
                "metadata.name",
                "Invalid value: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            ));
        }
        if info.namespaced
            && self
                .store
                .get(&ResourceKey::new("", "namespaces"), "", &stored_namespace)
                .is_none()
        {
            return Err(ApiError::not_found("", "namespaces", &stored_namespace));
        }
        if self
            .store
            .get(&info.key(), &stored_namespace, &name)
            .is_some()
        {
            return Err(ApiError::already_exists(&info.group, &info.plural, &name));
        }
        if info.has_status()
            && let Some(initial) = defaults::initial_status(&info.group, &info.plural)
            && let Some(map) = object.as_object_mut()
        {
            if initial.is_null() {
                map.remove("status");
            } else {
                map.insert("status".into(), initial);
            }
        }
        self.admit(info, version, &mut object, None)?;
        if info.key() == ResourceKey::new("apiextensions.k8s.io", "customresourcedefinitions") {
            crd::resource_from_crd(&object)?;
            let status = crd::established_status(&object, &now);
            if let Some(map) = object.as_object_mut() {
                map.insert("status".into(), status);
            }
        }
        if !self.applying {
            self.record_ownership(info, version, None, &mut object, false);
        }
        Ok(self.commit(info, object))
    }

    /// PUT (or the final step of a patch): replace `existing` with `new` by the update rules.
    pub(super) fn finish_update(
        &mut self,
        info: &ResourceInfo,
        version: &str,
        existing: &Arc<Value>,
        mut new: Value,
        status_only: bool,
    ) -> Result<Arc<Value>, ApiError> {
        Self::check_type_meta(info, &new)?;
        if !new.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        let existing_value: &Value = existing;
        let name = meta_str(existing_value, "name")
            .unwrap_or_default()
            .to_string();
        if let Some(new_name) = meta_str(&new, "name")
            && new_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({new_name}) does not match the name on the URL ({name})"
            )));
        }
        if let Some(new_version) = meta_str(&new, "resourceVersion")
            && !new_version.is_empty()
            && Some(new_version) != meta_str(existing_value, "resourceVersion")
        {
            return Err(ApiError::conflict(&info.group, &info.plural, &name));
        }
        let mut result = if status_only {
            let mut result = existing_value.clone();
            if let Some(map) = result.as_object_mut() {
                match new.get("status") {
                    Some(status) if !status.is_null() => {
                        map.insert("status".into(), status.clone());
                    }
                    _ => {
                        map.remove("status");
                    }
                }
            }
            result
        } else {
            if info.has_status()
                && let Some(map) = new.as_object_mut()
            {
                match existing_value.get("status") {
                    Some(status) => {
                        map.insert("status".into(), status.clone());
                    }
                    None => {
                        map.remove("status");
                    }
                }
            }
            if let Some(meta) = metadata_mut(&mut new) {
                let old = metadata(existing_value);
                for field in [
                    "name",
                    "namespace",
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                    "resourceVersion",
                ] {
                    match old.get(field) {
                        Some(value) => {
                            meta.insert(field.to_string(), value.clone());
                        }
                        None => {
                            meta.remove(field);
                        }
                    }
                }
            }
            new
        };
        if let Some(map) = result.as_object_mut() {
            map.insert("apiVersion".into(), json!(info.api_version(version)));
            map.insert("kind".into(), json!(info.kind));
        }
        self.admit(info, version, &mut result, Some(existing_value))?;
        if info.key() == ResourceKey::new("apiextensions.k8s.io", "customresourcedefinitions") {
            crd::resource_from_crd(&result)?;
        }
        let changed_spec = !same_but_metadata(&result, existing_value, info.has_status());
        if changed_spec && !status_only {
            let generation = metadata(existing_value)
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            if let Some(meta) = metadata_mut(&mut result) {
                meta.insert("generation".into(), json!(generation + 1));
            }
        }
        if !self.applying {
            self.record_ownership(
                info,
                version,
                Some(existing_value),
                &mut result,
                status_only,
            );
        }
        if result == *existing_value {
            return Ok(Arc::clone(existing));
        }
        let deleting = metadata(&result).contains_key("deletionTimestamp");
        let grace = metadata(&result)
            .get("deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if deleting && grace == 0 && finalizers_empty(&result) {
            let (namespace, name) = name_of(&result);
            return Ok(self
                .remove(info, &namespace, &name, false)
                .unwrap_or_else(|| Arc::new(result)));
        }
        Ok(self.commit(info, result))
    }

    /// PUT.
    pub(super) fn update_object(
        &mut self,
        info: &ResourceInfo,
        version: &str,
        namespace: Option<&str>,
        name: &str,
        new: Value,
        status_only: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let existing = self.get_object(info, namespace, name)?;
        if let Some(body_namespace) = meta_str(&new, "namespace")
            && info.namespaced
            && Some(body_namespace) != namespace
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        self.finish_update(info, version, &existing, new, status_only)
    }

    /// PATCH with any supported patch type. Returns the HTTP code (201 when apply created).
    pub(super) fn patch_object(
        &mut self,
        info: &ResourceInfo,
        version: &str,
        namespace: Option<&str>,
        name: &str,
        request: &CoreRequest,
        status_only: bool,
    ) -> Result<(u16, Arc<Value>), ApiError> {
        let content_type = media_type(&request.content_type);
        if content_type == "application/apply-patch+yaml"
            || content_type == "application/apply-patch+json"
        {
            let applied: Value = serde_yaml::from_slice::<serde_yaml::Value>(&request.body)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
                .and_then(|v| {
                    serde_json::to_value(v)
                        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
                })?;
            if !applied.is_object() {
                return Err(ApiError::bad_request("apply patch must be an object"));
            }
            if applied
                .pointer("/metadata/managedFields")
                .is_some_and(|m| !m.is_null())
            {
                return Err(ApiError::bad_request(
                    "metadata.managedFields must be nil in an apply patch",
                ));
            }
            let manager = request
                .query
                .get("fieldManager")
                .filter(|m| !m.is_empty())
                .cloned()
                .ok_or_else(|| {
                    ApiError::invalid(
                        "PatchOptions.meta.k8s.io",
                        "",
                        "fieldManager",
                        "Required value: is required for apply patch",
                    )
                })?;
            let force = request.query.get("force").is_some_and(|f| f == "true");
            let api_version = info.api_version(version);
            let time = self.now_string();
            let writer = self.writer(info, &manager, &api_version, &time, status_only);
            let live = self.get_object(info, namespace, name);
            let (code, object) = match live {
                Err(not_found) if status_only => return Err(not_found),
                Err(_) => {
                    let mut object = applied.clone();
                    if let Some(meta) = metadata_mut(&mut object) {
                        meta.insert("name".into(), json!(name));
                    }
                    let (mut object, entries) =
                        managed_fields::apply(&writer, force, None, &applied, object)?;
                    managed_fields::set_entries(&mut object, &entries);
                    self.applying = true;
                    let created = self.create_object(info, version, namespace, object);
                    self.applying = false;
                    (201, created?)
                }
                Ok(existing) => {
                    let merged = if info.strategic_merge {
                        strategic_merge(&existing, &applied)?
                    } else {
                        let mut merged = (*existing).clone();
                        json_patch::merge(&mut merged, &applied);
                        merged
                    };
                    let (mut merged, entries) =
                        managed_fields::apply(&writer, force, Some(&existing), &applied, merged)?;
                    managed_fields::set_entries(&mut merged, &entries);
                    self.applying = true;
                    let updated = self.finish_update(info, version, &existing, merged, status_only);
                    self.applying = false;
                    (200, updated?)
                }
            };
            return Ok((code, object));
        }
        let existing = self.get_object(info, namespace, name)?;
        let patched = apply_patch(info, name, &content_type, &request.body, &existing)?;
        Ok((
            200,
            self.finish_update(info, version, &existing, patched, status_only)?,
        ))
    }

    /// DELETE of one object. Returns the code and body (the object while deletion is pending,
    /// a success Status once it is gone).
    pub(super) fn delete_object(
        &mut self,
        info: &ResourceInfo,
        version: &str,
        namespace: Option<&str>,
        name: &str,
        options: &Value,
    ) -> Result<(u16, Value), ApiError> {
        let existing = self.get_object(info, namespace, name)?;
        let (stored_namespace, _) = name_of(&existing);
        let uid = uid_of(&existing).to_string();
        if let Some(wanted) = options
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            && wanted != uid
        {
            return Err(ApiError::conflict_message(format!(
                "Precondition failed: UID in precondition: {wanted}, UID in object meta: {uid}"
            )));
        }
        if let Some(wanted) = options
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            && Some(wanted) != meta_str(&existing, "resourceVersion")
        {
            return Err(ApiError::conflict(&info.group, &info.plural, name));
        }
        let orphan = options.get("propagationPolicy").and_then(Value::as_str) == Some("Orphan")
            || options.get("orphanDependents").and_then(Value::as_bool) == Some(true);
        let is_pod = info.key() == ResourceKey::new("", "pods");
        let is_namespace = info.key() == ResourceKey::new("", "namespaces");
        if is_namespace && PROTECTED_NAMESPACES.contains(&name) {
            return Err(ApiError::forbidden(format!(
                "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
            )));
        }
        let now = self.now();
        if !finalizers_empty(&existing) {
            if metadata(&existing).contains_key("deletionTimestamp") {
                return Ok((200, self.render_object(info, version, &existing)));
            }
            let mut marked = (*existing).clone();
            let generation = metadata(&marked)
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            if let Some(meta) = metadata_mut(&mut marked) {
                meta.insert("deletionTimestamp".into(), json!(self.now_string()));
                meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                meta.insert("generation".into(), json!(generation + 1));
            }
            let stored = self.commit(info, marked);
            return Ok((200, self.render_object(info, version, &stored)));
        }
        if is_pod {
            let grace = options
                .get("gracePeriodSeconds")
                .and_then(Value::as_i64)
                .or_else(|| {
                    existing
                        .pointer("/spec/terminationGracePeriodSeconds")
                        .and_then(Value::as_i64)
                })
                .unwrap_or(30)
                .max(0);
            let bound = existing
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            let terminal = matches!(
                existing.pointer("/status/phase").and_then(Value::as_str),
                Some("Succeeded" | "Failed")
            );
            if bound
                && !terminal
                && grace > 0
                && self.config.pod_termination == PodTermination::AwaitKubelet
            {
                let current = metadata(&existing)
                    .get("deletionGracePeriodSeconds")
                    .and_then(Value::as_i64);
                if current.is_some_and(|c| c <= grace) {
                    return Ok((200, self.render_object(info, version, &existing)));
                }
                let deadline = now
                    .checked_add(SignedDuration::from_secs(grace))
                    .unwrap_or(now);
                let deadline =
                    jiff::Timestamp::from_second(deadline.as_second()).unwrap_or(deadline);
                let mut marked = (*existing).clone();
                if let Some(meta) = metadata_mut(&mut marked) {
                    meta.insert("deletionTimestamp".into(), json!(deadline.to_string()));
                    meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
                }
                let stored = self.commit(info, marked);
                return Ok((200, self.render_object(info, version, &stored)));
            }
        }
        if is_namespace {
            self.empty_namespace(name);
        }
        self.remove(info, &stored_namespace, name, orphan);
        Ok((200, success_status(&info.group, &info.plural, name, &uid)))
    }

    /// Remove every namespaced object in `namespace` (namespace deletion).
    fn empty_namespace(&mut self, namespace: &str) {
        let namespaced: Vec<ResourceInfo> = self
            .registry
            .all()
            .filter(|info| info.namespaced)
            .cloned()
            .collect();
        for info in namespaced {
            let names: Vec<String> = self
                .store
                .list(&info.key(), Some(namespace))
                .map(|((_, name), _)| name.clone())
                .collect();
            for name in names {
                self.remove(&info, namespace, &name, false);
            }
        }
    }

    /// DELETE on a collection (with selectors).
    pub(super) fn delete_collection(
        &mut self,
        info: &ResourceInfo,
        version: &str,
        namespace: Option<&str>,
        request: &CoreRequest,
    ) -> Result<super::core::CoreResponse, ApiError> {
        let (labels, fields) = Self::selectors(info, &request.query)?;
        let targets = self.matching(info, namespace, &labels, &fields);
        let options = json!({});
        let mut items = Vec::new();
        for ((ns, name), object) in targets {
            let ns = if info.namespaced {
                Some(ns.as_str())
            } else {
                None
            };
            if self
                .delete_object(info, version, ns, &name, &options)
                .is_ok()
            {
                items.push(self.render_object(info, version, &object));
            }
        }
        Ok(super::core::CoreResponse::Json(
            200,
            json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(version), "metadata": {"resourceVersion": self.store.resource_version().to_string()}, "items": items}),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What bumps `generation`: any change outside metadata (and status, for a kind with a
    /// status subresource), a field added or removed included.
    #[test]
    fn only_changes_outside_metadata_and_status_count_for_generation() {
        let old = json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"s": 1}});
        let same = [
            json!({"metadata": {"name": "a", "labels": {"l": "v"}}, "spec": {"x": 1}, "status": {"s": 1}}),
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"s": 2}}),
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}}),
        ];
        for new in &same {
            assert!(same_but_metadata(new, &old, true), "{new}");
        }
        assert!(!same_but_metadata(&same[1], &old, false));
        let changed = [
            json!({"metadata": {"name": "a"}, "spec": {"x": 2}, "status": {"s": 1}}),
            json!({"metadata": {"name": "a"}, "status": {"s": 1}}),
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "data": {}, "status": {"s": 1}}),
        ];
        for new in &changed {
            assert!(!same_but_metadata(new, &old, true), "{new}");
            assert!(!same_but_metadata(&old, new, true), "{new}");
        }
        assert!(same_but_metadata(&json!(1), &json!(1), true));
        assert!(!same_but_metadata(&json!(1), &json!(2), true));
    }

    #[test]
    fn object_names_follow_dns_subdomain_rules() {
        assert!(valid_name("web-1.example"));
        assert!(!valid_name("Web"));
        assert!(!valid_name("-web"));
        assert!(!valid_name(""));
        assert!(!valid_name(&"a".repeat(254)));
    }
}
