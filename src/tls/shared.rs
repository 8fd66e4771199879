//! The generated serving certificate every replica presents for one Service, kept in a Secret of the controller's
//! namespace (`<service>-generated-tls`, type `kubernetes.io/tls`, with `ca.crt`). The API server reaches the
//! Service's replicas at random and trusts one `caBundle`: if each replica generated its own CA, the configuration
//! written last would make the other replicas' answers fail TLS. The first replica to start creates the Secret;
//! the others (a create answered AlreadyExists) read it. Not used with a mounted certificate (cert-manager's).
//!
//! The Secret also keeps the CA's key (and the previous CA's, while it may still sign) and, in `ca.crt`, every CA
//! the clients must trust: each replica looks at it again every so often (`rotation`), renews what is due with an
//! update at the resourceVersion it read (one replica wins; the others read the winner's), and serves what the
//! Secret holds.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;

use super::rotation::{plan, Held, Lifetimes, Step};
use super::{
    pem_certificates, CaOptions, CertificateAuthority, CertificateError, CertificateIssuer, CertificateSlot,
    ServingCertificate,
};

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
    #[error("failed to update the Secret {name} holding the serving certificate")]
    Update {
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

/// What the Secret keeps: the serving certificate with the trust bundle (`ca_pem`, newest CA first), and the keys
/// of the newest CA and of the one before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub certificate: ServingCertificate,
    pub ca_key: Option<String>,
    pub previous_ca_key: Option<String>,
}

