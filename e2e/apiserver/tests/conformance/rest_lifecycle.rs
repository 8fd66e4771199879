//! Lifecycles: finalizers and deletionTimestamp, namespace termination, garbage collection by ownerReferences
//! (background, foreground with blockOwnerDeletion, orphan, dangling owners), and CustomResourceDefinitions from
//! Established to removal.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use crate::support;
use serde_json::{json, Value};
use support::{delete, eventually, get, patch, post, start, CMS};

async fn exists(client: &kube::Client, path: &str) -> bool {
    get(client, path).await.0 == 200
}

fn owned_by(name: &str, owner: &Value, block: bool) -> Value {
    json!({"metadata": {"name": name, "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"], "blockOwnerDeletion": block}]}})
}

#[tokio::test]
async fn finalizers_hold_an_object_until_removed() {
    let (_plane, client) = start().await;
    post(&client, CMS, &json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})).await;
    let (code, deleting) = delete(&client, &format!("{CMS}/held"), &json!({})).await;
    assert_eq!(code, 200);
    assert!(deleting["metadata"]["deletionTimestamp"].is_string(), "{deleting}");
    assert!(exists(&client, &format!("{CMS}/held")).await);
    let (code, status) = patch(
        &client,
        &format!("{CMS}/held"),
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":["example.com/hold","example.com/more"]}}"#,
    )
    .await;
    assert_eq!(code, 422);
    assert!(status["message"]
        .as_str()
        .expect("message")
        .contains("no new finalizers can be added if the object is being deleted"));
    let (code, _) =
        patch(&client, &format!("{CMS}/held"), "application/merge-patch+json", r#"{"metadata":{"finalizers":null}}"#)
            .await;
    assert_eq!(code, 200);
    assert!(!exists(&client, &format!("{CMS}/held")).await, "gone with its last finalizer");
    let (code, status) = delete(&client, &format!("{CMS}/held"), &json!({})).await;
    assert_eq!((code, status["reason"].clone()), (404, json!("NotFound")));
    post(&client, CMS, &json!({"metadata": {"name": "plain"}})).await;
    let (code, status) = delete(&client, &format!("{CMS}/plain"), &json!({})).await;
    assert_eq!(
        (code, status["status"].clone(), status["details"]["name"].clone()),
        (200, json!("Success"), json!("plain"))
    );
}

