//! Patches and server-side apply over HTTP, the status subresource, generation and dry runs.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use crate::support;
use serde_json::{json, Value};
use support::{call, get, patch, post, put, start, CMS, DEPLOYMENTS};

const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn deployment() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]}]}}}})
}

#[tokio::test]
async fn the_three_patch_types() {
    let (_plane, client) = start().await;
    post(&client, DEPLOYMENTS, &deployment()).await;
    let (code, patched) = patch(
        &client,
        &format!("{DEPLOYMENTS}/web"),
        "application/strategic-merge-patch+json",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"B","value":"2"}]}]}}}}"#,
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(
        patched["spec"]["template"]["spec"]["containers"][0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]),
        "merged by name"
    );
    let (_, merged) = patch(
        &client,
        &format!("{DEPLOYMENTS}/web"),
        "application/merge-patch+json",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app:2"}]}}}}"#,
    )
    .await;
    assert_eq!(
        merged["spec"]["template"]["spec"]["containers"],
        json!([{"name": "app", "image": "app:2", "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}]),
        "a merge patch replaces lists (the env is gone); the new item gets kube's container defaults"
    );
    let (_, json_patched) = patch(
        &client,
        &format!("{DEPLOYMENTS}/web"),
        "application/json-patch+json",
        r#"[{"op":"replace","path":"/spec/replicas","value":3}]"#,
    )
    .await;
    assert_eq!(json_patched["spec"]["replicas"], 3);
    assert_eq!(json_patched["metadata"]["generation"], 4, "each spec change bumps generation");
    let (code, failed) = patch(
        &client,
        &format!("{DEPLOYMENTS}/web"),
        "application/json-patch+json",
        r#"[{"op":"test","path":"/spec/replicas","value":9}]"#,
    )
    .await;
    assert_eq!((code, failed["reason"].clone()), (422, json!("Invalid")));
    let (code, _) = patch(&client, &format!("{DEPLOYMENTS}/missing"), "application/merge-patch+json", "{}").await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn strategic_merge_is_not_for_custom_resources() {
    let (_plane, client) = start().await;
    support::install_widgets(&client).await;
    post(
        &client,
        WIDGETS,
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}),
    )
    .await;
    let (code, status) =
        patch(&client, &format!("{WIDGETS}/w"), "application/strategic-merge-patch+json", r#"{"spec":{"size":2}}"#)
            .await;
    assert_eq!(code, 415);
    assert_eq!(status["message"], "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
}

#[tokio::test]
async fn server_side_apply_owns_conflicts_forces_and_removes() {
    let (_plane, client) = start().await;
    let apply = |manager: &str, force: bool| format!("{CMS}/a?fieldManager={manager}&force={force}");
    let (code, created) = patch(
        &client,
        &apply("alice", false),
        "application/apply-patch+yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: '1'\n  y: '2'\n",
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["managedFields"][0]["fieldsV1"], json!({"f:data": {"f:x": {}, "f:y": {}}}));
    let (code, status) = patch(
        &client,
        &apply("bob", false),
        "application/apply-patch+yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: '9'\n",
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(status["message"], "Apply failed with 1 conflict: conflict with \"alice\" using v1: .data.x");
    assert_eq!(
        status["details"]["causes"][0],
        json!({"reason": "FieldManagerConflict", "message": "conflict with \"alice\" using v1", "field": ".data.x"})
    );
    let (code, forced) = patch(
        &client,
        &apply("bob", true),
        "application/apply-patch+yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: '9'\n",
    )
    .await;
    assert_eq!((code, forced["data"].clone()), (200, json!({"x": "9", "y": "2"})));
    let (_, dropped) = patch(
        &client,
        &apply("alice", false),
        "application/apply-patch+yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
    )
    .await;
    assert_eq!(dropped["data"], json!({"x": "9"}), "alice stopped applying y, which only she owned; x is bob's");
    let (code, status) = patch(
        &client,
        &format!("{CMS}/a"),
        "application/apply-patch+yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_applies_creating_one_object_all_succeed() {
    // kube-apiserver's GuaranteedUpdate starts an apply over when another write got in between: none of them sees
    // AlreadyExists or a conflict it did not cause.
    let (plane, client) = start().await;
    // Admission that takes a while, so the appliers' reads and commits interleave.
    let _slow = support::workloads::slow_configmap_writes(&plane).await;
    for round in 0..3 {
        let name = format!("raced-{round}");
        let applies = (0..8).map(|i| {
            let (client, name) = (client.clone(), name.clone());
            async move {
                let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                    "data": {format!("k{i}"): "v"}});
                let path = format!("{CMS}/{name}?fieldManager=m{i}");
                patch(&client, &path, "application/apply-patch+yaml", &body.to_string()).await
            }
        });
        let answers = futures_util::future::join_all(applies).await;
        for (code, body) in &answers {
            assert!(*code == 200 || *code == 201, "{code}: {body}");
        }
        assert_eq!(answers.iter().filter(|(code, _)| *code == 201).count(), 1, "one created it");
        let (_, applied) = get(&client, &format!("{CMS}/{name}")).await;
        assert_eq!(applied["data"].as_object().map(|data| data.len()), Some(8), "{applied}");
    }
}

#[tokio::test]
async fn a_resource_version_in_an_applied_configuration_is_a_precondition() {
    let (_plane, client) = start().await;
    let url = format!("{CMS}/rv?fieldManager=alice&force=true");
    let apply = |version: &str, value: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rv\n  resourceVersion: '{version}'\ndata:\n  x: '{value}'\n")
    };
    let (code, created) = patch(&client, &url, "application/apply-patch+yaml", &apply("", "1")).await;
    assert_eq!(code, 201, "{created}");
    let first = created["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
    let (code, updated) = patch(&client, &url, "application/apply-patch+yaml", &apply(&first, "2")).await;
    assert_eq!((code, updated["data"]["x"].clone()), (200, json!("2")), "{updated}");
    let (code, status) = patch(&client, &url, "application/apply-patch+yaml", &apply(&first, "3")).await;
    assert_eq!((code, status["reason"].clone()), (409, json!("Conflict")), "{status}");
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on configmaps \"rv\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(get(&client, &format!("{CMS}/rv")).await.1["data"]["x"], "2", "the stale apply changed nothing");
}

#[tokio::test]
async fn status_is_written_only_through_its_subresource_and_does_not_bump_generation() {
    let (_plane, client) = start().await;
    support::install_widgets(&client).await;
    let (_, created) = post(&client, WIDGETS, &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}, "status": {"ready": true}})).await;
    assert!(created.get("status").is_none(), "status is dropped on create");
    let mut main = created.clone();
    main["status"] = json!({"ready": true});
    main["metadata"]["labels"] = json!({"a": "b"});
    let (_, updated) = put(&client, &format!("{WIDGETS}/w"), &main).await;
    assert!(updated.get("status").is_none(), "the main resource ignores status");
    assert_eq!(updated["metadata"]["generation"], 1, "metadata changes keep generation");
    let mut with_status = updated.clone();
    with_status["status"] = json!({"ready": true});
    with_status["spec"]["size"] = json!(5);
    let (code, status_written) = put(&client, &format!("{WIDGETS}/w/status"), &with_status).await;
    assert_eq!(code, 200);
    assert_eq!(status_written["status"], json!({"ready": true}));
    assert_eq!(status_written["spec"]["size"], 1, "the status subresource ignores spec");
    assert_eq!(status_written["metadata"]["generation"], 1);
    let status_entry = status_written["metadata"]["managedFields"]
        .as_array()
        .expect("entries")
        .iter()
        .find(|e| e["subresource"] == "status")
        .cloned()
        .expect("status manager");
    assert_eq!(status_entry["fieldsV1"], json!({"f:status": {"f:ready": {}}}));
    let (_, spec_changed) =
        patch(&client, &format!("{WIDGETS}/w"), "application/merge-patch+json", r#"{"spec":{"size":2}}"#).await;
    assert_eq!(spec_changed["metadata"]["generation"], 2);
    assert_eq!(spec_changed["status"], json!({"ready": true}));
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let (_plane, client) = start().await;
    let (code, answered) = call(
        &client,
        "POST",
        &format!("{CMS}?dryRun=All"),
        "application/json",
        &json!({"metadata": {"name": "dry"}}).to_string(),
    )
    .await;
    assert_eq!((code, answered["metadata"]["name"].clone()), (201, json!("dry")));
    assert_eq!(get(&client, &format!("{CMS}/dry")).await.0, 404);
    // A dry run answers as the write would: a name that is taken is AlreadyExists.
    post(&client, CMS, &json!({"metadata": {"name": "taken"}})).await;
    let (code, refused) = call(
        &client,
        "POST",
        &format!("{CMS}?dryRun=All"),
        "application/json",
        &json!({"metadata": {"name": "taken"}}).to_string(),
    )
    .await;
    assert_eq!((code, refused["reason"].clone()), (409, json!("AlreadyExists")), "{refused}");
}

/// kube-apiserver's Deployment strategy counts a change of a Deployment's annotations in its generation (the
/// Deployment controller copies them onto its ReplicaSets); its labels, and a status write, leave it.
#[tokio::test]
async fn a_deployments_annotations_count_in_its_generation_and_its_labels_do_not() {
    let (_plane, client) = start().await;
    post(&client, DEPLOYMENTS, &deployment()).await;
    let mut generations = Vec::new();
    for body in [
        r#"{"metadata":{"labels":{"team":"x"}}}"#,
        r#"{"metadata":{"annotations":{"note":"one"}}}"#,
        r#"{"metadata":{"annotations":{"note":"one"}}}"#,
        r#"{"metadata":{"annotations":{"note":null}}}"#,
    ] {
        let (code, patched) = patch(&client, &format!("{DEPLOYMENTS}/web"), "application/merge-patch+json", body).await;
        assert_eq!(code, 200, "{patched}");
        generations.push(patched["metadata"]["generation"].clone());
    }
    assert_eq!(generations, [json!(1), json!(2), json!(2), json!(3)]);
    let status = r#"{"status":{"observedGeneration":3}}"#;
    let (_, written) =
        patch(&client, &format!("{DEPLOYMENTS}/web/status"), "application/merge-patch+json", status).await;
    assert_eq!(written["metadata"]["generation"], 3, "a status write keeps the generation");
}

#[tokio::test]
async fn the_scale_subresource_reads_and_writes_replicas() {
    let (_plane, client) = start().await;
    post(&client, DEPLOYMENTS, &deployment()).await;
    let (code, scale) = get(&client, &format!("{DEPLOYMENTS}/web/scale")).await;
    assert_eq!(code, 200);
    assert_eq!((scale["kind"].clone(), scale["apiVersion"].clone()), (json!("Scale"), json!("autoscaling/v1")));
    assert_eq!((scale["spec"]["replicas"].clone(), scale["status"]["selector"].clone()), (json!(1), json!("app=web")));
    let (code, scaled) = patch(
        &client,
        &format!("{DEPLOYMENTS}/web/scale"),
        "application/merge-patch+json",
        r#"{"spec":{"replicas":3}}"#,
    )
    .await;
    assert_eq!((code, scaled["spec"]["replicas"].clone()), (200, json!(3)));
    let (_, deployment) = get(&client, &format!("{DEPLOYMENTS}/web")).await;
    assert_eq!(
        (deployment["spec"]["replicas"].clone(), deployment["metadata"]["generation"].clone()),
        (json!(3), json!(2))
    );
    let mut stale = scale.clone();
    stale["spec"]["replicas"] = json!(5);
    let (code, status) = put(&client, &format!("{DEPLOYMENTS}/web/scale"), &stale).await;
    assert_eq!((code, status["reason"].clone()), (409, json!("Conflict")));
    let (code, status) = patch(
        &client,
        &format!("{DEPLOYMENTS}/web/scale"),
        "application/merge-patch+json",
        r#"{"spec":{"replicas":-1}}"#,
    )
    .await;
    assert_eq!((code, status["message"].clone()), (422, json!("Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0")));
    let (code, _) = get(&client, "/api/v1/namespaces/default/configmaps/x/scale").await;
    assert_eq!(code, 404, "ConfigMaps have no scale subresource");
}
