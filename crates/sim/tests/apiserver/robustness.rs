//! Malformed requests: every one gets a Status response; none crashes or wedges the server.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use crate::server;

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() as usize) % items.len()]
    }
}

const SEGMENTS: &[&str] = &[
    "api",
    "apis",
    "v1",
    "v2",
    "namespaces",
    "default",
    "kube-system",
    "pods",
    "nodes",
    "apps",
    "deployments",
    "policy",
    "poddisruptionbudgets",
    "status",
    "eviction",
    "binding",
    "finalize",
    "x",
    "%ZZ",
    "%2F",
    "..",
    "apiextensions.k8s.io",
    "customresourcedefinitions",
    "Ünïcödé",
    "openapi",
    "v3",
    "version",
    "scale",
];
const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];
const QUERIES: &[&str] = &[
    "",
    "labelSelector=app+in+(",
    "labelSelector=%%%",
    "fieldSelector=spec.nodeName",
    "fieldSelector=a.b=c",
    "limit=-1",
    "limit=abc",
    "continue=zz",
    "continue=00",
    "gracePeriodSeconds=-5",
    "propagationPolicy=Orphan",
    "resourceVersion=abc",
    "timeoutSeconds=x",
    "dryRun=All",
];
const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
    "application/vnd.kubernetes.protobuf",
    "text/plain",
    "",
];
const BODIES: &[&str] = &[
    "",
    "{",
    "null",
    "[]",
    "42",
    "\"text\"",
    "{\"metadata\": \"x\"}",
    "{\"metadata\": {\"name\": 5}}",
    "{\"metadata\": {\"name\": \"ok\"}, \"spec\": [1, 2]}",
    "{\"metadata\": {\"name\": \"UPPER\"}}",
    "[{\"op\": \"explode\"}]",
    "[{\"op\": \"add\", \"path\": \"/metadata/labels/x\", \"value\": 1}]",
    "{\"spec\": {\"containers\": [1]}}",
    "{\"spec\": {\"containers\": [{\"image\": \"no-name\"}]}}",
    "{\"metadata\": {\"name\": \"p\", \"finalizers\": [\"a\"]}, \"status\": {\"conditions\": \"bad\"}}",
    "a: [b\n  - c: {",
    "\u{0}\u{1}\u{2}\u{ff}",
    "{\"apiVersion\": \"v1\", \"kind\": \"Eviction\", \"metadata\": {\"name\": \"other\"}}",
    "{\"target\": {\"name\": \"\"}}",
];

