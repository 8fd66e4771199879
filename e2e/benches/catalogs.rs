//! Large catalogs: what the controller's memory does when a namespace user creates CatalogSources of large
//! File-Based Catalog images. Generates catalogs of about 130 MB each (200 packages of 10 bundles, each bundle
//! carrying its CSV as an `olm.bundle.object` with a long description and an `olm.csv.metadata`; pseudo-random words,
//! so that they compress as text does), pushes each as its own image to the real test registry, starts the
//! controller (on the test control plane, or real Kubernetes with `OLMV2_E2E_KUBERNETES=real`) as its own process
//! (`olmv2 run`, production build) with `deploy/`'s identity, creates one CatalogSource per image in a namespace at
//! once, and waits until each is READY. Prints the controller's RSS before, its peak
//! (the kernel's high-water mark), its RSS once settled, the heap as jemalloc counts it, and how long the loads took.
//! It prints figures and the goal beside them; it asserts no timing.
//!
//! Run with `cargo bench -p olmv2-e2e --bench catalogs`. Environment (defaults in brackets): `OLMV2_BENCH_CATALOGS`
//! [3], `OLMV2_BENCH_CATALOG_MB` the size of each catalog's files [130], `OLMV2_BENCH_PACKAGES` per catalog [200],
//! `OLMV2_BENCH_PROFILE` the controller's cargo profile [production].

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // a benchmark fails loudly by design

#[path = "support/plane.rs"]
mod plane;
#[path = "support/scale.rs"]
mod scale;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use kube::api::{Api, ListParams};
use olmv2::api::v1alpha1::CatalogSource;
use olmv2::bundle::image::{ImageClient, RegistryOptions};
use olmv2::catalog::Catalog;
use olmv2_e2e::project;
use olmv2_e2e::registry::Registry;
use serde_json::json;

use scale::{create_all, env_number, metric, mib, plane_with_operators_namespace, report_log, rss_kib};

const BUNDLES_PER_PACKAGE: usize = 10;
const NAMESPACE: &str = "team";
const GOAL: &str = "goal: peak <= 2x settled, and under 256 MiB for 3 catalogs of 130 MB";

/// Pseudo-random words from a fixed vocabulary: text that compresses as prose does (about 3 to 4 times).
struct Words {
    state: u64,
    vocabulary: Vec<String>,
}

impl Words {
    fn new(seed: u64) -> Self {
        let mut words = Self { state: seed, vocabulary: Vec::new() };
        words.vocabulary = (0..2048)
            .map(|_| {
                let length = 2 + (words.next() % 9) as usize;
                (0..length).map(|_| char::from(b'a' + (words.next() % 26) as u8)).collect()
            })
            .collect();
        words
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.state >> 33
    }

