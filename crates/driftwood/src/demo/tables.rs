//! `kubectl get pods` and `kubectl get nodes` tables built from the API objects, laid out as
//! kubectl's tabwriter does (each column as wide as its widest cell plus 3 spaces, at least 6;
//! the last column unpadded).

use super::duration::kubectl_age;
use k8s_openapi::api::core::v1::{Node, Pod};

/// kubectl's tabwriter: minimum cell width and padding.
const MIN_WIDTH: usize = 6;
const PADDING: usize = 3;

/// Lays out rows under a header as kubectl does.
pub fn layout(header: &[&str], rows: &[Vec<String>]) -> String {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate().take(columns) {
            if i + 1 == columns {
                line.push_str(cell);
            } else {
                let width = (widths[i] + PADDING).max(MIN_WIDTH);
                line.push_str(&format!("{cell:<width$}"));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn age(created: Option<i64>, now: i64) -> String {
    created.map_or_else(|| "<unknown>".to_string(), |c| kubectl_age(now - c))
}

fn creation_second(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<i64> {
    meta.creation_timestamp.as_ref().map(|t| t.0.as_second())
}

/// One `kubectl get pods` row.
pub fn pod_row(pod: &Pod, now: i64) -> Vec<String> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    let containers = pod.spec.as_ref().map_or(0, |s| s.containers.len());
    // The controllers' cache keeps a pod's conditions but not its container statuses: without
    // them, a pod whose Ready condition is True has every container ready.
    let ready = if statuses.is_empty() {
        let pod_ready = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if pod_ready { containers } else { 0 }
    } else {
        statuses.iter().filter(|c| c.ready).count()
    };
    let restarts: i32 = statuses.iter().map(|c| c.restart_count).sum();
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".to_string());
    let waiting = statuses
        .iter()
        .find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone());
    let status = if pod.metadata.deletion_timestamp.is_some() {
        "Terminating".to_string()
    } else if let Some(reason) = waiting {
        reason
    } else {
        phase
    };
    vec![
        name,
        format!("{ready}/{containers}"),
        status,
        restarts.to_string(),
        age(creation_second(&pod.metadata), now),
    ]
}

/// `kubectl get pods` for `pods` (sorted by name as kubectl lists them).
pub fn pods_table<'a>(pods: impl IntoIterator<Item = &'a Pod>, now: i64) -> String {
    let mut rows: Vec<Vec<String>> = pods.into_iter().map(|p| pod_row(p, now)).collect();
    if rows.is_empty() {
        return "No resources found in default namespace.\n".to_string();
    }
    rows.sort();
    layout(&["NAME", "READY", "STATUS", "RESTARTS", "AGE"], &rows)
}

/// One `kubectl get nodes` row.
pub fn node_row(node: &Node, now: i64) -> Vec<String> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str());
    let mut status = match ready {
        Some("True") => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let roles: Vec<String> = node
        .metadata
        .labels
        .iter()
        .flatten()
        .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
        .filter(|r| !r.is_empty())
        .map(str::to_string)
        .collect();
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };
    let version = node
        .status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.kubelet_version.clone())
        .unwrap_or_default();
    vec![
        name,
        status,
        roles,
        age(creation_second(&node.metadata), now),
        version,
    ]
}

/// `kubectl get nodes` for `nodes` (sorted by name).
pub fn nodes_table<'a>(nodes: impl IntoIterator<Item = &'a Node>, now: i64) -> String {
    let mut rows: Vec<Vec<String>> = nodes.into_iter().map(|n| node_row(n, now)).collect();
    if rows.is_empty() {
        return "No resources found\n".to_string();
    }
    rows.sort();
    layout(&["NAME", "STATUS", "ROLES", "AGE", "VERSION"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerStatus, NodeCondition, NodeStatus, NodeSystemInfo, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn time(second: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(second).unwrap())
    }

    #[test]
    fn columns_are_widest_cell_plus_three() {
        let rows = vec![vec![
            "a-long-pod-name".into(),
            "1/1".into(),
            "Running".into(),
            "0".into(),
            "5m".into(),
        ]];
        let table = layout(&["NAME", "READY", "STATUS", "RESTARTS", "AGE"], &rows);
        assert_eq!(
            table,
            "NAME              READY   STATUS    RESTARTS   AGE\n\
             a-long-pod-name   1/1     Running   0          5m\n"
        );
    }

    #[test]
    fn pod_rows_read_the_status() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("web-1".into()),
                creation_timestamp: Some(time(1000)),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Default::default()],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                container_statuses: Some(vec![ContainerStatus {
                    ready: true,
                    restart_count: 2,
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        };
        assert_eq!(
            pod_row(&pod, 1130),
            vec!["web-1", "1/1", "Running", "2", "2m10s"]
        );
        let mut deleting = pod.clone();
        deleting.metadata.deletion_timestamp = Some(time(1100));
        assert_eq!(pod_row(&deleting, 1130)[2], "Terminating");
        // As the controllers' cache keeps it: conditions, no container statuses.
        let mut trimmed = pod.clone();
        if let Some(status) = trimmed.status.as_mut() {
            status.container_statuses = None;
            status.conditions = Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]);
        }
        assert_eq!(pod_row(&trimmed, 1130)[1], "1/1");
        if let Some(c) = trimmed.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            c[0].status = "False".into();
        }
        assert_eq!(pod_row(&trimmed, 1130)[1], "0/1");
    }

    #[test]
    fn node_rows_show_version_and_no_roles() {
        let node = Node {
            metadata: ObjectMeta {
                name: Some("ip-10-0-1-2.us-west-2.compute.internal".into()),
                creation_timestamp: Some(time(0)),
                ..Default::default()
            },
            spec: None,
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                node_info: Some(NodeSystemInfo {
                    kubelet_version: "v1.29.6-eks-1552ad0".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        };
        let table = nodes_table([&node], 45);
        assert_eq!(
            table,
            "NAME                                     STATUS   ROLES    AGE   VERSION\n\
             ip-10-0-1-2.us-west-2.compute.internal   Ready    <none>   45s   v1.29.6-eks-1552ad0\n"
        );
    }
}
