//! The webhook's configurations (validating and mutating) and its serving certificate: generated at start (a CA
//! and a leaf for the Service's DNS names, the CA going into `caBundle`), or read from a mounted cert-manager Secret
//! (`tls::ServingCertificate::read_mounted`), whose CA cert-manager's injector writes instead.

use serde_json::{json, Value};

use crate::tls::{self, CertificateAuthority, CertificateError, CertificateIssuer, ServingCertificate};

/// Name of the configuration the controller writes.
pub const CONFIGURATION_NAME: &str = "olmv2-install-approval";
/// Path the approval check is served on.
pub const APPROVAL_PATH: &str = "/validate-install";
pub const CATALOG_USE_PATH: &str = "/validate-operator";
/// Name of the mutating configuration that records who created and who changed Installs and Operators.
pub const IDENTITY_CONFIGURATION_NAME: &str = "olmv2-install-identity";
pub const MUTATE_INSTALL_PATH: &str = "/mutate-install";
pub const MUTATE_OPERATOR_PATH: &str = "/mutate-operator";
pub const MUTATE_CSV_PATH: &str = "/mutate-csv";
/// Records a Subscription's author as a CSV's: the creator, then whoever last changed its spec.
pub const MUTATE_SUBSCRIPTION_PATH: &str = "/mutate-subscription";
/// Records who named an OperatorGroup's ServiceAccount.
pub const MUTATE_OPERATOR_GROUP_PATH: &str = "/mutate-operatorgroup";

/// The common name of the webhook's generated CAs.
pub const CA_NAME: &str = "olmv2-webhook-ca";

/// A CA and a certificate it signs for the Service's DNS names (`service.namespace.svc` and its other forms).
pub fn generate(service: &str, namespace: &str) -> Result<ServingCertificate, CertificateError> {
    CertificateAuthority::new(CA_NAME)?.issue(&tls::service_dns_names(service, namespace))
}

fn client_config(namespace: &str, service: &str, port: i32, ca_pem: Option<&str>, path: &str) -> Value {
    let mut config = json!({"service": {"namespace": namespace, "name": service, "path": path, "port": port}});
    if let Some(ca) = ca_pem {
        config["caBundle"] = json!(tls::ca_bundle(ca));
    }
    config
}

fn metadata(name: &str, namespace: &str, service: &str, ca_pem: Option<&str>) -> Value {
    let mut metadata = json!({"name": name});
    if ca_pem.is_none() {
        // cert-manager's CA injector fills caBundle from the Certificate of this name.
        metadata["annotations"] = json!({"cert-manager.io/inject-ca-from": format!("{namespace}/{service}")});
    }
    metadata
}

/// The mutating configuration: every create and update of an Install, an Operator or a CSV goes through the webhook,
/// which records its creator and marks content changes; it fails closed, since an unrecorded creator or an
/// unmarked change would let someone borrow rights nobody approved for them.
pub fn identity_configuration(namespace: &str, service: &str, port: i32, ca_pem: Option<&str>) -> Value {
    let webhook = |name: &str, (version, resource, scope): (&str, &str, &str), path: &str| {
        json!({
            "name": name,
            "clientConfig": client_config(namespace, service, port, ca_pem, path),
            "rules": [{
                "apiGroups": ["operators.coreos.com"],
                "apiVersions": [version],
                "operations": ["CREATE", "UPDATE"],
                "resources": [resource],
                "scope": scope,
            }],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "reinvocationPolicy": "Never",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        })
    };
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": metadata(IDENTITY_CONFIGURATION_NAME, namespace, service, ca_pem),
        "webhooks": [
            webhook("identity.installs.operators.coreos.com", ("v2alpha1", "installs", "Cluster"), MUTATE_INSTALL_PATH),
            webhook("identity.operators.operators.coreos.com", ("v2alpha1", "operators", "Cluster"), MUTATE_OPERATOR_PATH),
            // The author of a hand-applied CSV, whose rights bound what the legacy CSV loop installs for it.
            webhook(
                "identity.clusterserviceversions.operators.coreos.com",
                ("v1alpha1", "clusterserviceversions", "Namespaced"),
                MUTATE_CSV_PATH,
            ),
            // The author of a Subscription, on whose behalf its InstallPlans make Installs: an OperatorGroup's
            // account lends its rights to them only where that person may use it.
            webhook(
                "identity.subscriptions.operators.coreos.com",
                ("v1alpha1", "subscriptions", "Namespaced"),
                MUTATE_SUBSCRIPTION_PATH,
            ),
            // Who named an OperatorGroup's account: it lends its rights to Installs only where that person could
            // run as it.
            webhook(
                "identity.operatorgroups.operators.coreos.com",
                ("v1", "operatorgroups", "Namespaced"),
                MUTATE_OPERATOR_GROUP_PATH,
            ),
        ],
    })
}

