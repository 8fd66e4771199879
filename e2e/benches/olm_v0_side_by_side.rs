//! OLM v0 and this project side by side on real Kubernetes (etcd, kube-apiserver and kube-controller-manager, as
//! `scripts/install-kubernetes` builds them): the legacy workload of the `legacy_csvs` bench — hand-applied
//! AllNamespaces CSVs, each in its own namespace `op-<i>` with a global OperatorGroup, one owned CRD, a ServiceAccount
//! and one Deployment, among N namespaces in all, copied CSVs enabled or disabled (the OLMConfig `cluster`) — run by
//! OLM v0's `olm` operator (`scripts/install-olm`, with its release's CRDs) and by `olmv2 run` (the image's build,
//! `deploy/`'s identity) in turn, each on a control plane of its own started the same way, each manager as its own
//! process with its default settings and an identity of its own. A stand-in kubelet reports every pod Running and
//! Ready, so that kube-controller-manager reports the Deployments available.
//!
//! For each manager it prints: the time until every CSV is Succeeded; its RSS (settled and the files mapped of it,
//! peak, after the idle window); its CPU seconds (setup, idle window); its API requests and writes from the audit
//! log (setup, per idle minute); the copied CSVs; and, for Deployments deleted one after another, the time until
//! the CSV's status shows it (its phase leaves Succeeded), each change's time in order, and until it is Succeeded
//! again. Then each figure for both and their ratio. It prints figures and the goals beside them; it asserts no
//! timing.
//!
//! Run with `cargo bench -p olmv2-e2e --bench olm_v0_side_by_side`. Environment (defaults in brackets):
//! `OLMV2_BENCH_NAMESPACES` namespace counts [100,500,1000], `OLMV2_BENCH_COPIES` the modes [disabled,enabled],
//! `OLMV2_BENCH_CSVS` CSVs [100], `OLMV2_BENCH_IDLE_SECONDS` idle window [60], `OLMV2_BENCH_CHANGES` Deployments
//! deleted [20], `OLMV2_BENCH_MANAGERS` [olm-v0,olmv2]. OLM v0 serves its health on port 8080, which no flag moves:
//! nothing else may hold it (the oracle test neither).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // a benchmark fails loudly by design

#[path = "support/plane.rs"]
mod plane;
#[path = "support/scale.rs"]
mod scale;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::GroupVersionKind;
use olmv2::api::v1alpha1::{ClusterServiceVersion, CsvPhase};
use olmv2_e2e::cluster::{Cluster, Crds, Kubernetes};
use olmv2_e2e::kubernetes::{AuditLogReader, AuditRecord};
use olmv2_e2e::olm_v0::{OlmV0, OlmV0Binaries};
use olmv2_e2e::project;
use olmv2_e2e::real::{spawn_kubelet_everywhere, ServicePorts};
use serde_json::{json, Value};

use scale::{
    copied_csvs, create_csvs, csv_namespace, env_namespace_counts, env_number, mib, ready, wait_succeeded, Copies,
};

const WRITE_VERBS: [&str; 4] = ["create", "update", "patch", "delete"];
/// OLM v0's identity here: a client certificate's user in `system:masters`, as the cluster-admin binding of its
/// release's manifests lets it do anything.
const OLM_V0_USER: &str = "olm-v0";
const PROJECT_USER: &str = "system:serviceaccount:olmv2-system:olmv2-controller";
/// Setup has settled once the manager has written nothing for this long; gives up after `SETTLE_LIMIT`, which
/// leaves room for the largest run: with copies enabled, every CSV copied into every namespace (100,000 copies at
/// 1,000 namespaces, at the 90 or so writes a second either manager keeps on 2 cores).
const SETTLE_QUIET: Duration = Duration::from_secs(10);
const SETTLE_LIMIT: Duration = Duration::from_secs(45 * 60);
/// How long after a CSV's watch starts its Deployment is deleted: time for the watch to be served live.
const WATCH_LIVE: Duration = Duration::from_secs(1);
/// How long a deleted Deployment may take to show in its CSV's status, and the CSV to be Succeeded again.
const CHANGE_LIMIT: Duration = Duration::from_secs(60);
const GOALS: &str = "goals: our settled RSS <= 1/3 of OLM v0's; our writes per idle minute 0; our time to all \
                     Succeeded <= OLM v0's; change -> status p99 <= OLM v0's";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Manager {
    OlmV0,
    Project,
}

