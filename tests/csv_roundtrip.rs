//! Every ClusterServiceVersion under ../shared/testdata deserializes into the CSV type and serializes back without
//! losing any field OLM reads.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::path::{Path, PathBuf};

use olmv2::api::v1alpha1::ClusterServiceVersion;
use serde_json::Value;

fn testdata() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata");
    assert!(dir.is_dir(), "the shared test data is expected at {}", dir.display());
    dir
}

fn yaml_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable directory") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            yaml_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "yaml" || ext == "yml") {
            found.push(path);
        }
    }
}

/// Every ClusterServiceVersion document found in bundle manifests, with the file it came from.
fn csv_documents() -> Vec<(PathBuf, Value)> {
    let mut files = Vec::new();
    yaml_files(&testdata(), &mut files);
    files.sort();
    let mut csvs = Vec::new();
    for path in files.into_iter().filter(|path| path.components().any(|c| c.as_os_str() == "manifests")) {
        let text = std::fs::read_to_string(&path).expect("readable");
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let Ok(value) = Value::deserialize_from(document) else { continue };
            if value.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion") {
                csvs.push((path.clone(), value));
            }
        }
    }
    csvs
}

trait FromYamlDocument: Sized {
    fn deserialize_from(document: serde_yaml_ng::Deserializer<'_>) -> Result<Self, serde_yaml_ng::Error>;
}

impl FromYamlDocument for Value {
    fn deserialize_from(document: serde_yaml_ng::Deserializer<'_>) -> Result<Self, serde_yaml_ng::Error> {
        serde::Deserialize::deserialize(document)
    }
}

/// Paths (JSON pointers) whose value in `original` is absent or different in `round_tripped`. A null, an empty
/// list or an empty map in the original is the same as absence to OLM (its fields are `omitempty`), so dropping
/// one is not a loss.
fn losses(original: &Value, round_tripped: &Value, path: String, out: &mut Vec<String>) {
    match (original, round_tripped) {
        (Value::Null, _) => {}
        (Value::Object(left), Value::Object(right)) => {
            for (key, value) in left {
                let child = format!("{path}/{key}");
                match right.get(key) {
                    Some(other) => losses(value, other, child, out),
                    None if is_empty(value) => {}
                    None => out.push(child),
                }
            }
        }
        (Value::Array(left), Value::Array(right)) if left.len() == right.len() => {
            for (index, (value, other)) in left.iter().zip(right).enumerate() {
                losses(value, other, format!("{path}/{index}"), out);
            }
        }
        (Value::Number(left), Value::Number(right)) if left.as_f64() == right.as_f64() => {}
        (left, right) if left == right => {}
        _ => out.push(path),
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.is_empty(),
        _ => false,
    }
}

/// Fields in the test data that OLM does not read as written, each with the reason; `*` matches one segment.
const NOT_READ_BY_OLM: &[(&str, &str)] = &[
    ("/ddapiVersion", "a typo of apiVersion in one CSV; not a field of any object"),
    ("/apiVersion", "bundle CSVs saying operators.coreos.com/v1 are read as v1alpha1, the only CSV version"),
    ("/spec/support", "not a field of OLM's ClusterServiceVersionSpec; its API server prunes it"),
    (
        "/spec/customresourcedefinitions/owned/*/group",
        "not a field of OLM's CRDDescription; the group is the CRD name's suffix",
    ),
    (
        "/spec/customresourcedefinitions/owned/*/resources/*/Kind",
        "read as kind: OLM's decoder ignores the case of field names",
    ),
    // multicluster-operators-subscription indents a secret volume's fields one level too far out (`secret: null`):
    // they are not fields of a Volume, so the API server prunes them.
    ("/spec/install/spec/deployments/*/spec/template/spec/volumes/*/defaultMode", "misindented secret field"),
    ("/spec/install/spec/deployments/*/spec/template/spec/volumes/*/secretName", "misindented secret field"),
    ("/spec/install/spec/deployments/*/spec/template/spec/volumes/*/items", "misindented secret field"),
];

fn matches_pattern(pointer: &str, pattern: &str) -> bool {
    let segments: Vec<&str> = pointer.split('/').collect();
    let expected: Vec<&str> = pattern.split('/').collect();
    segments.len() == expected.len()
        && segments.iter().zip(&expected).all(|(segment, want)| *want == "*" || segment == want)
}

#[test]
fn every_testdata_csv_round_trips() {
    let documents = csv_documents();
    assert!(documents.len() >= 101, "expected every bundle's CSV, found {}", documents.len());
    let mut failures = Vec::new();
    for (path, original) in &documents {
        let csv: ClusterServiceVersion = match serde_json::from_value(original.clone()) {
            Ok(csv) => csv,
            Err(error) => {
                failures.push(format!("{}: does not deserialize: {error}", path.display()));
                continue;
            }
        };
        let round_tripped = serde_json::to_value(&csv).expect("serializes");
        let mut lost = Vec::new();
        losses(original, &round_tripped, String::new(), &mut lost);
        lost.retain(|pointer| !NOT_READ_BY_OLM.iter().any(|(pattern, _)| matches_pattern(pointer, pattern)));
        if !lost.is_empty() {
            failures.push(format!("{}: lost {lost:?}", path.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} CSVs do not round-trip:\n{}",
        failures.len(),
        documents.len(),
        failures.join("\n")
    );
}

#[test]
fn allowed_losses_match_whole_segments_only() {
    assert!(matches_pattern(
        "/spec/customresourcedefinitions/owned/3/group",
        "/spec/customresourcedefinitions/owned/*/group"
    ));
    assert!(!matches_pattern(
        "/spec/customresourcedefinitions/required/3/group",
        "/spec/customresourcedefinitions/owned/*/group"
    ));
    assert!(!matches_pattern("/spec/support/x", "/spec/support"));
}

#[test]
fn loss_detection_sees_a_dropped_field() {
    let original =
        serde_json::json!({"spec": {"install": {"strategy": "deployment"}, "replaces": "a.v1", "skips": ["a.v0"]}});
    let round_tripped = serde_json::json!({"spec": {"install": {"strategy": "deployment"}, "skips": ["a.v1"]}});
    let mut lost = Vec::new();
    losses(&original, &round_tripped, String::new(), &mut lost);
    assert_eq!(lost, vec!["/spec/replaces".to_owned(), "/spec/skips/0".to_owned()]);
}
