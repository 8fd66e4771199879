//! kube-apiserver's defaulting of the built-in kinds served here: what the `SetDefaults_*` functions of kubernetes'
//! `pkg/apis/<group>/v1` packages and the `+default` markers of `k8s.io/api` fill in when an object is decoded, so
//! on every create, update, patch and apply, before admission and validation. Pure functions over JSON: what needs
//! the cluster's state (a Service's cluster IPs and node ports) is in `services`; pod specs are in `defaults::pod`,
//! the kinds holding pod templates in `defaults::workloads`, volumes and claims in `defaults::storage`.
//!
//! Go's types decide what counts as unset. An optional pointer field (`replicas`, `defaultMode`,
//! `terminationGracePeriodSeconds`, ...) is defaulted only when absent, so an explicit `0`, `false` or `""` stays; a
//! plain string or number (`imagePullPolicy`, a probe's `timeoutSeconds`, a port's `protocol`) is defaulted when it
//! holds its zero value too, since Go cannot tell that from absence.
//!
//! Imports nothing of the emulator.

use serde_json::{json, Map, Value};

mod pod;
mod storage;
mod workloads;

/// Fills in the defaults of a built-in object of `group`/`kind` (a no-op for other kinds).
pub fn apply(group: &str, kind: &str, object: &mut Value) {
    match (group, kind) {
        ("", "Pod") => pod::pod(object),
        ("", "Service") => service(object),
        ("", "Secret") => set_if_zero(object, "type", json!("Opaque")),
        ("", "Namespace") => namespace(object),
        ("", "Endpoints") => endpoints(object),
        ("", "ReplicationController") => workloads::replication_controller(object),
        ("", "PersistentVolumeClaim") => storage::claim(object),
        ("", "PersistentVolume") => storage::persistent_volume(object),
        ("apps", "Deployment") => workloads::deployment(object),
        ("apps", "ReplicaSet") => workloads::replica_set(object),
        ("apps", "DaemonSet") => workloads::daemon_set(object),
        ("apps", "StatefulSet") => workloads::stateful_set(object),
        ("batch", "Job") => workloads::job(object),
        ("batch", "CronJob") => workloads::cron_job(object),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => binding(object),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => webhooks(object, false),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => webhooks(object, true),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => custom_resource_definition(object),
        ("apiregistration.k8s.io", "APIService") => {
            if let Some(service) = existing(object, &["spec", "service"]) {
                set_if_absent(service, "port", json!(443));
            }
        }
        // ConfigMap (an empty `data` map, which is not serialized), ServiceAccount, Event, Lease, the RBAC roles and
        // Ingress (networking.k8s.io/v1 defaults only NetworkPolicies and IngressClasses) have no defaults that show.
        _ => {}
    }
}

/// Sets `key` when it is absent or null: the default of a Go pointer field.
pub(super) fn set_if_absent(object: &mut Value, key: &str, value: Value) {
    if let Some(map) = object.as_object_mut() {
        if map.get(key).is_none_or(Value::is_null) {
            map.insert(key.to_owned(), value);
        }
    }
}

/// Sets `key` when it is absent, null, `""` or `0`: the default of a plain Go string or number.
pub(super) fn set_if_zero(object: &mut Value, key: &str, value: Value) {
    if let Some(map) = object.as_object_mut() {
        if map.get(key).is_none_or(is_zero) {
            map.insert(key.to_owned(), value);
        }
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(text) => text.is_empty(),
        Value::Number(number) => number.as_f64() == Some(0.0),
        _ => false,
    }
}

/// The object at `path`, created empty where missing: a Go struct held by value, which always exists.
pub(super) fn child<'a>(object: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut node = object;
    for key in path {
        let map = node.as_object_mut()?;
        let entry = map.entry((*key).to_owned()).or_insert_with(|| Value::Object(Map::new()));
        if entry.is_null() {
            *entry = Value::Object(Map::new());
        }
        if !entry.is_object() {
            return None;
        }
        node = entry;
    }
    Some(node)
}

/// The object at `path` when it is there: a Go struct held by pointer, defaulted only when set.
pub(super) fn existing<'a>(object: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut node = object;
    for key in path {
        node = node.as_object_mut()?.get_mut(*key).filter(|v| v.is_object())?;
    }
    Some(node)
}

/// The items of the list at `key` (none when it is absent).
pub(super) fn items<'a>(object: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    object.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten()
}

