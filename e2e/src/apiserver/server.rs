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

use super::api::{ApiServer, Target, WriteOptions};
use super::{controllers, http};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("could not make the serving certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("could not set up TLS: {0}")]
    Tls(#[from] rustls::Error),
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

/// How to start.
#[derive(Clone, Debug)]
pub struct Options {
    pub address: SocketAddr,
    pub history_limit: usize,
    pub bookmark_interval: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            history_limit: 100_000,
            bookmark_interval: Duration::from_secs(60),
        }
    }
}

/// A running control plane; it stops when dropped.
pub struct ControlPlane {
    pub api: Arc<ApiServer>,
    pub url: String,
    pub ca_pem: String,
    /// The bearer token the kubeconfig carries.
    pub token: String,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

struct Certificates {
    ca_pem: String,
    cert_der: rustls::pki_types::CertificateDer<'static>,
    key_der: rustls::pki_types::PrivateKeyDer<'static>,
}

fn certificates() -> Result<Certificates, rcgen::Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "olmv2-control-plane-ca");
    let ca_pem = ca_params.self_signed(&ca_key)?.pem();
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
    params.distinguished_name.push(rcgen::DnType::CommonName, "kube-apiserver");
    let issuer = Issuer::from_params(&ca_params, &ca_key);
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Certificates {
        ca_pem,
        cert_der: cert.der().clone(),
        key_der: rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    })
}

const INITIAL_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

impl ControlPlane {
    pub async fn start(options: Options) -> Result<Self, StartError> {
        let certificates = certificates()?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![certificates.cert_der], certificates.key_der)?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = TcpListener::bind(options.address)
            .await
            .map_err(|source| StartError::Listen { address: options.address.to_string(), source })?;
        let address = listener
            .local_addr()
            .map_err(|source| StartError::Listen { address: options.address.to_string(), source })?;
        let api = Arc::new(ApiServer::new(options.history_limit, options.bookmark_interval));
        bootstrap(&api);
        let router = http::router(api.clone());
        let server = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let acceptor = acceptor.clone();
                let router = router.clone();
                tokio::spawn(async move {
                    let Ok(tls_stream) = acceptor.accept(stream).await else { return };
                    let service = hyper_util::service::TowerToHyperService::new(router);
                    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    if let Err(error) = builder.serve_connection(TokioIo::new(tls_stream), service).await {
                        tracing::debug!(%error, "connection ended with an error");
                    }
                });
            }
        });
        let controllers = tokio::spawn(controllers::run(api.clone()));
        Ok(Self {
            api,
            url: format!("https://{address}"),
            ca_pem: certificates.ca_pem,
            token: format!("olmv2-admin-{}", uuid::Uuid::new_v4().simple()),
            tasks: vec![server, controllers],
        })
    }

    /// A kubeconfig for this control plane.
    pub fn kubeconfig(&self) -> String {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        let config = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "olmv2",
            "clusters": [{"name": "olmv2", "cluster": {"server": self.url, "certificate-authority-data": ca}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "olmv2", "context": {"cluster": "olmv2", "user": "admin", "namespace": "default"}}],
        });
        serde_yaml_ng::to_string(&config).unwrap_or_default()
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

/// The namespaces every cluster has, with their default ServiceAccounts.
fn bootstrap(api: &ApiServer) {
    let Some(namespaces) = api.resources().lookup("", "v1", "namespaces").cloned() else { return };
    let options = WriteOptions {
        field_manager: "olmv2-control-plane".into(),
        field_manager_given: true,
        ..WriteOptions::default()
    };
    for name in INITIAL_NAMESPACES {
        let target = Target { resource: namespaces.clone(), namespace: String::new(), name: None, subresource: None };
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}});
        if let Err(error) = api.create(&target, namespace, &options) {
            tracing::warn!(%error, name, "could not create a start-up namespace");
        }
    }
    controllers::reconcile(api);
}
