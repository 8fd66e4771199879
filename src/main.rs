//! Entry point of the `olmv2` binary: parse the command line, set up logging, dispatch.

use std::process::ExitCode;

use clap::Parser;
use olmv2::cli::{Cli, Command, CrdsCommand};
use olmv2::error::{report, Error};
use olmv2::telemetry::LogFormat;
use olmv2::{approve_command, bundle_command, crdgen, output, run, telemetry};

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
    match runtime.block_on(dispatch(cli.command)) {
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
        Command::Run(options) => run::run(options).await,
        Command::Bundle(command) => bundle_command::run(command).await,
        Command::Approve(options) => approve_command::run(options).await,
        Command::Crds(CrdsCommand::Print) => {
            output::write(&crdgen::all_as_yaml_stream()?)?;
            Ok(())
        }
        Command::Crds(CrdsCommand::Write { dir }) => {
            for path in crdgen::write_all(&dir)? {
                output::write(&format!("wrote {}\n", path.display()))?;
            }
            Ok(())
        }
        Command::Crds(CrdsCommand::Check { dir }) => {
            let staleness = crdgen::check(&dir)?;
            if staleness.is_fresh() {
                output::write(&format!("the CRDs in {} are up to date\n", dir.display()))?;
                Ok(())
            } else {
                Err(Error::StaleCrds {
                    dir: dir.display().to_string(),
                    outdated: staleness.outdated,
                    unexpected: staleness.unexpected,
                })
            }
        }
    }
}
