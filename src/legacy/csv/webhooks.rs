//! A CSV's webhooks as OLM v0 installs and checks them (`install/webhook.go`, `olm/apiservices.go`): one
//! Validating or MutatingWebhookConfiguration per admission webhook, named by the server from
//! `<generateName>-`, labelled with its owner, `olm.webhook-description-generate-name` and
//! `olm.webhook-description-hash` (OLM's hash of the description, reproduced), limited to the OperatorGroup's
//! namespaces as OLM selects them; conversion webhooks set on the owned CRDs they name, with OLM's preconditions
//! and messages; and whether they are all in place (`areWebhooksAvailable`).

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{json, Value};

use super::certs::owner_labels;
use crate::api::v1::OperatorGroup;
use crate::api::v1alpha1::{ClusterServiceVersion, InstallModeType, WebhookAdmissionType, WebhookDescription};
use crate::bundle::gohash::{deep_hash, string};
use crate::legacy::namespaces::GROUP_LABEL_PREFIX;
use crate::legacy::roles::{MANAGED_LABEL, OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};

pub const GENERATE_NAME_LABEL: &str = "olm.webhook-description-generate-name";
pub const HASH_LABEL: &str = "olm.webhook-description-hash";

/// The configuration kind of an admission webhook (None for a conversion webhook).
pub fn kind(webhook: &WebhookDescription) -> Option<&'static str> {
    match webhook.webhook_type {
        WebhookAdmissionType::ValidatingAdmissionWebhook => Some("ValidatingWebhookConfiguration"),
        WebhookAdmissionType::MutatingAdmissionWebhook => Some("MutatingWebhookConfiguration"),
        WebhookAdmissionType::ConversionWebhook => None,
    }
}

/// OLM's `NamespaceLabelSelector` of a group: every namespace (None) without targets or selector, the selector,
/// or the label OLM puts on each target namespace.
pub fn namespace_selector(group: &OperatorGroup) -> Option<Value> {
    if group.spec.target_namespaces.is_empty() {
        return group.spec.selector.as_ref().and_then(|selector| serde_json::to_value(selector).ok());
    }
    let uid = group.metadata.uid.clone().unwrap_or_default();
    Some(json!({"matchLabels": {format!("{GROUP_LABEL_PREFIX}{uid}"): ""}}))
}

/// The labels that find the configurations of `webhook` (OLM looks them up by these, not by name).
pub fn lookup_selector(csv: &ClusterServiceVersion, webhook: &WebhookDescription) -> String {
    format!("{},{GENERATE_NAME_LABEL}={}", owner_selector(csv), webhook.generate_name)
}

/// The owner labels of every configuration made for `csv`, as a selector.
pub fn owner_selector(csv: &ClusterServiceVersion) -> String {
    let name = csv.metadata.name.clone().unwrap_or_default();
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    format!("{OWNER_LABEL}={name},{OWNER_NAMESPACE_LABEL}={namespace},{OWNER_KIND_LABEL}=ClusterServiceVersion")
}

/// Whether a configuration of `csv` labelled with `generate_name` is for a webhook it no longer declares (OLM's
/// `cleanUpRemovedWebhooks`; one without the label is left alone).
pub fn is_stale(csv: &ClusterServiceVersion, generate_name: Option<&str>) -> bool {
    generate_name.is_some_and(|name| !csv.spec.webhook_definitions.iter().any(|w| w.generate_name == name))
}

/// The labels of a webhook's configuration.
pub fn labels(csv: &ClusterServiceVersion, webhook: &WebhookDescription) -> BTreeMap<String, String> {
    let mut labels = owner_labels(csv);
    labels.insert(GENERATE_NAME_LABEL.into(), webhook.generate_name.clone());
    labels.insert(HASH_LABEL.into(), description_hash(webhook));
    labels.insert(MANAGED_LABEL.into(), "true".into());
    labels
}

