//! The Operator controller at scale: Operators with components (ConfigMaps, Secrets and Deployments in the ratio
//! 6:2:2) on the test control plane, or on real Kubernetes with `OLMV2_E2E_KUBERNETES=real`; the controller runs as
//! its own process (`olmv2 run`, production build, or each of `OLMV2_BENCH_PROFILE`'s, e.g. `release,production` side
//! by side) with `deploy/`'s identity. For each size of `OLMV2_BENCH_SIZES` (`200x10,1000x20` by default: Operators x
//! components) it prints how long until every Operator gathered its components, the time from a component change to
//! the Operator status showing it (median, p99), the API requests the controller made per Operator reconcile, which
//! loops each change woke (reconciles and time per loop, from the controller's metrics) and what they asked of the
//! API server (the audit log), the writes of an idle minute, the controller's RSS, and each figure beside its goal
//! (docs/operator.md). Run with `cargo bench -p olmv2-e2e --bench operators`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // a benchmark fails loudly by design

#[path = "support/plane.rs"]
mod plane;
#[path = "support/scale.rs"]
mod scale;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt};
use olmv2::api::v2alpha1::Operator;
use olmv2_e2e::project;
use serde_json::{json, Value};

use plane::Plane;

const CHANGES: usize = 200;
const CONTROLLER_USER: &str = "system:serviceaccount:olmv2-system:olmv2-controller";

/// One size the bench runs: Operators, and components of each.
#[derive(Clone, Copy)]
struct Size {
    operators: usize,
    components: usize,
}

impl Size {
    fn configmaps(self) -> usize {
        self.components - 2 * self.pairs()
    }

    /// Secrets, and as many Deployments: a fifth of the components each.
    fn pairs(self) -> usize {
        self.components / 5
    }
}

/// The sizes of `OLMV2_BENCH_SIZES` (`<operators>x<components>`, comma-separated).
fn sizes() -> Vec<Size> {
    let text = std::env::var("OLMV2_BENCH_SIZES").unwrap_or_else(|_| "200x10,1000x20".into());
    text.split(',')
        .map(|size| {
            let (operators, components) =
                size.trim().split_once('x').expect("OLMV2_BENCH_SIZES: <operators>x<components>");
            let size = Size {
                operators: operators.parse().expect("a number of Operators"),
                components: components.parse().expect("a number of components"),
            };
            assert!(size.components >= 5, "at least 5 components: 3 ConfigMaps, a Secret and a Deployment");
            size
        })
        .collect()
}

fn components(operator: &str, size: Size) -> Vec<Value> {
    let labels = json!({ format!("v2alpha1.operators.coreos.com/{operator}"): "" });
    let mut objects = Vec::new();
    for index in 0..size.configmaps() {
        objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{operator}-config-{index}"), "namespace": "operators", "labels": labels},
            "data": {"generation": "0"}}));
    }
    for index in 0..size.pairs() {
        objects.push(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{operator}-secret-{index}"), "namespace": "operators", "labels": labels},
            "stringData": {"token": "t"}}));
        let app = format!("{operator}-{index}");
        objects.push(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("{operator}-deployment-{index}"), "namespace": "operators", "labels": labels},
            "spec": {"selector": {"matchLabels": {"app": app}}, "template": {"metadata": {"labels": {"app": app}},
                     "spec": {"containers": [{"name": "c", "image": "example:1"}]}}}}));
    }
    objects
}

/// A plain HTTP GET of the controller's health endpoint: (status line, body).
fn http_get(address: SocketAddr, path: &str) -> Option<(String, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_owned(), body.to_owned()))
}

/// Per loop: reconciles begun and seconds spent in finished ones, from the controller's metrics.
fn loop_counters(health: SocketAddr) -> BTreeMap<String, (f64, f64)> {
    let Some((_, text)) = http_get(health, "/metrics") else { return BTreeMap::new() };
    let mut counters: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let Ok(value) = value.parse::<f64>() else { continue };
        let controller = |series: &str| {
            series.split("controller=\"").nth(1).and_then(|rest| rest.split('"').next()).map(str::to_owned)
        };
        if series.starts_with("olmv2_reconciles_total{") {
            if let Some(name) = controller(series) {
                counters.entry(name).or_default().0 += value;
            }
        } else if series.starts_with("olmv2_reconcile_duration_seconds_sum{") {
            if let Some(name) = controller(series) {
                counters.entry(name).or_default().1 += value;
            }
        }
    }
    counters
}

/// The controller's requests received since `since`: (verb, resource) → count, and how many wrote. Watches are not
/// counted: a watch is no request a change costs, and kube-apiserver records one only when it ends (the test control
/// plane when it starts).
fn controller_requests(plane: &Plane, since: Instant) -> (BTreeMap<String, usize>, usize, usize) {
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    let (mut all, mut writes) = (0, 0);
    for record in plane.records() {
        let watch = record.verb == "watch";
        if watch || record.acting_user() != CONTROLLER_USER || record.received.is_none_or(|received| received < since) {
            continue;
        }
        all += 1;
        writes += usize::from(record.wrote());
        let resource = if record.subresource.is_empty() {
            record.resource.clone()
        } else {
            format!("{}/{}", record.resource, record.subresource)
        };
        *by_kind.entry(format!("{} {resource}", record.verb)).or_default() += 1;
    }
    (by_kind, all, writes)
}

