//! `meta.k8s.io/v1` Table rendering (what `kubectl get` asks for): per-kind columns like a
//! real cluster prints, CRD printer columns for custom resources, kubectl-style ages.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::jsonpath;
use super::resources::{PrinterColumn, ResourceInfo};

/// kubectl's human-readable duration (5s, 2m5s, 3m, 4h, 3d, ...).
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        let years = hours / 24 / 365;
        return if days == 0 {
            format!("{years}y")
        } else {
            format!("{years}y{days}d")
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of a timestamp string relative to `now` ("<unknown>" if unparsable).
pub fn age(timestamp: Option<&str>, now: Timestamp) -> String {
    match timestamp.and_then(|t| t.parse::<Timestamp>().ok()) {
        Some(then) => human_duration(now.as_second() - then.as_second()),
        None => "<unknown>".to_string(),
    }
}

struct Column {
    name: &'static str,
    column_type: &'static str,
    priority: i64,
}

const fn col(name: &'static str, column_type: &'static str, priority: i64) -> Column {
    Column {
        name,
        column_type,
        priority,
    }
}

fn builtin_columns(group: &str, plural: &str) -> Option<Vec<Column>> {
    let columns = match (group, plural) {
        ("", "pods") => vec![
            col("Name", "string", 0),
            col("Ready", "string", 0),
            col("Status", "string", 0),
            col("Restarts", "string", 0),
            col("Age", "string", 0),
            col("IP", "string", 1),
            col("Node", "string", 1),
            col("Nominated Node", "string", 1),
            col("Readiness Gates", "string", 1),
        ],
        ("", "nodes") => vec![
            col("Name", "string", 0),
            col("Status", "string", 0),
            col("Roles", "string", 0),
            col("Age", "string", 0),
            col("Version", "string", 0),
            col("Internal-IP", "string", 1),
            col("External-IP", "string", 1),
            col("OS-Image", "string", 1),
            col("Kernel-Version", "string", 1),
            col("Container-Runtime", "string", 1),
        ],
        ("", "namespaces") => vec![
            col("Name", "string", 0),
            col("Status", "string", 0),
            col("Age", "string", 0),
        ],
        ("", "events") => vec![
            col("Last Seen", "string", 0),
            col("Type", "string", 0),
            col("Reason", "string", 0),
            col("Object", "string", 0),
            col("Message", "string", 0),
        ],
        ("apps", "deployments") => vec![
            col("Name", "string", 0),
            col("Ready", "string", 0),
            col("Up-to-date", "string", 0),
            col("Available", "string", 0),
            col("Age", "string", 0),
            col("Containers", "string", 1),
            col("Images", "string", 1),
            col("Selector", "string", 1),
        ],
        ("apps", "replicasets") => vec![
            col("Name", "string", 0),
            col("Desired", "integer", 0),
            col("Current", "integer", 0),
            col("Ready", "integer", 0),
            col("Age", "string", 0),
            col("Containers", "string", 1),
            col("Images", "string", 1),
            col("Selector", "string", 1),
        ],
        ("apps", "daemonsets") => vec![
            col("Name", "string", 0),
            col("Desired", "integer", 0),
            col("Current", "integer", 0),
            col("Ready", "integer", 0),
            col("Up-to-date", "integer", 0),
            col("Available", "integer", 0),
            col("Node Selector", "string", 0),
            col("Age", "string", 0),
        ],
        ("policy", "poddisruptionbudgets") => vec![
            col("Name", "string", 0),
            col("Min Available", "string", 0),
            col("Max Unavailable", "string", 0),
            col("Allowed Disruptions", "integer", 0),
            col("Age", "string", 0),
        ],
        ("coordination.k8s.io", "leases") => vec![
            col("Name", "string", 0),
            col("Holder", "string", 0),
            col("Age", "string", 0),
        ],
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![col("Name", "string", 0), col("Created At", "date", 0)]
        }
        _ => return None,
    };
    Some(columns)
}

