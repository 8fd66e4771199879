//! The aggregated API server's requests, in kube-apiserver's order: authentication (the front-proxy, `front_proxy`),
//! the request's attributes from its path, authorization of every resource request by a SubjectAccessReview of the
//! user the aggregation layer named, then the verb: discovery and OpenAPI (`discovery`), list, get and watch of
//! Installed objects (`serve`), and `405 MethodNotAllowed` for every write, as seed 002 shows it.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::{json, Value};

use super::cache::Cache;
use super::discovery::{self, INSTALLED};
use super::front_proxy::{authenticate, RequestHeader};
use super::packagemanifest;
use super::packages::{self, Catalogs};
use super::serve;
use super::synthesize::GROUP;
use super::table::IncludeObject;
use crate::access::{allowed, AccessCheck};
use crate::api::v2alpha1::Requester;
use crate::tls::PeerCertificate;

/// What every request is served from.
pub struct ApiState {
    pub cache: Arc<Cache>,
    /// The controller's client: SubjectAccessReviews are asked with it.
    pub client: kube::Client,
    pub request_header: RequestHeader,
    /// Where PackageManifests come from.
    pub catalogs: Catalogs,
    /// SubjectAccessReview answers, reused for 10 seconds.
    pub decisions: super::authz::Decisions,
}

/// A Kubernetes `Status` failure.
pub fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Response {
    let mut body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": message, "reason": reason, "code": code});
    if let Some(details) = details {
        body["details"] = details;
    }
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, json_headers(), body.to_string()).into_response()
}

pub fn json_headers() -> [(axum::http::HeaderName, HeaderValue); 1] {
    [(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"))]
}

pub fn ok_json(body: &Value) -> Response {
    (StatusCode::OK, json_headers(), body.to_string()).into_response()
}

/// A resource request, as its path names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceRequest {
    pub version: String,
    pub resource: String,
    /// `None` for a request across namespaces.
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// What a path asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Health,
    Groups,
    Group,
    Resources(String),
    OpenApiIndex,
    OpenApi(String),
    Resource(ResourceRequest),
    NotFound,
}

/// Reads a path as kube-apiserver's RequestInfoFactory does, for this server's group.
pub fn target(path: &str) -> Target {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let resource = |version: &str, namespace: Option<&str>, rest: &[&str]| -> Target {
        match rest {
            [resource] => Target::Resource(ResourceRequest {
                version: version.to_owned(),
                resource: (*resource).to_owned(),
                namespace: namespace.map(str::to_owned),
                name: None,
                subresource: None,
            }),
            [resource, name, subresource @ ..] if namespace.is_some() && subresource.len() <= 1 => {
                Target::Resource(ResourceRequest {
                    version: version.to_owned(),
                    resource: (*resource).to_owned(),
                    namespace: namespace.map(str::to_owned),
                    name: Some((*name).to_owned()),
                    subresource: subresource.first().map(|s| (*s).to_owned()),
                })
            }
            _ => Target::NotFound,
        }
    };
    match segments.as_slice() {
        ["healthz"] | ["readyz"] | ["livez"] => Target::Health,
        ["apis"] => Target::Groups,
        ["apis", group] if *group == GROUP => Target::Group,
        ["apis", group, version] if *group == GROUP => Target::Resources((*version).to_owned()),
        ["openapi", "v3"] => Target::OpenApiIndex,
        ["openapi", "v3", rest @ ..] => Target::OpenApi(rest.join("/")),
        ["apis", group, version, "namespaces", namespace, rest @ ..] if *group == GROUP && !rest.is_empty() => {
            resource(version, Some(namespace), rest)
        }
        ["apis", group, version, rest @ ..] if *group == GROUP => resource(version, None, rest),
        _ => Target::NotFound,
    }
}

/// The verb of a request, as RBAC names it.
pub fn verb(method: &Method, request: &ResourceRequest, watch: bool) -> &'static str {
    match *method {
        Method::GET | Method::HEAD if watch => "watch",
        Method::GET | Method::HEAD if request.name.is_none() => "list",
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if request.name.is_none() => "deletecollection",
        Method::DELETE => "delete",
        _ => "unknown",
    }
}

fn not_found() -> Response {
    status(404, "NotFound", "the server could not find the requested resource", Some(json!({})))
}

/// Kube-apiserver's refusal of a verb RBAC denies.
pub fn forbidden_message(user: &str, verb: &str, request: &ResourceRequest) -> String {
    let object = match &request.name {
        Some(name) => format!("{}.{GROUP} \"{name}\"", request.resource),
        None => format!("{}.{GROUP}", request.resource),
    };
    let scope = match &request.namespace {
        Some(namespace) => format!(" in the namespace \"{namespace}\""),
        None => " at the cluster scope".to_owned(),
    };
    format!(
        "{object} is forbidden: User \"{user}\" cannot {verb} resource \"{}\" in API group \"{GROUP}\"{scope}",
        request.resource
    )
}

