//! Upgrades of a Subscription along its channel, as OLM v0 users live them (rewritten from the intent of OLM's
//! `subscription_e2e_test.go` upgrade cases), in a namespace whose OperatorGroup names the ServiceAccount operators
//! are installed as (OLM's attenuation: within its rights nothing waits for a person): a catalog image that moves
//! (polled every second) brings a bundle whose `skipRange` holds the installed version, which an Automatic
//! Subscription installs by itself; then, the Subscription switched to Manual, a bundle that `skips` the installed
//! one waits in a plan for `spec.approved`, and its Install for a person's approval, before it runs. Without a
//! group's account, an Automatic Subscription's first version waits for a person, and an upgrade with the same rules
//! then runs by itself.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use olmv2::api::v1alpha1::{InstallPlanPhase, Subscription, SubscriptionState};
use olmv2::api::v2alpha1::InstallState;
use serde_json::{json, Value};

use super::apply;
use super::installplans::{
    approve, installed_condition, installs, patch_subscription, phase, plan_for, plan_pending, push_plumbus_as,
    subscriptions,
};
use crate::support::harness::Harness;

/// Pushes a catalog of plumbus whose `stable` channel holds `entries` (name, with replaces/skips/skipRange) of the
/// bundles `images` (version → image) to `catalog:latest`, with `extra` blobs.
async fn push_catalog(harness: &Harness, revision: usize, entries: Value, images: &[(&str, &str)], extra: &[Value]) {
    let mut blobs = vec![
        json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "plumbus", "name": "stable", "entries": entries}),
    ];
    blobs.extend(extra.iter().cloned());
    for (version, image) in images {
        blobs.push(json!({"schema": "olm.bundle", "package": "plumbus", "name": format!("plumbus.v{version}"),
            "image": image, "properties": [
                {"type": "olm.package", "value": {"packageName": "plumbus", "version": version}},
                {"type": "olm.gvk", "value": {"group": "how.theydoit.com", "version": "v2alpha1", "kind": "Plumbus"}}]}));
    }
    let configs = harness.dir.join(format!("configs-{revision}"));
    std::fs::create_dir_all(configs.join("plumbus")).unwrap();
    let text: Vec<String> = blobs.iter().map(Value::to_string).collect();
    std::fs::write(configs.join("plumbus/catalog.json"), text.join("\n")).unwrap();
    let image = harness.registry.reference("catalog:latest");
    harness.images().push_catalog(&configs, &image).await.expect("catalog pushed");
}

/// The catalog moved on: 2.0.1 alone in the channel, its skipRange holding 2.0.0-alpha.
async fn push_patch_catalog(harness: &Harness, patch: &str) {
    let entries = json!([{"name": "plumbus.v2.0.1", "skipRange": ">=2.0.0-alpha <2.0.1"}]);
    push_catalog(harness, 2, entries, &[("2.0.1", patch)], &[]).await;
}

