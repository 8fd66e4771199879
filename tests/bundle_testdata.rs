//! Every bundle under ../shared/testdata loads and converts to plain manifests for each install mode its CSV
//! supports; unsupported modes are refused with OLM's reason; the one truly invalid bundle is refused naming its file.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

mod support;

use olmv2::api::v1alpha1::InstallModeType;
use olmv2::bundle::{render, Bundle, ConvertError, RenderOptions};
use olmv2::category::Categorized;
use olmv2::tls::CertificateAuthority;
use serde_json::Value;
use support::{is_invalid_testdata_bundle, testdata_bundles, INVALID_TESTDATA_BUNDLE};

const INSTALL_NAMESPACE: &str = "operators";

fn targets_for(mode: InstallModeType) -> Vec<String> {
    match mode {
        InstallModeType::AllNamespaces => vec![String::new()],
        InstallModeType::OwnNamespace => vec![INSTALL_NAMESPACE.into()],
        InstallModeType::SingleNamespace => vec!["team-a".into()],
        InstallModeType::MultiNamespace => vec!["team-a".into(), "team-b".into()],
    }
}

const MODES: [InstallModeType; 4] = [
    InstallModeType::AllNamespaces,
    InstallModeType::OwnNamespace,
    InstallModeType::SingleNamespace,
    InstallModeType::MultiNamespace,
];

fn check_rendered(bundle: &Bundle, objects: &[Value], mode: InstallModeType) -> Result<(), String> {
    if objects.iter().any(|o| o["kind"] == "ClusterServiceVersion") {
        return Err("the CSV is among the plain manifests".into());
    }
    let strategy = &bundle.csv.spec.install.spec;
    for deployment in &strategy.deployments {
        let rendered = objects
            .iter()
            .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == deployment.name.as_str())
            .ok_or_else(|| format!("deployment {} is missing", deployment.name))?;
        let annotations = &rendered["spec"]["template"]["metadata"]["annotations"];
        if annotations["olm.operatorNamespace"] != INSTALL_NAMESPACE {
            return Err(format!("deployment {} lacks olm.operatorNamespace", deployment.name));
        }
        let expected = match mode {
            InstallModeType::AllNamespaces => "",
            InstallModeType::OwnNamespace => INSTALL_NAMESPACE,
            InstallModeType::SingleNamespace => "team-a",
            InstallModeType::MultiNamespace => "team-a,team-b",
        };
        if annotations["olm.targetNamespaces"] != expected {
            return Err(format!(
                "deployment {} has olm.targetNamespaces {}",
                deployment.name, annotations["olm.targetNamespaces"]
            ));
        }
    }
    let roles = objects.iter().filter(|o| o["kind"] == "Role").count();
    let cluster_roles = objects.iter().filter(|o| o["kind"] == "ClusterRole").count();
    let bundle_roles = bundle.objects.iter().filter(|m| m.object["kind"] == "Role").count();
    let bundle_cluster_roles = bundle.objects.iter().filter(|m| m.object["kind"] == "ClusterRole").count();
    let targets = match mode {
        InstallModeType::MultiNamespace => 2,
        _ => 1,
    };
    let (expected_roles, expected_cluster_roles) = if mode == InstallModeType::AllNamespaces {
        (bundle_roles, bundle_cluster_roles + strategy.permissions.len() + strategy.cluster_permissions.len())
    } else {
        (bundle_roles + strategy.permissions.len() * targets, bundle_cluster_roles + strategy.cluster_permissions.len())
    };
    if (roles, cluster_roles) != (expected_roles, expected_cluster_roles) {
        return Err(format!(
            "{roles} Roles and {cluster_roles} ClusterRoles, expected {expected_roles} and {expected_cluster_roles}"
        ));
    }
    for object in objects {
        let namespaced = object["metadata"]["namespace"].is_string();
        let kind = object["kind"].as_str().unwrap_or_default();
        let cluster_scoped = matches!(
            kind,
            "CustomResourceDefinition"
                | "ClusterRole"
                | "ClusterRoleBinding"
                | "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "PriorityClass"
                | "ConsoleYAMLSample"
        );
        if namespaced == cluster_scoped {
            return Err(format!(
                "{kind} {} has namespace {}",
                object["metadata"]["name"], object["metadata"]["namespace"]
            ));
        }
    }
    let webhooks = bundle
        .csv
        .spec
        .webhook_definitions
        .iter()
        .filter(|w| w.webhook_type != olmv2::api::v1alpha1::WebhookAdmissionType::ConversionWebhook)
        .count();
    let configurations =
        objects.iter().filter(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("WebhookConfiguration"))).count();
    if webhooks != configurations {
        return Err(format!("{webhooks} admission webhooks but {configurations} configurations"));
    }
    Ok(())
}

#[test]
fn every_bundle_converts_for_each_supported_install_mode() {
    let authority = CertificateAuthority::new("olmv2-test").expect("CA");
    let bundles = testdata_bundles();
    assert!(bundles.len() >= 120, "found {}", bundles.len());
    let mut failures = Vec::new();
    let mut conversions = 0;
    for dir in &bundles {
        let bundle = match Bundle::load(dir) {
            Ok(bundle) => bundle,
            Err(error) if is_invalid_testdata_bundle(dir) => {
                assert!(error.to_string().starts_with(INVALID_TESTDATA_BUNDLE.1), "{error}");
                continue;
            }
            Err(error) => {
                failures.push(format!("{}: {error}", dir.display()));
                continue;
            }
        };
        for mode in MODES {
            let targets = targets_for(mode);
            let options = RenderOptions {
                install_namespace: INSTALL_NAMESPACE,
                target_namespaces: &targets,
                certificates: &authority,
                deployment_config: None,
            };
            let supported = bundle.csv.spec.supports(mode)
                && (mode != InstallModeType::OwnNamespace || bundle.csv.spec.supports(InstallModeType::OwnNamespace));
            match (supported, render(&bundle, &options)) {
                (true, Ok(objects)) => {
                    conversions += 1;
                    if let Err(problem) = check_rendered(&bundle, &objects, mode) {
                        failures.push(format!("{} ({mode:?}): {problem}", dir.display()));
                    }
                }
                (true, Err(error)) => failures.push(format!("{} ({mode:?}): {error}", dir.display())),
                (false, Err(ConvertError::UnsupportedInstallMode { mode: refused, message })) => {
                    assert_eq!(refused, mode);
                    assert!(message.starts_with(&format!("{mode:?} InstallModeType not supported")), "{message}");
                }
                (false, other) => failures.push(format!(
                    "{} ({mode:?}) is unsupported but gave {:?}",
                    dir.display(),
                    other.map(|o| o.len())
                )),
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert!(conversions > 250, "only {conversions} conversions");
}

#[test]
fn the_invalid_bundle_names_its_file_and_the_reason() {
    let dir = testdata_bundles().into_iter().find(|dir| is_invalid_testdata_bundle(dir)).expect("present");
    let error = Bundle::load(&dir).expect_err("invalid");
    assert_eq!(error.category(), "BundleYamlInvalid");
    let message = error.to_string();
    assert!(
        message.starts_with("metadata/dependencies.yaml: invalid YAML: mapping values are not allowed"),
        "{message}"
    );
}
