//! The RBAC engine on every real bundle under ../shared/testdata: the required permissions of each bundle's
//! content compute without error, and an installer holding nothing is asked for all of it, the CSV's cluster
//! permissions cluster-wide.
//!
//! The engine takes plain manifests. The bundle's own manifests are taken as they are (namespaced ones in the
//! install namespace), and the CSV's install strategy is rendered into the Deployments, ServiceAccounts, Roles,
//! ClusterRoles and bindings it stands for; the bundle converter renders the same kinds with OLM's exact names.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::path::{Path, PathBuf};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResource, APIResourceList};
use olmv2::api::v1alpha1::ClusterServiceVersion;
use olmv2::api::v2alpha1::PermissionScope;
use olmv2::rbac::missing::rule_of;
use olmv2::rbac::{
    covers, missing_permissions, required_permissions, KindIndex, RbacSnapshot, RequiredPermissionsError, Rule,
    UserInfo,
};
use serde_json::{json, Value};

const INSTALL_NAMESPACE: &str = "operators";

fn bundle_dirs() -> Vec<PathBuf> {
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata");
    assert!(testdata.is_dir(), "the shared test data is expected at {}", testdata.display());
    let mut dirs = Vec::new();
    for family in ["community-bundles", "upgrade-chains"] {
        for operator in std::fs::read_dir(testdata.join(family)).expect("readable").flatten() {
            for version in std::fs::read_dir(operator.path()).into_iter().flatten().flatten() {
                if version.path().join("manifests").is_dir() {
                    dirs.push(version.path());
                }
            }
        }
    }
    dirs.sort();
    dirs
}

fn manifests(bundle: &Path) -> Vec<Value> {
    let mut documents = Vec::new();
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(bundle.join("manifests")).expect("manifests").flatten().map(|e| e.path()).collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value: Value =
                serde::Deserialize::deserialize(document).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if value.is_object() {
                documents.push(value);
            }
        }
    }
    documents
}

fn is_csv(object: &Value) -> bool {
    object["kind"] == "ClusterServiceVersion"
}

/// The objects a CSV's install strategy stands for, in the install namespace.
fn install_strategy_objects(csv: &ClusterServiceVersion) -> Vec<Value> {
    let strategy = &csv.spec.install.spec;
    let csv_name = csv.metadata.name.clone().unwrap_or_default();
    let mut objects = Vec::new();
    let mut accounts: Vec<String> = Vec::new();
    for deployment in &strategy.deployments {
        objects.push(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": deployment.name, "namespace": INSTALL_NAMESPACE}}));
    }
    for (index, permission) in strategy.permissions.iter().enumerate() {
        let name = format!("{csv_name}-{index}");
        accounts.push(permission.service_account_name.clone());
        objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name, "namespace": INSTALL_NAMESPACE}, "rules": permission.rules}));
        objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name, "namespace": INSTALL_NAMESPACE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": permission.service_account_name, "namespace": INSTALL_NAMESPACE}]}));
    }
    for (index, permission) in strategy.cluster_permissions.iter().enumerate() {
        let name = format!("{csv_name}-cluster-{index}");
        accounts.push(permission.service_account_name.clone());
        objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": permission.rules}));
        objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": permission.service_account_name, "namespace": INSTALL_NAMESPACE}]}));
    }
    accounts.sort();
    accounts.dedup();
    for account in accounts.into_iter().filter(|account| !account.is_empty() && account != "default") {
        objects.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": INSTALL_NAMESPACE}}));
    }
    objects
}

/// The bundle's content as plain manifests: its own objects, namespaced ones in the install namespace, and the
/// objects of its CSV's install strategy.
fn content(bundle: &Path, kinds: &KindIndex) -> (ClusterServiceVersion, Vec<Value>) {
    let documents = manifests(bundle);
    let csv_value = documents.iter().find(|doc| is_csv(doc)).unwrap_or_else(|| panic!("{}: no CSV", bundle.display()));
    let csv: ClusterServiceVersion = serde_json::from_value(csv_value.clone()).expect("CSV");
    let mut all_kinds = kinds.clone();
    all_kinds.add_crds(&documents);
    let mut objects: Vec<Value> = documents.into_iter().filter(|doc| !is_csv(doc)).collect();
    for object in &mut objects {
        let namespaced = all_kinds
            .resolve(object["apiVersion"].as_str().unwrap_or_default(), object["kind"].as_str().unwrap_or_default())
            .is_some_and(|info| info.namespaced);
        if namespaced {
            object["metadata"]["namespace"] = json!(INSTALL_NAMESPACE);
        }
    }
    objects.extend(install_strategy_objects(&csv));
    (csv, objects)
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
        let (csv, objects) = content(bundle, &kinds);
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
    let with_monitors: Vec<PathBuf> = bundle_dirs()
        .into_iter()
        .filter(|bundle| manifests(bundle).iter().any(|doc| doc["kind"] == "ServiceMonitor"))
        .collect();
    assert!(!with_monitors.is_empty());
    for bundle in with_monitors {
        let (_, objects) = content(&bundle, &kinds);
        match required_permissions(&objects, &kinds, &RbacSnapshot::default().roles) {
            Err(RequiredPermissionsError::UnknownKind { kind, api_version, .. }) => {
                assert_eq!(api_version, "monitoring.coreos.com/v1", "{}", bundle.display());
                assert!(["ServiceMonitor", "PrometheusRule"].contains(&kind.as_str()), "{}: {kind}", bundle.display());
            }
            other => panic!("{}: expected a monitoring kind to be unknown, got {other:?}", bundle.display()),
        }
    }
}
