//! The writing half of a CSV pass: one function per write `phase::transition` can ask for, in the order OLM makes
//! them (the group's annotations on the CSV, the group's provided APIs, deleting a replaced CSV or the Deployments
//! of a conflict, the install, the status and its event, copies and the RBAC of the group's targets). Each is a
//! no-op when the outcome does not ask for it; the per-API ClusterRoles are `api_roles`.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use k8s_openapi::api::apps::v1::Deployment;
use kube::runtime::controller::Action;
use kube::ResourceExt;
use serde_json::json;

use super::copying::copying;
use super::phase::Outcome;
use super::tenants::ensure_target_rbac;
use super::{Context, Place, ReconcileError};
use crate::api::v1::{OperatorGroup, PROVIDED_APIS_ANNOTATION};
use crate::api::v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus};
use crate::controller::conditions::Transition;
use crate::controller::listing;
use crate::legacy::apis::{api_labels, api_set_string, ApiKey};
use crate::legacy::copier::CopyRequest;
use crate::legacy::intersection::{ApiReconciliation, GroupSurface};
use crate::legacy::membership::missing_annotations;

/// Labels the CSV with the APIs it provides and requires (OLM's `olm.api.*` labels, which resolution reads); a
/// write ends the pass, and the next one starts from the labelled CSV.
pub(super) async fn label_apis(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    provided: &BTreeSet<ApiKey>,
    place: &Place,
) -> Result<ControlFlow<Action>, ReconcileError> {
    let labels = api_labels(provided);
    if labels.iter().all(|(key, value)| csv.labels().get(key) == Some(value)) {
        return Ok(ControlFlow::Continue(()));
    }
    ctx.client
        .namespaced::<ClusterServiceVersion>(&place.namespace)
        .merge_patch(&place.name, &json!({"metadata": {"labels": labels}}), None)
        .await
        .map_err(place.write("API labels"))?;
    Ok(ControlFlow::Break(Action::requeue(std::time::Duration::ZERO)))
}

/// Writes the group's annotations the CSV lacks.
pub(super) async fn annotate(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    group: Option<&OperatorGroup>,
    outcome: &Outcome,
    place: &Place,
) -> Result<(), ReconcileError> {
    let Some(group) = group.filter(|_| outcome.annotate) else { return Ok(()) };
    // Only what changes: a CSV waiting for its group's targets already carries the rest.
    let mut missing = missing_annotations(csv, group);
    missing.retain(|key, value| csv.annotations().get(key) != Some(value));
    if missing.is_empty() {
        return Ok(());
    }
    let patch = json!({"metadata": {"annotations": missing}});
    ctx.client
        .namespaced::<ClusterServiceVersion>(&place.namespace)
        .merge_patch(&place.name, &patch, None)
        .await
        .map_err(place.write("the OperatorGroup annotations"))?;
    Ok(())
}

/// Adds the CSV's provided APIs to its group's `olm.providedAPIs`, or removes them (at the group's version read:
/// two CSVs of one group must not overwrite each other's change).
pub(super) async fn change_group_apis(
    ctx: &Context,
    group: Option<&OperatorGroup>,
    provided: &BTreeSet<ApiKey>,
    outcome: &Outcome,
    place: &Place,
) -> Result<(), ReconcileError> {
    let (Some(change), Some(group)) = (outcome.group_apis, group) else { return Ok(()) };
    let current = GroupSurface::of(group).provided;
    let next: BTreeSet<ApiKey> = match change {
        ApiReconciliation::Add => current.union(provided).cloned().collect(),
        _ => current.difference(provided).cloned().collect(),
    };
    let patch = json!({"metadata": {"annotations": {PROVIDED_APIS_ANNOTATION: api_set_string(&next)}}});
    ctx.client
        .namespaced::<OperatorGroup>(&place.namespace)
        .merge_patch(&group.name_any(), &patch, group.metadata.resource_version.as_deref())
        .await
        .map_err(place.write("the provided APIs of its OperatorGroup"))?;
    Ok(())
}

