//! Certificates and the HTTPS server that presents them. One certificate authority type issues serving certificates
//! (`authority`): the approval webhook's at start, and those of the webhooks bundles bring; a certificate can also be
//! read from a mounted Secret (cert-manager's). A generated certificate is shared by every replica through a Secret
//! (`shared`), so that all present one the `caBundle` trusts. One HTTPS server (`server`) serves an axum router with
//! such a certificate: the webhook's routes and the aggregated API server's. The DNS names a Service is reached
//! by and the `caBundle` form clients trust a CA in are built here, so every certificate and every client configuration
//! agree on them. rcgen makes the certificates; rustls with aws-lc-rs, the crypto provider of the whole binary, serves
//! them.

pub mod authority;
pub mod rotation;
pub mod server;
pub mod shared;

use base64::Engine as _;

pub use authority::{
    CaOptions, CertificateAuthority, CertificateError, CertificateIssuer, ReadCertificateError, ServingCertificate,
};
pub use server::{CertificateSlot, HttpsServer, PeerCertificate, ServeError};

/// The name the API server reaches a Service by, `<service>.<namespace>.svc`: what webhook and APIService
/// `service` references resolve to, and so the first name of its serving certificate.
pub fn service_host(service: &str, namespace: &str) -> String {
    format!("{service}.{namespace}.svc")
}

/// Every DNS name a Service answers to inside the cluster, [`service_host`] first: the names its serving certificate
/// carries.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    let host = service_host(service, namespace);
    let cluster_local = format!("{host}.cluster.local");
    vec![host, cluster_local, format!("{service}.{namespace}")]
}

/// The certificates of a PEM text (a bundle may hold several), each as its own PEM block.
pub fn pem_certificates(pem: &str) -> Vec<String> {
    let mut certificates = Vec::new();
    let mut current = String::new();
    for line in pem.lines() {
        if line.starts_with("-----BEGIN CERTIFICATE-----") {
            current.clear();
        }
        current.push_str(line);
        current.push('\n');
        if line.starts_with("-----END CERTIFICATE-----") {
            certificates.push(std::mem::take(&mut current));
        }
    }
    certificates
}

/// When the first certificate of `pem` starts and stops being valid (Unix seconds), if it is one.
pub fn validity(pem: &str) -> Option<(i64, i64)> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
    let certificate = block.parse_x509().ok()?;
    let validity = certificate.validity();
    Some((validity.not_before.timestamp(), validity.not_after.timestamp()))
}

/// Whether the first certificate of `certificate_pem` was signed by the key of the first of `ca_pem`.
pub fn signed_by(certificate_pem: &str, ca_pem: &str) -> bool {
    let parse = |pem: &str| x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok().map(|(_, block)| block);
    let (Some(certificate), Some(ca)) = (parse(certificate_pem), parse(ca_pem)) else { return false };
    let (Ok(certificate), Ok(ca)) = (certificate.parse_x509(), ca.parse_x509()) else { return false };
    certificate.verify_signature(Some(ca.public_key())).is_ok()
}

/// A PEM as the base64 of a `caBundle` field (webhook configurations, CRD conversion, APIServices).
pub fn ca_bundle(pem: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(pem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_is_named_by_its_svc_host_first() {
        assert_eq!(
            service_dns_names("olmv2-webhook", "olmv2-system"),
            [
                "olmv2-webhook.olmv2-system.svc",
                "olmv2-webhook.olmv2-system.svc.cluster.local",
                "olmv2-webhook.olmv2-system"
            ]
        );
    }

    #[test]
    fn a_ca_bundle_is_the_standard_base64_of_the_pem() {
        assert_eq!(ca_bundle("ab"), "YWI=");
        assert_eq!(ca_bundle("abcd"), "YWJjZA==");
    }
}
