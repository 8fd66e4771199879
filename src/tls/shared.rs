//! The generated serving certificate every replica presents for one Service, kept in a Secret of the controller's
//! namespace (`<service>-generated-tls`, type `kubernetes.io/tls`, with `ca.crt`). The API server reaches the
//! Service's replicas at random and trusts one `caBundle`: if each replica generated its own CA, the configuration
//! written last would make the other replicas' answers fail TLS. The first replica to start creates the Secret;
//! the others (a create answered AlreadyExists) read it. Not used with a mounted certificate (cert-manager's).

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use kube::Client;

use super::{CertificateError, ServingCertificate};

/// The Secret holding the generated certificate of `service`.
pub fn secret_name(service: &str) -> String {
    format!("{service}-generated-tls")
}

#[derive(Debug, thiserror::Error)]
pub enum SharedCertificateError {
    #[error(transparent)]
    Generate(#[from] CertificateError),
    #[error("failed to read the Secret {name} holding the serving certificate")]
    Read {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to create the Secret {name} holding the serving certificate")]
    Create {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the Secret {name} does not hold a serving certificate (tls.crt, tls.key and ca.crt); delete it to have one generated")]
    Malformed { name: String },
    #[error("the Secret {name} holds a certificate for {held:?}, not {wanted:?} (the Service moved?); delete it to have one generated")]
    OtherNames { name: String, held: String, wanted: String },
}

/// The annotation recording the DNS names the certificate was issued for.
pub const NAMES_ANNOTATION: &str = "olmv2.operators.coreos.com/dns-names";

/// How many times reading or creating the Secret is tried before the start fails.
const ATTEMPTS: u32 = 5;

/// The Secret holding `certificate` (which must know its CA), issued for `names`.
pub fn to_secret(name: &str, certificate: &ServingCertificate, names: &[String]) -> Secret {
    let bytes = |text: &str| ByteString(text.as_bytes().to_vec());
    let mut data = std::collections::BTreeMap::from([
        ("tls.crt".to_owned(), bytes(&certificate.cert_pem)),
        ("tls.key".to_owned(), bytes(&certificate.key_pem)),
    ]);
    if let Some(ca) = &certificate.ca_pem {
        data.insert("ca.crt".to_owned(), bytes(ca));
    }
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([("app.kubernetes.io/managed-by".to_owned(), "olmv2".to_owned())].into()),
            annotations: Some([(NAMES_ANNOTATION.to_owned(), names.join(","))].into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(data),
        ..Default::default()
    }
}

/// The certificate a Secret holds, if it holds a whole one.
pub fn from_secret(secret: &Secret) -> Option<ServingCertificate> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| data.get(key).and_then(|value| String::from_utf8(value.0.clone()).ok());
    Some(ServingCertificate { cert_pem: text("tls.crt")?, key_pem: text("tls.key")?, ca_pem: Some(text("ca.crt")?) })
}

/// The certificate of `service` every replica shares: read from its Secret in `namespace`, or generated with
/// `generate` (for `names`) and stored there by the first replica to start. A failed read or create is tried again
/// a few times (a replica that cannot share a certificate must not serve another one).
pub async fn shared(
    client: &Client,
    namespace: &str,
    service: &str,
    names: &[String],
    generate: impl Fn() -> Result<ServingCertificate, CertificateError>,
) -> Result<ServingCertificate, SharedCertificateError> {
    let mut delay = std::time::Duration::from_millis(200);
    let mut attempt = 1;
    loop {
        match read_or_create(client, namespace, service, names, &generate).await {
            Err(error @ (SharedCertificateError::Read { .. } | SharedCertificateError::Create { .. }))
                if attempt < ATTEMPTS =>
            {
                tracing::warn!(%error, attempt, "sharing the serving certificate failed; trying again");
                tokio::time::sleep(delay).await;
                (delay, attempt) = (delay * 2, attempt + 1);
            }
            done => return done,
        }
    }
}

async fn read_or_create(
    client: &Client,
    namespace: &str,
    service: &str,
    names: &[String],
    generate: &impl Fn() -> Result<ServingCertificate, CertificateError>,
) -> Result<ServingCertificate, SharedCertificateError> {
    let name = secret_name(service);
    let secrets = Api::<Secret>::namespaced(client.clone(), namespace);
    let read = |source| SharedCertificateError::Read { name: name.clone(), source };
    if let Some(secret) = secrets.get_opt(&name).await.map_err(read)? {
        return held(&name, &secret, names);
    }
    let generated = generate()?;
    match secrets.create(&PostParams::default(), &to_secret(&name, &generated, names)).await {
        Ok(_) => {
            tracing::info!(secret = %format!("{namespace}/{name}"), "generated the serving certificate");
            Ok(generated)
        }
        // Another replica stored one first: serve that one.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            held(&name, &secrets.get(&name).await.map_err(read)?, names)
        }
        Err(source) => Err(SharedCertificateError::Create { name, source }),
    }
}

/// The certificate a Secret holds, if whole and issued for `names`.
fn held(name: &str, secret: &Secret, names: &[String]) -> Result<ServingCertificate, SharedCertificateError> {
    let certificate = from_secret(secret).ok_or_else(|| SharedCertificateError::Malformed { name: name.to_owned() })?;
    let recorded = secret.metadata.annotations.as_ref().and_then(|a| a.get(NAMES_ANNOTATION)).cloned();
    let wanted = names.join(",");
    if recorded.as_deref() != Some(wanted.as_str()) {
        return Err(SharedCertificateError::OtherNames {
            name: name.to_owned(),
            held: recorded.unwrap_or_default(),
            wanted,
        });
    }
    Ok(certificate)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::tls::{CertificateAuthority, CertificateIssuer};

    #[test]
    fn a_certificate_round_trips_through_its_secret() {
        let certificate =
            CertificateAuthority::new("test-ca").unwrap().issue(&["olmv2-webhook.olmv2-system.svc".into()]).unwrap();
        let names = vec!["olmv2-webhook.olmv2-system.svc".to_owned()];
        let secret = to_secret(&secret_name("olmv2-webhook"), &certificate, &names);
        assert_eq!(secret.metadata.name.as_deref(), Some("olmv2-webhook-generated-tls"));
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(from_secret(&secret), Some(certificate.clone()));
        assert_eq!(held("s", &secret, &names).ok(), Some(certificate));
        let moved = vec!["olmv2-webhook.elsewhere.svc".to_owned()];
        assert!(matches!(held("s", &secret, &moved), Err(SharedCertificateError::OtherNames { .. })));
    }

    #[test]
    fn a_secret_missing_a_part_holds_no_certificate() {
        let certificate =
            CertificateAuthority::new("test-ca").unwrap().issue(&["olmv2-webhook.olmv2-system.svc".into()]).unwrap();
        for key in ["tls.crt", "tls.key", "ca.crt"] {
            let mut secret = to_secret("s", &certificate, &[]);
            secret.data.as_mut().unwrap().remove(key);
            assert_eq!(from_secret(&secret), None, "without {key}");
            assert!(matches!(held("s", &secret, &[]), Err(SharedCertificateError::Malformed { .. })));
        }
        let mut secret = to_secret("s", &certificate, &[]);
        secret.data.as_mut().unwrap().insert("tls.key".into(), ByteString(vec![0xff, 0xfe]));
        assert_eq!(from_secret(&secret), None, "not text");
        assert_eq!(from_secret(&Secret::default()), None);
    }
}
