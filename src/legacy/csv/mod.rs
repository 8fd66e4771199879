//! The ClusterServiceVersion loop of OLM v0, for CSVs applied by hand or from GitOps repositories: `reconcile` is the
//! pass as a sequence of steps; `observe` reads what the decisions need; `requirements`, `strategy`, `phase`, `chain`
//! and `plan` decide; `steps` and `api_roles` write what they say (labels, annotations, the group's provided APIs,
//! Deployments, the status and its events, per-API ClusterRoles), `components` does the
//! same for owned APIServices and webhooks (decided by `certs`, `rotation`, `apiservices`, `webhooks`,
//! `availability` and `component_access`), `tenants` extends the CSV's RBAC to its group's targets, `cleanup` is
//! OLM's finalizer, and [`controller`]
//! runs it for every original CSV (copies carry `olm.copiedFrom` and are not watched here), with the copied-CSV loop
//! and the copier its passes ask for copies (`legacy::copied`, `legacy::copier`). Install records and copies are
//! left alone: their content is someone else's.
//!
//! A CSV's Deployments, the objects of its APIServices and webhooks, its per-API ClusterRoles and its RBAC in its
//! targets are made by the controller only when the CSV's author (recorded by the webhook: its creator, then whoever
//! last changed its spec) could make them by hand (`authority`, `component_access`), so that writing a CSV never does
//! more than its author could do.

pub mod api_roles;
pub mod apiservices;
pub mod authority;
pub mod availability;
pub mod certs;
pub mod chain;
pub mod cleanup;
pub mod component_access;
pub mod components;
pub mod copying;
pub mod observe;
pub mod phase;
pub mod plan;
pub mod platform;
pub mod reconcile;
pub mod requirements;
pub mod rotation;
pub mod steps;
pub mod strategy;
pub mod tenants;
pub mod wakes;
pub mod webhooks;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;

use super::copies::DISABLED_COPIED_CSVS;
use super::roles::{OWNER_LABEL, OWNER_NAMESPACE_LABEL};
use crate::api::v1::{OLMConfig, OperatorGroup, OLM_CONFIG_NAME};
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::conditions::Transition;
use crate::controller::events::Events;
use crate::controller::listing;
use crate::controller::rbac_cache::RbacCache;
use crate::controller::runner::{self, Basics, Reconciler};
use crate::controller::watches;
use crate::controller::written::{Stored, Written};
use crate::legacy::copier::ledger::Ledger;
use crate::legacy::copier::Copier;
use crate::runtime::Process;

/// The field manager of the CSV loop's writes.
pub const FIELD_MANAGER: &str = "olmv2-csv";

