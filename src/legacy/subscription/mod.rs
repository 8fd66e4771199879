//! OLM v0's Subscription loop: `candidates` (a Subscription's bundles, in OLM's order), `resolution` (a namespace's
//! Subscriptions resolved together, OLM's `syncResolvingNamespace`), `status` (what that writes on each
//! Subscription). [`controller`] reads a namespace (its Subscriptions, CSVs, OperatorGroups, and the catalogs of it
//! and of the global catalog namespace from the process-wide cache), decides, and writes the Subscription's status
//! when it changed, with a Warning event on the Namespace when resolution fails, as OLM records it.
//!
//! Not yet: InstallPlans (a resolved bundle leaves the Subscription `UpgradePending` on its `currentCSV` until a CSV of
//! that name exists), generated dependency Subscriptions, `spec.config` (docs/legacy.md, 'Subscriptions').

pub mod candidates;
pub mod resolution;
pub mod status;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, PartialObjectMeta};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;

use super::membership::COPIED_FROM_LABEL;
use crate::api::v1::OperatorGroup;
use crate::api::v1alpha1::{CatalogSource, ClusterServiceVersion, Subscription};
use crate::catalog::dependencies::Source;
use crate::catalog::{CatalogCache, LoadedCatalog};
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::conditions::Transition;
use crate::controller::events::Events;
use crate::controller::runner::{self, Reconciler};
use crate::controller::watches;
use crate::controller::Process;
use crate::metrics::Metrics;
use resolution::{resolve_namespace, Inputs, Outcome, ERROR_PREVENTED_RESOLUTION};
use status::{with_catalog_health, with_csv_state, with_resolution, CatalogView, RESOLUTION_FAILED};

/// OLM's OperatorGroup annotation keeping the global catalog namespace out of a namespace's resolution.
pub const EXCLUDE_GLOBAL_RESOLUTION: &str = "olm.operatorframework.io/exclude-global-namespace-resolution";

pub struct Context {
    client: ControllerClient,
    events: Events,
    catalogs: Arc<CatalogCache>,
    global_namespace: String,
    metrics: Arc<Metrics>,
    retry: Duration,
    resync: Duration,
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
            Self::WriteStatus { .. } => "StatusWriteFailed",
        }
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
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let subscriptions: Vec<Subscription> = self.list(&namespace, "Subscriptions", ListParams::default()).await?;
        let Some(current) = subscriptions.iter().find(|s| s.name_any() == subscription.name_any()) else {
            return Ok(Action::await_change());
        };
        let originals = ListParams::default().labels(&format!("!{COPIED_FROM_LABEL}"));
        let csvs: Vec<ClusterServiceVersion> = self.list(&namespace, "CSVs", originals).await?;
        let exists = |name: &str| csvs.iter().any(|csv| csv.name_any() == name);
        // As OLM's syncResolvingNamespace: every Subscription's installedCSV first, resolution once none moves (the
        // installed CSV is what an upgrade is resolved from).
        let csv_state = |subscription: &Subscription| {
            let mut status = subscription.status.clone().unwrap_or_default();
            let installed = status.current_csv.as_deref().is_some_and(exists);
            with_csv_state(&mut status, installed, &now);
            status
        };
        let previous = current.status.clone().unwrap_or_default();
        let moved = csv_state(current);
        if moved != previous {
            self.write_status(current, &moved).await?;
            return Ok(Action::requeue(CSV_STATE_SETTLING));
        }
        if subscriptions.iter().any(|s| csv_state(s) != s.status.clone().unwrap_or_default()) {
            return Ok(Action::requeue(CSV_STATE_SETTLING));
        }
        let groups: Vec<OperatorGroup> = self.list(&namespace, "OperatorGroups", ListParams::default()).await?;
        let exclude_global = matches!(groups.as_slice(), [group]
            if group.annotations().get(EXCLUDE_GLOBAL_RESOLUTION).map(String::as_str) == Some("true"));
        let loaded = self.catalogs_for(&namespace).await?;
        let views: Vec<CatalogView> = loaded
            .iter()
            .map(|l| CatalogView {
                name: l.source.name_any(),
                namespace: l.source.namespace().unwrap_or_default(),
                uid: l.source.metadata.uid.clone(),
                resource_version: l.source.metadata.resource_version.clone(),
                healthy: l.catalog.is_some(),
            })
            .collect();
        let sources: Vec<Source<'_>> = loaded
            .iter()
            .filter(|l| !(exclude_global && l.source.namespace().as_deref() == Some(self.global_namespace.as_str())))
            .filter_map(|l| {
                Some(Source {
                    name: l.source.name_any(),
                    namespace: l.source.namespace().unwrap_or_default(),
                    priority: l.source.spec.priority.unwrap_or(0),
                    catalog: l.catalog.as_ref()?.catalog.as_ref(),
                })
            })
            .collect();
        let outcome = resolve_namespace(&Inputs {
            subscriptions: &subscriptions,
            csvs: &csvs,
            sources,
            operator_groups: groups.len(),
        });
        let mut next = previous.clone();
        with_catalog_health(&mut next, &current.spec.source, &current.spec.source_namespace, &views, &now);
        let resolved = match &outcome {
            Outcome::Resolved { subscriptions, .. } => subscriptions.get(&current.name_any()),
            Outcome::Failed { .. } => None,
        };
        with_resolution(&mut next, resolved, &outcome, &now);
        let installed = next.current_csv.as_deref().is_some_and(exists);
        with_csv_state(&mut next, installed, &now);
        if next != previous {
            self.write_status(current, &next).await?;
            self.report_failure(&namespace, &subscriptions, current, &previous, &outcome).await;
        }
        if let Outcome::Failed { reason, message } = &outcome {
            tracing::info!(%namespace, reason, "resolution failed: {message}");
        }
        Ok(Action::requeue(match &outcome {
            Outcome::Failed { reason: ERROR_PREVENTED_RESOLUTION, .. } => self.retry,
            _ => self.resync,
        }))
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn retry(&self) -> Duration {
        self.retry
    }
}

