//! The HTTPS server: an axum router served over TLS with a [`ServingCertificate`], HTTP on each accepted connection.
//! Its clients are API servers, which retry: a failed handshake or a broken connection is logged and forgotten,
//! never the end of the server. A server may also ask clients for a certificate and verify it against a CA (the
//! aggregated API server's front-proxy CA): the certificate a connection presented and the server verified is
//! given to each of its requests as a [`PeerCertificate`] extension; a connection without one is served too, with
//! none, for the handlers to refuse.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio_rustls::rustls;

use super::ServingCertificate;

/// The client certificate (DER) a connection presented, verified against the server's client CA; `None` when it
/// presented none or the server verifies none.
#[derive(Clone, Debug, Default)]
pub struct PeerCertificate(pub Option<Vec<u8>>);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the serving certificate is not usable: {reason}")]
    Certificate { reason: String },
    #[error("failed to listen on {address}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// An HTTPS server running in its own task; it stops when dropped, and its open connections with it (an API server
/// keeps connections alive: served on, they would let a stopped controller's webhook answer as a killed one could
/// not). Its certificate can be replaced while it runs: every handshake after [`CertificateSlot::set`] presents the
/// new one.
pub struct HttpsServer {
    /// Where it listens (the port chosen when the requested one was 0).
    pub address: SocketAddr,
    certificate: Arc<Presented>,
    task: tokio::task::JoinHandle<()>,
}

/// The certificate handshakes present now.
#[derive(Debug)]
struct Presented(std::sync::RwLock<Arc<rustls::sign::CertifiedKey>>);

impl rustls::server::ResolvesServerCert for Presented {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone())
    }
}

/// The certificate and key of `certificate`, ready to present.
fn certified_key(certificate: &ServingCertificate) -> Result<Arc<rustls::sign::CertifiedKey>, ServeError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let unusable = |reason: String| ServeError::Certificate { reason };
    let chain = CertificateDer::pem_slice_iter(certificate.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unusable(format!("tls.crt: {e}")))?;
    let key =
        PrivateKeyDer::from_pem_slice(certificate.key_pem.as_bytes()).map_err(|e| unusable(format!("tls.key: {e}")))?;
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    let certified = rustls::sign::CertifiedKey::from_der(chain, key, &provider).map_err(|e| unusable(e.to_string()))?;
    Ok(Arc::new(certified))
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HttpsServer {
    /// Listens on `address` and serves `router` with `certificate`. `name` tells its logs from another server's.
    pub async fn start(
        name: &'static str,
        address: SocketAddr,
        certificate: &ServingCertificate,
        router: Router,
    ) -> Result<Self, ServeError> {
        Self::start_verifying_clients(name, address, certificate, None, router).await
    }

    /// [`HttpsServer::start`], asking clients for a certificate signed by `client_ca_pem` (PEM).
    pub async fn start_verifying_clients(
        name: &'static str,
        address: SocketAddr,
        certificate: &ServingCertificate,
        client_ca_pem: Option<&str>,
        router: Router,
    ) -> Result<Self, ServeError> {
        let presented = Arc::new(Presented(std::sync::RwLock::new(certified_key(certificate)?)));
        let acceptor = acceptor(presented.clone(), client_ca_pem)?;
        let listener =
            tokio::net::TcpListener::bind(address).await.map_err(|source| ServeError::Listen { address, source })?;
        let bound = listener.local_addr().map_err(|source| ServeError::Listen { address, source })?;
        let task = tokio::spawn(serve(name, listener, acceptor, router));
        Ok(Self { address: bound, certificate: presented, task })
    }

    /// The handle that replaces the certificate it presents.
    pub fn certificate_slot(&self) -> CertificateSlot {
        CertificateSlot(self.certificate.clone())
    }
}

/// Replaces the certificate a running [`HttpsServer`] presents.
#[derive(Clone, Debug)]
pub struct CertificateSlot(Arc<Presented>);

impl CertificateSlot {
    /// Presents `certificate` from the next handshake on (connections already open keep theirs).
    pub fn set(&self, certificate: &ServingCertificate) -> Result<(), ServeError> {
        let certified = certified_key(certificate)?;
        *self.0 .0.write().unwrap_or_else(std::sync::PoisonError::into_inner) = certified;
        Ok(())
    }
}

