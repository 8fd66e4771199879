//! The catalogs CatalogSources serve, loaded once for every loop that reads them (the CatalogSource loop, Operators,
//! and the resolution of Subscriptions): a File-Based Catalog image pulled with the bundle code (docs/design.md,
//! 'Catalogs') and kept loaded per digest, or a ConfigMap catalog (`configmap`) kept loaded per resourceVersion.
//! A tag is looked up again at most once per poll interval, so many Operators reconciling against one catalog cost
//! the registry one digest request per interval, not one per reconcile; the CatalogSource loop asks for a lookup
//! when the source's `registryPoll` is due.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;

use super::configmap::{self, ConfigMapCatalogError};
use super::fbc::{Catalog, CatalogError};
use super::poll::registry_poll;
use crate::api::v1alpha1::{CatalogSource, SourceType};
use crate::bundle::image::{ImageClient, PullError, CATALOG_CONFIGS_LABEL};
use crate::bundle::unpack::UnpackLimits;
use crate::category::Categorized;

/// Why a CatalogSource's catalog is not available.
#[derive(Debug, thiserror::Error)]
pub enum CatalogSourceError {
    /// The spec names no catalog OLM could serve (OLM's `validateSourceType` messages).
    #[error("{0}")]
    SpecInvalid(String),
    #[error(
        "CatalogSource {namespace}/{name} names a running registry server at {address}; this controller serves \
         File-Based Catalog images and ConfigMap catalogs, not the registry gRPC API: set spec.image to the catalog \
         image that server runs"
    )]
    AddressUnsupported { namespace: String, name: String, address: String },
    #[error("pulling catalog image {image}")]
    Pull {
        image: String,
        #[source]
        source: PullError,
    },
    #[error("loading catalog image {image}")]
    Load {
        image: String,
        #[source]
        source: CatalogError,
    },
    /// OLM's words for a ConfigMap it cannot read.
    #[error("failed to get catalog config map {name}: {source}")]
    ReadConfigMap {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("configmap {namespace}/{name} is not a catalog: {source}")]
    ConfigMapNotCatalog {
        namespace: String,
        name: String,
        #[source]
        source: ConfigMapCatalogError,
    },
    /// The last attempt failed moments ago (its words, the same every time, so a status repeating it is not
    /// rewritten): not tried again before the backoff passed.
    #[error("{message}")]
    RecentlyFailed { category: &'static str, message: String },
    #[error("configmap {namespace}/{name}: {source}")]
    LoadConfigMap {
        namespace: String,
        name: String,
        #[source]
        source: CatalogError,
    },
}

impl Categorized for CatalogSourceError {
    fn category(&self) -> &'static str {
        match self {
            Self::SpecInvalid(_) => "CatalogSourceSpecInvalid",
            Self::AddressUnsupported { .. } => "CatalogSourceUnsupported",
            Self::Pull { .. } => "CatalogImagePullFailed",
            Self::Load { .. } | Self::ConfigMapNotCatalog { .. } | Self::LoadConfigMap { .. } => "InvalidCatalog",
            Self::ReadConfigMap { .. } => "CatalogConfigMapUnreadable",
            Self::RecentlyFailed { category, .. } => category,
        }
    }
}

/// The version of a ConfigMap a catalog was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigMapVersion {
    pub name: String,
    pub namespace: String,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// A loaded catalog, with where it was read from.
#[derive(Clone, Debug)]
pub struct LoadedCatalog {
    /// The image reference, or `configmap <namespace>/<name>`.
    pub image: String,
    /// The image digest, or the ConfigMap's resourceVersion.
    pub digest: String,
    pub catalog: Arc<Catalog>,
    /// The ConfigMap it was read from, for a ConfigMap catalog.
    pub config_map: Option<ConfigMapVersion>,
}

impl LoadedCatalog {
    /// Where the catalog is served from, pinned: `image@digest`, or the ConfigMap.
    pub fn address(&self) -> String {
        match &self.config_map {
            Some(_) => self.image.clone(),
            None => pinned(&self.image, &self.digest),
        }
    }
}

/// `image` pinned to `digest` (any tag or digest it had replaced).
pub fn pinned(image: &str, digest: &str) -> String {
    let name = image.split_once('@').map_or(image, |(name, _)| name);
    let last_slash = name.rfind('/').map_or(0, |slash| slash + 1);
    let name = match name[last_slash..].rfind(':') {
        Some(colon) => &name[..last_slash + colon],
        None => name,
    };
    format!("{name}@{digest}")
}