fn column_definition(name: &str, column_type: &str, priority: i64, description: &str) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": column_type, "format": format, "description": description, "priority": priority})
}

fn str_at<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.pointer(pointer).and_then(Value::as_str)
}

fn int_at(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn or_none(value: Option<&str>) -> String {
    match value {
        Some(v) if !v.is_empty() => v.to_string(),
        _ => "<none>".to_string(),
    }
}

fn int_or_string(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".to_string(),
    }
}

fn pod_status(pod: &Value) -> String {
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        return "Terminating".to_string();
    }
    let mut reason = str_at(pod, "/status/reason")
        .or_else(|| str_at(pod, "/status/phase"))
        .unwrap_or("Pending")
        .to_string();
    for status in pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(waiting) = str_at(status, "/state/waiting/reason") {
            reason = waiting.to_string();
        } else if let Some(terminated) = str_at(status, "/state/terminated/reason") {
            reason = terminated.to_string();
        }
    }
    reason
}

fn pod_cells(pod: &Value) -> Vec<Value> {
    let total = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let statuses = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array);
    let ready = statuses.map_or(0, |s| {
        s.iter()
            .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
            .count()
    });
    let restarts: i64 = statuses.map_or(0, |s| {
        s.iter()
            .map(|c| int_at(c, "/restartCount"))
            .fold(0i64, i64::saturating_add)
    });
    let gates = pod
        .pointer("/spec/readinessGates")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    vec![
        json!(format!("{ready}/{total}")),
        json!(pod_status(pod)),
        json!(restarts.to_string()),
        Value::Null,
        json!(or_none(str_at(pod, "/status/podIP"))),
        json!(or_none(str_at(pod, "/spec/nodeName"))),
        json!(or_none(str_at(pod, "/status/nominatedNodeName"))),
        json!(if gates == 0 {
            "<none>".to_string()
        } else {
            format!("0/{gates}")
        }),
    ]
}

fn condition_status<'a>(object: &'a Value, condition: &str) -> Option<&'a str> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(condition))
        .and_then(|c| c.get("status").and_then(Value::as_str))
}

fn node_cells(node: &Value) -> Vec<Value> {
    let mut status = match condition_status(node, "Ready") {
        Some("True") => "Ready".to_string(),
        Some("False") => "NotReady".to_string(),
        _ => "Unknown".to_string(),
    };
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = node
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(key, value)| {
                    if let Some(role) = key.strip_prefix("node-role.kubernetes.io/") {
                        Some(role.to_string())
                    } else if key == "kubernetes.io/role" {
                        value.as_str().map(str::to_string)
                    } else {
                        None
                    }
                })
                .filter(|role| !role.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    let address = |kind: &str| {
        node.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter()
                    .find(|a| a.get("type").and_then(Value::as_str) == Some(kind))
            })
            .and_then(|a| a.get("address").and_then(Value::as_str))
            .map(str::to_string)
    };
    vec![
        json!(status),
        json!(if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }),
        Value::Null,
        json!(str_at(node, "/status/nodeInfo/kubeletVersion").unwrap_or_default()),
        json!(or_none(address("InternalIP").as_deref())),
        json!(or_none(address("ExternalIP").as_deref())),
        json!(or_none(str_at(node, "/status/nodeInfo/osImage"))),
        json!(or_none(str_at(node, "/status/nodeInfo/kernelVersion"))),
        json!(or_none(str_at(
            node,
            "/status/nodeInfo/containerRuntimeVersion"
        ))),
    ]
}

fn containers_and_images(object: &Value) -> (String, String) {
    let containers = object
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = containers
        .iter()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    let images: Vec<&str> = containers
        .iter()
        .filter_map(|c| c.get("image").and_then(Value::as_str))
        .collect();
    (names.join(","), images.join(","))
}

fn selector_text(object: &Value) -> String {
    let mut parts: Vec<String> = object
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    parts.sort();
    if parts.is_empty() {
        "<none>".to_string()
    } else {
        parts.join(",")
    }
}

