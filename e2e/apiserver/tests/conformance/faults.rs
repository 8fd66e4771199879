//! The fault-injection switch (`faults`, `Store::restart_watches`): the faults a chosen user's writes meet are
//! answered as kube-apiserver answers them (APF's plain-text 429 with `Retry-After`, the optimistic-lock 409, a 500
//! `InternalError` before or after the write is stored), other users and reads are untouched, and a restart ends
//! every open watch so that resuming from a resourceVersion seen before it is `410 Expired`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::time::Duration;

use futures_util::StreamExt;
use http_body_util::BodyExt;
use kube_emulator::faults::{Fault, WriteFaults};
use serde_json::{json, Value};

use crate::support::{get, post, put, start, CMS};

/// A client for `user` (a cluster admin by group) that does not retry 429s, so that each answer is seen.
async fn unretried_client(plane: &kube_emulator::ControlPlane, user: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&plane.user_kubeconfig(user, &["system:masters"])).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

/// A raw request answered with its status, headers and body text.
async fn send(client: &kube::Client, method: &str, path: &str, body: &Value) -> (u16, http::HeaderMap, String) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(kube::client::Body::from(body.to_string().into_bytes()))
        .unwrap();
    let response = client.send(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let text = String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap();
    (parts.status.as_u16(), parts.headers, text)
}

#[tokio::test]
async fn a_users_writes_fail_as_an_overloaded_or_failing_api_server_answers() {
    let (plane, admin) = start().await;
    let faulty = unretried_client(&plane, "faulty").await;
    plane.api.faults.fail_writes(WriteFaults {
        user: "faulty".into(),
        fraction: 1.0,
        seed: 3,
        ..WriteFaults::default()
    });

    // Reads, and the writes of other users, pass.
    assert_eq!(get(&faulty, CMS).await.0, 200);
    assert_eq!(post(&admin, CMS, &json!({"metadata": {"name": "target", "labels": {"v": "0"}}})).await.0, 201);

    let (mut throttled, mut refused, mut lost) = (0, 0, 0);
    for index in 0..60 {
        let name = format!("cm-{index}");
        let (code, headers, text) = send(&faulty, "POST", CMS, &json!({"metadata": {"name": name}})).await;
        let stored = get(&admin, &format!("{CMS}/{name}")).await.0 == 200;
        match code {
            429 => {
                assert_eq!(text, "Too many requests, please try again later.\n");
                assert_eq!(headers["retry-after"], "1");
                assert!(headers["content-type"].to_str().unwrap().starts_with("text/plain"));
                assert!(!stored, "a throttled create stored {name}");
                throttled += 1;
            }
            500 => {
                let status: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(
                    (status["reason"].as_str(), status["kind"].as_str()),
                    (Some("InternalError"), Some("Status"))
                );
                let message = status["message"].as_str().unwrap();
                assert!(message.starts_with("Internal error occurred: injected fault"), "{message}");
                assert_eq!(status["details"]["causes"][0]["message"], message["Internal error occurred: ".len()..]);
                // The same answer whether or not the write was stored: only the store tells them apart.
                if stored {
                    lost += 1;
                } else {
                    refused += 1;
                }
            }
            other => panic!("a create under faults was answered {other}: {text}"),
        }
    }
    assert!(throttled > 0 && refused > 0 && lost > 0, "{throttled} throttled, {refused} refused, {lost} lost");
    let after_creates = plane.api.faults.injected();
    assert_eq!(after_creates.get(&Fault::InternalErrorAfterWrite).copied(), Some(lost));
    assert_eq!(after_creates.get(&Fault::TooManyRequests).copied(), Some(throttled));
    assert_eq!(after_creates.get(&Fault::Conflict), None, "creates never conflict");

    // An update meets the optimistic-lock conflict too, and leaves the object as it was.
    let mut conflicts = 0;
    for _ in 0..40 {
        let (_, current) = get(&admin, &format!("{CMS}/target")).await;
        let mut changed = current.clone();
        changed["metadata"]["labels"]["v"] = json!("changed");
        let (code, _, text) = send(&faulty, "PUT", &format!("{CMS}/target"), &changed).await;
        if code == 409 {
            let status: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(status["reason"], "Conflict");
            assert_eq!(
                status["message"],
                "Operation cannot be fulfilled on configmaps \"target\": the object has been modified; please apply your changes to the latest version and try again"
            );
            assert_eq!(status["details"], json!({"name": "target", "kind": "configmaps"}));
            assert_eq!(get(&admin, &format!("{CMS}/target")).await.1, current, "a conflicted update changed it");
            conflicts += 1;
        }
    }
    assert!(conflicts > 0, "no update met a conflict");

    let injected = plane.api.faults.injected();
    assert_eq!(injected.get(&Fault::Conflict).copied(), Some(conflicts));
    let audited = plane.api.audit.records().iter().filter(|r| r.user == "faulty" && r.code == 429).count();
    assert_eq!(audited as u64, injected[&Fault::TooManyRequests], "the audit log records the answers given");

    // Switched off: the writes pass again.
    plane.api.faults.stop_failing_writes();
    assert_eq!(send(&faulty, "POST", CMS, &json!({"metadata": {"name": "after"}})).await.0, 201);
    let (_, current) = get(&admin, &format!("{CMS}/target")).await;
    assert_eq!(put(&faulty, &format!("{CMS}/target"), &current).await.0, 200);
}

