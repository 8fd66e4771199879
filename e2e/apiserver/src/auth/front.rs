//! What every request passes before it is served, in kube-apiserver's order: authentication (client certificate,
//! then bearer token, else anonymous), impersonation (each `Impersonate-*` header needs the `impersonate` verb on
//! its resource), request attributes from the URL (`RequestInfoFactory`), and RBAC authorization.

use axum::http::{HeaderMap, Method};

use crate::auth::authn::{Authenticator, Credentials, UserInfo, ANONYMOUS, AUTHENTICATED, UNAUTHENTICATED};
use crate::auth::rbac::{self, Attributes, Decision};
use crate::status::ApiError;
use crate::storage::store::{ResourceId, Store};

/// The credentials of the TLS connection a request came on.
#[derive(Clone, Debug, Default)]
pub struct PeerCredentials(pub Credentials);

/// An authenticated, authorized request.
#[derive(Clone, Debug)]
pub struct Admitted {
    /// The user the request acts as.
    pub user: UserInfo,
    /// The authenticated user, when it impersonates another.
    pub impersonator: Option<String>,
    pub attributes: Attributes,
}

/// The credentials to use: a verified client certificate, else a bearer token, else none.
pub fn credentials(peer: Option<&PeerCredentials>, headers: &HeaderMap) -> Credentials {
    if let Some(PeerCredentials(certificate @ Credentials::Certificate { .. })) = peer {
        return certificate.clone();
    }
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map_or(Credentials::None, |token| Credentials::Bearer(token.trim().to_owned()))
}

const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// The attributes of a request, as `RequestInfoFactory` derives them from method, path and query.
pub fn attributes(method: &Method, segments: &[String], query_watch: bool) -> Attributes {
    let path = format!("/{}", segments.join("/"));
    let parts: Vec<&str> = segments.iter().map(String::as_str).collect();
    let (group, version, mut rest): (&str, &str, &[&str]) = match parts.as_slice() {
        ["api", version, rest @ ..] => ("", version, rest),
        ["apis", group, version, rest @ ..] => (group, version, rest),
        _ => ("", "", &[][..]),
    };
    if rest.is_empty() {
        let verb = method.as_str().to_lowercase();
        return Attributes { verb, path, ..Attributes::default() };
    }
    let mut namespace = String::new();
    if rest[0] == "namespaces" && rest.len() > 1 {
        namespace = rest[1].to_owned();
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
            rest = &rest[2..];
        }
    }
    let resource = rest[0].to_owned();
    let name = rest.get(1).map_or_else(String::new, |n| (*n).to_owned());
    let subresource = rest.get(2).map_or_else(String::new, |s| (*s).to_owned());
    let verb = match *method {
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if name.is_empty() => "deletecollection",
        Method::DELETE => "delete",
        Method::GET | Method::HEAD if query_watch => "watch",
        Method::GET | Method::HEAD if name.is_empty() => "list",
        Method::GET | Method::HEAD => "get",
        _ => "",
    };
    Attributes {
        verb: verb.to_owned(),
        resource_request: true,
        namespace,
        api_group: group.to_owned(),
        api_version: version.to_owned(),
        resource,
        subresource,
        name,
        path,
    }
}

/// The name of a list or watch: an exact `metadata.name` field selector's, when it is a valid path segment, as
/// `RequestInfoFactory` takes it (so that RBAC `resourceNames` allow `kubectl get <kind> <name> -w`).
pub fn name_from_field_selector(attributes: &mut Attributes, field_selector: Option<&str>) {
    if !attributes.name.is_empty() || !matches!(attributes.verb.as_str(), "list" | "watch") {
        return;
    }
    let Some(selector) = field_selector.and_then(|text| crate::storage::selectors::FieldSelector::parse(text).ok())
    else {
        return;
    };
    let exact = selector.0.iter().find(|(field, equal, _)| field == "metadata.name" && *equal);
    if let Some((_, _, name)) = exact {
        let valid = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%']);
        if valid {
            attributes.name = name.clone();
        }
    }
}

fn forbidden(user: &UserInfo, attributes: &Attributes) -> ApiError {
    let message = rbac::forbidden_message(user, attributes);
    if !attributes.resource_request {
        return ApiError::new(403, "Forbidden", format!("forbidden: {message}"));
    }
    ApiError::forbidden(&ResourceId::new(&attributes.api_group, &attributes.resource), &attributes.name, &message)
}

fn require(store: &Store, user: &UserInfo, attributes: &Attributes) -> Result<(), ApiError> {
    match rbac::authorize(store, user, attributes) {
        Decision::Allow(_) => Ok(()),
        Decision::Deny => Err(forbidden(user, attributes)),
    }
}

fn impersonation(group: &str, resource: &str, subresource: &str, namespace: &str, name: &str) -> Attributes {
    Attributes {
        verb: "impersonate".into(),
        resource_request: true,
        namespace: namespace.into(),
        api_group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        name: name.into(),
        ..Attributes::default()
    }
}