/// How soon a namespace whose Subscriptions' installed CSVs just moved is resolved.
const CSV_STATE_SETTLING: Duration = Duration::from_millis(500);

impl Context {
    async fn write_status(
        &self,
        subscription: &Subscription,
        status: &crate::api::v1alpha1::SubscriptionStatus,
    ) -> Result<(), SubscriptionLoopError> {
        let (namespace, name) = (subscription.namespace().unwrap_or_default(), subscription.name_any());
        self.client
            .namespaced::<Subscription>(&namespace)
            .apply_status(&name, status, None)
            .await
            .map(|_| ())
            .map_err(|source| SubscriptionLoopError::WriteStatus { namespace, name, source })
    }

    /// OLM's Warning `ResolutionFailed` on the Namespace, once per new failure: recorded by the pass of the
    /// namespace's first Subscription (by name) when its condition changed.
    async fn report_failure(
        &self,
        namespace: &str,
        subscriptions: &[Subscription],
        current: &Subscription,
        previous: &crate::api::v1alpha1::SubscriptionStatus,
        outcome: &Outcome,
    ) {
        let Outcome::Failed { message, .. } = outcome else { return };
        let first = subscriptions.iter().map(ResourceExt::name_any).min();
        let already =
            previous.conditions.iter().any(|c| c.type_ == RESOLUTION_FAILED && c.message.as_deref() == Some(message));
        if first.as_deref() != Some(current.name_any().as_str()) || already {
            return;
        }
        let Ok(object) = self.client.all::<PartialObjectMeta<Namespace>>().get(namespace).await else { return };
        let transition = Transition { warning: true, reason: RESOLUTION_FAILED.into(), note: message.clone() };
        self.events.publish(&object, &[transition]).await;
    }
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
        events: Events::new(client.clone(), "olmv2-subscription-controller"),
        catalogs: process.catalogs.clone(),
        global_namespace: global_namespace.clone(),
        metrics: process.metrics.clone(),
        retry: process.options.retry,
        resync: process.options.resync,
    });
    let controller = watches::controller(Api::<Subscription>::all(client.clone()), watcher::Config::default());
    let (by_csv, by_group, by_catalog, by_subscription) =
        (controller.store(), controller.store(), controller.store(), controller.store());
    let originals = watcher::Config::default().labels(&format!("!{COPIED_FROM_LABEL}"));
    let controller = controller
        .watches_stream(
            watches::metadata::<ClusterServiceVersion>(client.clone(), originals).touched_objects(),
            move |csv| in_namespace(&by_csv, csv.namespace().as_deref()),
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
        .watches_stream(
            watches::metadata::<CatalogSource>(client, watcher::Config::default()).touched_objects(),
            move |source| {
                let namespace = source.namespace();
                let everywhere = namespace.as_deref() == Some(global_namespace.as_str());
                in_namespace(&by_catalog, if everywhere { None } else { namespace.as_deref() })
            },
        );
    runner::run(controller, context, process.shutdown()).boxed()
}
