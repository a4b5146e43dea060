//! Server-side apply's field ownership, as kube-apiserver keeps it in `metadata.managedFields`:
//! one entry per (manager, operation, subresource) with the set of fields it owns in the
//! `FieldsV1` form (`f:name` a field, `k:{"name":"x"}` a list item by its merge key, `v:"x"` a
//! set member, `.` the item itself).
//!
//! * An update (create, PUT, JSON / merge / strategic patch) gives its manager the fields it
//!   changed, taking them from every other manager, without conflict.
//! * An apply owns exactly the fields of the applied configuration. A field another manager
//!   owns with a different value than the one applied is a conflict (409 naming the fields and
//!   the managers) unless the apply is forced, which takes the field. A field the manager
//!   applied before and no longer applies is removed from the object unless another manager
//!   owns it.
//! * A field that leaves the object leaves every set.
//!
//! Lists follow the merge strategy the server patches with ([`list_strategy`]): keyed lists by
//! item, primitive sets by value; a built-in list of named objects by name; other lists (and
//! every list of a custom resource) whole. As in kube-apiserver, an update owns what it changed
//! after defaulting, an apply only what it sent. What differs: the `.` marker of maps is not
//! written, and keyed list items use one merge key (kube-apiserver keys container ports by
//! port and protocol).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::strategic_merge::{ListStrategy, list_strategy};

/// Metadata fields the server owns: never in a manager's set.
const SYSTEM_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// A set of field paths (a tree in `FieldsV1` form).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    /// The path to this node is itself in the set (`.`; implied for a leaf).
    own: bool,
    children: BTreeMap<String, FieldSet>,
}

/// One path: its `FieldsV1` elements from the root.
pub type Path = Vec<String>;

impl FieldSet {
    /// Read a `fieldsV1` object (anything else is the empty set).
    pub fn from_fields_v1(value: &Value) -> Self {
        let mut set = Self::default();
        if let Some(map) = value.as_object() {
            for (key, child) in map {
                if key == "." {
                    set.own = true;
                } else {
                    set.children
                        .insert(key.clone(), Self::from_fields_v1(child));
                }
            }
        }
        set
    }

    /// Write the `fieldsV1` object.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.own && !self.children.is_empty() {
            map.insert(".".into(), json!({}));
        }
        for (key, child) in &self.children {
            map.insert(key.clone(), child.to_fields_v1());
        }
        Value::Object(map)
    }

    /// Every path in the set.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for (key, child) in &self.children {
            prefix.push(key.clone());
            if child.own || child.children.is_empty() {
                out.push(prefix.clone());
            }
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// Is `path` in the set?
    pub fn contains(&self, path: &[String]) -> bool {
        let mut node = self;
        for element in path {
            match node.children.get(element) {
                Some(child) => node = child,
                None => return false,
            }
        }
        !path.is_empty() && (node.own || node.children.is_empty())
    }

    /// Is `path` a leaf of the set (a value, not a list item or map with fields under it)?
    pub fn is_leaf(&self, path: &[String]) -> bool {
        let mut node = self;
        for element in path {
            match node.children.get(element) {
                Some(child) => node = child,
                None => return false,
            }
        }
        node.children.is_empty()
    }

    /// Add `path`.
    pub fn insert(&mut self, path: &[String]) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        let mut node = self;
        for element in parents {
            node = node.children.entry(element.clone()).or_default();
        }
        let leaf = node.children.entry(last.clone()).or_default();
        if !leaf.children.is_empty() {
            leaf.own = true;
        }
    }

    /// Remove `path` (its descendants stay); empty branches are pruned.
    pub fn remove(&mut self, path: &[String]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        let Some(child) = self.children.get_mut(first) else {
            return;
        };
        if rest.is_empty() {
            if child.children.is_empty() {
                self.children.remove(first);
            } else {
                child.own = false;
            }
        } else {
            child.remove(rest);
            if child.children.is_empty() && !child.own {
                self.children.remove(first);
            }
        }
    }

    /// The fields of `object` as a set, within `scope`.
    pub fn of_object(object: &Value, scope: Scope, strategic: bool) -> Self {
        let mut set = Self::default();
        let Some(map) = object.as_object() else {
            return set;
        };
        for (key, value) in map {
            let tracked = match key.as_str() {
                "apiVersion" | "kind" => false,
                "status" => scope != Scope::Main,
                _ => scope != Scope::Status,
            };
            if !tracked {
                continue;
            }
            let mut child = Self::of_value(key, value, strategic);
            if key == "metadata" {
                for system in SYSTEM_METADATA {
                    child.children.remove(&format!("f:{system}"));
                }
                if child.children.is_empty() {
                    continue;
                }
            }
            set.children.insert(format!("f:{key}"), child);
        }
        set
    }

    fn of_value(field: &str, value: &Value, strategic: bool) -> Self {
        let mut set = Self::default();
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    set.children
                        .insert(format!("f:{key}"), Self::of_value(key, child, strategic));
                }
            }
            Value::Array(items) if strategic => match ownership_strategy(field, items) {
                ListStrategy::MergeByKey(key) => {
                    let key = effective_key(field, key, items);
                    for item in items {
                        let Some(id) = item.get(key) else {
                            // An item without its key cannot be tracked apart: the list is
                            // owned whole.
                            return Self::default();
                        };
                        let mut child = Self::of_value("", item, strategic);
                        child.own = true;
                        set.children.insert(item_key(key, id), child);
                    }
                }
                ListStrategy::PrimitiveSet => {
                    for item in items {
                        set.children
                            .insert(format!("v:{}", canonical(item)), Self::default());
                    }
                }
                ListStrategy::Replace => {}
            },
            _ => {}
        }
        set
    }
}

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The main resource of a kind with a status subresource: everything but `status`.
    Main,
    /// The `status` subresource: only `status`.
    Status,
    /// A kind without a status subresource: everything.
    Whole,
}

