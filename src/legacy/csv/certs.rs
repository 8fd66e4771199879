//! The objects OLM v0's install strategy makes for each Deployment serving owned APIServices or webhooks
//! (`install/certresources.go`), rendered pure: the Service `<deployment>-service` (ports deduplicated, the
//! Deployment's selector), the TLS Secret `<service>-cert` (`tls.crt`, `tls.key`, `olmCAKey`, annotation
//! `olmcahash`), the Role and RoleBinding letting the Deployment's account read it, and, for Deployments serving
//! APIServices, the `system:auth-delegator` ClusterRoleBinding and the `kube-system` authentication-reader
//! RoleBinding; and the Deployment's certificate volumes, mounts and `olmcahash` pod annotation.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{json, Value};

use super::rotation::{pem_sha256, should_rotate, ServingPair};
use crate::api::v1alpha1::{ClusterServiceVersion, WebhookAdmissionType};
use crate::legacy::roles::{MANAGED_LABEL, OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};

/// The annotation holding the hex SHA-256 of the CA PEM, on the Secret and the pod template.
pub const CA_HASH_ANNOTATION: &str = "olmcahash";
/// The Secret key holding the CA PEM.
pub const CA_KEY: &str = "olmCAKey";
/// The ClusterRole an aggregated API server's account is bound to.
pub const AUTH_DELEGATOR: &str = "system:auth-delegator";
/// The Role of `kube-system` an aggregated API server's account is bound to.
pub const AUTH_READER: &str = "extension-apiserver-authentication-reader";
pub const KUBE_SYSTEM: &str = "kube-system";

/// OLM's certificate volumes: name, mount path, and the files `tls.crt` and `tls.key` become, in OLM's order.
const CERT_VOLUMES: [(&str, &str, &str, &str); 2] = [
    ("apiservice-cert", "/apiserver.local.config/certificates", "apiserver.crt", "apiserver.key"),
    ("webhook-cert", "/tmp/k8s-webhook-server/serving-certs", "tls.crt", "tls.key"),
];

pub fn service_name(deployment: &str) -> String {
    format!("{deployment}-service")
}

pub fn secret_name(service: &str) -> String {
    format!("{service}-cert")
}

pub fn auth_delegator_name(service: &str) -> String {
    format!("{service}-system:auth-delegator")
}

pub fn auth_reader_name(service: &str) -> String {
    format!("{service}-auth-reader")
}

/// The host names of a Service's certificate, in OLM's order.
pub fn hosts(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// What a Deployment serves that needs a certificate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Served {
    /// The Service's ports, deduplicated, in OLM's order (APIServices, then webhooks).
    pub ports: Vec<Value>,
    /// Whether it serves an owned APIService (and so gets the aggregated API server's bindings).
    pub api_service: bool,
}

/// The Deployments of the strategy that serve owned APIServices or webhooks, by name.
pub fn served(csv: &ClusterServiceVersion) -> BTreeMap<String, Served> {
    let mut served: BTreeMap<String, Served> = BTreeMap::new();
    let port_of = |port: Option<i32>| port.filter(|port| *port > 0).unwrap_or(443);
    let apis = csv.spec.api_service_definitions.iter().flat_map(|definitions| &definitions.owned);
    for api in apis {
        let port = port_of(api.container_port);
        let entry = served.entry(api.deployment_name.clone().unwrap_or_default()).or_default();
        entry.api_service = true;
        push_port(&mut entry.ports, json!({"name": port.to_string(), "port": port, "targetPort": port}));
    }
    for webhook in &csv.spec.webhook_definitions {
        let port = port_of(webhook.container_port);
        let target = webhook.target_port.as_ref().and_then(|target| serde_json::to_value(target).ok());
        let entry = served.entry(webhook.deployment_name.clone()).or_default();
        let port = json!({"name": port.to_string(), "port": port, "targetPort": target.unwrap_or(json!(port))});
        push_port(&mut entry.ports, port);
    }
    let deployments: Vec<&str> = csv.spec.install.spec.deployments.iter().map(|d| d.name.as_str()).collect();
    served.retain(|name, _| deployments.contains(&name.as_str()));
    served
}

fn push_port(ports: &mut Vec<Value>, port: Value) {
    if !ports.contains(&port) {
        ports.push(port);
    }
}

