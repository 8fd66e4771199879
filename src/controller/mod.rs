//! The controller pattern every reconciler follows, and the controllers of one process. `runner` drives a
//! reconciler (metrics, error policy, logs, shutdown); `client` is the reads and writes they all make; `conditions`
//! the Kubernetes condition conventions and the events their transitions make, which `events` publishes.
//!
//! [`start`] starts the approval webhook first (so no Install write goes unchecked), then every controller of
//! [`CONTROLLERS`]. Tests start them in-process; the `run` command adds health and signals.

pub mod client;
pub mod conditions;
pub mod events;
pub mod runner;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt, Shared};
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::bundle::image::RegistryOptions;
use crate::metrics::Metrics;
use crate::server::Health;
use crate::webhook::server::RunningWebhook;
use crate::webhook::{WebhookError, WebhookOptions};

/// Every controller of the process. A controller is a module whose `controller` function builds its context (a
/// [`runner::Reconciler`]) and the kube-runtime `Controller` that wakes it, and returns [`runner::run`] of both.
pub const CONTROLLERS: &[fn(&Process) -> BoxFuture<'static, ()>] =
    &[crate::install::controller, crate::operator::controller];

/// What the controllers need to know.
#[derive(Clone, Debug)]
pub struct ControllerOptions {
    /// The controller's namespace, where eponymous ServiceAccounts are created.
    pub namespace: String,
    pub webhook: WebhookOptions,
    pub registry: RegistryOptions,
    /// Where unpacked bundle images are cached, by digest.
    pub cache: PathBuf,
    /// How often settled Installs are checked again.
    pub resync: Duration,
    /// How soon failed or rolling-out Installs are tried again.
    pub retry: Duration,
    /// Where namespace-less content of an Operator's bundles is installed.
    pub operator_namespace: String,
    /// How often a catalog image tag is looked up again when its CatalogSource sets no registryPoll interval.
    pub catalog_poll: Duration,
}

/// What every controller of the process is built from.
pub struct Process {
    /// The cluster's configuration, for clients of other identities (impersonation).
    pub config: kube::Config,
    /// A client with the controller's own identity.
    pub client: kube::Client,
    pub options: ControllerOptions,
    pub metrics: Arc<Metrics>,
    stopped: Shared<oneshot::Receiver<()>>,
}

impl Process {
    /// Completes when the process stops its controllers.
    pub fn shutdown(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let stopped = self.stopped.clone();
        async move {
            let _ = stopped.await;
        }
    }
}

/// Running controllers; dropping them aborts them where they are, as a killed process would, and
/// [`Controllers::stop`] stops them cleanly.
pub struct Controllers {
    pub webhook: RunningWebhook,
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
    let process = Process { config, client, options, metrics: health.metrics.clone(), stopped: stopped.shared() };
    let mut running = JoinSet::new();
    for controller in CONTROLLERS {
        running.spawn(controller(&process));
    }
    tracing::info!(namespace = %process.options.namespace, count = CONTROLLERS.len(), "controllers started");
    Ok(Controllers { webhook, stop: Some(stop), running })
}