    /// About `bytes` bytes of words.
    fn text(&mut self, bytes: usize) -> String {
        let mut text = String::with_capacity(bytes + 16);
        while text.len() < bytes {
            let index = (self.next() % self.vocabulary.len() as u64) as usize;
            text.push_str(&self.vocabulary[index]);
            text.push(' ');
        }
        text
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for (index, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if index <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Writes catalog `index` (`packages` packages, one `catalog.json` each, as `opm` lays them out) of about
/// `megabytes` MB under `configs`; answers its size in bytes.
fn write_catalog(configs: &Path, index: usize, packages: usize, megabytes: usize) -> usize {
    let mut words = Words::new(index as u64 + 1);
    let per_bundle = megabytes * 1_000_000 / (packages * BUNDLES_PER_PACKAGE);
    let mut total = 0;
    for package_index in 0..packages {
        let package = format!("catalog{index}-operator{package_index}");
        let dir = configs.join(&package);
        std::fs::create_dir_all(&dir).unwrap();
        let mut file = std::io::BufWriter::new(std::fs::File::create(dir.join("catalog.json")).unwrap());
        let name = |bundle: usize| format!("{package}.v1.0.{bundle}");
        let entries: Vec<_> = (0..BUNDLES_PER_PACKAGE)
            .map(|bundle| match bundle {
                0 => json!({"name": name(0)}),
                _ => json!({"name": name(bundle), "replaces": name(bundle - 1)}),
            })
            .collect();
        let mut blobs = vec![
            json!({"schema": "olm.package", "name": package, "defaultChannel": "stable",
                   "description": words.text(2_000)}),
            json!({"schema": "olm.channel", "name": "stable", "package": package, "entries": entries}),
        ];
        for bundle in 0..BUNDLES_PER_PACKAGE {
            let version = format!("1.0.{bundle}");
            let csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": name(bundle), "annotations": {"capabilities": "Basic Install"}},
                "spec": {"version": version, "displayName": package, "description": words.text(per_bundle * 59 / 100),
                         "provider": {"name": "Example"}, "installModes": [{"type": "AllNamespaces", "supported": true}],
                         "customresourcedefinitions": {"owned": [{"name": format!("things.{package}.example.com"),
                             "version": "v1", "kind": "Thing", "description": words.text(200)}]}}});
            blobs.push(json!({"schema": "olm.bundle", "name": name(bundle), "package": package,
                "image": format!("registry.example/{package}-bundle:{version}"),
                "properties": [
                    {"type": "olm.package", "value": {"packageName": package, "version": version}},
                    {"type": "olm.gvk", "value": {"group": format!("{package}.example.com"), "version": "v1", "kind": "Thing"}},
                    {"type": "olm.bundle.object", "value": {"data": base64(csv.to_string().as_bytes())}},
                    {"type": "olm.csv.metadata", "value": {"displayName": package, "description": words.text(per_bundle * 19 / 100)}},
                ]}));
        }
        for blob in blobs {
            let line = format!("{blob}\n");
            total += line.len();
            file.write_all(line.as_bytes()).unwrap();
        }
        file.flush().unwrap();
    }
    total
}

fn catalog_source(name: &str, image: &str) -> serde_json::Value {
    json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"sourceType": "grpc", "image": image, "displayName": name, "publisher": "bench"}})
}

/// Each CatalogSource's `connectionState.lastObservedState` and message.
async fn states(admin: &kube::Client) -> Vec<(String, String, String)> {
    let sources = Api::<CatalogSource>::namespaced(admin.clone(), NAMESPACE);
    let list = sources.list(&ListParams::default()).await.expect("CatalogSources listed");
    list.items
        .iter()
        .map(|source| {
            let status = source.status.clone().unwrap_or_default();
            let state = status.connection_state.map(|c| c.last_observed_state).unwrap_or_default();
            let serving = status.conditions.iter().find(|c| c.type_ == "Serving").map(|c| c.message.clone());
            let message = status.message.or(serving).unwrap_or_default();
            (source.metadata.name.clone().unwrap_or_default(), state, message)
        })
        .collect()
}

