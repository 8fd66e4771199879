//! Admission webhooks as kube-apiserver calls them: Mutating then Validating WebhookConfigurations, matched by
//! their rules (operations, groups, versions, resources with subresources, scope), namespaceSelector and
//! objectSelector; an AdmissionReview v1 with the requester's userInfo and the old and new objects, sent over HTTPS
//! to a URL or a service (trusting the caBundle), with the timeout and failurePolicy of each webhook; JSON patches
//! from mutating webhooks; and denials as the `Status` kubectl shows.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::auth::authn::UserInfo;
use crate::merge::patch::json_patch;
use crate::model::resources::ResourceType;
use crate::outbound::{self, Destination, Endpoints, Trust};
use crate::status::ApiError;
use crate::storage::selectors::label_selector_matches;
use crate::storage::store::{ResourceId, Store};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }
}

/// One admission attempt: what is written where, by whom (kube-apiserver's `admission.Attributes`).
#[derive(Clone, Copy)]
pub struct Request<'a> {
    pub operation: Operation,
    pub resource: &'a ResourceType,
    /// The namespace of the URL; empty for cluster-scoped resources.
    pub namespace: &'a str,
    pub name: Option<&'a str>,
    pub subresource: Option<&'a str>,
    pub object: Option<&'a Value>,
    pub old: Option<&'a Value>,
    pub user: &'a UserInfo,
    pub dry_run: bool,
}

fn strings(value: &Value) -> Vec<&str> {
    value.as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

fn has(list: &[&str], wanted: &str) -> bool {
    list.iter().any(|item| *item == "*" || *item == wanted)
}

/// Whether a rule's `resources` entry names this resource and subresource (`*`, `*/*`, `pods/*`, `*/status`).
fn resource_matches(entry: &str, resource: &str, subresource: &str) -> bool {
    let (rule_resource, rule_sub) = entry.split_once('/').unwrap_or((entry, ""));
    let resource_ok = rule_resource == "*" || rule_resource == resource;
    let sub_ok = if entry.contains('/') { rule_sub == "*" || rule_sub == subresource } else { subresource.is_empty() };
    resource_ok && sub_ok
}

fn rule_matches(rule: &Value, request: &Request<'_>) -> bool {
    let resource = request.resource;
    let subresource = request.subresource.unwrap_or_default();
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => !resource.namespaced,
        "Namespaced" => resource.namespaced,
        _ => true,
    };
    has(&strings(&rule["operations"]), request.operation.as_str())
        && has(&strings(&rule["apiGroups"]), &resource.group)
        && has(&strings(&rule["apiVersions"]), &resource.version)
        && strings(&rule["resources"]).iter().any(|entry| resource_matches(entry, &resource.plural, subresource))
        && scope_ok
}

fn webhook_applies(store: &Store, webhook: &Value, request: &Request<'_>) -> bool {
    if !webhook["rules"].as_array().into_iter().flatten().any(|rule| rule_matches(rule, request)) {
        return false;
    }
    let object_labels = |object: Option<&Value>| object.map(|o| o["metadata"]["labels"].clone()).unwrap_or(Value::Null);
    let object_selected = label_selector_matches(&webhook["objectSelector"], &object_labels(request.object))
        || (request.old.is_some() && label_selector_matches(&webhook["objectSelector"], &object_labels(request.old)));
    let resource = request.resource;
    let namespace_selected = if resource.group.is_empty() && resource.plural == "namespaces" {
        label_selector_matches(&webhook["namespaceSelector"], &object_labels(request.object.or(request.old)))
    } else if resource.namespaced {
        let namespace = store.get(&ResourceId::new("", "namespaces"), "", request.namespace).unwrap_or_default();
        label_selector_matches(&webhook["namespaceSelector"], &namespace["metadata"]["labels"])
    } else {
        true
    };
    object_selected && namespace_selected
}