pub struct Context {
    client: ControllerClient,
    events: Events,
    basics: Basics,
    /// Every namespace, as metadata: where copies of CSVs of global groups go.
    namespaces: Store<PartialObjectMeta<Namespace>>,
    /// The ClusterRoles and ClusterRoleBindings accounts are checked against.
    rbac: Arc<RbacCache>,
    /// Every OperatorGroup, as watched: a pass read the groups of its namespace and of the whole cluster live
    /// before, two lists per pass, each as long as the cluster has namespaces with operators.
    groups: Store<OperatorGroup>,
    /// The original CSVs, the loop's own store: a CSV's chain is read from it (a pass listed its namespace's CSVs
    /// live before, the most frequent read of a pass).
    csvs: Store<ClusterServiceVersion>,
    /// The CRDs, without their schemas: what a CSV's requirements ask of its CRDs (a pass read each live before).
    crds: Store<CustomResourceDefinition>,
    /// The OLMConfig, which turns copies off (a pass read it live before).
    configs: Store<OLMConfig>,
    /// The Deployments made for CSVs, without their pods' spec: what a pass judges a CSV's health on (read live
    /// before, on every pass of an installed CSV), and the versions this loop wrote of them (read-your-writes).
    deployments: Store<Deployment>,
    written: Written,
    /// Namespaces keeping copies when copies are disabled.
    protected: BTreeSet<String>,
    /// Writes the copies a pass asks for, after it (`legacy::copier`).
    copier: Copier,
    /// The Warning events published per CSV (uid, reason) and their note: each is published once while it holds,
    /// so a refusal that stands does not write an event on every pass of an idle cluster.
    warned: Mutex<HashMap<(String, &'static str), String>>,
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

    /// Every OperatorGroup as the watch holds them, once it has listed them; None before (or when it stopped), for
    /// the pass to read them live.
    async fn watched_groups(&self) -> Option<Vec<Arc<OperatorGroup>>> {
        listed(&self.groups).await.then(|| self.groups.state())
    }

    /// The CRD `name` as watched (schemas dropped); None when the watch has not listed the CRDs, for the pass to
    /// read them live.
    async fn watched_crd(&self, name: &str) -> Option<Option<Arc<CustomResourceDefinition>>> {
        listed(&self.crds).await.then(|| self.crds.get(&ObjectRef::new(name)))
    }

    /// Whether copied CSVs are enabled: from the watched OLMConfig, live when the watch has not listed it.
    async fn copies_enabled(&self) -> Result<bool, ClientError> {
        if listed(&self.configs).await {
            return Ok(copying::enabled_by(self.configs.get(&ObjectRef::new(OLM_CONFIG_NAME)).as_deref()));
        }
        copying::copies_enabled(&self.client).await
    }

    /// The cluster's ClusterRoles and ClusterRoleBindings, once both have been read (before, an empty snapshot:
    /// every account seems to hold nothing, so a check waits rather than passes).
    async fn cluster_rbac(&self) -> Arc<crate::rbac::RbacSnapshot> {
        match self.rbac.current().await {
            Ok(()) => self.rbac.cluster_snapshot(),
            Err(_) => Arc::default(),
        }
    }

    /// The Roles and RoleBindings of `namespace` as the process's RBAC watch holds them, once it holds what this
    /// process wrote; None when it cannot say, for the pass to list them live.
    async fn watched_roles_in(&self, namespace: &str) -> Option<(Vec<Role>, Vec<RoleBinding>)> {
        self.rbac.current().await.ok()?;
        Some(self.rbac.namespace_objects(namespace))
    }

    /// The Deployment `name` of `namespace` as watched, when the watch has listed them and holds what this loop
    /// wrote of it; None when only a live read can say.
    async fn watched_deployment(&self, namespace: &str, name: &str) -> Option<Option<Arc<Deployment>>> {
        match listed(&self.deployments).await.then(|| self.written.read(&self.deployments, namespace, name))? {
            Stored::Current(found) => Some(found),
            Stored::Behind => None,
        }
    }

    /// Publishes OLM's Warning `DisabledCopiedCSVs` for `csv` once while its copies are off, and forgets it when
    /// they are on again.
    async fn copies_disabled_event(&self, csv: &ClusterServiceVersion, disabled: bool) {
        if disabled {
            let note = format!("CSV copying disabled for {}/{}", csv.namespace().unwrap_or_default(), csv.name_any());
            self.warn_once(csv, DISABLED_COPIED_CSVS, note).await;
        } else {
            self.forget_warning(csv, DISABLED_COPIED_CSVS);
        }
    }

    /// Publishes a Warning event with `reason` and `note` on `csv` unless the same one was published last.
    async fn warn_once(&self, csv: &ClusterServiceVersion, reason: &'static str, note: String) {
        let key = (csv.uid().unwrap_or_default(), reason);
        let first = match self.warned.lock() {
            Ok(mut warned) => warned.insert(key, note.clone()).as_ref() != Some(&note),
            Err(_) => false,
        };
        if first {
            self.events.publish(csv, &[Transition { warning: true, reason: reason.into(), note }]).await;
        }
    }

    /// Forgets every Warning published on `csv`, being deleted.
    fn forget_warnings(&self, csv: &ClusterServiceVersion) {
        let uid = csv.uid().unwrap_or_default();
        if let Ok(mut warned) = self.warned.lock() {
            warned.retain(|(of, _), _| *of != uid);
        }
    }

    /// Forgets the Warning with `reason` on `csv`: it no longer holds, and is published again if it comes back.
    fn forget_warning(&self, csv: &ClusterServiceVersion, reason: &'static str) {
        if let Ok(mut warned) = self.warned.lock() {
            warned.remove(&(csv.uid().unwrap_or_default(), reason));
        }
    }
}

/// The CSV a pass is over, naming its errors.
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
    #[error("failed to check whether the author of CSV {namespace}/{name} may have its objects made for them")]
    Review {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to generate the serving certificates of CSV {namespace}/{name}")]
    Certificate {
        namespace: String,
        name: String,
        #[source]
        source: crate::tls::CertificateError,
    },
}

impl Categorized for ReconcileError {
    fn category(&self) -> &'static str {
        match self {
            Self::Read { .. } => "CsvReadFailed",
            Self::Write { .. } => "CsvWriteFailed",
            Self::Review { .. } => "CsvAuthorReviewFailed",
            Self::Certificate { .. } => "CsvCertificateFailed",
        }
    }

