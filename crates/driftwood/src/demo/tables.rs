//! `kubectl get pods` and `kubectl get nodes` tables built from the API objects, laid out as
//! kubectl's tabwriter does (each column as wide as its widest cell plus 3 spaces, at least 6;
//! the last column unpadded).

use super::duration::kubectl_age;
use driftwood_disruption::cached_pod::CachedPod;
use k8s_openapi::api::core::v1::Node;

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
/// One `kubectl get pods` row, from what the controllers' cache keeps of the pod (its
/// containers' ready flags and restarts, not their states: the STATUS column is the phase).
pub fn pod_row(pod: &CachedPod, now: i64) -> Vec<String> {
    let containers = pod.shape.containers;
    // Without container statuses, a pod whose Ready condition is True has every container
    // ready.
    let ready = pod
        .ready_containers
        .unwrap_or(if pod.is_ready() { containers } else { 0 });
    let status = if pod.is_terminating() {
        "Terminating"
    } else {
        pod.phase_name()
    };
    vec![
        pod.name.to_string(),
        format!("{ready}/{containers}"),
        status.to_string(),
        pod.restart_total.to_string(),
        age(pod.created.map(|t| t.as_second()), now),
    ]
}

/// `kubectl get pods` for `pods` (sorted by name as kubectl lists them).
pub fn pods_table<'a>(pods: impl IntoIterator<Item = &'a CachedPod>, now: i64) -> String {
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
        let pod = k8s_openapi::api::core::v1::Pod {
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
            pod_row(&CachedPod::from(&pod), 1130),
            vec!["web-1", "1/1", "Running", "2", "2m10s"]
        );
        let mut deleting = pod.clone();
        deleting.metadata.deletion_timestamp = Some(time(1100));
        assert_eq!(pod_row(&CachedPod::from(&deleting), 1130)[2], "Terminating");
        // Without container statuses (not reported yet), the Ready condition says.
        let mut trimmed = pod.clone();
        if let Some(status) = trimmed.status.as_mut() {
            status.container_statuses = None;
            status.conditions = Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]);
        }
        assert_eq!(pod_row(&CachedPod::from(&trimmed), 1130)[1], "1/1");
        if let Some(c) = trimmed.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            c[0].status = "False".into();
        }
        assert_eq!(pod_row(&CachedPod::from(&trimmed), 1130)[1], "0/1");
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
