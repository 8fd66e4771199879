//! HTTPS requests the control plane makes itself (admission webhooks, aggregated API servers): trust from a PEM
//! `caBundle` (or none, when a backend is marked insecure), an optional client certificate, a deadline, and the
//! cluster's service names resolved to the endpoints the control plane was given (there is no cluster network).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio_rustls::rustls;

/// Service endpoints: `(namespace, name)` to where that service's pods listen.
#[derive(Default)]
pub struct Endpoints(RwLock<BTreeMap<(String, String), SocketAddr>>);

impl Endpoints {
    pub fn set(&self, namespace: &str, name: &str, address: SocketAddr) {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((namespace.to_owned(), name.to_owned()), address);
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<SocketAddr> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(namespace.to_owned(), name.to_owned()))
            .copied()
    }
}

/// Where to send a request: the address to connect to, the host name TLS verifies, the path and query.
#[derive(Clone, Debug)]
pub struct Destination {
    pub address: SocketAddr,
    pub server_name: String,
    pub path_and_query: String,
    /// How the request is named in errors, as kube-apiserver names it (`https://svc.ns.svc:443/path`).
    pub display: String,
}

/// A client identity for mutual TLS.
#[derive(Clone)]
pub struct ClientIdentity {
    pub cert_der: rustls::pki_types::CertificateDer<'static>,
    pub key_der: Arc<rustls::pki_types::PrivateKeyDer<'static>>,
}

impl ClientIdentity {
    /// The identity of a PEM certificate (its first) and key.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, String> {
        use rustls::pki_types::pem::PemObject;
        let cert_der = rustls::pki_types::CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| format!("certificate: {e}"))?;
        let key_der =
            rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| format!("key: {e}"))?;
        Ok(Self { cert_der, key_der: Arc::new(key_der) })
    }
}

fn roots(ca_bundle_pem: &[u8]) -> Result<rustls::RootCertStore, String> {
    use rustls::pki_types::pem::PemObject;
    let mut store = rustls::RootCertStore::empty();
    for certificate in rustls::pki_types::CertificateDer::pem_slice_iter(ca_bundle_pem) {
        let certificate = certificate.map_err(|e| format!("invalid caBundle: {e}"))?;
        store.add(certificate).map_err(|e| format!("invalid caBundle: {e}"))?;
    }
    Ok(store)
}

/// Accepts any server certificate, for backends registered with `insecureSkipTLSVerify`.
#[derive(Debug)]
struct SkipVerification(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for SkipVerification {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The TLS settings of one request.
pub struct Trust<'a> {
    /// PEM certificates to trust; `None` skips verification.
    pub ca_bundle: Option<&'a [u8]>,
    pub client: Option<&'a ClientIdentity>,
}

/// Sends one HTTPS request and returns the response with its body streaming.
pub async fn send(
    destination: &Destination,
    trust: &Trust<'_>,
    request: http::request::Builder,
    body: Bytes,
    timeout: Duration,
) -> Result<hyper::Response<hyper::body::Incoming>, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match trust.ca_bundle {
        Some(pem) => builder.with_root_certificates(roots(pem)?),
        None => builder.dangerous().with_custom_certificate_verifier(Arc::new(SkipVerification(provider))),
    };
    let config = match trust.client {
        Some(identity) => builder
            .with_client_auth_cert(vec![identity.cert_der.clone()], identity.key_der.clone_key())
            .map_err(|e| e.to_string())?,
        None => builder.with_no_client_auth(),
    };
    let server_name =
        rustls::pki_types::ServerName::try_from(destination.server_name.clone()).map_err(|e| e.to_string())?;
    let exchange = async {
        let stream = tokio::net::TcpStream::connect(destination.address)
            .await
            .map_err(|e| format!("dial tcp {}: {e}", destination.address))?;
        // As Go dials (TCP_NODELAY by default).
        let _ = stream.set_nodelay(true);
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(server_name, stream)
            .await
            .map_err(|e| format!("tls: {e}"))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "outbound connection ended");
            }
        });
        let request = request
            .uri(destination.path_and_query.as_str())
            .header("host", destination.server_name.as_str())
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        sender.send_request(request).await.map_err(|e| e.to_string())
    };
    tokio::time::timeout(timeout, exchange).await.map_err(|_| "context deadline exceeded".to_owned())?
}

/// Sends one HTTPS request and reads the whole answer.
pub async fn exchange(
    destination: &Destination,
    trust: &Trust<'_>,
    request: http::request::Builder,
    body: Bytes,
    timeout: Duration,
) -> Result<(u16, Bytes), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let response = send(destination, trust, request, body, timeout).await?;
    let code = response.status().as_u16();
    let body = tokio::time::timeout_at(deadline, response.into_body().collect())
        .await
        .map_err(|_| "context deadline exceeded".to_owned())?
        .map_err(|e| e.to_string())?;
    Ok((code, body.to_bytes()))
}
