//! Lists and watches over HTTP: label and field selectors, pagination with `limit`/`continue`, watches from a
//! resourceVersion, bookmarks, `sendInitialEvents`, 410 Gone for a compacted resourceVersion, Tables, and
//! metadata only (PartialObjectMetadata).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::time::Duration;

use crate::support;
use futures_util::StreamExt;
use http_body_util::BodyExt;
use kube_emulator::{ControlPlane, Options};
use serde_json::{json, Value};
use support::{get, post, start, CMS};

async fn seed(client: &kube::Client, count: usize) {
    for i in 0..count {
        let tier = if i % 2 == 0 { "even" } else { "odd" };
        let (code, _) =
            post(client, CMS, &json!({"metadata": {"name": format!("cm-{i:02}"), "labels": {"tier": tier}}})).await;
        assert_eq!(code, 201);
    }
}

/// The seeded ConfigMaps a list holds: every namespace also has kube-controller-manager's `kube-root-ca.crt`, and
/// `kube-system` kube-apiserver's `extension-apiserver-authentication`.
fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["metadata"]["name"].as_str().expect("name").to_owned())
        .filter(|name| name != "kube-root-ca.crt" && name != "extension-apiserver-authentication")
        .collect()
}

#[tokio::test]
async fn selectors_and_pages() {
    let (_plane, client) = start().await;
    seed(&client, 5).await;
    let (_, odd) = get(&client, &format!("{CMS}?labelSelector=tier%3Dodd")).await;
    assert_eq!(names(&odd), ["cm-01", "cm-03"]);
    assert!(odd["items"][0].get("kind").is_none(), "items of built-in lists carry no type");
    assert_eq!(odd["kind"], "ConfigMapList");
    let (_, one) = get(&client, &format!("{CMS}?fieldSelector=metadata.name%3Dcm-04")).await;
    assert_eq!(names(&one), ["cm-04"]);
    let (code, status) = get(&client, &format!("{CMS}?fieldSelector=data.x%3D1")).await;
    assert_eq!((code, status["message"].clone()), (400, json!("field label not supported: data.x")));
    let (_, first) = get(&client, &format!("{CMS}?limit=2")).await;
    assert_eq!(names(&first), ["cm-00", "cm-01"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 4, "three seeded and kube-root-ca.crt");
    let token = first["metadata"]["continue"].as_str().expect("continue");
    let (_, second) = get(&client, &format!("{CMS}?limit=2&continue={token}")).await;
    assert_eq!(names(&second), ["cm-02", "cm-03"]);
    let token = second["metadata"]["continue"].as_str().expect("continue");
    let (_, last) = get(&client, &format!("{CMS}?limit=2&continue={token}")).await;
    assert_eq!(names(&last), ["cm-04"]);
    assert_eq!(last["items"][1]["metadata"]["name"], "kube-root-ca.crt");
    assert!(last["metadata"].get("continue").is_none());
    let (_, all) = get(&client, "/api/v1/configmaps").await;
    assert_eq!(names(&all).len(), 5, "cluster-wide list across namespaces");
}

/// Reads watch events from a streamed response until `count` arrived.
async fn events(client: &kube::Client, path: &str, count: usize) -> Vec<Value> {
    let request = http::Request::get(path).body(kube::client::Body::empty()).expect("request");
    let response = client.send(request).await.expect("watch");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body().into_data_stream();
    let mut buffer = Vec::new();
    let mut found = Vec::new();
    while found.len() < count {
        let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
            .await
            .expect("an event in time")
            .expect("stream open")
            .expect("chunk");
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            found.push(serde_json::from_slice(&line).expect("event JSON"));
        }
    }
    found
}

