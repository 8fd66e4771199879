//! Create, get, update and their errors, as kube-apiserver answers them: identity set by the server, 404, 409
//! AlreadyExists and Conflict, 422 Invalid with causes, 400 BadRequest, 405, the terminating-namespace 403, and
//! unknown fields dropped or refused per `fieldValidation`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use crate::support;
use serde_json::json;
use support::{get, patch, post, put, start, CMS};

#[tokio::test]
async fn create_get_and_the_errors_of_missing_and_duplicate_objects() {
    let (_plane, client) = start().await;
    let (code, created) = post(
        &client,
        CMS,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(created["metadata"]["namespace"], "default", "filled in from the URL");
    assert_eq!(created["metadata"]["uid"].as_str().map(str::len), Some(36));
    assert!(created["metadata"].get("generation").is_none(), "ConfigMaps do not track generation");
    assert_eq!(created["metadata"]["managedFields"][0]["manager"], "olmv2-tests", "the User-Agent names the manager");
    let (code, fetched) = get(&client, &format!("{CMS}/a")).await;
    assert_eq!((code, fetched["data"]["k"].clone()), (200, json!("v")));

    let (code, status) = get(&client, &format!("{CMS}/missing")).await;
    assert_eq!(code, 404);
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "configmaps \"missing\" not found", "reason": "NotFound", "details": {"name": "missing", "kind": "configmaps"}, "code": 404})
    );

    let (code, status) = post(&client, CMS, &json!({"metadata": {"name": "a"}})).await;
    assert_eq!(
        (code, status["reason"].clone(), status["message"].clone()),
        (409, json!("AlreadyExists"), json!("configmaps \"a\" already exists"))
    );

    let (code, status) =
        post(&client, "/api/v1/namespaces/nowhere/configmaps", &json!({"metadata": {"name": "a"}})).await;
    assert_eq!((code, status["message"].clone()), (404, json!("namespaces \"nowhere\" not found")));

    let (code, generated) = post(&client, CMS, &json!({"metadata": {"generateName": "gen-"}})).await;
    assert_eq!(code, 201);
    let name = generated["metadata"]["name"].as_str().expect("name");
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
}

#[tokio::test]
async fn a_stale_update_conflicts_and_a_fresh_one_succeeds() {
    let (_plane, client) = start().await;
    let (_, created) = post(&client, CMS, &json!({"metadata": {"name": "a"}, "data": {"k": "1"}})).await;
    let mut first = created.clone();
    first["data"]["k"] = json!("2");
    let (code, updated) = put(&client, &format!("{CMS}/a"), &first).await;
    assert_eq!(code, 200);
    assert_ne!(updated["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"]);
    assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);
    let mut stale = created.clone();
    stale["data"]["k"] = json!("3");
    let (code, status) = put(&client, &format!("{CMS}/a"), &stale).await;
    assert_eq!(code, 409);
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(status["message"], "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again");
    let (code, status) = put(&client, &format!("{CMS}/b"), &json!({"metadata": {"name": "a"}})).await;
    assert_eq!(
        (code, status["message"].clone()),
        (400, json!("the name of the object (a) does not match the name on the URL (b)"))
    );
}

#[tokio::test]
async fn invalid_names_labels_and_annotations_are_refused_with_causes() {
    let (_plane, client) = start().await;
    let (code, status) = post(&client, CMS, &json!({"metadata": {"name": "Bad_Name", "labels": {"ok": "-bad"}}})).await;
    assert_eq!(code, 422);
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["details"]["kind"], "ConfigMap");
    let fields: Vec<&str> = status["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| c["field"].as_str().expect("field"))
        .collect();
    assert_eq!(fields, ["metadata.name", "metadata.labels"]);
    assert_eq!(status["details"]["causes"][0]["reason"], "FieldValueInvalid");
    assert!(status["message"].as_str().expect("message").starts_with("ConfigMap \"Bad_Name\" is invalid: [metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"), "{}", status["message"]);
    let (code, status) = post(&client, "/api/v1/namespaces", &json!({"metadata": {"name": "has.dot"}})).await;
    assert_eq!(code, 422, "namespace names are DNS labels");
    assert!(status["message"].as_str().expect("message").contains("a lowercase RFC 1123 label"));
    let (code, _) = post(
        &client,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        &json!({"metadata": {"name": "system:controller:x"}, "rules": []}),
    )
    .await;
    assert_eq!(code, 201, "RBAC names are path segments");
    let (code, status) = post(&client, CMS, &json!({"metadata": {}})).await;
    assert_eq!(
        (code, status["message"].clone()),
        (422, json!("ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required"))
    );
}

