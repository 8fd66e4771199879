//! kube-apiserver's URL layout: `/version`, health, discovery (`/api`, `/apis`, aggregated or not, and each
//! group-version's resource list), `/openapi/...`, and `/api/v1/...` or `/apis/<group>/<version>/...`, namespaced
//! or not, with subresources, resolved to the resource type served there (or proxied to an aggregated API server).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, Method};
use axum::response::Response;
use serde_json::{json, Value};

use super::content::{json_response, wants_aggregated, AGGREGATED_DISCOVERY};
use super::openapi;
use super::query::{query_string, Query};
use super::verbs::resource_request;
use crate::aggregator;
use crate::auth::authn::UserInfo;
use crate::model::resources::ResourceType;
use crate::request::api_server::ApiServer;
use crate::request::types::Target;
use crate::status::ApiError;

/// A path's segments, percent-decoded.
pub fn segments(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect()
}

pub(super) async fn route(
    api: &Arc<ApiServer>,
    user: &UserInfo,
    method: &Method,
    path: &str,
    query: &Query,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let parts = segments(path);
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let get_only = |value: Value| {
        if method == Method::GET {
            Ok(json_response(200, &value, &[]))
        } else {
            Err(ApiError::method_not_allowed(method.as_str(), path))
        }
    };
    match parts.as_slice() {
        ["version"] => {
            return get_only(
                json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-olmv2-e2e", "gitCommit": "", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "none", "compiler": "rustc", "platform": "linux/amd64"}),
            )
        }
        ["healthz" | "readyz" | "livez", ..] => {
            let mut response = Response::new(Body::from("ok"));
            response.headers_mut().insert("content-type", HeaderValue::from_static("text/plain"));
            return Ok(response);
        }
        ["api" | "apis"] if wants_aggregated(headers) => {
            if method != Method::GET {
                return Err(ApiError::method_not_allowed(method.as_str(), path));
            }
            let document = api.resources().aggregated(parts == ["api"]);
            let mut response = json_response(200, &document, &[]);
            response.headers_mut().insert("content-type", HeaderValue::from_static(AGGREGATED_DISCOVERY));
            return Ok(response);
        }
        ["api"] => return get_only(serde_json::to_value(api.resources().core_versions()).unwrap_or_default()),
        ["apis"] => return get_only(serde_json::to_value(api.resources().groups()).unwrap_or_default()),
        ["api", "v1"] => return discovery(api, method, "", "v1", path),
        ["apis", group, version] => {
            if let Some(answer) = aggregator::unavailable_answer(api, group, version) {
                return Ok(answer);
            }
            return discovery(api, method, group, version, path);
        }
        ["openapi", rest @ ..] => return openapi::serve(api, user, method, path, rest, query, headers).await,
        // ServiceAccount token issuer discovery (authorized as non-resource URLs, as kube-apiserver does).
        [".well-known", "openid-configuration"] => {
            let host = headers.get(axum::http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
            return get_only(crate::auth::tokens::discovery(host));
        }
        ["openid", "v1", "jwks"] => {
            let keys = api.authenticator.jwks().map_err(|e| ApiError::new(500, "InternalError", e.to_string()))?;
            let mut response = get_only(keys)?;
            response.headers_mut().insert("content-type", HeaderValue::from_static("application/jwk-set+json"));
            return Ok(response);
        }
        _ => {}
    }
    let (group, version, rest): (&str, &str, &[&str]) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", group, version, rest @ ..] => (group, version, rest),
        _ => return Err(ApiError::no_route(path)),
    };
    let (namespace, rest): (Option<&str>, Vec<&str>) = match rest {
        ["namespaces", namespace, subresource @ ("status" | "finalize")] if group.is_empty() => {
            let resource = lookup(api, "", "v1", "namespaces", path)?;
            let target = Target {
                resource,
                namespace: String::new(),
                name: Some((*namespace).to_owned()),
                subresource: Some((*subresource).to_owned()),
            };
            return resource_request(api, user, method, target, query, headers, body).await;
        }
        ["namespaces", namespace, tail @ ..] if !tail.is_empty() => (Some(*namespace), tail.to_vec()),
        other => (None, other.to_vec()),
    };
    let (resource_name, name, subresource) = match rest.as_slice() {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(*name), None),
        [resource, name, subresource] => (*resource, Some(*name), Some(*subresource)),
        _ => return Err(ApiError::no_route(path)),
    };
    let resource = lookup(api, group, version, resource_name, path)?;
    if resource.proxied {
        let path_and_query = match query_string(query) {
            query if query.is_empty() => path.to_owned(),
            query => format!("{path}?{query}"),
        };
        return aggregator::proxy(api, user, method, &path_and_query, headers, body, &resource).await;
    }
    if let Some(sub) = subresource {
        if !resource.subresources.iter().any(|s| s == sub) {
            return Err(ApiError::no_route(path));
        }
    }
    if resource.namespaced != namespace.is_some() && !(resource.namespaced && name.is_none() && namespace.is_none()) {
        return Err(ApiError::no_route(path));
    }
    let target = Target {
        resource,
        namespace: namespace.unwrap_or_default().to_owned(),
        name: name.map(str::to_owned),
        subresource: subresource.map(str::to_owned),
    };
    resource_request(api, user, method, target, query, headers, body).await
}

fn lookup(api: &ApiServer, group: &str, version: &str, plural: &str, path: &str) -> Result<ResourceType, ApiError> {
    api.resources().lookup(group, version, plural).cloned().ok_or_else(|| ApiError::no_route(path))
}

fn discovery(api: &ApiServer, method: &Method, group: &str, version: &str, path: &str) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::method_not_allowed(method.as_str(), path));
    }
    let list = api.resources().resource_list(group, version).ok_or_else(|| ApiError::no_route(path))?;
    Ok(json_response(200, &serde_json::to_value(list).unwrap_or_default(), &[]))
}
