//! A CSV's RBAC in its group's targets (OLM v0's `ensureTenantRBAC` and `ensureSingletonRBAC`; `legacy::tenancy`
//! decides): read whether its accounts already hold their permissions there, read the CSV's own Roles and
//! RoleBindings, ask whether the CSV's author could write the copies by hand (`authority`), and write them. A
//! refusal is one Warning event, `TargetRBACRefused`; the CSV keeps its phase, as its operator runs.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::ListParams;
use kube::ResourceExt;

use super::authority::OnBehalf;
use super::observe::author_may;
use super::Place;
use super::{Context, ReconcileError};
use crate::api::v1::{OperatorGroup, OPERATOR_NAMESPACE_ANNOTATION};
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::controller::client::ClientError;
use crate::legacy::copies::is_uncopiable;
use crate::legacy::membership::missing_annotations;
use crate::legacy::tenancy::{
    labelled_as, owner_selector, permissions_met, singleton_plan, tenant_plan, Declared, Owner, SingletonPlan,
    TenantPlan,
};
use crate::rbac::{RbacSnapshot, UserInfo};

/// The reason of the Warning event saying a CSV's RBAC was not copied or lifted for its author.
pub const TARGET_RBAC_REFUSED: &str = "TargetRBACRefused";

/// Extends the CSV's RBAC to its group's targets where its accounts lack their permissions.
pub(super) async fn ensure_target_rbac(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    group: &OperatorGroup,
    place: &Place,
) -> Result<(), ReconcileError> {
    let namespace = place.namespace.as_str();
    // As OLM: only for a CSV its group's annotations describe, and that is copiable (processed, not failing about
    // its group).
    let annotated_here = csv.annotations().get(OPERATOR_NAMESPACE_ANNOTATION).map(String::as_str) == Some(namespace);
    if !annotated_here || !missing_annotations(csv, group).is_empty() || is_uncopiable(csv) {
        return Ok(());
    }
    let targets = group.status.as_ref().map(|status| status.namespaces.clone()).unwrap_or_default();
    if targets.is_empty() || targets == [namespace] {
        return Ok(());
    }
    let uid = csv.uid().unwrap_or_default();
    let declared = Declared::of(&csv.spec.install.spec);
    let owner = Owner { name: &place.name, namespace, uid: &uid, declared: &declared };
    let cluster = ctx.cluster_rbac().await;
    if targets.iter().any(String::is_empty) {
        return lift_to_cluster(ctx, csv, place, owner, &cluster).await;
    }
    let refusals = copy_into_targets(ctx, csv, place, owner, &cluster, &targets).await?;
    report_refusals(ctx, csv, place, &refusals).await;
    Ok(())
}

/// A group targeting every namespace (OLM's `ensureSingletonRBAC`): the CSV's Roles lifted to ClusterRoles and
/// bound cluster-wide, if its author may. When its accounts already hold their permissions everywhere, or nothing
/// is left to lift, the pass ends there: a refusal published earlier is neither published again nor forgotten.
async fn lift_to_cluster(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    place: &Place,
    owner: Owner<'_>,
    cluster: &RbacSnapshot,
) -> Result<(), ReconcileError> {
    let namespace = place.namespace.as_str();
    let held = |account: &str| {
        let rules = cluster.cluster_rules_for(&UserInfo::service_account(namespace, account)).0;
        (rules.clone(), rules)
    };
    if permissions_met(&csv.spec.install.spec, true, &held) {
        return Ok(());
    }
    let (roles, bindings) = owned_rbac(ctx, &owner, place).await?;
    let existing_roles: BTreeMap<String, ClusterRole> =
        ctx.rbac.cluster_roles().iter().map(|role| (role.name_any(), role.as_ref().clone())).collect();
    let existing_bindings: BTreeMap<String, ClusterRoleBinding> =
        ctx.rbac.cluster_role_bindings().iter().map(|binding| (binding.name_any(), binding.as_ref().clone())).collect();
    let plan = singleton_plan(owner, &roles, &bindings, &existing_roles, &existing_bindings);
    if plan.is_empty() {
        return Ok(());
    }
    let mut refusals = Vec::new();
    match author_may(ctx, csv, place, &OnBehalf::bound_cluster_roles(plan.grants.clone())).await? {
        Err(why) => {
            let names: Vec<String> = plan.cluster_roles.iter().map(|role| role.name_any()).collect();
            let bound: Vec<String> = plan.bindings.iter().map(|binding| binding.name_any()).collect();
            refusals.push(format!(
                "its Roles are not made ClusterRoles ({}) nor bound cluster-wide ({}): the CSV's {why}",
                names.join(", "),
                bound.join(", ")
            ));
        }
        Ok(()) => write_lifted(ctx, place, owner, &plan).await?,
    }
    report_refusals(ctx, csv, place, &refusals).await;
    Ok(())
}

