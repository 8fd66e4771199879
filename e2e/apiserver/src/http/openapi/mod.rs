//! The OpenAPI documents kube-apiserver serves and kubectl reads: `/openapi/v3` (where each group-version's
//! document is, its URL carrying a hash of the content), `/openapi/v3/<api/v1 | apis/<group>/<version>>` (the
//! operations of the group-version's resources and the definitions they reach: built-in kinds from their
//! k8s-openapi types, `definitions`, custom resources from their CRD's schema, `crd`) and `/openapi/v2` (every
//! resource in one document, in JSON or in gnostic's protobuf, which kubectl asks for to validate a `kind: List` on
//! the client). Documents are built once per set of served resources and kept. As kube-aggregator does, the v3
//! index also lists the group-versions available aggregated API servers list in theirs (with their own URLs and
//! hashes, read by `aggregator`; this server's own group-versions win a clash), and a request for one of those
//! documents is proxied to its server; the v2 document has only this server's resources.
//!
//! May import the served resource types (`model`, through `request`'s `ApiServer`), `aggregator` (the aggregated
//! indexes, and the proxy), `status` and the query of `http`.

mod crd;
mod definitions;
mod extensions;
mod gnostic;
mod paths;
mod v2;
mod v3;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha512};

use super::query::{query_string, Query};
use crate::aggregator;
use crate::auth::authn::UserInfo;
use crate::model::resources::ResourceType;
use crate::request::api_server::ApiServer;
use crate::status::ApiError;
use definitions::{closure, Builtin};
use paths::{gv_path, Operation};

/// `info.version` of the documents: the version `/version` reports.
const VERSION: &str = "v1.33.0-olmv2-e2e";
const JSON: &str = "application/json";
const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
const PROTOBUF_DEPRECATED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// How many sets of documents are kept (several control planes may run in one process).
const KEPT: usize = 8;

/// What a document publishes for some resources: their operations and the definitions those reach (v2 form).
pub struct Content {
    pub operations: Vec<Operation>,
    pub definitions: BTreeMap<String, Value>,
}

fn content(resources: &[&ResourceType], v2: bool) -> Content {
    let builtin = Builtin::get();
    let mut own: BTreeMap<String, Value> = BTreeMap::new();
    let mut operations = Vec::new();
    let mut roots: Vec<String> = Vec::new();
    for resource in resources {
        let (kind, list, is_builtin) = match builtin.kind(&resource.group, &resource.kind) {
            Some(kind) => {
                (kind.to_owned(), builtin.kind(&resource.group, &resource.list_kind).map(str::to_owned), true)
            }
            None => {
                let [(kind, kind_definition), (list, list_definition)] =
                    crd::definitions(resource, &builtin.type_meta, v2);
                own.insert(kind.clone(), kind_definition);
                own.insert(list.clone(), list_definition);
                (kind, Some(list), false)
            }
        };
        let names = paths::Definitions { kind: &kind, list: list.as_deref(), builtin: is_builtin };
        for operation in paths::operations(resource, &names) {
            roots.push(operation.returns.0.clone());
            roots.extend(operation.body.as_ref().map(|(body, _)| body.clone()));
            operations.push(operation);
        }
        roots.push(kind);
        roots.extend(list);
    }
    let lookup = |name: &str| own.get(name).or_else(|| builtin.definitions.get(name));
    let definitions = closure(lookup, roots.iter().map(String::as_str))
        .into_iter()
        .filter_map(|name| Some((name.clone(), lookup(&name)?.clone())))
        .collect();
    Content { operations, definitions }
}

/// A document's bytes and entity tag (kube-openapi's: the SHA-512 of the JSON, in upper-case hex).
struct Published {
    body: Bytes,
    etag: String,
}

fn publish(document: &Value) -> Published {
    let body = serde_json::to_vec(document).unwrap_or_default();
    let etag = Sha512::digest(&body).iter().map(|byte| format!("{byte:02X}")).collect();
    Published { body: Bytes::from(body), etag }
}

struct V2 {
    json: Published,
    protobuf: Bytes,
}