/// The Secret holding `stored`, issued for `names`.
pub fn to_secret(name: &str, stored: &Stored, names: &[String]) -> Secret {
    let bytes = |text: &str| ByteString(text.as_bytes().to_vec());
    let certificate = &stored.certificate;
    let mut data = std::collections::BTreeMap::from([
        ("tls.crt".to_owned(), bytes(&certificate.cert_pem)),
        ("tls.key".to_owned(), bytes(&certificate.key_pem)),
    ]);
    if let Some(ca) = &certificate.ca_pem {
        data.insert("ca.crt".to_owned(), bytes(ca));
    }
    if let Some(key) = &stored.ca_key {
        data.insert("ca.key".to_owned(), bytes(key));
    }
    if let Some(key) = &stored.previous_ca_key {
        data.insert("previous-ca.key".to_owned(), bytes(key));
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

/// What a Secret holds, if it holds a whole certificate (the CA keys may be missing: a Secret of an earlier version,
/// whose CA is then replaced).
pub fn from_secret(secret: &Secret) -> Option<Stored> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| data.get(key).and_then(|value| String::from_utf8(value.0.clone()).ok());
    let certificate =
        ServingCertificate { cert_pem: text("tls.crt")?, key_pem: text("tls.key")?, ca_pem: Some(text("ca.crt")?) };
    Some(Stored { certificate, ca_key: text("ca.key"), previous_ca_key: text("previous-ca.key") })
}

/// The dates of what `stored` holds, for [`rotation::plan`]; none when its certificates cannot be read.
pub fn dates(stored: &Stored) -> Option<Held> {
    let serving = super::validity(&stored.certificate.cert_pem)?;
    let cas = pem_certificates(stored.certificate.ca_pem.as_deref().unwrap_or_default())
        .iter()
        .map(|pem| super::validity(pem))
        .collect::<Option<Vec<_>>>()?;
    let bundle = pem_certificates(stored.certificate.ca_pem.as_deref().unwrap_or_default());
    let serving_by_newest = bundle.first().is_some_and(|ca| super::signed_by(&stored.certificate.cert_pem, ca));
    Some(Held {
        serving,
        cas,
        newest_key: stored.ca_key.is_some(),
        previous_key: stored.previous_ca_key.is_some(),
        serving_by_newest,
    })
}

/// How a shared certificate is issued.
#[derive(Clone, Debug)]
pub struct Issuing {
    /// The DNS names it is issued for.
    pub names: Vec<String>,
    /// The common name of its CAs.
    pub ca_name: String,
    pub lifetimes: Lifetimes,
}

/// One generated certificate shared by every replica through its Secret.
#[derive(Clone)]
pub struct SharedCertificate {
    pub client: Client,
    /// The controller's namespace, where the Secret is.
    pub namespace: String,
    pub service: String,
    pub issuing: Issuing,
}

impl Issuing {
    fn new_ca(&self) -> Result<CertificateAuthority, CertificateError> {
        let options =
            CaOptions { common_name: self.ca_name.clone(), organization: None, validity: Some(self.lifetimes.ca) };
        CertificateAuthority::with_options(&options)
    }

    /// A new CA and a serving certificate it signs.
    fn generate(&self) -> Result<Stored, CertificateError> {
        let ca = self.new_ca()?;
        let issuer = CertificateAuthority::from_pem(ca.ca_pem(), &ca.key_pem(), self.lifetimes.serving)?;
        Ok(Stored { certificate: issuer.issue(&self.names)?, ca_key: Some(ca.key_pem()), previous_ca_key: None })
    }

    /// What a replica serving `current` stores when the Secret is gone or unreadable: a new CA put before the
    /// bundle `current` is trusted by, and `current` kept, so that no replica's certificate loses its trust; the new CA
    /// signs once its grace period is over.
    fn recover(&self, current: &ServingCertificate) -> Result<Stored, CertificateError> {
        let ca = self.new_ca()?;
        let mut certificate = current.clone();
        certificate.ca_pem = Some(format!("{}{}", ca.ca_pem(), current.ca_pem.as_deref().unwrap_or_default()));
        Ok(Stored { certificate, ca_key: Some(ca.key_pem()), previous_ca_key: None })
    }

    /// `stored` after `step` at `now`.
    fn carry_out(&self, stored: &Stored, step: Step, now: i64) -> Result<Stored, CertificateError> {
        let bundle = pem_certificates(stored.certificate.ca_pem.as_deref().unwrap_or_default());
        let mut next = stored.clone();
        match step {
            Step::Keep => {}
            Step::AddCa => {
                let ca = self.new_ca()?;
                let kept: String = bundle
                    .iter()
                    .filter(|pem| super::validity(pem).is_some_and(|(_, end)| end > now))
                    .cloned()
                    .collect();
                next.certificate.ca_pem = Some(format!("{}{kept}", ca.ca_pem()));
                // The CA that signed so far keeps signing until the new one has been trusted long enough.
                next.previous_ca_key = stored.ca_key.clone();
                next.ca_key = Some(ca.key_pem());
            }
            Step::RenewServing { by_newest } => {
                let (pem, key) = if by_newest {
                    (bundle.first(), stored.ca_key.as_ref())
                } else {
                    (bundle.get(1), stored.previous_ca_key.as_ref())
                };
                let (Some(pem), Some(key)) = (pem, key) else { return self.generate() };
                let issued = CertificateAuthority::from_pem(pem, key, self.lifetimes.serving)?.issue(&self.names)?;
                next.certificate.cert_pem = issued.cert_pem;
                next.certificate.key_pem = issued.key_pem;
            }
            Step::Prune => {
                // The newest, and any other that has not expired and signed the certificate served.
                let needed = |pem: &String| {
                    super::validity(pem).is_some_and(|(_, end)| end > now)
                        && super::signed_by(&stored.certificate.cert_pem, pem)
                };
                let kept: Vec<&String> = bundle
                    .iter()
                    .enumerate()
                    .filter(|(index, pem)| *index == 0 || needed(pem))
                    .map(|(_, pem)| pem)
                    .collect();
                if !bundle.get(1).is_some_and(|previous| kept.contains(&previous)) {
                    next.previous_ca_key = None;
                }
                next.certificate.ca_pem = Some(kept.into_iter().cloned().collect());
            }
        }
        Ok(next)
    }
}

impl SharedCertificate {
    /// The certificate every replica shares: read from its Secret, or generated and stored there by the first
    /// replica to start. A failed read or create is tried again a few times (a replica that cannot share a
    /// certificate must not serve another one).
    pub async fn load(&self) -> Result<ServingCertificate, SharedCertificateError> {
        let mut delay = std::time::Duration::from_millis(200);
        let mut attempt = 1;
        loop {
            match self.read_or_create().await {
                Err(error @ (SharedCertificateError::Read { .. } | SharedCertificateError::Create { .. }))
                    if attempt < ATTEMPTS =>
                {
                    tracing::warn!(%error, attempt, "sharing the serving certificate failed; trying again");
                    tokio::time::sleep(delay).await;
                    (delay, attempt) = (delay * 2, attempt + 1);
                }
                done => return done.map(|stored| stored.certificate),
            }
        }
    }

    async fn read_or_create(&self) -> Result<Stored, SharedCertificateError> {
        let name = secret_name(&self.service);
        let secrets = Api::<Secret>::namespaced(self.client.clone(), &self.namespace);
        let read = |source| SharedCertificateError::Read { name: name.clone(), source };
        if let Some(secret) = secrets.get_opt(&name).await.map_err(read)? {
            return held(&name, &secret, &self.issuing.names);
        }
        let generated = self.issuing.generate()?;
        let names = &self.issuing.names;
        match secrets.create(&PostParams::default(), &to_secret(&name, &generated, names)).await {
            Ok(_) => {
                tracing::info!(secret = %format!("{}/{name}", self.namespace), "generated the serving certificate");
                Ok(generated)
            }
            // Another replica stored one first: serve that one.
            Err(kube::Error::Api(status)) if status.code == 409 => {
                held(&name, &secrets.get(&name).await.map_err(read)?, names)
            }
            Err(source) => Err(SharedCertificateError::Create { name, source }),
        }
    }

    /// Looks at the certificate again at `now` (Unix seconds), as a replica serving `current`: renews what is due in
    /// the Secret (a merge patch at the resourceVersion read: of replicas renewing at once, one wins and the others
    /// serve what it wrote) and answers what the Secret holds then. A Secret deleted or whose certificates cannot be
    /// read is made again from `current` (`Issuing::recover`), never from scratch: every replica's certificate stays
    /// trusted.
    pub async fn refresh(
        &self,
        current: &ServingCertificate,
        now: i64,
    ) -> Result<ServingCertificate, SharedCertificateError> {
        let name = secret_name(&self.service);
        let secrets = Api::<Secret>::namespaced(self.client.clone(), &self.namespace);
        let read = |source| SharedCertificateError::Read { name: name.clone(), source };
        let names = &self.issuing.names;
        let Some(secret) = secrets.get_opt(&name).await.map_err(read)? else {
            let recovered = self.issuing.recover(current)?;
            return match secrets.create(&PostParams::default(), &to_secret(&name, &recovered, names)).await {
                Ok(_) => {
                    tracing::warn!(secret = %format!("{}/{name}", self.namespace), "the serving certificate's Secret was gone: made again");
                    Ok(recovered.certificate)
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    Ok(held(&name, &secrets.get(&name).await.map_err(read)?, names)?.certificate)
                }
                Err(source) => Err(SharedCertificateError::Create { name, source }),
            };
        };
        let stored = held(&name, &secret, names)?;
        let (next, step) = match dates(&stored) {
            Some(dates) => match plan(&dates, now, &self.issuing.lifetimes) {
                Step::Keep => return Ok(stored.certificate),
                step => (self.issuing.carry_out(&stored, step, now)?, format!("{step:?}")),
            },
            None => (self.issuing.recover(current)?, "Recover".to_owned()),
        };
        let patch = renewal_patch(&to_secret(&name, &next, names), secret.metadata.resource_version.as_deref());
        match secrets.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {
                tracing::info!(secret = %format!("{}/{name}", self.namespace), %step, "renewed the serving certificate");
                Ok(next.certificate)
            }
            // Another replica renewed it first: serve what it wrote.
            Err(kube::Error::Api(status)) if status.code == 409 => {
                Ok(held(&name, &secrets.get(&name).await.map_err(read)?, names)?.certificate)
            }
            Err(source) => Err(SharedCertificateError::Update { name, source }),
        }
    }
}

