//! The controller at cluster scale: 100 v2alpha1 Operators installed from bundle images of a real registry (each the
//! grumbo sample renamed, AllNamespaces, approved by the admin) and 100 OLM v0 CSVs (AllNamespaces, copied CSVs
//! disabled), among 100, then 500, then 1,000 namespaces, on the test control plane (a stand-in reports Deployments
//! rolled out) or on real Kubernetes with `OLMV2_E2E_KUBERNETES=real` (kube-controller-manager rolls them out, a
//! stand-in kubelet runs their pods). The controller runs as its own process (`olmv2 run`, production build) with
//! `deploy/`'s identity. Prints: the cold start (from the objects' creation to every Operator Installed and every CSV
//! Succeeded), the controller's RSS at each namespace count, its API writes per idle minute (from the audit log,
//! listed by object), the time from a component change to the Operator's status showing it (median, p99) and where
//! that time goes (`timeline`), the API requests per Operator reconcile, and a restart until its writes settle. It
//! prints figures and the goals beside them; it asserts no timing.
//!
//! Run with `cargo bench -p olmv2-e2e --bench scale`. Environment (defaults in brackets): `OLMV2_BENCH_OPERATORS`
//! [100], `OLMV2_BENCH_CSVS` [100], `OLMV2_BENCH_NAMESPACES` counts [100,500,1000], `OLMV2_BENCH_IDLE_SECONDS`
//! [120], `OLMV2_BENCH_QUIET_SECONDS` more idle time before the RSS is read again [0], `OLMV2_BENCH_CHANGES` [200],
//! `OLMV2_BENCH_RESYNC_SECONDS` [600],
//! `OLMV2_BENCH_HEAPTRACK` a file prefix for heap profiles, `<prefix>-<n>.zst` per controller start [unset],
//! `OLMV2_BENCH_PROFILE` the controller's cargo profile [production; heaptrack keeps up with `release` better].

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // a benchmark fails loudly by design

#[path = "support/plane.rs"]
mod plane;
#[path = "support/scale.rs"]
mod scale;
#[path = "support/timeline.rs"]
mod timeline;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube_emulator::audit::Record;
use olmv2::api::v2alpha1::{Install, InstallState, Operator};
use olmv2::bundle::image::{ImageClient, RegistryOptions};
use olmv2_e2e::project;
use olmv2_e2e::registry::Registry;
use serde_json::json;

use plane::Plane;
use scale::{
    create_all, create_csvs, env_namespace_counts, env_number, metric, mib, phases, prepare, report_log, rss_kib,
    start_controller_with, Copies,
};

const CONTROLLER_USER: &str = "system:serviceaccount:olmv2-system:olmv2-controller";
const WRITE_VERBS: [&str; 4] = ["create", "update", "patch", "delete"];
const GOALS: &str = "goals (issue #24): RSS <= 64 MB and flat in the namespace count; 0 writes per idle minute; \
                     change -> status p99 < 1 s";

fn controller_records(plane: &Plane) -> Vec<Record> {
    plane.records().into_iter().filter(|r| r.acting_user() == CONTROLLER_USER).collect()
}

/// How many writes the controller made so far.
fn controller_writes(plane: &Plane) -> usize {
    plane.count(|r| r.acting_user() == CONTROLLER_USER && WRITE_VERBS.contains(&r.verb.as_str()))
}

fn writes(records: &[Record]) -> Vec<&Record> {
    records.iter().filter(|r| WRITE_VERBS.contains(&r.verb.as_str())).collect()
}

