//! The catalogs CatalogSources serve, loaded once for every loop that reads them (the CatalogSource loop, Operators,
//! and the resolution of Subscriptions): a File-Based Catalog image pulled with the bundle code (docs/design.md,
//! 'Catalogs') and kept loaded per digest, or a ConfigMap catalog (`configmap`) kept loaded per resourceVersion.
//! A tag is looked up again at most once per poll interval, so many Operators reconciling against one catalog cost
//! the registry one digest request per interval, not one per reconcile; the CatalogSource loop asks for a lookup
//! when the source's `registryPoll` is due.
//!
//! What catalogs cost is bounded (`limits`): an image unpacks within the catalog's unpack limits and is read within
//! its model limits; one catalog is parsed at a time (on a blocking thread, so a long parse holds no worker of the
//! runtime); and a catalog is kept only if the models of all catalogs fit the budget, catalogs nobody asked for in
//! a while being dropped to make room. A digest refused for what it holds is remembered, so that retries (every
//! pass of every loop asking for it) neither pull nor parse it again; one refused for want of room is not parsed
//! again either while there is none (its model's size is remembered by digest).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;

use super::configmap::{self, ConfigMapCatalogError};
use super::fbc::{Catalog, CatalogError};
use super::limits::{self, mib, Admission, CatalogLimits, Held, DEFAULT_BUDGET_BYTES, EVICTABLE_AFTER};
use super::poll::registry_poll;
use crate::api::v1alpha1::{CatalogSource, SourceType};
use crate::bundle::image::{ImageClient, PullError, CATALOG_CONFIGS_LABEL};
use crate::bundle::refused::{Refusal, Refusals};
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
    /// What the image holds is not served (over a limit, or not a catalog); the same words every time.
    #[error("catalog image {image} ({digest}) is refused, and not read again until it points elsewhere: {reason}")]
    Refused { image: String, digest: String, category: &'static str, reason: String },
    #[error(
        "catalog {image} would hold about {} once loaded, and the catalogs loaded hold {} of the {} all catalogs \
         may hold together: not loaded", mib(*.needed), mib(*.held), mib(*.budget)
    )]
    OverBudget { image: String, needed: u64, held: u64, budget: u64 },
}

impl Categorized for CatalogSourceError {
    fn category(&self) -> &'static str {
        match self {
            Self::SpecInvalid(_) => "CatalogSourceSpecInvalid",
            Self::AddressUnsupported { .. } => "CatalogSourceUnsupported",
            Self::Pull { .. } => "CatalogImagePullFailed",
            Self::Load { .. } | Self::ConfigMapNotCatalog { .. } | Self::LoadConfigMap { .. } => "InvalidCatalog",
            Self::ReadConfigMap { .. } => "CatalogConfigMapUnreadable",
            Self::RecentlyFailed { category, .. } | Self::Refused { category, .. } => category,
            Self::OverBudget { .. } => "CatalogBudgetExceeded",
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
    /// When its tag was last looked up.
    checked: Instant,
    /// When it was last asked for: catalogs idle longest are dropped first to make room.
    used: Instant,
    loaded: LoadedCatalog,
    /// Its model's estimated size, counted against the budget.
    weight: u64,
}

/// Loaded catalogs by image reference, or by ConfigMap.
pub struct CatalogCache {
    images: Arc<ImageClient>,
    client: kube::Client,
    cache_dir: PathBuf,
    default_poll: Duration,
    limits: CatalogLimits,
    /// What the models of all loaded catalogs may hold together.
    budget: u64,
    entries: Mutex<HashMap<String, Entry>>,
    /// The last failure per image: every loop asking for a catalog that cannot be pulled (each Subscription pass of
    /// every namespace, for a global one) costs the registry one attempt per backoff, not one per pass.
    failures: Mutex<HashMap<String, (Instant, &'static str, String)>>,
    /// One catalog is parsed at a time: the peak is the loaded models plus one load, however many CatalogSources
    /// ask at once.
    parsing: Arc<tokio::sync::Semaphore>,
    /// Digests whose content was refused.
    refused: Refusals,
    /// The model size of digests read before, so that a catalog refused for want of room is not parsed again to
    /// learn it is still too large. Bounded (`WEIGHTS_REMEMBERED`).
    weights: Mutex<HashMap<String, u64>>,
}

/// How long a failed pull is answered from memory.
const FAILURE_BACKOFF: Duration = Duration::from_secs(5);

/// How many digests' model sizes are remembered; a forgotten one is parsed again when asked for.
const WEIGHTS_REMEMBERED: usize = 256;

impl CatalogCache {
    pub fn new(images: Arc<ImageClient>, client: kube::Client, cache_dir: PathBuf, default_poll: Duration) -> Self {
        Self {
            images,
            client,
            cache_dir,
            default_poll,
            limits: CatalogLimits::default(),
            budget: DEFAULT_BUDGET_BYTES,
            entries: Mutex::new(HashMap::new()),
            failures: Mutex::default(),
            parsing: Arc::new(tokio::sync::Semaphore::new(1)),
            refused: Refusals::default(),
            weights: Mutex::default(),
        }
    }

