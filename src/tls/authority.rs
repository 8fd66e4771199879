//! Serving certificates: a certificate authority generated in memory, whose certificate goes into the `caBundle` of
//! whatever calls the server, and leaf certificates it signs for a Service's DNS names; or a certificate mounted from
//! a Secret, whose CA someone else (cert-manager's CA injector) puts into those `caBundle`s.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// A serving certificate, all PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServingCertificate {
    /// The certificate (chain) the server presents.
    pub cert_pem: String,
    pub key_pem: String,
    /// The CA that signed it, when this process knows it and so writes the `caBundle` of the server's clients
    /// itself. `None` for a mounted certificate: its CA is injected by cert-manager.
    pub ca_pem: Option<String>,
}

impl ServingCertificate {
    /// `tls.crt` and `tls.key` of a mounted Secret in `dir`.
    pub fn read_mounted(dir: &Path) -> Result<Self, ReadCertificateError> {
        let read = |file: &str| {
            let path = dir.join(file);
            std::fs::read_to_string(&path).map_err(|source| ReadCertificateError { path, source })
        };
        Ok(Self { cert_pem: read("tls.crt")?, key_pem: read("tls.key")?, ca_pem: None })
    }
}

#[derive(Debug, thiserror::Error)]
#[error("failed to issue a serving certificate for {names:?}")]
pub struct CertificateError {
    pub names: Vec<String>,
    #[source]
    pub source: rcgen::Error,
}

#[derive(Debug, thiserror::Error)]
#[error("failed to read the certificate in {path}")]
pub struct ReadCertificateError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Something that issues serving certificates. The Install reconciler supplies one that returns the certificates it
/// already stored, so that rendering again does not rotate them.
pub trait CertificateIssuer {
    fn issue(&self, dns_names: &[String]) -> Result<ServingCertificate, CertificateError>;
}

/// A CA generated in memory. It lives as long as the process (the webhook's) or one rendering (a bundle's); nothing
/// keeps its key.
pub struct CertificateAuthority {
    params: CertificateParams,
    key: KeyPair,
    ca_pem: String,
}

impl CertificateAuthority {
    pub fn new(common_name: &str) -> Result<Self, CertificateError> {
        let failed = |source| CertificateError { names: vec![common_name.to_owned()], source };
        let key = KeyPair::generate().map_err(failed)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca_pem = params.self_signed(&key).map_err(failed)?.pem();
        Ok(Self { params, key, ca_pem })
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }
}

impl CertificateIssuer for CertificateAuthority {
    fn issue(&self, dns_names: &[String]) -> Result<ServingCertificate, CertificateError> {
        let failed = |source| CertificateError { names: dns_names.to_vec(), source };
        let key = KeyPair::generate().map_err(failed)?;
        let mut params = CertificateParams::new(dns_names.to_vec()).map_err(failed)?;
        if let Some(first) = dns_names.first() {
            params.distinguished_name.push(DnType::CommonName, first.as_str());
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert_pem = params.signed_by(&key, &issuer).map_err(failed)?.pem();
        Ok(ServingCertificate { cert_pem, key_pem: key.serialize_pem(), ca_pem: Some(self.ca_pem.clone()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_certificate_directory_is_an_error_naming_the_file() {
        let error = ServingCertificate::read_mounted(Path::new("/nonexistent-olmv2-certs")).expect_err("fails");
        assert!(error.to_string().contains("tls.crt"), "{error}");
    }
}
