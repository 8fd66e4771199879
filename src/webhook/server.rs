//! The webhook's HTTPS server: TLS with rustls, one route per check, and the access reviews that check an approver
//! with the requesting user's own identity (user, groups, uid, extra) as the API server reported it.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::DynamicObject;
use kube::Client;
use serde_json::Value;
use tokio_rustls::rustls;

use super::approval::{access_checks, denial, judge, AccessCheck, Verdict};
use super::catalog_use::{catalog_use_check, catalog_use_denial};
use super::configuration::{self, ServingCertificate, APPROVAL_PATH, CATALOG_USE_PATH, CONFIGURATION_NAME};
use super::{WebhookError, WebhookOptions};

struct Checker {
    client: Client,
    controller_username: String,
}

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
    let checker = Arc::new(Checker { client: client.clone(), controller_username: controller_username.clone() });
    let router = Router::new()
        .route(APPROVAL_PATH, post(review_install))
        .route(CATALOG_USE_PATH, post(review_operator))
        .with_state(checker);
    let task = tokio::spawn(serve(listener, acceptor, router));

    let body = configuration::configuration(
        &namespace,
        &options.service_name,
        options.service_port,
        certificate.ca_pem.as_deref(),
    );
    let api = Api::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>::all(client);
    api.patch(CONFIGURATION_NAME, &PatchParams::apply("olmv2-webhook").force(), &Patch::Apply(&body))
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

/// A decoded review: the request, the allowing response to start from, and the old and new objects as JSON.
struct Decoded {
    request: AdmissionRequest<DynamicObject>,
    response: AdmissionResponse,
    old: Option<Value>,
    new: Option<Value>,
}

/// Decodes a review; the error is the message of the answer to a review that is not one.
fn decode(review: AdmissionReview<DynamicObject>) -> Result<Decoded, String> {
    let request: AdmissionRequest<DynamicObject> = review.try_into().map_err(|error| format!("{error}"))?;
    let response = AdmissionResponse::from(&request);
    let as_value = |object: &Option<DynamicObject>| object.as_ref().and_then(|o| serde_json::to_value(o).ok());
    let (old, new) = (as_value(&request.old_object), as_value(&request.object));
    Ok(Decoded { request, response, old, new })
}

async fn review_install(
    State(checker): State<Arc<Checker>>,
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    let Decoded { request, response, old, new } = match decode(review) {
        Ok(decoded) => decoded,
        Err(message) => return Json(AdmissionResponse::invalid(message).into_review()),
    };
    let username = request.user_info.username.clone().unwrap_or_default();
    let verdict =
        judge(request.sub_resource.as_deref(), &username, &checker.controller_username, old.as_ref(), new.as_ref());
    let response = match verdict {
        Verdict::Allow => response,
        Verdict::Deny(message) => forbid(response, message),
        Verdict::RequireHeld(pending) => {
            let mut lacking = Vec::new();
            for (index, check) in access_checks(&pending) {
                if lacking.contains(&index) {
                    continue;
                }
                match allowed(&checker.client, &request.user_info, &check).await {
                    Ok(true) => {}
                    Ok(false) => lacking.push(index),
                    Err(error) => {
                        tracing::warn!(%error, "access review failed");
                        return Json(
                            forbid(response, format!("the approval could not be checked: {error}")).into_review(),
                        );
                    }
                }
            }
            if lacking.is_empty() {
                tracing::info!(install = %request.name, user = %username, rules = pending.len(), "approval allowed");
                response
            } else {
                let rules: Vec<_> = lacking.iter().filter_map(|index| pending.get(*index)).collect();
                tracing::info!(install = %request.name, user = %username, lacking = rules.len(), "approval denied");
                forbid(response, denial(&username, &request.name, &rules))
            }
        }
    };
    Json(response.into_review())
}

async fn review_operator(
    State(checker): State<Arc<Checker>>,
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    let Decoded { request, response, old, new } = match decode(review) {
        Ok(decoded) => decoded,
        Err(message) => return Json(AdmissionResponse::invalid(message).into_review()),
    };
    let Some(check) = catalog_use_check(old.as_ref(), new.as_ref()) else {
        return Json(response.into_review());
    };
    let username = request.user_info.username.clone().unwrap_or_default();
    let response = match allowed(&checker.client, &request.user_info, &check).await {
        Ok(true) => response,
        Ok(false) => {
            tracing::info!(operator = %request.name, user = %username, catalog = %check.name, "catalog use denied");
            forbid(response, catalog_use_denial(&username, &check))
        }
        Err(error) => {
            tracing::warn!(%error, "access review failed");
            forbid(response, format!("the use of the CatalogSource could not be checked: {error}"))
        }
    };
    Json(response.into_review())
}

fn forbid(response: AdmissionResponse, message: String) -> AdmissionResponse {
    let mut response = response.deny(message);
    response.result.code = 403;
    response.result.reason = "Forbidden".into();
    response
}

/// One SubjectAccessReview for the requesting user.
async fn allowed(client: &Client, user: &UserInfo, check: &AccessCheck) -> Result<bool, kube::Error> {
    let mut spec = SubjectAccessReviewSpec {
        user: user.username.clone(),
        groups: user.groups.clone(),
        uid: user.uid.clone(),
        extra: user.extra.clone(),
        ..SubjectAccessReviewSpec::default()
    };
    match &check.path {
        Some(path) => {
            spec.non_resource_attributes =
                Some(NonResourceAttributes { path: Some(path.clone()), verb: Some(check.verb.clone()) })
        }
        None => {
            spec.resource_attributes = Some(ResourceAttributes {
                namespace: check.namespace.clone(),
                verb: Some(check.verb.clone()),
                group: Some(check.group.clone()),
                resource: Some(check.resource.clone()),
                subresource: Some(check.subresource.clone()).filter(|s| !s.is_empty()),
                name: Some(check.name.clone()).filter(|n| !n.is_empty()),
                ..ResourceAttributes::default()
            })
        }
    }
    let review = SubjectAccessReview { spec, ..SubjectAccessReview::default() };
    let answer = Api::<SubjectAccessReview>::all(client.clone()).create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|status| status.allowed))
}