/// OLM's `validateSourceType`: the fields each source type needs, in OLM's words.
pub fn validate(source: &CatalogSource) -> Result<(), String> {
    let set = |value: &Option<String>| value.as_deref().is_some_and(|value| !value.is_empty());
    match source.spec.source_type {
        SourceType::Internal | SourceType::Configmap if !set(&source.spec.config_map) => Err(format!(
            "configmap name unset: must be set for sourcetype: {}",
            source_type_name(source.spec.source_type)
        )),
        SourceType::Grpc if !set(&source.spec.image) && !set(&source.spec.address) => {
            Err("image and address unset: at least one must be set for sourcetype: grpc".to_owned())
        }
        _ => Ok(()),
    }
}

/// A source type as the API spells it.
pub fn source_type_name(source_type: SourceType) -> &'static str {
    match source_type {
        SourceType::Grpc => "grpc",
        SourceType::Configmap => "configmap",
        SourceType::Internal => "internal",
    }
}

struct Entry {
    checked: Instant,
    loaded: LoadedCatalog,
}

/// Loaded catalogs by image reference, or by ConfigMap.
pub struct CatalogCache {
    images: Arc<ImageClient>,
    client: kube::Client,
    cache_dir: PathBuf,
    default_poll: Duration,
    entries: Mutex<HashMap<String, Entry>>,
    /// The last failure per image: every loop asking for a catalog that cannot be pulled (each Subscription pass of
    /// every namespace, for a global one) costs the registry one attempt per backoff, not one per pass.
    failures: Mutex<HashMap<String, (Instant, &'static str, String)>>,
}

/// How long a failed pull is answered from memory.
const FAILURE_BACKOFF: Duration = Duration::from_secs(5);

impl CatalogCache {
    pub fn new(images: Arc<ImageClient>, client: kube::Client, cache_dir: PathBuf, default_poll: Duration) -> Self {
        Self {
            images,
            client,
            cache_dir,
            default_poll,
            entries: Mutex::new(HashMap::new()),
            failures: Mutex::default(),
        }
    }

    /// The catalog a CatalogSource serves now.
    pub async fn catalog_of(&self, source: &CatalogSource) -> Result<LoadedCatalog, CatalogSourceError> {
        self.load(source, false).await
    }

    /// The catalog a CatalogSource served when it was last loaded, whatever its age, without loading anything: for
    /// readers who must not make registry traffic (PackageManifests answer from what the CatalogSource loop loaded).
    pub fn loaded(&self, source: &CatalogSource) -> Option<LoadedCatalog> {
        let key = if matches!(source.spec.source_type, SourceType::Configmap | SourceType::Internal) {
            let namespace = source.namespace().unwrap_or_default();
            format!("configmap {namespace}/{}", source.spec.config_map.clone().unwrap_or_default())
        } else {
            source.spec.image.clone().filter(|image| !image.is_empty())?
        };
        self.lock().get(&key).map(|entry| entry.loaded.clone())
    }

    /// The catalog a CatalogSource serves, its image tag looked up again whatever the last lookup's age: a
    /// `registryPoll` that is due.
    pub async fn poll(&self, source: &CatalogSource) -> Result<LoadedCatalog, CatalogSourceError> {
        self.load(source, true).await
    }

    async fn load(&self, source: &CatalogSource, force: bool) -> Result<LoadedCatalog, CatalogSourceError> {
        validate(source).map_err(CatalogSourceError::SpecInvalid)?;
        let namespace = source.namespace().unwrap_or_default();
        if matches!(source.spec.source_type, SourceType::Configmap | SourceType::Internal) {
            let name = source.spec.config_map.clone().unwrap_or_default();
            return self.config_map_catalog(&namespace, &name).await;
        }
        let Some(image) = source.spec.image.clone().filter(|image| !image.is_empty()) else {
            return Err(CatalogSourceError::AddressUnsupported {
                namespace,
                name: source.name_any(),
                address: source.spec.address.clone().unwrap_or_default(),
            });
        };
        let poll = registry_poll(source).map_or(self.default_poll, |poll| poll.interval);
        if !force {
            if let Some(fresh) = self.fresh(&image, poll) {
                return Ok(fresh);
            }
            if let Some(failed) = self.recent_failure(&image) {
                return Err(failed);
            }
        }
        let loaded = self.pull(&image).await;
        let mut failures = self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &loaded {
            Ok(_) => {
                failures.remove(&image);
            }
            Err(error) => {
                failures.insert(image, (Instant::now(), error.category(), crate::error::report(error)));
            }
        }
        loaded
    }

    fn recent_failure(&self, image: &str) -> Option<CatalogSourceError> {
        let failures = self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (_, category, message) = failures.get(image).filter(|(at, ..)| at.elapsed() < FAILURE_BACKOFF)?;
        Some(CatalogSourceError::RecentlyFailed { category, message: message.clone() })
    }

