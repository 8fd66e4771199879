//! Aggregated APIs: an APIService becomes Available when its backend answers discovery, its resources appear in
//! discovery, and requests are proxied after authorization with the caller's identity in front-proxy headers on a
//! client certificate the backend verifies.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use crate::support;
use kube_emulator::backend::Backend;
use kube_emulator::ControlPlane;
use serde_json::{json, Value};
use support::workloads::{api_service, metrics_backend};
use support::{eventually, get, post, start};

async fn available(admin: &kube::Client) -> Value {
    let (_, service) = get(admin, "/apis/apiregistration.k8s.io/v1/apiservices/v1.metrics.example.com").await;
    service["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Available").cloned())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn an_api_service_is_available_discovered_and_proxied_with_the_callers_identity() {
    let (plane, admin) = start().await;
    let backend = metrics_backend(&plane).await;
    let (code, body) =
        post(&admin, "/apis/apiregistration.k8s.io/v1/apiservices", &api_service(&backend.ca_bundle())).await;
    assert_eq!(code, 201, "{body}");
    eventually("ServiceNotFound", || async { available(&admin).await["reason"] == "ServiceNotFound" }).await;
    assert_eq!(available(&admin).await["message"], "service/metrics in \"default\" is not present");
    post(
        &admin,
        "/api/v1/namespaces/default/services",
        &json!({"metadata": {"name": "metrics"}, "spec": {"ports": [{"port": 443}]}}),
    )
    .await;
    eventually("MissingEndpoints", || async { available(&admin).await["reason"] == "MissingEndpoints" }).await;
    plane.api.endpoints.set("default", "metrics", backend.address);
    eventually("Available", || async { available(&admin).await["status"] == "True" }).await;
    assert_eq!(available(&admin).await["reason"], "Passed");

    let (_, groups) = get(&admin, "/apis").await;
    assert!(groups["groups"].as_array().expect("groups").iter().any(|g| g["name"] == "metrics.example.com"));
    let (_, resources) = get(&admin, "/apis/metrics.example.com/v1").await;
    assert_eq!(resources["resources"][0]["name"], "samples");

    let alice = ControlPlane::client_for(&plane.user_kubeconfig("alice", &["team"])).await.expect("client");
    let path = "/apis/metrics.example.com/v1/namespaces/default/samples";
    let (code, status) = get(&alice, path).await;
    assert_eq!((code, status["message"].clone()), (403, json!("samples.metrics.example.com is forbidden: User \"alice\" cannot list resource \"samples\" in API group \"metrics.example.com\" in the namespace \"default\"")), "authorized before proxying");
    post(&admin, "/apis/rbac.authorization.k8s.io/v1/clusterroles", &json!({"metadata": {"name": "samples-reader"}, "rules": [{"apiGroups": ["metrics.example.com"], "resources": ["samples"], "verbs": ["list"]}]})).await;
    post(&admin, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", &json!({"metadata": {"name": "alice-samples"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "samples-reader"}, "subjects": [{"kind": "User", "name": "alice"}]})).await;
    let (code, list) = get(&alice, path).await;
    assert_eq!(code, 200, "{list}");
    let sample = &list["items"][0];
    assert_eq!(sample["remoteUser"], "alice");
    assert_eq!(sample["remoteGroups"], json!(["team", "system:authenticated"]));
    assert_eq!(sample["proxyClient"], "front-proxy-client", "the backend verified the front-proxy certificate");
    assert_eq!(sample["authorization"], json!([]), "the caller's credentials are not forwarded");
    assert!(plane.api.audit.records().iter().any(|r| r.user == "alice" && r.resource == "samples" && r.code == 200));

    support::delete(&admin, "/apis/apiregistration.k8s.io/v1/apiservices/v1.metrics.example.com", &json!({})).await;
    eventually("no longer served", || async { get(&admin, "/apis/metrics.example.com/v1").await.0 == 404 }).await;
}

#[tokio::test]
async fn a_backend_the_ca_bundle_does_not_trust_is_not_available() {
    let (plane, admin) = start().await;
    let backend = metrics_backend(&plane).await;
    let stranger = Backend::start(axum::Router::new(), &["x"], None).await.expect("backend");
    post(
        &admin,
        "/api/v1/namespaces/default/services",
        &json!({"metadata": {"name": "metrics"}, "spec": {"ports": [{"port": 443}]}}),
    )
    .await;
    plane.api.endpoints.set("default", "metrics", backend.address);
    post(&admin, "/apis/apiregistration.k8s.io/v1/apiservices", &api_service(&stranger.ca_bundle())).await;
    eventually("FailedDiscoveryCheck", || async { available(&admin).await["reason"] == "FailedDiscoveryCheck" }).await;
    assert!(available(&admin).await["message"]
        .as_str()
        .expect("message")
        .starts_with("failing or missing response from https://"));
    assert_eq!(get(&admin, "/apis/metrics.example.com/v1/namespaces/default/samples").await.0, 404);
}