/// Whether the CSV has webhooks of `kind`.
pub fn has_webhooks(csv: &ClusterServiceVersion, kind: WebhookAdmissionType) -> bool {
    csv.spec.webhook_definitions.iter().any(|webhook| webhook.webhook_type == kind)
}

/// OLM's non-blocking, non-controller owner reference to the CSV.
pub fn owner(csv: &ClusterServiceVersion) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "name": csv.metadata.name.clone().unwrap_or_default(),
        "uid": csv.metadata.uid.clone().unwrap_or_default(),
        "controller": false,
        "blockOwnerDeletion": false,
    })
}

/// `olm.owner`, `olm.owner.namespace`, `olm.owner.kind` of the CSV, and `olm.managed`: the labels of the
/// cluster-scoped objects made for it, which a cleanup selects.
pub fn owner_labels(csv: &ClusterServiceVersion) -> BTreeMap<String, String> {
    BTreeMap::from([
        (OWNER_LABEL.to_owned(), csv.metadata.name.clone().unwrap_or_default()),
        (OWNER_NAMESPACE_LABEL.to_owned(), csv.metadata.namespace.clone().unwrap_or_default()),
        (OWNER_KIND_LABEL.to_owned(), "ClusterServiceVersion".to_owned()),
        (MANAGED_LABEL.to_owned(), "true".to_owned()),
    ])
}

fn namespace_of(csv: &ClusterServiceVersion) -> String {
    csv.metadata.namespace.clone().unwrap_or_default()
}

fn managed() -> Value {
    json!({MANAGED_LABEL: "true"})
}

/// The Service in front of `deployment` (whose spec is `spec`).
pub fn service(csv: &ClusterServiceVersion, deployment: &str, spec: &Value, served: &Served) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": service_name(deployment), "namespace": namespace_of(csv), "labels": managed(),
            "ownerReferences": [owner(csv)]},
        "spec": {"ports": served.ports, "selector": spec["selector"]["matchLabels"]}})
}

/// The TLS Secret of `service` holding `pair`.
pub fn secret(csv: &ClusterServiceVersion, service: &str, pair: &ServingPair) -> Value {
    let encode = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": secret_name(service), "namespace": namespace_of(csv), "labels": managed(),
            "annotations": {CA_HASH_ANNOTATION: pem_sha256(pair.ca_pem.as_bytes())},
            "ownerReferences": [owner(csv)]},
        "data": {"tls.crt": encode(&pair.cert_pem), "tls.key": encode(&pair.key_pem), CA_KEY: encode(&pair.ca_pem)}})
}

/// The CA PEM of a stored Secret that is still good for `hosts` at `now` (Unix seconds): None means issue anew.
pub fn reusable_ca(existing: Option<&Secret>, hosts: &[String], now: i64) -> Option<String> {
    let data = existing?.data.as_ref()?;
    let (ca, cert) = (data.get(CA_KEY).map(|b| b.0.as_slice()), data.get("tls.crt").map(|b| b.0.as_slice()));
    if should_rotate(ca, cert, hosts, now) {
        return None;
    }
    ca.and_then(|ca| String::from_utf8(ca.to_vec()).ok())
}

/// The Role letting the Deployment's account read its certificate Secret.
pub fn secret_role(csv: &ClusterServiceVersion, secret: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": secret, "namespace": namespace_of(csv), "labels": managed(), "ownerReferences": [owner(csv)]},
        "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret]}]})
}

fn account_subject(csv: &ClusterServiceVersion, account: &str) -> Value {
    json!([{"kind": "ServiceAccount", "apiGroup": "", "name": account, "namespace": namespace_of(csv)}])
}

fn role_ref(kind: &str, name: &str) -> Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name})
}

/// The RoleBinding of [`secret_role`] to `account`.
pub fn secret_role_binding(csv: &ClusterServiceVersion, secret: &str, account: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": secret, "namespace": namespace_of(csv), "labels": managed(), "ownerReferences": [owner(csv)]},
        "subjects": account_subject(csv, account), "roleRef": role_ref("Role", secret)})
}

/// The ClusterRoleBinding of `system:auth-delegator` to an aggregated API server's account.
pub fn auth_delegator(csv: &ClusterServiceVersion, service: &str, account: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": auth_delegator_name(service), "labels": owner_labels(csv)},
        "subjects": account_subject(csv, account), "roleRef": role_ref("ClusterRole", AUTH_DELEGATOR)})
}

