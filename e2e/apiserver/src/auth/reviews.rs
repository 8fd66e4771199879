//! The review kinds, answered from the authorizer and authenticators: SubjectAccessReview,
//! LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview, TokenReview, and
//! TokenRequest (`serviceaccounts/<name>/token`).

use serde_json::{json, Value};

use crate::auth::authn::{Authenticator, Bound, UserInfo};
use crate::auth::rbac::{self, Attributes, Decision};
use crate::auth::tokens::ISSUER;
use crate::status::ApiError;
use crate::status::{error, ErrorType};
use crate::storage::store::{ResourceId, Store};

fn strings(value: &Value) -> Vec<String> {
    value.as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
}

/// The attributes a review's spec asks about.
fn attributes_of(spec: &Value, kind: &str) -> Result<Attributes, ApiError> {
    let invalid = |field: &str, detail: &str| {
        ApiError::invalid(kind, "authorization.k8s.io", "", &[error(field, ErrorType::Invalid, detail)])
    };
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    match (
        spec.get("resourceAttributes").filter(|v| !v.is_null()),
        spec.get("nonResourceAttributes").filter(|v| !v.is_null()),
    ) {
        (Some(resource), None) => Ok(Attributes {
            verb: text(&resource["verb"]),
            resource_request: true,
            namespace: text(&resource["namespace"]),
            api_group: text(&resource["group"]),
            api_version: text(&resource["version"]),
            resource: text(&resource["resource"]),
            subresource: text(&resource["subresource"]),
            name: text(&resource["name"]),
            path: String::new(),
        }),
        (None, Some(path)) => {
            Ok(Attributes { verb: text(&path["verb"]), path: text(&path["path"]), ..Attributes::default() })
        }
        (Some(_), Some(_)) => Err(invalid(
            "spec.nonResourceAttributes",
            "\"null\": cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => Err(invalid(
            "spec.resourceAttributes",
            "\"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
    }
}

fn answer(mut body: Value, user: &UserInfo, attributes: &Attributes, store: &Store) -> Value {
    let status = match rbac::authorize(store, user, attributes) {
        Decision::Allow(reason) if reason.is_empty() => json!({"allowed": true}),
        Decision::Allow(reason) => json!({"allowed": true, "reason": reason}),
        Decision::Deny => json!({"allowed": false}),
    };
    body["status"] = status;
    if body["metadata"].is_null() {
        body["metadata"] = json!({});
    }
    body
}

/// SubjectAccessReview: may a given user do this?
pub fn subject_access_review(store: &Store, body: Value) -> Result<Value, ApiError> {
    let spec = &body["spec"];
    let attributes = attributes_of(spec, "SubjectAccessReview")?;
    let groups = strings(&spec["groups"]);
    let username = spec["user"].as_str().unwrap_or_default();
    if username.is_empty() && groups.is_empty() {
        return Err(ApiError::invalid(
            "SubjectAccessReview",
            "authorization.k8s.io",
            "",
            &[error("spec.user", ErrorType::Invalid, "\"\": at least one of user or group must be specified")],
        ));
    }
    let user = UserInfo {
        username: username.to_owned(),
        uid: spec["uid"].as_str().unwrap_or_default().to_owned(),
        groups,
        extra: serde_json::from_value(spec["extra"].clone()).unwrap_or_default(),
    };
    Ok(answer(body, &user, &attributes, store))
}

/// LocalSubjectAccessReview: the same, in the namespace of the URL.
pub fn local_subject_access_review(store: &Store, namespace: &str, body: Value) -> Result<Value, ApiError> {
    let asked = body["spec"]["resourceAttributes"]["namespace"].as_str().unwrap_or_default();
    if body["spec"]["resourceAttributes"].is_object() && asked != namespace {
        return Err(ApiError::bad_request(format!(
            "spec.resourceAttributes.namespace must match namespace: {namespace}"
        )));
    }
    if body["spec"]["nonResourceAttributes"].is_object() {
        return Err(ApiError::invalid(
            "LocalSubjectAccessReview",
            "authorization.k8s.io",
            "",
            &[error("spec.nonResourceAttributes", ErrorType::Invalid, "disallowed on this kind of request")],
        ));
    }
    let mut reviewed = subject_access_review(store, body)?;
    reviewed["metadata"]["namespace"] = json!(namespace);
    Ok(reviewed)
}

/// SelfSubjectAccessReview: may I do this?
pub fn self_subject_access_review(store: &Store, user: &UserInfo, body: Value) -> Result<Value, ApiError> {
    let attributes = attributes_of(&body["spec"], "SelfSubjectAccessReview")?;
    Ok(answer(body, user, &attributes, store))
}

/// SelfSubjectRulesReview: what may I do in this namespace?
pub fn self_subject_rules_review(store: &Store, user: &UserInfo, mut body: Value) -> Result<Value, ApiError> {
    let namespace = body["spec"]["namespace"].as_str().unwrap_or_default().to_owned();
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for (rule, _) in rbac::rules_for(store, user, &namespace) {
        if rule.non_resource_urls.is_empty() {
            let mut entry = json!({"verbs": rule.verbs, "apiGroups": rule.api_groups, "resources": rule.resources});
            if !rule.resource_names.is_empty() {
                entry["resourceNames"] = json!(rule.resource_names);
            }
            resource_rules.push(entry);
        } else {
            non_resource_rules.push(json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}));
        }
    }
    body["status"] =
        json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false});
    Ok(body)
}

