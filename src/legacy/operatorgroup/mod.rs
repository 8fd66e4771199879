//! The OperatorGroup loop of OLM v0: `decide` is one pass's decisions; `steps` reads what they need and writes what
//! they say; [`controller`] runs the pass, and is woken by the group's namespace-mates (the `MultipleOperatorGroup` condition), by namespace
//! label changes (selector groups), and by the CSVs of its namespace (annotations, provided APIs).

pub mod decide;
mod steps;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;

use self::decide::{decide, Observed};
use self::steps::Place;
use crate::api::v1::OperatorGroup;
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::rbac_cache::RbacCache;
use crate::controller::runner::{self, Reconciler};
use crate::controller::watches;
use crate::metrics::Metrics;
use crate::runtime::Process;

/// The field manager of the OperatorGroup loop's writes.
pub const FIELD_MANAGER: &str = "olmv2-operatorgroup";

pub struct Context {
    client: ControllerClient,
    metrics: Arc<Metrics>,
    retry: Duration,
    resync: Duration,
    /// The process's RBAC, for the group's aggregating ClusterRoles as stored.
    rbac: Arc<RbacCache>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("failed to read what OperatorGroup {namespace}/{name} needs ({what})")]
    Read {
        namespace: String,
        name: String,
        what: &'static str,
        #[source]
        source: ClientError,
    },
    #[error("failed to write {what} of OperatorGroup {namespace}/{name}")]
    Write {
        namespace: String,
        name: String,
        what: String,
        #[source]
        source: ClientError,
    },
}

impl Categorized for ReconcileError {
    fn category(&self) -> &'static str {
        match self {
            Self::Read { .. } => "OperatorGroupReadFailed",
            Self::Write { .. } => "OperatorGroupWriteFailed",
        }
    }

    fn is_conflict(&self) -> bool {
        match self {
            Self::Read { source, .. } | Self::Write { source, .. } => source.is_conflict(),
        }
    }
}

impl Reconciler for Context {
    type Object = OperatorGroup;
    type Error = ReconcileError;
    const NAME: &'static str = "operatorgroup";

    async fn reconcile(self: Arc<Self>, group: Arc<OperatorGroup>) -> Result<Action, ReconcileError> {
        reconcile(&self, &group).await
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn retry(&self) -> Duration {
        self.retry
    }
}

/// One pass: observe, decide (`decide`, pure), then the write steps. A pass that stopped early (a missing account,
/// targets that cannot be computed) is retried; one that changed the targets comes back at once, so that members are
/// annotated from the status written.
async fn reconcile(ctx: &Context, group: &OperatorGroup) -> Result<Action, ReconcileError> {
    if group.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let place = Place::of(group);
    let read = steps::observe(ctx, group, &place).await?;
    let decision = decide(&Observed {
        group,
        groups_in_namespace: read.groups_in_namespace,
        account: read.account(),
        namespaces: &read.namespaces,
        csvs: &read.csvs,
        now: Time(k8s_openapi::jiff::Timestamp::now()),
    });
    steps::write_status(ctx, &decision, &place).await?;
    steps::label_account(ctx, &read, &place).await?;
    if let Some(reason) = &decision.stopped {
        tracing::warn!(operatorgroup = %place.name, namespace = %place.namespace, %reason, "operator group not synced");
        return Ok(Action::requeue(ctx.retry));
    }
    if decision.targets_changed(group) {
        return Ok(Action::requeue(Duration::from_millis(100)));
    }
    steps::annotate_members(ctx, &decision, &place).await?;
    steps::ensure_roles(ctx, &decision, &place).await?;
    steps::prune_provided_apis(ctx, group, &decision, &place).await?;
    Ok(Action::requeue(ctx.resync))
}

/// Starts the OperatorGroup loop.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let client = process.client.clone();
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), FIELD_MANAGER),
        metrics: process.metrics.clone(),
        retry: process.options.retry,
        resync: process.options.resync,
        rbac: process.rbac.clone(),
    });
    let controller = watches::controller(Api::<OperatorGroup>::all(client.clone()), watcher::Config::default());
    let groups = controller.store();
    let siblings = groups.clone();
    let selecting = groups.clone();
    let controller = controller
        .watches(Api::<OperatorGroup>::all(client.clone()), watcher::Config::default(), move |changed| {
            // A group joining or leaving a namespace changes its mates' MultipleOperatorGroup condition.
            let namespace = changed.namespace();
            siblings
                .state()
                .iter()
                .filter(|group| group.namespace() == namespace)
                .map(|group| ObjectRef::from_obj(group.as_ref()))
                .collect::<Vec<_>>()
        })
        // Which namespaces exist is all a selector needs: their metadata is watched, not whole objects.
        .watches_stream(
            watches::metadata::<Namespace>(client.clone(), watcher::Config::default()).touched_objects(),
            move |_| {
                selecting
                    .state()
                    .iter()
                    .filter(|group| group.spec.target_namespaces.is_empty() && !group.spec.is_global())
                    .map(|group| ObjectRef::from_obj(group.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .watches(Api::<ClusterServiceVersion>::all(client), csv_watch(), move |csv| {
            let namespace = csv.namespace();
            groups
                .state()
                .iter()
                .filter(|group| group.namespace() == namespace)
                .map(|group| ObjectRef::from_obj(group.as_ref()))
                .collect::<Vec<_>>()
        });
    runner::run(controller, context, process.shutdown()).boxed()
}

/// The CSVs that concern groups: originals only (copies carry `olm.copiedFrom`), so that thousands of copies are
/// neither held nor watched here.
pub fn csv_watch() -> watcher::Config {
    watcher::Config::default().labels(&format!("!{}", super::membership::COPIED_FROM_LABEL))
}
