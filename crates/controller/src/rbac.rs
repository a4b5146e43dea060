//! The Kubernetes API permissions the controllers need (the table deploy/'s ClusterRole and Role
//! are written from), and the pure reading of an API request into the RBAC attributes
//! (verb, group, resource[/subresource], namespace) it is authorised by.

/// Where a permission applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Every namespace and cluster-scoped objects (the ClusterRole).
    Cluster,
    /// Only the controller's own namespace, SYSTEM_NAMESPACE (the Role).
    SystemNamespace,
}

/// One verb of a permission and the code path that uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerbUse {
    pub verb: &'static str,
    pub used_by: &'static str,
}

/// What the controllers may do to one resource (or subresource, as `resource/subresource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    /// The API group ("" for the core group).
    pub group: &'static str,
    pub resource: &'static str,
    pub scope: Scope,
    pub verbs: &'static [VerbUse],
}

const fn verb(verb: &'static str, used_by: &'static str) -> VerbUse {
    VerbUse { verb, used_by }
}

const WATCHED: &str = "state::watch (the watch cache: initial list, then watch)";
const MODIFY_READ: &str = "api::modify / api::modify_status (read before write)";

/// Every permission the controllers need, with the code path using each verb. deploy/'s
/// ClusterRole (Scope::Cluster) and Role (Scope::SystemNamespace) grant exactly these.
pub const PERMISSIONS: &[Permission] = &[
    Permission {
        group: "",
        resource: "nodes",
        scope: Scope::Cluster,
        verbs: &[
            verb("get", MODIFY_READ),
            verb("list", WATCHED),
            verb("watch", WATCHED),
            verb(
                "patch",
                "lifecycle (labels, taints), disruption (disrupted taint), termination (taint, finalizer)",
            ),
            verb(
                "delete",
                "termination Step::DeleteNode (the node object after its instance)",
            ),
        ],
    },
    Permission {
        group: "",
        resource: "pods",
        scope: Scope::Cluster,
        verbs: &[
            verb("list", WATCHED),
            verb("watch", WATCHED),
            verb(
                "delete",
                "termination Step::ForceDelete (pods past their grace period or the node's terminationGracePeriod)",
            ),
        ],
    },
    Permission {
        group: "",
        resource: "pods/eviction",
        scope: Scope::Cluster,
        verbs: &[verb("create", "termination Step::Evict (the Eviction API)")],
    },
    Permission {
        group: "apps",
        resource: "daemonsets",
        scope: Scope::Cluster,
        verbs: &[verb("list", WATCHED), verb("watch", WATCHED)],
    },
    Permission {
        group: "policy",
        resource: "poddisruptionbudgets",
        scope: Scope::Cluster,
        verbs: &[verb("list", WATCHED), verb("watch", WATCHED)],
    },
    Permission {
        group: "",
        resource: "persistentvolumeclaims",
        scope: Scope::Cluster,
        verbs: &[verb("list", WATCHED), verb("watch", WATCHED)],
    },
    Permission {
        group: "storage.k8s.io",
        resource: "volumeattachments",
        scope: Scope::Cluster,
        verbs: &[verb("list", WATCHED), verb("watch", WATCHED)],
    },
    Permission {
        group: "karpenter.sh",
        resource: "nodepools",
        scope: Scope::Cluster,
        verbs: &[
            verb("get", MODIFY_READ),
            verb("list", WATCHED),
            verb("watch", WATCHED),
            verb("patch", "hash (karpenter.sh/nodepool-hash annotations)"),
        ],
    },
    Permission {
        group: "karpenter.sh",
        resource: "nodepools/status",
        scope: Scope::Cluster,
        verbs: &[verb(
            "patch",
            "nodeclass (NodePool status: resources in use, node count, readiness of the class)",
        )],
    },
    Permission {
        group: "karpenter.sh",
        resource: "nodeclaims",
        scope: Scope::Cluster,
        verbs: &[
            verb("get", MODIFY_READ),
            verb("list", WATCHED),
            verb("watch", WATCHED),
            verb(
                "create",
                "provisioner (new capacity), disruption (replacements)",
            ),
            verb(
                "patch",
                "hash (annotations), lifecycle (finalizer, provider id), termination (finalizer)",
            ),
            verb(
                "delete",
                "disruption (drifted claims), lifecycle (launch failure, registration timeout, garbage collection)",
            ),
        ],
    },
    Permission {
        group: "karpenter.sh",
        resource: "nodeclaims/status",
        scope: Scope::Cluster,
        verbs: &[verb(
            "patch",
            "lifecycle (Launched/Registered/Initialized), drift (Drifted), disruption, termination",
        )],
    },
    Permission {
        group: "karpenter.k8s.aws",
        resource: "ec2nodeclasses",
        scope: Scope::Cluster,
        verbs: &[
            verb("get", MODIFY_READ),
            verb("list", WATCHED),
            verb("watch", WATCHED),
            verb(
                "patch",
                "nodeclass (finalizer), hash (ec2nodeclass-hash annotations)",
            ),
        ],
    },
    Permission {
        group: "karpenter.k8s.aws",
        resource: "ec2nodeclasses/status",
        scope: Scope::Cluster,
        verbs: &[verb(
            "patch",
            "nodeclass (resolved AMIs, subnets, security groups, instance profile, Ready)",
        )],
    },
    Permission {
        group: "events.k8s.io",
        resource: "events",
        scope: Scope::Cluster,
        verbs: &[verb(
            "create",
            "events::Events::publish (in the regarding object's namespace, `default` for cluster-scoped objects)",
        )],
    },
    Permission {
        group: "coordination.k8s.io",
        resource: "leases",
        scope: Scope::SystemNamespace,
        verbs: &[
            verb("get", "leader::run_election (a standby reads the lease)"),
            verb("create", "leader::run_election (first leader)"),
            verb(
                "patch",
                "leader::run_election (acquire, renew, release; resourceVersion precondition)",
            ),
        ],
    },
];

