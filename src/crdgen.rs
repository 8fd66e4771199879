//! Generates the CustomResourceDefinitions of every served and read resource from the Rust types, and compares
//! them with the YAML committed under `crds/`, so that the types stay the one source of truth.

use std::fs;
use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray,
};
use kube::CustomResourceExt;

use crate::api::union::{require_exactly_named_member, Member};
use crate::api::{v1, v1alpha1, v2alpha1};
use crate::category::Categorized;

/// Where the generated YAML lives, relative to the repository root.
pub const CRD_DIR: &str = "crds";

/// Longest Operator name: its component label key's name segment is at most 63 characters (docs/design.md, 'The
/// component label').
pub const OPERATOR_NAME_MAX_LENGTH: i64 = 63;

/// Operator names are both DNS subdomains (object names) and label name segments: lowercase alphanumerics,
/// `-` and `.`, starting and ending with an alphanumeric.
pub const OPERATOR_NAME_PATTERN: &str = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$";

#[derive(Debug, thiserror::Error)]
pub enum CrdGenError {
    #[error("failed to serialize the CRD {name} to YAML")]
    Serialize {
        name: String,
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error("failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Categorized for CrdGenError {
    fn category(&self) -> &'static str {
        match self {
            Self::Serialize { .. } => "CrdSerializeFailed",
            Self::Write { .. } => "CrdWriteFailed",
            Self::Read { .. } => "CrdReadFailed",
        }
    }
}

/// Every CRD the project installs, in a stable order.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    vec![
        with_union(
            restrict_operator_names(v2alpha1::Operator::crd()),
            &["spec", "updates"],
            v2alpha1::Updates::MEMBERS,
        ),
        with_union(v2alpha1::Install::crd(), &["spec", "content", "[]"], v2alpha1::Content::MEMBERS),
        v2alpha1::InstallPolicy::crd(),
        v1alpha1::ClusterServiceVersion::crd(),
        v1alpha1::Subscription::crd(),
        v1alpha1::InstallPlan::crd(),
        v1alpha1::CatalogSource::crd(),
        spec_optional(v1::OperatorGroup::crd(), serde_json::json!({"upgradeStrategy": "Default"})),
        v1::OLMConfig::crd(),
    ]
}

/// Limits Operator names to valid label name segments. CRD schemas may restrict only `metadata.name` and
/// `metadata.generateName`, which is exactly what is needed here.
fn restrict_operator_names(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let name_schema = JSONSchemaProps {
        type_: Some("string".into()),
        max_length: Some(OPERATOR_NAME_MAX_LENGTH),
        pattern: Some(OPERATOR_NAME_PATTERN.into()),
        ..Default::default()
    };
    let metadata_schema = JSONSchemaProps {
        type_: Some("object".into()),
        properties: Some([("name".to_owned(), name_schema)].into()),
        ..Default::default()
    };
    for version in &mut crd.spec.versions {
        if let Some(root) = version.schema.as_mut().and_then(|schema| schema.open_api_v3_schema.as_mut()) {
            root.properties.get_or_insert_with(Default::default).insert("metadata".into(), metadata_schema.clone());
        }
    }
    crd
}

/// Lets an object of `crd` leave out its `spec`, defaulted to `default`, as OLM v0's CRD does for OperatorGroups
/// (`spec: {upgradeStrategy: Default}`): an OperatorGroup without a spec selects every namespace.
fn spec_optional(mut crd: CustomResourceDefinition, default: serde_json::Value) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if let Some(root) = version.schema.as_mut().and_then(|schema| schema.open_api_v3_schema.as_mut()) {
            if let Some(required) = root.required.as_mut() {
                required.retain(|property| property != "spec");
            }
            if root.required.as_ref().is_some_and(Vec::is_empty) {
                root.required = None;
            }
            if let Some(spec) = root.properties.as_mut().and_then(|properties| properties.get_mut("spec")) {
                spec.default =
                    Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON(default.clone()));
            }
        }
    }
    crd
}

/// Adds the union rule to the schema node at `path` (property names, `[]` for array items) of every version.
fn with_union(mut crd: CustomResourceDefinition, path: &[&str], members: &[Member]) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        let mut node = version.schema.as_mut().and_then(|schema| schema.open_api_v3_schema.as_mut());
        for segment in path {
            node = node.and_then(|schema| match *segment {
                "[]" => match schema.items.as_mut() {
                    Some(JSONSchemaPropsOrArray::Schema(items)) => Some(items.as_mut()),
                    _ => None,
                },
                name => schema.properties.as_mut().and_then(|properties| properties.get_mut(name)),
            });
        }
        match node {
            Some(union) => require_exactly_named_member(union, members),
            // The path is fixed by the types in this crate; a unit test proves every union is found.
            None => tracing::error!(crd = ?crd.metadata.name, ?path, "union schema node not found"),
        }
    }
    crd
}

/// The file a CRD is written to: `<group>_<plural>.yaml`, as controller-gen names them.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// The CRD as the YAML committed under `crds/`.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, CrdGenError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    serde_yaml_ng::to_string(crd).map_err(|source| CrdGenError::Serialize { name, source })
}

/// Every CRD as one multi-document YAML stream, for `kubectl apply -f -`.
pub fn all_as_yaml_stream() -> Result<String, CrdGenError> {
    let documents = all_crds().iter().map(to_yaml).collect::<Result<Vec<_>, _>>()?;
    Ok(documents.iter().map(|doc| format!("---\n{doc}")).collect())
}

