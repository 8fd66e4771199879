use serde_json::json;

use super::*;
use crate::legacy::csv::certs::fixtures::csv;

fn group(spec: serde_json::Value) -> OperatorGroup {
    serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "og", "namespace": "ops", "uid": "og-uid"}, "spec": spec}))
    .expect("group")
}

fn crd(conversion: Option<serde_json::Value>, preserve: Option<bool>) -> CustomResourceDefinition {
    let mut crd = json!({"metadata": {"name": "spells.example.com"}, "spec": {"group": "example.com",
        "names": {"plural": "spells", "kind": "Spell"}, "scope": "Namespaced", "versions": []}});
    if let Some(conversion) = conversion {
        crd["spec"]["conversion"] = conversion;
    }
    if let Some(preserve) = preserve {
        crd["spec"]["preserveUnknownFields"] = json!(preserve);
    }
    serde_json::from_value(crd).expect("crd")
}

#[test]
fn the_namespace_selector_is_the_groups_as_olm_computes_it() {
    assert_eq!(namespace_selector(&group(json!({}))), None);
    let selector = json!({"matchLabels": {"team": "a"}});
    assert_eq!(namespace_selector(&group(json!({"selector": selector}))), Some(selector));
    assert_eq!(
        namespace_selector(&group(json!({"targetNamespaces": ["a"], "selector": {"matchLabels": {"x": "y"}}}))),
        Some(json!({"matchLabels": {"olm.operatorgroup.uid/og-uid": ""}}))
    );
}

#[test]
fn an_admission_configuration_is_olms() {
    let csv = csv();
    let mutating = &csv.spec.webhook_definitions[1];
    let selector = json!({"matchLabels": {"olm.operatorgroup.uid/og-uid": ""}});
    let rendered = configuration(&csv, mutating, Some(&selector), "PEM").expect("admission");
    let config = &rendered;
    assert_eq!(config["kind"], "MutatingWebhookConfiguration");
    assert_eq!(config["metadata"]["generateName"], "mspell.example.com-");
    assert!(config["metadata"].get("name").is_none() && config["metadata"].get("ownerReferences").is_none());
    let labels = &config["metadata"]["labels"];
    assert_eq!(labels["olm.owner"], "wizard.v1");
    assert_eq!(labels["olm.owner.namespace"], "ops");
    assert_eq!(labels["olm.owner.kind"], "ClusterServiceVersion");
    assert_eq!(labels["olm.managed"], "true");
    assert_eq!(labels["olm.webhook-description-generate-name"], "mspell.example.com");
    assert_eq!(labels["olm.webhook-description-hash"], description_hash(mutating));
    assert_eq!(
        config["webhooks"],
        json!([{"name": "mspell.example.com",
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["spells"]}],
            "clientConfig": {"service": {"name": "hooks-service", "namespace": "ops", "port": 443, "path": "/mutate"}, "caBundle": "UEVN"},
            "admissionReviewVersions": ["v1"], "namespaceSelector": selector, "sideEffects": "None", "reinvocationPolicy": "Never"}])
    );
    let validating = configuration_of(&csv, 0);
    assert_eq!(validating["kind"], "ValidatingWebhookConfiguration");
    assert_eq!(validating["webhooks"][0]["failurePolicy"], "Fail");
    assert!(validating["webhooks"][0].get("namespaceSelector").is_none(), "a global group selects every namespace");
    assert!(configuration(&csv, &csv.spec.webhook_definitions[2], None, "").is_none(), "conversion has none");
}

fn configuration_of(csv: &ClusterServiceVersion, index: usize) -> serde_json::Value {
    configuration(csv, &csv.spec.webhook_definitions[index], None, "PEM").expect("admission")
}

#[test]
fn a_deployment_name_with_dots_is_served_by_a_dashed_service() {
    let mut csv = csv();
    csv.spec.webhook_definitions[0].deployment_name = "hooks.v1".into();
    assert_eq!(configuration_of(&csv, 0)["webhooks"][0]["clientConfig"]["service"]["name"], "hooks-v1-service");
}

#[test]
fn selectors_find_a_webhooks_configurations_and_stale_ones() {
    let csv = csv();
    assert_eq!(
        lookup_selector(&csv, &csv.spec.webhook_definitions[0]),
        "olm.owner=wizard.v1,olm.owner.namespace=ops,olm.owner.kind=ClusterServiceVersion,\
         olm.webhook-description-generate-name=vspell.example.com"
    );
    assert!(!is_stale(&csv, Some("vspell.example.com")));
    assert!(is_stale(&csv, Some("gone.example.com")));
    assert!(!is_stale(&csv, None));
}