fn client_config(csv: &ClusterServiceVersion, webhook: &WebhookDescription, path: Option<&str>, ca_pem: &str) -> Value {
    let mut service = json!({
        "name": format!("{}-service", webhook.deployment_name.replace('.', "-")),
        "namespace": csv.metadata.namespace.clone().unwrap_or_default(),
        "port": webhook.container_port.filter(|port| *port > 0).unwrap_or(443),
    });
    if let Some(path) = path {
        service["path"] = json!(path);
    }
    json!({"service": service, "caBundle": crate::tls::ca_bundle(ca_pem)})
}

/// The one webhook of an admission webhook's configuration (OLM's `GetValidatingWebhook`/`GetMutatingWebhook`).
pub fn entry(
    csv: &ClusterServiceVersion,
    webhook: &WebhookDescription,
    selector: Option<&Value>,
    ca_pem: &str,
) -> Value {
    let mut entry = json!({
        "name": webhook.generate_name,
        "rules": webhook.rules,
        "clientConfig": client_config(csv, webhook, webhook.webhook_path.as_deref(), ca_pem),
        "admissionReviewVersions": webhook.admission_review_versions,
    });
    let mutating = webhook.webhook_type == WebhookAdmissionType::MutatingAdmissionWebhook;
    let optional = [
        ("failurePolicy", webhook.failure_policy.as_ref().map(|v| json!(v))),
        ("matchPolicy", webhook.match_policy.as_ref().map(|v| json!(v))),
        ("namespaceSelector", selector.cloned()),
        ("objectSelector", webhook.object_selector.as_ref().map(|v| json!(v))),
        ("sideEffects", webhook.side_effects.as_ref().map(|v| json!(v))),
        ("timeoutSeconds", webhook.timeout_seconds.map(|v| json!(v))),
        ("reinvocationPolicy", webhook.reinvocation_policy.as_ref().filter(|_| mutating).map(|v| json!(v))),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            entry[key] = value;
        }
    }
    entry
}

/// A new configuration for an admission webhook: `generateName` `<generateName>-`, OLM's labels, no owner.
pub fn configuration(
    csv: &ClusterServiceVersion,
    webhook: &WebhookDescription,
    selector: Option<&Value>,
    ca_pem: &str,
) -> Option<Value> {
    Some(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind(webhook)?,
        "metadata": {"generateName": format!("{}-", webhook.generate_name), "labels": labels(csv, webhook)},
        "webhooks": [entry(csv, webhook, selector, ca_pem)]}))
}

/// OLM's preconditions of a conversion webhook that do not depend on the CRDs, with its messages (typo kept).
pub fn conversion_precondition(csv: &ClusterServiceVersion, webhook: &WebhookDescription) -> Result<(), String> {
    let singleton =
        csv.spec.install_modes.iter().all(|mode| (mode.mode == InstallModeType::AllNamespaces) == mode.supported);
    if !singleton {
        return Err(
            "unable to manage conversion webhook: CSVs with conversion webhooks must support only AllNamespaces".into(),
        );
    }
    if webhook.conversion_crds.is_empty() {
        return Err(
            "unable to manager conversion webhook: conversion webhook must have at least one CRD specified".into()
        );
    }
    let owned: Vec<&str> =
        csv.spec.custom_resource_definitions.iter().flat_map(|crds| &crds.owned).map(|crd| crd.name.as_str()).collect();
    for crd in &webhook.conversion_crds {
        if !owned.contains(&crd.as_str()) {
            return Err(format!("csv {} does not own CRD {crd}", csv.metadata.name.clone().unwrap_or_default()));
        }
    }
    Ok(())
}

/// The `spec.conversion` a conversion webhook sets on one of its CRDs, or OLM's error when the CRD cannot take it.
pub fn conversion(
    csv: &ClusterServiceVersion,
    webhook: &WebhookDescription,
    crd: &CustomResourceDefinition,
    ca_pem: &str,
) -> Result<Value, String> {
    if crd.spec.preserve_unknown_fields == Some(true) {
        return Err(
            "crd.Spec.PreserveUnknownFields must be false to let API Server call webhook to do the conversion".into()
        );
    }
    let path = webhook.webhook_path.as_deref().unwrap_or("/");
    Ok(json!({"strategy": "Webhook", "webhook": {"clientConfig": client_config(csv, webhook, Some(path), ca_pem),
        "conversionReviewVersions": webhook.admission_review_versions}}))
}