/// How often a mounted certificate is read again (the kubelet updates a mounted Secret within about a minute).
pub const MOUNTED_RELOAD: std::time::Duration = std::time::Duration::from_secs(60);

/// Now, in Unix seconds.
pub fn unix_now() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(now.as_secs()).unwrap_or(i64::MAX)
}

/// Starts keeping a running server's certificate current, for as long as the handle lives: the certificate mounted in
/// `mounted` read again (`keep_reloaded`), else the shared one renewed (`keep_renewed`). `write` puts a bundle into
/// the `caBundle` of the server's clients (a failure is logged and tried again at the next look); `presented` is told
/// each certificate presented.
pub fn spawn_renewal<W, WriteFut, E, P>(
    shared: SharedCertificate,
    mounted: Option<std::path::PathBuf>,
    slot: CertificateSlot,
    certificate: ServingCertificate,
    write: W,
    presented: P,
) -> tokio::task::JoinHandle<()>
where
    W: Fn(String) -> WriteFut + Send + Sync + 'static,
    WriteFut: std::future::Future<Output = Result<(), E>> + Send + 'static,
    E: std::error::Error,
    P: Fn(&ServingCertificate) + Send + Sync + 'static,
{
    let Some(dir) = mounted else {
        let trust = move |bundle: String| {
            let written = write(bundle);
            async move {
                written
                    .await
                    .inspect_err(|error| {
                        tracing::warn!("{}; written again at the next look", crate::category::report(error));
                    })
                    .is_ok()
            }
        };
        return tokio::spawn(keep_renewed(shared, slot, certificate, trust, presented));
    };
    tokio::spawn(keep_reloaded(dir, slot, certificate, MOUNTED_RELOAD, presented))
}

