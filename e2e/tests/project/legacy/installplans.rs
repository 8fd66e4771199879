//! InstallPlans as OLM v0 users see them (rewritten from the intent of OLM's `installplan_e2e_test.go` and
//! `subscription_e2e_test.go`), with the approval gate this project adds: a Subscription applied with the real
//! kubectl for plumbus (whose bundle requires Grumbo) against a catalog image of real bundle images in a real
//! registry. The namespace's resolution makes one InstallPlan (OLM's name, owners, generation, columns), generates
//! the Subscription OLM generates for Grumbo, and installs both bundles through Installs made on behalf of the
//! Subscription's author; nothing is applied until a person who holds the permissions approves; then the plan
//! completes and the Subscriptions are `AtLatestKnown`. A Manual Subscription's plan waits for `spec.approved`; a
//! user who may create Subscriptions but holds nothing else gets nothing installed and cannot approve, nor swap an
//! approved operator's content by moving the Subscription to another channel.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};
use olmv2::api::v1alpha1::{ClusterServiceVersion, InstallPlan, InstallPlanPhase, Subscription, SubscriptionState};
use olmv2::api::v2alpha1::{Install, InstallState, CREATOR_ANNOTATION};
use serde_json::{json, Value};

use super::{apply, kubectl, serve_catalog};
use crate::support::harness::Harness;

async fn start(name: &str) -> Harness {
    Harness::start("legacy", name, &["ops", "olm"], Duration::from_secs(30)).await
}

/// Plumbus 2.0.1: the 2.0.0-alpha bundle with another operator image, the same permissions.
async fn push_plumbus_2_0_1(harness: &Harness) -> String {
    push_plumbus_as(harness, "2.0.1").await
}

/// Plumbus at `version`: the 2.0.0-alpha bundle renamed (CSV, version, operator image), the same permissions.
pub(super) async fn push_plumbus_as(harness: &Harness, version: &str) -> String {
    let text = |_: &str, text: &str| text.replace("2.0.0-alpha", version);
    let reference = format!("plumbus-bundle:{version}");
    harness.push_rewritten_bundle("plumbus/2.0.0-alpha", &reference, text, str::to_owned).await
}

/// Plumbus's properties in the catalog, as `opm render` writes them from its bundle: its package, the API it provides
/// and the one it requires.
fn plumbus_properties(version: &str) -> Value {
    json!([
        {"type": "olm.package", "value": {"packageName": "plumbus", "version": version}},
        {"type": "olm.gvk", "value": {"group": "how.theydoit.com", "version": "v2alpha1", "kind": "Plumbus"}},
        {"type": "olm.gvk.required", "value": {"group": "manufacturing.how.theydoit.com", "version": "v1alpha1", "kind": "Grumbo"}},
    ])
}

/// Plumbus 2.0.0-alpha (requires Grumbo; 2.0.1 in channel `fast` replaces it) and Grumbo 1.0.0 pushed, in a catalog
/// served by `olm/community`.
pub(crate) async fn catalog(harness: &Harness) {
    let plumbus = harness.push_bundle("plumbus/2.0.0-alpha", "plumbus-bundle", "2.0.0-alpha").await;
    let swapped = push_plumbus_2_0_1(harness).await;
    let grumbo = harness.push_bundle("grumbo/1.0.0", "grumbo-bundle", "1.0.0").await;
    let gvk = |group: &str, kind: &str| json!({"group": group, "version": "v1alpha1", "kind": kind});
    let blobs = [
        json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "plumbus", "name": "stable", "entries": [{"name": "plumbus.v2.0.0-alpha"}]}),
        json!({"schema": "olm.bundle", "package": "plumbus", "name": "plumbus.v2.0.0-alpha", "image": plumbus,
               "properties": plumbus_properties("2.0.0-alpha")}),
        json!({"schema": "olm.channel", "package": "plumbus", "name": "fast", "entries": [{"name": "plumbus.v2.0.0-alpha"},
            {"name": "plumbus.v2.0.1", "replaces": "plumbus.v2.0.0-alpha"}]}),
        json!({"schema": "olm.bundle", "package": "plumbus", "name": "plumbus.v2.0.1", "image": swapped,
               "properties": plumbus_properties("2.0.1")}),
        json!({"schema": "olm.package", "name": "grumbo", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "grumbo", "name": "stable", "entries": [{"name": "grumbo.v1.0.0"}]}),
        json!({"schema": "olm.bundle", "package": "grumbo", "name": "grumbo.v1.0.0", "image": grumbo, "properties": [
            {"type": "olm.package", "value": {"packageName": "grumbo", "version": "1.0.0"}},
            {"type": "olm.gvk", "value": gvk("manufacturing.how.theydoit.com", "Grumbo")}]}),
    ];
    let configs = harness.write_catalog("configs", &blobs);
    serve_catalog(harness, &configs).await;
}

