//! The synchronous heart of the API server: routes one request against the store and the
//! registry and produces a JSON response or a watch plan. Everything runs under one lock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::access_review;
use super::discovery;
use super::error::ApiError;
use super::managed_fields;
use super::openapi;
use super::pdb_index::PdbIndex;
use super::request::{ResourceTarget, Route, parse_path};
use super::resources::{Registry, ResourceInfo, ResourceKey};
use super::schema::FieldValidation;
use super::selectors::{FieldSelector, LabelSelector};
use super::store::{ObjectName, Store};
use super::table;
use super::watch::{WatchFilter, WatchOutput, WatchPlan};
use crate::clock::SharedClock;

/// Longest watch a client may ask for (one week).
const MAX_WATCH_SECONDS: u64 = 7 * 24 * 3600;

/// What happens to a pod deleted with a grace period while bound to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodTermination {
    /// Keep it (with deletionTimestamp) until a kubelet deletes it with grace period 0.
    #[default]
    AwaitKubelet,
    /// Remove it at once, as if a kubelet confirmed termination immediately.
    Immediate,
}

/// API server settings.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    /// Reported by `/version`, e.g. `v1.29.15`.
    pub kubernetes_version: String,
    /// How many events the watch log keeps before older resourceVersions expire (410).
    pub event_log_capacity: usize,
    /// Source of all timestamps.
    pub clock: SharedClock,
    /// Graceful pod deletion behaviour.
    pub pod_termination: PodTermination,
    /// How often watches with `allowWatchBookmarks` get a BOOKMARK.
    pub bookmark_interval: Duration,
    /// Watch duration when the client sets no `timeoutSeconds`.
    pub default_watch_timeout: Duration,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// How long a request takes before it is answered, on the cluster's time: reads (GET, list)
    /// and writes (an etcd commit each). Watches are not delayed. Zero turns it off.
    pub latency: RequestLatency,
}

/// The API server's latency per request: a managed control plane answers reads in a few
/// milliseconds and writes in about ten (Kubernetes' SLO is p99 under 1 s for single-object
/// calls; EKS's typical figures are far below it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLatency {
    pub read: Duration,
    pub write: Duration,
}

impl RequestLatency {
    /// A managed control plane's: reads 2 ms, writes 8 ms.
    pub const MANAGED: Self = Self {
        read: Duration::from_millis(2),
        write: Duration::from_millis(8),
    };
    /// No latency.
    pub const NONE: Self = Self {
        read: Duration::ZERO,
        write: Duration::ZERO,
    };
}

impl ApiServerConfig {
    /// Defaults with the given clock.
    pub fn with_clock(clock: SharedClock) -> Self {
        Self {
            kubernetes_version: "v1.29.15".to_string(),
            event_log_capacity: 10_000,
            clock,
            pod_termination: PodTermination::default(),
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
            max_body_bytes: 3 * 1024 * 1024,
            // Off for the API server alone (its unit tests send thousands of requests on the
            // wall clock); the embedded cluster turns the managed figures on.
            latency: RequestLatency::NONE,
        }
    }
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        Self::with_clock(Arc::new(crate::clock::SystemClock))
    }
}

/// One request as the core sees it.
#[derive(Debug, Clone)]
pub struct CoreRequest {
    /// HTTP method.
    pub method: Method,
    /// Path without query.
    pub path: String,
    /// Decoded query parameters.
    pub query: BTreeMap<String, String>,
    /// Content-Type header ("" if missing).
    pub content_type: String,
    /// Accept header ("" if missing).
    pub accept: String,
    /// Request body.
    pub body: Bytes,
    /// User-Agent header ("" if missing): the field manager of a write without `fieldManager`.
    pub user_agent: String,
}

