//! How long dependency resolution takes at OperatorHub's scale, over a catalog of 5,016 bundles built
//! from the real File-Based Catalogs of `../shared/testdata/fbc` (5 packages, 24 bundles: their channels with
//! replaces, skips and skipRange, versions and provided APIs as published) replicated 209 times under new names
//! (`<package>-r<NNN>`, APIs in group `r<NNN>.<group>`). Their own requirements point outside the data set
//! (cert-manager, Tekton) and are replaced by dependencies between the replicas, in blocks of ten packages: each
//! package requires the next by package range and the one after by one of its APIs, and the newest bundle of every
//! other package (of those with more than one) requires a version of the next that does not exist, so that the solver
//! must fall back along those chains. Two problems: one namespace's 50 Subscriptions (each wanting the newest bundle
//! of the first package of its own block, falling back along its versions) resolved together, and one Operator whose
//! connected component spans 20 packages (the first block chained to the second), resolved as the Operator controller
//! resolves it (`operator::dependencies`: the newest bundle pinned, against 300 served APIs). The goal is under one
//! second each. It prints the first run of each, the process's peak memory after them (two generated catalogs
//! included), and criterion's figures. Run with `cargo bench --bench resolution`; the generator below is the script
//! that builds the catalog (`replicated`).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // benchmark set-up fails loudly by design

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use olmv2::catalog::dependencies::{resolve_dependencies, Origin, Pick, Problem, Source, Want};
use olmv2::catalog::properties::Gvk;
use olmv2::catalog::{Catalog, CatalogBundle};
use olmv2::operator::dependencies::{resolve as operator_dependencies, Inputs};
use serde::Deserialize;
use serde_json::{json, Value};

/// Copies of the test data's packages: 209 × 24 bundles = 5,016.
const REPLICAS: usize = 209;
const BLOCK: usize = 10;

/// The blobs of the test data's File-Based Catalogs, package by package (sorted by name), without the
/// `olm.bundle.object` manifests resolution never reads.
fn testdata() -> Vec<(String, Vec<Value>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/fbc");
    let mut packages: Vec<(String, Vec<Value>)> = std::fs::read_dir(&root)
        .unwrap_or_else(|error| panic!("{}: {error}", root.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(path.join("catalog.yaml")).unwrap();
            let mut blobs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
                .map(|document| Value::deserialize(document).unwrap())
                .filter(|blob| !blob.is_null())
                .collect();
            for blob in &mut blobs {
                if let Some(properties) = blob.get_mut("properties").and_then(Value::as_array_mut) {
                    properties.retain(|p| p["type"] != "olm.bundle.object" && p["type"] != "olm.gvk.required");
                }
            }
            let name =
                blobs.iter().find(|b| b["schema"] == "olm.package").unwrap()["name"].as_str().unwrap().to_owned();
            (name, blobs)
        })
        .collect();
    packages.sort_by(|a, b| a.0.cmp(&b.0));
    packages
}

/// `text` with the package name `package` (a prefix of every bundle name) renamed for replica `replica`.
fn renamed(text: &str, package: &str, replica: usize) -> String {
    match text.strip_prefix(package) {
        Some(rest) => format!("{package}-r{replica:03}{rest}"),
        None => text.to_owned(),
    }
}

