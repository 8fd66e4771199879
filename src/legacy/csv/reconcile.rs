//! One pass over an original CSV: read what the decisions need (its groups, the CSVs of its chain, requirements,
//! Deployments, whether its author may install), decide (`phase::transition`), and write what they say, in OLM's
//! order: labels, annotations, the group's provided APIs, Deployments, the status and its event, per-API
//! ClusterRoles, copies.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::ResourceExt;
use serde_json::json;

use super::authority::{self, OnBehalf};
use super::chain::chain_of;
use super::cleanup::{add_finalizer, finalize, has_finalizer};
use super::copying::copy_original;
use super::phase::{set_phase, transition, Chain, Observed, Outcome};
use super::platform::{group_versions, Platform};
use super::requirements::{requirements, Cluster};
use super::tenants::ensure_target_rbac;
use super::{Context, ReconcileError};
use crate::api::v1::{OperatorGroup, UpgradeStrategyName, PROVIDED_APIS_ANNOTATION, TARGET_NAMESPACES_ANNOTATION};
use crate::api::v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase};
use crate::controller::client::ClientError;
use crate::controller::conditions::Transition;
use crate::legacy::apis::{api_labels, api_set_string, provided_apis, ApiKey};
use crate::legacy::intersection::{reconcile as reconcile_apis, ApiReconciliation, GroupSurface};
use crate::legacy::membership::{is_copied, is_install_record, membership, missing_annotations, Membership};
use crate::legacy::roles::{api_roles, role_differs, ProvidedApi};
use crate::legacy::targets::supports;
use crate::rbac::{RbacSnapshot, Rule, UserInfo};
use crate::webhook::csv_author::recorded_author;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

/// Names for errors of one pass.
pub(super) struct Place {
    pub namespace: String,
    pub name: String,
}

impl Place {
    pub fn read(&self, what: &'static str) -> impl FnOnce(ClientError) -> ReconcileError + '_ {
        move |source| ReconcileError::Read { namespace: self.namespace.clone(), name: self.name.clone(), what, source }
    }

    pub fn write(&self, what: impl Into<String>) -> impl FnOnce(ClientError) -> ReconcileError + '_ {
        let what = what.into();
        move |source| ReconcileError::Write { namespace: self.namespace.clone(), name: self.name.clone(), what, source }
    }
}

