//! Deletion as kube-apiserver does it: preconditions, propagation policies (which add the `orphan` or
//! `foregroundDeletion` finalizer), graceful deletion that only sets `deletionTimestamp` while finalizers remain
//! (namespaces wait for their `spec.finalizers` too), the final removal once the last finalizer goes, and
//! deletecollection.

use serde_json::{json, Value};

use super::admit::admission_request;
use super::api_server::ApiServer;
use super::types::{Target, WriteOptions, Written};
use crate::admission;
use crate::crds::lifecycle::{self, CLEANUP_FINALIZER};
use crate::model::builtin;
use crate::model::resources::ResourceType;
use crate::status::{self, ApiError};
use crate::storage::store::{now, Filter};

const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Propagation {
    Orphan,
    #[default]
    Background,
    Foreground,
}

/// The body of a DELETE.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    pub propagation: Option<Propagation>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub dry_run: bool,
}

impl DeleteOptions {
    pub fn parse(body: &Value, query_policy: Option<&str>, dry_run: bool) -> Result<Self, ApiError> {
        let policy = body["propagationPolicy"].as_str().or(query_policy);
        let propagation = match policy {
            None => match body["orphanDependents"].as_bool() {
                Some(true) => Some(Propagation::Orphan),
                Some(false) => Some(Propagation::Background),
                None => None,
            },
            Some("Orphan") => Some(Propagation::Orphan),
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some(other) => {
                return Err(ApiError::new(422, "Invalid", format!("DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"")));
            }
        };
        let dry_run = dry_run || body["dryRun"].as_array().is_some_and(|d| d.iter().any(|v| v == "All"));
        Ok(Self {
            propagation,
            uid: body["preconditions"]["uid"].as_str().map(str::to_owned),
            resource_version: body["preconditions"]["resourceVersion"].as_str().map(str::to_owned),
            dry_run,
        })
    }
}

fn has_finalizers(resource: &ResourceType, object: &Value) -> bool {
    let listed = |value: &Value| value.as_array().is_some_and(|f| !f.is_empty());
    listed(&object["metadata"]["finalizers"]) || (is_namespace(resource) && listed(&object["spec"]["finalizers"]))
}

fn is_namespace(resource: &ResourceType) -> bool {
    resource.group.is_empty() && resource.plural == "namespaces"
}

fn is_crd(resource: &ResourceType) -> bool {
    resource.group == "apiextensions.k8s.io" && resource.plural == "customresourcedefinitions"
}

pub async fn delete(
    api: &ApiServer,
    target: &Target,
    options: &DeleteOptions,
    writer: &WriteOptions,
) -> Result<Written, ApiError> {
    let resource = &target.resource;
    let id = resource.id();
    if is_namespace(resource) && IMMORTAL_NAMESPACES.contains(&target.name()) {
        return Err(ApiError::forbidden(&id, target.name(), "this namespace may not be deleted"));
    }
    let stored = api.store.get(&id, &target.namespace, target.name()).map_err(|e| ApiError::from_store(e, &id))?;
    if let Some(uid) = &options.uid {
        if stored["metadata"]["uid"].as_str() != Some(uid) {
            return Err(ApiError::new(409, "Conflict", format!("Operation cannot be fulfilled on {} \"{}\": Precondition failed: UID in precondition: {uid}, UID in object meta: {}", id.qualified(), target.name(), stored["metadata"]["uid"].as_str().unwrap_or_default())));
        }
    }
    if let Some(rv) = &options.resource_version {
        if stored["metadata"]["resourceVersion"].as_str() != Some(rv) {
            return Err(ApiError::new(409, "Conflict", format!("Operation cannot be fulfilled on {} \"{}\": Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in meta: {}", id.qualified(), target.name(), stored["metadata"]["resourceVersion"].as_str().unwrap_or_default())));
        }
    }
    let operation = admission_request(admission::Operation::Delete, target, None, Some(&stored), writer);
    admission::mutate(&api.store, &api.endpoints, &operation).await?;
    admission::validate(&api.store, &api.endpoints, &operation).await?;
    let mut object = stored.clone();
    let mut finalizers: Vec<Value> = object["metadata"]["finalizers"].as_array().cloned().unwrap_or_default();
    let wanted = match options.propagation {
        Some(Propagation::Foreground) => Some("foregroundDeletion"),
        Some(Propagation::Orphan) => Some("orphan"),
        _ => None,
    };
    match wanted {
        Some(finalizer) => {
            let other = if finalizer == "orphan" { "foregroundDeletion" } else { "orphan" };
            finalizers.retain(|f| f != other);
            if !finalizers.iter().any(|f| f == finalizer) {
                finalizers.push(json!(finalizer));
            }
        }
        None if options.propagation == Some(Propagation::Background) => {
            finalizers.retain(|f| f != "orphan" && f != "foregroundDeletion");
        }
        None => {}
    }
    let before: Vec<Value> = stored["metadata"]["finalizers"].as_array().cloned().unwrap_or_default();
    let changed_finalizers = finalizers != before;
    if changed_finalizers {
        object["metadata"]["finalizers"] = Value::Array(finalizers);
    }
    if is_crd(resource)
        && !object["metadata"]["finalizers"].as_array().is_some_and(|f| f.iter().any(|x| x == CLEANUP_FINALIZER))
    {
        let mut list = object["metadata"]["finalizers"].as_array().cloned().unwrap_or_default();
        list.push(json!(CLEANUP_FINALIZER));
        object["metadata"]["finalizers"] = Value::Array(list);
    }
    let accepted = |deferred: bool| {
        if deferred && matches!(options.propagation, Some(Propagation::Foreground)) {
            202
        } else {
            200
        }
    };
    if has_finalizers(resource, &object) {
        let first = object["metadata"]["deletionTimestamp"].is_null();
        if first {
            object["metadata"]["deletionTimestamp"] = json!(now());
            object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if let Some(generation) = object["metadata"]["generation"].as_i64() {
                object["metadata"]["generation"] = json!(generation + 1);
            }
            if is_namespace(resource) {
                object["status"]["phase"] = json!("Terminating");
            }
            if is_crd(resource) {
                lifecycle::set_condition(
                    &mut object,
                    "Terminating",
                    "True",
                    "InstanceDeletionPending",
                    "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
                );
            }
        }
        if first || changed_finalizers || object != stored {
            object["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"].clone();
            if !options.dry_run {
                object = api.store.update(&id, object).map_err(|e| ApiError::from_store(e, &id))?;
            }
        }
        return Ok(Written { code: accepted(true), object: api.present(resource, object), warnings: Vec::new() });
    }
    if !options.dry_run {
        api.store.delete(&id, &target.namespace, target.name(), None).map_err(|e| ApiError::from_store(e, &id))?;
        lifecycle::after_delete(&api.served, resource, &stored);
    }
    let answer = if builtin::returns_deleted_object(&resource.group, &resource.plural) {
        api.present(resource, stored)
    } else {
        status::success(&id, target.name(), &stored["metadata"]["uid"])
    };
    Ok(Written { code: 200, object: answer, warnings: Vec::new() })
}

/// Deletes every object a list would return; answers with the list of them as they were deleted.
pub async fn delete_collection(
    api: &ApiServer,
    target: &Target,
    filter: &Filter,
    options: &DeleteOptions,
    writer: &WriteOptions,
) -> Result<Written, ApiError> {
    let mut list = api.list(target, filter, None, None)?;
    let mut deleted = Vec::new();
    for item in list["items"].as_array().cloned().unwrap_or_default() {
        let mut one = target.clone();
        one.namespace = item["metadata"]["namespace"].as_str().unwrap_or_default().to_owned();
        one.name = item["metadata"]["name"].as_str().map(str::to_owned);
        match delete(api, &one, options, writer).await {
            Ok(_) => deleted.push(item),
            Err(error) if error.code == 404 => {}
            Err(error) => return Err(error),
        }
    }
    list["items"] = Value::Array(deleted);
    Ok(Written { code: 200, object: list, warnings: Vec::new() })
}

/// An object being deleted is removed once its last finalizer is gone.
pub fn finish_if_released(api: &ApiServer, resource: &ResourceType, object: &Value) {
    if object["metadata"]["deletionTimestamp"].is_null() || has_finalizers(resource, object) {
        return;
    }
    let id = resource.id();
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if api.store.delete(&id, namespace, name, None).is_ok() {
        lifecycle::after_delete(&api.served, resource, object);
    }
}