/// The writes by anyone but the controller received since `since`, by (verb, resource).
fn others_writes(plane: &Plane, since: Instant) -> BTreeMap<String, usize> {
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    for record in plane.records() {
        if record.acting_user() == CONTROLLER_USER || !record.wrote() || record.received.is_none_or(|at| at < since) {
            continue;
        }
        let resource = if record.subresource.is_empty() {
            record.resource.clone()
        } else {
            format!("{}/{}", record.resource, record.subresource)
        };
        *by_kind.entry(format!("{} {resource}", record.verb)).or_default() += 1;
    }
    by_kind
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index]
}

/// A figure beside its goal.
fn against(met: bool, goal: &str) -> String {
    format!("(goal {goal}: {})", if met { "met" } else { "MISSED" })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // Each build named (`release,production` compares the two), cargo's binary wherever the target directory is.
    let profiles = std::env::var("OLMV2_BENCH_PROFILE").unwrap_or_else(|_| project::IMAGE_PROFILE.into());
    let binaries: Vec<_> = profiles
        .split(',')
        .map(|profile| (profile, project::build_controller_in(env!("CARGO"), profile).expect("the olmv2 binary")))
        .collect();
    let idle = Duration::from_secs(scale::env_number("OLMV2_BENCH_IDLE_SECONDS", 60));
    for size in sizes() {
        for (profile, binary) in &binaries {
            println!("== {} Operators x {} components, {profile} build", size.operators, size.components);
            run(binary, size, idle).await;
        }
    }
}

/// The Operators and their components the set-up creates.
fn setup_objects(size: Size) -> Vec<Value> {
    let mut objects = Vec::new();
    for index in 0..size.operators {
        let name = format!("op-{index:04}");
        objects.push(json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator",
                            "metadata": {"name": name}, "spec": {}}));
        objects.extend(components(&name, size));
    }
    objects
}

/// How long the control plane alone takes to create the set-up's objects (no controller watching, no webhook): what
/// the set-up's time owes to the bench and the control plane rather than to the controller.
async fn creation_alone(size: Size) -> Duration {
    let plane = scale::plane_with_operators_namespace("operators-bench-alone").await;
    let started = Instant::now();
    scale::create_all(&plane, setup_objects(size)).await;
    started.elapsed()
}

