//! The third step of a write: admission, in kube-apiserver's order. The namespace must take new objects; mutating
//! webhooks; the storage's own preparation (a Service's cluster IPs and node ports); validation, with RBAC's
//! escalation checks; validating webhooks.

use serde_json::{json, Value};

use super::api_server::ApiServer;
use super::types::{Target, WriteOptions};
use crate::admission;
use crate::auth::rbac;
use crate::crds::{lifecycle, schema, structural};
use crate::model::builtin;
use crate::model::services::Reservation;
use crate::model::validation::{validate_metadata, validate_metadata_update, NameRule};
use crate::status::{ApiError, FieldError};
use crate::storage::store::ResourceId;

/// New objects need their namespace, and one that is not being deleted.
pub(super) fn check_namespace(api: &ApiServer, target: &Target, name: &str) -> Result<(), ApiError> {
    if !target.resource.namespaced {
        return Ok(());
    }
    let namespaces = ResourceId::new("", "namespaces");
    match api.store.get(&namespaces, "", &target.namespace) {
        Err(_) => Err(ApiError::not_found(&namespaces, &target.namespace)),
        Ok(namespace) if !namespace["metadata"]["deletionTimestamp"].is_null() => {
            let why = format!(
                "unable to create new content in namespace {} because it is being terminated",
                target.namespace
            );
            Err(ApiError::forbidden(&target.resource.id(), name, &why).with_details(json!({
                "name": name, "kind": target.resource.plural,
                "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {} is terminating", target.namespace), "field": "metadata.namespace"}]})))
        }
        Ok(_) => Ok(()),
    }
}

/// The admission attributes of a write (or deletion) of `target` by the writer of `options`.
pub(super) fn admission_request<'a>(
    operation: admission::Operation,
    target: &'a Target,
    object: Option<&'a Value>,
    old: Option<&'a Value>,
    options: &'a WriteOptions,
) -> admission::Request<'a> {
    admission::Request {
        operation,
        resource: &target.resource,
        namespace: &target.namespace,
        name: target.name.as_deref(),
        subresource: target.subresource.as_deref(),
        object,
        old,
        user: &options.user,
        dry_run: options.dry_run,
    }
}

/// Admission of a prepared object, in kube-apiserver's order: mutating webhooks, the storage's own preparation
/// (a Service's cluster IPs and node ports), validation (and RBAC escalation checks), validating webhooks. What
/// the storage allocated stays reserved until the returned reservation is dropped, once the object is stored or
/// refused.
pub(super) async fn admit<'a>(
    api: &'a ApiServer,
    target: &Target,
    old: Option<&Value>,
    object: Value,
    options: &WriteOptions,
) -> Result<(Value, Reservation<'a>), ApiError> {
    let operation = if old.is_some() { admission::Operation::Update } else { admission::Operation::Create };
    let request = admission_request(operation, target, Some(&object), old, options);
    let mut object = admission::mutate(&api.store, &api.endpoints, &request).await?.unwrap_or(object);
    let resource = &target.resource;
    let subresource = target.subresource.as_deref();
    let reservation = api.service_allocations.begin_write(&api.store, resource, subresource, old, &mut object)?;
    validate(target, old, &object)?;
    if resource.group == "rbac.authorization.k8s.io" {
        if let Some(why) = rbac::escalation_refusal(&api.store, &options.user, &resource.plural, &object) {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            return Err(ApiError::forbidden(&resource.id(), name, &why));
        }
    }
    let request = admission_request(operation, target, Some(&object), old, options);
    admission::validate(&api.store, &api.endpoints, &request).await?;
    Ok((object, reservation))
}

/// Validation: metadata, the kind's or the schema's rules, and a CustomResourceDefinition's own checks.
fn validate(target: &Target, old: Option<&Value>, object: &Value) -> Result<(), ApiError> {
    let resource = &target.resource;
    let mut errors: Vec<FieldError> =
        validate_metadata(&object["metadata"], NameRule::of(&resource.group, &resource.plural));
    if let Some(old) = old {
        errors.extend(validate_metadata_update(&object["metadata"], &old["metadata"]));
    }
    match &resource.schema {
        Some(schema) => {
            let mut body = object.clone();
            if let Some(map) = body.as_object_mut() {
                map.remove("metadata");
                map.remove("apiVersion");
                map.remove("kind");
            }
            // The body without its type and metadata is validated against the whole schema: the schema's own
            // `metadata`, `apiVersion` and `kind` properties then validate nothing, and the schema is not copied.
            errors.extend(schema::validate(&body, schema, ""));
            if let Some(name_schema) = schema["properties"]["metadata"]["properties"].get("name") {
                errors.extend(schema::validate(&object["metadata"]["name"], name_schema, "metadata.name"));
            }
        }
        None => errors.extend(builtin::validate(&resource.group, &resource.kind, object, old)),
    }
    if resource.group == "apiextensions.k8s.io" && resource.kind == "CustomResourceDefinition" {
        errors.extend(structural::validate_crd(object));
        errors.extend(structural::validate_api_approval(object, old));
        if let Some(old) = old {
            errors.extend(lifecycle::validate_update(object, old));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        let name = object["metadata"]["name"].as_str().or(target.name.as_deref()).unwrap_or_default();
        Err(ApiError::invalid(&resource.kind, &resource.group, name, &errors))
    }
}
