//! Command-line interface of the `olmv2` binary.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::run::RunOptions;
use crate::telemetry::LogFormat;

/// The operator-lifecycle controller for the operators.coreos.com/v2alpha1 Operator and Install APIs.
#[derive(Debug, Parser)]
#[command(name = "olmv2", version, about)]
pub struct Cli {
    /// Log format; the level is set with RUST_LOG (default `info`).
    #[arg(long, global = true, env = "OLMV2_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controllers against the cluster in KUBECONFIG, or the in-cluster configuration.
    Run(RunOptions),
    /// Generate or check the CustomResourceDefinitions.
    #[command(subcommand)]
    Crds(CrdsCommand),
}

#[derive(Debug, Subcommand)]
pub enum CrdsCommand {
    /// Print every CRD as one YAML stream, for `kubectl apply --server-side -f -`.
    Print,
    /// Write every CRD to its file in DIR, removing files no type generates.
    Write {
        #[arg(long, default_value = crate::crdgen::CRD_DIR)]
        dir: PathBuf,
    },
    /// Fail when the CRDs in DIR differ from what the types generate.
    Check {
        #[arg(long, default_value = crate::crdgen::CRD_DIR)]
        dir: PathBuf,
    },
}
