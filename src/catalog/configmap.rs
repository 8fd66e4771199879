//! ConfigMap catalogs (OLM v0's `configmap` and `internal` CatalogSources): the `customResourceDefinitions`,
//! `clusterServiceVersions` and `packages` keys, each a YAML list, read as operator-registry's ConfigMap loader
//! reads them and turned into File-Based Catalog blobs, so one loader (`fbc`) serves both kinds of catalog.
//!
//! A package's channel is the chain of `spec.replaces` from its `currentCSV`; each bundle gets `olm.package`, an
//! `olm.gvk` per owned CRD version and APIService, an `olm.gvk.required` per required one, and its CSV and owned CRDs
//! as `olm.bundle.object` properties (it has no image: its content is inline, as in OLM).

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

/// The ConfigMap keys, as OLM spells them.
pub const CRDS_KEY: &str = "customResourceDefinitions";
pub const CSVS_KEY: &str = "clusterServiceVersions";
pub const PACKAGES_KEY: &str = "packages";

/// Why a ConfigMap is not a catalog.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigMapCatalogError {
    #[error("couldn't find expected key {0} in configmap")]
    MissingKey(&'static str),
    #[error("error parsing {key} list: {reason}")]
    Parse { key: &'static str, reason: String },
    #[error("can't add the same CRD twice in one configmap: {0}")]
    DuplicateCrd(String),
    #[error("clusterServiceVersion {csv} owns CRD {name} version {version}, which the configmap does not hold")]
    MissingOwnedCrd { csv: String, name: String, version: String },
    #[error(
        "package {package} channel {channel}: currentCSV {csv} is not among the configmap's clusterServiceVersions"
    )]
    MissingCurrentCsv { package: String, channel: String, csv: String },
    #[error("clusterServiceVersion {csv} is in the channels of packages {first} and {second}")]
    TwoPackages { csv: String, first: String, second: String },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PackageManifest {
    package_name: String,
    #[serde(default)]
    channels: Vec<PackageChannel>,
    #[serde(default)]
    default_channel: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PackageChannel {
    name: String,
    #[serde(rename = "currentCSV")]
    current_csv: String,
}

/// What a CSV says about its place in a channel and what it provides and requires.
struct Csv {
    name: String,
    object: Value,
}

impl Csv {
    fn spec(&self, path: &[&str]) -> Option<&Value> {
        path.iter().try_fold(&self.object["spec"], |value, key| value.get(key))
    }

    fn text(&self, path: &[&str]) -> Option<String> {
        self.spec(path).and_then(Value::as_str).map(str::to_owned)
    }

    fn list(&self, path: &[&str]) -> Vec<Value> {
        self.spec(path).and_then(Value::as_array).cloned().unwrap_or_default()
    }
}

fn yaml_list(data: &BTreeMap<String, String>, key: &'static str) -> Result<Vec<Value>, ConfigMapCatalogError> {
    let text = data.get(key).ok_or(ConfigMapCatalogError::MissingKey(key))?;
    let value: Value = serde_yaml_ng::from_str(text)
        .map_err(|error| ConfigMapCatalogError::Parse { key, reason: error.to_string() })?;
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => Ok(items),
        _ => Err(ConfigMapCatalogError::Parse { key, reason: "not a list".into() }),
    }
}

