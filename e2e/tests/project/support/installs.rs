//! Helpers of the Install suites: a harness with the namespace `operators`, Installs read and waited for, the sample
//! plumbus bundle, and a user who may edit Installs but holds nothing else.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use kube::api::Api;
use olmv2::api::v2alpha1::{Install, InstallState};
use serde_json::json;

use super::harness::Harness;

pub async fn start(name: &str) -> Harness {
    Harness::start("install", name, &["operators"], Duration::from_secs(2)).await
}

pub fn installs(harness: &Harness) -> Api<Install> {
    Api::all(harness.admin.clone())
}

pub async fn wait(harness: &Harness, name: &str, what: &str, done: impl Fn(&Install) -> bool) -> Install {
    harness.wait_for(&installs(harness), name, what, done).await
}

pub async fn wait_state(harness: &Harness, name: &str, state: InstallState) -> Install {
    wait(harness, name, &format!("{state:?}"), |i| i.status.as_ref().and_then(|s| s.state) == Some(state)).await
}

/// Pushes the sample bundle `bundles/<bundle>` as `plumbus-bundle:<tag>`.
pub async fn push(harness: &Harness, bundle: &str, tag: &str) -> String {
    harness.push_bundle(bundle, "plumbus-bundle", tag).await
}

pub fn install_yaml(name: &str, image: &str) -> String {
    format!(
        "apiVersion: operators.coreos.com/v2alpha1\nkind: Install\nmetadata:\n  name: {name}\nspec:\n  namespaces:\n  - from: default\n    to: operators\n  content:\n  - type: ManifestImage\n    manifestImage: {image}\n"
    )
}

pub fn approve_patch() -> &'static str {
    r#"{"spec":{"approval":"Approved"}}"#
}

/// A user who may read and update Installs, and nothing else.
pub async fn install_editor(harness: &Harness, name: &str) -> String {
    for object in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "install-editor"},
            "rules": [{"apiGroups": ["operators.coreos.com"], "resources": ["installs"], "verbs": ["get", "list", "watch", "update", "patch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": format!("install-editor-{name}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "install-editor"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}]}),
    ] {
        let _ = harness.try_create(&object).await;
    }
    harness.plane.user_kubeconfig(name, &[])
}
