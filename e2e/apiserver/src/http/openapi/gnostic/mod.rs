//! The protobuf form of the OpenAPI v2 document, what kubectl asks `/openapi/v2` for
//! (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`): gnostic's `openapi.v2.Document` message, made
//! from the JSON document as kube-apiserver makes it (gnostic's compiler): named maps become repeated `Named*`
//! messages in the document's key order, `x-` keys vendor extensions, and free values (`default`, `enum`,
//! extensions) `Any` messages holding their YAML. A key the message (`messages`) does not have makes the document
//! invalid, as it makes gnostic's compiler refuse it.

mod messages;

use prost::Message;
use serde_json::{Map, Value};

pub use messages::*;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid OpenAPI v2 document: {0}")]
pub struct Invalid(String);

fn invalid(at: &str, what: &str) -> Invalid {
    Invalid(format!("{at}: {what}"))
}

fn object<'a>(value: &'a Value, at: &str) -> Result<&'a Map<String, Value>, Invalid> {
    value.as_object().ok_or_else(|| invalid(at, "not an object"))
}

fn text(value: &Value, at: &str) -> Result<String, Invalid> {
    value.as_str().map(str::to_owned).ok_or_else(|| invalid(at, "not a string"))
}

fn texts(value: &Value, at: &str) -> Result<Vec<String>, Invalid> {
    value.as_array().ok_or_else(|| invalid(at, "not an array"))?.iter().map(|v| text(v, at)).collect()
}

fn flag(value: &Value, at: &str) -> Result<bool, Invalid> {
    value.as_bool().ok_or_else(|| invalid(at, "not a boolean"))
}

fn number(value: &Value, at: &str) -> Result<f64, Invalid> {
    value.as_f64().ok_or_else(|| invalid(at, "not a number"))
}

fn integer(value: &Value, at: &str) -> Result<i64, Invalid> {
    value.as_i64().ok_or_else(|| invalid(at, "not an integer"))
}

/// A free value, as gnostic keeps one: its YAML.
fn any(value: &Value) -> Any {
    Any { yaml: serde_yaml_ng::to_string(value).unwrap_or_else(|_| value.to_string()) }
}

fn extension(key: &str, value: &Value) -> NamedAny {
    NamedAny { name: key.to_owned(), value: Some(any(value)) }
}

fn schema(value: &Value, at: &str) -> Result<Schema, Invalid> {
    let mut schema = Schema::default();
    for (key, value) in object(value, at)? {
        let at = &format!("{at}.{key}");
        match key.as_str() {
            "$ref" => schema.r#ref = text(value, at)?,
            "format" => schema.format = text(value, at)?,
            "title" => schema.title = text(value, at)?,
            "description" => schema.description = text(value, at)?,
            "default" => schema.default = Some(any(value)),
            "example" => schema.example = Some(any(value)),
            "multipleOf" => schema.multiple_of = number(value, at)?,
            "maximum" => schema.maximum = number(value, at)?,
            "minimum" => schema.minimum = number(value, at)?,
            "exclusiveMaximum" => schema.exclusive_maximum = flag(value, at)?,
            "exclusiveMinimum" => schema.exclusive_minimum = flag(value, at)?,
            "maxLength" => schema.max_length = integer(value, at)?,
            "minLength" => schema.min_length = integer(value, at)?,
            "maxItems" => schema.max_items = integer(value, at)?,
            "minItems" => schema.min_items = integer(value, at)?,
            "maxProperties" => schema.max_properties = integer(value, at)?,
            "minProperties" => schema.min_properties = integer(value, at)?,
            "pattern" => schema.pattern = text(value, at)?,
            "uniqueItems" => schema.unique_items = flag(value, at)?,
            "readOnly" => schema.read_only = flag(value, at)?,
            "discriminator" => schema.discriminator = text(value, at)?,
            "required" => schema.required = texts(value, at)?,
            "enum" => {
                schema.r#enum = value.as_array().ok_or_else(|| invalid(at, "not an array"))?.iter().map(any).collect()
            }
            "type" => {
                let value = if value.is_string() { vec![text(value, at)?] } else { texts(value, at)? };
                schema.r#type = Some(TypeItem { value });
            }
            "items" => {
                let schemas = match value {
                    Value::Array(items) => items.iter().map(|item| self::schema(item, at)).collect::<Result<_, _>>()?,
                    item => vec![self::schema(item, at)?],
                };
                schema.items = Some(ItemsItem { schema: schemas });
            }
            "allOf" => {
                let items = value.as_array().ok_or_else(|| invalid(at, "not an array"))?;
                schema.all_of = items.iter().map(|item| self::schema(item, at)).collect::<Result<_, _>>()?;
            }
            "properties" => schema.properties = Some(Properties { additional_properties: named_schemas(value, at)? }),
            "additionalProperties" => {
                let oneof = match value {
                    Value::Bool(allowed) => AdditionalPropertiesOneof::Boolean(*allowed),
                    other => AdditionalPropertiesOneof::Schema(Box::new(self::schema(other, at)?)),
                };
                schema.additional_properties = Some(AdditionalPropertiesItem { oneof: Some(oneof) });
            }
            key if key.starts_with("x-") => schema.vendor_extension.push(extension(key, value)),
            _ => return Err(invalid(at, "not a property of an OpenAPI v2 schema")),
        }
    }
    Ok(schema)
}

