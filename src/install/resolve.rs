//! Resolving an Install's content into plain objects: bundle images are pulled (pinned by digest), loaded and
//! converted for the install namespace and the namespaces their operator watches, with the CSV as a record; Raw
//! manifests are parsed and placed. Serving certificates of bundle webhooks are reused from the Secrets already
//! applied (read as the account), so that resolving again does not rotate them. The pass's second step
//! ([`resolve_content`]) resolves, decorates and orders the content, and refuses a CRD naming an API the cluster
//! serves already.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::account::Account;
use super::conditions::Outcome;
use super::content::{csv_record, decorate, install_namespace, parse_raw, place_raw, sort_for_apply};
use super::content::{target_namespaces, Decoration};
use super::crd_safety;
use super::reconcile::{Context, Pass, ReconcileError, Step, Stop};
use crate::api::v1::OperatorGroup;
use crate::api::v2alpha1::AppliedObject;
use crate::api::v2alpha1::{ContentSource, ContentType, DeploymentConfig, Install, ResolvedContent};
use crate::bundle::image::{ImageClient, PullError};
use crate::bundle::names::webhook_secret_name;
use crate::bundle::unpack::UnpackLimits;
use crate::bundle::{render, Bundle, BundleError, ConvertError, RenderOptions};
use crate::category::Categorized;
use crate::controller::client::ControllerClient;
use crate::rbac::KindIndex;
use crate::tls::{CaOptions, CertificateAuthority, CertificateError, CertificateIssuer, ServingCertificate};

/// Why content did not resolve.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("failed to pull {reference}")]
    PullImage {
        reference: String,
        #[source]
        source: PullError,
    },
    #[error("spec.content[{index}] is not a valid union: {reason}")]
    InvalidUnion { index: usize, reason: String },
    #[error("failed to load the bundle of {reference}")]
    LoadBundle {
        reference: String,
        #[source]
        source: BundleError,
    },
    #[error("failed to convert the bundle of {reference}")]
    ConvertBundle {
        reference: String,
        #[source]
        source: ConvertError,
    },
    #[error("the raw manifests are not valid")]
    ParseRaw(#[source] BundleError),
    #[error("spec.content[{index}] is Raw content: a deployment configuration applies to a bundle's Deployments only")]
    ConfigWithoutBundle { index: usize },
    #[error("failed to digest the deployment configuration of spec.content[{index}]")]
    DigestConfig {
        index: usize,
        #[source]
        source: serde_json::Error,
    },
}

impl Categorized for ResolveError {
    fn category(&self) -> &'static str {
        match self {
            Self::PullImage { .. } => "ManifestImagePullFailed",
            Self::InvalidUnion { .. } => "InvalidContentUnion",
            Self::LoadBundle { source, .. } => source.category(),
            Self::ConvertBundle { source, .. } => source.category(),
            Self::ParseRaw(source) => source.category(),
            Self::ConfigWithoutBundle { .. } => "DeploymentConfigWithoutBundle",
            Self::DigestConfig { .. } => "InvalidDeploymentConfig",
        }
    }
}

impl ResolveError {
    /// Whether the content could not be fetched (retry), rather than being unusable as it is.
    pub fn is_import_failure(&self) -> bool {
        matches!(self, Self::PullImage { .. })
    }
}

/// The objects an Install applies and the content they came from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resolved {
    pub objects: Vec<Value>,
    pub resolved: Vec<ResolvedContent>,
    /// Names of the bundles' CSVs among `objects`.
    pub csvs: Vec<String>,
}

/// Pulls and unpacks bundle images into a digest-keyed cache.
pub struct Resolver {
    pub images: ImageClient,
    pub cache: PathBuf,
    pub limits: UnpackLimits,
    /// Where pulls are counted (`olmv2_bundle_pulls_total`).
    pub metrics: std::sync::Arc<crate::metrics::Metrics>,
}

/// Certificates issued earlier for the same Service while a third of their life is left, else new ones from a fresh
/// authority, valid as long as OLM v0's for a CSV (two years): renewed by the pass that finds them due, as OLM's CSV
/// loop renews a CSV's (the Secret and the `caBundle` applied together).
pub struct StoredCertificates {
    /// By namespace and Secret name.
    pub by_secret: BTreeMap<(String, String), ServingCertificate>,
    /// Now, in Unix seconds.
    pub now: i64,
}

/// How long the certificates issued for a bundle's webhooks live: OLM v0's for a CSV's.
pub const BUNDLE_CERTIFICATE_VALIDITY: std::time::Duration = std::time::Duration::from_secs(730 * 24 * 3600);

/// Whether a stored certificate is due for renewal at `now`: under a third of its life left. One whose dates cannot
/// be read is kept (what was applied is not churned on a guess).
fn due(certificate: &ServingCertificate, now: i64) -> bool {
    crate::tls::validity(&certificate.cert_pem).is_some_and(|(start, end)| end - now < (end - start) / 3)
}

