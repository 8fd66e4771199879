//! Starting the controllers of one process: the approval webhook first (so no Install write goes unchecked), then
//! the Install controller. Tests start them in-process with [`start`]; the `run` command adds health and signals.

pub mod client;
pub mod conditions;
pub mod events;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::bundle::image::{ImageClient, RegistryOptions};
use crate::bundle::unpack::UnpackLimits;
use crate::catalog::CatalogCache;
use crate::install::cluster::Cluster;
use crate::install::reconcile::{Context, InstallOptions};
use crate::install::resolve::Resolver;
use crate::operator::reconcile::OperatorOptions;
use crate::server::Health;
use crate::webhook::configuration::WebhookService;
use crate::webhook::server::RunningWebhook;
use crate::webhook::{WebhookError, WebhookOptions};

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

/// Running controllers; they stop when dropped or with [`Controllers::stop`].
pub struct Controllers {
    pub webhook: RunningWebhook,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    install: tokio::task::JoinHandle<()>,
    operator: tokio::task::JoinHandle<()>,
}

impl Controllers {
    /// Stops reconciling (letting running reconciles finish) and the webhook.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let install = std::mem::replace(&mut self.install, tokio::spawn(async {}));
        let operator = std::mem::replace(&mut self.operator, tokio::spawn(async {}));
        let _ = install.await;
        let _ = operator.await;
    }
}

impl Drop for Controllers {
    fn drop(&mut self) {
        self.install.abort();
        self.operator.abort();
    }
}

/// Starts the webhook and the Install controller against the cluster `config` describes.
pub async fn start(
    config: kube::Config,
    options: ControllerOptions,
    health: Arc<Health>,
) -> Result<Controllers, WebhookError> {
    let client = kube::Client::try_from(config.clone()).map_err(WebhookError::Identify)?;
    let webhook = crate::webhook::server::start(client.clone(), &options.webhook, &options.namespace).await?;
    let images = Arc::new(ImageClient::new(options.registry.clone()));
    let operator_context = Arc::new(crate::operator::reconcile::Context {
        client: crate::controller::client::ControllerClient::new(
            client.clone(),
            crate::operator::reconcile::FIELD_MANAGER,
        ),
        events: crate::controller::events::Events::new(client.clone(), "olmv2-operator-controller"),
        index: Arc::default(),
        catalogs: CatalogCache::new(images, options.cache.join("catalogs"), options.catalog_poll),
        options: OperatorOptions {
            install_namespace: options.operator_namespace.clone(),
            resync: options.resync,
            retry: options.retry,
        },
        metrics: health.clone(),
    });
    let context = Arc::new(Context {
        cluster: Cluster::new(client, config),
        resolver: Resolver {
            images: ImageClient::new(options.registry.clone()),
            cache: options.cache.clone(),
            limits: UnpackLimits::default(),
        },
        options: InstallOptions {
            controller_namespace: options.namespace.clone(),
            resync: options.resync,
            retry: options.retry,
            webhook: WebhookService {
                namespace: options.webhook.service_namespace.clone().unwrap_or_else(|| options.namespace.clone()),
                name: options.webhook.service_name.clone(),
                port: options.webhook.service_port,
            },
        },
        metrics: health,
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let stopped = futures_util::FutureExt::shared(stopped);
    let install_stopped = stopped.clone();
    let install = tokio::spawn(crate::install::run(context, async move {
        let _ = install_stopped.await;
    }));
    let operator = tokio::spawn(crate::operator::run(operator_context, async move {
        let _ = stopped.await;
    }));
    tracing::info!(namespace = %options.namespace, "install and operator controllers started");
    Ok(Controllers { webhook, stop: Some(stop), install, operator })
}