    fn is_conflict(&self) -> bool {
        match self {
            Self::Read { source, .. } | Self::Write { source, .. } => source.is_conflict(),
            Self::Review { .. } | Self::Certificate { .. } => false,
        }
    }
}

impl Reconciler for Context {
    type Object = ClusterServiceVersion;
    type Error = ReconcileError;
    const NAME: &'static str = "csv";

    async fn reconcile(self: Arc<Self>, csv: Arc<ClusterServiceVersion>) -> Result<Action, ReconcileError> {
        reconcile::reconcile(&self, &csv).await
    }

    fn basics(&self) -> &Basics {
        &self.basics
    }
}

/// How long a pass waits for a watch to list its objects once before reading them live.
const STORE_LISTED: Duration = Duration::from_secs(5);

/// Whether `store` has listed its objects once, waiting up to [`STORE_LISTED`].
async fn listed<K: kube::Resource<DynamicType = ()> + Clone>(store: &Store<K>) -> bool {
    listing::listed(store, STORE_LISTED).await
}

/// The CSVs a change of `changed` concerns along `spec.replaces`: the one it replaces and those replacing it.
fn chain_neighbours(
    changed: &ClusterServiceVersion,
    csvs: &Store<ClusterServiceVersion>,
) -> Vec<ObjectRef<ClusterServiceVersion>> {
    let (name, namespace) = (changed.name_any(), changed.namespace());
    csvs.state()
        .iter()
        .filter(|csv| csv.namespace() == namespace)
        .filter(|csv| {
            changed.spec.replaces.as_deref() == Some(&csv.name_any()) || csv.spec.replaces.as_deref() == Some(&name)
        })
        .map(|csv| ObjectRef::from_obj(csv.as_ref()))
        .collect()
}

/// The CSVs owning or requiring the CRD `crd_name`.
fn naming_crd(crd_name: &str, csvs: &Store<ClusterServiceVersion>) -> Vec<ObjectRef<ClusterServiceVersion>> {
    let names = |csv: &ClusterServiceVersion| {
        let crds = csv.spec.custom_resource_definitions.iter();
        crds.flat_map(|crds| crds.owned.iter().chain(&crds.required)).any(|crd| crd.name == crd_name)
    };
    csvs.state().iter().filter(|csv| names(csv)).map(|csv| ObjectRef::from_obj(csv.as_ref())).collect()
}

/// Keeps of a Deployment what a CSV's health is judged on (its labels, generation, status and pod template's
/// metadata): the pods' spec is most of it.
fn without_pod_spec(deployment: &mut Deployment) {
    if let Some(spec) = deployment.spec.as_mut() {
        spec.template.spec = None;
    }
}