fn named_schemas(value: &Value, at: &str) -> Result<Vec<NamedSchema>, Invalid> {
    object(value, at)?
        .iter()
        .map(|(name, value)| {
            Ok(NamedSchema { name: name.clone(), value: Some(schema(value, &format!("{at}.{name}"))?) })
        })
        .collect()
}

fn parameter(value: &Value, at: &str) -> Result<ParametersItem, Invalid> {
    let map = object(value, at)?;
    let field = |key: &str| map.get(key).unwrap_or(&Value::Null);
    let optional_text = |key: &str| field(key).as_str().unwrap_or_default().to_owned();
    let (name, place) = (text(field("name"), at)?, text(field("in"), at)?);
    let required = field("required").as_bool().unwrap_or_default();
    let unique_items = field("uniqueItems").as_bool().unwrap_or_default();
    let oneof = match place.as_str() {
        "body" => ParameterOneof::BodyParameter(Box::new(BodyParameter {
            description: optional_text("description"),
            name,
            r#in: place,
            required,
            schema: Some(schema(field("schema"), at)?),
        })),
        "query" => ParameterOneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(NonBodyParameterOneof::QueryParameterSubSchema(QueryParameterSubSchema {
                required,
                r#in: place,
                description: optional_text("description"),
                name,
                r#type: optional_text("type"),
                unique_items,
            })),
        }),
        "path" => ParameterOneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(NonBodyParameterOneof::PathParameterSubSchema(PathParameterSubSchema {
                required,
                r#in: place,
                description: optional_text("description"),
                name,
                r#type: optional_text("type"),
                unique_items,
            })),
        }),
        _ => return Err(invalid(at, "a parameter in neither body, query nor path")),
    };
    Ok(ParametersItem { oneof: Some(ParametersItemOneof::Parameter(Parameter { oneof: Some(oneof) })) })
}

fn parameters(value: &Value, at: &str) -> Result<Vec<ParametersItem>, Invalid> {
    value.as_array().ok_or_else(|| invalid(at, "not an array"))?.iter().map(|p| parameter(p, at)).collect()
}

fn operation(value: &Value, at: &str) -> Result<Operation, Invalid> {
    let mut operation = Operation::default();
    for (key, value) in object(value, at)? {
        let at = &format!("{at}.{key}");
        match key.as_str() {
            "description" => operation.description = text(value, at)?,
            "operationId" => operation.operation_id = text(value, at)?,
            "produces" => operation.produces = texts(value, at)?,
            "consumes" => operation.consumes = texts(value, at)?,
            "schemes" => operation.schemes = texts(value, at)?,
            "parameters" => operation.parameters = parameters(value, at)?,
            "responses" => {
                let mut codes = Vec::new();
                for (code, response) in object(value, at)? {
                    let response = object(response, at)?;
                    let description = response.get("description").and_then(Value::as_str).unwrap_or_default();
                    let schema = match response.get("schema") {
                        Some(value) => Some(SchemaItem { oneof: Some(SchemaItemOneof::Schema(schema(value, at)?)) }),
                        None => None,
                    };
                    let response = Response { description: description.to_owned(), schema };
                    let value = ResponseValue { oneof: Some(ResponseValueOneof::Response(response)) };
                    codes.push(NamedResponseValue { name: code.clone(), value: Some(value) });
                }
                operation.responses = Some(Responses { response_code: codes });
            }
            key if key.starts_with("x-") => operation.vendor_extension.push(extension(key, value)),
            _ => return Err(invalid(at, "not a property of an OpenAPI v2 operation")),
        }
    }
    Ok(operation)
}