pub async fn reconcile(ctx: &Context, csv: &ClusterServiceVersion) -> Result<Action, ReconcileError> {
    // A CSV OLM v0 installed that an Install took over (`install::takeover`) is a record with this loop's finalizer:
    // its deletion is still this loop's to finish.
    let finalizing = csv.metadata.deletion_timestamp.is_some() && has_finalizer(csv);
    if is_copied(csv) || (is_install_record(csv) && !finalizing) {
        return Ok(Action::await_change());
    }
    let place = Place { namespace: csv.namespace().unwrap_or_default(), name: csv.name_any() };
    if csv.metadata.deletion_timestamp.is_some() {
        ctx.forget_warnings(csv);
        return finalize(ctx, csv, &place).await;
    }
    if !has_finalizer(csv) {
        // The write wakes the next pass, which sees the CSV with its finalizer.
        add_finalizer(ctx, csv, &place).await?;
        return Ok(Action::await_change());
    }
    let (namespace, name) = (place.namespace.as_str(), place.name.as_str());
    let csvs_api = ctx.client.namespaced::<ClusterServiceVersion>(namespace);
    let provided = match provided_apis(csv) {
        Ok(provided) => provided,
        Err(error) => {
            tracing::warn!(csv = %name, %namespace, %error, "unable to retrieve operator information from CSV");
            return Ok(Action::await_change());
        }
    };
    let labels = api_labels(&provided);
    if labels.iter().any(|(key, value)| csv.labels().get(key) != Some(value)) {
        csvs_api
            .merge_patch(name, &json!({"metadata": {"labels": labels}}), None)
            .await
            .map_err(place.write("API labels"))?;
        return Ok(Action::requeue(Duration::ZERO));
    }

    let groups =
        ctx.client.namespaced::<OperatorGroup>(namespace).list().await.map_err(place.read("OperatorGroups"))?;
    let member = membership(&groups);
    let status = csv.status.clone().unwrap_or_default();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut observed = Observed {
        membership: Membership::NoOperatorGroup,
        annotations_missing: false,
        no_targets: false,
        install_modes: Ok(()),
        static_group: false,
        apis: ApiReconciliation::NoConflict,
        requirements: (false, Vec::new()),
        author: Ok(()),
        health: Ok(()),
        now: now.clone(),
        chain: Chain::default(),
        components: Default::default(),
    };
    let mut group = None;
    if let Membership::Member(found) = member {
        group = Some(found.clone());
        observed.annotations_missing = !missing_annotations(csv, found).is_empty();
        let targets = found.status.as_ref().map(|status| status.namespaces.clone()).unwrap_or_default();
        observed.no_targets = targets.is_empty();
        observed.static_group = found.spec.static_provided_apis;
        observed.install_modes = match csv.annotations().get(TARGET_NAMESPACES_ANNOTATION) {
            Some(annotation) => supports(&csv.spec.install_modes, namespace, annotation)
                .map_err(|unsupported| (unsupported.reason, unsupported.message)),
            None => Err(("NoTargetNamespaces", "csv missing olm.targetNamespaces annotation".to_owned())),
        };
        let all = ctx.client.all::<OperatorGroup>().list().await.map_err(place.read("OperatorGroups"))?;
        let others: Vec<GroupSurface> = all
            .iter()
            .filter(|other| !(other.namespace() == found.namespace() && other.name_any() == found.name_any()))
            .map(GroupSurface::of)
            .collect();
        observed.apis = reconcile_apis(&provided, &GroupSurface::of(found), &others);
    }
    let neighbours = ctx
        .client
        .namespaced::<ClusterServiceVersion>(namespace)
        .list_with(&ListParams::default().labels(&format!("!{}", crate::legacy::membership::COPIED_FROM_LABEL)))
        .await
        .map_err(place.read("CSVs"))?;
    let fail_forward = group
        .as_ref()
        .is_some_and(|group| group.spec.upgrade_strategy == UpgradeStrategyName::TechPreviewUnsafeFailForward);
    observed.chain = chain_of(csv, &neighbours, fail_forward);
    observed.membership = match &group {
        Some(group) => Membership::Member(group),
        None => member,
    };
    if needs_requirements(&status) {
        observed.requirements = read_requirements(ctx, csv, &place).await?;
        observed.components = super::components::observe(ctx, csv, status.phase).await?;
    }
    if matches!(status.phase, CsvPhase::Installing | CsvPhase::Succeeded | CsvPhase::Failed) {
        let mut found = BTreeMap::new();
        for spec in &csv.spec.install.spec.deployments {
            let deployments = ctx.client.namespaced::<Deployment>(namespace);
            if let Some(deployment) = deployments.get_opt(&spec.name).await.map_err(place.read("Deployments"))? {
                found.insert(spec.name.clone(), deployment);
            }
        }
        observed.health = super::components::health(ctx, csv, &found).await?;
    }
    let install_failed = status.phase == CsvPhase::Failed && status.reason.as_deref() == Some("InstallComponentFailed");
    if status.phase == CsvPhase::InstallReady || install_failed {
        observed.author = author_may_install(ctx, csv, &place).await?;
        if observed.author.is_ok() {
            observed.author = super::components::preflight(ctx, csv).await?;
        }
    }

    let outcome = transition(&status, observed);
    write(ctx, csv, group.as_ref(), &provided, &status, outcome, &now, &place).await
}

/// Whether a pass in this phase reads the requirements (OLM checks them in Pending, Succeeded and Failed).
fn needs_requirements(status: &ClusterServiceVersionStatus) -> bool {
    matches!(status.phase, CsvPhase::Pending | CsvPhase::Succeeded | CsvPhase::Failed)
}

