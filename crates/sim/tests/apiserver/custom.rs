//! CustomResourceDefinitions and custom resources served generically.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::discovery::Discovery;
use kube::{Api, Client};
use serde_json::json;

use crate::{code_of, server};

/// A small namespaced CRD with a status subresource, printer columns and defaults.
pub fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Class", "type": "string", "jsonPath": ".spec.classRef.name"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "default": 3},
                        "mode": {"type": "string", "default": "fast"},
                        "classRef": {"type": "object", "properties": {"name": {"type": "string"}}}
                    }},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }]
        }
    }))
    .unwrap()
}

/// Install the widget CRD.
pub async fn install_widgets(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
}

/// The widget resource for dynamic APIs.
pub fn widget_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

#[tokio::test]
async fn custom_resources_are_served_after_their_crd_is_created() {
    let api = server();
    let client = api.client();
    let resource = widget_resource();
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    assert_eq!(
        code_of(widgets.list(&ListParams::default()).await.unwrap_err()),
        404
    );

    install_widgets(&client).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let established = crds.get("widgets.example.com").await.unwrap();
    let conditions = established.status.unwrap().conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let (found, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"))
        .unwrap();
    assert_eq!(found.plural, "widgets");
    assert!(
        caps.subresources
            .iter()
            .any(|(sub, _)| sub.plural == "status")
    );

    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"size": 5, "classRef": {"name": "default"}},
        "status": {"ignored": true}
    }))
    .unwrap();
    let created = widgets
        .create(&PostParams::default(), &widget)
        .await
        .unwrap();
    assert_eq!(
        created.data["spec"],
        json!({"size": 5, "mode": "fast", "classRef": {"name": "default"}}),
        "schema defaults applied"
    );
    assert!(
        created.data.get("status").is_none(),
        "status dropped on create"
    );

    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    widgets
        .patch_status("w1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let spec_and_status = json!({"spec": {"size": 1}, "status": {"conditions": []}});
    let patched = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(&spec_and_status),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["size"], 1);
    assert_eq!(patched.data["status"]["conditions"][0]["status"], "True");
    assert_eq!(patched.metadata.generation, Some(2));

    let smp = json!({"spec": {"size": 2}});
    assert_eq!(
        code_of(
            widgets
                .patch("w1", &PatchParams::default(), &Patch::Strategic(&smp))
                .await
                .unwrap_err()
        ),
        415
    );

    let apply = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"mode": "slow"}});
    let applied = widgets
        .patch(
            "w2",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&apply),
        )
        .await
        .unwrap();
    assert_eq!(applied.data["spec"], json!({"size": 3, "mode": "slow"}));

    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        code_of(widgets.list(&ListParams::default()).await.unwrap_err()),
        404
    );
    let again = crds
        .create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    assert!(again.metadata.uid.is_some());
    assert!(
        widgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "custom objects went with their CRD"
    );
}

#[tokio::test]
async fn invalid_crd_is_rejected_with_the_field_named() {
    let api = server();
    let crds: Api<CustomResourceDefinition> = Api::all(api.client());
    let mut crd = widget_crd();
    crd.metadata.name = Some("gadgets.example.com".into());
    let error = crds.create(&PostParams::default(), &crd).await.unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("not an API error")
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("metadata.name"),
        "{}",
        status.message
    );
}
