//! The webhooks' Services, Secrets, configurations and certificate mounts, by the names OLM gives them.

use serde_json::json;

use super::*;
use crate::bundle::fixtures::{bundle, deployment_spec, FixedIssuer};

const LONG_DOTTED: &str = "operator.controller-manager.with.a.very-long.name-that-goes.on.and.on";

/// The deployments and objects rendered for `webhooks` served by `deployment` with `pod` fields, watching `targets`.
fn rendered(deployment: Value, webhooks: Value, targets: &[&str]) -> (BTreeMap<String, Value>, Vec<Value>, Vec<Value>) {
    let name = deployment["name"].as_str().unwrap_or_default().to_owned();
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "plumbai.example.com"}, "spec": {"group": "example.com"}});
    let bundle = bundle(json!({"webhookdefinitions": webhooks}), vec![]);
    let mut deployments = BTreeMap::from([(name, json!({"metadata": {}, "spec": deployment["spec"].clone()}))]);
    let mut crds = vec![crd];
    let at = WebhookTargets { namespace: "operators", targets, issuer: &FixedIssuer };
    let objects = render_webhooks(&bundle, &mut deployments, &mut crds, &at).expect("renders");
    (deployments, objects, crds)
}

fn admission(kind: &str, generate_name: &str, deployment: &str) -> Value {
    json!({"type": kind, "generateName": generate_name, "deploymentName": deployment, "containerPort": 443,
        "targetPort": 9443, "admissionReviewVersions": ["v1"], "sideEffects": "None", "webhookPath": "/validate",
        "rules": [{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["plumbai"]}]})
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects.iter().find(|o| o["kind"] == kind).unwrap_or_else(|| panic!("no {kind} in {objects:#?}"))
}

#[test]
fn a_long_dotted_deployment_gets_valid_service_and_secret_names() {
    let (deployments, objects, _) = rendered(
        deployment_spec(LONG_DOTTED, json!({})),
        json!([admission("ValidatingAdmissionWebhook", "vplumbus.example.com", LONG_DOTTED)]),
        &[],
    );
    let service = find(&objects, "Service");
    let secret = find(&objects, "Secret");
    let service_name = service["metadata"]["name"].as_str().expect("name");
    assert_eq!(service_name, "operator-controller-manager-with-a-very-long-name-that--service");
    assert_eq!(secret["metadata"]["name"], "operator-controller-manager-with-a-very-long-name-that--se-cert");
    assert!(service_name.len() <= 63 && !service_name.contains('.'));
    // The certificate, the configuration and the mounted volume all name the same Service and Secret.
    assert_eq!(
        secret["stringData"]["tls.crt"],
        format!("certificate for {service_name}.operators.svc,{service_name}.operators.svc.cluster.local,{service_name}.operators")
    );
    let configuration = find(&objects, "ValidatingWebhookConfiguration");
    assert_eq!(configuration["webhooks"][0]["clientConfig"]["service"]["name"], service_name);
    let volumes = &deployments[LONG_DOTTED]["spec"]["template"]["spec"]["volumes"];
    assert_eq!(volumes[0]["secret"]["secretName"], secret["metadata"]["name"]);
}

#[test]
fn a_configuration_and_its_webhook_share_the_trimmed_generate_name() {
    let (_, objects, _) = rendered(
        deployment_spec("manager", json!({})),
        json!([admission("MutatingAdmissionWebhook", "mplumbus.example.com-", "manager")]),
        &["team-a"],
    );
    let configuration = find(&objects, "MutatingWebhookConfiguration");
    assert_eq!(configuration["metadata"]["name"], "mplumbus.example.com");
    assert_eq!(configuration["webhooks"][0]["name"], "mplumbus.example.com");
    assert_eq!(
        configuration["webhooks"][0]["namespaceSelector"],
        json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a"]}]})
    );
    assert_eq!(
        configuration["webhooks"][0]["clientConfig"]["service"],
        json!({"namespace": "operators", "name": "manager-service", "path": "/validate", "port": 443})
    );
    assert_eq!(configuration["webhooks"][0]["clientConfig"]["caBundle"], tls::ca_bundle("test CA"));
}

