//! The catalog cache against a registry on loopback serving catalog images, counting layer downloads: a catalog over
//! a limit is refused with the limit named, and is neither pulled nor parsed again; a catalog the budget has no room
//! for is refused with the sizes named, the catalogs loaded stay, and it is not pulled again while there is no room.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::*;
use crate::bundle::image::{build_layer_at, RegistryOptions};
use crate::bundle::unpack::hex;

struct Image {
    manifest: Vec<u8>,
    manifest_digest: String,
    blobs: HashMap<String, Vec<u8>>,
    layer_digest: String,
}

#[derive(Default)]
struct Registry {
    images: HashMap<String, Image>,
    layer_reads: Mutex<HashMap<String, usize>>,
}

impl Registry {
    fn layer_reads(&self, name: &str) -> usize {
        let digest = &self.images[name].layer_digest;
        self.layer_reads.lock().expect("reads").get(digest).copied().unwrap_or(0)
    }
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

/// A catalog image of the File-Based Catalog in `configs`, laid out as `opm` lays it out.
fn catalog_image(configs: &Path) -> Image {
    let (layer, diff_id) = build_layer_at(configs, "configs").expect("layer");
    let config = serde_json::to_vec(&json!({"architecture": "amd64", "os": "linux",
        "config": {"Labels": {CATALOG_CONFIGS_LABEL: "/configs"}}, "rootfs": {"type": "layers", "diff_ids": [diff_id]}}))
    .expect("config");
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(&config), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest(&layer), "size": layer.len()}],
    }))
    .expect("manifest");
    Image {
        manifest_digest: digest(&manifest),
        manifest,
        layer_digest: digest(&layer),
        blobs: HashMap::from([(digest(&config), config), (digest(&layer), layer)]),
    }
}

async fn manifest(State(registry): State<Arc<Registry>>, UrlPath((name, _)): UrlPath<(String, String)>) -> Response {
    let Some(image) = registry.images.get(&name) else { return StatusCode::NOT_FOUND.into_response() };
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/vnd.oci.image.manifest.v1+json"));
    if let Ok(value) = HeaderValue::from_str(&image.manifest_digest) {
        headers.insert("docker-content-digest", value);
    }
    (headers, image.manifest.clone()).into_response()
}

async fn blob(State(registry): State<Arc<Registry>>, UrlPath((_, wanted)): UrlPath<(String, String)>) -> Response {
    for image in registry.images.values() {
        if let Some(blob) = image.blobs.get(&wanted) {
            if wanted == image.layer_digest {
                *registry.layer_reads.lock().expect("reads").entry(wanted.clone()).or_default() += 1;
            }
            return blob.clone().into_response();
        }
    }
    StatusCode::NOT_FOUND.into_response()
}

/// Serves `images` (by repository name); answers the registry's host and its state.
async fn serve(images: HashMap<String, Image>) -> (String, Arc<Registry>, tokio::task::JoinHandle<()>) {
    let registry = Arc::new(Registry { images, ..Registry::default() });
    let router = Router::new()
        .route("/v2/", get(|| async { "{}" }))
        .route("/v2/{name}/manifests/{reference}", get(manifest).head(manifest))
        .route("/v2/{name}/blobs/{digest}", get(blob))
        .with_state(registry.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let host = listener.local_addr().expect("address").to_string();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (host, registry, server)
}

/// A directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("olmv2-catalog-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes a catalog of `packages`, each with one bundle whose description is `description`, under `dir`.
fn write_catalog(dir: &Path, packages: &[&str], description: &str) -> PathBuf {
    for package in packages {
        let name = format!("{package}.v1.0.0");
        let blobs = [
            json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "name": "stable", "package": package, "entries": [{"name": name}]}),
            json!({"schema": "olm.bundle", "name": name, "package": package, "image": format!("registry.example/{name}"),
                   "properties": [{"type": "olm.package", "value": {"packageName": package, "version": "1.0.0"}},
                                  {"type": "olm.csv.metadata", "value": {"description": description}}]}),
        ];
        let text: String = blobs.iter().map(|blob| format!("{blob}\n")).collect();
        std::fs::create_dir_all(dir.join(package)).expect("dir");
        std::fs::write(dir.join(package).join("catalog.json"), text).expect("written");
    }
    dir.to_owned()
}

fn catalog_source(name: &str, image: &str) -> CatalogSource {
    serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": name, "namespace": "team"}, "spec": {"sourceType": "grpc", "image": image}}))
    .expect("a CatalogSource")
}

