//! OLM v0's Subscription loop: `candidates` (a Subscription's bundles, in OLM's order), `resolution` (a namespace's
//! Subscriptions resolved together, OLM's `syncResolvingNamespace`), `planning` (what the resolution asks to
//! install), `status` (what that writes on each Subscription), `deprecation` (the catalog's deprecations of what it
//! installed), `pass` (one pass over a namespace, as steps). [`controller`] reads a namespace (its Subscriptions,
//! CSVs, InstallPlans, OperatorGroups, and the catalogs of it and of the global catalog namespace from the
//! process-wide cache), decides, makes the namespace's InstallPlan when a Subscription moves, and writes every
//! Subscription's status that changed, with a Warning event on the Namespace when resolution fails, as OLM records
//! it; an installed Subscription's `spec.config` is carried to its Install (docs/legacy.md, 'Subscriptions').

pub mod candidates;
pub mod deprecation;
mod pass;
pub mod planning;
pub mod resolution;
pub mod status;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PartialObjectMeta};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;

use super::membership::COPIED_FROM_LABEL;
use crate::api::v1::OperatorGroup;
use crate::api::v1alpha1::{
    CatalogSource, ClusterServiceVersion, InstallPlan, Subscription, SubscriptionState, SubscriptionStatus,
};
use crate::api::v2alpha1::Install;
use crate::catalog::{CatalogCache, LoadedCatalog};
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::conditions::Transition;
use crate::controller::events::Events;
use crate::controller::runner::{self, Basics, Reconciler};
use crate::controller::watches;
use crate::legacy::installplan::execute::{
    holds_content, install_name, installed_image, made_for, Move, BUNDLE_ANNOTATION,
};
use crate::legacy::installplan::move_install;
use crate::legacy::installplan::plan::{initial_status, new_install_plan, next_generation};
use crate::runtime::Process;
use planning::NamespacePlan;
use status::RESOLUTION_FAILED;

/// OLM's OperatorGroup annotation keeping the global catalog namespace out of a namespace's resolution.
pub const EXCLUDE_GLOBAL_RESOLUTION: &str = "olm.operatorframework.io/exclude-global-namespace-resolution";

pub struct Context {
    client: ControllerClient,
    /// One pass per namespace at a time.
    locks: std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    events: Events,
    catalogs: Arc<CatalogCache>,
    global_namespace: String,
    /// The controller's namespace, where its own accounts for Installs live.
    controller_namespace: String,
    basics: Basics,
}

#[derive(Debug, thiserror::Error)]
pub enum SubscriptionLoopError {
    #[error("failed to read the {what} of namespace {namespace}")]
    Read {
        what: &'static str,
        namespace: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to create or collect an InstallPlan of namespace {namespace}")]
    WritePlan {
        namespace: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to configure Install {name} as its Subscription's spec.config says")]
    WriteInstall {
        name: String,
        #[source]
        source: crate::legacy::installplan::MoveError,
    },
    #[error("failed to write the status of Subscription {namespace}/{name}")]
    WriteStatus {
        namespace: String,
        name: String,
        #[source]
        source: ClientError,
    },
}

impl Categorized for SubscriptionLoopError {
    fn category(&self) -> &'static str {
        match self {
            Self::Read { .. } => "SubscriptionInputsUnreadable",
            Self::WritePlan { .. } => "InstallPlanCreateFailed",
            Self::WriteInstall { source, .. } if source.is_conflict() => "ObjectChanged",
            Self::WriteInstall { .. } => "InstallWriteFailed",
            Self::WriteStatus { .. } => "StatusWriteFailed",
        }
    }

    fn is_conflict(&self) -> bool {
        matches!(self, Self::WriteInstall { source, .. } if source.is_conflict())
    }
}

/// A CatalogSource with what loading its catalog answered.
struct Loaded {
    source: CatalogSource,
    catalog: Option<LoadedCatalog>,
}

impl Context {
    async fn list<K>(
        &self,
        namespace: &str,
        what: &'static str,
        params: ListParams,
    ) -> Result<Vec<K>, SubscriptionLoopError>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        self.client.namespaced::<K>(namespace).list_with(&params).await.map_err(|source| SubscriptionLoopError::Read {
            what,
            namespace: namespace.to_owned(),
            source,
        })
    }

