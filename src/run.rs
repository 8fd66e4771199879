//! The `run` command: connect to the cluster, serve health and metrics, run the controllers, stop on SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tracing::info;

use crate::error::Error;
use crate::server::{router, Health};

/// Options of the `run` command.
#[derive(Clone, Debug, clap::Args)]
pub struct RunOptions {
    /// Address of the health (`/healthz`, `/readyz`) and metrics (`/metrics`) endpoint.
    #[arg(long, env = "OLMV2_HEALTH_ADDRESS", default_value = "0.0.0.0:8080")]
    pub health_address: SocketAddr,
}

/// Runs until SIGTERM or SIGINT, then shuts down cleanly.
pub async fn run(options: RunOptions) -> Result<(), Error> {
    let config = kube::Config::infer().await.map_err(Error::LoadClusterConfig)?;
    run_with_config(config, options).await
}

/// Runs against the cluster `config` describes, until SIGTERM or SIGINT.
pub async fn run_with_config(config: kube::Config, options: RunOptions) -> Result<(), Error> {
    let mut terminate = signal(SignalKind::terminate()).map_err(Error::InstallSignalHandler)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(Error::InstallSignalHandler)?;

    info!(cluster = %config.cluster_url, "connecting to the Kubernetes API server");
    let client = kube::Client::try_from(config).map_err(Error::BuildClient)?;
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
    health.set_ready(true);

    let signal_name = tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    };
    info!(signal = signal_name, "shutting down");
    health.set_ready(false);
    let _ = stop_tx.send(());
    match server.await {
        Ok(result) => result.map_err(Error::ServeHealthEndpoint)?,
        Err(join_error) => tracing::error!(%join_error, "health endpoint task ended abnormally"),
    }
    info!("stopped");
    Ok(())
}
