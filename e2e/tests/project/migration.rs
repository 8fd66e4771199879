//! Migration from Subscriptions to Operators (`docs/migration.md`), end to end with the real kubectl and the real
//! `olmv2` binary: an OLM v0-shaped cluster made by the legacy loops from real bundles (plumbus subscribed in `ops`
//! by the admin; grumbo in `dev` by eve, who may create Subscriptions there and nothing else; fleeb in `dev` by the
//! admin, Manual), `olmv2 migrate plan`
//! read, the controller killed halfway through the adoption of `ops`, then `olmv2 migrate apply`. Afterwards no
//! Subscription remains, each operator runs on under an Operator (same Deployments, same Installs), the plan said
//! what was done, eve's Automatic Subscription became a Manual Operator (she may not `install` from the catalog),
//! an update needing more permission waits for approval, and `olmv2 migrate revert` makes grumbo a Subscription
//! again, still without re-installing it.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};
use kube::ResourceExt;
use olmv2::api::v1alpha1::{Subscription, SubscriptionState};
use olmv2::api::v2alpha1::{
    Install, InstallState, Operator, OperatorState, UpdateApproval, ADOPTED_FROM_ANNOTATION,
    OPERATOR_INSTALL_ANNOTATION,
};
use serde_json::{json, Value};

use crate::operator::{condition, has_condition, state};
use crate::support::harness::{olmv2_binary, Harness};

pub(crate) fn apply(harness: &Harness, kubeconfig: Option<&str>, manifest: &str) {
    let output = match kubeconfig {
        Some(kubeconfig) => harness.kubectl(kubeconfig, &["apply", "-f", "-"], Some(manifest)),
        None => harness.admin_kubectl(&["apply", "-f", "-"], Some(manifest)),
    };
    assert!(output.status.success(), "kubectl apply: {}", String::from_utf8_lossy(&output.stderr));
}

/// A bundle's properties as `opm render` writes them into a catalog: its package and version, and the API its CRD
/// provides (`(group, version, kind)`).
pub(crate) fn bundle_properties(package: &str, version: &str, (group, api_version, kind): (&str, &str, &str)) -> Value {
    json!([{"type": "olm.gvk", "value": {"group": group, "kind": kind, "version": api_version}},
           {"type": "olm.package", "value": {"packageName": package, "version": version}}])
}

const PLUMBUS_API: (&str, &str, &str) = ("how.theydoit.com", "v2alpha1", "Plumbus");
pub(crate) const GRUMBO_API: (&str, &str, &str) = ("manufacturing.how.theydoit.com", "v1alpha1", "Grumbo");

/// Pushes a catalog of plumbus (`plumbus` entries of `stable`), fleeb 2.0.0-alpha and grumbo 1.0.0, without
/// requirements, each declaring the API it provides as real catalogs do.
async fn push_catalog(harness: &Harness, revision: usize, plumbus: &[(&str, &str)]) {
    let grumbo = harness.push_bundle("grumbo/1.0.0", "grumbo-bundle", "1.0.0").await;
    let fleeb = push_fleeb(harness).await;
    let mut entries = Vec::new();
    let mut blobs = vec![
        json!({"schema": "olm.package", "name": "fleeb", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "fleeb", "name": "stable", "entries": [{"name": "fleeb.v2.0.0-alpha"}]}),
        json!({"schema": "olm.bundle", "package": "fleeb", "name": "fleeb.v2.0.0-alpha", "image": fleeb,
               "properties": bundle_properties("fleeb", "2.0.0-alpha", ("fleeb.example.com", "v2alpha1", "Fleeb"))}),
        json!({"schema": "olm.package", "name": "grumbo", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "grumbo", "name": "stable", "entries": [{"name": "grumbo.v1.0.0"}]}),
        json!({"schema": "olm.bundle", "package": "grumbo", "name": "grumbo.v1.0.0", "image": grumbo,
               "properties": bundle_properties("grumbo", "1.0.0", GRUMBO_API)}),
        json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"}),
    ];
    let mut previous: Option<String> = None;
    for (version, image) in plumbus {
        let name = format!("plumbus.v{version}");
        entries.push(json!({"name": name, "replaces": previous}));
        blobs.push(json!({"schema": "olm.bundle", "package": "plumbus", "name": name, "image": image,
                          "properties": bundle_properties("plumbus", version, PLUMBUS_API)}));
        previous = Some(name);
    }
    blobs.push(json!({"schema": "olm.channel", "package": "plumbus", "name": "stable", "entries": entries}));
    harness.push_catalog(&format!("configs-{revision}"), &blobs).await;
}

