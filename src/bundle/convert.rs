//! Conversion of a registry+v1 bundle into plain manifests for an install namespace and a set of target
//! namespaces, the way OLM renders them: ServiceAccounts, Deployments annotated with their target namespaces, RBAC
//! from the CSV's permissions, the bundle's own objects, and webhooks with generated serving certificates.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::model::Bundle;
use crate::api::v1::{OPERATOR_NAMESPACE_ANNOTATION, TARGET_NAMESPACES_ANNOTATION};
use crate::api::v1alpha1::{InstallModeType, StrategyDeploymentPermissions, WebhookAdmissionType, WebhookDescription};
use crate::category::Categorized;
use crate::tls::{self, CertificateError, CertificateIssuer};

/// Where to install, and which namespaces the operator watches: empty or `[""]` for all namespaces.
pub struct RenderOptions<'a> {
    pub install_namespace: &'a str,
    pub target_namespaces: &'a [String],
    pub certificates: &'a dyn CertificateIssuer,
}

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// OLM's reason for an install mode the CSV does not support is `UnsupportedOperatorGroup`.
    #[error("UnsupportedOperatorGroup: {message}")]
    UnsupportedInstallMode { mode: InstallModeType, message: String },
    #[error("the target namespaces {targets:?} mix \"\" (all namespaces) with named namespaces")]
    InvalidTargetNamespaces { targets: Vec<String> },
    #[error("APIService {name} is owned by the CSV; serving aggregated APIs from bundles is not supported")]
    OwnedApiServiceUnsupported { name: String },
    #[error("webhook {webhook} is served by deployment {deployment}, which the CSV does not define")]
    WebhookDeploymentMissing { webhook: String, deployment: String },
    #[error(
        "conversion webhook {webhook} names CRD {crd}, which the bundle does not carry as apiextensions.k8s.io/v1"
    )]
    ConversionCrdMissing { webhook: String, crd: String },
    #[error("deployment {deployment} cannot be rendered: {reason}")]
    InvalidDeployment { deployment: String, reason: String },
    #[error(transparent)]
    Certificate(#[from] CertificateError),
}

impl Categorized for ConvertError {
    fn category(&self) -> &'static str {
        match self {
            Self::UnsupportedInstallMode { .. } => "UnsupportedOperatorGroup",
            Self::InvalidTargetNamespaces { .. } => "InvalidTargetNamespaces",
            Self::OwnedApiServiceUnsupported { .. } => "ApiServiceUnsupported",
            Self::WebhookDeploymentMissing { .. } | Self::ConversionCrdMissing { .. } => "InvalidWebhookDescription",
            Self::InvalidDeployment { .. } => "InvalidInstallStrategy",
            Self::Certificate(_) => "CertificateIssueFailed",
        }
    }
}

/// The install mode a target set means, as OLM infers it, and the `olm.targetNamespaces` value: `""` for all
/// namespaces, else the sorted, comma-joined namespaces.
pub fn install_mode(
    install_namespace: &str,
    targets: &[String],
) -> Result<(Vec<InstallModeType>, String), ConvertError> {
    let named: BTreeSet<&str> = targets.iter().map(String::as_str).filter(|t| !t.is_empty()).collect();
    if named.is_empty() {
        return Ok((vec![InstallModeType::AllNamespaces], String::new()));
    }
    if targets.iter().any(String::is_empty) {
        return Err(ConvertError::InvalidTargetNamespaces { targets: targets.to_vec() });
    }
    let annotation = named.iter().copied().collect::<Vec<_>>().join(",");
    let modes = match named.len() {
        1 if named.contains(install_namespace) => vec![InstallModeType::OwnNamespace],
        1 => vec![InstallModeType::SingleNamespace],
        _ if named.contains(install_namespace) => vec![InstallModeType::MultiNamespace, InstallModeType::OwnNamespace],
        _ => vec![InstallModeType::MultiNamespace],
    };
    Ok((modes, annotation))
}