/// SelfSubjectReview (`kubectl auth whoami`).
pub fn self_subject_review(user: &UserInfo, mut body: Value) -> Value {
    body["status"] = json!({"userInfo": user.to_json()});
    body
}

/// TokenReview: who does this token belong to, for which of the audiences asked (the API's when none are)?
pub fn token_review(store: &Store, authenticator: &Authenticator, mut body: Value) -> Value {
    let token = body["spec"]["token"].as_str().unwrap_or_default().to_owned();
    let audiences: Vec<String> = body["spec"]["audiences"]
        .as_array()
        .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    body["status"] = match authenticator.review(store, &token, &audiences) {
        Ok((user, valid_for)) => json!({"authenticated": true, "user": user.to_json(), "audiences": valid_for}),
        Err(_) => json!({"authenticated": false, "error": "invalid bearer token"}),
    };
    body
}

/// The object a TokenRequest binds its token to (`spec.boundObjectRef`), as kube-apiserver's token REST finds it: a
/// Pod running as the account (with its Node, when scheduled), a Secret or a Node; another kind is a bad request,
/// another uid a conflict.
fn bound_object(store: &Store, namespace: &str, account: &str, reference: &Value) -> Result<Option<Bound>, ApiError> {
    if reference.is_null() {
        return Ok(None);
    }
    let text = |key: &str| reference[key].as_str().unwrap_or_default().to_owned();
    let (kind, name, wanted_uid) = (text("kind"), text("name"), text("uid"));
    let group = text("apiVersion").rsplit_once('/').map(|(group, _)| group.to_owned()).unwrap_or_default();
    let get = |resource: &str, namespace: &str| {
        let id = ResourceId::new("", resource);
        store.get(&id, namespace, &name).map_err(|e| ApiError::from_store(e, &id))
    };
    let uid_of = |object: &Value| object["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
    let bound = match (group.as_str(), kind.as_str()) {
        ("", "Pod") => {
            let pod = get("pods", namespace)?;
            if pod["spec"]["serviceAccountName"].as_str() != Some(account) {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token for serviceaccount {account:?} to pod running with different serviceaccount name."
                )));
            }
            let node = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()).map(|node| {
                let uid = store.get(&ResourceId::new("", "nodes"), "", node).map(|n| uid_of(&n)).unwrap_or_default();
                (node.to_owned(), uid)
            });
            Bound::Pod { name: name.clone(), uid: uid_of(&pod), node }
        }
        ("", "Secret") => Bound::Secret { name: name.clone(), uid: uid_of(&get("secrets", namespace)?) },
        ("", "Node") => Bound::Node { name: name.clone(), uid: uid_of(&get("nodes", "")?) },
        _ => {
            let version = text("apiVersion");
            let gvk = match version.split_once('/') {
                Some((group, version)) => format!("{group}/{version}, Kind={kind}"),
                None => format!("/{version}, Kind={kind}"),
            };
            return Err(ApiError::bad_request(format!("cannot bind token to object of type {gvk}")));
        }
    };
    let uid = match &bound {
        Bound::Pod { uid, .. } | Bound::Secret { uid, .. } | Bound::Node { uid, .. } => uid,
    };
    if !wanted_uid.is_empty() && *uid != wanted_uid {
        return Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {kind} {name:?}: the UID in the bound object reference \
                 ({wanted_uid}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    Ok(Some(bound))
}

/// TokenRequest: a token for a ServiceAccount (a signed JWT, `tokens`), for the API's audience unless others are
/// asked for, bound to the account's uid and to the object `spec.boundObjectRef` names.
pub fn token_request(
    store: &Store,
    authenticator: &Authenticator,
    namespace: &str,
    name: &str,
    mut body: Value,
) -> Result<Value, ApiError> {
    let accounts = ResourceId::new("", "serviceaccounts");
    let account = store.get(&accounts, namespace, name).map_err(|e| ApiError::from_store(e, &accounts))?;
    let seconds = body["spec"]["expirationSeconds"].as_i64().unwrap_or(3600);
    if seconds < 600 {
        return Err(ApiError::invalid(
            "TokenRequest",
            "authentication.k8s.io",
            name,
            &[error(
                "spec.expirationSeconds",
                ErrorType::Invalid,
                format!("{seconds}: may not specify a duration less than 10 minutes"),
            )],
        ));
    }
    let mut audiences: Vec<String> = body["spec"]["audiences"]
        .as_array()
        .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    if audiences.is_empty() {
        audiences = vec![ISSUER.to_owned()];
    }
    let bound = bound_object(store, namespace, name, &body["spec"]["boundObjectRef"])?;
    let (token, expires) = authenticator
        .issue_service_account_token(&account, &audiences, bound.as_ref(), seconds)
        .map_err(|e| ApiError::new(500, "InternalError", format!("failed to generate token: {e}")))?;
    body["metadata"]["name"] = json!(name);
    body["metadata"]["namespace"] = json!(namespace);
    body["spec"]["audiences"] = json!(audiences);
    body["spec"]["expirationSeconds"] = json!(seconds);
    body["status"] = json!({"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()});
    Ok(body)
}
