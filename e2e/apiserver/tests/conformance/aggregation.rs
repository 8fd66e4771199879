//! Aggregated APIs: an APIService becomes Available when its backend answers discovery, its resources appear in
//! discovery, and requests are proxied after authorization with the caller's identity in front-proxy headers on a
//! client certificate the backend verifies; the `extension-apiserver-authentication` ConfigMap says how to trust
//! that proxy and who may read it; the backend's OpenAPI v3 group-versions are listed in `/openapi/v3` and their
//! documents proxied.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use crate::support;
use kube_emulator::backend::Backend;
use kube_emulator::ControlPlane;
use serde_json::{json, Value};
use support::workloads::{api_service, metrics_backend, metrics_backend_recording};
use support::workloads::{metrics_openapi_document, METRICS_OPENAPI_URL};
use support::{eventually, get, post, start};

const AUTHENTICATION: &str = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication";

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
    assert_eq!(sample["remoteUid"], Value::Null, "a client certificate's user has no uid");
    let (_, robot) =
        post(&admin, "/api/v1/namespaces/default/serviceaccounts", &json!({"metadata": {"name": "robot"}})).await;
    let (_, issued) = post(
        &admin,
        "/api/v1/namespaces/default/serviceaccounts/robot/token",
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}),
    )
    .await;
    let robot_client =
        ControlPlane::client_for(&plane.token_kubeconfig(issued["status"]["token"].as_str().expect("token")))
            .await
            .expect("client");
    post(&admin, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", &json!({"metadata": {"name": "robot-samples"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "samples-reader"}, "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}]})).await;
    let (code, list) = get(&robot_client, path).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["items"][0]["remoteUser"], "system:serviceaccount:default:robot");
    assert_eq!(list["items"][0]["remoteUid"], robot["metadata"]["uid"], "Kubernetes 1.33 forwards the uid");
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

/// Makes the metrics server's Service, endpoints and APIService, and waits until it is Available.
async fn register_metrics(plane: &ControlPlane, admin: &kube::Client, backend: &Backend) {
    post(
        admin,
        "/api/v1/namespaces/default/services",
        &json!({"metadata": {"name": "metrics"}, "spec": {"ports": [{"port": 443}]}}),
    )
    .await;
    plane.api.endpoints.set("default", "metrics", backend.address);
    let (code, body) =
        post(admin, "/apis/apiregistration.k8s.io/v1/apiservices", &api_service(&backend.ca_bundle())).await;
    assert_eq!(code, 201, "{body}");
    eventually("Available", || async { available(admin).await["status"] == "True" }).await;
}

#[tokio::test]
async fn the_extension_apiserver_authentication_config_map_says_how_to_trust_the_front_proxy() {
    let (plane, admin) = start().await;
    let (code, config_map) = get(&admin, AUTHENTICATION).await;
    assert_eq!(code, 200, "published when the control plane has started: {config_map}");
    assert_eq!(
        config_map["data"],
        json!({
            "client-ca-file": plane.ca_pem,
            "requestheader-client-ca-file": plane.front_proxy_ca_pem,
            "requestheader-allowed-names": "[\"front-proxy-client\"]",
            "requestheader-username-headers": "[\"X-Remote-User\"]",
            "requestheader-uid-headers": "[]",
            "requestheader-group-headers": "[\"X-Remote-Group\"]",
            "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
        })
    );
    assert_eq!(config_map["metadata"]["managedFields"][0]["manager"], "kube-apiserver");

    // The proxy's certificate is named as the ConfigMap says (the metrics server verifies it against the CA the
    // ConfigMap publishes).
    let allowed: Vec<String> =
        serde_json::from_str(config_map["data"]["requestheader-allowed-names"].as_str().expect("names"))
            .expect("a JSON list");
    let backend = metrics_backend(&plane).await;
    register_metrics(&plane, &admin, &backend).await;
    let (_, list) = get(&admin, "/apis/metrics.example.com/v1/namespaces/default/samples").await;
    assert_eq!(allowed, [list["items"][0]["proxyClient"].as_str().expect("the proxy's name")]);
    assert_eq!(allowed, [kube_emulator::server::FRONT_PROXY_CLIENT]);

    // The bootstrap Role that reads it, and only it.
    let (code, role) = get(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles/extension-apiserver-authentication-reader",
    )
    .await;
    assert_eq!(code, 200, "{role}");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["extension-apiserver-authentication"], "verbs": ["get", "list", "watch"]}])
    );
    assert_eq!(role["metadata"]["labels"], json!({"kubernetes.io/bootstrapping": "rbac-defaults"}));
    assert_eq!(role["metadata"]["annotations"], json!({"rbac.authorization.kubernetes.io/autoupdate": "true"}));
    let (code, binding) = get(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings/system::extension-apiserver-authentication-reader",
    )
    .await;
    assert_eq!((code, binding["roleRef"]["name"].clone()), (200, json!("extension-apiserver-authentication-reader")));
    let reader = ControlPlane::client_for(&plane.user_kubeconfig("metrics-server", &[])).await.expect("client");
    assert_eq!(get(&reader, AUTHENTICATION).await.0, 403, "not bound yet");
    let (code, body) = post(&admin, "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings", &json!({
        "metadata": {"name": "metrics-server-auth-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"},
        "subjects": [{"kind": "User", "name": "metrics-server"}]})).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(get(&reader, AUTHENTICATION).await.1["data"], config_map["data"]);
    assert_eq!(get(&reader, "/api/v1/namespaces/kube-system/configmaps/kube-root-ca.crt").await.0, 403);

    // Deleted, it is put back.
    assert_eq!(support::delete(&admin, AUTHENTICATION, &json!({})).await.0, 200);
    eventually("republished", || async { get(&admin, AUTHENTICATION).await.1["data"] == config_map["data"] }).await;
}