/// Waits until the Subscription is at the latest known with `csv` installed, rolling Deployments out meanwhile.
async fn installed(harness: &Harness, csv: &str) -> Subscription {
    for _ in 0..300 {
        harness.roll_out("ops").await;
        let sub = subscriptions(harness).get("plumbus").await.unwrap();
        let status = sub.status.clone().unwrap_or_default();
        if status.state == SubscriptionState::AtLatestKnown && status.installed_csv.as_deref() == Some(csv) {
            return sub;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let install = installs(harness).get("plumbus.ops").await.unwrap();
    panic!(
        "{csv} never installed: {:?}; the Install: {:?}",
        subscriptions(harness).get("plumbus").await.unwrap().status,
        install.status.map(|s| (s.state, s.pending, s.conditions))
    );
}

/// The plan for `csv`, once it is Complete.
async fn complete(harness: &Harness, csv: &str) -> olmv2::api::v1alpha1::InstallPlan {
    for _ in 0..300 {
        harness.roll_out("ops").await;
        let plan = plan_for(harness, csv).await;
        if phase(&plan) == InstallPlanPhase::Complete {
            return plan;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the plan for {csv} never completed: {:?}", plan_for(harness, csv).await.status);
}

/// CatalogSource `olm/community` serving `catalog:latest`, polled every second.
fn catalog_source(harness: &Harness) {
    apply(
        harness,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {{name: community, namespace: olm}}\n\
             spec: {{sourceType: grpc, image: {}, updateStrategy: {{registryPoll: {{interval: 1s}}}}}}\n",
            harness.registry.reference("catalog:latest")
        ),
    );
}

async fn operator_image(harness: &Harness) -> String {
    let deployment = Api::<Deployment>::namespaced(harness.admin.clone(), "ops").get("plumbus-operator").await.unwrap();
    deployment.spec.unwrap().template.spec.unwrap().containers[0].image.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscription_upgrades_along_skip_range_by_itself_and_along_skips_once_approved_when_manual() {
    let harness = Harness::start("legacy", "upgrades", &["ops", "olm"], Duration::from_secs(30)).await;
    let alpha = harness.push_bundle("plumbus/2.0.0-alpha", "plumbus-bundle", "2.0.0-alpha").await;
    let patch = push_plumbus_as(&harness, "2.0.1").await;
    let minor = push_plumbus_as(&harness, "2.0.2").await;
    push_catalog(&harness, 1, json!([{"name": "plumbus.v2.0.0-alpha"}]), &[("2.0.0-alpha", &alpha)], &[]).await;
    catalog_source(&harness);
    // The account the group installs operators as may do anything (as many OLM v0 installations grant it).
    apply(
        &harness,
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: installer, namespace: ops}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: ops-installer}\n\
         roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n\
         subjects: [{kind: ServiceAccount, name: installer, namespace: ops}]\n---\n\
         apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\n\
         spec: {targetNamespaces: [ops], serviceAccountName: installer}\n",
    );
    apply(
        &harness,
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: plumbus, namespace: ops}\n\
         spec: {source: community, sourceNamespace: olm, name: plumbus, channel: stable, installPlanApproval: Automatic}\n",
    );
    installed(&harness, "plumbus.v2.0.0-alpha").await;
    harness
        .wait_for(&installs(&harness), "plumbus.ops", "installed as the group's account", |i| {
            i.status
                .as_ref()
                .and_then(|s| s.service_account_ref.as_ref())
                .is_some_and(|a| (a.namespace.as_str(), a.name.as_str()) == ("ops", "installer"))
        })
        .await;
    assert!(operator_image(&harness).await.contains("2.0.0-alpha"));

    // The catalog moves: 2.0.1 alone in the channel, its skipRange holding the installed version. Automatic: it
    // installs by itself (same permissions: nothing for a person to approve).
    push_patch_catalog(&harness, &patch).await;
    let upgraded = installed(&harness, "plumbus.v2.0.1").await;
    assert!(operator_image(&harness).await.contains("2.0.1"), "the new operator runs");
    let plan = complete(&harness, "plumbus.v2.0.1").await;
    assert_eq!(
        upgraded.status.as_ref().unwrap().install_plan_ref.as_ref().and_then(|r| r.name.clone()),
        plan.metadata.name
    );

    // Manual from now on: 2.0.2, which skips 2.0.1, waits in a plan for approval and nothing moves meanwhile.
    patch_subscription(&harness, r#"{"spec":{"installPlanApproval":"Manual"}}"#);
    push_catalog(
        &harness,
        3,
        json!([{"name": "plumbus.v2.0.1", "skipRange": ">=2.0.0-alpha <2.0.1"},
               {"name": "plumbus.v2.0.2", "skips": ["plumbus.v2.0.1"]}]),
        &[("2.0.1", &patch), ("2.0.2", &minor)],
        &[],
    )
    .await;
    let mut waiting = None;
    for _ in 0..300 {
        let plan = plan_for(&harness, "plumbus.v2.0.2").await;
        if phase(&plan) == InstallPlanPhase::RequiresApproval {
            waiting = Some(plan);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let waiting = waiting.expect("the plan for 2.0.2 requires approval");
    assert!(!waiting.spec.approved);
    harness
        .wait_for(&subscriptions(&harness), "plumbus", "pointing at the waiting plan", |s| {
            s.status.as_ref().is_some_and(|s| {
                s.state == SubscriptionState::UpgradePending && s.current_csv.as_deref() == Some("plumbus.v2.0.2")
            }) && plan_pending(s, "RequiresApproval")
        })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let install = installs(&harness).get("plumbus.ops").await.unwrap();
    assert!(install.spec.content[0].manifest_image.as_deref().is_some_and(|i| i.contains("2.0.1")), "nothing moved");

    // Approved (OLM's spec.approved), the Install moves and, Manual, waits for a person again; then it runs.
    let name = waiting.metadata.name.clone().unwrap();
    let approved = harness.admin_kubectl(
        &["patch", "installplan", &name, "-n", "ops", "--type=merge", "-p", r#"{"spec":{"approved":true}}"#],
        None,
    );
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    harness
        .wait_for(&installs(&harness), "plumbus.ops", "moved and waiting for a person", |i| {
            i.spec.content[0].manifest_image.as_deref().is_some_and(|image| image.contains("2.0.2"))
                && i.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
        })
        .await;
    let mut said = None;
    for _ in 0..100 {
        let reason = installed_condition(&plan_for(&harness, "plumbus.v2.0.2").await).map(|(_, reason, _)| reason);
        if reason.as_deref() == Some("InstallPendingApproval") {
            said = reason;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(said.is_some(), "the plan says its Install waits for a person");
    approve(&harness, "plumbus.ops");
    installed(&harness, "plumbus.v2.0.2").await;
    complete(&harness, "plumbus.v2.0.2").await;
    assert!(operator_image(&harness).await.contains("2.0.2"));

    // The catalog deprecates the package and the installed bundle: the Subscription says so in OLM's words, and
    // nothing stops running.
    let deprecations = json!({"schema": "olm.deprecations", "package": "plumbus", "entries": [
        {"reference": {"schema": "olm.package"}, "message": "plumbus is succeeded by fleeb"},
        {"reference": {"schema": "olm.bundle", "name": "plumbus.v2.0.2"}, "message": "2.0.2 leaks grumbo"}]});
    push_catalog(
        &harness,
        4,
        json!([{"name": "plumbus.v2.0.1", "skipRange": ">=2.0.0-alpha <2.0.1"},
               {"name": "plumbus.v2.0.2", "skips": ["plumbus.v2.0.1"]}]),
        &[("2.0.1", &patch), ("2.0.2", &minor)],
        &[deprecations],
    )
    .await;
    let deprecated = harness
        .wait_for(&subscriptions(&harness), "plumbus", "deprecated", |s| {
            s.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Deprecated"))
        })
        .await;
    let message = |type_: &str| {
        let conditions = &deprecated.status.as_ref().unwrap().conditions;
        conditions.iter().find(|c| c.type_ == type_).and_then(|c| c.message.clone())
    };
    assert_eq!(message("PackageDeprecated").as_deref(), Some("olm.package/plumbus: plumbus is succeeded by fleeb"));
    assert_eq!(message("BundleDeprecated").as_deref(), Some("olm.bundle/plumbus.v2.0.2: 2.0.2 leaks grumbo"));
    assert_eq!(
        message("Deprecated").as_deref(),
        Some("olm.package/plumbus: plumbus is succeeded by fleeb; olm.bundle/plumbus.v2.0.2: 2.0.2 leaks grumbo")
    );
    assert_eq!(message("ChannelDeprecated"), None);
    assert_eq!(deprecated.status.unwrap().state, SubscriptionState::AtLatestKnown);
}

/// Without an account of the group's, the Install's own account gets only what a person approved: the first
/// version waits for one; an upgrade with the same rules (its RBAC objects and CSV renamed after the new version)
/// then installs by itself, the verbs on the new names following from the `create` approved before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_automatic_subscription_waits_for_a_person_once_and_then_upgrades_by_itself() {
    let harness = Harness::start("legacy", "approved-once", &["ops", "olm"], Duration::from_secs(30)).await;
    let alpha = harness.push_bundle("plumbus/2.0.0-alpha", "plumbus-bundle", "2.0.0-alpha").await;
    let patch = push_plumbus_as(&harness, "2.0.1").await;
    push_catalog(&harness, 1, json!([{"name": "plumbus.v2.0.0-alpha"}]), &[("2.0.0-alpha", &alpha)], &[]).await;
    catalog_source(&harness);
    apply(
        &harness,
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\n\
         spec: {targetNamespaces: [ops]}\n---\n\
         apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: plumbus, namespace: ops}\n\
         spec: {source: community, sourceNamespace: olm, name: plumbus, channel: stable, installPlanApproval: Automatic}\n",
    );
    harness
        .wait_for(&installs(&harness), "plumbus.ops", "waiting for a person", |i| {
            i.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
        })
        .await;
    approve(&harness, "plumbus.ops");
    installed(&harness, "plumbus.v2.0.0-alpha").await;

    push_patch_catalog(&harness, &patch).await;
    installed(&harness, "plumbus.v2.0.1").await;
    complete(&harness, "plumbus.v2.0.1").await;
    assert!(operator_image(&harness).await.contains("2.0.1"), "the new operator runs");
    let status = installs(&harness).get("plumbus.ops").await.unwrap().status.unwrap();
    assert!(status.pending.is_none_or(|p| p.permissions.is_empty()), "nothing waits");
    let csvs: Vec<String> = status
        .granted
        .iter()
        .filter(|p| p.resources.iter().any(|r| r == "clusterserviceversions"))
        .flat_map(|p| p.resource_names.clone())
        .collect();
    assert!(csvs.iter().any(|name| name == "plumbus.v2.0.1"), "the new CSV's verbs were granted: {csvs:?}");
    let event = harness.wait_event("default", "GrantFollowsCreate").await;
    assert!(event.note.unwrap_or_default().contains("ops/plumbus.v2.0.1"));
}
