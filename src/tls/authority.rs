//! Serving certificates: a certificate authority generated in memory, whose certificate goes into the `caBundle` of
//! whatever calls the server, and leaf certificates it signs for a Service's DNS names; or a certificate mounted from
//! a Secret, whose CA someone else (cert-manager's CA injector) puts into those `caBundle`s.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SerialNumber};
use sha2::{Digest, Sha256};

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

/// How a CA is made, and what it writes in every certificate it issues beyond the names.
#[derive(Clone, Debug, Default)]
pub struct CaOptions {
    /// The CA's common name; `{serial}` in it stands for its serial number in hex (OLM names its CAs so).
    pub common_name: String,
    /// The organization of the CA and of its certificates.
    pub organization: Option<String>,
    /// How long the CA and its certificates are valid from their making (unset: rcgen's default, valid until
    /// the year 4096).
    pub validity: Option<Duration>,
}

/// A CA generated in memory: the one certificate authority of the project (the webhook's and the aggregated API
/// server's, a bundle's rendering, and OLM's per-install CAs for the serving certificates of CSVs). It lives as
/// long as its user needs it; nothing keeps its key.
pub struct CertificateAuthority {
    params: CertificateParams,
    key: KeyPair,
    ca_pem: String,
    organization: Option<String>,
    validity: Option<Duration>,
}

impl CertificateAuthority {
    /// A CA named `common_name`, its certificates valid as long as rcgen makes them by default.
    pub fn new(common_name: &str) -> Result<Self, CertificateError> {
        Self::with_options(&CaOptions { common_name: common_name.to_owned(), ..CaOptions::default() })
    }

    /// A CA made as `options` say, with OLM's key usages (certificate signing, digital signature, key
    /// encipherment) and a positive serial number taken from its key.
    pub fn with_options(options: &CaOptions) -> Result<Self, CertificateError> {
        let failed = |source| CertificateError { names: vec![options.common_name.clone()], source };
        let key = KeyPair::generate().map_err(failed)?;
        let serial = serial_of(key.public_key_raw());
        let hex: String = serial.iter().map(|byte| format!("{byte:02x}")).collect();
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
        params
            .distinguished_name
            .push(DnType::CommonName, options.common_name.replace("{serial}", hex.trim_start_matches('0')));
        if let Some(organization) = &options.organization {
            params.distinguished_name.push(DnType::OrganizationName, organization.as_str());
        }
        params.serial_number = Some(SerialNumber::from(serial.to_vec()));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        valid_for(&mut params, options.validity);
        let ca_pem = params.self_signed(&key).map_err(failed)?.pem();
        Ok(Self { params, key, ca_pem, organization: options.organization.clone(), validity: options.validity })
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }
}

/// A serial number: SHA-256 of the new key, cut to 16 bytes, its top bit cleared (a positive number).
fn serial_of(public_key: &[u8]) -> [u8; 16] {
    let digest = Sha256::digest(public_key);
    let mut serial = [0u8; 16];
    serial.copy_from_slice(&digest[..16]);
    serial[0] &= 0x7f;
    serial
}

/// Valid from now for `validity`, when one is set.
fn valid_for(params: &mut CertificateParams, validity: Option<Duration>) {
    if let Some(validity) = validity {
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now;
        params.not_after = now + validity;
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
        if let Some(organization) = &self.organization {
            params.distinguished_name.push(DnType::OrganizationName, organization.as_str());
        }
        params.key_usages = vec![KeyUsagePurpose::KeyEncipherment, KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        valid_for(&mut params, self.validity);
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
