use serde_json::json;

use super::*;
use crate::legacy::csv::certs::fixtures::csv;

fn existing(labels: serde_json::Value, available: Option<&str>) -> APIService {
    let mut service = json!({"metadata": {"name": "v1alpha1.wizards.example.com", "labels": labels},
        "spec": {"groupPriorityMinimum": 1, "versionPriority": 1}});
    if let Some(status) = available {
        service["status"] = json!({"conditions": [{"type": "Available", "status": status}]});
    }
    serde_json::from_value(service).expect("apiservice")
}

fn owned_by(owner: &str, namespace: &str) -> serde_json::Value {
    json!({"olm.owner": owner, "olm.owner.namespace": namespace, "olm.owner.kind": "ClusterServiceVersion"})
}

#[test]
fn the_apiservice_is_olms() {
    let csv = csv();
    let api = &csv.spec.api_service_definitions.as_ref().expect("apis").owned[0];
    assert_eq!(name(api), "v1alpha1.wizards.example.com");
    let rendered = api_service(&csv, api, "PEM");
    assert_eq!(rendered["metadata"]["name"], "v1alpha1.wizards.example.com");
    assert_eq!(
        rendered["metadata"]["labels"],
        json!({"olm.owner": "wizard.v1", "olm.owner.namespace": "ops",
        "olm.owner.kind": "ClusterServiceVersion", "olm.managed": "true"})
    );
    assert_eq!(
        rendered["spec"],
        json!({"group": "wizards.example.com", "version": "v1alpha1",
        "groupPriorityMinimum": 2000, "versionPriority": 15,
        "service": {"namespace": "ops", "name": "api-service", "port": 5443}, "caBundle": "UEVN"})
    );
}

#[test]
fn its_port_defaults_to_443() {
    let mut csv = csv();
    if let Some(apis) = csv.spec.api_service_definitions.as_mut() {
        apis.owned[0].container_port = None;
    }
    let api = &csv.spec.api_service_definitions.as_ref().expect("apis").owned[0];
    assert_eq!(api_service(&csv, api, "")["spec"]["service"]["port"], 443);
}

#[test]
fn adoption_follows_olms_rule() {
    let mut csv = csv();
    assert!(adoptable(&csv, &existing(owned_by("wizard.v1", "ops"), None), None, false));
    assert!(!adoptable(&csv, &existing(json!({}), None), None, false), "no owner labels");
    assert!(!adoptable(&csv, &existing(owned_by("wizard.v1", "elsewhere"), None), None, false));
    let mut other_kind = owned_by("wizard.v1", "ops");
    other_kind["olm.owner.kind"] = json!("OperatorGroup");
    assert!(!adoptable(&csv, &existing(other_kind, None), None, false));
    let stranger = existing(owned_by("other.v1", "ops"), None);
    assert!(!adoptable(&csv, &stranger, Some(CsvPhase::Succeeded), false));
    assert!(adoptable(&csv, &stranger, Some(CsvPhase::Replacing), false));
    assert!(adoptable(&csv, &stranger, Some(CsvPhase::Deleting), false));
    let leaving_elsewhere = existing(owned_by("other.v1", "elsewhere"), None);
    assert!(adoptable(&csv, &leaving_elsewhere, Some(CsvPhase::Deleting), false), "OLM: the owner's own namespace");
    csv.spec.replaces = Some("other.v1".into());
    assert!(adoptable(&csv, &stranger, None, true), "the CSV it replaces");
    assert!(!adoptable(&csv, &stranger, None, false), "only while that CSV exists, as OLM reads it");
    assert!(!adoptable(&csv, &leaving_elsewhere, None, true), "the replaced CSV is of this namespace");
    assert_eq!(owner_of(&stranger), Some(("ops".into(), "other.v1".into())));
}

#[test]
fn available_needs_the_condition_and_discovery() {
    let labels = owned_by("wizard.v1", "ops");
    assert!(available(Some(&existing(labels.clone(), Some("True"))), true));
    assert!(!available(Some(&existing(labels.clone(), Some("True"))), false));
    assert!(!available(Some(&existing(labels.clone(), Some("False"))), true));
    assert!(!available(Some(&existing(labels, None)), true));
    assert!(!available(None, true));
}