/// The documents of one set of served resources.
struct Documents {
    resources: Vec<ResourceType>,
    /// The index's `paths`: each group-version's path and `serverRelativeURL`.
    paths: Map<String, Value>,
    index: Published,
    groups: BTreeMap<String, Published>,
    v2: OnceLock<Result<V2, gnostic::Invalid>>,
}

impl Documents {
    fn build(resources: Vec<ResourceType>) -> Self {
        let mut by_path: BTreeMap<String, Vec<&ResourceType>> = BTreeMap::new();
        for resource in &resources {
            by_path.entry(gv_path(resource)).or_default().push(resource);
        }
        let groups: BTreeMap<String, Published> = by_path
            .iter()
            .map(|(path, served)| (path.clone(), publish(&v3::document(&content(served, false), VERSION))))
            .collect();
        let paths: Map<String, Value> = groups
            .iter()
            .map(|(path, document)| {
                (path.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", document.etag)}))
            })
            .collect();
        let index = publish(&json!({"paths": paths}));
        Self { resources, paths, index, groups, v2: OnceLock::new() }
    }

    fn v2(&self) -> &Result<V2, gnostic::Invalid> {
        self.v2.get_or_init(|| {
            let all: Vec<&ResourceType> = self.resources.iter().collect();
            let document = v2::document(&content(&all, true), VERSION);
            let protobuf = Bytes::from(gnostic::encode(&document)?);
            Ok(V2 { json: publish(&document), protobuf })
        })
    }
}

/// The documents of the resources served now: kept ones if the resources are the same.
fn documents(api: &ApiServer) -> Arc<Documents> {
    static KEPT_DOCUMENTS: Mutex<Vec<Arc<Documents>>> = Mutex::new(Vec::new());
    let resources: Vec<ResourceType> = api.resources().all().filter(|r| !r.proxied).cloned().collect();
    let found = {
        let kept = KEPT_DOCUMENTS.lock().unwrap_or_else(PoisonError::into_inner);
        kept.iter().find(|documents| documents.resources == resources).cloned()
    };
    if let Some(documents) = found {
        return documents;
    }
    let documents = Arc::new(Documents::build(resources));
    let mut kept = KEPT_DOCUMENTS.lock().unwrap_or_else(PoisonError::into_inner);
    kept.insert(0, documents.clone());
    kept.truncate(KEPT);
    documents
}

/// The media types of an `Accept` header, highest quality first.
fn accepted(headers: &HeaderMap) -> Vec<String> {
    let header = headers.get("accept").and_then(|v| v.to_str().ok()).filter(|v| !v.trim().is_empty()).unwrap_or("*/*");
    let mut clauses: Vec<(f32, String)> = header
        .split(',')
        .filter_map(|clause| {
            let mut parts = clause.split(';').map(str::trim);
            let media = parts.next()?.to_ascii_lowercase();
            let quality = parts.filter_map(|p| p.strip_prefix("q=")).find_map(|q| q.parse::<f32>().ok()).unwrap_or(1.0);
            (quality > 0.0 && !media.is_empty()).then_some((quality, media))
        })
        .collect();
    clauses.sort_by(|a, b| b.0.total_cmp(&a.0));
    clauses.into_iter().map(|(_, media)| media).collect()
}

/// The first of `offered` the client accepts, in the client's order of preference.
fn negotiate<'a>(headers: &HeaderMap, offered: &[&'a str]) -> Option<&'a str> {
    accepted(headers).iter().find_map(|wanted| {
        let (kind, sub) = wanted.split_once('/').unwrap_or((wanted, ""));
        offered.iter().copied().find(|media| {
            let (offered_kind, offered_sub) = media.split_once('/').unwrap_or((media, ""));
            (kind == "*" || kind == offered_kind) && (sub == "*" || sub == offered_sub)
        })
    })
}

fn respond(body: &Bytes, media_type: &'static str, etag: &str, headers: &HeaderMap) -> Response {
    let quoted = format!("\"{etag}\"");
    let unchanged = headers.get("if-none-match").and_then(|v| v.to_str().ok()) == Some(quoted.as_str());
    let mut response = Response::new(if unchanged { Body::empty() } else { Body::from(body.clone()) });
    if unchanged {
        *response.status_mut() = StatusCode::NOT_MODIFIED;
    }
    let response_headers = response.headers_mut();
    response_headers.insert("content-type", HeaderValue::from_static(media_type));
    response_headers.insert("vary", HeaderValue::from_static("Accept"));
    if let Ok(value) = HeaderValue::from_str(&quoted) {
        response_headers.insert("etag", value);
    }
    response
}

