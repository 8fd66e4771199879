//! The controllers of one process: the list every controller is started from, and their start and stop. It stands
//! above the controllers it lists (`install`, `operator`, and the loops to come) and the pattern they follow
//! (`controller`). Adding a controller is its module plus one entry in [`CONTROLLERS`].
//!
//! [`start`] starts the approval webhook first (so no Install write goes unchecked), then the aggregated API server
//! of Installed objects (when the cluster's aggregation layer is configured), then every controller of
//! [`CONTROLLERS`]. Tests start them in-process; the `run` command adds health and signals.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::controller::{ControllerOptions, Process};
use crate::server::Health;
use crate::webhook::server::RunningWebhook;
use crate::webhook::WebhookError;

/// Every controller of the process. A controller is a module whose `controller` function builds its context (a
/// `controller::runner::Reconciler`) and the kube-runtime `Controller` that wakes it, and returns
/// `controller::runner::run` of both.
pub const CONTROLLERS: &[fn(&Process) -> BoxFuture<'static, ()>] = &[
    crate::install::controller,
    crate::operator::controller,
    crate::legacy::operatorgroup::controller,
    crate::legacy::namespaces::controller,
    crate::legacy::csv::controller,
    crate::legacy::copied::controller,
    crate::legacy::olmconfig::controller,
    crate::legacy::catalogsource::controller,
    crate::legacy::subscription::controller,
    crate::legacy::installplan::controller,
    crate::migration::controller,
    crate::migration::reverting::controller,
];

/// Running controllers; dropping them aborts them where they are, as a killed process would, and
/// [`Controllers::stop`] stops them cleanly.
pub struct Controllers {
    pub webhook: RunningWebhook,
    /// The Installed API, unless disabled or the cluster has no aggregation layer to serve it through.
    pub api: Option<crate::installed::RunningApi>,
    stop: Option<oneshot::Sender<()>>,
    running: JoinSet<()>,
}

impl Controllers {
    /// Stops reconciling (letting running reconciles finish) and the webhook.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        while self.running.join_next().await.is_some() {}
    }
}

/// Starts the webhook and every controller against the cluster `config` describes.
pub async fn start(
    config: kube::Config,
    options: ControllerOptions,
    health: Arc<Health>,
) -> Result<Controllers, WebhookError> {
    let client = kube::Client::try_from(config.clone()).map_err(WebhookError::Identify)?;
    let webhook = crate::webhook::server::start(client.clone(), &options.webhook, &options.namespace).await?;
    let (stop, stopped) = oneshot::channel::<()>();
    let process = Process::new(config, client, options, health.metrics.clone(), stopped);
    let api = if process.options.api.disabled {
        None
    } else {
        let options = &process.options;
        let started = crate::installed::server::start(
            process.client.clone(),
            &options.api,
            &options.namespace,
            process.catalogs.clone(),
            &options.global_catalog_namespace,
        )
        .await;
        match started {
            Ok(api) => Some(api),
            Err(error) => {
                // The controllers do not depend on it: they run, and the API is missing until the next start.
                use crate::category::Categorized as _;
                tracing::error!(
                    category = error.category(),
                    "{}; the Installed API is not served",
                    crate::error::report(&error)
                );
                None
            }
        }
    };
    let mut running = JoinSet::new();
    for controller in CONTROLLERS {
        running.spawn(controller(&process));
    }
    tracing::info!(namespace = %process.options.namespace, count = CONTROLLERS.len(), "controllers started");
    Ok(Controllers { webhook, api, stop: Some(stop), running })
}
