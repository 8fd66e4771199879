//! Starting the control plane: a certificate authority and serving certificate made at start, HTTPS on a loopback
//! port, the namespaces a cluster starts with, the controllers, and a kubeconfig that points clients at it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_rustls::rustls;

use crate::auth::authn::{self, MASTERS};
use crate::auth::front::PeerCredentials;
use crate::auth::policy;
use crate::controllers::authentication::ClusterAuthenticationInfo;
use crate::controllers::Published;
use crate::outbound::ClientIdentity;
use crate::request::api_server::ApiServer;
use crate::request::types::{Target, WriteOptions};
use crate::{controllers, http};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("could not make the serving certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("could not set up TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error("could not set up client certificate verification: {0}")]
    ClientVerifier(String),
    #[error("could not listen on {address}: {source}")]
    Listen { address: String, source: std::io::Error },
    #[error("could not write the kubeconfig {path}: {source}")]
    Kubeconfig { path: PathBuf, source: std::io::Error },
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("could not read the control plane's kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("could not build a client: {0}")]
    Client(#[from] kube::Error),
}

/// The common name of the client certificate requests to aggregated API servers carry, which the
/// `extension-apiserver-authentication` ConfigMap lists as the front proxy's only allowed name.
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

/// How to start.
#[derive(Clone, Debug)]
pub struct Options {
    pub address: SocketAddr,
    pub history_limit: usize,
    pub bookmark_interval: Duration,
    /// Where services listen, as `(namespace, name, address)`: the endpoints of webhooks and aggregated API servers.
    pub service_endpoints: Vec<(String, String, SocketAddr)>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            history_limit: 100_000,
            bookmark_interval: Duration::from_secs(60),
            service_endpoints: Vec::new(),
        }
    }
}

/// A running control plane; it stops when dropped.
pub struct ControlPlane {
    pub api: Arc<ApiServer>,
    pub url: String,
    pub ca_pem: String,
    /// The CA of the client certificate requests to aggregated API servers carry: backends verify it.
    pub front_proxy_ca_pem: String,
    pub authority: Authority,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The cluster certificate authority: it signs the serving certificate and the client certificates of users.
pub struct Authority {
    params: CertificateParams,
    key: KeyPair,
    pub ca_pem: String,
    ca_der: rustls::pki_types::CertificateDer<'static>,
}

impl Authority {
    fn generate() -> Result<Self, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "olmv2-control-plane-ca");
        let certificate = params.self_signed(&key)?;
        Ok(Self { ca_pem: certificate.pem(), ca_der: certificate.der().clone(), params, key })
    }

    fn serving_certificate(
        &self,
    ) -> Result<(rustls::pki_types::CertificateDer<'static>, rustls::pki_types::PrivateKeyDer<'static>), rcgen::Error>
    {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
        params.distinguished_name.push(rcgen::DnType::CommonName, "kube-apiserver");
        let cert = params.signed_by(&key, &Issuer::from_params(&self.params, &self.key))?;
        Ok((cert.der().clone(), rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into())))
    }

    fn client_certificate_der(
        &self,
        username: &str,
    ) -> Result<(rustls::pki_types::CertificateDer<'static>, rustls::pki_types::PrivateKeyDer<'static>), rcgen::Error>
    {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::new())?;
        params.distinguished_name.push(rcgen::DnType::CommonName, username);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &Issuer::from_params(&self.params, &self.key))?;
        Ok((cert.der().clone(), rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into())))
    }

    /// A client certificate and key (PEM) for `username` in `groups`: CN is the user, each O a group.
    pub fn client_certificate(&self, username: &str, groups: &[&str]) -> Result<(String, String), rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::new())?;
        params.distinguished_name.push(rcgen::DnType::CommonName, username);
        for group in groups {
            params.distinguished_name.push(rcgen::DnType::OrganizationName, *group);
        }
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &Issuer::from_params(&self.params, &self.key))?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

const INITIAL_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

