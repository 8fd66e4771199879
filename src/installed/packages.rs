//! Serving PackageManifests (`packages.operators.coreos.com/v1`, OLM v0's packageserver API): the CatalogSources
//! the server watches, each with the catalog the CatalogSource loop last loaded into the process's one catalog cache
//! (a request never pulls an image nor reads a ConfigMap: readers make no registry traffic), turned into
//! PackageManifests on request by `packagemanifest` (pure). A catalog not loaded is left out, as OLM's packageserver
//! leaves out catalogs whose registry is not ready. Nothing is stored per namespace: a request builds what it
//! answers.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use kube::runtime::reflector::Store;
use serde_json::json;

use super::http::{ok_json, status, ResourceRequest};
use super::packagemanifest::{self, IconAnswer, Source};
use super::selector::{self, FieldRequirement};
use super::table::IncludeObject;
use crate::api::v1alpha1::CatalogSource;
use crate::api::v1alpha1::TRANSIENT_FAILURE;
use crate::catalog::fbc::Catalog;
use crate::catalog::source::CatalogCache;
use crate::controller::listing;

/// Where PackageManifests come from.
pub struct Catalogs {
    pub sources: Store<CatalogSource>,
    pub cache: Arc<CatalogCache>,
    /// The namespace whose catalogs every namespace sees.
    pub global_namespace: String,
}

impl Catalogs {
    /// The CatalogSources `namespace` sees (every one when `None`), with their loaded catalogs.
    async fn loaded(&self, namespace: Option<&str>) -> Vec<(Arc<CatalogSource>, Arc<Catalog>)> {
        // Just after a start, the CatalogSources are not listed yet: wait a little rather than answer nothing.
        let _ = listing::listed(&self.sources, std::time::Duration::from_secs(10)).await;
        self.sources
            .state()
            .into_iter()
            .filter(|source| {
                let source_namespace = source.metadata.namespace.as_deref().unwrap_or_default();
                namespace.is_none_or(|n| n == source_namespace || source_namespace == self.global_namespace)
            })
            .filter(|source| serving(source))
            .filter_map(|source| {
                let catalog = self.cache.loaded(&source)?.catalog;
                Some((source, catalog))
            })
            .collect()
    }
}

/// Whether a CatalogSource's packages are shown: not while its connection has failed or shut down, as OLM's
/// packageserver drops a source's packages on `TRANSIENT_FAILURE` and `SHUTDOWN` and keeps them in other states.
pub fn serving(source: &CatalogSource) -> bool {
    let state =
        source.status.as_ref().and_then(|s| s.connection_state.as_ref()).map(|c| c.last_observed_state.as_str());
    !matches!(state, Some(TRANSIENT_FAILURE | "SHUTDOWN"))
}

fn sources(loaded: &[(Arc<CatalogSource>, Arc<Catalog>)]) -> Vec<Source<'_>> {
    loaded.iter().map(|(catalog_source, catalog)| Source { catalog_source, catalog }).collect()
}

/// A list, get or icon of PackageManifests.
pub async fn serve(
    catalogs: &Catalogs,
    request: &ResourceRequest,
    query: &BTreeMap<String, String>,
    headers: &HeaderMap,
    table: Option<IncludeObject>,
) -> Response {
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let global = catalogs.global_namespace.as_str();
    let loaded = catalogs.loaded(request.namespace.as_deref()).await;
    let sources = sources(&loaded);
    match (&request.name, request.subresource.as_deref()) {
        (Some(name), Some("icon")) => {
            let answer = packagemanifest::icon(
                &sources,
                namespace,
                global,
                name,
                headers.get(axum::http::header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()),
                query.get("resourceVersion").map(String::as_str),
            );
            icon_response(answer)
        }
        (Some(_), Some(_)) => status(404, "NotFound", "the server could not find the requested resource", None),
        (Some(name), None) => match packagemanifest::get(&sources, namespace, global, name) {
            Some(manifest) => match table {
                Some(include) => ok_json(&packagemanifest::table(vec![manifest], include, false, now())),
                None => ok_json(&manifest),
            },
            None => not_found(name),
        },
        (None, _) => list_response(&sources, namespace, global, query, table),
    }
}

