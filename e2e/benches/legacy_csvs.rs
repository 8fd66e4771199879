//! OLM v0's CSV loops at scale (issue #19): hand-applied AllNamespaces CSVs, each in its own namespace `op-<i>` with a
//! global OperatorGroup, one owned CRD, a ServiceAccount and one Deployment, among N namespaces in all; copied CSVs
//! enabled (the default) and disabled (the OLMConfig `cluster`). The control plane runs in-process with a stand-in for
//! the Deployment controller (or is real Kubernetes with `OLMV2_E2E_KUBERNETES=real`); the controller runs as its
//! own process (`olmv2 run`, production build) with `deploy/`'s identity. For each mode and namespace count it prints
//! the time until every CSV is Succeeded, the controller's RSS (peak, settled, after the idle window), the copied CSVs
//! present, and the API writes the controller made (from the audit log) during setup (from the controller's start until its writes stop) and during an idle
//! window after it, the idle ones listed by object. It prints figures and the goal beside them; it asserts no
//! timing. Copied CSVs are counted whether or not the controller makes them yet.
//!
//! Run with `cargo bench -p olmv2-e2e --bench legacy_csvs`. Environment (defaults in brackets):
//! `OLMV2_BENCH_NAMESPACES` namespace counts [100,500,1000], `OLMV2_BENCH_CSVS` CSVs [100], `OLMV2_BENCH_COPIES`
//! the modes [enabled,disabled],
//! `OLMV2_BENCH_IDLE_SECONDS` idle window [120], `OLMV2_BENCH_RESYNC_SECONDS` the controller's resync [60, so that
//! every settled object is looked at again within the default idle window], `OLMV2_BENCH_HEAPTRACK` a file prefix to run the
//! controller with heaptrack's tracker preloaded, a profile `<prefix>-<n>.zst` per start [unset: the controller runs
//! alone; under heaptrack its RSS figures include the tracker's].

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // a benchmark fails loudly by design

#[path = "support/plane.rs"]
mod plane;
#[path = "support/scale.rs"]
mod scale;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use kube_emulator::audit::Record;
use olmv2_e2e::project;

use plane::Plane;
use scale::{
    copied_csvs, create_csvs, env_namespace_counts, env_number, mib, prepare, report_log, rss_kib, start_controller,
    wait_succeeded, Copies,
};

const CONTROLLER_USER: &str = "system:serviceaccount:olmv2-system:olmv2-controller";
const WRITE_VERBS: [&str; 4] = ["create", "update", "patch", "delete"];
/// Setup has settled once the controller has written nothing for this long (or a third of its resync period, so
/// that writes repeated on every resync count as idle writes, not as setup), and gives up after `SETTLE_LIMIT`.
const SETTLE_QUIET: Duration = Duration::from_secs(10);
const SETTLE_LIMIT: Duration = Duration::from_secs(60);
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
        let number = env_number;
        let namespace_counts = env_namespace_counts();
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

// ---- the controller process -----------------------------------------------------------------------------------

// ---- what the cluster shows -----------------------------------------------------------------------------------

/// The controller's writes (create, update, patch, delete) in the audit log so far, oldest first.
fn controller_writes(plane: &Plane) -> Vec<Record> {
    if plane.audit_full() {
        eprintln!("warning: the audit log is full, older writes are no longer counted");
    }
    plane
        .records()
        .into_iter()
        .filter(|r| r.acting_user() == CONTROLLER_USER && WRITE_VERBS.contains(&r.verb.as_str()))
        .collect()
}

/// Waits until the controller's writes stop; answers when the last one was, or None when they never stopped.
async fn settle(plane: &Plane, resync_seconds: u64) -> Option<Instant> {
    let quiet = SETTLE_QUIET.min(Duration::from_secs(resync_seconds) / 3);
    let writes_so_far =
        || plane.count(|r| r.acting_user() == CONTROLLER_USER && WRITE_VERBS.contains(&r.verb.as_str()));
    let (started, mut writes, mut last) = (Instant::now(), writes_so_far(), Instant::now());
    while last.elapsed() < quiet {
        if started.elapsed() > SETTLE_LIMIT {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = writes_so_far();
        if now != writes {
            (writes, last) = (now, Instant::now());
        }
    }
    Some(last)
}

// ---- one run --------------------------------------------------------------------------------------------------

async fn run(binary: &Path, settings: &Settings, copies: Copies, namespaces: usize) -> Figures {
    let plane = Plane::start("legacy-csvs-bench").await;
    prepare(&plane, settings.csvs, namespaces, copies).await;
    let admin = plane.client().await;
    let dir = std::env::temp_dir().join(format!("olmv2-legacy-csvs-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = start_controller(&plane, binary, &dir, settings.resync_seconds).await.child;
    let stand_in = plane.run_deployments(admin.clone());

    let start = Instant::now();
    create_csvs(&admin, settings.csvs).await;
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

// ---- figures --------------------------------------------------------------------------------------------------

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