/// Deletes a replaced CSV (phase Deleting); its deletion ends the pass.
pub(super) async fn delete_replaced(
    ctx: &Context,
    outcome: &Outcome,
    place: &Place,
) -> Result<ControlFlow<Action>, ReconcileError> {
    if !outcome.delete {
        return Ok(ControlFlow::Continue(()));
    }
    tracing::info!(csv = %place.name, namespace = %place.namespace, "deleting a replaced CSV");
    ctx.client
        .namespaced::<ClusterServiceVersion>(&place.namespace)
        .ensure_deleted(&place.name)
        .await
        .map_err(place.write("the replaced CSV itself"))?;
    Ok(ControlFlow::Break(Action::await_change()))
}

/// Deletes the CSV's Deployments (a conflict of provided APIs).
pub(super) async fn remove_deployments(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    outcome: &Outcome,
    place: &Place,
) -> Result<(), ReconcileError> {
    if !outcome.remove_deployments {
        return Ok(());
    }
    let deployments = ctx.client.namespaced::<Deployment>(&place.namespace);
    for spec in &csv.spec.install.spec.deployments {
        deployments.ensure_deleted(&spec.name).await.map_err(place.write(format!("Deployment {}", spec.name)))?;
        ctx.written.deleted(&place.namespace, &spec.name);
    }
    Ok(())
}

/// Installs the CSV: its serving certificates, its Deployments (carrying the certificates' hashes), then its
/// APIServices and webhooks. Answers whether the certificates were issued anew.
pub(super) async fn install(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    outcome: &Outcome,
    place: &Place,
) -> Result<bool, ReconcileError> {
    if !outcome.install {
        return Ok(false);
    }
    let issued = super::components::install_certificates(ctx, csv).await?;
    let deployments = ctx.client.namespaced::<Deployment>(&place.namespace);
    for deployment in super::strategy::deployments_with(csv, &issued.hashes()) {
        let deployment_name = deployment["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let applied = deployments
            .apply(&deployment_name, &deployment, None)
            .await
            .map_err(place.write(format!("Deployment {deployment_name}")))?;
        ctx.written.wrote(&place.namespace, &deployment_name, applied.metadata.resource_version.as_deref());
    }
    super::components::install_apis(ctx, csv, &issued).await?;
    Ok(issued.rotated)
}

/// Writes the status the pass decided on (when it differs from what was read), then the event of its phase change.
pub(super) async fn write_status(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    (read, next): (&ClusterServiceVersionStatus, &ClusterServiceVersionStatus),
    event: Option<Transition>,
    place: &Place,
) -> Result<(), ReconcileError> {
    if next != read {
        ctx.client
            .namespaced::<ClusterServiceVersion>(&place.namespace)
            .apply_status(&place.name, next, None)
            .await
            .map_err(place.write("the status"))?;
    }
    if let Some(event) = event {
        ctx.events.publish(csv, &[event]).await;
    }
    Ok(())
}

/// Asks for the CSV's copies in its group's targets (or for their removal), from the CSV as this pass leaves it
/// (the copier writes them after: `legacy::copier`), and extends its RBAC to those targets. Until every namespace
/// has been read, a missing one would look deleted, and its copies with it: nothing is done then.
pub(super) async fn copy_to_targets(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    group: Option<&OperatorGroup>,
    next: &ClusterServiceVersionStatus,
    place: &Place,
) -> Result<(), ReconcileError> {
    let (Some(group), true) = (group, listing::ready(&ctx.namespaces).await) else { return Ok(()) };
    let mut original = csv.clone();
    original.status = Some(next.clone());
    let enabled = ctx.copies_enabled().await.map_err(place.read("the OLMConfig"))?;
    let present = || ctx.copier.may_have_copies(&csv.namespace().unwrap_or_default(), &csv.name_any());
    let decided = copying(&original, group, &ctx.live_namespaces(), &ctx.protected, enabled, present);
    ctx.copies_disabled_event(csv, decided.disabled).await;
    if let Some(wanted) = decided.wanted {
        ctx.copier.request(CopyRequest { original: original.clone(), wanted });
    }
    ensure_target_rbac(ctx, &original, group, place).await
}
