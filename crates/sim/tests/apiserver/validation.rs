//! Custom resources are checked against their CRD's structural schema and CEL rules as
//! kube-apiserver checks them: the Karpenter CRDs driftwood serves, and a CRD of another
//! shape (list maps, int-or-string, transition rules) written for this test.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::server;

async fn install_karpenter_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in driftwood_api::crd::crds().unwrap() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
}

fn nodepools(client: &Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"),
        "nodepools",
    );
    Api::all_with(client.clone(), &resource)
}

fn nodepool(spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"}, "spec": spec,
    }))
    .unwrap()
}

fn valid_spec() -> Value {
    json!({
        "template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
        }},
        "disruption": {"budgets": [{"nodes": "10%"}]}
    })
}

/// The Status of a refused write.
fn refused(error: kube::Error) -> kube::core::Status {
    match error {
        kube::Error::Api(status) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// POST with `fieldValidation=Strict`, as kubectl sends it (kube-rs's PostParams cannot).
async fn create_strict(
    client: &Client,
    object: &DynamicObject,
) -> Result<DynamicObject, kube::Error> {
    let request = http::Request::post("/apis/karpenter.sh/v1/nodepools?fieldValidation=Strict")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(object).unwrap())
        .unwrap();
    client.request(request).await
}

/// The three NodePools of the issue: a budget of 150%, a misspelled field, no nodeClassRef.
/// kube-apiserver with Karpenter's CRDs refuses each, naming the field.
#[tokio::test]
async fn bad_nodepools_are_refused_naming_the_field() {
    let server = server();
    let client = server.client();
    install_karpenter_crds(&client).await;
    let api = nodepools(&client);

    let mut spec = valid_spec();
    spec["disruption"]["budgets"][0]["nodes"] = json!("150%");
    let status = refused(create_strict(&client, &nodepool(spec)).await.unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(
        status.message.starts_with("NodePool.karpenter.sh \"default\" is invalid: spec.disruption.budgets[0].nodes: Invalid value: \"150%\": spec.disruption.budgets[0].nodes in body should match"),
        "{}", status.message
    );
    let causes = status.details.unwrap().causes;
    assert_eq!(causes[0].field, "spec.disruption.budgets[0].nodes");
    assert_eq!(causes[0].reason, "FieldValueInvalid");

    let mut spec = valid_spec();
    let requirements = spec["template"]["spec"]["requirements"].take();
    spec["template"]["spec"]["requirments"] = requirements;
    let status = refused(create_strict(&client, &nodepool(spec)).await.unwrap_err());
    assert_eq!(status.code, 400);
    assert_eq!(
        status.message,
        "NodePool in version \"v1\" cannot be handled as a NodePool: strict decoding error: unknown field \"spec.template.spec.requirments\""
    );

    let mut spec = valid_spec();
    spec["template"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("nodeClassRef");
    let status = refused(create_strict(&client, &nodepool(spec)).await.unwrap_err());
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .ends_with("spec.template.spec.nodeClassRef: Required value"),
        "{}",
        status.message
    );

    // CEL: a Gt requirement with two values breaks one of the CRD's x-kubernetes-validations.
    let mut spec = valid_spec();
    spec["template"]["spec"]["requirements"] =
        json!([{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["4", "8"]}]);
    let status = refused(create_strict(&client, &nodepool(spec)).await.unwrap_err());
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .contains("spec.template.spec.requirements: Invalid value: \"array\""),
        "{}",
        status.message
    );

    // Nothing was stored by any of them; the valid one is.
    assert!(api.get_opt("default").await.unwrap().is_none());
    create_strict(&client, &nodepool(valid_spec()))
        .await
        .unwrap();
}

/// The shapes the random-request run stored before: `spec` of the wrong type or null.
#[tokio::test]
async fn spec_of_the_wrong_type_is_refused() {
    let server = server();
    let client = server.client();
    install_karpenter_crds(&client).await;
    let api = nodepools(&client);
    for (spec, message) in [
        (
            json!("x"),
            "spec: Invalid value: \"string\": spec in body must be of type object: \"string\"",
        ),
        (
            json!([]),
            "spec: Invalid value: \"array\": spec in body must be of type object: \"array\"",
        ),
    ] {
        let status = refused(
            api.create(&PostParams::default(), &nodepool(spec))
                .await
                .unwrap_err(),
        );
        assert!(status.message.ends_with(message), "{}", status.message);
    }
    // null is pruned, then the required spec is missing.
    let status = refused(
        api.create(&PostParams::default(), &nodepool(Value::Null))
            .await
            .unwrap_err(),
    );
    assert!(
        status.message.ends_with("spec: Required value"),
        "{}",
        status.message
    );
}

/// Without `fieldValidation=Strict` unknown fields are dropped, with a warning when asked to warn
/// (the default); the object is stored without them.
#[tokio::test]
async fn unknown_fields_are_pruned_by_default() {
    let server = server();
    let client = server.client();
    install_karpenter_crds(&client).await;
    let api = nodepools(&client);
    let mut spec = valid_spec();
    spec["surprise"] = json!({"a": 1});
    let created = api
        .create(&PostParams::default(), &nodepool(spec))
        .await
        .unwrap();
    assert!(created.data["spec"].get("surprise").is_none());
    // A merge patch adding an unknown field is pruned too; the patch still succeeds.
    let patched = api
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"weight": 10, "bogus": true}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["weight"], 10);
    assert!(patched.data["spec"].get("bogus").is_none());
}