fn unsupported_message(mode: InstallModeType) -> String {
    let watch = match mode {
        InstallModeType::OwnNamespace => "watch own namespace",
        InstallModeType::SingleNamespace => "watch one namespace",
        InstallModeType::MultiNamespace => "watch multiple namespaces",
        InstallModeType::AllNamespaces => "watch all namespaces",
    };
    format!("{mode:?} InstallModeType not supported, cannot configure to {watch}")
}

/// The plain manifests of `bundle` installed as `options` says.
pub fn render(bundle: &Bundle, options: &RenderOptions<'_>) -> Result<Vec<Value>, ConvertError> {
    let namespace = options.install_namespace;
    let (modes, targets_annotation) = install_mode(namespace, options.target_namespaces)?;
    for mode in &modes {
        if !bundle.csv.spec.supports(*mode) {
            return Err(ConvertError::UnsupportedInstallMode { mode: *mode, message: unsupported_message(*mode) });
        }
    }
    if let Some(owned) = bundle.csv.spec.api_service_definitions.as_ref().and_then(|d| d.owned.first()) {
        return Err(ConvertError::OwnedApiServiceUnsupported { name: format!("{}.{}", owned.version, owned.group) });
    }
    let all_namespaces = targets_annotation.is_empty();
    let targets: Vec<&str> = targets_annotation.split(',').filter(|t| !t.is_empty()).collect();
    let csv_name = bundle.name().to_owned();
    let strategy = &bundle.csv.spec.install.spec;

    let mut objects = Vec::new();
    let mut crds: Vec<Value> = Vec::new();
    let mut others: Vec<Value> = Vec::new();
    let bundle_crds: BTreeMap<(String, String), bool> = bundle
        .objects
        .iter()
        .filter(|m| m.object["kind"] == "CustomResourceDefinition")
        .filter_map(|m| {
            let spec = &m.object["spec"];
            Some((
                (spec["group"].as_str()?.to_owned(), spec["names"]["kind"].as_str()?.to_owned()),
                spec["scope"] != "Cluster",
            ))
        })
        .collect();
    for manifest in &bundle.objects {
        let mut object = manifest.object.clone();
        if object["kind"] == "CustomResourceDefinition" {
            crds.push(object);
            continue;
        }
        if is_namespaced(&object, &bundle_crds) {
            object["metadata"]["namespace"] = json!(namespace);
        } else if let Some(metadata) = object["metadata"].as_object_mut() {
            metadata.remove("namespace");
        }
        others.push(object);
    }

    let declared_accounts: BTreeSet<String> = others
        .iter()
        .filter(|o| o["kind"] == "ServiceAccount")
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    let accounts: BTreeSet<&str> = strategy
        .permissions
        .iter()
        .chain(&strategy.cluster_permissions)
        .map(|p| p.service_account_name.as_str())
        .filter(|name| !name.is_empty() && *name != "default" && !declared_accounts.contains(*name))
        .collect();
    for account in accounts {
        objects.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": namespace}}));
    }

    for permission in &strategy.permissions {
        if all_namespaces {
            let mut rules = serde_json::to_value(&permission.rules).unwrap_or_default();
            if let Some(list) = rules.as_array_mut() {
                list.push(json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}));
            }
            objects.extend(cluster_rbac(&csv_name, permission, rules, namespace));
        } else {
            for target in &targets {
                objects.extend(namespaced_rbac(&csv_name, permission, target, namespace));
            }
        }
    }
    for permission in &strategy.cluster_permissions {
        let rules = serde_json::to_value(&permission.rules).unwrap_or_default();
        objects.extend(cluster_rbac(&csv_name, permission, rules, namespace));
    }

    let mut deployments: BTreeMap<String, Value> = BTreeMap::new();
    for deployment in &strategy.deployments {
        let mut spec = serde_json::to_value(&deployment.spec).map_err(|e| ConvertError::InvalidDeployment {
            deployment: deployment.name.clone(),
            reason: e.to_string(),
        })?;
        spec["revisionHistoryLimit"] = json!(1);
        let annotations = &mut spec["template"]["metadata"]["annotations"];
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations[TARGET_NAMESPACES_ANNOTATION] = json!(targets_annotation);
        annotations[OPERATOR_NAMESPACE_ANNOTATION] = json!(namespace);
        let mut object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": deployment.name, "namespace": namespace}, "spec": spec});
        if let Some(labels) = &deployment.label {
            object["metadata"]["labels"] = json!(labels);
        }
        deployments.insert(deployment.name.clone(), object);
    }

    let webhook_objects = render_webhooks(
        bundle,
        &mut deployments,
        &mut crds,
        namespace,
        &targets,
        all_namespaces,
        options.certificates,
    )?;

    let mut rendered = crds;
    rendered.extend(objects);
    rendered.extend(others);
    rendered.extend(deployments.into_values());
    rendered.extend(webhook_objects);
    Ok(rendered)
}

