//! OLM v0's OperatorGroup and CSV loops, driven as OLM v0 users drive them: OperatorGroups and hand-written CSVs
//! applied with the real kubectl, and OLM's names, annotations, labels, phases, reasons and messages asserted
//! (scenarios rewritten from the intent of OLM's `operator_groups_e2e_test.go`, `csv_e2e_test.go` and
//! `disabling_copied_csv_e2e_test.go`): groups and membership (`groups`), CSVs from requirements to upgrades and real
//! bundles (`csvs`), owned APIServices and webhooks (`components`, and the attacks on them in `component_attacks`),
//! copied CSVs and the OLMConfig switch (`copies`), a CSV's RBAC in its targets (`tenancy`), static groups
//! (`static_groups`), CatalogSources served from images and ConfigMaps (`catalogs`), Subscriptions resolved
//! (`subscriptions`), installed through InstallPlans and the approval gate (`installplans`) and upgraded along a
//! channel (`upgrades`). This module holds what they share.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use kube::api::Api;
use olmv2::api::v1alpha1::{ClusterServiceVersion, CsvPhase};

use crate::support::harness::Harness;

mod catalogs;
mod component_attacks;
mod components;
mod copies;
mod csvs;
mod groups;
pub(crate) mod installplans;
mod static_groups;
mod subscriptions;
mod tenancy;
mod upgrades;

pub const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: plumbuses.example.com}
spec:
  group: example.com
  names: {plural: plumbuses, singular: plumbus, kind: Plumbus, listKind: PlumbusList}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]
"#;

/// A hand-written CSV owning the Plumbus CRD, run by ServiceAccount `plumbus` with one namespaced and one cluster rule.
pub fn csv(namespace: &str, modes: &[(&str, bool)]) -> String {
    let modes: Vec<String> =
        modes.iter().map(|(mode, supported)| format!("{{type: {mode}, supported: {supported}}}")).collect();
    format!(
        r#"
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: plumbus.v1.0.0
  namespace: {namespace}
  annotations: {{alm-examples: "[]", capabilities: Basic Install}}
spec:
  displayName: Plumbus
  version: 1.0.0
  installModes: [{modes}]
  customresourcedefinitions:
    owned: [{{name: plumbuses.example.com, version: v1, kind: Plumbus}}]
  install:
    strategy: deployment
    spec:
      permissions:
      - serviceAccountName: plumbus
        rules: [{{apiGroups: [""], resources: [configmaps], verbs: [get, list]}}]
      deployments:
      - name: plumbus-operator
        spec:
          selector: {{matchLabels: {{app: plumbus}}}}
          template:
            metadata: {{labels: {{app: plumbus}}}}
            spec:
              serviceAccountName: plumbus
              containers: [{{name: manager, image: "example.com/plumbus:1.0.0"}}]
"#,
        modes = modes.join(", ")
    )
}

/// The ServiceAccount and the Role and RoleBinding that satisfy the CSV's permissions, as OLM v0's InstallPlan would
/// have made them (OLM's CSV loop only checks them).
pub fn account(namespace: &str, with_rbac: bool) -> String {
    let mut manifest =
        format!("apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: plumbus, namespace: {namespace}}}\n");
    if with_rbac {
        manifest.push_str(&format!(
            r#"---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: plumbus, namespace: {namespace}}}
rules: [{{apiGroups: [""], resources: [configmaps], verbs: [get, list]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: plumbus, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: plumbus}}
subjects: [{{kind: ServiceAccount, name: plumbus, namespace: {namespace}}}]
"#
        ));
    }
    manifest
}

/// A Role letting `user` write CSVs in `ops`, and its binding.
pub fn csv_writer(user: &str) -> String {
    format!(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: csv-writer, namespace: ops}}
rules: [{{apiGroups: [operators.coreos.com], resources: [clusterserviceversions], verbs: [get, list, create, update, patch]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {user}-csvs, namespace: ops}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: csv-writer}}
subjects: [{{kind: User, apiGroup: rbac.authorization.k8s.io, name: {user}}}]
"#
    )
}

/// `user` bound to Kubernetes' `role` (admin, edit, view) in `namespace`.
pub fn bound_to(user: &str, role: &str, namespace: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {user}-{role}, namespace: {namespace}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}\n\
         subjects: [{{kind: User, apiGroup: rbac.authorization.k8s.io, name: {user}}}]\n"
    )
}

/// A global OperatorGroup `og` in `ops`.
pub const GLOBAL_GROUP: &str =
    "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\nspec: {}\n";

/// Pushes the File-Based Catalog directory `configs` as `catalog:latest` and serves it as CatalogSource
/// `olm/community` (the global catalog namespace's).
pub async fn serve_catalog(harness: &Harness, configs: &std::path::Path) {
    let image = harness.registry.reference("catalog:latest");
    harness.images().push_catalog(configs, &image).await.expect("catalog pushed");
    apply(
        harness,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {{name: community, namespace: olm}}\n\
             spec: {{sourceType: grpc, image: {image}, displayName: Community}}\n"
        ),
    );
}

pub fn apply(harness: &Harness, manifest: &str) {
    let output = harness.admin_kubectl(&["apply", "-f", "-"], Some(manifest));
    assert!(output.status.success(), "kubectl apply: {}", String::from_utf8_lossy(&output.stderr));
}

pub fn kubectl(harness: &Harness, args: &[&str]) -> String {
    let output = harness.admin_kubectl(args, None);
    assert!(output.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub async fn start(name: &str) -> Harness {
    if std::env::var_os("OLMV2_TEST_LOG").is_some() {
        olmv2::telemetry::init(olmv2::telemetry::LogFormat::Text);
    }
    Harness::start("legacy", name, &["ops", "team-a", "team-b"], Duration::from_secs(30)).await
}

/// The usual start: the Plumbus CRD, its account and RBAC, a global group in `ops`, and the CSV Succeeded there.
pub async fn installed_globally(harness: &Harness) -> ClusterServiceVersion {
    apply(harness, CRD);
    apply(harness, &account("ops", true));
    apply(harness, GLOBAL_GROUP);
    apply(harness, &csv("ops", &[("AllNamespaces", true)]));
    wait_phase(harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await
}

pub async fn wait_phase(harness: &Harness, namespace: &str, phase: CsvPhase, reason: &str) -> ClusterServiceVersion {
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), namespace);
    let mut last = None;
    for _ in 0..400 {
        // Stand in for the Deployment controller on every look, so an applied Deployment becomes available.
        harness.roll_out(namespace).await;
        if let Some(csv) = csvs.get_opt("plumbus.v1.0.0").await.expect("get") {
            let status = csv.status.clone().unwrap_or_default();
            if status.phase == phase && status.reason.as_deref() == Some(reason) {
                return csv;
            }
            last = Some(csv);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the CSV never reached {phase:?}/{reason}; last: {}", serde_json::to_string_pretty(&last).unwrap());
}
