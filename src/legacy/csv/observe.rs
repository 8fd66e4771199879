//! The reading half of a CSV pass: everything `phase::transition` decides on, read in one place and handed over as
//! one [`Seen`] (the CSV's group, and the [`Observed`] facts). Reads that only some phases need are made only in
//! those phases, as OLM's `transitionCSVState` makes them. What can be derived without the cluster is derived by
//! pure functions here ([`group_facts`]), tested without one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::ResourceExt;

use super::authority::{self, OnBehalf};
use super::chain::chain_of;
use super::phase::{Chain, Observed};
use super::platform::{group_versions, Platform};
use super::requirements::{requirements, Cluster};
use super::strategy::Unhealthy;
use super::{Context, Place, ReconcileError};
use crate::api::v1::{OperatorGroup, UpgradeStrategyName, TARGET_NAMESPACES_ANNOTATION};
use crate::api::v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, RequirementStatus};
use crate::legacy::apis::ApiKey;
use crate::legacy::intersection::{reconcile as reconcile_apis, ApiReconciliation, GroupSurface};
use crate::legacy::membership::{membership, missing_annotations, Membership};
use crate::legacy::targets::{supports, targets, Targets};
use crate::rbac::RbacSnapshot;
use crate::webhook::csv_author::recorded_author;

/// What one pass read: the CSV's group (when it has exactly one) and the facts the phase machine decides on.
pub(super) struct Seen {
    pub group: Option<OperatorGroup>,
    pub observed: Observed,
}