    /// The CatalogSources of `namespace` and of the global catalog namespace, each with its catalog if it is served.
    async fn catalogs_for(&self, namespace: &str) -> Result<Vec<Loaded>, SubscriptionLoopError> {
        let mut sources: Vec<CatalogSource> = self.list(namespace, "CatalogSources", ListParams::default()).await?;
        if self.global_namespace != namespace {
            sources.extend(
                self.list::<CatalogSource>(&self.global_namespace, "CatalogSources", ListParams::default()).await?,
            );
        }
        let mut loaded = Vec::new();
        for source in sources {
            let catalog = self.catalogs.catalog_of(&source).await.ok();
            loaded.push(Loaded { source, catalog });
        }
        Ok(loaded)
    }
}

impl Reconciler for Context {
    type Object = Subscription;
    type Error = SubscriptionLoopError;
    const NAME: &'static str = "subscription";

    async fn reconcile(self: Arc<Self>, subscription: Arc<Subscription>) -> Result<Action, SubscriptionLoopError> {
        let namespace = subscription.namespace().unwrap_or_default();
        // A namespace resolves as one (OLM's syncResolvingNamespace): one pass at a time, whichever Subscription woke
        // it, so that two passes never plan the same generation twice.
        let lock = self.namespace_lock(&namespace);
        let _held = lock.lock().await;
        self.sync_namespace(&namespace).await
    }

    fn basics(&self) -> &Basics {
        &self.basics
    }
}

/// How soon a namespace whose Subscriptions' installed CSVs just moved is resolved.
const CSV_STATE_SETTLING: Duration = Duration::from_millis(500);

impl Context {
    fn namespace_lock(&self, namespace: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        locks.entry(namespace.to_owned()).or_default().clone()
    }

    /// Creates the namespace's next InstallPlan and writes its status (OLM's `createInstallPlan`: two writes).
    async fn create_plan(
        &self,
        namespace: &str,
        subscriptions: &[Subscription],
        plans: &[InstallPlan],
        plan: &NamespacePlan,
    ) -> Result<InstallPlan, SubscriptionLoopError> {
        let write = |source| SubscriptionLoopError::WritePlan { namespace: namespace.to_owned(), source };
        // A pass that made this very plan but failed to point the Subscriptions at it made it already (OLM's
        // ensureInstallPlan reuses a plan of the generation it would make).
        // Under the InstallPlan loop's field manager: a plan's status has one owner, whichever loop writes it.
        let writer = ControllerClient::new(self.client.kube().clone(), crate::legacy::installplan::FIELD_MANAGER);
        if let Some(made) = reusable_plan(subscriptions, plans, &plan.bundles) {
            if made.status.is_none() {
                // Made, but its status never written (the create's answer was lost, or the pass stopped there).
                let status = initial_status(namespace, made.spec.approval, &plan.bundles);
                let name = made.name_any();
                writer.namespaced::<InstallPlan>(namespace).apply_status(&name, &status, None).await.map_err(write)?;
                tracing::info!(%namespace, plan = %name, "InstallPlan made earlier reused; its status written");
            }
            return Ok(made.clone());
        }
        let generation = next_generation(subscriptions, plans);
        let object = new_install_plan(namespace, generation, subscriptions, &plan.bundles);
        let typed: InstallPlan = serde_json::from_value(object).map_err(|e| write(ClientError::Encode(e)))?;
        let plans = writer;
        let created = plans.namespaced::<InstallPlan>(namespace).create(&typed).await.map_err(write)?;
        let status = initial_status(namespace, created.spec.approval, &plan.bundles);
        let name = created.name_any();
        plans.namespaced::<InstallPlan>(namespace).apply_status(&name, &status, None).await.map_err(write)?;
        tracing::info!(%namespace, plan = %name, generation, csvs = ?created.spec.cluster_service_version_names, "InstallPlan created");
        Ok(created)
    }

