//! The registry+v1 bundle format: `manifests/` (exactly one ClusterServiceVersion, CRDs and the other kinds OLM
//! allows) and `metadata/` (`annotations.yaml`, optional `properties.yaml` and `dependencies.yaml`). Loading checks
//! the format; every error names the file and the reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::api::v1alpha1::ClusterServiceVersion;
use crate::category::Categorized;

/// Annotation keys of `metadata/annotations.yaml`, which are also the labels of a bundle image.
pub const MEDIATYPE_ANNOTATION: &str = "operators.operatorframework.io.bundle.mediatype.v1";
pub const MANIFESTS_ANNOTATION: &str = "operators.operatorframework.io.bundle.manifests.v1";
pub const METADATA_ANNOTATION: &str = "operators.operatorframework.io.bundle.metadata.v1";
pub const PACKAGE_ANNOTATION: &str = "operators.operatorframework.io.bundle.package.v1";
pub const CHANNELS_ANNOTATION: &str = "operators.operatorframework.io.bundle.channels.v1";
pub const DEFAULT_CHANNEL_ANNOTATION: &str = "operators.operatorframework.io.bundle.channel.default.v1";

/// The one bundle format this project installs.
pub const REGISTRY_V1: &str = "registry+v1";

/// Kinds a bundle may carry besides its CSV and CRDs: operator-registry's supported resources, and the console
/// kinds and NetworkPolicy that OLM's InstallPlans apply. Checked by kind name, as OLM does.
pub const ALLOWED_KINDS: &[&str] = &[
    "Secret",
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "ServiceAccount",
    "Service",
    "Role",
    "RoleBinding",
    "PrometheusRule",
    "ServiceMonitor",
    "PodDisruptionBudget",
    "PriorityClass",
    "VerticalPodAutoscaler",
    "ConsoleYAMLSample",
    "ConsoleQuickStart",
    "ConsoleCLIDownload",
    "ConsoleLink",
    "NetworkPolicy",
];

/// A loaded registry+v1 bundle.
#[derive(Clone, Debug)]
pub struct Bundle {
    pub csv: ClusterServiceVersion,
    /// Every object of `manifests/` other than the CSV, in file order.
    pub objects: Vec<Manifest>,
    pub annotations: BundleAnnotations,
    pub properties: Vec<Property>,
    pub dependencies: Vec<Property>,
}

/// One object of `manifests/`, with the file it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    pub file: String,
    pub object: Value,
}

/// What `metadata/annotations.yaml` says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BundleAnnotations {
    pub package: String,
    pub channels: Vec<String>,
    pub default_channel: Option<String>,
    /// Every annotation as written, for image labels.
    pub all: BTreeMap<String, String>,
}

/// A typed property or dependency (`{type, value}`).
#[derive(Clone, Debug, PartialEq, Deserialize, serde::Serialize)]
pub struct Property {
    #[serde(rename = "type")]
    pub property_type: String,
    pub value: Value,
}

/// Why a directory is not a valid registry+v1 bundle. Files are named relative to the bundle root.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("{file}: cannot be read: {reason}")]
    Unreadable { file: String, reason: String },
    #[error("{file}: is missing")]
    Missing { file: String },
    #[error("{file}: invalid YAML: {reason}")]
    InvalidYaml { file: String, reason: String },
    #[error("{file}: document {document} is not a Kubernetes object: {reason}")]
    NotAnObject { file: String, document: usize, reason: String },
    #[error("{file}: manifests/ must be flat, but this is a directory")]
    NestedDirectory { file: String },
    #[error("manifests/: holds no ClusterServiceVersion")]
    NoClusterServiceVersion,
    #[error("manifests/: holds more than one ClusterServiceVersion: {files:?}")]
    SeveralClusterServiceVersions { files: Vec<String> },
    #[error("{file}: kind {kind} is not allowed in a bundle")]
    UnsupportedKind { file: String, kind: String },
    #[error("{file}: CustomResourceDefinition {name} is {api_version}; only apiextensions.k8s.io/v1 and v1beta1 are supported")]
    UnsupportedCrdVersion { file: String, name: String, api_version: String },
    #[error("{file}: invalid ClusterServiceVersion: {reason}")]
    InvalidClusterServiceVersion { file: String, reason: String },
    #[error("{file}: invalid annotations: {reason}")]
    InvalidAnnotations { file: String, reason: String },
    #[error("{file}: invalid {what}: {reason}")]
    InvalidMetadata { file: String, what: &'static str, reason: String },
}

