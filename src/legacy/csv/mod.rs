//! The ClusterServiceVersion loop of OLM v0, for CSVs applied by hand or from GitOps repositories: `requirements`,
//! `strategy` and `phase` decide; [`reconcile`] reads what they need, writes what they say (labels, annotations,
//! the group's provided APIs, Deployments, the status and its events, per-API ClusterRoles), and [`controller`]
//! runs it for every original CSV (copies carry `olm.copiedFrom` and are not watched here). Install records and
//! copies are left alone: their content is someone else's.
//!
//! A CSV's Deployments are applied by the controller only when the CSV's author (recorded by the webhook: its
//! creator, then whoever last changed its spec) may create Deployments in its namespace, so that writing a CSV
//! never does more than its author could do by hand.

pub mod chain;
pub mod copying;
pub mod phase;
pub mod requirements;
pub mod strategy;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, PartialObjectMeta};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;
use serde_json::{json, Value};

use self::chain::chain_of;
use self::copying::copy_original;
use self::phase::{set_phase, transition, Chain, Observed, Outcome};
use self::requirements::{requirements, Cluster};
use super::apis::{api_labels, api_set_string, provided_apis, ApiKey};
use super::copies::DISABLED_COPIED_CSVS;
use super::intersection::{reconcile as reconcile_apis, ApiReconciliation, GroupSurface};
use super::membership::{is_copied, is_install_record, membership, missing_annotations, Membership};
use super::roles::{api_roles, ProvidedApi};
use super::targets::{supports, Targets};
use crate::access::{allowed, AccessCheck};
use crate::api::v1::{
    OLMConfig, OperatorGroup, UpgradeStrategyName, PROVIDED_APIS_ANNOTATION, TARGET_NAMESPACES_ANNOTATION,
};
use crate::api::v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase};
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::conditions::Transition;
use crate::controller::events::Events;
use crate::controller::runner::{self, Reconciler};
use crate::controller::Process;
use crate::metrics::Metrics;
use crate::rbac::{RbacSnapshot, UserInfo};
use crate::webhook::csv_author::recorded_author;

/// The field manager of the CSV loop's writes.
pub const FIELD_MANAGER: &str = "olmv2-csv";

pub struct Context {
    client: ControllerClient,
    events: Events,
    metrics: Arc<Metrics>,
    retry: Duration,
    resync: Duration,
    /// Every namespace, as metadata: where copies of CSVs of global groups go.
    namespaces: Store<PartialObjectMeta<Namespace>>,
    /// Namespaces keeping copies when copies are disabled.
    protected: BTreeSet<String>,
    /// Originals whose "copying disabled" event was published (once per original while disabled).
    warned: Mutex<HashSet<String>>,
}

impl Context {
    /// The namespaces that exist and are not being deleted.
    fn live_namespaces(&self) -> BTreeSet<String> {
        self.namespaces
            .state()
            .iter()
            .filter(|namespace| namespace.metadata.deletion_timestamp.is_none())
            .map(|namespace| namespace.name_any())
            .collect()
    }