    /// An installed Subscription's `spec.config` changed: its Install takes the new configuration (OLM applies it to
    /// the CSV's Deployments at once), unmarked only when the Subscription's author could have made that change.
    async fn follow_config(
        &self,
        namespace: &str,
        subscriptions: &[Subscription],
    ) -> Result<(), SubscriptionLoopError> {
        let read = |source| SubscriptionLoopError::Read { what: "Installs", namespace: namespace.to_owned(), source };
        for subscription in subscriptions {
            let installed = subscription.status.as_ref().is_some_and(|s| s.state == SubscriptionState::AtLatestKnown);
            if !installed {
                continue;
            }
            let name = install_name(&subscription.spec.name, namespace);
            let Some(install) = self.client.all::<Install>().get_opt(&name).await.map_err(read)? else { continue };
            let Some(image) = installed_image(&install).filter(|_| made_for(&install, subscription)) else { continue };
            if holds_content(&install, subscription, image) {
                continue;
            }
            let csv = install.annotations().get(BUNDLE_ANNOTATION).cloned().unwrap_or_default();
            let step = Move { image: image.to_owned(), install, subscription: subscription.clone(), csv };
            move_install(&self.client, &self.controller_namespace, &step)
                .await
                .map_err(|source| SubscriptionLoopError::WriteInstall { name: name.clone(), source })?;
            tracing::info!(%namespace, install = %name, "Install configured as its Subscription's spec.config says");
        }
        Ok(())
    }

    /// Writes every status of `next` that differs from the Subscription's; answers whether one was written.
    async fn write_changed(
        &self,
        namespace: &str,
        subscriptions: &[Subscription],
        next: &BTreeMap<String, SubscriptionStatus>,
    ) -> Result<bool, SubscriptionLoopError> {
        let mut written = false;
        for subscription in subscriptions {
            let name = subscription.name_any();
            let Some(status) = next.get(&name) else { continue };
            if subscription.status.clone().unwrap_or_default() == *status {
                continue;
            }
            self.client.namespaced::<Subscription>(namespace).apply_status(&name, status, None).await.map_err(
                |source| SubscriptionLoopError::WriteStatus {
                    namespace: namespace.to_owned(),
                    name: name.clone(),
                    source,
                },
            )?;
            written = true;
        }
        Ok(written)
    }

    /// OLM's Warning `ResolutionFailed` on the Namespace, once per new failure.
    async fn report_failure(&self, namespace: &str, message: &str) {
        let Ok(object) = self.client.all::<PartialObjectMeta<Namespace>>().get(namespace).await else { return };
        let transition = Transition { warning: true, reason: RESOLUTION_FAILED.into(), note: message.to_owned() };
        self.events.publish(&object, &[transition]).await;
    }
}

/// The newest plan of the namespace holding exactly `bundles`, still to run, that no Subscription points at.
fn reusable_plan<'a>(
    subscriptions: &[Subscription],
    plans: &'a [InstallPlan],
    bundles: &[crate::legacy::installplan::plan::PlannedBundle],
) -> Option<&'a InstallPlan> {
    let names: Vec<&str> = bundles.iter().map(|b| b.csv.as_str()).collect();
    let newest = plans.iter().max_by_key(|p| p.spec.generation)?;
    let open = !matches!(
        newest.status.as_ref().map(|s| s.phase),
        Some(crate::api::v1alpha1::InstallPlanPhase::Complete | crate::api::v1alpha1::InstallPlanPhase::Failed)
    );
    let same = newest.spec.cluster_service_version_names == names;
    let unreferenced = !subscriptions.iter().any(|s| crate::legacy::installplan::execute::references(s, newest));
    (open && same && unreferenced).then_some(newest)
}

