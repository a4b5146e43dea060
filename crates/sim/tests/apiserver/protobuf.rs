//! Kubernetes protobuf on the wire: request bodies client-go really sent (captured from Helm's
//! release storage, `fixtures/`) are stored as kube-apiserver stores them; responses follow the
//! Accept header; media types the server cannot read are 415 and kinds it cannot write in
//! protobuf are JSON (406 when the client accepts protobuf only). Helm's install, upgrade and
//! uninstall through its own engine are in the driftwood crate's `helm` tests.

use std::net::SocketAddr;

use driftwood_sim::ApiServer;
use driftwood_sim::apiserver::kube_protobuf;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::raw_http::{Reply, exchange};
use crate::{pod, server};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// client-go's Accept for typed clients configured for protobuf.
const CLIENT_GO_ACCEPT: &str = "application/vnd.kubernetes.protobuf,application/json";

const SECRET_CREATE: &[u8] = include_bytes!("fixtures/client-go-secret-create.pb");
const DELETE_OPTIONS: &[u8] = include_bytes!("fixtures/client-go-delete-options.pb");

async fn serve() -> (ApiServer, driftwood_sim::apiserver::HttpServer, SocketAddr) {
    let api = server();
    let http = api
        .serve_http(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let address = http.address();
    (api, http, address)
}

async fn send(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    exchange(address, method, path.as_bytes(), headers, body)
        .await
        .unwrap()
}

fn json_of(reply: &Reply) -> Value {
    assert_eq!(
        reply.header("content-type"),
        Some("application/json"),
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    serde_json::from_slice(&reply.body).unwrap()
}

#[tokio::test]
async fn a_secret_client_go_sent_in_protobuf_is_stored_and_answered_in_protobuf() {
    let (api, _http, address) = serve().await;
    let namespaces: Api<Namespace> = Api::all(api.client());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "helmns"}})).unwrap(),
        )
        .await
        .unwrap();
    let reply = send(
        address,
        "POST",
        "/api/v1/namespaces/helmns/secrets",
        &[("Content-Type", PROTOBUF), ("Accept", CLIENT_GO_ACCEPT)],
        SECRET_CREATE,
    )
    .await;
    assert_eq!(reply.code, 201, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.header("content-type"), Some(PROTOBUF));
    assert!(reply.body.starts_with(b"k8s\0"));

    // What was stored, read back in JSON through kube-rs.
    let secrets: Api<Secret> = Api::namespaced(api.client(), "helmns");
    let stored = secrets.get("sh.helm.release.v1.tiny.v1").await.unwrap();
    let labels = stored.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("owner").map(String::as_str), Some("helm"));
    assert_eq!(labels.get("name").map(String::as_str), Some("tiny"));
    assert_eq!(
        labels.get("status").map(String::as_str),
        Some("pending-install")
    );
    assert_eq!(stored.type_.as_deref(), Some("helm.sh/release.v1"));
    let release = stored.data.clone().unwrap_or_default();
    let release = release.get("release").expect("the release payload");
    // Helm stores base64(gzip(json)): once decoded, the base64 of the gzip magic.
    assert!(release.0.starts_with(b"H4sI"), "{:?}", &release.0[..8]);
    // Server-owned fields were set, not taken from the (empty) ones client-go wrote.
    assert!(
        stored
            .metadata
            .uid
            .as_deref()
            .is_some_and(|u| !u.is_empty())
    );
    assert!(stored.metadata.creation_timestamp.is_some());

    // The protobuf answer says what the JSON says.
    let answered = kube_protobuf::decode(&reply.body).unwrap();
    let mut as_json = serde_json::to_value(&stored).unwrap();
    as_json["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    assert_eq!(answered["metadata"]["uid"], as_json["metadata"]["uid"]);
    assert_eq!(answered["data"], as_json["data"]);
    assert_eq!(
        answered["metadata"]["labels"],
        as_json["metadata"]["labels"]
    );

    // A list in protobuf, then the delete with client-go's DeleteOptions body.
    let list = send(
        address,
        "GET",
        "/api/v1/namespaces/helmns/secrets?labelSelector=owner%3Dhelm",
        &[("Accept", CLIENT_GO_ACCEPT)],
        b"",
    )
    .await;
    assert_eq!(list.header("content-type"), Some(PROTOBUF));
    let list = kube_protobuf::decode(&list.body).unwrap();
    assert_eq!(list["kind"], "SecretList");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        list["items"][0]["metadata"]["name"],
        "sh.helm.release.v1.tiny.v1"
    );

    let deleted = send(
        address,
        "DELETE",
        "/api/v1/namespaces/helmns/secrets/sh.helm.release.v1.tiny.v1",
        &[("Content-Type", PROTOBUF), ("Accept", CLIENT_GO_ACCEPT)],
        DELETE_OPTIONS,
    )
    .await;
    assert_eq!(
        deleted.code,
        200,
        "{}",
        String::from_utf8_lossy(&deleted.body)
    );
    let status = kube_protobuf::decode(&deleted.body).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Success");
    assert!(
        secrets
            .get_opt("sh.helm.release.v1.tiny.v1")
            .await
            .unwrap()
            .is_none()
    );

    // Errors are Status objects in protobuf too.
    let missing = send(
        address,
        "GET",
        "/api/v1/namespaces/helmns/secrets/gone",
        &[("Accept", CLIENT_GO_ACCEPT)],
        b"",
    )
    .await;
    assert_eq!(missing.code, 404);
    let status = kube_protobuf::decode(&missing.body).unwrap();
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["code"], 404);
}

