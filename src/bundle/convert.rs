//! Conversion of a registry+v1 bundle into plain manifests for an install namespace and a set of target
//! namespaces, the way OLM renders them: the install mode the targets mean, where each object lands, and the order
//! of the parts, each rendered by its own module: ServiceAccounts and RBAC (`permissions`), Deployments
//! (`deployments`), webhooks with generated serving certificates (`webhooks`), and the user's deployment
//! configuration (`deployment_config`). `docs/bundles.md` lists where the result differs from OLM's, and why.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::deployment_config::apply_deployment_config;
use super::deployments::render_deployments;
use super::model::Bundle;
use super::permissions::{rbac, service_accounts};
use super::webhooks::{render_webhooks, WebhookTargets};
use crate::api::v1::{OPERATOR_NAMESPACE_ANNOTATION, TARGET_NAMESPACES_ANNOTATION};
use crate::api::v1alpha1::InstallModeType;
use crate::api::v2alpha1::DeploymentConfig;
use crate::tls::CertificateIssuer;

pub use super::convert_error::ConvertError;

/// Where to install, which namespaces the operator watches (empty or `[""]` for all namespaces), who issues the
/// webhooks' certificates, and the user's configuration of the Deployments, if any.
pub struct RenderOptions<'a> {
    pub install_namespace: &'a str,
    pub target_namespaces: &'a [String],
    pub certificates: &'a dyn CertificateIssuer,
    pub deployment_config: Option<&'a DeploymentConfig>,
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

/// The plain manifests of `bundle` installed as `options` says: CRDs, ServiceAccounts, RBAC, the bundle's other
/// objects, Deployments, then the webhooks' Secrets, Services and configurations.
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
    let targets: Vec<&str> = targets_annotation.split(',').filter(|t| !t.is_empty()).collect();
    let strategy = &bundle.csv.spec.install.spec;

    let (mut crds, others) = place_objects(bundle, namespace);
    let declared_accounts: BTreeSet<String> = others
        .iter()
        .filter(|o| o["kind"] == "ServiceAccount")
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    let mut objects = service_accounts(strategy, &declared_accounts, namespace);
    objects.extend(rbac(bundle.name(), strategy, &targets, namespace));

    let mut deployments = render_deployments(bundle, namespace, &targets_annotation)?;
    let at = WebhookTargets { namespace, targets: &targets, issuer: options.certificates };
    let webhook_objects = render_webhooks(bundle, &mut deployments, &mut crds, &at)?;
    // After the certificate mounts, as OLM v0 and v1 apply it: a configured volume may replace theirs.
    if let Some(config) = options.deployment_config {
        for deployment in deployments.values_mut() {
            apply_deployment_config(deployment, config)?;
        }
    }

    let mut rendered = crds;
    rendered.extend(objects);
    rendered.extend(others);
    rendered.extend(deployments.into_values());
    rendered.extend(webhook_objects);
    Ok(rendered)
}

/// The bundle's CRDs, and its other objects placed: namespaced kinds in the install namespace, cluster-scoped ones
/// without a namespace.
fn place_objects(bundle: &Bundle, namespace: &str) -> (Vec<Value>, Vec<Value>) {
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
    let mut crds = Vec::new();
    let mut others = Vec::new();
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
    (crds, others)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::fixtures::{bundle, deployment_spec, FixedIssuer};

    fn targets(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn targets_mean_an_install_mode() {
        let mode = |names: &[&str]| install_mode("operators", &targets(names)).expect("a mode");
        assert_eq!(mode(&[]), (vec![InstallModeType::AllNamespaces], String::new()));
        assert_eq!(mode(&[""]), (vec![InstallModeType::AllNamespaces], String::new()));
        assert_eq!(mode(&["operators"]), (vec![InstallModeType::OwnNamespace], "operators".to_owned()));
        assert_eq!(mode(&["team-a"]), (vec![InstallModeType::SingleNamespace], "team-a".to_owned()));
        assert_eq!(mode(&["team-b", "team-a"]), (vec![InstallModeType::MultiNamespace], "team-a,team-b".to_owned()));
        assert_eq!(
            mode(&["team-a", "operators"]),
            (vec![InstallModeType::MultiNamespace, InstallModeType::OwnNamespace], "operators,team-a".to_owned())
        );
        assert!(matches!(
            install_mode("operators", &targets(&["", "team-a"])),
            Err(ConvertError::InvalidTargetNamespaces { .. })
        ));
    }

    /// A bundle whose one Deployment serves a validating webhook.
    fn webhook_bundle() -> Bundle {
        bundle(
            json!({
                "install": {"strategy": "deployment", "spec": {"deployments": [deployment_spec("manager", json!({}))]}},
                "webhookdefinitions": [{"type": "ValidatingAdmissionWebhook", "generateName": "v.example.com",
                    "deploymentName": "manager", "sideEffects": "None", "admissionReviewVersions": ["v1"]}],
            }),
            vec![],
        )
    }

    fn rendered_deployment(bundle: &Bundle, config: Option<&DeploymentConfig>) -> Value {
        let all = targets(&[""]);
        let options = RenderOptions {
            install_namespace: "operators",
            target_namespaces: &all,
            certificates: &FixedIssuer,
            deployment_config: config,
        };
        let objects = render(bundle, &options).expect("renders");
        objects.into_iter().find(|o| o["kind"] == "Deployment").expect("a Deployment")
    }

    #[test]
    fn the_configuration_applies_after_the_certificate_mounts_as_in_olm() {
        let config: DeploymentConfig = serde_json::from_value(json!({
            "volumes": [{"name": "webhook-cert", "secret": {"secretName": "my-own-certificate"}}],
            "annotations": {"olm.targetNamespaces": "team-a", "example.com/team": "platform"},
        }))
        .expect("config");
        let plain = rendered_deployment(&webhook_bundle(), None);
        assert_eq!(plain["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"], "manager-service-cert");
        let configured = rendered_deployment(&webhook_bundle(), Some(&config));
        let pod = &configured["spec"]["template"];
        assert_eq!(
            pod["spec"]["volumes"][0],
            json!({"name": "webhook-cert", "secret": {"secretName": "my-own-certificate"}})
        );
        // OLM's namespace annotations are set before the configuration, which adds only what is absent.
        assert_eq!(pod["metadata"]["annotations"]["olm.targetNamespaces"], "");
        assert_eq!(pod["metadata"]["annotations"]["example.com/team"], "platform");
        assert_eq!(configured["metadata"]["annotations"]["example.com/team"], "platform");
    }

    #[test]
    fn an_empty_configuration_renders_what_none_does() {
        let empty = DeploymentConfig::default();
        assert_eq!(rendered_deployment(&webhook_bundle(), Some(&empty)), rendered_deployment(&webhook_bundle(), None));
    }

    #[test]
    fn objects_land_in_the_install_namespace_by_scope() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster", "names": {"kind": "Widget"}}});
        let objects = vec![
            crd.clone(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "elsewhere"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r", "namespace": "x"}}),
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "x"}}),
        ];
        let (crds, others) = place_objects(&bundle(json!({}), objects), "operators");
        assert_eq!(crds, vec![crd]);
        assert_eq!(others[0]["metadata"]["namespace"], "operators");
        assert!(others[1]["metadata"].get("namespace").is_none(), "ClusterRoles are cluster-scoped");
        assert!(others[2]["metadata"].get("namespace").is_none(), "the bundle's CRD says Widgets are cluster-scoped");
    }
}
