//! The last step of a write: the object in the form it is stored in, stored (unless it is a dry run), and what
//! follows a write of its kind (a CustomResourceDefinition's status and served types; the removal of an object
//! whose last finalizer is gone).

use serde_json::Value;

use super::api_server::{storage_form, ApiServer};
use super::deletion;
use super::prepare::generated_name;
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
    let id = target.resource.id();
    if options.dry_run {
        // A dry run answers as the write would: kube-apiserver's dry-run storage refuses a name that is taken.
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        if api.store.get(&id, namespace, name).is_ok() {
            let taken =
                crate::storage::store::StoreError::AlreadyExists { resource: id.qualified(), name: name.into() };
            return Err(ApiError::from_store(taken, &id));
        }
        return Ok(object);
    }
    let stored = api.store.create(&id, object).map_err(|e| ApiError::from_store(e, &id))?;
    Ok(lifecycle::after_write(&api.store, &api.served, &target.resource, &stored))
}

/// Stores a new object whose name was generated from `generateName`: a name that is taken is generated again, up to
/// eight tries in all, as kube-apiserver does since `RetryGenerateName` (GA in 1.32). A name given by the client
/// is never changed.
pub(super) fn commit_generated(
    api: &ApiServer,
    target: &Target,
    object: Value,
    options: &WriteOptions,
) -> Result<Value, ApiError> {
    let prefix = object["metadata"]["generateName"].as_str().unwrap_or_default().to_owned();
    retry_taken_names(&prefix, generated_name, |name| {
        let mut object = object.clone();
        if let Some(name) = name {
            object["metadata"]["name"] = serde_json::json!(name);
        }
        commit_create(api, target, object, options)
    })
}

/// Runs `store` with the name already chosen (`None`), then with names from `generate` while the name is taken.
fn retry_taken_names<T>(
    prefix: &str,
    generate: impl Fn(&str) -> String,
    mut store: impl FnMut(Option<String>) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    const TRIES: usize = 8;
    let mut result = store(None);
    for _ in 1..TRIES {
        match &result {
            Err(error) if error.reason == "AlreadyExists" && !prefix.is_empty() => {
                result = store(Some(generate(prefix)))
            }
            _ => break,
        }
    }
    result
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

#[cfg(test)]
mod tests {
    use super::*;

    fn taken() -> ApiError {
        ApiError::new(409, "AlreadyExists", "configmaps \"x\" already exists")
    }

    #[test]
    fn a_taken_generated_name_is_generated_again_up_to_eight_tries() {
        let mut names = Vec::new();
        let result = retry_taken_names(
            "cm-",
            |p| format!("{p}next"),
            |name| {
                names.push(name.clone());
                if names.len() < 3 {
                    Err(taken())
                } else {
                    Ok(name)
                }
            },
        );
        assert_eq!(result.ok().flatten().as_deref(), Some("cm-next"));
        assert_eq!(names, [None, Some("cm-next".to_owned()), Some("cm-next".to_owned())]);

        let mut tries = 0;
        let result: Result<(), ApiError> = retry_taken_names(
            "cm-",
            |p| p.to_owned(),
            |_| {
                tries += 1;
                Err(taken())
            },
        );
        assert_eq!((tries, result.map_err(|e| e.code)), (8, Err(409)));
    }

    #[test]
    fn other_errors_and_names_without_a_prefix_are_not_retried() {
        let mut tries = 0;
        let _: Result<(), ApiError> = retry_taken_names(
            "",
            |p| p.to_owned(),
            |_| {
                tries += 1;
                Err(taken())
            },
        );
        assert_eq!(tries, 1);
        let mut tries = 0;
        let _: Result<(), ApiError> = retry_taken_names(
            "cm-",
            |p| p.to_owned(),
            |_| {
                tries += 1;
                Err(ApiError::new(422, "Invalid", "bad"))
            },
        );
        assert_eq!(tries, 1);
    }
}