#[tokio::test]
async fn unknown_fields_are_refused_when_strict_reported_when_warned_and_dropped_when_ignored() {
    let (_plane, client) = start().await;
    let body = json!({"metadata": {"name": "a"}, "data": {"k": "v"}, "bogus": 1}).to_string();
    let (code, status) =
        support::call(&client, "POST", &format!("{CMS}?fieldValidation=Strict"), "application/json", &body).await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\""
    );
    let (code, created) =
        support::call(&client, "POST", &format!("{CMS}?fieldValidation=Ignore"), "application/json", &body).await;
    assert_eq!(code, 201);
    assert!(created.get("bogus").is_none(), "dropped as the Go type would");
    // Without fieldValidation the server warns, as kube-apiserver does by default.
    let request = http::Request::post(CMS)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(json!({"metadata": {"name": "warned"}, "bogus": 1}).to_string().into_bytes()))
        .expect("request");
    let response = client.send(request).await.expect("sent");
    assert_eq!(response.status(), 201);
    let warnings: Vec<&str> = response.headers().get_all("warning").iter().map(|v| v.to_str().expect("text")).collect();
    assert_eq!(warnings, ["299 - \"unknown field \\\"bogus\\\"\""]);
    let (code, status) = post(&client, CMS, &json!({"metadata": {"name": "b"}, "data": {"k": 1}})).await;
    assert_eq!(code, 400);
    assert!(status["message"]
        .as_str()
        .expect("message")
        .starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: "));
}

#[tokio::test]
async fn verbs_a_resource_does_not_have_and_unknown_paths() {
    let (_plane, client) = start().await;
    let (code, status) = get(&client, "/apis/authorization.k8s.io/v1/subjectaccessreviews").await;
    assert_eq!((code, status["reason"].clone()), (405, json!("MethodNotAllowed")));
    let (code, status) = get(&client, "/apis/nothing.example.com/v1/things").await;
    assert_eq!((code, status["reason"].clone()), (404, json!("NotFound")));
    let (code, status) = patch(&client, &format!("{CMS}/a"), "text/plain", "x").await;
    assert_eq!((code, status["reason"].clone()), (415, json!("UnsupportedMediaType")));
    let (code, status) = get(&client, &format!("{CMS}?labelSelector=a%20in%20b")).await;
    assert_eq!((code, status["reason"].clone()), (400, json!("BadRequest")));
}

#[tokio::test]
async fn custom_resources_are_pruned_defaulted_and_validated_against_their_schema() {
    let (_plane, client) = start().await;
    support::install_widgets(&client).await;
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let body = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "annotations": {"a": "b"}}, "spec": {"size": 2, "extra": true}}).to_string();
    let (code, created) =
        support::call(&client, "POST", &format!("{path}?fieldValidation=Ignore"), "application/json", &body).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"], json!({"size": 2, "color": "blue"}), "unknown field pruned, default applied");
    assert_eq!(created["metadata"]["annotations"], json!({"a": "b"}));
    assert_eq!(created["metadata"]["generation"], 1);
    let (code, status) = post(
        &client,
        path,
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "v"}, "spec": {"size": "big"}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(status["message"], "Widget.example.com \"v\" is invalid: spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"");
    assert_eq!(status["details"]["group"], "example.com");
    let (code, status) = post(
        &client,
        path,
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "v"}, "spec": {"size": 0}}),
    )
    .await;
    assert_eq!((code, status["message"].clone()), (422, json!("Widget.example.com \"v\" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1")));
    let (code, status) =
        post(&client, path, &json!({"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "v"}}))
            .await;
    assert_eq!(
        (code, status["message"].clone()),
        (
            400,
            json!(
                "the API version in the data (example.com/v2) does not match the expected API version (example.com/v1)"
            )
        )
    );
}

#[tokio::test]
async fn creating_in_a_terminating_namespace_is_forbidden() {
    let (_plane, client) = start().await;
    post(&client, "/api/v1/namespaces", &json!({"metadata": {"name": "going"}})).await;
    post(
        &client,
        "/api/v1/namespaces/going/configmaps",
        &json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )
    .await;
    let (code, namespace) = support::delete(&client, "/api/v1/namespaces/going", &json!({})).await;
    assert_eq!(code, 200);
    assert_eq!(namespace["status"]["phase"], "Terminating");
    let (code, status) =
        post(&client, "/api/v1/namespaces/going/configmaps", &json!({"metadata": {"name": "new"}})).await;
    assert_eq!(code, 403);
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["message"], "configmaps \"new\" is forbidden: unable to create new content in namespace going because it is being terminated");
    assert_eq!(status["details"]["causes"][0]["reason"], "NamespaceTerminating");
    let (code, status) = support::delete(&client, "/api/v1/namespaces/default", &json!({})).await;
    assert_eq!(
        (code, status["message"].clone()),
        (403, json!("namespaces \"default\" is forbidden: this namespace may not be deleted"))
    );
}