/// Keeps of a CRD what a CSV's requirements read (names, versions served, conditions): schemas are most of a CRD.
fn without_schemas(crd: &mut CustomResourceDefinition) {
    crd.metadata.annotations = None;
    for version in &mut crd.spec.versions {
        version.schema = None;
        version.additional_printer_columns = None;
        version.subresources = None;
    }
}

/// The label selector of what OLM made for a CSV.
const OWNED_BY_CSV: &str = "olm.owner.kind=ClusterServiceVersion";

/// The CSV an object's `olm.owner` labels name.
fn owner_csv(labels: &std::collections::BTreeMap<String, String>) -> Option<ObjectRef<ClusterServiceVersion>> {
    match (labels.get(OWNER_LABEL), labels.get(OWNER_NAMESPACE_LABEL)) {
        (Some(name), Some(namespace)) => Some(ObjectRef::new(name).within(namespace)),
        _ => None,
    }
}

/// The metadata of the objects of kind `K` labelled as a CSV's, as they change or go.
fn owned_metadata<K>(
    client: &kube::Client,
) -> impl futures_util::Stream<Item = Result<PartialObjectMeta<K>, watcher::Error>> + Send + 'static
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    watches::metadata::<K>(client.clone(), watcher::Config::default().labels(OWNED_BY_CSV)).touched_objects()
}

/// Keeps of a namespace's metadata what [`Context::live_namespaces`] reads.
fn name_and_deletion_only(namespace: &mut PartialObjectMeta<Namespace>) {
    namespace.metadata.labels = None;
    namespace.metadata.annotations = None;
}

/// What of a namespace a change must touch to concern the CSVs: its coming (a uid first seen) and its going (its
/// deletion started).
pub(crate) fn arrival_or_deletion(namespace: &PartialObjectMeta<Namespace>) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    namespace.metadata.uid.hash(&mut hasher);
    namespace.metadata.deletion_timestamp.is_some().hash(&mut hasher);
    Some(hasher.finish())
}