/// The configuration: every create and update of an Install and of its status goes through the webhook, and fails
/// closed, since an approval the webhook did not check must never stand.
pub fn configuration(namespace: &str, service: &str, port: i32, ca_pem: Option<&str>) -> Value {
    let client_config = |path: &str| client_config(namespace, service, port, ca_pem, path);
    let metadata = metadata(CONFIGURATION_NAME, namespace, service, ca_pem);
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

/// Whether a selector or a list selects everything, as the API server's defaults (`{}`, `{"matchLabels": {}}`) do.
fn selects_all(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.values().all(selects_all),
        Value::Array(list) => list.is_empty(),
        _ => false,
    }
}

/// Where the webhook is reached, for checking that the configurations in the cluster still send Installs to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookService {
    pub namespace: String,
    pub name: String,
    pub port: i32,
}

/// What is wrong with the webhook configurations guarding approvals, as read from the cluster, against what the
/// controller writes: a configuration or one of its webhooks gone, a failure policy other than Fail, rules that no
/// longer cover every write they covered, another service, or selectors and match conditions that exempt some
/// objects. Empty when they guard as written. (The caBundle is left out: cert-manager's injector may own it.)
pub fn guard_problems(service: &WebhookService, validating: Option<&Value>, mutating: Option<&Value>) -> Vec<String> {
    let expected = [
        (CONFIGURATION_NAME, configuration(&service.namespace, &service.name, service.port, None), validating),
        (
            IDENTITY_CONFIGURATION_NAME,
            identity_configuration(&service.namespace, &service.name, service.port, None),
            mutating,
        ),
    ];
    let mut problems = Vec::new();
    for (name, wanted, found) in expected {
        let Some(found) = found else {
            problems.push(format!("webhook configuration {name} does not exist"));
            continue;
        };
        for webhook in wanted["webhooks"].as_array().into_iter().flatten() {
            let webhook_name = webhook["name"].as_str().unwrap_or_default();
            let present = found["webhooks"].as_array().into_iter().flatten().find(|w| w["name"] == webhook["name"]);
            let Some(present) = present else {
                problems.push(format!("webhook {webhook_name} is missing from {name}"));
                continue;
            };
            let checks = [
                ("failurePolicy", present["failurePolicy"] == webhook["failurePolicy"]),
                ("rules", present["rules"] == webhook["rules"]),
                ("clientConfig.service", present["clientConfig"]["service"] == webhook["clientConfig"]["service"]),
                ("clientConfig.url", present["clientConfig"]["url"].is_null()),
                ("objectSelector", selects_all(&present["objectSelector"])),
                ("namespaceSelector", selects_all(&present["namespaceSelector"])),
                ("matchConditions", selects_all(&present["matchConditions"])),
                ("matchPolicy", present["matchPolicy"].is_null() || present["matchPolicy"] == "Equivalent"),
            ];
            for (field, holds) in checks {
                if !holds {
                    problems.push(format!("webhook {webhook_name} of {name} has a changed {field}"));
                }
            }
        }
    }
    problems
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
    fn the_identity_configuration_mutates_creates_and_updates_of_installs_operators_csvs_subscriptions_and_groups() {
        let value = identity_configuration("olmv2-system", "olmv2-webhook", 443, Some("CA"));
        assert_eq!(value["kind"], "MutatingWebhookConfiguration");
        let webhooks = value["webhooks"].as_array().expect("webhooks");
        assert_eq!(webhooks.len(), 5);
        assert_eq!(webhooks[2]["rules"][0]["apiVersions"], json!(["v1alpha1"]));
        assert_eq!(webhooks[2]["rules"][0]["scope"], "Namespaced");
        for (webhook, resource, path) in [
            (&webhooks[0], "installs", MUTATE_INSTALL_PATH),
            (&webhooks[1], "operators", MUTATE_OPERATOR_PATH),
            (&webhooks[2], "clusterserviceversions", MUTATE_CSV_PATH),
            (&webhooks[3], "subscriptions", MUTATE_SUBSCRIPTION_PATH),
            (&webhooks[4], "operatorgroups", MUTATE_OPERATOR_GROUP_PATH),
        ] {
            assert_eq!(webhook["failurePolicy"], "Fail");
            assert_eq!(webhook["rules"][0]["resources"], json!([resource]), "status writes are the controller's");
            assert_eq!(webhook["rules"][0]["operations"], json!(["CREATE", "UPDATE"]));
            assert_eq!(webhook["clientConfig"]["service"]["path"], path);
            assert!(webhook["clientConfig"]["caBundle"].is_string());
        }
        let injected = identity_configuration("olmv2-system", "olmv2-webhook", 443, None);
        assert!(injected["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].is_string());
    }

    fn service() -> WebhookService {
        WebhookService { namespace: "olmv2-system".into(), name: "olmv2-webhook".into(), port: 443 }
    }

    #[test]
    fn configurations_as_written_guard_with_or_without_a_ca() {
        let validating = configuration("olmv2-system", "olmv2-webhook", 443, Some("CA"));
        let mutating = identity_configuration("olmv2-system", "olmv2-webhook", 443, Some("CA"));
        assert!(guard_problems(&service(), Some(&validating), Some(&mutating)).is_empty());
        let mut defaulted = validating.clone();
        defaulted["webhooks"][0]["matchPolicy"] = json!("Equivalent");
        defaulted["webhooks"][0]["objectSelector"] = json!({});
        defaulted["webhooks"][0]["namespaceSelector"] = json!({"matchLabels": {}});
        assert!(guard_problems(&service(), Some(&defaulted), Some(&mutating)).is_empty(), "server defaults");
    }

    #[test]
    fn a_configuration_weakened_or_gone_is_a_problem() {
        let validating = configuration("olmv2-system", "olmv2-webhook", 443, None);
        let mutating = identity_configuration("olmv2-system", "olmv2-webhook", 443, None);
        let problems = guard_problems(&service(), None, Some(&mutating));
        assert_eq!(problems, vec![format!("webhook configuration {CONFIGURATION_NAME} does not exist")]);
        let weaken = |edit: &dyn Fn(&mut Value)| {
            let mut changed = validating.clone();
            edit(&mut changed);
            guard_problems(&service(), Some(&changed), Some(&mutating))
        };
        assert!(!weaken(&|v| v["webhooks"][0]["failurePolicy"] = json!("Ignore")).is_empty());
        assert!(!weaken(&|v| v["webhooks"][0]["rules"][0]["resources"] = json!(["installs"])).is_empty());
        assert!(!weaken(&|v| v["webhooks"][0]["objectSelector"] = json!({"matchLabels": {"x": "y"}})).is_empty());
        assert!(!weaken(&|v| v["webhooks"][0]["matchConditions"] = json!([{"name": "n", "expression": "false"}]))
            .is_empty());
        assert!(!weaken(&|v| v["webhooks"][0]["clientConfig"]["service"]["name"] = json!("evil")).is_empty());
        assert!(!weaken(&|v| {
            if let Some(list) = v["webhooks"].as_array_mut() {
                list.remove(0);
            }
        })
        .is_empty());
    }

    #[test]
    fn cert_manager_setups_leave_the_ca_to_the_injector() {
        let value = configuration("olmv2-system", "olmv2-webhook", 443, None);
        assert!(value["webhooks"][0]["clientConfig"].get("caBundle").is_none());
        assert_eq!(value["metadata"]["annotations"]["cert-manager.io/inject-ca-from"], "olmv2-system/olmv2-webhook");
    }
}
