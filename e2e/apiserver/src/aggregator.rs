//! The aggregation layer: an APIService that refers to a service is checked for availability (its discovery
//! document, fetched over HTTPS from the endpoint the control plane was given for that service), its resources are
//! served in discovery, and requests for them are proxied with the front-proxy identity headers (`X-Remote-User`,
//! `X-Remote-Group`, `X-Remote-Extra-*`) on a client certificate the backend verifies against the front-proxy CA.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use serde_json::Value;

use crate::auth::authn::UserInfo;
use crate::crds::lifecycle::set_condition;
use crate::model::resources::ResourceType;
use crate::outbound::{self, ClientIdentity, Destination, Trust};
use crate::request::api_server::ApiServer;
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

fn identity_headers(mut request: http::request::Builder, user: &UserInfo) -> http::request::Builder {
    request = request.header("x-remote-user", user.username.as_str());
    for group in &user.groups {
        request = request.header("x-remote-group", group.as_str());
    }
    for (key, values) in &user.extra {
        for value in values {
            request = request.header(format!("x-remote-extra-{key}"), value.as_str());
        }
    }
    request
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
        let group = spec["group"].as_str().unwrap_or_default().to_owned();
        let version = spec["version"].as_str().unwrap_or_default().to_owned();
        let mut updated = service.clone();
        match discover(api, spec, identity).await {
            Ok(list) => {
                api.resources_mut().register_aggregated(&group, &version, &list);
                set_condition(&mut updated, "Available", "True", "Passed", "all checks passed");
            }
            Err((reason, message)) => {
                api.resources_mut().unregister_aggregated(&group, &version);
                set_condition(&mut updated, "Available", "False", reason, &message);
            }
        }
        if updated != service {
            if let Err(error) = api.store.update(&api_services(), updated) {
                tracing::debug!(%error, "APIService status not written; retried on the next pass");
            }
        }
    }
    // Group-versions whose APIService is gone stop being served.
    let registered: Vec<(String, String)> = api
        .store
        .all(&api_services())
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
    let unavailable = |why: String| {
        ApiError::new(
            503,
            "ServiceUnavailable",
            format!("the server is currently unable to handle the request ({why})"),
        )
    };
    let identity = api.front_proxy.as_ref().ok_or_else(|| unavailable("no front-proxy identity".into()))?;
    let service = api
        .store
        .all(&api_services())
        .into_iter()
        .find(|s| s["spec"]["group"] == group && s["spec"]["version"] == version && !s["spec"]["service"].is_null())
        .ok_or_else(|| unavailable(format!("no APIService for {group}/{version}")))?;
    let destination = backend_of(api, &service["spec"], path_and_query).map_err(|(_, why)| unavailable(why))?;
    let bundle = ca_bundle(&service["spec"]);
    let trust = Trust { ca_bundle: bundle.as_deref(), client: Some(identity) };
    let mut request = http::Request::builder().method(method.as_str());
    for name in ["content-type", "accept", "user-agent"] {
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