/// Keeps a server presenting the certificate its Secret holds, renewed when due (`SharedCertificate::refresh`),
/// looking at once and then every check interval of its lifetimes. `trust` writes a bundle into the `caBundle` of the
/// server's clients and answers whether it did; `presented` is told each certificate once it is presented (the
/// metrics). A bundle the Secret holds is written before anything else changes, and no certificate is presented
/// while the bundle it needs is not written: a failed write is tried again at the next look, the old certificate
/// served meanwhile. (A new CA joins the bundle alone and signs only after its grace period.)
async fn keep_renewed<T, TrustFut, P>(
    shared: SharedCertificate,
    slot: CertificateSlot,
    mut current: ServingCertificate,
    trust: T,
    presented: P,
) where
    T: Fn(String) -> TrustFut,
    TrustFut: std::future::Future<Output = bool>,
    P: Fn(&ServingCertificate),
{
    let interval = shared.issuing.lifetimes.check_interval();
    // What the clients were told to trust at start.
    let mut trusted = current.ca_pem.clone();
    loop {
        match shared.refresh(&current, unix_now()).await {
            Ok(certificate) => {
                if certificate.ca_pem != trusted {
                    let written = match certificate.ca_pem.clone() {
                        Some(bundle) => trust(bundle).await,
                        None => true,
                    };
                    if !written {
                        tokio::time::sleep(interval).await;
                        continue;
                    }
                    trusted = certificate.ca_pem.clone();
                }
                if certificate != current {
                    match slot.set(&certificate) {
                        Ok(()) => {
                            presented(&certificate);
                            current = certificate;
                        }
                        Err(error) => {
                            tracing::error!(%error, service = %shared.service, "the renewed certificate cannot be served");
                        }
                    }
                }
            }
            Err(error) => {
                tracing::warn!(service = %shared.service, "{}; trying again", crate::category::report(&error));
            }
        }
        tokio::time::sleep(interval).await;
    }
}

/// Keeps a server presenting the certificate mounted in `dir` (cert-manager's Secret, which the kubelet updates in
/// place), read again every `interval`; `presented` is told each new one once it is presented.
async fn keep_reloaded<P: Fn(&ServingCertificate)>(
    dir: std::path::PathBuf,
    slot: CertificateSlot,
    mut current: ServingCertificate,
    interval: std::time::Duration,
    presented: P,
) {
    loop {
        tokio::time::sleep(interval).await;
        match ServingCertificate::read_mounted(&dir) {
            Ok(certificate) if certificate != current => match slot.set(&certificate) {
                Ok(()) => {
                    tracing::info!(dir = %dir.display(), "serving the renewed mounted certificate");
                    presented(&certificate);
                    current = certificate;
                }
                // Half-written (the key updated before the certificate, say): read again next time.
                Err(error) => {
                    tracing::warn!(%error, dir = %dir.display(), "the mounted certificate cannot be served yet")
                }
            },
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "the mounted certificate cannot be read"),
        }
    }
}

