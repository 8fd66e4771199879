//! The `run` command: connect to the cluster, serve health and metrics, start the controllers (retrying until the
//! cluster serves what they need; `/readyz` says when they run), stop on SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tracing::info;

use super::registry::{cache_dir, registry_options, RegistryArgs};
use crate::category::Categorized;
use crate::error::Error;
use crate::process::{self, Controllers};
use crate::runtime::ControllerOptions;
use crate::server::{router, Health};
use crate::webhook::WebhookOptions;

/// Options of the `run` command.
#[derive(Clone, Debug, clap::Args)]
pub struct RunOptions {
    /// Address of the health (`/healthz`, `/readyz`) and metrics (`/metrics`) endpoint.
    #[arg(long, env = "OLMV2_HEALTH_ADDRESS", default_value = "0.0.0.0:8080")]
    pub health_address: SocketAddr,
    /// The controller's namespace: eponymous ServiceAccounts of Installs are created here.
    #[arg(long, env = "OLMV2_NAMESPACE", default_value = "olmv2-system")]
    pub namespace: String,
    /// Seconds between checks of a settled Install (drift, moved image tags, changed RBAC).
    #[arg(long, env = "OLMV2_RESYNC_SECONDS", default_value_t = 300)]
    pub resync_seconds: u64,
    /// Seconds before a failed or rolling-out Install is tried again.
    #[arg(long, env = "OLMV2_RETRY_SECONDS", default_value_t = 10)]
    pub retry_seconds: u64,
    /// Namespace where an Operator's bundle content without a namespace is installed. It must exist.
    #[arg(long, env = "OLMV2_OPERATOR_NAMESPACE", default_value = "operators")]
    pub operator_namespace: String,
    /// Seconds between lookups of a catalog image tag, for CatalogSources without a registryPoll interval.
    #[arg(long, env = "OLMV2_CATALOG_POLL_SECONDS", default_value_t = 600)]
    pub catalog_poll_seconds: u64,
    /// A comma-delimited set of namespaces where global Copied CSVs will always appear, even if Copied CSVs are
    /// disabled (OLM v0's flag, spelled as OLM spells it).
    #[arg(long = "protectedCopiedCSVNamespaces", env = "OLMV2_PROTECTED_COPIED_CSV_NAMESPACES", default_value = "")]
    pub protected_copied_csv_namespaces: String,
    /// The global catalog namespace: its CatalogSources serve Subscriptions of every namespace (OLM v0's catalog
    /// operator `--namespace`, `GLOBAL_CATALOG_NAMESPACE`).
    #[arg(long, env = "OLMV2_GLOBAL_CATALOG_NAMESPACE", default_value = "olm")]
    pub global_catalog_namespace: String,
    /// Time since an InstallPlan started installing at which errors of its Installs fail it (OLM v0's catalog
    /// operator flag, a Go duration).
    #[arg(long, env = "OLMV2_INSTALL_PLAN_RETRY_TIMEOUT", default_value = "1m0s", value_parser = go_duration)]
    pub install_plan_retry_timeout: Duration,
    /// Runs the v2alpha1 controllers (Operators, and the adoption of Subscriptions into Operators) beside OLM v0's
    /// loops: seed 004's `--enable-v2alpha1`. Without it the process runs OLM v0's loops, and the Installs their
    /// InstallPlans install through, only.
    #[arg(long, env = "OLMV2_ENABLE_V2ALPHA1")]
    pub enable_v2alpha1: bool,
    /// Adopts the Subscriptions of every namespace into Operators (with `--enable-v2alpha1`); without it, only those
    /// of namespaces annotated `operators.coreos.com/adopt-subscriptions: "true"` (what `olmv2 migrate apply` does).
    #[arg(long, env = "OLMV2_ADOPT_SUBSCRIPTIONS")]
    pub adopt_subscriptions: bool,
    /// How long the CA generated for the webhook's and the Installed API's serving certificates lives (a Go
    /// duration); a new one is added to their clients' trust once a third is left.
    #[arg(long, env = "OLMV2_CA_VALIDITY", default_value = "17520h0m0s", value_parser = go_duration)]
    pub ca_validity: Duration,
    /// How long a generated serving certificate lives (a Go duration); renewed once a third is left.
    #[arg(long, env = "OLMV2_SERVING_CERTIFICATE_VALIDITY", default_value = "2160h0m0s", value_parser = go_duration)]
    pub serving_certificate_validity: Duration,
    #[command(flatten)]
    pub webhook: WebhookOptions,
    #[command(flatten)]
    pub api: crate::installed::ApiOptions,
    #[command(flatten)]
    pub registry: RegistryArgs,
    #[command(flatten)]
    pub leader: crate::controller::leader::LeaderOptions,
}

