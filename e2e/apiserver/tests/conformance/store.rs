//! The emulator store's semantics, each asserted exactly: resourceVersion and conflicts, immutable uid, list order,
//! selectors and pagination, and watches (replay, initial state, selector transitions, 410 Gone).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::time::Duration;

use kube_emulator::storage::selectors::LabelSelector;
use kube_emulator::storage::store::{EventType, Filter, ResourceId, Store, StoreError};
use serde_json::{json, Value};

fn configmaps() -> ResourceId {
    ResourceId::new("", "configmaps")
}

fn configmap(namespace: &str, name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace, "labels": labels}, "data": {"k": "v"}})
}

fn rv(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"].as_str().expect("rv").parse().expect("number")
}

#[test]
fn create_sets_identity_once_and_refuses_duplicates() {
    let store = Store::new(100);
    let created = store.create(&configmaps(), configmap("a", "one", json!({}))).expect("created");
    assert_eq!(created["metadata"]["uid"].as_str().map(str::len), Some(36));
    assert!(created["metadata"]["creationTimestamp"].as_str().expect("time").ends_with('Z'));
    assert_eq!(rv(&created), store.revision());
    let error = store.create(&configmaps(), configmap("a", "one", json!({}))).expect_err("duplicate");
    assert_eq!(error.to_string(), "configmaps \"one\" already exists");
    assert_eq!(error.code_and_reason(), (409, "AlreadyExists"));
    store.create(&configmaps(), configmap("b", "one", json!({}))).expect("same name in another namespace");
}

#[test]
fn a_stale_write_is_a_conflict_and_identity_is_kept() {
    let store = Store::new(100);
    let created = store.create(&configmaps(), configmap("a", "one", json!({}))).expect("created");
    let mut first = created.clone();
    first["data"]["k"] = json!("first");
    let updated = store.update(&configmaps(), first).expect("update at the current rv");
    assert!(rv(&updated) > rv(&created));
    assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);

    let mut stale = created.clone();
    stale["data"]["k"] = json!("stale");
    let error = store.update(&configmaps(), stale).expect_err("stale");
    assert_eq!(error.to_string(), "Operation cannot be fulfilled on configmaps \"one\": the object has been modified; please apply your changes to the latest version and try again");
    assert_eq!(error.code_and_reason(), (409, "Conflict"));

    let mut unconditional = configmap("a", "one", json!({}));
    unconditional["data"]["k"] = json!("forced");
    let forced = store.update(&configmaps(), unconditional).expect("no resourceVersion means no precondition");
    assert_eq!(forced["metadata"]["creationTimestamp"], created["metadata"]["creationTimestamp"]);
    assert_eq!(store.get(&configmaps(), "a", "one").expect("get")["data"]["k"], "forced");
}