/// How ownership divides a built-in list: as the server patches it, except that a list of
/// named objects the patch replaces whole is owned item by item, by name, as the built-in
/// types declare such lists for server-side apply (`listType=map`, `listMapKey=name`: a CRD's
/// `spec.versions`, ...) — two managers of one CRD then conflict only on values they set.
fn ownership_strategy(field: &str, items: &[Value]) -> ListStrategy {
    match list_strategy(field) {
        ListStrategy::Replace
            if !items.is_empty()
                && items
                    .iter()
                    .all(|item| item.get("name").is_some_and(Value::is_string)) =>
        {
            ListStrategy::MergeByKey("name")
        }
        strategy => strategy,
    }
}

/// Two types name a list `ports`: a container's is keyed by containerPort, a Service's by port.
fn effective_key(field: &str, key: &'static str, items: &[Value]) -> &'static str {
    if field == "ports"
        && key == "containerPort"
        && items
            .iter()
            .any(|p| p.get("containerPort").is_none() && p.get("port").is_some())
    {
        "port"
    } else {
        key
    }
}

fn canonical(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn item_key(key: &str, id: &Value) -> String {
    let mut map = Map::new();
    map.insert(key.to_string(), id.clone());
    format!("k:{}", canonical(&Value::Object(map)))
}

/// Equal as values: numbers by their value (`1` is `1.0`, as structured-merge-diff compares
/// them: a YAML manifest's integer against the float a typed client stored).
fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same_value(a, b),
        (None, None) => true,
        _ => false,
    }
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || (x.as_f64().is_some() && x.as_f64() == y.as_f64())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_value(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, value)| y.get(key).is_some_and(|other| same_value(value, other)))
        }
        _ => a == b,
    }
}

/// The value at `path` in `object`, if any.
pub fn value_at<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut node = object;
    for element in path {
        node = step(node, element)?;
    }
    Some(node)
}

fn step<'a>(node: &'a Value, element: &str) -> Option<&'a Value> {
    if let Some(field) = element.strip_prefix("f:") {
        return node.as_object()?.get(field);
    }
    let items = node.as_array()?;
    if let Some(key) = element.strip_prefix("k:") {
        let wanted: Map<String, Value> = serde_json::from_str(key).ok()?;
        return items
            .iter()
            .find(|item| wanted.iter().all(|(k, v)| item.get(k) == Some(v)));
    }
    if let Some(value) = element.strip_prefix("v:") {
        let wanted: Value = serde_json::from_str(value).ok()?;
        return items.iter().find(|item| **item == wanted);
    }
    let index: usize = element.strip_prefix("i:")?.parse().ok()?;
    items.get(index)
}

