//! The second step of a write: everything between a decoded object and admission, as kube-apiserver's registry
//! strategies do it. A generated name, defaults (a custom resource's schema, a built-in kind's `SetDefaults`), the
//! create strategies, on update the separation of status and main resource and what the server keeps, generation,
//! and the managed fields of the writer.

use serde_json::{json, Value};

use super::types::{Operation, Target, WriteOptions};
use crate::crds::schema;
use crate::merge::fieldset::Scope;
use crate::merge::managed::{self, Writer};
use crate::merge::shape::Shape;
use crate::model::resources::ResourceType;
use crate::model::{builtin, defaults};
use crate::status::ApiError;
use crate::storage::store::now;

/// A name from `generateName`: the prefix and five random characters of apimachinery's alphabet.
pub(super) fn generated_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let random = uuid::Uuid::new_v4();
    let suffix: String =
        random.as_bytes().iter().take(5).map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char).collect();
    format!("{prefix}{suffix}")
}

/// The object without `metadata` (and without `status` where a status subresource exists): what bumps generation.
fn spec_part(object: &Value, has_status: bool) -> Value {
    let mut part = object.clone();
    if let Some(map) = part.as_object_mut() {
        map.remove("metadata");
        if has_status {
            map.remove("status");
        }
    }
    part
}

/// An object's annotations, none when absent or empty (kube-apiserver compares them so: an empty map is no map).
fn annotations(object: &Value) -> Option<&serde_json::Map<String, Value>> {
    object["metadata"]["annotations"].as_object().filter(|annotations| !annotations.is_empty())
}

/// Everything a decoded object goes through before admission. `track` records the writer's managed fields
/// (server-side apply records its own).
pub(super) fn prepare(
    target: &Target,
    operation: Operation,
    old: Option<&Value>,
    mut object: Value,
    options: &WriteOptions,
    track: bool,
) -> Result<Value, ApiError> {
    let resource = &target.resource;
    let status_write = target.subresource.as_deref() == Some("status");
    if operation == Operation::Create && object["metadata"]["name"].as_str().is_none_or(str::is_empty) {
        // Named first, so that defaults derived from the name (a namespace's name label) see it.
        if let Some(prefix) = object["metadata"]["generateName"].as_str().filter(|p| !p.is_empty()) {
            object["metadata"]["name"] = json!(generated_name(prefix));
        }
    }
    // Defaults, as decoding applies them in kube-apiserver: before admission, validation and field tracking.
    match &resource.schema {
        Some(schema) => schema::apply_defaults(&mut object, schema),
        None => defaults::apply(&resource.group, &resource.kind, &mut object),
    }
    if resource.group.is_empty() && resource.kind == "Secret" {
        builtin::fold_string_data(&mut object);
    }
    match (operation, old) {
        (Operation::Create, _) => {
            builtin::prepare_for_create(&resource.group, &resource.kind, &mut object);
            if resource.has_status() && resource.schema.is_some() {
                if let Some(map) = object.as_object_mut() {
                    map.remove("status");
                }
            }
            let metadata = &mut object["metadata"];
            if let Some(map) = metadata.as_object_mut() {
                for server_set in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                    "selfLink",
                ] {
                    map.remove(server_set);
                }
            }
            if resource.schema.is_some() || builtin::tracks_generation(&resource.group, &resource.plural) {
                metadata["generation"] = json!(1);
            }
        }
        (Operation::Update, Some(old)) => {
            if status_write {
                let status = object.get("status").cloned();
                let managed_fields = object["metadata"].get("managedFields").cloned();
                let resource_version = object["metadata"]["resourceVersion"].clone();
                object = old.clone();
                match status {
                    Some(status) => object["status"] = status,
                    None => {
                        if let Some(map) = object.as_object_mut() {
                            map.remove("status");
                        }
                    }
                }
                object["metadata"]["resourceVersion"] = resource_version;
                match managed_fields {
                    Some(fields) => object["metadata"]["managedFields"] = fields,
                    None => {
                        if let Some(map) = object["metadata"].as_object_mut() {
                            map.remove("managedFields");
                        }
                    }
                }
            } else if resource.has_status() {
                match old.get("status") {
                    Some(status) => object["status"] = status.clone(),
                    None => {
                        if let Some(map) = object.as_object_mut() {
                            map.remove("status");
                        }
                    }
                }
            }
            if resource.kind == "Namespace"
                && resource.group.is_empty()
                && target.subresource.as_deref() != Some("finalize")
            {
                object["spec"] = old["spec"].clone();
            }
            for kept in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"] {
                match old["metadata"].get(kept) {
                    Some(value) => object["metadata"][kept] = value.clone(),
                    None => {
                        if let Some(map) = object["metadata"].as_object_mut() {
                            map.remove(kept);
                        }
                    }
                }
            }
            let tracked = resource.schema.is_some() || builtin::tracks_generation(&resource.group, &resource.plural);
            let annotated = builtin::annotations_bump_generation(&resource.group, &resource.plural)
                && annotations(&object) != annotations(old);
            if tracked
                && (annotated || spec_part(&object, resource.has_status()) != spec_part(old, resource.has_status()))
            {
                let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
                object["metadata"]["generation"] = json!(generation);
            }
        }
        (Operation::Update, None) => return Err(ApiError::internal("update without a stored object")),
    }
    if track {
        let parts = WriterParts::of(target);
        let writer = parts.writer(&options.field_manager);
        managed::track_update(old, &mut object, &writer);
    }
    Ok(object)
}

/// How the lists and maps of `resource`'s objects merge: from its schema, or from its built-in kind.
pub(super) fn shape_of(resource: &ResourceType) -> Shape {
    match &resource.schema {
        Some(schema) => Shape::Schema(schema.clone()),
        None => Shape::builtin(&resource.kind),
    }
}

/// What a managed-fields entry of a write to `target` records, apart from its manager.
pub(super) struct WriterParts {
    shape: Shape,
    api_version: String,
    time: String,
    scope: Scope,
    subresource: &'static str,
}

impl WriterParts {
    /// Which fields a write to `target` may own, and the subresource its entry names.
    pub(super) fn of(target: &Target) -> Self {
        let resource = &target.resource;
        let (scope, subresource) = match (target.subresource.as_deref() == Some("status"), resource.has_status()) {
            (true, _) => (Scope::Status, "status"),
            (false, true) => (Scope::MainResource, ""),
            (false, false) => (Scope::All, ""),
        };
        Self { shape: shape_of(resource), api_version: resource.group_version(), time: now(), scope, subresource }
    }

    pub(super) fn writer<'a>(&'a self, manager: &'a str) -> Writer<'a> {
        Writer {
            manager,
            api_version: &self.api_version,
            subresource: self.subresource,
            time: &self.time,
            shape: &self.shape,
            scope: self.scope,
        }
    }
}
