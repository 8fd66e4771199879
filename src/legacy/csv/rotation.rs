//! The certificates OLM v0's install strategy gives the Services of owned APIServices and webhooks: one CA per
//! install (730 days, organization "Red Hat, Inc.", common name `olm-selfsigned-<serial>`), a serving certificate it
//! signs for the Service's three host names, the CA's hash the Secret and pod template carry, and whether a stored
//! certificate must be replaced (OLM's `shouldRotateCerts`: missing or unparsable, not yet valid, expiring within
//! 24 hours, or not valid for one of the hosts).

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio_rustls::rustls;

use crate::tls::{CaOptions, CertificateAuthority, CertificateError, CertificateIssuer};

/// How long OLM's certificates are valid.
pub const CERT_VALIDITY: Duration = Duration::from_secs(730 * 24 * 3600);
/// How long before expiry OLM replaces a certificate.
pub const CERT_MIN_FRESH: Duration = Duration::from_secs(24 * 3600);
/// The organization OLM writes in its certificates.
pub const ORGANIZATION: &str = "Red Hat, Inc.";

/// A CA and a serving certificate it signed, PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServingPair {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// The CA OLM makes for one install: common name `olm-selfsigned-<serial>`, organization [`ORGANIZATION`], it and
/// its certificates valid for [`CERT_VALIDITY`] from now.
pub fn install_ca() -> Result<CertificateAuthority, CertificateError> {
    CertificateAuthority::with_options(&CaOptions {
        common_name: "olm-selfsigned-{serial}".into(),
        organization: Some(ORGANIZATION.into()),
        validity: Some(CERT_VALIDITY),
    })
}

/// A serving certificate for `hosts` (the first is its common name), signed by `ca`, with `ca`'s certificate.
pub fn serving_pair(ca: &CertificateAuthority, hosts: &[String]) -> Result<ServingPair, CertificateError> {
    let issued = ca.issue(hosts)?;
    Ok(ServingPair { ca_pem: ca.ca_pem().to_owned(), cert_pem: issued.cert_pem, key_pem: issued.key_pem })
}

/// The status after an install that issued certificates at `now`: `certsLastUpdated` now, `certsRotateAt` when
/// they are due (OLM's validity less its minimum freshness: 729 days on).
pub fn rotated_status(
    status: &crate::api::v1alpha1::ClusterServiceVersionStatus,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> crate::api::v1alpha1::ClusterServiceVersionStatus {
    let due = CERT_VALIDITY.saturating_sub(CERT_MIN_FRESH);
    let mut next = status.clone();
    next.certs_last_updated = Some(now.clone());
    next.certs_rotate_at = k8s_openapi::jiff::SignedDuration::try_from(due)
        .ok()
        .and_then(|due| now.0.checked_add(due).ok())
        .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time);
    next
}

/// OLM's `PEMSHA256`: the hex SHA-256 of a PEM, the `olmcahash` annotation.
pub fn pem_sha256(pem: &[u8]) -> String {
    Sha256::digest(pem).iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Whether a stored CA and certificate must be replaced at `now` (Unix seconds) for `hosts`: OLM's
/// `shouldRotateCerts`. None of either, an unparsable one, one not yet valid or valid for less than
/// [`CERT_MIN_FRESH`], or a certificate the CA does not verify for one of the hosts all say yes.
pub fn should_rotate(ca_pem: Option<&[u8]>, cert_pem: Option<&[u8]>, hosts: &[String], now: i64) -> bool {
    let (Some(ca_pem), Some(cert_pem)) = (ca_pem, cert_pem) else { return true };
    let (Some(ca), Some(cert)) = (der_of(ca_pem), der_of(cert_pem)) else { return true };
    if !fresh(&ca, now) || !fresh(&cert, now) {
        return true;
    }
    !hosts.iter().all(|host| verifies(&ca, &cert, host, now))
}

fn der_of(pem: &[u8]) -> Option<Vec<u8>> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).ok()?;
    pem.parse_x509().ok()?;
    Some(pem.contents)
}

/// Valid at `now` and for at least [`CERT_MIN_FRESH`] more.
fn fresh(der: &[u8], now: i64) -> bool {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else { return false };
    let validity = cert.validity();
    let min_fresh = i64::try_from(CERT_MIN_FRESH.as_secs()).unwrap_or(i64::MAX);
    validity.not_before.timestamp() <= now && now <= validity.not_after.timestamp().saturating_sub(min_fresh)
}

