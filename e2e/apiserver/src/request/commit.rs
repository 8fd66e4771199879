//! The last step of a write: the object in the form it is stored in, stored (unless it is a dry run), and what
//! follows a write of its kind (a CustomResourceDefinition's status and served types; the removal of an object
//! whose last finalizer is gone).

use serde_json::Value;

use super::api_server::{storage_form, ApiServer};
use super::deletion;
use super::types::{Target, WriteOptions};
use crate::crds::lifecycle;
use crate::status::ApiError;

/// Stores a new object.
pub(super) fn commit_create(
    api: &ApiServer,
    target: &Target,
    object: Value,
    options: &WriteOptions,
) -> Result<Value, ApiError> {
    let object = storage_form(&target.resource, object);
    if options.dry_run {
        return Ok(object);
    }
    let id = target.resource.id();
    let stored = api.store.create(&id, object).map_err(|e| ApiError::from_store(e, &id))?;
    Ok(lifecycle::after_write(&api.store, &api.served, &target.resource, &stored))
}

/// Writes an updated object (and deletes it once it is being deleted and has no finalizers left).
pub(super) fn commit_update(
    api: &ApiServer,
    target: &Target,
    object: Value,
    options: &WriteOptions,
) -> Result<Value, ApiError> {
    let object = storage_form(&target.resource, object);
    if options.dry_run {
        return Ok(object);
    }
    let id = target.resource.id();
    let stored = api.store.update(&id, object).map_err(|e| ApiError::from_store(e, &id))?;
    let stored = lifecycle::after_write(&api.store, &api.served, &target.resource, &stored);
    deletion::finish_if_released(api, &target.resource, &stored);
    Ok(stored)
}
