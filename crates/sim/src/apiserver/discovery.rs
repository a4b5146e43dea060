//! Discovery documents: /version, /api, /apis, /api/v1 and /apis/GROUP/VERSION.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::resources::{Registry, ResourceInfo};

/// The `/version` document for a Kubernetes version such as `v1.29.15`.
pub fn version_info(git_version: &str) -> Value {
    let trimmed = git_version.trim_start_matches('v');
    let mut parts = trimmed.split('.');
    let major = parts.next().unwrap_or("1");
    let minor = parts.next().unwrap_or("0");
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.22.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`: the core group's versions.
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

/// Versions served per non-core group, preferred first.
pub(super) fn group_versions(registry: &Registry) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for info in registry.all().filter(|info| !info.group.is_empty()) {
        let versions = groups.entry(info.group.clone()).or_default();
        for version in &info.versions {
            if !versions.contains(&version.name) {
                versions.push(version.name.clone());
            }
        }
    }
    groups
}

fn group_document(group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

/// `/apis`: the APIGroupList.
pub fn group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> = group_versions(registry)
        .iter()
        .map(|(group, versions)| group_document(group, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/GROUP`: one APIGroup, if served.
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    group_versions(registry).get(name).map(|versions| {
        let mut document = group_document(name, versions);
        if let Some(map) = document.as_object_mut() {
            map.insert("kind".into(), json!("APIGroup"));
            map.insert("apiVersion".into(), json!("v1"));
        }
        document
    })
}

fn verbs(info: &ResourceInfo) -> Vec<&'static str> {
    if info.create_only() {
        return vec!["create"];
    }
    vec![
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ]
    .into_iter()
    .filter(|verb| !(info.plural == "namespaces" && *verb == "deletecollection"))
    .collect()
}

/// `/api/v1` or `/apis/GROUP/VERSION`: the APIResourceList.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for info in registry
        .all()
        .filter(|info| info.group == group && info.version(version).is_some())
    {
        let mut main = json!({
            "name": info.plural,
            "singularName": info.singular,
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": verbs(info),
        });
        if let Some(map) = main.as_object_mut() {
            if !info.short_names.is_empty() {
                map.insert("shortNames".into(), json!(info.short_names));
            }
            if !info.categories.is_empty() {
                map.insert("categories".into(), json!(info.categories));
            }
        }
        resources.push(main);
        if info.version(version).is_some_and(|v| v.status_subresource) {
            resources.push(json!({
                "name": format!("{}/status", info.plural),
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        for sub in &info.extra_subresources {
            let (kind, group_name, sub_version, verbs) = match sub.as_str() {
                "eviction" => ("Eviction", "policy", "v1", json!(["create"])),
                "binding" => ("Binding", "", "v1", json!(["create"])),
                "scale" => (
                    "Scale",
                    "autoscaling",
                    "v1",
                    json!(["get", "patch", "update"]),
                ),
                _ => (info.kind.as_str(), "", "", json!(["create"])),
            };
            let mut entry = json!({
                "name": format!("{}/{}", info.plural, sub),
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": kind,
                "verbs": verbs,
            });
            if !group_name.is_empty()
                && let Some(map) = entry.as_object_mut()
            {
                map.insert("group".into(), json!(group_name));
                map.insert("version".into(), json!(sub_version));
            }
            resources.push(entry);
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    })
}

pub(super) fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_resource_list_has_pod_subresources() {
        let list = resource_list(&Registry::builtin(), "", "v1");
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        for expected in [
            "pods",
            "pods/status",
            "pods/eviction",
            "pods/binding",
            "nodes",
            "namespaces",
        ] {
            assert!(names.contains(&expected), "missing {expected} in {names:?}");
        }
        let eviction = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "pods/eviction")
            .unwrap();
        assert_eq!(eviction["group"], "policy");
    }

    #[test]
    fn group_list_names_every_builtin_group() {
        let list = group_list(&Registry::builtin());
        let groups: Vec<&str> = list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            groups,
            vec![
                "apiextensions.k8s.io",
                "apps",
                "authorization.k8s.io",
                "coordination.k8s.io",
                "events.k8s.io",
                "policy",
                "rbac.authorization.k8s.io",
                "storage.k8s.io"
            ]
        );
        assert_eq!(version_info("v1.29.15")["minor"], "29");
    }
}