/// What of a CatalogSource a resolution depends on: which object it is, its spec (priority, image, ConfigMap), and
/// what it serves (its reason, connection state and address, ConfigMap version); not when it was polled or
/// connected.
fn catalog_served(source: &CatalogSource) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    source.metadata.uid.hash(&mut hasher);
    serde_json::to_string(&source.spec).ok().hash(&mut hasher);
    if let Some(status) = &source.status {
        status.reason.hash(&mut hasher);
        let connection = status.connection_state.as_ref();
        connection.map(|c| (&c.address, &c.last_observed_state)).hash(&mut hasher);
        status.config_map_reference.as_ref().map(|r| &r.resource_version).hash(&mut hasher);
    }
    Some(hasher.finish())
}

/// CatalogSources whose service changed (`catalog_served`), and those deleted.
fn catalog_changes(
    client: kube::Client,
) -> impl futures_util::Stream<Item = Result<CatalogSource, watcher::Error>> + Send + 'static {
    use futures_util::StreamExt;
    let catalogs = Api::<CatalogSource>::all(client);
    let changed = watches::trimmed(catalogs.clone(), watcher::Config::default())
        .applied_objects()
        .predicate_filter(catalog_served, Default::default());
    let deleted =
        watcher::watcher(catalogs, watcher::Config::default()).default_backoff().filter_map(|event| async move {
            match event {
                Ok(watcher::Event::Delete(source)) => Some(Ok(source)),
                Ok(_) => None,
                Err(error) => Some(Err(error)),
            }
        });
    futures_util::stream::select(changed, deleted)
}