#[tokio::test]
async fn watches_replay_from_a_resource_version_and_send_bookmarks() {
    let (_plane, client) = start().await;
    let (_, a) = post(&client, CMS, &json!({"metadata": {"name": "a"}})).await;
    let from = a["metadata"]["resourceVersion"].as_str().expect("rv").to_owned();
    post(&client, CMS, &json!({"metadata": {"name": "b"}})).await;
    support::delete(&client, &format!("{CMS}/a"), &json!({})).await;
    let seen = events(&client, &format!("{CMS}?watch=true&resourceVersion={from}&allowWatchBookmarks=true"), 3).await;
    let kinds: Vec<&str> = seen.iter().map(|e| e["type"].as_str().expect("type")).collect();
    assert_eq!(kinds, ["ADDED", "DELETED", "BOOKMARK"]);
    assert_eq!(seen[0]["object"]["metadata"]["name"], "b");
    assert_eq!(seen[0]["object"]["kind"], "ConfigMap");
    assert_eq!(seen[2]["object"]["kind"], "ConfigMap");
    assert!(seen[2]["object"]["metadata"]["resourceVersion"].as_str().is_some());
}

#[tokio::test]
async fn send_initial_events_ends_with_the_annotated_bookmark() {
    let (_plane, client) = start().await;
    seed(&client, 2).await;
    let seen = events(
        &client,
        &format!("{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
        4,
    )
    .await;
    let kinds: Vec<&Value> = seen.iter().map(|event| &event["type"]).collect();
    assert_eq!(kinds, [&json!("ADDED"), &json!("ADDED"), &json!("ADDED"), &json!("BOOKMARK")]);
    let added: Vec<&Value> = seen[..3].iter().map(|event| &event["object"]["metadata"]["name"]).collect();
    assert_eq!(added, [&json!("cm-00"), &json!("cm-01"), &json!("kube-root-ca.crt")]);
    assert_eq!(seen[3]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    let (code, status) = get(&client, &format!("{CMS}?watch=true&sendInitialEvents=true")).await;
    assert_eq!((code, status["reason"].clone()), (422, json!("Invalid")));
}

#[tokio::test]
async fn a_compacted_resource_version_is_gone() {
    let options = Options { history_limit: 3, ..Options::default() };
    let plane = ControlPlane::start(options).await.expect("starts");
    let client = plane.client().await.expect("client");
    let (_, first) = post(&client, CMS, &json!({"metadata": {"name": "first"}})).await;
    seed(&client, 6).await;
    let from = first["metadata"]["resourceVersion"].as_str().expect("rv");
    let seen = events(&client, &format!("{CMS}?watch=true&resourceVersion={from}"), 1).await;
    assert_eq!(seen[0]["type"], "ERROR");
    assert_eq!(seen[0]["object"]["code"], 410);
    assert_eq!(seen[0]["object"]["reason"], "Expired");
    assert!(seen[0]["object"]["message"].as_str().expect("message").starts_with("too old resource version: "));
}

#[tokio::test]
async fn tables_for_kubectl_get() {
    let (_plane, client) = start().await;
    support::install_widgets(&client).await;
    post(
        &client,
        "/apis/example.com/v1/namespaces/default/widgets",
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}}),
    )
    .await;
    let request = http::Request::get("/apis/example.com/v1/namespaces/default/widgets")
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
        .body(kube::client::Body::empty())
        .expect("request");
    let response = client.send(request).await.expect("sent");
    let table: Value =
        serde_json::from_slice(&response.into_body().collect().await.expect("body").to_bytes()).expect("JSON");
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| c["name"].as_str().expect("name"))
        .collect();
    assert_eq!(columns, ["Name", "Size"]);
    assert_eq!(table["rows"][0]["cells"], json!(["w", 3]));
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
}

#[tokio::test]
async fn a_kube_runtime_watcher_sees_changes() {
    use kube::runtime::{watcher, WatchStreamExt};
    let (_plane, client) = start().await;
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client.clone(), "default");
    for config in [watcher::Config::default(), watcher::Config::default().streaming_lists()] {
        let name = if config.initial_list_strategy == watcher::InitialListStrategy::StreamingList {
            "streamed"
        } else {
            "listed"
        };
        let stream = watcher(api.clone(), config).applied_objects();
        let mut stream = Box::pin(stream);
        post(&client, CMS, &json!({"metadata": {"name": name}})).await;
        let seen = tokio::time::timeout(Duration::from_secs(5), async {
            while let Some(object) = stream.next().await {
                let object = object.expect("no watch error");
                if object.metadata.name.as_deref() == Some(name) {
                    return object;
                }
            }
            panic!("stream ended")
        })
        .await
        .expect("seen in time");
        assert_eq!(seen.metadata.namespace.as_deref(), Some("default"));
    }
}

