//! A user's deployment configuration applied to an operator's Deployment with OLM v0's rules
//! (`pkg/controller/operators/olm/overrides/inject`), which OLM v1 keeps: the one function every install path calls
//! (an Install's content entry, an Operator through its Install, `olmv2 bundle render --config`, and the legacy
//! Subscription loop with `spec.config`). Pure: a Deployment object in, the same Deployment configured out.
//!
//! Where OLM v1 corrected v0, this follows v1, and `docs/bundles.md` says so: `podAntiAffinity: {}` removes only the
//! pods' anti-affinity (v0 removed their whole affinity), and an empty part of an affinity never lands in a pod.

use serde_json::{Map, Value};

use crate::api::v2alpha1::DeploymentConfig;

/// Why a configuration could not be applied: it could not be written as JSON.
#[derive(Debug, thiserror::Error)]
#[error("failed to apply the deployment configuration to Deployment {deployment}")]
pub struct DeploymentConfigError {
    pub deployment: String,
    #[source]
    pub source: serde_json::Error,
}

/// Applies `config` to `deployment` (a Deployment object), field by field:
/// - `env`: in every container, a variable of the same name is replaced in place, the others appended in order;
/// - `envFrom`, `tolerations`: appended unless an equal one is there;
/// - `volumes`, `volumeMounts` (every container): replaced by name, the others appended;
/// - `resources` (every container), `nodeSelector`: replaced, when given; an empty node selector removes it;
/// - `affinity`: `{}` removes the pods' affinity; otherwise each part given replaces the pods' own, `{}` removing it;
/// - `annotations`: added to the Deployment and its pod template where they do not carry the key already;
/// - `selector`: ignored, as OLM v0 and v1 ignore it.
///
/// Only `containers` are configured, not `initContainers`, as in OLM.
pub fn apply_deployment_config(deployment: &mut Value, config: &DeploymentConfig) -> Result<(), DeploymentConfigError> {
    let config = serde_json::to_value(config).map_err(|source| DeploymentConfigError {
        deployment: deployment["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
        source,
    })?;
    let list = |field: &str| config[field].as_array().cloned().unwrap_or_default();
    let (env, env_from, volume_mounts) = (list("env"), list("envFrom"), list("volumeMounts"));
    // Pointers, not indexing: indexing a missing field would add it, and a Deployment gets only what is configured.
    if let Some(pod) = deployment.pointer_mut("/spec/template/spec").filter(|pod| pod.is_object()) {
        for container in pod.get_mut("containers").and_then(Value::as_array_mut).into_iter().flatten() {
            merge_in_place(container, "env", &env, merge_env);
            merge_in_place(container, "envFrom", &env_from, append_absent);
            merge_in_place(container, "volumeMounts", &volume_mounts, replace_by_name);
            if let Some(resources) = config.get("resources") {
                container["resources"] = resources.clone();
            }
        }
        merge_in_place(pod, "volumes", &list("volumes"), replace_by_name);
        merge_in_place(pod, "tolerations", &list("tolerations"), append_absent);
        if let Some(selector) = config.get("nodeSelector") {
            set_or_remove(pod, "nodeSelector", selector.clone());
        }
        if let Some(affinity) = config.get("affinity") {
            override_affinity(pod, affinity);
        }
    }
    if let Some(annotations) = config["annotations"].as_object().filter(|a| !a.is_empty()) {
        add_absent_keys(&mut deployment["metadata"], annotations);
        if let Some(template) = deployment.pointer_mut("/spec/template").filter(|template| template.is_object()) {
            add_absent_keys(&mut template["metadata"], annotations);
        }
    }
    Ok(())
}

/// Replaces the list `field` of `object` with `merge(current, wanted)` when anything is wanted.
fn merge_in_place(object: &mut Value, field: &str, wanted: &[Value], merge: fn(Vec<Value>, &[Value]) -> Vec<Value>) {
    if wanted.is_empty() || !object.is_object() {
        return;
    }
    let current = object[field].as_array().cloned().unwrap_or_default();
    object[field] = Value::Array(merge(current, wanted));
}

/// OLM's `mergeEnvVars`: the container's variables keep their places and take the configured value of their name;
/// configured variables the container lacks follow, in the configuration's order, each with the last value
/// configured for its name.
fn merge_env(current: Vec<Value>, wanted: &[Value]) -> Vec<Value> {
    let last = |name: &Value| wanted.iter().rev().find(|item| item["name"] == *name).cloned();
    let mut merged: Vec<Value> =
        current.iter().map(|item| last(&item["name"]).unwrap_or_else(|| item.clone())).collect();
    for item in wanted {
        if !current.iter().any(|existing| existing["name"] == item["name"]) {
            merged.extend(last(&item["name"]));
        }
    }
    merged
}

/// OLM's `mergeVolumes` and `mergeVolumeMounts`: a configured item replaces the container's (or pod's) item of its
/// name; others are appended. Only the items there before are looked at, so a name configured twice and absent
/// before is appended twice, as in OLM.
fn replace_by_name(mut current: Vec<Value>, wanted: &[Value]) -> Vec<Value> {
    let before = current.len();
    for item in wanted {
        match current[..before].iter().position(|existing| existing["name"] == item["name"]) {
            Some(index) => current[index] = item.clone(),
            None => current.push(item.clone()),
        }
    }
    current
}

/// OLM's `mergeEnvFromVars` and `mergeTolerations`: a configured item is appended unless one equal to it (Go's
/// `reflect.DeepEqual` of the typed values) was there before.
fn append_absent(mut current: Vec<Value>, wanted: &[Value]) -> Vec<Value> {
    let before: Vec<Value> = current.iter().map(go_value).collect();
    for item in wanted {
        if !before.contains(&go_value(item)) {
            current.push(item.clone());
        }
    }
    current
}

/// A value as Go's typed structs hold it: an empty or null string field is the same as an absent one.
fn go_value(value: &Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(_, field)| !field.is_null() && *field != "")
                .map(|(key, field)| (key.clone(), go_value(field)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(go_value).collect()),
        other => other.clone(),
    }
}