/// The Subscriptions of `namespace` in `store`.
fn in_namespace(store: &Store<Subscription>, namespace: Option<&str>) -> Vec<ObjectRef<Subscription>> {
    store
        .state()
        .iter()
        .filter(|s| namespace.is_none() || s.namespace().as_deref() == namespace)
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

/// Starts the Subscription loop: every Subscription, woken also by a change of the Subscriptions, CSVs (originals),
/// OperatorGroups and CatalogSources of its namespace, and of the CatalogSources of the global catalog namespace.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let client = process.client.clone();
    let global_namespace = process.options.global_catalog_namespace.clone();
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), "olmv2-subscription"),
        locks: Default::default(),
        events: Events::new(client.clone(), "olmv2-subscription-controller"),
        catalogs: process.catalogs.clone(),
        global_namespace: global_namespace.clone(),
        controller_namespace: process.options.namespace.clone(),
        basics: process.basics(),
    });
    let controller = watches::controller(Api::<Subscription>::all(client.clone()), watcher::Config::default());
    let (by_csv, by_group, by_catalog, by_subscription, by_plan) =
        (controller.store(), controller.store(), controller.store(), controller.store(), controller.store());
    let originals = watcher::Config::default().labels(&format!("!{COPIED_FROM_LABEL}"));
    let controller = controller
        .watches_stream(
            watches::metadata::<ClusterServiceVersion>(client.clone(), originals).touched_objects(),
            move |csv| in_namespace(&by_csv, csv.namespace().as_deref()),
        )
        // A plan's progress is its Subscriptions' conditions.
        .watches_stream(
            watches::metadata::<InstallPlan>(client.clone(), watcher::Config::default()).touched_objects(),
            move |plan| in_namespace(&by_plan, plan.namespace().as_deref()),
        )
        // A namespace resolves together: one Subscription changed (or deleted) wakes the others.
        .watches_stream(
            watches::metadata::<Subscription>(client.clone(), watcher::Config::default()).touched_objects(),
            move |subscription| in_namespace(&by_subscription, subscription.namespace().as_deref()),
        )
        .watches_stream(
            watches::metadata::<OperatorGroup>(client.clone(), watcher::Config::default()).touched_objects(),
            move |group| in_namespace(&by_group, group.namespace().as_deref()),
        )
        // A catalog's change that changes what it serves (not its poll times): a global one wakes every
        // Subscription of the cluster, so a poll that found nothing new must wake none. Deletions always wake.
        .watches_stream(catalog_changes(client), move |source: CatalogSource| {
            let namespace = source.namespace();
            let everywhere = namespace.as_deref() == Some(global_namespace.as_str());
            in_namespace(&by_catalog, if everywhere { None } else { namespace.as_deref() })
        });
    runner::run(controller, context, process.shutdown()).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::legacy::installplan::plan::PlannedBundle;
    use serde_json::json;

    fn plan(name: &str, generation: i64, csvs: &[&str], phase: &str) -> InstallPlan {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": name, "namespace": "ops", "uid": format!("uid-{name}")},
            "spec": {"clusterServiceVersionNames": csvs, "approval": "Automatic", "approved": true, "generation": generation},
            "status": {"phase": phase, "catalogSources": []}}))
        .unwrap()
    }

    fn bundle(csv: &str) -> PlannedBundle {
        PlannedBundle {
            csv: csv.into(),
            package: "plumbus".into(),
            channel: "stable".into(),
            image: "r/plumbus".into(),
            catalog: "community".into(),
            catalog_namespace: "olm".into(),
            replaces: None,
            subscription: Some("plumbus".into()),
        }
    }

    #[test]
    fn a_catalog_polled_or_reconnected_serves_the_same_and_a_new_digest_does_not() {
        let source = |address: &str, state: &str, polled: &str| -> CatalogSource {
            serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "community", "namespace": "olm", "uid": "u1"},
                "spec": {"sourceType": "grpc", "image": "r/c:latest"},
                "status": {"latestImageRegistryPoll": polled,
                           "connectionState": {"address": address, "lastObservedState": state, "lastConnect": polled}}}))
            .unwrap()
        };
        let first = catalog_served(&source("r/c@sha256:1", "READY", "2026-01-01T00:00:00Z"));
        assert_eq!(first, catalog_served(&source("r/c@sha256:1", "READY", "2026-01-01T00:10:00Z")), "a poll");
        assert_ne!(first, catalog_served(&source("r/c@sha256:2", "READY", "2026-01-01T00:10:00Z")), "a new digest");
        assert_ne!(first, catalog_served(&source("r/c:latest", "TRANSIENT_FAILURE", "2026-01-01T00:10:00Z")));
        let mut prioritized = source("r/c@sha256:1", "READY", "2026-01-01T00:00:00Z");
        prioritized.spec.priority = Some(10);
        assert_ne!(first, catalog_served(&prioritized), "a priority");
    }

    #[test]
    fn a_plan_made_but_never_pointed_at_is_made_once() {
        let plans =
            [plan("install-a", 1, &["plumbus.v1"], "Complete"), plan("install-b", 2, &["plumbus.v2"], "Installing")];
        let unpointed: Subscription = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription", "metadata": {"name": "plumbus", "namespace": "ops"},
            "spec": {"source": "community", "sourceNamespace": "olm", "name": "plumbus"}}))
        .unwrap();
        let subs = [unpointed.clone()];
        assert_eq!(
            reusable_plan(&subs, &plans, &[bundle("plumbus.v2")]).and_then(|p| p.metadata.name.clone()).as_deref(),
            Some("install-b")
        );
        assert!(reusable_plan(&subs, &plans, &[bundle("plumbus.v3")]).is_none(), "other bundles: a new plan");
        let mut pointed = unpointed;
        pointed.status = Some(
            serde_json::from_value(json!({"installPlanRef": {"name": "install-b", "uid": "uid-install-b"}})).unwrap(),
        );
        assert!(reusable_plan(&[pointed], &plans, &[bundle("plumbus.v2")]).is_none(), "in use: a new plan");
        let done = [plan("install-b", 2, &["plumbus.v2"], "Complete")];
        assert!(reusable_plan(&subs, &done, &[bundle("plumbus.v2")]).is_none(), "finished: a new plan");
    }
}