#[test]
fn an_update_naming_another_uid_is_a_conflict() {
    let store = Store::new(100);
    store.create(&configmaps(), configmap("a", "one", json!({}))).expect("created");
    let mut impostor = configmap("a", "one", json!({}));
    impostor["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    let error = store.update(&configmaps(), impostor).expect_err("uid precondition");
    assert_eq!(error.code_and_reason(), (409, "Conflict"));
    assert!(
        error.to_string().contains("Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000"),
        "{error}"
    );
}

#[test]
fn deleted_objects_carry_a_new_resource_version() {
    let store = Store::new(100);
    let created = store.create(&configmaps(), configmap("a", "one", json!({}))).expect("created");
    let deleted = store.delete(&configmaps(), "a", "one", None).expect("deleted");
    assert_eq!(rv(&deleted), store.revision());
    assert!(rv(&deleted) > rv(&created));
    assert_eq!(deleted["metadata"]["uid"], created["metadata"]["uid"]);
}

#[test]
fn delete_removes_and_respects_preconditions() {
    let store = Store::new(100);
    let created = store.create(&configmaps(), configmap("a", "one", json!({}))).expect("created");
    let error = store.delete(&configmaps(), "a", "one", Some(rv(&created) - 1)).expect_err("stale precondition");
    assert_eq!(error.code_and_reason(), (409, "Conflict"));
    store.delete(&configmaps(), "a", "one", Some(rv(&created))).expect("deleted");
    let error = store.get(&configmaps(), "a", "one").expect_err("gone");
    assert_eq!(error, StoreError::NotFound { resource: "configmaps".into(), name: "one".into() });
    assert_eq!(error.code_and_reason(), (404, "NotFound"));
}

#[test]
fn lists_are_ordered_filtered_and_paginated() {
    let store = Store::new(100);
    for (namespace, name, tier) in [("b", "x", "web"), ("a", "z", "db"), ("a", "y", "web"), ("a", "w", "web")] {
        store.create(&configmaps(), configmap(namespace, name, json!({"tier": tier}))).expect("created");
    }
    let names = |page: &kube_emulator::storage::store::Page| -> Vec<String> {
        page.items
            .iter()
            .map(|o| {
                format!("{}/{}", o["metadata"]["namespace"].as_str().unwrap(), o["metadata"]["name"].as_str().unwrap())
            })
            .collect()
    };
    let all = store.list(&configmaps(), &Filter::default(), None, None).expect("list");
    assert_eq!(names(&all), ["a/w", "a/y", "a/z", "b/x"]);
    assert_eq!(all.revision, store.revision());
    let web_in_a = Filter {
        namespace: Some("a".into()),
        labels: LabelSelector::parse("tier=web").expect("selector"),
        ..Filter::default()
    };
    assert_eq!(names(&store.list(&configmaps(), &web_in_a, None, None).expect("list")), ["a/w", "a/y"]);

    let first = store.list(&configmaps(), &Filter::default(), Some(3), None).expect("page 1");
    assert_eq!(names(&first), ["a/w", "a/y", "a/z"]);
    assert_eq!(first.remaining, Some(1));
    let token = first.continue_token.clone().expect("continue");
    let second = store.list(&configmaps(), &Filter::default(), Some(3), Some(&token)).expect("page 2");
    assert_eq!(names(&second), ["b/x"]);
    assert_eq!((second.continue_token, second.remaining, second.revision), (None, None, first.revision));
    assert!(matches!(store.list(&configmaps(), &Filter::default(), None, Some("zz")), Err(StoreError::BadRequest(_))));
}

async fn next(watch: &mut kube_emulator::storage::store::Watch) -> (EventType, String) {
    let event = tokio::time::timeout(Duration::from_secs(1), watch.next())
        .await
        .expect("an event within 1 s")
        .expect("ok")
        .expect("open");
    (event.kind, event.object["metadata"]["name"].as_str().expect("name").to_owned())
}

#[tokio::test]
async fn a_watch_replays_from_a_revision_then_follows() {
    let store = Store::new(100);
    let first = store.create(&configmaps(), configmap("a", "one", json!({}))).expect("created");
    store.create(&configmaps(), configmap("a", "two", json!({}))).expect("created");
    let mut watch = store.watch(&configmaps(), Filter::default(), Some(rv(&first))).expect("watch");
    assert_eq!(next(&mut watch).await, (EventType::Added, "two".into()));
    store.delete(&configmaps(), "a", "one", None).expect("deleted");
    assert_eq!(next(&mut watch).await, (EventType::Deleted, "one".into()));
    store.create(&ResourceId::new("", "secrets"), configmap("a", "other-kind", json!({}))).expect("created");
    store.create(&configmaps(), configmap("a", "three", json!({}))).expect("created");
    assert_eq!(next(&mut watch).await, (EventType::Added, "three".into()), "other resources are not seen");
}

#[tokio::test]
async fn a_watch_without_revision_starts_with_the_current_objects() {
    let store = Store::new(100);
    store.create(&configmaps(), configmap("a", "one", json!({}))).expect("created");
    store.create(&configmaps(), configmap("b", "two", json!({}))).expect("created");
    let mut watch =
        store.watch(&configmaps(), Filter { namespace: Some("b".into()), ..Filter::default() }, None).expect("watch");
    assert_eq!(next(&mut watch).await, (EventType::Added, "two".into()));
    store.create(&configmaps(), configmap("b", "three", json!({}))).expect("created");
    assert_eq!(next(&mut watch).await, (EventType::Added, "three".into()));
}

#[tokio::test]
async fn objects_entering_and_leaving_a_selector_are_added_and_deleted() {
    let store = Store::new(100);
    let filter = Filter {
        labels: LabelSelector::parse("v2alpha1.operators.coreos.com/plumbus").expect("selector"),
        ..Filter::default()
    };
    let created = store.create(&configmaps(), configmap("a", "one", json!({}))).expect("created");
    let mut watch = store.watch(&configmaps(), filter, Some(rv(&created))).expect("watch");
    let mut labelled = created.clone();
    labelled["metadata"]["labels"] = json!({"v2alpha1.operators.coreos.com/plumbus": ""});
    let labelled = store.update(&configmaps(), labelled).expect("labelled");
    assert_eq!(next(&mut watch).await, (EventType::Added, "one".into()));
    let mut changed = labelled.clone();
    changed["data"]["k"] = json!("new");
    let changed = store.update(&configmaps(), changed).expect("changed");
    assert_eq!(next(&mut watch).await, (EventType::Modified, "one".into()));
    let mut unlabelled = changed.clone();
    unlabelled["metadata"]["labels"] = json!({});
    store.update(&configmaps(), unlabelled).expect("unlabelled");
    assert_eq!(next(&mut watch).await, (EventType::Deleted, "one".into()));
}

#[test]
fn a_compacted_revision_is_gone() {
    let store = Store::new(3);
    let first = store.create(&configmaps(), configmap("a", "first", json!({}))).expect("created");
    for index in 0..5 {
        store.create(&configmaps(), configmap("a", &format!("n{index}"), json!({}))).expect("created");
    }
    let error = store.watch(&configmaps(), Filter::default(), Some(rv(&first))).err().expect("gone");
    assert_eq!(error.code_and_reason(), (410, "Expired"));
    assert!(error.to_string().starts_with(&format!("too old resource version: {}", rv(&first))), "{error}");
    store.watch(&configmaps(), Filter::default(), Some(store.revision())).expect("recent revisions are watchable");
}

#[test]
fn an_update_that_changes_nothing_but_managed_field_times_is_no_write() {
    let store = Store::new(100);
    let mut object = configmap("a", "one", json!({}));
    object["metadata"]["managedFields"] = json!([{"manager": "m", "operation": "Apply", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {}}]);
    let created = store.create(&configmaps(), object).expect("created");
    let revision = store.revision();
    let mut same = created.clone();
    same["metadata"]["managedFields"][0]["time"] = json!("2026-01-02T00:00:00Z");
    let stored = store.update(&configmaps(), same).expect("no-op update");
    assert_eq!(rv(&stored), rv(&created));
    assert_eq!(store.revision(), revision, "a no-op update must not bump the revision (and so sends no event)");
    assert_eq!(stored["metadata"]["managedFields"][0]["time"], "2026-01-01T00:00:00Z");
    let mut changed = created.clone();
    changed["data"]["k"] = json!("other");
    let stored = store.update(&configmaps(), changed).expect("real update");
    assert!(rv(&stored) > rv(&created));
}