/// Prints how many RBAC objects the cluster holds and their size as JSON: what every Install's permissions are
/// computed from.
async fn print_rbac_sizes(admin: &kube::Client) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    async fn size<K>(admin: &kube::Client) -> (usize, usize)
    where
        K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    {
        let list = Api::<K>::all(admin.clone()).list(&ListParams::default()).await.expect("listed");
        (list.items.len(), list.items.iter().map(|item| serde_json::to_vec(item).unwrap().len()).sum())
    }
    let sizes = [
        ("Roles", size::<Role>(admin).await),
        ("ClusterRoles", size::<ClusterRole>(admin).await),
        ("RoleBindings", size::<RoleBinding>(admin).await),
        ("ClusterRoleBindings", size::<ClusterRoleBinding>(admin).await),
    ];
    let shown: Vec<String> = sizes
        .iter()
        .map(|(kind, (count, bytes))| format!("{count} {kind} ({} MiB)", mib(*bytes as u64 / 1024)))
        .collect();
    println!("RBAC: {}", shown.join(", "));
}

/// The status of every Operator, Install and original CSV, by kind and name, without the times conditions carry.
async fn statuses(admin: &kube::Client) -> BTreeMap<String, serde_json::Value> {
    let mut statuses = BTreeMap::new();
    for (kind, plural, group, version) in [
        ("Operator", "operators", "operators.coreos.com", "v2alpha1"),
        ("Install", "installs", "operators.coreos.com", "v2alpha1"),
        ("ClusterServiceVersion", "clusterserviceversions", "operators.coreos.com", "v1alpha1"),
    ] {
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
        let api = Api::<kube::api::DynamicObject>::all_with(admin.clone(), &resource);
        for object in api.list(&ListParams::default().labels("!olm.copiedFrom")).await.expect("listed").items {
            let key = format!(
                "{kind} {}/{}",
                object.metadata.namespace.clone().unwrap_or_default(),
                object.metadata.name.clone().unwrap_or_default()
            );
            statuses.insert(key, object.data["status"].clone());
        }
    }
    statuses
}

/// Prints how many statuses differ between `before` and `after`, and the first difference.
fn print_status_changes(before: &BTreeMap<String, serde_json::Value>, after: &BTreeMap<String, serde_json::Value>) {
    let changed: Vec<&String> = before.keys().filter(|key| after.get(*key) != before.get(*key)).collect();
    println!("  statuses different after the restart: {} of {}", changed.len(), before.len());
    if let Some(key) = changed.first() {
        println!("    first: {key}\n      before: {}\n      after:  {}", before[*key], after[*key]);
    }
}

/// Prints `requests` counted by verb and resource, the ten most frequent first.
fn print_requests(label: &str, requests: &[&Record]) {
    let mut by_kind = BTreeMap::<String, usize>::new();
    for request in requests {
        let resource = if request.resource.is_empty() {
            request.path.clone()
        } else if request.subresource.is_empty() {
            request.resource.clone()
        } else {
            format!("{}/{}", request.resource, request.subresource)
        };
        *by_kind.entry(format!("{} {resource}", request.verb)).or_default() += 1;
    }
    let mut counted: Vec<(String, usize)> = by_kind.into_iter().collect();
    counted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for (what, count) in counted.iter().take(10) {
        println!("  {label}: {what} x{count}");
    }
}

/// Waits until the controller's writes stop for `quiet`; answers when they did.
async fn settle(plane: &Plane, quiet: Duration) -> Duration {
    let started = Instant::now();
    let (mut count, mut last) = (controller_writes(plane), Instant::now());
    while last.elapsed() < quiet && started.elapsed() < Duration::from_secs(300) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = controller_writes(plane);
        if now != count {
            (count, last) = (now, Instant::now());
        }
    }
    last - started
}