/// Starts the CSV loop, with the copied-CSV loop and the copier it feeds.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let client = process.client.clone();
    let all = watcher::Config::default;
    // Names and deletion only: every global OperatorGroup labels every namespace, and the namespace loop's store
    // holds those labels already; a second copy here is not needed.
    let (namespaces, namespace_changes) =
        watches::reflected(watches::metadata::<Namespace>(client.clone(), all()).modify(name_and_deletion_only));
    let (groups, group_changes) =
        watches::reflected(watches::trimmed(Api::<OperatorGroup>::all(client.clone()), all()));
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let (crds, crd_changes) = watches::reflected(watches::trimmed(crds, all()).modify(without_schemas));
    let deployments = Api::<Deployment>::all(client.clone());
    let (deployments, deployment_changes) =
        watches::reflected(watches::trimmed(deployments, all().labels(OWNED_BY_CSV)).modify(without_pod_spec));
    let (configs, config_changes) = watches::reflected(watches::trimmed(Api::<OLMConfig>::all(client.clone()), all()));
    // A CSV's change concerns the one it replaces and those replacing it, woken once the store holds the change.
    let (controller, csvs_listed) = watches::controller_waking_related(
        Api::<ClusterServiceVersion>::all(client.clone()),
        super::operatorgroup::csv_watch(),
        chain_neighbours,
    );
    let csvs = controller.store();
    // The copied-CSV loop reads this loop's store and wakes its passes; the copier writes copies from the requests
    // of its passes and sees them through the copied-CSV loop's store.
    let ledger = Arc::new(Ledger::default());
    let (wake, woken) = tokio::sync::mpsc::unbounded_channel();
    let (copies, copies_listed, copied_loop) =
        super::copied::controller(process, csvs.clone(), csvs_listed, ledger.clone(), wake.clone());
    let copier_client = ControllerClient::new(client.clone(), FIELD_MANAGER);
    let forgotten = ledger.clone();
    let copier = Copier::new(copier_client, copies, copies_listed, ledger, process.basics().retry, wake);
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), FIELD_MANAGER),
        events: Events::new(client.clone(), "olmv2-csv-controller"),
        basics: process.basics(),
        namespaces,
        // The cluster's RBAC, held once by the process for the permission checks (a change wakes no CSV: a CSV
        // waiting on RBAC looks again after the retry interval, as OLM's does).
        rbac: process.rbac.clone(),
        groups: groups.clone(),
        csvs: csvs.clone(),
        crds,
        configs,
        deployments,
        written: Written::default(),
        protected: process.options.protected_copied_csv_namespaces.iter().cloned().collect(),
        copier: copier.clone(),
        warned: Mutex::default(),
    });
    let every = |store: Store<ClusterServiceVersion>| {
        move || store.state().iter().map(|csv| ObjectRef::from_obj(csv.as_ref())).collect::<Vec<_>>()
    };
    let (by_config, by_namespace) = (every(csvs.clone()), every(csvs.clone()));
    let (by_group, group_apis, by_crd) = (csvs.clone(), wakes::GroupApis::new(groups), csvs);
    let controller = controller
        // Its Deployments (their labels name the CSV).
        .watches_stream(deployment_changes.touched_objects(), |deployment| owner_csv(deployment.labels()))
        // Its RBAC, namespaced and cluster-scoped (metadata only), as OLM's `requeueOwnerCSVs`: a binding made after
        // its Role is seen at once, and a binding deleted fails a Succeeded CSV at once, not at the resync.
        .watches_stream(owned_metadata::<Role>(&client), |role| owner_csv(role.labels()))
        .watches_stream(owned_metadata::<RoleBinding>(&client), |binding| owner_csv(binding.labels()))
        .watches_stream(owned_metadata::<ClusterRole>(&client), |role| owner_csv(role.labels()))
        .watches_stream(owned_metadata::<ClusterRoleBinding>(&client), |binding| owner_csv(binding.labels()))
        // A group's membership, targets and provided APIs concern the CSVs of its namespace and the providers of
        // the APIs it lists (`wakes`).
        .watches_stream(group_changes.touched_objects(), move |group| {
            wakes::concerned_by_group(&group, &group_apis.before(&group), &by_group.state())
        })
        // Copies on or off.
        .watches_stream(config_changes.touched_objects(), move |_| by_config())
        // A new namespace needs the copies of every global group's operators (its labels, which the namespace loop
        // writes to every namespace, wake nobody: a thousand namespaces labelled were a thousand sweeps).
        .watches_stream(
            namespace_changes.applied_objects().predicate_filter(arrival_or_deletion, Default::default()),
            move |_| by_namespace(),
        )
        // A copy deleted by hand is made again by its original's pass (metadata only, deletions only); forgotten by
        // the ledger first, as the copier's view (the copied-CSV loop's store) may still show it as written.
        .watches_stream(super::copied::deletions(client.clone(), super::membership::COPIED_FROM_LABEL), move |copy| {
            let origin = copy.labels().get(super::membership::COPIED_FROM_LABEL).cloned()?;
            forgotten.forget(&copy.namespace().unwrap_or_default(), &copy.name_any());
            Some(ObjectRef::<ClusterServiceVersion>::new(&copy.name_any()).within(&origin))
        })
        .watches_stream(crd_changes.touched_objects(), move |crd| naming_crd(&crd.name_any(), &by_crd))
        // Originals the copied-CSV loop or the copier asks to look at again.
        .reconcile_on(futures_util::stream::unfold(woken, |mut woken| async move {
            woken.recv().await.map(|at| (at, woken))
        }));
    let csv_loop = runner::run(controller, context, process.shutdown());
    let copier = futures_util::future::select(Box::pin(copier.run()), Box::pin(process.shutdown()));
    async move {
        futures_util::future::join3(csv_loop, copied_loop, copier).await;
    }
    .boxed()
}