/// Kinds of the bundle allow-list that live in namespaces; others are cluster-scoped. Custom kinds take their scope
/// from the bundle's CRDs.
fn is_namespaced(object: &Value, bundle_crds: &BTreeMap<(String, String), bool>) -> bool {
    let kind = object["kind"].as_str().unwrap_or_default();
    let group = crate::rbac::kinds::group_of(object["apiVersion"].as_str().unwrap_or_default());
    if let Some(namespaced) = bundle_crds.get(&(group.to_owned(), kind.to_owned())) {
        return *namespaced;
    }
    !matches!(
        kind,
        "ClusterRole"
            | "ClusterRoleBinding"
            | "PriorityClass"
            | "ConsoleYAMLSample"
            | "ConsoleQuickStart"
            | "ConsoleCLIDownload"
            | "ConsoleLink"
    )
}

/// A name `<base>-<hash of content>` of at most 63 characters, stable for the same content.
pub fn generated_name(base: &str, content: &Value) -> String {
    let digest = Sha256::digest(content.to_string().as_bytes());
    let hash: String = digest.iter().take(5).map(|byte| format!("{byte:02x}")).collect();
    let mut prefix: String = base.chars().take(63 - 1 - hash.len()).collect();
    while prefix.ends_with(['-', '.']) {
        prefix.pop();
    }
    format!("{prefix}-{hash}")
}

fn subject(permission: &StrategyDeploymentPermissions, namespace: &str) -> Value {
    let name =
        if permission.service_account_name.is_empty() { "default" } else { permission.service_account_name.as_str() };
    json!([{"kind": "ServiceAccount", "name": name, "namespace": namespace}])
}

fn namespaced_rbac(csv: &str, permission: &StrategyDeploymentPermissions, target: &str, namespace: &str) -> [Value; 2] {
    let rules = serde_json::to_value(&permission.rules).unwrap_or_default();
    let name = generated_name(&format!("{csv}-{}", permission.service_account_name), &rules);
    [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name, "namespace": target}, "rules": rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name, "namespace": target},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}, "subjects": subject(permission, namespace)}),
    ]
}

fn cluster_rbac(csv: &str, permission: &StrategyDeploymentPermissions, rules: Value, namespace: &str) -> [Value; 2] {
    let name = generated_name(&format!("{csv}-{}", permission.service_account_name), &rules);
    [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}, "subjects": subject(permission, namespace)}),
    ]
}

/// Paths where operators built with OLM's conventions read their serving certificates.
const CERT_MOUNTS: [(&str, &str, &str, &str); 2] = [
    ("apiservice-cert", "/apiserver.local.config/certificates", "apiserver.crt", "apiserver.key"),
    ("webhook-cert", "/tmp/k8s-webhook-server/serving-certs", "tls.crt", "tls.key"),
];