/// Whether a CRD's conversion is a webhook with a CA (what OLM waits for).
pub fn conversion_ready(crd: &CustomResourceDefinition) -> bool {
    let conversion = crd.spec.conversion.as_ref();
    let webhook = conversion.filter(|c| c.strategy == "Webhook").and_then(|c| c.webhook.as_ref());
    webhook.and_then(|w| w.client_config.as_ref()).is_some_and(|config| config.ca_bundle.is_some())
}

/// What one look at the cluster found for the webhooks: per admission webhook's generateName, how many
/// configurations carry its current hash; per conversion CRD, the CRD (None: not found).
#[derive(Default)]
pub struct Found {
    pub configurations: BTreeMap<String, usize>,
    pub crds: BTreeMap<String, Option<CustomResourceDefinition>>,
}

/// OLM's `areWebhooksAvailable`: Ok(false) while a configuration is missing, Err for a conversion CRD that is
/// missing (OLM returns the read's error: here "CRD <name> not found") or not converting yet.
pub fn available(csv: &ClusterServiceVersion, found: &Found) -> Result<bool, String> {
    for webhook in &csv.spec.webhook_definitions {
        let count = match webhook.webhook_type {
            WebhookAdmissionType::ConversionWebhook => {
                for name in &webhook.conversion_crds {
                    match found.crds.get(name).and_then(Option::as_ref) {
                        None => return Err(format!("CRD {name} not found")),
                        Some(crd) if !conversion_ready(crd) => return Err("conversionWebhook not ready".into()),
                        Some(_) => {}
                    }
                }
                webhook.conversion_crds.len()
            }
            _ => found.configurations.get(&webhook.generate_name).copied().unwrap_or(0),
        };
        if count == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// OLM's `DeepHashObject` of a `WebhookDescription`: SHA-224 of [`description_json`], base 62.
pub fn description_hash(webhook: &WebhookDescription) -> String {
    deep_hash(&description_json(webhook))
}

/// A `WebhookDescription` as Go's `encoding/json` writes it: fields in Go's order, `omitempty` honoured,
/// `sideEffects` and `admissionReviewVersions` always written (`null` when absent or empty: Rust cannot tell an
/// empty list from Go's nil once read).
pub fn description_json(webhook: &WebhookDescription) -> String {
    let mut fields = vec![
        format!("\"generateName\":{}", string(&webhook.generate_name)),
        format!("\"type\":{}", string(type_name(webhook.webhook_type))),
    ];
    let mut push = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            fields.push(format!("\"{name}\":{value}"));
        }
    };
    push("deploymentName", Some(&webhook.deployment_name).filter(|n| !n.is_empty()).map(|n| string(n)));
    push("containerPort", webhook.container_port.filter(|p| *p != 0).map(|p| p.to_string()));
    push("targetPort", webhook.target_port.as_ref().map(int_or_string));
    push(
        "rules",
        Some(&webhook.rules)
            .filter(|r| !r.is_empty())
            .map(|rules| format!("[{}]", rules.iter().map(rule).collect::<Vec<_>>().join(","))),
    );
    push("failurePolicy", webhook.failure_policy.as_deref().map(string));
    push("matchPolicy", webhook.match_policy.as_deref().map(string));
    push("objectSelector", webhook.object_selector.as_ref().map(label_selector));
    push("sideEffects", Some(webhook.side_effects.as_deref().map_or("null".into(), string)));
    push("timeoutSeconds", webhook.timeout_seconds.map(|t| t.to_string()));
    push("admissionReviewVersions", Some(list(&webhook.admission_review_versions).unwrap_or_else(|| "null".into())));
    push("reinvocationPolicy", webhook.reinvocation_policy.as_deref().map(string));
    push("webhookPath", webhook.webhook_path.as_deref().map(string));
    push("conversionCRDs", list(&webhook.conversion_crds));
    format!("{{{}}}", fields.join(","))
}

