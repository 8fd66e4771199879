//! HTTPS requests the control plane makes itself (admission webhooks, aggregated API servers): trust from a PEM
//! `caBundle` (or none, when a backend is marked insecure), an optional client certificate, a deadline, and the
//! cluster's service names resolved to the endpoints the control plane was given (there is no cluster network).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

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

/// The TLS client configuration of a trust: built once per CA bundle and client certificate (parsing the roots and
/// building a configuration per request cost as much as the request).
fn config(trust: &Trust<'_>, key: &TrustKey) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut configs = CONFIGS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(config) = configs.get(key) {
        return Ok(config.clone());
    }
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
    let config = Arc::new(config);
    if configs.len() >= MAX_ENTRIES {
        configs.clear();
    }
    configs.insert(key.clone(), config.clone());
    Ok(config)
}

/// A CA bundle and a client certificate.
type TrustKey = (Option<Vec<u8>>, Option<Vec<u8>>);

impl Trust<'_> {
    fn key(&self) -> TrustKey {
        (self.ca_bundle.map(<[u8]>::to_vec), self.client.map(|identity| identity.cert_der.to_vec()))
    }
}

/// Where a connection leads and whom it trusts: a connection is reused only for the same of both.
#[derive(Clone, PartialEq, Eq, Hash)]
struct ConnectionKey {
    address: SocketAddr,
    server_name: String,
    trust: TrustKey,
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// How many configurations, and idle connections per destination, are kept.
const MAX_ENTRIES: usize = 64;
const MAX_IDLE: usize = 8;
/// How long a connection is kept idle: below the 30 seconds after which servers (hyper's, Go's) close a
/// connection that sends no request, so that a kept connection is seldom found closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(15);

static CONFIGS: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<TrustKey, Arc<rustls::ClientConfig>>>> =
    std::sync::LazyLock::new(Default::default);

/// Idle connections, kept after a whole answer was read, as kube-apiserver's clients of webhooks and aggregated API
/// servers keep theirs (a TCP and TLS handshake per admission call made half of a create's cost).
type Idle = std::collections::HashMap<ConnectionKey, Vec<(Sender, Instant)>>;
static IDLE: std::sync::LazyLock<std::sync::Mutex<Idle>> = std::sync::LazyLock::new(Default::default);

fn checkout(key: &ConnectionKey) -> Option<Sender> {
    let mut idle = IDLE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let senders = idle.get_mut(key)?;
    while let Some((sender, since)) = senders.pop() {
        if sender.is_ready() && !sender.is_closed() && since.elapsed() < IDLE_TIMEOUT {
            return Some(sender);
        }
    }
    None
}

fn checkin(key: ConnectionKey, sender: Sender) {
    if sender.is_closed() {
        return;
    }
    let mut idle = IDLE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if idle.len() >= MAX_ENTRIES && !idle.contains_key(&key) {
        // Connections to servers that went away are closed: drop them with their destinations.
        idle.retain(|_, senders| {
            senders.retain(|(sender, since)| !sender.is_closed() && since.elapsed() < IDLE_TIMEOUT);
            !senders.is_empty()
        });
    }
    let senders = idle.entry(key).or_default();
    if senders.len() < MAX_IDLE {
        senders.push((sender, Instant::now()));
    }
}

/// Opens a connection: TCP, TLS verified by `config` for the destination's server name, HTTP/1.1.
async fn connect(destination: &Destination, config: Arc<rustls::ClientConfig>) -> Result<Sender, String> {
    let server_name =
        rustls::pki_types::ServerName::try_from(destination.server_name.clone()).map_err(|e| e.to_string())?;
    let stream = tokio::net::TcpStream::connect(destination.address)
        .await
        .map_err(|e| format!("dial tcp {}: {e}", destination.address))?;
    // As Go dials (TCP_NODELAY by default).
    let _ = stream.set_nodelay(true);
    let tls =
        tokio_rustls::TlsConnector::from(config).connect(server_name, stream).await.map_err(|e| format!("tls: {e}"))?;
    let (sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "outbound connection ended");
        }
    });
    Ok(sender)
}

fn with_destination(
    destination: &Destination,
    request: http::request::Builder,
    body: Bytes,
) -> Result<hyper::Request<Full<Bytes>>, String> {
    request
        .uri(destination.path_and_query.as_str())
        .header("host", destination.server_name.as_str())
        .body(Full::new(body))
        .map_err(|e| e.to_string())
}

/// Sends one HTTPS request on a connection of its own and returns the response with its body streaming (a proxied
/// answer, which may be a watch, keeps its connection).
pub async fn send(
    destination: &Destination,
    trust: &Trust<'_>,
    request: http::request::Builder,
    body: Bytes,
    timeout: Duration,
) -> Result<hyper::Response<hyper::body::Incoming>, String> {
    let config = config(trust, &trust.key())?;
    let exchange = async {
        let mut sender = connect(destination, config).await?;
        sender.send_request(with_destination(destination, request, body)?).await.map_err(|e| e.to_string())
    };
    tokio::time::timeout(timeout, exchange).await.map_err(|_| "context deadline exceeded".to_owned())?
}