/// The core's answer.
#[derive(Debug)]
pub enum CoreResponse {
    /// A JSON document with a status code.
    Json(u16, Value),
    /// An encoded body with its media type: a JSON list written straight to bytes, or the
    /// protobuf OpenAPI v2 document.
    Bytes(u16, &'static str, Vec<u8>),
    /// Start streaming a watch.
    Watch(Box<WatchPlan>),
}

impl CoreResponse {
    fn error(error: &ApiError) -> Self {
        Self::Json(error.code, error.to_status())
    }
}

/// The API server state: objects, resources and settings.
#[derive(Debug)]
pub struct ApiCore {
    pub(super) store: Store,
    pub(super) registry: Registry,
    pub(super) config: ApiServerConfig,
    pub(super) counter: u64,
    pub(super) removed_uids: Vec<(String, bool)>,
    /// Every PDB's selected pods, kept up to date on each pod and PDB write.
    pub(super) pdb_index: PdbIndex,
    /// The PDBs (namespace, name) whose status must be recomputed: written, or one of their
    /// pods changed.
    pub(super) dirty_pdbs: BTreeSet<(String, String)>,
    pub(super) crds_changed: bool,
    pub(super) dry_run: bool,
    /// The `fieldValidation` of the request being handled.
    pub(super) field_validation: FieldValidation,
    /// Warnings for the response to the request being handled.
    pub(super) warnings: Vec<String>,
    /// The field manager of the request being handled (None outside a request: the server's
    /// own writes are not tracked).
    pub(super) field_manager: Option<String>,
    /// Set while a server-side apply stores its object: its ownership is already computed.
    pub(super) applying: bool,
}

/// `metadata` of an object (empty map when missing).
pub fn metadata(object: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    object
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

/// Mutable `metadata`, created if missing. `None` only if `object` is not a JSON object.
pub fn metadata_mut(object: &mut Value) -> Option<&mut Map<String, Value>> {
    let map = object.as_object_mut()?;
    if !map.get("metadata").is_some_and(Value::is_object) {
        map.insert("metadata".into(), json!({}));
    }
    map.get_mut("metadata").and_then(Value::as_object_mut)
}

/// A string field of `metadata`.
pub fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    metadata(object).get(field).and_then(Value::as_str)
}

fn hex_encode(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(text: &str) -> Option<String> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect();
    String::from_utf8(bytes?).ok()
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl ApiCore {
    /// A server with the built-in resources and the `default`, `kube-system`, `kube-public`
    /// and `kube-node-lease` namespaces.
    pub fn new(config: ApiServerConfig) -> Self {
        let mut core = Self {
            store: Store::new(config.event_log_capacity),
            registry: Registry::builtin(),
            config,
            counter: 0,
            removed_uids: Vec::new(),
            pdb_index: PdbIndex::default(),
            dirty_pdbs: BTreeSet::new(),
            crds_changed: false,
            dry_run: false,
            field_validation: FieldValidation::default(),
            warnings: Vec::new(),
            field_manager: None,
            applying: false,
        };
        for namespace in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let object =
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
            if let Some(info) = core.registry.lookup("", "v1", "namespaces").cloned() {
                let _ = core.create_object(&info, "v1", None, object);
            }
        }
        core
    }

    /// The store (read-only).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The registry (read-only).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The configuration.
    pub fn config(&self) -> &ApiServerConfig {
        &self.config
    }

    pub(super) fn now(&self) -> Timestamp {
        self.config.clock.now()
    }

    /// Now as an RFC 3339 string with second precision (like Kubernetes' metav1.Time).
    pub(super) fn now_string(&self) -> String {
        Timestamp::from_second(self.now().as_second())
            .unwrap_or(Timestamp::UNIX_EPOCH)
            .to_string()
    }

    pub(super) fn next_random(&mut self) -> u64 {
        self.counter += 1;
        splitmix(self.counter)
    }

    pub(super) fn new_uid(&mut self) -> String {
        let a = self.next_random();
        let b = self.next_random();
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        )
    }

