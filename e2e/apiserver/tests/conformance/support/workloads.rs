//! Workloads the cluster would run, for tests: an aggregated API server (`metrics.example.com/v1`, `samples` that
//! say who asked), an admission webhook that refuses ConfigMaps labelled `deny=true`, and the AdmissionReview
//! answer every test webhook gives.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::HeaderMap;
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
        "remoteUser": values("x-remote-user").first(), "remoteGroups": values("x-remote-group"), "proxyClient": client.0, "authorization": values("authorization")}]}),
    )
}

pub async fn metrics_backend(plane: &ControlPlane) -> Backend {
    let router = axum::Router::new()
        .route("/apis/metrics.example.com/v1", axum::routing::get(discovery))
        .route("/apis/metrics.example.com/v1/namespaces/{namespace}/samples", axum::routing::get(samples));
    Backend::start(router, &["metrics.default.svc"], Some(&plane.front_proxy_ca_pem)).await.expect("backend")
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
