//! Catalog images: a CatalogSource's File-Based Catalog image, pulled with the bundle code (docs/design.md, 'Catalogs')
//! and kept loaded per digest. A tag is looked up again at most once per poll interval, so many Operators reconciling
//! against one catalog cost the registry one digest request per interval, not one per reconcile.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::fbc::{Catalog, CatalogError};
use crate::api::v1alpha1::{CatalogSource, SourceType};
use crate::bundle::image::{ImageClient, PullError, CATALOG_CONFIGS_LABEL};
use crate::bundle::unpack::UnpackLimits;
use crate::category::Categorized;

/// Why a CatalogSource's catalog is not available.
#[derive(Debug, thiserror::Error)]
pub enum CatalogSourceError {
    #[error("CatalogSource {namespace}/{name} is {source_type:?} without an image; only File-Based Catalog images are served")]
    NoImage { namespace: String, name: String, source_type: SourceType },
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
}

impl Categorized for CatalogSourceError {
    fn category(&self) -> &'static str {
        match self {
            Self::NoImage { .. } => "CatalogSourceUnsupported",
            Self::Pull { .. } => "CatalogImagePullFailed",
            Self::Load { .. } => "InvalidCatalog",
        }
    }
}

/// A loaded catalog, with the digest it was read from.
#[derive(Clone, Debug)]
pub struct LoadedCatalog {
    pub image: String,
    pub digest: String,
    pub catalog: Arc<Catalog>,
}

struct Entry {
    checked: Instant,
    loaded: LoadedCatalog,
}

/// Loaded catalogs by image reference.
pub struct CatalogCache {
    images: Arc<ImageClient>,
    cache_dir: PathBuf,
    default_poll: Duration,
    entries: Mutex<HashMap<String, Entry>>,
}

impl CatalogCache {
    pub fn new(images: Arc<ImageClient>, cache_dir: PathBuf, default_poll: Duration) -> Self {
        Self { images, cache_dir, default_poll, entries: Mutex::new(HashMap::new()) }
    }

    /// The catalog a CatalogSource serves now.
    pub async fn catalog_of(&self, source: &CatalogSource) -> Result<LoadedCatalog, CatalogSourceError> {
        let image =
            source.spec.image.clone().filter(|image| !image.is_empty()).ok_or_else(|| CatalogSourceError::NoImage {
                namespace: source.metadata.namespace.clone().unwrap_or_default(),
                name: source.metadata.name.clone().unwrap_or_default(),
                source_type: source.spec.source_type,
            })?;
        let poll = poll_interval(source).unwrap_or(self.default_poll);
        if let Some(fresh) = self.fresh(&image, poll) {
            return Ok(fresh);
        }
        let pull_error = |source| CatalogSourceError::Pull { image: image.clone(), source };
        let (_, digest) = self.images.resolve(&image).await.map_err(pull_error)?;
        if let Some(same) = self.same_digest(&image, &digest) {
            return Ok(same);
        }
        let pulled = self.images.pull(&image, &self.cache_dir, UnpackLimits::default()).await.map_err(pull_error)?;
        let configs = pulled.labels.get(CATALOG_CONFIGS_LABEL).map_or("configs", |dir| dir.trim_start_matches('/'));
        let catalog = Catalog::load_dir(&pulled.root.join(configs))
            .map_err(|source| CatalogSourceError::Load { image: image.clone(), source })?;
        let loaded = LoadedCatalog { image: image.clone(), digest: pulled.digest, catalog: Arc::new(catalog) };
        self.lock().insert(image, Entry { checked: Instant::now(), loaded: loaded.clone() });
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

/// The CatalogSource's `updateStrategy.registryPoll.interval`, when it is a duration this reads.
pub fn poll_interval(source: &CatalogSource) -> Option<Duration> {
    let interval = source.spec.update_strategy.as_ref()?.registry_poll.as_ref()?.interval.as_deref()?;
    parse_go_duration(interval)
}

/// A Go duration of hours, minutes, seconds and milliseconds (`1h30m`, `45s`, `500ms`).
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        total += Duration::try_from_secs_f64(number * seconds).ok()?;
        rest = &rest[unit_end..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_go_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_go_duration(""), None);
        assert_eq!(parse_go_duration("10"), None);
        assert_eq!(parse_go_duration("ten minutes"), None);
        assert_eq!(parse_go_duration("5d"), None);
    }
}