#[tokio::test]
async fn metadata_only_lists_gets_and_watches_as_kube_asks_them() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::PartialObjectMeta;
    use kube::runtime::{watcher, WatchStreamExt};
    let (_plane, client) = start().await;
    post(&client, CMS, &json!({"metadata": {"name": "meta", "labels": {"tier": "a"}}, "data": {"big": "x"}})).await;
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), "default");
    let one = api.get_metadata("meta").await.expect("get_metadata");
    assert_eq!(
        one.types.as_ref().map(|t| (t.api_version.as_str(), t.kind.as_str())),
        Some(("meta.k8s.io/v1", "PartialObjectMetadata"))
    );
    assert_eq!(one.metadata.labels.as_ref().and_then(|l| l.get("tier")).map(String::as_str), Some("a"));
    let list = api.list_metadata(&kube::api::ListParams::default().limit(1)).await.expect("list_metadata");
    assert_eq!(list.types.kind, "PartialObjectMetadataList");
    assert_eq!(list.items.len(), 1);
    assert!(list.metadata.continue_.is_some(), "the list's own metadata is kept");
    // On the wire: metadata alone, no data.
    let accept =
        |path: &str, value: &str| http::Request::get(path).header("accept", value).body(Vec::new()).expect("request");
    let raw: Value = client
        .request(accept(&format!("{CMS}/meta"), "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"))
        .await
        .expect("raw get");
    assert_eq!(
        raw,
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": raw["metadata"]})
    );
    assert!(raw.get("data").is_none());
    // The object form asked of a list is refused, as kube-apiserver refuses it.
    let refused = client
        .request_text(accept(CMS, "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"))
        .await
        .expect_err("406");
    assert!(matches!(refused, kube::Error::Api(ref status) if status.code == 406), "{refused:?}");
    // A write asking for a form that cannot be made is refused before it is made, as kube-apiserver negotiates.
    let write = http::Request::post(CMS)
        .header("accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2")
        .header("content-type", "application/json")
        .body(json!({"metadata": {"name": "never"}}).to_string().into_bytes())
        .expect("request");
    let refused = client.request_text(write).await.expect_err("406");
    assert!(matches!(refused, kube::Error::Api(ref status) if status.code == 406), "{refused:?}");
    assert_eq!(get(&client, &format!("{CMS}/never")).await.0, 404, "nothing was written");
    // kube-runtime's watcher of metadata (an `Api` of PartialObjectMeta asks for metadata only) sees a change.
    let metadata: kube::Api<PartialObjectMeta<ConfigMap>> = kube::Api::namespaced(client.clone(), "default");
    let mut stream = Box::pin(watcher(metadata, watcher::Config::default()).applied_objects());
    post(&client, CMS, &json!({"metadata": {"name": "watched"}})).await;
    let seen = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(object) = stream.next().await {
            let object = object.expect("no watch error");
            if object.metadata.name.as_deref() == Some("watched") {
                return object;
            }
        }
        panic!("stream ended")
    })
    .await
    .expect("seen in time");
    assert_eq!(seen.types.map(|t| t.kind), Some("PartialObjectMetadata".to_owned()));
}

#[tokio::test]
async fn deletecollection_deletes_what_the_selector_selects() {
    let (_plane, client) = start().await;
    seed(&client, 4).await;
    let (code, deleted) = support::delete(&client, &format!("{CMS}?labelSelector=tier%3Deven"), &json!({})).await;
    assert_eq!(code, 200);
    assert_eq!(deleted["kind"], "ConfigMapList");
    assert_eq!(names(&deleted), ["cm-00", "cm-02"]);
    let (_, left) = get(&client, CMS).await;
    assert_eq!(names(&left), ["cm-01", "cm-03"]);
}

