//! What the PackageManifest API (`packages.operators.coreos.com/v1`, `src/installed/packagemanifest.rs`) shows of a
//! catalog bundle that heads a channel: OLM v0's `CSVDescription` (pkg/package-server/apis/operators/
//! packagemanifest.go, `CreateCSVDescription`), read as OLM's registry serves the bundle's CSV
//! (operator-registry's `ConvertModelBundleToAPIBundle`): the first `olm.bundle.object` that is a
//! ClusterServiceVersion when there is one; otherwise a CSV made from the bundle's one `olm.csv.metadata`, with the
//! bundle's name and version, its `relatedImages`, and the package's icon and description (the latter only when the
//! metadata has none). A bundle with neither has no description, and OLM leaves its channel out.
//!
//! Only what OLM shows is kept, in the shape it shows it (CRD and APIService descriptions cut to name, group,
//! version, kind, display name and description), and only for channel heads (`fbc`), so a cached catalog does not
//! hold every bundle's CSV.

use std::collections::{BTreeMap, BTreeSet};

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use semver::Version;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::nullable::null_as_default;

/// Go's `base64.StdEncoding`: padded, and lenient about the unused bits of the last symbol (Go's default).
const GO_STD: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

/// An icon: its image (decoded) and media type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Icon {
    pub data: Vec<u8>,
    pub media_type: String,
}

impl Icon {
    /// The `icon` of an `olm.package` blob (`{base64data, mediatype}`), decoded as Go's JSON decoder decodes a
    /// `[]byte`: strict base64, line breaks ignored. OLM refuses a whole catalog whose icon does not decode; here
    /// the icon is left out instead, so such a catalog still serves its packages.
    pub fn of_package(value: &Value) -> Option<Self> {
        let icon = value.as_object()?;
        let data = match icon.get("base64data") {
            Some(Value::String(text)) => decode_strict(text)?,
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return None,
        };
        let media_type = icon.get("mediatype").and_then(Value::as_str).unwrap_or_default().to_owned();
        Some(Self { data, media_type })
    }
}

/// What the PackageManifest API shows of a bundle heading a channel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BundleDescription {
    /// The CSV's name: the channel's `currentCSV`.
    pub csv_name: String,
    /// The CSV's labels: a PackageManifest carries its default channel's.
    pub labels: BTreeMap<String, String>,
    /// Whether it was made from `olm.csv.metadata`: then its icon is the package's, and its description the
    /// package's when the metadata has none.
    pub from_csv_metadata: bool,
    /// The CSV's first icon (read from a CSV; None when made from metadata). OLM strips icons from every
    /// PackageManifest it serves and serves the first one of the default channel's CSV as the `icon`
    /// subresource, so the others are never shown and not kept.
    pub icon: Option<Icon>,
    /// OLM's `currentCSVDesc`, without its icon.
    pub shown: CsvDescription,
}

/// OLM's `CSVDescription` as its JSON reads (field names, `omitempty`), without `icon`, which OLM strips.
/// `version`, `provider`, `customresourcedefinitions` and `apiservicedefinitions` are always written, as Go writes
/// a struct whatever its `omitempty`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CsvDescription {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// The CSV's version, as blang/semver prints it (`0.0.0` when the CSV has none).
    pub version: String,
    pub provider: AppLink,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<AppLink>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub maintainers: Vec<Maintainer>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub maturity: String,
    /// OLM's `LongDescription`, the CSV's `spec.description`.
    #[serde(rename = "description", skip_serializing_if = "String::is_empty")]
    pub long_description: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub install_modes: Vec<InstallMode>,
    #[serde(rename = "customresourcedefinitions")]
    pub custom_resource_definitions: Definitions<CrdDescription>,
    #[serde(rename = "apiservicedefinitions")]
    pub api_service_definitions: Definitions<ApiServiceDescription>,
    #[serde(rename = "nativeApis", skip_serializing_if = "Vec::is_empty")]
    pub native_apis: Vec<GroupVersionKind>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub min_kube_version: String,
    /// The images of the CSV's deployments and its `spec.relatedImages`, each once. OLM gathers them in a Go map
    /// and so lists them in no fixed order; they are sorted here so that one catalog always reads the same.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub related_images: Vec<String>,
}

/// A link (OLM's `AppLink`), read from a CSV and shown as OLM shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppLink {
    #[serde(deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub url: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Maintainer {
    #[serde(deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub email: String,
}