/// Remove the value at `path` from `object` (nothing if it is not there).
pub fn remove_at(object: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = object;
    for element in parents {
        let next = match element.strip_prefix("f:") {
            Some(field) => node.as_object_mut().and_then(|m| m.get_mut(field)),
            None => {
                let position = node
                    .as_array()
                    .and_then(|items| position_of(items, element));
                match (position, node.as_array_mut()) {
                    (Some(at), Some(items)) => items.get_mut(at),
                    _ => None,
                }
            }
        };
        match next {
            Some(next) => node = next,
            None => return,
        }
    }
    match last.strip_prefix("f:") {
        Some(field) => {
            if let Some(map) = node.as_object_mut() {
                map.remove(field);
            }
        }
        None => {
            let position = node.as_array().and_then(|items| position_of(items, last));
            if let (Some(at), Some(items)) = (position, node.as_array_mut()) {
                items.remove(at);
            }
        }
    }
}

fn position_of(items: &[Value], element: &str) -> Option<usize> {
    if let Some(key) = element.strip_prefix("k:") {
        let wanted: Map<String, Value> = serde_json::from_str(key).ok()?;
        return items
            .iter()
            .position(|item| wanted.iter().all(|(k, v)| item.get(k) == Some(v)));
    }
    if let Some(value) = element.strip_prefix("v:") {
        let wanted: Value = serde_json::from_str(value).ok()?;
        return items.iter().position(|item| *item == wanted);
    }
    element.strip_prefix("i:")?.parse().ok()
}

/// A path as kube-apiserver prints it in a conflict: `.spec.replicas`,
/// `.spec.containers[name="main"].image`, `.metadata.finalizers[="x"]`.
pub fn display(path: &[String]) -> String {
    let mut out = String::new();
    for element in path {
        if let Some(field) = element.strip_prefix("f:") {
            out.push('.');
            out.push_str(field);
        } else if let Some(key) = element.strip_prefix("k:") {
            let keys: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
            let shown: Vec<String> = keys
                .iter()
                .map(|(k, v)| format!("{k}={}", canonical(v)))
                .collect();
            out.push_str(&format!("[{}]", shown.join(",")));
        } else if let Some(value) = element.strip_prefix("v:") {
            out.push_str(&format!("[={value}]"));
        } else if let Some(index) = element.strip_prefix("i:") {
            out.push_str(&format!("[{index}]"));
        }
    }
    out
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub fields: FieldSet,
}

/// How a manager wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Apply => "Apply",
            Self::Update => "Update",
        }
    }
}

impl Entry {
    fn same_writer(&self, writer: &Writer<'_>, operation: Operation) -> bool {
        self.manager == writer.manager
            && self.operation == operation
            && self.subresource == writer.subresource
    }

    /// As kube-apiserver names a manager in a conflict.
    fn describe(&self) -> String {
        let mut shown = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            shown.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            shown.push_str(&format!(" using {}", self.api_version));
            if !self.time.is_empty() {
                shown.push_str(&format!(" at {}", self.time));
            }
        }
        shown
    }

    fn to_json(&self) -> Value {
        let mut entry = json!({
            "manager": self.manager,
            "operation": self.operation.as_str(),
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.fields.to_fields_v1(),
        });
        if !self.subresource.is_empty()
            && let Some(map) = entry.as_object_mut()
        {
            map.insert("subresource".into(), json!(self.subresource));
        }
        entry
    }
}

/// The entries stored in `object` (unreadable entries are dropped).
pub fn entries_of(object: &Value) -> Vec<Entry> {
    let Some(entries) = object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            let text = |key: &str| {
                entry
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let operation = match entry.get("operation").and_then(Value::as_str)? {
                "Apply" => Operation::Apply,
                _ => Operation::Update,
            };
            Some(Entry {
                manager: text("manager"),
                operation,
                api_version: text("apiVersion"),
                time: text("time"),
                subresource: text("subresource"),
                fields: FieldSet::from_fields_v1(entry.get("fieldsV1").unwrap_or(&Value::Null)),
            })
        })
        .collect()
}

/// Store `entries` in `object` (none: the field is removed).
pub fn set_entries(object: &mut Value, entries: &[Entry]) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let kept: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(Entry::to_json)
        .collect();
    if kept.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(kept));
    }
}

