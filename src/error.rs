//! The errors of the binary's top-level actions (the command line's), above every module whose errors it wraps. The
//! trait that gives each error its static category, and the rendering of an error's chain of causes, are
//! `category`, which every module may import.

use std::net::SocketAddr;

use crate::category::Categorized;
use crate::crdgen::CrdGenError;

/// Errors of the binary's top-level actions.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to load the cluster configuration (KUBECONFIG or in-cluster)")]
    LoadClusterConfig(#[source] kube::config::InferConfigError),
    #[error("failed to build a Kubernetes client")]
    BuildClient(#[source] kube::Error),
    #[error("failed to reach the Kubernetes API server")]
    ConnectCluster(#[source] kube::Error),
    #[error("failed to bind the health and metrics endpoint on {address}")]
    BindHealthEndpoint {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to serve the health and metrics endpoint")]
    ServeHealthEndpoint(#[source] std::io::Error),
    #[error("failed to install the signal handler")]
    InstallSignalHandler(#[source] std::io::Error),
    #[error("failed to register metrics")]
    RegisterMetrics(#[source] std::fmt::Error),
    #[error("--serving-certificate-validity ({serving:?}) must be at least 3s and at most a third of --ca-validity ({ca:?}): a new CA is made once a third of the old one's life is left, and serving certificates must fit in it")]
    CertificateLifetimes { serving: std::time::Duration, ca: std::time::Duration },
    #[error(transparent)]
    GenerateCrds(#[from] CrdGenError),
    #[error(transparent)]
    LoadBundle(#[from] crate::bundle::BundleError),
    #[error(transparent)]
    ConvertBundle(#[from] crate::bundle::ConvertError),
    #[error(transparent)]
    PullImage(#[from] crate::bundle::image::PullError),
    #[error(transparent)]
    PushImage(#[from] crate::bundle::image::PushError),
    #[error(transparent)]
    IssueCertificate(#[from] crate::tls::CertificateError),
    #[error("failed to read {path}")]
    ReadFile {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read the deployment configuration in {path}")]
    ParseDeploymentConfig {
        path: std::path::PathBuf,
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error("the registry credentials in {path} are not valid")]
    Credentials {
        path: std::path::PathBuf,
        #[source]
        source: crate::bundle::credentials::CredentialsError,
    },
    #[error("failed to write YAML")]
    Yaml(#[source] serde_yaml_ng::Error),
    #[error("failed to write to standard output")]
    WriteOutput(#[source] std::io::Error),
    #[error("failed to read Install {name}")]
    ReadInstall {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to approve Install {name}")]
    ApproveInstall {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "Install {name} changed since its pending permissions were shown; nothing was approved, run the command again"
    )]
    InstallChanged { name: String },
    #[error("the approval of Install {name} was refused: {message}")]
    ApprovalRefused { name: String, message: String },
    #[error("failed to read the answer")]
    ReadInput(#[source] std::io::Error),
    #[error("failed to read what migration plans from")]
    ReadCluster(#[source] Box<crate::migration::AdoptionError>),
    #[error("failed to ask for the adoption of namespace {namespace}'s Subscriptions")]
    AskAdoption {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to ask for Operator {operator} to be made a Subscription again")]
    AskRevert {
        operator: String,
        #[source]
        source: kube::Error,
    },
    #[error("no Operators named {names:?}")]
    OperatorsNotFound { names: Vec<String> },
    #[error("Operators {operators:?} were not made Subscriptions again in time")]
    RevertTimedOut { operators: Vec<String> },
    #[error("{count} are left as they were: the table above says why")]
    AdoptionBlocked { count: usize },
    #[error("{count} Subscriptions were not adopted in time: the table above says where they stand")]
    AdoptionTimedOut { count: usize },
    #[error("the CRDs in {dir} are stale: outdated {outdated:?}, unexpected {unexpected:?}; run `olmv2 crds write`")]
    StaleCrds { dir: String, outdated: Vec<String>, unexpected: Vec<String> },
}

impl Categorized for Error {
    fn category(&self) -> &'static str {
        match self {
            Self::LoadClusterConfig(_) => "ClusterConfigInvalid",
            Self::BuildClient(_) => "ClientBuildFailed",
            Self::ConnectCluster(_) => "ClusterUnreachable",
            Self::BindHealthEndpoint { .. } => "HealthEndpointBindFailed",
            Self::ServeHealthEndpoint(_) => "HealthEndpointFailed",
            Self::InstallSignalHandler(_) => "SignalHandlerFailed",
            Self::RegisterMetrics(_) => "MetricsRegistrationFailed",
            Self::CertificateLifetimes { .. } => "CertificateLifetimesInvalid",
            Self::GenerateCrds(error) => error.category(),
            Self::LoadBundle(error) => error.category(),
            Self::ConvertBundle(error) => error.category(),
            Self::PullImage(error) => error.category(),
            Self::PushImage(error) => error.category(),
            Self::IssueCertificate(_) => "CertificateIssueFailed",
            Self::ReadFile { .. } => "FileUnreadable",
            Self::ParseDeploymentConfig { .. } => "DeploymentConfigInvalid",
            Self::Credentials { .. } => "RegistryCredentialsInvalid",
            Self::Yaml(_) => "YamlWriteFailed",
            Self::WriteOutput(_) => "OutputWriteFailed",
            Self::StaleCrds { .. } => "CrdsStale",
            Self::ReadInstall { .. } => "InstallReadFailed",
            Self::ApproveInstall { .. } => "ApprovalFailed",
            Self::InstallChanged { .. } => "InstallChanged",
            Self::ApprovalRefused { .. } => "ApprovalRefused",
            Self::ReadInput(_) => "InputUnreadable",
            Self::ReadCluster(error) => error.category(),
            Self::AskAdoption { .. } => "AdoptionRequestFailed",
            Self::AdoptionBlocked { .. } => "AdoptionBlocked",
            Self::AdoptionTimedOut { .. } => "AdoptionTimedOut",
            Self::AskRevert { .. } => "RevertRequestFailed",
            Self::RevertTimedOut { .. } => "RevertTimedOut",
            Self::OperatorsNotFound { .. } => "OperatorNotFound",
        }
    }
}
