use k8s_openapi::ByteString;
use serde_json::json;

use super::fixtures::csv;
use super::*;
use crate::legacy::csv::rotation::{install_ca, serving_pair};

#[test]
fn names_are_olms() {
    assert_eq!(service_name("hooks"), "hooks-service");
    assert_eq!(secret_name("hooks-service"), "hooks-service-cert");
    assert_eq!(auth_delegator_name("api-service"), "api-service-system:auth-delegator");
    assert_eq!(auth_reader_name("api-service"), "api-service-auth-reader");
    assert_eq!(hosts("s", "ns"), ["s.ns", "s.ns.svc", "s.ns.svc.cluster.local"]);
}

#[test]
fn serving_deployments_get_deduplicated_ports_in_olms_order() {
    let served = served(&csv());
    assert_eq!(served.keys().collect::<Vec<_>>(), ["api", "hooks"], "plain serves nothing");
    assert!(served["api"].api_service);
    assert_eq!(served["api"].ports, [json!({"name": "5443", "port": 5443, "targetPort": 5443})]);
    assert!(!served["hooks"].api_service);
    // Three webhooks on one port and target: one port.
    assert_eq!(served["hooks"].ports, [json!({"name": "443", "port": 443, "targetPort": 9443})]);
}

#[test]
fn a_description_naming_no_strategy_deployment_serves_nothing() {
    let mut csv = csv();
    csv.spec.webhook_definitions[0].deployment_name = "elsewhere".into();
    assert!(!served(&csv).contains_key("elsewhere"));
}

#[test]
fn the_service_selects_the_deployment_and_is_owned_without_blocking() {
    let csv = csv();
    let spec = json!({"selector": {"matchLabels": {"app": "hooks"}}});
    let service = service(&csv, "hooks", &spec, &served(&csv)["hooks"]);
    assert_eq!(service["metadata"]["name"], "hooks-service");
    assert_eq!(service["metadata"]["labels"], json!({"olm.managed": "true"}));
    assert_eq!(service["spec"]["selector"], json!({"app": "hooks"}));
    assert_eq!(service["metadata"]["ownerReferences"][0]["blockOwnerDeletion"], false);
    assert_eq!(service["metadata"]["ownerReferences"][0]["uid"], "csv-uid");
}

#[test]
fn the_secret_holds_the_pair_the_ca_and_its_hash() {
    let pair = serving_pair(&install_ca().expect("ca"), &hosts("hooks-service", "ops")).expect("pair");
    let secret = secret(&csv(), "hooks-service", &pair);
    assert_eq!(secret["type"], "kubernetes.io/tls");
    assert_eq!(secret["metadata"]["name"], "hooks-service-cert");
    assert_eq!(secret["metadata"]["annotations"]["olmcahash"], pem_sha256(pair.ca_pem.as_bytes()));
    let data = secret["data"].as_object().expect("data");
    assert_eq!(data.keys().collect::<Vec<_>>(), ["olmCAKey", "tls.crt", "tls.key"]);
}

fn stored(pair: &ServingPair) -> Secret {
    Secret {
        data: Some(BTreeMap::from([
            (CA_KEY.to_owned(), ByteString(pair.ca_pem.clone().into_bytes())),
            ("tls.crt".to_owned(), ByteString(pair.cert_pem.clone().into_bytes())),
        ])),
        ..Secret::default()
    }
}

#[test]
fn a_good_secret_is_reused_and_a_bad_one_is_not() {
    let hosts = hosts("hooks-service", "ops");
    let pair = serving_pair(&install_ca().expect("ca"), &hosts).expect("pair");
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    assert_eq!(reusable_ca(Some(&stored(&pair)), &hosts, now), Some(pair.ca_pem.clone()));
    assert_eq!(reusable_ca(None, &hosts, now), None);
    assert_eq!(reusable_ca(Some(&Secret::default()), &hosts, now), None);
    assert_eq!(reusable_ca(Some(&stored(&pair)), &super::hosts("other", "ops"), now), None);
}

