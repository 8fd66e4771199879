//! The HTTP face of the emulator: every request is authenticated, impersonated and authorized (`auth::front`),
//! recorded in the audit log, routed by kube-apiserver's URL layout (`routes`) to a verb on a resource (`verbs`,
//! with `watch` streaming), discovery or the OpenAPI documents (`openapi`), and answered in the media type the
//! client takes (`content`, with `protobuf`; Tables from `table`; metadata alone from `metadata`). Query options
//! are read in `query`.
//!
//! The fault answers (`fault_response`, `fault_unavailable`) and the reading of a request (`segments`,
//! `names_resource_version`) are public for a fault-injecting proxy in front of kube-apiserver, which answers alike.
//!
//! May import everything below it (`request`, `aggregator`, `auth`, `crds`, `model`, `storage`, `status`,
//! `audit`); nothing imports it but `server`.

mod content;
mod metadata;
pub mod openapi;
pub mod protobuf;
mod query;
mod routes;
pub mod table;
mod verbs;
mod watch;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;

use crate::audit;
use crate::auth::front::{self, PeerCredentials};
use crate::faults::{Decision, Fault};
use crate::request::api_server::ApiServer;
use crate::status::ApiError;
use crate::storage::store::{ResourceId, StoreError};
use content::{error_response, negotiate};
use query::Query;
use routes::route;
pub use routes::segments;

/// The emulator's HTTP service: one handler for every path, as kube-apiserver's URL layout is resolved by `routes`.
pub fn router(api: Arc<ApiServer>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(api)
}

/// One request: authenticated, impersonated and authorized, routed, answered in the media type the client takes,
/// and recorded in the audit log.
async fn handle(
    State(api): State<Arc<ApiServer>>,
    peer: Option<axum::Extension<PeerCredentials>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let received = std::time::Instant::now();
    let query: Query = serde_urlencoded::from_str(uri.query().unwrap_or_default()).unwrap_or_default();
    let path = uri.path().to_owned();
    tracing::debug!(%method, %path, "request");
    let watching = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let mut attributes = front::attributes(&method, &segments(&path), watching);
    front::name_from_field_selector(&mut attributes, query.get("fieldSelector").map(String::as_str));
    let credentials = front::credentials(peer.as_ref().map(|p| &p.0), &headers);
    let user_agent = headers
        .get(axum::http::header::USER_AGENT)
        .and_then(|agent| agent.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut record = audit::Record {
        verb: attributes.verb.clone(),
        api_group: attributes.api_group.clone(),
        resource: attributes.resource.clone(),
        subresource: attributes.subresource.clone(),
        namespace: attributes.namespace.clone(),
        name: attributes.name.clone(),
        path: path.clone(),
        user_agent,
        dry_run: query.get("dryRun").is_some_and(|d| d == "All"),
        received: Some(received),
        ..audit::Record::default()
    };
    if record.verb == "create" && record.name.is_empty() {
        // As kube-apiserver's audit events do: a create's object is named by its body.
        record.name = content::name_in_body(&headers, &body).unwrap_or_default();
    }
    if api.faults.is_cut_off(&record.user_agent) {
        // Nothing of the request reaches the server: no user is known, nothing is routed.
        let response = fault_unavailable();
        record.code = response.status().as_u16();
        record.took = received.elapsed();
        api.audit.record(record);
        return response;
    }
    let response = match front::admit(&api.store, &api.authenticator, &credentials, &headers, attributes) {
        Ok(admitted) => {
            record.user = admitted.impersonator.clone().unwrap_or_else(|| admitted.user.username.clone());
            record.impersonated_user = admitted.impersonator.as_ref().map(|_| admitted.user.username.clone());
            let preconditioned = record.verb == "update" || (record.verb == "patch" && names_resource_version(&body));
            match api.faults.decide(&record.user, &record.verb, &record.resource, preconditioned) {
                Decision::Refuse(fault) => fault_response(fault, &record),
                decision => {
                    let response = match route(&api, &admitted.user, &method, &path, &query, &headers, body).await {
                        Ok(response) => response,
                        Err(error) => error_response(&error),
                    };
                    if decision == Decision::LoseAnswer && response.status().is_success() {
                        fault_response(Fault::InternalErrorAfterWrite, &record)
                    } else {
                        response
                    }
                }
            }
        }
        Err((error, user)) => {
            record.user = user.unwrap_or_default();
            error_response(&error)
        }
    };
    let response = negotiate(&headers, watching, response).await;
    record.code = response.status().as_u16();
    record.took = received.elapsed();
    api.audit.record(record);
    response
}

/// Whether a write's body names the resourceVersion it was made against (`metadata.resourceVersion`).
pub fn names_resource_version(body: &Bytes) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .is_ok_and(|value| value["metadata"]["resourceVersion"].as_str().is_some_and(|rv| !rv.is_empty()))
}

/// What a client cut off is answered (`faults`): a load balancer's `503` when it reaches no API server, in plain
/// text as a proxy writes it.
pub fn fault_unavailable() -> Response {
    let mut response = Response::new(axum::body::Body::from("no healthy upstream"));
    *response.status_mut() = axum::http::StatusCode::SERVICE_UNAVAILABLE;
    response.headers_mut().insert("content-type", axum::http::HeaderValue::from_static("text/plain"));
    response
}

/// The answer of an injected fault (`faults`), worded as kube-apiserver words each.
pub fn fault_response(fault: Fault, record: &audit::Record) -> Response {
    let resource = ResourceId::new(&record.api_group, &record.resource);
    let error = match fault {
        Fault::TooManyRequests => {
            // API Priority and Fairness answers as Go's http.Error does, in plain text, with the seconds to wait
            // (kube-rs clients retry it by default).
            let mut response = Response::new(axum::body::Body::from("Too many requests, please try again later.\n"));
            *response.status_mut() = axum::http::StatusCode::TOO_MANY_REQUESTS;
            let headers = response.headers_mut();
            headers.insert("content-type", axum::http::HeaderValue::from_static("text/plain; charset=utf-8"));
            headers.insert("x-content-type-options", axum::http::HeaderValue::from_static("nosniff"));
            headers.insert("retry-after", axum::http::HeaderValue::from_static("1"));
            return response;
        }
        Fault::Conflict => ApiError::from_store(StoreError::modified(&resource, &record.name), &resource),
        Fault::InternalError | Fault::InternalErrorAfterWrite => {
            let cause = format!("injected fault ({fault:?})");
            ApiError::internal(format!("Internal error occurred: {cause}"))
                .with_details(serde_json::json!({"causes": [{"message": cause}]}))
        }
    };
    error_response(&error)
}