/// Who writes.
#[derive(Debug, Clone, Copy)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    /// "" for the main resource, `status` for the status subresource.
    pub subresource: &'a str,
    pub time: &'a str,
    pub scope: Scope,
    /// Lists follow the built-in types' merge strategies (false: every list is atomic).
    pub strategic: bool,
}

/// The entries after an update from `old` (None: a create) to `new` by `writer`: it owns what
/// it changed, no one keeps what is gone. `base` are the entries to start from.
pub fn record_update(
    writer: &Writer<'_>,
    base: Vec<Entry>,
    old: Option<&Value>,
    new: &Value,
) -> Vec<Entry> {
    let present = FieldSet::of_object(new, writer.scope, writer.strategic);
    if old.is_none() && base.is_empty() {
        // A create: the writer owns every field, no one else owns any.
        if present.is_empty() {
            return Vec::new();
        }
        return vec![Entry {
            manager: writer.manager.to_string(),
            operation: Operation::Update,
            api_version: writer.api_version.to_string(),
            time: writer.time.to_string(),
            subresource: writer.subresource.to_string(),
            fields: present,
        }];
    }
    // A value changed when it differs; a list item (with fields of its own) when it is new.
    let changed: Vec<Path> = present
        .paths()
        .into_iter()
        .filter(|path| {
            old.is_none_or(|old| {
                if present.is_leaf(path) {
                    !same(value_at(old, path), value_at(new, path))
                } else {
                    value_at(old, path).is_none()
                }
            })
        })
        .collect();
    let mut entries = prune(base, new);
    for entry in &mut entries {
        if !entry.same_writer(writer, Operation::Update) {
            for path in &changed {
                entry.fields.remove(path);
            }
        }
    }
    if !changed.is_empty() {
        let position = entries
            .iter()
            .position(|e| e.same_writer(writer, Operation::Update));
        let entry = match position {
            Some(at) => &mut entries[at],
            None => {
                entries.push(Entry {
                    manager: writer.manager.to_string(),
                    operation: Operation::Update,
                    api_version: writer.api_version.to_string(),
                    time: String::new(),
                    subresource: writer.subresource.to_string(),
                    fields: FieldSet::default(),
                });
                let last = entries.len() - 1;
                &mut entries[last]
            }
        };
        for path in &changed {
            entry.fields.insert(path);
        }
        entry.time = writer.time.to_string();
        entry.api_version = writer.api_version.to_string();
    }
    entries
}

/// Drop from every entry the paths `object` no longer has.
fn prune(mut entries: Vec<Entry>, object: &Value) -> Vec<Entry> {
    for entry in &mut entries {
        for path in entry.fields.paths() {
            if value_at(object, &path).is_none() {
                entry.fields.remove(&path);
            }
        }
    }
    entries
}