impl Categorized for BundleError {
    fn category(&self) -> &'static str {
        match self {
            Self::Unreadable { .. } => "BundleFileUnreadable",
            Self::Missing { .. } => "BundleFileMissing",
            Self::InvalidYaml { .. } => "BundleYamlInvalid",
            Self::NotAnObject { .. } => "BundleObjectInvalid",
            Self::NestedDirectory { .. } => "BundleLayoutInvalid",
            Self::NoClusterServiceVersion | Self::SeveralClusterServiceVersions { .. } => "BundleCsvCount",
            Self::UnsupportedKind { .. } => "BundleKindUnsupported",
            Self::UnsupportedCrdVersion { .. } => "BundleCrdVersionUnsupported",
            Self::InvalidClusterServiceVersion { .. } => "BundleCsvInvalid",
            Self::InvalidAnnotations { .. } => "BundleAnnotationsInvalid",
            Self::InvalidMetadata { .. } => "BundleMetadataInvalid",
        }
    }
}

fn read(root: &Path, file: &str) -> Result<Option<String>, BundleError> {
    match std::fs::read_to_string(root.join(file)) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(BundleError::Unreadable { file: file.to_owned(), reason: error.to_string() }),
    }
}

/// The documents of a YAML stream; empty documents (comments only, or `---` alone) are skipped.
pub fn yaml_documents(file: &str, text: &str) -> Result<Vec<Value>, BundleError> {
    let mut documents = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value = Value::deserialize(document)
            .map_err(|error| BundleError::InvalidYaml { file: file.to_owned(), reason: error.to_string() })?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}

/// Checks that a document is a Kubernetes object: a mapping with apiVersion, kind and metadata.name.
pub fn check_object(file: &str, index: usize, value: &Value) -> Result<(), BundleError> {
    let reason = if !value.is_object() {
        Some("it is not a mapping".to_owned())
    } else if value["apiVersion"].as_str().is_none_or(str::is_empty) {
        Some("apiVersion is missing".to_owned())
    } else if value["kind"].as_str().is_none_or(str::is_empty) {
        Some("kind is missing".to_owned())
    } else if value["metadata"]["name"].as_str().is_none_or(str::is_empty) {
        Some("metadata.name is missing".to_owned())
    } else {
        None
    };
    match reason {
        Some(reason) => Err(BundleError::NotAnObject { file: file.to_owned(), document: index, reason }),
        None => Ok(()),
    }
}

impl Bundle {
    /// Loads and checks the bundle rooted at `root`.
    pub fn load(root: &Path) -> Result<Self, BundleError> {
        let annotations = load_annotations(root)?;
        let (csv, objects) = load_manifests(root)?;
        let properties = load_properties(root, "metadata/properties.yaml", "properties")?;
        let dependencies = load_properties(root, "metadata/dependencies.yaml", "dependencies")?;
        Ok(Self { csv, objects, annotations, properties, dependencies })
    }

    /// The CSV's name.
    pub fn name(&self) -> &str {
        self.csv.metadata.name.as_deref().unwrap_or_default()
    }
}