pub(crate) const GROUP: &str = "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\nspec: {targetNamespaces: [ops]}\n";

pub(crate) fn subscription(approval: &str) -> String {
    format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {{name: plumbus, namespace: ops}}\n\
         spec: {{source: community, sourceNamespace: olm, name: plumbus, channel: stable, installPlanApproval: {approval}}}\n"
    )
}

/// Lets eve get, list, create, update and patch `resources` (a YAML flow list's items) in ops, and nothing else;
/// answers her kubeconfig.
fn eve_may_write(harness: &Harness, resources: &str) -> String {
    apply(
        harness,
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: subscriber, namespace: ops}}\n\
             rules: [{{apiGroups: [operators.coreos.com], resources: [{resources}], verbs: [get, list, create, update, patch]}}]\n\
             ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: eve-subscribes, namespace: ops}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: subscriber}}\n\
             subjects: [{{kind: User, apiGroup: rbac.authorization.k8s.io, name: eve}}]\n"
        ),
    );
    harness.plane.user_kubeconfig("eve", &[])
}

/// Whether the Subscription's `InstallPlanPending` condition has `reason` (the plan's phase).
pub(super) fn plan_pending(subscription: &Subscription, reason: &str) -> bool {
    subscription.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| c.type_ == "InstallPlanPending" && c.reason.as_deref() == Some(reason))
    })
}

/// Merge-patches Subscription `ops/plumbus` as the admin, with the real kubectl.
pub(super) fn patch_subscription(harness: &Harness, patch: &str) {
    let patched =
        harness.admin_kubectl(&["patch", "subscription", "plumbus", "-n", "ops", "--type=merge", "-p", patch], None);
    assert!(patched.status.success(), "{}", String::from_utf8_lossy(&patched.stderr));
}

pub(crate) fn subscriptions(harness: &Harness) -> Api<Subscription> {
    Api::namespaced(harness.admin.clone(), "ops")
}

pub(super) fn installs(harness: &Harness) -> Api<Install> {
    Api::all(harness.admin.clone())
}

/// The namespace's one InstallPlan, once it exists.
pub(crate) async fn the_plan(harness: &Harness, what: &str, done: impl Fn(&InstallPlan) -> bool) -> InstallPlan {
    let plans = Api::<InstallPlan>::namespaced(harness.admin.clone(), "ops");
    for _ in 0..300 {
        let listed = plans.list(&ListParams::default()).await.unwrap().items;
        if let [plan] = listed.as_slice() {
            if done(plan) {
                return plan.clone();
            }
        }
        assert!(listed.len() <= 1, "one plan for one resolution: {listed:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the InstallPlan never became {what}: {:?}", plans.list(&ListParams::default()).await.unwrap().items);
}

pub(crate) fn phase(plan: &InstallPlan) -> InstallPlanPhase {
    plan.status.as_ref().map(|s| s.phase).unwrap_or_default()
}

pub(super) fn installed_condition(plan: &InstallPlan) -> Option<(String, String, String)> {
    let c = plan.status.as_ref()?.conditions.iter().find(|c| c.type_ == "Installed")?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()))
}