    /// Handle one request.
    pub fn handle(&mut self, request: &CoreRequest) -> CoreResponse {
        self.dry_run = request.query.get("dryRun").is_some_and(|d| d == "All");
        self.warnings.clear();
        self.field_manager = Some(managed_fields::manager_of(
            request.query.get("fieldManager").map(String::as_str),
            &request.user_agent,
        ));
        let response =
            match FieldValidation::parse(request.query.get("fieldValidation").map(String::as_str))
                .and_then(|validation| {
                    self.field_validation = validation;
                    self.route(request)
                }) {
                Ok(response) => response,
                Err(error) => CoreResponse::error(&error),
            };
        self.dry_run = false;
        self.field_validation = FieldValidation::default();
        self.field_manager = None;
        self.applying = false;
        self.settle();
        response
    }

    /// The warnings of the last request handled (`Warning` headers of its response).
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    fn route(&mut self, request: &CoreRequest) -> Result<CoreResponse, ApiError> {
        let route = parse_path(&request.path);
        let read_only = |method: &Method| -> Result<(), ApiError> {
            if method == Method::GET || method == Method::HEAD {
                Ok(())
            } else {
                Err(ApiError::method_not_allowed(format!(
                    "{method} is not supported on {}",
                    request.path
                )))
            }
        };
        match route {
            Route::Version => {
                read_only(&request.method)?;
                Ok(CoreResponse::Json(
                    200,
                    discovery::version_info(&self.config.kubernetes_version),
                ))
            }
            Route::Health => Ok(CoreResponse::Json(200, json!("ok"))),
            Route::OpenApiV2 => {
                read_only(&request.method)?;
                Ok(CoreResponse::Bytes(
                    200,
                    openapi::V2_PROTOBUF,
                    openapi::v2_protobuf(&self.registry, &self.config.kubernetes_version),
                ))
            }
            Route::OpenApiRoot => {
                read_only(&request.method)?;
                Ok(CoreResponse::Json(200, openapi::v3_root(&self.registry)))
            }
            Route::OpenApiGroupVersion { group, version } => {
                read_only(&request.method)?;
                openapi::v3_group_version(
                    &self.registry,
                    &group,
                    &version,
                    &self.config.kubernetes_version,
                )
                .map(|doc| CoreResponse::Json(200, doc))
                .ok_or_else(|| ApiError::no_route(&request.path))
            }
            Route::CoreVersions => {
                read_only(&request.method)?;
                Ok(CoreResponse::Json(200, discovery::core_versions()))
            }
            Route::Groups => {
                read_only(&request.method)?;
                Ok(CoreResponse::Json(
                    200,
                    discovery::group_list(&self.registry),
                ))
            }
            Route::Group(group) => {
                read_only(&request.method)?;
                discovery::group(&self.registry, &group)
                    .map(|g| CoreResponse::Json(200, g))
                    .ok_or_else(|| ApiError::no_route(&request.path))
            }
            Route::Resources { group, version } => {
                read_only(&request.method)?;
                if (group.is_empty() && version == "v1")
                    || (!group.is_empty() && self.registry.serves_group_version(&group, &version))
                {
                    Ok(CoreResponse::Json(
                        200,
                        discovery::resource_list(&self.registry, &group, &version),
                    ))
                } else {
                    Err(ApiError::no_route(&request.path))
                }
            }
            Route::Resource(target) => self.resource_request(request, &target),
            Route::Unknown => Err(ApiError::no_route(&request.path)),
        }
    }

