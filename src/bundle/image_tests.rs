//! Pulling from a registry on loopback that serves one image whose layer is a decompression bomb, counting what is
//! downloaded: a digest refused for what it holds is not pulled again.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use flate2::write::GzEncoder;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::*;

struct Image {
    manifest: Vec<u8>,
    manifest_digest: String,
    config: Vec<u8>,
    config_digest: String,
    layer: Vec<u8>,
    layer_digest: String,
    layer_reads: AtomicUsize,
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

/// An image whose one layer is 16 MiB of zeros, gzipped: it inflates about a thousand times its size.
fn bomb() -> Image {
    let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0_u8; 1 << 20];
    for _ in 0..16 {
        encoder.write_all(&zeros).expect("gzip");
    }
    let layer = encoder.finish().expect("gzip");
    let config = serde_json::to_vec(&json!({"architecture": "amd64", "os": "linux", "config": {},
        "rootfs": {"type": "layers", "diff_ids": []}}))
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
        config_digest: digest(&config),
        config,
        layer_digest: digest(&layer),
        layer,
        layer_reads: AtomicUsize::new(0),
    }
}

async fn manifest(State(image): State<Arc<Image>>) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/vnd.oci.image.manifest.v1+json"));
    if let Ok(value) = HeaderValue::from_str(&image.manifest_digest) {
        headers.insert("docker-content-digest", value);
    }
    (headers, image.manifest.clone()).into_response()
}

async fn blob(State(image): State<Arc<Image>>, UrlPath((_, wanted)): UrlPath<(String, String)>) -> Response {
    if wanted == image.config_digest {
        return image.config.clone().into_response();
    }
    if wanted == image.layer_digest {
        image.layer_reads.fetch_add(1, Ordering::SeqCst);
        return image.layer.clone().into_response();
    }
    StatusCode::NOT_FOUND.into_response()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_refused_for_what_it_holds_is_not_pulled_again() {
    let image = Arc::new(bomb());
    let router = Router::new()
        .route("/v2/", get(|| async { "{}" }))
        .route("/v2/{name}/manifests/{reference}", get(manifest).head(manifest))
        .route("/v2/{name}/blobs/{digest}", get(blob))
        .with_state(image.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let host = listener.local_addr().expect("address").to_string();
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let client =
        ImageClient::new(RegistryOptions { insecure_registries: vec![host.clone()], ..RegistryOptions::default() });
    let cache = std::env::temp_dir().join(format!("olmv2-refused-test-{}", std::process::id()));
    let reference = format!("{host}/bomb:latest");

    let first = client.pull(&reference, &cache, UnpackLimits::default()).await.expect_err("a bomb");
    assert!(matches!(first, PullError::Unpack { source: UnpackError::CompressionRatio { .. }, .. }), "{first:?}");
    assert!(first.for_good());
    assert_eq!(image.layer_reads.load(Ordering::SeqCst), 1);

    let again = client.pull(&reference, &cache, UnpackLimits::default()).await.expect_err("refused again");
    assert!(matches!(&again, PullError::Refused { .. }), "{again:?}");
    assert_eq!(again.category(), first.category(), "the same category");
    assert!(again.to_string().contains("inflates more than"), "says why: {again}");
    assert_eq!(image.layer_reads.load(Ordering::SeqCst), 1, "the layer was not downloaded again");

    // Judged again under other limits (another caller's), it is downloaded again.
    let generous = UnpackLimits { max_compression_ratio: 100_000, ..UnpackLimits::default() };
    let pulled = client.pull(&reference, &cache, generous).await;
    assert!(pulled.is_ok(), "{pulled:?}");
    assert_eq!(image.layer_reads.load(Ordering::SeqCst), 2);
    server.abort();
    let _ = std::fs::remove_dir_all(&cache);
}