/// Plumbus 2.0.0-alpha as another package, fleeb (its own CSV, CRD, Deployment and Service names), pushed as
/// `fleeb-bundle:2.0.0-alpha`; answers the image.
async fn push_fleeb(harness: &Harness) -> String {
    let text = |_: &str, text: &str| {
        text.replace("manufacturing.how.theydoit.com", "GRUMBO-GROUP")
            .replace("how.theydoit.com", "fleeb.example.com")
            .replace("GRUMBO-GROUP", "manufacturing.how.theydoit.com")
            .replace("plumbai", "fleebs")
            .replace("Plumbus", "Fleeb")
            .replace("plumbus", "fleeb")
    };
    let name = |name: &str| name.replace("plumbai", "fleebs").replace("plumbus", "fleeb");
    harness.push_rewritten_bundle("plumbus/2.0.0-alpha", "fleeb-bundle:2.0.0-alpha", text, name).await
}

fn approve(harness: &Harness, install: &str) {
    let patch = r#"{"spec":{"approval":"Approved"}}"#;
    let approved = harness.admin_kubectl(&["patch", "install", install, "--type=merge", "-p", patch], None);
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
}

async fn wait_pending(harness: &Harness, install: &str) {
    let installs = Api::<Install>::all(harness.admin.clone());
    harness
        .wait_for(&installs, install, "waiting for a person", |i| {
            i.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
        })
        .await;
}

