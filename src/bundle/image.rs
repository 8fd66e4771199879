//! Bundle images: pulling them with oci-client into a cache keyed by digest (each image is fetched once), and
//! building and pushing them from a bundle directory.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use flate2::write::GzEncoder;
use futures_util::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OciDescriptor, OciImageManifest, IMAGE_CONFIG_MEDIA_TYPE, IMAGE_LAYER_GZIP_MEDIA_TYPE};
use oci_client::{Client, Reference};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::category::Categorized;

use super::credentials::DockerCredentials;
use super::model::{Bundle, BundleError};
use super::refused::{Refusal, Refusals};
use super::unpack::{hex, unpack_layer, Compression, Totals, UnpackError, UnpackLimits};

const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
const DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
const DOCKER_LAYER_TAR: &str = "application/vnd.docker.image.rootfs.diff.tar";

/// How to reach registries.
#[derive(Clone, Debug)]
pub struct RegistryOptions {
    /// Registries (`host:port`) reached over plain HTTP. Every other registry is HTTPS only.
    pub insecure_registries: Vec<String>,
    pub credentials: DockerCredentials,
    /// How long connecting to a registry may take.
    pub connect_timeout: std::time::Duration,
    /// How long a registry may leave a request without a byte of answer (each read's wait, not the whole
    /// download's: a large layer coming slowly is no stall).
    pub read_timeout: std::time::Duration,
}

/// A registry that accepts a connection and never answers (overloaded, or half down behind its load balancer) must
/// fail the pull, not hold it: an Install's or a catalog's pass waits on the pull, and a controller runs a bounded
/// number of passes at once, so a few stalled pulls would stop every Install. A pass that fails is retried.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
pub const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Default for RegistryOptions {
    fn default() -> Self {
        Self {
            insecure_registries: Vec::new(),
            credentials: DockerCredentials::default(),
            connect_timeout: CONNECT_TIMEOUT,
            read_timeout: READ_TIMEOUT,
        }
    }
}

/// A pulled bundle image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PulledImage {
    /// `repository@digest`: what an Install records.
    pub pinned: String,
    /// The digest the reference resolved to (an image index's when it is one).
    pub digest: String,
    /// The unpacked filesystem.
    pub root: PathBuf,
    /// The labels of the image config; a bundle's carry its annotations.
    pub labels: BTreeMap<String, String>,
    /// Whether it was found unpacked in the cache (nothing downloaded).
    pub cached: bool,
}

/// The image label that says where a File-Based Catalog image keeps its catalog.
pub const CATALOG_CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";

/// Largest image config accepted; real ones are a few KiB.
const MAX_CONFIG_BYTES: i64 = 1 << 20;