#[tokio::test]
async fn garbage_requests_get_status_errors_and_the_server_keeps_working() {
    let api = server();
    let service = api.service();
    let mut random = Lcg(7);
    let deep = "[".repeat(10_000);
    let mut codes = std::collections::BTreeMap::new();
    for round in 0..3000 {
        let depth = 1 + random.next() % 7;
        let path: String = (0..depth)
            .map(|_| format!("/{}", random.pick(SEGMENTS)))
            .collect();
        let query = random.pick(QUERIES);
        let uri = if query.is_empty() {
            path.clone()
        } else {
            format!("{path}?{query}")
        };
        let body = if round % 500 == 0 {
            deep.clone()
        } else {
            random.pick(BODIES).to_string()
        };
        let content_type = random.pick(CONTENT_TYPES);
        let method = random.pick(METHODS);
        let Ok(request) = http::Request::builder()
            .method(method)
            .uri(&uri)
            .header("content-type", content_type)
            .body(Full::new(Bytes::from(body.clone())))
        else {
            continue;
        };
        let response = service.handle(request).await;
        let code = response.status().as_u16();
        *codes.entry(code).or_insert(0) += 1;
        let json = response
            .headers()
            .get("content-type")
            .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        if !json {
            // Only the protobuf OpenAPI v2 document is not JSON.
            assert!(
                uri.starts_with("/openapi/v2") && code == 200,
                "{method} {uri}: not JSON"
            );
            continue;
        }
        let parsed: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{method} {uri}: body is not JSON ({e})"));
        if code >= 400 {
            assert_eq!(parsed["kind"], "Status", "{method} {uri} {body}: {parsed}");
            assert_ne!(
                parsed["message"], "the server panicked while handling the request",
                "{method} {uri} {body}"
            );
        }
    }
    assert!(
        codes.keys().any(|c| *c == 404) && codes.keys().any(|c| *c == 405 || *c == 400),
        "{codes:?}"
    );

    let huge = vec![b'x'; 4 * 1024 * 1024];
    let request = http::Request::post("/api/v1/namespaces/default/pods")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(huge)))
        .unwrap();
    assert_eq!(service.handle(request).await.status().as_u16(), 413);

    let version = http::Request::get("/version")
        .body(Full::new(Bytes::new()))
        .unwrap();
    assert_eq!(service.handle(version).await.status().as_u16(), 200);
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(api.client(), "default");
    pods.create(
        &Default::default(),
        &crate::pod("still-alive", serde_json::json!({})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn extreme_numbers_do_not_overflow_anything() {
    let api = server();
    let service = api.service();
    let send = |method: &str, uri: &str, content_type: &str, accept: &str, body: &str| {
        http::Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", content_type)
            .header("accept", accept)
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap()
    };
    let pdb = r#"{"metadata": {"name": "huge"}, "spec": {"maxUnavailable": "99999999999999999999%", "selector": {}}}"#;
    let response = service
        .handle(send(
            "POST",
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            "application/json",
            "",
            pdb,
        ))
        .await;
    assert!(response.status().as_u16() < 500);
    let pod = r#"{"metadata": {"name": "restarts"}, "spec": {"containers": [{"name": "a", "image": "x"}]}}"#;
    assert_eq!(
        service
            .handle(send(
                "POST",
                "/api/v1/namespaces/default/pods",
                "application/json",
                "",
                pod
            ))
            .await
            .status()
            .as_u16(),
        201
    );
    // restartCount is an int32: kube-apiserver cannot decode a larger number (400), and stores
    // the largest int32.
    let too_big = r#"{"status": {"containerStatuses": [{"name": "a", "restartCount": 9223372036854775807}]}}"#;
    let refused = service
        .handle(send(
            "PATCH",
            "/api/v1/namespaces/default/pods/restarts/status",
            "application/merge-patch+json",
            "",
            too_big,
        ))
        .await;
    assert_eq!(refused.status().as_u16(), 400);
    let status = r#"{"status": {"containerStatuses": [{"name": "a", "restartCount": 2147483647}, {"name": "b", "restartCount": 2147483647}]}}"#;
    let patched = service
        .handle(send(
            "PATCH",
            "/api/v1/namespaces/default/pods/restarts/status",
            "application/merge-patch+json",
            "",
            status,
        ))
        .await;
    assert_eq!(patched.status().as_u16(), 200);
    let table = service
        .handle(send(
            "GET",
            "/api/v1/namespaces/default/pods",
            "",
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            "",
        ))
        .await;
    let body: Value =
        serde_json::from_slice(&table.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["rows"][0]["cells"][3], "4294967294");
    let watch = service
        .handle(send(
            "GET",
            "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=18446744073709551615",
            "",
            "",
            "",
        ))
        .await;
    assert_eq!(watch.status().as_u16(), 200);
    let grace = service
        .handle(send(
            "DELETE",
            "/api/v1/namespaces/default/pods/restarts?gracePeriodSeconds=9223372036854775807",
            "",
            "",
            "",
        ))
        .await;
    assert_eq!(grace.status().as_u16(), 200);
}

/// Bodies a real API server refuses, sent with every write method to NodePools (with
/// driftwood's CRDs served), Nodes and Pods: every answer is a Status, and nothing stored would
/// be refused by kube-apiserver (issue 16: `spec: "x"`, `spec: []`, `spec: null`, a 300-character
/// label key, a taint with an empty key and effect `Weird`).
#[tokio::test]
async fn nothing_kube_apiserver_would_refuse_is_stored() {
    let api = server();
    let crds: kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        kube::Api::all(api.client());
    for crd in driftwood_api::crd::crds().unwrap() {
        crds.create(&Default::default(), &crd).await.unwrap();
    }
    let service = api.service();
    let long = "a".repeat(300);
    let nodepool_spec = r#"{"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}"#;
    let bodies: Vec<(&str, String)> = vec![
        ("/apis/karpenter.sh/v1/nodepools", r#"{"metadata": {"name": "np"}, "spec": "x"}"#.to_string()),
        ("/apis/karpenter.sh/v1/nodepools", r#"{"metadata": {"name": "np"}, "spec": []}"#.to_string()),
        ("/apis/karpenter.sh/v1/nodepools", r#"{"metadata": {"name": "np"}, "spec": null}"#.to_string()),
        ("/apis/karpenter.sh/v1/nodepools", format!(r#"{{"metadata": {{"name": "np"}}, "spec": {nodepool_spec}, "extra": 1}}"#)),
        ("/apis/karpenter.sh/v1/nodepools", r#"{"metadata": {"name": "np"}, "spec": {"template": {"spec": {"requirements": []}}, "disruption": {"budgets": [{"nodes": "150%"}]}}}"#.to_string()),
        ("/api/v1/nodes", format!(r#"{{"metadata": {{"name": "n", "labels": {{"{long}": "x"}}}}}}"#)),
        ("/api/v1/nodes", r#"{"metadata": {"name": "n"}, "spec": {"taints": [{"key": "", "effect": "Weird"}]}}"#.to_string()),
        ("/api/v1/nodes", r#"{"metadata": {"name": "n"}, "spec": "x"}"#.to_string()),
        ("/api/v1/namespaces/default/pods", r#"{"metadata": {"name": "p"}, "spec": {"containers": []}}"#.to_string()),
        ("/api/v1/namespaces/default/pods", r#"{"metadata": {"name": "p", "labels": {"a b": "c"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}"#.to_string()),
        ("/api/v1/namespaces/default/pods", r#"{"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "lots"}}}]}}"#.to_string()),
    ];
    let mut refused = 0;
    for (collection, body) in &bodies {
        for (method, uri, content_type) in [
            ("POST", collection.to_string(), "application/json"),
            ("PUT", format!("{collection}/np"), "application/json"),
            (
                "PATCH",
                format!("{collection}/np"),
                "application/apply-patch+yaml",
            ),
        ] {
            let uri = uri.replace(
                "/np",
                if collection.contains("nodes") {
                    "/n"
                } else if collection.contains("pods") {
                    "/p"
                } else {
                    "/np"
                },
            );
            let request = http::Request::builder()
                .method(method)
                .uri(format!("{uri}?fieldManager=test&fieldValidation=Strict"))
                .header("content-type", content_type)
                .body(Full::new(Bytes::from(body.clone())))
                .unwrap();
            let response = service.handle(request).await;
            let code = response.status().as_u16();
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            let status: Value = serde_json::from_slice(&bytes).unwrap();
            assert!(
                code >= 400,
                "{method} {uri} {body}: stored ({code}) {status}"
            );
            assert_eq!(status["kind"], "Status", "{status}");
            refused += 1;
        }
    }
    assert_eq!(refused, bodies.len() * 3);
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(api.client());
    assert!(
        nodes
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(api.client(), "default");
    assert!(
        pods.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