/// Every request.
pub async fn handle(
    State(state): State<Arc<ApiState>>,
    peer: Option<Extension<PeerCertificate>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let target = target(uri.path());
    if target == Target::Health {
        return (StatusCode::OK, "ok").into_response();
    }
    let peer = peer.map(|Extension(peer)| peer).unwrap_or_default();
    let user = match authenticate(&state.request_header, &peer, &headers) {
        Ok(user) => user,
        Err(error) => {
            tracing::debug!(%error, path = uri.path(), "request refused: not authenticated");
            return status(401, "Unauthorized", "Unauthorized", None);
        }
    };
    match target {
        Target::Health => (StatusCode::OK, "ok").into_response(),
        Target::Groups => ok_json(&discovery::group_list()),
        Target::Group => ok_json(&discovery::group()),
        Target::Resources(version) => discovery::resource_list(&version).map_or_else(not_found, |list| ok_json(&list)),
        Target::OpenApiIndex => ok_json(&discovery::openapi_index()),
        Target::OpenApi(path) => match discovery::openapi_at(&path) {
            Some((document, hash)) => {
                let mut response = ok_json(&document);
                let etag = HeaderValue::from_str(&format!("\"{hash}\"")).unwrap_or(HeaderValue::from_static("\"\""));
                response.headers_mut().insert(axum::http::header::ETAG, etag);
                response
            }
            None => not_found(),
        },
        Target::NotFound => not_found(),
        Target::Resource(request) => resource(&state, &user, &method, request, &headers, &query).await,
    }
}

async fn resource(
    state: &ApiState,
    user: &Requester,
    method: &Method,
    request: ResourceRequest,
    headers: &HeaderMap,
    query: &BTreeMap<String, String>,
) -> Response {
    if !discovery::serves(&request.version, &request.resource, request.subresource.as_deref()) {
        return not_found();
    }
    let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let verb = verb(method, &request, watch);
    let resource = match &request.subresource {
        Some(subresource) => format!("{}/{subresource}", request.resource),
        None => request.resource.clone(),
    };
    let name = request.name.clone().or_else(|| selected_name(verb, query)).unwrap_or_default();
    let check = AccessCheck::resource(request.namespace.as_deref(), verb, GROUP, &resource, &name);
    let now = std::time::Instant::now();
    let decision = match state.decisions.recall(user, &check, now) {
        Some(allowed) => Ok(allowed),
        None => allowed(&state.client, user, &check).await.inspect(|allowed| {
            state.decisions.remember(user, &check, *allowed, now);
        }),
    };
    match decision {
        Ok(true) => {}
        Ok(false) => {
            let message = forbidden_message(&user.username, verb, &request);
            let details = json!({"name": request.name, "group": GROUP, "kind": request.resource});
            return status(403, "Forbidden", &message, Some(details));
        }
        Err(error) => {
            tracing::warn!(%error, "SubjectAccessReview failed");
            return status(500, "InternalError", "Internal error occurred: authorization failed", None);
        }
    }
    let packages = request.resource == packagemanifest::RESOURCE;
    if !matches!(*method, Method::GET | Method::HEAD) || (packages && watch) {
        // What go-restful answers for a verb a resource does not serve: kubectl reads it as "the server does not
        // allow this method on the requested resource" (seed 002's 'Non-Use Cases'). OLM's PackageManifests are
        // not watched either.
        return (StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed").into_response();
    }
    let table = wants_table(headers);
    if packages {
        let include = match table.then(|| IncludeObject::parse(query.get("includeObject").map(String::as_str))) {
            None => None,
            Some(Some(include)) => Some(include),
            Some(None) => return status(400, "BadRequest", "invalid includeObject", None),
        };
        return packages::serve(&state.catalogs, &request, query, headers, include).await;
    }
    if request.resource != INSTALLED || request.subresource.is_some() {
        return not_found();
    }
    if !state.cache.wait_synced(std::time::Duration::from_secs(10)).await {
        return status(503, "ServiceUnavailable", "the Installed API's cache has not synced yet", None);
    }
    let asked = serve::Asked::read(&request, query, table);
    // A watch of one object's URL sees that object only.
    let asked = asked.map(|asked| match &request.name {
        Some(name) if watch => asked.named(name),
        _ => asked,
    });
    let asked = match asked {
        Ok(asked) => asked,
        Err(message) => return status(400, "BadRequest", &message, None),
    };
    match (&request.name, watch) {
        (_, true) => serve::watch(state.cache.clone(), asked, query),
        (Some(name), false) => serve::get(&state.cache, &asked, name),
        (None, false) => serve::list(&state.cache, asked),
    }
}

/// The name a list or watch is authorized for: that of an exact `metadata.name` field selector, as kube-apiserver's
/// RequestInfo takes it (`kubectl get installed x -w` watches with one, and RBAC `resourceNames` then apply).
fn selected_name(verb: &str, query: &BTreeMap<String, String>) -> Option<String> {
    if !matches!(verb, "list" | "watch") {
        return None;
    }
    let requirements = super::selector::fields(query.get("fieldSelector").map(String::as_str), None).ok()?;
    let name = requirements.into_iter().find(|r| r.field == "metadata.name" && r.equal)?.value;
    // Only a valid path segment name, as RequestInfo checks (`path.IsValidPathSegmentName`).
    (!name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%'])).then_some(name)
}

/// Whether the client asked for a Table (`kubectl get`).
fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|accept| accept.contains("as=Table"))
}

