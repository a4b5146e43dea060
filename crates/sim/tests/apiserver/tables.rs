//! Table output as requested by `kubectl get`.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::custom::{install_widgets, widget_resource};
use crate::{node, pod, server};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

async fn table(client: &Client, path: &str) -> Value {
    let request = http::Request::get(path)
        .header("accept", TABLE)
        .body(Vec::new())
        .unwrap();
    serde_json::from_str(&client.request_text(request).await.unwrap()).unwrap()
}

fn headers(table: &Value) -> Vec<(String, i64)> {
    table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["priority"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn pods_and_nodes_print_like_a_real_cluster() {
    let api = server();
    let client = api.client();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(&PostParams::default(), &node("ip-10-0-0-7"))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("web-1", json!({})))
        .await
        .unwrap();

    let node_table = table(&client, "/api/v1/nodes").await;
    assert_eq!(node_table["kind"], "Table");
    let names: Vec<String> = headers(&node_table).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        vec![
            "Name",
            "Status",
            "Roles",
            "Age",
            "Version",
            "Internal-IP",
            "External-IP",
            "OS-Image",
            "Kernel-Version",
            "Container-Runtime"
        ]
    );
    let cells = &node_table["rows"][0]["cells"];
    assert_eq!(cells[0], "ip-10-0-0-7");
    assert_eq!(cells[1], "Ready");
    assert_eq!(cells[4], "v1.29.15");
    assert_eq!(cells[5], "10.0.0.7");
    assert_eq!(
        node_table["rows"][0]["object"]["kind"],
        "PartialObjectMetadata"
    );

    let pod_table = table(&client, "/api/v1/namespaces/default/pods").await;
    let columns = headers(&pod_table);
    assert_eq!(
        columns[..5]
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        vec!["Name", "Ready", "Status", "Restarts", "Age"]
    );
    assert!(
        columns[5..].iter().all(|(_, priority)| *priority == 1),
        "wide-only columns"
    );
    let cells = &pod_table["rows"][0]["cells"];
    assert_eq!(
        (cells[1].as_str(), cells[2].as_str(), cells[6].as_str()),
        (Some("0/1"), Some("Pending"), Some("<none>"))
    );
    assert!(
        cells[4].as_str().unwrap().ends_with('s'),
        "age like 0s: {}",
        cells[4]
    );

    let one = table(&client, "/api/v1/namespaces/default/pods/web-1").await;
    assert_eq!(one["rows"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn custom_resources_print_their_crd_columns() {
    let api = server();
    let client = api.client();
    install_widgets(&client).await;
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource());
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
        "spec": {"size": 7, "classRef": {"name": "default"}}
    }))
    .unwrap();
    widgets
        .create(&PostParams::default(), &widget)
        .await
        .unwrap();
    let status = json!({"status": {"conditions": [{"type": "Launched", "status": "True"}, {"type": "Ready", "status": "False"}]}});
    widgets
        .patch_status("w1", &Default::default(), &kube::api::Patch::Merge(&status))
        .await
        .unwrap();
    let rendered = table(&client, "/apis/example.com/v1/namespaces/default/widgets").await;
    let names: Vec<String> = headers(&rendered).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, vec!["Name", "Size", "Class", "Ready", "Age"]);
    let cells = rendered["rows"][0]["cells"].as_array().unwrap();
    assert_eq!(
        cells[..4],
        [json!("w1"), json!(7), json!("default"), json!("False")]
    );
    assert!(cells[4].as_str().unwrap().ends_with('s'));
}
