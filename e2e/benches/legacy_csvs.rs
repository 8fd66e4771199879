//! OLM v0's CSV loops at scale (issue #19): hand-applied AllNamespaces CSVs, each in its own namespace `op-<i>` with
//! a global OperatorGroup, one owned CRD, a ServiceAccount and one Deployment, among N namespaces in all; copied CSVs
//! enabled (the default) and disabled (the OLMConfig `cluster`). The control plane runs in-process with a stand-in
//! for the Deployment controller; the controller runs as its own process (`olmv2 run`, release build) with `deploy/`'s
//! identity. For each mode and namespace count it prints the time until every CSV is Succeeded, the controller's RSS
//! (peak, settled, after the idle window), the copied CSVs present, and the API writes the controller made (from the
//! control plane's audit log) during setup (from the controller's start until its writes stop) and during an idle
//! window after it, the idle ones listed by object. It prints figures and the goal beside them; it asserts
//! no timing. Copied CSVs are counted whether or not the controller makes them yet.
//!
//! Run with `cargo bench -p olmv2-e2e --bench legacy_csvs`. Environment (defaults in brackets):
//! `OLMV2_BENCH_NAMESPACES` namespace counts [100,500,1000], `OLMV2_BENCH_CSVS` CSVs [100], `OLMV2_BENCH_COPIES`
//! the modes [enabled,disabled],
//! `OLMV2_BENCH_IDLE_SECONDS` idle window [120], `OLMV2_BENCH_RESYNC_SECONDS` the controller's resync [60, so that
//! every settled object is looked at again within the default idle window], `OLMV2_BENCH_HEAPTRACK` a file to run the
//! controller under `heaptrack -o <file>` for a heap profile [unset: the controller runs alone; under heaptrack the
//! RSS figures are the profiler's, not the controller's].

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // a benchmark fails loudly by design

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube_emulator::audit::Record;
use kube_emulator::{ControlPlane, Options};
use olmv2::api::v1::OperatorGroup;
use olmv2::api::v1alpha1::{ClusterServiceVersion, CsvPhase};
use olmv2_e2e::project;
use serde_json::{json, Value};

const CONTROLLER_USER: &str = "system:serviceaccount:olmv2-system:olmv2-controller";
const WRITE_VERBS: [&str; 4] = ["create", "update", "patch", "delete"];
/// Setup has settled once the controller has written nothing for this long (or a third of its resync period, so
/// that writes repeated on every resync count as idle writes, not as setup), and gives up after `SETTLE_LIMIT`.
const SETTLE_QUIET: Duration = Duration::from_secs(10);
const SETTLE_LIMIT: Duration = Duration::from_secs(60);
const SUCCEED_LIMIT: Duration = Duration::from_secs(900);
const GOAL: &str = "goal (issue #19): copies disabled: RSS <= 64 MB and flat in the namespace count; \
                    0 writes per idle minute in both modes";

struct Settings {
    csvs: usize,
    modes: Vec<Copies>,
    namespace_counts: Vec<usize>,
    idle: Duration,
    resync_seconds: u64,
}