impl ControlPlane {
    pub async fn start(options: Options) -> Result<Self, StartError> {
        let authority = Authority::generate()?;
        let (cert_der, key_der) = authority.serving_certificate()?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(authority.ca_der.clone())?;
        let client_verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(|e| StartError::ClientVerifier(e.to_string()))?;
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(vec![cert_der], key_der)?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = TcpListener::bind(options.address)
            .await
            .map_err(|source| StartError::Listen { address: options.address.to_string(), source })?;
        let address = listener
            .local_addr()
            .map_err(|source| StartError::Listen { address: options.address.to_string(), source })?;
        let front_proxy_authority = Authority::generate()?;
        let (proxy_cert, proxy_key) = front_proxy_authority.client_certificate_der(FRONT_PROXY_CLIENT)?;
        let mut server = ApiServer::new(options.history_limit, options.bookmark_interval);
        server.front_proxy = Some(ClientIdentity { cert_der: proxy_cert, key_der: Arc::new(proxy_key) });
        for (namespace, name, address) in &options.service_endpoints {
            server.endpoints.set(namespace, name, *address);
        }
        let api = Arc::new(server);
        let published = Published {
            root_ca: authority.ca_pem.clone(),
            authentication: authentication_info(&authority.ca_pem, &front_proxy_authority.ca_pem),
        };
        bootstrap(&api, &published, address).await;
        let router = http::router(api.clone());
        let server = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                // Go's net package sets TCP_NODELAY on every connection, kube-apiserver's included.
                let _ = stream.set_nodelay(true);
                let acceptor = acceptor.clone();
                let router = router.clone();
                tokio::spawn(async move {
                    let Ok(tls_stream) = acceptor.accept(stream).await else { return };
                    let peer = tls_stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .and_then(|der| authn::certificate_subject(der))
                        .unwrap_or_default();
                    let router = router.layer(axum::Extension(PeerCredentials(peer)));
                    let service = hyper_util::service::TowerToHyperService::new(router);
                    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    if let Err(error) = builder.serve_connection(TokioIo::new(tls_stream), service).await {
                        tracing::debug!(%error, "connection ended with an error");
                    }
                });
            }
        });
        let controllers = tokio::spawn(controllers::run(api.clone(), published));
        Ok(Self {
            api,
            url: format!("https://{address}"),
            ca_pem: authority.ca_pem.clone(),
            front_proxy_ca_pem: front_proxy_authority.ca_pem.clone(),
            authority,
            tasks: vec![server, controllers],
        })
    }

    /// A kubeconfig for this control plane as a cluster administrator (`kubernetes-admin` in `system:masters`).
    pub fn kubeconfig(&self) -> String {
        self.user_kubeconfig("kubernetes-admin", &[MASTERS])
    }

    fn kubeconfig_with(&self, user: serde_json::Value) -> String {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        let config = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "olmv2",
            "clusters": [{"name": "olmv2", "cluster": {"server": self.url, "certificate-authority-data": ca}}],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": "olmv2", "context": {"cluster": "olmv2", "user": "user", "namespace": "default"}}],
        });
        serde_yaml_ng::to_string(&config).unwrap_or_default()
    }

    /// A kubeconfig that authenticates with a client certificate for `username` in `groups`.
    pub fn user_kubeconfig(&self, username: &str, groups: &[&str]) -> String {
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::STANDARD;
        match self.authority.client_certificate(username, groups) {
            Ok((cert, key)) => self.kubeconfig_with(
                json!({"client-certificate-data": engine.encode(cert), "client-key-data": engine.encode(key)}),
            ),
            Err(error) => {
                tracing::error!(%error, "could not issue a client certificate");
                String::new()
            }
        }
    }

    /// A kubeconfig that authenticates with a bearer token (a static one, or a ServiceAccount's).
    pub fn token_kubeconfig(&self, token: &str) -> String {
        self.kubeconfig_with(json!({"token": token}))
    }

    /// A kubeconfig for `namespace-admin`, bound to the `admin` ClusterRole in `namespace` (created when missing).
    pub async fn namespace_admin_kubeconfig(&self, namespace: &str) -> Result<String, ClientError> {
        let client = self.client().await?;
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
        let wanted: k8s_openapi::api::core::v1::Namespace =
            serde_json::from_value(json!({"metadata": {"name": namespace}})).map_err(kube::Error::SerdeError)?;
        match namespaces.create(&kube::api::PostParams::default(), &wanted).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(other) => return Err(other.into()),
        }
        let bindings: kube::Api<k8s_openapi::api::rbac::v1::RoleBinding> = kube::Api::namespaced(client, namespace);
        let binding: k8s_openapi::api::rbac::v1::RoleBinding =
            serde_json::from_value(json!({"metadata": {"name": "namespace-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "namespace-admin"}]}))
            .map_err(kube::Error::SerdeError)?;
        bindings
            .patch(
                "namespace-admin",
                &kube::api::PatchParams::apply("olmv2-control-plane").force(),
                &kube::api::Patch::Apply(&binding),
            )
            .await?;
        Ok(self.user_kubeconfig("namespace-admin", &[]))
    }

    /// A kube client from a kubeconfig.
    pub async fn client_for(kubeconfig: &str) -> Result<kube::Client, ClientError> {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(kubeconfig)?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// A kube client for this control plane, as the kubeconfig's user.
    pub async fn client(&self) -> Result<kube::Client, ClientError> {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.kubeconfig())?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }

    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), StartError> {
        std::fs::write(path, self.kubeconfig())
            .map_err(|source| StartError::Kubeconfig { path: path.to_owned(), source })
    }
}

/// How this server authenticates, for `kube-system/extension-apiserver-authentication`: client certificates signed
/// by the cluster CA, and the front proxy as kubeadm configures kube-apiserver's request-header flags (its CA, its
/// client certificate's name, `X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-`; no uid headers, which
/// kube-apiserver 1.33 then publishes as `[]`).
fn authentication_info(client_ca: &str, front_proxy_ca: &str) -> ClusterAuthenticationInfo {
    let one = |value: &str| vec![value.to_owned()];
    ClusterAuthenticationInfo {
        client_ca: client_ca.to_owned(),
        request_header_ca: front_proxy_ca.to_owned(),
        request_header_username_headers: one("X-Remote-User"),
        request_header_uid_headers: Vec::new(),
        request_header_group_headers: one("X-Remote-Group"),
        request_header_extra_header_prefixes: one("X-Remote-Extra-"),
        request_header_allowed_names: one(FRONT_PROXY_CLIENT),
    }
}

/// The namespaces every cluster has, with their default ServiceAccounts, the default RBAC policy, and what the
/// controllers publish (a first pass of them).
async fn bootstrap(api: &ApiServer, published: &Published, address: std::net::SocketAddr) {
    for role in policy::cluster_roles() {
        if let Err(error) = api.store.create(&policy::cluster_roles_id(), role) {
            tracing::warn!(%error, "could not create a default ClusterRole");
        }
    }
    let bindings = crate::storage::store::ResourceId::new("rbac.authorization.k8s.io", "clusterrolebindings");
    for binding in policy::cluster_role_bindings() {
        if let Err(error) = api.store.create(&bindings, binding) {
            tracing::warn!(%error, "could not create a default ClusterRoleBinding");
        }
    }
    let Some(namespaces) = api.resources().lookup("", "v1", "namespaces").cloned() else { return };
    let options = WriteOptions::internal("olmv2-control-plane");
    for name in INITIAL_NAMESPACES {
        let target = Target { resource: namespaces.clone(), namespace: String::new(), name: None, subresource: None };
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}});
        if let Err(error) = api.create(&target, namespace, &options).await {
            tracing::warn!(%error, name, "could not create a start-up namespace");
        }
    }
    let roles = crate::storage::store::ResourceId::new("rbac.authorization.k8s.io", "roles");
    for role in policy::namespace_roles() {
        if let Err(error) = api.store.create(&roles, role) {
            tracing::warn!(%error, "could not create a default Role");
        }
    }
    let role_bindings = crate::storage::store::ResourceId::new("rbac.authorization.k8s.io", "rolebindings");
    for binding in policy::namespace_role_bindings() {
        if let Err(error) = api.store.create(&role_bindings, binding) {
            tracing::warn!(%error, "could not create a default RoleBinding");
        }
    }
    publish_api_service(api, address).await;
    controllers::reconcile(api, published, true).await;
}

/// The `kubernetes` Service of the `default` namespace, which kube-apiserver keeps on the service CIDR's first
/// address, and its Endpoints: this server.
async fn publish_api_service(api: &ApiServer, address: std::net::SocketAddr) {
    let options = WriteOptions::internal("kube-apiserver");
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": address.port()}]}});
    let endpoints = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": address.ip().to_string()}], "ports": [{"name": "https", "port": address.port(), "protocol": "TCP"}]}]});
    for (plural, object) in [("services", service), ("endpoints", endpoints)] {
        let Some(resource) = api.resources().lookup("", "v1", plural).cloned() else { continue };
        let target = Target { resource, namespace: "default".to_owned(), name: None, subresource: None };
        if let Err(error) = api.create(&target, object, &options).await {
            tracing::warn!(%error, plural, "could not publish the kubernetes service");
        }
    }
}
