//! The resource registry: which group/version/resources exist, their kinds, scope, verbs,
//! subresources, and how they are printed. Built-ins are fixed; CRDs add entries.

use std::collections::BTreeMap;

use serde_json::Value;

/// Identifies stored objects of one resource regardless of version: (group, plural).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceKey {
    /// API group ("" for core).
    pub group: String,
    /// Plural resource name, e.g. `pods`.
    pub plural: String,
}

impl ResourceKey {
    /// A key for `group`/`plural`.
    pub fn new(group: &str, plural: &str) -> Self {
        Self {
            group: group.to_string(),
            plural: plural.to_string(),
        }
    }
}

/// One `additionalPrinterColumns` entry of a CRD version.
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type (string, integer, date, ...).
    pub column_type: String,
    /// JSONPath evaluated against the object.
    pub json_path: String,
    /// 0 = always shown, >0 = only with `-o wide`.
    pub priority: i64,
    /// Description.
    pub description: String,
}

/// One served version of a resource.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionInfo {
    /// Version name, e.g. `v1`.
    pub name: String,
    /// The CRD's `openAPIV3Schema` (pruning, defaults, validation, OpenAPI), shared: a
    /// resource's description is cloned per request.
    pub schema: Option<std::sync::Arc<Value>>,
    /// CRD printer columns (empty for built-ins).
    pub columns: Vec<PrinterColumn>,
    /// Whether this version has a `status` subresource.
    pub status_subresource: bool,
}

/// Everything the server knows about one resource.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceInfo {
    /// API group ("" for core).
    pub group: String,
    /// Served versions, preferred first.
    pub versions: Vec<VersionInfo>,
    /// Plural name.
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// Categories (e.g. `all`).
    pub categories: Vec<String>,
    /// Subresources other than `status` (e.g. `eviction`, `binding`).
    pub extra_subresources: Vec<String>,
    /// Whether strategic merge patch is accepted (built-in types only).
    pub strategic_merge: bool,
    /// Whether this came from a CRD.
    pub custom: bool,
}

impl ResourceInfo {
    /// The key under which objects are stored.
    pub fn key(&self) -> ResourceKey {
        ResourceKey::new(&self.group, &self.plural)
    }

    /// The served version named `version`, if any.
    pub fn version(&self, version: &str) -> Option<&VersionInfo> {
        self.versions.iter().find(|v| v.name == version)
    }

    /// `group/version` or `version` for the core group.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    /// A review (`SelfSubjectAccessReview`): only created, answered at once, never stored.
    pub fn create_only(&self) -> bool {
        self.group == "authorization.k8s.io" && self.plural == "selfsubjectaccessreviews"
    }

    /// Whether any served version has a status subresource.
    pub fn has_status(&self) -> bool {
        self.versions.iter().any(|v| v.status_subresource)
    }

    /// Field selectors this resource supports beyond metadata.name/namespace.
    pub fn selectable_fields(&self) -> &'static [&'static str] {
        match (self.group.as_str(), self.plural.as_str()) {
            ("", "pods") => &[
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            ("", "nodes") => &["spec.unschedulable"],
            ("", "namespaces") => &["status.phase"],
            ("", "events") => &[
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ],
            _ => &[],
        }
    }
}

