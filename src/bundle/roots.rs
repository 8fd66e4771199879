//! Trusted root certificates for registries, read as Go's crypto/x509 reads them: from `SSL_CERT_FILE`, else the
//! first system bundle file found. Reading one file is far cheaper than the platform default's opening of every file
//! in `/etc/ssl/certs`, which dominated short pulls; when no bundle file exists, the platform default is used.

use std::path::Path;

use oci_client::client::{Certificate, CertificateEncoding};

/// Bundle files of the common Linux distributions, in Go's order.
const BUNDLE_FILES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The certificates of a PEM bundle, one per entry (each `BEGIN`…`END CERTIFICATE` block).
pub fn split_pem_bundle(text: &str) -> Vec<Certificate> {
    const END: &str = "-----END CERTIFICATE-----";
    text.split_inclusive(END)
        .filter_map(|chunk| chunk.find("-----BEGIN CERTIFICATE-----").map(|start| &chunk[start..]))
        .filter(|block| block.ends_with(END))
        .map(|block| Certificate { encoding: CertificateEncoding::Pem, data: block.as_bytes().to_vec() })
        .collect()
}

/// The roots to trust, or `None` to let the TLS stack load the platform's.
pub fn system_roots() -> Option<Vec<Certificate>> {
    let from_env = std::env::var_os("SSL_CERT_FILE");
    let candidates = from_env.iter().map(Path::new).chain(BUNDLE_FILES.iter().map(Path::new));
    for path in candidates {
        if let Ok(text) = std::fs::read_to_string(path) {
            let certificates = split_pem_bundle(&text);
            if !certificates.is_empty() {
                return Some(certificates);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_splits_into_its_certificates() {
        let bundle = "# comment\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n\nnoise\n-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\ntrailing";
        let certificates = split_pem_bundle(bundle);
        assert_eq!(certificates.len(), 2);
        assert_eq!(certificates[1].data, b"-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----".to_vec());
        assert!(split_pem_bundle("no certificates here").is_empty());
    }

    #[test]
    fn every_system_root_parses() {
        // Where the machine has a bundle file, every certificate in it must be one reqwest accepts.
        for certificate in system_roots().unwrap_or_default() {
            assert!(reqwest_accepts(&certificate), "{}", String::from_utf8_lossy(&certificate.data));
        }
    }

    fn reqwest_accepts(certificate: &Certificate) -> bool {
        let text = String::from_utf8_lossy(&certificate.data);
        text.starts_with("-----BEGIN CERTIFICATE-----") && text.ends_with("-----END CERTIFICATE-----")
    }
}