    fn resource_request(
        &mut self,
        request: &CoreRequest,
        target: &ResourceTarget,
    ) -> Result<CoreResponse, ApiError> {
        let info = self
            .registry
            .lookup(&target.group, &target.version, &target.plural)
            .cloned()
            .ok_or_else(|| ApiError::no_route(&request.path))?;
        if !info.namespaced && target.namespace.is_some() {
            return Err(ApiError::no_route(&request.path));
        }
        let version = target.version.as_str();
        let namespace = target.namespace.as_deref();
        if info.create_only() {
            return match (&request.method, target.name.as_deref()) {
                (m, None) if m == Method::POST => {
                    let review = parse_body(request)?;
                    access_review::answer(&info, version, review)
                        .map(|answer| CoreResponse::Json(201, answer))
                }
                (m, _) => Err(ApiError::method_not_allowed(format!(
                    "{m} is not supported on {}: reviews are only created",
                    request.path
                ))),
            };
        }
        match (
            &request.method,
            target.name.as_deref(),
            target.subresource.as_deref(),
        ) {
            (m, None, None) if m == Method::GET => {
                let watching = matches!(
                    request.query.get("watch").map(String::as_str),
                    Some("true" | "1")
                );
                if watching {
                    self.watch_plan(&info, version, namespace, request)
                        .map(|p| CoreResponse::Watch(Box::new(p)))
                } else {
                    self.list(&info, version, namespace, request)
                }
            }
            (m, None, None) if m == Method::POST => {
                if info.namespaced && namespace.is_none() {
                    return Err(ApiError::method_not_allowed(format!(
                        "create {} requires a namespace in the path",
                        info.plural
                    )));
                }
                let object = parse_body(request)?;
                let created = self.create_object(&info, version, namespace, object)?;
                Ok(CoreResponse::Json(
                    201,
                    self.render_object(&info, version, &created),
                ))
            }
            (m, None, None) if m == Method::DELETE => {
                self.delete_collection(&info, version, namespace, request)
            }
            (_, Some(name), Some("scale"))
                if info.extra_subresources.iter().any(|s| s == "scale") =>
            {
                self.scale(&info, version, namespace, name, request)
                    .map(|scale| CoreResponse::Json(200, scale))
            }
            (m, Some(name), sub) if m == Method::GET => {
                if let Some(sub) = sub
                    && !(sub == "status" && info.has_status())
                {
                    return Err(ApiError::no_route(&request.path));
                }
                let object = self.get_object(&info, namespace, name)?;
                Ok(CoreResponse::Json(
                    200,
                    self.render_one(&info, version, &object, request),
                ))
            }
            (m, Some(name), sub) if m == Method::PUT => {
                let status_only = self.status_subresource(&info, sub, &request.path)?;
                let object = parse_body(request)?;
                let updated =
                    self.update_object(&info, version, namespace, name, object, status_only)?;
                Ok(CoreResponse::Json(
                    200,
                    self.render_object(&info, version, &updated),
                ))
            }
            (m, Some(name), sub) if m == Method::PATCH => {
                let status_only = self.status_subresource(&info, sub, &request.path)?;
                let (code, patched) =
                    self.patch_object(&info, version, namespace, name, request, status_only)?;
                Ok(CoreResponse::Json(
                    code,
                    self.render_object(&info, version, &patched),
                ))
            }
            (m, Some(name), None) if m == Method::DELETE => {
                let options = if request.body.iter().all(u8::is_ascii_whitespace) {
                    json!({})
                } else {
                    parse_body(request)?
                };
                let options = merge_delete_query(options, &request.query);
                if options
                    .get("dryRun")
                    .and_then(Value::as_array)
                    .is_some_and(|modes| modes.iter().any(|m| m == "All"))
                {
                    self.dry_run = true;
                }
                let (code, body) = self.delete_object(&info, version, namespace, name, &options)?;
                Ok(CoreResponse::Json(code, body))
            }
            (m, Some(name), Some("eviction"))
                if m == Method::POST && info.key() == ResourceKey::new("", "pods") =>
            {
                let body = parse_body(request)?;
                self.evict(&info, namespace.unwrap_or_default(), name, &body)
                    .map(|v| CoreResponse::Json(201, v))
            }
            (m, Some(name), Some("binding"))
                if m == Method::POST && info.key() == ResourceKey::new("", "pods") =>
            {
                let body = parse_body(request)?;
                self.bind(&info, namespace.unwrap_or_default(), name, &body)
                    .map(|v| CoreResponse::Json(201, v))
            }
            (m, None, Some(_)) => Err(ApiError::method_not_allowed(format!(
                "{m} is not supported on {}",
                request.path
            ))),
            (m, _, _) => Err(ApiError::method_not_allowed(format!(
                "{m} is not supported on {}",
                request.path
            ))),
        }
    }