fn render_webhooks(
    bundle: &Bundle,
    deployments: &mut BTreeMap<String, Value>,
    crds: &mut [Value],
    namespace: &str,
    targets: &[&str],
    all_namespaces: bool,
    issuer: &dyn CertificateIssuer,
) -> Result<Vec<Value>, ConvertError> {
    let webhooks = &bundle.csv.spec.webhook_definitions;
    let mut by_deployment: BTreeMap<&str, Vec<&WebhookDescription>> = BTreeMap::new();
    for webhook in webhooks {
        if !deployments.contains_key(&webhook.deployment_name) {
            return Err(ConvertError::WebhookDeploymentMissing {
                webhook: webhook.generate_name.clone(),
                deployment: webhook.deployment_name.clone(),
            });
        }
        by_deployment.entry(webhook.deployment_name.as_str()).or_default().push(webhook);
    }
    let mut objects = Vec::new();
    for (deployment_name, served) in by_deployment {
        let service = format!("{deployment_name}-service");
        let secret = format!("{service}-cert");
        let certificate = issuer.issue(&tls::service_dns_names(&service, namespace))?;
        let ca_bundle = certificate.ca_pem.as_deref().map(tls::ca_bundle);
        let deployment =
            deployments.get_mut(deployment_name).ok_or_else(|| ConvertError::WebhookDeploymentMissing {
                webhook: served[0].generate_name.clone(),
                deployment: deployment_name.to_owned(),
            })?;
        mount_serving_certificate(deployment, &secret);
        let selector = deployment["spec"]["selector"]["matchLabels"].clone();

        let mut ports: BTreeMap<i32, Value> = BTreeMap::new();
        for webhook in &served {
            let port = webhook.container_port.unwrap_or(443);
            let target =
                webhook.target_port.as_ref().map_or(json!(port), |t| serde_json::to_value(t).unwrap_or(json!(port)));
            ports.insert(port, json!({"name": format!("{port}"), "port": port, "targetPort": target}));
        }
        let mut string_data = json!({"tls.crt": certificate.cert_pem, "tls.key": certificate.key_pem});
        // Without a CA (an issuer whose CA someone else injects), the Secret and the caBundles name none.
        if let Some(ca_pem) = &certificate.ca_pem {
            string_data["ca.crt"] = json!(ca_pem);
        }
        objects.push(json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": secret, "namespace": namespace}, "stringData": string_data}));
        objects
            .push(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": service, "namespace": namespace},
            "spec": {"selector": selector, "ports": ports.into_values().collect::<Vec<_>>()}}));

        for webhook in served {
            let mut client_config = json!({"service": {"namespace": namespace, "name": service, "path": webhook.webhook_path, "port": webhook.container_port.unwrap_or(443)}});
            if let Some(ca_bundle) = &ca_bundle {
                client_config["caBundle"] = json!(ca_bundle);
            }
            match webhook.webhook_type {
                WebhookAdmissionType::ConversionWebhook => {
                    for crd_name in &webhook.conversion_crds {
                        let crd = crds
                            .iter_mut()
                            .find(|crd| {
                                crd["metadata"]["name"] == crd_name.as_str()
                                    && crd["apiVersion"] == "apiextensions.k8s.io/v1"
                            })
                            .ok_or_else(|| ConvertError::ConversionCrdMissing {
                                webhook: webhook.generate_name.clone(),
                                crd: crd_name.clone(),
                            })?;
                        let versions = if webhook.admission_review_versions.is_empty() {
                            vec!["v1".to_owned()]
                        } else {
                            webhook.admission_review_versions.clone()
                        };
                        crd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"clientConfig": client_config, "conversionReviewVersions": versions}});
                    }
                }
                admission => {
                    objects.push(webhook_configuration(webhook, admission, client_config, targets, all_namespaces))
                }
            }
        }
    }
    Ok(objects)
}