/// The merge patch making a Secret hold what `renewed` holds, at `resource_version` (the API server refuses it with
/// a conflict if the Secret changed since): every key set, those `renewed` lacks removed.
fn renewal_patch(renewed: &Secret, resource_version: Option<&str>) -> serde_json::Value {
    let held = serde_json::to_value(&renewed.data).unwrap_or_default();
    let data: serde_json::Map<String, serde_json::Value> =
        ["tls.crt", "tls.key", "ca.crt", "ca.key", "previous-ca.key"]
            .into_iter()
            .map(|key| (key.to_owned(), held.get(key).cloned().unwrap_or(serde_json::Value::Null)))
            .collect();
    serde_json::json!({"metadata": {"resourceVersion": resource_version}, "data": data})
}

/// What a Secret holds, if whole and issued for `names`.
fn held(name: &str, secret: &Secret, names: &[String]) -> Result<Stored, SharedCertificateError> {
    let stored = from_secret(secret).ok_or_else(|| SharedCertificateError::Malformed { name: name.to_owned() })?;
    let recorded = secret.metadata.annotations.as_ref().and_then(|a| a.get(NAMES_ANNOTATION)).cloned();
    let wanted = names.join(",");
    if recorded.as_deref() != Some(wanted.as_str()) {
        return Err(SharedCertificateError::OtherNames {
            name: name.to_owned(),
            held: recorded.unwrap_or_default(),
            wanted,
        });
    }
    Ok(stored)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const NAME: &str = "olmv2-webhook.olmv2-system.svc";

    fn issuing() -> Issuing {
        Issuing { names: vec![NAME.to_owned()], ca_name: "test-ca".into(), lifetimes: Lifetimes::default() }
    }

    /// Whether the serving certificate of `stored` is signed by the key of `ca` (PEM).
    fn signed_by(stored: &Stored, ca: &str) -> bool {
        let (_, ca) = x509_parser::pem::parse_x509_pem(ca.as_bytes()).unwrap();
        let ca = ca.parse_x509().unwrap();
        let (_, leaf) = x509_parser::pem::parse_x509_pem(stored.certificate.cert_pem.as_bytes()).unwrap();
        let leaf = leaf.parse_x509().unwrap();
        leaf.verify_signature(Some(ca.public_key())).is_ok()
    }

    #[test]
    fn a_certificate_round_trips_through_its_secret() {
        let stored = issuing().generate().unwrap();
        let names = vec![NAME.to_owned()];
        let secret = to_secret(&secret_name("olmv2-webhook"), &stored, &names);
        assert_eq!(secret.metadata.name.as_deref(), Some("olmv2-webhook-generated-tls"));
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(from_secret(&secret), Some(stored.clone()));
        assert_eq!(held("s", &secret, &names).ok(), Some(stored));
        let moved = vec!["olmv2-webhook.elsewhere.svc".to_owned()];
        assert!(matches!(held("s", &secret, &moved), Err(SharedCertificateError::OtherNames { .. })));
    }

    #[test]
    fn a_secret_missing_a_part_holds_no_certificate_and_one_without_ca_keys_still_serves() {
        let stored = issuing().generate().unwrap();
        for key in ["tls.crt", "tls.key", "ca.crt"] {
            let mut secret = to_secret("s", &stored, &[]);
            secret.data.as_mut().unwrap().remove(key);
            assert_eq!(from_secret(&secret), None, "without {key}");
            assert!(matches!(held("s", &secret, &[]), Err(SharedCertificateError::Malformed { .. })));
        }
        let mut secret = to_secret("s", &stored, &[]);
        secret.data.as_mut().unwrap().insert("tls.key".into(), ByteString(vec![0xff, 0xfe]));
        assert_eq!(from_secret(&secret), None, "not text");
        assert_eq!(from_secret(&Secret::default()), None);
        let mut earlier = to_secret("s", &stored, &[]);
        earlier.data.as_mut().unwrap().remove("ca.key");
        let read = from_secret(&earlier).unwrap();
        assert_eq!(read.ca_key, None);
        assert!(!dates(&read).unwrap().newest_key, "its CA is replaced first");
    }

    #[test]
    fn a_lost_secret_is_made_again_around_the_certificate_served_never_from_scratch() {
        let issuing = issuing();
        let served = issuing.generate().unwrap().certificate;
        let recovered = issuing.recover(&served).unwrap();
        assert_eq!(recovered.certificate.cert_pem, served.cert_pem, "still served, still trusted");
        let bundle = pem_certificates(recovered.certificate.ca_pem.as_deref().unwrap());
        assert_eq!(bundle.len(), 2);
        assert_eq!(bundle[1], served.ca_pem.clone().unwrap());
        assert!(recovered.ca_key.is_some() && recovered.previous_ca_key.is_none());
        assert!(!dates(&recovered).unwrap().serving_by_newest);
    }

    #[test]
    fn a_renewal_is_a_merge_patch_at_the_version_read_removing_what_is_no_longer_held() {
        let stored = issuing().generate().unwrap();
        let patch = renewal_patch(&to_secret("s", &stored, &[]), Some("42"));
        assert_eq!(patch["metadata"]["resourceVersion"], "42");
        assert!(patch["data"]["tls.crt"].is_string() && patch["data"]["ca.key"].is_string());
        assert!(patch["data"]["previous-ca.key"].is_null(), "removed when not held");
    }

    #[test]
    fn a_new_ca_is_trusted_beside_the_old_which_signs_until_the_new_one_may() {
        let issuing = issuing();
        let first = issuing.generate().unwrap();
        let old_ca = first.certificate.ca_pem.clone().unwrap();
        let held = dates(&first).unwrap();
        assert_eq!(held.serving.1 - held.serving.0, 90 * 86_400);
        assert_eq!(held.cas.len(), 1);
        assert!(signed_by(&first, &old_ca));

        let now = held.serving.0;
        let added = issuing.carry_out(&first, Step::AddCa, now).unwrap();
        let bundle = pem_certificates(added.certificate.ca_pem.as_deref().unwrap());
        assert_eq!(bundle.len(), 2, "the new CA first, the old kept");
        assert_eq!(bundle[1], old_ca);
        assert_eq!(added.certificate.cert_pem, first.certificate.cert_pem, "the serving certificate stays");
        assert_eq!(added.previous_ca_key, first.ca_key);

        let by_old = issuing.carry_out(&added, Step::RenewServing { by_newest: false }, now).unwrap();
        assert_ne!(by_old.certificate.cert_pem, first.certificate.cert_pem);
        assert!(signed_by(&by_old, &bundle[1]) && !signed_by(&by_old, &bundle[0]));
        let by_new = issuing.carry_out(&by_old, Step::RenewServing { by_newest: true }, now).unwrap();
        assert!(signed_by(&by_new, &bundle[0]));

        // Pruned while both live: the CA that signed the certificate served stays, the other goes.
        let kept = issuing.carry_out(&by_old, Step::Prune, now).unwrap();
        assert_eq!(pem_certificates(kept.certificate.ca_pem.as_deref().unwrap()).len(), 2);
        assert_eq!(kept.previous_ca_key, by_old.previous_ca_key);
        let dropped = issuing.carry_out(&by_new, Step::Prune, now).unwrap();
        assert_eq!(pem_certificates(dropped.certificate.ca_pem.as_deref().unwrap()), [bundle[0].clone()]);
        assert_eq!(dropped.previous_ca_key, None);
        let pruned = issuing.carry_out(&by_new, Step::Prune, now + 800 * 86_400).unwrap();
        assert_eq!(pem_certificates(pruned.certificate.ca_pem.as_deref().unwrap()), [bundle[0].clone()]);
        assert_eq!(pruned.previous_ca_key, None);
    }
}
