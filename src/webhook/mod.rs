//! The admission webhooks the binary serves over TLS: the approval check of Installs (`approval`), the CatalogSource
//! use check of Operators (`catalog_use`), the InstallPolicy source check of both (`sources`), the records of who created and who changed them (`identity`), their
//! webhook configurations and serving certificate (`configuration`), the routes (`handlers`) and their start on the
//! HTTPS server of `tls` (`server`).

pub mod approval;
pub mod catalog_use;
pub mod configuration;
pub mod csv_author;
pub mod handlers;
pub mod identity;
pub mod server;
pub mod sources;

use std::net::SocketAddr;
use std::path::PathBuf;

/// Where the webhook listens and how the API server reaches it.
#[derive(Clone, Debug, clap::Args)]
pub struct WebhookOptions {
    /// Address the webhook's HTTPS server listens on.
    #[arg(long = "webhook-address", env = "OLMV2_WEBHOOK_ADDRESS", default_value = "0.0.0.0:9443")]
    pub address: SocketAddr,
    /// Namespace of the Service in front of the webhook; default: the controller's namespace.
    #[arg(long = "webhook-service-namespace", env = "OLMV2_WEBHOOK_SERVICE_NAMESPACE")]
    pub service_namespace: Option<String>,
    /// Name of the Service in front of the webhook.
    #[arg(long = "webhook-service-name", env = "OLMV2_WEBHOOK_SERVICE_NAME", default_value = "olmv2-webhook")]
    pub service_name: String,
    /// Port of the Service in front of the webhook.
    #[arg(long = "webhook-service-port", env = "OLMV2_WEBHOOK_SERVICE_PORT", default_value_t = 443)]
    pub service_port: i32,
    /// A directory with `tls.crt` and `tls.key` (a cert-manager Secret mounted); the caBundle of the webhook
    /// configuration is then left to cert-manager's CA injector. Without it, a certificate is generated at start
    /// and its CA written into the configuration.
    #[arg(long = "webhook-cert-dir", env = "OLMV2_WEBHOOK_CERT_DIR", value_name = "DIR")]
    pub cert_dir: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("failed to learn the controller's own username (SelfSubjectReview)")]
    Identify(#[source] kube::Error),
    #[error("failed to generate or share the webhook's serving certificate")]
    Certificate(#[source] crate::tls::shared::SharedCertificateError),
    #[error("failed to read the webhook's mounted certificate")]
    ReadCertificate(#[source] crate::tls::ReadCertificateError),
    #[error("failed to serve the webhook")]
    Serve(#[source] crate::tls::ServeError),
    #[error("failed to write ValidatingWebhookConfiguration {name}")]
    Configure {
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl crate::category::Categorized for WebhookError {
    fn category(&self) -> &'static str {
        match self {
            Self::Identify(_) => "SelfSubjectReviewFailed",
            Self::Certificate(_) | Self::ReadCertificate(_) => "WebhookCertificateInvalid",
            Self::Serve(crate::tls::ServeError::Certificate { .. }) => "WebhookCertificateInvalid",
            Self::Serve(crate::tls::ServeError::Listen { .. }) => "WebhookListenFailed",
            Self::Configure { .. } => "WebhookConfigurationFailed",
        }
    }
}
