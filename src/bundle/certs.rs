//! Serving certificates for the webhooks a bundle's operator serves: a certificate authority whose certificate
//! goes into each webhook configuration's caBundle, and leaf certificates for the webhook Services' DNS names.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// A serving certificate and the CA that signed it, all PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServingCertificate {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

#[derive(Debug, thiserror::Error)]
#[error("failed to issue a serving certificate for {names:?}")]
pub struct CertificateError {
    pub names: Vec<String>,
    #[source]
    pub source: rcgen::Error,
}

/// Something that issues serving certificates. The Install reconciler supplies one that returns the certificates it
/// already stored, so that rendering again does not rotate them.
pub trait CertificateIssuer {
    fn issue(&self, dns_names: &[String]) -> Result<ServingCertificate, CertificateError>;
}

/// A CA generated in memory.
pub struct GeneratedAuthority {
    params: CertificateParams,
    key: KeyPair,
    ca_pem: String,
}

impl GeneratedAuthority {
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

impl CertificateIssuer for GeneratedAuthority {
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
        Ok(ServingCertificate { ca_pem: self.ca_pem.clone(), cert_pem, key_pem: key.serialize_pem() })
    }
}