/// Apply `config` by `writer` over `live` (None: the object is being created), given
/// `merged`, the object the merge of the two gives. Returns the object to store (fields the
/// writer stopped applying removed) and its entries, or the 409 of the conflicts.
pub fn apply(
    writer: &Writer<'_>,
    force: bool,
    live: Option<&Value>,
    config: &Value,
    mut merged: Value,
) -> Result<(Value, Vec<Entry>), ApiError> {
    let applied = FieldSet::of_object(config, writer.scope, writer.strategic);
    let applied_paths = applied.paths();
    let mut entries = live.map(entries_of).unwrap_or_default();
    let mut conflicts: Vec<(usize, Path)> = Vec::new();
    if let Some(live) = live {
        for (index, entry) in entries.iter().enumerate() {
            if entry.manager == writer.manager && entry.subresource == writer.subresource {
                continue;
            }
            // Values conflict; a list item both want is no conflict (its fields may be).
            for path in applied_paths.iter().filter(|p| applied.is_leaf(p)) {
                if entry.fields.contains(path)
                    && !same(value_at(config, path), value_at(live, path))
                    && value_at(live, path).is_some()
                {
                    conflicts.push((index, path.clone()));
                }
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&entries, &conflicts));
    }
    for (index, path) in &conflicts {
        entries[*index].fields.remove(path);
    }
    // What the writer applied before and no longer applies leaves the object, unless another
    // manager owns it.
    let previous = entries
        .iter()
        .find(|e| e.same_writer(writer, Operation::Apply))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut dropped: Vec<Path> = previous
        .paths()
        .into_iter()
        .filter(|path| !applied.contains(path))
        .filter(|path| {
            !entries
                .iter()
                .any(|e| !e.same_writer(writer, Operation::Apply) && e.fields.contains(path))
        })
        .collect();
    // A path inside another one dropped goes with it (an item's fields with the item, whose
    // key they hold); a map or list emptied by a removal goes too unless someone owns it.
    dropped.sort_by_key(Vec::len);
    let mut outermost: Vec<Path> = Vec::new();
    for path in dropped {
        if !outermost.iter().any(|outer| path.starts_with(outer)) {
            outermost.push(path);
        }
    }
    let dropped = outermost;
    let owned = |path: &[String]| {
        applied.contains(path)
            || entries
                .iter()
                .any(|e| !e.same_writer(writer, Operation::Apply) && e.fields.contains(path))
    };
    for path in &dropped {
        remove_at(&mut merged, path);
        for depth in (2..path.len()).rev() {
            let parent = &path[..depth];
            let empty = value_at(&merged, parent).is_some_and(|v| {
                v.as_object().is_some_and(Map::is_empty) || v.as_array().is_some_and(Vec::is_empty)
            });
            if !empty || owned(parent) {
                break;
            }
            remove_at(&mut merged, parent);
        }
    }
    let unchanged = previous == applied && live == Some(&merged);
    let mut entries = prune(entries, &merged);
    match entries
        .iter_mut()
        .find(|e| e.same_writer(writer, Operation::Apply))
    {
        Some(entry) if unchanged => {
            entry.fields = applied;
        }
        Some(entry) => {
            entry.fields = applied;
            entry.time = writer.time.to_string();
            entry.api_version = writer.api_version.to_string();
        }
        None => entries.push(Entry {
            manager: writer.manager.to_string(),
            operation: Operation::Apply,
            api_version: writer.api_version.to_string(),
            time: writer.time.to_string(),
            subresource: writer.subresource.to_string(),
            fields: applied,
        }),
    }
    Ok((merged, entries))
}