    fn status_subresource(
        &self,
        info: &ResourceInfo,
        sub: Option<&str>,
        path: &str,
    ) -> Result<bool, ApiError> {
        match sub {
            None => Ok(false),
            Some("status") if info.has_status() => Ok(true),
            Some(_) => Err(ApiError::no_route(path)),
        }
    }

    pub(super) fn get_object(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<Value>, ApiError> {
        let namespace = if info.namespaced {
            namespace.unwrap_or_default()
        } else {
            ""
        };
        self.store
            .get(&info.key(), namespace, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, name))
    }

    /// An object as served at `version` (custom resources are stored once for all versions).
    pub(super) fn render_object(
        &self,
        info: &ResourceInfo,
        version: &str,
        object: &Value,
    ) -> Value {
        let mut object = object.clone();
        if info.custom
            && let Some(map) = object.as_object_mut()
        {
            map.insert("apiVersion".into(), json!(info.api_version(version)));
        }
        object
    }

    fn render_one(
        &self,
        info: &ResourceInfo,
        version: &str,
        object: &Value,
        request: &CoreRequest,
    ) -> Value {
        if wants_table(&request.accept) {
            table::render(
                info,
                version,
                std::slice::from_ref(object),
                &self.store.resource_version().to_string(),
                None,
                self.now(),
            )
        } else if request.accept.contains("as=PartialObjectMetadata") {
            table::partial_metadata(object)
        } else {
            self.render_object(info, version, object)
        }
    }

    pub(super) fn selectors(
        info: &ResourceInfo,
        query: &BTreeMap<String, String>,
    ) -> Result<(LabelSelector, FieldSelector), ApiError> {
        let labels = LabelSelector::parse(
            query
                .get("labelSelector")
                .map(String::as_str)
                .unwrap_or_default(),
        )?;
        let fields = FieldSelector::parse(
            query
                .get("fieldSelector")
                .map(String::as_str)
                .unwrap_or_default(),
            info.selectable_fields(),
        )?;
        Ok((labels, fields))
    }