#[tokio::test]
async fn media_types_the_server_cannot_read_are_415_and_nothing_is_written() {
    let (api, _http, address) = serve().await;
    let before = api.resource_version();
    // A Pod in protobuf: kube-apiserver reads it; here it has no table.
    let mut pod_body = b"k8s\0".to_vec();
    pod_body.extend_from_slice(b"\x0a\x09\x0a\x02v1\x12\x03Pod\x12\x00");
    let reply = send(
        address,
        "POST",
        "/api/v1/namespaces/default/pods",
        &[("Content-Type", PROTOBUF)],
        &pod_body,
    )
    .await;
    assert_eq!(reply.code, 415);
    let status = json_of(&reply);
    assert_eq!(status["reason"], "UnsupportedMediaType");
    assert!(
        status["message"].as_str().unwrap().contains("Pod v1"),
        "{status}"
    );

    let reply = send(
        address,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("Content-Type", "text/plain")],
        b"data",
    )
    .await;
    assert_eq!(reply.code, 415, "{}", String::from_utf8_lossy(&reply.body));
    assert!(
        json_of(&reply)["message"]
            .as_str()
            .unwrap()
            .contains("application/yaml"),
    );

    // Protobuf that is not protobuf: 400, as a malformed JSON body is.
    let reply = send(
        address,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("Content-Type", PROTOBUF)],
        b"{\"kind\":\"ConfigMap\"}",
    )
    .await;
    assert_eq!(reply.code, 400);
    assert_eq!(api.resource_version(), before, "nothing was written");
}

#[tokio::test]
async fn a_yaml_body_is_read_as_kube_apiserver_reads_it() {
    let (api, _http, address) = serve().await;
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n";
    let reply = send(
        address,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("Content-Type", "application/yaml")],
        yaml.as_bytes(),
    )
    .await;
    assert_eq!(reply.code, 201, "{}", String::from_utf8_lossy(&reply.body));
    let stored: ConfigMap = Api::namespaced(api.client(), "default")
        .get("from-yaml")
        .await
        .unwrap();
    assert_eq!(stored.data.unwrap_or_default()["k"], "v");
}

#[tokio::test]
async fn kinds_without_a_protobuf_table_are_answered_in_json_or_406() {
    let (api, _http, address) = serve().await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    pods.create(&PostParams::default(), &pod("web", json!({"app": "web"})))
        .await
        .unwrap();
    let reply = send(
        address,
        "GET",
        "/api/v1/namespaces/default/pods/web",
        &[("Accept", CLIENT_GO_ACCEPT)],
        b"",
    )
    .await;
    assert_eq!(reply.code, 200);
    assert_eq!(json_of(&reply)["metadata"]["name"], "web");

    let reply = send(
        address,
        "GET",
        "/api/v1/namespaces/default/pods/web",
        &[("Accept", PROTOBUF)],
        b"",
    )
    .await;
    assert_eq!(reply.code, 406);
    assert_eq!(json_of(&reply)["reason"], "NotAcceptable");

    // kubectl's and kube-rs's JSON (and the Table kubectl asks for) are untouched.
    let reply = send(
        address,
        "GET",
        "/api/v1/namespaces/default/pods",
        &[(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )],
        b"",
    )
    .await;
    assert_eq!(json_of(&reply)["kind"], "Table");
}
