//! What the benchmarks share (`legacy_csvs`, `installed_api`, `scale`, `operators`, `failover`): hand-applied
//! AllNamespaces CSVs, each in its own namespace `op-<i>` with a global OperatorGroup, one owned CRD, a
//! ServiceAccount and one Deployment, among N namespaces in all, copied CSVs enabled or disabled; the controller run
//! as its own process (`olmv2 run`, production build) with `deploy/`'s identity, its memory and metrics read; a
//! stand-in for the Deployment controller; a control plane with the `operators` namespace; waiting for an Operator's
//! status to show a component's change.

#![allow(dead_code)] // each benchmark uses part of it

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use olmv2::api::v1alpha1::{ClusterServiceVersion, CsvPhase};
use olmv2_e2e::project;
use serde_json::{json, Value};

use crate::plane::Plane;

/// The number in environment variable `name`, or `default`.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| v.trim().parse().unwrap_or_else(|_| panic!("{name}: a number")))
}

/// The namespace counts of `OLMV2_BENCH_NAMESPACES` (comma-separated), 100, 500 and 1,000 by default.
pub fn env_namespace_counts() -> Vec<usize> {
    std::env::var("OLMV2_BENCH_NAMESPACES").map_or(vec![100, 500, 1000], |v| {
        v.split(',').map(|n| n.trim().parse().expect("OLMV2_BENCH_NAMESPACES: numbers, comma-separated")).collect()
    })
}

pub const SUCCEED_LIMIT: Duration = Duration::from_secs(900);

#[derive(Clone, Copy, PartialEq)]
pub enum Copies {
    Enabled,
    Disabled,
}

pub fn csv_namespace(index: usize) -> String {
    format!("op-{index}")
}

pub fn crd(index: usize) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widget{index}s.bench.example.com")},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
            "names": {"plural": format!("widget{index}s"), "singular": format!("widget{index}"),
                      "kind": format!("Widget{index}"), "listKind": format!("Widget{index}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

pub fn operator_group(namespace: &str) -> Value {
    json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "global", "namespace": namespace}, "spec": {}})
}

/// An AllNamespaces CSV owning CRD `index`, run by ServiceAccount `operator` (listed with no rules) in one Deployment.
pub fn csv(index: usize) -> Value {
    let app = format!("operator-{index}");
    let modes = [("OwnNamespace", true), ("SingleNamespace", true), ("MultiNamespace", false), ("AllNamespaces", true)];
    let modes: Vec<Value> =
        modes.iter().map(|(mode, supported)| json!({"type": mode, "supported": supported})).collect();
    let owned = json!({"name": format!("widget{index}s.bench.example.com"), "version": "v1",
        "kind": format!("Widget{index}")});
    let deployment = json!({"name": "operator", "spec": {"selector": {"matchLabels": {"app": app}},
        "template": {"metadata": {"labels": {"app": app}}, "spec": {"serviceAccountName": "operator",
            "containers": [{"name": "manager", "image": format!("example.com/operator-{index}:1.0.0")}]}}}});
    json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": format!("operator-{index}.v1.0.0"), "namespace": csv_namespace(index)},
        "spec": {"displayName": format!("Operator {index}"), "version": "1.0.0", "installModes": modes,
            "customresourcedefinitions": {"owned": [owned]},
            "install": {"strategy": "deployment", "spec": {
                "permissions": [{"serviceAccountName": "operator", "rules": []}], "deployments": [deployment]}}}})
}

/// Everything but the OperatorGroups and CSVs, created by the control plane itself before the controller starts:
/// `namespaces` namespaces (the CSVs' first), the CRDs, the ServiceAccounts, and the OLMConfig when copies are off.
pub async fn prepare(plane: &Plane, csvs: usize, namespaces: usize, copies: Copies) {
    let mut objects = Vec::new();
    for index in 0..namespaces.max(csvs) {
        let name = if index < csvs { csv_namespace(index) } else { format!("tenant-{index}") };
        objects.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
    }
    create_all(plane, objects).await;
    let mut objects = Vec::new();
    for index in 0..csvs {
        objects.push(crd(index));
        objects.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "operator", "namespace": csv_namespace(index)}}));
    }
    if copies == Copies::Disabled {
        objects.push(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig",
            "metadata": {"name": "cluster"}, "spec": {"features": {"disableCopiedCSVs": true}}}));
    }
    create_all(plane, objects).await;
}

pub async fn create_all(plane: &Plane, objects: Vec<Value>) {
    futures_util::stream::iter(objects)
        .for_each_concurrent(16, |object| async move { plane.create(&object).await })
        .await;
}

/// Creates `object` as the cluster administrator, so that the webhook records the admin as the CSV's author.
pub async fn admin_create<K: kube::Resource<DynamicType = ()>>(admin: &kube::Client, object: Value) {
    let namespace = object["metadata"]["namespace"].as_str().expect("namespaced").to_owned();
    let api = Api::<DynamicObject>::namespaced_with(admin.clone(), &namespace, &ApiResource::erase::<K>(&()));
    let object: DynamicObject = serde_json::from_value(object).expect("an object");
    api.create(&PostParams::default(), &object).await.expect("created by the admin");
}