/// Writes the lifted ClusterRoles, then the bindings of those that are the CSV's: a ClusterRole of the same name
/// made meanwhile by someone else is not bound, lest the CSV's accounts be given its rules.
async fn write_lifted(
    ctx: &Context,
    place: &Place,
    owner: Owner<'_>,
    plan: &SingletonPlan,
) -> Result<(), ReconcileError> {
    let namespace = place.namespace.as_str();
    let api = ctx.client.all::<ClusterRole>();
    let mut taken = Vec::new();
    for role in &plan.cluster_roles {
        let name = role.name_any();
        let made = api.create(role).await;
        if !created_or_ours(
            made,
            || api.get_opt(&name),
            |there: &ClusterRole| labelled_as(there.labels(), owner.name, namespace),
        )
        .await
        .map_err(place.write(format!("ClusterRole {name}")))?
        {
            taken.push(name);
        }
    }
    for binding in plan.bindings.iter().filter(|binding| !taken.contains(&binding.role_ref.name)) {
        ignore_conflict(ctx.client.all::<ClusterRoleBinding>().create(binding).await)
            .map_err(place.write(format!("ClusterRoleBinding {}", binding.name_any())))?;
    }
    Ok(())
}

/// A group with target namespaces (OLM's `ensureTenantRBAC`): the CSV's Roles and RoleBindings copied into each
/// target but its own namespace; the refusals, one per target refused, to be published together. The CSV's own
/// Roles and RoleBindings are read once, for the first target that needs them.
async fn copy_into_targets(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    place: &Place,
    owner: Owner<'_>,
    cluster: &RbacSnapshot,
    targets: &[String],
) -> Result<Vec<String>, ReconcileError> {
    let namespace = place.namespace.as_str();
    let mut owned: Option<(Vec<Role>, Vec<RoleBinding>)> = None;
    let mut refusals = Vec::new();
    for target in targets.iter().filter(|target| *target != namespace) {
        if let Some(refusal) = copy_into_target(ctx, csv, place, owner, cluster, target, &mut owned).await? {
            refusals.push(refusal);
        }
    }
    Ok(refusals)
}

/// One target of [`copy_into_targets`]: its refusal, if the author may not write the copies there. Nothing is
/// written where the CSV's accounts hold their permissions already, where the CSV has no copy yet (the copy owns
/// the Roles, so they go when it goes), or where nothing is left to copy.
async fn copy_into_target(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    place: &Place,
    owner: Owner<'_>,
    cluster: &RbacSnapshot,
    target: &str,
    owned: &mut Option<(Vec<Role>, Vec<RoleBinding>)>,
) -> Result<Option<String>, ReconcileError> {
    let namespace = place.namespace.as_str();
    let roles_there = ctx.client.namespaced::<Role>(target).list().await.map_err(place.read("Roles"))?;
    let bindings_there =
        ctx.client.namespaced::<RoleBinding>(target).list().await.map_err(place.read("RoleBindings"))?;
    let held = |account: &str| cluster.account_rules_in(namespace, account, target, &roles_there, &bindings_there);
    if permissions_met(&csv.spec.install.spec, false, &held) {
        return Ok(None);
    }
    let copies = ctx.client.namespaced::<ClusterServiceVersion>(target);
    let Some(copy) = copies.get_opt(&place.name).await.map_err(place.read("copied CSVs"))? else {
        tracing::debug!(csv = %place.name, %namespace, %target, "no copy yet to own its RBAC there");
        return Ok(None);
    };
    if owned.is_none() {
        *owned = Some(owned_rbac(ctx, &owner, place).await?);
    }
    let (roles, bindings) = owned.as_ref().map(|(r, b)| (r.as_slice(), b.as_slice())).unwrap_or_default();
    let copy_uid = copy.uid().unwrap_or_default();
    let plan = tenant_plan(owner, &copy_uid, target, roles, bindings, &roles_there, &bindings_there);
    if plan.is_empty() {
        return Ok(None);
    }
    let mut on_behalf = OnBehalf::bound_roles(target, plan.grants.clone());
    if !plan.update_roles.is_empty() {
        on_behalf = on_behalf.changing("update", "rbac.authorization.k8s.io", "roles");
    }
    if let Err(why) = author_may(ctx, csv, place, &on_behalf).await? {
        return Ok(Some(format!("its Roles are not copied to namespace {target}: the CSV's {why}")));
    }
    write_copies(ctx, place, owner, target, &copy_uid, &plan).await?;
    Ok(None)
}