#[tokio::test]
async fn a_deleted_namespace_empties_then_disappears() {
    let (_plane, client) = start().await;
    post(&client, "/api/v1/namespaces", &json!({"metadata": {"name": "team"}})).await;
    eventually("default service account", || async {
        exists(&client, "/api/v1/namespaces/team/serviceaccounts/default").await
    })
    .await;
    post(
        &client,
        "/api/v1/namespaces/team/configmaps",
        &json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )
    .await;
    delete(&client, "/api/v1/namespaces/team", &json!({})).await;
    eventually("content deleted but held", || async {
        let (_, held) = get(&client, "/api/v1/namespaces/team/configmaps/held").await;
        held["metadata"]["deletionTimestamp"].is_string()
            && !exists(&client, "/api/v1/namespaces/team/serviceaccounts/default").await
    })
    .await;
    assert!(exists(&client, "/api/v1/namespaces/team").await, "the namespace waits for its content");
    patch(
        &client,
        "/api/v1/namespaces/team/configmaps/held",
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    eventually("namespace gone", || async { !exists(&client, "/api/v1/namespaces/team").await }).await;
}

#[tokio::test]
async fn background_deletion_collects_dependents_and_orphaning_keeps_them() {
    let (_plane, client) = start().await;
    let (_, owner) = post(&client, CMS, &json!({"metadata": {"name": "owner"}})).await;
    post(&client, CMS, &owned_by("child", &owner, false)).await;
    delete(&client, &format!("{CMS}/owner"), &json!({"propagationPolicy": "Background"})).await;
    eventually("child collected", || async { !exists(&client, &format!("{CMS}/child")).await }).await;

    let (_, owner) = post(&client, CMS, &json!({"metadata": {"name": "owner2"}})).await;
    post(&client, CMS, &owned_by("kept", &owner, false)).await;
    let (code, _) = delete(&client, &format!("{CMS}/owner2"), &json!({"propagationPolicy": "Orphan"})).await;
    assert_eq!(code, 200);
    eventually("owner gone", || async { !exists(&client, &format!("{CMS}/owner2")).await }).await;
    let (_, kept) = get(&client, &format!("{CMS}/kept")).await;
    // Removed, and with it the field: Go writes no empty list (`omitempty`).
    assert_eq!(kept["metadata"].get("ownerReferences"), None, "the reference to the owner is removed");
    assert_eq!(kept["metadata"]["name"], "kept");
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let (_plane, client) = start().await;
    let (_, owner) = post(&client, CMS, &json!({"metadata": {"name": "owner"}})).await;
    post(&client, CMS, &json!({"metadata": {"name": "blocker", "finalizers": ["example.com/hold"], "ownerReferences": owned_by("", &owner, true)["metadata"]["ownerReferences"]}})).await;
    let (code, deleting) = delete(&client, &format!("{CMS}/owner"), &json!({"propagationPolicy": "Foreground"})).await;
    assert_eq!(code, 202);
    assert_eq!(deleting["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    eventually("blocker being deleted", || async {
        get(&client, &format!("{CMS}/blocker")).await.1["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    assert!(exists(&client, &format!("{CMS}/owner")).await, "the owner waits for its blocking dependent");
    patch(&client, &format!("{CMS}/blocker"), "application/merge-patch+json", r#"{"metadata":{"finalizers":null}}"#)
        .await;
    eventually("owner gone", || async { !exists(&client, &format!("{CMS}/owner")).await }).await;
}

#[tokio::test]
async fn an_object_whose_owner_does_not_exist_is_collected() {
    let (_plane, client) = start().await;
    let ghost = json!({"metadata": {"name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"}});
    post(&client, CMS, &owned_by("orphaned", &ghost, false)).await;
    eventually("dangling dependent collected", || async { !exists(&client, &format!("{CMS}/orphaned")).await }).await;
}

#[tokio::test]
async fn a_crd_is_established_serves_its_kind_and_takes_its_objects_when_deleted() {
    let (_plane, client) = start().await;
    support::install_widgets(&client).await;
    let (_, crd) = get(&client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com").await;
    let conditions: Vec<(String, String)> = crd["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .map(|c| (c["type"].as_str().expect("t").to_owned(), c["status"].as_str().expect("s").to_owned()))
        .collect();
    assert_eq!(
        conditions,
        [("NamesAccepted".to_owned(), "True".to_owned()), ("Established".to_owned(), "True".to_owned())]
    );
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Widget");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    let (_, discovery) = get(&client, "/apis/example.com/v1").await;
    let names: Vec<&str> = discovery["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| r["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["widgets", "widgets/status"]);

    let clash = support::crd("gadgets", "Widget", "Namespaced", support::widget_schema(), false);
    post(&client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &clash).await;
    let (_, clash) = get(&client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com").await;
    let names_accepted = clash["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["type"] == "NamesAccepted")
        .cloned()
        .expect("condition");
    assert_eq!(
        (names_accepted["status"].clone(), names_accepted["reason"].clone(), names_accepted["message"].clone()),
        (json!("False"), json!("SingularConflict"), json!("\"widget\" is already in use"))
    );
    assert_eq!(
        get(&client, "/apis/example.com/v1/namespaces/default/gadgets").await.0,
        404,
        "not served until its names are accepted"
    );

    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let held = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "finalizers": ["example.com/hold"]}});
    post(&client, widgets, &held).await;
    let (code, deleting) =
        delete(&client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com", &json!({}))
            .await;
    assert_eq!(code, 200);
    assert_eq!(deleting["metadata"]["finalizers"], json!(["customresourcecleanup.apiextensions.k8s.io"]));
    eventually("the widget being deleted", || async {
        get(&client, &format!("{widgets}/w")).await.1["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    let (code, status) = post(
        &client,
        widgets,
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "late"}}),
    )
    .await;
    assert_eq!((code, status["reason"].clone()), (405, json!("MethodNotAllowed")), "{status}");
    assert!(status["message"]
        .as_str()
        .expect("message")
        .contains("create not allowed while custom resource definition is terminating"));
    assert!(
        exists(&client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com").await,
        "held by its last widget"
    );
    patch(&client, &format!("{widgets}/w"), "application/merge-patch+json", r#"{"metadata":{"finalizers":null}}"#)
        .await;
    eventually("CRD and its objects gone", || async {
        !exists(&client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com").await
    })
    .await;
    let (code, _) = get(&client, "/apis/example.com/v1/namespaces/default/widgets").await;
    assert_eq!(code, 404, "no longer served");
    let (code, status) = post(&client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "bad.example.com"}, "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"}, "versions": []}})).await;
    assert_eq!((code, status["reason"].clone()), (422, json!("Invalid")));
}