/// An install mode; any type string, as Go reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct InstallMode {
    #[serde(rename = "type", deserialize_with = "null_as_default")]
    pub mode: String,
    #[serde(deserialize_with = "null_as_default")]
    pub supported: bool,
}

/// `metav1.GroupVersionKind`: every field written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GroupVersionKind {
    #[serde(deserialize_with = "null_as_default")]
    pub group: String,
    #[serde(deserialize_with = "null_as_default")]
    pub version: String,
    #[serde(deserialize_with = "null_as_default")]
    pub kind: String,
}

/// Owned and required APIs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, bound(deserialize = "T: Deserialize<'de>"))]
pub struct Definitions<T> {
    #[serde(deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<T>,
    #[serde(deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<T>,
}

impl<T> Default for Definitions<T> {
    fn default() -> Self {
        Self { owned: Vec::new(), required: Vec::new() }
    }
}

/// A CRD description cut to what OLM shows (`descriptionsForCRDs`): descriptors and resources are dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CrdDescription {
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(deserialize_with = "null_as_default")]
    pub version: String,
    #[serde(deserialize_with = "null_as_default")]
    pub kind: String,
    #[serde(deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// An APIService description cut to what OLM shows (`descriptionsForAPIServices`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApiServiceDescription {
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(deserialize_with = "null_as_default")]
    pub group: String,
    #[serde(deserialize_with = "null_as_default")]
    pub version: String,
    #[serde(deserialize_with = "null_as_default")]
    pub kind: String,
    #[serde(deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// The fields of an `olm.csv.metadata` value (operator-registry's `property.CSVMetadata`).
#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct CsvMetadata {
    #[serde(deserialize_with = "null_as_default")]
    annotations: BTreeMap<String, String>,
    #[serde(deserialize_with = "null_as_default")]
    api_service_definitions: Definitions<ApiServiceDescription>,
    #[serde(rename = "crdDescriptions", deserialize_with = "null_as_default")]
    crd_descriptions: Definitions<CrdDescription>,
    #[serde(deserialize_with = "null_as_default")]
    description: String,
    #[serde(deserialize_with = "null_as_default")]
    display_name: String,
    #[serde(deserialize_with = "null_as_default")]
    install_modes: Vec<InstallMode>,
    #[serde(deserialize_with = "null_as_default")]
    keywords: Vec<String>,
    #[serde(deserialize_with = "null_as_default")]
    labels: BTreeMap<String, String>,
    #[serde(deserialize_with = "null_as_default")]
    links: Vec<AppLink>,
    #[serde(deserialize_with = "null_as_default")]
    maintainers: Vec<Maintainer>,
    #[serde(deserialize_with = "null_as_default")]
    maturity: String,
    #[serde(deserialize_with = "null_as_default")]
    min_kube_version: String,
    #[serde(rename = "nativeAPIs", deserialize_with = "null_as_default")]
    native_apis: Vec<GroupVersionKind>,
    #[serde(deserialize_with = "null_as_default")]
    provider: AppLink,
}

/// The fields of a ClusterServiceVersion that OLM's description reads.
#[derive(Default, Deserialize)]
#[serde(default)]
struct Csv {
    #[serde(deserialize_with = "null_as_default")]
    metadata: CsvObjectMeta,
    #[serde(deserialize_with = "null_as_default")]
    spec: CsvSpec,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct CsvObjectMeta {
    #[serde(deserialize_with = "null_as_default")]
    name: String,
    #[serde(deserialize_with = "null_as_default")]
    labels: BTreeMap<String, String>,
    #[serde(deserialize_with = "null_as_default")]
    annotations: BTreeMap<String, String>,
}

#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct CsvSpec {
    #[serde(deserialize_with = "null_as_default")]
    version: Option<String>,
    #[serde(deserialize_with = "null_as_default")]
    maturity: String,
    #[serde(rename = "customresourcedefinitions", deserialize_with = "null_as_default")]
    custom_resource_definitions: Definitions<CrdDescription>,
    #[serde(rename = "apiservicedefinitions", deserialize_with = "null_as_default")]
    api_service_definitions: Definitions<ApiServiceDescription>,
    #[serde(rename = "nativeAPIs", deserialize_with = "null_as_default")]
    native_apis: Vec<GroupVersionKind>,
    #[serde(deserialize_with = "null_as_default")]
    min_kube_version: String,
    #[serde(deserialize_with = "null_as_default")]
    display_name: String,
    #[serde(deserialize_with = "null_as_default")]
    description: String,
    #[serde(deserialize_with = "null_as_default")]
    keywords: Vec<String>,
    #[serde(deserialize_with = "null_as_default")]
    maintainers: Vec<Maintainer>,
    #[serde(deserialize_with = "null_as_default")]
    provider: AppLink,
    #[serde(deserialize_with = "null_as_default")]
    links: Vec<AppLink>,
    #[serde(deserialize_with = "null_as_default")]
    icon: Vec<CsvIcon>,
    #[serde(deserialize_with = "null_as_default")]
    install_modes: Vec<InstallMode>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct CsvIcon {
    #[serde(deserialize_with = "null_as_default")]
    base64data: String,
    #[serde(deserialize_with = "null_as_default")]
    mediatype: String,
}

/// What a bundle blob holds that its description may be read from, kept while the catalog loads: its
/// `olm.bundle.object` and `olm.csv.metadata` property values and its `relatedImages`.
#[derive(Debug, Default)]
pub(super) struct Sources {
    objects: Vec<Value>,
    csv_metadata: Vec<Value>,
    related_images: Value,
}

impl Sources {
    pub(super) fn new(related_images: Value) -> Self {
        Self { related_images, ..Self::default() }
    }

