//! HTTPS servers that play the cluster's workloads in tests (an admission webhook, an aggregated API server): an
//! axum router served on loopback with a certificate for the service's DNS name from a certificate authority made
//! here, optionally verifying client certificates against a given CA and handing the client's subject to handlers.

use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio_rustls::rustls;

/// The verified client certificate's common name, for handlers (`axum::Extension<ClientName>`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientName(pub Option<String>);

/// A running HTTPS backend; it stops when dropped.
pub struct Backend {
    pub address: SocketAddr,
    /// The CA that signed the serving certificate: a webhook's or APIService's `caBundle`.
    pub ca_pem: String,
    /// How many TLS connections it accepted.
    pub connections: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("could not make certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("could not set up TLS: {0}")]
    Tls(String),
    #[error("could not listen: {0}")]
    Listen(#[from] std::io::Error),
}

fn common_name(der: &[u8]) -> Option<String> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let name = certificate.subject().iter_common_name().next()?.as_str().ok()?.to_owned();
    Some(name)
}

impl Backend {
    /// Serves `router` with a certificate for `dns_names`; with `client_ca_pem`, requires client certificates it signed.
    pub async fn start(
        router: axum::Router,
        dns_names: &[&str],
        client_ca_pem: Option<&str>,
    ) -> Result<Self, BackendError> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "backend-ca");
        let ca_pem = ca_params.self_signed(&ca_key)?.pem();
        let key = KeyPair::generate()?;
        let names: Vec<String> = dns_names.iter().map(|n| (*n).to_owned()).collect();
        let cert = CertificateParams::new(names)?.signed_by(&key, &Issuer::from_params(&ca_params, &ca_key))?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| BackendError::Tls(e.to_string()))?;
        let builder = match client_ca_pem {
            Some(pem) => {
                use rustls::pki_types::pem::PemObject;
                let mut roots = rustls::RootCertStore::empty();
                for certificate in rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    roots
                        .add(certificate.map_err(|e| BackendError::Tls(e.to_string()))?)
                        .map_err(|e| BackendError::Tls(e.to_string()))?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| BackendError::Tls(e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let tls = builder
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .map_err(|e| BackendError::Tls(e.to_string()))?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let address = listener.local_addr()?;
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let accepted = connections.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let (acceptor, router, accepted) = (acceptor.clone(), router.clone(), accepted.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(stream).await else { return };
                    accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let name = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .and_then(|der| common_name(der));
                    let service =
                        hyper_util::service::TowerToHyperService::new(router.layer(axum::Extension(ClientName(name))));
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self { address, ca_pem, connections, task })
    }

    /// The `caBundle` field value: the CA, base64-encoded.
    pub fn ca_bundle(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }
}
