//! The OpenAPI v3 form: a group-version's document (its operations under `paths`, the definitions they reach under
//! `components/schemas`) and the rewriting of v2-form definitions into v3's: references to
//! `#/components/schemas/`, a reference with siblings wrapped in `allOf` as kube-openapi writes it (kubectl's
//! strategic merge patch and explain follow `allOf[0]`), and int-or-string and quantity as the `oneOf` of their
//! types.

use serde_json::{json, Map, Value};

use super::definitions::{INT_OR_STRING, QUANTITY, REF_PREFIX};
use super::paths::{parameter_type, response_description, shared_parameters, Operation};
use super::Content;

const V3_PREFIX: &str = "#/components/schemas/";

/// A v2-form schema in the v3 form.
pub fn schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut converted: Map<String, Value> = map.iter().map(|(k, v)| (k.clone(), self::schema(v))).collect();
            let Some(target) = map.get("$ref").and_then(Value::as_str) else { return Value::Object(converted) };
            let target =
                target.strip_prefix(REF_PREFIX).map_or_else(|| target.to_owned(), |n| format!("{V3_PREFIX}{n}"));
            converted.remove("$ref");
            if converted.is_empty() {
                json!({"$ref": target})
            } else {
                converted.insert("allOf".into(), json!([{"$ref": target}]));
                Value::Object(converted)
            }
        }
        Value::Array(items) => Value::Array(items.iter().map(self::schema).collect()),
        other => other.clone(),
    }
}

fn definition(name: &str, definition: &Value) -> Value {
    let mut converted = schema(definition);
    let one_of = match name {
        INT_OR_STRING => json!([{"type": "integer"}, {"type": "string"}]),
        QUANTITY => json!([{"type": "string"}, {"type": "number"}]),
        _ => return converted,
    };
    if let Value::Object(map) = &mut converted {
        map.remove("type");
        map.insert("oneOf".into(), one_of);
    }
    converted
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("{V3_PREFIX}{name}")})
}

/// The parameters every operation on `path` shares, in this version's form.
fn path_parameters(path: &str) -> Vec<Value> {
    shared_parameters(path)
        .into_iter()
        .map(|parameter| {
            let mut value = json!({"name": parameter.name, "in": parameter.location, "description": parameter.description,
                "schema": {"type": "string", "uniqueItems": true}});
            if parameter.required {
                value["required"] = json!(true);
            }
            value
        })
        .collect()
}

fn operation(operation: &Operation) -> Value {
    let parameters: Vec<Value> = operation
        .parameters
        .iter()
        .map(|name| json!({"name": name, "in": "query", "schema": {"type": parameter_type(name), "uniqueItems": true}}))
        .collect();
    let mut responses = Map::new();
    for code in operation.returns.1 {
        let content: Map<String, Value> = operation
            .produces
            .iter()
            .map(|media| ((*media).to_owned(), json!({"schema": reference(&operation.returns.0)})))
            .collect();
        responses.insert(code.to_string(), json!({"description": response_description(*code), "content": content}));
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    let mut rendered = json!({"description": operation.description, "operationId": operation.id, "parameters": parameters,
        "responses": responses, "x-kubernetes-action": operation.action, "x-kubernetes-group-version-kind": operation.gvk});
    if let Some((body, media_types)) = &operation.body {
        let content: Map<String, Value> =
            media_types.iter().map(|media| ((*media).to_owned(), json!({"schema": reference(body)}))).collect();
        rendered["requestBody"] = json!({"content": content});
        if operation.method != "delete" {
            rendered["requestBody"]["required"] = json!(true);
        }
    }
    rendered
}

/// A group-version's document.
pub fn document(content: &Content, version: &str) -> Value {
    let mut paths = Map::new();
    for op in &content.operations {
        let item = paths.entry(op.path.clone()).or_insert_with(|| json!({"parameters": path_parameters(&op.path)}));
        item[op.method] = operation(op);
    }
    let schemas: Map<String, Value> =
        content.definitions.iter().map(|(name, value)| (name.clone(), definition(name, value))).collect();
    json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": version}, "paths": paths,
        "components": {"schemas": schemas}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_with_siblings_are_wrapped_in_all_of() {
        let v2 = json!({"properties": {
            "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "description": "meta"},
            "items": {"type": "array", "items": {"$ref": "#/definitions/io.k8s.api.core.v1.Container"}}}});
        assert_eq!(
            schema(&v2),
            json!({"properties": {
                "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "description": "meta"},
                "items": {"type": "array", "items": {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}}}})
        );
        let int_or_string = definition(INT_OR_STRING, &json!({"type": "string", "format": "int-or-string"}));
        assert_eq!(
            int_or_string,
            json!({"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]})
        );
    }
}
