//! The Install controller: content applied as a controller-assigned ServiceAccount once a person holding the
//! permissions it lacks approved them. `account`, `content`, `gate`, `grants`, `conditions` and `drift` decide; `resolve`,
//! `apply` and `cluster` read and write; `reconcile` sequences one pass; `run` drives it for every Install.

pub mod account;
pub mod apply;
pub mod cluster;
pub mod conditions;
pub mod content;
pub mod drift;
pub mod gate;
pub mod grants;
pub mod reconcile;
pub mod resolve;

use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::ResourceExt;

use crate::api::v2alpha1::Install;
use crate::error::Categorized;
use crate::metrics::{ControllerLabels, FailureLabels};
use reconcile::{Context, ReconcileError};

const CONTROLLER: &str = "install";

/// Reconciles every Install until `shutdown` completes. Deployments an Install applied wake it when they change,
/// so rollouts and drift show without waiting for the resync.
pub async fn run(ctx: Arc<Context>, shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static) {
    let client = ctx.cluster.client.kube().clone();
    Controller::new(Api::<Install>::all(client.clone()), watcher::Config::default())
        .watches(Api::<Deployment>::all(client), watcher::Config::default(), |deployment| {
            deployment.annotations().get(grants::INSTALL_ANNOTATION).map(|name| ObjectRef::<Install>::new(name))
        })
        .graceful_shutdown_on(shutdown)
        .run(measured, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "install controller event");
            }
        })
        .await;
}

async fn measured(install: Arc<Install>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let labels = ControllerLabels { controller: CONTROLLER };
    ctx.metrics.metrics.reconciles.get_or_create(&labels).inc();
    let started = Instant::now();
    let result = reconcile::reconcile(install, ctx.clone()).await;
    ctx.metrics.metrics.reconcile_duration.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
    result
}

fn error_policy(install: Arc<Install>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let category = error.category();
    ctx.metrics.metrics.reconcile_failures.get_or_create(&FailureLabels { controller: CONTROLLER, category }).inc();
    if error.is_conflict() {
        tracing::info!(install = %install.name_any(), category, "{error}");
        return Action::requeue(std::time::Duration::from_millis(200));
    }
    tracing::warn!(install = %install.name_any(), category, "{}", crate::error::report(error));
    Action::requeue(ctx.options.retry)
}
