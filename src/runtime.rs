//! What every controller of one process is built from: the options of the controllers ([`ControllerOptions`]) and
//! the [`Process`] (clients, metrics, the catalogs and the cluster's RBAC, loaded once and shared). Above the
//! controller pattern (`controller`) and the services whose options it holds (`webhook`, `installed`, `bundle`,
//! `catalog`), below the controllers built from it; `process` starts them.

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt, Shared};
use tokio::sync::oneshot;

use crate::bundle::image::{ImageClient, RegistryOptions};
use crate::catalog::CatalogCache;
use crate::controller::leader;
use crate::controller::rbac_cache::{RbacCache, RbacWriters};
use crate::controller::runner::Basics;
use crate::metrics::Metrics;
use crate::webhook::WebhookOptions;

/// What the controllers need to know.
#[derive(Clone, Debug)]
pub struct ControllerOptions {
    /// The controller's namespace, where eponymous ServiceAccounts are created.
    pub namespace: String,
    pub webhook: WebhookOptions,
    /// The aggregated API server of Installed objects.
    pub api: crate::installed::ApiOptions,
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
    /// The namespace whose CatalogSources serve Subscriptions of every namespace.
    pub global_catalog_namespace: String,
    /// How long an InstallPlan whose Installs fail keeps retrying before it fails (OLM's
    /// `--install-plan-retry-timeout`).
    pub install_plan_retry_timeout: Duration,
    /// Namespaces keeping the copies of CSVs of groups targeting every namespace when the `OLMConfig` `cluster`
    /// disables copied CSVs (OLM v0's `--protectedCopiedCSVNamespaces`).
    pub protected_copied_csv_namespaces: Vec<String>,
    /// Whether the v2alpha1 controllers run (seed 004's `--enable-v2alpha1`): the Operator controller and the
    /// adoption of Subscriptions.
    pub enable_v2alpha1: bool,
    /// Whether every namespace's Subscriptions are adopted into Operators, not only those of annotated namespaces.
    pub adopt_subscriptions: bool,
    /// Whether (and how) replicas elect the one that reconciles.
    pub leader: leader::LeaderOptions,
    /// How long the generated certificates of the webhook and the Installed API live (renewed when a third is left).
    pub certificates: crate::tls::rotation::Lifetimes,
}

/// What every controller of the process is built from.
pub struct Process {
    /// The cluster's configuration, for clients of other identities (impersonation).
    pub config: kube::Config,
    /// A client with the controller's own identity.
    pub client: kube::Client,
    pub options: ControllerOptions,
    pub metrics: Arc<Metrics>,
    /// The catalogs CatalogSources serve, loaded once for every controller that reads them.
    pub catalogs: Arc<CatalogCache>,
    /// The cluster's RBAC objects, watched once for every controller that reads them (filled by
    /// [`rbac_controller`], one of the process's controllers).
    pub rbac: Arc<RbacCache>,
    rbac_writers: Arc<Mutex<Option<RbacWriters>>>,
    stopped: Shared<oneshot::Receiver<()>>,
}

impl Process {
    /// A process whose controllers stop when `stopped` completes (its sender is sent to or dropped).
    pub fn new(
        config: kube::Config,
        client: kube::Client,
        options: ControllerOptions,
        metrics: Arc<Metrics>,
        stopped: oneshot::Receiver<()>,
    ) -> Self {
        let images = Arc::new(ImageClient::new(options.registry.clone()));
        let catalogs =
            Arc::new(CatalogCache::new(images, client.clone(), options.cache.join("catalogs"), options.catalog_poll));
        let (rbac, writers) = RbacCache::new();
        Self {
            config,
            client,
            options,
            metrics,
            catalogs,
            rbac,
            rbac_writers: Arc::new(Mutex::new(Some(writers))),
            stopped: stopped.shared(),
        }
    }

    /// What every loop's context holds for the runner and its passes, the same for all: the process's metrics and
    /// the loops' pace.
    pub fn basics(&self) -> Basics {
        Basics { metrics: self.metrics.clone(), retry: self.options.retry, resync: self.options.resync }
    }

    /// The writers of [`Process::rbac`], to the first who asks.
    pub fn take_rbac_writers(&self) -> Option<RbacWriters> {
        self.rbac_writers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    /// The same process for one term of leadership: its controllers stop when `stopped` completes; the catalogs
    /// loaded stay shared (the Installed API answers from them on every replica).
    pub fn term(&self, stopped: oneshot::Receiver<()>) -> Self {
        // A term watches the RBAC objects anew: the last term's stores stopped being filled when it ended.
        let (rbac, writers) = RbacCache::new();
        Self {
            config: self.config.clone(),
            client: self.client.clone(),
            options: self.options.clone(),
            metrics: self.metrics.clone(),
            catalogs: self.catalogs.clone(),
            rbac,
            rbac_writers: Arc::new(Mutex::new(Some(writers))),
            stopped: stopped.shared(),
        }
    }

    /// Completes when the process stops its controllers.
    /// A controller that does not run without `flag`: it says so once and waits for the process to stop.
    pub fn disabled(
        &self,
        controller: &'static str,
        flag: &'static str,
    ) -> futures_util::future::BoxFuture<'static, ()> {
        tracing::info!(controller, "not started: it runs with {flag}");
        let stopped = self.shutdown();
        Box::pin(stopped)
    }

    pub fn shutdown(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let stopped = self.stopped.clone();
        async move {
            let _ = stopped.await;
        }
    }
}

/// The loop that fills the process's [`RbacCache`] (one of `process::CONTROLLERS`), until the process stops. A
/// second call for the same process finds the writers taken and only waits for the stop.
pub fn rbac_controller(process: &Process) -> BoxFuture<'static, ()> {
    let stopped = process.shutdown();
    let watching = match process.take_rbac_writers() {
        Some(writers) => process.rbac.watch(process.client.clone(), writers),
        None => futures_util::future::pending().boxed(),
    };
    async move {
        tokio::select! {
            () = stopped => {}
            () = watching => {}
        }
    }
    .boxed()
}