fn is_empty_object(value: &Value) -> bool {
    value.as_object().is_some_and(Map::is_empty)
}

/// Sets `field`, or removes it when `value` is empty (Go leaves an empty map out).
fn set_or_remove(object: &mut Value, field: &str, value: Value) {
    if is_empty_object(&value) {
        if let Some(fields) = object.as_object_mut() {
            fields.remove(field);
        }
    } else {
        object[field] = value;
    }
}

/// OLM's `OverrideDeploymentAffinity`, with OLM v1's corrections (see the module's comment).
fn override_affinity(pod: &mut Value, affinity: &Value) {
    if is_empty_object(affinity) {
        set_or_remove(pod, "affinity", Value::Object(Map::new()));
        return;
    }
    let mut merged = pod["affinity"].as_object().cloned().unwrap_or_default();
    for part in ["nodeAffinity", "podAffinity", "podAntiAffinity"] {
        match affinity.get(part) {
            Some(value) if is_empty_object(value) => {
                merged.remove(part);
            }
            Some(value) => {
                merged.insert(part.to_owned(), value.clone());
            }
            None => {}
        }
    }
    set_or_remove(pod, "affinity", Value::Object(merged));
}

/// Adds to `metadata.annotations` every annotation whose key it does not carry.
fn add_absent_keys(metadata: &mut Value, annotations: &Map<String, Value>) {
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    if !metadata["annotations"].is_object() {
        metadata["annotations"] = Value::Object(Map::new());
    }
    if let Some(existing) = metadata["annotations"].as_object_mut() {
        for (key, value) in annotations {
            existing.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
}

#[cfg(test)]
#[path = "deployment_config_tests.rs"]
mod tests;