fn cache(host: &str, dir: &Path, limits: CatalogLimits, budget: u64) -> CatalogCache {
    let images = Arc::new(ImageClient::new(RegistryOptions {
        insecure_registries: vec![host.to_owned()],
        ..RegistryOptions::default()
    }));
    // No cluster: an image catalog reads none.
    let nowhere = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
    let client = kube::Client::try_from(nowhere).expect("a client");
    CatalogCache::new(images, client, dir.to_owned(), Duration::from_secs(600)).with_limits(limits, budget)
}

/// The unpacked images in the cache directory.
fn unpacked(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_over_a_limit_is_refused_by_digest_and_neither_pulled_nor_parsed_again() {
    let scratch = Scratch::new("over-limit");
    let configs = write_catalog(&scratch.0.join("crowded"), &["a", "b", "c"], "d");
    let (host, registry, server) = serve(HashMap::from([("crowded".to_owned(), catalog_image(&configs))])).await;
    let cache_dir = scratch.0.join("cache");
    let limits = CatalogLimits { max_packages: 2, ..CatalogLimits::default() };
    let catalogs = cache(&host, &cache_dir, limits, DEFAULT_BUDGET_BYTES);
    let source = catalog_source("crowded", &format!("{host}/crowded:latest"));

    let first = catalogs.catalog_of(&source).await.expect_err("refused");
    assert!(matches!(first, CatalogSourceError::Refused { category: "CatalogOverLimit", .. }), "{first:?}");
    let message = first.to_string();
    assert!(message.contains("more than 2 packages, the limit for one catalog"), "{message}");
    assert!(message.contains("catalog file configs/c/catalog.json"), "named from the image's root: {message}");
    assert_eq!(registry.layer_reads("crowded"), 1);
    assert!(unpacked(&cache_dir).iter().all(|entry| !entry.starts_with("sha256-")), "{:?}", unpacked(&cache_dir));

    // A due poll looks the tag up again, and finds the same digest refused: nothing downloaded, nothing parsed.
    let again = catalogs.poll(&source).await.expect_err("refused again");
    assert_eq!(again.to_string(), message, "the same words, so the status is not rewritten");
    assert_eq!(registry.layer_reads("crowded"), 1, "not pulled again");
    assert_eq!(catalogs.held().0, 0);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_the_budget_has_no_room_for_is_refused_with_the_sizes_and_the_loaded_stay() {
    let scratch = Scratch::new("budget");
    let small = write_catalog(&scratch.0.join("small"), &["a"], "short");
    let large = write_catalog(&scratch.0.join("large"), &["b"], &"long words ".repeat(50_000));
    let (small_weight, large_weight) =
        (Catalog::load_dir(&small).expect("small").weight(), Catalog::load_dir(&large).expect("large").weight());
    assert!(large_weight > 500_000);
    let images =
        HashMap::from([("small".to_owned(), catalog_image(&small)), ("large".to_owned(), catalog_image(&large))]);
    let (host, registry, server) = serve(images).await;
    let budget = small_weight + large_weight / 2;
    let catalogs = cache(&host, &scratch.0.join("cache"), CatalogLimits::default(), budget);

    let loaded = catalogs.catalog_of(&catalog_source("small", &format!("{host}/small:1"))).await.expect("fits");
    assert_eq!(loaded.catalog.weight(), small_weight);
    assert_eq!(catalogs.held(), (small_weight, budget));
    let large_source = catalog_source("large", &format!("{host}/large:1"));
    let refused = catalogs.catalog_of(&large_source).await.expect_err("no room");
    assert!(
        matches!(refused, CatalogSourceError::OverBudget { needed, held, .. } if needed == large_weight && held == small_weight),
        "{refused:?}"
    );
    assert_eq!(refused.category(), "CatalogBudgetExceeded");
    assert!(refused.to_string().contains("all catalogs may hold together"), "{refused}");
    assert_eq!(catalogs.held(), (small_weight, budget), "the loaded catalog stays, in use");
    assert_eq!(registry.layer_reads("large"), 1);

    // Asked again, its size is known: refused without a pull or a parse.
    let again = catalogs.poll(&large_source).await.expect_err("still no room");
    assert_eq!(again.to_string(), refused.to_string());
    assert_eq!(registry.layer_reads("large"), 1, "not pulled again");
    server.abort();
}

#[test]
fn a_catalog_source_of_a_refused_image_is_a_registry_error_naming_the_limit() {
    let error = CatalogSourceError::Refused {
        image: "r/c:1".into(),
        digest: "sha256:1".into(),
        category: "CatalogOverLimit",
        reason: "catalog file configs/a.json: the catalog holds more than 2 packages".into(),
    };
    assert_eq!(
        error.to_string(),
        "catalog image r/c:1 (sha256:1) is refused, and not read again until it points elsewhere: catalog file \
         configs/a.json: the catalog holds more than 2 packages"
    );
    assert_eq!(error.category(), "CatalogOverLimit");
}
