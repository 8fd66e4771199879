//! File-Based Catalogs (docs/design.md, 'Catalogs'): the `olm.package`, `olm.channel` and `olm.bundle` blobs of a
//! catalog directory, read into packages with their channels and bundles. Blobs of other schemas are kept out of the
//! way, as `opm` does, so a catalog carrying extensions still loads.
//!
//! Beside what resolution reads, a package keeps what the PackageManifest API shows (`description`): its
//! `olm.package` blob's description and icon, and the CSV description of each bundle heading one of its channels
//! (the only bundles a PackageManifest describes; the others' CSVs are not kept, so a cached catalog stays small).
//!
//! A catalog is read as a stream (`blobs`): one file at a time, one blob at a time, each turned into the compact
//! model before the next is read, and counted against the catalog's limits as it is added (`limits`), so that a
//! load holds the model and one blob, and a catalog over a limit stops at the blob that passed it. The heads'
//! descriptions are read last, each from its own blob read again: which bundle heads a channel is known only once
//! every bundle's version is.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use semver::Version;
use serde::Deserialize;
use serde_json::Value;

use super::blobs::{self, Next};
use super::description::{BundleDescription, Icon, Sources};
use super::limits::{CatalogLimits, OverLimit, Tally};
use super::properties::{self, Dependency, Gvk, Read};
use super::{resolve, weight};
use crate::category::Categorized;

/// A catalog: every package it holds, by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Catalog {
    pub packages: BTreeMap<String, Package>,
}

/// A package: its channels and bundles.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Package {
    pub name: String,
    pub default_channel: Option<String>,
    pub channels: BTreeMap<String, Channel>,
    pub bundles: BTreeMap<String, CatalogBundle>,
    /// What its `olm.deprecations` blob says.
    pub deprecations: Deprecations,
    /// Its `olm.package` blob's description: what a bundle described by `olm.csv.metadata` without one shows.
    pub description: Option<String>,
    /// Its `olm.package` blob's icon: the icon of bundles described by `olm.csv.metadata`.
    pub icon: Option<Icon>,
    /// What the PackageManifest API shows of each bundle heading a channel (`resolve::head`), by bundle name. A
    /// head missing here has no readable CSV, and OLM leaves its channel out of the package's PackageManifest.
    pub descriptions: BTreeMap<String, BundleDescription>,
}

/// A package's `olm.deprecations`: messages for the package, its channels and its bundles by name. Informational,
/// as in OLM: a deprecated channel or bundle is still resolved (unlike a bundle's `olm.deprecated` property).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deprecations {
    pub package: Option<String>,
    pub channels: BTreeMap<String, String>,
    pub bundles: BTreeMap<String, String>,
}

/// A channel: the bundles it offers and the upgrade edges between them.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Channel {
    pub name: String,
    #[serde(default)]
    pub entries: Vec<ChannelEntry>,
}

/// One bundle of a channel, with the bundles it upgrades from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelEntry {
    pub name: String,
    #[serde(default)]
    pub replaces: Option<String>,
    #[serde(default)]
    pub skips: Vec<String>,
    #[serde(default)]
    pub skip_range: Option<String>,
}

/// A bundle of the catalog: where its image is, which version it is, and what it provides and requires of the
/// rest of a resolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogBundle {
    pub name: String,
    pub package: String,
    pub image: String,
    pub version: Version,
    /// Its `olm.gvk` properties.
    pub provides: Vec<Gvk>,
    /// Its `olm.gvk.required`, `olm.package.required` and `olm.constraint` properties.
    pub requires: Vec<Dependency>,
    /// Why a dependency property could not be read, if one could not: the bundle stays in the catalog (installing
    /// it by name still works, as in OLM) and resolution leaves it out, saying why.
    pub unreadable: Option<String>,
    /// Its `olm.label` properties.
    pub labels: Vec<String>,
    /// Whether it carries `olm.deprecated`.
    pub deprecated: bool,
}

/// Why a catalog did not load.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("reading catalog file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("parsing catalog file {path}: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("catalog file {path}: {schema} blob {name:?}: {reason}")]
    InvalidBlob { path: PathBuf, schema: String, name: String, reason: String },
    #[error("the catalog holds no package (no olm.package blob under {path})")]
    Empty { path: PathBuf },
    /// Over one of the catalog's limits, at the blob that passed it.
    #[error("catalog file {path}: {limit}")]
    OverLimit { path: PathBuf, limit: OverLimit },
}

