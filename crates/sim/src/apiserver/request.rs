//! Parsing request paths and query strings into routes and parameters.

use std::collections::BTreeMap;

/// Where a resource request points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceTarget {
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource name.
    pub plural: String,
    /// Namespace from the path.
    pub namespace: Option<String>,
    /// Object name from the path.
    pub name: Option<String>,
    /// Subresource (`status`, `eviction`, `binding`, ...).
    pub subresource: Option<String>,
}

/// What a path asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/GROUP`.
    Group(String),
    /// `/api/v1` or `/apis/GROUP/VERSION`.
    Resources {
        /// Group.
        group: String,
        /// Version.
        version: String,
    },
    /// `/healthz`, `/livez`, `/readyz`.
    Health,
    /// `/openapi/v2`: the whole OpenAPI v2 document (protobuf).
    OpenApiV2,
    /// `/openapi/v3`: the index of per-group-version documents.
    OpenApiRoot,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/GROUP/VERSION`.
    OpenApiGroupVersion {
        /// Group.
        group: String,
        /// Version.
        version: String,
    },
    /// A resource collection, object or subresource.
    Resource(ResourceTarget),
    /// Anything else.
    Unknown,
}

/// Parse a request path.
pub fn parse_path(path: &str) -> Route {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let parts: Vec<&str> = segments.iter().map(String::as_str).collect();
    match parts.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiRoot,
        ["openapi", "v3", "api", version] => Route::OpenApiGroupVersion {
            group: String::new(),
            version: (*version).to_string(),
        },
        ["openapi", "v3", "apis", group, version] => Route::OpenApiGroupVersion {
            group: (*group).to_string(),
            version: (*version).to_string(),
        },
        ["api"] => Route::CoreVersions,
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group((*group).to_string()),
        ["api", version] => Route::Resources {
            group: String::new(),
            version: (*version).to_string(),
        },
        ["apis", group, version] => Route::Resources {
            group: (*group).to_string(),
            version: (*version).to_string(),
        },
        ["api", version, rest @ ..] => resource_route("", version, rest),
        ["apis", group, version, rest @ ..] => resource_route(group, version, rest),
        _ => Route::Unknown,
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Route {
    let target = |namespace: Option<&str>, plural: &str, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(ResourceTarget {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
            subresource: sub.map(str::to_string),
        })
    };
    let namespace_sub = |s: &str| matches!(s, "status" | "finalize");
    match rest {
        [plural] => target(None, plural, None, None),
        ["namespaces", name, sub] if group.is_empty() && namespace_sub(sub) => {
            target(None, "namespaces", Some(name), Some(sub))
        }
        ["namespaces", namespace, plural] => target(Some(namespace), plural, None, None),
        ["namespaces", namespace, plural, name] => {
            target(Some(namespace), plural, Some(name), None)
        }
        ["namespaces", namespace, plural, name, sub] => {
            target(Some(namespace), plural, Some(name), Some(sub))
        }
        [plural, name] => target(None, plural, Some(name), None),
        [plural, name, sub] => target(None, plural, Some(name), Some(sub)),
        _ => Route::Unknown,
    }
}

/// Decode `%XX` escapes (and `+` as space when `plus_is_space`), tolerating malformed input.
fn decode(text: &str, plus_is_space: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'%' if index + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[index + 1..index + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        index += 3;
                    }
                    None => {
                        out.push(b'%');
                        index += 1;
                    }
                }
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                index += 1;
            }
            byte => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Decode a path segment.
pub fn percent_decode(text: &str) -> String {
    decode(text, false)
}

/// Parse a query string into a sorted map (last value wins).
pub fn parse_query(query: Option<&str>) -> BTreeMap<String, String> {
    query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key, true), decode(value, true))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaced_object_with_subresource() {
        let route = parse_path("/api/v1/namespaces/default/pods/web-1/eviction");
        let Route::Resource(target) = route else {
            panic!("not a resource route")
        };
        assert_eq!(target.plural, "pods");
        assert_eq!(target.namespace.as_deref(), Some("default"));
        assert_eq!(target.name.as_deref(), Some("web-1"));
        assert_eq!(target.subresource.as_deref(), Some("eviction"));
    }

    #[test]
    fn namespace_objects_versus_namespaced_collections() {
        let Route::Resource(ns) = parse_path("/api/v1/namespaces/kube-system") else {
            panic!()
        };
        assert_eq!(
            (ns.plural.as_str(), ns.name.as_deref()),
            ("namespaces", Some("kube-system"))
        );
        let Route::Resource(status) = parse_path("/api/v1/namespaces/x/status") else {
            panic!()
        };
        assert_eq!(
            (status.plural.as_str(), status.subresource.as_deref()),
            ("namespaces", Some("status"))
        );
        let Route::Resource(pods) = parse_path("/api/v1/namespaces/x/pods") else {
            panic!()
        };
        assert_eq!(
            (pods.plural.as_str(), pods.namespace.as_deref()),
            ("pods", Some("x"))
        );
        let Route::Resource(crd) = parse_path("/apis/example.com/v1/widgets/w/status") else {
            panic!()
        };
        assert_eq!(
            (crd.group.as_str(), crd.subresource.as_deref()),
            ("example.com", Some("status"))
        );
        assert_eq!(parse_path("/apis/apps"), Route::Group("apps".into()));
        assert_eq!(parse_path("/nonsense/a/b"), Route::Unknown);
    }

    #[test]
    fn query_values_are_decoded() {
        let query = parse_query(Some("labelSelector=app+in+%28a%2Cb%29&watch=1&%ZZ=%"));
        assert_eq!(query["labelSelector"], "app in (a,b)");
        assert_eq!(query["watch"], "1");
        assert_eq!(query["%ZZ"], "%");
    }
}
