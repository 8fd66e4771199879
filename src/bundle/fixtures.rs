//! Bundles and a certificate issuer for the conversion's unit tests: a CSV built from a few fields, and certificates
//! whose text says what they were issued for, so that rendered objects can be compared whole.

use serde_json::{json, Value};

use super::model::{Bundle, BundleAnnotations, Manifest};
use crate::tls::{CertificateError, CertificateIssuer, ServingCertificate};

/// A bundle whose CSV is `operator.v1` with `spec` merged over an AllNamespaces install strategy with no
/// Deployments, and `objects` beside it.
pub fn bundle(spec: Value, objects: Vec<Value>) -> Bundle {
    let mut csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "operator.v1"},
        "spec": {"installModes": [{"type": "AllNamespaces", "supported": true}, {"type": "OwnNamespace", "supported": true}],
                 "install": {"strategy": "deployment", "spec": {"deployments": []}}}});
    if let (Some(base), Some(extra)) = (csv["spec"].as_object_mut(), spec.as_object()) {
        base.extend(extra.clone());
    }
    Bundle {
        csv: serde_json::from_value(csv).expect("a valid CSV"),
        objects: objects.into_iter().map(|object| Manifest { file: "manifests/object.yaml".into(), object }).collect(),
        annotations: BundleAnnotations::default(),
        properties: Vec::new(),
        dependencies: Vec::new(),
    }
}

/// A Deployment of an install strategy: one container `manager`, pods labelled `app: <name>`.
pub fn deployment_spec(name: &str, pod: Value) -> Value {
    let mut spec = json!({"containers": [{"name": "manager", "image": "example.com/operator:v1"}]});
    if let (Some(base), Some(extra)) = (spec.as_object_mut(), pod.as_object()) {
        base.extend(extra.clone());
    }
    json!({"name": name, "spec": {"selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}})
}

/// Issues certificates whose PEM text names the DNS names, and one fixed CA.
pub struct FixedIssuer;

impl CertificateIssuer for FixedIssuer {
    fn issue(&self, dns_names: &[String]) -> Result<ServingCertificate, CertificateError> {
        Ok(ServingCertificate {
            cert_pem: format!("certificate for {}", dns_names.join(",")),
            key_pem: "private key".into(),
            ca_pem: Some("test CA".into()),
        })
    }
}