#[test]
fn the_description_is_hashed_from_gos_json() {
    let csv = csv();
    assert_eq!(
        description_json(&csv.spec.webhook_definitions[0]),
        r#"{"generateName":"vspell.example.com","type":"ValidatingAdmissionWebhook","deploymentName":"hooks","containerPort":443,"targetPort":9443,"rules":[{"operations":["CREATE"],"apiGroups":["example.com"],"apiVersions":["v1"],"resources":["spells"]}],"failurePolicy":"Fail","sideEffects":"None","admissionReviewVersions":["v1"],"webhookPath":"/validate"}"#
    );
    let mut bare: WebhookDescription = serde_json::from_value(json!({"generateName": "a<b", "type": "ConversionWebhook",
        "targetPort": "https", "objectSelector": {"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [{"key": "k", "operator": "Exists"}]},
        "conversionCRDs": ["x"]}))
    .expect("description");
    assert_eq!(
        description_json(&bare),
        r#"{"generateName":"a\u003cb","type":"ConversionWebhook","targetPort":"https","objectSelector":{"matchLabels":{"a":"1","b":"2"},"matchExpressions":[{"key":"k","operator":"Exists"}]},"sideEffects":null,"admissionReviewVersions":null,"conversionCRDs":["x"]}"#
    );
    let before = description_hash(&bare);
    bare.timeout_seconds = Some(5);
    assert_ne!(description_hash(&bare), before, "any change of the description changes the hash");
    assert!(description_hash(&bare).chars().all(|c| c.is_ascii_alphanumeric()));
}

#[test]
fn conversion_needs_an_allnamespaces_only_csv_named_owned_crds_and_no_preserved_fields() {
    let mut csv = csv();
    let conversion_webhook = csv.spec.webhook_definitions[2].clone();
    assert_eq!(conversion_precondition(&csv, &conversion_webhook), Ok(()));
    let mut none = conversion_webhook.clone();
    none.conversion_crds.clear();
    assert_eq!(
        conversion_precondition(&csv, &none),
        Err("unable to manager conversion webhook: conversion webhook must have at least one CRD specified".into())
    );
    let mut foreign = conversion_webhook.clone();
    foreign.conversion_crds = vec!["other.example.com".into()];
    assert_eq!(conversion_precondition(&csv, &foreign), Err("csv wizard.v1 does not own CRD other.example.com".into()));
    csv.spec.install_modes[1].supported = true;
    assert_eq!(
        conversion_precondition(&csv, &conversion_webhook),
        Err("unable to manage conversion webhook: CSVs with conversion webhooks must support only AllNamespaces".into())
    );
    assert_eq!(
        conversion(&csv, &conversion_webhook, &crd(None, Some(true)), "PEM"),
        Err("crd.Spec.PreserveUnknownFields must be false to let API Server call webhook to do the conversion".into())
    );
    assert_eq!(
        conversion(&csv, &conversion_webhook, &crd(None, Some(false)), "PEM"),
        Ok(json!({"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"name": "hooks-service",
            "namespace": "ops", "port": 443, "path": "/"}, "caBundle": "UEVN"}, "conversionReviewVersions": ["v1", "v1beta1"]}}))
    );
}

#[test]
fn availability_is_olms() {
    let csv = csv();
    let ready = crd(
        Some(
            json!({"strategy": "Webhook", "webhook": {"clientConfig": {"caBundle": "UEVN"}, "conversionReviewVersions": ["v1"]}}),
        ),
        None,
    );
    let mut found = Found::default();
    found.configurations.insert("vspell.example.com".into(), 1);
    found.configurations.insert("mspell.example.com".into(), 1);
    found.crds.insert("spells.example.com".into(), Some(ready.clone()));
    assert_eq!(available(&csv, &found), Ok(true));
    found.configurations.insert("mspell.example.com".into(), 0);
    assert_eq!(available(&csv, &found), Ok(false));
    found.configurations.insert("mspell.example.com".into(), 1);
    found.crds.insert("spells.example.com".into(), Some(crd(None, None)));
    assert_eq!(available(&csv, &found), Err("conversionWebhook not ready".into()));
    found.crds.insert("spells.example.com".into(), None);
    assert_eq!(available(&csv, &found), Err("CRD spells.example.com not found".into()));
    assert!(conversion_ready(&ready));
}

#[test]
fn olm_refuses_repeated_names_and_rules_reaching_everything_or_itself() {
    let mut csv = csv();
    assert_eq!(invalid(&csv), None);
    let rule = |groups: &[&str], resources: &[&str]| {
        serde_json::from_value(json!({"apiGroups": groups, "resources": resources, "operations": ["*"]})).expect("rule")
    };
    for (groups, resources, message) in [
        (&["*"][..], &["pods"][..], "webhook rules cannot include all groups"),
        (&["operators.coreos.com"], &["subscriptions"], "webhook rules cannot include the OLM group"),
        (
            &["admissionregistration.k8s.io"],
            &["*"],
            "webhook rules cannot include MutatingWebhookConfiguration or ValidatingWebhookConfiguration resources",
        ),
    ] {
        csv.spec.webhook_definitions[0].rules = vec![rule(groups, resources)];
        assert_eq!(invalid(&csv).as_deref(), Some(message));
    }
    csv.spec.webhook_definitions[0].rules.clear();
    csv.spec.webhook_definitions[1].generate_name = "vspell.example.com".into();
    assert_eq!(invalid(&csv).as_deref(), Some("CSV contains repeated WebhookDescription name"));
}