/// The RBAC attributes of one resource request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApiCall {
    pub verb: String,
    /// The API group ("" for the core group).
    pub group: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    /// The namespace of a namespaced request (None for cluster-scoped and all-namespace ones).
    pub namespace: Option<String>,
}

impl std::fmt::Display for ApiCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)?;
        match &self.namespace {
            Some(namespace) => write!(f, " in namespace {namespace}"),
            None => write!(f, " (cluster-wide)"),
        }
    }
}

impl ApiCall {
    /// Reads a request as the API server's authorizer does. None for non-resource requests
    /// (discovery, /version) and paths that are not Kubernetes API paths.
    pub fn from_request(method: &str, path: &str, query: &str) -> Option<Self> {
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, rest) = match segments.as_slice() {
            ["api", _version, rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", namespace, rest @ ..] if !rest.is_empty() => {
                (Some((*namespace).to_string()), rest)
            }
            _ => (None, rest),
        };
        let (resource, name, subresource) = match rest {
            [resource] => (*resource, None, None),
            [resource, name] => (*resource, Some(*name), None),
            [resource, name, subresource] => (*resource, Some(*name), Some(*subresource)),
            _ => return None,
        };
        let watching = query
            .split('&')
            .any(|pair| matches!(pair.split_once('='), Some(("watch", "true" | "1"))));
        let verb = match (method.to_ascii_uppercase().as_str(), name.is_some()) {
            ("GET" | "HEAD", true) => "get",
            ("GET" | "HEAD", false) if watching => "watch",
            ("GET" | "HEAD", false) => "list",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", true) => "delete",
            ("DELETE", false) => "deletecollection",
            _ => return None,
        };
        let resource = match subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_string(),
        };
        Some(Self {
            verb: verb.to_string(),
            group: group.to_string(),
            resource,
            namespace,
        })
    }
}