pub fn ready(health: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(health) else { return false };
    let mut answer = String::new();
    write!(stream, "GET /readyz HTTP/1.0\r\nHost: {health}\r\n\r\n").is_ok()
        && stream.read_to_string(&mut answer).is_ok()
        && answer.lines().next().is_some_and(|status| status.contains(" 200 "))
}

/// The controller's process and where its aggregated API server listens.
pub struct Controller {
    pub child: Child,
    pub api: SocketAddr,
    pub health: SocketAddr,
}

/// Creates, as the cluster admin, each CSV's global OperatorGroup and the CSV (`csvs` of them, eight at a time).
pub async fn create_csvs(admin: &kube::Client, csvs: usize) {
    futures_util::stream::iter(0..csvs)
        .for_each_concurrent(8, |index| async move {
            admin_create::<olmv2::api::v1::OperatorGroup>(admin, operator_group(&csv_namespace(index))).await;
            admin_create::<ClusterServiceVersion>(admin, csv(index)).await;
        })
        .await;
}

/// Starts `olmv2 run` as `deploy/`'s ServiceAccount, its log in `dir`, and waits until it is ready.
pub async fn start_controller(plane: &Plane, binary: &Path, dir: &Path, resync_seconds: u64) -> Controller {
    start_controller_with(plane, binary, dir, resync_seconds, &[]).await
}

/// As `start_controller`, with more arguments to `olmv2 run`.
pub async fn start_controller_with(
    plane: &Plane,
    binary: &Path,
    dir: &Path,
    resync_seconds: u64,
    extra: &[String],
) -> Controller {
    let kubeconfig = dir.join("controller.kubeconfig");
    let (health, api, addresses) = plane.controller_identity(&kubeconfig).await;
    let mut command = Command::new(binary);
    if let Ok(out) = std::env::var("OLMV2_BENCH_HEAPTRACK") {
        heaptrack(&mut command, dir, &out);
    }
    let child = command
        .arg("run")
        .args(addresses)
        .args(["--resync-seconds", &resync_seconds.to_string()])
        .args(["--cache", &dir.join("cache").display().to_string()])
        .args(extra)
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("controller.log")).unwrap())
        .spawn()
        .expect("olmv2 run starts");
    let started = Instant::now();
    while !ready(health) {
        assert!(started.elapsed() < Duration::from_secs(60), "the controller is ready within a minute");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Controller { child, api, health }
}

/// Runs `command` with heaptrack's allocation tracker preloaded, its data interpreted into `<out>-<n>.zst` (one
/// file per start): the controller itself is the child, so its RSS is read and a kill ends the profile with it.
/// (The `heaptrack` script would be the child instead, and a kill would leave the controller running.)
fn heaptrack(command: &mut Command, dir: &Path, out: &str) {
    static STARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let start = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pipe = dir.join(format!("heaptrack-{start}.fifo"));
    let made = Command::new("mkfifo").arg(&pipe).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", pipe.display());
    let output = format!("{out}-{start}.zst");
    let script =
        format!("/usr/lib/heaptrack/libexec/heaptrack_interpret < '{}' | zstd -q -c > '{output}'", pipe.display());
    let mut interpreter = Command::new("sh").args(["-c", &script]).spawn().expect("heaptrack_interpret starts");
    // It ends when the controller does (its pipe closes): reaped then.
    std::thread::spawn(move || interpreter.wait());
    command.env("LD_PRELOAD", "/usr/lib/heaptrack/libheaptrack_preload.so").env("DUMP_HEAPTRACK_OUTPUT", &pipe);
    eprintln!("heaptrack: profiling the controller into {output}");
}

/// The controller's resident memory in KiB: (peak, now), from `/proc/<pid>/status`.
pub fn rss_kib(child: &Child) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let field = |name: &str| {
        status.lines().find_map(|line| line.strip_prefix(name)).and_then(|rest| rest.split_whitespace().next())
    };
    let kib = |name| field(name).and_then(|value| value.parse().ok()).unwrap_or(0);
    (kib("VmHWM:"), kib("VmRSS:"))
}

/// The original CSVs' phases: how many are Succeeded, and a count per phase.
pub async fn phases(admin: &kube::Client) -> (usize, BTreeMap<String, usize>) {
    let originals = ListParams::default().labels("!olm.copiedFrom");
    let list = Api::<ClusterServiceVersion>::all(admin.clone()).list(&originals).await.expect("CSVs listed");
    let mut counts = BTreeMap::new();
    for csv in &list.items {
        let status = csv.status.clone().unwrap_or_default();
        *counts.entry(format!("{:?}/{}", status.phase, status.reason.unwrap_or_default())).or_insert(0) += 1;
    }
    let succeeded = list.items.iter().filter(|c| c.status.as_ref().is_some_and(|s| s.phase == CsvPhase::Succeeded));
    (succeeded.count(), counts)
}

