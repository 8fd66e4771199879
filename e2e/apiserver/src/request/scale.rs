//! The `scale` subresource: an `autoscaling/v1` Scale read from and written to the replicas paths of its object
//! (Deployments and ReplicaSets, and custom resources whose CRD declares `subresources.scale`).

use serde_json::{json, Value};

use super::api_server::ApiServer;
use super::types::{PatchType, Target, WriteOptions, Written};
use crate::merge::patch;
use crate::model::resources::ResourceType;
use crate::status::{error, ApiError, ErrorType};

fn field_path(path: &str) -> Vec<&str> {
    path.trim_start_matches('.').split('.').filter(|p| !p.is_empty()).collect()
}

fn read<'a>(object: &'a Value, path: &str) -> &'a Value {
    field_path(path).into_iter().fold(object, |node, field| &node[field])
}

fn write(object: &mut Value, path: &str, value: Value) {
    let fields = field_path(path);
    let mut node = object;
    for field in &fields[..fields.len().saturating_sub(1)] {
        node = &mut node[*field];
    }
    if let Some(last) = fields.last() {
        node[*last] = value;
    }
}

fn paths(resource: &ResourceType) -> Result<&Value, ApiError> {
    resource.scale.as_ref().ok_or_else(|| ApiError::no_route(&format!("{}/scale", resource.plural)))
}

/// The Scale of an object.
pub fn scale_of(resource: &ResourceType, object: &Value) -> Result<Value, ApiError> {
    let paths = paths(resource)?;
    let metadata = &object["metadata"];
    let mut status = json!({"replicas": read(object, paths["statusReplicasPath"].as_str().unwrap_or_default()).as_i64().unwrap_or(0)});
    let selector = read(object, paths["labelSelectorPath"].as_str().unwrap_or_default());
    let selector = match selector {
        Value::String(text) => Some(text.clone()),
        _ if resource.schema.is_none() => {
            let labels: Vec<String> = object["spec"]["selector"]["matchLabels"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect();
            Some(labels.join(","))
        }
        _ => None,
    };
    if let Some(selector) = selector.filter(|s| !s.is_empty()) {
        status["selector"] = json!(selector);
    }
    Ok(json!({
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": metadata["name"], "namespace": metadata["namespace"], "uid": metadata["uid"], "resourceVersion": metadata["resourceVersion"], "creationTimestamp": metadata["creationTimestamp"]},
        "spec": {"replicas": read(object, paths["specReplicasPath"].as_str().unwrap_or_default()).as_i64().unwrap_or(0)},
        "status": status,
    }))
}

/// Writes a new Scale (a PUT body, or the current Scale with a patch applied) to its object.
pub async fn update(
    api: &ApiServer,
    target: &Target,
    change: ScaleChange<'_>,
    options: &WriteOptions,
) -> Result<Written, ApiError> {
    let main = Target { subresource: None, ..target.clone() };
    let object = api.get(&main)?;
    let current = scale_of(&target.resource, &object)?;
    let wanted = match change {
        ScaleChange::Replace(body) => body.clone(),
        ScaleChange::Patch(patch_type, body) => {
            let patch_value: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            match patch_type {
                PatchType::Json => patch::json_patch(&current, &patch_value),
                _ => patch::merge_patch(&current, &patch_value),
            }
            .map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?
        }
    };
    if let Some(rv) = wanted["metadata"]["resourceVersion"].as_str() {
        if Some(rv) != object["metadata"]["resourceVersion"].as_str() {
            return Err(ApiError::new(409, "Conflict", format!("Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply your changes to the latest version and try again", target.resource.id().qualified(), target.name())));
        }
    }
    let replicas = wanted["spec"]["replicas"].as_i64().unwrap_or(0);
    if replicas < 0 {
        return Err(ApiError::invalid(
            "Scale",
            "autoscaling",
            target.name(),
            &[error("spec.replicas", ErrorType::Invalid, format!("{replicas}: must be greater than or equal to 0"))],
        ));
    }
    let mut updated = object;
    write(&mut updated, paths(&target.resource)?["specReplicasPath"].as_str().unwrap_or_default(), json!(replicas));
    let written = api.update(&main, updated, options).await?;
    Ok(Written { code: 200, object: scale_of(&target.resource, &written.object)?, warnings: written.warnings })
}

/// How a Scale is changed.
pub enum ScaleChange<'a> {
    Replace(&'a Value),
    Patch(PatchType, &'a [u8]),
}