#[test]
fn rbac_lets_the_account_read_its_secret_and_binds_aggregated_api_servers() {
    let csv = csv();
    let role = secret_role(&csv, "api-service-cert");
    assert_eq!(
        role["rules"],
        json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["api-service-cert"]}])
    );
    let binding = secret_role_binding(&csv, "api-service-cert", "wizard");
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "api-service-cert"})
    );
    assert_eq!(
        binding["subjects"][0],
        json!({"kind": "ServiceAccount", "apiGroup": "", "name": "wizard", "namespace": "ops"})
    );
    let delegator = auth_delegator(&csv, "api-service", "wizard");
    assert_eq!(delegator["metadata"]["name"], "api-service-system:auth-delegator");
    assert_eq!(delegator["roleRef"]["name"], "system:auth-delegator");
    let labels = &delegator["metadata"]["labels"];
    assert_eq!(
        (&labels["olm.owner"], &labels["olm.owner.namespace"], &labels["olm.owner.kind"], &labels["olm.managed"]),
        (&json!("wizard.v1"), &json!("ops"), &json!("ClusterServiceVersion"), &json!("true"))
    );
    let reader = auth_reader(&csv, "api-service", "wizard");
    assert_eq!(reader["metadata"]["namespace"], "kube-system");
    assert_eq!(reader["metadata"]["name"], "api-service-auth-reader");
    assert_eq!(reader["metadata"]["labels"], delegator["metadata"]["labels"], "found by the owner labels");
    assert_eq!(
        reader["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"})
    );
}

#[test]
fn mounting_defaults_the_account_replaces_volumes_by_name_and_mounts_by_path() {
    let csv = csv();
    let mut spec = serde_json::to_value(&csv.spec.install.spec.deployments[1].spec).expect("spec");
    assert_eq!(account_of(&spec), "default");
    mount(&mut spec, "hooks-service-cert", "abc");
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "default");
    let volumes: Vec<&str> =
        pod["volumes"].as_array().expect("volumes").iter().map(|v| v["name"].as_str().expect("name")).collect();
    assert_eq!(volumes, ["webhook-cert", "data", "apiservice-cert"]);
    assert_eq!(pod["volumes"][0]["secret"]["items"][0], json!({"key": "tls.crt", "path": "tls.crt"}));
    assert_eq!(pod["volumes"][2]["secret"]["items"][1], json!({"key": "tls.key", "path": "apiserver.key"}));
    assert_eq!(pod["volumes"][2]["secret"]["secretName"], "hooks-service-cert");
    let mounts = &pod["containers"][0]["volumeMounts"];
    assert_eq!(
        mounts,
        &json!([
            {"name": "webhook-cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"},
            {"name": "data", "mountPath": "/data"},
            {"name": "apiservice-cert", "mountPath": "/apiserver.local.config/certificates"}
        ])
    );
    assert_eq!(spec["template"]["metadata"]["annotations"], json!({"kept": "yes", "olmcahash": "abc"}));
    // Mounting again changes nothing.
    let once = spec.clone();
    mount(&mut spec, "hooks-service-cert", "abc");
    assert_eq!(spec, once);
}

#[test]
fn a_named_account_is_kept() {
    let mut spec = serde_json::to_value(&csv().spec.install.spec.deployments[0].spec).expect("spec");
    mount(&mut spec, "api-service-cert", "h");
    assert_eq!(spec["template"]["spec"]["serviceAccountName"], "wizard");
    assert_eq!(account_of(&spec), "wizard");
}

#[test]
fn a_binding_of_a_csv_of_another_namespace_is_claimed_there() {
    let csv = csv();
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    let labels = |name: &str, namespace: &str| {
        BTreeMap::from([
            ("olm.owner".to_owned(), name.to_owned()),
            ("olm.owner.namespace".to_owned(), namespace.to_owned()),
            ("olm.owner.kind".to_owned(), "ClusterServiceVersion".to_owned()),
        ])
    };
    assert_eq!(claimed_elsewhere(&labels("other.v1", "elsewhere"), &csv).as_deref(), Some("elsewhere/other.v1"));
    assert_eq!(claimed_elsewhere(&labels("older.v0", &namespace), &csv), None, "the replaced CSV passes it on");
    assert_eq!(claimed_elsewhere(&owner_labels(&csv), &csv), None);
    assert_eq!(claimed_elsewhere(&BTreeMap::new(), &csv), None, "unlabelled: OLM's to take over");
}
