//! A CSV's owned APIServices and webhooks, installed as OLM v0's install strategy does: a real community bundle's
//! admission webhooks (and their certificate rotated), an aggregated API served with the certificate the controller
//! issued (the control plane's aggregator checks it against the APIService's caBundle), a conversion webhook. The
//! attacks of authors who may not create what the install makes are in `component_attacks`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, ListParams};
use olmv2::api::v1alpha1::{ClusterServiceVersion, CsvPhase};
use olmv2_e2e::cluster::Kubernetes;
use serde_json::json;

use super::csvs::apply_bundle_by_hand;
use super::{apply, start, CRD};
use crate::support::harness::Harness;

pub(super) const GLOBAL_GROUP: &str =
    "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\nspec: {}\n";

/// Waits until the CSV `name` of `ops` is in `phase` (and `message`, when given), standing in for the Deployment
/// controller meanwhile.
pub(super) async fn wait_csv(
    harness: &Harness,
    name: &str,
    phase: CsvPhase,
    message: Option<&str>,
) -> ClusterServiceVersion {
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops");
    let mut last = None;
    for _ in 0..600 {
        harness.roll_out("ops").await;
        if let Some(csv) = csvs.get_opt(name).await.expect("get") {
            let status = csv.status.clone().unwrap_or_default();
            if status.phase == phase && message.is_none_or(|message| status.message.as_deref() == Some(message)) {
                return csv;
            }
            last = Some(csv);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} never reached {phase:?} {message:?}; last: {}", serde_json::to_string_pretty(&last).unwrap());
}

fn decoded(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
}

fn owned_by(csv: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("olm.owner".to_owned(), csv.to_owned()),
        ("olm.owner.namespace".to_owned(), "ops".to_owned()),
        ("olm.owner.kind".to_owned(), "ClusterServiceVersion".to_owned()),
        ("olm.managed".to_owned(), "true".to_owned()),
    ])
}

