//! Workloads the cluster would run, for tests: an aggregated API server (`metrics.example.com/v1`, `samples` that
//! say who asked, and its OpenAPI v3 index and document, served with kube-openapi's hash checks and recording who
//! asked for them), an admission webhook that refuses ConfigMaps labelled `deny=true`, one that makes ConfigMap
//! writes slow (to stop a controller mid-apply), and the AdmissionReview answer every test webhook gives.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::{HeaderMap, Uri};
use kube_emulator::backend::{Backend, ClientName};
use kube_emulator::ControlPlane;
use serde_json::{json, Value};

fn json_response(value: &Value) -> axum::response::Response {
    axum::response::Response::builder()
        .header("content-type", "application/json")
        .body(axum::body::Body::from(value.to_string()))
        .expect("response")
}

/// A webhook's answer to the AdmissionReview `review`: `response` (`allowed`, a `status`, a `patch`...) for its uid.
pub fn admission_answer(review: &Value, response: Value) -> axum::response::Response {
    let mut response = response;
    response["uid"] = review["request"]["uid"].clone();
    json_response(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}))
}

async fn discovery() -> axum::response::Response {
    json_response(&json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "metrics.example.com/v1",
        "resources": [{"name": "samples", "singularName": "sample", "namespaced": true, "kind": "Sample", "verbs": ["get", "list"]}]}))
}

