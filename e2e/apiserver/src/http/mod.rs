//! The HTTP face of the emulator: routes kube-apiserver's URL layout (`/api/v1/...`, `/apis/<group>/<version>/...`,
//! namespaced or not, subresources) to the request semantics, reads query options and content types, and writes JSON,
//! Tables and `Status` errors; watches are streamed by `watch`.

pub mod openapi;
pub mod protobuf;
pub mod table;
pub mod watch;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{json, Value};

use crate::auth::authn::UserInfo;
use crate::auth::front::{self, PeerCredentials};
use crate::auth::reviews;
use crate::model::resources::ResourceType;
use crate::request::api_server::ApiServer;
use crate::request::deletion::{self, DeleteOptions};
use crate::request::scale;
use crate::request::types::{FieldValidation, PatchType, Target, WriteOptions, Written};
use crate::status::ApiError;
use crate::storage::selectors::{FieldSelector, LabelSelector};
use crate::storage::store::Filter;
use crate::{aggregator, audit};
use table::Include;

pub fn router(api: Arc<ApiServer>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(api)
}

pub(crate) type Query = BTreeMap<String, String>;

fn json_response(code: u16, value: &Value, warnings: &[String]) -> Response {
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

fn error_response(error: &ApiError) -> Response {
    json_response(error.code, &error.to_status(), &[])
}

async fn handle(
    State(api): State<Arc<ApiServer>>,
    peer: Option<axum::Extension<PeerCredentials>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query: Query = serde_urlencoded::from_str(uri.query().unwrap_or_default()).unwrap_or_default();
    let path = uri.path().to_owned();
    tracing::debug!(%method, %path, "request");
    let watching = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let attributes = front::attributes(&method, &segments(&path), watching);
    let credentials = front::credentials(peer.as_ref().map(|p| &p.0), &headers);
    let mut record = audit::Record {
        verb: attributes.verb.clone(),
        api_group: attributes.api_group.clone(),
        resource: attributes.resource.clone(),
        subresource: attributes.subresource.clone(),
        namespace: attributes.namespace.clone(),
        name: attributes.name.clone(),
        path: path.clone(),
        ..audit::Record::default()
    };
    let response = match front::admit(&api.store, &api.authenticator, &credentials, &headers, attributes) {
        Ok(admitted) => {
            record.user = admitted.impersonator.clone().unwrap_or_else(|| admitted.user.username.clone());
            record.impersonated_user = admitted.impersonator.as_ref().map(|_| admitted.user.username.clone());
            match route(&api, &admitted.user, &method, &path, &query, &headers, body).await {
                Ok(response) => response,
                Err(error) => error_response(&error),
            }
        }
        Err((error, user)) => {
            record.user = user.unwrap_or_default();
            error_response(&error)
        }
    };
    let response = negotiate(&headers, watching, response).await;
    record.code = response.status().as_u16();
    api.audit.record(record);
    response
}

/// Answers in protobuf when the client prefers it and the object has a protobuf form (built-in kinds, their lists
/// and Status), as kube-apiserver does; otherwise in JSON when the client takes JSON, else 406.
async fn negotiate(headers: &HeaderMap, watching: bool, response: Response) -> Response {
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

fn segments(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect()
}

async fn route(
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
        ["apis", group, version] => return discovery(api, method, group, version, path),
        ["openapi", rest @ ..] => return openapi::serve(api, method, path, rest, query, headers),
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

const AGGREGATED_DISCOVERY: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the client prefers the aggregated discovery document (its first acceptable type names it).
fn wants_aggregated(headers: &HeaderMap) -> bool {
    headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .and_then(|accept| accept.split(',').next())
        .is_some_and(|first| first.contains("as=APIGroupDiscoveryList") && first.contains("v=v2"))
}

fn query_string(query: &Query) -> String {
    serde_urlencoded::to_string(query).unwrap_or_default()
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

/// The review kinds and TokenRequest, answered rather than stored.
fn review(
    api: &ApiServer,
    user: &UserInfo,
    target: &Target,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Option<Value>, ApiError> {
    let resource = &target.resource;
    let kind = (resource.group.as_str(), resource.plural.as_str(), target.subresource.as_deref());
    let answer = match kind {
        ("authorization.k8s.io", "subjectaccessreviews", None) => {
            reviews::subject_access_review(&api.store, parse_body(headers, body, &target.resource)?)?
        }
        ("authorization.k8s.io", "localsubjectaccessreviews", None) => reviews::local_subject_access_review(
            &api.store,
            &target.namespace,
            parse_body(headers, body, &target.resource)?,
        )?,
        ("authorization.k8s.io", "selfsubjectaccessreviews", None) => {
            reviews::self_subject_access_review(&api.store, user, parse_body(headers, body, &target.resource)?)?
        }
        ("authorization.k8s.io", "selfsubjectrulesreviews", None) => {
            reviews::self_subject_rules_review(&api.store, user, parse_body(headers, body, &target.resource)?)?
        }
        ("authentication.k8s.io", "selfsubjectreviews", None) => {
            reviews::self_subject_review(user, parse_body(headers, body, &target.resource)?)
        }
        ("authentication.k8s.io", "tokenreviews", None) => {
            reviews::token_review(&api.store, &api.authenticator, parse_body(headers, body, &target.resource)?)
        }
        ("", "serviceaccounts", Some("token")) => reviews::token_request(
            &api.store,
            &api.authenticator,
            &target.namespace,
            target.name(),
            parse_body(headers, body, &target.resource)?,
        )?,
        _ => return Ok(None),
    };
    Ok(Some(answer))
}

fn write_options(query: &Query, headers: &HeaderMap, user: &UserInfo) -> Result<WriteOptions, ApiError> {
    let agent = headers.get("user-agent").and_then(|v| v.to_str().ok()).unwrap_or("unknown");
    let derived: String = agent.split('/').next().unwrap_or("unknown").chars().take(128).collect();
    let given = query.get("fieldManager").filter(|m| !m.is_empty());
    if let Some(manager) = given {
        if manager.chars().count() > 128 {
            return Err(ApiError::new(422, "Invalid", "fieldManager: Too long: must have at most 128 bytes"));
        }
    }
    let dry_run = match query.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
            )))
        }
    };
    let force = match query.get("force").map(String::as_str) {
        None => false,
        Some("true") => true,
        Some("false") => false,
        Some(other) => return Err(ApiError::bad_request(format!("invalid boolean value for force: {other}"))),
    };
    Ok(WriteOptions {
        dry_run,
        field_manager: given.cloned().unwrap_or(derived),
        field_manager_given: given.is_some(),
        field_validation: FieldValidation::parse(query.get("fieldValidation").map(String::as_str))?,
        force,
        user: user.clone(),
    })
}