/// kubebrowser's bundle, applied by hand: its Deployment gets OLM's Service, certificate Secret, Role and
/// RoleBinding, certificate volumes and `olmcahash`; its two admission webhooks get configurations named from their
/// generateName and labelled as OLM labels them; the CSV Succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_community_bundle_with_webhooks_gets_olms_objects_and_succeeds() {
    let harness = start("webhooks").await;
    apply(&harness, GLOBAL_GROUP);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/testdata/community-bundles/kubebrowser/0.0.2");
    let (loaded, csv) = apply_bundle_by_hand(&harness, &dir).await;
    let name = loaded.csv.metadata.name.clone().expect("name");
    wait_csv(&harness, &name, CsvPhase::Succeeded, Some("install strategy completed with no errors")).await;

    let client = harness.admin.clone();
    let deployment_name = "kubebrowser-controller-manager";
    let service = Api::<Service>::namespaced(client.clone(), "ops")
        .get("kubebrowser-controller-manager-service")
        .await
        .expect("service");
    assert_eq!(service.metadata.labels.as_ref().unwrap()["olm.managed"], "true");
    let owner = &service.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.block_owner_deletion),
        ("ClusterServiceVersion", name.as_str(), Some(false))
    );
    let spec = service.spec.unwrap();
    assert_eq!(
        serde_json::to_value(spec.ports.unwrap()).unwrap(),
        json!([{"name": "443", "port": 443, "protocol": "TCP", "targetPort": 9443}])
    );
    let deployment =
        Api::<Deployment>::namespaced(client.clone(), "ops").get(deployment_name).await.expect("deployment");
    let match_labels = deployment.spec.as_ref().unwrap().selector.match_labels.clone().unwrap();
    assert_eq!(spec.selector.unwrap(), match_labels, "the Service selects the Deployment");

    let secret = Api::<Secret>::namespaced(client.clone(), "ops")
        .get("kubebrowser-controller-manager-service-cert")
        .await
        .expect("secret");
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let keys: Vec<&String> = secret.data.as_ref().unwrap().keys().collect();
    assert_eq!(keys, ["olmCAKey", "tls.crt", "tls.key"]);
    let ca = decoded(&secret, "olmCAKey");
    let ca_hash = olmv2::legacy::csv::rotation::pem_sha256(ca.as_bytes());
    assert_eq!(secret.metadata.annotations.as_ref().unwrap()["olmcahash"], ca_hash);
    let role = Api::<Role>::namespaced(client.clone(), "ops")
        .get("kubebrowser-controller-manager-service-cert")
        .await
        .expect("role");
    assert_eq!(role.rules.unwrap()[0].resource_names.clone().unwrap(), ["kubebrowser-controller-manager-service-cert"]);
    let binding = Api::<RoleBinding>::namespaced(client.clone(), "ops")
        .get("kubebrowser-controller-manager-service-cert")
        .await
        .expect("binding");
    let account =
        deployment.spec.as_ref().unwrap().template.spec.as_ref().unwrap().service_account_name.clone().unwrap();
    assert_eq!(binding.subjects.unwrap()[0].name, account);
    let delegators = Api::<ClusterRoleBinding>::all(client.clone())
        .list(&ListParams::default().labels(&format!("olm.owner={name}")))
        .await
        .expect("list");
    assert!(delegators.items.is_empty(), "webhooks alone get no aggregated API server bindings");

    let template = deployment.spec.unwrap().template;
    assert_eq!(template.metadata.unwrap().annotations.unwrap()["olmcahash"], ca_hash);
    let pod = template.spec.unwrap();
    let volumes: Vec<String> =
        pod.volumes.unwrap().into_iter().filter(|v| v.secret.is_some()).map(|v| v.name).collect();
    assert!(
        volumes.contains(&"webhook-cert".to_owned()) && volumes.contains(&"apiservice-cert".to_owned()),
        "{volumes:?}"
    );
    let mounts: Vec<(String, String)> =
        pod.containers[0].volume_mounts.clone().unwrap().into_iter().map(|m| (m.name, m.mount_path)).collect();
    assert!(mounts.contains(&("webhook-cert".into(), "/tmp/k8s-webhook-server/serving-certs".into())), "{mounts:?}");

    let selector = format!("olm.owner={name},olm.webhook-description-generate-name=mbrowsersystem-v1alpha.kb.io");
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("list");
    assert_eq!(mutating.items.len(), 1);
    let configuration = &mutating.items[0];
    assert!(configuration.metadata.name.as_ref().unwrap().starts_with("mbrowsersystem-v1alpha.kb.io-"));
    let labels = configuration.metadata.labels.clone().unwrap();
    for (key, value) in owned_by(&name) {
        assert_eq!(labels.get(&key), Some(&value), "{key}");
    }
    let description =
        loaded.csv.spec.webhook_definitions.iter().find(|w| w.generate_name == "mbrowsersystem-v1alpha.kb.io").unwrap();
    assert_eq!(labels["olm.webhook-description-hash"], olmv2::legacy::csv::webhooks::description_hash(description));
    let webhook = &configuration.webhooks.as_ref().unwrap()[0];
    assert_eq!(webhook.name, "mbrowsersystem-v1alpha.kb.io");
    assert!(
        webhook.namespace_selector.as_ref().is_none_or(|s| s.match_labels.is_none() && s.match_expressions.is_none()),
        "a global group selects every namespace"
    );
    let reference = webhook.client_config.service.clone().unwrap();
    assert_eq!(
        (reference.name.as_str(), reference.namespace.as_str(), reference.port),
        ("kubebrowser-controller-manager-service", "ops", Some(443))
    );
    assert_eq!(webhook.client_config.ca_bundle.clone().unwrap().0, ca.as_bytes(), "the caBundle is the install's CA");
    let validating = harness.admin_kubectl(
        &["get", "validatingwebhookconfigurations", "-l", &format!("olm.owner={name}"), "-o", "name"],
        None,
    );
    let listed = String::from_utf8_lossy(&validating.stdout).into_owned();
    assert!(
        listed
            .trim()
            .starts_with("validatingwebhookconfiguration.admissionregistration.k8s.io/vbrowsersystem-v1alpha1.kb.io-"),
        "{listed}"
    );
    // The CSV drops its validating webhook: its configuration goes (OLM's cleanUpRemovedWebhooks).
    let mut dropped = csv.clone();
    dropped["spec"]["webhookdefinitions"] = json!(csv["spec"]["webhookdefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["type"] != "ValidatingAdmissionWebhook")
        .cloned()
        .collect::<Vec<_>>());
    let output = harness.admin_kubectl(&["apply", "--server-side", "-f", "-"], Some(&dropped.to_string()));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let owned = ListParams::default().labels(&format!("olm.owner={name}"));
    for _ in 0..600 {
        if validating.list(&owned).await.expect("list").items.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        validating.list(&owned).await.expect("list").items.is_empty(),
        "the dropped webhook's configuration is deleted"
    );
    assert_eq!(
        Api::<MutatingWebhookConfiguration>::all(client.clone()).list(&owned).await.expect("list").items.len(),
        1
    );

    // A certificate that no longer parses is replaced: the CSV goes Pending/NeedsCertRotation, is installed again
    // with a new CA, and its Deployment and webhook carry the new one.
    let secrets = Api::<Secret>::namespaced(client.clone(), "ops");
    let broken = json!({"data": {"olmCAKey": "Z2FyYmFnZQ=="}});
    secrets
        .patch(
            "kubebrowser-controller-manager-service-cert",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&broken),
        )
        .await
        .expect("patch");
    let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), "ops");
    let mut rotated = None;
    for _ in 0..1800 {
        harness.roll_out("ops").await;
        let csv = csvs.get(&name).await.expect("csv");
        let status = csv.status.clone().unwrap_or_default();
        let through = status.conditions.iter().any(|c| c.reason.as_deref() == Some("NeedsCertRotation"));
        if through && status.phase == CsvPhase::Succeeded {
            rotated = Some(status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rotated = rotated.expect("the CSV went through NeedsCertRotation back to Succeeded");
    let rotation = rotated.conditions.iter().find(|c| c.reason.as_deref() == Some("NeedsCertRotation")).unwrap();
    assert_eq!(rotation.message.as_deref(), Some("CSV owns resources that require a cert refresh"));
    let secret = secrets.get("kubebrowser-controller-manager-service-cert").await.expect("secret");
    let new_ca = decoded(&secret, "olmCAKey");
    assert_ne!(new_ca, ca);
    let new_hash = olmv2::legacy::csv::rotation::pem_sha256(new_ca.as_bytes());
    let deployment =
        Api::<Deployment>::namespaced(client.clone(), "ops").get(deployment_name).await.expect("deployment");
    assert_eq!(deployment.spec.unwrap().template.metadata.unwrap().annotations.unwrap()["olmcahash"], new_hash);
    let mutating = Api::<MutatingWebhookConfiguration>::all(client).list(&owned).await.expect("list");
    let bundle = mutating.items[0].webhooks.as_ref().unwrap()[0].client_config.ca_bundle.clone().unwrap();
    assert_eq!(bundle.0, new_ca.as_bytes());
}

pub(super) fn api_csv() -> String {
    r#"
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata: {name: wizard.v1.0.0, namespace: ops}
spec:
  displayName: Wizard
  version: 1.0.0
  installModes: [{type: AllNamespaces, supported: true}]
  apiservicedefinitions:
    owned: [{name: wizards, group: wizards.example.com, version: v1alpha1, kind: Wizard, deploymentName: wizard-api, containerPort: 5443}]
  install:
    strategy: deployment
    spec:
      deployments:
      - name: wizard-api
        spec:
          selector: {matchLabels: {app: wizard}}
          template:
            metadata: {labels: {app: wizard}}
            spec:
              serviceAccountName: wizard
              containers: [{name: api, image: "example.com/wizard:1.0.0"}]
"#
    .to_owned()
}

async fn discovery() -> axum::response::Response {
    let body = json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "wizards.example.com/v1alpha1",
        "resources": [{"name": "wizards", "singularName": "wizard", "namespaced": true, "kind": "Wizard", "verbs": ["get", "list"]}]});
    axum::response::Response::builder()
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap()
}

