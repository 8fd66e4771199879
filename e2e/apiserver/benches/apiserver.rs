//! Throughput of the control plane over HTTPS with 10,000 ConfigMaps stored: GETs and LISTs per second from
//! concurrent kube clients, creates per second with JSON and with protobuf bodies and answers (what kubectl's
//! typed commands send), and watch fan-out (events delivered per second to 100 watchers while objects change).
//! Prints figures; run with `cargo bench -p kube-emulator --bench apiserver`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // a benchmark fails loudly by design

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use http_body_util::BodyExt;
use kube_emulator::{ControlPlane, Options, Target, WriteOptions};
use serde_json::json;

const OBJECTS: usize = 10_000;
const WATCHERS: usize = 100;
const CLIENTS: usize = 16;
const PHASE: Duration = Duration::from_secs(3);

async fn request(client: &kube::Client, path: &str) -> usize {
    let request = http::Request::get(path).body(kube::client::Body::empty()).expect("request");
    let response = client.send(request).await.expect("sent");
    assert_eq!(response.status(), 200);
    response.into_body().collect().await.expect("body").to_bytes().len()
}

/// Runs `CLIENTS` loops of one request kind for `PHASE`; returns requests per second and bytes per request.
async fn load(client: &kube::Client, path_of: impl Fn(u64) -> String + Send + Sync + 'static) -> (f64, f64) {
    let done = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let path_of = Arc::new(path_of);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..CLIENTS {
        let (client, done, bytes, path_of) = (client.clone(), done.clone(), bytes.clone(), path_of.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = worker as u64;
            while start.elapsed() < PHASE {
                let size = request(&client, &path_of(n)).await;
                bytes.fetch_add(size as u64, Ordering::Relaxed);
                done.fetch_add(1, Ordering::Relaxed);
                n += CLIENTS as u64 * 7919;
            }
        }));
    }
    for task in tasks {
        task.await.expect("worker");
    }
    let count = done.load(Ordering::Relaxed) as f64;
    (count / start.elapsed().as_secs_f64(), bytes.load(Ordering::Relaxed) as f64 / count.max(1.0))
}

/// Runs `CLIENTS` loops of creates for `PHASE`, each sending `body` as `content_type` and asking for `accept`;
/// returns creates per second.
async fn create_load(client: &kube::Client, content_type: &'static str, accept: &'static str, body: Vec<u8>) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let body = Arc::new(body);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (client, done, body) = (client.clone(), done.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            while start.elapsed() < PHASE {
                let request = http::Request::post("/api/v1/namespaces/bench/configmaps")
                    .header("content-type", content_type)
                    .header("accept", accept)
                    .body(kube::client::Body::from(body.as_ref().clone()))
                    .expect("request");
                let response = client.send(request).await.expect("sent");
                assert_eq!(response.status(), 201);
                assert!(response.headers()["content-type"]
                    .as_bytes()
                    .starts_with(accept.split(',').next().unwrap_or_default().as_bytes()));
                response.into_body().collect().await.expect("body");
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        task.await.expect("worker");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(run());
}

async fn run() {
    let plane = ControlPlane::start(Options::default()).await.expect("starts");
    let client = plane.client().await.expect("client");
    let configmaps = plane.api.resources().lookup("", "v1", "configmaps").cloned().expect("served");
    let target = Target { resource: configmaps, namespace: "default".into(), name: None, subresource: None };
    let options = WriteOptions::internal("bench");
    let seeding = Instant::now();
    for i in 0..OBJECTS {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i:05}"), "labels": {"shard": (i % 10).to_string()}}, "data": {"key": "value", "index": i.to_string()}});
        plane.api.create(&target, object, &options).await.expect("seeded");
    }
    println!(
        "seeded {OBJECTS} ConfigMaps in-process in {:.2}s; {} cores",
        seeding.elapsed().as_secs_f64(),
        std::thread::available_parallelism().map_or(0, usize::from)
    );

    let (rate, size) =
        load(&client, |n| format!("/api/v1/namespaces/default/configmaps/cm-{:05}", n % OBJECTS as u64)).await;
    println!("get:   {rate:>9.0} requests/s ({CLIENTS} clients, {size:.0} bytes each)");
    let (rate, size) = load(&client, |_| "/api/v1/namespaces/default/configmaps?limit=500".to_owned()).await;
    println!("list:  {rate:>9.0} requests/s (pages of 500, {size:.0} bytes each)");
    let (rate, size) =
        load(&client, |n| format!("/api/v1/namespaces/default/configmaps?labelSelector=shard%3D{}", n % 10)).await;
    println!("list:  {rate:>9.2} requests/s (1,000 of 10,000 by label selector, {size:.0} bytes each)");
    let (rate, size) = load(&client, |_| "/api/v1/namespaces/default/configmaps".to_owned()).await;
    println!("list:  {rate:>9.2} requests/s (all 10,000, {size:.0} bytes each)");

    let namespaces = plane.api.resources().lookup("", "v1", "namespaces").cloned().expect("served");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}});
    let namespace_target = Target { resource: namespaces, namespace: String::new(), name: None, subresource: None };
    plane.api.create(&namespace_target, namespace, &options).await.expect("namespace");
    let created = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "created-", "labels": {"app": "bench", "tier": "one"}},
        "data": {"key": "value", "config.yaml": "a: 1\nb: [x, y, z]\n"}});
    let json_rate =
        create_load(&client, "application/json", "application/json", created.to_string().into_bytes()).await;
    let protobuf_body = kube_emulator::http::protobuf::encode(&created).expect("a built-in kind").expect("encodes");
    let protobuf_size = protobuf_body.len();
    let protobuf_rate = create_load(
        &client,
        "application/vnd.kubernetes.protobuf",
        "application/vnd.kubernetes.protobuf,application/json",
        protobuf_body,
    )
    .await;
    println!(
        "create: {json_rate:>8.0} requests/s in JSON ({} bytes each), {protobuf_rate:.0} in protobuf ({protobuf_size} bytes each): protobuf/JSON {:.2}",
        created.to_string().len(),
        protobuf_rate / json_rate.max(1.0)
    );

    let revision = plane.api.store.revision();
    let received = Arc::new(AtomicU64::new(0));
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let (client, received) = (client.clone(), received.clone());
        let request =
            http::Request::get(format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={revision}"))
                .body(kube::client::Body::empty())
                .expect("request");
        let response = client.send(request).await.expect("watch");
        watchers.push(tokio::spawn(async move {
            let mut body = response.into_body().into_data_stream();
            while let Some(Ok(chunk)) = body.next().await {
                received.fetch_add(chunk.iter().filter(|b| **b == b'\n').count() as u64, Ordering::Relaxed);
            }
        }));
    }
    let writes = 1_000u64;
    let start = Instant::now();
    for i in 0..writes {
        let target = Target { name: Some(format!("cm-{:05}", i)), ..target.clone() };
        let patch = json!({"data": {"key": format!("changed-{i}")}}).to_string();
        plane.api.patch(&target, kube_emulator::PatchType::Merge, patch.as_bytes(), &options).await.expect("patched");
    }
    let expected = writes * WATCHERS as u64;
    while received.load(Ordering::Relaxed) < expected && start.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let delivered = received.load(Ordering::Relaxed);
    println!("watch: {:>9.0} events/s delivered to {WATCHERS} watchers ({delivered} of {expected} events for {writes} writes in {elapsed:.2}s)", delivered as f64 / elapsed);
    for watcher in watchers {
        watcher.abort();
    }
}