/// The router: every path goes to [`handle`].
pub fn router(state: Arc<ApiState>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(state)
}

/// The body of a streamed response.
pub fn streamed(body: Body) -> Response {
    let mut response = Response::new(body);
    response.headers_mut().insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert(axum::http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(namespace: Option<&str>, name: Option<&str>) -> ResourceRequest {
        ResourceRequest {
            version: "v2alpha1".into(),
            resource: "installed".into(),
            namespace: namespace.map(str::to_owned),
            name: name.map(str::to_owned),
            subresource: None,
        }
    }

    #[test]
    fn paths_are_read_as_kube_apiserver_reads_them() {
        let base = "/apis/packages.operators.coreos.com/v2alpha1";
        assert_eq!(target(&format!("{base}/installed")), Target::Resource(request(None, None)));
        assert_eq!(target(&format!("{base}/namespaces/a/installed")), Target::Resource(request(Some("a"), None)));
        assert_eq!(
            target(&format!("{base}/namespaces/a/installed/etcd.v1")),
            Target::Resource(request(Some("a"), Some("etcd.v1")))
        );
        assert_eq!(target(&format!("{base}/installed/etcd.v1")), Target::NotFound, "namespaced: no name without one");
        let icon = target("/apis/packages.operators.coreos.com/v1/namespaces/a/packagemanifests/etcd/icon");
        assert!(
            matches!(&icon, Target::Resource(r) if r.subresource.as_deref() == Some("icon") && r.version == "v1"),
            "{icon:?}"
        );
        assert_eq!(target(&format!("{base}/namespaces/a/installed/x/y/z")), Target::NotFound);
        assert_eq!(target(base), Target::Resources("v2alpha1".into()));
        assert_eq!(target("/apis/packages.operators.coreos.com"), Target::Group);
        assert_eq!(target("/apis/other.io/v1/things"), Target::NotFound);
        assert_eq!(
            target("/openapi/v3/apis/packages.operators.coreos.com/v2alpha1"),
            Target::OpenApi("apis/packages.operators.coreos.com/v2alpha1".into())
        );
        assert_eq!(target("/healthz"), Target::Health);
    }

    #[test]
    fn verbs_are_rbac_verbs() {
        let collection = request(Some("a"), None);
        let object = request(Some("a"), Some("x"));
        assert_eq!(verb(&Method::GET, &collection, false), "list");
        assert_eq!(verb(&Method::GET, &collection, true), "watch");
        assert_eq!(verb(&Method::GET, &object, false), "get");
        assert_eq!(verb(&Method::POST, &collection, false), "create");
        assert_eq!(verb(&Method::DELETE, &collection, false), "deletecollection");
        assert_eq!(verb(&Method::DELETE, &object, false), "delete");
        assert_eq!(verb(&Method::PATCH, &object, false), "patch");
    }

    #[test]
    fn a_list_or_watch_of_one_name_is_authorized_for_that_name() {
        let query: BTreeMap<String, String> =
            [("fieldSelector".to_owned(), "metadata.name=etcd.v1,metadata.namespace=a".to_owned())].into();
        assert_eq!(selected_name("watch", &query).as_deref(), Some("etcd.v1"));
        assert_eq!(selected_name("list", &query).as_deref(), Some("etcd.v1"));
        assert_eq!(selected_name("get", &query), None);
        let other: BTreeMap<String, String> = [("fieldSelector".to_owned(), "metadata.name!=x".to_owned())].into();
        assert_eq!(selected_name("list", &other), None);
        let odd: BTreeMap<String, String> = [("fieldSelector".to_owned(), "metadata.name=a/b".to_owned())].into();
        assert_eq!(selected_name("list", &odd), None, "not a path segment name");
    }

    #[test]
    fn a_refusal_reads_as_kube_apiservers() {
        assert_eq!(
            forbidden_message("bob", "list", &request(Some("team-a"), None)),
            "installed.packages.operators.coreos.com is forbidden: User \"bob\" cannot list resource \"installed\" \
             in API group \"packages.operators.coreos.com\" in the namespace \"team-a\""
        );
        assert_eq!(
            forbidden_message("bob", "get", &request(Some("a"), Some("x"))),
            "installed.packages.operators.coreos.com \"x\" is forbidden: User \"bob\" cannot get resource \
             \"installed\" in API group \"packages.operators.coreos.com\" in the namespace \"a\""
        );
    }
}