impl Manager {
    fn name(self) -> &'static str {
        match self {
            Self::OlmV0 => "OLM v0",
            Self::Project => "olmv2",
        }
    }

    fn user(self) -> &'static str {
        match self {
            Self::OlmV0 => OLM_V0_USER,
            Self::Project => PROJECT_USER,
        }
    }
}

struct Settings {
    managers: Vec<Manager>,
    modes: Vec<Copies>,
    namespace_counts: Vec<usize>,
    csvs: usize,
    idle: Duration,
    changes: usize,
}

impl Settings {
    fn from_env() -> Self {
        let list = |name: &str, default: &str| -> Vec<String> {
            std::env::var(name).unwrap_or_else(|_| default.to_owned()).split(',').map(|v| v.trim().to_owned()).collect()
        };
        let managers = list("OLMV2_BENCH_MANAGERS", "olm-v0,olmv2")
            .iter()
            .map(|manager| match manager.as_str() {
                "olm-v0" => Manager::OlmV0,
                "olmv2" => Manager::Project,
                other => panic!("OLMV2_BENCH_MANAGERS: olm-v0 and/or olmv2, not {other}"),
            })
            .collect();
        let modes = list("OLMV2_BENCH_COPIES", "disabled,enabled")
            .iter()
            .map(|mode| match mode.as_str() {
                "enabled" => Copies::Enabled,
                "disabled" => Copies::Disabled,
                other => panic!("OLMV2_BENCH_COPIES: enabled and/or disabled, not {other}"),
            })
            .collect();
        Self {
            managers,
            modes,
            namespace_counts: env_namespace_counts(),
            csvs: env_number("OLMV2_BENCH_CSVS", 100) as usize,
            idle: Duration::from_secs(env_number("OLMV2_BENCH_IDLE_SECONDS", 60)),
            changes: env_number("OLMV2_BENCH_CHANGES", 20) as usize,
        }
    }
}

/// Requests and writes counted in the audit log.
#[derive(Clone, Copy, Default)]
struct Traffic {
    requests: usize,
    writes: usize,
}

impl std::ops::Sub for Traffic {
    type Output = Self;
    fn sub(self, earlier: Self) -> Self {
        Self { requests: self.requests - earlier.requests, writes: self.writes - earlier.writes }
    }
}

/// What one run measured.
struct Figures {
    manager: Manager,
    copies: Copies,
    namespaces: usize,
    succeeded: usize,
    all_succeeded: Option<Duration>,
    settled: Option<Duration>,
    rss_settled_kib: u64,
    /// Of the settled RSS, the pages of files mapped: the binary's code and data, the libraries'.
    rss_settled_file_kib: u64,
    rss_peak_kib: u64,
    rss_idle_kib: u64,
    cpu_setup: f64,
    cpu_idle: f64,
    setup: Traffic,
    idle: Traffic,
    copied: usize,
    shown: Vec<Duration>,
    recovered: Vec<Duration>,
    missed: usize,
    /// The writes counted by verb and resource.
    setup_kinds: BTreeMap<String, usize>,
    /// The reads (get, list, watch) counted by verb and resource.
    setup_reads: BTreeMap<String, usize>,
    idle_kinds: BTreeMap<String, usize>,
    /// The idle window's reads by verb and resource.
    idle_reads: BTreeMap<String, usize>,
    /// The idle window's writes by object, as made.
    idle_named: Vec<String>,
}

// ---- the audit log ----------------------------------------------------------------------------------------------

/// The audit log read as it grows: the manager's requests and writes so far.
struct AuditTail {
    path: PathBuf,
    reader: AuditLogReader,
    user: &'static str,
    traffic: Traffic,
    by_kind: BTreeMap<String, usize>,
    reads_by_kind: BTreeMap<String, usize>,
    /// Each write, "verb resource namespace/name", in the order made.
    writes_named: Vec<String>,
}

impl AuditTail {
    fn new(path: PathBuf, user: &'static str) -> Self {
        Self {
            path,
            reader: AuditLogReader::default(),
            user,
            traffic: Traffic::default(),
            by_kind: BTreeMap::new(),
            reads_by_kind: BTreeMap::new(),
            writes_named: Vec::new(),
        }
    }