/// `SetDefaults_Service` and the ports' `+default` protocol. Cluster IPs, IP families and node ports are allocated
/// by the Service storage (`services`), not defaulted.
fn service(object: &mut Value) {
    let Some(spec) = child(object, &["spec"]) else { return };
    set_if_zero(spec, "sessionAffinity", json!("None"));
    match spec["sessionAffinity"].as_str() {
        Some("None") => {
            if let Some(map) = spec.as_object_mut() {
                map.remove("sessionAffinityConfig");
            }
        }
        Some("ClientIP") if spec["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"].is_null() => {
            spec["sessionAffinityConfig"] = json!({"clientIP": {"timeoutSeconds": 10800}});
        }
        _ => {}
    }
    set_if_zero(spec, "type", json!("ClusterIP"));
    for port in items(spec, "ports") {
        set_if_zero(port, "protocol", json!("TCP"));
        let number = port["port"].clone();
        set_if_zero(port, "targetPort", number);
    }
    let service_type = spec["type"].as_str().unwrap_or_default().to_owned();
    let has_external_ips = spec["externalIPs"].as_array().is_some_and(|ips| !ips.is_empty());
    // What kube calls externally accessible.
    if matches!(service_type.as_str(), "NodePort" | "LoadBalancer") || (service_type == "ClusterIP" && has_external_ips)
    {
        set_if_zero(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if matches!(service_type.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        set_if_absent(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if service_type == "LoadBalancer" {
        set_if_absent(spec, "allocateLoadBalancerNodePorts", json!(true));
        if let Some(load_balancer) = existing(object, &["status", "loadBalancer"]) {
            for ingress in items(load_balancer, "ingress") {
                if ingress["ip"].as_str().is_some_and(|ip| !ip.is_empty()) {
                    set_if_absent(ingress, "ipMode", json!("VIP"));
                }
            }
        }
    }
}

/// `SetDefaults_Namespace` (the name label, on every write) and `SetDefaults_NamespaceStatus`.
fn namespace(object: &mut Value) {
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    // A namespace named by generateName has no name yet; the create strategy labels it once it has one.
    if !name.is_empty() {
        if let Some(labels) = child(object, &["metadata", "labels"]) {
            labels["kubernetes.io/metadata.name"] = json!(name);
        }
    }
    if let Some(status) = child(object, &["status"]) {
        set_if_zero(status, "phase", json!("Active"));
    }
}

/// `SetDefaults_Endpoints`: the ports' protocol.
fn endpoints(object: &mut Value) {
    for subset in items(object, "subsets") {
        for port in items(subset, "ports") {
            set_if_zero(port, "protocol", json!("TCP"));
        }
    }
}

/// `SetDefaults_RoleBinding`/`_ClusterRoleBinding` (the role's API group) and `SetDefaults_Subject`.
fn binding(object: &mut Value) {
    const RBAC: &str = "rbac.authorization.k8s.io";
    if let Some(role_ref) = child(object, &["roleRef"]) {
        set_if_zero(role_ref, "apiGroup", json!(RBAC));
    }
    for subject in items(object, "subjects") {
        // A ServiceAccount's group is the core group, "": only users and groups get one.
        if matches!(subject["kind"].as_str(), Some("User" | "Group")) {
            set_if_zero(subject, "apiGroup", json!(RBAC));
        }
    }
}

/// `SetDefaults_ValidatingWebhook`/`_MutatingWebhook`, `_Rule` and `_ServiceReference`. `sideEffects` and
/// `admissionReviewVersions` have no default in v1: they are required.
fn webhooks(object: &mut Value, mutating: bool) {
    for webhook in items(object, "webhooks") {
        set_if_absent(webhook, "failurePolicy", json!("Fail"));
        set_if_absent(webhook, "matchPolicy", json!("Equivalent"));
        set_if_absent(webhook, "namespaceSelector", json!({}));
        set_if_absent(webhook, "objectSelector", json!({}));
        set_if_absent(webhook, "timeoutSeconds", json!(10));
        if mutating {
            set_if_absent(webhook, "reinvocationPolicy", json!("Never"));
        }
        if let Some(service) = existing(webhook, &["clientConfig", "service"]) {
            set_if_absent(service, "port", json!(443));
        }
        for rule in items(webhook, "rules") {
            set_if_absent(rule, "scope", json!("*"));
        }
    }
}

/// `SetDefaults_CustomResourceDefinitionSpec` and the conversion webhook's `SetDefaults_ServiceReference`. (The
/// stored versions `SetDefaults_CustomResourceDefinition` adds to the status are the create strategy's to set.)
fn custom_resource_definition(object: &mut Value) {
    let Some(spec) = child(object, &["spec"]) else { return };
    if let Some(names) = child(spec, &["names"]) {
        let kind = names["kind"].as_str().unwrap_or_default().to_owned();
        set_if_zero(names, "singular", json!(kind.to_lowercase()));
        if !kind.is_empty() {
            set_if_zero(names, "listKind", json!(format!("{kind}List")));
        }
    }
    set_if_absent(spec, "conversion", json!({"strategy": "None"}));
    if let Some(service) = existing(spec, &["conversion", "webhook", "clientConfig", "service"]) {
        set_if_absent(service, "port", json!(443));
    }
}

#[cfg(test)]
mod tests;