fn type_name(kind: WebhookAdmissionType) -> &'static str {
    match kind {
        WebhookAdmissionType::ValidatingAdmissionWebhook => "ValidatingAdmissionWebhook",
        WebhookAdmissionType::MutatingAdmissionWebhook => "MutatingAdmissionWebhook",
        WebhookAdmissionType::ConversionWebhook => "ConversionWebhook",
    }
}

/// A non-empty `[]string` (None: empty, left out by `omitempty`).
fn list(items: &[String]) -> Option<String> {
    (!items.is_empty()).then(|| format!("[{}]", items.iter().map(|item| string(item)).collect::<Vec<_>>().join(",")))
}

fn optional_list(items: Option<&Vec<String>>) -> Option<String> {
    items.and_then(|items| list(items))
}

fn int_or_string(value: &IntOrString) -> String {
    match value {
        IntOrString::Int(number) => number.to_string(),
        IntOrString::String(text) => string(text),
    }
}

fn rule(rule: &k8s_openapi::api::admissionregistration::v1::RuleWithOperations) -> String {
    let parts = [
        ("operations", optional_list(rule.operations.as_ref())),
        ("apiGroups", optional_list(rule.api_groups.as_ref())),
        ("apiVersions", optional_list(rule.api_versions.as_ref())),
        ("resources", optional_list(rule.resources.as_ref())),
        ("scope", rule.scope.as_deref().map(string)),
    ];
    object(&parts)
}

fn label_selector(selector: &LabelSelector) -> String {
    let labels = selector.match_labels.as_ref().filter(|labels| !labels.is_empty()).map(|labels| {
        let pairs: Vec<String> =
            labels.iter().map(|(key, value)| format!("{}:{}", string(key), string(value))).collect();
        format!("{{{}}}", pairs.join(","))
    });
    let expressions = selector.match_expressions.as_ref().filter(|e| !e.is_empty()).map(|expressions| {
        let items: Vec<String> = expressions
            .iter()
            .map(|e| {
                object(&[
                    ("key", Some(string(&e.key))),
                    ("operator", Some(string(&e.operator))),
                    ("values", optional_list(e.values.as_ref())),
                ])
            })
            .collect();
        format!("[{}]", items.join(","))
    });
    object(&[("matchLabels", labels), ("matchExpressions", expressions)])
}

fn object(parts: &[(&str, Option<String>)]) -> String {
    let fields: Vec<String> =
        parts.iter().filter_map(|(name, value)| value.as_ref().map(|value| format!("\"{name}\":{value}"))).collect();
    format!("{{{}}}", fields.join(","))
}

/// What OLM refuses of a CSV's webhook descriptions in Pending (`InvalidWebhookDescription`): a repeated
/// `generateName`, or rules [`valid_rules`] refuses.
pub fn invalid(csv: &ClusterServiceVersion) -> Option<String> {
    let mut seen = std::collections::BTreeSet::new();
    for webhook in &csv.spec.webhook_definitions {
        if !seen.insert(webhook.generate_name.as_str()) {
            return Some("CSV contains repeated WebhookDescription name".into());
        }
        if let Err(message) = valid_rules(webhook) {
            return Some(message);
        }
    }
    None
}

/// OLM's `ValidWebhookRules`, checked in Pending: Err with its message.
pub fn valid_rules(webhook: &WebhookDescription) -> Result<(), String> {
    for rule in &webhook.rules {
        let groups = rule.api_groups.clone().unwrap_or_default();
        if groups.iter().any(|g| g == "*") {
            return Err("webhook rules cannot include all groups".into());
        }
        if groups.iter().any(|g| g == "operators.coreos.com") {
            return Err("webhook rules cannot include the OLM group".into());
        }
        let resources = rule.resources.clone().unwrap_or_default();
        let forbidden = ["*", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"];
        if groups.iter().any(|g| g == "admissionregistration.k8s.io")
            && resources.iter().any(|r| forbidden.contains(&r.as_str()))
        {
            return Err(
                "webhook rules cannot include MutatingWebhookConfiguration or ValidatingWebhookConfiguration resources"
                    .into(),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "webhooks_tests.rs"]
mod tests;
