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
    /// Show the permissions an Install waits for, and approve them with your own credentials.
    Approve(crate::approve_command::ApproveOptions),
    /// Build, push, pull, inspect and render operator bundles.
    #[command(subcommand)]
    Bundle(BundleCommand),
}

/// How to reach registries and where to cache bundles.
#[derive(Debug, Clone, clap::Args)]
pub struct RegistryArgs {
    /// A registry (host:port) to reach over plain HTTP; repeatable. All others are HTTPS only.
    #[arg(long = "insecure-registry", value_name = "HOST:PORT")]
    pub insecure_registries: Vec<String>,
    /// A docker config file with registry credentials; default $DOCKER_CONFIG/config.json or ~/.docker/config.json.
    #[arg(long, value_name = "PATH")]
    pub docker_config: Option<PathBuf>,
    /// Where unpacked bundle images are cached, by digest.
    #[arg(long, env = "OLMV2_BUNDLE_CACHE", value_name = "DIR")]
    pub cache: Option<PathBuf>,
}

/// Output formats of `bundle inspect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InspectFormat {
    Table,
    Yaml,
}

#[derive(Debug, Subcommand)]
pub enum BundleCommand {
    /// Build a bundle image from DIR (manifests/ and metadata/) and push it to REF.
    Build {
        dir: PathBuf,
        #[arg(long, value_name = "REF")]
        push: String,
        /// Push even if DIR is not a valid bundle (for testing error handling).
        #[arg(long)]
        allow_invalid: bool,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Pull and unpack a bundle image into the cache; print its pinned reference and where it is.
    Pull {
        reference: String,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Show a bundle's contents, install modes and the permissions its operator asks for.
    Inspect {
        /// A bundle directory or image reference.
        source: String,
        #[arg(short, long, value_enum, default_value_t = InspectFormat::Table)]
        output: InspectFormat,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Print the plain manifests a bundle installs as.
    Render {
        /// A bundle directory or image reference.
        source: String,
        /// The namespace to install into.
        #[arg(long, short)]
        namespace: String,
        /// A namespace the operator watches; repeatable. Default: all namespaces when supported, else NAMESPACE.
        #[arg(long = "watch", value_name = "NAMESPACE")]
        watch: Vec<String>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
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