/// The CRDs of the ConfigMap by (name, version): every version a CRD lists (or its v1beta1 `spec.version`).
fn crds_by_version(crds: Vec<Value>) -> Result<BTreeMap<(String, String), Value>, ConfigMapCatalogError> {
    let mut by_version = BTreeMap::new();
    for crd in crds {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let mut versions: Vec<String> = crd["spec"]["versions"]
            .as_array()
            .map(|versions| versions.iter().filter_map(|v| v["name"].as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        if versions.is_empty() {
            versions.extend(crd["spec"]["version"].as_str().map(str::to_owned));
        }
        for version in versions {
            if by_version.insert((name.clone(), version.clone()), crd.clone()).is_some() {
                return Err(ConfigMapCatalogError::DuplicateCrd(format!("{name} {version}")));
            }
        }
    }
    Ok(by_version)
}

fn bundle_object(object: &Value) -> Value {
    let encoded = base64::engine::general_purpose::STANDARD.encode(object.to_string());
    json!({"type": "olm.bundle.object", "value": {"data": encoded}})
}

fn gvk_of_crd(description: &Value) -> (String, String, String) {
    let name = description["name"].as_str().unwrap_or_default();
    let group = name.split_once('.').map(|(_, group)| group).unwrap_or_default();
    (group.to_owned(), description["version"].as_str().unwrap_or_default().to_owned(), kind_of(description))
}

fn gvk_of_api_service(description: &Value) -> (String, String, String) {
    let text = |key: &str| description[key].as_str().unwrap_or_default().to_owned();
    (text("group"), text("version"), kind_of(description))
}

fn kind_of(description: &Value) -> String {
    description["kind"].as_str().unwrap_or_default().to_owned()
}

fn gvk_property(kind: &str, (group, version, api_kind): (String, String, String)) -> Value {
    json!({"type": kind, "value": {"group": group, "kind": api_kind, "version": version}})
}

/// The bundle blob of `csv` in `package`: its properties, with its CSV and owned CRDs inline.
fn bundle_blob(
    package: &str,
    csv: &Csv,
    crds: &BTreeMap<(String, String), Value>,
) -> Result<Value, ConfigMapCatalogError> {
    let version = csv.text(&["version"]).unwrap_or_default();
    let mut properties = vec![json!({"type": "olm.package", "value": {"packageName": package, "version": version}})];
    let mut objects = vec![bundle_object(&csv.object)];
    let mut included = BTreeSet::new();
    for owned in csv.list(&["customresourcedefinitions", "owned"]) {
        properties.push(gvk_property("olm.gvk", gvk_of_crd(&owned)));
        let name = owned["name"].as_str().unwrap_or_default().to_owned();
        let version = owned["version"].as_str().unwrap_or_default().to_owned();
        let crd = crds.get(&(name.clone(), version.clone())).ok_or_else(|| ConfigMapCatalogError::MissingOwnedCrd {
            csv: csv.name.clone(),
            name: name.clone(),
            version,
        })?;
        if included.insert(name) {
            objects.push(bundle_object(crd));
        }
    }
    for owned in csv.list(&["apiservicedefinitions", "owned"]) {
        properties.push(gvk_property("olm.gvk", gvk_of_api_service(&owned)));
    }
    for required in csv.list(&["customresourcedefinitions", "required"]) {
        properties.push(gvk_property("olm.gvk.required", gvk_of_crd(&required)));
    }
    for required in csv.list(&["apiservicedefinitions", "required"]) {
        properties.push(gvk_property("olm.gvk.required", gvk_of_api_service(&required)));
    }
    properties.extend(objects);
    Ok(json!({"schema": "olm.bundle", "name": csv.name, "package": package, "image": "", "properties": properties}))
}

/// A channel's entries: the replaces chain from `current`, stopping at a CSV the ConfigMap does not hold (the edge
/// stays, as a File-Based Catalog may name a bundle it does not hold) or at one already walked.
fn channel_entries(current: &str, csvs: &BTreeMap<String, Csv>) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut walked = BTreeSet::new();
    let mut next = Some(current.to_owned());
    while let Some(name) = next.take() {
        let Some(csv) = csvs.get(&name).filter(|_| walked.insert(name.clone())) else { break };
        let mut entry = json!({"name": name});
        if let Some(replaces) = csv.text(&["replaces"]).filter(|r| !r.is_empty()) {
            entry["replaces"] = replaces.clone().into();
            next = Some(replaces);
        }
        let skips: Vec<Value> = csv.list(&["skips"]);
        if !skips.is_empty() {
            entry["skips"] = skips.into();
        }
        if let Some(range) = csv.object["metadata"]["annotations"]["olm.skipRange"].as_str() {
            entry["skipRange"] = range.into();
        }
        entries.push(entry);
    }
    entries
}

/// The File-Based Catalog blobs of a ConfigMap catalog's `data`.
///
/// Every key is looked for before any is parsed: a ConfigMap that is not a catalog (one the CatalogSource's author
/// may not be able to read) is named as such, and nothing of its content reaches a status message.
pub fn blobs(data: &BTreeMap<String, String>) -> Result<Vec<Value>, ConfigMapCatalogError> {
    if let Some(missing) = [CRDS_KEY, CSVS_KEY, PACKAGES_KEY].into_iter().find(|key| !data.contains_key(*key)) {
        return Err(ConfigMapCatalogError::MissingKey(missing));
    }
    let crds = crds_by_version(yaml_list(data, CRDS_KEY)?)?;
    let csvs: BTreeMap<String, Csv> = yaml_list(data, CSVS_KEY)?
        .into_iter()
        .map(|object| {
            let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            (name.clone(), Csv { name, object })
        })
        .collect();
    let packages: Vec<PackageManifest> = yaml_list(data, PACKAGES_KEY)?
        .into_iter()
        .map(serde_json::from_value)
        .collect::<Result<_, _>>()
        .map_err(|error| ConfigMapCatalogError::Parse { key: PACKAGES_KEY, reason: error.to_string() })?;
    let mut blobs = Vec::new();
    let mut package_of: BTreeMap<String, String> = BTreeMap::new();
    for package in &packages {
        blobs.push(json!({"schema": "olm.package", "name": package.package_name,
                          "defaultChannel": package.default_channel}));
        for channel in &package.channels {
            if !csvs.contains_key(&channel.current_csv) {
                return Err(ConfigMapCatalogError::MissingCurrentCsv {
                    package: package.package_name.clone(),
                    channel: channel.name.clone(),
                    csv: channel.current_csv.clone(),
                });
            }
            let entries = channel_entries(&channel.current_csv, &csvs);
            for entry in &entries {
                let csv = entry["name"].as_str().unwrap_or_default().to_owned();
                match package_of.get(&csv) {
                    Some(first) if *first != package.package_name => {
                        return Err(ConfigMapCatalogError::TwoPackages {
                            csv,
                            first: first.clone(),
                            second: package.package_name.clone(),
                        })
                    }
                    Some(_) => {}
                    None => {
                        package_of.insert(csv, package.package_name.clone());
                    }
                }
            }
            blobs.push(json!({"schema": "olm.channel", "name": channel.name, "package": package.package_name,
                              "entries": entries}));
        }
    }
    for (csv, package) in &package_of {
        blobs.push(bundle_blob(package, &csvs[csv], &crds)?);
    }
    Ok(blobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use std::path::PathBuf;

    const CRDS: &str = r#"
- apiVersion: apiextensions.k8s.io/v1
  kind: CustomResourceDefinition
  metadata: {name: plumbi.example.com}
  spec:
    group: example.com
    names: {kind: Plumbus, plural: plumbi}
    versions: [{name: v1, served: true, storage: true}]
"#;

    fn csv(name: &str, version: &str, replaces: Option<&str>) -> String {
        let replaces = replaces.map(|r| format!("\n    replaces: {r}")).unwrap_or_default();
        format!(
            r#"
- apiVersion: operators.coreos.com/v1alpha1
  kind: ClusterServiceVersion
  metadata:
    name: {name}
    annotations: {{olm.skipRange: "<{version}"}}
  spec:
    version: {version}{replaces}
    customresourcedefinitions:
      owned: [{{name: plumbi.example.com, version: v1, kind: Plumbus}}]
      required: [{{name: grumbos.example.com, version: v1, kind: Grumbo}}]"#
        )
    }

    fn data(csvs: &str, packages: &str) -> BTreeMap<String, String> {
        [(CRDS_KEY, CRDS), (CSVS_KEY, csvs), (PACKAGES_KEY, packages)]
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
            .collect()
    }

    const PACKAGES: &str = "- packageName: plumbus\n  defaultChannel: stable\n  channels:\n  - {name: stable, currentCSV: plumbus.v2.0.0}\n";

    fn catalog(data: &BTreeMap<String, String>) -> Catalog {
        let blobs = blobs(data).expect("a catalog");
        Catalog::from_blobs(blobs.into_iter().map(|blob| (PathBuf::from("configmap"), blob)).collect())
            .expect("blobs load")
    }

    #[test]
    fn a_configmap_catalog_loads_as_the_file_based_catalog_it_describes() {
        let csvs = format!(
            "{}{}",
            csv("plumbus.v1.0.0", "1.0.0", None),
            csv("plumbus.v2.0.0", "2.0.0", Some("plumbus.v1.0.0"))
        );
        let catalog = catalog(&data(&csvs, PACKAGES));
        let package = &catalog.packages["plumbus"];
        assert_eq!(package.default_channel.as_deref(), Some("stable"));
        let entries = &package.channels["stable"].entries;
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].name, "plumbus.v2.0.0");
        assert_eq!(entries[0].replaces.as_deref(), Some("plumbus.v1.0.0"));
        assert_eq!(entries[0].skip_range.as_deref(), Some("<2.0.0"));
        let bundle = &package.bundles["plumbus.v2.0.0"];
        assert_eq!(bundle.version, semver::Version::new(2, 0, 0));
        assert_eq!(bundle.image, "", "inline content has no image");
        assert_eq!(bundle.provides.len(), 1);
        assert_eq!(bundle.provides[0].kind, "Plumbus");
        assert_eq!(bundle.provides[0].group, "example.com");
        assert_eq!(bundle.requires.len(), 1, "the required CRD is a dependency");
    }

    #[test]
    fn the_csv_and_its_owned_crds_are_the_bundle_s_objects() {
        let blobs = blobs(&data(&csv("plumbus.v2.0.0", "2.0.0", None), PACKAGES)).expect("a catalog");
        let bundle = blobs.iter().find(|blob| blob["schema"] == "olm.bundle").expect("a bundle");
        let objects: Vec<Value> = bundle["properties"]
            .as_array()
            .expect("properties")
            .iter()
            .filter(|property| property["type"] == "olm.bundle.object")
            .map(|property| {
                let data = property["value"]["data"].as_str().expect("data");
                let bytes = base64::engine::general_purpose::STANDARD.decode(data).expect("base64");
                serde_json::from_slice(&bytes).expect("json")
            })
            .collect();
        let kinds: Vec<&str> = objects.iter().filter_map(|object| object["kind"].as_str()).collect();
        assert_eq!(kinds, ["ClusterServiceVersion", "CustomResourceDefinition"]);
    }

    #[test]
    fn missing_keys_and_content_are_named_as_olm_names_them() {
        let mut without = data("[]", "[]");
        without.remove(CSVS_KEY);
        assert_eq!(
            blobs(&without).expect_err("refused").to_string(),
            "couldn't find expected key clusterServiceVersions in configmap"
        );
        let error = blobs(&data("[]", PACKAGES)).expect_err("no current CSV");
        assert!(error.to_string().contains("currentCSV plumbus.v2.0.0"), "{error}");
        let unowned = csv("plumbus.v2.0.0", "2.0.0", None)
            .replace("plumbi.example.com, version: v1", "plumbi.example.com, version: v9");
        let error = blobs(&data(&unowned, PACKAGES)).expect_err("no such CRD");
        assert!(error.to_string().contains("plumbi.example.com version v9"), "{error}");
        let error = blobs(&data("{a: b}", PACKAGES)).expect_err("not a list");
        assert_eq!(error, ConfigMapCatalogError::Parse { key: CSVS_KEY, reason: "not a list".into() });
        let mut twice = data("[]", "[]");
        twice.insert(CRDS_KEY.into(), format!("{CRDS}{}", CRDS.trim_start_matches('\n')));
        assert!(matches!(blobs(&twice), Err(ConfigMapCatalogError::DuplicateCrd(_))));
    }

    #[test]
    fn a_replaces_cycle_or_a_missing_predecessor_ends_the_channel() {
        let cycle = format!("{}{}", csv("a.v1", "1.0.0", Some("a.v2")), csv("a.v2", "2.0.0", Some("a.v1")));
        let packages = "- packageName: a\n  channels: [{name: s, currentCSV: a.v2}]\n";
        let blobs = blobs(&data(&cycle, packages)).expect("loads");
        let channel = blobs.iter().find(|blob| blob["schema"] == "olm.channel").expect("a channel");
        assert_eq!(channel["entries"].as_array().map(Vec::len), Some(2));
        let missing = csv("a.v2", "2.0.0", Some("a.v1"));
        let blobs = super::blobs(&data(&missing, packages)).expect("loads");
        let channel = blobs.iter().find(|blob| blob["schema"] == "olm.channel").expect("a channel");
        assert_eq!(channel["entries"], json!([{"name": "a.v2", "replaces": "a.v1", "skipRange": "<2.0.0"}]));
    }

    #[test]
    fn a_configmap_that_is_not_a_catalog_is_named_so_without_a_word_of_its_content() {
        let secret: BTreeMap<String, String> =
            [(CRDS_KEY.to_owned(), "hunter2: [".to_owned()), ("password".to_owned(), "hunter2".to_owned())].into();
        let error = blobs(&secret).expect_err("not a catalog");
        assert_eq!(error, ConfigMapCatalogError::MissingKey(CSVS_KEY));
        assert!(!error.to_string().contains("hunter2"));
    }

    #[test]
    fn one_csv_in_two_packages_is_refused() {
        let packages = "- packageName: a\n  channels: [{name: s, currentCSV: x.v1}]\n- packageName: b\n  channels: [{name: s, currentCSV: x.v1}]\n";
        let error = blobs(&data(&csv("x.v1", "1.0.0", None), packages)).expect_err("refused");
        assert!(matches!(error, ConfigMapCatalogError::TwoPackages { .. }), "{error}");
    }
}