impl RunOptions {
    /// The controllers' options, with registry credentials read from the docker config.
    pub fn controller_options(&self) -> Result<ControllerOptions, Error> {
        let (serving, ca) = (self.serving_certificate_validity, self.ca_validity);
        if serving < Duration::from_secs(3) || serving * 3 > ca {
            return Err(Error::CertificateLifetimes { serving, ca });
        }
        Ok(ControllerOptions {
            namespace: self.namespace.clone(),
            webhook: self.webhook.clone(),
            api: self.api.clone(),
            registry: registry_options(&self.registry)?,
            cache: cache_dir(&self.registry),
            resync: Duration::from_secs(self.resync_seconds.max(1)),
            retry: Duration::from_secs(self.retry_seconds.max(1)),
            operator_namespace: self.operator_namespace.clone(),
            catalog_poll: Duration::from_secs(self.catalog_poll_seconds.max(1)),
            global_catalog_namespace: self.global_catalog_namespace.clone(),
            install_plan_retry_timeout: self.install_plan_retry_timeout,
            enable_v2alpha1: self.enable_v2alpha1,
            adopt_subscriptions: self.adopt_subscriptions,
            leader: self.leader.clone(),
            certificates: crate::tls::rotation::Lifetimes {
                ca: self.ca_validity,
                serving: self.serving_certificate_validity,
            },
            protected_copied_csv_namespaces: self
                .protected_copied_csv_namespaces
                .split(',')
                .filter(|namespace| !namespace.is_empty())
                .map(str::to_owned)
                .collect(),
        })
    }
}

/// A Go duration (`1m0s`, `90s`), as OLM's flags take them; a negative one is refused.
fn go_duration(text: &str) -> Result<Duration, String> {
    let nanos = crate::catalog::poll::parse_go_duration(text)?;
    u64::try_from(nanos).map(Duration::from_nanos).map_err(|_| format!("duration {text:?} is negative or too long"))
}

/// Runs until SIGTERM or SIGINT, then shuts down cleanly.
pub async fn run(options: RunOptions) -> Result<(), Error> {
    let config = kube::Config::infer().await.map_err(Error::LoadClusterConfig)?;
    run_with_config(config, options).await
}

/// How long to wait before starting the controllers again after a failed start.
const START_RETRY: Duration = Duration::from_secs(5);

/// Runs against the cluster `config` describes, until SIGTERM or SIGINT.
pub async fn run_with_config(config: kube::Config, options: RunOptions) -> Result<(), Error> {
    let mut terminate = signal(SignalKind::terminate()).map_err(Error::InstallSignalHandler)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(Error::InstallSignalHandler)?;
    let controller_options = options.controller_options()?;

    info!(cluster = %config.cluster_url, "connecting to the Kubernetes API server");
    let client = kube::Client::try_from(config.clone()).map_err(Error::BuildClient)?;
    let version = client.apiserver_version().await.map_err(Error::ConnectCluster)?;
    info!(server_version = %version.git_version, "connected");

    let health = Arc::new(Health::default());
    let listener = TcpListener::bind(options.health_address)
        .await
        .map_err(|source| Error::BindHealthEndpoint { address: options.health_address, source })?;
    let bound = listener.local_addr().map_err(Error::ServeHealthEndpoint)?;
    info!(address = %bound, "serving /healthz, /readyz and /metrics");

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let app = router(health.clone());
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stop_rx.await;
            })
            .await
    });
    let starting = tokio::spawn(start_until_running(config, controller_options, health.clone()));

    let signal_name = tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    };
    info!(signal = signal_name, "shutting down");
    health.set_ready(false);
    if starting.is_finished() {
        if let Ok(controllers) = starting.await {
            controllers.stop().await;
        }
    } else {
        starting.abort();
    }
    let _ = stop_tx.send(());
    match server.await {
        Ok(result) => result.map_err(Error::ServeHealthEndpoint)?,
        Err(join_error) => tracing::error!(%join_error, "health endpoint task ended abnormally"),
    }
    info!("stopped");
    Ok(())
}

/// Starts the controllers, retrying while the cluster does not serve what they need yet; ready once they run.
async fn start_until_running(config: kube::Config, options: ControllerOptions, health: Arc<Health>) -> Controllers {
    loop {
        match process::start(config.clone(), options.clone(), health.clone()).await {
            Ok(controllers) => {
                health.set_ready(true);
                return controllers;
            }
            Err(error) => {
                tracing::error!(category = error.category(), "{}; retrying", crate::category::report(&error));
                tokio::time::sleep(START_RETRY).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunOptions,
    }

    #[test]
    fn every_flag_is_an_argument_of_its_own() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "olmv2-run",
            "--webhook-address",
            "127.0.0.1:1",
            "--api-address",
            "127.0.0.1:2",
            "--webhook-service-name",
            "hook",
            "--api-service-name",
            "packages",
        ])
        .expect("parsed");
        assert_eq!((cli.run.webhook.address.port(), cli.run.api.address.port()), (1, 2));
        assert_eq!((cli.run.webhook.service_name.as_str(), cli.run.api.service_name.as_str()), ("hook", "packages"));
    }

    #[test]
    fn certificates_live_two_years_and_ninety_days_unless_told_otherwise() {
        let defaults = Cli::try_parse_from(["olmv2-run"]).expect("parsed");
        let lifetimes = defaults.run.controller_options().expect("options").certificates;
        assert_eq!(lifetimes, crate::tls::rotation::Lifetimes::default());
        let short = Cli::try_parse_from(["olmv2-run", "--ca-validity", "1h", "--serving-certificate-validity", "10m"])
            .expect("parsed");
        assert_eq!(short.run.ca_validity, Duration::from_secs(3600));
        assert_eq!(short.run.serving_certificate_validity, Duration::from_secs(600));
        assert!(short.run.controller_options().is_ok());
        for (ca, serving) in [("1h", "30m"), ("1h", "0s"), ("1h", "2s")] {
            let refused =
                Cli::try_parse_from(["olmv2-run", "--ca-validity", ca, "--serving-certificate-validity", serving])
                    .expect("parsed");
            assert!(matches!(refused.run.controller_options(), Err(Error::CertificateLifetimes { .. })), "{serving}");
        }
    }
}