fn status(code: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = code;
    response
}

/// A group-version's document. Asked for with the `hash` the index gives, it may be cached for good (it never
/// changes under that URL); with another hash, the client is sent to the current one.
fn group_version(documents: &Documents, path: &str, query: &Query, headers: &HeaderMap) -> Option<Response> {
    let document = documents.groups.get(path)?;
    if negotiate(headers, &[JSON]).is_none() {
        return Some(status(StatusCode::NOT_ACCEPTABLE));
    }
    let Some(hash) = query.get("hash") else { return Some(respond(&document.body, JSON, &document.etag, headers)) };
    if *hash != document.etag {
        let mut response = status(StatusCode::MOVED_PERMANENTLY);
        if let Ok(location) = HeaderValue::from_str(&format!("/openapi/v3/{path}?hash={}", document.etag)) {
            response.headers_mut().insert("location", location);
        }
        return Some(response);
    }
    let mut response = respond(&document.body, JSON, &document.etag, headers);
    response.headers_mut().insert("cache-control", HeaderValue::from_static("public, immutable"));
    let expires = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_hours(365 * 24))
        .ok()
        .map(|t| t.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string());
    if let Some(value) = expires.and_then(|e| HeaderValue::from_str(&e).ok()) {
        response.headers_mut().insert("expires", value);
    }
    Some(response)
}

/// The v3 index: this server's group-versions and those aggregated API servers list (`aggregated`: path to
/// `serverRelativeURL` and APIService), this server's winning a clash. Without aggregated ones it is the kept one.
fn index(documents: &Documents, aggregated: &BTreeMap<String, (String, String)>) -> Option<Published> {
    let mut paths = documents.paths.clone();
    for (path, (_, url)) in aggregated {
        paths.entry(path.clone()).or_insert_with(|| json!({"serverRelativeURL": url}));
    }
    (paths.len() != documents.paths.len()).then(|| publish(&json!({"paths": paths})))
}

/// `/openapi/...`, `rest` being the path after `openapi`; `user` is who asks (documents of aggregated API servers
/// are asked for in their name).
pub async fn serve(
    api: &ApiServer,
    user: &UserInfo,
    method: &Method,
    path: &str,
    rest: &[&str],
    query: &Query,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::method_not_allowed(method.as_str(), path));
    }
    match rest {
        ["v3"] => {
            let documents = documents(api);
            Ok(match index(&documents, &aggregator::openapi_v3_paths(api)) {
                Some(merged) => respond(&merged.body, JSON, &merged.etag, headers),
                None => respond(&documents.index.body, JSON, &documents.index.etag, headers),
            })
        }
        ["v3", group_version_path @ ..] => {
            let documents = documents(api);
            let group_version_path = group_version_path.join("/");
            if let Some(response) = group_version(&documents, &group_version_path, query, headers) {
                return Ok(response);
            }
            let Some((api_service, _)) = aggregator::openapi_v3_paths(api).remove(&group_version_path) else {
                return Err(ApiError::no_route(path));
            };
            let path_and_query = match query_string(query) {
                query if query.is_empty() => path.to_owned(),
                query => format!("{path}?{query}"),
            };
            aggregator::proxy_openapi(api, user, &path_and_query, headers, &api_service).await
        }
        ["v2"] => {
            let documents = documents(api);
            let v2 = documents.v2().as_ref().map_err(|e| ApiError::new(503, "ServiceUnavailable", e.to_string()))?;
            Ok(match negotiate(headers, &[JSON, PROTOBUF_DEPRECATED, PROTOBUF]) {
                Some(JSON) => respond(&v2.json.body, JSON, &v2.json.etag, headers),
                Some(_) => respond(&v2.protobuf, PROTOBUF, &v2.json.etag, headers),
                None => status(StatusCode::NOT_ACCEPTABLE),
            })
        }
        _ => Err(ApiError::no_route(path)),
    }
}