/// Another project's CRD: a list map with keys, int-or-string with a pattern, an immutable field
/// (transition rule), a rule with messageExpression, maxItems and defaults.
fn gadget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.org"},
        "spec": {
            "group": "example.org", "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "required": ["spec"], "properties": {
                    "spec": {"type": "object", "required": ["region"],
                        "x-kubernetes-validations": [{"rule": "!has(self.ports) || self.replicas <= size(self.ports) * 10",
                                                      "messageExpression": "'replicas ' + string(self.replicas) + ' exceed ten per port'"}],
                        "properties": {
                            "region": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "region is immutable"}]},
                            "replicas": {"type": "integer", "default": 1, "minimum": 0},
                            "memory": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}],
                                       "pattern": "^[0-9]+(Mi|Gi)$"},
                            "ports": {"type": "array", "maxItems": 4, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                                      "items": {"type": "object", "required": ["name", "port"], "properties": {
                                          "name": {"type": "string"}, "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                                          "protocol": {"type": "string", "enum": ["TCP", "UDP"], "default": "TCP"}}}}
                        }}
                }}}
            }]
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn another_crd_is_validated_generically() {
    let server = server();
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &gadget_crd())
        .await
        .unwrap();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.org", "v1alpha1", "Gadget"),
        "gadgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let gadget = |spec: Value| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.org/v1alpha1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": spec})).unwrap()
    };

    let status = refused(
        api.create(
            &PostParams::default(),
            &gadget(json!({"region": "eu", "memory": "3 GB",
            "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 0}]})),
        )
        .await
        .unwrap_err(),
    );
    let fields: Vec<&str> = status
        .details
        .as_ref()
        .unwrap()
        .causes
        .iter()
        .map(|c| c.field.as_str())
        .collect();
    assert_eq!(
        fields,
        ["spec.memory", "spec.ports[1]", "spec.ports[1].port"],
        "{}",
        status.message
    );
    assert!(
        status
            .message
            .starts_with("Gadget.example.org \"g\" is invalid: ["),
        "{}",
        status.message
    );

    let status = refused(
        api.create(
            &PostParams::default(),
            &gadget(
                json!({"region": "eu", "replicas": 11, "ports": [{"name": "http", "port": 80}]}),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        status
            .message
            .ends_with("spec: Invalid value: \"object\": replicas 11 exceed ten per port"),
        "{}",
        status.message
    );

    let created = api
        .create(
            &PostParams::default(),
            &gadget(
                json!({"region": "eu", "memory": 512, "ports": [{"name": "http", "port": 80}]}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["replicas"], 1);
    assert_eq!(created.data["spec"]["ports"][0]["protocol"], "TCP");

    let status = refused(
        api.patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"region": "us"}})),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        status
            .message
            .ends_with("spec.region: Invalid value: \"string\": region is immutable"),
        "{}",
        status.message
    );
    let stored = api.get("g").await.unwrap();
    assert_eq!(stored.data["spec"]["region"], "eu");
}
