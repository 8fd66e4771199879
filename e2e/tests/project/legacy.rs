//! OLM v0's OperatorGroup and CSV loops, driven as OLM v0 users drive them: OperatorGroups and hand-written CSVs
//! applied with the real kubectl, and OLM's names, annotations, labels, phases, reasons and messages asserted
//! (scenarios rewritten from the intent of OLM's `operator_groups_e2e_test.go` and `csv_e2e_test.go`).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::Api;
use olmv2::api::v1::OperatorGroup;
use olmv2::api::v1alpha1::{ClusterServiceVersion, CsvPhase};
use olmv2::legacy::roles::group_role_name;

use crate::support::harness::Harness;

const CRD: &str = r#"
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
fn csv(namespace: &str, modes: &[(&str, bool)]) -> String {
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
fn account(namespace: &str, with_rbac: bool) -> String {
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

fn apply(harness: &Harness, manifest: &str) {
    let output = harness.admin_kubectl(&["apply", "-f", "-"], Some(manifest));
    assert!(output.status.success(), "kubectl apply: {}", String::from_utf8_lossy(&output.stderr));
}

fn kubectl(harness: &Harness, args: &[&str]) -> String {
    let output = harness.admin_kubectl(args, None);
    assert!(output.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

async fn start(name: &str) -> Harness {
    if std::env::var_os("OLMV2_TEST_LOG").is_some() {
        olmv2::telemetry::init(olmv2::telemetry::LogFormat::Text);
    }
    Harness::start("legacy", name, &["ops", "team-a", "team-b"], Duration::from_secs(30)).await
}

async fn wait_phase(harness: &Harness, namespace: &str, phase: CsvPhase, reason: &str) -> ClusterServiceVersion {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_selector_group_targets_labelled_namespaces_and_its_csv_installs_as_in_olm() {
    let harness = start("selector").await;
    apply(&harness, CRD);
    apply(&harness, &account("ops", true));
    kubectl(&harness, &["label", "namespace", "team-a", "team=plumbing"]);
    apply(
        &harness,
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\nspec:\n  selector: {matchLabels: {team: plumbing}}\n",
    );
    apply(
        &harness,
        &csv(
            "ops",
            &[("OwnNamespace", false), ("SingleNamespace", true), ("MultiNamespace", true), ("AllNamespaces", false)],
        ),
    );

    let groups = Api::<OperatorGroup>::namespaced(harness.admin.clone(), "ops");
    let group = harness
        .wait_for(&groups, "og", "targeting team-a", |g| g.status.as_ref().is_some_and(|s| s.namespaces == ["team-a"]))
        .await;
    assert!(group.status.as_ref().and_then(|s| s.last_updated.as_ref()).is_some());
    let uid = group.metadata.uid.clone().unwrap();
    let namespaces = Api::<Namespace>::all(harness.admin.clone());
    let label = format!("olm.operatorgroup.uid/{uid}");
    harness
        .wait_for(&namespaces, "team-a", "labelled for the group", |ns| {
            ns.metadata.labels.as_ref().is_some_and(|l| l.get(&label) == Some(&String::new()))
        })
        .await;

    let csv = wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
    let annotations = csv.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get("olm.operatorGroup").map(String::as_str), Some("og"));
    assert_eq!(annotations.get("olm.operatorNamespace").map(String::as_str), Some("ops"));
    assert_eq!(annotations.get("olm.targetNamespaces").map(String::as_str), Some("team-a"));
    let history: Vec<(CsvPhase, String)> =
        csv.status.unwrap().conditions.iter().map(|c| (c.phase, c.reason.clone().unwrap_or_default())).collect();
    assert_eq!(
        history[..3],
        [
            (CsvPhase::Pending, "RequirementsUnknown".to_owned()),
            (CsvPhase::InstallReady, "AllRequirementsMet".to_owned()),
            (CsvPhase::Installing, "InstallSucceeded".to_owned()),
        ]
    );
    // Possibly (Installing, InstallWaiting) while the Deployment rolls out, then Succeeded.
    assert_eq!(history.last(), Some(&(CsvPhase::Succeeded, "InstallSucceeded".to_owned())));

    let deployment =
        Api::<Deployment>::namespaced(harness.admin.clone(), "ops").get("plumbus-operator").await.expect("deployment");
    let template = deployment.spec.unwrap().template.metadata.unwrap().annotations.unwrap();
    assert_eq!(template.get("olm.targetNamespaces").map(String::as_str), Some("team-a"));
    assert_eq!(template.get("alm-examples").map(String::as_str), Some("[]"));
    let labels = deployment.metadata.labels.unwrap();
    assert_eq!(labels.get("olm.owner.kind").map(String::as_str), Some("ClusterServiceVersion"));

    // `kubectl get csv` tells the story as with OLM.
    let listed = kubectl(&harness, &["get", "csv", "-n", "ops"]);
    assert!(listed.contains("plumbus.v1.0.0") && listed.contains("Succeeded"), "{listed}");

    // The group's aggregating roles, and the CRD's own once the CSV Succeeded.
    let roles = Api::<ClusterRole>::all(harness.admin.clone());
    let admin = harness.wait_for(&roles, &group_role_name("ops", "og", "admin"), "present", |_| true).await;
    assert_eq!(
        admin.metadata.labels.as_ref().and_then(|l| l.get("olm.owner.kind")).map(String::as_str),
        Some("OperatorGroup")
    );
    let selectors = admin.aggregation_rule.and_then(|rule| rule.cluster_role_selectors).unwrap_or_default();
    assert_eq!(selectors.len(), 1, "one API aggregated");
    let edit = harness.wait_for(&roles, "plumbuses.example.com-v1-edit", "present", |_| true).await;
    assert_eq!(edit.rules.unwrap()[0].verbs, ["create", "update", "patch", "delete"]);
    harness.wait_for(&roles, "plumbuses.example.com-v1-crdview", "present", |_| true).await;
    let group = groups.get("og").await.expect("group");
    assert_eq!(
        group.metadata.annotations.unwrap().get("olm.providedAPIs").map(String::as_str),
        Some("Plumbus.v1.example.com")
    );

    // Labelling another namespace widens the group; the CSV's annotation, and its Deployment's, follow.
    kubectl(&harness, &["label", "namespace", "team-b", "team=plumbing"]);
    harness
        .wait_for(&groups, "og", "targeting both", |g| {
            g.status.as_ref().is_some_and(|s| {
                let mut n = s.namespaces.clone();
                n.sort();
                n == ["team-a", "team-b"]
            })
        })
        .await;
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops");
    harness
        .wait_for(&csvs, "plumbus.v1.0.0", "annotated with both", |c| {
            c.metadata.annotations.as_ref().and_then(|a| a.get("olm.targetNamespaces")).map(String::as_str)
                == Some("team-a,team-b")
        })
        .await;
    let deployments = Api::<Deployment>::namespaced(harness.admin.clone(), "ops");
    harness
        .wait_for(&deployments, "plumbus-operator", "annotated with both", |d| {
            d.spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get("olm.targetNamespaces"))
                .map(String::as_str)
                == Some("team-a,team-b")
        })
        .await;
    let csv = wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
    // The outdated Deployment sent it back to InstallReady, as OLM does, and it installed again.
    assert!(
        csv.status
            .unwrap()
            .conditions
            .iter()
            .any(|c| c.phase == CsvPhase::InstallReady && c.reason.as_deref() == Some("ComponentUnhealthy")),
        "reinstalled for the new targets"
    );

    // Unlabelling takes team-a out: its group label goes.
    kubectl(&harness, &["label", "namespace", "team-a", "team-"]);
    harness
        .wait_for(&namespaces, "team-a", "unlabelled", |ns| {
            !ns.metadata.labels.as_ref().is_some_and(|l| l.contains_key(&label))
        })
        .await;
    // Deleting the group removes the labels it made.
    kubectl(&harness, &["delete", "operatorgroup", "og", "-n", "ops"]);
    harness
        .wait_for(&namespaces, "team-b", "unlabelled", |ns| {
            !ns.metadata.labels.as_ref().is_some_and(|l| l.contains_key(&label))
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn group_membership_and_install_modes_fail_and_heal_with_olms_reasons() {
    let harness = start("modes").await;
    apply(&harness, CRD);
    apply(&harness, &account("ops", true));
    apply(
        &harness,
        &csv(
            "ops",
            &[("OwnNamespace", false), ("SingleNamespace", false), ("MultiNamespace", false), ("AllNamespaces", true)],
        ),
    );
    let csv = wait_phase(&harness, "ops", CsvPhase::Failed, "NoOperatorGroup").await;
    assert_eq!(csv.status.unwrap().message.as_deref(), Some("csv in namespace with no operatorgroups"));
    harness.wait_event("ops", "NoOperatorGroup").await;

    apply(&harness, "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\nspec: {targetNamespaces: [ops]}\n");
    let csv = wait_phase(&harness, "ops", CsvPhase::Failed, "UnsupportedOperatorGroup").await;
    assert_eq!(
        csv.status.unwrap().message.as_deref(),
        Some("OwnNamespace InstallModeType not supported, cannot configure to watch own namespace")
    );

    apply(
        &harness,
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og2, namespace: ops}\nspec: {}\n",
    );
    let csv = wait_phase(&harness, "ops", CsvPhase::Failed, "TooManyOperatorGroups").await;
    assert_eq!(
        csv.status.unwrap().message.as_deref(),
        Some("csv created in namespace with multiple operatorgroups, can't pick one automatically")
    );
    let groups = Api::<OperatorGroup>::namespaced(harness.admin.clone(), "ops");
    let og = harness
        .wait_for(&groups, "og", "flagged", |g| {
            g.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "MultipleOperatorGroup"))
        })
        .await;
    let condition = og.status.unwrap().conditions.into_iter().find(|c| c.type_ == "MultipleOperatorGroup").unwrap();
    assert_eq!(
        (condition.reason.as_str(), condition.message.as_str()),
        ("MultipleOperatorGroupsFound", "Multiple OperatorGroup found in the same namespace")
    );

    // One global group left: the CSV heals through Pending and installs.
    kubectl(&harness, &["delete", "operatorgroup", "og", "-n", "ops"]);
    harness
        .wait_for(&groups, "og2", "no longer flagged", |g| {
            g.status.as_ref().is_some_and(|s| s.namespaces == [""] && s.conditions.is_empty())
        })
        .await;
    let csv = wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
    assert_eq!(csv.metadata.annotations.unwrap().get("olm.targetNamespaces").map(String::as_str), Some(""));
    assert!(csv
        .status
        .unwrap()
        .conditions
        .iter()
        .any(|c| c.message.as_deref() == Some("InstallModes now support target namespaces")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn insufficient_permissions_wait_in_pending_until_rbac_grants_them() {
    let harness = start("permissions").await;
    apply(&harness, CRD);
    apply(&harness, &account("ops", false));
    apply(
        &harness,
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\nspec: {}\n",
    );
    apply(&harness, &csv("ops", &[("AllNamespaces", true)]));
    let csv = wait_phase(&harness, "ops", CsvPhase::Pending, "RequirementsNotMet").await;
    let status = csv.status.unwrap();
    assert_eq!(status.message.as_deref(), Some("one or more requirements couldn't be found"));
    let requirement =
        status.requirement_status.iter().find(|r| r.kind == "ServiceAccount").expect("account requirement");
    assert_eq!(
        (requirement.status.as_str(), requirement.message.as_str()),
        ("PresentNotSatisfied", "Policy rule not satisfied for service account")
    );
    assert_eq!(
        requirement.dependents[0].message.as_deref(),
        Some(r#"namespaced rule:{"verbs":["get","list"],"apiGroups":[""],"resources":["configmaps"]}"#)
    );
    assert_eq!(requirement.dependents[0].status, "NotSatisfied");
    assert!(Api::<Deployment>::namespaced(harness.admin.clone(), "ops")
        .get_opt("plumbus-operator")
        .await
        .expect("get")
        .is_none());

    apply(&harness, &account("ops", true));
    wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
}

/// The attack: a user who may write CSVs in a namespace but not Deployments gets no Deployment made for them by
/// the controller (OLM v0 would create it with its own rights).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_author_who_may_not_create_deployments_gets_none() {
    let harness = start("author").await;
    apply(&harness, CRD);
    apply(&harness, &account("ops", true));
    apply(
        &harness,
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\nspec: {}\n",
    );
    apply(
        &harness,
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: csv-writer, namespace: ops}
rules: [{apiGroups: [operators.coreos.com], resources: [clusterserviceversions], verbs: [get, list, create, update, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: mallory, namespace: ops}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: csv-writer}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: mallory}]
"#,
    );
    let mallory = harness.plane.user_kubeconfig("mallory", &[]);
    let output = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(&csv("ops", &[("AllNamespaces", true)])));
    assert!(output.status.success(), "mallory may write CSVs: {}", String::from_utf8_lossy(&output.stderr));
    let failed = wait_phase(&harness, "ops", CsvPhase::Failed, "InstallComponentFailed").await;
    let message = failed.status.unwrap().message.unwrap_or_default();
    assert!(message.contains("mallory may not create deployments in namespace ops"), "{message}");
    assert!(Api::<Deployment>::namespaced(harness.admin.clone(), "ops")
        .get_opt("plumbus-operator")
        .await
        .expect("get")
        .is_none());

    // Forging the author record does not help: the webhook writes who made the change.
    let forged = csv("ops", &[("AllNamespaces", true)]).replace(
        "annotations: {alm-examples",
        "annotations: {v2alpha1.operators.coreos.com/creator: '{\"username\":\"kubernetes-admin\",\"groups\":[\"system:masters\"]}', alm-examples",
    ).replace("1.0.0\"}]", "1.0.1\"}]");
    let output = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(&forged));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops");
    let written = csvs.get("plumbus.v1.0.0").await.expect("csv");
    let author =
        written.metadata.annotations.unwrap().get("v2alpha1.operators.coreos.com/creator").cloned().unwrap_or_default();
    assert!(author.contains("\"mallory\""), "{author}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(Api::<Deployment>::namespaced(harness.admin.clone(), "ops")
        .get_opt("plumbus-operator")
        .await
        .expect("get")
        .is_none());

    // The same CSV re-applied by the admin installs.
    apply(&harness, &csv("ops", &[("AllNamespaces", true)]));
    wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
}

async fn wait_copy(harness: &Harness, namespace: &str, present: bool) -> Option<ClusterServiceVersion> {
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), namespace);
    for _ in 0..400 {
        let copy = csvs.get_opt("plumbus.v1.0.0").await.expect("get");
        let ok = match &copy {
            Some(copy) => present && copy.status.as_ref().is_some_and(|s| s.phase == CsvPhase::Succeeded),
            None => !present,
        };
        if ok {
            return copy;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let last = csvs.get_opt("plumbus.v1.0.0").await.expect("get");
    for record in harness.plane.api.audit.records() {
        if record.resource == "clusterserviceversions" && matches!(record.verb.as_str(), "delete" | "update" | "create")
        {
            eprintln!(
                "{} {} {}/{} {} {}",
                record.user, record.verb, record.namespace, record.name, record.subresource, record.code
            );
        }
    }
    panic!(
        "the copy in {namespace} never became {}; last: {}",
        if present { "present and Succeeded" } else { "absent" },
        serde_json::to_string_pretty(&last.map(|copy| copy.status)).unwrap()
    );
}

/// OLM's "CSV copy watching all namespaces", "copied csv … is synchronized with the original csv" and "Disabling
/// copied CSVs" scenarios: copies everywhere, put back when changed, made in new namespaces, gone when disabled
/// (kept in a protected namespace) and back when enabled, gone with their original.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn copies_follow_the_original_everywhere_and_the_olm_config_switches_them() {
    if std::env::var_os("OLMV2_TEST_LOG").is_some() {
        olmv2::telemetry::init(olmv2::telemetry::LogFormat::Text);
    }
    let harness = Harness::start_configured(
        "legacy",
        "copies",
        &["ops", "team-a", "team-b"],
        Duration::from_secs(30),
        Box::new(|options, _| options.protected_copied_csv_namespaces = vec!["team-b".into()]),
    )
    .await;
    apply(&harness, CRD);
    apply(&harness, &account("ops", true));
    apply(
        &harness,
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\nspec: {}\n",
    );
    apply(&harness, &csv("ops", &[("AllNamespaces", true)]));
    wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
    let copy = wait_copy(&harness, "team-a", true).await.expect("copy");
    let status = copy.status.clone().unwrap();
    assert_eq!(status.reason.as_deref(), Some("Copied"));
    assert_eq!(status.message.as_deref(), Some("The operator is running in ops but is managing this namespace"));
    let labels = copy.metadata.labels.clone().unwrap();
    assert_eq!(labels.get("olm.copiedFrom").map(String::as_str), Some("ops"));
    let annotations = copy.metadata.annotations.clone().unwrap();
    assert_eq!(annotations.get("olm.operatorNamespace").map(String::as_str), Some("ops"));
    assert!(!annotations.contains_key("olm.targetNamespaces"));
    assert!(
        !annotations.contains_key("v2alpha1.operators.coreos.com/creator"),
        "the author is not shown to every namespace"
    );
    wait_copy(&harness, "default", true).await;
    let listed = kubectl(&harness, &["get", "csv", "-n", "team-a"]);
    assert!(listed.contains("plumbus.v1.0.0") && listed.contains("Succeeded"), "{listed}");

    // A copy changed by hand is put back; one deleted is made again; a new namespace gets its copy.
    kubectl(&harness, &["label", "csv", "plumbus.v1.0.0", "-n", "team-a", "tampered=yes"]);
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "team-a");
    harness
        .wait_for(&csvs, "plumbus.v1.0.0", "put back", |c| {
            !c.metadata.labels.as_ref().is_some_and(|l| l.contains_key("tampered"))
        })
        .await;
    kubectl(&harness, &["delete", "csv", "plumbus.v1.0.0", "-n", "team-a", "--wait=false"]);
    wait_copy(&harness, "team-a", true).await;
    kubectl(&harness, &["create", "namespace", "team-c"]);
    wait_copy(&harness, "team-c", true).await;

    // Disabled: copies go but in the protected namespace; a Warning event; the OLMConfig condition.
    apply(&harness, "apiVersion: operators.coreos.com/v1\nkind: OLMConfig\nmetadata: {name: cluster}\nspec: {features: {disableCopiedCSVs: true}}\n");
    wait_copy(&harness, "team-a", false).await;
    wait_copy(&harness, "team-c", false).await;
    wait_copy(&harness, "team-b", true).await;
    let event = harness.wait_event("ops", "DisabledCopiedCSVs").await;
    assert_eq!(event.note.as_deref(), Some("CSV copying disabled for ops/plumbus.v1.0.0"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let configs = Api::<olmv2::api::v1::OLMConfig>::all(harness.admin.clone());
    let condition = |status: &str, reason: &str| {
        let (status, reason) = (status.to_owned(), reason.to_owned());
        move |config: &olmv2::api::v1::OLMConfig| {
            config.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| c.type_ == "DisabledCopiedCSVs" && c.status == status && c.reason == reason)
            })
        }
    };
    let config =
        harness.wait_for(&configs, "cluster", "reporting copies off", condition("True", "CopiedCSVsDisabled")).await;
    let message = &config.status.unwrap().conditions[0].message;
    assert_eq!(message, "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode");

    // Enabled again: copies come back.
    kubectl(
        &harness,
        &[
            "patch",
            "olmconfig",
            "cluster",
            "--type=merge",
            "-p",
            r#"{"spec":{"features":{"disableCopiedCSVs":false}}}"#,
        ],
    );
    wait_copy(&harness, "team-a", true).await;
    wait_copy(&harness, "team-c", true).await;
    harness.wait_for(&configs, "cluster", "reporting copies on", condition("False", "CopiedCSVsEnabled")).await;

    // The original goes, and its copies with it.
    kubectl(&harness, &["delete", "csv", "plumbus.v1.0.0", "-n", "ops"]);
    wait_copy(&harness, "team-a", false).await;
    wait_copy(&harness, "team-b", false).await;
}

