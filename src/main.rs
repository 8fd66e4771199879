//! Entry point of the `olmv2` binary: parse the command line, set up logging, dispatch to the subcommand in
//! `olmv2::cmd`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use olmv2::category::report;
use olmv2::category::Categorized;
use olmv2::cmd::{approve, bundle, crds, migrate, run};
use olmv2::error::Error;
use olmv2::telemetry::{self, LogFormat};

/// The operator-lifecycle controller for the operators.coreos.com/v2alpha1 Operator and Install APIs.
#[derive(Debug, Parser)]
#[command(name = "olmv2", version, about)]
struct Cli {
    /// Log format; the level is set with RUST_LOG (default `info`).
    #[arg(long, global = true, env = "OLMV2_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the controllers against the cluster in KUBECONFIG, or the in-cluster configuration.
    Run(Box<run::RunOptions>),
    /// Generate or check the CustomResourceDefinitions.
    #[command(subcommand)]
    Crds(crds::CrdsCommand),
    /// Show the permissions an Install waits for, and approve them with your own credentials.
    Approve(approve::ApproveOptions),
    /// Build, push, pull, inspect and render operator bundles.
    #[command(subcommand)]
    Bundle(bundle::BundleCommand),
    /// Move OLM v0 Subscriptions to Operators: print the plan, or have the controller carry it out.
    #[command(subcommand)]
    Migrate(migrate::MigrateCommand),
}

/// jemalloc rather than glibc's malloc: at the scale bench the controller held 15 MiB less with it (glibc keeps freed
/// memory in per-thread arenas; jemalloc's background threads hand it back). Its options are built in from
/// `.cargo/config.toml`; `docs/operations.md` has the figures.
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// How long the runtime's blocking threads get to finish once the command has returned.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

fn main() -> ExitCode {
    let cli = Cli::parse();
    let log_format = cli.log_format;
    telemetry::init(log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: failed to start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(dispatch(cli.command));
    // Dropping the runtime would wait without bound for its blocking threads (an image being inflated, a file
    // being written): a stopped process must exit. What still runs after the grace is abandoned, as in a kill.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Log pipelines read JSON lines; a person at a terminal reads one plain message.
            match log_format {
                LogFormat::Json => tracing::error!(category = error.category(), "{}", report(&error)),
                LogFormat::Text => eprintln!("error: {}", report(&error)),
            }
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(command: Command) -> Result<(), Error> {
    match command {
        Command::Run(options) => run::run(*options).await,
        Command::Bundle(command) => bundle::run(command).await,
        Command::Approve(options) => approve::run(options).await,
        Command::Crds(command) => crds::run(command),
        Command::Migrate(command) => migrate::run(command).await,
    }
}
