//! The per-API ClusterRoles of a Succeeded CSV (OLM's `ensureClusterRolesForCSV`): the write step that makes them,
//! guarded by what the CSV's author could make by hand.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::authority::OnBehalf;
use super::observe::author_may;
use super::phase::Outcome;
use super::{Context, Place, ReconcileError};
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::legacy::apis::ApiKey;
use crate::legacy::roles::{api_roles, role_differs, ProvidedApi};
use crate::rbac::Rule;

/// The per-API ClusterRoles of a Succeeded CSV's owned CRDs (OLM's `ensureClusterRolesForCSV`), made only when the
/// CSV's author could make them by hand: they add rules to everyone holding admin, edit or view, so a CSV claiming a
/// CRD must not be a way to widen who may use it. A refusal is a Warning event; the CSV stays Succeeded.
pub(super) async fn ensure_api_roles(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    outcome: &Outcome,
    place: &Place,
) -> Result<(), ReconcileError> {
    if !outcome.api_roles {
        return Ok(());
    }
    let crd_api = ctx.client.all::<CustomResourceDefinition>();
    let roles = ctx.client.all::<ClusterRole>();
    let mut wanted = Vec::new();
    // Whether a role of those names exists and is changed: by hand, that is a patch.
    let mut changes_one = false;
    for owned in csv.spec.custom_resource_definitions.iter().flat_map(|crds| &crds.owned) {
        let Some(crd) = crd_api.get_opt(&owned.name).await.map_err(place.read("CRDs"))? else { continue };
        let Some((_, group)) = owned.name.split_once('.') else { continue };
        let key = ApiKey { kind: owned.kind.clone(), version: owned.version.clone(), group: group.to_owned() };
        let uid = crd.metadata.uid.clone().unwrap_or_default();
        let api = ProvidedApi {
            key: &key,
            owner_name: &owned.name,
            owner_uid: &uid,
            resource: &crd.spec.names.plural,
            crd: true,
        };
        for role in api_roles(&api) {
            let role_name = role["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            let current = ctx.rbac.cluster_role(&roles, &role_name).await.map_err(place.read("ClusterRoles"))?;
            if role_differs(current.as_ref(), &role) {
                changes_one |= current.is_some();
                wanted.push((role_name, role));
            }
        }
    }
    if wanted.is_empty() {
        return Ok(());
    }
    let rules = wanted.iter().flat_map(|(_, role)| role_rules(role)).collect();
    let mut on_behalf = OnBehalf::cluster_roles(rules);
    if changes_one {
        on_behalf = on_behalf.changing("patch", "rbac.authorization.k8s.io", "clusterroles");
    }
    if let Err(why) = author_may(ctx, csv, place, &on_behalf).await? {
        let names: Vec<&str> = wanted.iter().map(|(name, _)| name.as_str()).collect();
        let note = format!("ClusterRoles {} are not created: the CSV's {why}", names.join(", "));
        tracing::warn!(csv = %place.name, namespace = %place.namespace, %note, "per-API ClusterRoles refused");
        ctx.warn_once(csv, API_ROLES_REFUSED, note).await;
        return Ok(());
    }
    ctx.forget_warning(csv, API_ROLES_REFUSED);
    for (role_name, role) in wanted {
        ctx.rbac
            .apply_cluster_role(&roles, &role_name, &role)
            .await
            .map_err(place.write(format!("ClusterRole {role_name}")))?;
    }
    Ok(())
}

/// The reason of the Warning event saying a CSV's per-API ClusterRoles were not made for its author.
pub const API_ROLES_REFUSED: &str = "APIClusterRolesRefused";

/// The rules of a role rendered as JSON.
fn role_rules(role: &serde_json::Value) -> Vec<Rule> {
    let rules: Vec<PolicyRule> = serde_json::from_value(role["rules"].clone()).unwrap_or_default();
    rules.iter().map(Rule::from).collect()
}
