//! An Automatic Operator's update to a version that only renames its objects (a registry+v1 bundle names its RBAC
//! objects and CSV after the CSV) installs without a person once the first version was approved: the per-object
//! verbs on the new names follow from the `create` granted before (docs/security.md, invariant 11). A name someone
//! else holds already is never among them: the update waits for a person while the squatter is there, and the
//! operator runs on.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams};
use olmv2::api::v2alpha1::{Approval, Install, InstallState, OperatorState, PendingPermission};
use serde_json::json;

use crate::operator::{
    has_condition, operators, serve_alpha, serve_patch_release, start, state, wait_operator, OPERATOR_YAML,
};
use crate::support::emulator::kubectl::text;
use crate::support::harness::Harness;

fn installs(harness: &Harness) -> Api<Install> {
    Api::all(harness.admin.clone())
}

/// Waits until the Operator plumbus is Installed at `version`, rolling its Deployments out meanwhile.
pub(crate) async fn wait_version(harness: &Harness, version: &str) {
    for _ in 0..200 {
        harness.roll_out("operators").await;
        let operator = operators(harness).get("plumbus").await.unwrap();
        let installed = operator.status.as_ref().and_then(|s| s.metadata.as_ref()).and_then(|m| m.version.clone());
        if installed.as_deref() == Some(version) && state(&operator) == Some(OperatorState::Installed) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never Installed at {version}: {:?}", operators(harness).get_opt("plumbus").await);
}

fn names_of(permissions: &[PendingPermission], resource: &str) -> Vec<String> {
    let mut names: Vec<String> = permissions
        .iter()
        .filter(|p| p.resources.iter().any(|r| r == resource))
        .flat_map(|p| p.resource_names.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_automatic_update_that_renames_its_objects_installs_unless_a_name_is_taken() {
    let harness = start("renamed-update").await;
    let alpha = serve_alpha(&harness).await;
    let applied = harness.admin_kubectl(&["apply", "-f", "-"], Some(OPERATOR_YAML));
    assert!(applied.status.success(), "{}", text(&applied));
    wait_operator(&harness, "plumbus", "pending approval", |o| {
        has_condition(o, "InstallPendingApproval", "True", "PrivilegeEscalationRequired")
    })
    .await;
    let approve = ["patch", "install", "plumbus", "--type=merge", "-p", r#"{"spec":{"approval":"Approved"}}"#];
    assert!(harness.admin_kubectl(&approve, None).status.success());
    wait_version(&harness, "2.0.0-alpha").await;
    let first = installs(&harness).get("plumbus").await.unwrap().status.unwrap();
    assert_eq!(names_of(&first.granted, "clusterserviceversions"), ["plumbus.v2.0.0-alpha"]);
    let deployment_uid = Api::<Deployment>::namespaced(harness.admin.clone(), "operators")
        .get("plumbus-operator")
        .await
        .unwrap()
        .metadata
        .uid;

    // Someone who may create CSVs in `operators` takes the next version's name first.
    let squatter = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "plumbus.v2.0.1", "namespace": "operators"},
        "spec": {"displayName": "not plumbus", "install": {"strategy": "deployment"}}});
    harness.create(&squatter).await;
    let patch = serve_patch_release(&harness, &alpha).await;
    // The new Role's verbs follow from the granted create; the taken CSV name's do not: a person decides them, and
    // nothing of 2.0.1 is applied meanwhile.
    let waiting = harness
        .wait_for(&installs(&harness), "plumbus", "waiting for the taken name", |i| {
            i.spec.content[0].manifest_image.as_deref() == Some(patch.as_str())
                && i.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
        })
        .await;
    let pending = waiting.status.as_ref().unwrap().pending.clone().unwrap().permissions;
    assert_eq!(names_of(&pending, "clusterserviceversions"), ["plumbus.v2.0.1"], "{pending:#?}");
    assert!(
        pending.iter().all(|p| p.resource_names == ["plumbus.v2.0.1"]),
        "only the taken name waits for a person: {pending:#?}"
    );
    assert_eq!(waiting.spec.approval, Approval::Unapproved);
    let squatted: serde_json::Value = serde_json::from_slice(
        &harness.admin_kubectl(&["get", "csv", "plumbus.v2.0.1", "-n", "operators", "-o", "json"], None).stdout,
    )
    .unwrap();
    assert_eq!(squatted["spec"]["displayName"], "not plumbus", "the squatter's CSV is untouched");

    // Once the name is free again, the update needs nothing a person must approve: it installs on its own.
    let csvs = Api::<kube::core::DynamicObject>::namespaced_with(
        harness.admin.clone(),
        "operators",
        &kube::discovery::ApiResource {
            group: "operators.coreos.com".into(),
            version: "v1alpha1".into(),
            api_version: "operators.coreos.com/v1alpha1".into(),
            kind: "ClusterServiceVersion".into(),
            plural: "clusterserviceversions".into(),
        },
    );
    csvs.delete("plumbus.v2.0.1", &DeleteParams::default()).await.expect("squatter deleted");
    wait_version(&harness, "2.0.1").await;
    let upgraded = installs(&harness).get("plumbus").await.unwrap();
    assert_eq!(upgraded.spec.approval, Approval::Unapproved, "nobody approved the update");
    let status = upgraded.status.unwrap();
    assert_eq!(names_of(&status.granted, "clusterserviceversions"), ["plumbus.v2.0.0-alpha", "plumbus.v2.0.1"]);
    for resource in ["clusterroles", "clusterrolebindings"] {
        let names = names_of(&status.granted, resource);
        assert!(names.iter().any(|name| name.starts_with("plumbus.v2.0.1-")), "the renamed {resource}: {names:?}");
    }
    let event = harness.wait_event("default", "GrantFollowsCreate").await;
    let note = event.note.unwrap_or_default();
    assert!(note.contains("clusterserviceversions.operators.coreos.com operators/plumbus.v2.0.1"), "{note}");
    let deployment =
        Api::<Deployment>::namespaced(harness.admin.clone(), "operators").get("plumbus-operator").await.unwrap();
    assert_eq!(deployment.metadata.uid, deployment_uid, "updated in place");
    let image = deployment.spec.unwrap().template.spec.unwrap().containers[0].image.clone().unwrap_or_default();
    assert!(!image.is_empty());
    assert!(has_condition(&operators(&harness).get("plumbus").await.unwrap(), "UpdateAvailable", "False", "UpToDate"));
}
