//! OLM v0's CSV finalizer `operators.coreos.com/csv-cleanup`: put on every original CSV the loop runs, so that what
//! was made for the CSV outside its namespace and without an owner reference (the ClusterRoles and
//! ClusterRoleBindings lifted for a group targeting every namespace, its webhook configurations, APIServices and the
//! aggregated API server's bindings) goes when the CSV goes. On deletion those objects, found by the CSV's owner
//! labels, are deleted; the finalizer is removed once no ClusterRole or ClusterRoleBinding is left.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::ResourceExt;
use serde_json::json;

use super::certs::KUBE_SYSTEM;
use super::Place;
use super::{Context, ReconcileError};
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::legacy::tenancy::owner_selector;

/// OLM's CSV finalizer.
pub const CLEANUP_FINALIZER: &str = "operators.coreos.com/csv-cleanup";

pub fn has_finalizer(csv: &ClusterServiceVersion) -> bool {
    csv.finalizers().iter().any(|finalizer| finalizer == CLEANUP_FINALIZER)
}

/// The CSV's finalizers with ours added (`true`) or removed (`false`), the others kept in their order.
pub fn finalizers_with(csv: &ClusterServiceVersion, ours: bool) -> Vec<String> {
    let mut finalizers: Vec<String> =
        csv.finalizers().iter().filter(|finalizer| *finalizer != CLEANUP_FINALIZER).cloned().collect();
    if ours {
        finalizers.push(CLEANUP_FINALIZER.to_owned());
    }
    finalizers
}

/// Puts the finalizer on the CSV (only while it is at the version read, so no other finalizer is lost).
pub(super) async fn add_finalizer(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    place: &Place,
) -> Result<(), ReconcileError> {
    let patch = json!({"metadata": {"finalizers": finalizers_with(csv, true)}});
    ctx.client
        .namespaced::<ClusterServiceVersion>(&place.namespace)
        .merge_patch(&place.name, &patch, csv.metadata.resource_version.as_deref())
        .await
        .map_err(place.write("its finalizer"))?;
    Ok(())
}

/// A CSV being deleted: deletes what its owner labels select, then lets it go.
pub(super) async fn finalize(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    place: &Place,
) -> Result<Action, ReconcileError> {
    if !has_finalizer(csv) {
        return Ok(Action::await_change());
    }
    let params = ListParams::default().labels(&owner_selector(&place.name, &place.namespace));
    let bindings = ctx.client.all::<ClusterRoleBinding>();
    let roles = ctx.client.all::<ClusterRole>();
    bindings.delete_collection(&params).await.map_err(place.write("its ClusterRoleBindings"))?;
    roles.delete_collection(&params).await.map_err(place.write("its ClusterRoles"))?;
    ctx.client
        .all::<MutatingWebhookConfiguration>()
        .delete_collection(&params)
        .await
        .map_err(place.write("its MutatingWebhookConfigurations"))?;
    ctx.client
        .all::<ValidatingWebhookConfiguration>()
        .delete_collection(&params)
        .await
        .map_err(place.write("its ValidatingWebhookConfigurations"))?;
    // As OLM's deletion handler: its APIServices (one left behind breaks discovery for every client of the
    // cluster) and the authentication-reader binding made for them in kube-system.
    ctx.client.all::<APIService>().delete_collection(&params).await.map_err(place.write("its APIServices"))?;
    ctx.client
        .namespaced::<RoleBinding>(KUBE_SYSTEM)
        .delete_collection(&params)
        .await
        .map_err(place.write("its RoleBindings in kube-system"))?;
    if !bindings.list_with(&params).await.map_err(place.read("ClusterRoleBindings"))?.is_empty() {
        tracing::info!(csv = %place.name, namespace = %place.namespace, "waiting for ClusterRoleBindings to delete");
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    if !roles.list_with(&params).await.map_err(place.read("ClusterRoles"))?.is_empty() {
        tracing::info!(csv = %place.name, namespace = %place.namespace, "waiting for ClusterRoles to delete");
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let patch = json!({"metadata": {"finalizers": finalizers_with(csv, false)}});
    ctx.client
        .namespaced::<ClusterServiceVersion>(&place.namespace)
        .merge_patch(&place.name, &patch, csv.metadata.resource_version.as_deref())
        .await
        .map_err(place.write("its finalizer"))?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(finalizers: &[&str]) -> ClusterServiceVersion {
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "c", "namespace": "ns", "finalizers": finalizers},
            "spec": {"displayName": "c", "install": {"strategy": "deployment", "spec": {"deployments": []}}},
        }))
        .expect("csv")
    }

    #[test]
    fn the_finalizer_is_added_once_after_the_others_and_removed_alone() {
        assert!(!has_finalizer(&csv(&["other"])));
        assert_eq!(finalizers_with(&csv(&["other"]), true), ["other", CLEANUP_FINALIZER]);
        let ours = csv(&[CLEANUP_FINALIZER, "other"]);
        assert!(has_finalizer(&ours));
        assert_eq!(finalizers_with(&ours, true), ["other", CLEANUP_FINALIZER], "never twice");
        assert_eq!(finalizers_with(&ours, false), ["other"]);
        assert!(finalizers_with(&csv(&[]), false).is_empty());
    }
}
