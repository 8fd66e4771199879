//! OperatorGroups: targets and namespace labels, membership and install modes, intersection and aggregated roles.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::Api;
use olmv2::api::v1::OperatorGroup;
use olmv2::api::v1alpha1::{ClusterServiceVersion, CsvPhase};
use olmv2::legacy::roles::group_role_name;

use super::{account, apply, csv, kubectl, start, wait_phase, CRD, GLOBAL_GROUP};

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
    // Deleting the group removes the labels it made, and its aggregating ClusterRoles, as OLM's
    // operatorGroupDeleted does.
    kubectl(&harness, &["delete", "operatorgroup", "og", "-n", "ops"]);
    harness
        .wait_for(&namespaces, "team-b", "unlabelled", |ns| {
            !ns.metadata.labels.as_ref().is_some_and(|l| l.contains_key(&label))
        })
        .await;
    for suffix in ["admin", "edit", "view"] {
        harness.wait_gone(&roles, &group_role_name("ops", "og", suffix), "its group was deleted").await;
    }
    // A ClusterRole labelled as the gone group's without being one of its roles is not deleted: a label alone gets
    // no ClusterRole deleted.
    apply(
        &harness,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: precious\n  labels: \
         {olm.owner: og, olm.owner.namespace: ops, olm.owner.kind: OperatorGroup}\nrules: []\n",
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(roles.get_opt("precious").await.unwrap().is_some(), "a label alone gets no ClusterRole deleted");
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
    apply(&harness, GLOBAL_GROUP);
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