/// Whether [`PERMISSIONS`] allow `call`, with the Role bound in `system_namespace`.
pub fn allows(permissions: &[Permission], call: &ApiCall, system_namespace: &str) -> bool {
    permissions.iter().any(|p| {
        p.group == call.group
            && p.resource == call.resource
            && p.verbs.iter().any(|v| v.verb == call.verb)
            && match p.scope {
                Scope::Cluster => true,
                Scope::SystemNamespace => call.namespace.as_deref() == Some(system_namespace),
            }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(verb: &str, group: &str, resource: &str, namespace: Option<&str>) -> ApiCall {
        ApiCall {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespace: namespace.map(Into::into),
        }
    }

    #[test]
    fn requests_read_as_rbac_attributes() {
        let cases = [
            ("GET", "/api/v1/nodes", "", call("list", "", "nodes", None)),
            (
                "GET",
                "/api/v1/pods",
                "watch=true&resourceVersion=5",
                call("watch", "", "pods", None),
            ),
            (
                "GET",
                "/api/v1/nodes/n1",
                "",
                call("get", "", "nodes", None),
            ),
            (
                "POST",
                "/api/v1/namespaces/ns/pods/p/eviction",
                "",
                call("create", "", "pods/eviction", Some("ns")),
            ),
            (
                "PUT",
                "/apis/karpenter.sh/v1/nodeclaims/c/status",
                "",
                call("update", "karpenter.sh", "nodeclaims/status", None),
            ),
            (
                "DELETE",
                "/apis/karpenter.sh/v1/nodeclaims/c",
                "",
                call("delete", "karpenter.sh", "nodeclaims", None),
            ),
            (
                "DELETE",
                "/api/v1/namespaces/ns/pods",
                "",
                call("deletecollection", "", "pods", Some("ns")),
            ),
            (
                "PATCH",
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
                "",
                call(
                    "patch",
                    "coordination.k8s.io",
                    "leases",
                    Some("kube-system"),
                ),
            ),
            (
                "GET",
                "/api/v1/namespaces/kube-system",
                "",
                call("get", "", "namespaces", None),
            ),
        ];
        for (method, path, query, expected) in cases {
            assert_eq!(
                ApiCall::from_request(method, path, query),
                Some(expected),
                "{method} {path}?{query}"
            );
        }
        for path in [
            "/api",
            "/apis",
            "/apis/karpenter.sh/v1",
            "/version",
            "/api/v1",
        ] {
            assert_eq!(ApiCall::from_request("GET", path, ""), None, "{path}");
        }
    }

    #[test]
    fn the_table_allows_what_it_lists_and_nothing_else() {
        let lease = |ns: &str| call("patch", "coordination.k8s.io", "leases", Some(ns));
        assert!(allows(PERMISSIONS, &lease("kube-system"), "kube-system"));
        assert!(!allows(PERMISSIONS, &lease("default"), "kube-system"));
        assert!(allows(
            PERMISSIONS,
            &call("create", "", "pods/eviction", Some("app")),
            "kube-system"
        ));
        assert!(allows(
            PERMISSIONS,
            &call("patch", "", "nodes", None),
            "kube-system"
        ));
        // Writes are patches: no whole-object update of a node.
        assert!(!allows(
            PERMISSIONS,
            &call("update", "", "nodes", None),
            "kube-system"
        ));
        assert!(!allows(
            PERMISSIONS,
            &call("list", "", "secrets", None),
            "kube-system"
        ));
    }

    #[test]
    fn every_verb_names_its_code_path_once() {
        for p in PERMISSIONS {
            let mut verbs: Vec<&str> = p.verbs.iter().map(|v| v.verb).collect();
            verbs.sort_unstable();
            verbs.dedup();
            assert_eq!(verbs.len(), p.verbs.len(), "{}/{}", p.group, p.resource);
            assert!(p.verbs.iter().all(|v| !v.used_by.is_empty()));
        }
    }
}