/// The API server's 404 for a PackageManifest named `name` that `namespace` does not see.
fn not_found(name: &str) -> Response {
    status(
        404,
        "NotFound",
        &format!("{}.{} \"{name}\" not found", packagemanifest::RESOURCE, packagemanifest::GROUP),
        Some(json!({"name": name, "group": packagemanifest::GROUP, "kind": packagemanifest::RESOURCE})),
    )
}

/// The response to an icon request: 304, 404, or the icon with its media type and tag, served so that a browser
/// neither sniffs nor runs it.
fn icon_response(answer: IconAnswer) -> Response {
    match answer {
        IconAnswer::NotModified => StatusCode::NOT_MODIFIED.into_response(),
        IconAnswer::NotFound => StatusCode::NOT_FOUND.into_response(),
        IconAnswer::Icon { data, content_type, etag } => {
            let mut response = (StatusCode::OK, data).into_response();
            // The media type is the catalog's word: a browser shown the icon (an SVG with a script, or
            // anything claiming to be HTML) must neither sniff nor run it under the API server's origin.
            let headers = response.headers_mut();
            headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
            headers.insert("content-security-policy", HeaderValue::from_static("sandbox"));
            if let Ok(value) = HeaderValue::from_str(&content_type) {
                response.headers_mut().insert(axum::http::header::CONTENT_TYPE, value);
            }
            if let Ok(value) = HeaderValue::from_str(&etag) {
                response.headers_mut().insert(axum::http::header::ETAG, value);
            }
            response
        }
    }
}

/// The list of the PackageManifests `namespace` sees (with the `global` namespace's), narrowed by the label and
/// field selectors of `query`, as a list or as a table; a selector that cannot be read or applied is refused.
fn list_response(
    sources: &[Source<'_>],
    namespace: &str,
    global: &str,
    query: &BTreeMap<String, String>,
    table: Option<IncludeObject>,
) -> Response {
    let labels = match selector::labels(query.get("labelSelector").map(String::as_str)) {
        Ok(labels) => labels,
        Err(error) => return status(400, "BadRequest", &error.to_string(), None),
    };
    let fields: Vec<FieldRequirement> =
        // Any field: OLM's storage refuses all but `metadata.name` itself (`selected_name`).
        match selector::fields(query.get("fieldSelector").map(String::as_str), None) {
            Ok(fields) => fields,
            Err(error) => return status(400, "BadRequest", &error.to_string(), None),
        };
    let name =
        match packagemanifest::selected_name(fields.iter().map(|f| (f.field.as_str(), f.equal, f.value.as_str()))) {
            Ok(name) => name,
            Err(error) => return status(500, "InternalError", &error.to_string(), None),
        };
    let items: Vec<_> = packagemanifest::list(sources, namespace, global)
        .into_iter()
        .filter(|manifest| name.is_none_or(|name| manifest["metadata"]["name"] == name))
        .filter(|manifest| selector::matches(&labels, &manifest["metadata"]["labels"]))
        .collect();
    match table {
        Some(include) => ok_json(&packagemanifest::table(items, include, false, now())),
        None => ok_json(&packagemanifest::list_object(items)),
    }
}

fn now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(state: Option<&str>) -> CatalogSource {
        let mut source: CatalogSource = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "olm"}, "spec": {"sourceType": "grpc", "image": "r/c:1"}
        }))
        .unwrap();
        if let Some(state) = state {
            source.status = serde_json::from_value(serde_json::json!({
                "connectionState": {"lastObservedState": state}
            }))
            .unwrap();
        }
        source
    }

    #[test]
    fn a_catalog_whose_connection_failed_shows_no_packages_as_in_olm() {
        assert!(serving(&source(Some("READY"))));
        assert!(serving(&source(Some("CONNECTING"))), "kept while connecting, as OLM keeps them");
        assert!(serving(&source(None)));
        assert!(!serving(&source(Some("TRANSIENT_FAILURE"))));
        assert!(!serving(&source(Some("SHUTDOWN"))));
    }
}
