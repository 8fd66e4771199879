//! Why a bundle cannot be converted into plain manifests: one error type for every part of the conversion, its
//! categories OLM's reasons where OLM has one.

use super::deployment_config::DeploymentConfigError;
use crate::api::v1alpha1::InstallModeType;
use crate::category::Categorized;
use crate::tls::CertificateError;

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// OLM's reason for an install mode the CSV does not support is `UnsupportedOperatorGroup`.
    #[error("UnsupportedOperatorGroup: {message}")]
    UnsupportedInstallMode { mode: InstallModeType, message: String },
    #[error("the target namespaces {targets:?} mix \"\" (all namespaces) with named namespaces")]
    InvalidTargetNamespaces { targets: Vec<String> },
    #[error("APIService {name} is owned by the CSV; serving aggregated APIs from bundles is not supported")]
    OwnedApiServiceUnsupported { name: String },
    #[error("webhook {webhook} is served by deployment {deployment}, which the CSV does not define")]
    WebhookDeploymentMissing { webhook: String, deployment: String },
    #[error(
        "conversion webhook {webhook} names CRD {crd}, which the bundle does not carry as apiextensions.k8s.io/v1"
    )]
    ConversionCrdMissing { webhook: String, crd: String },
    #[error("deployment {deployment} cannot be rendered: {reason}")]
    InvalidDeployment { deployment: String, reason: String },
    #[error("the CSV's olm.properties annotation is not a JSON list of properties: {reason}")]
    InvalidPropertiesAnnotation { reason: String },
    #[error(transparent)]
    DeploymentConfig(#[from] DeploymentConfigError),
    #[error(transparent)]
    Certificate(#[from] CertificateError),
}

impl Categorized for ConvertError {
    fn category(&self) -> &'static str {
        match self {
            Self::UnsupportedInstallMode { .. } => "UnsupportedOperatorGroup",
            Self::InvalidTargetNamespaces { .. } => "InvalidTargetNamespaces",
            Self::OwnedApiServiceUnsupported { .. } => "ApiServiceUnsupported",
            Self::WebhookDeploymentMissing { .. } | Self::ConversionCrdMissing { .. } => "InvalidWebhookDescription",
            Self::InvalidDeployment { .. } => "InvalidInstallStrategy",
            Self::InvalidPropertiesAnnotation { .. } => "InvalidBundleProperties",
            Self::DeploymentConfig(_) => "DeploymentConfigFailed",
            Self::Certificate(_) => "CertificateIssueFailed",
        }
    }
}