fn load_annotations(root: &Path) -> Result<BundleAnnotations, BundleError> {
    const FILE: &str = "metadata/annotations.yaml";
    let text = read(root, FILE)?.ok_or_else(|| BundleError::Missing { file: FILE.to_owned() })?;
    #[derive(Deserialize)]
    struct AnnotationsFile {
        annotations: BTreeMap<String, Value>,
    }
    let invalid = |reason: String| BundleError::InvalidAnnotations { file: FILE.to_owned(), reason };
    let parsed: AnnotationsFile = serde_yaml_ng::from_str(&text).map_err(|error| invalid(error.to_string()))?;
    // Values are strings, but YAML writes some as numbers or booleans (`com.redhat.openshift.versions: v4.6` is fine,
    // `x: 4.6` is a number); they are labels, so they are kept as their text.
    let all: BTreeMap<String, String> = parsed
        .annotations
        .into_iter()
        .map(|(key, value)| {
            let text = match value {
                Value::String(text) => text,
                other => other.to_string(),
            };
            (key, text)
        })
        .collect();
    match all.get(MEDIATYPE_ANNOTATION).map(String::as_str) {
        Some(REGISTRY_V1) => {}
        Some(other) => {
            return Err(invalid(format!("{MEDIATYPE_ANNOTATION} is {other:?}; only {REGISTRY_V1} is supported")))
        }
        None => return Err(invalid(format!("{MEDIATYPE_ANNOTATION} is missing"))),
    }
    let package = all
        .get(PACKAGE_ANNOTATION)
        .filter(|p| !p.is_empty())
        .cloned()
        .ok_or_else(|| invalid(format!("{PACKAGE_ANNOTATION} is missing")))?;
    let channels: Vec<String> = all
        .get(CHANNELS_ANNOTATION)
        .map(|list| list.split(',').map(str::trim).filter(|c| !c.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default();
    if channels.is_empty() {
        return Err(invalid(format!("{CHANNELS_ANNOTATION} names no channel")));
    }
    // The default channel describes the package, which may default to a channel this bundle is not in.
    let default_channel = all.get(DEFAULT_CHANNEL_ANNOTATION).filter(|c| !c.is_empty()).cloned();
    Ok(BundleAnnotations { package, channels, default_channel, all })
}

fn load_manifests(root: &Path) -> Result<(ClusterServiceVersion, Vec<Manifest>), BundleError> {
    let dir = root.join("manifests");
    let entries = std::fs::read_dir(&dir).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => BundleError::Missing { file: "manifests/".to_owned() },
        _ => BundleError::Unreadable { file: "manifests/".to_owned(), reason: error.to_string() },
    })?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry
            .map_err(|error| BundleError::Unreadable { file: "manifests/".to_owned(), reason: error.to_string() })?;
        paths.push(entry.path());
    }
    paths.sort();

    let mut csvs: Vec<(String, Value)> = Vec::new();
    let mut objects = Vec::new();
    for path in paths {
        let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        let file = format!("manifests/{name}");
        if path.is_dir() {
            return Err(BundleError::NestedDirectory { file });
        }
        if !(name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json")) {
            continue;
        }
        let text = read(root, &file)?.unwrap_or_default();
        for (index, object) in yaml_documents(&file, &text)?.into_iter().enumerate() {
            check_object(&file, index, &object)?;
            let kind = object["kind"].as_str().unwrap_or_default().to_owned();
            match kind.as_str() {
                "ClusterServiceVersion" => csvs.push((file.clone(), object)),
                "CustomResourceDefinition" => {
                    let api_version = object["apiVersion"].as_str().unwrap_or_default();
                    if !matches!(api_version, "apiextensions.k8s.io/v1" | "apiextensions.k8s.io/v1beta1") {
                        return Err(BundleError::UnsupportedCrdVersion {
                            file,
                            name: object["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                            api_version: api_version.to_owned(),
                        });
                    }
                    objects.push(Manifest { file: file.clone(), object });
                }
                other if ALLOWED_KINDS.contains(&other) => objects.push(Manifest { file: file.clone(), object }),
                _ => return Err(BundleError::UnsupportedKind { file, kind }),
            }
        }
    }
    let (file, csv_value) = match csvs.len() {
        0 => return Err(BundleError::NoClusterServiceVersion),
        1 => csvs.remove(0),
        _ => {
            return Err(BundleError::SeveralClusterServiceVersions {
                files: csvs.into_iter().map(|(file, _)| file).collect(),
            })
        }
    };
    let csv: ClusterServiceVersion = serde_json::from_value(csv_value)
        .map_err(|error| BundleError::InvalidClusterServiceVersion { file: file.clone(), reason: error.to_string() })?;
    if csv.spec.install.strategy != "deployment" {
        return Err(BundleError::InvalidClusterServiceVersion {
            file,
            reason: format!(
                "install strategy {:?} is not supported; only \"deployment\" is",
                csv.spec.install.strategy
            ),
        });
    }
    Ok((csv, objects))
}

fn load_properties(root: &Path, file: &str, what: &'static str) -> Result<Vec<Property>, BundleError> {
    let Some(text) = read(root, file)? else { return Ok(Vec::new()) };
    let documents = yaml_documents(file, &text)?;
    let Some(document) = documents.into_iter().next() else { return Ok(Vec::new()) };
    let list = document.get(what).cloned().unwrap_or(Value::Null);
    if list.is_null() {
        return Ok(Vec::new());
    }
    serde_json::from_value(list).map_err(|error| BundleError::InvalidMetadata {
        file: file.to_owned(),
        what,
        reason: error.to_string(),
    })
}