/// Writes the copied Roles into `target`, then the bindings of those that are the CSV's (labelled as its and owned
/// by its copy there): a Role of the same name made meanwhile by someone else is not bound, lest the CSV's
/// accounts be given its rules.
async fn write_copies(
    ctx: &Context,
    place: &Place,
    owner: Owner<'_>,
    target: &str,
    copy_uid: &str,
    plan: &TenantPlan,
) -> Result<(), ReconcileError> {
    let roles_api = ctx.client.namespaced::<Role>(target);
    let mut taken = Vec::new();
    for role in &plan.create_roles {
        let name = role.name_any();
        let made = roles_api.create(role).await;
        if !created_or_ours(
            made,
            || roles_api.get_opt(&name),
            |there: &Role| {
                labelled_as(there.labels(), owner.name, target)
                    && there.owner_references().iter().any(|reference| reference.uid == copy_uid)
            },
        )
        .await
        .map_err(place.write(format!("Role {target}/{name}")))?
        {
            taken.push(name);
        }
    }
    for role in &plan.update_roles {
        roles_api
            .replace(&role.name_any(), role)
            .await
            .map_err(place.write(format!("Role {target}/{}", role.name_any())))?;
    }
    for binding in plan.create_bindings.iter().filter(|binding| !taken.contains(&binding.role_ref.name)) {
        ignore_conflict(ctx.client.namespaced::<RoleBinding>(target).create(binding).await)
            .map_err(place.write(format!("RoleBinding {target}/{}", binding.name_any())))?;
    }
    Ok(())
}

/// Publishes the refusals as one Warning event, or forgets the last one once nothing is refused: a refusal that
/// stands is published once, not on every pass, and one that comes back after being lifted is published again.
async fn report_refusals(ctx: &Context, csv: &ClusterServiceVersion, place: &Place, refusals: &[String]) {
    let namespace = place.namespace.as_str();
    if refusals.is_empty() {
        ctx.forget_warning(csv, TARGET_RBAC_REFUSED);
    } else {
        let note = refusals.join("; ");
        tracing::warn!(csv = %place.name, %namespace, %note, "RBAC for the targets refused");
        ctx.warn_once(csv, TARGET_RBAC_REFUSED, note).await;
    }
}

/// The Roles and RoleBindings of the CSV's namespace labelled as the CSV's.
async fn owned_rbac(
    ctx: &Context,
    owner: &Owner<'_>,
    place: &Place,
) -> Result<(Vec<Role>, Vec<RoleBinding>), ReconcileError> {
    let params = ListParams::default().labels(&owner_selector(owner.name, owner.namespace));
    let roles = ctx.client.namespaced::<Role>(owner.namespace).list_with(&params).await.map_err(place.read("Roles"))?;
    let bindings = ctx
        .client
        .namespaced::<RoleBinding>(owner.namespace)
        .list_with(&params)
        .await
        .map_err(place.read("RoleBindings"))?;
    Ok((roles, bindings))
}

/// Whether a role create made the role, or found it made already as the CSV's (`ours`, read again by `get`): a
/// role of that name made meanwhile by someone else is not to be bound.
async fn created_or_ours<K, F>(
    made: Result<K, ClientError>,
    get: impl FnOnce() -> F,
    ours: impl FnOnce(&K) -> bool,
) -> Result<bool, ClientError>
where
    F: std::future::Future<Output = Result<Option<K>, ClientError>>,
{
    match made {
        Ok(_) => Ok(true),
        Err(error) if error.code() == Some(409) => Ok(get().await?.as_ref().is_some_and(ours)),
        Err(error) => Err(error),
    }
}

/// A create that found the object already made (by an earlier pass) did what was asked.
fn ignore_conflict<K>(result: Result<K, ClientError>) -> Result<(), ClientError> {
    match result {
        Err(error) if error.code() == Some(409) => Ok(()),
        other => other.map(|_| ()),
    }
}