/// An owned APIService: OLM's APIService, Service, Secret and aggregated API server bindings; the CSV waits with
/// "apiServices not installed" until a server presenting the issued certificate answers the aggregator's discovery
/// check through the Service, then Succeeds; deleted, it takes them with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_owned_apiservice_is_served_with_the_certificate_olm_issues() {
    let harness = start("apiservice").await;
    apply(&harness, GLOBAL_GROUP);
    // The Deployment's account, as OLM's InstallPlan creates it: without it kube-apiserver refuses its pods.
    apply(&harness, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: wizard, namespace: ops}\n");
    apply(&harness, &api_csv());
    let installing = wait_csv(&harness, "wizard.v1.0.0", CsvPhase::Installing, Some("apiServices not installed")).await;
    let status = installing.status.unwrap();
    let (issued, due) = (status.certs_last_updated.expect("certsLastUpdated"), status.certs_rotate_at.expect("due"));
    assert_eq!(due.0.as_second() - issued.0.as_second(), 729 * 86_400, "certsRotateAt is 729 days on");

    let client = harness.admin.clone();
    let api_service =
        Api::<APIService>::all(client.clone()).get("v1alpha1.wizards.example.com").await.expect("apiservice");
    let labels = api_service.metadata.labels.clone().unwrap();
    for (key, value) in owned_by("wizard.v1.0.0") {
        assert_eq!(labels.get(&key), Some(&value), "{key}");
    }
    let spec = api_service.spec.clone().unwrap();
    assert_eq!((spec.group_priority_minimum, spec.version_priority), (2000, 15));
    let reference = spec.service.unwrap();
    assert_eq!(
        (reference.name.as_deref(), reference.namespace.as_deref(), reference.port),
        (Some("wizard-api-service"), Some("ops"), Some(5443))
    );
    let secret = Api::<Secret>::namespaced(client.clone(), "ops").get("wizard-api-service-cert").await.expect("secret");
    assert_eq!(
        spec.ca_bundle.unwrap().0,
        decoded(&secret, "olmCAKey").into_bytes(),
        "the caBundle is the install's CA"
    );
    let delegator = Api::<ClusterRoleBinding>::all(client.clone())
        .get("wizard-api-service-system:auth-delegator")
        .await
        .expect("crb");
    assert_eq!(delegator.role_ref.name, "system:auth-delegator");
    assert_eq!(delegator.subjects.unwrap()[0].name, "wizard");
    for (key, value) in owned_by("wizard.v1.0.0") {
        assert_eq!(delegator.metadata.labels.as_ref().unwrap().get(&key), Some(&value), "{key}");
    }
    let reader = Api::<RoleBinding>::namespaced(client.clone(), "kube-system")
        .get("wizard-api-service-auth-reader")
        .await
        .expect("reader");
    assert_eq!(reader.role_ref.name, "extension-apiserver-authentication-reader");
    for (key, value) in owned_by("wizard.v1.0.0") {
        assert_eq!(reader.metadata.labels.as_ref().unwrap().get(&key), Some(&value), "{key}");
    }
    let service = Api::<Service>::namespaced(client.clone(), "ops").get("wizard-api-service").await.expect("service");
    assert_eq!(service.spec.unwrap().ports.unwrap()[0].port, 5443);

    // The operator's server, with the certificate mounted from the Secret, behind the Service.
    let certificate = olmv2::tls::ServingCertificate {
        cert_pem: decoded(&secret, "tls.crt"),
        key_pem: decoded(&secret, "tls.key"),
        ca_pem: None,
    };
    let router = axum::Router::new().route("/apis/wizards.example.com/v1alpha1", axum::routing::get(discovery));
    // Real Kubernetes reaches it at the port the APIService names, the emulator at any.
    let port = if harness.kubernetes() == Kubernetes::Real { 5443 } else { 0 };
    let server = olmv2::tls::HttpsServer::start("wizard", ([127, 0, 0, 1], port).into(), &certificate, router)
        .await
        .expect("server");
    harness.plane.point_service("ops", "wizard-api-service", server.address).await.expect("Service pointed");
    wait_csv(&harness, "wizard.v1.0.0", CsvPhase::Succeeded, Some("install strategy completed with no errors")).await;

    // Deleting the CSV deletes, through OLM's finalizer, its APIService (left behind, it would break discovery for
    // every client) and the aggregated API server's bindings outside its namespace.
    let output = harness.admin_kubectl(&["delete", "csv", "-n", "ops", "wizard.v1.0.0", "--timeout=20s"], None);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(Api::<APIService>::all(client.clone())
        .get_opt("v1alpha1.wizards.example.com")
        .await
        .expect("get")
        .is_none());
    let delegators = Api::<ClusterRoleBinding>::all(client.clone());
    assert!(delegators.get_opt("wizard-api-service-system:auth-delegator").await.expect("get").is_none());
    let readers = Api::<RoleBinding>::namespaced(client, "kube-system");
    assert!(readers.get_opt("wizard-api-service-auth-reader").await.expect("get").is_none());
}

