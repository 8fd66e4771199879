//! Starting the webhook: its routes, one per check (the handlers are in `handlers.rs`), served by the HTTPS server of
//! `tls`, and the webhook configurations pointing the API server at it; then keeping its certificate renewed (and
//! the configurations' `caBundle` with it) for as long as it runs.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::post;
use axum::Router;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;

use super::configuration::{
    self, APPROVAL_PATH, CATALOG_USE_PATH, CONFIGURATION_NAME, IDENTITY_CONFIGURATION_NAME, MUTATE_CSV_PATH,
    MUTATE_INSTALL_PATH, MUTATE_OPERATOR_GROUP_PATH, MUTATE_OPERATOR_PATH, MUTATE_SUBSCRIPTION_PATH,
};
use super::handlers::{
    mutate_csv, mutate_install, mutate_operator, mutate_operator_group, review_install, review_operator, Checker,
};
use super::{WebhookError, WebhookOptions};
use crate::metrics::Metrics;
use crate::tls::rotation::Lifetimes;
use crate::tls::shared::{spawn_renewal, Issuing, SharedCertificate};
use crate::tls::{HttpsServer, ServingCertificate};

/// A running webhook; it stops when dropped.
pub struct RunningWebhook {
    pub address: SocketAddr,
    pub controller_username: String,
    _server: HttpsServer,
    renewal: tokio::task::JoinHandle<()>,
}

impl Drop for RunningWebhook {
    fn drop(&mut self) {
        self.renewal.abort();
    }
}

/// Writes both webhook configurations, trusting `ca` (or leaving that to cert-manager's injector).
async fn configure(
    client: &Client,
    namespace: &str,
    options: &WebhookOptions,
    ca: Option<&str>,
) -> Result<(), WebhookError> {
    // The mutating configuration goes first: until it exists, the validating webhook refuses every create of an
    // Install or Operator that does not record its creator.
    let body = configuration::identity_configuration(namespace, &options.service_name, options.service_port, ca);
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(IDENTITY_CONFIGURATION_NAME, &PatchParams::apply("olmv2-webhook").force(), &Patch::Apply(&body))
        .await
        .map_err(|source| WebhookError::Configure { name: IDENTITY_CONFIGURATION_NAME.into(), source })?;
    let body = configuration::configuration(namespace, &options.service_name, options.service_port, ca);
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .patch(CONFIGURATION_NAME, &PatchParams::apply("olmv2-webhook").force(), &Patch::Apply(&body))
        .await
        .map_err(|source| WebhookError::Configure { name: CONFIGURATION_NAME.into(), source })?;
    Ok(())
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
    lifetimes: Lifetimes,
    metrics: Arc<Metrics>,
) -> Result<RunningWebhook, WebhookError> {
    let controller_username = own_username(&client).await?;
    let namespace = options.service_namespace.clone().unwrap_or_else(|| controller_namespace.to_owned());
    let shared = SharedCertificate {
        client: client.clone(),
        namespace: controller_namespace.to_owned(),
        service: options.service_name.clone(),
        issuing: Issuing {
            names: crate::tls::service_dns_names(&options.service_name, &namespace),
            ca_name: configuration::CA_NAME.to_owned(),
            lifetimes,
        },
    };
    let certificate = match &options.cert_dir {
        Some(dir) => ServingCertificate::read_mounted(dir).map_err(WebhookError::ReadCertificate)?,
        None => shared.load().await.map_err(WebhookError::Certificate)?,
    };
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
        .route(MUTATE_CSV_PATH, post(mutate_csv))
        .route(MUTATE_SUBSCRIPTION_PATH, post(mutate_csv))
        .route(MUTATE_OPERATOR_GROUP_PATH, post(mutate_operator_group))
        .with_state(checker);
    let server =
        HttpsServer::start("webhook", options.address, &certificate, router).await.map_err(WebhookError::Serve)?;
    let address = server.address;
    configure(&client, &namespace, options, certificate.ca_pem.as_deref()).await?;
    metrics.certificate(&options.service_name, &certificate);

    let write = {
        let (client, options, namespace) = (client.clone(), options.clone(), namespace.clone());
        move |bundle: String| {
            let (client, options, namespace) = (client.clone(), options.clone(), namespace.clone());
            async move { configure(&client, &namespace, &options, Some(&bundle)).await }
        }
    };
    let service = options.service_name.clone();
    let presented = move |certificate: &ServingCertificate| metrics.certificate(&service, certificate);
    let renewal =
        spawn_renewal(shared, options.cert_dir.clone(), server.certificate_slot(), certificate, write, presented);
    tracing::info!(%address, service = %format!("{namespace}/{}", options.service_name), "serving the approval webhook");
    Ok(RunningWebhook { address, controller_username, _server: server, renewal })
}
