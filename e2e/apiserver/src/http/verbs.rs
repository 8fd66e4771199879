//! The verbs on a resource: get, list (or a Table), watch, create, update, patch, delete and deletecollection, the
//! `scale` subresource, and the review kinds and TokenRequest, which are answered rather than stored; each read
//! from the request and handed to the API server.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use serde_json::{json, Value};

use super::content::{error_response, json_response, parse_body, wants_table};
use super::metadata;
use super::protobuf;
use super::query::{filter, write_options, Query};
use super::table::{self, Include};
use super::watch;
use crate::auth::authn::UserInfo;
use crate::auth::reviews;
use crate::model::resources::ResourceType;
use crate::request::api_server::ApiServer;
use crate::request::deletion::{self, DeleteOptions};
use crate::request::scale;
use crate::request::types::{PatchType, Target, Written};
use crate::status::ApiError;

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

fn written(result: Written, headers: &HeaderMap, resource: &ResourceType, query: &Query) -> Response {
    let asked = metadata::requested(headers).ok().flatten().filter(|_| result.object["kind"] != "Status");
    let object = if let Some(metadata) = asked {
        match metadata.object(&result.object) {
            Ok(object) => object,
            Err(error) => return error_response(&error),
        }
    } else if wants_table(headers) && result.object["kind"] != "Status" {
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

pub(super) async fn resource_request(
    api: &Arc<ApiServer>,
    user: &UserInfo,
    method: &Method,
    target: Target,
    query: &Query,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    // Negotiated before anything is done, as kube-apiserver negotiates: a write asking for a form it cannot be
    // answered in is refused before it is made.
    metadata::requested(headers)?;
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
            watch::watch(api, target, query, headers)
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
            if let Some(metadata) = metadata::requested(headers)? {
                return Ok(json_response(200, &metadata.list(&list)?, &[]));
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