impl StoredCertificates {
    /// Reads the serving certificates of applied TLS Secrets (`tls.crt`, `tls.key` and `ca.crt`).
    pub fn from_secrets(secrets: &[k8s_openapi::api::core::v1::Secret]) -> Self {
        let mut by_secret = BTreeMap::new();
        for secret in secrets {
            let (Some(name), Some(namespace), Some(data)) =
                (secret.metadata.name.as_deref(), secret.metadata.namespace.as_deref(), secret.data.as_ref())
            else {
                continue;
            };
            let text = |key: &str| data.get(key).and_then(|bytes| String::from_utf8(bytes.0.clone()).ok());
            if let (Some(cert_pem), Some(key_pem), Some(ca_pem)) = (text("tls.crt"), text("tls.key"), text("ca.crt")) {
                let certificate = ServingCertificate { cert_pem, key_pem, ca_pem: Some(ca_pem) };
                by_secret.insert((namespace.to_owned(), name.to_owned()), certificate);
            }
        }
        Self { by_secret, now: crate::tls::shared::unix_now() }
    }
}

impl CertificateIssuer for StoredCertificates {
    /// The certificate of the Secret the conversion names after the Service of the first DNS name
    /// (`<service>.<namespace>.svc`), when it was applied.
    fn issue(&self, dns_names: &[String]) -> Result<ServingCertificate, CertificateError> {
        let mut host = dns_names.first().map(|first| first.split('.')).into_iter().flatten();
        if let (Some(service), Some(namespace)) = (host.next(), host.next()) {
            if let Some(stored) = self.by_secret.get(&(namespace.to_owned(), webhook_secret_name(service))) {
                if !due(stored, self.now) {
                    return Ok(stored.clone());
                }
            }
        }
        let name = dns_names.first().map_or("olmv2-webhook-ca", String::as_str);
        let options =
            CaOptions { common_name: name.to_owned(), organization: None, validity: Some(BUNDLE_CERTIFICATE_VALIDITY) };
        CertificateAuthority::with_options(&options)?.issue(dns_names)
    }
}

impl Resolver {
    /// Resolves every content item of `install`. `groups` are the OperatorGroups of the install namespace.
    pub async fn resolve(
        &self,
        install: &Install,
        kinds: &KindIndex,
        groups: &[OperatorGroup],
        certificates: &StoredCertificates,
    ) -> Result<Resolved, ResolveError> {
        let mapping = &install.spec.namespaces;
        let namespace = install_namespace(mapping);
        let install_name = install.metadata.name.as_deref().unwrap_or_default();
        let mut resolved = Resolved::default();
        for (index, item) in install.spec.content.iter().enumerate() {
            let source =
                item.source().map_err(|error| ResolveError::InvalidUnion { index, reason: error.to_string() })?;
            match source {
                ContentSource::ManifestImage(reference) => {
                    let pulled = self.images.pull(reference, &self.cache, self.limits).await;
                    self.metrics.bundle_pull(match &pulled {
                        Ok(pulled) if pulled.cached => "cached",
                        Ok(_) => "pulled",
                        Err(_) => "failed",
                    });
                    let pulled =
                        pulled.map_err(|source| ResolveError::PullImage { reference: reference.to_owned(), source })?;
                    let bundle = Bundle::load(&pulled.root)
                        .map_err(|source| ResolveError::LoadBundle { reference: reference.to_owned(), source })?;
                    let targets = target_namespaces(&bundle.csv, &namespace, groups);
                    let config = item.config.as_ref().filter(|config| !config.is_empty());
                    let options = RenderOptions {
                        install_namespace: &namespace,
                        target_namespaces: &targets,
                        certificates,
                        deployment_config: config,
                    };
                    let objects = render(&bundle, &options)
                        .map_err(|source| ResolveError::ConvertBundle { reference: reference.to_owned(), source })?;
                    resolved.objects.extend(objects);
                    let group = match groups {
                        [group] => group.metadata.name.as_deref(),
                        _ => None,
                    };
                    resolved.objects.push(csv_record(&bundle, &namespace, &targets, group, install_name));
                    resolved.csvs.push(bundle.name().to_owned());
                    resolved.resolved.push(ResolvedContent {
                        content_type: ContentType::ManifestImage,
                        manifest_image: Some(pulled.pinned),
                        digest: pulled.digest,
                        config_digest: config
                            .map(config_digest)
                            .transpose()
                            .map_err(|source| ResolveError::DigestConfig { index, source })?,
                    });
                }
                ContentSource::Raw(_) if item.config.is_some() => {
                    return Err(ResolveError::ConfigWithoutBundle { index });
                }
                ContentSource::Raw(text) => {
                    let mut objects = parse_raw(index, text).map_err(ResolveError::ParseRaw)?;
                    place_raw(&mut objects, kinds, mapping);
                    resolved.objects.extend(objects);
                    resolved.resolved.push(ResolvedContent {
                        content_type: ContentType::Raw,
                        manifest_image: None,
                        digest: format!("sha256:{}", hex(&Sha256::digest(text.as_bytes()))),
                        config_digest: None,
                    });
                }
            }
        }
        Ok(resolved)
    }
}