    /// Reads the lines written since the last call (up to the last whole line).
    fn poll(&mut self) -> Traffic {
        for record in self.reader.read_new(&self.path).expect("the audit log reads") {
            if record.user != self.user {
                continue;
            }
            self.traffic.requests += 1;
            if WRITE_VERBS.contains(&record.verb.as_str()) {
                self.traffic.writes += 1;
                *self.by_kind.entry(kind(&record)).or_insert(0) += 1;
                let name = record.name.as_deref().unwrap_or_default();
                let object = record.namespace.as_deref().map_or_else(|| name.to_owned(), |ns| format!("{ns}/{name}"));
                self.writes_named.push(format!("{} {object}", kind(&record)));
            } else {
                *self.reads_by_kind.entry(kind(&record)).or_insert(0) += 1;
            }
        }
        self.traffic
    }
}

/// "verb resource[/subresource]" of a request.
fn kind(record: &AuditRecord) -> String {
    let resource = record.resource.as_deref().unwrap_or("?");
    match record.subresource.as_deref() {
        Some(subresource) => format!("{} {resource}/{subresource}", record.verb),
        None => format!("{} {resource}", record.verb),
    }
}

// ---- the manager's process --------------------------------------------------------------------------------------

/// A manager running: OLM v0's `olm` or `olmv2 run`, stopped when dropped.
enum Running {
    OlmV0(OlmV0),
    Project(Child),
}

impl Running {
    fn pid(&self) -> u32 {
        match self {
            Self::OlmV0(olm) => olm.pid(),
            Self::Project(child) => child.id(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Self::Project(child) = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Resident memory in KiB, (peak, now), from `/proc/<pid>/status`.
fn rss_kib(pid: u32) -> (u64, u64) {
    (status_kib(pid, "VmHWM:"), status_kib(pid, "VmRSS:"))
}

/// Of the resident memory, the KiB of files mapped (code and data of the binary and its libraries): what is not
/// the heap, stacks and other anonymous memory.
fn rss_file_kib(pid: u32) -> u64 {
    status_kib(pid, "RssFile:")
}

/// A field of `/proc/<pid>/status` given in kB; 0 when the process or the field is gone.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find_map(|line| line.strip_prefix(field));
    line.and_then(|rest| rest.split_whitespace().next()).and_then(|value| value.parse().ok()).unwrap_or(0)
}

/// CPU seconds used so far (user and system), from `/proc/<pid>/stat`.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's closing parenthesis, from the state (the third field) on.
    let fields: Vec<&str> = stat.rsplit_once(") ").map(|(_, rest)| rest.split(' ').collect()).unwrap_or_default();
    let ticks = |index: usize| fields.get(index).and_then(|value| value.parse::<u64>().ok()).unwrap_or(0);
    (ticks(11) + ticks(12)) as f64 / clock_ticks()
}

fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let output = Command::new("getconf").arg("CLK_TCK").output().expect("getconf runs");
        String::from_utf8_lossy(&output.stdout).trim().parse().expect("CLK_TCK is a number")
    })
}

async fn start_olm_v0(cluster: &Cluster, binaries: &OlmV0Binaries, dir: &Path) -> Running {
    let plane = cluster.real().expect("real Kubernetes");
    let kubeconfig = dir.join("olm-v0.kubeconfig");
    let text = plane.certificate_kubeconfig(OLM_V0_USER, &["system:masters"]).expect("OLM v0's identity");
    std::fs::write(&kubeconfig, text).unwrap();
    let olm = OlmV0::start_as(plane, binaries, &kubeconfig).expect("OLM v0 starts");
    let started = Instant::now();
    while !olm.healthy() {
        assert!(started.elapsed() < Duration::from_secs(60), "OLM v0 is healthy within a minute");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Running::OlmV0(olm)
}

async fn start_project(cluster: &Cluster, binary: &Path, dir: &Path) -> Running {
    let ports = ServicePorts::free().expect("free ports");
    cluster.controller_config(&ports).await.expect("deploy/ applied, the controller's token");
    let kubeconfig = cluster.real().expect("real Kubernetes").dir().join("controller.kubeconfig");
    let address = |port: u16| format!("127.0.0.1:{port}");
    let child = Command::new(binary)
        .args(["run", "--health-address", &address(ports.health)])
        .args(["--webhook-address", &address(ports.webhook), "--webhook-service-port", &ports.webhook.to_string()])
        .args(["--api-address", &address(ports.api), "--api-service-port", &ports.api.to_string()])
        .args(["--cache", &dir.join("cache").display().to_string()])
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("controller.log")).unwrap())
        .spawn()
        .expect("olmv2 run starts");
    let health = ([127, 0, 0, 1], ports.health).into();
    let started = Instant::now();
    while !ready(health) {
        assert!(started.elapsed() < Duration::from_secs(60), "the controller is ready within a minute");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Running::Project(child)
}