fn path_item(value: &Value, at: &str) -> Result<PathItem, Invalid> {
    let mut item = PathItem::default();
    for (key, value) in object(value, at)? {
        let at = &format!("{at}.{key}");
        match key.as_str() {
            "get" => item.get = Some(operation(value, at)?),
            "put" => item.put = Some(operation(value, at)?),
            "post" => item.post = Some(operation(value, at)?),
            "delete" => item.delete = Some(operation(value, at)?),
            "patch" => item.patch = Some(operation(value, at)?),
            "parameters" => item.parameters = parameters(value, at)?,
            key if key.starts_with("x-") => item.vendor_extension.push(extension(key, value)),
            _ => return Err(invalid(at, "not a property of an OpenAPI v2 path item")),
        }
    }
    Ok(item)
}

/// The document in gnostic's message.
pub fn document(value: &Value) -> Result<Document, Invalid> {
    let map = object(value, "document")?;
    let field = |key: &str| map.get(key).unwrap_or(&Value::Null);
    let info = object(field("info"), "info")?;
    let info_text = |key: &str| info.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let paths = object(field("paths"), "paths")?
        .iter()
        .map(|(name, item)| Ok(NamedPathItem { name: name.clone(), value: Some(path_item(item, name)?) }))
        .collect::<Result<_, Invalid>>()?;
    Ok(Document {
        swagger: text(field("swagger"), "swagger")?,
        info: Some(Info { title: info_text("title"), version: info_text("version") }),
        paths: Some(Paths { path: paths }),
        definitions: Some(Definitions { additional_properties: named_schemas(field("definitions"), "definitions")? }),
    })
}

/// The document's protobuf encoding.
pub fn encode(value: &Value) -> Result<Vec<u8>, Invalid> {
    Ok(document(value)?.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_document_round_trips_through_the_protobuf_encoding() {
        let value = json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1"},
            "paths": {"/api/v1/namespaces/{namespace}/configmaps/{name}": {
                "parameters": [{"name": "name", "in": "path", "required": true, "type": "string", "uniqueItems": true}],
                "patch": {"operationId": "patchCoreV1NamespacedConfigMap", "consumes": ["application/strategic-merge-patch+json"],
                    "parameters": [{"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}},
                                   {"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true}],
                    "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/io.k8s.api.core.v1.ConfigMap"}}},
                    "x-kubernetes-group-version-kind": {"group": "", "kind": "ConfigMap", "version": "v1"}}}},
            "definitions": {"io.k8s.api.core.v1.ConfigMap": {"type": "object", "properties": {
                "data": {"type": "object", "additionalProperties": {"type": "string"}},
                "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-patch-strategy": "merge"}},
                "x-kubernetes-group-version-kind": [{"group": "", "kind": "ConfigMap", "version": "v1"}]}}});
        let bytes = encode(&value).expect("encodes");
        let decoded = Document::decode(bytes.as_slice()).expect("decodes");
        let definition = &decoded.definitions.as_ref().expect("definitions").additional_properties[0];
        assert_eq!(definition.name, "io.k8s.api.core.v1.ConfigMap");
        let schema = definition.value.as_ref().expect("schema");
        assert_eq!(schema.r#type.as_ref().map(|t| t.value.clone()), Some(vec!["object".to_owned()]));
        let gvk = &schema.vendor_extension[0];
        assert_eq!(gvk.name, "x-kubernetes-group-version-kind");
        let yaml: Value = serde_yaml_ng::from_str(&gvk.value.as_ref().expect("value").yaml).expect("YAML");
        assert_eq!(yaml, json!([{"group": "", "kind": "ConfigMap", "version": "v1"}]));
        let properties = &schema.properties.as_ref().expect("properties").additional_properties;
        assert!(matches!(
            properties[0].value.as_ref().and_then(|d| d.additional_properties.as_ref()),
            Some(AdditionalPropertiesItem { oneof: Some(AdditionalPropertiesOneof::Schema(_)) })
        ));
        let path = &decoded.paths.as_ref().expect("paths").path[0];
        let patch = path.value.as_ref().and_then(|p| p.patch.as_ref()).expect("patch");
        assert_eq!(patch.consumes, ["application/strategic-merge-patch+json"]);
        let Some(ParametersItemOneof::Parameter(Parameter { oneof: Some(ParameterOneof::NonBodyParameter(query)) })) =
            &patch.parameters[1].oneof
        else {
            panic!("a query parameter: {:?}", patch.parameters[1])
        };
        assert!(
            matches!(&query.oneof, Some(NonBodyParameterOneof::QueryParameterSubSchema(q)) if q.name == "fieldValidation")
        );
    }

    #[test]
    fn keys_outside_openapi_v2_make_the_document_invalid() {
        let value = json!({"swagger": "2.0", "info": {}, "paths": {},
            "definitions": {"x": {"oneOf": [{"type": "string"}]}}});
        assert_eq!(encode(&value), Err(Invalid("definitions.x.oneOf: not a property of an OpenAPI v2 schema".into())));
    }
}