#[tokio::test]
async fn discovery_in_both_forms_as_kube_rs_and_kubectl_read_it() {
    let (_plane, client) = start().await;
    support::install_widgets(&client).await;
    let discovery = kube::discovery::Discovery::new(client.clone()).run().await.expect("discovery runs");
    let (resource, capabilities) =
        discovery.get("example.com").and_then(|group| group.recommended_kind("Widget")).expect("widgets discovered");
    assert_eq!((resource.plural.as_str(), capabilities.scope), ("widgets", kube::discovery::Scope::Namespaced));
    let request = http::Request::get("/apis")
        .header("accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")
        .body(kube::client::Body::empty())
        .expect("request");
    let response = client.send(request).await.expect("sent");
    assert_eq!(
        response.headers()["content-type"],
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    let aggregated: Value =
        serde_json::from_slice(&response.into_body().collect().await.expect("body").to_bytes()).expect("JSON");
    assert!(aggregated["items"].as_array().expect("items").iter().any(|g| g["metadata"]["name"] == "example.com"));
    let (_, legacy) = get(&client, "/apis").await;
    assert_eq!(legacy["kind"], "APIGroupList");
}

#[tokio::test]
async fn events_recorded_through_either_api_are_listed_and_watched_through_both() {
    let (_plane, client) = start().await;
    let core = "/api/v1/namespaces/default/events";
    let events_api = "/apis/events.k8s.io/v1/namespaces/default/events";
    let watched = tokio::spawn({
        let client = client.clone();
        async move { events(&client, &format!("{core}?watch=true"), 2).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (code, recorded) = post(&client, events_api, &json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "plumbus.1"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "olmv2-install-controller", "reportingInstance": "olmv2-1", "action": "Reconcile",
        "reason": "ContentApplied", "type": "Normal", "note": "applied 9 objects",
        "regarding": {"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "name": "plumbus", "uid": "u-1"}}))
    .await;
    assert_eq!(code, 201, "{recorded}");
    assert_eq!(recorded["note"], "applied 9 objects", "answered in the form it was written");
    let (code, old_style) = post(&client, core, &json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1"},
        "involvedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "default", "uid": "u-2"},
        "reason": "ScalingReplicaSet", "message": "scaled up", "type": "Normal", "source": {"component": "deployment-controller"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1}))
    .await;
    assert_eq!(code, 201, "{old_style}");

    // As kubectl describe asks for the events of a cluster-scoped object.
    let selector =
        "involvedObject.uid=u-1,involvedObject.name=plumbus,involvedObject.namespace=,involvedObject.kind=Install";
    let (code, described) = get(&client, &format!("/api/v1/events?fieldSelector={selector}")).await;
    assert_eq!(code, 200, "{described}");
    let items = described["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{described}");
    assert_eq!(items[0]["message"], "applied 9 objects");
    assert_eq!(items[0]["involvedObject"]["kind"], "Install");
    assert_eq!(items[0]["reportingComponent"], "olmv2-install-controller");
    let (_, by_source) = get(&client, "/api/v1/events?fieldSelector=source%3Dolmv2-install-controller").await;
    assert_eq!(by_source["items"].as_array().unwrap().len(), 1, "source falls back to the reporting controller");

    let (code, listed) = get(&client, &format!("{events_api}?fieldSelector=regarding.kind%3DDeployment")).await;
    assert_eq!(code, 200, "{listed}");
    let items = listed["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{listed}");
    assert_eq!(items[0]["note"], "scaled up");
    assert_eq!(items[0]["regarding"]["name"], "web");
    assert_eq!(items[0]["deprecatedSource"]["component"], "deployment-controller");
    assert_eq!(items[0]["deprecatedCount"], 1);

    let (code, refused) = get(&client, &format!("{events_api}?fieldSelector=involvedObject.kind%3DDeployment")).await;
    assert_eq!((code, refused["message"].clone()), (400, json!("field label not supported: involvedObject.kind")));
    let (code, refused) = get(&client, "/api/v1/configmaps?fieldSelector=reason%3DX").await;
    assert_eq!((code, refused["message"].clone()), (400, json!("field label not supported: reason")));

    let seen = watched.await.unwrap();
    assert_eq!(seen[0]["object"]["apiVersion"], "v1");
    assert_eq!(seen[0]["object"]["message"], "applied 9 objects", "the core watch sees the events.k8s.io event");
    assert_eq!(seen[1]["object"]["metadata"]["name"], "web.1");
}
