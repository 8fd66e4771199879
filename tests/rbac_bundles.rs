//! The RBAC engine on every real bundle under ../shared/testdata, converted to plain manifests: the required
//! permissions compute without error, and an installer holding nothing is asked for all of it, the CSV's cluster
//! permissions cluster-wide.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

mod support;

use std::path::Path;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResource, APIResourceList};
use olmv2::api::v1alpha1::{ClusterServiceVersion, InstallModeType};
use olmv2::api::v2alpha1::PermissionScope;
use olmv2::bundle::{render, Bundle, RenderOptions};
use olmv2::rbac::missing::rule_of;
use olmv2::rbac::{
    covers, missing_permissions, required_permissions, KindIndex, RbacSnapshot, RequiredPermissionsError, Rule,
    UserInfo,
};
use olmv2::tls::CertificateAuthority;
use serde_json::Value;
use support::{is_invalid_testdata_bundle, testdata_bundles};

const INSTALL_NAMESPACE: &str = "operators";

/// The bundle's plain manifests in the first install mode it supports, of All, Own, Single.
fn content(bundle_dir: &Path) -> Option<(ClusterServiceVersion, Vec<Value>)> {
    if is_invalid_testdata_bundle(bundle_dir) {
        return None;
    }
    let bundle = Bundle::load(bundle_dir).unwrap_or_else(|e| panic!("{}: {e}", bundle_dir.display()));
    let targets = if bundle.csv.spec.supports(InstallModeType::AllNamespaces) {
        vec![String::new()]
    } else if bundle.csv.spec.supports(InstallModeType::OwnNamespace) {
        vec![INSTALL_NAMESPACE.to_owned()]
    } else {
        vec!["team-a".to_owned()]
    };
    let authority = CertificateAuthority::new("test").expect("CA");
    let options = RenderOptions {
        install_namespace: INSTALL_NAMESPACE,
        target_namespaces: &targets,
        certificates: &authority,
        deployment_config: None,
    };
    let objects = render(&bundle, &options).unwrap_or_else(|e| panic!("{}: {e}", bundle_dir.display()));
    Some((bundle.csv, objects))
}

fn bundle_dirs() -> Vec<std::path::PathBuf> {
    testdata_bundles()
}

fn ships_kind(bundle_dir: &Path, kind: &str) -> bool {
    !is_invalid_testdata_bundle(bundle_dir)
        && Bundle::load(bundle_dir)
            .is_ok_and(|bundle| bundle.objects.iter().any(|manifest| manifest.object["kind"] == kind))
}

/// Discovery of a cluster that runs the Prometheus operator, whose kinds some bundles ship objects of.
fn prometheus_operator_discovery() -> KindIndex {
    let resource = |name: &str, kind: &str| APIResource {
        name: name.into(),
        kind: kind.into(),
        namespaced: true,
        ..Default::default()
    };
    KindIndex::from_discovery(&[APIResourceList {
        group_version: "monitoring.coreos.com/v1".into(),
        resources: vec![resource("servicemonitors", "ServiceMonitor"), resource("prometheusrules", "PrometheusRule")],
    }])
}

fn cluster_kinds() -> KindIndex {
    let mut kinds = KindIndex::kubernetes();
    kinds.merge(&prometheus_operator_discovery());
    kinds
}

#[test]
fn every_bundle_yields_its_required_permissions() {
    let kinds = cluster_kinds();
    let installer = UserInfo::service_account("olm", "installer");
    let snapshot = RbacSnapshot::default();
    let bundles = bundle_dirs();
    assert!(bundles.len() >= 120, "expected every bundle, found {}", bundles.len());
    let mut failures = Vec::new();
    for bundle in &bundles {
        let Some((csv, objects)) = content(bundle) else { continue };
        let required = match required_permissions(&objects, &kinds, &snapshot.roles) {
            Ok(required) => required,
            Err(error) => {
                failures.push(format!("{}: {error}", bundle.display()));
                continue;
            }
        };
        let missing = missing_permissions(&required, &snapshot, &installer);
        let pending_rules: Vec<Rule> = missing.permissions.iter().map(rule_of).collect();
        let wanted: Vec<Rule> = required.apply.iter().map(|scoped| scoped.rule.clone()).collect();
        if !covers(&pending_rules, &wanted) {
            failures.push(format!("{}: pending permissions do not cover applying the content", bundle.display()));
        }
        let cluster_pending: Vec<Rule> =
            missing.permissions.iter().filter(|p| p.scope == PermissionScope::Cluster).map(rule_of).collect();
        let cluster_granted: Vec<Rule> =
            csv.spec.install.spec.cluster_permissions.iter().flat_map(|p| p.rules.iter().map(Rule::from)).collect();
        if !covers(&cluster_pending, &cluster_granted) {
            failures
                .push(format!("{}: the CSV's cluster permissions are not all pending cluster-wide", bundle.display()));
        }
    }
    assert!(failures.is_empty(), "{} of {} bundles failed:\n{}", failures.len(), bundles.len(), failures.join("\n"));
}

#[test]
fn a_kind_the_cluster_does_not_serve_is_named() {
    let kinds = KindIndex::kubernetes();
    let with_monitors: Vec<_> =
        bundle_dirs().into_iter().filter(|bundle| ships_kind(bundle, "ServiceMonitor")).collect();
    assert!(!with_monitors.is_empty());
    for bundle in with_monitors {
        let Some((_, objects)) = content(&bundle) else { continue };
        match required_permissions(&objects, &kinds, &RbacSnapshot::default().roles) {
            Err(RequiredPermissionsError::UnknownKind { kind, api_version, .. }) => {
                assert_eq!(api_version, "monitoring.coreos.com/v1", "{}", bundle.display());
                assert!(["ServiceMonitor", "PrometheusRule"].contains(&kind.as_str()), "{}: {kind}", bundle.display());
            }
            other => panic!("{}: expected a monitoring kind to be unknown, got {other:?}", bundle.display()),
        }
    }
}