// ---- the workload -----------------------------------------------------------------------------------------------

/// Creates `object` as `api`'s, sixteen at a time by the caller.
async fn create<K>(api: &Api<K>, object: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).expect("an object");
    api.create(&PostParams::default(), &object).await.expect("created");
}

/// Everything but the OperatorGroups and CSVs, before the manager starts: the namespaces (the CSVs' first), the
/// CRDs, the ServiceAccounts, and the OLMConfig when copies are off.
async fn prepare(admin: &kube::Client, csvs: usize, namespaces: usize, copies: Copies) {
    let namespace_api = Api::<Namespace>::all(admin.clone());
    futures_util::stream::iter(0..namespaces.max(csvs))
        .for_each_concurrent(16, |index| {
            let name = if index < csvs { csv_namespace(index) } else { format!("tenant-{index}") };
            let api = namespace_api.clone();
            async move { create(&api, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})).await }
        })
        .await;
    let crds = Api::<CustomResourceDefinition>::all(admin.clone());
    futures_util::stream::iter(0..csvs)
        .for_each_concurrent(16, |index| {
            let (crds, admin) = (crds.clone(), admin.clone());
            async move {
                create(&crds, scale::crd(index)).await;
                let accounts = Api::<ServiceAccount>::namespaced(admin, &csv_namespace(index));
                create(
                    &accounts,
                    json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "operator"}}),
                )
                .await;
            }
        })
        .await;
    if copies == Copies::Disabled {
        let gvk = GroupVersionKind::gvk("operators.coreos.com", "v1", "OLMConfig");
        let (resource, _) = kube::discovery::pinned_kind(admin, &gvk).await.expect("OLMConfig is served");
        let configs = Api::<DynamicObject>::all_with(admin.clone(), &resource);
        create(
            &configs,
            json!({"apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig", "metadata": {"name": "cluster"},
                "spec": {"features": {"disableCopiedCSVs": true}}}),
        )
        .await;
    }
}