struct Builtin {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    status: bool,
    extra: &'static [&'static str],
    categories: &'static [&'static str],
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        status: true,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        status: true,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        status: true,
        extra: &["eviction", "binding"],
        categories: &["all"],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        status: false,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "apps",
        version: "v1",
        plural: "deployments",
        singular: "deployment",
        kind: "Deployment",
        namespaced: true,
        short_names: &["deploy"],
        status: true,
        extra: &["scale"],
        categories: &["all"],
    },
    Builtin {
        group: "apps",
        version: "v1",
        plural: "replicasets",
        singular: "replicaset",
        kind: "ReplicaSet",
        namespaced: true,
        short_names: &["rs"],
        status: true,
        extra: &["scale"],
        categories: &["all"],
    },
    Builtin {
        group: "apps",
        version: "v1",
        plural: "statefulsets",
        singular: "statefulset",
        kind: "StatefulSet",
        namespaced: true,
        short_names: &["sts"],
        status: true,
        extra: &["scale"],
        categories: &["all"],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        kind: "PersistentVolumeClaim",
        namespaced: true,
        short_names: &["pvc"],
        status: true,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        kind: "PersistentVolume",
        namespaced: false,
        short_names: &["pv"],
        status: true,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "apps",
        version: "v1",
        plural: "daemonsets",
        singular: "daemonset",
        kind: "DaemonSet",
        namespaced: true,
        short_names: &["ds"],
        status: true,
        extra: &[],
        categories: &["all"],
    },
    Builtin {
        group: "policy",
        version: "v1",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        kind: "PodDisruptionBudget",
        namespaced: true,
        short_names: &["pdb"],
        status: true,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        short_names: &[],
        status: false,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        status: false,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        namespaced: true,
        short_names: &["sa"],
        status: false,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        short_names: &["cm"],
        status: false,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        short_names: &[],
        status: false,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        short_names: &["svc"],
        status: true,
        extra: &[],
        categories: &["all"],
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "clusterroles",
        singular: "clusterrole",
        kind: "ClusterRole",
        namespaced: false,
        short_names: &[],
        status: false,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "clusterrolebindings",
        singular: "clusterrolebinding",
        kind: "ClusterRoleBinding",
        namespaced: false,
        short_names: &[],
        status: false,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "roles",
        singular: "role",
        kind: "Role",
        namespaced: true,
        short_names: &[],
        status: false,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "rolebindings",
        singular: "rolebinding",
        kind: "RoleBinding",
        namespaced: true,
        short_names: &[],
        status: false,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "storage.k8s.io",
        version: "v1",
        plural: "volumeattachments",
        singular: "volumeattachment",
        kind: "VolumeAttachment",
        namespaced: false,
        short_names: &[],
        status: true,
        extra: &[],
        categories: &[],
    },
    // Create-only and never stored: `kubectl auth can-i` (see `access_review`).
    Builtin {
        group: "authorization.k8s.io",
        version: "v1",
        plural: "selfsubjectaccessreviews",
        singular: "selfsubjectaccessreview",
        kind: "SelfSubjectAccessReview",
        namespaced: false,
        short_names: &[],
        status: false,
        extra: &[],
        categories: &[],
    },
    Builtin {
        group: "apiextensions.k8s.io",
        version: "v1",
        plural: "customresourcedefinitions",
        singular: "customresourcedefinition",
        kind: "CustomResourceDefinition",
        namespaced: false,
        short_names: &["crd", "crds"],
        status: true,
        extra: &[],
        categories: &["api-extensions"],
    },
];

/// All resources the server serves, keyed by (group, plural).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    resources: BTreeMap<ResourceKey, ResourceInfo>,
}

impl Registry {
    /// The built-in resources.
    pub fn builtin() -> Self {
        let mut registry = Self::default();
        for b in BUILTINS {
            registry.insert(ResourceInfo {
                group: b.group.to_string(),
                versions: vec![VersionInfo {
                    name: b.version.to_string(),
                    schema: None,
                    columns: Vec::new(),
                    status_subresource: b.status,
                }],
                plural: b.plural.to_string(),
                singular: b.singular.to_string(),
                kind: b.kind.to_string(),
                namespaced: b.namespaced,
                short_names: b.short_names.iter().map(|s| (*s).to_string()).collect(),
                categories: b.categories.iter().map(|s| (*s).to_string()).collect(),
                extra_subresources: b.extra.iter().map(|s| (*s).to_string()).collect(),
                strategic_merge: true,
                custom: false,
            });
        }
        registry
    }

    /// Add or replace a resource.
    pub fn insert(&mut self, info: ResourceInfo) {
        self.resources.insert(info.key(), info);
    }

    /// Remove a resource.
    pub fn remove(&mut self, key: &ResourceKey) -> Option<ResourceInfo> {
        self.resources.remove(key)
    }

    /// The resource `plural` in `group`, if served at `version`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceInfo> {
        self.resources
            .get(&ResourceKey::new(group, plural))
            .filter(|info| info.version(version).is_some())
    }

    /// A resource by key.
    pub fn get(&self, key: &ResourceKey) -> Option<&ResourceInfo> {
        self.resources.get(key)
    }

    /// All resources, sorted by (group, plural).
    pub fn all(&self) -> impl Iterator<Item = &ResourceInfo> {
        self.resources.values()
    }

    /// Is `group/version` served?
    pub fn serves_group_version(&self, group: &str, version: &str) -> bool {
        self.all()
            .any(|info| info.group == group && info.version(version).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_include_pods_with_subresources() {
        let registry = Registry::builtin();
        let pods = registry.lookup("", "v1", "pods").unwrap();
        assert!(pods.namespaced);
        assert!(pods.has_status());
        assert!(pods.extra_subresources.contains(&"eviction".to_string()));
        assert!(registry.lookup("", "v2", "pods").is_none());
        assert!(registry.serves_group_version("policy", "v1"));
    }
}