async fn read_requirements(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    place: &Place,
) -> Result<(bool, Vec<crate::api::v1alpha1::RequirementStatus>), ReconcileError> {
    let namespace = place.namespace.as_str();
    let mut crds = BTreeMap::new();
    let descriptions =
        csv.spec.custom_resource_definitions.iter().flat_map(|crds| crds.owned.iter().chain(&crds.required));
    let names: Vec<String> = descriptions.map(|description| description.name.clone()).collect();
    if !names.is_empty() {
        let crd_api = ctx.client.all::<CustomResourceDefinition>();
        for crd_name in &names {
            if let Some(crd) = crd_api.get_opt(crd_name).await.map_err(place.read("CRDs"))? {
                crds.insert(crd_name.clone(), crd);
            }
        }
    }
    let accounts: BTreeMap<String, ServiceAccount> = ctx
        .client
        .namespaced::<ServiceAccount>(namespace)
        .list()
        .await
        .map_err(place.read("ServiceAccounts"))?
        .into_iter()
        .map(|account| (account.name_any(), account))
        .collect();
    let strategy = &csv.spec.install.spec;
    let (roles, bindings, cluster) = if strategy.permissions.is_empty() && strategy.cluster_permissions.is_empty() {
        (Vec::new(), Vec::new(), Arc::new(RbacSnapshot::default()))
    } else {
        let roles = ctx.client.namespaced::<Role>(namespace).list().await.map_err(place.read("Roles"))?;
        let bindings =
            ctx.client.namespaced::<RoleBinding>(namespace).list().await.map_err(place.read("RoleBindings"))?;
        (roles, bindings, ctx.cluster_rbac().await)
    };
    let held = |account: &str| {
        let user = UserInfo::service_account(namespace, account);
        let everywhere = cluster.cluster_rules_for(&user).0;
        let mut here = everywhere.clone();
        here.extend(cluster.local_rules_for(&user, namespace, &roles, &bindings));
        (here, everywhere)
    };
    let server_version = match csv.spec.min_kube_version.as_deref().filter(|minimum| !minimum.is_empty()) {
        Some(_) => ctx.client.kube().apiserver_version().await.ok().map(|info| info.git_version),
        None => None,
    };
    let mut served = BTreeSet::new();
    for (group, version) in group_versions(csv) {
        // A group-version the server does not serve (or cannot say it does) serves nothing the CSV needs.
        let listed = if group.is_empty() {
            ctx.client.kube().list_core_api_resources(&version).await
        } else {
            ctx.client.kube().list_api_group_resources(&format!("{group}/{version}")).await
        };
        for resource in listed.map(|list| list.resources).unwrap_or_default() {
            served.insert((group.clone(), version.clone(), resource.kind));
        }
    }
    let mut api_services = BTreeMap::new();
    let required = csv.spec.api_service_definitions.iter().flat_map(|definitions| &definitions.required);
    for api in required {
        let service_name = format!("{}.{}", api.version, api.group);
        let found = ctx.client.all::<APIService>().get_opt(&service_name).await.map_err(place.read("APIServices"))?;
        if let Some(service) = found {
            api_services.insert(service_name, service);
        }
    }
    let platform = Platform { server_version: server_version.as_deref(), served: &served, api_services: &api_services };
    Ok(requirements(csv, &Cluster { crds: &crds, accounts: &accounts, held: &held, platform }))
}

/// Whether the CSV's recorded author may create Deployments in its namespace: Err says why not.
async fn author_may_install(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    place: &Place,
) -> Result<Result<(), String>, ReconcileError> {
    let deployments = OnBehalf {
        namespace: Some(place.namespace.clone()),
        creates: vec![("apps".into(), "deployments".into())],
        grants: None,
        binds: false,
        changes: Vec::new(),
    };
    Ok(author_may(ctx, csv, place, &deployments)
        .await?
        .map_err(|why| format!("the CSV's {why}, so its Deployments are not created for them")))
}

/// Whether the CSV's recorded author could make `on_behalf` by hand: Err says who they are and what they may not do.
pub(super) async fn author_may(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    place: &Place,
    on_behalf: &OnBehalf,
) -> Result<Result<(), String>, ReconcileError> {
    let Some(author) = recorded_author(csv.annotations()) else {
        return Ok(Err("author is not recorded (it was written while the webhook did not run; apply it again)".into()));
    };
    let answer =
        authority::review(ctx.client.kube(), &author, &authority::checks(on_behalf)).await.map_err(|source| {
            ReconcileError::Review { namespace: place.namespace.clone(), name: place.name.clone(), source }
        })?;
    Ok(answer.map_err(|why| format!("author {} {why}", author.username)))
}