fn webhook_configuration(
    webhook: &WebhookDescription,
    admission: WebhookAdmissionType,
    client_config: Value,
    targets: &[&str],
    all_namespaces: bool,
) -> Value {
    let kind = if admission == WebhookAdmissionType::MutatingAdmissionWebhook {
        "MutatingWebhookConfiguration"
    } else {
        "ValidatingWebhookConfiguration"
    };
    let name = webhook.generate_name.trim_end_matches(['-', '.']).to_owned();
    let mut entry = json!({
        "name": webhook.generate_name,
        "clientConfig": client_config,
        "rules": webhook.rules,
        "sideEffects": webhook.side_effects.clone().unwrap_or_else(|| "None".into()),
        "admissionReviewVersions": if webhook.admission_review_versions.is_empty() { vec!["v1".to_owned()] } else { webhook.admission_review_versions.clone() },
    });
    let optional = [
        ("failurePolicy", webhook.failure_policy.as_ref().map(|v| json!(v))),
        ("matchPolicy", webhook.match_policy.as_ref().map(|v| json!(v))),
        ("timeoutSeconds", webhook.timeout_seconds.map(|v| json!(v))),
        ("objectSelector", webhook.object_selector.as_ref().map(|v| json!(v))),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            entry[key] = value;
        }
    }
    if admission == WebhookAdmissionType::MutatingAdmissionWebhook {
        if let Some(policy) = &webhook.reinvocation_policy {
            entry["reinvocationPolicy"] = json!(policy);
        }
    }
    if !all_namespaces {
        entry["namespaceSelector"] =
            json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": targets}]});
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "webhooks": [entry]})
}

/// Mounts the serving certificate Secret into every container, where OLM-built operators look for it.
fn mount_serving_certificate(deployment: &mut Value, secret: &str) {
    let pod = &mut deployment["spec"]["template"]["spec"];
    let mut volumes: Vec<Value> = pod["volumes"].as_array().cloned().unwrap_or_default();
    for (volume, _, cert, key) in CERT_MOUNTS {
        volumes.retain(|v| v["name"] != volume);
        volumes.push(json!({"name": volume, "secret": {"secretName": secret, "items": [{"key": "tls.crt", "path": cert}, {"key": "tls.key", "path": key}]}}));
    }
    pod["volumes"] = Value::Array(volumes);
    if let Some(containers) = pod["containers"].as_array_mut() {
        for container in containers {
            let mut mounts: Vec<Value> = container["volumeMounts"].as_array().cloned().unwrap_or_default();
            for (volume, path, _, _) in CERT_MOUNTS {
                mounts.retain(|m| m["name"] != volume && m["mountPath"] != path);
                mounts.push(json!({"name": volume, "mountPath": path}));
            }
            container["volumeMounts"] = Value::Array(mounts);
        }
    }
}

/// Replaces namespaces named in `mapping` (from → to) in every namespace field of `objects`: metadata, binding
/// subjects, webhook, conversion and APIService services, and the OLM namespace annotations of pod templates.
/// Fields that are absent stay absent.
pub fn map_namespaces(objects: &mut [Value], mapping: &[(String, String)]) {
    let mapped = |namespace: &str| mapping.iter().find(|(from, _)| from == namespace).map(|(_, to)| to.clone());
    let map = |value: Option<&mut Value>| {
        if let Some(value) = value {
            if let Some(to) = value.as_str().and_then(mapped) {
                *value = Value::String(to);
            }
        }
    };
    for object in objects {
        map(object.pointer_mut("/metadata/namespace"));
        if let Some(subjects) = object.get_mut("subjects").and_then(Value::as_array_mut) {
            subjects.iter_mut().for_each(|subject| map(subject.get_mut("namespace")));
        }
        if let Some(webhooks) = object.get_mut("webhooks").and_then(Value::as_array_mut) {
            webhooks.iter_mut().for_each(|webhook| map(webhook.pointer_mut("/clientConfig/service/namespace")));
        }
        map(object.pointer_mut("/spec/conversion/webhook/clientConfig/service/namespace"));
        map(object.pointer_mut("/spec/service/namespace"));
        if let Some(annotations) =
            object.pointer_mut("/spec/template/metadata/annotations").and_then(Value::as_object_mut)
        {
            map(annotations.get_mut(OPERATOR_NAMESPACE_ANNOTATION));
            if let Some(Value::String(targets)) = annotations.get_mut(TARGET_NAMESPACES_ANNOTATION) {
                let renamed: BTreeSet<String> = targets
                    .split(',')
                    .filter(|t| !t.is_empty())
                    .map(|t| mapped(t).unwrap_or_else(|| t.to_owned()))
                    .collect();
                *targets = renamed.into_iter().collect::<Vec<_>>().join(",");
            }
        }
    }
}