/// Pushes grumbo 1.0.0 renamed to `grumbo<index>` (package, CRD group, Deployment, account) as `grumbo<index>:1.0.0`.
async fn push_operator_bundle(images: &ImageClient, registry: &Registry, dir: &Path, index: usize) -> String {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundles/grumbo/1.0.0");
    let target = dir.join(format!("bundle-{index}"));
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir_all(target.join(sub)).unwrap();
        for entry in std::fs::read_dir(source.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let text = text
                .replace("grumbo", &format!("grumbo{index}"))
                .replace("manufacturing", &format!("manufacturing{index}"));
            let name = path.file_name().unwrap().to_string_lossy().replace("grumbo", &format!("grumbo{index}"));
            std::fs::write(
                target.join(sub).join(name.replace("manufacturing", &format!("manufacturing{index}"))),
                text,
            )
            .unwrap();
        }
    }
    let image = registry.reference(&format!("grumbo{index}:1.0.0"));
    let digest = images.push_bundle(&target, &image, false).await.expect("bundle pushed");
    registry.reference(&format!("grumbo{index}@{digest}"))
}

fn operator(index: usize, image: &str) -> serde_json::Value {
    json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "metadata": {"name": format!("grumbo{index}")},
        "spec": {"updates": {"type": "ManifestImage", "manifestImage": image}}})
}

/// Approves, as the admin, every Install waiting for approval; answers how many are Installed.
async fn approve_waiting(installs: &Api<Install>) -> usize {
    let list = installs.list(&ListParams::default()).await.expect("Installs listed");
    let approve = json!({"spec": {"approval": "Approved"}});
    for install in &list.items {
        if install.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval) {
            let name = install.metadata.name.clone().unwrap_or_default();
            let _ = installs.patch(&name, &PatchParams::default(), &Patch::Merge(&approve)).await;
        }
    }
    list.items.iter().filter(|i| i.status.as_ref().and_then(|s| s.state) == Some(InstallState::Installed)).count()
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * fraction).round() as usize]
}