    /// The same cache, with other limits on one catalog and another budget for all of them.
    pub fn with_limits(self, limits: CatalogLimits, budget: u64) -> Self {
        Self { limits, budget, ..self }
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
        let mut entries = self.lock();
        let entry = entries.get_mut(&key)?;
        entry.used = Instant::now();
        Some(entry.loaded.clone())
    }

    /// The estimated bytes the loaded catalogs hold, against the budget.
    pub fn held(&self) -> (u64, u64) {
        (self.lock().values().map(|entry| entry.weight).sum(), self.budget)
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
                // Only recent failures are answered from here: older ones go, so the map stays small.
                failures.retain(|_, (at, ..)| at.elapsed() < FAILURE_BACKOFF);
                failures.insert(image, (Instant::now(), error.category(), crate::category::report(error)));
            }
        }
        loaded
    }

    fn recent_failure(&self, image: &str) -> Option<CatalogSourceError> {
        let failures = self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (_, category, message) = failures.get(image).filter(|(at, ..)| at.elapsed() < FAILURE_BACKOFF)?;
        Some(CatalogSourceError::RecentlyFailed { category, message: message.clone() })
    }

    /// Looks the image's tag up and loads a digest not loaded yet, within the limits and the budget.
    async fn pull(&self, image: &str) -> Result<LoadedCatalog, CatalogSourceError> {
        let image = image.to_owned();
        let pull_error = |source| CatalogSourceError::Pull { image: image.clone(), source };
        let (_, digest) = self.images.resolve(&image).await.map_err(pull_error)?;
        if let Some(same) = self.same_digest(&image, &digest) {
            return Ok(same);
        }
        if let Some(refused) = self.refused_before(&image, &digest) {
            return Err(refused);
        }
        if let Some(needed) = self.known_weight(&digest) {
            self.room_for(&image, needed).map_err(|held| self.over_budget(&image, needed, held))?;
        }
        let pulled = self.images.pull(&image, &self.cache_dir, self.limits.unpack).await.map_err(pull_error)?;
        let permit = self.parsing.clone().acquire_owned().await.map_err(|closed| CatalogSourceError::Load {
            image: image.clone(),
            source: CatalogError::Read { path: pulled.root.clone(), source: std::io::Error::other(closed) },
        })?;
        // Another pass may have loaded or refused this digest while this one waited for its turn.
        if let Some(same) = self.same_digest(&image, &digest) {
            return Ok(same);
        }
        if let Some(refused) = self.refused_before(&image, &digest) {
            return Err(refused);
        }
        let configs = pulled.labels.get(CATALOG_CONFIGS_LABEL).map_or("configs", |dir| dir.trim_start_matches('/'));
        let (root, configs, limits) = (pulled.root.clone(), pulled.root.join(configs), self.limits);
        // The permit goes with the parse: a pass abandoned meanwhile does not let another parse start beside it.
        let parsed = tokio::task::spawn_blocking(move || {
            let _turn = permit;
            Catalog::load_dir_within(&configs, &limits).map_err(|error| error.within(&root))
        })
        .await;
        let catalog = match parsed {
            Ok(Ok(catalog)) => catalog,
            Ok(Err(error)) if error.for_good() => return Err(self.refuse(&image, &digest, &pulled.root, &error).await),
            Ok(Err(source)) => return Err(CatalogSourceError::Load { image, source }),
            Err(join) => {
                let source = CatalogError::Read { path: pulled.root.clone(), source: std::io::Error::other(join) };
                return Err(CatalogSourceError::Load { image, source });
            }
        };
        let weight = catalog.weight();
        self.remember_weight(&digest, weight);
        let loaded =
            LoadedCatalog { image: image.clone(), digest: pulled.digest, catalog: Arc::new(catalog), config_map: None };
        self.keep(&image, loaded, weight).map_err(|held| self.over_budget(&image, weight, held))
    }

    /// The refusal of a digest refused before for what it holds.
    fn refused_before(&self, image: &str, digest: &str) -> Option<CatalogSourceError> {
        let Refusal { category, reason } = self.refused.get(digest, self.limits.unpack)?;
        Some(CatalogSourceError::Refused { image: image.to_owned(), digest: digest.to_owned(), category, reason })
    }

