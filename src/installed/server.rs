//! Starting the aggregated API server: the request-header settings read from the cluster, the serving certificate
//! (generated, or mounted by cert-manager), the HTTPS server asking clients for a front-proxy certificate, the
//! cache's watches and the CatalogSource store, and the APIServices that tell the aggregation layer where each
//! group-version (`v1` PackageManifests, `v2alpha1` Installed) is served.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};

use super::cache::Cache;
use super::discovery::VERSIONS;
use super::front_proxy::{ReadRequestHeaderError, RequestHeader};
use super::http::{router, ApiState};
use super::packages::Catalogs;
use super::synthesize::GROUP;
use crate::api::v1alpha1::CatalogSource;
use crate::catalog::source::CatalogCache;
use crate::controller::watches::trimmed;
use crate::metrics::Metrics;
use crate::tls::rotation::Lifetimes;
use crate::tls::shared::{spawn_renewal, Issuing, SharedCertificate};
use crate::tls::{self, HttpsServer, ServingCertificate};

/// Where the aggregated API server listens and how the aggregation layer reaches it. Each argument has its own id:
/// the webhook's options have fields of the same names, and clap would take them for one argument.
#[derive(Clone, Debug, clap::Args)]
pub struct ApiOptions {
    /// Address the aggregated API server (Installed objects) listens on.
    #[arg(id = "api-address", long = "api-address", env = "OLMV2_API_ADDRESS", default_value = "0.0.0.0:5443")]
    pub address: SocketAddr,
    /// Namespace of the Service in front of it; default: the controller's namespace.
    #[arg(id = "api-service-namespace", long = "api-service-namespace", env = "OLMV2_API_SERVICE_NAMESPACE")]
    pub service_namespace: Option<String>,
    /// Name of the Service in front of it, which its APIServices name.
    #[arg(
        id = "api-service-name",
        long = "api-service-name",
        env = "OLMV2_API_SERVICE_NAME",
        default_value = "olmv2-packages"
    )]
    pub service_name: String,
    /// Port of that Service.
    #[arg(id = "api-service-port", long = "api-service-port", env = "OLMV2_API_SERVICE_PORT", default_value_t = 443)]
    pub service_port: i32,
    /// A directory with `tls.crt` and `tls.key` (a cert-manager Secret mounted); the APIServices' caBundle is then
    /// left to cert-manager's CA injector. Without it, a certificate is generated at start.
    #[arg(id = "api-cert-dir", long = "api-cert-dir", env = "OLMV2_API_CERT_DIR", value_name = "DIR")]
    pub cert_dir: Option<PathBuf>,
    /// Does not serve the Installed API (for clusters without an aggregation layer).
    #[arg(long = "disable-installed-api", env = "OLMV2_DISABLE_INSTALLED_API")]
    pub disabled: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiServerError {
    #[error("failed to read the aggregation layer's request-header settings")]
    RequestHeader(#[source] ReadRequestHeaderError),
    #[error("failed to generate or share the aggregated API server's serving certificate")]
    Certificate(#[source] crate::tls::shared::SharedCertificateError),
    #[error("failed to read the aggregated API server's mounted certificate")]
    ReadCertificate(#[source] crate::tls::ReadCertificateError),
    #[error("failed to serve the aggregated API")]
    Serve(#[source] crate::tls::ServeError),
    #[error("failed to write APIService {name}")]
    Register {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to withdraw APIService {name}")]
    Withdraw {
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl crate::category::Categorized for ApiServerError {
    fn category(&self) -> &'static str {
        match self {
            Self::RequestHeader(_) => "RequestHeaderUnreadable",
            Self::Certificate(_) | Self::ReadCertificate(_) => "ApiCertificateInvalid",
            Self::Serve(_) => "ApiListenFailed",
            Self::Register { .. } => "ApiServiceRegistrationFailed",
            Self::Withdraw { .. } => "ApiServiceWithdrawalFailed",
        }
    }
}

/// A running aggregated API server; it stops when dropped.
pub struct RunningApi {
    pub address: SocketAddr,
    pub cache: Arc<Cache>,
    _server: HttpsServer,
    _watches: tokio::task::JoinHandle<()>,
    renewal: tokio::task::JoinHandle<()>,
}

impl Drop for RunningApi {
    fn drop(&mut self) {
        self._watches.abort();
        self.renewal.abort();
    }
}

/// The common name of the Installed API's generated CAs.
pub const CA_NAME: &str = "olmv2-api-ca";

/// Writes the APIServices of every version, trusting `ca` (or leaving that to cert-manager's injector).
async fn register(
    client: &Client,
    options: &ApiOptions,
    namespace: &str,
    ca: Option<&str>,
) -> Result<(), ApiServerError> {
    for version in VERSIONS {
        let body = api_service(version, namespace, &options.service_name, options.service_port, ca);
        let name = format!("{version}.{GROUP}");
        Api::<APIService>::all(client.clone())
            .patch(&name, &PatchParams::apply("olmv2-api").force(), &Patch::Apply(&body))
            .await
            .map_err(|source| ApiServerError::Register { name: name.clone(), source })?;
    }
    Ok(())
}

/// The APIService of `version`: the aggregation layer sends requests for it to the Service, trusting `ca_pem`
/// (or, with none, the CA cert-manager injects).
pub fn api_service(version: &str, namespace: &str, service: &str, port: i32, ca_pem: Option<&str>) -> Value {
    let mut metadata = json!({"name": format!("{version}.{GROUP}"), "labels": {"app.kubernetes.io/name": "olmv2"}});
    let mut spec = json!({
        "group": GROUP, "version": version,
        "service": {"namespace": namespace, "name": service, "port": port},
        // OLM's packageserver's priorities for v1, so that v1 stays the group's preferred version.
        "groupPriorityMinimum": 2000, "versionPriority": if version == "v1" { 15 } else { 10 },
    });
    match ca_pem {
        Some(ca) => spec["caBundle"] = json!(tls::ca_bundle(ca)),
        None => {
            metadata["annotations"] = json!({"cert-manager.io/inject-ca-from": format!("{namespace}/{service}")});
        }
    }
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": metadata, "spec": spec})
}

/// Whether `registered` is an APIService this controller wrote for the Service `namespace/service`: labelled as
/// olmv2's and naming that Service. Any other (OLM v0's packageserver registers `v1` for its own Service) is not ours
/// to withdraw.
pub fn registered_here(registered: &APIService, namespace: &str, service: &str) -> bool {
    let labelled = registered.metadata.labels.as_ref().and_then(|l| l.get("app.kubernetes.io/name"));
    let target = registered.spec.as_ref().and_then(|spec| spec.service.as_ref());
    labelled.map(String::as_str) == Some("olmv2")
        && target.is_some_and(|t| t.namespace.as_deref() == Some(namespace) && t.name.as_deref() == Some(service))
}

/// Withdraws the APIServices an earlier run registered, for a controller told not to serve the API: left behind they
/// name a Service nobody answers on, so every discovery of the cluster reports the group unavailable and namespace
/// deletion waits on it. Each is deleted only as read (uid and resourceVersion preconditions); answers the names
/// withdrawn.
pub async fn withdraw(
    client: &Client,
    options: &ApiOptions,
    controller_namespace: &str,
) -> Result<Vec<String>, ApiServerError> {
    let namespace = options.service_namespace.as_deref().unwrap_or(controller_namespace);
    let api = Api::<APIService>::all(client.clone());
    let mut withdrawn = Vec::new();
    for version in VERSIONS {
        let name = format!("{version}.{GROUP}");
        let failed = |source| ApiServerError::Withdraw { name: name.clone(), source };
        let Some(registered) = api.get_opt(&name).await.map_err(failed)? else { continue };
        if !registered_here(&registered, namespace, &options.service_name) {
            continue;
        }
        let preconditions = kube::api::Preconditions {
            uid: registered.metadata.uid.clone(),
            resource_version: registered.metadata.resource_version.clone(),
        };
        let params = kube::api::DeleteParams { preconditions: Some(preconditions), ..Default::default() };
        match api.delete(&name, &params).await {
            Ok(_) => withdrawn.push(name),
            // Gone already, or changed since read (someone else's now): not ours to delete.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(source) => return Err(failed(source)),
        }
    }
    Ok(withdrawn)
}

/// Starts serving and registers the APIServices. PackageManifests are built from the catalogs of `catalogs`, the
/// process's cache; those of `global_namespace` are seen from every namespace.
pub async fn start(
    client: Client,
    options: &ApiOptions,
    controller_namespace: &str,
    catalogs: Arc<CatalogCache>,
    global_namespace: &str,
    lifetimes: Lifetimes,
    metrics: Arc<Metrics>,
) -> Result<RunningApi, ApiServerError> {
    let request_header = RequestHeader::read(&client).await.map_err(ApiServerError::RequestHeader)?;
    let namespace = options.service_namespace.clone().unwrap_or_else(|| controller_namespace.to_owned());
    let shared = SharedCertificate {
        client: client.clone(),
        namespace: controller_namespace.to_owned(),
        service: options.service_name.clone(),
        issuing: Issuing {
            names: tls::service_dns_names(&options.service_name, &namespace),
            ca_name: CA_NAME.to_owned(),
            lifetimes,
        },
    };
    let certificate = match &options.cert_dir {
        Some(dir) => ServingCertificate::read_mounted(dir).map_err(ApiServerError::ReadCertificate)?,
        None => shared.load().await.map_err(ApiServerError::Certificate)?,
    };
    let cache = Arc::new(Cache::default());
    let (sources, writer) = kube::runtime::reflector::store();
    let client_ca = request_header.client_ca_pem.clone();
    let catalogs = Catalogs { sources, cache: catalogs, global_namespace: global_namespace.to_owned() };
    let state = Arc::new(ApiState {
        cache: cache.clone(),
        client: client.clone(),
        request_header,
        catalogs,
        decisions: Default::default(),
    });
    let server = HttpsServer::start_verifying_clients(
        "installed-api",
        options.address,
        &certificate,
        Some(&client_ca),
        router(state),
    )
    .await
    .map_err(ApiServerError::Serve)?;
    register(&client, options, &namespace, certificate.ca_pem.as_deref()).await?;
    metrics.certificate(&options.service_name, &certificate);
    let write = {
        let (client, options, namespace) = (client.clone(), options.clone(), namespace.clone());
        move |bundle: String| {
            let (client, options, namespace) = (client.clone(), options.clone(), namespace.clone());
            async move { register(&client, &options, &namespace, Some(&bundle)).await }
        }
    };
    let service = options.service_name.clone();
    let presented = move |certificate: &ServingCertificate| metrics.certificate(&service, certificate);
    let renewal =
        spawn_renewal(shared, options.cert_dir.clone(), server.certificate_slot(), certificate, write, presented);
    // The watches start once serving and registered: a failed start leaves nothing running.
    let sources_watch = trimmed(Api::<CatalogSource>::all(client.clone()), kube::runtime::watcher::Config::default());
    let sources_fed = kube::runtime::reflector(writer, sources_watch);
    let watches = tokio::spawn({
        let cache = cache.clone();
        async move {
            let sources = futures_util::StreamExt::for_each(sources_fed, |event| async move {
                if let Err(error) = event {
                    tracing::warn!(%error, "the PackageManifest API's CatalogSource watch failed; retrying");
                }
            });
            tokio::join!(cache.run(client), sources);
        }
    });
    let address = server.address;
    tracing::info!(%address, service = %format!("{namespace}/{}", options.service_name), "serving the Installed API");
    Ok(RunningApi { address, cache, _server: server, _watches: watches, renewal })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_api_service_labelled_as_ours_and_naming_our_service_is_ours_to_withdraw() {
        let ours: APIService = serde_json::from_value(api_service("v1", "olmv2-system", "olmv2-packages", 443, None))
            .expect("an APIService");
        assert!(registered_here(&ours, "olmv2-system", "olmv2-packages"));
        assert!(!registered_here(&ours, "olm", "olmv2-packages"), "another namespace's Service");
        assert!(!registered_here(&ours, "olmv2-system", "packageserver-service"), "another Service");
        let mut unlabelled = ours.clone();
        unlabelled.metadata.labels = None;
        assert!(!registered_here(&unlabelled, "olmv2-system", "olmv2-packages"));
        let mut local = ours;
        local.spec.as_mut().expect("spec").service = None;
        assert!(!registered_here(&local, "olmv2-system", "olmv2-packages"), "a local APIService");
    }

    #[test]
    fn the_api_service_names_the_service_and_trusts_its_ca() {
        let service = api_service("v2alpha1", "olmv2-system", "olmv2-packages", 443, Some("pem"));
        assert_eq!(service["metadata"]["name"], "v2alpha1.packages.operators.coreos.com");
        assert_eq!(
            service["spec"]["service"],
            json!({"namespace": "olmv2-system", "name": "olmv2-packages", "port": 443})
        );
        assert_eq!(service["spec"]["caBundle"], tls::ca_bundle("pem"));
        let injected = api_service("v2alpha1", "olmv2-system", "olmv2-packages", 443, None);
        assert!(injected["spec"].get("caBundle").is_none());
        assert_eq!(
            injected["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "olmv2-system/olmv2-packages"
        );
    }
}
