//! OpenAPI documents as kube-apiserver publishes them. `/openapi/v3` indexes one document per
//! group/version; each holds the PATCH operation of every kind (kubectl reads its
//! `fieldValidation` parameter to learn the server validates fields) and the kinds' schemas
//! (`kubectl explain`): a CRD's openAPIV3Schema with `metadata` referring to ObjectMeta, and the
//! built-in kinds' schemas from k8s-openapi. `/openapi/v2` is the protobuf document kubectl up
//! to 1.27 reads for the same `fieldValidation` check.

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::builtin_kinds::{self, KindVisitor};
use super::discovery::{group_version_path, group_versions};
use super::protobuf::Message;
use super::resources::{Registry, ResourceInfo};

/// The media type of the protobuf `/openapi/v2` document.
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// `/openapi/v3`: one entry per served group/version.
pub fn v3_root(registry: &Registry) -> Value {
    let mut paths = Map::new();
    let core = group_version_path("", "v1");
    paths.insert(
        core.clone(),
        json!({"serverRelativeURL": format!("/openapi/v3/{core}")}),
    );
    for (group, versions) in group_versions(registry) {
        for version in versions {
            let path = group_version_path(&group, &version);
            paths.insert(
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}")}),
            );
        }
    }
    json!({"paths": paths})
}

fn kinds<'a>(
    registry: &'a Registry,
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'a ResourceInfo> {
    registry
        .all()
        .filter(move |info| info.group == group && info.version(version).is_some())
}

/// The path of a kind's named object (where its PATCH lives).
fn object_path(info: &ResourceInfo, version: &str) -> String {
    let prefix = format!("/{}", group_version_path(&info.group, version));
    if info.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", info.plural)
    } else {
        format!("{prefix}/{}/{{name}}", info.plural)
    }
}

/// `sh.karpenter.v1.NodePool`: a CRD kind's schema name (the group reversed), as
/// kube-apiserver names it.
fn custom_schema_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "version": version, "kind": kind}])
}

/// A CRD's schema as published: the group/version/kind named, `metadata` as ObjectMeta.
fn custom_schema(schema: &Value, group: &str, version: &str, kind: &str) -> Value {
    let mut schema = schema.clone();
    if let Some(map) = schema.as_object_mut() {
        map.insert(
            "x-kubernetes-group-version-kind".into(),
            gvk(group, version, kind),
        );
        if let Some(properties) = map.get_mut("properties").and_then(Value::as_object_mut) {
            properties.insert(
                "metadata".into(),
                json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}],
                       "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}),
            );
        }
    }
    schema
}

/// The list kind of a CRD kind.
fn custom_list_schema(item: &str, group: &str, version: &str, kind: &str) -> Value {
    json!({
        "type": "object",
        "required": ["items"],
        "description": format!("{kind}List is a list of {kind}"),
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
            "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
            "items": {"type": "array", "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", kind.to_lowercase()),
                      "items": {"$ref": format!("#/components/schemas/{item}")}},
            "metadata": {"allOf": [{"$ref": format!("#/components/schemas/{LIST_META}")}],
                         "description": "Standard list metadata."}
        },
        "x-kubernetes-group-version-kind": gvk(group, version, &format!("{kind}List")),
    })
}

/// Adds a built-in kind's schema (and what it refers to) to the generator's definitions.
struct AddSchema<'a>(&'a mut SchemaGenerator);

impl KindVisitor for AddSchema<'_> {
    type Output = String;
    fn visit<T: schemars::JsonSchema + serde::de::DeserializeOwned>(&mut self) -> String {
        self.0.subschema_for::<T>();
        T::schema_name().into_owned()
    }
}

/// Adds the schema of a built-in kind to `generator`'s definitions; returns its name.
fn builtin_schema(generator: &mut SchemaGenerator, group: &str, kind: &str) -> Option<String> {
    builtin_kinds::visit(group, kind, &mut AddSchema(generator))
}