fn review_of(request: &Request<'_>, uid: &str) -> Value {
    let resource = request.resource;
    let gvk = json!({"group": resource.group, "version": resource.version, "kind": resource.kind});
    let gvr = json!({"group": resource.group, "version": resource.version, "resource": resource.plural});
    let name = request
        .object
        .or(request.old)
        .and_then(|o| o["metadata"]["name"].as_str())
        .or(request.name)
        .unwrap_or_default();
    let mut inner = json!({
        "uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "name": name, "operation": request.operation.as_str(), "userInfo": request.user.to_json(),
        "object": request.object.cloned().unwrap_or(Value::Null), "oldObject": request.old.cloned().unwrap_or(Value::Null),
        "dryRun": request.dry_run,
    });
    if resource.namespaced {
        inner["namespace"] = json!(request.namespace);
    }
    if let Some(subresource) = request.subresource {
        inner["subResource"] = json!(subresource);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": inner})
}

fn destination(endpoints: &Endpoints, client_config: &Value, timeout: u64) -> Result<Destination, String> {
    if let Some(url) = client_config["url"].as_str() {
        let uri: http::Uri = url.parse().map_err(|e| format!("invalid url {url}: {e}"))?;
        let host = uri.host().ok_or("url without a host")?.to_owned();
        let port = uri.port_u16().unwrap_or(443);
        let ip: std::net::IpAddr = if host == "localhost" {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            host.trim_matches(['[', ']']).parse().map_err(|_| format!("cannot resolve {host}"))?
        };
        let address = std::net::SocketAddr::new(ip, port);
        let path = format!("{}?timeout={timeout}s", uri.path());
        return Ok(Destination { address, server_name: host, path_and_query: path, display: url.to_owned() });
    }
    let service = &client_config["service"];
    let namespace = service["namespace"].as_str().unwrap_or_default();
    let name = service["name"].as_str().unwrap_or_default();
    let port = service["port"].as_u64().unwrap_or(443);
    let path = service["path"].as_str().unwrap_or("/");
    let host = format!("{name}.{namespace}.svc");
    let display = format!("https://{host}:{port}{path}?timeout={timeout}s");
    let address = endpoints.get(namespace, name).ok_or_else(|| format!("service \"{name}\" not found"))?;
    Ok(Destination { address, server_name: host, path_and_query: format!("{path}?timeout={timeout}s"), display })
}

/// Calls one webhook: `Ok(response)` with the AdmissionReview's `response`, or the reason the call failed.
async fn call(endpoints: &Endpoints, webhook: &Value, review: &Value) -> Result<Value, String> {
    let timeout = webhook["timeoutSeconds"].as_u64().unwrap_or(10);
    let client_config = &webhook["clientConfig"];
    let destination = destination(endpoints, client_config, timeout)?;
    let ca_bundle = client_config["caBundle"].as_str().map(|b| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.decode(b).unwrap_or_default()
    });
    let trust = Trust { ca_bundle: Some(ca_bundle.as_deref().unwrap_or_default()), client: None };
    let request =
        http::Request::post("/").header("content-type", "application/json").header("accept", "application/json");
    let body = Bytes::from(serde_json::to_vec(review).unwrap_or_default());
    let (code, answer) = outbound::exchange(&destination, &trust, request, body, Duration::from_secs(timeout))
        .await
        .map_err(|e| format!("failed to call webhook: Post \"{}\": {e}", destination.display))?;
    if !(200..300).contains(&code) {
        return Err(format!("received invalid webhook response: the server responded with {code}"));
    }
    let answer: Value =
        serde_json::from_slice(&answer).map_err(|e| format!("received invalid webhook response: {e}"))?;
    let response = answer["response"].clone();
    if response["uid"] != review["request"]["uid"] {
        return Err(format!("expected response.uid={}, got {}", review["request"]["uid"], response["uid"]));
    }
    Ok(response)
}

/// kube-apiserver's `ToStatusErr`: the denial as the client sees it.
fn denial(webhook_name: &str, status: &Value) -> ApiError {
    let denied_by = format!("admission webhook \"{webhook_name}\" denied the request");
    let code = status["code"].as_u64().and_then(|c| u16::try_from(c).ok()).filter(|c| *c >= 400).unwrap_or(400);
    let message = match (
        status["message"].as_str().filter(|m| !m.is_empty()),
        status["reason"].as_str().filter(|r| !r.is_empty()),
    ) {
        (Some(message), _) => format!("{denied_by}: {message}"),
        (None, Some(reason)) => format!("{denied_by}: {reason}"),
        (None, None) => format!("{denied_by} without explanation"),
    };
    let reason: &'static str = match status["reason"].as_str() {
        Some("Forbidden") => "Forbidden",
        Some("Invalid") => "Invalid",
        Some("BadRequest") => "BadRequest",
        Some("Conflict") => "Conflict",
        Some("NotFound") => "NotFound",
        _ => "",
    };
    ApiError::new(code, reason, message)
}

fn configurations(store: &Store, resource: &str) -> Vec<Value> {
    // Only the webhooks are copied, in the configurations' name order (the store's order: they are cluster-scoped).
    store
        .map(&ResourceId::new("admissionregistration.k8s.io", resource), |_, _, configuration| {
            configuration["webhooks"].as_array().cloned()
        })
        .into_iter()
        .flatten()
        .collect()
}

fn is_admission_configuration(resource: &ResourceType) -> bool {
    resource.group == "admissionregistration.k8s.io"
}

/// The bytes of a response's `patch`, a Go `[]byte`: a base64 string, or (as Go's JSON decoder also accepts for a
/// byte slice, and kube-rs' webhooks send) an array of byte values. None when there is no patch.
fn patch_bytes(patch: &Value) -> Option<Result<Vec<u8>, String>> {
    use base64::Engine as _;
    match patch {
        Value::Null => None,
        Value::String(text) => Some(base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| e.to_string())),
        Value::Array(items) => Some(
            items
                .iter()
                .map(|item| item.as_u64().and_then(|byte| u8::try_from(byte).ok()).ok_or("not a byte".to_owned()))
                .collect(),
        ),
        other => Some(Err(format!("a patch must be a base64 string, not {other}"))),
    }
}