/// The labels of an image config (`config.Labels`), after checking it is an image config at all.
fn config_labels(bytes: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let config: serde_json::Value = serde_json::from_slice(bytes).map_err(|error| format!("not JSON: {error}"))?;
    if !config.is_object() {
        return Err("not a JSON object".into());
    }
    match config.pointer("/config/Labels") {
        None | Some(serde_json::Value::Null) => Ok(BTreeMap::new()),
        Some(labels) => serde_json::from_value(labels.clone()).map_err(|error| format!("config.Labels: {error}")),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error("{reference:?} is not a valid image reference: {reason}")]
    InvalidReference { reference: String, reason: String },
    #[error("failed to resolve {reference}")]
    Resolve {
        reference: String,
        #[source]
        source: OciDistributionError,
    },
    #[error("the config of {reference} is not an image config: {reason}")]
    InvalidConfig { reference: String, reason: String },
    #[error("{reference} is an image index with no image for this platform ({platform})")]
    NoMatchingPlatform { reference: String, platform: String },
    #[error("layer {digest} of {reference} has media type {media_type}, which is not a tar or gzip layer")]
    UnsupportedLayer { reference: String, digest: String, media_type: String },
    #[error("failed to download layer {digest} of {reference}")]
    Download {
        reference: String,
        digest: String,
        #[source]
        source: OciDistributionError,
    },
    #[error("failed to unpack layer {digest} of {reference}")]
    Unpack {
        reference: String,
        digest: String,
        #[source]
        source: UnpackError,
    },
    #[error("failed to use the bundle cache at {path}")]
    Cache {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{reference} ({digest}) was refused before and is not pulled again until it points elsewhere: {reason}")]
    Refused { reference: String, digest: String, category: &'static str, reason: String },
}

impl PullError {
    /// Whether the error comes from what the image's digest holds, so that pulling it again can only fail again: a
    /// layer refused by the unpacker's limits or path rules, a layer or config the format refuses, no image for
    /// this platform. Not a download, a digest mismatch, a truncated stream or the local cache: those may heal.
    pub fn for_good(&self) -> bool {
        match self {
            Self::NoMatchingPlatform { .. } | Self::UnsupportedLayer { .. } | Self::InvalidConfig { .. } => true,
            Self::Unpack { source, .. } => !matches!(
                source,
                UnpackError::DigestMismatch { .. } | UnpackError::Malformed(_) | UnpackError::Write { .. }
            ),
            _ => false,
        }
    }
}

impl Categorized for PullError {
    fn category(&self) -> &'static str {
        match self {
            Self::InvalidReference { .. } => "ImageReferenceInvalid",
            Self::Resolve { .. } | Self::Download { .. } => "ManifestImagePullFailed",
            Self::NoMatchingPlatform { .. } => "ImagePlatformMissing",
            Self::UnsupportedLayer { .. } => "ImageLayerUnsupported",
            Self::InvalidConfig { .. } => "ImageConfigInvalid",
            Self::Unpack { source, .. } => source.category(),
            Self::Cache { .. } => "BundleCacheFailed",
            Self::Refused { category, .. } => category,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error(transparent)]
    InvalidBundle(#[from] BundleError),
    #[error("{reference:?} is not a valid image reference: {reason}")]
    InvalidReference { reference: String, reason: String },
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to push {reference}")]
    Push {
        reference: String,
        #[source]
        source: OciDistributionError,
    },
}

impl Categorized for PushError {
    fn category(&self) -> &'static str {
        match self {
            Self::InvalidBundle(error) => error.category(),
            Self::InvalidReference { .. } => "ImageReferenceInvalid",
            Self::Read { .. } => "BundleFileUnreadable",
            Self::Push { .. } => "ImagePushFailed",
        }
    }
}

/// Pulls and pushes bundle images.
pub struct ImageClient {
    client: Client,
    options: RegistryOptions,
    refused: Refusals,
}

fn parse_reference(reference: &str) -> Result<Reference, String> {
    super::reference::parse(reference).map_err(|error| error.to_string())
}

static PARTIAL: AtomicU64 = AtomicU64::new(0);

/// Chunks of a blob in flight between the download and the unpacker. A chunk can be a few hundred KiB, so the
/// queue stays short to keep memory flat.
const CHANNEL_CHUNKS: usize = 4;

/// Reads the chunks of a blob as they arrive from the download task.
struct ChannelReader {
    receiver: tokio::sync::mpsc::Receiver<std::io::Result<bytes::Bytes>>,
    current: bytes::Bytes,
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.receiver.blocking_recv() {
                Some(Ok(chunk)) => self.current = chunk,
                Some(Err(error)) => return Err(error),
                None => return Ok(0),
            }
        }
        let count = buffer.len().min(self.current.len());
        buffer[..count].copy_from_slice(&self.current.split_to(count));
        Ok(count)
    }
}

impl ImageClient {
    pub fn new(options: RegistryOptions) -> Self {
        let config = ClientConfig {
            protocol: if options.insecure_registries.is_empty() {
                ClientProtocol::Https
            } else {
                ClientProtocol::HttpsExcept(options.insecure_registries.clone())
            },
            connect_timeout: Some(options.connect_timeout),
            read_timeout: Some(options.read_timeout),
            ..ClientConfig::default()
        };
        Self { client: Client::new(config), options, refused: Refusals::default() }
    }

    fn auth(&self, reference: &Reference) -> oci_client::secrets::RegistryAuth {
        self.options.credentials.auth_for(reference.resolve_registry())
    }

