//! What kube-apiserver's registries do for the built-in kinds: decode into the Go type (here the k8s-openapi type),
//! which drops unknown fields and refuses wrong types; the preparation strategies run on create (namespace phase and
//! finalizer, `stringData`, cleared status); which kinds track `metadata.generation`; which return the deleted
//! object; and the few kind-specific validations the project depends on or that defaults make reachable.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use k8s_openapi::api::{admissionregistration::v1 as admission, apps::v1 as apps, coordination::v1 as coordination};
use k8s_openapi::api::{batch::v1 as batch, networking::v1 as networking};
use k8s_openapi::api::{core::v1 as core, events::v1 as events, rbac::v1 as rbac};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use crate::status::{error, ErrorType, FieldError};

fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

/// Decodes a built-in object as its Go type would: the result has only the fields the type knows.
/// `None` when the kind is not one of the built-in kinds served here.
pub fn decode(group: &str, kind: &str, value: &Value) -> Option<Result<Value, String>> {
    Some(match (group, kind) {
        ("", "Namespace") => round_trip::<core::Namespace>(value),
        ("", "ServiceAccount") => round_trip::<core::ServiceAccount>(value),
        ("", "Secret") => round_trip::<core::Secret>(value),
        ("", "ConfigMap") => round_trip::<core::ConfigMap>(value),
        ("", "Service") => round_trip::<core::Service>(value),
        ("", "Pod") => round_trip::<core::Pod>(value),
        ("", "Event") => round_trip::<core::Event>(value),
        ("", "Endpoints") => round_trip::<core::Endpoints>(value),
        ("apps", "Deployment") => round_trip::<apps::Deployment>(value),
        ("apps", "ReplicaSet") => round_trip::<apps::ReplicaSet>(value),
        ("apps", "DaemonSet") => round_trip::<apps::DaemonSet>(value),
        ("apps", "StatefulSet") => round_trip::<apps::StatefulSet>(value),
        ("", "PersistentVolumeClaim") => round_trip::<core::PersistentVolumeClaim>(value),
        ("", "PersistentVolume") => round_trip::<core::PersistentVolume>(value),
        ("", "ReplicationController") => round_trip::<core::ReplicationController>(value),
        ("batch", "Job") => round_trip::<batch::Job>(value),
        ("batch", "CronJob") => round_trip::<batch::CronJob>(value),
        ("networking.k8s.io", "Ingress") => round_trip::<networking::Ingress>(value),
        ("rbac.authorization.k8s.io", "Role") => round_trip::<rbac::Role>(value),
        ("rbac.authorization.k8s.io", "RoleBinding") => round_trip::<rbac::RoleBinding>(value),
        ("rbac.authorization.k8s.io", "ClusterRole") => round_trip::<rbac::ClusterRole>(value),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => round_trip::<rbac::ClusterRoleBinding>(value),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => round_trip::<CustomResourceDefinition>(value),
        ("apiregistration.k8s.io", "APIService") => round_trip::<APIService>(value),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            round_trip::<admission::ValidatingWebhookConfiguration>(value)
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            round_trip::<admission::MutatingWebhookConfiguration>(value)
        }
        ("coordination.k8s.io", "Lease") => round_trip::<coordination::Lease>(value),
        ("events.k8s.io", "Event") => round_trip::<events::Event>(value),
        _ => return None,
    })
}

/// The paths of fields `original` has (with a value) and `decoded` lacks: the unknown fields.
pub fn unknown_fields(original: &Value, decoded: &Value, path: &str, found: &mut Vec<String>) {
    match (original, decoded) {
        (Value::Object(have), Value::Object(kept)) => {
            for (key, value) in have {
                let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                match kept.get(key) {
                    Some(kept_value) => unknown_fields(value, kept_value, &child, found),
                    None if !value.is_null() => found.push(child),
                    None => {}
                }
            }
        }
        (Value::Array(have), Value::Array(kept)) => {
            for (index, (value, kept_value)) in have.iter().zip(kept).enumerate() {
                unknown_fields(value, kept_value, &format!("{path}[{index}]"), found);
            }
        }
        _ => {}
    }
}

