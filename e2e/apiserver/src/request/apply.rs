//! Server-side apply requests: the applied configuration decoded and merged into the live object (or creating it)
//! with field ownership and conflicts from `managed`, kube-apiserver's upgrade of kubectl's client-side apply, then
//! the same preparation, admission and commit as every write.

use serde_json::{json, Value};

use super::admit::{admit, check_namespace};
use super::api_server::ApiServer;
use super::commit::{commit_create, commit_update};
use super::decode::decode;
use super::prepare::{prepare, WriterParts};
use super::types::{Operation, Target, WriteOptions, Written};
use crate::crds::lifecycle;
use crate::merge::managed;
use crate::status::ApiError;
use crate::storage::store::StoreError;

/// How many times an apply that raced another write is started over.
const ATTEMPTS: usize = 5;

/// An apply, started over when another write got in between its read and its commit (an object created meanwhile,
/// or changed): kube-apiserver's `GuaranteedUpdate` retries those itself, so concurrent appliers of one object do
/// not see AlreadyExists or a conflict they did not cause. One whose configuration names a resourceVersion is not
/// started over: its precondition decides.
pub async fn apply(api: &ApiServer, target: &Target, body: &[u8], options: &WriteOptions) -> Result<Written, ApiError> {
    let mut attempt = 1;
    loop {
        match apply_once(api, target, body, options).await {
            Err(error) if attempt < ATTEMPTS && raced(&error) && !names_version(body) => attempt += 1,
            done => return done,
        }
    }
}

fn raced(error: &ApiError) -> bool {
    error.code == 409 && (error.reason == "AlreadyExists" || error.is_stale_write())
}

fn names_version(body: &[u8]) -> bool {
    serde_yaml_ng::from_slice::<Value>(body)
        .is_ok_and(|config| config["metadata"]["resourceVersion"].as_str().is_some_and(|v| !v.is_empty()))
}

async fn apply_once(
    api: &ApiServer,
    target: &Target,
    body: &[u8],
    options: &WriteOptions,
) -> Result<Written, ApiError> {
    if !options.field_manager_given {
        return Err(ApiError::new(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ));
    }
    let config: Value =
        serde_yaml_ng::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    let (mut config, warnings) = decode(target, config, options)?;
    let name = config["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    if name.is_empty() {
        config["metadata"]["name"] = json!(target.name());
    } else if name != target.name() {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            target.name()
        )));
    }
    let resource = &target.resource;
    let status_write = target.subresource.as_deref() == Some("status");
    let parts = WriterParts::of(target);
    let writer = parts.writer(&options.field_manager);
    let id = resource.id();
    let live = match api.store.get(&id, &target.namespace, target.name()) {
        Ok(live) => Some(api.present(resource, live)),
        Err(StoreError::NotFound { .. }) => None,
        Err(other) => return Err(ApiError::from_store(other, &id)),
    };
    if live.is_none() && status_write {
        return Err(ApiError::not_found(&id, target.name()));
    }
    // A resourceVersion in the applied configuration is a precondition, as for every other write.
    let requested_version = config["metadata"]["resourceVersion"].as_str().filter(|v| !v.is_empty());
    if let (Some(requested), Some(live)) = (requested_version, &live) {
        if live["metadata"]["resourceVersion"].as_str() != Some(requested) {
            return Err(ApiError::from_store(StoreError::modified(&id, target.name()), &id));
        }
    }
    let mut outcome = managed::apply(live.as_ref(), &config, &writer, options.force);
    if let (Err(conflicts), Some(live)) = (&outcome, &live) {
        if options.field_manager == "kubectl" {
            let allowed = managed::last_applied_fields(live, writer.shape, writer.scope);
            let remaining: Vec<managed::Conflict> =
                conflicts.iter().filter(|c| !allowed.contains(&c.at)).cloned().collect();
            outcome =
                if remaining.is_empty() { managed::apply(Some(live), &config, &writer, true) } else { Err(remaining) };
        }
    }
    let merged = outcome.map_err(|conflicts| {
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|c| json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{}\" using {}", c.manager, c.api_version), "field": c.path}))
            .collect();
        ApiError::new(409, "Conflict", managed::conflict_message(&conflicts)).with_details(json!({"causes": causes}))
    })?;
    match live {
        None => {
            check_namespace(api, target, target.name())?;
            lifecycle::check_crd_accepts_writes(&api.store, resource)?;
            let object = prepare(target, Operation::Create, None, merged, options, false)?;
            let (object, _reservation) = admit(api, target, None, object, options).await?;
            let object = commit_create(api, target, object, options)?;
            Ok(Written { code: 201, object: api.present(resource, object), warnings })
        }
        Some(live) => {
            let mut merged = merged;
            merged["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"].clone();
            let object = prepare(target, Operation::Update, Some(&live), merged, options, false)?;
            let (object, _reservation) = admit(api, target, Some(&live), object, options).await?;
            let stored = commit_update(api, target, object, options)?;
            Ok(Written { code: 200, object: api.present(resource, stored), warnings })
        }
    }
}
