//! The aggregation layer: an APIService that refers to a service is checked for availability (its discovery
//! document, fetched over HTTPS from the endpoint the control plane was given for that service), its resources are
//! served in discovery, and requests for them are proxied with the front-proxy identity headers (`X-Remote-User`,
//! `X-Remote-Uid`, `X-Remote-Group`, `X-Remote-Extra-*`) on a client certificate the backend verifies against the
//! front-proxy CA. While it is available, the backend's OpenAPI v3 index is read (as kube-aggregator's OpenAPI v3
//! aggregation does, as `system:aggregator`, again after a minute) for `/openapi/v3` to list its group-versions, and
//! requests for their documents are proxied to it as the caller.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use serde_json::Value;

use crate::auth::authn::UserInfo;
use crate::crds::lifecycle::set_condition;
use crate::model::resources::ResourceType;
use crate::outbound::{self, ClientIdentity, Destination, Trust};
use crate::request::api_server::{ApiServer, OpenApiIndex};
use crate::status::ApiError;
use crate::storage::store::ResourceId;

fn api_services() -> ResourceId {
    ResourceId::new("apiregistration.k8s.io", "apiservices")
}

/// Where an APIService's backend is, or why it cannot be reached.
fn backend_of(api: &ApiServer, service: &Value, path: &str) -> Result<Destination, (&'static str, String)> {
    let namespace = service["service"]["namespace"].as_str().unwrap_or_default();
    let name = service["service"]["name"].as_str().unwrap_or_default();
    if api.store.get(&ResourceId::new("", "services"), namespace, name).is_err() {
        return Err(("ServiceNotFound", format!("service/{name} in \"{namespace}\" is not present")));
    }
    let address = api.endpoints.get(namespace, name).ok_or_else(|| {
        (
            "MissingEndpoints",
            format!("endpoints for service/{name} in \"{namespace}\" have no addresses with port name \"\""),
        )
    })?;
    let server_name = format!("{name}.{namespace}.svc");
    Ok(Destination {
        address,
        server_name,
        path_and_query: path.to_owned(),
        display: format!("https://{address}{path}"),
    })
}

fn ca_bundle(spec: &Value) -> Option<Vec<u8>> {
    use base64::Engine as _;
    if spec["insecureSkipTLSVerify"] == true {
        return None;
    }
    Some(
        spec["caBundle"]
            .as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .unwrap_or_default(),
    )
}

/// How long a backend's OpenAPI v3 index is used before it is read again (kube-aggregator's `successfulUpdateDelay`).
const OPENAPI_REFRESH: Duration = Duration::from_secs(60);
/// Who kube-aggregator reads the OpenAPI documents of aggregated API servers as (its `aggregatorUser`, no groups).
const OPENAPI_READER: &str = "system:aggregator";

/// The front-proxy identity headers, as client-go's `SetAuthProxyHeaders` writes them; the uid only when there is
/// one (Kubernetes 1.33 forwards it: `RemoteRequestHeaderUID` is on by default).
fn identity_headers(mut request: http::request::Builder, user: &UserInfo) -> http::request::Builder {
    request = request.header("x-remote-user", user.username.as_str());
    if !user.uid.is_empty() {
        request = request.header("x-remote-uid", user.uid.as_str());
    }
    for group in &user.groups {
        request = request.header("x-remote-group", group.as_str());
    }
    for (key, values) in &user.extra {
        for value in values {
            request = request.header(format!("x-remote-extra-{}", header_key_escape(key)), value.as_str());
        }
    }
    request
}

