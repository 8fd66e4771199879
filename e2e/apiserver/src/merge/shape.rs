//! How lists and maps of an object merge: associative lists (merged by key), sets and atomic lists. Built-in kinds
//! take it from the merge keys of their Go types (`patchMergeKey`, `listType`), custom resources from their schema's
//! `x-kubernetes-list-type`, `x-kubernetes-list-map-keys` and `x-kubernetes-map-type`. Strategic merge patch and
//! server-side apply both ask this.

use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListType {
    Atomic,
    /// Elements are objects identified by these fields.
    Map(Vec<String>),
    /// Elements are scalars, each present once.
    Set,
}

/// The merge shape of one kind.
#[derive(Clone, Debug)]
pub enum Shape {
    Builtin {
        kind: String,
    },
    /// A custom resource's schema, shared with its resource type.
    Schema(std::sync::Arc<Value>),
}

fn keyed(key: &str) -> ListType {
    ListType::Map(vec![key.to_owned()])
}

fn metadata_list(field: &str) -> Option<ListType> {
    match field {
        "finalizers" => Some(ListType::Set),
        "ownerReferences" => Some(keyed("uid")),
        _ => None,
    }
}

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// The list types of the built-in kinds' fields, from their `patchMergeKey` and `listType` markers.
fn builtin_list(kind: &str, path: &[&str]) -> ListType {
    let n = path.len();
    let last = path.last().copied().unwrap_or_default();
    let parent = if n >= 2 { path[n - 2] } else { "" };
    if parent == "metadata" {
        if let Some(list) = metadata_list(last) {
            return list;
        }
    }
    let in_pod_spec = (kind == "Pod" && path.len() == 2 && path[0] == "spec")
        || (n >= 3 && path[n - 3] == "template" && parent == "spec");
    match last {
        "conditions" if parent == "status" => keyed("type"),
        "containers" | "initContainers" | "ephemeralContainers" | "volumes" if in_pod_spec => keyed("name"),
        "imagePullSecrets" if in_pod_spec => keyed("name"),
        "hostAliases" if in_pod_spec => keyed("ip"),
        "env" if CONTAINER_LISTS.contains(&parent) => keyed("name"),
        "ports" if CONTAINER_LISTS.contains(&parent) => keyed("containerPort"),
        "volumeMounts" if CONTAINER_LISTS.contains(&parent) => keyed("mountPath"),
        "volumeDevices" if CONTAINER_LISTS.contains(&parent) => keyed("devicePath"),
        "ports" if kind == "Service" && path == ["spec", "ports"] => keyed("port"),
        "secrets" if kind == "ServiceAccount" && n == 1 => keyed("name"),
        "webhooks" if n == 1 && kind.ends_with("WebhookConfiguration") => keyed("name"),
        _ => ListType::Atomic,
    }
}

impl Shape {
    pub fn builtin(kind: &str) -> Self {
        Self::Builtin { kind: kind.to_owned() }
    }

    /// The list type of the list at `path` (field names from the root, list positions left out).
    pub fn list_type(&self, path: &[&str]) -> ListType {
        match self {
            Self::Builtin { kind } => builtin_list(kind, path),
            Self::Schema(root) => {
                if path.len() == 2 && path[0] == "metadata" {
                    return metadata_list(path[1]).unwrap_or(ListType::Atomic);
                }
                let Some(schema) = schema_at(root, path) else { return ListType::Atomic };
                match schema["x-kubernetes-list-type"].as_str() {
                    Some("set") => ListType::Set,
                    Some("map") => ListType::Map(
                        schema["x-kubernetes-list-map-keys"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|k| k.as_str().map(str::to_owned))
                            .collect(),
                    ),
                    _ => ListType::Atomic,
                }
            }
        }
    }

    /// Whether the map at `path` is replaced as a whole rather than merged key by key.
    pub fn map_is_atomic(&self, path: &[&str]) -> bool {
        match self {
            Self::Builtin { .. } => false,
            Self::Schema(root) => schema_at(root, path).is_some_and(|s| s["x-kubernetes-map-type"] == "atomic"),
        }
    }
}

/// The schema of the field at `path`, through `properties`, `additionalProperties` and list `items`.
pub fn schema_at<'a>(root: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut node = root;
    for field in path {
        while node["type"] == "array" {
            node = &node["items"];
        }
        node = match node["properties"].get(*field) {
            Some(child) => child,
            None if node["additionalProperties"].is_object() => &node["additionalProperties"],
            None => return None,
        };
    }
    Some(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtin_merge_keys() {
        let deployment = Shape::builtin("Deployment");
        assert_eq!(deployment.list_type(&["spec", "template", "spec", "containers"]), keyed("name"));
        assert_eq!(deployment.list_type(&["spec", "template", "spec", "containers", "env"]), keyed("name"));
        assert_eq!(deployment.list_type(&["spec", "template", "spec", "containers", "args"]), ListType::Atomic);
        assert_eq!(deployment.list_type(&["metadata", "finalizers"]), ListType::Set);
        assert_eq!(deployment.list_type(&["status", "conditions"]), keyed("type"));
        assert_eq!(Shape::builtin("Pod").list_type(&["spec", "volumes"]), keyed("name"));
        assert_eq!(Shape::builtin("Service").list_type(&["spec", "ports"]), keyed("port"));
        assert_eq!(Shape::builtin("ServiceAccount").list_type(&["imagePullSecrets"]), ListType::Atomic);
        assert_eq!(Shape::builtin("ClusterRole").list_type(&["rules"]), ListType::Atomic);
    }

    #[test]
    fn schema_list_types() {
        let shape = Shape::Schema(std::sync::Arc::new(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object", "properties": {"tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}},
            "labels": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}}}}}}),
        ));
        assert_eq!(shape.list_type(&["spec", "items"]), keyed("name"));
        assert_eq!(shape.list_type(&["spec", "items", "tags"]), ListType::Set);
        assert_eq!(shape.list_type(&["spec", "other"]), ListType::Atomic);
        assert!(shape.map_is_atomic(&["spec", "labels"]));
        assert_eq!(shape.list_type(&["metadata", "ownerReferences"]), keyed("uid"));
    }
}