/// Runs the webhooks of one phase. Mutating webhooks return the object as they changed it.
async fn run_phase(
    store: &Store,
    endpoints: &Endpoints,
    mutating: bool,
    request: &Request<'_>,
) -> Result<Option<Value>, ApiError> {
    // kube-apiserver never sends webhook configurations themselves to webhooks, so a bad one can be removed.
    if is_admission_configuration(request.resource) {
        return Ok(None);
    }
    let kind = if mutating { "mutatingwebhookconfigurations" } else { "validatingwebhookconfigurations" };
    let mut object = request.object.cloned();
    for webhook in configurations(store, kind) {
        let current = Request { object: object.as_ref(), ..*request };
        if !webhook_applies(store, &webhook, &current) {
            continue;
        }
        let name = webhook["name"].as_str().unwrap_or_default().to_owned();
        if request.dry_run && !matches!(webhook["sideEffects"].as_str(), Some("None" | "NoneOnDryRun")) {
            return Err(ApiError::bad_request(format!("admission webhook \"{name}\" does not support dry run")));
        }
        let review = review_of(&current, &uuid::Uuid::new_v4().to_string());
        let response = match call(endpoints, &webhook, &review).await {
            Ok(response) => response,
            Err(why) if webhook["failurePolicy"] == "Ignore" => {
                tracing::warn!(webhook = %name, %why, "webhook failed; ignored by its failurePolicy");
                continue;
            }
            Err(why) => {
                return Err(ApiError::internal(format!(
                    "Internal error occurred: failed calling webhook \"{name}\": {why}"
                )))
            }
        };
        if response["allowed"] != true {
            return Err(denial(&name, &response["status"]));
        }
        if mutating {
            if let (Some(patch), Some(current)) = (patch_bytes(&response["patch"]), object.as_ref()) {
                let decoded = patch.map_err(|e| {
                    ApiError::internal(format!(
                        "Internal error occurred: webhook \"{name}\" returned an invalid patch: {e}"
                    ))
                })?;
                let patch: Value = serde_json::from_slice(&decoded).map_err(|e| {
                    ApiError::internal(format!(
                        "Internal error occurred: webhook \"{name}\" returned an invalid patch: {e}"
                    ))
                })?;
                let patched = json_patch(current, &patch).map_err(|e| {
                    ApiError::internal(format!(
                        "Internal error occurred: webhook \"{name}\" returned a patch that does not apply: {e}"
                    ))
                })?;
                object = Some(patched);
            }
        }
    }
    Ok(if mutating { object } else { None })
}

/// The mutating phase: the object as the webhooks left it.
pub async fn mutate(store: &Store, endpoints: &Endpoints, request: &Request<'_>) -> Result<Option<Value>, ApiError> {
    run_phase(store, endpoints, true, request).await
}

/// The validating phase: an error when a webhook denies or fails under `failurePolicy: Fail`.
pub async fn validate(store: &Store, endpoints: &Endpoints, request: &Request<'_>) -> Result<(), ApiError> {
    run_phase(store, endpoints, false, request).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_entries_and_subresources() {
        assert!(resource_matches("*", "pods", ""));
        assert!(!resource_matches("*", "pods", "status"), "a bare * leaves subresources out");
        assert!(resource_matches("*/*", "pods", "status"));
        assert!(resource_matches("pods/*", "pods", "log"));
        assert!(resource_matches("*/status", "operators", "status"));
        assert!(!resource_matches("installs", "installs", "status"));
        assert!(resource_matches("installs", "installs", ""));
    }

    #[test]
    fn patches_are_base64_or_byte_arrays_as_go_decodes_them() {
        assert_eq!(patch_bytes(&json!("W10=")), Some(Ok(b"[]".to_vec())));
        assert_eq!(patch_bytes(&json!([91, 93])), Some(Ok(b"[]".to_vec())));
        assert!(patch_bytes(&Value::Null).is_none());
        assert!(matches!(patch_bytes(&json!([256])), Some(Err(_))));
        assert!(matches!(patch_bytes(&json!(7)), Some(Err(_))));
    }

    #[test]
    fn selectors_and_denials() {
        assert!(label_selector_matches(&Value::Null, &json!({})));
        assert!(label_selector_matches(&json!({"matchLabels": {"a": "b"}}), &json!({"a": "b", "c": "d"})));
        assert!(!label_selector_matches(
            &json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}),
            &json!({"a": "b"})
        ));
        let denied = denial("approve.olm", &json!({"message": "only approvers may approve"}));
        assert_eq!(
            (denied.code, denied.reason, denied.message.as_str()),
            (400, "", "admission webhook \"approve.olm\" denied the request: only approvers may approve")
        );
        let forbidden = denial("approve.olm", &json!({"code": 403, "reason": "Forbidden"}));
        assert_eq!(
            (forbidden.code, forbidden.message.as_str()),
            (403, "admission webhook \"approve.olm\" denied the request: Forbidden")
        );
        assert_eq!(denial("x", &Value::Null).message, "admission webhook \"x\" denied the request without explanation");
    }
}
