//! Operators resolving their dependencies, end to end with a real registry and the real kubectl: plumbus's catalog
//! bundle requires the Grumbo API, so applying an Operator for plumbus brings an Install of grumbo the Operator owns
//! (`plumbus.requires.grumbo`), made on behalf of the Operator's creator, listed among its components and waiting,
//! as the Operator's own Install does, for a person holding what it uses; its creator cannot approve it. Once
//! approved both are installed and the Operator is. Another Operator needing Grumbo takes the one installed; an
//! Operator whose requirements cannot be met says why and installs nothing, as does one whose dependency's Install
//! name someone else holds; and someone holding what an Operator's own Install was granted, but not its
//! dependency's, cannot move the dependency to other content without a person's approval.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::time::Duration;

use kube::api::{Api, DeleteParams};
use olmv2::api::v2alpha1::{Install, OperatorState, CONTENT_CHANGED_BY_ANNOTATION, CREATOR_ANNOTATION};
use serde_json::{json, Value};

use crate::attacks::{may, never_written};
use crate::operator::{
    create_catalog_source, has_condition, may_install_from_community, operators, refs_of_kind, start, state,
    wait_operator, OPERATOR_YAML,
};
use crate::support::emulator::kubectl::text;
use crate::support::harness::Harness;

fn gvk(group: &str, kind: &str) -> Value {
    json!({"group": group, "version": "v1alpha1", "kind": kind})
}

/// One package of one bundle at 1.0.0 (plumbus at 2.0.0-alpha) with `properties` beside its package property.
fn package(name: &str, version: &str, image: &str, properties: Vec<Value>) -> Vec<Value> {
    let bundle = format!("{name}.v{version}");
    let mut all = vec![json!({"type": "olm.package", "value": {"packageName": name, "version": version}})];
    all.extend(properties);
    vec![
        json!({"schema": "olm.package", "name": name, "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": name, "name": "stable", "entries": [{"name": bundle}]}),
        json!({"schema": "olm.bundle", "package": name, "name": bundle, "image": image, "properties": all}),
    ]
}

/// The catalog `catalogs/community` serves: plumbus requires the Grumbo API, which grumbo provides; squanch
/// requires it too; fleeb requires schleem 2 or newer, and the catalog has only schleem 1.
async fn catalog(harness: &Harness, plumbus: &str, grumbo: &str) {
    let grumbo_api = gvk("manufacturing.how.theydoit.com", "Grumbo");
    let blobs = [
        package(
            "plumbus",
            "2.0.0-alpha",
            plumbus,
            vec![
                json!({"type": "olm.gvk", "value": gvk("how.theydoit.com", "Plumbus")}),
                json!({"type": "olm.gvk.required", "value": grumbo_api}),
            ],
        ),
        package("grumbo", "1.0.0", grumbo, vec![json!({"type": "olm.gvk", "value": grumbo_api})]),
        package("squanch", "1.0.0", plumbus, vec![json!({"type": "olm.gvk.required", "value": grumbo_api})]),
        package(
            "fleeb",
            "1.0.0",
            plumbus,
            vec![
                json!({"type": "olm.package.required", "value": {"packageName": "schleem", "versionRange": ">=2.0.0"}}),
            ],
        ),
        package("schleem", "1.0.0", grumbo, vec![]),
    ];
    let blobs: Vec<Value> = blobs.into_iter().flatten().collect();
    harness.push_catalog("configs", &blobs).await;
    create_catalog_source(harness).await;
}

fn installs(harness: &Harness) -> Api<Install> {
    Api::all(harness.admin.clone())
}

/// An Operator of `package` named after it, from `catalogs/community`.
fn operator_yaml(package: &str) -> String {
    OPERATOR_YAML
        .replace("name: plumbus", &format!("name: {package}"))
        .replace("package: plumbus", &format!("package: {package}"))
}

/// The names of every Install.
async fn install_names(harness: &Harness) -> Vec<String> {
    let listed = installs(harness).list(&Default::default()).await.unwrap().items;
    listed.iter().map(|install| install.metadata.name.clone().unwrap()).collect()
}