/// The replicated catalog and its packages in order (global index = replica × 5 + package); `chain` links the last
/// package of the first block to the second block, so that one component spans 20 packages.
fn replicated(chain: bool) -> (Catalog, Vec<String>) {
    let data = testdata();
    let mut names = Vec::new();
    let mut replicas: Vec<Vec<Value>> = Vec::new();
    for replica in 0..REPLICAS {
        for (package, blobs) in &data {
            names.push(format!("{package}-r{replica:03}"));
            let mut copies = Vec::new();
            for blob in blobs {
                let mut copy = blob.clone();
                for key in ["name", "package"] {
                    if let Some(text) = copy[key].as_str() {
                        copy[key] = json!(renamed(text, package, replica));
                    }
                }
                if let Some(entries) = copy.get_mut("entries").and_then(Value::as_array_mut) {
                    for entry in entries {
                        for key in ["name", "replaces"] {
                            if let Some(text) = entry[key].as_str() {
                                entry[key] = json!(renamed(text, package, replica));
                            }
                        }
                        if let Some(skips) = entry.get_mut("skips").and_then(Value::as_array_mut) {
                            for skip in skips {
                                *skip = json!(renamed(skip.as_str().unwrap_or_default(), package, replica));
                            }
                        }
                    }
                }
                if let Some(properties) = copy.get_mut("properties").and_then(Value::as_array_mut) {
                    for property in properties {
                        match property["type"].as_str() {
                            Some("olm.package") => {
                                property["value"]["packageName"] = json!(format!("{package}-r{replica:03}"));
                            }
                            Some("olm.gvk") => {
                                let group = property["value"]["group"].as_str().unwrap_or_default().to_owned();
                                property["value"]["group"] = json!(format!("r{replica:03}.{group}"));
                            }
                            _ => {}
                        }
                    }
                }
                copies.push(copy);
            }
            replicas.push(copies);
        }
    }
    // The first API each package provides, and whether it has more than one bundle, for the dependencies.
    let first_api = |blobs: &[Value]| {
        blobs.iter().filter(|b| b["schema"] == "olm.bundle").find_map(|bundle| {
            bundle["properties"].as_array()?.iter().find(|p| p["type"] == "olm.gvk").map(|p| p["value"].clone())
        })
    };
    let apis: Vec<Option<Value>> = replicas.iter().map(|blobs| first_api(blobs)).collect();
    let total = replicas.len();
    for (index, blobs) in replicas.iter_mut().enumerate() {
        let last_in_block = index % BLOCK == BLOCK - 1;
        let next = index + 1;
        if (last_in_block && !(chain && index == BLOCK - 1)) || next >= total {
            continue;
        }
        let newest = blobs.iter().filter_map(version_of).max();
        let falls_back = index % 2 == 1 && blobs.iter().filter_map(version_of).count() > 1;
        let after = (next + 1 < total && (next % BLOCK != BLOCK - 1 || chain && next == BLOCK - 1))
            .then(|| apis[next + 1].clone())
            .flatten();
        for bundle in blobs.iter_mut().filter(|b| b["schema"] == "olm.bundle") {
            let range = if falls_back && version_of(bundle) == newest { ">=99.0.0" } else { ">=0.0.0" };
            let properties = bundle["properties"].as_array_mut().unwrap();
            properties.push(json!({"type": "olm.package.required",
                "value": {"packageName": names[next], "versionRange": range}}));
            if let Some(api) = &after {
                properties.push(json!({"type": "olm.gvk.required", "value": api}));
            }
        }
    }
    let blobs = replicas.into_iter().flatten().map(|blob| (PathBuf::from("catalog.json"), blob)).collect();
    (Catalog::from_blobs(blobs).unwrap(), names)
}

/// The version of a bundle blob (its `olm.package` property); none for other blobs.
fn version_of(blob: &Value) -> Option<semver::Version> {
    let package = blob["properties"].as_array()?.iter().find(|p| p["type"] == "olm.package")?;
    semver::Version::parse(package["value"]["version"].as_str()?).ok()
}

/// A package's bundles, newest first.
fn newest_first<'c>(catalog: &'c Catalog, package: &str) -> Vec<&'c CatalogBundle> {
    let mut bundles: Vec<&CatalogBundle> = catalog.packages[package].bundles.values().collect();
    bundles.sort_by(|a, b| b.version.cmp(&a.version));
    bundles
}

/// A Subscription's want: the newest bundle of `package`, falling back along its versions.
fn newest(catalog: &Catalog, package: &str) -> Want {
    let candidates = newest_first(catalog, package)
        .into_iter()
        .map(|bundle| Pick { origin: Origin::Source(0), bundle: bundle.name.clone() })
        .collect();
    Want { by: format!("subscription {package}"), package: package.to_owned(), candidates }
}

fn report(label: &str, bundles: usize, chosen: usize, started: Instant) {
    println!(
        "{label} over {bundles} bundles: {chosen} bundles chosen in {:.1} ms (first run; goal under 1 s)",
        started.elapsed().as_secs_f64() * 1000.0
    );
}

fn bench(c: &mut Criterion) {
    let (subscriptions_catalog, names) = replicated(false);
    let bundles: usize = subscriptions_catalog.packages.values().map(|p| p.bundles.len()).sum();
    let source = |catalog| vec![Source { name: "bench".into(), namespace: "olm".into(), priority: 0, catalog }];
    let fifty = Problem {
        sources: source(&subscriptions_catalog),
        wants: (0..50).map(|i| newest(&subscriptions_catalog, &names[i * BLOCK])).collect(),
        ..Problem::default()
    };
    let (chained_catalog, _) = replicated(true);
    // The Operator's path: its newest bundle pinned, dependencies resolved against what the cluster serves (a
    // cluster's worth of CRDs, none of them a provider here).
    let head_bundle = newest_first(&chained_catalog, &names[0])[0].clone();
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
    assert_eq!(chosen.len(), 50 * BLOCK, "each Subscription's block of ten packages");
    let older = chosen
        .iter()
        .filter(|c| newest_first(&subscriptions_catalog, &c.bundle.package)[0].version != c.bundle.version)
        .count();
    println!("  of which {older} fell back below their package's newest version");
    let started = Instant::now();
    let dependencies = operator_dependencies(&component).expect("a solution");
    report("one Operator, 20 packages", bundles, dependencies.len() + 1, started);
    assert_eq!(dependencies.len() + 1, 2 * BLOCK, "the component spans two blocks");
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