/// `/openapi/v3/…/GROUP/VERSION`: the PATCH operation of each kind and the kinds' schemas.
pub fn v3_group_version(
    registry: &Registry,
    group: &str,
    version: &str,
    kubernetes_version: &str,
) -> Option<Value> {
    let mut paths = Map::new();
    let mut generator = SchemaSettings::openapi3().into_generator();
    let mut schemas = Map::new();
    let mut builtin_kinds = Vec::new();
    for info in kinds(registry, group, version) {
        paths.insert(
            object_path(info, version),
            json!({"patch": {
                "operationId": format!("patch{}", info.kind),
                "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": info.kind},
                "x-kubernetes-action": "patch",
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}}
                ],
                "responses": {"200": {"description": "OK"}}
            }}),
        );
        match info.version(version).and_then(|v| v.schema.as_ref()) {
            Some(schema) => {
                let name = custom_schema_name(group, version, &info.kind);
                schemas.insert(
                    format!("{name}List"),
                    custom_list_schema(&name, group, version, &info.kind),
                );
                schemas.insert(name, custom_schema(schema, group, version, &info.kind));
                generator
                    .subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>();
                generator
                    .subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta>();
            }
            None => {
                if let Some(name) = builtin_schema(&mut generator, group, &info.kind) {
                    builtin_kinds.push((name, info.kind.clone()));
                }
            }
        }
    }
    if paths.is_empty() {
        return None;
    }
    for (name, schema) in generator.take_definitions(true) {
        schemas.entry(name).or_insert(schema);
    }
    for (name, kind) in builtin_kinds {
        if let Some(schema) = schemas.get_mut(&name).and_then(Value::as_object_mut) {
            schema.insert(
                "x-kubernetes-group-version-kind".into(),
                gvk(group, version, &kind),
            );
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": kubernetes_version},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// A query parameter of an operation (gnostic: ParametersItem → Parameter → NonBodyParameter →
/// QueryParameterSubSchema).
fn query_parameter(name: &str) -> Message {
    let sub_schema = Message::new()
        .string(2, "query")
        .string(4, name)
        .string(6, "string")
        .bool(20, true);
    let non_body = Message::new().message(3, sub_schema);
    let parameter = Message::new().message(2, non_body);
    Message::new().message(1, parameter)
}

/// A vendor extension (gnostic NamedAny with its value as YAML).
fn extension(name: &str, yaml: &str) -> Message {
    Message::new()
        .string(1, name)
        .message(2, Message::new().string(2, yaml))
}

/// `/openapi/v2` as protobuf: the PATCH operation of every kind, with its
/// `x-kubernetes-group-version-kind` and its query parameters (no definitions).
pub fn v2_protobuf(registry: &Registry, kubernetes_version: &str) -> Vec<u8> {
    let mut paths = Message::new();
    for info in registry.all() {
        for version in &info.versions {
            let mut operation = Message::new().string(5, &format!("patch{}", info.kind));
            for parameter in ["dryRun", "fieldManager", "fieldValidation"] {
                operation = operation.message(8, query_parameter(parameter));
            }
            let yaml = format!(
                "group: {:?}\nkind: {}\nversion: {}\n",
                info.group, info.kind, version.name
            );
            operation = operation.message(13, extension("x-kubernetes-group-version-kind", &yaml));
            let item = Message::new().message(8, operation);
            let named = Message::new()
                .string(1, &object_path(info, &version.name))
                .message(2, item);
            paths = paths.message(2, named);
        }
    }
    let info = Message::new()
        .string(1, "Kubernetes")
        .string(2, kubernetes_version);
    Message::new()
        .string(1, "2.0")
        .message(2, info)
        .message(8, paths)
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_schema_names_reverse_the_group() {
        assert_eq!(
            custom_schema_name("karpenter.sh", "v1", "NodePool"),
            "sh.karpenter.v1.NodePool"
        );
        assert_eq!(
            custom_schema_name("karpenter.k8s.aws", "v1", "EC2NodeClass"),
            "aws.k8s.karpenter.v1.EC2NodeClass"
        );
    }

    #[test]
    fn builtin_kinds_carry_their_schema_and_group_version_kind() {
        let document = v3_group_version(&Registry::builtin(), "apps", "v1", "v1.33.0").unwrap();
        let deployment = &document["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"][0]["kind"],
            "Deployment"
        );
        assert!(deployment["properties"]["spec"].is_object(), "{deployment}");
        assert!(
            document["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
                .is_object()
        );
    }

    #[test]
    fn v2_names_each_patch_operation_with_its_kind() {
        let bytes = v2_protobuf(&Registry::builtin(), "v1.33.0");
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("/apis/apps/v1/namespaces/{namespace}/deployments/{name}"));
        assert!(text.contains("group: \"apps\"\nkind: Deployment\nversion: v1\n"));
        assert!(text.contains("fieldValidation"));
    }
}