/// The controller's RSS and its peak, with what the RSS is made of and the heap as jemalloc counts it.
fn print_memory(label: &str, child: &std::process::Child, health: std::net::SocketAddr) -> (u64, u64) {
    let (peak, now) = rss_kib(child);
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let field = |name: &str| {
        let value =
            status.lines().find_map(|line| line.strip_prefix(name)).and_then(|rest| rest.split_whitespace().next());
        value.and_then(|value| value.parse::<u64>().ok()).unwrap_or(0)
    };
    let heap = |statistic: &str| {
        let bytes = metric(health, &format!("olmv2_allocator_bytes{{statistic=\"{statistic}\"}}"));
        format!("{:.1}", bytes / 1024.0 / 1024.0)
    };
    println!(
        "  {label}: RSS {} MiB (anonymous {} MiB, files {} MiB), peak so far {} MiB; heap allocated {} MiB, \
         allocator resident {} MiB",
        mib(now),
        mib(field("RssAnon:")),
        mib(field("RssFile:")),
        mib(peak),
        heap("allocated"),
        heap("resident")
    );
    (peak, now)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let catalogs = env_number("OLMV2_BENCH_CATALOGS", 3) as usize;
    let megabytes = env_number("OLMV2_BENCH_CATALOG_MB", 130) as usize;
    let packages = env_number("OLMV2_BENCH_PACKAGES", 200) as usize;
    println!("catalogs: {catalogs} CatalogSources of {megabytes} MB File-Based Catalogs; {GOAL}");
    let binary = project::build_controller(env!("CARGO")).expect("the olmv2 binary");
    let dir = std::env::temp_dir().join(format!("olmv2-catalogs-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let registry = Registry::start("catalogs-bench").expect("docker-registry starts");
    let images = ImageClient::new(RegistryOptions {
        insecure_registries: vec![registry.host.clone()],
        ..RegistryOptions::default()
    });
    let mut references = Vec::new();
    for index in 0..catalogs {
        let started = Instant::now();
        let configs = dir.join(format!("configs-{index}"));
        let bytes = write_catalog(&configs, index, packages, megabytes);
        let weight = Catalog::load_dir(&configs).expect("the generated catalog loads").weight();
        let reference = registry.reference(&format!("catalog{index}:latest"));
        images.push_catalog(&configs, &reference).await.expect("catalog pushed");
        std::fs::remove_dir_all(&configs).unwrap();
        println!(
            "  catalog {index}: {:.1} MB of files ({} packages, {} bundles; its model {} MiB estimated), written, read and \
             pushed in {:.1?}",
            bytes as f64 / 1e6,
            packages,
            packages * BUNDLES_PER_PACKAGE,
            mib(weight / 1024),
            started.elapsed()
        );
        references.push(reference);
    }

    let plane = plane_with_operators_namespace("catalogs-bench").await;
    create_all(&plane, vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})]).await;
    let admin = plane.client().await;
    let extra = vec!["--insecure-registry".to_owned(), registry.host.clone()];
    let controller = scale::start_controller_with(&plane, &binary, &dir, 300, &extra).await;
    let mut child = controller.child;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (_, before) = print_memory("before the catalogs", &child, controller.health);

    let started = Instant::now();
    let sources =
        references.iter().enumerate().map(|(index, image)| catalog_source(&format!("big-{index}"), image)).collect();
    create_all(&plane, sources).await;
    let mut last_print = Instant::now();
    loop {
        let states = states(&admin).await;
        let ready = states.iter().filter(|(_, state, _)| state == "READY").count();
        if ready == catalogs {
            break;
        }
        if last_print.elapsed() > Duration::from_secs(10) {
            last_print = Instant::now();
            let (peak, now) = rss_kib(&child);
            println!("  {:.0?}: {ready} READY; RSS {} MiB, peak {} MiB", started.elapsed(), mib(now), mib(peak));
            for (name, state, message) in states.iter().filter(|(_, state, _)| state != "READY") {
                let first = message.lines().next().unwrap_or_default();
                println!("    {name}: {state} {first}");
            }
        }
        assert!(started.elapsed() < Duration::from_secs(1800), "not every catalog READY within 30 minutes: {states:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let loaded = started.elapsed();
    println!("every CatalogSource READY {loaded:.1?} after their creation");
    for (name, _, message) in states(&admin).await {
        println!("  {name}: {message}");
    }
    print_memory("just loaded", &child, controller.health);
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (peak, settled) = print_memory("settled (20 s later)", &child, controller.health);
    println!(
        "catalogs: before {} MiB, peak {} MiB, settled {} MiB: peak / settled {:.2} ({GOAL})",
        mib(before),
        mib(peak),
        mib(settled),
        peak as f64 / settled as f64
    );

    let _ = child.kill();
    let _ = child.wait();
    report_log(&dir);
    let _ = std::fs::remove_dir_all(dir);
}