/// Prints the controller's RSS, its peak, and what the RSS is made of: anonymous memory (the heap, stacks) and
/// mapped files (the binary's code as far as it was run); then the heap as the allocator counts it (its metrics at
/// `health`): what the program holds, the pages that hold it, the allocator's metadata, and all it keeps resident.
fn print_rss(label: &str, child: &std::process::Child, health: std::net::SocketAddr) {
    let (peak, now) = rss_kib(child);
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let field = |name: &str| {
        let value =
            status.lines().find_map(|line| line.strip_prefix(name)).and_then(|rest| rest.split_whitespace().next());
        value.and_then(|value| value.parse::<u64>().ok()).unwrap_or(0)
    };
    println!(
        "  {label}: controller RSS {} MiB (anonymous {} MiB, files {} MiB; peak so far {} MiB)",
        mib(now),
        mib(field("RssAnon:")),
        mib(field("RssFile:")),
        mib(peak)
    );
    let heap = |statistic: &str| {
        let bytes = metric(health, &format!("olmv2_allocator_bytes{{statistic=\"{statistic}\"}}"));
        format!("{:.1}", bytes / 1024.0 / 1024.0)
    };
    println!(
        "    heap: allocated {} MiB in {} MiB of pages, metadata {} MiB; allocator resident {} MiB",
        heap("allocated"),
        heap("active"),
        heap("metadata"),
        heap("resident")
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let operators = env_number("OLMV2_BENCH_OPERATORS", 100) as usize;
    let csvs = env_number("OLMV2_BENCH_CSVS", 100) as usize;
    let counts = env_namespace_counts();
    let idle = Duration::from_secs(env_number("OLMV2_BENCH_IDLE_SECONDS", 120));
    let changes = env_number("OLMV2_BENCH_CHANGES", 200) as usize;
    let quiet = Duration::from_secs(env_number("OLMV2_BENCH_QUIET_SECONDS", 0));
    let resync = env_number("OLMV2_BENCH_RESYNC_SECONDS", 600);
    println!("scale: {operators} Operators, {csvs} CSVs (copied CSVs disabled), namespaces {counts:?}; {GOALS}");
    let binary = project::build_controller(env!("CARGO")).expect("the olmv2 binary");

    let plane = Plane::start("scale-bench").await;
    println!("  {}", plane.describe());
    prepare(&plane, csvs, counts[0], Copies::Disabled).await;
    create_all(&plane, vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "operators"}})]).await;
    let admin = plane.client().await;
    let dir = std::env::temp_dir().join(format!("olmv2-scale-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let registry = Registry::start("scale-bench").expect("docker-registry starts");
    let images = ImageClient::new(RegistryOptions {
        insecure_registries: vec![registry.host.clone()],
        ..RegistryOptions::default()
    });
    let bundles: Vec<String> = futures_util::stream::iter(0..operators)
        .map(|index| push_operator_bundle(&images, &registry, &dir, index))
        .buffered(8)
        .collect()
        .await;
    let extra = vec!["--enable-v2alpha1".to_owned(), "--insecure-registry".to_owned(), registry.host.clone()];
    let controller = start_controller_with(&plane, &binary, &dir, resync, &extra).await;
    let mut child = controller.child;
    let stand_in = plane.run_deployments(admin.clone());

    // Cold start: everything created at once, the Installs approved as they ask.
    let start = Instant::now();
    let operators_api = Api::<Operator>::all(admin.clone());
    for (index, image) in bundles.iter().enumerate() {
        let object: Operator = serde_json::from_value(operator(index, image)).unwrap();
        operators_api.create(&PostParams::default(), &object).await.expect("Operator created");
    }
    create_csvs(&admin, csvs).await;
    let installs = Api::<Install>::all(admin.clone());
    loop {
        let installed = approve_waiting(&installs).await;
        // The Operators' Installs apply a CSV record each (in `operators`), Succeeded as their content is healthy.
        let (succeeded, _) = phases(&admin).await;
        if installed == operators && succeeded >= csvs + operators {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(900), "{installed} Installs installed, {succeeded} CSVs");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let ready = start.elapsed();
    let settled = settle(&plane, Duration::from_secs(10)).await;
    println!(
        "cold start: {operators} Operators Installed and {csvs} CSVs (and the Operators' CSV records) Succeeded \
         {ready:.1?} after their creation"
    );
    print_rss(&format!("{} namespaces", counts[0] + 1), &child, controller.health);
    let _ = settled;
    print_rbac_sizes(&admin).await;

    // More namespaces: the RSS at each count.
    let mut present = counts[0].max(csvs);
    for &count in &counts[1..] {
        let added = (present..count)
            .map(|i| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("tenant-{i}")}}))
            .collect();
        create_all(&plane, added).await;
        present = count;
        settle(&plane, Duration::from_secs(10)).await;
        print_rss(&format!("{count} namespaces"), &child, controller.health);
    }

    // Idle: what the controller writes when nothing changes.
    let (before, requests_before) = (writes(&controller_records(&plane)).len(), controller_records(&plane).len());
    let all_before = plane.count(|_| true);
    tokio::time::sleep(idle).await;
    // What else changed meanwhile: each change may wake the controller's passes.
    let others: Vec<Record> = plane.records().into_iter().skip(all_before).collect();
    let other_writes: Vec<&Record> =
        writes(&others).into_iter().filter(|r| r.acting_user() != CONTROLLER_USER).collect();
    println!("  idle: {} writes by others", other_writes.len());
    print_requests("idle writes by others", &other_writes);
    let records = controller_records(&plane);
    let idle_writes: Vec<&Record> = writes(&records).into_iter().skip(before).collect();
    let per_minute = idle_writes.len() as f64 * 60.0 / idle.as_secs_f64();
    println!("idle: {} controller writes in {} s = {per_minute:.1} per idle minute", idle_writes.len(), idle.as_secs());
    print_requests("idle writes", &idle_writes);
    // Reads too: passes that write nothing still load the API server (and the controller).
    let idle_requests: Vec<&Record> = records.iter().skip(requests_before).collect();
    println!("  idle: {} controller requests in all", idle_requests.len());
    print_requests("idle requests", &idle_requests);
    print_rss("after idle", &child, controller.health);
    if quiet > Duration::ZERO {
        // Longer still: what the process keeps for a while after a busy spell (the events remembered for repeats, 6 minutes).
        tokio::time::sleep(quiet).await;
        print_rss(&format!("after {} s more", quiet.as_secs()), &child, controller.health);
    }

    // Change -> status: a component of an Operator changes; its status shows the new resourceVersion.
    let reconciles = |health| metric(health, "olmv2_reconciles_total{controller=\"operator\"}");
    let (requests_before, reconciles_before) = (controller_records(&plane).len(), reconciles(controller.health));
    let mut watch = watcher::watcher(operators_api.clone(), watcher::Config::default()).applied_objects().boxed();
    let deployments = Api::<Deployment>::namespaced(admin.clone(), "operators");
    let mut latencies = Vec::with_capacity(changes);
    let mut windows = Vec::with_capacity(changes);
    for change in 0..changes {
        let index = change % operators;
        let (name, deployment) = (format!("grumbo{index}"), format!("grumbo{index}-operator"));
        let patch = json!({"metadata": {"annotations": {"bench.olmv2.io/change": change.to_string()}}});
        let started = Instant::now();
        let changed =
            deployments.patch(&deployment, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patched");
        let version = changed.metadata.resource_version.clone();
        scale::until_status_shows(&mut watch, &name, &deployment, version.as_ref()).await;
        latencies.push(started.elapsed());
        windows.push(timeline::Window { started, ended: Instant::now(), operator: name.clone() });
    }
    latencies.sort();
    let records = controller_records(&plane);
    let requests = records.len() - requests_before;
    print_requests("requests while changing", &records.iter().skip(requests_before).collect::<Vec<_>>());
    let reconciled = reconciles(controller.health) - reconciles_before;
    println!(
        "component change -> Operator status over {changes} changes: median {:.1?}, p99 {:.1?}, max {:.1?}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies[latencies.len() - 1]
    );
    println!(
        "API requests: {requests} for {reconciled} Operator reconciles = {:.2} per reconcile",
        requests as f64 / reconciled
    );
    if plane.audit_full() {
        println!("  the audit log is full (the oldest records dropped): the counts above are not to be trusted");
    }
    timeline::print(
        &plane.records(),
        &windows,
        |r| {
            r.verb == "patch"
                && r.resource == "deployments"
                && r.subresource.is_empty()
                && r.acting_user() != CONTROLLER_USER
        },
        |r| r.verb == "patch" && r.resource == "operators" && r.subresource == "status",
        |r| r.user == CONTROLLER_USER,
    );

    // A restart: the new process reads everything again and writes what it must.
    let before_restart = statuses(&admin).await;
    let _ = child.kill();
    let _ = child.wait();
    let writes_before = writes(&controller_records(&plane)).len();
    let restarted_at = Instant::now();
    let controller = start_controller_with(&plane, &binary, &dir, resync, &extra).await;
    child = controller.child;
    let ready_after = restarted_at.elapsed();
    while reconciles(controller.health).is_nan() || reconciles(controller.health) < operators as f64 {
        assert!(restarted_at.elapsed() < Duration::from_secs(300), "the restarted controller never reconciled all");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let all_reconciled = restarted_at.elapsed();
    settle(&plane, Duration::from_secs(10)).await;
    let records = controller_records(&plane);
    let restart_writes: Vec<&Record> = writes(&records).into_iter().skip(writes_before).collect();
    println!(
        "restart: ready in {ready_after:.1?}, every Operator reconciled in {all_reconciled:.1?}, {} writes",
        restart_writes.len()
    );
    print_requests("restart writes", &restart_writes);
    print_status_changes(&before_restart, &statuses(&admin).await);
    print_rss(&format!("restarted, {present} namespaces"), &child, controller.health);

    stand_in.abort();
    let _ = child.kill();
    let _ = child.wait();
    report_log(&dir);
    let _ = std::fs::remove_dir_all(dir);
}