/// Whether `cert` chains to `ca` and names `host`, as a TLS client checks it.
fn verifies(ca: &[u8], cert: &[u8], host: &str, now: i64) -> bool {
    let mut roots = rustls::RootCertStore::empty();
    if roots.add(rustls::pki_types::CertificateDer::from(ca.to_vec())).is_err() {
        return false;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let Ok(verifier) = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build()
    else {
        return false;
    };
    let Ok(name) = rustls::pki_types::ServerName::try_from(host.to_owned()) else { return false };
    let at = rustls::pki_types::UnixTime::since_unix_epoch(Duration::from_secs(u64::try_from(now).unwrap_or(0)));
    let end_entity = rustls::pki_types::CertificateDer::from(cert.to_vec());
    use rustls::client::danger::ServerCertVerifier as _;
    verifier.verify_server_cert(&end_entity, &[], &name, &[], at).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> Vec<String> {
        crate::legacy::csv::certs::hosts("op-service", "ops")
    }

    fn now() -> i64 {
        time::OffsetDateTime::now_utc().unix_timestamp()
    }

    #[test]
    fn a_fresh_pair_is_kept() {
        let pair = serving_pair(&install_ca().expect("ca"), &hosts()).expect("pair");
        assert!(!should_rotate(Some(pair.ca_pem.as_bytes()), Some(pair.cert_pem.as_bytes()), &hosts(), now()));
    }

    #[test]
    fn the_ca_names_olm_and_its_serial() {
        let ca = install_ca().expect("ca");
        let der = der_of(ca.ca_pem().as_bytes()).expect("der");
        let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("parse");
        let subject = cert.subject().to_string();
        assert!(subject.contains("CN=olm-selfsigned-"), "{subject}");
        assert!(subject.contains("O=Red Hat, Inc."), "{subject}");
        let days = (cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp()) / 86_400;
        assert_eq!(days, 730);
    }

    #[test]
    fn missing_or_unparsable_parts_rotate() {
        let pair = serving_pair(&install_ca().expect("ca"), &hosts()).expect("pair");
        let (ca, cert) = (pair.ca_pem.as_bytes(), pair.cert_pem.as_bytes());
        assert!(should_rotate(None, Some(cert), &hosts(), now()));
        assert!(should_rotate(Some(ca), None, &hosts(), now()));
        assert!(should_rotate(Some(b"garbage"), Some(cert), &hosts(), now()));
        assert!(should_rotate(Some(ca), Some(b"garbage"), &hosts(), now()));
    }

    #[test]
    fn expiring_within_a_day_or_not_yet_valid_rotates() {
        let pair = serving_pair(&install_ca().expect("ca"), &hosts()).expect("pair");
        let (ca, cert) = (Some(pair.ca_pem.as_bytes()), Some(pair.cert_pem.as_bytes()));
        let day = 86_400;
        assert!(!should_rotate(ca, cert, &hosts(), now() + 728 * day));
        assert!(should_rotate(ca, cert, &hosts(), now() + 729 * day + 60));
        assert!(should_rotate(ca, cert, &hosts(), now() - day));
    }

    #[test]
    fn another_host_or_another_ca_rotates() {
        let pair = serving_pair(&install_ca().expect("ca"), &hosts()).expect("pair");
        let other_hosts = crate::legacy::csv::certs::hosts("other-service", "ops");
        assert!(should_rotate(Some(pair.ca_pem.as_bytes()), Some(pair.cert_pem.as_bytes()), &other_hosts, now()));
        let stranger = install_ca().expect("ca");
        assert!(should_rotate(Some(stranger.ca_pem().as_bytes()), Some(pair.cert_pem.as_bytes()), &hosts(), now()));
    }

    #[test]
    fn an_install_issuing_certificates_records_when_and_when_they_are_due() {
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).expect("time"),
        );
        let next = rotated_status(&Default::default(), &now);
        assert_eq!(next.certs_last_updated, Some(now.clone()));
        let due = next.certs_rotate_at.expect("due").0.as_second() - now.0.as_second();
        assert_eq!(due, 729 * 86_400);
    }

    #[test]
    fn the_ca_hash_is_hex_sha256_of_the_pem() {
        assert_eq!(pem_sha256(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