/// Whether writes to this resource keep `metadata.generation` (custom resources always do).
pub fn tracks_generation(group: &str, resource: &str) -> bool {
    matches!(
        (group, resource),
        ("apps", "deployments" | "replicasets" | "daemonsets" | "statefulsets")
            | ("", "replicationcontrollers")
            | ("batch", "jobs" | "cronjobs")
            | ("networking.k8s.io", "ingresses")
            | ("apiextensions.k8s.io", "customresourcedefinitions")
            | ("admissionregistration.k8s.io", _)
    )
}

/// Whether a change of `metadata.annotations` alone bumps `metadata.generation`: a Deployment's does, as
/// kube-apiserver's Deployment strategy has it, because the Deployment controller copies a Deployment's annotations
/// onto its ReplicaSets (a change it must be seen to observe). No other kind's does.
pub fn annotations_bump_generation(group: &str, resource: &str) -> bool {
    (group, resource) == ("apps", "deployments")
}

/// Whether a DELETE that removes the object at once answers with the object rather than a `Status`.
pub fn returns_deleted_object(group: &str, resource: &str) -> bool {
    matches!((group, resource), ("", "pods" | "serviceaccounts" | "namespaces"))
}

/// The create strategies that change what was sent (defaults are `defaults`' business).
pub fn prepare_for_create(group: &str, kind: &str, object: &mut Value) {
    match (group, kind) {
        ("", "Namespace") => {
            object["status"] = json!({"phase": "Active"});
            object["spec"]["finalizers"] = json!(["kubernetes"]);
        }
        ("", "Pod") => {
            object["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
        }
        // An empty ServiceStatus, as Go writes it.
        ("", "Service") => object["status"] = json!({"loadBalancer": {}}),
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet")
        | ("", "ReplicationController" | "PersistentVolumeClaim")
        | ("batch", "Job" | "CronJob")
        | ("networking.k8s.io", "Ingress")
        | ("apiextensions.k8s.io", "CustomResourceDefinition")
        | ("apiregistration.k8s.io", "APIService") => {
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
        }
        _ => {}
    }
}

/// `stringData` of a Secret is written into `data`, base64-encoded, on every write.
pub fn fold_string_data(object: &mut Value) {
    use base64::Engine as _;
    let Some(string_data) = object.as_object_mut().and_then(|o| o.remove("stringData")) else { return };
    for (key, value) in string_data.as_object().into_iter().flatten() {
        let encoded = base64::engine::general_purpose::STANDARD.encode(value.as_str().unwrap_or_default());
        object["data"][key] = json!(encoded);
    }
}

/// Kind-specific validation the project relies on (beyond metadata).
/// The longest event note kube-apiserver accepts, in bytes (Go's `len`, though its message says characters).
const EVENT_NOTE_LIMIT: usize = 1024;

pub fn validate(group: &str, kind: &str, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match (group, kind) {
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => {
            for (index, rule) in object["rules"].as_array().into_iter().flatten().enumerate() {
                if rule["verbs"].as_array().is_none_or(Vec::is_empty) {
                    errors.push(error(
                        &format!("rules[{index}].verbs"),
                        ErrorType::Required,
                        "verbs must contain at least one value",
                    ));
                }
                let has_urls = rule["nonResourceURLs"].as_array().is_some_and(|u| !u.is_empty());
                let has_resources = rule["resources"].as_array().is_some_and(|r| !r.is_empty());
                if kind == "Role" && has_urls {
                    errors.push(error(
                        &format!("rules[{index}].nonResourceURLs"),
                        ErrorType::Invalid,
                        "namespaced rules cannot apply to non-resource URLs",
                    ));
                }
                if has_urls && has_resources {
                    errors.push(error(
                        &format!("rules[{index}].nonResourceURLs"),
                        ErrorType::Invalid,
                        "rules cannot apply to both regular resources and non-resource URLs",
                    ));
                }
                if !has_urls && !has_resources {
                    errors.push(error(
                        &format!("rules[{index}].resources"),
                        ErrorType::Required,
                        "resource rules must supply at least one resource",
                    ));
                }
            }
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            let role_ref = &object["roleRef"];
            if role_ref["name"].as_str().is_none_or(str::is_empty) {
                errors.push(error("roleRef.name", ErrorType::Required, ""));
            }
            let allowed: &[&str] = if kind == "RoleBinding" { &["Role", "ClusterRole"] } else { &["ClusterRole"] };
            if let Some(role_kind) = role_ref["kind"].as_str() {
                if !allowed.contains(&role_kind) {
                    let listed: Vec<String> = allowed.iter().map(|k| format!("\"{k}\"")).collect();
                    errors.push(error(
                        "roleRef.kind",
                        ErrorType::NotSupported,
                        format!("\"{role_kind}\": supported values: {}", listed.join(", ")),
                    ));
                }
            }
            if let Some(old) = old {
                if old["roleRef"] != object["roleRef"] {
                    errors.push(error(
                        "roleRef",
                        ErrorType::Invalid,
                        format!("{}: cannot change roleRef", compact_go(role_ref)),
                    ));
                }
            }
        }
        ("" | "events.k8s.io", "Event") => {
            // kube-apiserver's event validation, for an event with an eventTime (one recorded the events.k8s.io way,
            // through either API): the note (core `message`), at most 1,024 bytes, reported under its internal
            // name with an empty value.
            let note = if group == "events.k8s.io" { &object["note"] } else { &object["message"] };
            let new_style = object["eventTime"].as_str().is_some_and(|time| !time.is_empty());
            if new_style && note.as_str().is_some_and(|note| note.len() > EVENT_NOTE_LIMIT) {
                errors.push(error(
                    "message",
                    ErrorType::Invalid,
                    format!("\"\": can have at most {EVENT_NOTE_LIMIT} characters"),
                ));
            }
        }
        ("apps", "Deployment" | "ReplicaSet") => {
            let selector = &object["spec"]["selector"];
            if selector.is_null() {
                errors.push(error("spec.selector", ErrorType::Required, ""));
            } else {
                let labels = &object["spec"]["template"]["metadata"]["labels"];
                let matches = selector["matchLabels"].as_object().into_iter().flatten().all(|(k, v)| &labels[k] == v);
                if !matches {
                    errors.push(error(
                        "spec.template.metadata.labels",
                        ErrorType::Invalid,
                        format!("{}: `selector` does not match template `labels`", compact_go(labels)),
                    ));
                }
                if let Some(old) = old {
                    if old["spec"]["selector"] != *selector {
                        errors.push(error(
                            "spec.selector",
                            ErrorType::Invalid,
                            format!("{}: field is immutable", compact_go(selector)),
                        ));
                    }
                }
            }
            if object["spec"]["template"]["spec"]["containers"].as_array().is_none_or(Vec::is_empty) {
                errors.push(error("spec.template.spec.containers", ErrorType::Required, ""));
            }
            // The rolling update defaults stay when an apply or patch switches to Recreate without removing them.
            let strategy = &object["spec"]["strategy"];
            if kind == "Deployment" && strategy["type"] == "Recreate" && strategy["rollingUpdate"].is_object() {
                errors.push(error(
                    "spec.strategy.rollingUpdate",
                    ErrorType::Forbidden,
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        ("", "Service") => {
            if let Some(old) = old {
                errors.extend(crate::model::services::validate_update(&object["spec"], &old["spec"]));
            }
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration") => {
            errors.extend(webhook_errors(object));
        }
        ("", "ConfigMap" | "Secret") => {
            for field in ["data", "binaryData"] {
                for key in object[field].as_object().into_iter().flatten().map(|(k, _)| k) {
                    let valid = !key.is_empty()
                        && key.len() <= 253
                        && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
                    if !valid {
                        errors.push(error(&format!("{field}[{key}]"), ErrorType::Invalid, format!("\"{key}\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")));
                    }
                }
            }
            if let Some(old) = old {
                if kind == "Secret" && old["type"] != object["type"] {
                    let detail = format!("{}: field is immutable", compact_go(&object["type"]));
                    errors.push(error("type", ErrorType::Invalid, detail));
                }
                if old["immutable"] == true
                    && (old["data"] != object["data"] || old["binaryData"] != object["binaryData"])
                {
                    errors.push(error("data", ErrorType::Forbidden, "field is immutable when `immutable` is set"));
                }
            }
        }
        _ => {}
    }
    errors
}

/// What admissionregistration/v1 requires of each webhook and does not default: its side effects and the
/// AdmissionReview versions it accepts.
fn webhook_errors(object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (index, webhook) in object["webhooks"].as_array().into_iter().flatten().enumerate() {
        let field = |name: &str| format!("webhooks[{index}].{name}");
        match webhook["sideEffects"].as_str().unwrap_or_default() {
            "" => {
                errors.push(error(&field("sideEffects"), ErrorType::Required, "must specify one of None, NoneOnDryRun"))
            }
            "None" | "NoneOnDryRun" => {}
            other => errors.push(error(
                &field("sideEffects"),
                ErrorType::NotSupported,
                format!("{other:?}: supported values: \"None\", \"NoneOnDryRun\""),
            )),
        }
        let versions: Vec<&str> =
            webhook["admissionReviewVersions"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        if versions.is_empty() {
            errors.push(error(
                &field("admissionReviewVersions"),
                ErrorType::Required,
                "must specify one of v1, v1beta1",
            ));
        } else if !versions.iter().any(|v| matches!(*v, "v1" | "v1beta1")) {
            let listed: Vec<String> = versions.iter().map(|v| format!("{v:?}")).collect();
            errors.push(error(
                &field("admissionReviewVersions"),
                ErrorType::Invalid,
                format!("[]string{{{}}}: must include at least one of v1, v1beta1", listed.join(", ")),
            ));
        }
    }
    errors
}

/// A value as Go's `%v` would roughly print it in an error message.
fn compact_go(value: &Value) -> String {
    format!("{value}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_drops_unknown_fields_and_refuses_wrong_types() {
        let sent = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "bogus": 1}, "data": {"k": "v"}, "extra": {"x": 1}});
        let decoded = decode("", "ConfigMap", &sent).expect("built-in").expect("decodes");
        assert_eq!(
            decoded,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}})
        );
        let mut unknown = Vec::new();
        unknown_fields(&sent, &decoded, "", &mut unknown);
        assert_eq!(unknown, ["extra", "metadata.bogus"]);
        assert!(decode(
            "",
            "ConfigMap",
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": 1}})
        )
        .expect("built-in")
        .is_err());
        assert!(decode("example.com", "Thing", &sent).is_none());
    }

    #[test]
    fn an_events_note_over_1024_bytes_is_refused_when_it_has_an_event_time() {
        let event = |group: &str, note: String, event_time: Value| {
            let field = if group == "events.k8s.io" { "note" } else { "message" };
            let mut event = json!({"metadata": {"name": "e", "namespace": "default"}, "reason": "R"});
            event[field] = json!(note);
            event["eventTime"] = event_time;
            validate(group, "Event", &event, None)
        };
        let now = json!("2026-11-27T12:00:00.000000Z");
        let refused = error("message", ErrorType::Invalid, "\"\": can have at most 1024 characters");
        // 1,024 bytes pass; 513 two-byte characters (1,026 bytes, fewer than 1,024 characters) do not.
        for group in ["events.k8s.io", ""] {
            assert!(event(group, "a".repeat(1024), now.clone()).is_empty(), "{group}");
            assert_eq!(event(group, "é".repeat(513), now.clone()), std::slice::from_ref(&refused), "{group}");
            // An old-style event (no eventTime) is not held to it.
            assert!(event(group, "a".repeat(2000), Value::Null).is_empty(), "{group}");
        }
    }

    #[test]
    fn create_strategies() {
        let mut namespace = json!({"metadata": {"name": "n"}, "status": {"phase": "Terminating"}});
        prepare_for_create("", "Namespace", &mut namespace);
        assert_eq!(
            (namespace["status"]["phase"].clone(), namespace["spec"]["finalizers"].clone()),
            (json!("Active"), json!(["kubernetes"]))
        );
        let mut secret = json!({"metadata": {"name": "s"}, "stringData": {"a": "hello"}, "data": {"b": "eA=="}});
        prepare_for_create("", "Secret", &mut secret);
        fold_string_data(&mut secret);
        assert_eq!(secret, json!({"metadata": {"name": "s"}, "data": {"a": "aGVsbG8=", "b": "eA=="}}));
        let mut service = json!({"metadata": {"name": "s"}, "spec": {}, "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}});
        prepare_for_create("", "Service", &mut service);
        assert_eq!(service["status"], json!({"loadBalancer": {}}));
    }

    #[test]
    fn kind_validations() {
        let role = json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": []}, {"nonResourceURLs": ["/x"], "verbs": ["get"]}]});
        let messages: Vec<String> =
            validate("rbac.authorization.k8s.io", "Role", &role, None).iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[1].nonResourceURLs: Invalid value: namespaced rules cannot apply to non-resource URLs"
            ]
        );
        let binding = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "a"}});
        let changed = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "b"}});
        assert_eq!(validate("rbac.authorization.k8s.io", "RoleBinding", &changed, Some(&binding)).len(), 1);
        let deployment = json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"name": "c"}]}}}});
        let messages: Vec<String> =
            validate("apps", "Deployment", &deployment, None).iter().map(ToString::to_string).collect();
        assert_eq!(messages, ["spec.template.metadata.labels: Invalid value: {\"app\":\"b\"}: `selector` does not match template `labels`"]);
    }

    fn messages(group: &str, kind: &str, object: &Value, old: Option<&Value>) -> Vec<String> {
        validate(group, kind, object, old).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn validations_defaults_make_reachable() {
        let recreate = json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c"}]}},
            "strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}});
        assert_eq!(
            messages("apps", "Deployment", &recreate, None),
            ["spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"]
        );
        let tls = json!({"type": "kubernetes.io/tls", "data": {}});
        let opaque = json!({"type": "Opaque", "data": {}});
        assert_eq!(
            messages("", "Secret", &opaque, Some(&tls)),
            ["type: Invalid value: \"Opaque\": field is immutable"]
        );
        assert!(messages("", "Secret", &tls, Some(&tls)).is_empty());
        let old = json!({"spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"]}});
        let moved = json!({"spec": {"clusterIP": "10.96.0.11", "clusterIPs": ["10.96.0.11"]}});
        assert_eq!(
            messages("", "Service", &moved, Some(&old)),
            ["spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.11\"}: may not change once set"]
        );
        let webhooks = json!({"webhooks": [{"name": "a", "sideEffects": "", "admissionReviewVersions": []},
            {"name": "b", "sideEffects": "Some", "admissionReviewVersions": ["v2"]},
            {"name": "c", "sideEffects": "NoneOnDryRun", "admissionReviewVersions": ["v2", "v1"]}]});
        for kind in ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"] {
            assert_eq!(
                messages("admissionregistration.k8s.io", kind, &webhooks, None),
                [
                    "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
                    "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
                    "webhooks[1].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
                    "webhooks[1].admissionReviewVersions: Invalid value: []string{\"v2\"}: must include at least one of v1, v1beta1",
                ]
            );
        }
    }
}
