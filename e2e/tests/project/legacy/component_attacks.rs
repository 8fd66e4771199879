//! The attacks on a CSV's owned APIServices and webhooks: authors who may write CSVs and Deployments but not
//! everything the install makes for them (webhook configurations; `bind` on `system:auth-delegator`) get a Failed
//! CSV saying what they may not do, and nothing made; one who may edit CSVs but not delete webhook configurations
//! removes none by dropping a webhook. OLM v0 would do it all with its own rights.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, ListParams};
use olmv2::api::v1alpha1::{ClusterServiceVersion, CsvPhase};

use super::components::{api_csv, wait_csv, GLOBAL_GROUP};
use super::{apply, start, CRD};

/// Mallory may write CSVs and create Deployments, Services, Secrets, Roles and RoleBindings in `ops`: all a
/// namespaced operator needs, nothing cluster-scoped.
const OPERATOR_AUTHOR: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: operator-author, namespace: ops}
rules:
- {apiGroups: [operators.coreos.com], resources: [clusterserviceversions], verbs: [get, list, create, update, patch]}
- {apiGroups: [apps], resources: [deployments], verbs: [get, list, create, update, patch]}
- {apiGroups: [""], resources: [services, secrets], verbs: [get, list, create, update, patch]}
- {apiGroups: [rbac.authorization.k8s.io], resources: [roles, rolebindings], verbs: [get, list, create, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: mallory, namespace: ops}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: operator-author}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: mallory}]
"#;

/// The attack: a user who may write CSVs and create Deployments, Services, Secrets, Roles and RoleBindings in a
/// namespace, but not webhook configurations, applies a CSV with a mutating webhook. OLM v0 would register it with
/// its own rights (a webhook seeing every matching object of the cluster); here the CSV fails and nothing is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_author_who_may_not_create_webhook_configurations_gets_none() {
    let harness = start("webhook-author").await;
    apply(&harness, CRD);
    apply(&harness, GLOBAL_GROUP);
    apply(&harness, &super::account("ops", true));
    apply(&harness, OPERATOR_AUTHOR);
    let webhook = r#"  webhookdefinitions:
  - generateName: mallory.example.com
    type: MutatingAdmissionWebhook
    deploymentName: plumbus-operator
    containerPort: 443
    sideEffects: None
    admissionReviewVersions: [v1]
    rules: [{operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [secrets]}]
  install:"#;
    let manifest = super::csv("ops", &[("AllNamespaces", true)]).replace("  install:", webhook);
    let mallory = harness.plane.user_kubeconfig("mallory", &[]);
    let output = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(&manifest));
    assert!(output.status.success(), "mallory may write CSVs: {}", String::from_utf8_lossy(&output.stderr));
    let failed = wait_csv(&harness, "plumbus.v1.0.0", CsvPhase::Failed, None).await;
    let status = failed.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("InstallComponentFailed"));
    assert_eq!(
        status.message.as_deref(),
        Some(
            "install strategy failed: the CSV's author mallory may not create mutatingwebhookconfigurations, so its \
             webhook configurations are not created for them"
        )
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let configurations = Api::<MutatingWebhookConfiguration>::all(harness.admin.clone())
        .list(&ListParams::default())
        .await
        .expect("list");
    let made: Vec<String> =
        configurations.items.into_iter().filter_map(|c| c.metadata.name).filter(|n| n.starts_with("mallory")).collect();
    assert!(made.is_empty(), "no webhook configuration: {made:?}");
    let cluster_bindings = Api::<ClusterRoleBinding>::all(harness.admin.clone())
        .list(&ListParams::default().labels("olm.owner=plumbus.v1.0.0"))
        .await
        .expect("list");
    assert!(cluster_bindings.items.is_empty());
    assert!(Api::<Deployment>::namespaced(harness.admin.clone(), "ops")
        .get_opt("plumbus-operator")
        .await
        .expect("get")
        .is_none());
    assert!(Api::<Service>::namespaced(harness.admin.clone(), "ops")
        .get_opt("plumbus-operator-service")
        .await
        .expect("get")
        .is_none());
}

