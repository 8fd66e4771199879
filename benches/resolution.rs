//! How long dependency resolution takes at OperatorHub's scale (issue #20): a generated catalog of 5,000 bundles
//! (500 packages of 10 versions each, every version replacing the one before, each package providing an API),
//! dependencies within blocks of ten packages (each package requires the next by package range and the one after
//! by API), and the newest version of every other package requiring a version that does not exist, so that the
//! solver must fall back along those chains. Two problems: one namespace's 50 Subscriptions (each wanting the head of
//! a package in its own block) resolved together, and one Operator whose connected component spans 20 packages (a
//! chain across two blocks), resolved as the Operator controller does (its channel head pinned, against 300 served
//! APIs). The goal is under one second each. It prints the first run of each, the process's peak memory after them
//! (two generated catalogs included), and criterion's figures. Run with `cargo bench --bench resolution`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // benchmark set-up fails loudly by design

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use olmv2::catalog::dependencies::{resolve_dependencies, Origin, Pick, Problem, Source, Want};
use olmv2::catalog::properties::Gvk;
use olmv2::catalog::Catalog;
use olmv2::operator::dependencies::{resolve as operator_dependencies, Inputs};
use serde_json::{json, Value};

const PACKAGES: usize = 500;
const VERSIONS: usize = 10;
const BLOCK: usize = 10;

fn package(index: usize) -> String {
    format!("package-{index:03}")
}

fn gvk(index: usize) -> Value {
    json!({"group": "bench.example.com", "version": "v1", "kind": format!("Kind{index:03}")})
}

/// The catalog; `chain` links the last package of the first block to the second block, so that one component
/// spans 20 packages.
fn catalog(chain: bool) -> Catalog {
    let mut blobs = Vec::new();
    for p in 0..PACKAGES {
        let name = package(p);
        blobs.push(json!({"schema": "olm.package", "name": name, "defaultChannel": "stable"}));
        let entries: Vec<Value> = (0..VERSIONS)
            .map(|v| match v {
                0 => json!({"name": format!("{name}.v{v}.0.0")}),
                _ => json!({"name": format!("{name}.v{v}.0.0"), "replaces": format!("{name}.v{}.0.0", v - 1)}),
            })
            .collect();
        blobs.push(json!({"schema": "olm.channel", "package": name, "name": "stable", "entries": entries}));
        let last_in_block = p % BLOCK == BLOCK - 1;
        for v in 0..VERSIONS {
            let mut properties = vec![
                json!({"type": "olm.package", "value": {"packageName": name, "version": format!("{v}.0.0")}}),
                json!({"type": "olm.gvk", "value": gvk(p)}),
            ];
            if !last_in_block || (chain && p == BLOCK - 1) {
                let next = p + 1;
                let range = if v == VERSIONS - 1 && p % 2 == 1 { ">=99.0.0".to_owned() } else { ">=1.0.0".to_owned() };
                properties.push(
                    json!({"type": "olm.package.required", "value": {"packageName": package(next), "versionRange": range}}),
                );
                if next % BLOCK != BLOCK - 1 {
                    properties.push(json!({"type": "olm.gvk.required", "value": gvk(next + 1)}));
                }
            }
            blobs.push(json!({"schema": "olm.bundle", "name": format!("{name}.v{v}.0.0"), "package": name,
                "image": format!("registry.example/{name}:v{v}"), "properties": properties}));
        }
    }
    Catalog::from_blobs(blobs.into_iter().map(|blob| (PathBuf::from("catalog.json"), blob)).collect()).unwrap()
}

fn head(p: usize) -> Want {
    let candidates = (0..VERSIONS)
        .rev()
        .map(|v| Pick { origin: Origin::Source(0), bundle: format!("{}.v{v}.0.0", package(p)) })
        .collect();
    Want { by: format!("subscription {}", package(p)), package: package(p), candidates }
}

fn report(label: &str, bundles: usize, chosen: usize, started: Instant) {
    println!(
        "{label} over {bundles} bundles: {chosen} bundles chosen in {:.1} ms (first run; goal under 1 s)",
        started.elapsed().as_secs_f64() * 1000.0
    );
}

fn bench(c: &mut Criterion) {
    let subscriptions_catalog = catalog(false);
    let bundles: usize = subscriptions_catalog.packages.values().map(|p| p.bundles.len()).sum();
    let source = |catalog| vec![Source { name: "bench".into(), namespace: "olm".into(), priority: 0, catalog }];
    let fifty = Problem {
        sources: source(&subscriptions_catalog),
        wants: (0..50).map(|i| head(i * BLOCK)).collect(),
        ..Problem::default()
    };
    let chained_catalog = catalog(true);
    // The Operator's path: its channel head pinned, dependencies resolved against what the cluster serves (a
    // cluster's worth of CRDs, none of them a provider here).
    let head_bundle =
        chained_catalog.packages[&package(0)].bundles[&format!("{}.v{}.0.0", package(0), VERSIONS - 1)].clone();
    let served: Vec<Gvk> = (0..300)
        .map(|i| Gvk { group: "cluster.example.com".into(), version: "v1".into(), kind: format!("Served{i}") })
        .collect();
    let component = Inputs {
        operator: "bench",
        source: source(&chained_catalog).remove(0),
        bundle: &head_bundle,
        served: &served,
        held: &[],
    };

    let started = Instant::now();
    let chosen = resolve_dependencies(&fifty).expect("a solution");
    report("50 Subscriptions", bundles, chosen.len(), started);
    let started = Instant::now();
    let dependencies = operator_dependencies(&component).expect("a solution");
    report("one Operator, 20 packages", bundles, dependencies.len() + 1, started);
    // The process's peak resident set so far: the catalogs, both problems and their first resolutions.
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| status.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_owned))
        .unwrap_or_else(|| "VmHWM: unknown".into());
    println!("peak memory of the process after both: {}", peak.trim_start_matches("VmHWM:").trim());
    let mut group = c.benchmark_group("resolution");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    group.bench_function("50 Subscriptions over 5,000 bundles", |b| {
        b.iter(|| resolve_dependencies(black_box(&fifty)).expect("a solution"))
    });
    group.bench_function("one Operator whose component spans 20 packages", |b| {
        b.iter(|| operator_dependencies(black_box(&component)).expect("a solution"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