impl CatalogError {
    /// Whether the error comes from what the catalog holds, so that reading the same content again can only fail
    /// again: all but a failure to read a file.
    pub fn for_good(&self) -> bool {
        !matches!(self, Self::Read { .. })
    }

    /// The error with its file named from `root` (an image's root, not where this process keeps it).
    pub fn within(self, root: &Path) -> Self {
        let from_root = |path: PathBuf| path.strip_prefix(root).map(Path::to_path_buf).unwrap_or(path);
        match self {
            Self::Read { path, source } => Self::Read { path: from_root(path), source },
            Self::Parse { path, reason } => Self::Parse { path: from_root(path), reason },
            Self::InvalidBlob { path, schema, name, reason } => {
                Self::InvalidBlob { path: from_root(path), schema, name, reason }
            }
            Self::Empty { path } => Self::Empty { path: from_root(path) },
            Self::OverLimit { path, limit } => Self::OverLimit { path: from_root(path), limit },
        }
    }
}

impl Categorized for CatalogError {
    fn category(&self) -> &'static str {
        match self {
            Self::Read { .. } => "CatalogReadFailed",
            Self::Parse { .. } | Self::InvalidBlob { .. } => "InvalidCatalog",
            Self::Empty { .. } => "EmptyCatalog",
            Self::OverLimit { .. } => "CatalogOverLimit",
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PackageBlob {
    name: String,
    #[serde(default)]
    default_channel: Option<String>,
    /// Read leniently (a value of the wrong type is ignored), so that what only the PackageManifest API shows
    /// never keeps a catalog from loading.
    #[serde(default)]
    description: Value,
    #[serde(default)]
    icon: Value,
}

#[derive(Deserialize)]
struct DeprecationsBlob {
    package: String,
    #[serde(default)]
    entries: Vec<DeprecationEntry>,
}

#[derive(Deserialize)]
struct DeprecationEntry {
    reference: DeprecationReference,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
struct DeprecationReference {
    schema: String,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct ChannelBlob {
    package: String,
    #[serde(flatten)]
    channel: Channel,
}

#[derive(Deserialize)]
struct BundleBlob {
    name: String,
    package: String,
    #[serde(default)]
    image: String,
    #[serde(default)]
    properties: Vec<PropertyBlob>,
    /// Read leniently, as the package's description and icon.
    #[serde(default, rename = "relatedImages")]
    related_images: Value,
}

#[derive(Deserialize)]
struct PropertyBlob {
    #[serde(rename = "type")]
    type_: String,
    #[serde(default)]
    value: Value,
}

impl Catalog {
    /// Loads every `.yaml`, `.yml` and `.json` file under `root`, in path order, within the default limits.
    pub fn load_dir(root: &Path) -> Result<Self, CatalogError> {
        Self::load_dir_within(root, &CatalogLimits::default())
    }

    /// Loads every `.yaml`, `.yml` and `.json` file under `root`, in path order, one file at a time and each blob by
    /// blob (`blobs`): what is held is the model being built and one blob, never a file's text or its values. Which
    /// bundles head a channel is known once every blob was read, so the heads' descriptions are read afterwards,
    /// each from its own blob read again.
    pub fn load_dir_within(root: &Path, limits: &CatalogLimits) -> Result<Self, CatalogError> {
        let mut files = Vec::new();
        collect_catalog_files(root, &mut files)?;
        files.sort();
        let mut builder = Builder::new(limits);
        for path in &files {
            blobs::read(path, 0, limits.max_blob_bytes, |offset, blob| {
                builder.add(path, blob, offset)?;
                Ok(Next::Continue)
            })?;
        }
        let mut assembled = builder.finish()?;
        let mut heads = std::mem::take(&mut assembled.heads);
        // Read in file order, each file front to back.
        heads.sort_by(|a, b| (&a.path, a.at).cmp(&(&b.path, b.at)));
        for head in heads {
            if let Some(blob) = blobs::read_at(&head.path, head.at, limits.max_blob_bytes)? {
                assembled.describe(&head, blob)?;
            }
        }
        if assembled.catalog.packages.is_empty() {
            return Err(CatalogError::Empty { path: root.to_owned() });
        }
        Ok(assembled.catalog)
    }

    /// Assembles packages from blobs, each with the file it came from (for errors), within the default limits.
    pub fn from_blobs(blobs: Vec<(PathBuf, Value)>) -> Result<Self, CatalogError> {
        Self::from_blobs_within(blobs, &CatalogLimits::default())
    }

    /// Assembles packages from blobs held in memory (a ConfigMap's, which the API server bounds), within `limits`.
    pub fn from_blobs_within(blobs: Vec<(PathBuf, Value)>, limits: &CatalogLimits) -> Result<Self, CatalogError> {
        let mut builder = Builder::new(limits);
        // Bundle blobs are kept for their heads' descriptions, as a file would be read again.
        let mut bundles = Vec::with_capacity(blobs.len());
        for (index, (path, blob)) in blobs.into_iter().enumerate() {
            let bundle = (blob.get("schema").and_then(Value::as_str) == Some("olm.bundle")).then(|| blob.clone());
            builder.add(&path, blob, index as u64)?;
            bundles.push(bundle);
        }
        let mut assembled = builder.finish()?;
        for head in std::mem::take(&mut assembled.heads) {
            let blob = usize::try_from(head.at).ok().and_then(|index| bundles.get_mut(index)).and_then(Option::take);
            if let Some(blob) = blob {
                assembled.describe(&head, blob)?;
            }
        }
        Ok(assembled.catalog)
    }

    /// The model's estimated size in memory (`weight`): what a loaded catalog costs.
    pub fn weight(&self) -> u64 {
        self.packages.values().map(weight::package_all).sum()
    }
}

/// A bundle heading a channel, and where its blob is (a file and an offset, or an index among blobs in memory).
struct Head {
    package: String,
    bundle: String,
    path: PathBuf,
    at: u64,
}

/// A catalog being assembled blob by blob: packages as their blobs come, and channels, bundles and deprecations
/// set aside until every package is known (a blob may come before its package's). Each blob is counted as it is
/// added, so that a catalog over a limit stops at the blob that passed it.
struct Builder<'a> {
    limits: &'a CatalogLimits,
    tally: Tally,
    packages: BTreeMap<String, Package>,
    /// The files blobs came from, each once: the pending blobs name theirs by index.
    paths: Vec<PathBuf>,
    channels: Vec<(usize, ChannelBlob)>,
    bundles: Vec<(usize, u64, CatalogBundle)>,
    deprecations: Vec<(usize, DeprecationsBlob)>,
}

/// A catalog whose blobs were all read: its model without descriptions, the heads to describe, and its tally.
struct Assembled<'a> {
    limits: &'a CatalogLimits,
    tally: Tally,
    catalog: Catalog,
    heads: Vec<Head>,
}

impl<'a> Builder<'a> {
    fn new(limits: &'a CatalogLimits) -> Self {
        Self {
            limits,
            tally: Tally::default(),
            packages: BTreeMap::new(),
            paths: Vec::new(),
            channels: Vec::new(),
            bundles: Vec::new(),
            deprecations: Vec::new(),
        }
    }

    fn file(&mut self, path: &Path) -> usize {
        if self.paths.last().is_some_and(|last| last == path) {
            return self.paths.len() - 1;
        }
        self.paths.push(path.to_owned());
        self.paths.len() - 1
    }

    fn count(&mut self, path: &Path, more: Tally) -> Result<(), CatalogError> {
        self.tally.add(self.limits, more).map_err(|limit| CatalogError::OverLimit { path: path.to_owned(), limit })
    }

    /// Adds one blob, found at `at` of `path`. Blobs of other schemas are passed over.
    fn add(&mut self, path: &Path, blob: Value, at: u64) -> Result<(), CatalogError> {
        let schema = blob.get("schema").and_then(Value::as_str).unwrap_or_default().to_owned();
        let name = blob.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let invalid = |reason: String| CatalogError::InvalidBlob {
            path: path.to_owned(),
            schema: schema.clone(),
            name: name.clone(),
            reason,
        };
        match schema.as_str() {
            "olm.package" => {
                let package = PackageBlob::deserialize(blob).map_err(|error| invalid(error.to_string()))?;
                let description = package.description.as_str().map(str::to_owned);
                let icon = Icon::of_package(&package.icon);
                let more = weight::package(&package.name, description.as_deref(), icon.as_ref());
                self.count(path, Tally { packages: 1, bytes: more, ..Tally::default() })?;
                let entry = self.packages.entry(package.name.clone()).or_default();
                entry.name = package.name;
                entry.default_channel = package.default_channel;
                entry.description = description;
                entry.icon = icon;
            }
            "olm.channel" => {
                let channel = ChannelBlob::deserialize(blob).map_err(|error| invalid(error.to_string()))?;
                let more = Tally {
                    channel_entries: channel.channel.entries.len() as u64,
                    bytes: weight::channel(&channel.channel),
                    ..Tally::default()
                };
                self.count(path, more)?;
                let file = self.file(path);
                self.channels.push((file, channel));
            }
            "olm.bundle" => {
                let bundle = BundleBlob::deserialize(blob).map_err(|error| invalid(error.to_string()))?;
                let version = bundle_version(&bundle).map_err(&invalid)?;
                let read = bundle_dependencies(&bundle);
                let bundle = CatalogBundle {
                    name: bundle.name,
                    package: bundle.package,
                    image: bundle.image,
                    version,
                    provides: read.provides,
                    requires: read.requires,
                    unreadable: read.unreadable,
                    labels: read.labels,
                    deprecated: read.deprecated,
                };
                self.count(path, Tally { bundles: 1, bytes: weight::bundle(&bundle), ..Tally::default() })?;
                let file = self.file(path);
                self.bundles.push((file, at, bundle));
            }
            "olm.deprecations" => {
                let deprecations = DeprecationsBlob::deserialize(blob).map_err(|error| invalid(error.to_string()))?;
                let more = deprecations
                    .entries
                    .iter()
                    .map(|entry| weight::deprecation(&entry.reference.name, &entry.message))
                    .sum();
                self.count(path, Tally { bytes: more, ..Tally::default() })?;
                let file = self.file(path);
                self.deprecations.push((file, deprecations));
            }
            _ => {}
        }
        Ok(())
    }

    /// Puts channels, bundles and deprecations into their packages, and finds each channel's head.
    fn finish(self) -> Result<Assembled<'a>, CatalogError> {
        let Self { limits, tally, packages, paths, channels, bundles, deprecations } = self;
        let mut catalog = Catalog { packages };
        let path = |file: usize| paths.get(file).cloned().unwrap_or_default();
        for (file, blob) in channels {
            let package = catalog.packages.get_mut(&blob.package).ok_or_else(|| CatalogError::InvalidBlob {
                path: path(file),
                schema: "olm.channel".into(),
                name: blob.channel.name.clone(),
                reason: format!("package {:?} has no olm.package blob", blob.package),
            })?;
            package.channels.insert(blob.channel.name.clone(), blob.channel);
        }
        // Where each bundle's blob is, until the heads are known (the last of a name wins, as its bundle does).
        let mut places: HashMap<(String, String), (usize, u64)> = HashMap::new();
        for (file, at, bundle) in bundles {
            let package = catalog.packages.get_mut(&bundle.package).ok_or_else(|| CatalogError::InvalidBlob {
                path: path(file),
                schema: "olm.bundle".into(),
                name: bundle.name.clone(),
                reason: format!("package {:?} has no olm.package blob", bundle.package),
            })?;
            places.insert((bundle.package.clone(), bundle.name.clone()), (file, at));
            package.bundles.insert(bundle.name.clone(), bundle);
        }
        for (file, blob) in deprecations {
            let package = catalog.packages.get_mut(&blob.package).ok_or_else(|| CatalogError::InvalidBlob {
                path: path(file),
                schema: "olm.deprecations".into(),
                name: String::new(),
                reason: format!("package {:?} has no olm.package blob", blob.package),
            })?;
            for entry in blob.entries {
                let reference = entry.reference;
                match reference.schema.as_str() {
                    "olm.package" => package.deprecations.package = Some(entry.message),
                    "olm.channel" => {
                        package.deprecations.channels.insert(reference.name, entry.message);
                    }
                    "olm.bundle" => {
                        package.deprecations.bundles.insert(reference.name, entry.message);
                    }
                    other => {
                        return Err(CatalogError::InvalidBlob {
                            path: path(file),
                            schema: "olm.deprecations".into(),
                            name: String::new(),
                            reason: format!(
                                "package {:?}: a reference to schema {other:?}, which has no deprecation",
                                blob.package
                            ),
                        })
                    }
                }
            }
        }
        let mut heads = Vec::new();
        for package in catalog.packages.values() {
            let names: BTreeSet<&str> = package
                .channels
                .values()
                .filter_map(|channel| resolve::head(package, channel).ok())
                .map(|entry| entry.name.as_str())
                .collect();
            for name in names {
                if let Some((file, at)) = places.get(&(package.name.clone(), name.to_owned())) {
                    heads.push(Head {
                        package: package.name.clone(),
                        bundle: name.to_owned(),
                        path: path(*file),
                        at: *at,
                    });
                }
            }
        }
        Ok(Assembled { limits, tally, catalog, heads })
    }
}

impl Assembled<'_> {
    /// Reads the description of `head` from its blob; a head whose CSV does not read gets none (OLM leaves its
    /// channel out of the PackageManifest).
    fn describe(&mut self, head: &Head, blob: Value) -> Result<(), CatalogError> {
        let Ok(mut bundle) = BundleBlob::deserialize(blob) else { return Ok(()) };
        let Some(package) = self.catalog.packages.get_mut(&head.package) else { return Ok(()) };
        let Some(version) = package.bundles.get(&head.bundle).map(|bundle| bundle.version.clone()) else {
            return Ok(());
        };
        if bundle.name != head.bundle || bundle.package != head.package {
            return Ok(());
        }
        let Ok(description) = description_sources(&mut bundle).read(&bundle.name, &version) else { return Ok(()) };
        let more = Tally { bytes: weight::description(&description), ..Tally::default() };
        self.tally
            .add(self.limits, more)
            .map_err(|limit| CatalogError::OverLimit { path: head.path.clone(), limit })?;
        package.descriptions.insert(head.bundle.clone(), description);
        Ok(())
    }
}