/// Waits until `csvs` CSVs are Succeeded: how many are, and when they all were (None: not within the limit).
pub async fn wait_succeeded(admin: &kube::Client, csvs: usize, start: Instant) -> (usize, Option<Duration>) {
    loop {
        let (succeeded, counts) = phases(admin).await;
        if succeeded == csvs {
            return (succeeded, Some(start.elapsed()));
        }
        if start.elapsed() > SUCCEED_LIMIT {
            println!("  not every CSV Succeeded within {SUCCEED_LIMIT:?}: {counts:?}");
            return (succeeded, None);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Stands in for the Deployment controller as a real one would: only Deployments whose status lags their generation
/// are reported rolled out (`project::report_rollout`, each on its own), so a settled cluster sees no writes from it
/// and a change costs one status write, as kube-controller-manager's.
pub fn deployment_stand_in(admin: kube::Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let deployments = Api::<Deployment>::all(admin.clone());
        loop {
            if let Ok(list) = deployments.list(&ListParams::default()).await {
                let lagging = list
                    .items
                    .iter()
                    .filter(|d| d.status.as_ref().and_then(|s| s.observed_generation) != d.metadata.generation);
                for deployment in lagging {
                    let Some(namespace) = deployment.metadata.namespace.as_deref() else { continue };
                    let namespaced = Api::<Deployment>::namespaced(admin.clone(), namespace);
                    // A failure (a conflict, the API server busy) is tried again on the next round.
                    let _ = project::report_rollout(&namespaced, deployment).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

/// The copied CSVs present (`olm.copiedFrom`), counted a page at a time.
pub async fn copied_csvs(admin: &kube::Client) -> usize {
    let csvs = Api::<ClusterServiceVersion>::all(admin.clone());
    let (mut count, mut token) = (0, None::<String>);
    loop {
        let mut params = ListParams::default().labels("olm.copiedFrom").limit(500);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let page = csvs.list_metadata(&params).await.expect("copies listed");
        count += page.items.len();
        match page.metadata.continue_ {
            Some(next) if !next.is_empty() => token = Some(next),
            _ => return count,
        }
    }
}

/// Says how much the controller logged (warnings and errors), with its first lines.
pub fn report_log(dir: &Path) {
    let log = std::fs::read_to_string(dir.join("controller.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    if !lines.is_empty() {
        println!("  controller log: {} lines of warnings or errors; the first:", lines.len());
        for line in lines.iter().take(3) {
            println!("    {line}");
        }
    }
}

pub fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// The value of the first sample of the controller's `/metrics` whose line starts with `prefix` (NaN when absent).
pub fn metric(health: SocketAddr, prefix: &str) -> f64 {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(health) else { return f64::NAN };
    let mut answer = String::new();
    if write!(stream, "GET /metrics HTTP/1.0\r\nHost: {health}\r\n\r\n").is_err()
        || stream.read_to_string(&mut answer).is_err()
    {
        return f64::NAN;
    }
    answer
        .lines()
        .find(|line| line.starts_with(prefix))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .unwrap_or(f64::NAN)
}

/// A control plane (`Plane::start`: the backend `OLMV2_E2E_KUBERNETES` names) with the project's CRDs and the
/// namespace `operators`.
pub async fn plane_with_operators_namespace(name: &str) -> Plane {
    let plane = Plane::start(name).await;
    create_all(&plane, vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "operators"}})]).await;
    plane
}

/// Whether a component's resourceVersion `shown` is `version` or a later one. A change may be followed at once by
/// another write of the same object (on real Kubernetes, a Deployment annotated is observed by
/// kube-controller-manager, whose status write follows within milliseconds), and a status showing the later one
/// shows the change too. resourceVersions are opaque to clients; both backends' are increasing numbers, which a
/// benchmark may rely on.
fn at_or_after(shown: Option<&String>, version: Option<&String>) -> bool {
    let number = |version: Option<&String>| version.and_then(|v| v.parse::<u64>().ok());
    match (number(shown), number(version)) {
        (Some(shown), Some(version)) => shown >= version,
        _ => shown == version,
    }
}

/// Reads `watch` until Operator `operator`'s status lists component `component` at resourceVersion `version` or later.
pub async fn until_status_shows<S>(watch: &mut S, operator: &str, component: &str, version: Option<&String>)
where
    S: futures_util::Stream<Item = Result<olmv2::api::v2alpha1::Operator, kube::runtime::watcher::Error>> + Unpin,
{
    loop {
        let seen = tokio::time::timeout(Duration::from_secs(120), watch.next()).await.expect("status in time");
        let seen = seen.expect("watch open").expect("watch");
        let shows = seen.metadata.name.as_deref() == Some(operator)
            && seen.status.as_ref().and_then(|s| s.components.as_ref()).is_some_and(|c| {
                c.refs.iter().any(|r| r.name == component && at_or_after(r.resource_version.as_ref(), version))
            });
        if shows {
            return;
        }
    }
}