/// The user a request acts as after its `Impersonate-*` headers, each checked against the authenticated user's
/// permissions.
pub fn impersonate(store: &Store, user: &UserInfo, headers: &HeaderMap) -> Result<Option<UserInfo>, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_owned).collect()
    };
    let username = values("impersonate-user").into_iter().next();
    let groups = values("impersonate-group");
    let uid = values("impersonate-uid").into_iter().next();
    let extras: Vec<(String, Vec<String>)> = headers
        .keys()
        .filter_map(|key| {
            // Keys arrive escaped as client-go writes them (`%2F` for `/`), and are unescaped as kube-apiserver does.
            let escaped = key.as_str().strip_prefix("impersonate-extra-")?;
            let unescaped = percent_encoding::percent_decode_str(escaped).decode_utf8_lossy().into_owned();
            Some((unescaped, values(key.as_str())))
        })
        .collect();
    let Some(username) = username else {
        if !groups.is_empty() || uid.is_some() || !extras.is_empty() {
            return Err(ApiError::new(
                403,
                "Forbidden",
                "requested impersonation of groups, a uid or extras without impersonating a user",
            ));
        }
        return Ok(None);
    };
    let service_account = UserInfo::service_account_of(&username).map(|(ns, name)| (ns.to_owned(), name.to_owned()));
    match &service_account {
        Some((namespace, name)) => require(store, user, &impersonation("", "serviceaccounts", "", namespace, name))?,
        None => require(store, user, &impersonation("", "users", "", "", &username))?,
    }
    for group in &groups {
        require(store, user, &impersonation("", "groups", "", "", group))?;
    }
    if let Some(uid) = &uid {
        require(store, user, &impersonation("authentication.k8s.io", "uids", "", "", uid))?;
    }
    for (key, values) in &extras {
        for value in values {
            require(store, user, &impersonation("authentication.k8s.io", "userextras", key, "", value))?;
        }
    }
    let mut groups = groups;
    if groups.is_empty() {
        if let Some((namespace, _)) = &service_account {
            groups = vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}")];
        }
    }
    let implied = if username == ANONYMOUS { UNAUTHENTICATED } else { AUTHENTICATED };
    if !groups.iter().any(|g| g == implied) {
        groups.push(implied.to_owned());
    }
    Ok(Some(UserInfo { username, uid: uid.unwrap_or_default(), groups, extra: extras.into_iter().collect() }))
}

/// Authenticates, applies impersonation and authorizes a request. A refusal carries the authenticated user's name,
/// when there is one, for the audit log.
pub fn admit(
    store: &Store,
    authenticator: &Authenticator,
    credentials: &Credentials,
    headers: &HeaderMap,
    attributes: Attributes,
) -> Result<Admitted, (ApiError, Option<String>)> {
    let authenticated = authenticator.authenticate(store, credentials).map_err(|e| (e, None))?;
    let impersonated =
        impersonate(store, &authenticated, headers).map_err(|e| (e, Some(authenticated.username.clone())))?;
    let (user, impersonator) = match impersonated {
        Some(user) => (user, Some(authenticated.username.clone())),
        None => (authenticated.clone(), None),
    };
    require(store, &user, &attributes).map_err(|e| (e, Some(authenticated.username.clone())))?;
    Ok(Admitted { user, impersonator, attributes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: Method, path: &str, watch: bool) -> Attributes {
        let segments: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect();
        attributes(&method, &segments, watch)
    }

    #[test]
    fn a_list_or_watch_selecting_one_name_is_for_that_name() {
        let mut watch = info(Method::GET, "/api/v1/namespaces/team/configmaps", true);
        name_from_field_selector(&mut watch, Some("metadata.name=settings"));
        assert_eq!((watch.verb.as_str(), watch.name.as_str()), ("watch", "settings"));
        let mut list = info(Method::GET, "/api/v1/namespaces/team/configmaps", false);
        name_from_field_selector(&mut list, Some("metadata.name!=settings"));
        assert_eq!(list.name, "");
        let mut bad = info(Method::GET, "/api/v1/namespaces/team/configmaps", false);
        name_from_field_selector(&mut bad, Some("metadata.name=a%2Fb"));
        assert_eq!(bad.name, "", "not a valid path segment name");
        let mut delete = info(Method::DELETE, "/api/v1/namespaces/team/configmaps", false);
        name_from_field_selector(&mut delete, Some("metadata.name=settings"));
        assert_eq!(delete.name, "", "only lists and watches");
    }

    #[test]
    fn request_attributes_follow_request_info_factory() {
        let list = info(Method::GET, "/api/v1/namespaces/team/configmaps", false);
        assert_eq!(
            (list.verb.as_str(), list.namespace.as_str(), list.resource.as_str(), list.name.as_str()),
            ("list", "team", "configmaps", "")
        );
        let watch = info(Method::GET, "/apis/apps/v1/deployments", true);
        assert_eq!((watch.verb.as_str(), watch.api_group.as_str(), watch.namespace.as_str()), ("watch", "apps", ""));
        let status = info(Method::PATCH, "/apis/operators.coreos.com/v2alpha1/operators/plumbus/status", false);
        assert_eq!(
            (status.verb.as_str(), status.resource.as_str(), status.subresource.as_str(), status.name.as_str()),
            ("patch", "operators", "status", "plumbus")
        );
        let namespace = info(Method::GET, "/api/v1/namespaces/team", false);
        assert_eq!(
            (namespace.resource.as_str(), namespace.name.as_str(), namespace.namespace.as_str()),
            ("namespaces", "team", "team")
        );
        let finalize = info(Method::PUT, "/api/v1/namespaces/team/finalize", false);
        assert_eq!(
            (finalize.resource.as_str(), finalize.subresource.as_str(), finalize.verb.as_str()),
            ("namespaces", "finalize", "update")
        );
        assert_eq!(info(Method::DELETE, "/api/v1/namespaces/team/secrets", false).verb, "deletecollection");
        let discovery = info(Method::GET, "/apis", false);
        assert!(!discovery.resource_request);
        assert_eq!((discovery.verb.as_str(), discovery.path.as_str()), ("get", "/apis"));
        assert!(!info(Method::GET, "/apis/apps/v1", false).resource_request);
    }
}