fn conversion_csv(modes: &str) -> String {
    super::csv("ops", &[]).replace("installModes: []", &format!("installModes: [{modes}]")).replace(
        "  install:",
        r#"  webhookdefinitions:
  - generateName: cplumbus.example.com
    type: ConversionWebhook
    deploymentName: plumbus-operator
    containerPort: 443
    targetPort: 9443
    sideEffects: None
    admissionReviewVersions: [v1, v1beta1]
    conversionCRDs: [plumbuses.example.com]
  install:"#,
    )
}

/// A conversion webhook: OLM's precondition refuses a CSV that does not support only AllNamespaces, with its
/// message; an AllNamespaces-only CSV gets its owned CRD converted by `<deployment>-service` with the install's CA,
/// and Succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_conversion_webhook_is_set_on_the_owned_crd_as_olm_sets_it() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let harness = start("conversion").await;
    apply(&harness, CRD);
    apply(&harness, GLOBAL_GROUP);
    apply(&harness, &super::account("ops", true));
    apply(&harness, &conversion_csv("{type: AllNamespaces, supported: true}, {type: OwnNamespace, supported: true}"));
    let failed = wait_csv(&harness, "plumbus.v1.0.0", CsvPhase::Failed, None).await;
    assert_eq!(
        failed.status.unwrap().message.as_deref(),
        Some(
            "install strategy failed: unable to manage conversion webhook: CSVs with conversion webhooks must support \
             only AllNamespaces"
        )
    );

    apply(&harness, &conversion_csv("{type: AllNamespaces, supported: true}, {type: OwnNamespace, supported: false}"));
    wait_csv(&harness, "plumbus.v1.0.0", CsvPhase::Succeeded, Some("install strategy completed with no errors")).await;
    let crd =
        Api::<CustomResourceDefinition>::all(harness.admin.clone()).get("plumbuses.example.com").await.expect("crd");
    let conversion = crd.spec.conversion.expect("conversion");
    assert_eq!(conversion.strategy, "Webhook");
    let webhook = conversion.webhook.expect("webhook");
    assert_eq!(webhook.conversion_review_versions, ["v1", "v1beta1"]);
    let config = webhook.client_config.expect("client config");
    let service = config.service.expect("service");
    assert_eq!(
        (service.name.as_str(), service.namespace.as_str(), service.path.as_deref(), service.port),
        ("plumbus-operator-service", "ops", Some("/"), Some(443))
    );
    let secret = Api::<Secret>::namespaced(harness.admin.clone(), "ops")
        .get("plumbus-operator-service-cert")
        .await
        .expect("secret");
    assert_eq!(config.ca_bundle.expect("caBundle").0, decoded(&secret, "olmCAKey").into_bytes());
}