impl Settings {
    fn from_env() -> Self {
        let number = |name: &str, default: u64| -> u64 {
            std::env::var(name).map_or(default, |v| v.trim().parse().unwrap_or_else(|_| panic!("{name}: a number")))
        };
        let namespace_counts = std::env::var("OLMV2_BENCH_NAMESPACES").map_or(vec![100, 500, 1000], |v| {
            v.split(',').map(|n| n.trim().parse().expect("OLMV2_BENCH_NAMESPACES: numbers, comma-separated")).collect()
        });
        let modes = std::env::var("OLMV2_BENCH_COPIES").map_or(vec![Copies::Enabled, Copies::Disabled], |v| {
            v.split(',')
                .map(|mode| match mode.trim() {
                    "enabled" => Copies::Enabled,
                    "disabled" => Copies::Disabled,
                    other => panic!("OLMV2_BENCH_COPIES: enabled and/or disabled, not {other}"),
                })
                .collect()
        });
        Self {
            csvs: number("OLMV2_BENCH_CSVS", 100) as usize,
            modes,
            namespace_counts,
            idle: Duration::from_secs(number("OLMV2_BENCH_IDLE_SECONDS", 120)),
            resync_seconds: number("OLMV2_BENCH_RESYNC_SECONDS", 60),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Copies {
    Enabled,
    Disabled,
}

/// What one run measured.
struct Figures {
    copies: Copies,
    namespaces: usize,
    succeeded: usize,
    all_succeeded: Option<Duration>,
    settled: Option<Duration>,
    peak_kib: u64,
    settled_kib: u64,
    idle_kib: u64,
    copied: usize,
    setup_writes: Vec<Record>,
    idle_writes: Vec<Record>,
}

// ---- the objects ----------------------------------------------------------------------------------------------

fn csv_namespace(index: usize) -> String {
    format!("op-{index}")
}

fn crd(index: usize) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widget{index}s.bench.example.com")},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
            "names": {"plural": format!("widget{index}s"), "singular": format!("widget{index}"),
                      "kind": format!("Widget{index}"), "listKind": format!("Widget{index}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

fn operator_group(namespace: &str) -> Value {
    json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "global", "namespace": namespace}, "spec": {}})
}

/// An AllNamespaces CSV owning CRD `index`, run by ServiceAccount `operator` (listed with no rules) in one Deployment.
fn csv(index: usize) -> Value {
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
async fn prepare(plane: &ControlPlane, csvs: usize, namespaces: usize, copies: Copies) {
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

async fn create_all(plane: &ControlPlane, objects: Vec<Value>) {
    futures_util::stream::iter(objects)
        .for_each_concurrent(16, |object| async move {
            project::create(plane, &object).await.expect("created");
        })
        .await;
}

/// Creates `object` as the cluster administrator, so that the webhook records the admin as the CSV's author.
async fn admin_create<K: kube::Resource<DynamicType = ()>>(admin: &kube::Client, object: Value) {
    let namespace = object["metadata"]["namespace"].as_str().expect("namespaced").to_owned();
    let api = Api::<DynamicObject>::namespaced_with(admin.clone(), &namespace, &ApiResource::erase::<K>(&()));
    let object: DynamicObject = serde_json::from_value(object).expect("an object");
    api.create(&PostParams::default(), &object).await.expect("created by the admin");
}

// ---- the controller process -----------------------------------------------------------------------------------

fn free_address() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn ready(health: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(health) else { return false };
    let mut answer = String::new();
    write!(stream, "GET /readyz HTTP/1.0\r\nHost: {health}\r\n\r\n").is_ok()
        && stream.read_to_string(&mut answer).is_ok()
        && answer.lines().next().is_some_and(|status| status.contains(" 200 "))
}

/// Starts `olmv2 run` as `deploy/`'s ServiceAccount, its log in `dir`, and waits until it is ready.
async fn start_controller(plane: &ControlPlane, binary: &Path, dir: &Path, resync_seconds: u64) -> Child {
    let kubeconfig = dir.join("controller.kubeconfig");
    std::fs::write(&kubeconfig, project::controller_kubeconfig(plane).await.expect("identity")).unwrap();
    let (health, webhook) = (free_address(), free_address());
    plane.api.endpoints.set(project::CONTROLLER_NAMESPACE, "olmv2-webhook", webhook);
    let mut command = match std::env::var("OLMV2_BENCH_HEAPTRACK") {
        Ok(out) => {
            let mut command = Command::new("heaptrack");
            command.args(["-o", &out]).arg(binary);
            command
        }
        Err(_) => Command::new(binary),
    };
    let child = command
        .args(["run", "--health-address", &health.to_string(), "--webhook-address", &webhook.to_string()])
        .args(["--resync-seconds", &resync_seconds.to_string()])
        .args(["--cache", &dir.join("cache").display().to_string()])
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
    child
}

/// The controller's resident memory in KiB: (peak, now), from `/proc/<pid>/status`.
fn rss_kib(child: &Child) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let field = |name: &str| {
        status.lines().find_map(|line| line.strip_prefix(name)).and_then(|rest| rest.split_whitespace().next())
    };
    let kib = |name| field(name).and_then(|value| value.parse().ok()).unwrap_or(0);
    (kib("VmHWM:"), kib("VmRSS:"))
}

// ---- what the cluster shows -----------------------------------------------------------------------------------

/// The controller's writes (create, update, patch, delete) in the audit log so far, oldest first.
fn controller_writes(plane: &ControlPlane) -> Vec<Record> {
    let records = plane.api.audit.records();
    if records.len() >= 200_000 {
        eprintln!("warning: the audit log is full (200,000 records), older writes are no longer counted");
    }
    records
        .into_iter()
        .filter(|r| r.acting_user() == CONTROLLER_USER && WRITE_VERBS.contains(&r.verb.as_str()))
        .collect()
}

/// The original CSVs' phases: how many are Succeeded, and a count per phase.
async fn phases(admin: &kube::Client) -> (usize, BTreeMap<String, usize>) {
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
async fn wait_succeeded(admin: &kube::Client, csvs: usize, start: Instant) -> (usize, Option<Duration>) {
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

/// The copied CSVs present (`olm.copiedFrom`), counted a page at a time.
async fn copied_csvs(admin: &kube::Client) -> usize {
    let csvs = Api::<ClusterServiceVersion>::all(admin.clone());
    let (mut count, mut token) = (0, None::<String>);
    loop {
        let mut params = ListParams::default().labels("olm.copiedFrom").limit(500);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let page = csvs.list(&params).await.expect("copies listed");
        count += page.items.len();
        match page.metadata.continue_ {
            Some(next) if !next.is_empty() => token = Some(next),
            _ => return count,
        }
    }
}

/// Waits until the controller's writes stop; answers when the last one was, or None when they never stopped.
async fn settle(plane: &ControlPlane, resync_seconds: u64) -> Option<Instant> {
    let quiet = SETTLE_QUIET.min(Duration::from_secs(resync_seconds) / 3);
    let (started, mut writes, mut last) = (Instant::now(), controller_writes(plane).len(), Instant::now());
    while last.elapsed() < quiet {
        if started.elapsed() > SETTLE_LIMIT {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = controller_writes(plane).len();
        if now != writes {
            (writes, last) = (now, Instant::now());
        }
    }
    Some(last)
}

/// Stands in for the Deployment controller as a real one would: only Deployments whose status lags their generation
/// are reported rolled out (`project::report_rollouts`, by namespace), so a settled cluster sees no writes from it.
fn deployment_stand_in(admin: kube::Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let deployments = Api::<Deployment>::all(admin.clone());
        loop {
            if let Ok(list) = deployments.list(&ListParams::default()).await {
                let lagging: std::collections::BTreeSet<String> = list
                    .items
                    .iter()
                    .filter(|d| d.status.as_ref().and_then(|s| s.observed_generation) != d.metadata.generation)
                    .filter_map(|d| d.metadata.namespace.clone())
                    .collect();
                for namespace in lagging {
                    let _ = project::report_rollouts(&admin, &namespace).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

// ---- one run --------------------------------------------------------------------------------------------------

async fn run(binary: &Path, settings: &Settings, copies: Copies, namespaces: usize) -> Figures {
    let options = Options { bookmark_interval: Duration::from_millis(300), ..Options::default() };
    let plane = ControlPlane::start(options).await.expect("control plane starts");
    project::install_crds(&plane).await.expect("CRDs");
    prepare(&plane, settings.csvs, namespaces, copies).await;
    let admin = plane.client().await.expect("admin");
    let dir = std::env::temp_dir().join(format!("olmv2-legacy-csvs-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = start_controller(&plane, binary, &dir, settings.resync_seconds).await;
    let stand_in = deployment_stand_in(admin.clone());

    let start = Instant::now();
    futures_util::stream::iter(0..settings.csvs)
        .for_each_concurrent(8, |index| {
            let admin = &admin;
            async move {
                admin_create::<OperatorGroup>(admin, operator_group(&csv_namespace(index))).await;
                admin_create::<ClusterServiceVersion>(admin, csv(index)).await;
            }
        })
        .await;
    let (succeeded, all_succeeded) = wait_succeeded(&admin, settings.csvs, start).await;
    let settled = settle(&plane, settings.resync_seconds).await.map(|at| at - start);
    let (_, settled_kib) = rss_kib(&child);
    let setup_writes = controller_writes(&plane);

    tokio::time::sleep(settings.idle).await;
    let idle_writes = controller_writes(&plane).split_off(setup_writes.len());
    let (peak_kib, idle_kib) = rss_kib(&child);
    let copied = copied_csvs(&admin).await;
    stand_in.abort();
    let _ = child.kill();
    let _ = child.wait();
    report_log(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    Figures {
        copies,
        namespaces: namespaces.max(settings.csvs),
        succeeded,
        all_succeeded,
        settled,
        peak_kib,
        settled_kib,
        idle_kib,
        copied,
        setup_writes,
        idle_writes,
    }
}

/// Says how much the controller logged (warnings and errors), with its first lines.
fn report_log(dir: &Path) {
    let log = std::fs::read_to_string(dir.join("controller.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    if !lines.is_empty() {
        println!("  controller log: {} lines of warnings or errors; the first:", lines.len());
        for line in lines.iter().take(3) {
            println!("    {line}");
        }
    }
}

// ---- figures --------------------------------------------------------------------------------------------------

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

fn seconds(duration: Option<Duration>, otherwise: &str) -> String {
    duration.map_or_else(|| otherwise.to_owned(), |d| format!("{:.1} s", d.as_secs_f64()))
}

fn mode(copies: Copies) -> &'static str {
    match copies {
        Copies::Enabled => "enabled",
        Copies::Disabled => "disabled",
    }
}

/// "verb resource[/subresource]" of a write.
fn kind(write: &Record) -> String {
    match write.subresource.as_str() {
        "" => format!("{} {}", write.verb, write.resource),
        subresource => format!("{} {}/{subresource}", write.verb, write.resource),
    }
}

/// The setup's writes counted by verb and resource, on one line.
fn print_setup_writes(writes: &[Record]) {
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    for write in writes {
        *by_kind.entry(kind(write)).or_insert(0) += 1;
    }
    let counts: Vec<String> = by_kind.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
    println!("    setup writes: {}", counts.join(", "));
}

/// The idle writes by verb and resource, with the objects written.
fn print_idle_writes(writes: &[Record]) {
    let mut by_kind: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for write in writes {
        let object = match write.namespace.as_str() {
            "" => write.name.clone(),
            namespace => format!("{namespace}/{}", write.name),
        };
        *by_kind.entry(kind(write)).or_default().entry(object).or_insert(0) += 1;
    }
    for (kind, objects) in by_kind {
        let total: usize = objects.values().sum();
        let some: Vec<String> = objects.iter().take(4).map(|(object, n)| format!("{object} x{n}")).collect();
        let more = if objects.len() > 4 { format!(", … {} objects in all", objects.len()) } else { String::new() };
        println!("    idle write: {kind}: {total} ({}{more})", some.join(", "));
    }
}

fn per_minute(writes: &[Record], window: Duration) -> f64 {
    writes.len() as f64 / (window.as_secs_f64() / 60.0)
}

fn print_run(figures: &Figures, settings: &Settings) {
    println!("copies {}, {} namespaces, {} CSVs:", mode(figures.copies), figures.namespaces, settings.csvs);
    let settled = format!("never (writes still coming after {SETTLE_LIMIT:?})");
    println!(
        "  {} Succeeded, all in {}; the controller's writes had stopped by {}",
        figures.succeeded,
        seconds(figures.all_succeeded, "never"),
        seconds(figures.settled, &settled)
    );
    println!(
        "  controller RSS: peak {} MiB, settled {} MiB, after idle {} MiB; copied CSVs: {}",
        mib(figures.peak_kib),
        mib(figures.settled_kib),
        mib(figures.idle_kib),
        figures.copied
    );
    println!(
        "  controller writes: {} during setup, {} in {} s idle = {:.1} per idle minute",
        figures.setup_writes.len(),
        figures.idle_writes.len(),
        settings.idle.as_secs(),
        per_minute(&figures.idle_writes, settings.idle)
    );
    print_setup_writes(&figures.setup_writes);
    print_idle_writes(&figures.idle_writes);
}

fn print_table(all: &[Figures], settings: &Settings) {
    println!();
    println!(
        "{} hand-applied AllNamespaces CSVs, {} s idle window, resync {} s",
        settings.csvs,
        settings.idle.as_secs(),
        settings.resync_seconds
    );
    println!(
        "| copies | namespaces | all Succeeded | RSS peak MiB | RSS settled MiB | RSS after idle MiB | copied CSVs \
         | writes in setup | writes idle | per idle minute |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for f in all {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} |",
            mode(f.copies),
            f.namespaces,
            seconds(f.all_succeeded, "never"),
            mib(f.peak_kib),
            mib(f.settled_kib),
            mib(f.idle_kib),
            f.copied,
            f.setup_writes.len(),
            f.idle_writes.len(),
            per_minute(&f.idle_writes, settings.idle),
        );
    }
    println!("{GOAL}");
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let settings = Settings::from_env();
    let binary = project::build_controller(env!("CARGO")).expect("the olmv2 binary");
    let mut all = Vec::new();
    for &copies in &settings.modes {
        for &namespaces in &settings.namespace_counts {
            let figures = run(&binary, &settings, copies, namespaces).await;
            print_run(&figures, &settings);
            all.push(figures);
        }
    }
    print_table(&all, &settings);
}
