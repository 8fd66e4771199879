//! The Operator controller end to end, on the test control plane, with a real registry (bundle and catalog images)
//! and the real kubectl: an Operator applied for plumbus from a catalog image waits for approval, installs, shows
//! its components and metadata; a newer catalog brings an update that asks for approval again; naming a
//! CatalogSource needs the `install` verb; legacy objects get the component label projected; deleting the Operator
//! removes what its Install applied but the CRDs.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::time::Duration;

use crate::support;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::core::DynamicObject;
use olmv2::api::v2alpha1::{Install, Operator, OperatorState};
use serde_json::{json, Value};
use support::emulator::kubectl::text;
use support::harness::Harness;

pub(crate) async fn start(name: &str) -> Harness {
    Harness::start("operator", name, &["operators", "catalogs"], Duration::from_secs(1)).await
}

/// Pushes the sample plumbus bundle of `version` as `plumbus-bundle:<version>`.
async fn push_bundle(harness: &Harness, version: &str) -> String {
    harness.push_bundle(&format!("plumbus/{version}"), "plumbus-bundle", version).await
}

/// Pushes a File-Based Catalog of plumbus with `channels` (name → entries) to `catalog:latest`.
pub(crate) async fn push_catalog(harness: &Harness, channels: &[(&str, Value)], bundles: &[(&str, &str, &str)]) {
    let configs = harness.dir.join(format!("configs-{}", bundles.len() * 10 + channels.len()));
    let package_dir = configs.join("plumbus");
    std::fs::create_dir_all(&package_dir).expect("configs");
    let mut blobs = vec![json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"})];
    for (name, entries) in channels {
        blobs.push(json!({"schema": "olm.channel", "package": "plumbus", "name": name, "entries": entries}));
    }
    for (name, version, image) in bundles {
        blobs.push(json!({"schema": "olm.bundle", "package": "plumbus", "name": name, "image": image,
            "properties": [{"type": "olm.package", "value": {"packageName": "plumbus", "version": version}}]}));
    }
    let text: Vec<String> = blobs.iter().map(|blob| serde_json::to_string(blob).unwrap()).collect();
    std::fs::write(package_dir.join("catalog.json"), text.join("\n")).expect("catalog written");
    let image = harness.registry.reference("catalog:latest");
    harness.images().push_catalog(&configs, &image).await.expect("catalog pushed");
}

/// Plumbus 2.0.0-alpha pushed, alone in channel `stable` of a catalog served by `catalogs/community`; answers its
/// image.
pub(crate) async fn serve_alpha(harness: &Harness) -> String {
    let alpha = push_bundle(harness, "2.0.0-alpha").await;
    push_catalog(
        harness,
        &[("stable", json!([{"name": "plumbus.v2.0.0-alpha"}]))],
        &[("plumbus.v2.0.0-alpha", "2.0.0-alpha", &alpha)],
    )
    .await;
    create_catalog_source(harness).await;
    alpha
}

pub(crate) async fn create_catalog_source(harness: &Harness) {
    let source = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "community", "namespace": "catalogs"},
        "spec": {"sourceType": "grpc", "image": harness.registry.reference("catalog:latest"),
                 "updateStrategy": {"registryPoll": {"interval": "1s"}}}});
    harness.create(&source).await;
}

pub(crate) fn operators(harness: &Harness) -> Api<Operator> {
    Api::all(harness.admin.clone())
}

pub(crate) async fn wait_operator(
    harness: &Harness,
    name: &str,
    what: &str,
    done: impl Fn(&Operator) -> bool,
) -> Operator {
    harness.wait_for(&operators(harness), name, what, done).await
}

pub(crate) fn condition<'a>(
    operator: &'a Operator,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    operator.status.as_ref()?.conditions.iter().find(|condition| condition.type_ == type_)
}

pub(crate) fn has_condition(operator: &Operator, type_: &str, status: &str, reason: &str) -> bool {
    condition(operator, type_).is_some_and(|c| c.status == status && c.reason == reason)
}

