//! The webhook's ValidatingWebhookConfiguration and its serving certificate: generated at start (a CA and a leaf
//! for the Service's DNS names, the CA going into `caBundle`), or read from a mounted cert-manager Secret.

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use serde_json::{json, Value};

use super::WebhookError;

/// Name of the configuration the controller writes.
pub const CONFIGURATION_NAME: &str = "olmv2-install-approval";
/// Path the approval check is served on.
pub const APPROVAL_PATH: &str = "/validate-install";
pub const CATALOG_USE_PATH: &str = "/validate-operator";

/// A serving certificate; `ca_pem` is set when the controller generated it.
pub struct ServingCertificate {
    pub cert_pem: String,
    pub key_pem: String,
    pub ca_pem: Option<String>,
}

/// A CA and a certificate it signs for `service.namespace.svc` (and its longer forms).
pub fn generate(service: &str, namespace: &str) -> Result<ServingCertificate, WebhookError> {
    let ca_key = KeyPair::generate().map_err(WebhookError::Certificate)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(WebhookError::Certificate)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "olmv2-webhook-ca");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_pem = ca.self_signed(&ca_key).map_err(WebhookError::Certificate)?.pem();
    let names = dns_names(service, namespace);
    let key = KeyPair::generate().map_err(WebhookError::Certificate)?;
    let mut leaf = CertificateParams::new(names.clone()).map_err(WebhookError::Certificate)?;
    leaf.distinguished_name.push(DnType::CommonName, names[0].as_str());
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert_pem = leaf.signed_by(&key, &Issuer::from_params(&ca, &ca_key)).map_err(WebhookError::Certificate)?.pem();
    Ok(ServingCertificate { cert_pem, key_pem: key.serialize_pem(), ca_pem: Some(ca_pem) })
}

/// The DNS names the API server uses for a Service.
pub fn dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        format!("{service}.{namespace}"),
    ]
}

/// `tls.crt` and `tls.key` of a mounted Secret.
pub fn read(dir: &Path) -> Result<ServingCertificate, WebhookError> {
    let read = |file: &str| {
        let path = dir.join(file);
        std::fs::read_to_string(&path).map_err(|source| WebhookError::ReadCertificate { path, source })
    };
    Ok(ServingCertificate { cert_pem: read("tls.crt")?, key_pem: read("tls.key")?, ca_pem: None })
}

/// The configuration: every create and update of an Install and of its status goes through the webhook, and fails
/// closed, since an approval the webhook did not check must never stand.
pub fn configuration(namespace: &str, service: &str, port: i32, ca_pem: Option<&str>) -> Value {
    let client_config = |path: &str| {
        let mut config = json!({"service": {"namespace": namespace, "name": service, "path": path, "port": port}});
        if let Some(ca) = ca_pem {
            config["caBundle"] = json!(crate::install::resolve::ca_bundle(ca));
        }
        config
    };
    let mut metadata = json!({"name": CONFIGURATION_NAME});
    if ca_pem.is_none() {
        // cert-manager's CA injector fills caBundle from the Certificate of this name.
        metadata["annotations"] = json!({"cert-manager.io/inject-ca-from": format!("{namespace}/{service}")});
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": [{
            "name": "approval.installs.operators.coreos.com",
            "clientConfig": client_config(APPROVAL_PATH),
            "rules": [{
                "apiGroups": ["operators.coreos.com"],
                "apiVersions": ["v2alpha1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["installs", "installs/status"],
                "scope": "Cluster",
            }],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        }, {
            "name": "catalogsources.operators.operators.coreos.com",
            "clientConfig": client_config(CATALOG_USE_PATH),
            "rules": [{
                "apiGroups": ["operators.coreos.com"],
                "apiVersions": ["v2alpha1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["operators"],
                "scope": "Cluster",
            }],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_configuration_carries_the_ca_and_covers_status() {
        let certificate = generate("olmv2-webhook", "olmv2-system").expect("generated");
        let ca = certificate.ca_pem.as_deref().expect("ca");
        assert!(ca.contains("BEGIN CERTIFICATE"));
        let value = configuration("olmv2-system", "olmv2-webhook", 443, Some(ca));
        let webhook = &value["webhooks"][0];
        assert_eq!(webhook["clientConfig"]["service"]["name"], "olmv2-webhook");
        assert_eq!(webhook["failurePolicy"], "Fail");
        assert_eq!(webhook["rules"][0]["resources"], json!(["installs", "installs/status"]));
        assert!(webhook["clientConfig"]["caBundle"].as_str().is_some_and(|b| !b.is_empty()));
        let operators = &value["webhooks"][1];
        assert_eq!(operators["clientConfig"]["service"]["path"], CATALOG_USE_PATH);
        assert_eq!(operators["rules"][0]["resources"], json!(["operators"]), "status writes need no catalog check");
        assert_eq!(operators["clientConfig"]["caBundle"], webhook["clientConfig"]["caBundle"]);
        assert!(value["metadata"].get("annotations").is_none());
    }

    #[test]
    fn cert_manager_setups_leave_the_ca_to_the_injector() {
        let value = configuration("olmv2-system", "olmv2-webhook", 443, None);
        assert!(value["webhooks"][0]["clientConfig"].get("caBundle").is_none());
        assert_eq!(value["metadata"]["annotations"]["cert-manager.io/inject-ca-from"], "olmv2-system/olmv2-webhook");
    }

    #[test]
    fn a_missing_certificate_directory_is_an_error_naming_the_file() {
        let error = read(Path::new("/nonexistent-olmv2-certs")).err().expect("fails");
        assert!(error.to_string().contains("tls.crt"), "{error}");
    }
}