/// Writes every CRD to `dir` and removes stale generated files there; returns the files written.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>, CrdGenError> {
    fs::create_dir_all(dir).map_err(|source| CrdGenError::Write { path: dir.to_owned(), source })?;
    let mut written = Vec::new();
    for crd in all_crds() {
        let path = dir.join(file_name(&crd));
        fs::write(&path, to_yaml(&crd)?).map_err(|source| CrdGenError::Write { path: path.clone(), source })?;
        written.push(path);
    }
    for stale in unexpected_files(dir)? {
        fs::remove_file(&stale).map_err(|source| CrdGenError::Write { path: stale.clone(), source })?;
    }
    Ok(written)
}

/// How the committed YAML differs from what the types generate.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Staleness {
    /// Generated files that are missing or whose content differs.
    pub outdated: Vec<String>,
    /// YAML files in the directory that no type generates.
    pub unexpected: Vec<String>,
}

impl Staleness {
    pub fn is_fresh(&self) -> bool {
        self.outdated.is_empty() && self.unexpected.is_empty()
    }
}

/// Compares `dir` with freshly generated CRDs.
pub fn check(dir: &Path) -> Result<Staleness, CrdGenError> {
    let mut staleness = Staleness::default();
    for crd in all_crds() {
        let name = file_name(&crd);
        let path = dir.join(&name);
        let committed = match fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(CrdGenError::Read { path, source }),
        };
        if committed.as_deref() != Some(to_yaml(&crd)?.as_str()) {
            staleness.outdated.push(name);
        }
    }
    staleness.unexpected = unexpected_files(dir)?
        .iter()
        .filter_map(|path| path.file_name().map(|name| name.to_string_lossy().into_owned()))
        .collect();
    Ok(staleness)
}

fn unexpected_files(dir: &Path) -> Result<Vec<PathBuf>, CrdGenError> {
    let expected: Vec<String> = all_crds().iter().map(file_name).collect();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(CrdGenError::Read { path: dir.to_owned(), source }),
    };
    let mut unexpected = Vec::new();
    for entry in entries {
        let path = entry.map_err(|source| CrdGenError::Read { path: dir.to_owned(), source })?.path();
        let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        if name.ends_with(".yaml") && !expected.contains(&name) {
            unexpected.push(path);
        }
    }
    unexpected.sort();
    Ok(unexpected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_crd_with_a_distinct_file() {
        let crds = all_crds();
        let mut names: Vec<String> = crds.iter().map(file_name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 9);
    }

    #[test]
    fn operator_crd_restricts_names_to_label_names() {
        let crd = all_crds().into_iter().find(|crd| crd.spec.names.kind == "Operator").expect("Operator CRD");
        let root = crd.spec.versions[0].schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).expect("schema");
        let name =
            &root.properties.as_ref().expect("properties")["metadata"].properties.as_ref().expect("metadata")["name"];
        assert_eq!(name.max_length, Some(63));
        assert_eq!(name.pattern.as_deref(), Some(OPERATOR_NAME_PATTERN));
    }

    #[test]
    fn an_operator_group_may_leave_out_its_spec_as_olm_v0_lets_it() {
        let crd = all_crds().into_iter().find(|crd| crd.spec.names.kind == "OperatorGroup").expect("CRD");
        let root = crd.spec.versions[0].schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).expect("schema");
        assert!(!root.required.iter().flatten().any(|property| property == "spec"), "{:?}", root.required);
        let spec = &root.properties.as_ref().expect("properties")["spec"];
        assert_eq!(spec.default.as_ref().map(|d| d.0.clone()), Some(serde_json::json!({"upgradeStrategy": "Default"})));
    }

    fn union_branches(kind: &str, path: &[&str]) -> Vec<JSONSchemaProps> {
        let crd = all_crds().into_iter().find(|crd| crd.spec.names.kind == kind).expect("CRD");
        let mut node = crd.spec.versions[0].schema.clone().and_then(|s| s.open_api_v3_schema).expect("schema");
        for segment in path {
            node = match *segment {
                "[]" => match node.items {
                    Some(JSONSchemaPropsOrArray::Schema(items)) => *items,
                    _ => panic!("no items"),
                },
                name => node.properties.expect("properties").remove(name).expect("property"),
            };
        }
        node.one_of.expect("oneOf")
    }

    #[test]
    fn every_union_carries_its_rule() {
        assert_eq!(union_branches("Operator", &["spec", "updates"]).len(), 2);
        assert_eq!(union_branches("Install", &["spec", "content", "[]"]).len(), 2);
    }

    #[test]
    fn check_reports_missing_changed_and_unexpected_files() {
        let dir = std::env::temp_dir().join(format!("crdgen-check-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        write_all(&dir).expect("write");
        assert!(check(&dir).expect("check").is_fresh());

        let first = file_name(&all_crds()[0]);
        fs::write(dir.join(&first), "changed").expect("overwrite");
        fs::write(dir.join("extra.yaml"), "kind: Nothing").expect("extra");
        let second = file_name(&all_crds()[1]);
        fs::remove_file(dir.join(&second)).expect("remove");

        let staleness = check(&dir).expect("check");
        assert_eq!(staleness.outdated, vec![first, second]);
        assert_eq!(staleness.unexpected, vec!["extra.yaml".to_owned()]);

        write_all(&dir).expect("rewrite");
        assert!(check(&dir).expect("check").is_fresh());
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}
