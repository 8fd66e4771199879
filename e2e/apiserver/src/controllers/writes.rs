//! How the controllers write: as a member of `system:masters` through the API server's verbs, so admission and
//! validation see their writes as kube-apiserver would; a write that fails is left to the next pass.

use serde_json::Value;

use crate::model::resources::ResourceType;
use crate::request::api_server::ApiServer;
use crate::request::deletion::{self, DeleteOptions, Propagation};
use crate::request::types::{Target, WriteOptions};
use crate::storage::store::ResourceId;

/// The resource type stored under `id` (its preferred version).
pub(super) fn resource_type(api: &ApiServer, id: &ResourceId) -> Option<ResourceType> {
    api.resources().versions_of(&id.group, &id.resource).first().map(|r| (*r).clone())
}

/// What a write of `object` itself is about.
pub(super) fn target_of(resource: &ResourceType, object: &Value) -> Target {
    Target {
        resource: resource.clone(),
        namespace: object["metadata"]["namespace"].as_str().unwrap_or_default().to_owned(),
        name: object["metadata"]["name"].as_str().map(str::to_owned),
        subresource: None,
    }
}

/// The options of the controllers' writes: the control plane's own.
pub(super) fn controller_options() -> WriteOptions {
    WriteOptions::internal("olmv2-control-plane")
}

/// Deletes `object` only as it was read (its uid and resourceVersion as preconditions), as the garbage collector
/// deletes a dependent it judged from a read: one changed since is left for the next pass to judge.
pub(super) async fn delete_as_read(
    api: &ApiServer,
    resource: &ResourceType,
    object: &Value,
    propagation: Option<Propagation>,
) {
    let options = DeleteOptions {
        propagation,
        uid: object["metadata"]["uid"].as_str().map(str::to_owned),
        resource_version: object["metadata"]["resourceVersion"].as_str().map(str::to_owned),
        ..DeleteOptions::default()
    };
    delete_with(api, resource, object, &options).await;
}

pub(super) async fn delete_quietly(
    api: &ApiServer,
    resource: &ResourceType,
    object: &Value,
    propagation: Option<Propagation>,
) {
    delete_with(api, resource, object, &DeleteOptions { propagation, ..DeleteOptions::default() }).await;
}

/// Deletes `object` with `options` unless it is being deleted already; a failure is logged and left to the next pass.
async fn delete_with(api: &ApiServer, resource: &ResourceType, object: &Value, options: &DeleteOptions) {
    if !object["metadata"]["deletionTimestamp"].is_null() {
        return;
    }
    if let Err(error) = deletion::delete(api, &target_of(resource, object), options, &controller_options()).await {
        if error.code != 404 {
            tracing::debug!(%error, "controller delete failed; retried on the next pass");
        }
    }
}

/// Writes `object` with a changed finalizer list, metadata or spec.
pub(super) async fn update_quietly(api: &ApiServer, resource: &ResourceType, object: Value, subresource: Option<&str>) {
    let mut target = target_of(resource, &object);
    target.subresource = subresource.map(str::to_owned);
    if let Err(error) = api.update(&target, object, &controller_options()).await {
        tracing::debug!(%error, "controller update failed; retried on the next pass");
    }
}

pub(super) fn has_finalizer(object: &Value, name: &str) -> bool {
    object["metadata"]["finalizers"].as_array().is_some_and(|f| f.iter().any(|x| x == name))
}

pub(super) async fn remove_finalizer(api: &ApiServer, resource: &ResourceType, object: &Value, finalizer: &str) {
    let mut object = object.clone();
    let kept: Vec<Value> = object["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    object["metadata"]["finalizers"] = Value::Array(kept);
    update_quietly(api, resource, object, None).await;
}
