//! `olmv2-control-plane`: starts the test control plane on loopback (the Kubernetes API emulator, or with
//! `--kubernetes real` etcd, kube-apiserver and kube-controller-manager), installs the project's CRDs, writes a
//! kubeconfig, says how to use it, and runs the olmv2 controller against it until interrupted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use kube_emulator::{ControlPlane, Options};
use olmv2_e2e::kubernetes::RealControlPlane;
use olmv2_e2e::walkthrough::Rollouts;
use olmv2_e2e::{project, real, walkthrough};

/// Which Kubernetes the controller runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Kubernetes {
    /// The Kubernetes API emulator (kube-emulator), in this process.
    Emulator,
    /// etcd, kube-apiserver and kube-controller-manager (`scripts/install-kubernetes` builds them when missing), on
    /// free loopback ports, with a stand-in kubelet marking the walkthrough's pods Ready.
    Real,
}

#[derive(Debug, Parser)]
#[command(version, about = "A Kubernetes control plane on loopback, with the olmv2 CRDs and controller")]
struct Cli {
    /// The control plane: the emulator, or real Kubernetes binaries.
    #[arg(long, value_enum, default_value = "emulator")]
    kubernetes: Kubernetes,
    /// Where the emulator's API server listens (real Kubernetes takes a free port).
    #[arg(long, default_value = "127.0.0.1:6443")]
    address: SocketAddr,
    /// Where the controller's (and control plane's) log lines go, kept apart from the walkthrough's steps.
    #[arg(long, default_value = "olmv2-controller.log")]
    log_file: PathBuf,
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
    match std::fs::File::create(&cli.log_file) {
        Ok(file) => olmv2::telemetry::init_to_file(olmv2::telemetry::LogFormat::Text, file),
        Err(error) => {
            eprintln!("error: cannot write the log file {}: {error}", cli.log_file.display());
            return ExitCode::FAILURE;
        }
    }
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

/// The control plane the controller runs against, kept until the end.
enum Plane {
    Emulator(Box<ControlPlane>),
    Real(Box<RealControlPlane>),
}

async fn start(cli: Cli) -> Result<(), String> {
    let (plane, url, installed) = match cli.kubernetes {
        Kubernetes::Emulator => {
            let options = Options { address: cli.address, ..Options::default() };
            let plane = ControlPlane::start(options).await.map_err(|e| e.to_string())?;
            let installed = project::install_crds(&plane).await.map_err(|e| e.to_string())?;
            plane.write_kubeconfig(&cli.kubeconfig).map_err(|e| e.to_string())?;
            let url = plane.url.clone();
            (Plane::Emulator(Box::new(plane)), url, installed)
        }
        Kubernetes::Real => {
            let plane = RealControlPlane::start("control-plane").await.map_err(|e| e.to_string())?;
            let admin = plane.client().await.map_err(|e| e.to_string())?;
            let installed = real::install_crds(&admin).await.map_err(|e| e.to_string())?;
            std::fs::copy(plane.admin_kubeconfig(), &cli.kubeconfig)
                .map_err(|e| format!("cannot write {}: {e}", cli.kubeconfig.display()))?;
            let url = format!(
                "{} (Kubernetes {}, started in {:.1?}; logs in {})",
                plane.url,
                plane.binaries.kubernetes_version,
                plane.start_time,
                plane.dir().display()
            );
            (Plane::Real(Box::new(plane)), url, installed)
        }
    };
    let kubeconfig = std::fs::canonicalize(&cli.kubeconfig).unwrap_or(cli.kubeconfig.clone());
    let message = format!(
        "control plane serving at {url}\ninstalled {installed} CustomResourceDefinitions\nkubeconfig written to {path}\n\nPoint kubectl at it:\n  export KUBECONFIG={path}\n  kubectl get crds\n  kubectl api-resources --categories olm\n\n",
        path = kubeconfig.display()
    );
    olmv2::output::write(&message).map_err(|e| e.to_string())?;
    if cli.no_controller {
        tokio::signal::ctrl_c().await.map_err(|e| e.to_string())?;
        return Ok(());
    }
    let mut args: Vec<String> = [
        "olmv2-run",
        "--namespace",
        project::CONTROLLER_NAMESPACE,
        "--resync-seconds",
        "30",
        "--retry-seconds",
        "2",
        // As deploy/ runs it: the Operator controller and adoption beside OLM v0's loops.
        "--enable-v2alpha1",
    ]
    .map(str::to_owned)
    .to_vec();
    // The controller runs as deploy/'s ServiceAccount with deploy/'s RBAC, as it would in a cluster.
    let (config, admin, rollouts, kubelet) = match &plane {
        Plane::Emulator(plane) => {
            let config = project::controller_config(plane).await.map_err(|e| e.to_string())?;
            plane.api.endpoints.set(project::CONTROLLER_NAMESPACE, "olmv2-webhook", cli.webhook_address);
            plane.api.endpoints.set(project::CONTROLLER_NAMESPACE, project::API_SERVICE, cli.api_address);
            for (flag, address) in [
                ("--health-address", cli.health_address),
                ("--webhook-address", cli.webhook_address),
                ("--api-address", cli.api_address),
            ] {
                args.extend([flag.to_owned(), address.to_string()]);
            }
            let admin = plane.client().await.map_err(|e| e.to_string())?;
            (config, admin, Rollouts::Reported, None)
        }
        Plane::Real(plane) => {
            // Free ports rather than the emulator's defaults: kube-apiserver reaches the webhook and the aggregated
            // API through ExternalName Services naming these ports (see olmv2_e2e::real).
            let ports = real::ServicePorts::free().map_err(|e| e.to_string())?;
            let admin = plane.client().await.map_err(|e| e.to_string())?;
            let config = real::controller_config(plane, &admin, &ports).await.map_err(|e| e.to_string())?;
            for (flag, port) in [
                ("--health-address", format!("127.0.0.1:{}", ports.health)),
                ("--webhook-address", format!("127.0.0.1:{}", ports.webhook)),
                ("--api-address", format!("127.0.0.1:{}", ports.api)),
                ("--webhook-service-port", ports.webhook.to_string()),
                ("--api-service-port", ports.api.to_string()),
            ] {
                args.extend([flag.to_owned(), port]);
            }
            let kubelet = real::spawn_kubelet(admin.clone(), "operators");
            (config, admin, Rollouts::ByTheCluster, Some(kubelet))
        }
    };
    let mut run = RunCommand::parse_from(args).options;
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
    let log = std::fs::canonicalize(&cli.log_file).unwrap_or(cli.log_file.clone());
    let controller = tokio::spawn(olmv2::cmd::run::run_with_config(config, run));
    let _walkthrough = match registry {
        Some(registry) => match walkthrough::run(admin, &bundles, registry, rollouts, Some(&log)).await {
            Ok(registry) => Some(registry),
            Err(error) => {
                olmv2::output::write(&format!("the walkthrough stopped: {error}\n")).map_err(|e| e.to_string())?;
                None
            }
        },
        None => None,
    };
    let result = match controller.await {
        Ok(result) => result.map_err(|e| olmv2::category::report(&e)),
        Err(error) => Err(error.to_string()),
    };
    if let Some(kubelet) = kubelet {
        kubelet.abort();
    }
    drop(plane);
    result
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
