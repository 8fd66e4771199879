//! The webhook's HTTPS server: TLS with rustls, one route per check (the handlers are in `handlers.rs`), and the
//! webhook configurations pointing the API server at it.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::post;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use tokio_rustls::rustls;

use super::configuration::{
    self, ServingCertificate, APPROVAL_PATH, CATALOG_USE_PATH, CONFIGURATION_NAME, IDENTITY_CONFIGURATION_NAME,
    MUTATE_INSTALL_PATH, MUTATE_OPERATOR_PATH,
};
use super::handlers::{mutate_install, mutate_operator, review_install, review_operator, Checker};
use super::{WebhookError, WebhookOptions};

/// A running webhook; it stops when dropped.
pub struct RunningWebhook {
    pub address: SocketAddr,
    pub controller_username: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RunningWebhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The username the API server knows the controller by.
pub async fn own_username(client: &Client) -> Result<String, WebhookError> {
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .map_err(WebhookError::Identify)?;
    Ok(review.status.and_then(|s| s.user_info).and_then(|u| u.username).unwrap_or_default())
}

/// Starts serving, then writes the webhook configuration pointing at the Service in front of it.
pub async fn start(
    client: Client,
    options: &WebhookOptions,
    controller_namespace: &str,
) -> Result<RunningWebhook, WebhookError> {
    let controller_username = own_username(&client).await?;
    let namespace = options.service_namespace.clone().unwrap_or_else(|| controller_namespace.to_owned());
    let certificate = match &options.cert_dir {
        Some(dir) => configuration::read(dir)?,
        None => configuration::generate(&options.service_name, &namespace)?,
    };
    let acceptor = acceptor(&certificate)?;
    let listener = tokio::net::TcpListener::bind(options.address)
        .await
        .map_err(|source| WebhookError::Listen { address: options.address, source })?;
    let address = listener.local_addr().map_err(|source| WebhookError::Listen { address: options.address, source })?;
    let checker = Arc::new(Checker {
        client: client.clone(),
        controller_username: controller_username.clone(),
        controller_namespace: controller_namespace.to_owned(),
    });
    let router = Router::new()
        .route(APPROVAL_PATH, post(review_install))
        .route(CATALOG_USE_PATH, post(review_operator))
        .route(MUTATE_INSTALL_PATH, post(mutate_install))
        .route(MUTATE_OPERATOR_PATH, post(mutate_operator))
        .with_state(checker);
    let task = tokio::spawn(serve(listener, acceptor, router));

    let ca = certificate.ca_pem.as_deref();
    // The mutating configuration goes first: until it exists, the validating webhook refuses every create of an
    // Install or Operator that does not record its creator.
    let body = configuration::identity_configuration(&namespace, &options.service_name, options.service_port, ca);
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(IDENTITY_CONFIGURATION_NAME, &PatchParams::apply("olmv2-webhook").force(), &Patch::Apply(&body))
        .await
        .map_err(|source| WebhookError::Configure { name: IDENTITY_CONFIGURATION_NAME.into(), source })?;
    let body = configuration::configuration(&namespace, &options.service_name, options.service_port, ca);
    Api::<ValidatingWebhookConfiguration>::all(client)
        .patch(CONFIGURATION_NAME, &PatchParams::apply("olmv2-webhook").force(), &Patch::Apply(&body))
        .await
        .map_err(|source| WebhookError::Configure { name: CONFIGURATION_NAME.into(), source })?;
    tracing::info!(%address, service = %format!("{namespace}/{}", options.service_name), "serving the approval webhook");
    Ok(RunningWebhook { address, controller_username, task })
}

fn acceptor(certificate: &ServingCertificate) -> Result<tokio_rustls::TlsAcceptor, WebhookError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let tls = |reason: String| WebhookError::Tls { reason };
    let chain = CertificateDer::pem_slice_iter(certificate.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls(format!("tls.crt: {e}")))?;
    let key =
        PrivateKeyDer::from_pem_slice(certificate.key_pem.as_bytes()).map_err(|e| tls(format!("tls.key: {e}")))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| tls(e.to_string()))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

async fn serve(listener: tokio::net::TcpListener, acceptor: tokio_rustls::TlsAcceptor, router: Router) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "webhook accept failed");
                continue;
            }
        };
        let (acceptor, router) = (acceptor.clone(), router.clone());
        tokio::spawn(async move {
            let stream = match acceptor.accept(stream).await {
                Ok(stream) => stream,
                Err(error) => return tracing::debug!(%error, "webhook TLS handshake failed"),
            };
            let service = hyper_util::service::TowerToHyperService::new(router);
            if let Err(error) = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, "webhook connection ended with an error");
            }
        });
    }
}
