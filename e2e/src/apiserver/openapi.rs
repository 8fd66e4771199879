//! OpenAPI documents, as much as clients read: the v3 index and one document per group-version (paths with their
//! group-version-kind and the `fieldValidation` parameter that tells kubectl the server validates fields; the
//! schemas of custom resources), and a v2 document with the same definitions.

use serde_json::{json, Map, Value};

use super::resources::{ResourceType, Resources};

fn gv_path(resource: &ResourceType) -> String {
    if resource.group.is_empty() {
        "api/v1".to_owned()
    } else {
        format!("apis/{}/{}", resource.group, resource.version)
    }
}

/// `/openapi/v3`: where each group-version's document is.
pub fn index(resources: &Resources) -> Value {
    let mut paths = Map::new();
    for resource in resources.all() {
        let path = gv_path(resource);
        let url = format!("/openapi/v3/{path}?hash={}", digest(&document_for(resources, &path)));
        paths.insert(path, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

fn digest(value: &Value) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

fn definition_name(resource: &ResourceType) -> String {
    let group: Vec<&str> = resource.group.split('.').rev().collect();
    let prefix = if resource.group.is_empty() { "io.k8s.api.core".to_owned() } else { group.join(".") };
    format!("{prefix}.{}.{}", resource.version, resource.kind)
}

fn gvk(resource: &ResourceType) -> Value {
    json!({"group": resource.group, "version": resource.version, "kind": resource.kind})
}

fn operation(resource: &ResourceType, action: &str, parameters: &[&str]) -> Value {
    let parameters: Vec<Value> = parameters
        .iter()
        .map(|name| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
        .collect();
    json!({"operationId": format!("{action}{}", resource.kind), "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk(resource),
        "parameters": parameters, "responses": {"200": {"description": "OK"}}})
}

fn document_for(resources: &Resources, path: &str) -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for resource in resources.all().filter(|r| gv_path(r) == path) {
        let base = if resource.namespaced {
            format!("/{path}/namespaces/{{namespace}}/{}", resource.plural)
        } else {
            format!("/{path}/{}", resource.plural)
        };
        let write = ["dryRun", "fieldManager", "fieldValidation"];
        paths.insert(base.clone(), json!({"get": operation(resource, "list", &["labelSelector", "fieldSelector", "limit", "continue", "watch"]), "post": operation(resource, "post", &write)}));
        paths.insert(format!("{base}/{{name}}"), json!({"get": operation(resource, "get", &[]), "put": operation(resource, "put", &write),
            "patch": operation(resource, "patch", &["dryRun", "fieldManager", "fieldValidation", "force"]), "delete": operation(resource, "delete", &["dryRun"])}));
        if let Some(schema) = &resource.schema {
            let mut schema = schema.clone();
            schema["x-kubernetes-group-version-kind"] = json!([gvk(resource)]);
            schemas.insert(definition_name(resource), schema);
        }
    }
    json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": paths, "components": {"schemas": schemas}})
}

/// `/openapi/v3/<api/v1 | apis/group/version>`.
pub fn group_version_document(resources: &Resources, rest: &[&str]) -> Option<Value> {
    let path = rest.join("/");
    resources.all().any(|r| gv_path(r) == path).then(|| document_for(resources, &path))
}

/// `/openapi/v2`: the definitions of custom resources, with their group-version-kind.
pub fn v2(resources: &Resources) -> Value {
    let mut definitions = Map::new();
    for resource in resources.all() {
        if let Some(schema) = &resource.schema {
            let mut schema = schema.clone();
            schema["x-kubernetes-group-version-kind"] = json!([gvk(resource)]);
            definitions.insert(definition_name(resource), schema);
        }
    }
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": {}, "definitions": definitions})
}