fn acceptor(presented: Arc<Presented>, client_ca_pem: Option<&str>) -> Result<tokio_rustls::TlsAcceptor, ServeError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let unusable = |reason: String| ServeError::Certificate { reason };
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| unusable(e.to_string()))?;
    let builder = match client_ca_pem {
        None => builder.with_no_client_auth(),
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for certificate in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let certificate = certificate.map_err(|e| unusable(format!("client CA: {e}")))?;
                roots.add(certificate).map_err(|e| unusable(format!("client CA: {e}")))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| unusable(format!("client CA: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_cert_resolver(presented);
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

async fn serve(
    name: &'static str,
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    router: Router,
) {
    // Each connection is served in a task of this set, which aborts them all when the server's task is aborted.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                // Answers are written whole or in large chunks; Nagle's algorithm would only hold back their last
                // small segment until the peer's delayed ACK (40 ms).
                let _ = stream.set_nodelay(true);
                stream
            }
            Err(error) => {
                tracing::warn!(server = name, %error, "accept failed");
                continue;
            }
        };
        let (acceptor, router) = (acceptor.clone(), router.clone());
        connections.spawn(async move {
            let stream = match acceptor.accept(stream).await {
                Ok(stream) => stream,
                Err(error) => return tracing::debug!(server = name, %error, "TLS handshake failed"),
            };
            let peer = stream.get_ref().1.peer_certificates().and_then(|chain| chain.first()).map(|leaf| leaf.to_vec());
            let router = router.layer(axum::Extension(PeerCertificate(peer)));
            let service = hyper_util::service::TowerToHyperService::new(router);
            if let Err(error) = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(server = name, %error, "connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::{service_dns_names, CertificateAuthority, CertificateIssuer};

    #[tokio::test]
    async fn a_certificate_that_is_not_pem_is_refused_before_listening() {
        let certificate = ServingCertificate { cert_pem: "nonsense".into(), key_pem: "nonsense".into(), ca_pem: None };
        let address: SocketAddr = ([127, 0, 0, 1], 0).into();
        let error = HttpsServer::start("test", address, &certificate, Router::new()).await.err().expect("refused");
        assert!(matches!(error, ServeError::Certificate { .. }), "{error}");
    }

    #[tokio::test]
    async fn an_issued_certificate_serves_on_the_port_chosen() {
        let authority = CertificateAuthority::new("test-ca").expect("CA");
        let certificate = authority.issue(&service_dns_names("test", "default")).expect("issued");
        let address: SocketAddr = ([127, 0, 0, 1], 0).into();
        let server = HttpsServer::start("test", address, &certificate, Router::new()).await.expect("serving");
        assert_ne!(server.address.port(), 0);
        assert!(tokio::net::TcpStream::connect(server.address).await.is_ok());
    }

    /// A request on a kept-alive connection, and the answer's bytes read until `ok` ends them (none if it closed).
    async fn ask<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(stream: &mut S) -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let request = "GET / HTTP/1.1\r\nHost: test\r\nConnection: keep-alive\r\n\r\n";
        if stream.write_all(request.as_bytes()).await.is_err() {
            return String::new();
        }
        let mut answer = Vec::new();
        let mut buffer = [0_u8; 1024];
        while !answer.ends_with(b"ok") {
            match tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buffer)).await {
                Ok(Ok(read)) if read > 0 => answer.extend_from_slice(&buffer[..read]),
                _ => break,
            }
        }
        String::from_utf8_lossy(&answer).into_owned()
    }

    #[tokio::test]
    async fn a_dropped_server_answers_nothing_more_on_a_connection_kept_alive() {
        let authority = CertificateAuthority::new("test-ca").expect("CA");
        let certificate = authority.issue(&service_dns_names("test", "default")).expect("issued");
        let router = Router::new().route("/", axum::routing::get(|| async { "ok" }));
        let address: SocketAddr = ([127, 0, 0, 1], 0).into();
        let server = HttpsServer::start("test", address, &certificate, router).await.expect("serving");

        let mut roots = rustls::RootCertStore::empty();
        use rustls::pki_types::pem::PemObject;
        for ca in rustls::pki_types::CertificateDer::pem_slice_iter(authority.ca_pem().as_bytes()) {
            roots.add(ca.expect("CA PEM")).expect("CA added");
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(server.address).await.expect("connected");
        let name = rustls::pki_types::ServerName::try_from("test.default.svc").expect("a name");
        let mut stream = connector.connect(name, tcp).await.expect("TLS");
        assert!(ask(&mut stream).await.starts_with("HTTP/1.1 200"), "served while running");

        drop(server);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let after = ask(&mut stream).await;
        assert!(after.is_empty(), "answered after the server was dropped: {after}");
    }
}
