//! kube-apiserver's defaults of built-in kinds over HTTPS: what a Deployment, a Service and each kind `kubectl apply
//! --prune` looks up read back with, that writes relying on them work (a JSON patch replacing a defaulted field),
//! Service cluster IPs that are never shared and never change, and who owns defaulted fields in managedFields.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use crate::support;
use serde_json::{json, Value};
use support::{get, patch, post, put, start, DEPLOYMENTS};

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

/// A pod template of one container, and what it reads back as.
fn pods(restart_policy: &str) -> (Value, Value) {
    let sent = json!({"metadata": {"labels": {"app": "db"}}, "spec": {"restartPolicy": restart_policy,
        "containers": [{"name": "db", "image": "db:1"}]}});
    let read = json!({"metadata": {"labels": {"app": "db"}}, "spec": {"restartPolicy": restart_policy,
        "containers": [{"name": "db", "image": "db:1", "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
        "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler", "securityContext": {},
        "terminationGracePeriodSeconds": 30}});
    (sent, read)
}

#[tokio::test]
async fn a_stateful_set_and_its_claim_templates_read_back_defaulted() {
    let (_plane, client) = start().await;
    let (template, defaulted_template) = pods("Always");
    let stateful_set = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": template,
            "updateStrategy": {"rollingUpdate": {"partition": 0}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}]}});
    let collection = "/apis/apps/v1/namespaces/default/statefulsets";
    let (code, created) = post(&client, collection, &stateful_set).await;
    assert_eq!(code, 201, "{created}");
    let (_, read) = get(&client, &format!("{collection}/db")).await;
    assert_eq!(
        read["spec"],
        json!({"serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": defaulted_template,
            "replicas": 1, "revisionHistoryLimit": 10, "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "volumeClaimTemplates": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"},
                "status": {"phase": "Pending"}}]})
    );
}

#[tokio::test]
async fn a_cron_job_reads_back_with_its_defaults_and_its_job_templates_pods_only() {
    let (_plane, client) = start().await;
    let (template, defaulted_template) = pods("OnFailure");
    let cron_job = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 3 * * *", "failedJobsHistoryLimit": 0, "jobTemplate": {"spec": {"template": template}}}});
    let collection = "/apis/batch/v1/namespaces/default/cronjobs";
    let (code, created) = post(&client, collection, &cron_job).await;
    assert_eq!(code, 201, "{created}");
    let (_, read) = get(&client, &format!("{collection}/nightly")).await;
    assert_eq!(
        read["spec"],
        json!({"schedule": "0 3 * * *", "concurrencyPolicy": "Allow", "suspend": false,
            "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 0,
            "jobTemplate": {"spec": {"template": defaulted_template}}}),
        "an explicit zero is kept; a job template gets no Job defaults"
    );
}

#[tokio::test]
async fn the_other_kinds_apply_prune_looks_up_read_back_with_their_key_defaults() {
    let (_plane, client) = start().await;
    let (template, _) = pods("Never");
    let selector = json!({"matchLabels": {"app": "db"}});
    let kinds = [
        (
            "/apis/apps/v1/namespaces/default/daemonsets",
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
                "spec": {"selector": selector, "template": template}}),
            vec![
                (
                    "/spec/updateStrategy",
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
                ),
                ("/spec/revisionHistoryLimit", json!(10)),
                ("/spec/template/spec/dnsPolicy", json!("ClusterFirst")),
            ],
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
                "spec": {"parallelism": 2, "template": template}}),
            vec![
                ("/spec/parallelism", json!(2)),
                ("/spec/backoffLimit", json!(6)),
                ("/spec/completionMode", json!("NonIndexed")),
                ("/spec/suspend", json!(false)),
                ("/spec/manualSelector", json!(false)),
                ("/spec/podReplacementPolicy", json!("TerminatingOrFailed")),
                ("/metadata/labels", json!({"app": "db"})),
            ],
        ),
        (
            "/api/v1/namespaces/default/replicationcontrollers",
            json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "legacy"},
                "spec": {"template": template}}),
            vec![
                ("/spec/replicas", json!(1)),
                ("/spec/selector", json!({"app": "db"})),
                ("/metadata/labels", json!({"app": "db"})),
            ],
        ),
        (
            "/api/v1/namespaces/default/persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
            vec![("/spec/volumeMode", json!("Filesystem"))],
        ),
        (
            "/api/v1/persistentvolumes",
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "disk"},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}}}),
            vec![
                ("/spec/persistentVolumeReclaimPolicy", json!("Retain")),
                ("/spec/volumeMode", json!("Filesystem")),
                ("/spec/hostPath", json!({"path": "/data", "type": ""})),
                ("/status/phase", json!("Pending")),
            ],
        ),
        (
            "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
                "spec": {"rules": [{"http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
            vec![(
                "/spec",
                json!({"rules": [{"http": {"paths": [{"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}),
            )],
        ),
    ];
    for (collection, object, expected) in kinds {
        let (code, created) = post(&client, collection, &object).await;
        assert_eq!(code, 201, "{created}");
        let name = object["metadata"]["name"].as_str().expect("a name");
        let (_, read) = get(&client, &format!("{collection}/{name}")).await;
        for (pointer, value) in expected {
            assert_eq!(read.pointer(pointer), Some(&value), "{} {pointer}: {read}", object["kind"]);
        }
    }
}