#[allow(clippy::too_many_arguments)]
async fn write(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    group: Option<&OperatorGroup>,
    provided: &std::collections::BTreeSet<ApiKey>,
    status: &ClusterServiceVersionStatus,
    outcome: Outcome,
    now: &Time,
    place: &Place,
) -> Result<Action, ReconcileError> {
    let (namespace, name) = (place.namespace.as_str(), place.name.as_str());
    if outcome.annotate {
        if let Some(group) = group {
            let annotations = missing_annotations(csv, group);
            let patch = json!({"metadata": {"annotations": annotations}});
            ctx.client
                .namespaced::<ClusterServiceVersion>(namespace)
                .merge_patch(name, &patch, None)
                .await
                .map_err(place.write("the OperatorGroup annotations"))?;
        }
    }
    if let (Some(change), Some(group)) = (outcome.group_apis, group) {
        let current = GroupSurface::of(group).provided;
        let next = match change {
            ApiReconciliation::Add => current.union(provided).cloned().collect(),
            _ => current.difference(provided).cloned().collect(),
        };
        let patch = json!({"metadata": {"annotations": {PROVIDED_APIS_ANNOTATION: api_set_string(&next)}}});
        ctx.client
            .namespaced::<OperatorGroup>(namespace)
            .merge_patch(&group.name_any(), &patch, group.metadata.resource_version.as_deref())
            .await
            .map_err(place.write("the provided APIs of its OperatorGroup"))?;
    }
    if outcome.delete {
        tracing::info!(csv = %name, %namespace, "deleting a replaced CSV");
        ctx.client
            .namespaced::<ClusterServiceVersion>(namespace)
            .ensure_deleted(name)
            .await
            .map_err(place.write("the replaced CSV itself"))?;
        return Ok(Action::await_change());
    }
    if outcome.remove_deployments {
        let deployments = ctx.client.namespaced::<Deployment>(namespace);
        for spec in &csv.spec.install.spec.deployments {
            deployments.ensure_deleted(&spec.name).await.map_err(place.write(format!("Deployment {}", spec.name)))?;
        }
    }
    let mut issued_certificates = false;
    if outcome.install {
        let issued = super::components::install_certificates(ctx, csv).await?;
        issued_certificates = issued.rotated;
        let deployments = ctx.client.namespaced::<Deployment>(namespace);
        for deployment in super::strategy::deployments_with(csv, &issued.hashes()) {
            let deployment_name = deployment["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            deployments
                .apply(&deployment_name, &deployment, None)
                .await
                .map_err(place.write(format!("Deployment {deployment_name}")))?;
        }
        super::components::install_apis(ctx, csv, &issued).await?;
    }
    let mut next = status.clone();
    if issued_certificates {
        next = super::rotation::rotated_status(&next, now);
    }
    if let Some(statuses) = &outcome.requirement_status {
        next.requirement_status = statuses.clone();
    }
    let mut event = None;
    if let Some((phase, reason, message)) = &outcome.phase {
        if let Some(moved) = set_phase(&next, (*phase, reason, message), now) {
            event = Some(Transition {
                warning: *phase == CsvPhase::Failed,
                reason: (*reason).to_owned(),
                note: message.clone(),
            });
            next = moved;
        }
    }
    if next != *status {
        ctx.client
            .namespaced::<ClusterServiceVersion>(namespace)
            .apply_status(name, &next, None)
            .await
            .map_err(place.write("the status"))?;
    }
    if let Some(event) = event {
        ctx.events.publish(csv, &[event]).await;
    }
    if outcome.api_roles {
        ensure_api_roles(ctx, csv, place).await?;
    }
    // Until every namespace has been read, a missing one would look deleted, and its copies with it.
    if let (Some(group), Ok(())) = (group, ctx.namespaces.wait_until_ready().await) {
        let mut original = csv.clone();
        original.status = Some(next.clone());
        let copying = copy_original(&ctx.client, &original, group, &ctx.live_namespaces(), &ctx.protected)
            .await
            .map_err(place.write("its copied CSVs"))?;
        ctx.copies_disabled_event(csv, copying.disabled).await;
        ensure_target_rbac(ctx, &original, group, place).await?;
    }
    let settled = next.phase == CsvPhase::Succeeded || outcome.phase.is_none() && outcome.group_apis.is_none();
    Ok(if settled && next == *status {
        Action::requeue(ctx.resync)
    } else if next == *status && !outcome.annotate && outcome.group_apis.is_none() {
        // Waiting on the cluster (requirements, a rollout): look again soon.
        Action::requeue(ctx.retry)
    } else {
        Action::requeue(Duration::ZERO)
    })
}

/// The per-API ClusterRoles of a Succeeded CSV's owned CRDs (OLM's `ensureClusterRolesForCSV`), made only when the
/// CSV's author could make them by hand: they add rules to everyone holding admin, edit or view, so a CSV claiming a
/// CRD must not be a way to widen who may use it. A refusal is a Warning event; the CSV stays Succeeded.
async fn ensure_api_roles(ctx: &Context, csv: &ClusterServiceVersion, place: &Place) -> Result<(), ReconcileError> {
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
            let current = roles.get_opt(&role_name).await.map_err(place.read("ClusterRoles"))?;
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
        roles.apply(&role_name, &role, None).await.map_err(place.write(format!("ClusterRole {role_name}")))?;
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