/// Reads a watch's events until the stream ends or `count` events came.
async fn watch_events(client: &kube::Client, path: &str, count: usize) -> (Vec<Value>, bool) {
    let request = http::Request::get(path).body(kube::client::Body::empty()).unwrap();
    let response = client.send(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.into_body().into_data_stream();
    let (mut buffer, mut found) = (Vec::new(), Vec::new());
    while found.len() < count {
        let Some(chunk) = tokio::time::timeout(Duration::from_secs(5), body.next()).await.expect("in time") else {
            return (found, true);
        };
        buffer.extend_from_slice(&chunk.unwrap());
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            found.push(serde_json::from_slice(&line).unwrap());
        }
    }
    (found, false)
}

#[tokio::test]
async fn a_restart_ends_open_watches_and_expires_the_resource_versions_seen_before_it() {
    let (plane, client) = start().await;
    let (_, first) = post(&client, CMS, &json!({"metadata": {"name": "first"}})).await;
    let seen_rv = first["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
    let open = tokio::spawn({
        let client = client.clone();
        let path = format!("{CMS}?watch=true&resourceVersion={seen_rv}");
        async move { watch_events(&client, &path, 10).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    plane.api.store.restart_watches();
    let (events, ended) = open.await.unwrap();
    assert!(ended && events.is_empty(), "the open watch ended without events: {events:?}");

    // Resumed from what it saw: 410 Expired in the stream, and counted.
    let (events, _) = watch_events(&client, &format!("{CMS}?watch=true&resourceVersion={seen_rv}"), 1).await;
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(
        (events[0]["object"]["code"].as_u64(), events[0]["object"]["reason"].as_str()),
        (Some(410), Some("Expired"))
    );
    let (_, list) = get(&client, CMS).await;
    let listed_rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
    assert_eq!(
        events[0]["object"]["message"],
        format!("too old resource version: {seen_rv} ({listed_rv})"),
        "expired up to the revision a list now answers"
    );
    assert_eq!(plane.api.store.expired_watches(), 1);

    // Listed again, the watch goes on from the list's resourceVersion.
    let watched = tokio::spawn({
        let client = client.clone();
        let path = format!("{CMS}?watch=true&resourceVersion={listed_rv}");
        async move { watch_events(&client, &path, 1).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(post(&client, CMS, &json!({"metadata": {"name": "second"}})).await.0, 201);
    let (events, _) = watched.await.unwrap();
    assert_eq!(
        (events[0]["type"].as_str(), events[0]["object"]["metadata"]["name"].as_str()),
        (Some("ADDED"), Some("second"))
    );
}