    /// Publishes OLM's Warning `DisabledCopiedCSVs` for `csv` once while its copies are off, and forgets it when
    /// they are on again.
    async fn copies_disabled_event(&self, csv: &ClusterServiceVersion, disabled: bool) {
        let uid = csv.uid().unwrap_or_default();
        let first = match self.warned.lock() {
            Ok(mut warned) if disabled => warned.insert(uid),
            Ok(mut warned) => {
                warned.remove(&uid);
                false
            }
            Err(_) => false,
        };
        if first {
            let note = format!("CSV copying disabled for {}/{}", csv.namespace().unwrap_or_default(), csv.name_any());
            let event = Transition { warning: true, reason: DISABLED_COPIED_CSVS.into(), note };
            self.events.publish(csv, &[event]).await;
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("failed to read {what} for CSV {namespace}/{name}")]
    Read {
        namespace: String,
        name: String,
        what: &'static str,
        #[source]
        source: ClientError,
    },
    #[error("failed to write {what} for CSV {namespace}/{name}")]
    Write {
        namespace: String,
        name: String,
        what: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to check whether the author of CSV {namespace}/{name} may create its Deployments")]
    Review {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl Categorized for ReconcileError {
    fn category(&self) -> &'static str {
        match self {
            Self::Read { .. } => "CsvReadFailed",
            Self::Write { .. } => "CsvWriteFailed",
            Self::Review { .. } => "CsvAuthorReviewFailed",
        }
    }

    fn is_conflict(&self) -> bool {
        match self {
            Self::Read { source, .. } | Self::Write { source, .. } => source.is_conflict(),
            Self::Review { .. } => false,
        }
    }
}

impl Reconciler for Context {
    type Object = ClusterServiceVersion;
    type Error = ReconcileError;
    const NAME: &'static str = "csv";

    async fn reconcile(self: Arc<Self>, csv: Arc<ClusterServiceVersion>) -> Result<Action, ReconcileError> {
        reconcile(&self, &csv).await
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn retry(&self) -> Duration {
        self.retry
    }
}

/// Names for errors of one pass.
struct Place {
    namespace: String,
    name: String,
}

impl Place {
    fn read(&self, what: &'static str) -> impl FnOnce(ClientError) -> ReconcileError + '_ {
        move |source| ReconcileError::Read { namespace: self.namespace.clone(), name: self.name.clone(), what, source }
    }

    fn write(&self, what: impl Into<String>) -> impl FnOnce(ClientError) -> ReconcileError + '_ {
        let what = what.into();
        move |source| ReconcileError::Write { namespace: self.namespace.clone(), name: self.name.clone(), what, source }
    }
}

pub async fn reconcile(ctx: &Context, csv: &ClusterServiceVersion) -> Result<Action, ReconcileError> {
    if csv.metadata.deletion_timestamp.is_some() || is_copied(csv) || is_install_record(csv) {
        return Ok(Action::await_change());
    }
    let place = Place { namespace: csv.namespace().unwrap_or_default(), name: csv.name_any() };
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
        .list_with(&ListParams::default().labels(&format!("!{}", super::membership::COPIED_FROM_LABEL)))
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
    }
    if matches!(status.phase, CsvPhase::Installing | CsvPhase::Succeeded | CsvPhase::Failed) {
        let mut found = BTreeMap::new();
        for spec in &csv.spec.install.spec.deployments {
            let deployments = ctx.client.namespaced::<Deployment>(namespace);
            if let Some(deployment) = deployments.get_opt(&spec.name).await.map_err(place.read("Deployments"))? {
                found.insert(spec.name.clone(), deployment);
            }
        }
        observed.health = strategy::check(csv, &found);
    }
    if status.phase == CsvPhase::InstallReady {
        observed.author = author_may_install(ctx, csv, &place).await?;
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
    let snapshot = if strategy.permissions.is_empty() && strategy.cluster_permissions.is_empty() {
        RbacSnapshot::default()
    } else {
        let roles = ctx.client.namespaced::<Role>(namespace).list().await.map_err(place.read("Roles"))?;
        let cluster_roles = ctx.client.all::<ClusterRole>().list().await.map_err(place.read("ClusterRoles"))?;
        let bindings =
            ctx.client.namespaced::<RoleBinding>(namespace).list().await.map_err(place.read("RoleBindings"))?;
        let cluster_bindings =
            ctx.client.all::<ClusterRoleBinding>().list().await.map_err(place.read("ClusterRoleBindings"))?;
        RbacSnapshot::new(&roles, &cluster_roles, bindings, cluster_bindings)
    };
    let held = |account: &str| {
        let user = UserInfo::service_account(namespace, account);
        (snapshot.rules_for(&user, Some(namespace)).0, snapshot.rules_for(&user, None).0)
    };
    Ok(requirements(csv, &Cluster { crds: &crds, accounts: &accounts, held: &held }))
}

/// Whether the CSV's recorded author may create Deployments in its namespace: Err says why not.
async fn author_may_install(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    place: &Place,
) -> Result<Result<(), String>, ReconcileError> {
    let Some(author) = recorded_author(csv.annotations()) else {
        return Ok(Err("the CSV's author is not recorded (it was written while the webhook did not run): \
                       apply it again to install it"
            .into()));
    };
    let check = AccessCheck::resource(Some(&place.namespace), "create", "apps", "deployments", "");
    let may = allowed(ctx.client.kube(), &author, &check).await.map_err(|source| ReconcileError::Review {
        namespace: place.namespace.clone(),
        name: place.name.clone(),
        source,
    })?;
    Ok(if may {
        Ok(())
    } else {
        Err(format!(
            "the CSV's author {} may not create deployments in namespace {}, so its Deployments are not created for them",
            author.username, place.namespace
        ))
    })
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
    if outcome.install {
        let deployments = ctx.client.namespaced::<Deployment>(namespace);
        for deployment in strategy::deployments(csv) {
            let deployment_name = deployment["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            deployments
                .apply(&deployment_name, &deployment, None)
                .await
                .map_err(place.write(format!("Deployment {deployment_name}")))?;
        }
    }
    let mut next = status.clone();
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

/// The per-API ClusterRoles of a Succeeded CSV's owned CRDs (OLM's `ensureClusterRolesForCSV`).
async fn ensure_api_roles(ctx: &Context, csv: &ClusterServiceVersion, place: &Place) -> Result<(), ReconcileError> {
    let crd_api = ctx.client.all::<CustomResourceDefinition>();
    let roles = ctx.client.all::<ClusterRole>();
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
            if current.as_ref().is_some_and(|current| same_role(current, &role)) {
                continue;
            }
            roles.apply(&role_name, &role, None).await.map_err(place.write(format!("ClusterRole {role_name}")))?;
        }
    }
    Ok(())
}

/// Whether an existing role already has the rules and labels of `wanted` (so a settled CSV writes nothing).
fn same_role(current: &ClusterRole, wanted: &Value) -> bool {
    let rules = serde_json::to_value(&current.rules).unwrap_or_default();
    let labels = current.labels();
    let wanted_labels = wanted["metadata"]["labels"].as_object().cloned().unwrap_or_default();
    rules == wanted["rules"]
        && wanted_labels.iter().all(|(key, value)| labels.get(key).map(|v| json!(v)) == Some(value.clone()))
}

/// Starts the CSV loop.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let client = process.client.clone();
    let (namespaces, writer) = kube::runtime::reflector::store::<PartialObjectMeta<Namespace>>();
    let namespace_changes = kube::runtime::reflector(
        writer,
        watcher(Api::<PartialObjectMeta<Namespace>>::all(client.clone()), watcher::Config::default()),
    );
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), FIELD_MANAGER),
        events: Events::new(client.clone(), "olmv2-csv-controller"),
        metrics: process.metrics.clone(),
        retry: process.options.retry,
        resync: process.options.resync,
        namespaces,
        protected: process.options.protected_copied_csv_namespaces.iter().cloned().collect(),
        warned: Mutex::default(),
    });
    let controller =
        Controller::new(Api::<ClusterServiceVersion>::all(client.clone()), super::operatorgroup::csv_watch());
    let csvs = controller.store();
    let every = |store: Store<ClusterServiceVersion>| {
        move || store.state().iter().map(|csv| ObjectRef::from_obj(csv.as_ref())).collect::<Vec<_>>()
    };
    let (by_group, by_config, by_namespace) = (every(csvs.clone()), every(csvs.clone()), every(csvs.clone()));
    let by_chain = csvs.clone();
    let by_crd = csvs;
    let controller = controller
        .watches(
            Api::<Deployment>::all(client.clone()),
            watcher::Config::default().labels("olm.owner.kind=ClusterServiceVersion"),
            |deployment| {
                let labels = deployment.labels();
                match (labels.get("olm.owner"), labels.get("olm.owner.namespace")) {
                    (Some(name), Some(namespace)) => {
                        Some(ObjectRef::<ClusterServiceVersion>::new(name).within(namespace))
                    }
                    _ => None,
                }
            },
        )
        // A CSV's change concerns the one it replaces and those replacing it.
        .watches(Api::<ClusterServiceVersion>::all(client.clone()), super::operatorgroup::csv_watch(), move |changed| {
            let (name, namespace) = (changed.name_any(), changed.namespace());
            by_chain
                .state()
                .iter()
                .filter(|csv| csv.namespace() == namespace)
                .filter(|csv| {
                    changed.spec.replaces.as_deref() == Some(&csv.name_any())
                        || csv.spec.replaces.as_deref() == Some(&name)
                })
                .map(|csv| ObjectRef::from_obj(csv.as_ref()))
                .collect::<Vec<_>>()
        })
        // Membership, targets and provided APIs of any group can change any CSV's intersection.
        .watches(Api::<OperatorGroup>::all(client.clone()), watcher::Config::default(), move |_| by_group())
        // Copies on or off.
        .watches(Api::<OLMConfig>::all(client.clone()), watcher::Config::default(), move |_| by_config())
        // A new namespace needs the copies of every global group's operators.
        .watches_stream(namespace_changes.applied_objects(), move |_| by_namespace())
        // A copy deleted by hand is made again by its original's pass (metadata only, deletions only).
        .watches_stream(super::copied::deletions(client.clone(), super::membership::COPIED_FROM_LABEL), |copy| {
            let origin = copy.labels().get(super::membership::COPIED_FROM_LABEL).cloned()?;
            Some(ObjectRef::<ClusterServiceVersion>::new(&copy.name_any()).within(&origin))
        })
        .watches(Api::<CustomResourceDefinition>::all(client), watcher::Config::default(), move |crd| {
            let crd_name = crd.name_any();
            by_crd
                .state()
                .iter()
                .filter(|csv| {
                    let crds = csv.spec.custom_resource_definitions.iter();
                    crds.flat_map(|crds| crds.owned.iter().chain(&crds.required)).any(|d| d.name == crd_name)
                })
                .map(|csv| ObjectRef::from_obj(csv.as_ref()))
                .collect::<Vec<_>>()
        });
    runner::run(controller, context, process.shutdown()).boxed()
}

/// Targets as the CSV's annotation says (for callers that need them parsed).
pub fn annotated_targets(csv: &ClusterServiceVersion) -> Option<Targets> {
    let annotation = csv.annotations().get(TARGET_NAMESPACES_ANNOTATION)?;
    Some(if annotation.is_empty() {
        Targets::All
    } else {
        Targets::Namespaces(annotation.split(',').map(str::to_owned).collect())
    })
}
