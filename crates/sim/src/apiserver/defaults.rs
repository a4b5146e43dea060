//! Server-side defaulting of built-in types on create/update (the fields a real API server
//! fills in that clients and printers rely on).

use serde_json::{Map, Value, json};

fn insert_missing(map: &mut Map<String, Value>, key: &str, value: Value) {
    if !map.contains_key(key) {
        map.insert(key.to_string(), value);
    }
}

fn object_at<'a>(value: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let map = value.as_object_mut()?;
    if !map.get(key).is_some_and(Value::is_object) {
        map.insert(key.to_string(), json!({}));
    }
    map.get_mut(key).and_then(Value::as_object_mut)
}

fn default_containers(spec: &mut Map<String, Value>) {
    for field in ["containers", "initContainers"] {
        if let Some(Value::Array(containers)) = spec.get_mut(field) {
            for container in containers.iter_mut().filter_map(Value::as_object_mut) {
                insert_missing(
                    container,
                    "terminationMessagePath",
                    json!("/dev/termination-log"),
                );
                insert_missing(container, "terminationMessagePolicy", json!("File"));
                let latest = container
                    .get("image")
                    .and_then(Value::as_str)
                    .is_some_and(|image| !image.contains(':') || image.ends_with(":latest"));
                insert_missing(
                    container,
                    "imagePullPolicy",
                    json!(if latest { "Always" } else { "IfNotPresent" }),
                );
                if let Some(Value::Array(ports)) = container.get_mut("ports") {
                    for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                        insert_missing(port, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
}

/// Defaults for a PodSpec.
pub fn default_pod_spec(spec: &mut Map<String, Value>) {
    insert_missing(spec, "restartPolicy", json!("Always"));
    insert_missing(spec, "terminationGracePeriodSeconds", json!(30));
    insert_missing(spec, "dnsPolicy", json!("ClusterFirst"));
    insert_missing(spec, "schedulerName", json!("default-scheduler"));
    insert_missing(spec, "securityContext", json!({}));
    insert_missing(spec, "enableServiceLinks", json!(true));
    let priority = match spec.get("priorityClassName").and_then(Value::as_str) {
        Some("system-node-critical") => 2_000_001_000,
        Some("system-cluster-critical") => 2_000_000_000,
        _ => 0,
    };
    insert_missing(spec, "priority", json!(priority));
    default_containers(spec);
}

/// The pod's QoS class from its containers' cpu/memory requests and limits.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|field| spec.get(*field).and_then(Value::as_array))
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for container in containers {
        for resource in ["cpu", "memory"] {
            let limit = container.pointer(&format!("/resources/limits/{resource}"));
            let request = container
                .pointer(&format!("/resources/requests/{resource}"))
                .or(limit);
            any |= limit.is_some() || request.is_some();
            guaranteed &= limit.is_some() && request == limit;
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

fn default_template(object: &mut Value) {
    if let Some(spec) = object_at(object, "spec")
        && let Some(Value::Object(template)) = spec.get_mut("template")
        && let Some(Value::Object(pod_spec)) = template.get_mut("spec")
    {
        default_pod_spec(pod_spec);
    }
}

/// Apply the defaults for `group`/`plural` to a whole object.
pub fn apply(group: &str, plural: &str, object: &mut Value) {
    match (group, plural) {
        ("", "pods") => {
            if let Some(spec) = object_at(object, "spec") {
                default_pod_spec(spec);
            }
            let qos = qos_class(object.get("spec").unwrap_or(&Value::Null));
            if let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) {
                status.insert("qosClass".into(), json!(qos));
            }
        }
        ("", "namespaces") => {
            if let Some(status) = object_at(object, "status") {
                insert_missing(status, "phase", json!("Active"));
            }
        }
        ("apps", "deployments") => {
            if let Some(spec) = object_at(object, "spec") {
                insert_missing(spec, "replicas", json!(1));
                insert_missing(spec, "revisionHistoryLimit", json!(10));
                insert_missing(spec, "progressDeadlineSeconds", json!(600));
                insert_missing(
                    spec,
                    "strategy",
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
                );
            }
            default_template(object);
        }
        ("apps", "replicasets") => {
            if let Some(spec) = object_at(object, "spec") {
                insert_missing(spec, "replicas", json!(1));
            }
            default_template(object);
        }
        ("apps", "daemonsets") => {
            if let Some(spec) = object_at(object, "spec") {
                insert_missing(spec, "revisionHistoryLimit", json!(10));
                insert_missing(
                    spec,
                    "updateStrategy",
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
                );
            }
            default_template(object);
        }
        _ => {}
    }
}

/// The status a freshly created object starts with, for resources whose status is owned by
/// the server (status subresource). `None` keeps what the client sent (nodes, namespaces).
pub fn initial_status(group: &str, plural: &str) -> Option<Value> {
    match (group, plural) {
        ("", "nodes") | ("", "namespaces") => None,
        ("", "pods") => Some(json!({"phase": "Pending", "qosClass": "BestEffort"})),
        _ => Some(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_defaults_fill_replicas_and_pod_template() {
        let mut deployment = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "nginx"}]}}}});
        apply("apps", "deployments", &mut deployment);
        assert_eq!(deployment["spec"]["replicas"], 1);
        assert_eq!(deployment["spec"]["strategy"]["type"], "RollingUpdate");
        assert_eq!(
            deployment["spec"]["template"]["spec"]["restartPolicy"],
            "Always"
        );
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Always"
        );
    }

    #[test]
    fn qos_classes_and_critical_priorities() {
        let guaranteed =
            json!({"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]});
        assert_eq!(qos_class(&guaranteed), "Guaranteed");
        let burstable = json!({"containers": [{"resources": {"requests": {"cpu": "100m"}}}]});
        assert_eq!(qos_class(&burstable), "Burstable");
        assert_eq!(
            qos_class(&json!({"containers": [{"name": "a"}]})),
            "BestEffort"
        );
        let mut pod = json!({"spec": {"priorityClassName": "system-node-critical", "containers": []}, "status": {}});
        apply("", "pods", &mut pod);
        assert_eq!(pod["spec"]["priority"], 2_000_001_000);
        assert_eq!(pod["status"]["qosClass"], "BestEffort");
    }

    #[test]
    fn explicit_values_are_kept() {
        let mut pod = json!({"spec": {"terminationGracePeriodSeconds": 5, "containers": []}});
        apply("", "pods", &mut pod);
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 5);
    }
}
