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

/// A CA generated in memory, or read back from where it was stored: the one certificate authority of the project
/// (the webhook's and the aggregated API server's, a bundle's rendering, and OLM's per-install CAs for the serving
/// certificates of CSVs). Nothing keeps its key but its user.
pub struct CertificateAuthority {
    issuer: Issuer<'static, KeyPair>,
    ca_pem: String,
    organization: Option<String>,
    validity: Option<Duration>,
    /// When the CA itself expires (Unix seconds), when known: no certificate it issues outlives it.
    not_after: Option<i64>,
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
        let not_after = options.validity.map(|_| params.not_after.unix_timestamp());
        let ca_pem = params.self_signed(&key).map_err(failed)?.pem();
        Ok(Self {
            issuer: Issuer::new(params, key),
            ca_pem,
            organization: options.organization.clone(),
            validity: options.validity,
            not_after,
        })
    }

    /// The CA whose certificate and key were stored (PEM), issuing certificates valid for `validity` (never past the
    /// CA's own expiry).
    pub fn from_pem(ca_pem: &str, key_pem: &str, validity: Duration) -> Result<Self, CertificateError> {
        let failed = |source| CertificateError { names: vec!["the stored CA".to_owned()], source };
        let key = KeyPair::from_pem(key_pem).map_err(failed)?;
        let issuer = Issuer::from_ca_cert_pem(ca_pem, key).map_err(failed)?;
        let not_after = super::validity(ca_pem).map(|(_, not_after)| not_after);
        Ok(Self { issuer, ca_pem: ca_pem.to_owned(), organization: None, validity: Some(validity), not_after })
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA's private key, PEM: for the Secret a shared CA is kept in, so that any replica can issue from it.
    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
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
        if let Some(ca_end) = self.not_after.and_then(|end| time::OffsetDateTime::from_unix_timestamp(end).ok()) {
            params.not_after = params.not_after.min(ca_end);
        }
        let cert_pem = params.signed_by(&key, &self.issuer).map_err(failed)?.pem();
        Ok(ServingCertificate { cert_pem, key_pem: key.serialize_pem(), ca_pem: Some(self.ca_pem.clone()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_ca_issues_certificates_its_certificate_verifies_and_none_outliving_it() {
        let options = CaOptions {
            common_name: "test-ca".into(),
            validity: Some(Duration::from_secs(3600)),
            ..CaOptions::default()
        };
        let made = CertificateAuthority::with_options(&options).expect("a CA");
        let stored = CertificateAuthority::from_pem(made.ca_pem(), &made.key_pem(), Duration::from_secs(86_400))
            .expect("read back");
        let leaf = stored.issue(&["a.b.svc".into()]).expect("issued");
        let (_, ca_end) = crate::tls::validity(made.ca_pem()).expect("the CA's validity");
        let (start, end) = crate::tls::validity(&leaf.cert_pem).expect("the leaf's validity");
        assert_eq!(end, ca_end, "a day asked for, cut to the CA's hour");
        assert!(end - start <= 3600);
        let ca = x509_parser::pem::parse_x509_pem(made.ca_pem().as_bytes()).expect("pem").1;
        let ca = ca.parse_x509().expect("CA");
        let leaf = x509_parser::pem::parse_x509_pem(leaf.cert_pem.as_bytes()).expect("pem").1;
        let leaf = leaf.parse_x509().expect("leaf");
        assert_eq!(leaf.issuer(), ca.subject());
        leaf.verify_signature(Some(ca.public_key())).expect("signed by the stored CA's key");
    }

    #[test]
    fn a_missing_certificate_directory_is_an_error_naming_the_file() {
        let error = ServingCertificate::read_mounted(Path::new("/nonexistent-olmv2-certs")).expect_err("fails");
        assert!(error.to_string().contains("tls.crt"), "{error}");
    }
}