pub(crate) fn approve(harness: &Harness, install: &str) {
    let patched = harness.admin_kubectl(
        &["patch", "install", install, "--type=merge", "-p", r#"{"spec":{"approval":"Approved"}}"#],
        None,
    );
    assert!(patched.status.success(), "{}", String::from_utf8_lossy(&patched.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscription_installs_with_its_dependency_through_one_plan_once_a_person_approves() {
    let harness = start("installplan").await;
    catalog(&harness).await;
    apply(&harness, GROUP);
    let configured = subscription("Automatic").replace(
        "installPlanApproval: Automatic}",
        "installPlanApproval: Automatic, config: {env: [{name: LOG_LEVEL, value: debug}]}}",
    );
    apply(&harness, &configured);

    // One plan, as OLM makes it. It waits for approval as soon as one Install does; wait for both (the other may
    // still be pulling its bundle, "is installing").
    let plan = the_plan(&harness, "waiting for approval of both Installs", |p| {
        installed_condition(p).is_some_and(|(_, reason, message)| {
            reason == "InstallPendingApproval"
                && ["plumbus.ops", "grumbo.ops"].iter().all(|i| message.contains(&format!("approve {i}")))
        })
    })
    .await;
    let name = plan.metadata.name.clone().unwrap();
    assert!(name.starts_with("install-") && name.len() == "install-".len() + 5, "{name}");
    assert_eq!(plan.spec.cluster_service_version_names, ["plumbus.v2.0.0-alpha", "grumbo.v1.0.0"]);
    assert!(plan.spec.approved);
    assert_eq!(plan.spec.generation, Some(1));
    assert_eq!(phase(&plan), InstallPlanPhase::Installing);
    let owners = plan.metadata.owner_references.clone().unwrap_or_default();
    assert!(owners.iter().any(|o| o.kind == "Subscription" && o.name == "plumbus" && o.controller == Some(false)));
    let (_, _, message) = installed_condition(&plan).unwrap();
    assert!(message.contains("kubectl olmv2 approve plumbus.ops"), "{message}");
    let listed = kubectl(&harness, &["get", "installplans", "-n", "ops"]);
    let header: Vec<&str> = listed.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "CSV", "APPROVAL", "APPROVED"]);
    assert!(
        listed.contains("plumbus.v2.0.0-alpha") && listed.contains("Automatic") && listed.contains("true"),
        "{listed}"
    );

    // The Subscription points at it, and says why it waits.
    let waiting = harness
        .wait_for(&subscriptions(&harness), "plumbus", "pointing at the plan", |s| plan_pending(s, "Installing"))
        .await;
    let status = waiting.status.clone().unwrap();
    assert_eq!(status.install_plan_ref.as_ref().and_then(|r| r.name.clone()), Some(name.clone()));
    assert_eq!(status.install_plan.as_ref().map(|r| r.name.clone()), Some(name.clone()));
    assert_eq!(status.state, SubscriptionState::UpgradePending);
    assert_eq!(status.current_csv.as_deref(), Some("plumbus.v2.0.0-alpha"));
    assert_eq!(status.install_plan_generation, Some(1));

    // OLM's generated Subscription for the dependency.
    let generated = subscriptions(&harness).get("grumbo-stable-community-olm").await.expect("generated Subscription");
    assert_eq!(generated.metadata.labels.as_ref().and_then(|l| l.get("olm.managed")).map(String::as_str), Some("true"));
    assert_eq!(generated.metadata.annotations.as_ref().and_then(|a| a.get("olm.generated-by")), Some(&name));
    assert_eq!(generated.spec.starting_csv.as_deref(), Some("grumbo.v1.0.0"));

    // Installs wait for a person; nothing of the operators runs yet.
    for install in ["plumbus.ops", "grumbo.ops"] {
        let waiting = harness
            .wait_for(&installs(&harness), install, "pending approval", |i| {
                i.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
            })
            .await;
        let creator = waiting.metadata.annotations.as_ref().and_then(|a| a.get(CREATOR_ANNOTATION)).unwrap();
        assert!(creator.contains("kubernetes-admin"), "made on behalf of the Subscription's author: {creator}");
    }
    let deployments = Api::<Deployment>::namespaced(harness.admin.clone(), "ops");
    assert!(deployments.list(&ListParams::default()).await.unwrap().items.is_empty(), "nothing applied unapproved");
    // The Subscription's spec.config is the Install's deployment configuration.
    let plumbus = installs(&harness).get("plumbus.ops").await.unwrap();
    let env = plumbus.spec.content[0].config.as_ref().map(|c| c.env.clone()).unwrap_or_default();
    assert_eq!(
        env.iter().map(|e| (e.name.as_str(), e.value.as_deref())).collect::<Vec<_>>(),
        [("LOG_LEVEL", Some("debug"))]
    );

    approve(&harness, "grumbo.ops");
    approve(&harness, "plumbus.ops");
    let mut complete = None;
    for _ in 0..300 {
        harness.roll_out("ops").await;
        let plan = the_plan(&harness, "any", |_| true).await;
        if phase(&plan) == InstallPlanPhase::Complete {
            complete = Some(plan);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let complete = complete.expect("the plan completes once its Installs are installed");
    assert_eq!(installed_condition(&complete).map(|(status, ..)| status).as_deref(), Some("True"));
    let steps = complete.status.unwrap().plan;
    assert!(steps.iter().all(|step| step.status == "Created" || step.status == "Present"), "{steps:?}");
    for (kind, name) in [("CustomResourceDefinition", "plumbai.how.theydoit.com"), ("Deployment", "plumbus-operator")] {
        assert!(
            steps
                .iter()
                .any(|s| s.resource.kind == kind && s.resource.name == name && s.resolving == "plumbus.v2.0.0-alpha"),
            "a step per object applied: {kind} {name} missing from {steps:?}"
        );
    }
    for (subscription, csv) in [("plumbus", "plumbus.v2.0.0-alpha"), ("grumbo-stable-community-olm", "grumbo.v1.0.0")] {
        // At the latest known, and a complete plan leaves no plan condition.
        let latest = harness
            .wait_for(&subscriptions(&harness), subscription, "at the latest known", |s| {
                s.status.as_ref().is_some_and(|s| {
                    s.state == SubscriptionState::AtLatestKnown
                        && !s.conditions.iter().any(|c| c.type_.starts_with("InstallPlan"))
                })
            })
            .await;
        assert_eq!(latest.status.as_ref().unwrap().installed_csv.as_deref(), Some(csv));
    }
    let csvs = kubectl(&harness, &["get", "csv", "-n", "ops"]);
    assert!(csvs.contains("plumbus.v2.0.0-alpha") && csvs.contains("grumbo.v1.0.0"), "{csvs}");
    // Each CSV carries what OLM v0 writes on the CSVs it installs: its group's annotations, and its bundle's
    // catalog properties (the resolver's tie from an installed CSV to its package).
    let installed = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops");
    let plumbus = installed.get("plumbus.v2.0.0-alpha").await.unwrap();
    let annotations = plumbus.metadata.annotations.unwrap_or_default();
    for (key, value) in [("olm.operatorGroup", "og"), ("olm.operatorNamespace", "ops"), ("olm.targetNamespaces", "ops")]
    {
        assert_eq!(annotations.get(key).map(String::as_str), Some(value), "{key} on {annotations:?}");
    }
    let properties: Value =
        serde_json::from_str(annotations.get("operatorframework.io/properties").expect("the properties annotation"))
            .unwrap();
    let mut listed: Vec<String> = properties["properties"].as_array().unwrap().iter().map(Value::to_string).collect();
    let mut in_catalog: Vec<String> =
        plumbus_properties("2.0.0-alpha").as_array().unwrap().iter().map(Value::to_string).collect();
    listed.sort();
    in_catalog.sort();
    assert_eq!(listed, in_catalog, "the CSV's properties are its catalog bundle's");

    // A new spec.config reaches the installed operator's Install at once; its author holds what was granted, so the
    // approval stands.
    patch_subscription(&harness, r#"{"spec":{"config":{"env":[{"name":"LOG_LEVEL","value":"info"}]}}}"#);
    let reconfigured = harness
        .wait_for(&installs(&harness), "plumbus.ops", "reconfigured", |i| {
            i.spec.content[0].config.as_ref().is_some_and(|c| c.env.iter().any(|e| e.value.as_deref() == Some("info")))
        })
        .await;
    assert_eq!(reconfigured.spec.approval, olmv2::api::v2alpha1::Approval::Approved);
    assert!(!reconfigured
        .metadata
        .annotations
        .unwrap_or_default()
        .contains_key(olmv2::api::v2alpha1::CONTENT_CHANGED_BY_ANNOTATION));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_manual_plan_waits_for_approved_and_a_subscriber_without_rights_gets_nothing() {
    let harness = start("installplan-manual").await;
    catalog(&harness).await;
    apply(&harness, GROUP);
    // Eve may write Subscriptions and InstallPlans in ops, and Installs (approving them needs what they ask for).
    let eve = eve_may_write(&harness, "subscriptions, installplans");
    apply(
        &harness,
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: install-approver}
rules: [{apiGroups: [operators.coreos.com], resources: [installs], verbs: [get, list, update, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: eve-approves}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: install-approver}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: eve}]
"#,
    );
    let created = harness.kubectl(&eve, &["apply", "-f", "-"], Some(&subscription("Manual")));
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));

    // Manual: the plan waits, unapproved, and no Install is made.
    let plan = the_plan(&harness, "requiring approval", |p| phase(p) == InstallPlanPhase::RequiresApproval).await;
    assert_eq!(plan.spec.approval, olmv2::api::v1alpha1::InstallPlanApproval::Manual);
    assert!(!plan.spec.approved);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        installs(&harness).get_opt("plumbus.ops").await.unwrap().is_none(),
        "no Install before the plan is approved"
    );
    harness
        .wait_for(&subscriptions(&harness), "plumbus", "waiting on approval", |s| plan_pending(s, "RequiresApproval"))
        .await;

    // Eve approves the plan (OLM's spec.approved): its Installs are made on her behalf, and wait.
    let plan_name = plan.metadata.name.clone().unwrap();
    let approved = harness.kubectl(
        &eve,
        &["patch", "installplan", &plan_name, "-n", "ops", "--type=merge", "-p", r#"{"spec":{"approved":true}}"#],
        None,
    );
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    let install = harness
        .wait_for(&installs(&harness), "plumbus.ops", "pending approval", |i| {
            i.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
        })
        .await;
    let creator = install.metadata.annotations.as_ref().and_then(|a| a.get(CREATOR_ANNOTATION)).unwrap();
    assert!(creator.contains("\"eve\""), "on behalf of the Subscription's author: {creator}");

    // Eve cannot approve what she does not hold: the approval gate refuses her, and nothing runs.
    let refused = harness.kubectl(
        &eve,
        &["patch", "install", "plumbus.ops", "--type=merge", "-p", r#"{"spec":{"approval":"Approved"}}"#],
        None,
    );
    assert!(!refused.status.success(), "eve approved permissions she does not hold");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deployments = Api::<Deployment>::namespaced(harness.admin.clone(), "ops");
    assert!(deployments.list(&ListParams::default()).await.unwrap().items.is_empty(), "nothing applied unapproved");
    let plan = the_plan(&harness, "installing", |p| phase(p) == InstallPlanPhase::Installing).await;
    assert_eq!(installed_condition(&plan).map(|(_, reason, _)| reason).as_deref(), Some("InstallPendingApproval"));
}

/// The namespace's plan with `csv`, once it is there.
pub(super) async fn plan_for(harness: &Harness, csv: &str) -> InstallPlan {
    let plans = Api::<InstallPlan>::namespaced(harness.admin.clone(), "ops");
    for _ in 0..300 {
        let listed = plans.list(&ListParams::default()).await.unwrap().items;
        if let Some(plan) = listed.into_iter().find(|p| p.spec.cluster_service_version_names.iter().any(|n| n == csv)) {
            return plan;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no InstallPlan for {csv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscriber_without_the_grants_cannot_swap_an_approved_operator_by_changing_channel() {
    let harness = start("installplan-swap").await;
    catalog(&harness).await;
    apply(&harness, GROUP);
    let eve = eve_may_write(&harness, "subscriptions");
    let created = harness.kubectl(&eve, &["apply", "-f", "-"], Some(&subscription("Automatic")));
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    // An admin reviews and approves what eve's Subscription asks for; it installs.
    for install in ["grumbo.ops", "plumbus.ops"] {
        harness
            .wait_for(&installs(&harness), install, "pending approval", |i| {
                i.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
            })
            .await;
        approve(&harness, install);
    }
    let mut installed = false;
    for _ in 0..300 {
        harness.roll_out("ops").await;
        let plumbus = installs(&harness).get("plumbus.ops").await.unwrap();
        if plumbus.status.as_ref().and_then(|s| s.state) == Some(InstallState::Installed) {
            installed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(installed, "the approved Install installs");

    // Eve moves her Subscription to the channel holding other content that needs no more permission.
    let moved = harness.kubectl(
        &eve,
        &["patch", "subscription", "plumbus", "-n", "ops", "--type=merge", "-p", r#"{"spec":{"channel":"fast"}}"#],
        None,
    );
    assert!(moved.status.success(), "{}", String::from_utf8_lossy(&moved.stderr));
    plan_for(&harness, "plumbus.v2.0.1").await;
    let waiting = harness
        .wait_for(&installs(&harness), "plumbus.ops", "moved and waiting", |i| {
            i.spec.content[0].manifest_image.as_deref().is_some_and(|image| image.contains("2.0.1"))
                && i.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
        })
        .await;
    let annotations = waiting.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get(olmv2::api::v2alpha1::CONTENT_CHANGED_BY_ANNOTATION).map(String::as_str), Some("eve"));
    assert_eq!(waiting.spec.approval, olmv2::api::v2alpha1::Approval::Unapproved, "eve's choice waits for a person");
    let deployment = Api::<Deployment>::namespaced(harness.admin.clone(), "ops").get("plumbus-operator").await;
    if let Ok(deployment) = deployment {
        let image = deployment.spec.unwrap().template.spec.unwrap().containers[0].image.clone().unwrap_or_default();
        assert!(image.ends_with("v2.0.0-alpha"), "the approved version keeps running: {image}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_namespace_keeps_its_five_newest_installplans_as_olm_collects_them() {
    let harness = start("installplan-gc").await;
    for generation in 1..=7 {
        apply(
            &harness,
            &format!(
                "apiVersion: operators.coreos.com/v1alpha1\nkind: InstallPlan\nmetadata: {{name: old-{generation}, namespace: ops}}\n\
                 spec: {{clusterServiceVersionNames: [x.v{generation}], approval: Automatic, approved: true, generation: {generation}}}\n"
            ),
        );
    }
    // A Subscription makes the namespace resolve, and collect.
    apply(&harness, GROUP);
    apply(&harness, &subscription("Automatic"));
    let plans = Api::<InstallPlan>::namespaced(harness.admin.clone(), "ops");
    let mut left = Vec::new();
    for _ in 0..100 {
        left = plans
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        left.sort();
        if left.len() == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(left, ["old-3", "old-4", "old-5", "old-6", "old-7"], "the two oldest generations collected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nobody_but_the_controller_may_say_which_subscription_an_install_serves() {
    let harness = start("installplan-claim").await;
    // Mallory may write Installs, and makes one named and annotated as ops/plumbus's, to be taken for it.
    apply(
        &harness,
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: install-writer}
rules: [{apiGroups: [operators.coreos.com], resources: [installs], verbs: [get, list, create, update, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: mallory-installs}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: install-writer}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: mallory}]
"#,
    );
    let mallory = harness.plane.user_kubeconfig("mallory", &[]);
    let claimed = "apiVersion: operators.coreos.com/v2alpha1\nkind: Install\nmetadata:\n  name: plumbus.ops\n  annotations: {operators.coreos.com/subscription: ops/plumbus}\nspec:\n  content: [{type: Raw, raw: \"apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: mine}\\n\"}]\n";
    let refused = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(claimed));
    assert!(!refused.status.success(), "mallory claimed a Subscription's Install");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("only the controller sets the annotation operators.coreos.com/subscription"), "{stderr}");
    // Made plain, then annotated: refused as well.
    let plain = claimed.replace("  annotations: {operators.coreos.com/subscription: ops/plumbus}\n", "");
    let made = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(&plain));
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let annotated = harness.kubectl(
        &mallory,
        &["annotate", "install", "plumbus.ops", "operators.coreos.com/subscription=ops/plumbus"],
        None,
    );
    assert!(!annotated.status.success(), "mallory claimed a Subscription's Install by annotating hers");
    let install = installs(&harness).get("plumbus.ops").await.unwrap();
    assert!(!install.metadata.annotations.unwrap_or_default().contains_key("operators.coreos.com/subscription"));
}