/// kube-apiserver's 409 for apply conflicts: the message names each field and its manager, and
/// `details.causes` has one `FieldManagerConflict` per field.
fn conflict_error(entries: &[Entry], conflicts: &[(usize, Path)]) -> ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(index, path)| {
            json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {}", entries[*index].describe()),
                "field": display(path),
            })
        })
        .collect();
    let message = if let [(index, path)] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            entries[*index].describe(),
            display(path)
        )
    } else {
        let mut by_manager: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (index, path) in conflicts {
            by_manager
                .entry(entries[*index].describe())
                .or_default()
                .push(display(path));
        }
        let mut lines = Vec::new();
        for (manager, paths) in by_manager {
            lines.push(format!("conflicts with {manager}:"));
            lines.extend(paths.into_iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    ApiError::apply_conflict(message, json!({"causes": causes}))
}

/// The manager of a write: the `fieldManager` parameter, or the client's User-Agent up to its
/// first `/`, as kube-apiserver takes it (`kubectl/v1.33.0 (linux/amd64)` is `kubectl`).
pub fn manager_of(field_manager: Option<&str>, user_agent: &str) -> String {
    match field_manager {
        Some(manager) if !manager.is_empty() => manager.to_string(),
        _ => user_agent
            .split('/')
            .next()
            .unwrap_or_default()
            .chars()
            .take(128)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer<'a>(manager: &'a str) -> Writer<'a> {
        Writer {
            manager,
            api_version: "v1",
            subresource: "",
            time: "2026-11-26T16:00:00Z",
            scope: Scope::Whole,
            strategic: true,
        }
    }

    fn paths(set: &FieldSet) -> Vec<String> {
        set.paths().iter().map(|p| display(p)).collect()
    }

    #[test]
    fn an_object_becomes_the_fields_it_sets() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "uid": "u", "labels": {"app": "web"}, "finalizers": ["a/b"]},
            "spec": {"containers": [{"name": "main", "image": "nginx"}],
                     "tolerations": [{"key": "k"}]},
            "status": {"phase": "Running"}});
        let set = FieldSet::of_object(&pod, Scope::Main, true);
        // Leaves and marked list items; no status (a subresource), no server-owned metadata.
        assert_eq!(
            paths(&set),
            vec![
                ".metadata.finalizers[=\"a/b\"]",
                ".metadata.labels.app",
                ".spec.containers[name=\"main\"]",
                ".spec.containers[name=\"main\"].image",
                ".spec.containers[name=\"main\"].name",
                ".spec.tolerations",
            ]
        );
        let round = FieldSet::from_fields_v1(&set.to_fields_v1());
        assert_eq!(round, set);
        assert_eq!(
            set.to_fields_v1()["f:spec"]["f:containers"]["k:{\"name\":\"main\"}"]["."],
            json!({})
        );
    }

    #[test]
    fn an_update_takes_what_it_changed_from_the_others() {
        let old = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
        let created = record_update(&writer("create"), Vec::new(), None, &old);
        assert_eq!(paths(&created[0].fields), vec![".data.a", ".data.b"]);
        let new = json!({"metadata": {"name": "c"}, "data": {"a": "9", "b": "2", "c": "3"}});
        let updated = record_update(&writer("edit"), created, Some(&old), &new);
        assert_eq!(updated.len(), 2);
        assert_eq!(paths(&updated[0].fields), vec![".data.b"]);
        assert_eq!(paths(&updated[1].fields), vec![".data.a", ".data.c"]);
        assert_eq!(updated[1].operation, Operation::Update);
        // A field that leaves the object leaves every set.
        let gone = json!({"metadata": {"name": "c"}, "data": {"a": "9"}});
        let after = record_update(&writer("edit"), updated, Some(&new), &gone);
        set_entries(&mut gone.clone(), &after);
        assert!(after[0].fields.is_empty());
        assert_eq!(paths(&after[1].fields), vec![".data.a"]);
    }

    #[test]
    fn a_second_applier_conflicts_unless_forced_or_agreeing() {
        let config_a = json!({"metadata": {"name": "c"}, "data": {"x": "1", "y": "1"}});
        let (live, entries) =
            apply(&writer("a"), false, None, &config_a, config_a.clone()).unwrap();
        let mut live = live;
        set_entries(&mut live, &entries);

        // b applies the same value: shared, no conflict.
        let agree = json!({"metadata": {"name": "c"}, "data": {"x": "1"}});
        assert!(apply(&writer("b"), false, Some(&live), &agree, live.clone()).is_ok());

        // b applies another value: a 409 naming the field and the manager.
        let differ = json!({"metadata": {"name": "c"}, "data": {"x": "2"}});
        let mut merged = live.clone();
        merged["data"]["x"] = json!("2");
        let error = apply(&writer("b"), false, Some(&live), &differ, merged.clone()).unwrap_err();
        assert_eq!(error.code, 409);
        assert_eq!(
            error.message,
            "Apply failed with 1 conflict: conflict with \"a\": .data.x"
        );
        let causes = &error.details.as_ref().unwrap()["causes"];
        assert_eq!(causes[0]["field"], ".data.x");
        assert_eq!(causes[0]["reason"], "FieldManagerConflict");

        // Forced: b takes x; a keeps y.
        let (object, entries) = apply(&writer("b"), true, Some(&live), &differ, merged).unwrap();
        assert_eq!(object["data"]["x"], "2");
        let a = entries.iter().find(|e| e.manager == "a").unwrap();
        assert_eq!(paths(&a.fields), vec![".data.y"]);
        let b = entries.iter().find(|e| e.manager == "b").unwrap();
        assert_eq!(paths(&b.fields), vec![".data.x"]);
    }

    #[test]
    fn fields_an_applier_stops_applying_are_removed_unless_someone_else_owns_them() {
        let first = json!({"metadata": {"name": "c", "labels": {"l": "1"}}, "data": {"x": "1", "y": "1", "z": "1"}});
        let (mut live, entries) = apply(&writer("a"), false, None, &first, first.clone()).unwrap();
        set_entries(&mut live, &entries);
        // Someone else updates z: they own it now.
        let mut edited = live.clone();
        edited["data"]["z"] = json!("2");
        let entries = record_update(&writer("edit"), entries_of(&live), Some(&live), &edited);
        set_entries(&mut edited, &entries);

        let second = json!({"metadata": {"name": "c"}, "data": {"x": "1"}});
        let merged = edited.clone();
        let (object, entries) = apply(&writer("a"), false, Some(&edited), &second, merged).unwrap();
        assert_eq!(
            object["data"],
            json!({"x": "1", "z": "2"}),
            "y removed, z kept"
        );
        assert_eq!(
            object["metadata"].get("labels"),
            None,
            "emptied by the removal"
        );
        let a = entries.iter().find(|e| e.manager == "a").unwrap();
        assert_eq!(paths(&a.fields), vec![".data.x"]);
    }

    #[test]
    fn a_keyed_list_item_stopped_being_applied_is_removed() {
        let first = json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        let (mut live, entries) = apply(&writer("m"), false, None, &first, first.clone()).unwrap();
        set_entries(&mut live, &entries);
        let second = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "x"}]}});
        let (object, _) = apply(&writer("m"), false, Some(&live), &second, live.clone()).unwrap();
        assert_eq!(
            object["spec"]["containers"],
            json!([{"name": "a", "image": "x"}])
        );
    }

    #[test]
    fn two_appliers_of_one_list_item_conflict_only_on_its_values() {
        let a = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "main", "image": "x"}]}});
        let (mut live, entries) = apply(&writer("a"), false, None, &a, a.clone()).unwrap();
        set_entries(&mut live, &entries);
        // The server adds a field to the item: the item differs from what b applies, yet both
        // only want it there.
        live["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
        let b = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "main", "env": []}]}});
        let mut merged = live.clone();
        merged["spec"]["containers"][0]["env"] = json!([]);
        assert!(apply(&writer("b"), false, Some(&live), &b, merged).is_ok());
        let b_image = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "main", "image": "y"}]}});
        let error = apply(&writer("b"), false, Some(&live), &b_image, live.clone()).unwrap_err();
        assert!(
            error
                .message
                .ends_with(".spec.containers[name=\"main\"].image"),
            "{}",
            error.message
        );
    }

    /// A CRD's versions (named objects, replaced whole by a patch) are owned by name: the same
    /// version applied by a second manager with the same values is no conflict.
    #[test]
    fn named_items_of_a_replaced_list_are_owned_one_by_one() {
        let crd = |served: bool| {
            json!({"metadata": {"name": "w"}, "spec": {"versions": [
                {"name": "v1", "served": served, "storage": true}]}})
        };
        let mut live = crd(true);
        let entries = record_update(&writer("installer"), Vec::new(), None, &live);
        set_entries(&mut live, &entries);
        live["spec"]["versions"][0]["subresources"] = json!({});
        assert!(
            apply(
                &writer("helm"),
                false,
                Some(&live),
                &crd(true),
                live.clone()
            )
            .is_ok()
        );
        let error = apply(
            &writer("helm"),
            false,
            Some(&live),
            &crd(false),
            live.clone(),
        )
        .unwrap_err();
        assert!(
            error
                .message
                .ends_with(".spec.versions[name=\"v1\"].served"),
            "{}",
            error.message
        );
    }

    #[test]
    fn an_integer_is_the_same_value_as_its_float() {
        assert!(same(Some(&json!(0)), Some(&json!(0.0))));
        assert!(same(
            Some(&json!({"a": [1, 2.5]})),
            Some(&json!({"a": [1.0, 2.5]}))
        ));
        assert!(!same(Some(&json!(1)), Some(&json!(1.5))));
        assert!(!same(Some(&json!(1)), Some(&json!("1"))));
        assert!(!same(Some(&json!(1)), None));
    }

    #[test]
    fn conflicts_with_several_managers_are_listed_by_manager() {
        let mut live = json!({"metadata": {"name": "c"}, "data": {"x": "1", "y": "1"}});
        let entries = record_update(&writer("one"), Vec::new(), None, &live);
        set_entries(&mut live, &entries);
        let config = json!({"data": {"x": "2", "y": "2"}});
        let error = apply(&writer("b"), false, Some(&live), &config, config.clone()).unwrap_err();
        assert_eq!(
            error.message,
            "Apply failed with 2 conflicts: conflicts with \"one\" using v1 at 2026-11-26T16:00:00Z:\n- .data.x\n- .data.y"
        );
    }

    #[test]
    fn the_manager_is_the_parameter_or_the_user_agents_program() {
        assert_eq!(manager_of(Some("flux"), "kubectl/v1.33"), "flux");
        assert_eq!(
            manager_of(None, "kubectl/v1.33.0 (linux/amd64) kubernetes/abc"),
            "kubectl"
        );
        assert_eq!(manager_of(Some(""), "python3"), "python3");
    }
}