/// OLM's upgrade along `spec.replaces`: the new CSV waits for the old to go Replacing, installs, and the old one
/// is deleted once the new one Succeeded; the Deployment of the same name passes to the new CSV and stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upgrade_replaces_the_old_csv_and_keeps_the_deployment() {
    let harness = start("upgrade").await;
    apply(&harness, CRD);
    apply(&harness, &account("ops", true));
    apply(
        &harness,
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\nspec: {}\n",
    );
    apply(&harness, &csv("ops", &[("AllNamespaces", true)]));
    wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
    let next = csv("ops", &[("AllNamespaces", true)])
        .replace("name: plumbus.v1.0.0", "name: plumbus.v1.1.0")
        .replace("version: 1.0.0", "version: 1.1.0\n  replaces: plumbus.v1.0.0")
        .replace("plumbus:1.0.0", "plumbus:1.1.0");
    apply(&harness, &next);

    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops");
    let deployments = Api::<Deployment>::namespaced(harness.admin.clone(), "ops");
    let mut replacing_seen = None;
    for _ in 0..400 {
        harness.roll_out("ops").await;
        if let Some(old) = csvs.get_opt("plumbus.v1.0.0").await.expect("get") {
            let status = old.status.unwrap_or_default();
            if status.phase == CsvPhase::Replacing {
                replacing_seen = status.message;
            }
        } else if csvs
            .get_opt("plumbus.v1.1.0")
            .await
            .expect("get")
            .is_some_and(|new| new.status.is_some_and(|s| s.phase == CsvPhase::Succeeded))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(replacing_seen.as_deref(), Some("being replaced by csv: plumbus.v1.1.0"));
    assert!(csvs.get_opt("plumbus.v1.0.0").await.expect("get").is_none(), "the replaced CSV is deleted");
    let new = csvs.get("plumbus.v1.1.0").await.expect("new");
    let history: Vec<CsvPhase> = new.status.unwrap().conditions.iter().map(|c| c.phase).collect();
    assert!(history.ends_with(&[CsvPhase::Succeeded]), "{history:?}");
    // The Deployment stayed, now the new CSV's, with its image.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let deployment = deployments.get("plumbus-operator").await.expect("the Deployment survives the old CSV");
    let owners: Vec<String> =
        deployment.metadata.owner_references.unwrap_or_default().into_iter().map(|o| o.name).collect();
    assert_eq!(owners, ["plumbus.v1.1.0"]);
    let image = deployment.spec.unwrap().template.spec.unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("example.com/plumbus:1.1.0"));
}

