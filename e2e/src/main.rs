//! `olmv2-control-plane`: starts the test control plane on loopback, installs the project's CRDs, writes a
//! kubeconfig, says how to use it, and runs the olmv2 controller against it until interrupted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use olmv2_e2e::apiserver::api::{Target, WriteOptions};
use olmv2_e2e::apiserver::{ControlPlane, Options};

#[derive(Debug, Parser)]
#[command(version, about = "A Kubernetes API emulator on loopback, with the olmv2 CRDs and controller")]
struct Cli {
    /// Where the API server listens.
    #[arg(long, default_value = "127.0.0.1:6443")]
    address: SocketAddr,
    /// Where the kubeconfig for it is written.
    #[arg(long, default_value = "olmv2.kubeconfig")]
    kubeconfig: PathBuf,
    /// Start only the control plane, without the olmv2 controller.
    #[arg(long)]
    no_controller: bool,
    /// The controller's health and metrics address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    health_address: SocketAddr,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    olmv2::telemetry::init(olmv2::telemetry::LogFormat::Text);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: failed to start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(start(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn start(cli: Cli) -> Result<(), String> {
    let options = Options { address: cli.address, ..Options::default() };
    let plane = ControlPlane::start(options).await.map_err(|e| e.to_string())?;
    let installed = install_crds(&plane).await?;
    plane.write_kubeconfig(&cli.kubeconfig).map_err(|e| e.to_string())?;
    let kubeconfig = std::fs::canonicalize(&cli.kubeconfig).unwrap_or(cli.kubeconfig.clone());
    let message = format!(
        "control plane serving at {}\ninstalled {installed} CustomResourceDefinitions\nkubeconfig written to {path}\n\nPoint kubectl at it:\n  export KUBECONFIG={path}\n  kubectl get crds\n  kubectl api-resources --categories olm\n\n",
        plane.url,
        path = kubeconfig.display()
    );
    olmv2::output::write(&message).map_err(|e| e.to_string())?;
    if cli.no_controller {
        tokio::signal::ctrl_c().await.map_err(|e| e.to_string())?;
        return Ok(());
    }
    let config = kube::config::Kubeconfig::from_yaml(&plane.kubeconfig()).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    let run = olmv2::run::RunOptions { health_address: cli.health_address };
    olmv2::run::run_with_config(config, run).await.map_err(|e| olmv2::error::report(&e))
}

/// Creates the project's CRDs and waits until each is Established.
async fn install_crds(plane: &ControlPlane) -> Result<usize, String> {
    let api = &plane.api;
    let crd_type = api
        .resources()
        .lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .cloned()
        .ok_or("the control plane serves no CRDs")?;
    let target = Target { resource: crd_type, namespace: String::new(), name: None, subresource: None };
    let options = WriteOptions::internal("olmv2-control-plane");
    let crds = olmv2::crdgen::all_crds();
    for crd in &crds {
        let body = serde_json::to_value(crd).map_err(|e| e.to_string())?;
        let written = api.create(&target, body, &options).await.map_err(|e| e.message.clone())?;
        let established = written.object["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Established" && c["status"] == "True");
        if !established {
            return Err(format!("{} was not established", written.object["metadata"]["name"]));
        }
    }
    Ok(crds.len())
}