pub(crate) fn filter(target: &Target, query: &Query) -> Result<Filter, ApiError> {
    let labels = LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {}", e.0)))?;
    let fields = FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str)).map_err(|e| {
        ApiError::bad_request(format!(
            "invalid selector: '{}'; can't understand '{}'",
            query.get("fieldSelector").map_or("", String::as_str),
            e.0
        ))
    })?;
    let fields = fields
        .stored_fields(|field| target.resource.selectable_field(field))
        .map_err(|field| ApiError::bad_request(format!("field label not supported: {field}")))?;
    Ok(Filter { namespace: (!target.namespace.is_empty()).then(|| target.namespace.clone()), labels, fields })
}

pub(crate) fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.split(',').next().is_some_and(|first| first.contains("as=Table")))
}

/// The body of a write. `resource` is what the URL addresses: protobuf is read only for built-in kinds, as
/// kube-apiserver has no protobuf form of custom resources.
fn parse_body(headers: &HeaderMap, body: &Bytes, resource: &ResourceType) -> Result<Value, ApiError> {
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

fn written(result: Written, headers: &HeaderMap, resource: &ResourceType, query: &Query) -> Response {
    let object = if wants_table(headers) && result.object["kind"] != "Status" {
        table::table(
            resource,
            std::slice::from_ref(&result.object),
            json!({"resourceVersion": result.object["metadata"]["resourceVersion"]}),
            Include::parse(query.get("includeObject").map(String::as_str)),
        )
    } else {
        result.object
    };
    json_response(result.code, &object, &result.warnings)
}

async fn resource_request(
    api: &Arc<ApiServer>,
    user: &UserInfo,
    method: &Method,
    target: Target,
    query: &Query,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    if method == Method::POST {
        if let Some(answer) = review(api, user, &target, headers, &body)? {
            return Ok(json_response(201, &answer, &[]));
        }
    }
    if target.subresource.as_deref() == Some("scale") {
        return scale_request(api, user, method, &target, query, headers, &body).await;
    }
    let verb_not_allowed = |verb: &str| !target.resource.verbs.iter().any(|v| v == verb);
    let is_collection = target.name.is_none();
    match (method.as_str(), is_collection) {
        ("GET", true) if query.get("watch").is_some_and(|w| w == "true" || w == "1") => {
            if verb_not_allowed("watch") {
                return Err(ApiError::method_not_allowed("watch", &target.resource.plural));
            }
            crate::http::watch::watch(api, target, query, headers)
        }
        ("GET", true) => {
            if verb_not_allowed("list") {
                return Err(ApiError::method_not_allowed("list", &target.resource.plural));
            }
            let filter = filter(&target, query)?;
            let limit = query.get("limit").and_then(|l| l.parse().ok());
            let list =
                api.list(&target, &filter, limit, query.get("continue").map(String::as_str).filter(|c| !c.is_empty()))?;
            if wants_table(headers) {
                let items = list["items"].as_array().cloned().unwrap_or_default();
                let items: Vec<Value> = items.into_iter().map(|i| api.present(&target.resource, i)).collect();
                return Ok(json_response(
                    200,
                    &table::table(
                        &target.resource,
                        &items,
                        list["metadata"].clone(),
                        Include::parse(query.get("includeObject").map(String::as_str)),
                    ),
                    &[],
                ));
            }
            Ok(json_response(200, &list, &[]))
        }
        ("GET", false) => {
            if target.subresource.as_deref().is_some_and(|s| s != "status") {
                return Err(ApiError::method_not_allowed("GET", target.subresource.as_deref().unwrap_or_default()));
            }
            let object = api.get(&target)?;
            Ok(written(Written { code: 200, object, warnings: Vec::new() }, headers, &target.resource, query))
        }
        ("POST", true) => {
            if verb_not_allowed("create") {
                return Err(ApiError::method_not_allowed("create", &target.resource.plural));
            }
            let object = parse_body(headers, &body, &target.resource)?;
            let result = api.create(&target, object, &write_options(query, headers, user)?).await?;
            Ok(written(result, headers, &target.resource, query))
        }
        ("PUT", false) => {
            let object = parse_body(headers, &body, &target.resource)?;
            let result = api.update(&target, object, &write_options(query, headers, user)?).await?;
            Ok(written(result, headers, &target.resource, query))
        }
        ("PATCH", false) => {
            let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
            let patch_type = PatchType::from_content_type(content_type).ok_or_else(|| {
                ApiError::unsupported_media_type("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
            })?;
            let result = api.patch(&target, patch_type, &body, &write_options(query, headers, user)?).await?;
            Ok(written(result, headers, &target.resource, query))
        }
        ("DELETE", collection) => {
            let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
            let options_body: Value = if body.is_empty() {
                json!({})
            } else if content_type.starts_with(protobuf::MEDIA_TYPE) {
                // DeleteOptions are read in protobuf for every resource, custom ones included, as Kubernetes does.
                protobuf::decode(&body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e:?}")))?
            } else {
                serde_json::from_slice(&body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
            };
            let options = DeleteOptions::parse(
                &options_body,
                query.get("propagationPolicy").map(String::as_str),
                query.get("dryRun").is_some_and(|d| d == "All"),
            )?;
            let result = if collection {
                if verb_not_allowed("deletecollection") {
                    return Err(ApiError::method_not_allowed("deletecollection", &target.resource.plural));
                }
                deletion::delete_collection(
                    api,
                    &target,
                    &filter(&target, query)?,
                    &options,
                    &write_options(query, headers, user)?,
                )
                .await?
            } else {
                deletion::delete(api, &target, &options, &write_options(query, headers, user)?).await?
            };
            Ok(json_response(result.code, &result.object, &[]))
        }
        (verb, _) => Err(ApiError::method_not_allowed(verb, &target.resource.plural)),
    }
}

async fn scale_request(
    api: &ApiServer,
    user: &UserInfo,
    method: &Method,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let result = match method.as_str() {
        "GET" => {
            let main = Target { subresource: None, ..target.clone() };
            let object = api.get(&main)?;
            return Ok(json_response(200, &scale::scale_of(&target.resource, &object)?, &[]));
        }
        "PUT" => {
            let wanted = parse_body(headers, body, &target.resource)?;
            scale::update(api, target, scale::ScaleChange::Replace(&wanted), &write_options(query, headers, user)?)
                .await?
        }
        "PATCH" => {
            let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
            let patch_type = PatchType::from_content_type(content_type)
                .filter(|t| *t != PatchType::Apply)
                .ok_or_else(|| ApiError::unsupported_media_type("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"))?;
            scale::update(
                api,
                target,
                scale::ScaleChange::Patch(patch_type, body),
                &write_options(query, headers, user)?,
            )
            .await?
        }
        other => return Err(ApiError::method_not_allowed(other, &format!("{}/scale", target.resource.plural))),
    };
    Ok(json_response(result.code, &result.object, &result.warnings))
}