/// OLM's "intersection" and "role aggregation" scenarios: two groups whose targets intersect may not provide the
/// same API (the later CSV fails `InterOperatorGroupOwnerConflict` and heals when the first goes), and a namespace
/// admin can use the provided API through the roles OLM aggregates into `admin`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intersecting_groups_may_not_provide_the_same_api_and_admins_get_the_provided_api() {
    let harness = start("intersection").await;
    apply(&harness, CRD);
    apply(&harness, &account("team-a", true));
    apply(&harness, &account("ops", true));
    apply(&harness, "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og-a, namespace: team-a}\nspec: {targetNamespaces: [team-a]}\n");
    apply(&harness, &csv("team-a", &[("OwnNamespace", true), ("AllNamespaces", true)]));
    wait_phase(&harness, "team-a", CsvPhase::Succeeded, "InstallSucceeded").await;
    let groups = Api::<OperatorGroup>::namespaced(harness.admin.clone(), "team-a");
    let provided = |g: &OperatorGroup| g.metadata.annotations.as_ref().and_then(|a| a.get("olm.providedAPIs")).cloned();
    assert_eq!(provided(&groups.get("og-a").await.expect("og")).as_deref(), Some("Plumbus.v1.example.com"));

    // A namespace admin of team-a may now use plumbuses there: the CRD's roles aggregate into `admin`.
    apply(
        &harness,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: alice-admin, namespace: team-a}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}\nsubjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: alice}]\n",
    );
    let mut answer = String::new();
    for _ in 0..100 {
        let output = harness.admin_kubectl(
            &["auth", "can-i", "create", "plumbuses.example.com", "-n", "team-a", "--as", "alice"],
            None,
        );
        answer = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if answer == "yes" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(answer, "yes", "an admin of team-a may create plumbuses");

    // A global group in ops intersects team-a: its CSV providing the same API fails and installs nothing.
    apply(
        &harness,
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\nspec: {}\n",
    );
    apply(&harness, &csv("ops", &[("AllNamespaces", true)]));
    let failed = wait_phase(&harness, "ops", CsvPhase::Failed, "InterOperatorGroupOwnerConflict").await;
    assert_eq!(failed.status.unwrap().message.as_deref(), Some("intersecting operatorgroups provide the same apis"));
    assert!(Api::<Deployment>::namespaced(harness.admin.clone(), "ops")
        .get_opt("plumbus-operator")
        .await
        .expect("get")
        .is_none());

    // The first goes: its group's provided APIs are pruned, and the second heals and installs.
    kubectl(&harness, &["delete", "csv", "plumbus.v1.0.0", "-n", "team-a"]);
    harness.wait_for(&groups, "og-a", "pruned", |g| provided(g).as_deref() == Some("")).await;
    let healed = wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
    assert!(healed
        .status
        .unwrap()
        .conditions
        .iter()
        .any(|c| c.message.as_deref() == Some("OperatorGroup no longer intersecting with conflicting owner")));
}