/// An extra key as client-go's `headerKeyEscape` writes it into a header name: every byte that is not a token
/// character (and `%` itself) percent-encoded, `authentication.kubernetes.io/credential-id` as
/// `authentication.kubernetes.io%2Fcredential-id`.
pub fn header_key_escape(key: &str) -> String {
    let mut escaped = String::with_capacity(key.len());
    for byte in key.bytes() {
        let token = byte.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&byte);
        if token {
            escaped.push(char::from(byte));
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    escaped
}

async fn discover(
    api: &ApiServer,
    spec: &Value,
    identity: &ClientIdentity,
) -> Result<APIResourceList, (&'static str, String)> {
    let group = spec["group"].as_str().unwrap_or_default();
    let version = spec["version"].as_str().unwrap_or_default();
    let path = format!("/apis/{group}/{version}");
    let destination = backend_of(api, spec, &path)?;
    let bundle = ca_bundle(spec);
    let trust = Trust { ca_bundle: bundle.as_deref(), client: Some(identity) };
    let aggregator = UserInfo::new("system:kube-aggregator", &["system:masters"]);
    let request = identity_headers(http::Request::get("/").header("accept", "application/json"), &aggregator);
    let failed = |why: String| {
        ("FailedDiscoveryCheck", format!("failing or missing response from {}: {why}", destination.display))
    };
    let (code, body) = outbound::exchange(&destination, &trust, request, Bytes::new(), Duration::from_secs(5))
        .await
        .map_err(failed)?;
    if code != 200 {
        return Err(failed(format!("bad status from {}: {code}", destination.display)));
    }
    serde_json::from_slice(&body).map_err(|e| failed(e.to_string()))
}

/// One pass of the availability controller over every APIService that refers to a service.
pub async fn check_api_services(api: &ApiServer) {
    let Some(identity) = api.front_proxy.as_ref() else { return };
    for service in api.store.all(&api_services()) {
        let spec = &service["spec"];
        if spec["service"].is_null() {
            continue;
        }
        let name = service["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let group = spec["group"].as_str().unwrap_or_default().to_owned();
        let version = spec["version"].as_str().unwrap_or_default().to_owned();
        let mut updated = service.clone();
        match discover(api, spec, identity).await {
            Ok(list) => {
                api.resources_mut().register_aggregated(&group, &version, &list);
                set_condition(&mut updated, "Available", "True", "Passed", "all checks passed");
                refresh_openapi_index(api, &name, spec, identity).await;
            }
            Err((reason, message)) => {
                api.resources_mut().unregister_aggregated(&group, &version);
                api.aggregated_openapi.remove(&name);
                set_condition(&mut updated, "Available", "False", reason, &message);
            }
        }
        if updated != service {
            if let Err(error) = api.store.update(&api_services(), updated) {
                tracing::debug!(%error, "APIService status not written; retried on the next pass");
            }
        }
    }
    // Group-versions whose APIService is gone (or no longer refers to a service) stop being served.
    let all = api.store.all(&api_services());
    let with_service: Vec<String> = all
        .iter()
        .filter(|s| !s["spec"]["service"].is_null())
        .filter_map(|s| s["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    api.aggregated_openapi.retain(&with_service);
    let registered: Vec<(String, String)> = all
        .iter()
        .map(|s| {
            (
                s["spec"]["group"].as_str().unwrap_or_default().to_owned(),
                s["spec"]["version"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let served: Vec<(String, String)> =
        api.resources().all().filter(|r| r.proxied).map(|r| (r.group.clone(), r.version.clone())).collect();
    for (group, version) in served {
        if !registered.contains(&(group.clone(), version.clone())) {
            api.resources_mut().unregister_aggregated(&group, &version);
        }
    }
}

/// Reads the backend's OpenAPI v3 index for the APIService `name`, unless the one kept was read for the same spec
/// less than a minute ago. An index that cannot be read is tried again on the next pass; until then the one kept is
/// used if it was read for the same spec.
async fn refresh_openapi_index(api: &ApiServer, name: &str, spec: &Value, identity: &ClientIdentity) {
    let kept = api.aggregated_openapi.get(name);
    if kept.as_ref().is_some_and(|index| index.spec == *spec && index.read_at.elapsed() < OPENAPI_REFRESH) {
        return;
    }
    match read_openapi_index(api, spec, identity).await {
        Ok(paths) => {
            api.aggregated_openapi.set(name, OpenApiIndex { spec: spec.clone(), paths, read_at: Instant::now() });
        }
        Err(error) => {
            tracing::debug!(%error, name, "OpenAPI v3 index of an aggregated API server not read; retried on the next pass");
            if kept.is_some_and(|index| index.spec != *spec) {
                api.aggregated_openapi.remove(name);
            }
        }
    }
}

/// `GET /openapi/v3` from an APIService's backend as kube-aggregator's downloader asks for it. A backend that does
/// not serve it (404) lists nothing (kube-aggregator would convert its OpenAPI v2 document instead).
async fn read_openapi_index(
    api: &ApiServer,
    spec: &Value,
    identity: &ClientIdentity,
) -> Result<BTreeMap<String, String>, String> {
    let destination = backend_of(api, spec, "/openapi/v3").map_err(|(_, why)| why)?;
    let bundle = ca_bundle(spec);
    let trust = Trust { ca_bundle: bundle.as_deref(), client: Some(identity) };
    let reader = UserInfo { username: OPENAPI_READER.to_owned(), ..UserInfo::default() };
    let request = identity_headers(http::Request::get("/").header("accept", "application/json"), &reader);
    let (code, body) = outbound::exchange(&destination, &trust, request, Bytes::new(), Duration::from_secs(5)).await?;
    match code {
        200 => openapi_index_paths(&body),
        404 => Ok(BTreeMap::new()),
        code => Err(format!("bad status from {}: {code}", destination.display)),
    }
}

/// The `paths` of an OpenAPI v3 index (kube-openapi's `OpenAPIV3Discovery`): each path's `serverRelativeURL`.
fn openapi_index_paths(body: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let index: Value = serde_json::from_slice(body).map_err(|e| format!("invalid OpenAPI v3 index: {e}"))?;
    let paths = match &index["paths"] {
        Value::Null => return Ok(BTreeMap::new()),
        Value::Object(paths) => paths,
        _ => return Err("invalid OpenAPI v3 index: paths is not an object".to_owned()),
    };
    paths
        .iter()
        .map(|(path, item)| match &item["serverRelativeURL"] {
            Value::String(url) if item.is_object() => Ok((path.clone(), url.clone())),
            Value::Null if item.is_object() => Ok((path.clone(), String::new())),
            _ => Err(format!("invalid OpenAPI v3 index: {path} has no serverRelativeURL string")),
        })
        .collect()
}

/// The group-version paths available aggregated API servers list in their OpenAPI v3 indexes: each path's
/// `serverRelativeURL` and the APIService it is served through (the first by name when several list it).
pub fn openapi_v3_paths(api: &ApiServer) -> BTreeMap<String, (String, String)> {
    let mut paths: BTreeMap<String, (String, String)> = BTreeMap::new();
    for (api_service, index) in api.aggregated_openapi.all() {
        for (path, url) in index.paths {
            paths.entry(path).or_insert_with(|| (api_service.clone(), url));
        }
    }
    paths
}

/// Whether an APIService's `Available` condition is True.
fn reported_available(service: &Value) -> bool {
    service["status"]["conditions"]
        .as_array()
        .is_some_and(|conditions| conditions.iter().any(|c| c["type"] == "Available" && c["status"] == "True"))
}

/// kube-aggregator's answer to every request for a group-version that an APIService serves through a Service while
/// it is not Available, discovery included: `503 service unavailable`, in plain text (Go's `http.Error`), without
/// `Retry-After`. None when no such APIService serves it, or it is available.
pub fn unavailable_answer(api: &ApiServer, group: &str, version: &str) -> Option<Response> {
    let service = api.store.get(&api_services(), "", &format!("{version}.{group}")).ok()?;
    if service["spec"]["service"].is_null() || reported_available(&service) {
        return None;
    }
    let mut response = Response::new(Body::from("service unavailable\n"));
    *response.status_mut() = axum::http::StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert("content-type", axum::http::HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert("x-content-type-options", axum::http::HeaderValue::from_static("nosniff"));
    Some(response)
}

fn unavailable(why: String) -> ApiError {
    ApiError::new(503, "ServiceUnavailable", format!("the server is currently unable to handle the request ({why})"))
}

/// Proxies an authorized request to the aggregated API server of its group-version.
pub async fn proxy(
    api: &ApiServer,
    user: &UserInfo,
    method: &Method,
    path_and_query: &str,
    headers: &HeaderMap,
    body: Bytes,
    resource: &ResourceType,
) -> Result<Response, ApiError> {
    let (group, version) = (resource.group.as_str(), resource.version.as_str());
    if let Some(answer) = unavailable_answer(api, group, version) {
        return Ok(answer);
    }
    let service = api
        .store
        .all(&api_services())
        .into_iter()
        .find(|s| s["spec"]["group"] == group && s["spec"]["version"] == version && !s["spec"]["service"].is_null())
        .ok_or_else(|| unavailable(format!("no APIService for {group}/{version}")))?;
    forward(api, user, method, path_and_query, headers, body, &service["spec"]).await
}

/// Proxies an authorized request for an OpenAPI v3 document (`/openapi/v3/<path>?hash=...`) to the aggregated API
/// server of the APIService `api_service`, whose index lists that path, as kube-aggregator's OpenAPI v3 handler
/// does: the backend answers it (its document, its hash checks and cache headers).
pub async fn proxy_openapi(
    api: &ApiServer,
    user: &UserInfo,
    path_and_query: &str,
    headers: &HeaderMap,
    api_service: &str,
) -> Result<Response, ApiError> {
    let service = api
        .store
        .get(&api_services(), "", api_service)
        .ok()
        .filter(|s| !s["spec"]["service"].is_null())
        .ok_or_else(|| unavailable(format!("no APIService {api_service}")))?;
    if !reported_available(&service) {
        return Err(unavailable(format!("APIService {api_service} is not available")));
    }
    forward(api, user, &Method::GET, path_and_query, headers, Bytes::new(), &service["spec"]).await
}

/// Sends a request to an APIService's backend with the caller's identity in front-proxy headers, and streams the
/// answer back.
async fn forward(
    api: &ApiServer,
    user: &UserInfo,
    method: &Method,
    path_and_query: &str,
    headers: &HeaderMap,
    body: Bytes,
    spec: &Value,
) -> Result<Response, ApiError> {
    let identity = api.front_proxy.as_ref().ok_or_else(|| unavailable("no front-proxy identity".into()))?;
    let destination = backend_of(api, spec, path_and_query).map_err(|(_, why)| unavailable(why))?;
    let bundle = ca_bundle(spec);
    let trust = Trust { ca_bundle: bundle.as_deref(), client: Some(identity) };
    let mut request = http::Request::builder().method(method.as_str());
    for name in ["content-type", "accept", "user-agent", "if-none-match"] {
        if let Some(value) = headers.get(name) {
            request = request.header(name, value.as_bytes());
        }
    }
    let request = identity_headers(request, user);
    let timeout =
        if path_and_query.contains("watch=true") { Duration::from_secs(3600) } else { Duration::from_secs(60) };
    let response = outbound::send(&destination, &trust, request, body, timeout)
        .await
        .map_err(|why| unavailable(format!("error trying to reach service: {why}")))?;
    let (parts, incoming) = response.into_parts();
    Ok(Response::from_parts(parts, Body::new(incoming)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_keys_are_escaped_into_header_names_as_client_go_escapes_them() {
        assert_eq!(
            header_key_escape("authentication.kubernetes.io/credential-id"),
            "authentication.kubernetes.io%2Fcredential-id"
        );
        assert_eq!(header_key_escape("scopes"), "scopes");
        assert_eq!(header_key_escape("a%b c"), "a%25b%20c");
    }

    #[test]
    fn an_openapi_v3_index_is_read_as_kube_openapi_writes_it() {
        let index = br#"{"paths": {"apis/metrics.example.com/v1": {"serverRelativeURL": "/openapi/v3/apis/metrics.example.com/v1?hash=AB"}, "version": {}}}"#;
        assert_eq!(
            openapi_index_paths(index),
            Ok(BTreeMap::from([
                (
                    "apis/metrics.example.com/v1".to_owned(),
                    "/openapi/v3/apis/metrics.example.com/v1?hash=AB".to_owned()
                ),
                ("version".to_owned(), String::new()),
            ]))
        );
        assert_eq!(openapi_index_paths(b"{}"), Ok(BTreeMap::new()));
        assert!(openapi_index_paths(br#"{"paths": ["apis/x/v1"]}"#).is_err());
        assert!(openapi_index_paths(br#"{"paths": {"apis/x/v1": {"serverRelativeURL": 1}}}"#).is_err());
        assert!(openapi_index_paths(b"<html>").is_err());
    }
}