/// The `kube-system` RoleBinding of the authentication-reader Role to an aggregated API server's account. Outside
/// the CSV's namespace it cannot be owned by it: it carries the owner labels (OLM gives it `olm.managed` only), so
/// that the CSV's cleanup finds it as it finds the cluster-scoped objects.
pub fn auth_reader(csv: &ClusterServiceVersion, service: &str, account: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": auth_reader_name(service), "namespace": KUBE_SYSTEM, "labels": owner_labels(csv)},
        "subjects": account_subject(csv, account), "roleRef": role_ref("Role", AUTH_READER)})
}

/// The CSV of another namespace an existing object of a cluster-unique name (the auth-delegator and auth-reader
/// bindings, named after the Deployment only) is labelled for, `<namespace>/<name>`: it is not taken over, as OLM
/// would, re-pointing another namespace's aggregated API server's binding to this CSV's account. A CSV of the same
/// namespace (the one this CSV replaces) may pass it on.
pub fn claimed_elsewhere(labels: &BTreeMap<String, String>, csv: &ClusterServiceVersion) -> Option<String> {
    if labels.get(OWNER_KIND_LABEL).map(String::as_str) != Some("ClusterServiceVersion") {
        return None;
    }
    let namespace = labels.get(OWNER_NAMESPACE_LABEL)?;
    (Some(namespace) != csv.metadata.namespace.as_ref())
        .then(|| format!("{namespace}/{}", labels.get(OWNER_LABEL).map(String::as_str).unwrap_or_default()))
}

/// The account a Deployment spec runs as: OLM defaults it to `default`.
pub fn account_of(spec: &Value) -> String {
    spec["template"]["spec"]["serviceAccountName"]
        .as_str()
        .filter(|name| !name.is_empty())
        .unwrap_or("default")
        .to_owned()
}

/// What OLM does to a serving Deployment's spec: its account defaulted to `default`, the certificate volumes
/// replaced by name or added, each container's mount of them added unless it has one of that name, replacing one at
/// the same path, and the pod template annotated with the CA's hash (so a new CA rolls the pods).
pub fn mount(spec: &mut Value, secret: &str, ca_hash: &str) {
    let Some(pod) = spec.pointer_mut("/template/spec").filter(|pod| pod.is_object()) else { return };
    pod["serviceAccountName"] = json!(account_of_pod(pod));
    for (volume_name, path, cert, key) in CERT_VOLUMES {
        let volume = json!({"name": volume_name, "secret": {"secretName": secret,
            "items": [{"key": "tls.crt", "path": cert}, {"key": "tls.key", "path": key}]}});
        let mut volumes = pod["volumes"].as_array().cloned().unwrap_or_default();
        match volumes.iter_mut().find(|v| v["name"] == volume_name) {
            Some(existing) => *existing = volume,
            None => volumes.push(volume),
        }
        pod["volumes"] = Value::Array(volumes);
        let wanted = json!({"name": volume_name, "mountPath": path});
        for container in pod.get_mut("containers").and_then(Value::as_array_mut).into_iter().flatten() {
            let mut mounts = container["volumeMounts"].as_array().cloned().unwrap_or_default();
            let found = mounts.iter().position(|m| m["name"] == volume_name || m["mountPath"] == path);
            match found {
                Some(index) if mounts[index]["name"] != volume_name => mounts[index] = wanted.clone(),
                Some(_) => {}
                None => mounts.push(wanted.clone()),
            }
            container["volumeMounts"] = Value::Array(mounts);
        }
    }
    let metadata = &mut spec["template"]["metadata"];
    let mut annotations = metadata["annotations"].as_object().cloned().unwrap_or_default();
    annotations.insert(CA_HASH_ANNOTATION.into(), json!(ca_hash));
    metadata["annotations"] = Value::Object(annotations);
}

fn account_of_pod(pod: &Value) -> String {
    pod["serviceAccountName"].as_str().filter(|name| !name.is_empty()).unwrap_or("default").to_owned()
}

#[cfg(test)]
#[path = "certs_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "component_fixtures.rs"]
pub(crate) mod fixtures;