#[test]
fn the_bundles_own_certificate_volume_is_replaced_not_left_behind() {
    // As kubebuilder scaffolds it for cert-manager: a volume `cert` of a Secret OLM never creates.
    let pod = json!({
        "containers": [{"name": "manager", "image": "m", "volumeMounts": [
            {"name": "cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs", "readOnly": true},
            {"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "cert", "secret": {"secretName": "webhook-server-cert"}}, {"name": "data", "emptyDir": {}},
                    {"name": "webhook-cert", "secret": {"secretName": "stale"}}],
    });
    let (deployments, _, _) = rendered(
        deployment_spec("manager", pod),
        json!([admission("ValidatingAdmissionWebhook", "vplumbus.example.com", "manager")]),
        &[],
    );
    let pod = &deployments["manager"]["spec"]["template"]["spec"];
    let items = json!([{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]);
    let api_items = json!([{"key": "tls.crt", "path": "apiserver.crt"}, {"key": "tls.key", "path": "apiserver.key"}]);
    assert_eq!(
        pod["volumes"],
        json!([{"name": "data", "emptyDir": {}},
               {"name": "webhook-cert", "secret": {"secretName": "manager-service-cert", "items": items}},
               {"name": "apiservice-cert", "secret": {"secretName": "manager-service-cert", "items": api_items}}])
    );
    assert_eq!(
        pod["containers"][0]["volumeMounts"],
        json!([{"name": "data", "mountPath": "/data"},
               {"name": "webhook-cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"},
               {"name": "apiservice-cert", "mountPath": "/apiserver.local.config/certificates"}])
    );
}

#[test]
fn a_conversion_webhook_sets_the_crds_conversion_with_olms_default_path() {
    let mut conversion = admission("ConversionWebhook", "cplumbus.example.com", "manager");
    conversion["conversionCRDs"] = json!(["plumbai.example.com"]);
    conversion.as_object_mut().map(|w| w.remove("webhookPath"));
    let (_, objects, crds) = rendered(deployment_spec("manager", json!({})), json!([conversion]), &[]);
    assert!(!objects.iter().any(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("WebhookConfiguration"))));
    assert_eq!(
        crds[0]["spec"]["conversion"],
        json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
            "caBundle": tls::ca_bundle("test CA"),
            "service": {"namespace": "operators", "name": "manager-service", "path": "/", "port": 443}}}})
    );
}

#[test]
fn an_admission_webhook_without_a_path_names_none() {
    let mut webhook = admission("ValidatingAdmissionWebhook", "vplumbus.example.com", "manager");
    webhook.as_object_mut().map(|w| w.remove("webhookPath"));
    let (_, objects, _) = rendered(deployment_spec("manager", json!({})), json!([webhook]), &[]);
    let service = &find(&objects, "ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["service"];
    assert!(service.get("path").is_none(), "{service}");
}

#[test]
fn one_service_serves_every_webhook_of_a_deployment_on_its_ports() {
    let mut second = admission("MutatingAdmissionWebhook", "mplumbus.example.com", "manager");
    second["containerPort"] = json!(8443);
    second["targetPort"] = json!("webhook");
    let (_, objects, _) = rendered(
        deployment_spec("manager", json!({})),
        json!([admission("ValidatingAdmissionWebhook", "vplumbus.example.com", "manager"), second]),
        &[],
    );
    assert_eq!(objects.iter().filter(|o| o["kind"] == "Service").count(), 1);
    assert_eq!(
        find(&objects, "Service")["spec"],
        json!({"selector": {"app": "manager"}, "ports": [
            {"name": "443", "port": 443, "targetPort": 9443}, {"name": "8443", "port": 8443, "targetPort": "webhook"}]})
    );
}

#[test]
fn a_webhook_of_a_deployment_the_csv_lacks_is_refused() {
    let bundle = bundle(
        json!({"webhookdefinitions": [admission("ValidatingAdmissionWebhook", "v.example.com", "ghost")]}),
        vec![],
    );
    let at = WebhookTargets { namespace: "operators", targets: &[], issuer: &FixedIssuer };
    let error = render_webhooks(&bundle, &mut BTreeMap::new(), &mut [], &at).expect_err("refused");
    assert!(matches!(error, ConvertError::WebhookDeploymentMissing { ref deployment, .. } if deployment == "ghost"));
}