/// Lists one sample that says who asked, as the backend saw it.
async fn samples(
    Path(namespace): Path<String>,
    headers: HeaderMap,
    axum::Extension(client): axum::Extension<ClientName>,
) -> axum::response::Response {
    let values = |name: &str| -> Vec<String> {
        headers.get_all(name).iter().filter_map(|v| v.to_str().ok().map(str::to_owned)).collect()
    };
    json_response(
        &json!({"kind": "SampleList", "apiVersion": "metrics.example.com/v1", "metadata": {"resourceVersion": "1"}, "items": [{
        "apiVersion": "metrics.example.com/v1", "kind": "Sample", "metadata": {"name": "who-asked", "namespace": namespace, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "remoteUser": values("x-remote-user").first(), "remoteUid": values("x-remote-uid").first(), "remoteGroups": values("x-remote-group"), "proxyClient": client.0, "authorization": values("authorization")}]}),
    )
}

/// The hash the metrics server's OpenAPI v3 index gives its document (kube-openapi's would be the SHA-512 of the
/// content; to the aggregator it is opaque).
pub const METRICS_OPENAPI_HASH: &str = "5A3B1E";
/// Where the metrics server's index says its document is.
pub const METRICS_OPENAPI_URL: &str = "/openapi/v3/apis/metrics.example.com/v1?hash=5A3B1E";

/// The metrics server's OpenAPI v3 document: the `Sample` kind, described for `kubectl explain`.
pub fn metrics_openapi_document() -> Value {
    let gvk = json!({"group": "metrics.example.com", "version": "v1", "kind": "Sample"});
    json!({"openapi": "3.0.0", "info": {"title": "metrics", "version": "v1"},
        "paths": {"/apis/metrics.example.com/v1/namespaces/{namespace}/samples": {"get": {
            "operationId": "listMetricsV1NamespacedSample", "x-kubernetes-action": "list", "x-kubernetes-group-version-kind": gvk,
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/com.example.metrics.v1.SampleList"}}}}}}}},
        "components": {"schemas": {
            "com.example.metrics.v1.Sample": {"type": "object", "description": "A sample that says who asked for it.",
                "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                    "remoteUser": {"type": "string", "description": "The user the aggregator said was asking."},
                    "remoteGroups": {"type": "array", "items": {"type": "string"}, "description": "The groups of that user."}},
                "x-kubernetes-group-version-kind": [gvk]},
            "com.example.metrics.v1.SampleList": {"type": "object", "properties": {
                "items": {"type": "array", "items": {"$ref": "#/components/schemas/com.example.metrics.v1.Sample"}}},
                "x-kubernetes-group-version-kind": [{"group": "metrics.example.com", "version": "v1", "kind": "SampleList"}]}}}})
}

/// Who asked the metrics server for what: `{"path", "user", "groups"}` per request, as its handlers saw them.
pub type Requests = Arc<Mutex<Vec<Value>>>;

fn record(requests: &Requests, path: &str, headers: &HeaderMap) {
    let values: Vec<String> =
        headers.get_all("x-remote-group").iter().filter_map(|v| v.to_str().ok().map(str::to_owned)).collect();
    let user = headers.get("x-remote-user").and_then(|v| v.to_str().ok());
    requests.lock().expect("requests").push(json!({"path": path, "user": user, "groups": values}));
}

async fn openapi_index(
    headers: HeaderMap,
    axum::Extension(requests): axum::Extension<Requests>,
) -> axum::response::Response {
    record(&requests, "/openapi/v3", &headers);
    json_response(&json!({"paths": {"apis/metrics.example.com/v1": {"serverRelativeURL": METRICS_OPENAPI_URL}}}))
}

/// The document as kube-openapi serves it: with the index's hash, cacheable for good; with another, moved there;
/// not again to a client that has it (`If-None-Match`).
async fn openapi_document(
    uri: Uri,
    headers: HeaderMap,
    axum::Extension(requests): axum::Extension<Requests>,
) -> axum::response::Response {
    record(&requests, "/openapi/v3/apis/metrics.example.com/v1", &headers);
    let builder = axum::response::Response::builder();
    let hash = uri.query().unwrap_or_default().split('&').find_map(|pair| pair.strip_prefix("hash="));
    match hash {
        Some(hash) if hash != METRICS_OPENAPI_HASH => builder
            .status(301)
            .header("location", METRICS_OPENAPI_URL)
            .body(axum::body::Body::empty())
            .expect("response"),
        _ if headers.get("if-none-match").is_some_and(|tag| tag == format!("\"{METRICS_OPENAPI_HASH}\"").as_str()) => {
            builder.status(304).body(axum::body::Body::empty()).expect("response")
        }
        hash => {
            let builder = builder
                .header("content-type", "application/json")
                .header("etag", format!("\"{METRICS_OPENAPI_HASH}\""));
            let builder = if hash.is_some() { builder.header("cache-control", "public, immutable") } else { builder };
            builder.body(axum::body::Body::from(metrics_openapi_document().to_string())).expect("response")
        }
    }
}

pub async fn metrics_backend(plane: &ControlPlane) -> Backend {
    metrics_backend_recording(plane).await.0
}

/// The metrics server, and what it records of the requests for its OpenAPI documents.
pub async fn metrics_backend_recording(plane: &ControlPlane) -> (Backend, Requests) {
    let requests = Requests::default();
    let router = axum::Router::new()
        .route("/apis/metrics.example.com/v1", axum::routing::get(discovery))
        .route("/apis/metrics.example.com/v1/namespaces/{namespace}/samples", axum::routing::get(samples))
        .route("/openapi/v3", axum::routing::get(openapi_index))
        .route("/openapi/v3/apis/metrics.example.com/v1", axum::routing::get(openapi_document))
        .layer(axum::Extension(requests.clone()));
    let backend =
        Backend::start(router, &["metrics.default.svc"], Some(&plane.front_proxy_ca_pem)).await.expect("backend");
    (backend, requests)
}

pub fn api_service(ca_bundle: &str) -> Value {
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.metrics.example.com"},
        "spec": {"group": "metrics.example.com", "version": "v1", "service": {"namespace": "default", "name": "metrics", "port": 443},
                 "caBundle": ca_bundle, "groupPriorityMinimum": 100, "versionPriority": 100}})
}

async fn deny_labelled(body: Bytes) -> axum::response::Response {
    let review: Value = serde_json::from_slice(&body).expect("AdmissionReview");
    let denied = review["request"]["object"]["metadata"]["labels"]["deny"] == "true";
    let mut response = json!({"allowed": !denied});
    if denied {
        response["status"] =
            json!({"code": 403, "reason": "Forbidden", "message": "objects labelled deny=true are refused"});
    }
    admission_answer(&review, response)
}

/// A webhook service `default/webhooks` refusing ConfigMaps labelled `deny=true`, and its configuration.
pub async fn deny_webhook(plane: &ControlPlane) -> (Backend, Value) {
    let backend = Backend::start(
        axum::Router::new().route("/validate", axum::routing::post(deny_labelled)),
        &["webhooks.default.svc"],
        None,
    )
    .await
    .expect("webhook");
    plane.api.endpoints.set("default", "webhooks", backend.address);
    let configuration = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "deny-labelled"},
        "webhooks": [{"name": "deny.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"service": {"namespace": "default", "name": "webhooks", "path": "/validate"}, "caBundle": backend.ca_bundle()},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}]});
    (backend, configuration)
}

/// A webhook that makes every ConfigMap write take a while, so a controller can be stopped in the middle of an apply.
pub async fn slow_configmap_writes(plane: &ControlPlane) -> Backend {
    let backend = slow_configmap_webhook().await;
    plane.api.endpoints.set("default", "slow", backend.address);
    let admin = plane.client().await.unwrap();
    let api = kube::Api::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>::all(admin);
    let configuration = slow_configmap_configuration(&backend, None);
    api.create(&Default::default(), &serde_json::from_value(configuration).unwrap()).await.unwrap();
    backend
}

/// The server of [`slow_configmap_writes`], serving for the Service `default/slow`.
pub async fn slow_configmap_webhook() -> Backend {
    async fn slowly(body: axum::body::Bytes) -> axum::response::Response {
        let review: Value = serde_json::from_slice(&body).unwrap();
        tokio::time::sleep(Duration::from_millis(40)).await;
        admission_answer(&review, json!({"allowed": true}))
    }
    Backend::start(axum::Router::new().route("/slow", axum::routing::post(slowly)), &["slow.default.svc"], None)
        .await
        .unwrap()
}

/// The configuration of [`slow_configmap_writes`]'s webhook, through the Service `default/slow` (on `port`, if given).
pub fn slow_configmap_configuration(backend: &Backend, port: Option<u16>) -> Value {
    let mut service = json!({"namespace": "default", "name": "slow", "path": "/slow"});
    if let Some(port) = port {
        service["port"] = json!(port);
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "slow"},
        "webhooks": [{"name": "slow.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"service": service, "caBundle": backend.ca_bundle()},
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}]})
}