pub(crate) fn state(operator: &Operator) -> Option<OperatorState> {
    operator.status.as_ref()?.state
}

pub(crate) fn refs_of_kind(operator: &Operator, kind: &str) -> Vec<String> {
    let components = operator.status.as_ref().and_then(|status| status.components.as_ref());
    components.map(|c| c.refs.iter().filter(|r| r.kind == kind).map(|r| r.name.clone()).collect()).unwrap_or_default()
}

pub(crate) const OPERATOR_YAML: &str = "apiVersion: operators.coreos.com/v2alpha1
kind: Operator
metadata:
  name: plumbus
spec:
  updates:
    type: CatalogSource
    catalogSource:
      package: plumbus
      channel: stable
      approval: Automatic
      ref:
        name: community
        namespace: catalogs
";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_from_a_catalog_installs_after_approval_and_an_update_needing_more_asks_again() {
    let harness = start("catalog").await;
    let alpha = push_bundle(&harness, "2.0.0-alpha").await;
    let release = push_bundle(&harness, "2.1.0").await;
    push_catalog(
        &harness,
        &[
            ("stable", json!([{"name": "plumbus.v2.0.0-alpha"}])),
            ("fast", json!([{"name": "plumbus.v2.0.0-alpha"}, {"name": "plumbus.v2.1.0", "replaces": "plumbus.v2.0.0-alpha"}])),
        ],
        &[("plumbus.v2.0.0-alpha", "2.0.0-alpha", &alpha), ("plumbus.v2.1.0", "2.1.0", &release)],
    ).await;
    create_catalog_source(&harness).await;

    let applied = harness.admin_kubectl(&["apply", "-f", "-"], Some(OPERATOR_YAML));
    assert!(applied.status.success(), "{}", text(&applied));
    let pending = wait_operator(&harness, "plumbus", "pending approval", |o| {
        has_condition(o, "InstallPendingApproval", "True", "PrivilegeEscalationRequired")
    })
    .await;
    assert_eq!(state(&pending), Some(OperatorState::PendingApproval));
    assert_eq!(refs_of_kind(&pending, "Install"), vec!["plumbus".to_owned()], "the Install is a component");
    let install = Api::<Install>::all(harness.admin.clone()).get("plumbus").await.expect("the Operator's Install");
    assert_eq!(install.spec.content[0].manifest_image.as_deref(), Some(alpha.as_str()));
    assert_eq!(install.owner_references_names(), vec!["plumbus".to_owned()]);
    assert!(has_condition(&pending, "UpdateAvailable", "True", "UpdateFoundInAnotherChannel"), "{:?}", pending.status);
    let available = &pending.status.as_ref().unwrap().updates.as_ref().expect("updates").available;
    assert_eq!((available[0].channel.as_str(), available[0].version.as_deref()), ("fast", Some("2.1.0")));

    let approved = harness.admin_kubectl(
        &["patch", "install", "plumbus", "--type=merge", "-p", r#"{"spec":{"approval":"Approved"}}"#],
        None,
    );
    assert!(approved.status.success(), "{}", text(&approved));
    let mut installed = None;
    for _ in 0..100 {
        harness.roll_out("operators").await;
        let operator = operators(&harness).get("plumbus").await.unwrap();
        if state(&operator) == Some(OperatorState::Installed) && operator.status.as_ref().unwrap().metadata.is_some() {
            installed = Some(operator);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = operators(&harness).get_opt("plumbus").await;
    let installed = installed.unwrap_or_else(|| panic!("never Installed: {last:?}"));
    let metadata = installed.status.as_ref().unwrap().metadata.clone().expect("metadata");
    assert_eq!(metadata.version.as_deref(), Some("2.0.0-alpha"));
    assert_eq!(metadata.display_name.as_deref(), Some("Plumbus"));
    let apis = metadata.apis.expect("apis");
    assert!(apis.provides.iter().any(|api| api.kind == "Plumbus" && api.group == "how.theydoit.com"), "{apis:?}");
    assert!(apis.requires.iter().any(|api| api.kind == "Grumbo"), "{apis:?}");
    assert_eq!(refs_of_kind(&installed, "Deployment").len(), 1);
    assert_eq!(refs_of_kind(&installed, "CustomResourceDefinition"), vec!["plumbai.how.theydoit.com".to_owned()]);
    let components = installed.status.as_ref().unwrap().components.as_ref().unwrap();
    let csv = components.refs.iter().find(|r| r.kind == "ClusterServiceVersion").expect("CSV component");
    assert_eq!(csv.conditions[0].type_, "Succeeded", "the CSV's phase is its condition");
    assert!(csv.uid.is_some() && csv.resource_version.is_some());
    let deployment = components.refs.iter().find(|r| r.kind == "Deployment").unwrap();
    assert!(deployment.conditions.iter().any(|c| c.type_ == "Available" && c.status == "True"));
    let table = text(&harness.admin_kubectl(&["get", "operators"], None));
    assert!(table.contains("VERSION") && table.contains("2.0.0-alpha") && table.contains("Installed"), "{table}");

    // A newer catalog moves stable to 2.1.0, which needs more permission: the update waits for approval again
    // while 2.0.0-alpha keeps running.
    let old_deployment = Api::<Deployment>::namespaced(harness.admin.clone(), "operators")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items[0]
        .clone();
    push_catalog(
        &harness,
        &[(
            "stable",
            json!([{"name": "plumbus.v2.0.0-alpha"}, {"name": "plumbus.v2.1.0", "replaces": "plumbus.v2.0.0-alpha"}]),
        )],
        &[("plumbus.v2.0.0-alpha", "2.0.0-alpha", &alpha), ("plumbus.v2.1.0", "2.1.0", &release)],
    )
    .await;
    let upgrading = wait_operator(&harness, "plumbus", "asking approval of the update", |o| {
        has_condition(o, "InstallPendingApproval", "True", "PrivilegeEscalationRequired")
    })
    .await;
    assert!(has_condition(&upgrading, "UpdateAvailable", "True", "UpdateFoundInChannel"), "{:?}", upgrading.status);
    let updates = upgrading.status.as_ref().unwrap().updates.as_ref();
    assert!(updates.is_none_or(|u| u.available.is_empty()), "no other channel is newer any more: {updates:?}");
    let install = Api::<Install>::all(harness.admin.clone()).get("plumbus").await.unwrap();
    assert_eq!(install.spec.content[0].manifest_image.as_deref(), Some(release.as_str()));
    assert_eq!(install.spec.approval, olmv2::api::v2alpha1::Approval::Unapproved);
    let still = Api::<Deployment>::namespaced(harness.admin.clone(), "operators")
        .get(old_deployment.metadata.name.as_deref().unwrap())
        .await
        .expect("the old Deployment keeps running");
    assert_eq!(still.spec, old_deployment.spec);

    let approved = harness.admin_kubectl(
        &["patch", "install", "plumbus", "--type=merge", "-p", r#"{"spec":{"approval":"Approved"}}"#],
        None,
    );
    assert!(approved.status.success(), "{}", text(&approved));
    let mut upgraded = false;
    for _ in 0..100 {
        harness.roll_out("operators").await;
        let operator = operators(&harness).get("plumbus").await.unwrap();
        let version = operator.status.as_ref().and_then(|s| s.metadata.as_ref()).and_then(|m| m.version.clone());
        if version.as_deref() == Some("2.1.0") && state(&operator) == Some(OperatorState::Installed) {
            assert!(has_condition(&operator, "UpdateAvailable", "False", "UpToDate"), "{:?}", operator.status);
            upgraded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(upgraded, "never upgraded: {:?}", operators(&harness).get_opt("plumbus").await);

    // Deleting the Operator deletes its Install, and with it everything the Install applied but the CRDs.
    operators(&harness).delete("plumbus", &DeleteParams::default()).await.expect("deleted");
    let deployments = Api::<Deployment>::namespaced(harness.admin.clone(), "operators");
    let mut gone = false;
    for _ in 0..200 {
        let install = Api::<Install>::all(harness.admin.clone()).get_opt("plumbus").await.unwrap();
        if install.is_none() && deployments.list(&ListParams::default()).await.unwrap().items.is_empty() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the Install and its Deployment were not collected");
    let crd =
        Api::<CustomResourceDefinition>::all(harness.admin.clone()).get_opt("plumbai.how.theydoit.com").await.unwrap();
    assert!(crd.is_some(), "CRDs stay: deleting them would delete every custom resource of theirs");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(operators(&harness).get_opt("plumbus").await.unwrap().is_none(), "a deleted Operator is not recreated");
}

/// Plumbus 2.0.1 (`push_patch_release`) pushed and added to `stable` after 2.0.0-alpha (`alpha`); answers its image.
pub(crate) async fn serve_patch_release(harness: &Harness, alpha: &str) -> String {
    let patch = push_patch_release(harness).await;
    push_catalog(
        harness,
        &[(
            "stable",
            json!([{"name": "plumbus.v2.0.0-alpha"}, {"name": "plumbus.v2.0.1", "replaces": "plumbus.v2.0.0-alpha"}]),
        )],
        &[("plumbus.v2.0.0-alpha", "2.0.0-alpha", alpha), ("plumbus.v2.0.1", "2.0.1", &patch)],
    )
    .await;
    patch
}

/// Copies plumbus 2.0.0-alpha as 2.0.1 (same content, so no new permission) and pushes it.
async fn push_patch_release(harness: &Harness) -> String {
    let text = |file: &str, text: &str| {
        if file.contains("clusterserviceversion") {
            text.replace("name: plumbus.v2.0.0-alpha", "name: plumbus.v2.0.1")
                .replace("version: 2.0.0-alpha", "version: 2.0.1\n  replaces: plumbus.v2.0.0-alpha")
        } else {
            text.to_owned()
        }
    };
    harness.push_rewritten_bundle("plumbus/2.0.0-alpha", "plumbus-bundle:2.0.1", text, str::to_owned).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_manual_operator_waits_for_a_person_holding_all_each_update_uses() {
    let harness = start("manual").await;
    let alpha = serve_alpha(&harness).await;
    // Manual: every update waits for a person holding every rule the content uses, even one needing nothing new.
    // (An account bound to cluster-admin by hand would not change that: only what was approved for this Install
    // counts.)
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "plumbus-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "plumbus", "namespace": "olmv2-system"}]});
    harness.create(&binding).await;
    let manual = OPERATOR_YAML.replace("approval: Automatic", "approval: Manual");
    let applied = harness.admin_kubectl(&["apply", "-f", "-"], Some(&manual));
    assert!(applied.status.success(), "{}", text(&applied));
    wait_operator(&harness, "plumbus", "waiting for the first manual approval", |o| {
        has_condition(o, "InstallPendingApproval", "True", "UpdateApprovalRequired")
    })
    .await;
    let approve = ["patch", "install", "plumbus", "--type=merge", "-p", r#"{"spec":{"approval":"Approved"}}"#];
    assert!(harness.admin_kubectl(&approve, None).status.success());
    let mut installed = false;
    for _ in 0..100 {
        harness.roll_out("operators").await;
        if state(&operators(&harness).get("plumbus").await.unwrap()) == Some(OperatorState::Installed) {
            installed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(installed, "never Installed");

    let patch = serve_patch_release(&harness, &alpha).await;
    let waiting = wait_operator(&harness, "plumbus", "waiting for the manual approval", |o| {
        has_condition(o, "InstallPendingApproval", "True", "UpdateApprovalRequired")
    })
    .await;
    assert!(has_condition(&waiting, "UpdateAvailable", "True", "UpdateFoundInChannel"));
    let install = Api::<Install>::all(harness.admin.clone()).get("plumbus").await.unwrap();
    assert_eq!(install.spec.content[0].manifest_image.as_deref(), Some(patch.as_str()));
    assert_eq!(install.spec.approval, olmv2::api::v2alpha1::Approval::Unapproved, "reset with the new content");
    let pending = install.status.as_ref().unwrap().pending.clone().unwrap();
    assert_eq!(pending.reason, Some(olmv2::api::v2alpha1::PendingReason::ManualApproval));
    assert!(pending.count > 0, "every rule the new content uses is for the approver to hold: {pending:?}");

    assert!(harness.admin_kubectl(&approve, None).status.success());
    let mut upgraded = false;
    for _ in 0..100 {
        harness.roll_out("operators").await;
        let operator = operators(&harness).get("plumbus").await.unwrap();
        let version = operator.status.as_ref().and_then(|s| s.metadata.as_ref()).and_then(|m| m.version.clone());
        if version.as_deref() == Some("2.0.1") && state(&operator) == Some(OperatorState::Installed) {
            upgraded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(upgraded, "never upgraded: {:?}", operators(&harness).get_opt("plumbus").await);
}

trait OwnerNames {
    fn owner_references_names(&self) -> Vec<String>;
}

impl OwnerNames for Install {
    fn owner_references_names(&self) -> Vec<String> {
        self.metadata
            .owner_references
            .iter()
            .flatten()
            .filter(|o| o.kind == "Operator")
            .map(|o| o.name.clone())
            .collect()
    }
}

/// Grants `user` the verb `install` on CatalogSource `catalogs/community`, and nothing else.
pub(crate) async fn may_install_from_community(harness: &Harness, user: &str) {
    let installer = json!([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "community-installer", "namespace": "catalogs"},
         "rules": [{"apiGroups": ["operators.coreos.com"], "resources": ["catalogsources"], "resourceNames": ["community"], "verbs": ["install"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": format!("{user}-installs"), "namespace": "catalogs"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "community-installer"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]},
    ]);
    for object in installer.as_array().unwrap() {
        // The Role may exist already, for another user.
        let _ = harness.try_create(object).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn naming_a_catalog_source_needs_the_install_verb_on_it() {
    let harness = start("verb").await;
    let operator_writer = json!([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "operator-writer"},
         "rules": [{"apiGroups": ["operators.coreos.com"], "resources": ["operators"], "verbs": ["get", "list", "create", "update", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "bob-operator-writer"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "operator-writer"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]},
    ]);
    for object in operator_writer.as_array().unwrap() {
        harness.create(object).await;
    }
    let bob = harness.plane.user_kubeconfig("bob", &[]);
    let refused = harness.kubectl(&bob, &["apply", "-f", "-"], Some(OPERATOR_YAML));
    assert!(!refused.status.success());
    assert!(text(&refused).contains("may not install from CatalogSource catalogs/community"), "{}", text(&refused));

    may_install_from_community(&harness, "bob").await;
    let allowed = harness.kubectl(&bob, &["apply", "-f", "-"], Some(OPERATOR_YAML));
    assert!(allowed.status.success(), "{}", text(&allowed));
    let other = OPERATOR_YAML.replace("name: community", "name: private");
    let refused = harness.kubectl(&bob, &["apply", "-f", "-"], Some(&other));
    assert!(text(&refused).contains("catalogs/private"), "the grant names one CatalogSource: {}", text(&refused));
    let missing = wait_operator(&harness, "plumbus", "reporting the missing CatalogSource", |o| {
        has_condition(o, "ContentImportError", "True", "CatalogSourceNotFound")
    })
    .await;
    assert_eq!(state(&missing), Some(OperatorState::Failed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_image_operator_reports_pull_failures_and_legacy_objects_get_the_label_projected() {
    let harness = start("image").await;
    let missing = harness.registry.reference("plumbus-bundle:absent");
    let operator = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "metadata": {"name": "plumbus"},
        "spec": {"updates": {"type": "ManifestImage", "manifestImage": missing}}});
    harness.create(&operator).await;
    let failed = wait_operator(&harness, "plumbus", "failing to pull", |o| {
        has_condition(o, "ContentImportError", "True", "ManifestImagePullFailed")
    })
    .await;
    assert_eq!(state(&failed), Some(OperatorState::Failed));
    let install = Api::<Install>::all(harness.admin.clone()).get("plumbus").await.expect("an Install of the image");
    assert_eq!(install.spec.content[0].manifest_image.as_deref(), Some(missing.as_str()));

    // A legacy Subscription labelled for an Operator: its InstallPlan, the InstallPlan's CSV and the CSV's
    // Deployment become components too.
    harness
        .create(
            &json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "metadata": {"name": "legacy"}, "spec": {}}),
        )
        .await;
    let label = json!({"v2alpha1.operators.coreos.com/legacy": ""});
    let objects = [
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
               "metadata": {"name": "legacy", "namespace": "operators", "labels": label},
               "spec": {"name": "legacy", "source": "community", "sourceNamespace": "catalogs", "channel": "stable"}}),
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
               "metadata": {"name": "install-legacy", "namespace": "operators"},
               "spec": {"clusterServiceVersionNames": ["legacy.v1.0.0"], "approval": "Automatic", "approved": true}}),
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
               "metadata": {"name": "legacy.v1.0.0", "namespace": "operators"},
               "spec": {"displayName": "Legacy", "version": "1.0.0",
                        "install": {"strategy": "deployment", "spec": {"deployments": [{"name": "legacy-controller",
                            "spec": {"selector": {"matchLabels": {"app": "legacy"}}, "template": {"metadata": {"labels": {"app": "legacy"}},
                                     "spec": {"containers": [{"name": "c", "image": "legacy:1"}]}}}}]}}}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "legacy-controller", "namespace": "operators"},
               "spec": {"selector": {"matchLabels": {"app": "legacy"}}, "template": {"metadata": {"labels": {"app": "legacy"}},
                        "spec": {"containers": [{"name": "c", "image": "legacy:1"}]}}}}),
    ];
    for object in &objects {
        harness.create(object).await;
    }
    let subscriptions = Api::<DynamicObject>::namespaced_with(
        harness.admin.clone(),
        "operators",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "Subscription"),
            "subscriptions",
        ),
    );
    let status = json!({"status": {"state": "AtLatestKnown", "installedCSV": "legacy.v1.0.0",
        "installPlanRef": {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "name": "install-legacy", "namespace": "operators"}}});
    subscriptions
        .patch_status("legacy", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("subscription status");

    let gathered = wait_operator(&harness, "legacy", "gathering the projected components", |o| {
        !refs_of_kind(o, "Deployment").is_empty()
            && !refs_of_kind(o, "InstallPlan").is_empty()
            && !refs_of_kind(o, "ClusterServiceVersion").is_empty()
    })
    .await;
    assert_eq!(refs_of_kind(&gathered, "Subscription"), vec!["legacy".to_owned()]);
    assert_eq!(refs_of_kind(&gathered, "Deployment"), vec!["legacy-controller".to_owned()]);
    let deployment =
        Api::<Deployment>::namespaced(harness.admin.clone(), "operators").get("legacy-controller").await.unwrap();
    assert!(deployment.metadata.labels.unwrap().contains_key("v2alpha1.operators.coreos.com/legacy"));
    assert!(has_condition(&gathered, "UpdateAvailable", "False", "NoUpdateSource"));

    // An Install of the same name that the Operator does not own is left alone and reported.
    let foreign = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "taken"},
        "spec": {"content": [{"type": "Raw", "raw": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: taken\n"}]}});
    harness.create(&foreign).await;
    let taken = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "metadata": {"name": "taken"},
        "spec": {"updates": {"type": "ManifestImage", "manifestImage": missing}}});
    harness.create(&taken).await;
    wait_operator(&harness, "taken", "reporting the foreign Install", |o| {
        has_condition(o, "ContentImportError", "True", "InstallNameTaken")
    })
    .await;
    let install = Api::<Install>::all(harness.admin.clone()).get("taken").await.unwrap();
    assert_eq!(install.spec.content[0].content_type, olmv2::api::v2alpha1::ContentType::Raw, "left alone");
}