fn approve(harness: &Harness, install: &str) {
    let patched = harness.admin_kubectl(
        &["patch", "install", install, "--type=merge", "-p", r#"{"spec":{"approval":"Approved"}}"#],
        None,
    );
    assert!(patched.status.success(), "{}", text(&patched));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operators_dependency_is_installed_through_an_install_of_its_own_once_a_person_approves() {
    let harness = start("dependencies").await;
    let plumbus = harness.push_bundle("plumbus/2.0.0-alpha", "plumbus-bundle", "2.0.0-alpha").await;
    let grumbo = harness.push_bundle("grumbo/1.0.0", "grumbo-bundle", "1.0.0").await;
    catalog(&harness, &plumbus, &grumbo).await;

    // bob may write Operators and Installs and install from the catalog; he holds nothing the operators use.
    may(&harness, "bob", "installs", &["get", "list", "patch"]).await;
    let bob = may(&harness, "bob", "operators", &["get", "list", "create", "patch"]).await;
    may_install_from_community(&harness, "bob").await;
    let applied = harness.kubectl(&bob, &["apply", "-f", "-"], Some(OPERATOR_YAML));
    assert!(applied.status.success(), "{}", text(&applied));

    // Both Installs wait for a person, and the Operator says which and how.
    let pending = wait_operator(&harness, "plumbus", "both Installs pending", |o| {
        has_condition(o, "InstallPendingApproval", "True", "PrivilegeEscalationRequired")
            && o.status
                .as_ref()
                .unwrap()
                .conditions
                .iter()
                .any(|c| c.message.contains("Installs plumbus, plumbus.requires.grumbo"))
    })
    .await;
    assert_eq!(state(&pending), Some(OperatorState::PendingApproval));
    let message = &pending
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "InstallPendingApproval")
        .unwrap()
        .message;
    assert!(message.contains("`olmv2 approve plumbus.requires.grumbo`"), "{message}");
    assert_eq!(
        refs_of_kind(&pending, "Install"),
        ["plumbus", "plumbus.requires.grumbo"],
        "the dependency is a component"
    );
    let dependency = installs(&harness).get("plumbus.requires.grumbo").await.expect("the dependency's Install");
    assert_eq!(dependency.spec.content[0].manifest_image.as_deref(), Some(grumbo.as_str()));
    let owners = dependency.metadata.owner_references.clone().unwrap();
    assert!(
        owners.iter().any(|o| o.kind == "Operator" && o.name == "plumbus" && o.controller == Some(true)),
        "{owners:?}"
    );
    let annotations = dependency.metadata.annotations.clone().unwrap();
    assert!(
        annotations[CREATOR_ANNOTATION].contains("\"bob\""),
        "made on behalf of the Operator's creator: {annotations:?}"
    );
    assert_eq!(annotations["v2alpha1.operators.coreos.com/bundle"], "grumbo.v1.0.0");
    assert!(dependency.metadata.labels.unwrap().contains_key("v2alpha1.operators.coreos.com/plumbus"));

    // bob cannot approve what he does not hold, and nothing of grumbo runs.
    let refused = harness.kubectl(
        &bob,
        &["patch", "install", "plumbus.requires.grumbo", "--type=merge", "-p", r#"{"spec":{"approval":"Approved"}}"#],
        None,
    );
    assert!(text(&refused).contains("\"bob\" may not approve Install plumbus.requires.grumbo"), "{}", text(&refused));
    never_written(&harness, "deployments", "grumbo-operator");

    // A person holding it all approves both: grumbo and plumbus are installed, and so is the Operator.
    approve(&harness, "plumbus.requires.grumbo");
    approve(&harness, "plumbus");
    let mut installed = None;
    for _ in 0..200 {
        harness.roll_out("operators").await;
        let operator = operators(&harness).get("plumbus").await.unwrap();
        if state(&operator) == Some(OperatorState::Installed) && refs_of_kind(&operator, "Deployment").len() == 2 {
            installed = Some(operator);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = operators(&harness).get_opt("plumbus").await;
    let installed = installed.unwrap_or_else(|| panic!("never Installed with both Deployments: {last:?}"));
    assert_eq!(refs_of_kind(&installed, "Deployment"), ["grumbo-operator", "plumbus-operator"]);
    let crds = refs_of_kind(&installed, "CustomResourceDefinition");
    assert!(crds.contains(&"grumbos.manufacturing.how.theydoit.com".to_owned()), "{crds:?}");
    assert!(has_condition(&installed, "InstallPendingApproval", "False", "NoInstallPendingApproval"));

    // Another Operator needing Grumbo takes the one installed: no second grumbo.
    let applied = harness.admin_kubectl(&["apply", "-f", "-"], Some(&operator_yaml("squanch")));
    assert!(applied.status.success(), "{}", text(&applied));
    harness.wait_for(&installs(&harness), "squanch", "the Operator's own Install", |_| true).await;
    let names = install_names(&harness).await;
    assert!(!names.iter().any(|name| name.starts_with("squanch.requires")), "{names:?}");

    // The dependency goes with its Operator.
    operators(&harness).delete("plumbus", &DeleteParams::default()).await.unwrap();
    for _ in 0..100 {
        if installs(&harness).get_opt("plumbus.requires.grumbo").await.unwrap().is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the dependency's Install outlived its Operator");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_whose_dependencies_cannot_be_met_says_why_and_installs_nothing() {
    let harness = start("unsatisfiable").await;
    // Nothing is pulled: the catalog's bundle images need not exist.
    let absent = harness.registry.reference("absent:1");
    catalog(&harness, &absent, &absent).await;

    let applied = harness.admin_kubectl(&["apply", "-f", "-"], Some(&operator_yaml("fleeb")));
    assert!(applied.status.success(), "{}", text(&applied));
    let failed = wait_operator(&harness, "fleeb", "unsatisfiable", |o| {
        has_condition(o, "ContentImportError", "True", "ConstraintsNotSatisfiable")
    })
    .await;
    assert_eq!(state(&failed), Some(OperatorState::Failed));
    let message =
        &failed.status.as_ref().unwrap().conditions.iter().find(|c| c.type_ == "ContentImportError").unwrap().message;
    assert!(
        message.contains("fleeb.v1.0.0") && message.contains("schleem") && message.contains(">=2.0.0"),
        "{message}"
    );

    // A dependency's Install name someone else holds is not taken over.
    let foreign = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "squanch.requires.grumbo"},
        "spec": {"content": [{"type": "Raw", "raw": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: taken\n"}]}});
    harness.create(&foreign).await;
    let applied = harness.admin_kubectl(&["apply", "-f", "-"], Some(&operator_yaml("squanch")));
    assert!(applied.status.success(), "{}", text(&applied));
    let taken = wait_operator(&harness, "squanch", "reporting the taken name", |o| {
        has_condition(o, "ContentImportError", "True", "InstallNameTaken")
    })
    .await;
    assert_eq!(state(&taken), Some(OperatorState::Failed));
    let names = install_names(&harness).await;
    assert_eq!(names, ["squanch.requires.grumbo"], "no Install made for either Operator");
    let owners = installs(&harness).get("squanch.requires.grumbo").await.unwrap().metadata.owner_references;
    assert!(owners.unwrap_or_default().is_empty(), "left alone");
}

/// Grumbo 1.1.0: the 1.0.0 bundle renamed, with another operator image and the same permissions.
async fn push_grumbo_1_1_0(harness: &Harness) -> String {
    let text = |_: &str, text: &str| text.replace("1.0.0", "1.1.0");
    harness.push_rewritten_bundle("grumbo/1.0.0", "grumbo-bundle:1.1.0", text, str::to_owned).await
}

/// Lets `user` hold exactly the rules Install `install` was granted, as Roles and ClusterRoles bound to them.
async fn holds_what_was_granted(harness: &Harness, install: &str, user: &str) {
    let granted = installs(harness).get(install).await.unwrap().status.unwrap().granted;
    assert!(!granted.is_empty(), "{install} was granted something");
    for (index, permission) in granted.iter().enumerate() {
        let rule = json!({"verbs": permission.verbs, "apiGroups": permission.api_groups, "resources": permission.resources,
            "resourceNames": permission.resource_names, "nonResourceURLs": permission.non_resource_urls});
        let name = format!("{user}-holds-{install}-{index}");
        let subject = json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]);
        let namespaces: Vec<Option<&str>> = if permission.namespaces.is_empty() {
            vec![None]
        } else {
            permission.namespaces.iter().map(|n| Some(n.as_str())).collect()
        };
        for namespace in namespaces {
            let (role, binding) = match namespace {
                None => (
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": [rule]}),
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}, "subjects": subject}),
                ),
                Some(namespace) => (
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name, "namespace": namespace}, "rules": [rule]}),
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name, "namespace": namespace},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}, "subjects": subject}),
                ),
            };
            harness.create(&role).await;
            harness.create(&binding).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn holding_an_operators_own_grants_does_not_let_one_move_its_dependency_unapproved() {
    let harness = start("dependency-swap").await;
    let plumbus = harness.push_bundle("plumbus/2.0.0-alpha", "plumbus-bundle", "2.0.0-alpha").await;
    let grumbo = harness.push_bundle("grumbo/1.0.0", "grumbo-bundle", "1.0.0").await;
    let next = push_grumbo_1_1_0(&harness).await;
    // plumbus `stable` needs the Grumbo API; plumbus 2.0.1 in `fast` (the same content) needs grumbo 1.1.0 or newer,
    // which only grumbo's `next` channel holds.
    let grumbo_api = gvk("manufacturing.how.theydoit.com", "Grumbo");
    let plumbus_bundle = |name: &str, version: &str, requirement: Value| {
        json!({"schema": "olm.bundle", "package": "plumbus", "name": name, "image": plumbus, "properties": [
            {"type": "olm.package", "value": {"packageName": "plumbus", "version": version}},
            {"type": "olm.gvk", "value": gvk("how.theydoit.com", "Plumbus")}, requirement]})
    };
    let grumbo_bundle = |version: &str, image: &str| {
        json!({"schema": "olm.bundle", "package": "grumbo", "name": format!("grumbo.v{version}"), "image": image, "properties": [
            {"type": "olm.package", "value": {"packageName": "grumbo", "version": version}},
            {"type": "olm.gvk", "value": grumbo_api}]})
    };
    let blobs = [
        json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "plumbus", "name": "stable", "entries": [{"name": "plumbus.v2.0.0-alpha"}]}),
        json!({"schema": "olm.channel", "package": "plumbus", "name": "fast", "entries": [{"name": "plumbus.v2.0.0-alpha"},
            {"name": "plumbus.v2.0.1", "replaces": "plumbus.v2.0.0-alpha"}]}),
        plumbus_bundle("plumbus.v2.0.0-alpha", "2.0.0-alpha", json!({"type": "olm.gvk.required", "value": grumbo_api})),
        plumbus_bundle(
            "plumbus.v2.0.1",
            "2.0.1",
            json!({"type": "olm.package.required", "value": {"packageName": "grumbo", "versionRange": ">=1.1.0"}}),
        ),
        json!({"schema": "olm.package", "name": "grumbo", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "grumbo", "name": "stable", "entries": [{"name": "grumbo.v1.0.0"}]}),
        json!({"schema": "olm.channel", "package": "grumbo", "name": "next", "entries": [{"name": "grumbo.v1.1.0"}]}),
        grumbo_bundle("1.0.0", &grumbo),
        grumbo_bundle("1.1.0", &next),
    ];
    harness.push_catalog("configs", &blobs).await;
    create_catalog_source(&harness).await;

    // The admin installs plumbus with grumbo 1.0.0 and approves both.
    let applied = harness.admin_kubectl(&["apply", "-f", "-"], Some(OPERATOR_YAML));
    assert!(applied.status.success(), "{}", text(&applied));
    for install in ["plumbus.requires.grumbo", "plumbus"] {
        harness
            .wait_for(&installs(&harness), install, "pending approval", |i| {
                i.status.as_ref().and_then(|s| s.state) == Some(olmv2::api::v2alpha1::InstallState::PendingApproval)
            })
            .await;
        approve(&harness, install);
    }
    let mut installed = false;
    for _ in 0..200 {
        harness.roll_out("operators").await;
        if state(&operators(&harness).get("plumbus").await.unwrap()) == Some(OperatorState::Installed) {
            installed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(installed, "never Installed: {:?}", operators(&harness).get("plumbus").await.unwrap().status);

    // dora holds everything plumbus's own Install was granted, nothing of grumbo's, and may edit Operators and use
    // the catalog: she moves plumbus to `fast`, which moves grumbo to other content.
    holds_what_was_granted(&harness, "plumbus", "dora").await;
    may(&harness, "dora", "operators", &["get", "list", "patch"]).await;
    may_install_from_community(&harness, "dora").await;
    let dora = harness.plane.user_kubeconfig("dora", &[]);
    let moved = harness.kubectl(
        &dora,
        &[
            "patch",
            "operator",
            "plumbus",
            "--type=merge",
            "-p",
            r#"{"spec":{"updates":{"catalogSource":{"channel":"fast"}}}}"#,
        ],
        None,
    );
    assert!(moved.status.success(), "{}", text(&moved));
    // The dependency moves as her change, and waits for a person holding what it uses; grumbo 1.0.0 runs on.
    let waiting = harness
        .wait_for(&installs(&harness), "plumbus.requires.grumbo", "moved and marked", |i| {
            i.spec.content[0].manifest_image.as_deref() == Some(next.as_str())
                && i.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(CONTENT_CHANGED_BY_ANNOTATION))
        })
        .await;
    assert_eq!(waiting.metadata.annotations.unwrap()[CONTENT_CHANGED_BY_ANNOTATION], "dora");
    assert_eq!(waiting.spec.approval, olmv2::api::v2alpha1::Approval::Unapproved);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deployment = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(harness.admin.clone(), "operators")
        .get("grumbo-operator")
        .await
        .unwrap();
    let image = deployment.spec.unwrap().template.spec.unwrap().containers[0].image.clone().unwrap_or_default();
    assert!(image.ends_with(":v1.0.0"), "grumbo 1.0.0 runs on: {image}");
}
