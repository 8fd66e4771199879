//! Media types: what a request body is read as (JSON, YAML, or protobuf for built-in kinds), what an answer is
//! written as (JSON, or protobuf when the client prefers it and the object has a protobuf form; `Status` errors
//! alike), and what an `Accept` header asks for besides (a Table, the aggregated discovery document).

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;

use super::protobuf;
use crate::model::resources::ResourceType;
use crate::status::ApiError;

pub(super) fn json_response(code: u16, value: &Value, warnings: &[String]) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert("content-type", HeaderValue::from_static("application/json"));
    for warning in warnings {
        let text = format!("299 - {}", Value::from(warning.as_str()));
        if let Ok(value) = HeaderValue::from_str(&text) {
            response.headers_mut().append("warning", value);
        }
    }
    response
}

pub(super) fn error_response(error: &ApiError) -> Response {
    json_response(error.code, &error.to_status(), &[])
}

/// Answers in protobuf when the client prefers it and the object has a protobuf form (built-in kinds, their lists
/// and Status), as kube-apiserver does; otherwise in JSON when the client takes JSON, else 406.
pub(super) async fn negotiate(headers: &HeaderMap, watching: bool, response: Response) -> Response {
    let accept = headers.get("accept").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let is_json = response.headers().get("content-type").is_some_and(|v| v.as_bytes() == b"application/json");
    if watching || !is_json || !protobuf::preferred(accept) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return error_response(&ApiError::internal("the response could not be read for encoding"));
    };
    let value: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    match protobuf::encode(&value) {
        Some(Ok(encoded)) => {
            parts.headers.insert("content-type", HeaderValue::from_static(protobuf::MEDIA_TYPE));
            Response::from_parts(parts, Body::from(encoded))
        }
        Some(Err(error)) => error_response(&ApiError::internal(format!("encoding the response in protobuf: {error}"))),
        None if accept.split(',').any(|t| {
            let media_type = t.split(';').next().unwrap_or_default().trim();
            matches!(media_type, "application/json" | "*/*" | "application/*")
        }) =>
        {
            Response::from_parts(parts, Body::from(bytes))
        }
        None => error_response(&ApiError::not_acceptable(
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        )),
    }
}

/// The `metadata.name` a write's body gives, whatever its media type; none if it cannot be read (the write itself
/// then says why).
pub(super) fn name_in_body(headers: &HeaderMap, body: &Bytes) -> Option<String> {
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("application/json");
    let object: Value = match content_type.split(';').next().unwrap_or_default().trim() {
        "application/yaml" => serde_yaml_ng::from_slice(body).ok()?,
        protobuf::MEDIA_TYPE => protobuf::decode(body).ok()?,
        _ => serde_json::from_slice(body).ok()?,
    };
    object["metadata"]["name"].as_str().filter(|name| !name.is_empty()).map(str::to_owned)
}

/// The body of a write. `resource` is what the URL addresses: protobuf is read only for built-in kinds, as
/// kube-apiserver has no protobuf form of custom resources.
pub(super) fn parse_body(headers: &HeaderMap, body: &Bytes, resource: &ResourceType) -> Result<Value, ApiError> {
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("application/json");
    let unknown_format = || {
        ApiError::unsupported_media_type(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
        )
    };
    match content_type.split(';').next().unwrap_or_default().trim() {
        "application/json" | "" => {
            serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding JSON: {e}")))
        }
        "application/yaml" => {
            serde_yaml_ng::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
        }
        protobuf::MEDIA_TYPE if resource.schema.is_none() => protobuf::decode(body).map_err(|error| match error {
            protobuf::DecodeError::Unsupported { .. } => unknown_format(),
            protobuf::DecodeError::Malformed { api_version, kind, problem } => {
                let (version, kind) = if kind.is_empty() {
                    (resource.version.clone(), resource.kind.clone())
                } else {
                    (api_version.rsplit('/').next().unwrap_or_default().to_owned(), kind)
                };
                ApiError::bad_request(format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: {problem}"
                ))
            }
        }),
        _ => Err(unknown_format()),
    }
}

pub(super) fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.split(',').next().is_some_and(|first| first.contains("as=Table")))
}

pub(super) const AGGREGATED_DISCOVERY: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the client prefers the aggregated discovery document (its first acceptable type names it).
pub(super) fn wants_aggregated(headers: &HeaderMap) -> bool {
    headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .and_then(|accept| accept.split(',').next())
        .is_some_and(|first| first.contains("as=APIGroupDiscoveryList") && first.contains("v=v2"))
}
