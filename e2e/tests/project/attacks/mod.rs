//! The approval gate attacked, one scenario per attack of `docs/security.md`, on the test control plane with the
//! controller running as `deploy/` runs it and the real kubectl in the attacker's hands. Each scenario proves from
//! the audit log that nothing was written with a permission nobody approved, and that the controller stays healthy
//! (a fresh Install still goes through approval to Installed).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::time::Duration;

use crate::support;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams};
use olmv2::api::v2alpha1::{
    Approval, Install, InstallState, PendingReason, CONTENT_CHANGED_BY_ANNOTATION, CREATOR_ANNOTATION,
    MANUAL_APPROVAL_ANNOTATION,
};
use serde_json::{json, Value};
use support::emulator::kubectl::text;
use support::harness::{Harness, CONTROLLER_USER};
use support::installs::{approve_patch, install_editor, installs, push, start, wait, wait_state};

/// Raw content binding `user` to cluster-admin: what an attacker wants applied.
pub(crate) fn escalation(user: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {user}-is-admin\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: {user}\n"
    )
}

pub(crate) fn raw_install(name: &str, raw: &str, to: &str) -> String {
    let indented: String = raw.lines().map(|line| format!("      {line}\n")).collect();
    format!(
        "apiVersion: operators.coreos.com/v2alpha1\nkind: Install\nmetadata:\n  name: {name}\nspec:\n  namespaces:\n  - from: default\n    to: {to}\n  content:\n  - type: Raw\n    raw: |\n{indented}"
    )
}

pub(crate) fn config_map(name: &str, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: \"{value}\"\n")
}

/// Gives `user` the verbs on a resource of `operators.coreos.com` cluster-wide; answers their kubeconfig.
pub(crate) async fn may(harness: &Harness, user: &str, resource: &str, verbs: &[&str]) -> String {
    let role = format!("{resource}-{}", verbs.join("-"));
    for object in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role},
            "rules": [{"apiGroups": ["operators.coreos.com"], "resources": [resource], "verbs": verbs}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": format!("{role}-{user}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]}),
    ] {
        // The role may exist already, for another user.
        let _ = harness.try_create(&object).await;
    }
    harness.plane.user_kubeconfig(user, &[])
}

/// A user who may create, read and update Installs, and nothing else: the attacker of the issue.
async fn install_author(harness: &Harness, name: &str) -> String {
    may(harness, name, "installs", &["create", "get", "list", "watch", "update", "patch"]).await
}

fn apply(harness: &Harness, kubeconfig: &str, manifest: &str) {
    let applied = harness.kubectl(kubeconfig, &["apply", "-f", "-"], Some(manifest));
    assert!(applied.status.success(), "{}", text(&applied));
}

/// No successful write of `resource`/`name` happened, by anyone.
pub(crate) fn never_written(harness: &Harness, resource: &str, name: &str) {
    let writes: Vec<_> =
        harness.audit_records().into_iter().filter(|r| r.resource == resource && r.name == name && r.wrote()).collect();
    assert!(writes.is_empty(), "{resource}/{name} was written: {writes:?}");
}

/// No ClusterRoleBinding binds `user` to cluster-admin: they did not become it.
async fn not_bound(harness: &Harness, user: &str) {
    for binding in Api::<ClusterRoleBinding>::all(harness.admin.clone()).list(&Default::default()).await.unwrap() {
        let subjects = binding.subjects.unwrap_or_default();
        let admin = binding.role_ref.name == "cluster-admin" && subjects.iter().any(|s| s.name == user);
        assert!(!admin, "{user} was made cluster-admin by {:?}", binding.metadata.name);
    }
}

/// The admin applies a ConfigMap `name` through an Install of that name, approves it, and waits until it is installed.
pub(crate) async fn installed_by_admin(harness: &Harness, name: &str, value: &str) -> Install {
    apply(harness, &harness.plane.kubeconfig(), &raw_install(name, &config_map(name, value), "operators"));
    wait_state(harness, name, InstallState::PendingApproval).await;
    let approved = harness.admin_kubectl(&["patch", "install", name, "--type", "merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "{}", text(&approved));
    wait_state(harness, name, InstallState::Installed).await
}

/// The controller still works: a fresh Install waits for approval, is approved by the admin and installed.
async fn controller_healthy(harness: &Harness, name: &str) {
    installed_by_admin(harness, name, "ok").await;
    let accounts = Api::<ServiceAccount>::namespaced(harness.admin.clone(), "olmv2-system");
    let controller = accounts.get("olmv2-controller").await.expect("the controller's own account is still there");
    assert!(controller.metadata.owner_references.unwrap_or_default().is_empty(), "nobody owns the controller");
}

async fn pending_reason(harness: &Harness, name: &str, reason: PendingReason) -> Install {
    wait(harness, name, &format!("pending for {reason:?}"), |install| {
        install.status.as_ref().and_then(|s| s.pending.as_ref()).and_then(|p| p.reason) == Some(reason)
            && install.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
    })
    .await
}

/// The admin approves what `name` waits for, and the Install rolls out to Installed.
async fn approve_and_roll_out(harness: &Harness, name: &str) -> Install {
    let approved = harness.admin_kubectl(&["patch", "install", name, "--type", "merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "{}", text(&approved));
    wait_state(harness, name, InstallState::Applying).await;
    harness.roll_out("operators").await;
    wait_state(harness, name, InstallState::Installed).await
}

mod accounts;
mod aggregation;
mod catalogs;
mod content;
mod gate;