/// What identifies a deployment configuration: the sha256 of its JSON, whose maps are ordered, so that the same
/// configuration always has the same digest.
pub fn config_digest(config: &DeploymentConfig) -> Result<String, serde_json::Error> {
    Ok(format!("sha256:{}", hex(&Sha256::digest(serde_json::to_vec(config)?))))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The content: its objects decorated and in apply order, what it resolved to, its CSVs, and the kinds known with
/// its CRDs.
pub struct Content {
    pub objects: Vec<Value>,
    pub resolved: Vec<ResolvedContent>,
    pub csvs: Vec<String>,
    pub kinds: KindIndex,
}

/// The pass's second step: the content resolved (pulled, or found unpacked) and pinned; refused when it cannot be,
/// or when a CRD of it names an API the cluster serves already.
pub async fn resolve_content(
    ctx: &Context,
    pass: &Pass<'_>,
    account: &Account,
) -> Result<Step<Content>, ReconcileError> {
    let kinds = ctx.cluster.kinds(false).await?;
    let certificates =
        StoredCertificates::from_secrets(&applied_secrets(&account.client, &pass.previous.applied).await);
    let resolved = match ctx.resolver.resolve(pass.install, &kinds, &account.groups, &certificates).await {
        Ok(resolved) => resolved,
        Err(error) => {
            let message = crate::category::report(&error);
            let outcome = if error.is_import_failure() {
                Outcome::ImportFailed { message }
            } else {
                Outcome::Invalid { reason: error.category(), message }
            };
            return Ok(Step::Break(Stop::new(outcome, ctx.basics.retry)));
        }
    };
    let Resolved { mut objects, resolved, csvs } = resolved;
    let decoration = Decoration { install: &pass.name, uid: &pass.uid, component_label: pass.label.as_deref() };
    decorate(&mut objects, &decoration);
    sort_for_apply(&mut objects);
    // Content defines only new APIs: a CRD naming a resource the cluster serves with no CRD behind it (a built-in,
    // an aggregated API) is refused, before anything counts the rules on that resource as the content's own.
    for reference in crd_safety::crds_naming_served_apis(&objects, &kinds, &pass.previous.applied) {
        if ctx.cluster.objects(&kinds).get(&reference).await?.is_none() {
            let message = format!(
                "CustomResourceDefinition {} names a resource the API server already serves (a built-in or aggregated API): content may define only new APIs",
                reference.name
            );
            let outcome = Outcome::Invalid { reason: "CrdNamesServedApi", message };
            return Ok(Step::Break(Stop::new(outcome, ctx.basics.resync)));
        }
    }
    let mut kinds = kinds;
    kinds.add_crds(objects.iter());
    if objects.iter().any(|object| !known(&kinds, object)) {
        kinds = ctx.cluster.kinds(true).await?;
        kinds.add_crds(objects.iter());
    }
    Ok(Step::Continue(Content { objects, resolved, csvs, kinds }))
}

fn known(kinds: &KindIndex, object: &Value) -> bool {
    kinds
        .resolve(object["apiVersion"].as_str().unwrap_or_default(), object["kind"].as_str().unwrap_or_default())
        .is_some()
}

/// The Secrets an Install applied, read as its ServiceAccount (which was granted `get` on exactly those names), so
/// that rendering again reuses their serving certificates. The controller itself reads no Secret. One that cannot
/// be read only costs a certificate rotation.
async fn applied_secrets(client: &ControllerClient, applied: &[AppliedObject]) -> Vec<Secret> {
    let mut secrets = Vec::new();
    for reference in applied.iter().filter(|r| r.kind == "Secret" && r.api_version == "v1") {
        let Some(namespace) = reference.namespace.as_deref() else { continue };
        match client.namespaced::<Secret>(namespace).get_opt(&reference.name).await {
            Ok(found) => secrets.extend(found),
            Err(error) => tracing::debug!(%error, namespace, secret = %reference.name, "serving certificate not read"),
        }
    }
    secrets
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::ByteString;

    #[tokio::test]
    async fn a_deployment_configuration_on_raw_content_is_refused() {
        let install: Install = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "raw"},
            "spec": {"content": [{"type": "Raw", "raw": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n",
                                  "config": {"env": [{"name": "A", "value": "1"}]}}],
                     "namespaces": [{"from": "default", "to": "ops"}]}}))
        .expect("install");
        let resolver = Resolver {
            images: ImageClient::new(crate::bundle::image::RegistryOptions::default()),
            cache: std::env::temp_dir(),
            limits: UnpackLimits::default(),
            metrics: std::sync::Arc::default(),
        };
        let certificates = StoredCertificates { by_secret: BTreeMap::new(), now: 0 };
        let refused = resolver.resolve(&install, &KindIndex::kubernetes(), &[], &certificates).await;
        assert!(matches!(refused, Err(ResolveError::ConfigWithoutBundle { index: 0 })), "{:?}", refused.err());
    }

    /// A TLS Secret in `operators` holding placeholder certificate, key and CA.
    fn tls_secret(name: &str) -> Secret {
        let mut secret = Secret::default();
        secret.metadata.name = Some(name.to_owned());
        secret.metadata.namespace = Some("operators".into());
        secret.data = Some(
            [("tls.crt", "CERT"), ("tls.key", "KEY"), ("ca.crt", "CA")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        );
        secret
    }

    #[test]
    fn stored_certificates_are_reused_for_the_same_service() {
        let secret = tls_secret("plumbus-service-cert");
        let stored = StoredCertificates::from_secrets(&[secret]);
        let names = vec!["plumbus-service.operators.svc".to_owned()];
        let issued = stored.issue(&names).expect("issued");
        assert_eq!(
            issued,
            ServingCertificate { ca_pem: Some("CA".into()), cert_pem: "CERT".into(), key_pem: "KEY".into() }
        );
        let fresh = stored.issue(&["other-service.operators.svc".to_owned()]).expect("issued");
        assert!(fresh.cert_pem.contains("BEGIN CERTIFICATE"));
    }

    #[test]
    fn a_stored_certificate_is_renewed_once_a_third_of_its_life_is_left_and_a_new_one_lives_two_years() {
        let short = CaOptions {
            common_name: "ca".into(),
            organization: None,
            validity: Some(std::time::Duration::from_secs(300)),
        };
        let names = vec!["plumbus-service.operators.svc".to_owned()];
        let old = CertificateAuthority::with_options(&short).expect("CA").issue(&names).expect("issued");
        let (start, _) = crate::tls::validity(&old.cert_pem).expect("dates");
        let key = ("operators".to_owned(), webhook_secret_name("plumbus-service"));
        let stored = |now| StoredCertificates { by_secret: BTreeMap::from([(key.clone(), old.clone())]), now };
        assert_eq!(stored(start + 100).issue(&names).expect("kept"), old, "two thirds left");
        let renewed = stored(start + 201).issue(&names).expect("renewed");
        assert_ne!(renewed.cert_pem, old.cert_pem);
        let (from, until) = crate::tls::validity(&renewed.cert_pem).expect("dates");
        assert_eq!(until - from, 730 * 24 * 3600);
    }

    #[test]
    fn stored_certificates_are_found_under_a_shortened_secret_name() {
        let service =
            crate::bundle::names::webhook_service_name("a.deployment.whose.name.is.too.long.for.a.service.name");
        let secret = tls_secret(&webhook_secret_name(&service));
        let stored = StoredCertificates::from_secrets(&[secret]);
        let issued = stored.issue(&crate::tls::service_dns_names(&service, "operators")).expect("issued");
        assert_eq!(issued.cert_pem, "CERT");
        let elsewhere = stored.issue(&crate::tls::service_dns_names(&service, "other")).expect("issued");
        assert_ne!(elsewhere.cert_pem, "CERT", "another namespace's Service gets its own");
    }

    #[test]
    fn a_configuration_digest_depends_on_its_content_only() {
        let config = |value: serde_json::Value| -> DeploymentConfig { serde_json::from_value(value).expect("config") };
        let a = config(serde_json::json!({"annotations": {"a": "1", "b": "2"}, "nodeSelector": {"x": "y"}}));
        let b = config(serde_json::json!({"nodeSelector": {"x": "y"}, "annotations": {"b": "2", "a": "1"}}));
        assert_eq!(config_digest(&a).expect("digest"), config_digest(&b).expect("digest"));
        let other = config(serde_json::json!({"annotations": {"a": "1"}}));
        assert_ne!(config_digest(&a).expect("digest"), config_digest(&other).expect("digest"));
        assert!(config_digest(&a).expect("digest").starts_with("sha256:"));
    }

    #[test]
    fn only_pulls_are_import_failures() {
        let parse = ResolveError::ParseRaw(BundleError::InvalidYaml { file: "f".into(), reason: "r".into() });
        assert!(!parse.is_import_failure());
        assert_eq!(parse.category(), BundleError::InvalidYaml { file: "f".into(), reason: "r".into() }.category());
    }
}