/// Reads what a pass over `csv` (at `status`, providing `provided`) decides on.
pub(super) async fn observe(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    status: &ClusterServiceVersionStatus,
    provided: &BTreeSet<ApiKey>,
    place: &Place,
    now: &Time,
) -> Result<Seen, ReconcileError> {
    let namespace = place.namespace.as_str();
    let watched = ctx.watched_groups().await;
    let groups = groups_of(ctx, watched.as_deref(), place).await?;
    let (group, group_failure) = match membership(&groups) {
        Membership::Member(found) => (Some(found.clone()), None),
        other => (None, other.failure()),
    };
    let mut observed = Observed {
        group_failure,
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
    if let Some(found) = &group {
        let facts = read_group_facts(ctx, csv, found, watched, provided, place).await?;
        observed.annotations_missing = facts.annotations_missing;
        observed.no_targets = facts.no_targets;
        observed.install_modes = facts.install_modes;
        observed.static_group = found.spec.static_provided_apis;
        observed.apis = facts.apis;
    }
    let neighbours = crate::controller::watches::in_namespace(&ctx.csvs, namespace);
    let fail_forward = group
        .as_ref()
        .is_some_and(|group| group.spec.upgrade_strategy == UpgradeStrategyName::TechPreviewUnsafeFailForward);
    observed.chain = chain_of(csv, &neighbours, fail_forward);
    if needs_requirements(status) {
        observed.requirements = read_requirements(ctx, csv, place).await?;
        observed.components = super::components::observe(ctx, csv, status.phase).await?;
    }
    if matches!(status.phase, CsvPhase::Installing | CsvPhase::Succeeded | CsvPhase::Failed) {
        observed.health = read_health(ctx, csv, place).await?;
    }
    let install_failed = status.phase == CsvPhase::Failed && status.reason.as_deref() == Some("InstallComponentFailed");
    if status.phase == CsvPhase::InstallReady || install_failed {
        observed.author = author_may_install(ctx, csv, place).await?;
        if observed.author.is_ok() {
            observed.author = super::components::preflight(ctx, csv).await?;
        }
    }
    Ok(Seen { group, observed })
}

/// The facts of the CSV's membership of `group` (`group_facts`), with the reads they need. The OperatorGroups of
/// the cluster come from the watch when it answered (`watched`), else they are listed live.
async fn read_group_facts(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    group: &OperatorGroup,
    watched: Option<Vec<Arc<OperatorGroup>>>,
    provided: &BTreeSet<ApiKey>,
    place: &Place,
) -> Result<GroupFacts, ReconcileError> {
    // Whether the group targets none matters only while the CSV lacks its annotations (OLM's check sits there):
    // the namespaces are listed then, not on every pass of a selector group's CSVs.
    let needed = selects_namespaces(group) && !missing_annotations(csv, group).is_empty();
    let namespaces = if needed { namespace_labels(ctx, place).await? } else { Vec::new() };
    let all = match watched {
        Some(all) => all,
        None => {
            let listed = ctx.client.all::<OperatorGroup>().list().await.map_err(place.read("OperatorGroups"))?;
            listed.into_iter().map(Arc::new).collect()
        }
    };
    Ok(group_facts(csv, group, &namespaces, &all, provided))
}

/// The health of the CSV's install (`components::health`), judged on the Deployments its strategy names as they
/// are now in its namespace; read only in the phases that watch over a running install.
async fn read_health(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    place: &Place,
) -> Result<Result<(), Unhealthy>, ReconcileError> {
    let namespace = place.namespace.as_str();
    let mut found = BTreeMap::new();
    for spec in &csv.spec.install.spec.deployments {
        let deployment = match ctx.watched_deployment(namespace, &spec.name).await {
            Some(watched) => watched.map(|deployment| deployment.as_ref().clone()),
            None => {
                let deployments = ctx.client.namespaced::<Deployment>(namespace);
                deployments.get_opt(&spec.name).await.map_err(place.read("Deployments"))?
            }
        };
        if let Some(deployment) = deployment {
            found.insert(spec.name.clone(), deployment);
        }
    }
    super::components::health(ctx, csv, &found).await
}

/// The OperatorGroups of the CSV's namespace: from the watch when it shows exactly one, the common case; listed
/// live otherwise, so that a group created a moment ago, or one deleted, is not judged missing or extra from a
/// watch that has not seen it yet (the CSV would fail NoOperatorGroup or TooManyOperatorGroups for nothing, and a
/// CSV applied with its group would go through Failed on its way).
async fn groups_of(
    ctx: &Context,
    watched: Option<&[Arc<OperatorGroup>]>,
    place: &Place,
) -> Result<Vec<OperatorGroup>, ReconcileError> {
    let namespace = place.namespace.as_str();
    if let Some(only) = watched.and_then(|watched| the_one_watched(watched, namespace)) {
        return Ok(vec![only]);
    }
    ctx.client.namespaced::<OperatorGroup>(namespace).list().await.map_err(place.read("OperatorGroups"))
}

/// The one OperatorGroup the watch shows in `namespace`; None when it shows none or several, which only a live
/// list may say.
fn the_one_watched(watched: &[Arc<OperatorGroup>], namespace: &str) -> Option<OperatorGroup> {
    let mut here = watched.iter().filter(|group| group.namespace().as_deref() == Some(namespace));
    match (here.next(), here.next()) {
        (Some(only), None) => Some(only.as_ref().clone()),
        _ => None,
    }
}

/// What a CSV's membership of `group` says, from the group and the cluster around it.
#[derive(Debug, PartialEq)]
pub(super) struct GroupFacts {
    pub annotations_missing: bool,
    pub no_targets: bool,
    pub install_modes: Result<(), (&'static str, String)>,
    pub apis: ApiReconciliation,
}

/// The facts of `csv`'s membership of `group`, given every namespace with its labels (needed only when the group
/// selects namespaces and the CSV lacks its annotations: `no_targets` is said only then, as OLM checks it only
/// then) and every group of the cluster. Whether the group targets no namespace is computed from its
/// spec, as OLM's `getOperatorGroupTargets` computes it, not read from its status: a group the group loop has not
/// reached yet has no status, and a CSV applied with it must not fail for that.
pub(super) fn group_facts(
    csv: &ClusterServiceVersion,
    group: &OperatorGroup,
    namespaces: &[(String, BTreeMap<String, String>)],
    all: &[impl std::borrow::Borrow<OperatorGroup>],
    provided: &BTreeSet<ApiKey>,
) -> GroupFacts {
    let operator_namespace = csv.namespace().unwrap_or_default();
    let install_modes = match csv.annotations().get(TARGET_NAMESPACES_ANNOTATION) {
        Some(annotation) => supports(&csv.spec.install_modes, &operator_namespace, annotation)
            .map_err(|unsupported| (unsupported.reason, unsupported.message)),
        None => Err(("NoTargetNamespaces", "csv missing olm.targetNamespaces annotation".to_owned())),
    };
    let others: Vec<GroupSurface> = all
        .iter()
        .map(|other| std::borrow::Borrow::<OperatorGroup>::borrow(other))
        .filter(|other| !(other.namespace() == group.namespace() && other.name_any() == group.name_any()))
        .map(GroupSurface::of)
        .collect();
    let annotations_missing = !missing_annotations(csv, group).is_empty();
    GroupFacts {
        annotations_missing,
        // A group whose targets cannot be computed is not said to target none (OLM skips the check on that error).
        no_targets: annotations_missing
            && matches!(targets(&group.spec, namespaces), Ok(Targets::Namespaces(none)) if none.is_empty()),
        install_modes,
        apis: reconcile_apis(provided, &GroupSurface::of(group), &others),
    }
}

/// Whether a group's targets come from a label selector, so that the namespaces' labels are needed.
fn selects_namespaces(group: &OperatorGroup) -> bool {
    group.spec.target_namespaces.is_empty() && !group.spec.is_global()
}

/// Every namespace with its labels (terminating ones too, as OLM's namespace lister holds them). Read only for a
/// group that selects namespaces, and only in the passes that need it: the loop's own store keeps no labels.
async fn namespace_labels(
    ctx: &Context,
    place: &Place,
) -> Result<Vec<(String, BTreeMap<String, String>)>, ReconcileError> {
    let namespaces = ctx.client.all::<Namespace>().list().await.map_err(place.read("Namespaces"))?;
    Ok(namespaces.into_iter().map(|namespace| (namespace.name_any(), namespace.labels().clone())).collect())
}

/// Whether a pass in this phase reads the requirements (OLM checks them in Pending, Succeeded and Failed).
fn needs_requirements(status: &ClusterServiceVersionStatus) -> bool {
    matches!(status.phase, CsvPhase::Pending | CsvPhase::Succeeded | CsvPhase::Failed)
}

async fn read_requirements(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    place: &Place,
) -> Result<(bool, Vec<RequirementStatus>), ReconcileError> {
    let namespace = place.namespace.as_str();
    let mut crds = BTreeMap::new();
    let descriptions =
        csv.spec.custom_resource_definitions.iter().flat_map(|crds| crds.owned.iter().chain(&crds.required));
    let names: Vec<String> = descriptions.map(|description| description.name.clone()).collect();
    for crd_name in &names {
        let found = match ctx.watched_crd(crd_name).await {
            Some(watched) => watched.map(|crd| crd.as_ref().clone()),
            None => ctx.client.all::<CustomResourceDefinition>().get_opt(crd_name).await.map_err(place.read("CRDs"))?,
        };
        if let Some(crd) = found {
            crds.insert(crd_name.clone(), crd);
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
    let needs_rbac = !(strategy.permissions.is_empty() && strategy.cluster_permissions.is_empty());
    let (roles, bindings, cluster) = match needs_rbac {
        false => (Vec::new(), Vec::new(), Arc::new(RbacSnapshot::default())),
        true => match ctx.watched_roles_in(namespace).await {
            Some((roles, bindings)) => (roles, bindings, ctx.cluster_rbac().await),
            None => {
                let (roles, bindings) = live_roles_in(ctx, place).await?;
                (roles, bindings, ctx.cluster_rbac().await)
            }
        },
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
    let judged = |roles: &[Role], bindings: &[RoleBinding]| {
        let held = |account: &str| cluster.account_rules_in(namespace, account, namespace, roles, bindings);
        requirements(csv, &Cluster { crds: &crds, accounts: &accounts, held: &held, platform })
    };
    let (met, statuses) = judged(&roles, &bindings);
    if met || !needs_rbac {
        return Ok((met, statuses));
    }
    // Not met on the watched Roles and RoleBindings: the watch may not yet hold the binding whose creation woke
    // this pass (the loop's own metadata watch can see it first), so what the pass says is judged on a live read.
    let (roles, bindings) = live_roles_in(ctx, place).await?;
    Ok(judged(&roles, &bindings))
}

/// The Roles and RoleBindings of the CSV's namespace, read live.
async fn live_roles_in(ctx: &Context, place: &Place) -> Result<(Vec<Role>, Vec<RoleBinding>), ReconcileError> {
    let namespace = place.namespace.as_str();
    let roles = ctx.client.namespaced::<Role>(namespace).list().await.map_err(place.read("Roles"))?;
    let bindings = ctx.client.namespaced::<RoleBinding>(namespace).list().await.map_err(place.read("RoleBindings"))?;
    Ok((roles, bindings))
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn csv(annotations: serde_json::Value) -> ClusterServiceVersion {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "plumbus.v1", "namespace": "ops", "annotations": annotations},
            "spec": {"install": {"strategy": "deployment"}, "installModes": [{"type": "AllNamespaces", "supported": true},
                                      {"type": "OwnNamespace", "supported": true}]}}))
        .expect("csv")
    }

    fn group(spec: serde_json::Value, status: Option<serde_json::Value>) -> OperatorGroup {
        let mut group = json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": "ops"}, "spec": spec});
        if let Some(status) = status {
            group["status"] = status;
        }
        serde_json::from_value(group).expect("group")
    }

    fn namespaces() -> Vec<(String, BTreeMap<String, String>)> {
        vec![("ops".into(), BTreeMap::new()), ("team".into(), BTreeMap::from([("team".into(), "a".into())]))]
    }

    fn facts(csv: &ClusterServiceVersion, group: &OperatorGroup) -> GroupFacts {
        group_facts(csv, group, &namespaces(), std::slice::from_ref(group), &BTreeSet::new())
    }

    #[test]
    fn only_one_watched_group_in_the_namespace_is_taken_from_the_watch() {
        let in_namespace = |name: &str, namespace: &str| {
            let mut found = group(json!({}), None);
            found.metadata.name = Some(name.into());
            found.metadata.namespace = Some(namespace.into());
            Arc::new(found)
        };
        let one = [in_namespace("og", "ops"), in_namespace("og", "team")];
        assert_eq!(the_one_watched(&one, "ops").map(|found| found.name_any()), Some("og".to_owned()));
        assert!(the_one_watched(&one, "elsewhere").is_none(), "none watched: listed live, not judged missing");
        let two = [in_namespace("og", "ops"), in_namespace("second", "ops")];
        assert!(the_one_watched(&two, "ops").is_none(), "several watched: listed live");
    }

    #[test]
    fn a_global_group_not_yet_given_its_status_targets_every_namespace() {
        let fresh = group(json!({}), None);
        let facts = facts(&csv(json!({})), &fresh);
        assert!(!facts.no_targets, "read from the spec, not the missing status");
        assert!(facts.annotations_missing);
    }

    #[test]
    fn a_csv_annotated_by_a_group_without_status_waits_for_its_targets() {
        let fresh = group(json!({"targetNamespaces": ["ops"]}), None);
        let grouped = csv(json!({"olm.operatorGroup": "og", "olm.operatorNamespace": "ops"}));
        let waiting = facts(&grouped, &fresh);
        assert!(waiting.annotations_missing, "no olm.targetNamespaces yet: not installed for all namespaces");
        assert_eq!(waiting.install_modes.map_err(|(reason, _)| reason), Err("NoTargetNamespaces"));
        let settled = group(json!({"targetNamespaces": ["ops"]}), Some(json!({"namespaces": ["ops"]})));
        let annotated = csv(json!({"olm.operatorGroup": "og", "olm.operatorNamespace": "ops",
                                   "olm.targetNamespaces": "ops"}));
        assert!(!facts(&annotated, &settled).annotations_missing);
    }

    #[test]
    fn a_group_targeting_none_is_known_from_its_selector_or_its_targets() {
        let nothing = group(json!({"selector": {"matchLabels": {"team": "b"}}}), Some(json!({"namespaces": []})));
        assert!(facts(&csv(json!({})), &nothing).no_targets);
        let selected = group(json!({"selector": {"matchLabels": {"team": "a"}}}), None);
        assert!(!facts(&csv(json!({})), &selected).no_targets);
        let named = group(json!({"targetNamespaces": ["gone"]}), None);
        assert!(!facts(&csv(json!({})), &named).no_targets, "named targets count whether or not they exist");
        let broken = group(json!({"targetNamespaces": ["a", ""]}), None);
        assert!(!facts(&csv(json!({})), &broken).no_targets, "targets that cannot be computed are not none");
    }

    #[test]
    fn install_modes_are_checked_against_the_annotation() {
        let global = group(json!({}), Some(json!({"namespaces": [""]})));
        let annotated = csv(json!({"olm.operatorGroup": "og", "olm.operatorNamespace": "ops",
                                   "olm.targetNamespaces": ""}));
        let facts_of = facts(&annotated, &global);
        assert_eq!(facts_of.install_modes, Ok(()));
        assert!(!facts_of.annotations_missing);
        let unannotated = facts(&csv(json!({})), &global);
        assert_eq!(unannotated.install_modes.map_err(|(reason, _)| reason), Err("NoTargetNamespaces"));
        let elsewhere = csv(json!({"olm.targetNamespaces": "team"}));
        assert_eq!(
            facts(&elsewhere, &global).install_modes.map_err(|(reason, _)| reason),
            Err("UnsupportedOperatorGroup"),
            "SingleNamespace is not among its modes"
        );
    }

    #[test]
    fn selectors_alone_need_the_namespaces_labels() {
        assert!(!selects_namespaces(&group(json!({}), None)));
        assert!(!selects_namespaces(&group(json!({"targetNamespaces": ["a"]}), None)));
        assert!(selects_namespaces(&group(json!({"selector": {"matchLabels": {"a": "b"}}}), None)));
    }
}