/// The RBAC an OLM v0 InstallPlan would have made for `csv`'s permissions in `namespace` (OLM's CSV loop only checks
/// it): a Role and RoleBinding per namespaced entry, a ClusterRole and ClusterRoleBinding per cluster entry.
fn install_plan_rbac(csv: &ClusterServiceVersion, namespace: &str) -> Vec<serde_json::Value> {
    use serde_json::json;
    let strategy = &csv.spec.install.spec;
    let mut objects = Vec::new();
    let mut accounts: Vec<&str> = Vec::new();
    for (index, (permission, cluster)) in strategy
        .permissions
        .iter()
        .map(|p| (p, false))
        .chain(strategy.cluster_permissions.iter().map(|p| (p, true)))
        .enumerate()
    {
        let account = permission.service_account_name.as_str();
        if !accounts.contains(&account) {
            accounts.push(account);
        }
        let name = format!("{account}-{index}");
        let subject = json!([{"kind": "ServiceAccount", "name": account, "namespace": namespace}]);
        let (role_kind, binding_kind) =
            if cluster { ("ClusterRole", "ClusterRoleBinding") } else { ("Role", "RoleBinding") };
        let metadata = if cluster { json!({"name": name}) } else { json!({"name": name, "namespace": namespace}) };
        objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": role_kind, "metadata": metadata, "rules": permission.rules}));
        objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": binding_kind, "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name}, "subjects": subject}));
    }
    for account in accounts {
        objects.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": namespace}}));
    }
    objects
}

