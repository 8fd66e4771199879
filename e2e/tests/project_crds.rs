//! The project's CRDs, generated and committed, are ones kube-apiserver accepts.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::path::Path;

use olmv2_e2e::structural::validate_crd;

#[test]
fn every_generated_crd_is_accepted() {
    for crd in olmv2::crdgen::all_crds() {
        let json = serde_json::to_value(&crd).expect("CRD serializes");
        let errors: Vec<String> = validate_crd(&json).iter().map(ToString::to_string).collect();
        assert!(errors.is_empty(), "{:?} is refused: {errors:#?}", crd.metadata.name);
    }
}

#[test]
fn every_committed_crd_file_is_accepted() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("crds/ exists") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("readable");
        let json: serde_json::Value = serde_yaml_ng::from_str(&text).expect("YAML");
        assert_eq!(json["kind"], "CustomResourceDefinition", "{}", path.display());
        let errors: Vec<String> = validate_crd(&json).iter().map(ToString::to_string).collect();
        assert!(errors.is_empty(), "{} is refused: {errors:#?}", path.display());
        count += 1;
    }
    assert_eq!(count, olmv2::crdgen::all_crds().len());
}