/// Cells for a built-in kind, with `Value::Null` standing in for the AGE column.
fn builtin_cells(group: &str, plural: &str, object: &Value) -> Vec<Value> {
    match (group, plural) {
        ("", "pods") => pod_cells(object),
        ("", "nodes") => node_cells(object),
        ("", "namespaces") => vec![
            json!(str_at(object, "/status/phase").unwrap_or("Active")),
            Value::Null,
        ],
        ("apps", "deployments") => {
            let (containers, images) = containers_and_images(object);
            vec![
                json!(format!(
                    "{}/{}",
                    int_at(object, "/status/readyReplicas"),
                    object
                        .pointer("/spec/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(1)
                )),
                json!(int_at(object, "/status/updatedReplicas")),
                json!(int_at(object, "/status/availableReplicas")),
                Value::Null,
                json!(containers),
                json!(images),
                json!(selector_text(object)),
            ]
        }
        ("apps", "replicasets") => {
            let (containers, images) = containers_and_images(object);
            vec![
                json!(
                    object
                        .pointer("/spec/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(1)
                ),
                json!(int_at(object, "/status/replicas")),
                json!(int_at(object, "/status/readyReplicas")),
                Value::Null,
                json!(containers),
                json!(images),
                json!(selector_text(object)),
            ]
        }
        ("apps", "daemonsets") => {
            let mut selectors: Vec<String> = object
                .pointer("/spec/template/spec/nodeSelector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect()
                })
                .unwrap_or_default();
            selectors.sort();
            vec![
                json!(int_at(object, "/status/desiredNumberScheduled")),
                json!(int_at(object, "/status/currentNumberScheduled")),
                json!(int_at(object, "/status/numberReady")),
                json!(int_at(object, "/status/updatedNumberScheduled")),
                json!(int_at(object, "/status/numberAvailable")),
                json!(if selectors.is_empty() {
                    "<none>".to_string()
                } else {
                    selectors.join(",")
                }),
                Value::Null,
            ]
        }
        ("policy", "poddisruptionbudgets") => vec![
            json!(int_or_string(object.pointer("/spec/minAvailable"))),
            json!(int_or_string(object.pointer("/spec/maxUnavailable"))),
            json!(int_at(object, "/status/disruptionsAllowed")),
            Value::Null,
        ],
        ("coordination.k8s.io", "leases") => {
            vec![
                json!(str_at(object, "/spec/holderIdentity").unwrap_or_default()),
                Value::Null,
            ]
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![json!(
                str_at(object, "/metadata/creationTimestamp").unwrap_or_default()
            )]
        }
        _ => vec![Value::Null],
    }
}

fn event_cells(event: &Value, now: Timestamp) -> Vec<Value> {
    let last = str_at(event, "/lastTimestamp")
        .or_else(|| str_at(event, "/eventTime"))
        .or_else(|| str_at(event, "/metadata/creationTimestamp"));
    let kind = str_at(event, "/involvedObject/kind")
        .unwrap_or_default()
        .to_lowercase();
    let name = str_at(event, "/involvedObject/name").unwrap_or_default();
    vec![
        json!(age(last, now)),
        json!(str_at(event, "/type").unwrap_or_default()),
        json!(str_at(event, "/reason").unwrap_or_default()),
        json!(format!("{kind}/{name}")),
        json!(str_at(event, "/message").unwrap_or_default()),
    ]
}

/// PartialObjectMetadata for a table row's `object`.
pub fn partial_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

fn custom_cell(object: &Value, column: &PrinterColumn, now: Timestamp) -> Value {
    let value = jsonpath::evaluate_one(object, &column.json_path);
    match (column.column_type.as_str(), &value) {
        ("date", Value::String(s)) => json!(age(Some(s), now)),
        _ => value,
    }
}

/// Render objects of `info` (served at `version`) as a Table.
pub fn render(
    info: &ResourceInfo,
    version: &str,
    objects: &[Value],
    resource_version: &str,
    continue_token: Option<&str>,
    now: Timestamp,
) -> Value {
    let name_of = |o: &Value| json!(str_at(o, "/metadata/name").unwrap_or_default());
    let created = |o: &Value| json!(age(str_at(o, "/metadata/creationTimestamp"), now));
    let (definitions, rows): (Vec<Value>, Vec<Value>) = if info.custom {
        let columns = info
            .version(version)
            .map(|v| v.columns.clone())
            .unwrap_or_default();
        let has_age = columns.iter().any(|c| c.name.eq_ignore_ascii_case("age"));
        let mut definitions = vec![column_definition(
            "Name",
            "string",
            0,
            "Name must be unique within a namespace.",
        )];
        definitions.extend(
            columns
                .iter()
                .map(|c| column_definition(&c.name, &c.column_type, c.priority, &c.description)),
        );
        if !has_age {
            definitions.push(column_definition("Age", "date", 0, "CreationTimestamp"));
        }
        let rows = objects
            .iter()
            .map(|o| {
                let mut cells = vec![name_of(o)];
                cells.extend(columns.iter().map(|c| custom_cell(o, c, now)));
                if !has_age {
                    cells.push(created(o));
                }
                json!({"cells": cells, "object": partial_metadata(o)})
            })
            .collect();
        (definitions, rows)
    } else if let Some(columns) = builtin_columns(&info.group, &info.plural) {
        let definitions = columns
            .iter()
            .map(|c| column_definition(c.name, c.column_type, c.priority, ""))
            .collect();
        let is_events = info.plural == "events" && info.group.is_empty();
        let rows = objects
            .iter()
            .map(|o| {
                let cells: Vec<Value> = if is_events {
                    event_cells(o, now)
                } else {
                    let mut cells = vec![name_of(o)];
                    cells.extend(
                        builtin_cells(&info.group, &info.plural, o)
                            .into_iter()
                            .map(|c| if c.is_null() { created(o) } else { c }),
                    );
                    cells
                };
                json!({"cells": cells, "object": partial_metadata(o)})
            })
            .collect();
        (definitions, rows)
    } else {
        let definitions = vec![
            column_definition("Name", "string", 0, ""),
            column_definition("Age", "string", 0, ""),
        ];
        let rows = objects
            .iter()
            .map(|o| json!({"cells": [name_of(o), created(o)], "object": partial_metadata(o)}))
            .collect();
        (definitions, rows)
    };
    let mut metadata = json!({"resourceVersion": resource_version});
    if let (Some(token), Some(map)) = (continue_token, metadata.as_object_mut()) {
        map.insert("continue".into(), json!(token));
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::resources::Registry;

    #[test]
    fn human_durations_match_kubectl() {
        let cases = [
            (5, "5s"),
            (119, "119s"),
            (125, "2m5s"),
            (180, "3m"),
            (600, "10m"),
            (4 * 3600, "4h"),
            (4 * 3600 + 120, "4h2m"),
            (10 * 3600, "10h"),
            (3 * 86400, "3d"),
            (3 * 86400 + 7200, "3d2h"),
            (30 * 86400, "30d"),
            (800 * 86400, "2y70d"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(human_duration(seconds), expected, "{seconds}s");
        }
    }

    #[test]
    fn node_rows_show_status_roles_and_version() {
        let registry = Registry::builtin();
        let nodes = registry.lookup("", "v1", "nodes").unwrap();
        let now: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        let node = json!({
            "metadata": {"name": "n1", "creationTimestamp": "2026-01-01T00:57:00Z", "labels": {"node-role.kubernetes.io/worker": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.29.15"}, "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}
        });
        let table = render(nodes, "v1", &[node], "7", None, now);
        let cells = &table["rows"][0]["cells"];
        assert_eq!(cells[0], "n1");
        assert_eq!(cells[1], "Ready,SchedulingDisabled");
        assert_eq!(cells[2], "worker");
        assert_eq!(cells[3], "3m");
        assert_eq!(cells[4], "v1.29.15");
        assert_eq!(cells[5], "10.0.0.1");
        assert_eq!(table["rows"][0]["object"]["metadata"]["name"], "n1");
    }
}