    /// The digest a reference resolves to now: its own digest when pinned, else the registry's answer for the tag.
    pub async fn resolve(&self, reference: &str) -> Result<(Reference, String), PullError> {
        let parsed = parse_reference(reference)
            .map_err(|reason| PullError::InvalidReference { reference: reference.to_owned(), reason })?;
        if let Some(digest) = parsed.digest() {
            return Ok((parsed.clone(), digest.to_owned()));
        }
        let digest = self
            .client
            .fetch_manifest_digest(&parsed, &self.auth(&parsed))
            .await
            .map_err(|source| PullError::Resolve { reference: reference.to_owned(), source })?;
        Ok((parsed, digest))
    }

    /// Pulls and unpacks `reference` into `cache` (once per digest) and returns where it is. A digest refused for
    /// what it holds is refused again without a pull, until the reference resolves to another digest.
    pub async fn pull(&self, reference: &str, cache: &Path, limits: UnpackLimits) -> Result<PulledImage, PullError> {
        let (parsed, digest) = self.resolve(reference).await?;
        if let Some(refusal) = self.refused.get(&digest, limits) {
            return Err(PullError::Refused {
                reference: reference.to_owned(),
                digest,
                category: refusal.category,
                reason: refusal.reason,
            });
        }
        let result = self.pull_resolved(reference, parsed, digest.clone(), cache, limits).await;
        if let Err(error) = &result {
            if error.for_good() {
                let refusal = Refusal { category: error.category(), reason: crate::category::report(error) };
                self.refused.remember(&digest, limits, refusal);
            }
        }
        result
    }

    async fn pull_resolved(
        &self,
        reference: &str,
        parsed: Reference,
        digest: String,
        cache: &Path,
        limits: UnpackLimits,
    ) -> Result<PulledImage, PullError> {
        let pinned_reference = parsed.clone_with_digest(digest.clone());
        let pinned = pinned_reference.whole();
        let entry = cache.join(digest.replace(':', "-"));
        if entry.join("rootfs").is_dir() {
            let labels = std::fs::read(entry.join("config.json"))
                .ok()
                .and_then(|bytes| config_labels(&bytes).ok())
                .unwrap_or_default();
            return Ok(PulledImage { pinned, digest, root: entry.join("rootfs"), labels, cached: true });
        }
        let cache_error = |path: &Path| {
            let path = path.to_owned();
            move |source| PullError::Cache { path, source }
        };
        std::fs::create_dir_all(cache).map_err(cache_error(cache))?;
        let auth = self.auth(&parsed);
        let manifest = match self.client.pull_image_manifest(&pinned_reference, &auth).await {
            Ok((manifest, _)) => manifest,
            Err(OciDistributionError::ImageManifestNotFoundError(message))
                if message.contains("matching client's default platform") =>
            {
                return Err(PullError::NoMatchingPlatform {
                    reference: reference.to_owned(),
                    platform: this_platform(),
                })
            }
            Err(source) => return Err(PullError::Resolve { reference: reference.to_owned(), source }),
        };

        if manifest.config.size > MAX_CONFIG_BYTES {
            return Err(PullError::InvalidConfig {
                reference: reference.to_owned(),
                reason: format!("it is {} bytes, over the limit of {MAX_CONFIG_BYTES}", manifest.config.size),
            });
        }
        let mut config = Vec::new();
        self.client.pull_blob(&pinned_reference, &manifest.config, &mut config).await.map_err(|source| {
            PullError::Download { reference: reference.to_owned(), digest: manifest.config.digest.clone(), source }
        })?;
        let labels = config_labels(&config)
            .map_err(|reason| PullError::InvalidConfig { reference: reference.to_owned(), reason })?;

        let partial = cache.join(format!(
            ".partial-{}-{}-{}",
            digest.replace(':', "-"),
            std::process::id(),
            PARTIAL.fetch_add(1, Ordering::Relaxed)
        ));
        let result = self.download_and_unpack(reference, &pinned_reference, &manifest.layers, &partial, limits).await;
        let result = result.and_then(|()| {
            std::fs::write(partial.join("config.json"), &config)
                .map_err(|source| PullError::Cache { path: partial.clone(), source })
        });
        if let Err(error) = result {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(error);
        }
        match std::fs::rename(&partial, &entry) {
            Ok(()) => {}
            // Another pull of the same digest finished first; its tree is identical.
            Err(_) if entry.join("rootfs").is_dir() => {
                let _ = std::fs::remove_dir_all(&partial);
            }
            Err(source) => {
                let _ = std::fs::remove_dir_all(&partial);
                return Err(PullError::Cache { path: entry, source });
            }
        }
        Ok(PulledImage { pinned, digest, root: entry.join("rootfs"), labels, cached: false })
    }