    fn over_budget(&self, key: &str, needed: u64, held: u64) -> CatalogSourceError {
        CatalogSourceError::OverBudget { image: key.to_owned(), needed, held, budget: self.budget }
    }

    /// Remembers that `digest` holds what `error` says, and removes its unpacked tree, of no further use.
    async fn refuse(&self, image: &str, digest: &str, root: &Path, error: &CatalogError) -> CatalogSourceError {
        let refusal = Refusal { category: error.category(), reason: crate::category::report(error) };
        self.refused.remember(digest, self.limits.unpack, refusal.clone());
        if let Some(unpacked) = root.parent().filter(|entry| entry.starts_with(&self.cache_dir)) {
            if let Err(error) = tokio::fs::remove_dir_all(unpacked).await {
                tracing::warn!(path = %unpacked.display(), %error, "could not remove a refused catalog's files");
            }
        }
        CatalogSourceError::Refused {
            image: image.to_owned(),
            digest: digest.to_owned(),
            category: refusal.category,
            reason: refusal.reason,
        }
    }

    fn known_weight(&self, digest: &str) -> Option<u64> {
        self.weights.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(digest).copied()
    }

    fn remember_weight(&self, digest: &str, weight: u64) {
        let mut weights = self.weights.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if weights.len() >= WEIGHTS_REMEMBERED && !weights.contains_key(digest) {
            // Any one goes: a forgotten size costs one parse more, not a wrong answer.
            if let Some(forgotten) = weights.keys().next().cloned() {
                weights.remove(&forgotten);
            }
        }
        weights.insert(digest.to_owned(), weight);
    }

    /// What the other catalogs hold beside the one `key` names (which a new load replaces).
    fn held_beside(entries: &HashMap<String, Entry>, key: &str) -> Vec<Held> {
        entries
            .iter()
            .filter(|(other, _)| other.as_str() != key)
            .map(|(other, entry)| Held { key: other.clone(), bytes: entry.weight, idle: entry.used.elapsed() })
            .collect()
    }

    /// Whether a catalog of `needed` bytes could be kept as `key` (nothing is dropped yet); if not, what the others
    /// hold.
    fn room_for(&self, key: &str, needed: u64) -> Result<(), u64> {
        let held = Self::held_beside(&self.lock(), key);
        match limits::admit(self.budget, needed, &held, EVICTABLE_AFTER) {
            Admission::Admit { .. } => Ok(()),
            Admission::Refuse { held } => Err(held),
        }
    }

    /// Keeps `loaded` as `key` if the budget has room for it, dropping idle catalogs to make it; if not, answers
    /// what the others hold.
    fn keep(&self, key: &str, loaded: LoadedCatalog, weight: u64) -> Result<LoadedCatalog, u64> {
        let mut entries = self.lock();
        match limits::admit(self.budget, weight, &Self::held_beside(&entries, key), EVICTABLE_AFTER) {
            Admission::Refuse { held } => Err(held),
            Admission::Admit { evict } => {
                for dropped in evict {
                    entries.remove(&dropped);
                    tracing::info!(catalog = %dropped, "an idle catalog was dropped to make room for {key}");
                }
                let now = Instant::now();
                entries.insert(key.to_owned(), Entry { checked: now, used: now, loaded: loaded.clone(), weight });
                Ok(loaded)
            }
        }
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
        let current = self.lock().get_mut(&key).map(|entry| {
            entry.used = Instant::now();
            entry.loaded.clone()
        });
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
        let blobs = blobs.into_iter().map(|blob| (origin.clone(), blob)).collect();
        let catalog = Catalog::from_blobs_within(blobs, &self.limits).map_err(|source| {
            CatalogSourceError::LoadConfigMap { namespace: namespace.to_owned(), name: name.to_owned(), source }
        })?;
        let weight = catalog.weight();
        let loaded = LoadedCatalog {
            image: key.clone(),
            digest: version.resource_version.clone().unwrap_or_default(),
            catalog: Arc::new(catalog),
            config_map: Some(version),
        };
        self.keep(&key, loaded, weight).map_err(|held| self.over_budget(&key, weight, held))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn fresh(&self, image: &str, poll: Duration) -> Option<LoadedCatalog> {
        let mut entries = self.lock();
        let entry = entries.get_mut(image).filter(|entry| entry.checked.elapsed() < poll)?;
        entry.used = Instant::now();
        Some(entry.loaded.clone())
    }

    fn same_digest(&self, image: &str, digest: &str) -> Option<LoadedCatalog> {
        let mut entries = self.lock();
        let entry = entries.get_mut(image).filter(|entry| entry.loaded.digest == digest)?;
        let now = Instant::now();
        (entry.checked, entry.used) = (now, now);
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

#[cfg(test)]
#[path = "source_tests.rs"]
mod registry_tests;