/// Waits until the manager's writes stop; answers when the last one was, or None when they never stopped.
async fn settle(tail: &mut AuditTail) -> Option<Instant> {
    let (started, mut writes, mut last) = (Instant::now(), tail.poll().writes, Instant::now());
    while last.elapsed() < SETTLE_QUIET {
        if started.elapsed() > SETTLE_LIMIT {
            return None;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = tail.poll().writes;
        if now != writes {
            (writes, last) = (now, Instant::now());
        }
    }
    Some(last)
}

fn phase(csv: &ClusterServiceVersion) -> Option<CsvPhase> {
    csv.status.as_ref().map(|status| status.phase)
}

/// Deletes CSV `index`'s Deployment and answers when its status showed it (its phase left Succeeded) and when it was
/// Succeeded again, timed from the delete; None for what did not happen within `CHANGE_LIMIT`.
async fn delete_deployment(admin: &kube::Client, index: usize) -> (Option<Duration>, Option<Duration>) {
    let namespace = csv_namespace(index);
    let name = format!("operator-{index}.v1.0.0");
    let csvs = Api::<ClusterServiceVersion>::namespaced(admin.clone(), &namespace);
    let before = csvs.get(&name).await.expect("the CSV");
    assert_eq!(phase(&before), Some(CsvPhase::Succeeded), "{name} is Succeeded before its Deployment is deleted");
    // The watch starts at the collection's resourceVersion as of now: the CSV's own may be older than what
    // kube-apiserver's watch cache still holds (written in setup, a minute's idle window before), which it answers
    // with 410 Gone and an ended watch.
    let fields = format!("metadata.name={name}");
    let listed = csvs.list_metadata(&ListParams::default().fields(&fields)).await.expect("the CSV listed");
    let version = listed.metadata.resource_version.clone().unwrap_or_default();
    let params = WatchParams::default().fields(&fields).timeout(CHANGE_LIMIT.as_secs() as u32);
    let mut events = csvs.watch(&params, &version).await.expect("the CSV watched").boxed();
    // kube-apiserver serves a watch from its watch cache, which holds back the events of a resourceVersion newer than
    // the last it saw until it catches up (it asks etcd for progress every 100 ms or so): a change made at once
    // would be timed from before the watch delivers anything, as about 100 ms for either manager.
    tokio::time::sleep(WATCH_LIVE).await;
    let mut seen = Vec::new();
    let deployments = Api::<Deployment>::namespaced(admin.clone(), &namespace);
    let start = Instant::now();
    deployments.delete("operator", &DeleteParams::background()).await.expect("the Deployment deleted");
    let (mut shown, mut recovered) = (None, None);
    let outcome = tokio::time::timeout(CHANGE_LIMIT, async {
        while let Some(event) = events.try_next().await.expect("the watch") {
            let csv = match event {
                WatchEvent::Modified(csv) => csv,
                WatchEvent::Error(error) => panic!("the watch of {name} failed: {error:?}"),
                _ => continue,
            };
            let status = csv.status.clone().unwrap_or_default();
            seen.push(format!("{:?}/{}", status.phase, status.reason.unwrap_or_default()));
            match (shown, phase(&csv)) {
                (None, Some(phase)) if phase != CsvPhase::Succeeded => shown = Some(start.elapsed()),
                (Some(_), Some(CsvPhase::Succeeded)) => {
                    recovered = Some(start.elapsed());
                    return;
                }
                _ => {}
            }
        }
    })
    .await;
    if outcome.is_err() || recovered.is_none() {
        println!("  {name}: after its Deployment was deleted, within {CHANGE_LIMIT:?}: {}", seen.join(" -> "));
        // Succeeded again later, or never: the next change waits for it either way.
        let _ = wait_for_succeeded(&csvs, &name).await;
    }
    (shown, recovered)
}

async fn wait_for_succeeded(csvs: &Api<ClusterServiceVersion>, name: &str) -> bool {
    let started = Instant::now();
    while started.elapsed() < CHANGE_LIMIT {
        if csvs.get(name).await.ok().as_ref().and_then(phase) == Some(CsvPhase::Succeeded) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    false
}

// ---- one run ----------------------------------------------------------------------------------------------------

async fn run(manager: Manager, settings: &Settings, copies: Copies, namespaces: usize, binary: &Path) -> Figures {
    let name = format!("side-by-side-{}", manager.user().rsplit(':').next().unwrap_or_default());
    let cluster = match manager {
        Manager::OlmV0 => {
            let binaries = OlmV0Binaries::find().expect("scripts/install-olm built OLM v0");
            Cluster::start_with_crds(Kubernetes::Real, &name, &Crds::Files(binaries.crds.clone())).await
        }
        Manager::Project => Cluster::start(Kubernetes::Real, &name).await,
    }
    .expect("the control plane starts");
    let admin = cluster.client().await.expect("admin");
    prepare(&admin, settings.csvs, namespaces, copies).await;
    // The managers' logs outlive the control plane's directory, which goes with it.
    let dir = std::env::temp_dir().join(format!("olmv2-side-by-side-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let running = match manager {
        Manager::OlmV0 => start_olm_v0(&cluster, &OlmV0Binaries::find().expect("OLM v0"), &dir).await,
        Manager::Project => start_project(&cluster, binary, &dir).await,
    };
    let pid = running.pid();
    let mut tail = AuditTail::new(cluster.real().expect("real").audit_log(), manager.user());
    let kubelet = spawn_kubelet_everywhere(admin.clone());
    let start_traffic = tail.poll();
    let start_cpu = cpu_seconds(pid);

    let start = Instant::now();
    create_csvs(&admin, settings.csvs).await;
    let (succeeded, all_succeeded) = wait_succeeded(&admin, settings.csvs, start).await;
    let settled = settle(&mut tail).await.map(|at| at - start);
    let setup = tail.poll() - start_traffic;
    let cpu_setup = cpu_seconds(pid) - start_cpu;
    let (_, rss_settled_kib) = rss_kib(pid);
    let rss_settled_file_kib = rss_file_kib(pid);
    let setup_kinds = std::mem::take(&mut tail.by_kind);
    let setup_reads = std::mem::take(&mut tail.reads_by_kind);
    tail.writes_named.clear();

    tokio::time::sleep(settings.idle).await;
    let idle = tail.poll() - setup - start_traffic;
    let cpu_idle = cpu_seconds(pid) - start_cpu - cpu_setup;
    let (_, rss_idle_kib) = rss_kib(pid);
    let idle_kinds = std::mem::take(&mut tail.by_kind);
    let idle_reads = std::mem::take(&mut tail.reads_by_kind);
    let idle_named = std::mem::take(&mut tail.writes_named);
    let copied = copied_csvs(&admin).await;

    let (mut shown, mut recovered, mut missed) = (Vec::new(), Vec::new(), 0);
    for change in 0..settings.changes.min(settings.csvs) {
        match delete_deployment(&admin, change).await {
            (Some(show), Some(recover)) => {
                shown.push(show);
                recovered.push(recover);
            }
            (Some(show), None) => {
                shown.push(show);
                missed += 1;
            }
            _ => missed += 1,
        }
    }
    let (rss_peak_kib, _) = rss_kib(pid);
    kubelet.abort();
    drop(running);
    println!("  logs: {}", dir.display());
    Figures {
        manager,
        copies,
        namespaces: namespaces.max(settings.csvs),
        succeeded,
        all_succeeded,
        settled,
        rss_settled_kib,
        rss_settled_file_kib,
        rss_peak_kib,
        rss_idle_kib,
        cpu_setup,
        cpu_idle,
        setup,
        idle,
        copied,
        shown,
        recovered,
        missed,
        setup_kinds,
        setup_reads,
        idle_kinds,
        idle_reads,
        idle_named,
    }
}

// ---- figures ----------------------------------------------------------------------------------------------------

fn print_kinds(what: &str, kinds: &BTreeMap<String, usize>) {
    let counts: Vec<String> = kinds.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
    println!("    {what}: {}", if counts.is_empty() { "none".to_owned() } else { counts.join(", ") });
}

fn mode(copies: Copies) -> &'static str {
    match copies {
        Copies::Enabled => "enabled",
        Copies::Disabled => "disabled",
    }
}

fn seconds(duration: Option<Duration>) -> String {
    duration.map_or_else(|| "never".to_owned(), |d| format!("{:.1} s", d.as_secs_f64()))
}

/// The `q` quantile of `durations` (nearest rank), in milliseconds.
fn quantile_ms(durations: &[Duration], q: f64) -> Option<f64> {
    let mut sorted = durations.to_vec();
    sorted.sort();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).map(|d| d.as_secs_f64() * 1000.0)
}

fn per_minute(count: usize, window: Duration) -> f64 {
    count as f64 / (window.as_secs_f64() / 60.0)
}

/// Each measure of one run, by name, as printed in the comparison.
fn measures(f: &Figures, settings: &Settings) -> Vec<(&'static str, Option<f64>, String)> {
    let ms = |value: Option<f64>| value.map_or_else(|| "-".to_owned(), |v| format!("{v:.0} ms"));
    let all = f.all_succeeded.map(|d| d.as_secs_f64());
    let idle_writes = per_minute(f.idle.writes, settings.idle);
    let idle_requests = per_minute(f.idle.requests, settings.idle);
    let shown_50 = quantile_ms(&f.shown, 0.5);
    let shown_99 = quantile_ms(&f.shown, 0.99);
    let recovered_50 = quantile_ms(&f.recovered, 0.5);
    vec![
        ("time until every CSV Succeeded", all, seconds(f.all_succeeded)),
        ("RSS settled (MiB)", Some(f.rss_settled_kib as f64 / 1024.0), mib(f.rss_settled_kib)),
        (
            "RSS settled, of it files mapped (MiB)",
            Some(f.rss_settled_file_kib as f64 / 1024.0),
            mib(f.rss_settled_file_kib),
        ),
        ("RSS after the idle window (MiB)", Some(f.rss_idle_kib as f64 / 1024.0), mib(f.rss_idle_kib)),
        ("RSS peak (MiB)", Some(f.rss_peak_kib as f64 / 1024.0), mib(f.rss_peak_kib)),
        ("CPU seconds, setup", Some(f.cpu_setup), format!("{:.1}", f.cpu_setup)),
        ("CPU seconds, idle window", Some(f.cpu_idle), format!("{:.2}", f.cpu_idle)),
        ("API requests, setup", Some(f.setup.requests as f64), f.setup.requests.to_string()),
        ("API writes, setup", Some(f.setup.writes as f64), f.setup.writes.to_string()),
        ("API requests per idle minute", Some(idle_requests), format!("{idle_requests:.1}")),
        ("API writes per idle minute", Some(idle_writes), format!("{idle_writes:.1}")),
        ("copied CSVs", Some(f.copied as f64), f.copied.to_string()),
        ("Deployment deleted -> CSV status, median", shown_50, ms(shown_50)),
        ("Deployment deleted -> CSV status, p99", shown_99, ms(shown_99)),
        ("Deployment deleted -> Succeeded again, median", recovered_50, ms(recovered_50)),
    ]
}

fn print_run(f: &Figures, settings: &Settings) {
    println!(
        "{}: copies {}, {} namespaces, {} CSVs: {} Succeeded; writes stopped by {}; {} of {} changes not seen \
         within {CHANGE_LIMIT:?}",
        f.manager.name(),
        mode(f.copies),
        f.namespaces,
        settings.csvs,
        f.succeeded,
        f.settled.map_or_else(|| format!("never (still writing after {SETTLE_LIMIT:?})"), |d| seconds(Some(d))),
        f.missed,
        f.shown.len() + f.missed,
    );
    for (name, _, text) in measures(f, settings) {
        println!("  {name}: {text}");
    }
    print_kinds("setup writes", &f.setup_kinds);
    print_kinds("setup reads", &f.setup_reads);
    print_kinds("idle writes", &f.idle_kinds);
    print_kinds("idle reads", &f.idle_reads);
    // Each change's time, in order: the p99 of twenty is their slowest, and whether it was the first change after the
    // idle window or one in the middle is what tells a cold path from the run's spread.
    let times: Vec<String> = f.shown.iter().map(|d| format!("{:.0}", d.as_secs_f64() * 1000.0)).collect();
    println!("    changes -> CSV status, in order (ms): {}", times.join(" "));
    // Which objects, in order: what an idle write was is the first question it raises.
    for write in f.idle_named.iter().take(40) {
        println!("      {write}");
    }
}

/// Each measure for both managers, and ours over OLM v0's.
fn print_comparison(all: &[Figures], settings: &Settings) {
    println!();
    println!(
        "{} hand-applied AllNamespaces CSVs, {} s idle window, {} Deployments deleted; each manager with its defaults",
        settings.csvs,
        settings.idle.as_secs(),
        settings.changes
    );
    let mut pairs: BTreeMap<(usize, &'static str), BTreeMap<Manager, &Figures>> = BTreeMap::new();
    for f in all {
        pairs.entry((f.namespaces, mode(f.copies))).or_default().insert(f.manager, f);
    }
    for ((namespaces, copies), by_manager) in pairs {
        println!();
        println!("copies {copies}, {namespaces} namespaces:");
        println!("| measure | OLM v0 | olmv2 | olmv2 / OLM v0 |");
        println!("| --- | --- | --- | --- |");
        let theirs = by_manager.get(&Manager::OlmV0).map(|f| measures(f, settings));
        let ours = by_manager.get(&Manager::Project).map(|f| measures(f, settings));
        let rows = theirs.as_ref().or(ours.as_ref()).map_or(0, Vec::len);
        for row in 0..rows {
            let cell = |measures: &Option<Vec<(&'static str, Option<f64>, String)>>| {
                measures.as_ref().map_or_else(|| "-".to_owned(), |m| m[row].2.clone())
            };
            let value =
                |measures: &Option<Vec<(&'static str, Option<f64>, String)>>| measures.as_ref().and_then(|m| m[row].1);
            let ratio = match (value(&ours), value(&theirs)) {
                (Some(ours), Some(theirs)) if theirs > 0.0 => format!("{:.2}", ours / theirs),
                _ => "-".to_owned(),
            };
            let name = theirs.as_ref().or(ours.as_ref()).map(|m| m[row].0).unwrap_or_default();
            println!("| {name} | {} | {} | {ratio} |", cell(&theirs), cell(&ours));
        }
    }
    println!("{GOALS}");
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let settings = Settings::from_env();
    let binary = if settings.managers.contains(&Manager::Project) {
        project::build_controller(env!("CARGO")).expect("the olmv2 binary")
    } else {
        PathBuf::new()
    };
    let mut all = Vec::new();
    for &copies in &settings.modes {
        for &namespaces in &settings.namespace_counts {
            for &manager in &settings.managers {
                let figures = run(manager, &settings, copies, namespaces, &binary).await;
                print_run(&figures, &settings);
                all.push(figures);
            }
        }
    }
    print_comparison(&all, &settings);
}