    async fn download_and_unpack(
        &self,
        reference: &str,
        pinned: &Reference,
        layers: &[OciDescriptor],
        partial: &Path,
        limits: UnpackLimits,
    ) -> Result<(), PullError> {
        let rootfs = partial.join("rootfs");
        std::fs::create_dir_all(&rootfs).map_err(|source| PullError::Cache { path: rootfs.clone(), source })?;
        let mut totals = Totals::default();
        for layer in layers {
            let compression = match layer.media_type.as_str() {
                IMAGE_LAYER_GZIP_MEDIA_TYPE | DOCKER_LAYER_GZIP => Compression::Gzip,
                OCI_LAYER_TAR | DOCKER_LAYER_TAR => Compression::None,
                other => {
                    return Err(PullError::UnsupportedLayer {
                        reference: reference.to_owned(),
                        digest: layer.digest.clone(),
                        media_type: other.to_owned(),
                    })
                }
            };
            // The blob streams from the network into the unpacker on another thread through a small bounded
            // channel, so memory stays bounded and inflating overlaps downloading. oci-client's stream checks the
            // digest as the bytes pass and fails at the end on a mismatch; the partial tree is then discarded.
            let stream = self.client.pull_blob_stream(pinned, layer).await.map_err(|source| PullError::Download {
                reference: reference.to_owned(),
                digest: layer.digest.clone(),
                source,
            })?;
            let (sender, receiver) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(CHANNEL_CHUNKS);
            let target = rootfs.clone();
            let expected = layer.digest.clone();
            let unpacking = tokio::task::spawn_blocking(move || {
                let reader = std::io::BufReader::with_capacity(
                    1 << 16,
                    ChannelReader { receiver, current: bytes::Bytes::new() },
                );
                let result = unpack_layer(reader, compression, Some(&expected), &target, limits, &mut totals);
                (result, totals)
            });
            let mut stream = stream.stream;
            let mut download_error = None;
            while let Some(chunk) = stream.next().await {
                let failed = chunk.is_err();
                if let Err(error) = &chunk {
                    download_error = Some(error.to_string());
                }
                // The unpacker stops reading on its own errors; the download then has nothing left to do.
                if sender.send(chunk).await.is_err() || failed {
                    break;
                }
            }
            drop(sender);
            let (result, returned_totals) = unpacking
                .await
                .map_err(|join| PullError::Cache { path: rootfs.clone(), source: std::io::Error::other(join) })?;
            totals = returned_totals;
            if let Some(message) = download_error {
                return Err(PullError::Download {
                    reference: reference.to_owned(),
                    digest: layer.digest.clone(),
                    source: OciDistributionError::GenericError(Some(message)),
                });
            }
            result.map_err(|source| PullError::Unpack {
                reference: reference.to_owned(),
                digest: layer.digest.clone(),
                source,
            })?;
        }
        Ok(())
    }

    /// Builds a bundle image from `dir` (every file under it, in one gzip layer, with the bundle's annotations as
    /// labels) and pushes it to `reference`; returns the pushed manifest's digest. Unless `allow_invalid`, the
    /// directory must load as a valid bundle first.
    pub async fn push_bundle(&self, dir: &Path, reference: &str, allow_invalid: bool) -> Result<String, PushError> {
        let labels = match Bundle::load(dir) {
            Ok(bundle) => bundle.annotations.all,
            Err(error) if !allow_invalid => return Err(error.into()),
            Err(_) => BTreeMap::new(),
        };
        self.push_files(dir, "", labels, reference).await
    }

    /// Builds a File-Based Catalog image from `configs` (every file under it, placed under `/configs` with the
    /// label that says so, as `opm` lays catalogs out) and pushes it to `reference`; returns the manifest's digest.
    pub async fn push_catalog(&self, configs: &Path, reference: &str) -> Result<String, PushError> {
        let labels = BTreeMap::from([(CATALOG_CONFIGS_LABEL.to_owned(), "/configs".to_owned())]);
        self.push_files(configs, "configs", labels, reference).await
    }

