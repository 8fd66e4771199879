//! The project's CRDs, generated and committed, are ones kube-apiserver accepts.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::path::Path;

use crate::support::emulator as support;
use kube_emulator::crds::structural::validate_crd;

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

/// The project's CRDs, created on the control plane: established, and refusing what their schemas refuse.
#[tokio::test]
async fn the_project_crds_are_served_and_enforce_their_schemas() {
    use serde_json::json;
    let (_plane, client) = support::start().await;
    for crd in olmv2::crdgen::all_crds() {
        let body = serde_json::to_value(&crd).expect("JSON");
        let (code, created) =
            support::post(&client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &body).await;
        assert_eq!(code, 201, "{created}");
    }
    let operators = "/apis/operators.coreos.com/v2alpha1/operators";
    support::eventually("operators served", || async { support::get(&client, operators).await.0 == 200 }).await;
    let operator = |name: &str, updates: serde_json::Value| json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "metadata": {"name": name}, "spec": {"updates": updates}});
    let catalog = json!({"type": "CatalogSource", "catalogSource": {"package": "plumbus", "channel": "stable", "ref": {"name": "community", "namespace": "olm"}}});
    let (code, created) = support::post(&client, operators, &operator("plumbus", catalog.clone())).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["updates"]["catalogSource"]["approval"], "Automatic", "the schema default is applied");
    let (code, status) = support::post(&client, operators, &operator("Plumbus", catalog.clone())).await;
    assert_eq!(code, 422);
    assert_eq!(status["details"]["causes"][0]["field"], "metadata.name", "{status}");
    let mut both = catalog;
    both["manifestImage"] = json!("quay.io/example/plumbus@sha256:0123");
    let (code, status) = support::post(&client, operators, &operator("two-sources", both)).await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .expect("message")
            .contains("spec.updates in body must validate one and only one schema (oneOf)"),
        "{status}"
    );
}