/// The attack on an aggregated API: an author who may create and patch everything the install makes, cluster role
/// bindings and APIServices included, but may not bind `system:auth-delegator`, gets nothing made: binding that role
/// by hand would be refused to them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_author_who_may_not_bind_the_auth_delegator_gets_no_apiservice() {
    let harness = start("apiservice-author").await;
    apply(&harness, GLOBAL_GROUP);
    apply(&harness, OPERATOR_AUTHOR);
    apply(
        &harness,
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: aggregated-api-author}
rules:
- {apiGroups: [rbac.authorization.k8s.io], resources: [clusterrolebindings], verbs: [create, patch]}
- {apiGroups: [apiregistration.k8s.io], resources: [apiservices], verbs: [create, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: mallory-aggregated-api-author}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: aggregated-api-author}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: mallory}]
"#,
    );
    let mallory = harness.plane.user_kubeconfig("mallory", &[]);
    let output = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(&api_csv()));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let failed = wait_csv(&harness, "wizard.v1.0.0", CsvPhase::Failed, None).await;
    assert_eq!(
        failed.status.unwrap().message.as_deref(),
        Some(
            "install strategy failed: the CSV's author mallory may not bind clusterrole system:auth-delegator, so its \
             system:auth-delegator ClusterRoleBindings are not created for them"
        )
    );
    let client = harness.admin.clone();
    assert!(Api::<APIService>::all(client.clone())
        .get_opt("v1alpha1.wizards.example.com")
        .await
        .expect("get")
        .is_none());
    let bindings = "wizard-api-service-system:auth-delegator";
    assert!(Api::<ClusterRoleBinding>::all(client.clone()).get_opt(bindings).await.expect("get").is_none());
    assert!(Api::<Secret>::namespaced(client, "ops").get_opt("wizard-api-service-cert").await.expect("get").is_none());
}

/// The admin's CSV with a validating and a mutating webhook on the Plumbus operator (`validating`: with the first).
fn webhooks_csv(validating: bool) -> String {
    let webhook = |kind: &str, name: &str| {
        format!(
            "  - {{generateName: {name}, type: {kind}, deploymentName: plumbus-operator, containerPort: 443, \
             sideEffects: None, failurePolicy: Ignore, admissionReviewVersions: [v1], \
             rules: [{{operations: [CREATE], apiGroups: [example.com], apiVersions: [v1], resources: [plumbuses]}}]}}\n"
        )
    };
    let mut definitions = String::from("  webhookdefinitions:\n");
    if validating {
        definitions.push_str(&webhook("ValidatingAdmissionWebhook", "vplumbus.example.com"));
    }
    definitions.push_str(&webhook("MutatingAdmissionWebhook", "mplumbus.example.com"));
    super::csv("ops", &[("AllNamespaces", true)]).replace("  install:", &format!("{definitions}  install:"))
}

/// The attack by removal: a user who may edit CSVs, but not delete webhook configurations, drops a webhook from a
/// CSV someone else installed. OLM v0 would delete its configuration (a policy webhook gone); here it is kept until
/// someone who may delete it writes the CSV.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_editor_who_may_not_delete_webhook_configurations_does_not_remove_one() {
    let harness = start("webhook-removal").await;
    apply(&harness, CRD);
    apply(&harness, GLOBAL_GROUP);
    apply(&harness, &super::account("ops", true));
    apply(&harness, &webhooks_csv(true));
    wait_csv(&harness, "plumbus.v1.0.0", CsvPhase::Succeeded, None).await;
    apply(
        &harness,
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: csv-editor, namespace: ops}
rules: [{apiGroups: [operators.coreos.com], resources: [clusterserviceversions], verbs: [get, list, update, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: mallory, namespace: ops}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: csv-editor}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: mallory}]
"#,
    );
    let validating = Api::<ValidatingWebhookConfiguration>::all(harness.admin.clone());
    let owned = ListParams::default().labels("olm.owner=plumbus.v1.0.0");
    assert_eq!(validating.list(&owned).await.expect("list").items.len(), 1);

    let mallory = harness.plane.user_kubeconfig("mallory", &[]);
    let output = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(&webhooks_csv(false)));
    assert!(output.status.success(), "mallory may edit CSVs: {}", String::from_utf8_lossy(&output.stderr));
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops");
    let edited = csvs.get("plumbus.v1.0.0").await.expect("csv");
    assert!(edited.metadata.annotations.unwrap()["v2alpha1.operators.coreos.com/creator"].contains("\"mallory\""));
    // The pass that would have deleted it says it kept it.
    let mut described = String::new();
    for _ in 0..600 {
        harness.roll_out("ops").await;
        described = super::kubectl(&harness, &["describe", "csv", "-n", "ops", "plumbus.v1.0.0"]);
        if described.contains("WebhookConfigurationKept") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let kept = described.lines().find(|line| line.contains("WebhookConfigurationKept")).unwrap_or_else(|| {
        panic!("no WebhookConfigurationKept event:\n{described}");
    });
    assert!(kept.contains("validatingwebhookconfigurations vplumbus.example.com-"), "{kept}");
    assert!(kept.contains("but its author mallory may not delete them"), "{kept}");
    assert_eq!(validating.list(&owned).await.expect("list").items.len(), 1, "kept: mallory may not delete it");

    // Written by the admin, who may delete it, the CSV's dropped webhook loses its configuration.
    apply(&harness, &webhooks_csv(false).replace("displayName: Plumbus\n", "displayName: Plumbus Operator\n"));
    for _ in 0..600 {
        harness.roll_out("ops").await;
        if validating.list(&owned).await.expect("list").items.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(validating.list(&owned).await.expect("list").items.is_empty());
}
