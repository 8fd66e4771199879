//! CustomResourceDefinitions come alive: the names are checked against the other definitions of the group
//! (NamesAccepted), the served versions are registered and the definition is Established; the update rules; the
//! refusal of new objects while a definition terminates; and the end of serving once it is gone.

use serde_json::{json, Value};

use crate::model::resources::{ResourceType, Served};
use crate::status::ApiError;
use crate::status::{error, ErrorType, FieldError};
use crate::storage::store::{now, ResourceId, Store};

pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

pub fn crd_resource() -> ResourceId {
    ResourceId::new("apiextensions.k8s.io", "customresourcedefinitions")
}

fn is_crd(resource: &ResourceType) -> bool {
    resource.group == "apiextensions.k8s.io" && resource.plural == "customresourcedefinitions"
}

/// Sets a condition, keeping its transition time when the status does not change.
pub fn set_condition(object: &mut Value, kind: &str, status: &str, reason: &str, message: &str) {
    let mut conditions: Vec<Value> = object["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let time = match conditions.iter().find(|c| c["type"] == kind) {
        Some(existing) if existing["status"] == status => existing["lastTransitionTime"].clone(),
        _ => json!(now()),
    };
    conditions.retain(|c| c["type"] != kind);
    conditions.push(
        json!({"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": time}),
    );
    object["status"]["conditions"] = Value::Array(conditions);
}

/// The names a definition claims, in the order kube-apiserver checks them, with the reason a clash gets.
fn names_of(crd: &Value) -> Vec<(String, &'static str)> {
    let names = &crd["spec"]["names"];
    let mut all = Vec::new();
    for (field, reason) in [("plural", "PluralConflict"), ("singular", "SingularConflict")] {
        if let Some(name) = names[field].as_str() {
            all.push((name.to_owned(), reason));
        }
    }
    for short in names["shortNames"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        all.push((short.to_owned(), "ShortNamesConflict"));
    }
    for (field, reason) in [("kind", "KindConflict"), ("listKind", "ListKindConflict")] {
        if let Some(name) = names[field].as_str() {
            all.push((name.to_owned(), reason));
        }
    }
    all
}

/// The first name of `crd` another definition of its group already uses, with the reason.
fn conflicting_name(store: &Store, crd: &Value) -> Option<(String, &'static str)> {
    let group = crd["spec"]["group"].as_str()?;
    let name = crd["metadata"]["name"].as_str()?;
    let used: Vec<String> = store
        .all(&crd_resource())
        .into_iter()
        .filter(|other| other["spec"]["group"] == group && other["metadata"]["name"] != name)
        .flat_map(|other| names_of(&other).into_iter().map(|(n, _)| n))
        .collect();
    names_of(crd).into_iter().find(|(mine, _)| used.contains(mine))
}

/// After a CRD is written: its status (accepted names, conditions, stored versions) and the served types.
pub fn after_write(store: &Store, served: &Served, resource: &ResourceType, stored: &Value) -> Value {
    if !is_crd(resource) {
        return stored.clone();
    }
    let mut desired = stored.clone();
    match conflicting_name(store, stored) {
        Some((name, reason)) => {
            set_condition(&mut desired, "NamesAccepted", "False", reason, &format!("\"{name}\" is already in use"));
            set_condition(&mut desired, "Established", "False", "NotAccepted", "not all names are accepted");
        }
        None => {
            desired["status"]["acceptedNames"] = stored["spec"]["names"].clone();
            set_condition(&mut desired, "NamesAccepted", "True", "NoConflicts", "no conflicts found");
            set_condition(
                &mut desired,
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted",
            );
        }
    }
    let mut stored_versions: Vec<Value> = stored["status"]["storedVersions"].as_array().cloned().unwrap_or_default();
    for version in stored["spec"]["versions"].as_array().into_iter().flatten() {
        if version["storage"] == true && !stored_versions.contains(&version["name"]) {
            stored_versions.push(version["name"].clone());
        }
    }
    desired["status"]["storedVersions"] = Value::Array(stored_versions);
    let established = desired["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True");
    {
        let mut resources = served.write();
        if established {
            if let Err(error) = resources.register_crd(&desired) {
                tracing::warn!(%error, "a stored CustomResourceDefinition is not servable");
            }
        } else {
            resources.unregister_crd(&desired);
        }
    }
    if desired == *stored {
        return desired;
    }
    match store.update(&crd_resource(), desired) {
        Ok(written) => written,
        Err(error) => {
            tracing::warn!(%error, "could not write CustomResourceDefinition status");
            stored.clone()
        }
    }
}

/// After any object is removed for good: a removed CRD is no longer served.
pub fn after_delete(served: &Served, resource: &ResourceType, object: &Value) {
    if is_crd(resource) {
        served.write().unregister_crd(object);
    }
}

/// New custom resources are refused while their definition terminates.
pub fn check_crd_accepts_writes(store: &Store, resource: &ResourceType) -> Result<(), ApiError> {
    if resource.schema.is_none() {
        return Ok(());
    }
    let name = format!("{}.{}", resource.plural, resource.group);
    // Read in place: every write of a custom resource asks, and a definition is large.
    let terminating = |crd: &Value| !crd["metadata"]["deletionTimestamp"].is_null();
    if store.read(&crd_resource(), "", &name, terminating) == Some(true) {
        return Err(ApiError::method_not_allowed(
            "create",
            &format!("{name}: create not allowed while custom resource definition is terminating"),
        ));
    }
    Ok(())
}

/// What an update of a CRD may not change.
pub fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if new["spec"]["scope"] != old["spec"]["scope"] {
        errors.push(error("spec.scope", ErrorType::Invalid, format!("{}: field is immutable", new["spec"]["scope"])));
    }
    let versions: Vec<&Value> = new["spec"]["versions"].as_array().into_iter().flatten().map(|v| &v["name"]).collect();
    for (index, stored) in old["status"]["storedVersions"].as_array().into_iter().flatten().enumerate() {
        if !versions.contains(&stored) {
            errors.push(error(
                &format!("status.storedVersions[{index}]"),
                ErrorType::Invalid,
                format!("{stored}: must appear in spec.versions"),
            ));
        }
    }
    errors
}
