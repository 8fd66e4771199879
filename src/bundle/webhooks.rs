//! A CSV's webhooks as OLM renders them: per serving Deployment, a Service and a TLS Secret issued for it, mounted
//! where OLM-built operators read their certificate in place of whatever certificate volume the bundle brought;
//! a Validating or MutatingWebhookConfiguration per admission webhook, limited to the watched namespaces; conversion
//! webhooks set on the CRDs they name.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::convert_error::ConvertError;
use super::model::Bundle;
use super::names::{webhook_name, webhook_secret_name, webhook_service_name};
use crate::api::v1alpha1::{WebhookAdmissionType, WebhookDescription};
use crate::tls::{self, CertificateIssuer};

/// Where operators built with OLM's conventions read their serving certificate: volume, mount path, and the files
/// `tls.crt` and `tls.key` become there. OLM v1's order, the order the volumes are added in.
const CERT_MOUNTS: [(&str, &str, &str, &str); 2] = [
    ("webhook-cert", "/tmp/k8s-webhook-server/serving-certs", "tls.crt", "tls.key"),
    ("apiservice-cert", "/apiserver.local.config/certificates", "apiserver.crt", "apiserver.key"),
];

/// What the webhooks are rendered for.
pub struct WebhookTargets<'a> {
    pub namespace: &'a str,
    /// The watched namespaces; empty for all namespaces.
    pub targets: &'a [&'a str],
    pub issuer: &'a dyn CertificateIssuer,
}

/// The Services, Secrets and webhook configurations of the CSV's webhooks; mounts the certificates into
/// `deployments` and sets conversion on `crds`.
pub fn render_webhooks(
    bundle: &Bundle,
    deployments: &mut BTreeMap<String, Value>,
    crds: &mut [Value],
    at: &WebhookTargets<'_>,
) -> Result<Vec<Value>, ConvertError> {
    let mut by_deployment: BTreeMap<&str, Vec<&WebhookDescription>> = BTreeMap::new();
    for webhook in &bundle.csv.spec.webhook_definitions {
        by_deployment.entry(webhook.deployment_name.as_str()).or_default().push(webhook);
    }
    let mut objects = Vec::new();
    for (deployment_name, served) in by_deployment {
        let missing = || ConvertError::WebhookDeploymentMissing {
            webhook: served.first().map(|w| w.generate_name.clone()).unwrap_or_default(),
            deployment: deployment_name.to_owned(),
        };
        let deployment = deployments.get_mut(deployment_name).ok_or_else(missing)?;
        let service = webhook_service_name(deployment_name);
        let secret = webhook_secret_name(&service);
        let certificate = at.issuer.issue(&tls::service_dns_names(&service, at.namespace))?;
        mount_serving_certificate(deployment, &secret);
        let selector = deployment["spec"]["selector"]["matchLabels"].clone();

        let mut string_data = json!({"tls.crt": certificate.cert_pem, "tls.key": certificate.key_pem});
        // Without a CA (an issuer whose CA someone else injects), the Secret and the caBundles name none.
        if let Some(ca_pem) = &certificate.ca_pem {
            string_data["ca.crt"] = json!(ca_pem);
        }
        objects.push(json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": secret, "namespace": at.namespace}, "stringData": string_data}));
        objects.push(
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": service, "namespace": at.namespace},
            "spec": {"selector": selector, "ports": service_ports(&served)}}),
        );

        let ca_bundle = certificate.ca_pem.as_deref().map(tls::ca_bundle);
        for webhook in served {
            let conversion = webhook.webhook_type == WebhookAdmissionType::ConversionWebhook;
            let mut reference =
                json!({"namespace": at.namespace, "name": service, "port": webhook.container_port.unwrap_or(443)});
            // OLM defaults a conversion webhook's path to `/`; an admission webhook's stays unset.
            match (&webhook.webhook_path, conversion) {
                (Some(path), _) => reference["path"] = json!(path),
                (None, true) => reference["path"] = json!("/"),
                (None, false) => {}
            }
            let mut client_config = json!({"service": reference});
            if let Some(ca_bundle) = &ca_bundle {
                client_config["caBundle"] = json!(ca_bundle);
            }
            if conversion {
                set_conversion(webhook, crds, client_config)?;
            } else {
                objects.push(webhook_configuration(webhook, client_config, at.targets));
            }
        }
    }
    Ok(objects)
}

/// One port per container port the webhooks use, to the target port of the last webhook naming it.
fn service_ports(served: &[&WebhookDescription]) -> Vec<Value> {
    let mut ports: BTreeMap<i32, Value> = BTreeMap::new();
    for webhook in served {
        let port = webhook.container_port.unwrap_or(443);
        let target = webhook.target_port.as_ref().and_then(|t| serde_json::to_value(t).ok()).unwrap_or(json!(port));
        ports.insert(port, json!({"name": format!("{port}"), "port": port, "targetPort": target}));
    }
    ports.into_values().collect()
}