    /// Looks the image's tag up and loads a digest not loaded yet.
    async fn pull(&self, image: &str) -> Result<LoadedCatalog, CatalogSourceError> {
        let image = image.to_owned();
        let pull_error = |source| CatalogSourceError::Pull { image: image.clone(), source };
        let (_, digest) = self.images.resolve(&image).await.map_err(pull_error)?;
        if let Some(same) = self.same_digest(&image, &digest) {
            return Ok(same);
        }
        let pulled = self.images.pull(&image, &self.cache_dir, UnpackLimits::default()).await.map_err(pull_error)?;
        let configs = pulled.labels.get(CATALOG_CONFIGS_LABEL).map_or("configs", |dir| dir.trim_start_matches('/'));
        let catalog = Catalog::load_dir(&pulled.root.join(configs))
            .map_err(|source| CatalogSourceError::Load { image: image.clone(), source })?;
        let loaded =
            LoadedCatalog { image: image.clone(), digest: pulled.digest, catalog: Arc::new(catalog), config_map: None };
        self.lock().insert(image, Entry { checked: Instant::now(), loaded: loaded.clone() });
        Ok(loaded)
    }

    /// A ConfigMap catalog: read again only when the ConfigMap's resourceVersion moved.
    async fn config_map_catalog(&self, namespace: &str, name: &str) -> Result<LoadedCatalog, CatalogSourceError> {
        let config_map = kube::Api::<ConfigMap>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
            .map_err(|source| CatalogSourceError::ReadConfigMap { name: name.to_owned(), source })?;
        let version = ConfigMapVersion {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            uid: config_map.metadata.uid.clone(),
            resource_version: config_map.metadata.resource_version.clone(),
        };
        let key = format!("configmap {namespace}/{name}");
        let current = self.lock().get(&key).map(|entry| entry.loaded.clone());
        if let Some(current) = current.filter(|current| current.config_map.as_ref() == Some(&version)) {
            return Ok(current);
        }
        let data: BTreeMap<String, String> = config_map.data.unwrap_or_default();
        let not_catalog = |source| CatalogSourceError::ConfigMapNotCatalog {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        };
        let blobs = configmap::blobs(&data).map_err(not_catalog)?;
        let origin = PathBuf::from(format!("configmap/{namespace}/{name}"));
        let catalog =
            Catalog::from_blobs(blobs.into_iter().map(|blob| (origin.clone(), blob)).collect()).map_err(|source| {
                CatalogSourceError::LoadConfigMap { namespace: namespace.to_owned(), name: name.to_owned(), source }
            })?;
        let loaded = LoadedCatalog {
            image: key.clone(),
            digest: version.resource_version.clone().unwrap_or_default(),
            catalog: Arc::new(catalog),
            config_map: Some(version),
        };
        self.lock().insert(key, Entry { checked: Instant::now(), loaded: loaded.clone() });
        Ok(loaded)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn fresh(&self, image: &str, poll: Duration) -> Option<LoadedCatalog> {
        self.lock().get(image).filter(|entry| entry.checked.elapsed() < poll).map(|entry| entry.loaded.clone())
    }

    fn same_digest(&self, image: &str, digest: &str) -> Option<LoadedCatalog> {
        let mut entries = self.lock();
        let entry = entries.get_mut(image).filter(|entry| entry.loaded.digest == digest)?;
        entry.checked = Instant::now();
        Some(entry.loaded.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(spec: serde_json::Value) -> CatalogSource {
        serde_json::from_value(serde_json::json!({"apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "CatalogSource", "metadata": {"name": "c", "namespace": "olm"}, "spec": spec}))
        .expect("a CatalogSource")
    }

    #[test]
    fn each_source_type_needs_what_olm_says_it_needs() {
        assert_eq!(
            validate(&source(serde_json::json!({"sourceType": "grpc"}))),
            Err("image and address unset: at least one must be set for sourcetype: grpc".to_owned())
        );
        assert_eq!(
            validate(&source(serde_json::json!({"sourceType": "configmap", "image": "r/c:1"}))),
            Err("configmap name unset: must be set for sourcetype: configmap".to_owned())
        );
        assert_eq!(
            validate(&source(serde_json::json!({"sourceType": "internal", "configMap": ""}))),
            Err("configmap name unset: must be set for sourcetype: internal".to_owned())
        );
        assert_eq!(validate(&source(serde_json::json!({"sourceType": "grpc", "address": "a:50051"}))), Ok(()));
        assert_eq!(validate(&source(serde_json::json!({"sourceType": "configmap", "configMap": "cm"}))), Ok(()));
    }

    #[test]
    fn an_image_is_pinned_whatever_it_named() {
        let digest = "sha256:abc";
        assert_eq!(pinned("registry:5000/catalog:latest", digest), "registry:5000/catalog@sha256:abc");
        assert_eq!(pinned("registry:5000/catalog", digest), "registry:5000/catalog@sha256:abc");
        assert_eq!(pinned("registry:5000/catalog@sha256:old", digest), "registry:5000/catalog@sha256:abc");
        assert_eq!(pinned("catalog:v1@sha256:old", digest), "catalog@sha256:abc");
    }
}
