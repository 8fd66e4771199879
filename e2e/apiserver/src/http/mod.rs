//! The HTTP face of the emulator: every request is authenticated, impersonated and authorized (`auth::front`),
//! recorded in the audit log, routed by kube-apiserver's URL layout (`routes`) to a verb on a resource (`verbs`,
//! with `watch` streaming), discovery or the OpenAPI documents (`openapi`), and answered in the media type the
//! client takes (`content`, with `protobuf`; Tables from `table`; metadata alone from `metadata`). Query options
//! are read in `query`.
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
use crate::request::api_server::ApiServer;
use content::{error_response, negotiate};
use query::Query;
use routes::{route, segments};

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
    let query: Query = serde_urlencoded::from_str(uri.query().unwrap_or_default()).unwrap_or_default();
    let path = uri.path().to_owned();
    tracing::debug!(%method, %path, "request");
    let watching = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let mut attributes = front::attributes(&method, &segments(&path), watching);
    front::name_from_field_selector(&mut attributes, query.get("fieldSelector").map(String::as_str));
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
