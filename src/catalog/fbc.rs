//! File-Based Catalogs (docs/design.md, 'Catalogs'): the `olm.package`, `olm.channel` and `olm.bundle` blobs of a
//! catalog directory, read into packages with their channels and bundles. Blobs of other schemas are kept out of the
//! way, as `opm` does, so a catalog carrying extensions still loads.
//!
//! Beside what resolution reads, a package keeps what the PackageManifest API shows (`description`): its
//! `olm.package` blob's description and icon, and the CSV description of each bundle heading one of its channels
//! (the only bundles a PackageManifest describes; the others' CSVs are not kept, so a cached catalog stays small).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use semver::Version;
use serde::Deserialize;
use serde_json::Value;

use super::description::{BundleDescription, Icon, Sources};
use super::properties::{self, Dependency, Gvk, Read};
use super::resolve;
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
}

impl Categorized for CatalogError {
    fn category(&self) -> &'static str {
        match self {
            Self::Read { .. } => "CatalogReadFailed",
            Self::Parse { .. } | Self::InvalidBlob { .. } => "InvalidCatalog",
            Self::Empty { .. } => "EmptyCatalog",
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
    /// Loads every `.yaml`, `.yml` and `.json` file under `root`, in path order.
    pub fn load_dir(root: &Path) -> Result<Self, CatalogError> {
        let mut files = Vec::new();
        collect_catalog_files(root, &mut files)?;
        files.sort();
        let mut blobs = Vec::new();
        for path in files {
            let text =
                std::fs::read_to_string(&path).map_err(|source| CatalogError::Read { path: path.clone(), source })?;
            for blob in parse_blobs(&path, &text)? {
                blobs.push((path.clone(), blob));
            }
        }
        let catalog = Self::from_blobs(blobs)?;
        if catalog.packages.is_empty() {
            return Err(CatalogError::Empty { path: root.to_owned() });
        }
        Ok(catalog)
    }

    /// Assembles packages from blobs, each with the file it came from (for errors).
    pub fn from_blobs(blobs: Vec<(PathBuf, Value)>) -> Result<Self, CatalogError> {
        let mut catalog = Self::default();
        let mut channels = Vec::new();
        let mut bundles = Vec::new();
        let mut deprecations = Vec::new();
        for (path, blob) in blobs {
            let schema = blob.get("schema").and_then(Value::as_str).unwrap_or_default().to_owned();
            let name = blob.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
            let invalid = |reason: String| CatalogError::InvalidBlob {
                path: path.clone(),
                schema: schema.clone(),
                name: name.clone(),
                reason,
            };
            match schema.as_str() {
                "olm.package" => {
                    let package: PackageBlob =
                        serde_json::from_value(blob).map_err(|error| invalid(error.to_string()))?;
                    let entry = catalog.packages.entry(package.name.clone()).or_default();
                    entry.name = package.name;
                    entry.default_channel = package.default_channel;
                    entry.description = package.description.as_str().map(str::to_owned);
                    entry.icon = Icon::of_package(&package.icon);
                }
                "olm.channel" => {
                    let channel: ChannelBlob =
                        serde_json::from_value(blob).map_err(|error| invalid(error.to_string()))?;
                    channels.push((path, channel));
                }
                "olm.bundle" => {
                    let mut bundle: BundleBlob =
                        serde_json::from_value(blob).map_err(|error| invalid(error.to_string()))?;
                    let version = bundle_version(&bundle).map_err(&invalid)?;
                    let dependencies = bundle_dependencies(&bundle);
                    let sources = description_sources(&mut bundle);
                    bundles.push((path, bundle, version, dependencies, sources));
                }
                "olm.deprecations" => {
                    let blob: DeprecationsBlob =
                        serde_json::from_value(blob).map_err(|error| invalid(error.to_string()))?;
                    deprecations.push((path, blob));
                }
                _ => {}
            }
        }
        for (path, blob) in channels {
            let package = catalog.packages.get_mut(&blob.package).ok_or_else(|| CatalogError::InvalidBlob {
                path,
                schema: "olm.channel".into(),
                name: blob.channel.name.clone(),
                reason: format!("package {:?} has no olm.package blob", blob.package),
            })?;
            package.channels.insert(blob.channel.name.clone(), blob.channel);
        }
        // The description sources of every bundle, by package and bundle, until the channel heads are known.
        let mut sources: HashMap<(String, String), Sources> = HashMap::new();
        for (path, blob, version, read, bundle_sources) in bundles {
            let package = catalog.packages.get_mut(&blob.package).ok_or_else(|| CatalogError::InvalidBlob {
                path,
                schema: "olm.bundle".into(),
                name: blob.name.clone(),
                reason: format!("package {:?} has no olm.package blob", blob.package),
            })?;
            let bundle = CatalogBundle {
                name: blob.name,
                package: blob.package,
                image: blob.image,
                version,
                provides: read.provides,
                requires: read.requires,
                unreadable: read.unreadable,
                labels: read.labels,
                deprecated: read.deprecated,
            };
            sources.insert((bundle.package.clone(), bundle.name.clone()), bundle_sources);
            package.bundles.insert(bundle.name.clone(), bundle);
        }
        for (path, blob) in deprecations {
            let package = catalog.packages.get_mut(&blob.package).ok_or_else(|| CatalogError::InvalidBlob {
                path: path.clone(),
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
                            path,
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
        for package in catalog.packages.values_mut() {
            describe_heads(package, &mut sources);
        }
        Ok(catalog)
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

/// Reads the description of each bundle heading one of the package's channels; a head whose CSV does not read gets
/// none (OLM leaves its channel out of the PackageManifest).
fn describe_heads(package: &mut Package, sources: &mut HashMap<(String, String), Sources>) {
    let heads: BTreeSet<String> = package
        .channels
        .values()
        .filter_map(|channel| resolve::head(package, channel).ok())
        .map(|entry| entry.name.clone())
        .collect();
    for head in heads {
        let (Some(bundle), Some(bundle_sources)) =
            (package.bundles.get(&head), sources.remove(&(package.name.clone(), head.clone())))
        else {
            continue;
        };
        if let Ok(description) = bundle_sources.read(&bundle.name, &bundle.version) {
            package.descriptions.insert(head, description);
        }
    }
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
            Err(error) => read.unreadable = read.unreadable.or(Some(error.to_string())),
        }
    }
    read
}

/// The blobs of one catalog file: a YAML stream, or a JSON stream of objects.
fn parse_blobs(path: &Path, text: &str) -> Result<Vec<Value>, CatalogError> {
    let parse_error = |reason: String| CatalogError::Parse { path: path.to_owned(), reason };
    let is_json = path.extension().is_some_and(|extension| extension == "json");
    let mut blobs = Vec::new();
    if is_json {
        for blob in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
            blobs.push(blob.map_err(|error| parse_error(error.to_string()))?);
        }
    } else {
        for document in serde_yaml_ng::Deserializer::from_str(text) {
            let blob = Value::deserialize(document).map_err(|error| parse_error(error.to_string()))?;
            if !blob.is_null() {
                blobs.push(blob);
            }
        }
    }
    Ok(blobs)
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
mod tests {
    use super::*;
    use serde_json::json;

    fn blobs(values: Vec<Value>) -> Vec<(PathBuf, Value)> {
        values.into_iter().map(|value| (PathBuf::from("catalog.yaml"), value)).collect()
    }

    fn bundle(name: &str, version: &str) -> Value {
        json!({"schema": "olm.bundle", "name": name, "package": "plumbus", "image": format!("registry.example/{name}"),
               "properties": [{"type": "olm.package", "value": {"packageName": "plumbus", "version": version}}]})
    }

    #[test]
    fn packages_gather_their_channels_and_bundles_whatever_the_blob_order() {
        let catalog = Catalog::from_blobs(blobs(vec![
            bundle("plumbus.v1.0.0", "1.0.0"),
            json!({"schema": "olm.channel", "name": "stable", "package": "plumbus",
                   "entries": [{"name": "plumbus.v1.0.0", "skipRange": "<1.0.0"}]}),
            json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"}),
            json!({"schema": "olm.deprecations", "package": "plumbus"}),
        ]))
        .expect("loads");
        let package = &catalog.packages["plumbus"];
        assert_eq!(package.default_channel.as_deref(), Some("stable"));
        assert_eq!(package.channels["stable"].entries[0].skip_range.as_deref(), Some("<1.0.0"));
        assert_eq!(package.bundles["plumbus.v1.0.0"].version, Version::new(1, 0, 0));
        assert_eq!(package.bundles["plumbus.v1.0.0"].image, "registry.example/plumbus.v1.0.0");
    }

    #[test]
    fn deprecations_are_read_for_the_package_its_channels_and_its_bundles() {
        let catalog = Catalog::from_blobs(blobs(vec![
            json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"}),
            bundle("plumbus.v1.0.0", "1.0.0"),
            json!({"schema": "olm.deprecations", "package": "plumbus", "entries": [
                {"reference": {"schema": "olm.package"}, "message": "use fleeb"},
                {"reference": {"schema": "olm.channel", "name": "alpha"}, "message": "alpha is over"},
                {"reference": {"schema": "olm.bundle", "name": "plumbus.v1.0.0"}, "message": "1.0.0 leaks"}]}),
        ]))
        .expect("loads");
        let deprecations = &catalog.packages["plumbus"].deprecations;
        assert_eq!(deprecations.package.as_deref(), Some("use fleeb"));
        assert_eq!(deprecations.channels["alpha"], "alpha is over");
        assert_eq!(deprecations.bundles["plumbus.v1.0.0"], "1.0.0 leaks");
        assert!(!catalog.packages["plumbus"].bundles["plumbus.v1.0.0"].deprecated, "still resolved");
        let odd = Catalog::from_blobs(blobs(vec![
            json!({"schema": "olm.package", "name": "plumbus"}),
            json!({"schema": "olm.deprecations", "package": "plumbus",
                   "entries": [{"reference": {"schema": "olm.thing"}, "message": "?"}]}),
        ]))
        .expect_err("refused");
        assert!(odd.to_string().contains("olm.thing") || format!("{odd:?}").contains("olm.thing"), "{odd:?}");
    }

    #[test]
    fn only_channel_heads_keep_a_description_beside_the_packages_description_and_icon() {
        let described = |name: &str, version: &str| {
            let mut blob = bundle(name, version);
            blob["properties"]
                .as_array_mut()
                .expect("properties")
                .push(json!({"type": "olm.csv.metadata", "value": {"displayName": format!("Plumbus {version}")}}));
            blob
        };
        let catalog = Catalog::from_blobs(blobs(vec![
            json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable",
                   "description": "Plumbus.", "icon": {"base64data": "PHN2Zy8+", "mediatype": "image/svg+xml"}}),
            json!({"schema": "olm.channel", "name": "stable", "package": "plumbus", "entries": [
                {"name": "plumbus.v1.0.0"}, {"name": "plumbus.v1.1.0", "replaces": "plumbus.v1.0.0"}]}),
            json!({"schema": "olm.channel", "name": "old", "package": "plumbus", "entries": [
                {"name": "plumbus.v1.0.0"}]}),
            described("plumbus.v1.0.0", "1.0.0"),
            described("plumbus.v1.1.0", "1.1.0"),
        ]))
        .expect("loads");
        let package = &catalog.packages["plumbus"];
        assert_eq!(package.description.as_deref(), Some("Plumbus."));
        assert_eq!(package.icon.as_ref().map(|icon| icon.data.as_slice()), Some(b"<svg/>".as_slice()));
        assert_eq!(
            package.descriptions.keys().collect::<Vec<_>>(),
            ["plumbus.v1.0.0", "plumbus.v1.1.0"],
            "the heads of old and stable"
        );
        assert_eq!(package.descriptions["plumbus.v1.1.0"].shown.display_name, "Plumbus 1.1.0");
        let only_stable = Catalog::from_blobs(blobs(vec![
            json!({"schema": "olm.package", "name": "plumbus"}),
            json!({"schema": "olm.channel", "name": "stable", "package": "plumbus", "entries": [
                {"name": "plumbus.v1.0.0"}, {"name": "plumbus.v1.1.0", "replaces": "plumbus.v1.0.0"}]}),
            described("plumbus.v1.0.0", "1.0.0"),
            described("plumbus.v1.1.0", "1.1.0"),
        ]))
        .expect("loads");
        assert_eq!(
            only_stable.packages["plumbus"].descriptions.keys().collect::<Vec<_>>(),
            ["plumbus.v1.1.0"],
            "a bundle heading no channel keeps none"
        );
    }

    #[test]
    fn what_only_package_manifests_show_never_keeps_a_catalog_from_loading() {
        let mut odd_bundle = bundle("plumbus.v1.0.0", "1.0.0");
        odd_bundle["relatedImages"] = json!("not a list");
        odd_bundle["properties"].as_array_mut().expect("properties").extend([
            json!({"type": "olm.bundle.object", "value": {"data": "not base64!"}}),
            json!({"type": "olm.csv.metadata", "value": {"displayName": 7}}),
        ]);
        let catalog = Catalog::from_blobs(blobs(vec![
            json!({"schema": "olm.package", "name": "plumbus", "description": {"not": "text"},
                   "icon": {"base64data": "not base64!"}}),
            json!({"schema": "olm.channel", "name": "stable", "package": "plumbus",
                   "entries": [{"name": "plumbus.v1.0.0"}]}),
            odd_bundle,
        ]))
        .expect("loads");
        let package = &catalog.packages["plumbus"];
        assert_eq!((&package.description, &package.icon), (&None, &None));
        assert!(package.descriptions.is_empty(), "an unreadable head has no description");
        assert_eq!(package.bundles.len(), 1);
    }

    #[test]
    fn a_bundle_without_a_semver_version_is_named_in_the_error() {
        let error = Catalog::from_blobs(blobs(vec![
            json!({"schema": "olm.package", "name": "plumbus"}),
            bundle("plumbus.v1", "1"),
        ]))
        .expect_err("refused");
        assert_eq!(error.category(), "InvalidCatalog");
        assert!(error.to_string().contains("plumbus.v1") && error.to_string().contains("not semver"), "{error}");
    }

    #[test]
    fn a_channel_of_an_unknown_package_is_an_error() {
        let error = Catalog::from_blobs(blobs(vec![
            json!({"schema": "olm.channel", "name": "stable", "package": "ghost", "entries": []}),
        ]))
        .expect_err("refused");
        assert!(error.to_string().contains("ghost"), "{error}");
    }

    #[test]
    fn json_streams_and_yaml_streams_both_parse() {
        let path = Path::new("index.json");
        let text = r#"{"schema":"olm.package","name":"a"}
{"schema":"olm.package","name":"b"}"#;
        assert_eq!(parse_blobs(path, text).expect("json stream").len(), 2);
        let yaml = "---\nschema: olm.package\nname: a\n---\n---\nschema: olm.package\nname: b\n";
        assert_eq!(parse_blobs(Path::new("index.yaml"), yaml).expect("yaml stream").len(), 2);
        assert_eq!(parse_blobs(path, "{").expect_err("broken").category(), "InvalidCatalog");
    }
}