/// Real bundles of the community catalog, their manifests applied by hand as OLM v0 users do (CRDs and other objects
/// with kubectl, the CSV last), install with OLM's phases, copies and annotations.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn real_community_bundles_applied_by_hand_install_as_in_olm() {
    let harness = start("community").await;
    apply(
        &harness,
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\nspec: {}\n",
    );
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata/community-bundles");
    for (bundle, version) in
        [("ack-mq-controller", "1.5.1"), ("dapr-kubernetes-operator", "0.0.13"), ("debezium-operator", "3.0.0-final")]
    {
        let dir = root.join(bundle).join(version);
        let loaded = olmv2::bundle::model::Bundle::load(&dir).expect("bundle loads");
        for object in install_plan_rbac(&loaded.csv, "ops") {
            olmv2_e2e::project::create(&harness.plane, &object).await.expect("rbac");
        }
        for manifest in &loaded.objects {
            let output = harness
                .admin_kubectl(&["apply", "--server-side", "-n", "ops", "-f", "-"], Some(&manifest.object.to_string()));
            assert!(output.status.success(), "{}: {}", manifest.file, String::from_utf8_lossy(&output.stderr));
        }
        // The CSV as written in the bundle, its `namespace: placeholder` replaced as users do.
        let mut csv = serde_json::to_value(&loaded.csv).expect("csv");
        csv["metadata"]["namespace"] = "ops".into();
        let output = harness.admin_kubectl(&["apply", "--server-side", "-f", "-"], Some(&csv.to_string()));
        assert!(output.status.success(), "{bundle}: {}", String::from_utf8_lossy(&output.stderr));
        let name = loaded.csv.metadata.name.clone().expect("name");
        let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops");
        let mut last = None;
        for _ in 0..600 {
            harness.roll_out("ops").await;
            last = csvs.get_opt(&name).await.expect("get");
            if last
                .as_ref()
                .and_then(|csv| csv.status.as_ref())
                .is_some_and(|status| status.phase == CsvPhase::Succeeded)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let installed = last.expect("the CSV");
        let status = installed.status.clone().unwrap_or_default();
        assert_eq!(status.phase, CsvPhase::Succeeded, "{bundle}: {:?} {:?}", status.reason, status.message);
        assert_eq!(
            installed.metadata.annotations.as_ref().and_then(|a| a.get("olm.targetNamespaces")).map(String::as_str),
            Some("")
        );
        for spec in &loaded.csv.spec.install.spec.deployments {
            let deployment =
                Api::<Deployment>::namespaced(harness.admin.clone(), "ops").get(&spec.name).await.expect("deployment");
            let annotations = deployment.spec.unwrap().template.metadata.unwrap().annotations.unwrap_or_default();
            assert_eq!(annotations.get("olm.operatorGroup").map(String::as_str), Some("og"), "{bundle}");
            if let Some(examples) = loaded.csv.metadata.annotations.as_ref().and_then(|a| a.get("alm-examples")) {
                assert_eq!(
                    annotations.get("alm-examples"),
                    Some(examples),
                    "{bundle}: the CSV's annotations reach the pods"
                );
            }
        }
        let copies = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "team-a");
        harness
            .wait_for(&copies, &name, "copied", |copy| {
                copy.status.as_ref().is_some_and(|s| s.reason.as_deref() == Some("Copied"))
            })
            .await;
    }
}
