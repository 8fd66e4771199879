//! kube-apiserver's defaults of built-in kinds over HTTPS: what a Deployment and a Service read back with, that
//! writes relying on them work (a JSON patch replacing a defaulted field), Service cluster IPs that are never shared
//! and never change, and who owns defaulted fields in managedFields.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

mod support;

use serde_json::{json, Value};
use support::{get, patch, post, put, start};

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const SERVICES: &str = "/api/v1/namespaces/default/services";
const WEBHOOKS: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

fn deployment() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "app:1", "ports": [{"containerPort": 8080}]}]}}}})
}

/// The fields of a managed-fields entry, for the manager `manager`.
fn fields_of(object: &Value, manager: &str) -> Value {
    let entries = object["metadata"]["managedFields"].as_array().expect("managed fields");
    entries
        .iter()
        .find(|e| e["manager"] == manager)
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or_else(|| panic!("{manager} in {entries:?}"))
}

#[tokio::test]
async fn a_deployment_without_replicas_reads_back_with_kube_defaults_and_takes_a_json_patch_of_them() {
    let (_plane, client) = start().await;
    let (code, created) = post(&client, &format!("{DEPLOYMENTS}?fieldManager=creator"), &deployment()).await;
    assert_eq!(code, 201, "{created}");
    let (_, read) = get(&client, &format!("{DEPLOYMENTS}/web")).await;
    assert_eq!(
        read["spec"],
        json!({"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                "containers": [{"name": "app", "image": "app:1", "imagePullPolicy": "IfNotPresent",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
                "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "securityContext": {}, "terminationGracePeriodSeconds": 30}}})
    );
    // Defaults are applied on decoding, so the creator's Update entry owns them, as kube-apiserver records it.
    let owned = fields_of(&read, "creator");
    assert_eq!(owned["f:spec"]["f:replicas"], json!({}));
    assert_eq!(owned["f:spec"]["f:strategy"]["f:rollingUpdate"]["f:maxSurge"], json!({}));
    let container = &owned["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"];
    assert_eq!(container["f:imagePullPolicy"], json!({}), "{owned}");
    let (code, patched) = patch(
        &client,
        &format!("{DEPLOYMENTS}/web"),
        "application/json-patch+json",
        r#"[{"op":"replace","path":"/spec/replicas","value":2},{"op":"replace","path":"/spec/strategy/rollingUpdate/maxSurge","value":1}]"#,
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["spec"]["replicas"], 2);
    assert_eq!(patched["spec"]["strategy"]["rollingUpdate"], json!({"maxSurge": 1, "maxUnavailable": "25%"}));
    let (code, status) = patch(
        &client,
        &format!("{DEPLOYMENTS}/web"),
        "application/strategic-merge-patch+json",
        r#"{"spec":{"strategy":{"type":"Recreate"}}}"#,
    )
    .await;
    assert_eq!(code, 422, "the defaulted rolling update stays: {status}");
    assert_eq!(
        status["message"],
        "Deployment.apps \"web\" is invalid: spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"
    );
}

#[tokio::test]
async fn an_applier_does_not_own_what_defaulting_set() {
    let (_plane, client) = start().await;
    let apply = |manager: &str| format!("{DEPLOYMENTS}/web?fieldManager={manager}");
    let (code, created) =
        patch(&client, &apply("alice"), "application/apply-patch+yaml", &deployment().to_string()).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["replicas"], 1);
    assert_eq!(created["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
    let owned = fields_of(&created, "alice");
    assert!(owned["f:spec"].get("f:replicas").is_none() && owned["f:spec"].get("f:strategy").is_none(), "{owned}");
    let container = &owned["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"];
    for defaulted in ["f:imagePullPolicy", "f:terminationMessagePath", "f:terminationMessagePolicy"] {
        assert!(container.get(defaulted).is_none(), "{defaulted} in {container}");
    }
    assert_eq!((&container["f:name"], &container["f:image"]), (&json!({}), &json!({})));
    let mut scaled = deployment();
    scaled["spec"] = json!({"replicas": 3});
    let (code, taken) = patch(&client, &apply("bob"), "application/apply-patch+yaml", &scaled.to_string()).await;
    assert_eq!((code, taken["spec"]["replicas"].clone()), (200, json!(3)), "nobody owned the default: {taken}");
}

#[tokio::test]
async fn services_get_cluster_ips_no_other_service_has_and_keep_them() {
    let (_plane, client) = start().await;
    let service = |name: &str| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80}]}});
    let (code, first) = post(&client, &format!("{SERVICES}?fieldManager=creator"), &service("first")).await;
    assert_eq!(code, 201, "{first}");
    let (_, second) = post(&client, SERVICES, &service("second")).await;
    let ip = first["spec"]["clusterIP"].as_str().expect("a cluster IP").to_owned();
    let address: std::net::Ipv4Addr = ip.parse().expect("an IPv4 address");
    assert!(address.octets()[0] == 10 && (96..112).contains(&address.octets()[1]), "{ip} in 10.96.0.0/12");
    assert_ne!(second["spec"]["clusterIP"], first["spec"]["clusterIP"]);
    let spec = &first["spec"];
    assert_eq!(
        (
            &spec["clusterIPs"],
            &spec["ipFamilies"],
            &spec["ipFamilyPolicy"],
            &spec["type"],
            &spec["sessionAffinity"],
            &spec["internalTrafficPolicy"]
        ),
        (&json!([ip]), &json!(["IPv4"]), &json!("SingleStack"), &json!("ClusterIP"), &json!("None"), &json!("Cluster"))
    );
    assert_eq!(spec["ports"], json!([{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}]));
    assert_eq!(first["status"], json!({"loadBalancer": {}}));
    // The allocated address is the storage's, not a default: kube-apiserver records no owner for it.
    let owned = fields_of(&first, "creator");
    assert!(owned["f:spec"].get("f:clusterIP").is_none(), "{owned}");
    assert_eq!(owned["f:spec"]["f:sessionAffinity"], json!({}));
    let mut taken = service("third");
    taken["spec"]["clusterIP"] = json!(ip);
    let (code, status) = post(&client, SERVICES, &taken).await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        format!("Service \"third\" is invalid: spec.clusterIPs: Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: provided IP is already allocated")
    );
    let mut resent = service("first");
    resent["metadata"]["resourceVersion"] = first["metadata"]["resourceVersion"].clone();
    let (code, replaced) = put(&client, &format!("{SERVICES}/first"), &resent).await;
    assert_eq!((code, replaced["spec"]["clusterIP"].clone()), (200, json!(ip)), "{replaced}");
    let (code, status) = patch(
        &client,
        &format!("{SERVICES}/first"),
        "application/merge-patch+json",
        r#"{"spec":{"clusterIP":"10.96.0.99"}}"#,
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "Service \"first\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.99\"}: may not change once set"
    );
}

#[tokio::test]
async fn webhook_configurations_are_defaulted_and_their_required_fields_checked() {
    let (_plane, client) = start().await;
    let configuration = |webhook: Value| json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "policy"}, "webhooks": [webhook]});
    let webhook = json!({"name": "deny.example.com", "clientConfig": {"url": "https://127.0.0.1:1/validate"},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]});
    let (code, status) = post(&client, WEBHOOKS, &configuration(webhook.clone())).await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"policy\" is invalid: [webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun, webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1]"
    );
    let mut complete = webhook;
    complete["sideEffects"] = json!("None");
    complete["admissionReviewVersions"] = json!(["v1"]);
    let (code, created) = post(&client, WEBHOOKS, &configuration(complete)).await;
    assert_eq!(code, 201, "{created}");
    let stored = &created["webhooks"][0];
    assert_eq!(
        (
            &stored["failurePolicy"],
            &stored["matchPolicy"],
            &stored["timeoutSeconds"],
            &stored["namespaceSelector"],
            &stored["objectSelector"],
            &stored["rules"][0]["scope"]
        ),
        (&json!("Fail"), &json!("Equivalent"), &json!(10), &json!({}), &json!({}), &json!("*"))
    );
}
