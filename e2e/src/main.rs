//! `olmv2-control-plane`: starts the test control plane on loopback, installs the project's CRDs, writes a
//! kubeconfig, says how to use it, and runs the olmv2 controller against it until interrupted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use kube_emulator::{ControlPlane, Options};
use olmv2_e2e::{project, walkthrough};

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
    /// Where the controller's approval webhook listens.
    #[arg(long, default_value = "127.0.0.1:9443")]
    webhook_address: SocketAddr,
    /// Where the controller's aggregated API server (Installed objects) listens.
    #[arg(long, default_value = "127.0.0.1:5443")]
    api_address: SocketAddr,
    /// Skip the walkthrough (a local registry, an Install of the sample bundle and its approval, an Operator).
    #[arg(long)]
    no_walkthrough: bool,
}

/// `olmv2 run`'s options, with their defaults and environment variables, as the controller reads them.
#[derive(Debug, Parser)]
struct RunCommand {
    #[command(flatten)]
    options: olmv2::cmd::run::RunOptions,
}

/// How long the runtime's blocking threads get to finish once the command has returned.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

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
    let result = runtime.block_on(start(cli));
    // Dropping the runtime would wait without bound for its blocking threads (an image being inflated, a file
    // being written): a stopped process must exit. What still runs after the grace is abandoned, as in a kill.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    match result {
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
    let installed = project::install_crds(&plane).await.map_err(|e| e.to_string())?;
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
    // The controller runs as deploy/'s ServiceAccount with deploy/'s RBAC, as it would in a cluster.
    let config = project::controller_config(&plane).await.map_err(|e| e.to_string())?;
    plane.api.endpoints.set(project::CONTROLLER_NAMESPACE, "olmv2-webhook", cli.webhook_address);
    plane.api.endpoints.set(project::CONTROLLER_NAMESPACE, project::API_SERVICE, cli.api_address);
    let mut run = RunCommand::parse_from([
        "olmv2-run",
        "--health-address",
        &cli.health_address.to_string(),
        "--webhook-address",
        &cli.webhook_address.to_string(),
        "--api-address",
        &cli.api_address.to_string(),
        "--namespace",
        project::CONTROLLER_NAMESPACE,
        "--resync-seconds",
        "30",
        "--retry-seconds",
        "2",
        // As deploy/ runs it: the Operator controller and adoption beside OLM v0's loops.
        "--enable-v2alpha1",
    ])
    .options;
    let admin = plane.client().await.map_err(|e| e.to_string())?;
    let bundles = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundles");
    let registry = match cli.no_walkthrough {
        true => None,
        false => {
            install_registry()?;
            let registry = olmv2_e2e::registry::Registry::start("walkthrough-host").map_err(|e| {
                format!("the walkthrough's registry did not start: {e} (or start with --no-walkthrough)")
            })?;
            run.registry.insecure_registries.push(registry.host.clone());
            Some(registry)
        }
    };
    let controller = tokio::spawn(olmv2::cmd::run::run_with_config(config, run));
    let _walkthrough = match registry {
        Some(registry) => match walkthrough::run(admin, &bundles, registry).await {
            Ok(registry) => Some(registry),
            Err(error) => {
                olmv2::output::write(&format!("the walkthrough stopped: {error}\n")).map_err(|e| e.to_string())?;
                None
            }
        },
        None => None,
    };
    match controller.await {
        Ok(result) => result.map_err(|e| olmv2::error::report(&e)),
        Err(error) => Err(error.to_string()),
    }
}

/// The walkthrough pushes bundles to a real registry, Debian's `docker-registry`: installed here with
/// `scripts/install-tools` when missing, so the main job needs nothing set up beforehand.
fn install_registry() -> Result<(), String> {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("docker-registry").is_file()));
    if on_path {
        return Ok(());
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-tools");
    olmv2::output::write(&format!(
        "the walkthrough needs Debian's docker-registry: installing it with {}\n",
        script.display()
    ))
    .map_err(|e| e.to_string())?;
    let status = std::process::Command::new("bash")
        .arg(&script)
        .status()
        .map_err(|e| format!("could not run {}: {e}", script.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} could not install docker-registry ({status}): install Debian's docker-registry package, or start with --no-walkthrough",
            script.display()
        ))
    }
}