async fn run(binary: &Path, size: Size, idle: Duration) {
    let alone = creation_alone(size).await;
    let plane = scale::plane_with_operators_namespace("operators-bench").await;
    println!("  {}", plane.describe());
    let dir = std::env::temp_dir().join(format!("olmv2-operators-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let extra = ["--enable-v2alpha1".to_owned()];
    // `olmv2 run`'s own resync period (300 s).
    let controller = scale::start_controller_with(&plane, binary, &dir, 300, &extra).await;
    let (mut child, health) = (controller.child, controller.health);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, at_start) = scale::rss_kib(&child);
    let heap_at_start = scale::metric(health, "olmv2_allocator_bytes{statistic=\"allocated\"}");

    let (setup, loops_at_setup) = (Instant::now(), loop_counters(health));
    scale::create_all(&plane, setup_objects(size)).await;
    let created_in = setup.elapsed();
    let admin = plane.client().await;
    let operators = Api::<Operator>::all(admin.clone());
    let gathered = |operator: &Operator| {
        operator.status.as_ref().and_then(|s| s.components.as_ref()).is_some_and(|c| c.refs.len() == size.components)
    };
    loop {
        let list = operators.list(&Default::default()).await.expect("list");
        if list.items.iter().filter(|o| gathered(o)).count() == size.operators {
            break;
        }
        assert!(setup.elapsed() < Duration::from_secs(600), "Operators never gathered their components");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let gathered_in = setup.elapsed();
    let goal = if size.operators <= 200 { Some(Duration::from_secs(2)) } else { None };
    println!(
        "setup: {} Operators, {} components, all gathered in {gathered_in:.1?} {}",
        size.operators,
        size.operators * size.components,
        goal.map_or(String::new(), |goal| against(gathered_in <= goal, "2 s"))
    );
    // Where the set-up's time went: creating the objects (the bench's own requests, 16 at a time), then what the
    // controller asked while it gathered (each status write beyond one per Operator is a pass that ran while an
    // Operator's components were still arriving).
    let (setup_kinds, setup_requests, setup_writes) = controller_requests(&plane, setup);
    println!(
        "  created in {created_in:.1?} (the control plane alone, no controller: {alone:.1?}), gathered {:.1?} after \
         the last create; the controller's requests meanwhile: {setup_requests} ({setup_writes} writes)",
        gathered_in.saturating_sub(created_in)
    );
    for (request, count) in setup_kinds.iter().filter(|(request, _)| !request.starts_with("watch ")) {
        println!("    {request:<40} {count:>6}");
    }
    for (name, (reconciles, seconds)) in &loop_counters(health) {
        let (reconciles_before, seconds_before) = loops_at_setup.get(name).copied().unwrap_or_default();
        let (count, spent) = (reconciles - reconciles_before, seconds - seconds_before);
        if count > 0.0 {
            println!("    loop {name:<16} {count:>6} passes, {:.2} ms each", spent * 1000.0 / count);
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut watch = watcher::watcher(operators.clone(), watcher::Config::default()).applied_objects().boxed();
    let configmaps = Api::<ConfigMap>::namespaced(admin, "operators");
    let (changes_start, loops_before) = (Instant::now(), loop_counters(health));
    let mut latencies = Vec::with_capacity(CHANGES);
    // Changes spread over the Operators, each to a ConfigMap of one.
    let stride = (size.operators / CHANGES).max(1);
    for change in 0..CHANGES {
        let operator = format!("op-{:04}", (change * stride) % size.operators);
        let name = format!("{operator}-config-{}", change % size.configmaps());
        let patch = json!({"data": {"generation": change.to_string()}});
        let started = Instant::now();
        let changed = configmaps.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patched");
        let version = changed.metadata.resource_version.clone();
        scale::until_status_shows(&mut watch, &operator, &name, version.as_ref()).await;
        latencies.push(started.elapsed());
    }
    let loops_after = loop_counters(health);
    let (by_kind, requests, _) = controller_requests(&plane, changes_start);
    let reconciled =
        loops_after.get("operator").map_or(0.0, |c| c.0) - loops_before.get("operator").map_or(0.0, |c| c.0);
    latencies.sort();
    let (median, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
    let p99_goal = if size.operators <= 200 { Duration::from_millis(50) } else { Duration::from_millis(100) };
    println!("component change -> Operator status, over {CHANGES} changes:");
    println!(
        "  median {median:.1?}  p99 {p99:.1?}  max {:.1?} {}",
        latencies[latencies.len() - 1],
        against(p99 <= p99_goal, &format!("p99 <= {p99_goal:?}"))
    );
    let per_reconcile = requests as f64 / reconciled;
    println!(
        "API requests by the controller: {requests} for {reconciled} Operator reconciles = {per_reconcile:.2} per reconcile {}",
        if size.operators <= 200 { against(per_reconcile <= 1.5, "<= 1.5") } else { String::new() }
    );
    println!("  what the {CHANGES} changes woke, per loop (reconciles, mean pass):");
    for (name, (reconciles, seconds)) in &loops_after {
        let (reconciles_before, seconds_before) = loops_before.get(name).copied().unwrap_or_default();
        let (count, spent) = (reconciles - reconciles_before, seconds - seconds_before);
        if count > 0.0 {
            println!("    {name:<16} {count:>6}  {:.2} ms", spent * 1000.0 / count);
        }
    }
    println!("  what they asked of the API server:");
    for (request, count) in &by_kind {
        println!("    {request:<40} {count:>6}");
    }

    // An idle stretch: nothing changes, so nothing should be written.
    let idle_start = Instant::now();
    tokio::time::sleep(idle).await;
    let (idle_kinds, idle_requests, idle_writes) = controller_requests(&plane, idle_start);
    let per_minute = |count: usize| count as f64 * 60.0 / idle.as_secs_f64();
    println!(
        "idle {idle:?}: {:.1} requests and {:.1} writes per minute {}",
        per_minute(idle_requests),
        per_minute(idle_writes),
        against(idle_writes == 0, "0 writes")
    );
    for (request, count) in idle_kinds.iter().filter(|(request, _)| !request.starts_with("watch ")) {
        println!("    {request:<40} {count:>6}");
    }
    // On real Kubernetes kube-controller-manager may still be rolling the Deployments out (its client is limited to
    // 20 requests a second): each status it writes is a component change the Operator's status shows.
    let others = others_writes(&plane, idle_start);
    println!("  writes by others meanwhile: {}", others.values().sum::<usize>());
    for (request, count) in &others {
        println!("    {request:<40} {count:>6}");
    }
    let (peak, resident) = scale::rss_kib(&child);
    let rss_goal_mib = if size.operators <= 200 { 35.0 } else { 64.0 * 1000.0 * 1000.0 / (1024.0 * 1024.0) };
    let heap = scale::metric(health, "olmv2_allocator_bytes{statistic=\"allocated\"}");
    println!(
        "controller RSS: {} MiB before the Operators (heap {:.1} MiB), peak {} MiB, now {} MiB (heap {:.1} MiB) {}",
        scale::mib(at_start),
        heap_at_start / (1024.0 * 1024.0),
        scale::mib(peak),
        scale::mib(resident),
        heap / (1024.0 * 1024.0),
        against(
            peak as f64 / 1024.0 <= rss_goal_mib,
            if size.operators <= 200 { "peak <= 35 MiB" } else { "peak <= 64 MB" }
        )
    );
    let _ = child.kill();
    let _ = child.wait();
    scale::report_log(&dir);
    let _ = std::fs::remove_dir_all(dir);
}