/// Takes out of a bundle blob what its description may be read from.
fn description_sources(bundle: &mut BundleBlob) -> Sources {
    let mut sources = Sources::new(bundle.related_images.take());
    for property in &mut bundle.properties {
        sources.offer(&property.type_, &mut property.value);
    }
    sources
}

/// The version of a bundle, from its `olm.package` property.
fn bundle_version(bundle: &BundleBlob) -> Result<Version, String> {
    let property = bundle
        .properties
        .iter()
        .find(|property| property.type_ == "olm.package")
        .ok_or_else(|| "no olm.package property gives its version".to_owned())?;
    let version = property.value.get("version").and_then(Value::as_str).unwrap_or_default();
    Version::parse(version).map_err(|error| format!("version {version:?} is not semver: {error}"))
}

/// What a bundle's properties say about resolution.
#[derive(Default)]
struct DependencyProperties {
    provides: Vec<Gvk>,
    requires: Vec<Dependency>,
    unreadable: Option<String>,
    labels: Vec<String>,
    deprecated: bool,
}

/// How much of why a property could not be read is kept: the reason quotes the value, which may be large, and the
/// bundle keeps it as long as the catalog is loaded.
const UNREADABLE_KEPT: usize = 1024;

/// What a bundle provides and requires, from its properties, and why a property could not be read.
fn bundle_dependencies(bundle: &BundleBlob) -> DependencyProperties {
    let mut read = DependencyProperties::default();
    for property in &bundle.properties {
        match properties::read(&property.type_, &property.value) {
            Ok(Read::Provides(gvk)) => read.provides.push(gvk),
            Ok(Read::Requires(dependency)) => read.requires.push(dependency),
            Ok(Read::Label(label)) => read.labels.push(label),
            Ok(Read::Deprecated) => read.deprecated = true,
            Ok(Read::Other) => {}
            Err(error) => read.unreadable = read.unreadable.or_else(|| Some(cut(error.to_string(), UNREADABLE_KEPT))),
        }
    }
    read
}

/// `text` cut to at most `limit` bytes at a character boundary, with `...` when cut.
fn cut(mut text: String, limit: usize) -> String {
    if text.len() > limit {
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}

fn collect_catalog_files(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), CatalogError> {
    let read_error = |source| CatalogError::Read { path: dir.to_owned(), source };
    for entry in std::fs::read_dir(dir).map_err(read_error)? {
        let path = entry.map_err(read_error)?.path();
        if path.is_dir() {
            collect_catalog_files(&path, files)?;
        } else if path
            .extension()
            .is_some_and(|extension| extension == "yaml" || extension == "yml" || extension == "json")
        {
            files.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "fbc_tests.rs"]
mod tests;