    /// Takes the value of a property a description may be read from.
    pub(super) fn offer(&mut self, kind: &str, value: &mut Value) {
        match kind {
            "olm.bundle.object" => self.objects.push(value.take()),
            "olm.csv.metadata" => self.csv_metadata.push(value.take()),
            _ => {}
        }
    }

    /// The description of bundle `name` at `version`, read as OLM's registry serves its CSV. An error says why
    /// there is none; OLM then leaves out the channel it heads.
    pub(super) fn read(&self, name: &str, version: &Version) -> Result<BundleDescription, String> {
        if let Some(csv) = self.objects.iter().find_map(object_of_kind_csv) {
            return from_csv(csv);
        }
        match self.csv_metadata.as_slice() {
            [metadata] => from_csv_metadata(metadata, name, version, &self.related_images),
            [] => Err("the bundle has neither a ClusterServiceVersion olm.bundle.object nor olm.csv.metadata".into()),
            _ => Err("the bundle has more than one olm.csv.metadata property".into()),
        }
    }
}

/// The object of an `olm.bundle.object` value (`{data: <base64 of JSON or YAML>}`) when it is a
/// ClusterServiceVersion (operator-registry's `extractCSV`); one that does not decode is passed over.
fn object_of_kind_csv(value: &Value) -> Option<Value> {
    let data = decode_strict(value.get("data")?.as_str()?)?;
    let object: Value = serde_json::from_slice(&data).ok().or_else(|| serde_yaml_ng::from_slice(&data).ok())?;
    (object.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion")).then_some(object)
}

/// OLM's `CreateCSVDescription` of a ClusterServiceVersion. A CSV whose fields do not read (or whose version is not
/// semver, even tolerantly) fails, as OLM's unmarshalling of it fails.
fn from_csv(object: Value) -> Result<BundleDescription, String> {
    let related_images = csv_images(&object);
    let csv = Csv::deserialize(&object).map_err(|error| format!("reading its ClusterServiceVersion: {error}"))?;
    let version = match csv.spec.version.as_deref() {
        Some(version) => parse_tolerant(version)?.to_string(),
        None => Version::new(0, 0, 0).to_string(),
    };
    let spec = csv.spec;
    let icon = spec
        .icon
        .into_iter()
        .next()
        .map(|icon| Icon { data: decode_streamed(&icon.base64data), media_type: icon.mediatype });
    Ok(BundleDescription {
        csv_name: csv.metadata.name,
        labels: csv.metadata.labels,
        from_csv_metadata: false,
        icon,
        shown: CsvDescription {
            display_name: spec.display_name,
            version,
            provider: spec.provider,
            annotations: csv.metadata.annotations,
            keywords: spec.keywords,
            links: spec.links,
            maintainers: spec.maintainers,
            maturity: spec.maturity,
            long_description: spec.description,
            install_modes: spec.install_modes,
            custom_resource_definitions: spec.custom_resource_definitions,
            api_service_definitions: spec.api_service_definitions,
            native_apis: spec.native_apis,
            min_kube_version: spec.min_kube_version,
            related_images,
        },
    })
}

/// The CSV operator-registry makes of `olm.csv.metadata` when a bundle carries no CSV: named after the bundle, at
/// the bundle's version, with its `relatedImages` (the package's icon and description are added when shown).
fn from_csv_metadata(
    value: &Value,
    name: &str,
    version: &Version,
    related_images: &Value,
) -> Result<BundleDescription, String> {
    let metadata = CsvMetadata::deserialize(value).map_err(|error| format!("reading its olm.csv.metadata: {error}"))?;
    let images: BTreeSet<String> = related_images
        .as_array()
        .into_iter()
        .flatten()
        .map(|image| image.get("image").and_then(Value::as_str).unwrap_or_default().to_owned())
        .collect();
    Ok(BundleDescription {
        csv_name: name.to_owned(),
        labels: metadata.labels,
        from_csv_metadata: true,
        icon: None,
        shown: CsvDescription {
            display_name: metadata.display_name,
            version: version.to_string(),
            provider: metadata.provider,
            annotations: metadata.annotations,
            keywords: metadata.keywords,
            links: metadata.links,
            maintainers: metadata.maintainers,
            maturity: metadata.maturity,
            long_description: metadata.description,
            install_modes: metadata.install_modes,
            custom_resource_definitions: metadata.crd_descriptions,
            api_service_definitions: metadata.api_service_definitions,
            native_apis: metadata.native_apis,
            min_kube_version: metadata.min_kube_version,
            related_images: images.into_iter().collect(),
        },
    })
}

/// OLM's `GetImages`: the container and init container images of the CSV's deployments (when its install strategy
/// is `deployment`) and the images of its `spec.relatedImages`, each once.
fn csv_images(csv: &Value) -> Vec<String> {
    let spec = &csv["spec"];
    let mut images = BTreeSet::new();
    if spec["install"]["strategy"].as_str() == Some("deployment") {
        for deployment in spec["install"]["spec"]["deployments"].as_array().into_iter().flatten() {
            let pod = &deployment["spec"]["template"]["spec"];
            for container in ["containers", "initContainers"].iter().filter_map(|key| pod[key].as_array()).flatten() {
                images.insert(container["image"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    for related in spec["relatedImages"].as_array().into_iter().flatten() {
        images.insert(related["image"].as_str().unwrap_or_default().to_owned());
    }
    images.into_iter().collect()
}

/// blang/semver's `ParseTolerant`, which OLM's `OperatorVersion` reads a CSV's version with: spaces and a leading
/// `v` trimmed, leading zeros dropped, a missing minor or patch taken as 0.
fn parse_tolerant(text: &str) -> Result<Version, String> {
    let trimmed = text.trim();
    let trimmed = trimmed.strip_prefix('v').unwrap_or(trimmed);
    let mut parts: Vec<String> = trimmed
        .splitn(3, '.')
        .map(|part| {
            if part.len() > 1 {
                let stripped = part.trim_start_matches('0');
                if stripped.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                    stripped.to_owned()
                } else {
                    format!("0{stripped}")
                }
            } else {
                part.to_owned()
            }
        })
        .collect();
    if parts.len() < 3 {
        if parts.last().is_some_and(|last| last.contains(['+', '-'])) {
            return Err(format!("version {text:?}: Short version cannot contain PreRelease/Build meta data"));
        }
        parts.resize(3, "0".to_owned());
    }
    Version::parse(&parts.join(".")).map_err(|error| format!("version {text:?} is not semver: {error}"))
}

/// Go's `base64.StdEncoding.Decode` (what its JSON decoder does to a `[]byte`): line breaks ignored, any other
/// fault refuses the whole text.
fn decode_strict(text: &str) -> Option<Vec<u8>> {
    let cleaned: Vec<u8> = text.bytes().filter(|byte| !matches!(byte, b'\r' | b'\n')).collect();
    GO_STD.decode(cleaned).ok()
}

/// What OLM's icon subresource reads of a CSV icon through Go's streaming base64 decoder: line breaks ignored,
/// and on a fault the bytes of the whole quanta before it (OLM ignores the error and serves what was read).
fn decode_streamed(text: &str) -> Vec<u8> {
    let cleaned: Vec<u8> = text.bytes().filter(|byte| !matches!(byte, b'\r' | b'\n')).collect();
    if let Ok(bytes) = GO_STD.decode(&cleaned) {
        return bytes;
    }
    let mut bytes = Vec::new();
    for quantum in cleaned.chunks_exact(4) {
        match GO_STD.decode(quantum) {
            Ok(decoded) => bytes.extend(decoded),
            Err(_) => break,
        }
        if quantum.ends_with(b"=") {
            break;
        }
    }
    bytes
}

#[cfg(test)]
#[path = "description_tests.rs"]
mod tests;