fn review_versions(webhook: &WebhookDescription) -> Vec<String> {
    if webhook.admission_review_versions.is_empty() {
        vec!["v1".to_owned()]
    } else {
        webhook.admission_review_versions.clone()
    }
}

/// Points the conversion of every CRD the webhook names at it.
fn set_conversion(webhook: &WebhookDescription, crds: &mut [Value], client_config: Value) -> Result<(), ConvertError> {
    for crd_name in &webhook.conversion_crds {
        let crd = crds
            .iter_mut()
            .find(|crd| crd["metadata"]["name"] == crd_name.as_str() && crd["apiVersion"] == "apiextensions.k8s.io/v1")
            .ok_or_else(|| ConvertError::ConversionCrdMissing {
                webhook: webhook.generate_name.clone(),
                crd: crd_name.clone(),
            })?;
        crd["spec"]["conversion"] = json!({"strategy": "Webhook",
            "webhook": {"clientConfig": client_config, "conversionReviewVersions": review_versions(webhook)}});
    }
    Ok(())
}

/// The configuration of one admission webhook. It and its one webhook share the name, from `generateName`.
fn webhook_configuration(webhook: &WebhookDescription, client_config: Value, targets: &[&str]) -> Value {
    let mutating = webhook.webhook_type == WebhookAdmissionType::MutatingAdmissionWebhook;
    let kind = if mutating { "MutatingWebhookConfiguration" } else { "ValidatingWebhookConfiguration" };
    let name = webhook_name(&webhook.generate_name);
    let mut entry = json!({
        "name": name,
        "clientConfig": client_config,
        "rules": webhook.rules,
        "sideEffects": webhook.side_effects.clone().unwrap_or_else(|| "None".into()),
        "admissionReviewVersions": review_versions(webhook),
    });
    let optional = [
        ("failurePolicy", webhook.failure_policy.as_ref().map(|v| json!(v))),
        ("matchPolicy", webhook.match_policy.as_ref().map(|v| json!(v))),
        ("timeoutSeconds", webhook.timeout_seconds.map(|v| json!(v))),
        ("objectSelector", webhook.object_selector.as_ref().map(|v| json!(v))),
        ("reinvocationPolicy", webhook.reinvocation_policy.as_ref().filter(|_| mutating).map(|v| json!(v))),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            entry[key] = value;
        }
    }
    if !targets.is_empty() {
        entry["namespaceSelector"] =
            json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": targets}]});
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "webhooks": [entry]})
}

/// Mounts the serving certificate Secret into every container, as OLM v1 does: the volumes OLM reserves
/// (`webhook-cert`, `apiservice-cert`) and any volume a container mounts where the certificate goes are removed
/// with their mounts (the bundle's own certificate volume names a Secret nothing creates), then the certificate's
/// volumes and mounts are added.
pub fn mount_serving_certificate(deployment: &mut Value, secret: &str) {
    let Some(pod) = deployment.pointer_mut("/spec/template/spec").filter(|pod| pod.is_object()) else { return };
    let mut replaced: BTreeSet<String> = CERT_MOUNTS.iter().map(|(volume, ..)| (*volume).to_owned()).collect();
    for container in pod["containers"].as_array().into_iter().flatten() {
        for mount in container["volumeMounts"].as_array().into_iter().flatten() {
            let path = mount["mountPath"].as_str().unwrap_or_default();
            if CERT_MOUNTS.iter().any(|(_, reserved, ..)| *reserved == path) {
                replaced.extend(mount["name"].as_str().map(str::to_owned));
            }
        }
    }
    let kept = |list: &Value| -> Vec<Value> {
        list.as_array()
            .into_iter()
            .flatten()
            .filter(|item| !item["name"].as_str().is_some_and(|name| replaced.contains(name)))
            .cloned()
            .collect()
    };
    let mut volumes = kept(&pod["volumes"]);
    volumes.extend(CERT_MOUNTS.iter().map(|(volume, _, cert, key)| {
        json!({"name": volume, "secret": {"secretName": secret,
            "items": [{"key": "tls.crt", "path": cert}, {"key": "tls.key", "path": key}]}})
    }));
    pod["volumes"] = Value::Array(volumes);
    for container in pod.get_mut("containers").and_then(Value::as_array_mut).into_iter().flatten() {
        let mut mounts = kept(&container["volumeMounts"]);
        mounts.extend(CERT_MOUNTS.iter().map(|(volume, path, ..)| json!({"name": volume, "mountPath": path})));
        container["volumeMounts"] = Value::Array(mounts);
    }
}

#[cfg(test)]
#[path = "webhooks_tests.rs"]
mod tests;
