//! The Operator controller: the single entry point users apply. `components`, `index`, `status` and `desired`
//! decide; `watch` keeps the component index from one watch per component kind; `reconcile` reads the source,
//! brings the Operator's Install to what it resolved, and writes the status; `projection` carries component labels
//! onto what OLM v0's loops generate; `run` drives them.

pub mod components;
pub mod desired;
pub mod index;
pub mod projection;
pub mod reconcile;
pub mod status;
pub mod watch;

use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::ResourceExt;

use crate::api::v2alpha1::Operator;
use crate::error::Categorized;
use crate::metrics::{ControllerLabels, FailureLabels};
use reconcile::{Context, ReconcileError};

const CONTROLLER: &str = "operator";

/// Reconciles every Operator until `shutdown` completes. Changes of any component wake the Operators it belongs to.
pub async fn run(ctx: Arc<Context>, shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static) {
    let client = ctx.client.kube().clone();
    let triggers = watch::component_triggers(client.clone(), ctx.index.clone());
    Controller::new(Api::<Operator>::all(client), watcher::Config::default())
        .reconcile_on(triggers)
        .graceful_shutdown_on(shutdown)
        .run(measured, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "operator controller event");
            }
        })
        .await;
}

async fn measured(operator: Arc<Operator>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let labels = ControllerLabels { controller: CONTROLLER };
    ctx.metrics.metrics.reconciles.get_or_create(&labels).inc();
    let started = Instant::now();
    let result = reconcile::reconcile(operator, ctx.clone()).await;
    ctx.metrics.metrics.reconcile_duration.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
    result
}

fn error_policy(operator: Arc<Operator>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let category = error.category();
    ctx.metrics.metrics.reconcile_failures.get_or_create(&FailureLabels { controller: CONTROLLER, category }).inc();
    tracing::warn!(operator = %operator.name_any(), category, "{}", crate::error::report(error));
    Action::requeue(ctx.options.retry)
}