async fn raw_get(client: &kube::Client, url: &str) -> (u16, http::HeaderMap, Vec<u8>) {
    raw_get_with(client, url, &[]).await
}

async fn raw_get_with(client: &kube::Client, url: &str, headers: &[(&str, &str)]) -> (u16, http::HeaderMap, Vec<u8>) {
    use http_body_util::BodyExt;
    let mut request = http::Request::get(url).header("accept", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(kube::client::Body::empty()).expect("request");
    let response = client.send(request).await.expect("sent");
    let (parts, body) = response.into_parts();
    (parts.status.as_u16(), parts.headers, body.collect().await.expect("body").to_bytes().to_vec())
}

#[tokio::test]
async fn an_aggregated_servers_openapi_v3_group_versions_are_listed_and_their_documents_proxied() {
    let (plane, admin) = start().await;
    let (backend, requests) = metrics_backend_recording(&plane).await;
    let (_, before) = get(&admin, "/openapi/v3").await;
    assert!(before["paths"].get("apis/metrics.example.com/v1").is_none());
    register_metrics(&plane, &admin, &backend).await;

    let (code, index) = get(&admin, "/openapi/v3").await;
    assert_eq!(code, 200);
    assert_eq!(
        index["paths"]["apis/metrics.example.com/v1"],
        json!({"serverRelativeURL": METRICS_OPENAPI_URL}),
        "the backend's own URL and hash"
    );
    assert_eq!(index["paths"]["api/v1"], before["paths"]["api/v1"], "this server's documents are still listed");
    assert_eq!(
        requests.lock().unwrap().first().cloned(),
        Some(json!({"path": "/openapi/v3", "user": "system:aggregator", "groups": []})),
        "read as kube-aggregator's downloader"
    );

    let alice = ControlPlane::client_for(&plane.user_kubeconfig("alice", &["team"])).await.expect("client");
    let (code, headers, body) = raw_get(&alice, METRICS_OPENAPI_URL).await;
    assert_eq!(code, 200);
    assert_eq!(serde_json::from_slice::<Value>(&body).expect("JSON"), metrics_openapi_document());
    assert_eq!(headers.get("cache-control").and_then(|v| v.to_str().ok()), Some("public, immutable"));
    let etag = headers.get("etag").and_then(|v| v.to_str().ok()).expect("an entity tag").to_owned();
    assert_eq!(raw_get_with(&alice, METRICS_OPENAPI_URL, &[("if-none-match", &etag)]).await.0, 304);
    assert_eq!(
        requests.lock().unwrap().last().cloned(),
        Some(
            json!({"path": "/openapi/v3/apis/metrics.example.com/v1", "user": "alice", "groups": ["team", "system:authenticated"]})
        ),
        "proxied as the caller"
    );
    let (code, headers, _) = raw_get(&alice, "/openapi/v3/apis/metrics.example.com/v1?hash=STALE").await;
    assert_eq!(
        (code, headers.get("location").and_then(|v| v.to_str().ok())),
        (301, Some(METRICS_OPENAPI_URL)),
        "the backend's answer to a stale hash"
    );
    let anonymous = plane.token_kubeconfig("not-a-token");
    let stranger = ControlPlane::client_for(&anonymous).await.expect("client");
    assert_eq!(raw_get(&stranger, METRICS_OPENAPI_URL).await.0, 401, "authenticated before proxying");
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let index_reads = || requests.lock().unwrap().iter().filter(|r| r["path"] == "/openapi/v3").count();
    assert_eq!(index_reads(), 1, "the index read is kept for a minute, not read again on every pass");

    // Unavailable, it is no longer listed; available again, it is read again.
    support::delete(&admin, "/api/v1/namespaces/default/services/metrics", &json!({})).await;
    eventually("unavailable", || async { available(&admin).await["reason"] == "ServiceNotFound" }).await;
    assert!(get(&admin, "/openapi/v3").await.1["paths"].get("apis/metrics.example.com/v1").is_none());
    assert_eq!(raw_get(&alice, METRICS_OPENAPI_URL).await.0, 404);
    post(
        &admin,
        "/api/v1/namespaces/default/services",
        &json!({"metadata": {"name": "metrics"}, "spec": {"ports": [{"port": 443}]}}),
    )
    .await;
    eventually("listed again", || async {
        get(&admin, "/openapi/v3").await.1["paths"].get("apis/metrics.example.com/v1").is_some()
    })
    .await;
    assert_eq!(index_reads(), 2);

    support::delete(&admin, "/apis/apiregistration.k8s.io/v1/apiservices/v1.metrics.example.com", &json!({})).await;
    eventually("no longer listed", || async {
        get(&admin, "/openapi/v3").await.1["paths"].get("apis/metrics.example.com/v1").is_none()
    })
    .await;
    assert_eq!(raw_get(&alice, METRICS_OPENAPI_URL).await.0, 404);
}
