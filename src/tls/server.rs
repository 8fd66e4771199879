//! The HTTPS server: an axum router served over TLS with a [`ServingCertificate`], HTTP on each accepted connection.
//! Its clients are API servers, which retry: a failed handshake or a broken connection is logged and forgotten,
//! never the end of the server.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio_rustls::rustls;

use super::ServingCertificate;

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

/// An HTTPS server running in its own task; it stops when dropped.
pub struct HttpsServer {
    /// Where it listens (the port chosen when the requested one was 0).
    pub address: SocketAddr,
    task: tokio::task::JoinHandle<()>,
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
        let acceptor = acceptor(certificate)?;
        let listener =
            tokio::net::TcpListener::bind(address).await.map_err(|source| ServeError::Listen { address, source })?;
        let bound = listener.local_addr().map_err(|source| ServeError::Listen { address, source })?;
        let task = tokio::spawn(serve(name, listener, acceptor, router));
        Ok(Self { address: bound, task })
    }
}

fn acceptor(certificate: &ServingCertificate) -> Result<tokio_rustls::TlsAcceptor, ServeError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let unusable = |reason: String| ServeError::Certificate { reason };
    let chain = CertificateDer::pem_slice_iter(certificate.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unusable(format!("tls.crt: {e}")))?;
    let key =
        PrivateKeyDer::from_pem_slice(certificate.key_pem.as_bytes()).map_err(|e| unusable(format!("tls.key: {e}")))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| unusable(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| unusable(e.to_string()))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

async fn serve(
    name: &'static str,
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    router: Router,
) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(server = name, %error, "accept failed");
                continue;
            }
        };
        let (acceptor, router) = (acceptor.clone(), router.clone());
        tokio::spawn(async move {
            let stream = match acceptor.accept(stream).await {
                Ok(stream) => stream,
                Err(error) => return tracing::debug!(server = name, %error, "TLS handshake failed"),
            };
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
}
