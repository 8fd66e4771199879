//! CSVs: requirements resolved through RBAC, the author check, upgrades along `spec.replaces`, real bundles.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::Api;
use olmv2::api::v1alpha1::{ClusterServiceVersion, CsvPhase};

use super::{
    account, apply, bound_to, csv, csv_writer, installed_globally, kubectl, start, wait_phase, CRD, GLOBAL_GROUP,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn insufficient_permissions_wait_in_pending_until_rbac_grants_them() {
    let harness = start("permissions").await;
    apply(&harness, CRD);
    apply(&harness, &account("ops", false));
    apply(&harness, GLOBAL_GROUP);
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

/// RBAC labelled as a CSV's (`olm.owner*`, as OLM v0's InstallPlan labels what it makes for `clusterPermissions`)
/// wakes the CSV when it changes, cluster-scoped as well as namespaced, as OLM's `requeueOwnerCSVs` does: a
/// Succeeded CSV whose ClusterRoleBinding is deleted fails with `requirements no longer met` long before its resync.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_succeeded_csv_whose_cluster_rbac_goes_fails_at_once() {
    let harness = start("cluster-rbac").await;
    apply(&harness, CRD);
    apply(&harness, &account("ops", false));
    apply(&harness, GLOBAL_GROUP);
    apply(&harness, &csv("ops", &[("AllNamespaces", true)]));
    wait_phase(&harness, "ops", CsvPhase::Pending, "RequirementsNotMet").await;
    let owned = "labels: {olm.owner: plumbus.v1.0.0, olm.owner.namespace: ops, olm.owner.kind: ClusterServiceVersion}";
    apply(
        &harness,
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: plumbus-cluster, {owned}}}\n\
             rules: [{{apiGroups: [\"\"], resources: [configmaps], verbs: [get, list]}}]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: plumbus-cluster, {owned}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: plumbus-cluster}}\n\
             subjects: [{{kind: ServiceAccount, name: plumbus, namespace: ops}}]\n"
        ),
    );
    wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
    // Every status the CSV takes, from a watch started before the deletion: Failed is a phase the next pass leaves
    // (for Pending, as OLM's does), too briefly for a poll to be sure to see it.
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops");
    let config = kube::runtime::watcher::Config::default().fields("metadata.name=plumbus.v1.0.0");
    let mut statuses = Box::pin(kube::runtime::watcher(csvs, config));
    while let Some(event) = statuses.next().await {
        if matches!(event, Ok(kube::runtime::watcher::Event::InitDone)) {
            break;
        }
    }
    let deleted = kubectl(&harness, &["delete", "clusterrolebinding", "plumbus-cluster"]);
    assert!(deleted.contains("deleted"), "{deleted}");
    // Within ten seconds, a third of the resync: woken by the deletion itself.
    let started = std::time::Instant::now();
    let failed = tokio::time::timeout(Duration::from_secs(10), async {
        let mut seen = Vec::new();
        while let Some(Ok(event)) = statuses.next().await {
            if let kube::runtime::watcher::Event::Apply(csv) = event {
                let status = csv.status.unwrap_or_default();
                seen.push((status.phase, status.reason, status.message));
                if seen.last().is_some_and(|(phase, _, _)| *phase == CsvPhase::Failed) {
                    break;
                }
            }
        }
        seen
    })
    .await
    .expect("a Failed status within ten seconds of the deletion");
    assert_eq!(
        failed.last().map(|(phase, reason, message)| (*phase, reason.as_deref(), message.as_deref())),
        Some((CsvPhase::Failed, Some("RequirementsNotMet"), Some("requirements no longer met"))),
        "within {:?} of the deletion: {failed:?}",
        started.elapsed()
    );
}

/// The attack: a user who may write CSVs in a namespace but not Deployments gets no Deployment made for them by
/// the controller (OLM v0 would create it with its own rights).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_author_who_may_not_create_deployments_gets_none() {
    let harness = start("author").await;
    apply(&harness, CRD);
    apply(&harness, &account("ops", true));
    apply(&harness, GLOBAL_GROUP);
    apply(&harness, &csv_writer("mallory"));
    let mallory = harness.plane.user_kubeconfig("mallory", &[]);
    let output = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(&csv("ops", &[("AllNamespaces", true)])));
    assert!(output.status.success(), "mallory may write CSVs: {}", String::from_utf8_lossy(&output.stderr));
    let failed = wait_phase(&harness, "ops", CsvPhase::Failed, "InstallComponentFailed").await;
    let message = failed.status.unwrap().message.unwrap_or_default();
    assert!(message.contains("mallory may not create deployments.apps in namespace ops"), "{message}");
    // It stays failed, unwritten, while nothing changes (no round through Pending on every retry).
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops");
    let version = csvs.get("plumbus.v1.0.0").await.expect("csv").metadata.resource_version;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(csvs.get("plumbus.v1.0.0").await.expect("csv").metadata.resource_version, version);
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

/// The attack: a namespace admin who may run an operator in their namespace writes a CSV claiming a CRD they hold
/// no rights on (they may create ClusterRoles, as kube-apiserver allows only with rules they hold). OLM v0 would then make the CRD's per-API ClusterRoles, aggregated into `admin`, `edit` and `view`,
/// and every namespace admin of the cluster could use (here: edit) resources nobody granted them. The roles are made
/// only for an author who could make them by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_author_may_not_widen_admin_edit_and_view_through_a_claimed_crd() {
    let harness = start("claimed-crd").await;
    apply(&harness, CRD);
    apply(&harness, &account("ops", true));
    apply(&harness, GLOBAL_GROUP);
    apply(&harness, &bound_to("mallory", "admin", "ops"));
    apply(&harness, &csv_writer("mallory"));
    apply(&harness, &bound_to("eve", "edit", "team-a"));
    apply(
        &harness,
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: role-maker}
rules: [{apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], verbs: [create]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: mallory-role-maker}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: role-maker}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: mallory}]
"#,
    );
    let mallory = harness.plane.user_kubeconfig("mallory", &[]);
    let output = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(&csv("ops", &[("AllNamespaces", true)])));
    assert!(output.status.success(), "mallory may write CSVs: {}", String::from_utf8_lossy(&output.stderr));
    // Mallory may run the operator: its Deployment is made and the CSV succeeds.
    wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;

    let roles = Api::<ClusterRole>::all(harness.admin.clone());
    let mut described = String::new();
    for _ in 0..200 {
        described = kubectl(&harness, &["describe", "csv", "-n", "ops", "plumbus.v1.0.0"]);
        if described.contains("APIClusterRolesRefused") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let events = described.split("Events:").nth(1).unwrap_or_default().to_owned();
    assert!(events.contains("APIClusterRolesRefused"), "no refusal event in:\n{described}");
    assert!(
        events.contains(
            "author mallory does not hold [\"*\"] on [\"plumbuses\"] in group [\"example.com\"] cluster-wide"
        ),
        "{described}"
    );
    for suffix in ["admin", "edit", "view", "crdview"] {
        let name = format!("plumbuses.example.com-v1-{suffix}");
        assert!(roles.get_opt(&name).await.expect("get").is_none(), "{name} was made for mallory");
    }
    let can_i = |user: &str| {
        let output = harness
            .admin_kubectl(&["auth", "can-i", "create", "plumbuses.example.com", "-n", "team-a", "--as", user], None);
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    assert_eq!(can_i("eve"), "no", "edit in team-a does not reach plumbuses");

    // An admin who holds those rules takes the CSV over (a change of its spec makes them its author): the roles
    // are made, and edit now reaches plumbuses.
    let taken_over =
        csv("ops", &[("AllNamespaces", true)]).replace("displayName: Plumbus", "displayName: Plumbus Operator");
    apply(&harness, &taken_over);
    harness.wait_for(&roles, "plumbuses.example.com-v1-edit", "made for the admin", |_| true).await;
    for _ in 0..100 {
        if can_i("eve") == "yes" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(can_i("eve"), "yes", "the aggregated edit role reaches plumbuses once an admin authored the CSV");
}

/// OLM's upgrade along `spec.replaces`: the new CSV waits for the old to go Replacing, installs, and the old one
/// is deleted once the new one Succeeded; the Deployment of the same name passes to the new CSV and stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upgrade_replaces_the_old_csv_and_keeps_the_deployment() {
    let harness = start("upgrade").await;
    installed_globally(&harness).await;
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

/// Applies a bundle of the shared test data by hand in `ops`, as an OLM v0 user without InstallPlans would: the RBAC
/// an InstallPlan would have made, the bundle's other manifests, then its CSV (its `namespace: placeholder`
/// replaced). Returns the bundle and the CSV as applied.
pub(super) async fn apply_bundle_by_hand(
    harness: &crate::support::harness::Harness,
    dir: &std::path::Path,
) -> (olmv2::bundle::model::Bundle, serde_json::Value) {
    let loaded = olmv2::bundle::model::Bundle::load(dir).expect("bundle loads");
    for object in install_plan_rbac(&loaded.csv, "ops") {
        harness.create(&object).await;
    }
    for manifest in &loaded.objects {
        let output = harness
            .admin_kubectl(&["apply", "--server-side", "-n", "ops", "-f", "-"], Some(&manifest.object.to_string()));
        assert!(output.status.success(), "{}: {}", manifest.file, String::from_utf8_lossy(&output.stderr));
    }
    let mut csv = serde_json::to_value(&loaded.csv).expect("csv");
    csv["metadata"]["namespace"] = "ops".into();
    let output = harness.admin_kubectl(&["apply", "--server-side", "-f", "-"], Some(&csv.to_string()));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    (loaded, csv)
}

/// The RBAC an OLM v0 InstallPlan would have made for `csv`'s permissions in `namespace` (OLM's CSV loop only checks
/// it): a Role and RoleBinding per namespaced entry, a ClusterRole and ClusterRoleBinding per cluster entry.
pub(super) fn install_plan_rbac(csv: &ClusterServiceVersion, namespace: &str) -> Vec<serde_json::Value> {
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
    apply(&harness, GLOBAL_GROUP);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata/community-bundles");
    for (bundle, version) in
        [("ack-mq-controller", "1.5.1"), ("dapr-kubernetes-operator", "0.0.13"), ("debezium-operator", "3.0.0-final")]
    {
        let (loaded, _) = apply_bundle_by_hand(&harness, &root.join(bundle).join(version)).await;
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

/// OLM's "create with unmet requirements min kube version" and "… native API": the CSV waits in Pending with OLM's
/// requirement entries, and installs once the requirement is one the cluster meets.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unmet_kube_version_and_native_apis_wait_in_pending() {
    let harness = start("platform").await;
    apply(&harness, CRD);
    apply(&harness, &account("ops", true));
    apply(&harness, GLOBAL_GROUP);
    let demanding = csv("ops", &[("AllNamespaces", true)]).replace(
        "  displayName: Plumbus\n",
        "  displayName: Plumbus\n  minKubeVersion: 99.0.0\n  nativeAPIs: [{group: apps, version: v1, kind: Deployment}, {group: nothing.example.com, version: v1, kind: Nothing}]\n",
    );
    apply(&harness, &demanding);
    let waiting = wait_phase(&harness, "ops", CsvPhase::Pending, "RequirementsNotMet").await;
    let status = waiting.status.unwrap();
    let kube =
        status.requirement_status.iter().find(|r| r.kind == "ClusterServiceVersion").expect("kube version entry");
    assert_eq!(kube.status, "PresentNotSatisfied");
    assert!(
        kube.message.starts_with("CSV version requirement not met: minKubeVersion (99.0.0) > server version (1."),
        "{}",
        kube.message
    );
    let native: Vec<(&str, &str, &str)> = status
        .requirement_status
        .iter()
        .filter(|r| r.name.starts_with("v1.") && r.kind != "APIService")
        .map(|r| (r.name.as_str(), r.status.as_str(), r.message.as_str()))
        .collect();
    assert_eq!(
        native,
        [
            ("v1.apps", "Present", "Native API exists"),
            ("v1.nothing.example.com", "NotPresent", "Native API does not exist")
        ]
    );

    let reasonable = csv("ops", &[("AllNamespaces", true)]).replace(
        "  displayName: Plumbus\n",
        "  displayName: Plumbus\n  minKubeVersion: 1.20.0\n  nativeAPIs: [{group: apps, version: v1, kind: Deployment}]\n",
    );
    apply(&harness, &reasonable);
    let installed = wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
    let kube = installed
        .status
        .unwrap()
        .requirement_status
        .into_iter()
        .find(|r| r.kind == "ClusterServiceVersion")
        .expect("entry");
    assert!(kube.message.starts_with("CSV minKubeVersion (1.20.0) less than server version (v1."), "{}", kube.message);
}

/// OLM's "create with unmet requirements CRD" and "create requirements met CRD": a CSV owning a CRD that does not
/// exist waits in Pending and makes no Deployment; the CRD created, it installs; the CRD deleted, it fails
/// `RequirementsNotMet` and waits again; the CRD back, it installs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_waits_for_its_crd_and_follows_it_when_it_goes_and_comes_back() {
    let harness = start("crd-requirement").await;
    apply(&harness, &account("ops", true));
    apply(&harness, GLOBAL_GROUP);
    apply(&harness, &csv("ops", &[("AllNamespaces", true)]));
    let waiting = wait_phase(&harness, "ops", CsvPhase::Pending, "RequirementsNotMet").await;
    let crd_entry = |csv: &ClusterServiceVersion| {
        let status = csv.status.clone().unwrap_or_default();
        let entry =
            status.requirement_status.into_iter().find(|r| r.kind == "CustomResourceDefinition").expect("CRD entry");
        (entry.name, entry.status, entry.message)
    };
    assert_eq!(
        crd_entry(&waiting),
        ("plumbuses.example.com".to_owned(), "NotPresent".to_owned(), "CRD is not present".to_owned())
    );
    let deployments = Api::<Deployment>::namespaced(harness.admin.clone(), "ops");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(deployments.get_opt("plumbus-operator").await.expect("get").is_none(), "nothing installed");

    apply(&harness, CRD);
    let installed = wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
    assert_eq!(
        crd_entry(&installed),
        (
            "plumbuses.example.com".to_owned(),
            "Present".to_owned(),
            "CRD is present and Established condition is true".to_owned()
        )
    );

    kubectl(&harness, &["delete", "crd", "plumbuses.example.com", "--wait=true"]);
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops");
    let mut failed_seen = false;
    for _ in 0..400 {
        let status = csvs.get("plumbus.v1.0.0").await.expect("csv").status.unwrap_or_default();
        failed_seen |= status.phase == CsvPhase::Failed && status.reason.as_deref() == Some("RequirementsNotMet");
        if failed_seen && status.phase == CsvPhase::Pending {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let history = csvs.get("plumbus.v1.0.0").await.expect("csv").status.unwrap_or_default().conditions;
    let lost =
        history.iter().rev().take(2).map(|c| (c.phase, c.reason.clone().unwrap_or_default())).collect::<Vec<_>>();
    assert_eq!(
        lost,
        [(CsvPhase::Pending, "RequirementsNotMet".to_owned()), (CsvPhase::Failed, "RequirementsNotMet".to_owned())],
        "Failed/RequirementsNotMet, then Pending, as OLM"
    );

    apply(&harness, CRD);
    wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
}
