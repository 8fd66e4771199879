//! The OpenAPI v2 document (`/openapi/v2`): every served resource's operations and the definitions they reach, in
//! one document as kube-apiserver serves it. kubectl reads it (as protobuf, `gnostic`) to validate the items of a
//! `kind: List` on the client, and for the patch types and schemas of a kind when the v3 documents do not say.

use serde_json::{json, Map, Value};

use super::definitions::reference;
use super::paths::{parameter_type, response_description, shared_parameters, Operation};
use super::Content;

/// The parameters every operation on `path` shares, in this version's form.
fn path_parameters(path: &str) -> Vec<Value> {
    shared_parameters(path)
        .into_iter()
        .map(|parameter| {
            let mut value = json!({"name": parameter.name, "in": parameter.location, "description": parameter.description,
                "type": "string", "uniqueItems": true});
            if parameter.required {
                value["required"] = json!(true);
            }
            value
        })
        .collect()
}

fn operation(operation: &Operation) -> Value {
    let mut parameters = Vec::new();
    let mut consumes: &[&str] = &[];
    if let Some((body, media_types)) = &operation.body {
        parameters.push(json!({"name": "body", "in": "body", "required": operation.method != "delete",
            "schema": reference(body)}));
        consumes = media_types;
    }
    parameters.extend(
        operation
            .parameters
            .iter()
            .map(|name| json!({"name": name, "in": "query", "type": parameter_type(name), "uniqueItems": true})),
    );
    let mut responses = Map::new();
    for code in operation.returns.1 {
        responses.insert(
            code.to_string(),
            json!({"description": response_description(*code), "schema": reference(&operation.returns.0)}),
        );
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    let mut rendered = json!({"description": operation.description, "operationId": operation.id,
        "produces": operation.produces, "schemes": ["https"], "parameters": parameters, "responses": responses,
        "x-kubernetes-action": operation.action, "x-kubernetes-group-version-kind": operation.gvk});
    if !consumes.is_empty() {
        rendered["consumes"] = json!(consumes);
    }
    rendered
}

/// The whole server's document.
pub fn document(content: &Content, version: &str) -> Value {
    let mut paths = Map::new();
    for op in &content.operations {
        let item = paths.entry(op.path.clone()).or_insert_with(|| json!({"parameters": path_parameters(&op.path)}));
        item[op.method] = operation(op);
    }
    let definitions: Map<String, Value> = content.definitions.clone().into_iter().collect();
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": version}, "paths": paths,
        "definitions": definitions})
}