/// Sends one HTTPS request and reads the whole answer, on an idle connection to the same destination with the same
/// trust when there is one (another when that one turns out closed before the request was written), and keeps the
/// connection for the next request.
pub async fn exchange(
    destination: &Destination,
    trust: &Trust<'_>,
    request: http::request::Builder,
    body: Bytes,
    timeout: Duration,
) -> Result<(u16, Bytes), String> {
    let key = ConnectionKey {
        address: destination.address,
        server_name: destination.server_name.clone(),
        trust: trust.key(),
    };
    let config = config(trust, &key.trust)?;
    let request = with_destination(destination, request, body)?;
    let exchange = async {
        if let Some(mut sender) = checkout(&key) {
            match sender.send_request(copy(&request)).await {
                Ok(response) => return read_whole(key, sender, response).await,
                Err(error) if closed_under(&error) => {
                    tracing::debug!(%error, "a kept outbound connection was closed; sending on a new one");
                }
                Err(error) => return Err(error.to_string()),
            }
        }
        let mut sender = connect(destination, config).await?;
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        read_whole(key, sender, response).await
    };
    tokio::time::timeout(timeout, exchange).await.map_err(|_| "context deadline exceeded".to_owned())?
}

/// Reads an answer whole, then keeps its connection (ready again once the answer was read, unless the server
/// closed it).
async fn read_whole(
    key: ConnectionKey,
    mut sender: Sender,
    response: hyper::Response<hyper::body::Incoming>,
) -> Result<(u16, Bytes), String> {
    let code = response.status().as_u16();
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    if sender.ready().await.is_ok() {
        checkin(key, sender);
    }
    Ok((code, body))
}

/// Whether a request failed because its kept connection was closed under it (before it was written, or before any
/// answer): kube-apiserver's webhook client retries a reset connection too.
fn closed_under(error: &hyper::Error) -> bool {
    let reset =
        std::error::Error::source(error).and_then(|source| source.downcast_ref::<std::io::Error>()).is_some_and(|io| {
            use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
            matches!(io.kind(), BrokenPipe | ConnectionAborted | ConnectionReset)
        });
    error.is_canceled() || error.is_incomplete_message() || reset
}

/// A request again, for a second connection (the body is shared bytes).
fn copy(request: &hyper::Request<Full<Bytes>>) -> hyper::Request<Full<Bytes>> {
    let mut copy = hyper::Request::new(request.body().clone());
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    copy
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::backend::Backend;

    fn post() -> http::request::Builder {
        http::Request::builder().method("POST").header("content-type", "application/json")
    }

    fn destination(backend: &Backend, path: &str) -> Destination {
        let server_name = "hook.webhooks.svc".to_owned();
        Destination {
            address: backend.address,
            display: format!("https://{server_name}:443{path}"),
            server_name,
            path_and_query: path.to_owned(),
        }
    }

    async fn hook() -> Backend {
        let router = axum::Router::new()
            .route("/keep", axum::routing::post(|body: Bytes| async move { body }))
            .route("/close", axum::routing::post(|| async { ([("connection", "close")], "closing") }));
        Backend::start(router, &["hook.webhooks.svc"], None).await.unwrap()
    }

    #[tokio::test]
    async fn answers_read_whole_keep_their_connection_for_the_same_destination_and_trust() {
        let backend = hook().await;
        let trust = Trust { ca_bundle: Some(backend.ca_pem.as_bytes()), client: None };
        let to = destination(&backend, "/keep");
        for n in 0..3 {
            let body = Bytes::from(format!("review {n}"));
            let answer = exchange(&to, &trust, post(), body.clone(), Duration::from_secs(5)).await.unwrap();
            assert_eq!(answer, (200, body));
        }
        assert_eq!(backend.connections.load(Ordering::Relaxed), 1, "one connection for three requests");

        // Another trust (no verification) is another connection, never the verified one.
        let unverified = Trust { ca_bundle: None, client: None };
        exchange(&to, &unverified, post(), Bytes::from("x"), Duration::from_secs(5)).await.unwrap();
        assert_eq!(backend.connections.load(Ordering::Relaxed), 2);

        // A CA that did not sign the server's certificate fails, kept connections or not.
        let stranger = hook().await;
        let wrong = Trust { ca_bundle: Some(stranger.ca_pem.as_bytes()), client: None };
        let refused = exchange(&to, &wrong, post(), Bytes::from("x"), Duration::from_secs(5)).await;
        assert!(refused.is_err_and(|error| error.starts_with("tls:")), "verified per trust");
    }

    #[tokio::test]
    async fn a_connection_the_server_closes_is_not_kept() {
        let backend = hook().await;
        let trust = Trust { ca_bundle: Some(backend.ca_pem.as_bytes()), client: None };
        let to = destination(&backend, "/close");
        for _ in 0..2 {
            let answer = exchange(&to, &trust, post(), Bytes::new(), Duration::from_secs(5)).await.unwrap();
            assert_eq!(answer, (200, Bytes::from("closing")));
        }
        assert_eq!(backend.connections.load(Ordering::Relaxed), 2, "a new connection after the server closed one");
    }
}