/// Waits until the Subscription `namespace/name` has `csv` installed and is at the latest known.
async fn at_latest(harness: &Harness, namespace: &str, name: &str, csv: &str) {
    let subscriptions = Api::<Subscription>::namespaced(harness.admin.clone(), namespace);
    for _ in 0..300 {
        harness.roll_out(namespace).await;
        let status = subscriptions.get(name).await.unwrap().status.unwrap_or_default();
        if status.state == SubscriptionState::AtLatestKnown && status.installed_csv.as_deref() == Some(csv) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{namespace}/{name} never at {csv}: {:?}", subscriptions.get(name).await.unwrap().status);
}

pub(crate) fn olmv2(harness: &Harness, args: &[&str]) -> Output {
    let file = harness.dir.join("admin.kubeconfig");
    std::fs::write(&file, harness.plane.kubeconfig()).unwrap();
    Command::new(olmv2_binary()).args(args).env("KUBECONFIG", &file).output().unwrap()
}

pub(crate) fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

pub(crate) async fn deployment_uid(harness: &Harness, namespace: &str, name: &str) -> Option<String> {
    Api::<Deployment>::namespaced(harness.admin.clone(), namespace).get(name).await.unwrap().metadata.uid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn subscriptions_become_operators_with_nothing_reinstalled_even_after_a_crash_halfway() {
    let mut harness = Harness::start("migration", "adopt", &["ops", "dev", "olm"], Duration::from_secs(30)).await;
    let alpha = harness.push_bundle("plumbus/2.0.0-alpha", "plumbus-bundle", "2.0.0-alpha").await;
    push_catalog(&harness, 1, &[("2.0.0-alpha", &alpha)]).await;
    let groups_and_catalog = format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {{name: community, namespace: olm}}\n\
         spec: {{sourceType: grpc, image: {}, updateStrategy: {{registryPoll: {{interval: 1s}}}}}}\n---\n\
         apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {{name: og, namespace: ops}}\n\
         spec: {{targetNamespaces: [ops]}}\n---\n\
         apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {{name: og, namespace: dev}}\n\
         spec: {{targetNamespaces: [dev]}}\n",
        harness.registry.reference("catalog:latest")
    );
    apply(&harness, None, &groups_and_catalog);
    // Eve may write Subscriptions in dev, and nothing else: no `install` on the CatalogSource.
    apply(
        &harness,
        None,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: subscriber, namespace: dev}\n\
         rules: [{apiGroups: [operators.coreos.com], resources: [subscriptions], verbs: [get, list, create, update, patch]}]\n\
         ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: eve-subscribes, namespace: dev}\n\
         roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: subscriber}\n\
         subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: eve}]\n",
    );
    let eve = harness.plane.user_kubeconfig("eve", &[]);
    let subscription = |namespace: &str, package: &str, approval: &str| {
        format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {{name: {package}, namespace: {namespace}}}\n\
             spec: {{source: community, sourceNamespace: olm, name: {package}, channel: stable, installPlanApproval: {approval}}}\n"
        )
    };
    apply(&harness, None, &subscription("ops", "plumbus", "Automatic"));
    apply(&harness, Some(&eve), &subscription("dev", "grumbo", "Automatic"));
    for install in ["plumbus.ops", "grumbo.dev"] {
        wait_pending(&harness, install).await;
        approve(&harness, install);
    }
    at_latest(&harness, "ops", "plumbus", "plumbus.v2.0.0-alpha").await;
    at_latest(&harness, "dev", "grumbo", "grumbo.v1.0.0").await;
    // A Manual one: its plan approved (OLM's spec.approved), then its Install by a person.
    // (In dev, where grumbo provides the Grumbo API fleeb's CSV requires: OLM resolves a namespace as a whole.)
    apply(&harness, None, &subscription("dev", "fleeb", "Manual"));
    // The plan the Subscription points at (a newer one may supersede the first), approved.
    let subscriptions = Api::<Subscription>::namespaced(harness.admin.clone(), "dev");
    let patch = r#"{"spec":{"approved":true}}"#;
    let mut approved = false;
    for _ in 0..300 {
        let status = subscriptions.get("fleeb").await.unwrap().status.unwrap_or_default();
        if let Some(plan) = status.install_plan_ref.and_then(|r| r.name) {
            let args = ["patch", "installplan", plan.as_str(), "-n", "dev", "--type=merge", "-p", patch];
            if harness.admin_kubectl(&args, None).status.success() {
                approved = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(approved, "fleeb's plan approved");
    wait_pending(&harness, "fleeb.dev").await;
    approve(&harness, "fleeb.dev");
    at_latest(&harness, "dev", "fleeb", "fleeb.v2.0.0-alpha").await;
    let plumbus_uid = deployment_uid(&harness, "ops", "plumbus-operator").await;
    let grumbo_uid = deployment_uid(&harness, "dev", "grumbo-operator").await;
    let fleeb_uid = deployment_uid(&harness, "dev", "fleeb-operator").await;
    let installs = Api::<Install>::all(harness.admin.clone());
    let install_uids: Vec<Option<String>> =
        installs.list(&ListParams::default()).await.unwrap().items.iter().map(|i| i.metadata.uid.clone()).collect();
    assert_eq!(install_uids.len(), 3);

    // The plan, changing nothing.
    let planned = olmv2(&harness, &["migrate", "plan"]);
    assert!(planned.status.success(), "{}", text(&planned));
    let table = text(&planned);
    let row = |prefix: &str| table.lines().map(str::trim_start).find(|l| l.starts_with(prefix)).map(str::to_owned);
    let plumbus_row = row("ops/plumbus").unwrap_or_else(|| panic!("{table}"));
    for cell in ["plumbus.ops", "stable", "olm/community", "Automatic", "plumbus (new)", "adopt"] {
        assert!(plumbus_row.contains(cell), "{cell} in {plumbus_row}");
    }
    assert!(row("dev/grumbo").unwrap().contains("grumbo (new)"), "{table}");
    assert!(row("dev/fleeb").unwrap().contains("Manual"), "{table}");
    let yaml = olmv2(&harness, &["migrate", "plan", "-o", "yaml"]);
    let plans: Vec<Value> = serde_yaml_ng::from_slice(&yaml.stdout).expect("YAML plan");
    assert_eq!(plans.len(), 3);
    assert!(plans.iter().all(|p| p["blocked"].is_null()), "{plans:?}");
    let granted = plans.iter().find(|p| p["name"] == "plumbus").unwrap()["granted"].as_array().unwrap().len();
    assert!(granted > 0, "what plumbus holds today is in the plan");
    let operators = Api::<Operator>::all(harness.admin.clone());
    assert!(operators.list(&ListParams::default()).await.unwrap().items.is_empty(), "the plan changed nothing");
    assert_eq!(
        Api::<Subscription>::all(harness.admin.clone()).list(&ListParams::default()).await.unwrap().items.len(),
        3
    );

    // Adoption of ops asked, the controller killed as soon as the Operator exists; started again.
    let asked =
        harness.admin_kubectl(&["annotate", "namespace", "ops", "operators.coreos.com/adopt-subscriptions=true"], None);
    assert!(asked.status.success(), "{}", text(&asked));
    let mut seen = false;
    for _ in 0..1500 {
        if operators.get_opt("plumbus").await.unwrap().is_some() {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    harness.stop_controllers();
    assert!(seen, "the controller made the Operator");
    harness.start_controllers().await;

    // The rest with `olmv2 migrate apply`, which waits until the controller is done.
    let applied = olmv2(&harness, &["migrate", "apply", "--timeout-seconds", "60"]);
    assert!(applied.status.success(), "{}", text(&applied));
    assert!(text(&applied).contains("Subscriptions adopted."), "{}", text(&applied));

    assert!(Api::<Subscription>::all(harness.admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
    let listed = installs.list(&ListParams::default()).await.unwrap().items;
    let after: Vec<Option<String>> = listed.iter().map(|i| i.metadata.uid.clone()).collect();
    assert_eq!(after, install_uids, "the same three Installs, none made again");
    assert_eq!(deployment_uid(&harness, "ops", "plumbus-operator").await, plumbus_uid, "plumbus never reinstalled");
    assert_eq!(deployment_uid(&harness, "dev", "grumbo-operator").await, grumbo_uid, "grumbo never reinstalled");
    assert_eq!(deployment_uid(&harness, "dev", "fleeb-operator").await, fleeb_uid, "fleeb never reinstalled");
    let names: Vec<String> =
        operators.list(&ListParams::default()).await.unwrap().items.iter().map(|o| o.name_any()).collect();
    assert_eq!(names, ["fleeb", "grumbo", "plumbus"], "one Operator each, as planned");
    for (operator, install, origin, approval) in [
        ("plumbus", "plumbus.ops", "Subscription ops/plumbus", UpdateApproval::Automatic),
        ("fleeb", "fleeb.dev", "Subscription dev/fleeb", UpdateApproval::Manual),
        // Eve may not `install` from the catalog: her Automatic Subscription's updates now wait for a person.
        ("grumbo", "grumbo.dev", "Subscription dev/grumbo", UpdateApproval::Manual),
    ] {
        let adopted = Api::<Install>::all(harness.admin.clone()).get(install).await.unwrap();
        let owners: Vec<String> = adopted.owner_references().iter().map(|o| format!("{}/{}", o.kind, o.name)).collect();
        assert_eq!(owners, [format!("Operator/{operator}")]);
        assert_eq!(adopted.annotations().get(ADOPTED_FROM_ANNOTATION).map(String::as_str), Some(origin));
        let operator_object = operators.get(operator).await.unwrap();
        assert_eq!(operator_object.annotations().get(OPERATOR_INSTALL_ANNOTATION).map(String::as_str), Some(install));
        let updates = operator_object.spec.updates.clone().unwrap().catalog_source.unwrap();
        assert_eq!(updates.approval, approval, "{operator}");
        let namespace = install.split_once('.').unwrap().1;
        assert_eq!(operator_object.spec.install_namespace.as_deref(), Some(namespace));
        let settled = harness
            .wait_for(&operators, operator, "installed under its Operator, components shown", |o| {
                state(o) == Some(OperatorState::Installed)
                    && has_condition(o, "Adopted", "True", "AdoptedFromSubscription")
                    && o.status.as_ref().and_then(|s| s.components.as_ref()).is_some_and(|c| {
                        c.refs.iter().any(|r| r.kind == "Deployment" && r.namespace.as_deref() == Some(namespace))
                    })
            })
            .await;
        assert!(condition(&settled, "Adopted").unwrap().message.contains(origin));
        // The Install records where it came from on its first pass under the Operator.
        harness
            .wait_for(&installs, install, "recording where it came from", |i| {
                i.status.as_ref().and_then(|s| s.adopted_from.as_deref()) == Some(origin)
            })
            .await;
    }
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(harness.admin.clone(), "default");
    let listed = events.list(&ListParams::default()).await.unwrap().items;
    assert!(
        listed.iter().all(|e| e.reason.as_deref() != Some("ComponentsDivergeFromResolvedContent")),
        "the Operator's label added to what the Installs applied is not drift: {:?}",
        listed
            .iter()
            .filter(|e| e.reason.as_deref() == Some("ComponentsDivergeFromResolvedContent"))
            .map(|e| e.note.clone())
            .collect::<Vec<_>>()
    );
    let divergent: Vec<_> = listed
        .iter()
        .filter(|e| e.reason.as_deref() == Some("ComponentsDivergeFromInstall"))
        .map(|e| e.note.clone())
        .collect();
    assert!(divergent.is_empty(), "an adopted Operator's components were never missing: {divergent:?}");
    let deployment = Api::<Deployment>::namespaced(harness.admin.clone(), "ops").get("plumbus-operator").await.unwrap();
    assert!(deployment.labels().contains_key("v2alpha1.operators.coreos.com/plumbus"));
    let demoted = harness.wait_event("default", "AdoptedWithManualApproval").await;
    assert!(demoted.note.unwrap_or_default().contains("eve"), "the event names whose rights were missing");

    // Asking for it deletes the Operator: who may only patch Operators may not.
    let dora = crate::attacks::may(&harness, "dora", "operators", &["get", "list", "patch"]).await;
    let refused = harness.kubectl(
        &dora,
        &["annotate", "operator", "grumbo", "operators.coreos.com/revert-to-subscription=true"],
        None,
    );
    assert!(!refused.status.success());
    assert!(text(&refused).contains("needs the verb delete on it"), "{}", text(&refused));

    // The way back, for grumbo: a dry run first, then the Subscription made again, nothing re-installed.
    let dry = olmv2(&harness, &["migrate", "revert", "--dry-run"]);
    assert!(dry.status.success(), "{}", text(&dry));
    let shown = text(&dry);
    let grumbo_row =
        shown.lines().map(str::trim_start).find(|l| l.starts_with("grumbo ")).unwrap_or_else(|| panic!("{shown}"));
    for cell in ["dev/grumbo", "Manual", "grumbo.dev", "revert"] {
        assert!(grumbo_row.contains(cell), "{cell} in {grumbo_row}");
    }
    assert!(operators.get_opt("grumbo").await.unwrap().is_some(), "a dry run changes nothing");
    let reverted = olmv2(&harness, &["migrate", "revert", "grumbo", "--timeout-seconds", "60"]);
    assert!(reverted.status.success(), "{}", text(&reverted));
    assert!(operators.get_opt("grumbo").await.unwrap().is_none());
    let back = Api::<Subscription>::namespaced(harness.admin.clone(), "dev").get("grumbo").await.unwrap();
    assert_eq!(back.spec.install_plan_approval, Some(olmv2::api::v1alpha1::InstallPlanApproval::Manual));
    assert_eq!(
        back.annotations().get("v2alpha1.operators.coreos.com/reverted-from").map(String::as_str),
        Some("Operator grumbo")
    );
    let install = installs.get("grumbo.dev").await.unwrap();
    assert!(install.owner_references().is_empty(), "the Install is the Subscription's again");
    assert_eq!(install.annotations().get("operators.coreos.com/subscription").map(String::as_str), Some("dev/grumbo"));
    at_latest(&harness, "dev", "grumbo", "grumbo.v1.0.0").await;
    assert_eq!(deployment_uid(&harness, "dev", "grumbo-operator").await, grumbo_uid, "grumbo never reinstalled");
    let after_revert: Vec<Option<String>> =
        installs.list(&ListParams::default()).await.unwrap().items.iter().map(|i| i.metadata.uid.clone()).collect();
    assert_eq!(after_revert, install_uids, "still the same three Installs");

    // An update needing more permission waits for approval; 2.0.0-alpha runs on.
    let release = harness.push_bundle("plumbus/2.1.0", "plumbus-bundle", "2.1.0").await;
    push_catalog(&harness, 2, &[("2.0.0-alpha", &alpha), ("2.1.0", &release)]).await;
    harness
        .wait_for(&installs, "plumbus.ops", "the update waiting for approval", |i| {
            i.spec.content[0].manifest_image.as_deref() == Some(release.as_str())
                && i.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
        })
        .await;
    let image = Api::<Deployment>::namespaced(harness.admin.clone(), "ops").get("plumbus-operator").await.unwrap();
    let image = image.spec.unwrap().template.spec.unwrap().containers[0].image.clone().unwrap_or_default();
    assert!(image.ends_with("v2.0.0-alpha"), "the old version runs on: {image}");
}