    /// Objects matching namespace and selectors, sorted by (namespace, name).
    pub(super) fn matching(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> Vec<(ObjectName, Arc<Value>)> {
        self.store
            .list(&info.key(), namespace)
            .filter(|(_, object)| labels.matches_object(object) && fields.matches(object))
            .map(|(key, object)| (key.clone(), Arc::clone(object)))
            .collect()
    }

    fn list(
        &self,
        info: &ResourceInfo,
        version: &str,
        namespace: Option<&str>,
        request: &CoreRequest,
    ) -> Result<CoreResponse, ApiError> {
        let (labels, fields) = Self::selectors(info, &request.query)?;
        let limit = match request.query.get("limit").map(String::as_str) {
            None | Some("") | Some("0") => None,
            Some(text) => Some(text.parse::<usize>().map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid limit {text:?}: must be a non-negative integer"
                ))
            })?),
        };
        let after: Option<ObjectName> = match request.query.get("continue").map(String::as_str) {
            None | Some("") => None,
            Some(token) => {
                let decoded = hex_decode(token).ok_or_else(|| {
                    ApiError::bad_request("continue key is not valid: malformed token")
                })?;
                let (ns, name) = decoded.split_once('\u{0}').ok_or_else(|| {
                    ApiError::bad_request("continue key is not valid: malformed token")
                })?;
                Some((ns.to_string(), name.to_string()))
            }
        };
        let mut items: Vec<(ObjectName, Arc<Value>)> = self
            .matching(info, namespace, &labels, &fields)
            .into_iter()
            .filter(|(key, _)| after.as_ref().is_none_or(|after| key > after))
            .collect();
        let mut continue_token = None;
        let mut remaining = None;
        if let Some(limit) = limit
            && items.len() > limit
        {
            remaining = Some(items.len() - limit);
            items.truncate(limit);
            continue_token = items
                .last()
                .map(|((ns, name), _)| hex_encode(&format!("{ns}\u{0}{name}")));
        }
        let resource_version = self.store.resource_version().to_string();
        let mut list_metadata = json!({"resourceVersion": resource_version});
        if let Some(map) = list_metadata.as_object_mut() {
            if let Some(token) = &continue_token {
                map.insert("continue".into(), json!(token));
            }
            if let Some(remaining) = remaining {
                map.insert("remainingItemCount".into(), json!(remaining));
            }
        }
        if !wants_table(&request.accept) && !request.accept.contains("as=PartialObjectMetadataList")
        {
            return Ok(CoreResponse::Bytes(
                200,
                "application/json",
                self.encode_list(info, version, &list_metadata, &items),
            ));
        }
        let objects: Vec<Value> = items
            .iter()
            .map(|(_, o)| self.render_object(info, version, o))
            .collect();
        if wants_table(&request.accept) {
            return Ok(CoreResponse::Json(
                200,
                table::render(
                    info,
                    version,
                    &objects,
                    &resource_version,
                    continue_token.as_deref(),
                    self.now(),
                ),
            ));
        }
        let objects: Vec<Value> = objects.iter().map(table::partial_metadata).collect();
        Ok(CoreResponse::Json(
            200,
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": list_metadata, "items": objects}),
        ))
    }

    /// A list response written straight to bytes: each stored object is serialized once,
    /// without first being copied into a list document (at 100,000 pods that copy was most of
    /// a list's cost).
    fn encode_list(
        &self,
        info: &ResourceInfo,
        version: &str,
        list_metadata: &Value,
        items: &[(ObjectName, Arc<Value>)],
    ) -> Vec<u8> {
        let api_version = info.api_version(version);
        let mut out = Vec::with_capacity(256 + items.len() * 1024);
        let header = json!({"kind": format!("{}List", info.kind), "apiVersion": api_version, "metadata": list_metadata});
        // The header object without its closing brace, then the items.
        let mut head = serde_json::to_vec(&header).unwrap_or_else(|_| b"{}".to_vec());
        head.pop();
        out.extend_from_slice(&head);
        out.extend_from_slice(b",\"items\":[");
        for (i, (_, object)) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let served_as_stored = !info.custom
                || object.get("apiVersion").and_then(Value::as_str) == Some(api_version.as_str());
            let written = if served_as_stored {
                serde_json::to_writer(&mut out, &**object)
            } else {
                serde_json::to_writer(&mut out, &self.render_object(info, version, object))
            };
            if written.is_err() {
                out.extend_from_slice(b"{}");
            }
        }
        out.extend_from_slice(b"]}");
        out
    }

    fn watch_plan(
        &self,
        info: &ResourceInfo,
        version: &str,
        namespace: Option<&str>,
        request: &CoreRequest,
    ) -> Result<WatchPlan, ApiError> {
        let query = &request.query;
        let (labels, fields) = Self::selectors(info, query)?;
        let output = if wants_table(&request.accept) {
            WatchOutput::Table
        } else if request.accept.contains("as=PartialObjectMetadata") {
            WatchOutput::Metadata
        } else {
            WatchOutput::Object
        };
        let bookmarks = matches!(
            query.get("allowWatchBookmarks").map(String::as_str),
            Some("true" | "1")
        );
        let send_initial = matches!(
            query.get("sendInitialEvents").map(String::as_str),
            Some("true" | "1")
        );
        let timeout = match query.get("timeoutSeconds").map(|t| t.parse::<u64>()) {
            Some(Ok(seconds)) if seconds > 0 => Duration::from_secs(seconds.min(MAX_WATCH_SECONDS)),
            Some(Err(_)) => {
                return Err(ApiError::bad_request(
                    "timeoutSeconds must be a non-negative integer",
                ));
            }
            _ => self.config.default_watch_timeout,
        };
        let filter = WatchFilter {
            resource: info.key(),
            info: info.clone(),
            version: version.to_string(),
            namespace: namespace.map(str::to_string),
            labels,
            fields,
        };
        let requested = query
            .get("resourceVersion")
            .map(String::as_str)
            .unwrap_or_default();
        let current = self.store.resource_version();
        let mut plan = WatchPlan {
            output,
            clock: Arc::clone(&self.config.clock),
            filter,
            initial: Vec::new(),
            start_after: current,
            expired: None,
            bookmarks,
            initial_end_bookmark: false,
            timeout,
            bookmark_interval: self.config.bookmark_interval,
        };
        if requested.is_empty() || requested == "0" || send_initial {
            plan.initial = self
                .matching(info, namespace, &plan.filter.labels, &plan.filter.fields)
                .into_iter()
                .map(|(_, object)| object)
                .collect();
            plan.initial_end_bookmark = send_initial && bookmarks;
            return Ok(plan);
        }
        let Ok(from) = requested.parse::<u64>() else {
            return Err(ApiError::bad_request(format!(
                "invalid resourceVersion {requested:?}"
            )));
        };
        if from < self.store.oldest_watchable() {
            plan.expired = Some(ApiError::expired(format!(
                "too old resource version: {from} ({})",
                self.store.oldest_watchable()
            )));
        } else {
            plan.start_after = from.min(current);
        }
        Ok(plan)
    }
}

