//! The reading and writing halves of an OperatorGroup pass: [`observe`] reads what `decide` needs into one [`Read`];
//! each write step carries out one part of the [`Decision`] (the status, the account's label, the members'
//! annotations, the aggregating ClusterRoles, the pruned provided APIs).

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::ResourceExt;
use serde_json::json;

use super::decide::{Account, Decision};
use super::{Context, ReconcileError};
use crate::api::v1::{OperatorGroup, PROVIDED_APIS_ANNOTATION};
use crate::api::v1alpha1::{ClusterServiceVersion, MANAGED_LABEL};
use crate::controller::client::ClientError;
use crate::controller::listing;
use crate::controller::watches;
use crate::legacy::roles::role_differs;

/// The group a pass is over, naming its errors.
pub(super) struct Place {
    pub namespace: String,
    pub name: String,
}

impl Place {
    pub fn of(group: &OperatorGroup) -> Self {
        Self { namespace: group.namespace().unwrap_or_default(), name: group.name_any() }
    }

    fn read(&self, what: &'static str) -> impl FnOnce(ClientError) -> ReconcileError + '_ {
        move |source| ReconcileError::Read { namespace: self.namespace.clone(), name: self.name.clone(), what, source }
    }

    fn write(&self, what: impl Into<String>) -> impl FnOnce(ClientError) -> ReconcileError + '_ {
        let what = what.into();
        move |source| ReconcileError::Write { namespace: self.namespace.clone(), name: self.name.clone(), what, source }
    }
}

/// What one pass read around a group.
pub(super) struct Read {
    /// How many groups its namespace holds (itself included).
    pub groups_in_namespace: usize,
    /// The account it names, when it names one, and that account when it exists.
    pub account_name: Option<String>,
    pub account: Option<ServiceAccount>,
    /// Every namespace and its labels, read only for a group that selects namespaces.
    pub namespaces: Vec<(String, std::collections::BTreeMap<String, String>)>,
    /// The CSVs of its namespace.
    pub csvs: Vec<ClusterServiceVersion>,
}

impl Read {
    /// The account as `decide` sees it.
    pub fn account(&self) -> Account<'_> {
        match (&self.account_name, &self.account) {
            (None, _) => Account::NotNamed,
            (Some(name), None) => Account::Missing(name),
            (Some(_), Some(account)) => Account::Found(account),
        }
    }
}

pub(super) async fn observe(ctx: &Context, group: &OperatorGroup, place: &Place) -> Result<Read, ReconcileError> {
    let namespace = place.namespace.as_str();
    let watched = watches::in_namespace(&ctx.groups, namespace).len();
    // One shown by the watch is this group alone; none or several is what only a live list may say (a group just
    // made or deleted beside it).
    let groups_in_namespace = match watched {
        1 => 1,
        _ => {
            ctx.client.namespaced::<OperatorGroup>(namespace).list().await.map_err(place.read("OperatorGroups"))?.len()
        }
    };
    let account_name = group.spec.service_account_name.clone().filter(|name| !name.is_empty());
    let account = match &account_name {
        Some(account) => ctx
            .client
            .namespaced::<ServiceAccount>(namespace)
            .get_opt(account)
            .await
            .map_err(place.read("ServiceAccount"))?,
        None => None,
    };
    let namespaces = if group.spec.target_namespaces.is_empty() && !group.spec.is_global() {
        let listed = ctx.client.all::<Namespace>().list().await.map_err(place.read("Namespaces"))?;
        listed
            .into_iter()
            .map(|namespace| (namespace.name_any(), namespace.metadata.labels.unwrap_or_default()))
            .collect()
    } else {
        Vec::new()
    };
    let csvs = match listing::listed(&ctx.csvs, super::CSVS_LISTED).await {
        true => watches::in_namespace(&ctx.csvs, namespace).iter().map(|csv| csv.as_ref().clone()).collect(),
        false => ctx.client.namespaced::<ClusterServiceVersion>(namespace).list().await.map_err(place.read("CSVs"))?,
    };
    Ok(Read { groups_in_namespace, account_name, account, namespaces, csvs })
}

/// Writes the status the pass decided on, when it changed.
pub(super) async fn write_status(ctx: &Context, decision: &Decision, place: &Place) -> Result<(), ReconcileError> {
    let Some(status) = &decision.status else { return Ok(()) };
    ctx.client
        .namespaced::<OperatorGroup>(&place.namespace)
        .apply_status(&place.name, status, None)
        .await
        .map_err(place.write("the status"))?;
    Ok(())
}

/// Marks the account the group names as OLM-managed, as OLM marks the account it installs with.
pub(super) async fn label_account(ctx: &Context, read: &Read, place: &Place) -> Result<(), ReconcileError> {
    let (Some(name), Some(account)) = (&read.account_name, &read.account) else { return Ok(()) };
    if account.labels().get(MANAGED_LABEL).map(String::as_str) == Some("true") {
        return Ok(());
    }
    let label = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name,
        "namespace": place.namespace, "labels": {MANAGED_LABEL: "true"}}});
    ctx.client
        .namespaced::<ServiceAccount>(&place.namespace)
        .apply(name, &label, None)
        .await
        .map_err(place.write("the label of its ServiceAccount"))?;
    Ok(())
}

/// Writes the group's annotations on the member CSVs lacking them.
pub(super) async fn annotate_members(ctx: &Context, decision: &Decision, place: &Place) -> Result<(), ReconcileError> {
    let csvs = ctx.client.namespaced::<ClusterServiceVersion>(&place.namespace);
    for (csv, annotations) in &decision.annotate {
        csvs.merge_patch(csv, &json!({"metadata": {"annotations": annotations}}), None)
            .await
            .map_err(place.write(format!("the annotations of CSV {csv}")))?;
    }
    Ok(())
}

/// Applies the group's aggregating ClusterRoles that differ from what is stored.
pub(super) async fn ensure_roles(ctx: &Context, decision: &Decision, place: &Place) -> Result<(), ReconcileError> {
    let roles = ctx.client.all::<ClusterRole>();
    for role in &decision.roles {
        let role_name = role["metadata"]["name"].as_str().unwrap_or_default();
        let current = ctx.rbac.cluster_role(&roles, role_name).await.map_err(place.read("ClusterRoles"))?;
        if role_differs(current.as_ref(), role) {
            ctx.rbac
                .apply_cluster_role(&roles, role_name, role)
                .await
                .map_err(place.write(format!("ClusterRole {role_name}")))?;
        }
    }
    Ok(())
}

/// Writes the pruned `olm.providedAPIs`, at the group's version read (a CSV's pass may be adding to it).
pub(super) async fn prune_provided_apis(
    ctx: &Context,
    group: &OperatorGroup,
    decision: &Decision,
    place: &Place,
) -> Result<(), ReconcileError> {
    let Some(provided) = &decision.provided_apis else { return Ok(()) };
    let patch = json!({"metadata": {"annotations": {PROVIDED_APIS_ANNOTATION: provided}}});
    ctx.client
        .namespaced::<OperatorGroup>(&place.namespace)
        .merge_patch(&place.name, &patch, group.metadata.resource_version.as_deref())
        .await
        .map_err(place.write(PROVIDED_APIS_ANNOTATION))?;
    Ok(())
}