    async fn push_files(
        &self,
        dir: &Path,
        prefix: &str,
        labels: BTreeMap<String, String>,
        reference: &str,
    ) -> Result<String, PushError> {
        let parsed = parse_reference(reference)
            .map_err(|reason| PushError::InvalidReference { reference: reference.to_owned(), reason })?;
        let (layer, diff_id) = build_layer_at(dir, prefix)?;
        let config = json!({
            "architecture": go_arch(),
            "os": "linux",
            "config": {"Labels": labels},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        });
        let layers = [ImageLayer::new(layer, IMAGE_LAYER_GZIP_MEDIA_TYPE.to_owned(), None)];
        let config = Config::new(config.to_string().into_bytes(), IMAGE_CONFIG_MEDIA_TYPE.to_owned(), None);
        let manifest = OciImageManifest::build(&layers, &config, None);
        let auth = self.auth(&parsed);
        let push_error = |source| PushError::Push { reference: reference.to_owned(), source };
        self.client.push(&parsed, &layers, config, &auth, Some(manifest)).await.map_err(push_error)?;
        self.client.fetch_manifest_digest(&parsed, &auth).await.map_err(push_error)
    }

    /// The underlying client, for callers that push hand-made images (tests of hostile input).
    pub fn oci(&self) -> &Client {
        &self.client
    }
}

/// A reproducible gzip tar of every file under `dir` (sorted, owned by root, time zero), and the sha256 of the
/// uncompressed tar (the layer's diff ID).
pub fn build_layer(dir: &Path) -> Result<(Vec<u8>, String), PushError> {
    build_layer_at(dir, "")
}

/// [`build_layer`], with every path placed under `prefix` (no leading or trailing `/`; empty for the root).
pub fn build_layer_at(dir: &Path, prefix: &str) -> Result<(Vec<u8>, String), PushError> {
    let mut files = Vec::new();
    if !prefix.is_empty() {
        files.push((prefix.to_owned(), true));
    }
    collect_files(dir, dir, prefix, &mut files)?;
    files.sort();
    let mut tar = tar::Builder::new(Vec::new());
    for (relative, is_dir) in files {
        let on_disk = relative.strip_prefix(prefix).unwrap_or(&relative).trim_start_matches('/');
        let path = dir.join(on_disk);
        let read_error = |source| PushError::Read { path: path.clone(), source };
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        if is_dir {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            tar.append_data(&mut header, format!("{relative}/"), std::io::empty()).map_err(read_error)?;
        } else {
            let content = std::fs::read(&path).map_err(read_error)?;
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(0o644);
            header.set_size(content.len() as u64);
            tar.append_data(&mut header, &relative, content.as_slice())
                .map_err(|source| PushError::Read { path: path.clone(), source })?;
        }
    }
    let uncompressed = tar.into_inner().map_err(|source| PushError::Read { path: dir.to_owned(), source })?;
    let diff_id = format!("sha256:{}", hex(&Sha256::digest(&uncompressed)));
    let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(&uncompressed).map_err(|source| PushError::Read { path: dir.to_owned(), source })?;
    let compressed = encoder.finish().map_err(|source| PushError::Read { path: dir.to_owned(), source })?;
    Ok((compressed, diff_id))
}

fn collect_files(root: &Path, dir: &Path, prefix: &str, files: &mut Vec<(String, bool)>) -> Result<(), PushError> {
    let entries = std::fs::read_dir(dir).map_err(|source| PushError::Read { path: dir.to_owned(), source })?;
    for entry in entries {
        let entry = entry.map_err(|source| PushError::Read { path: dir.to_owned(), source })?;
        let path = entry.path();
        let relative = path.strip_prefix(root).map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let relative = if prefix.is_empty() { relative } else { format!("{prefix}/{relative}") };
        let file_type = entry.file_type().map_err(|source| PushError::Read { path: path.clone(), source })?;
        if file_type.is_dir() {
            files.push((relative, true));
            collect_files(root, &path, prefix, files)?;
        } else if file_type.is_file() {
            files.push((relative, false));
        }
    }
    Ok(())
}

/// This machine's platform in OCI terms, as the platform resolver chooses it.
pub fn this_platform() -> String {
    format!("linux/{}", go_arch())
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

#[cfg(test)]
#[path = "image_tests.rs"]
mod tests;
