//! Bundle images against a real registry (Debian's docker-registry on loopback): push, pull by tag and by digest,
//! unpack, and compare every file; the cache fetches each image once; image indexes resolve to this platform; Docker
//! media types work; hostile layers are refused through the whole pull path; credentials come from a docker config;
//! plain HTTP is used only for registries marked insecure; a registry that never answers fails the pull rather than
//! holding it; the test registry itself counts as started only when it answers HTTP, and one that exits while
//! starting says why.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use olmv2::bundle::credentials::DockerCredentials;
use olmv2::bundle::image::{build_layer, ImageClient, PullError, PulledImage, RegistryOptions};
use olmv2::bundle::unpack::{hex, UnpackError, UnpackLimits};
use olmv2::bundle::Bundle;
use olmv2::category::Categorized;
use serde_json::json;
use sha2::{Digest, Sha256};
use support::registry::Registry;
use support::{is_invalid_testdata_bundle, testdata_bundles};

fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.insert(
                    path.strip_prefix(root).expect("prefix").to_string_lossy().into_owned(),
                    std::fs::read(&path).expect("read"),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn client(registry: &Registry) -> ImageClient {
    ImageClient::new(RegistryOptions { insecure_registries: vec![registry.host.clone()], ..RegistryOptions::default() })
}

fn cache(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("olmv2-cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn sample(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bundles").join(path)
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

#[tokio::test]
async fn push_then_pull_by_tag_and_by_digest_yields_the_same_files() {
    let registry = Registry::start("roundtrip").expect("docker-registry starts");
    let client = client(&registry);
    let reference = registry.reference("plumbus-bundle:v2.0.0-alpha");
    let digest = client.push_bundle(&sample("plumbus/2.0.0-alpha"), &reference, false).await.expect("push");
    assert!(digest.starts_with("sha256:"), "{digest}");

    let cache = cache("roundtrip");
    let by_tag = client.pull(&reference, &cache, UnpackLimits::default()).await.expect("pull by tag");
    assert_eq!(by_tag.digest, digest);
    assert_eq!(by_tag.pinned, format!("{}/plumbus-bundle@{digest}", registry.host));
    assert_eq!(files(&by_tag.root), files(&sample("plumbus/2.0.0-alpha")));
    Bundle::load(&by_tag.root).expect("the pulled bundle loads");
    assert_eq!(
        by_tag.labels.get("operators.operatorframework.io.bundle.package.v1").map(String::as_str),
        Some("plumbus")
    );

    let by_digest = client.pull(&by_tag.pinned, &cache, UnpackLimits::default()).await.expect("pull by digest");
    assert!(!by_tag.cached && by_digest.cached, "the second pull finds the first's files by digest");
    assert_eq!(PulledImage { cached: false, ..by_digest }, by_tag);
    let _ = std::fs::remove_dir_all(cache);
}

#[tokio::test]
async fn each_image_is_fetched_once() {
    let mut registry = Registry::start("once").expect("docker-registry starts");
    let client = client(&registry);
    let reference = registry.reference("grumbo-bundle:v1.0.0");
    client.push_bundle(&sample("grumbo/1.0.0"), &reference, false).await.expect("push");
    let cache = cache("once");
    let first = client.pull(&reference, &cache, UnpackLimits::default()).await.expect("pull");
    registry.stop();
    // With the registry gone, the pinned reference still resolves, from the cache alone.
    let again = client.pull(&first.pinned, &cache, UnpackLimits::default()).await.expect("served from the cache");
    assert_eq!(again.root, first.root);
    let entries: Vec<_> = std::fs::read_dir(&cache).expect("cache").flatten().map(|e| e.file_name()).collect();
    assert_eq!(entries.len(), 1, "one unpacked image and no leftovers: {entries:?}");
    // A tag needs the registry to say what it points at now.
    let error = client.pull(&reference, &cache, UnpackLimits::default()).await.expect_err("tag needs the registry");
    assert_eq!(error.category(), "ManifestImagePullFailed");
    let _ = std::fs::remove_dir_all(cache);
}

#[tokio::test]
async fn every_testdata_bundle_survives_build_push_and_pull() {
    let registry = Registry::start("testdata").expect("docker-registry starts");
    let client = client(&registry);
    let cache = cache("testdata");
    let mut count = 0;
    for (index, dir) in testdata_bundles().iter().enumerate() {
        let reference = registry.reference(&format!("testdata/bundle-{index}:latest"));
        let allow_invalid = is_invalid_testdata_bundle(dir);
        client.push_bundle(dir, &reference, allow_invalid).await.unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let pulled = client
            .pull(&reference, &cache, UnpackLimits::default())
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        assert_eq!(files(&pulled.root), files(dir), "{}", dir.display());
        count += 1;
    }
    assert!(count >= 120);
    let _ = std::fs::remove_dir_all(cache);
}

/// Pushes one blob and returns its descriptor.
async fn push_blob(client: &ImageClient, reference: &str, data: Vec<u8>, media_type: &str) -> serde_json::Value {
    let digest = sha256(&data);
    let size = data.len();
    client.oci().push_blob(&reference.parse().expect("ref"), data, &digest).await.expect("push blob");
    json!({"mediaType": media_type, "digest": digest, "size": size})
}

async fn push_manifest(
    client: &ImageClient,
    reference: &str,
    manifest: &serde_json::Value,
    media_type: &str,
) -> String {
    let body = serde_json::to_vec(manifest).expect("json");
    let content_type = http::HeaderValue::from_str(media_type).expect("header");
    client
        .oci()
        .push_manifest_raw(&reference.parse().expect("ref"), body.clone(), content_type)
        .await
        .expect("push manifest");
    sha256(&body)
}

/// An image with one layer of the given media type, pushed by hand; returns the manifest's digest and size.
async fn push_image(
    client: &ImageClient,
    reference: &str,
    layer: Vec<u8>,
    layer_type: &str,
    manifest_type: &str,
    config_type: &str,
) -> (String, usize) {
    let config = push_blob(
        client,
        reference,
        br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#.to_vec(),
        config_type,
    )
    .await;
    let layer = push_blob(client, reference, layer, layer_type).await;
    let manifest = json!({"schemaVersion": 2, "mediaType": manifest_type, "config": config, "layers": [layer]});
    let size = serde_json::to_vec(&manifest).expect("json").len();
    (push_manifest(client, reference, &manifest, manifest_type).await, size)
}

#[tokio::test]
async fn docker_media_types_pull_like_oci_ones() {
    let registry = Registry::start("docker").expect("docker-registry starts");
    let client = client(&registry);
    let (layer, _) = build_layer(&sample("grumbo/1.0.0")).expect("layer");
    let reference = registry.reference("docker-style:1");
    push_image(
        &client,
        &reference,
        layer,
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.container.image.v1+json",
    )
    .await;
    let cache = cache("docker");
    let pulled = client.pull(&reference, &cache, UnpackLimits::default()).await.expect("pull");
    assert_eq!(files(&pulled.root), files(&sample("grumbo/1.0.0")));
    let _ = std::fs::remove_dir_all(cache);
}

#[tokio::test]
async fn an_image_index_resolves_to_this_platform_and_records_the_index_digest() {
    let registry = Registry::start("index").expect("docker-registry starts");
    let client = client(&registry);
    let (layer, _) = build_layer(&sample("grumbo/1.0.0")).expect("layer");
    let oci_manifest = "application/vnd.oci.image.manifest.v1+json";
    let image_ref = registry.reference("multi:image");
    let (image_digest, image_size) = push_image(
        &client,
        &image_ref,
        layer,
        "application/vnd.oci.image.layer.v1.tar+gzip",
        oci_manifest,
        "application/vnd.oci.image.config.v1+json",
    )
    .await;
    let index_type = "application/vnd.oci.image.index.v1+json";
    let entry = |arch: &str| json!({"mediaType": oci_manifest, "digest": image_digest, "size": image_size, "platform": {"architecture": arch, "os": "linux"}});

    let matching = registry.reference("multi:index");
    let index_digest = push_manifest(&client, &matching, &json!({"schemaVersion": 2, "mediaType": index_type, "manifests": [entry("s390x"), entry("amd64"), entry("arm64")]}), index_type).await;
    let cache = cache("index");
    let pulled = client.pull(&matching, &cache, UnpackLimits::default()).await.expect("pull through the index");
    assert_eq!(pulled.digest, index_digest, "the Install records what the reference points at");
    assert_eq!(files(&pulled.root), files(&sample("grumbo/1.0.0")));

    let foreign = registry.reference("multi:foreign");
    push_manifest(
        &client,
        &foreign,
        &json!({"schemaVersion": 2, "mediaType": index_type, "manifests": [entry("s390x"), entry("ppc64le")]}),
        index_type,
    )
    .await;
    let error = client.pull(&foreign, &cache, UnpackLimits::default()).await.expect_err("no image for this platform");
    assert!(matches!(error, PullError::NoMatchingPlatform { .. }), "{error}");
    assert_eq!(error.to_string(), format!("{foreign} is an image index with no image for this platform (linux/amd64)"));
    let _ = std::fs::remove_dir_all(cache);
}

fn raw_tar_entry(name: &str, content: &[u8]) -> Vec<u8> {
    let mut header = tar::Header::new_old();
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.set_size(content.len() as u64);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    let mut tar = header.as_bytes().to_vec();
    tar.extend_from_slice(content);
    tar.resize(tar.len().div_ceil(512) * 512 + 1024, 0);
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(&tar).expect("gzip");
    encoder.finish().expect("gzip")
}

#[tokio::test]
async fn a_hostile_image_is_refused_and_leaves_nothing_behind() {
    let registry = Registry::start("hostile").expect("docker-registry starts");
    let client = client(&registry);
    let reference = registry.reference("hostile:traversal");
    push_image(
        &client,
        &reference,
        raw_tar_entry("../../../../tmp/olmv2-hostile-marker", b"pwned"),
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.config.v1+json",
    )
    .await;
    let cache = cache("hostile");
    let error = client.pull(&reference, &cache, UnpackLimits::default()).await.expect_err("refused");
    assert!(matches!(error, PullError::Unpack { source: UnpackError::PathEscapes { .. }, .. }), "{error}");
    assert_eq!(error.category(), "LayerPathUnsafe");
    assert!(!Path::new("/tmp/olmv2-hostile-marker").exists());
    assert_eq!(std::fs::read_dir(&cache).expect("cache").count(), 0, "no partial image is left in the cache");

    let not_a_config = registry.reference("hostile:config");
    let config =
        push_blob(&client, &not_a_config, b"not json".to_vec(), "application/vnd.oci.image.config.v1+json").await;
    let (layer, _) = build_layer(&sample("grumbo/1.0.0")).expect("layer");
    let layer = push_blob(&client, &not_a_config, layer, "application/vnd.oci.image.layer.v1.tar+gzip").await;
    let manifest_type = "application/vnd.oci.image.manifest.v1+json";
    push_manifest(
        &client,
        &not_a_config,
        &json!({"schemaVersion": 2, "mediaType": manifest_type, "config": config, "layers": [layer]}),
        manifest_type,
    )
    .await;
    let error = client.pull(&not_a_config, &cache, UnpackLimits::default()).await.expect_err("refused");
    assert!(matches!(error, PullError::InvalidConfig { .. }), "{error}");

    let zstd = registry.reference("hostile:zstd");
    push_image(
        &client,
        &zstd,
        b"whatever".to_vec(),
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.config.v1+json",
    )
    .await;
    let error = client.pull(&zstd, &cache, UnpackLimits::default()).await.expect_err("refused");
    assert!(matches!(error, PullError::UnsupportedLayer { .. }), "{error}");
    let _ = std::fs::remove_dir_all(cache);
}

#[tokio::test]
async fn credentials_come_from_a_docker_config() {
    let registry = Registry::start_with_login("login", "alice", "s3cret").expect("docker-registry starts");
    let config = format!(r#"{{"auths": {{"{}": {{"username": "alice", "password": "s3cret"}}}}}}"#, registry.host);
    let with_login = ImageClient::new(RegistryOptions {
        insecure_registries: vec![registry.host.clone()],
        credentials: DockerCredentials::from_config_json(config.as_bytes()).expect("config"),
        ..RegistryOptions::default()
    });
    let reference = registry.reference("private:1");
    with_login.push_bundle(&sample("grumbo/1.0.0"), &reference, false).await.expect("push with credentials");
    let login_cache = cache("login");
    with_login.pull(&reference, &login_cache, UnpackLimits::default()).await.expect("pull with credentials");

    let anonymous = client(&registry);
    let error = anonymous
        .pull(&reference, &cache("anonymous"), UnpackLimits::default())
        .await
        .expect_err("anonymous is refused");
    assert_eq!(error.category(), "ManifestImagePullFailed", "{error}");
    let _ = std::fs::remove_dir_all(login_cache);
}

#[tokio::test]
async fn plain_http_only_for_registries_marked_insecure() {
    let registry = Registry::start("https").expect("docker-registry starts");
    client(&registry).push_bundle(&sample("grumbo/1.0.0"), &registry.reference("secure:1"), false).await.expect("push");
    let strict = ImageClient::new(RegistryOptions::default());
    let error = strict
        .pull(&registry.reference("secure:1"), &cache("https"), UnpackLimits::default())
        .await
        .expect_err("HTTPS only");
    assert!(matches!(error, PullError::Resolve { .. }), "{error}");
}

/// The test registry counts as started only when HTTP answers: a listener that is not an HTTP server (as a socket
/// connected to itself reads back its own request) is not taken for one.
#[test]
fn the_test_registry_is_ready_only_when_http_answers() {
    let echo = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let host = echo.local_addr().expect("address").to_string();
    std::thread::spawn(move || {
        for mut stream in echo.incoming().flatten() {
            let mut buffer = [0u8; 256];
            if let Ok(n) = std::io::Read::read(&mut stream, &mut buffer) {
                let _ = stream.write_all(&buffer[..n]);
            }
        }
    });
    assert!(!support::registry::answers_http(&host), "an echo is no HTTP server");

    let registry = Registry::start("ready").expect("docker-registry starts");
    assert!(support::registry::answers_http(&registry.host));
}

/// A registry that cannot serve on its port exits; resuming says so with its log, and succeeds once the port is free.
#[tokio::test]
async fn a_test_registry_that_exits_while_starting_is_reported_with_its_log() {
    let mut registry = Registry::start("exits").expect("docker-registry starts");
    let reference = registry.reference("grumbo-bundle:v1.0.0");
    client(&registry).push_bundle(&sample("grumbo/1.0.0"), &reference, false).await.expect("push");
    registry.stop();
    let squatter = std::net::TcpListener::bind(&registry.host).expect("the port is free once stopped");
    let error = registry.resume().expect_err("the port is taken");
    assert!(error.to_string().contains("address already in use"), "{error}");
    drop(squatter);
    registry.resume().expect("serves once the port is free");
    let pulled = client(&registry).pull(&reference, &cache("exits"), UnpackLimits::default()).await.expect("pull");
    assert_eq!(files(&pulled.root), files(&sample("grumbo/1.0.0")));
    let _ = std::fs::remove_dir_all(cache("exits"));
}

/// A registry that takes the connection and never answers (overloaded, half down) fails the pull after the read
/// timeout: a pass waiting on it for ever would hold one of the few passes a controller runs at once.
#[tokio::test]
async fn a_registry_that_never_answers_fails_the_pull_rather_than_holding_it() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let host = listener.local_addr().expect("address").to_string();
    let held = tokio::spawn(async move {
        let mut connections = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            connections.push(connection);
        }
    });
    let client = ImageClient::new(RegistryOptions {
        insecure_registries: vec![host.clone()],
        read_timeout: std::time::Duration::from_secs(1),
        ..RegistryOptions::default()
    });
    let reference = format!("{host}/stalled:1");
    let pulled = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        client.pull(&reference, &cache("stalled"), UnpackLimits::default()),
    )
    .await;
    let error = pulled.expect("the pull ends by itself").expect_err("nothing to pull");
    assert!(matches!(error, PullError::Resolve { .. }), "{error:?}");
    held.abort();
}