/// Does the client ask for a meta.k8s.io Table?
fn wants_table(accept: &str) -> bool {
    accept.contains("as=Table")
}

/// Parse a request body into an object, by its Content-Type as kube-apiserver reads them: JSON
/// (also when no type is given), YAML, or Kubernetes protobuf; anything else is 415.
pub(super) fn parse_body(request: &CoreRequest) -> Result<Value, ApiError> {
    let value: Value = match super::write::media_type(&request.content_type).as_str() {
        "" | "application/json" => serde_json::from_slice(&request.body).map_err(|e| {
            ApiError::bad_request(format!("the request body is not valid JSON: {e}"))
        })?,
        "application/yaml" => serde_yaml::from_slice(&request.body).map_err(|e| {
            ApiError::bad_request(format!("the request body is not valid YAML: {e}"))
        })?,
        super::kube_protobuf::MEDIA_TYPE => super::kube_protobuf::decode(&request.body)?,
        other => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format ({other}) - accepted media \
                 types include: application/json, application/yaml, {}",
                super::kube_protobuf::MEDIA_TYPE
            )));
        }
    };
    if value.is_object() {
        Ok(value)
    } else {
        Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ))
    }
}

/// Fold `gracePeriodSeconds` / `propagationPolicy` query parameters into DeleteOptions.
fn merge_delete_query(mut options: Value, query: &BTreeMap<String, String>) -> Value {
    if let Some(map) = options.as_object_mut() {
        if let Some(grace) = query
            .get("gracePeriodSeconds")
            .and_then(|g| g.parse::<i64>().ok())
        {
            map.insert("gracePeriodSeconds".into(), json!(grace));
        }
        if let Some(policy) = query.get("propagationPolicy") {
            map.insert("propagationPolicy".into(), json!(policy));
        }
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let token = hex_encode("default\u{0}web-1");
        assert_eq!(hex_decode(&token).as_deref(), Some("default\u{0}web-1"));
        assert_eq!(hex_decode("zz"), None);
        assert_eq!(hex_decode("abc"), None);
    }

    #[test]
    fn table_accept_header_detection() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
    }
}
