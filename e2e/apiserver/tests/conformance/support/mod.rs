//! Shared helpers of the emulator's tests: a started control plane and raw requests that return the status code
//! and the JSON body, so tests can assert the exact `Status` kube-apiserver would answer; the paths and CRDs tests
//! write; kubectl and the commands it runs (`kubectl`); workloads the cluster would run (`workloads`). The project's
//! suites include this module too (as `support::emulator`), so what both need is written once.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

pub mod kubectl;
pub mod workloads;

use http_body_util::BodyExt;
use kube_emulator::{ControlPlane, Options};
use serde_json::Value;

/// The ConfigMaps of the `default` namespace, the objects most tests write.
pub const CMS: &str = "/api/v1/namespaces/default/configmaps";
/// The Deployments of the `default` namespace.
pub const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

pub async fn start() -> (ControlPlane, kube::Client) {
    let options = Options { bookmark_interval: Duration::from_millis(300), ..Options::default() };
    let plane = ControlPlane::start(options).await.expect("control plane starts");
    let client = plane.client().await.expect("client");
    (plane, client)
}

/// A request with a JSON (or other) body; answers the status code and the body as JSON.
pub async fn call(client: &kube::Client, method: &str, path: &str, content_type: &str, body: &str) -> (u16, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", "application/json")
        .header("user-agent", "olmv2-tests/1.0 (linux)")
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .expect("request");
    let response = client.send(request).await.expect("sent");
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    let value =
        serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (code, value)
}

pub async fn get(client: &kube::Client, path: &str) -> (u16, Value) {
    call(client, "GET", path, "application/json", "").await
}

pub async fn post(client: &kube::Client, path: &str, body: &Value) -> (u16, Value) {
    call(client, "POST", path, "application/json", &body.to_string()).await
}

pub async fn put(client: &kube::Client, path: &str, body: &Value) -> (u16, Value) {
    call(client, "PUT", path, "application/json", &body.to_string()).await
}

pub async fn patch(client: &kube::Client, path: &str, content_type: &str, body: &str) -> (u16, Value) {
    call(client, "PATCH", path, content_type, body).await
}

pub async fn delete(client: &kube::Client, path: &str, body: &Value) -> (u16, Value) {
    call(client, "DELETE", path, "application/json", &body.to_string()).await
}

/// Polls until `check` holds, for up to five seconds.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..100 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The CustomResourceDefinitions committed in the repository's `crds/` (the project's, generated from its types, and
/// kept current by its own tests): real schemas, with defaults, printer columns, `oneOf` and nested objects, for
/// what kubectl reads of custom kinds.
pub fn repository_crds() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds");
    let mut files: Vec<_> =
        std::fs::read_dir(&dir).expect("crds/ exists").map(|entry| entry.expect("entry").path()).collect();
    files.sort();
    files
        .iter()
        .map(|path| serde_yaml_ng::from_str(&std::fs::read_to_string(path).expect("readable")).expect("YAML"))
        .collect()
}

pub fn crd(plural: &str, kind: &str, scope: &str, schema: Value, status: bool) -> Value {
    let mut version = serde_json::json!({"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema},
        "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]});
    if status {
        version["subresources"] = serde_json::json!({"status": {}});
    }
    serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": format!("{plural}.example.com")},
        "spec": {"group": "example.com", "scope": scope, "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind}, "versions": [version]}})
}

pub fn widget_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer", "minimum": 1}, "color": {"type": "string", "default": "blue"}}},
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}})
}

/// Creates the `widgets.example.com` CRD (namespaced, with a status subresource) and waits until it is served.
pub async fn install_widgets(client: &kube::Client) {
    let (code, body) = post(
        client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd("widgets", "Widget", "Namespaced", widget_schema(), true),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    eventually("widgets served", || async {
        get(client, "/apis/example.com/v1/namespaces/default/widgets").await.0 == 200
    })
    .await;
}
