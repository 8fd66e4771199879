//! The definitions kube-apiserver publishes for a custom resource's version and its list kind, as its CRD OpenAPI
//! builder makes them from the version's schema: only what a structural schema holds (no `example`,
//! `externalDocs`...), int-or-string unfolded into its `anyOf`, `metadata` a reference to ObjectMeta, `apiVersion`
//! and `kind` described, embedded resources given those three, and the group-version-kind. The v2 form also drops
//! what OpenAPI v2 and kubectl's v2 reader cannot take (junctors, `nullable`, the properties of a node that
//! preserves unknown fields, defaults), and a schema preserving unknown fields at its root is only an object there.

use serde_json::{json, Map, Value};

use super::definitions::{gvk, list_definition, reference, OBJECT_META};
use crate::model::resources::ResourceType;

/// The keys a structural schema keeps, other than `properties`, `items` and `additionalProperties`.
const STRUCTURAL_KEYS: &[&str] = &[
    "type",
    "description",
    "title",
    "default",
    "nullable",
    "format",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
];

const JUNCTORS: [&str; 4] = ["allOf", "anyOf", "oneOf", "not"];

const METADATA_DESCRIPTION: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// `<reversed group>.<version>.<Kind>`, as kube-apiserver names a custom resource's definition.
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// The kind's and the list kind's definitions (references in the v2 form, `#/definitions/`).
pub fn definitions(resource: &ResourceType, type_meta: &Map<String, Value>, v2: bool) -> [(String, Value); 2] {
    let name = definition_name(&resource.group, &resource.version, &resource.kind);
    let list_name = definition_name(&resource.group, &resource.version, &resource.list_kind);
    let kind = kind_definition(resource, type_meta, v2);
    let list_gvk = gvk(&resource.group, &resource.version, &resource.list_kind);
    let mut list = list_definition(type_meta, &name, &resource.kind, &resource.list_kind, list_gvk);
    list["properties"]["items"]["description"] = json!(format!(
        "List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md",
        resource.plural
    ));
    [(name, kind), (list_name, list)]
}

fn kind_definition(resource: &ResourceType, type_meta: &Map<String, Value>, v2: bool) -> Value {
    let group_version_kind = json!([gvk(&resource.group, &resource.version, &resource.kind)]);
    let schema = resource.schema.as_deref().map(structural);
    let mut definition = match schema {
        Some(schema) if !(v2 && preserves_unknown(&schema)) => {
            let mut schema = schema;
            unfold(&mut schema);
            if v2 {
                to_v2(&mut schema);
                prune_defaults(&mut schema);
            }
            add_kube_native(&mut schema, type_meta);
            add_embedded(&mut schema, type_meta, v2);
            schema
        }
        _ => json!({"type": "object"}),
    };
    definition["x-kubernetes-group-version-kind"] = group_version_kind;
    definition
}

fn preserves_unknown(schema: &Value) -> bool {
    schema["x-kubernetes-preserve-unknown-fields"] == true
}

/// The schema as a structural schema holds it.
fn structural(schema: &Value) -> Value {
    let Value::Object(map) = schema else { return schema.clone() };
    let mut kept = Map::new();
    for (key, value) in map {
        let value = match key.as_str() {
            "properties" => match value {
                Value::Object(properties) => {
                    Value::Object(properties.iter().map(|(k, v)| (k.clone(), structural(v))).collect())
                }
                other => other.clone(),
            },
            "items" | "additionalProperties" | "not" => structural(value),
            "allOf" | "anyOf" | "oneOf" => match value {
                Value::Array(items) => Value::Array(items.iter().map(structural).collect()),
                other => other.clone(),
            },
            key if STRUCTURAL_KEYS.contains(&key) => value.clone(),
            _ => continue,
        };
        kept.insert(key.clone(), value);
    }
    Value::Object(kept)
}

fn visit(schema: &mut Value, change: &mut impl FnMut(&mut Value)) {
    change(schema);
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.values_mut().for_each(|property| visit(property, change));
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child @ Value::Object(_)) = schema.get_mut(key) {
            visit(child, change);
        }
    }
}

fn remove(schema: &mut Value, keys: &[&str]) {
    if let Value::Object(map) = schema {
        keys.iter().for_each(|key| {
            map.remove(*key);
        });
    }
}

/// `x-kubernetes-int-or-string` spelled out as the `anyOf` of an integer and a string, unless the schema already
/// says so.
fn unfold(schema: &mut Value) {
    let pattern = json!([{"type": "integer"}, {"type": "string"}]);
    visit(schema, &mut |node| {
        if node["x-kubernetes-int-or-string"] != true
            || node["anyOf"] == pattern
            || node["allOf"][0]["anyOf"] == pattern
        {
            return;
        }
        if node.get("anyOf").is_none() {
            node["anyOf"] = pattern.clone();
        } else if let Some(Value::Array(all_of)) = node.get_mut("allOf") {
            all_of.insert(0, json!({"anyOf": pattern}));
        } else {
            node["allOf"] = json!([{"anyOf": pattern}]);
        }
    });
}

/// What kube-apiserver leaves out of the v2 form of a CRD schema.
fn to_v2(schema: &mut Value) {
    visit(schema, &mut |node| {
        remove(node, &JUNCTORS);
        if node["nullable"] == true {
            remove(node, &["type", "nullable", "items", "properties"]);
        }
        if preserves_unknown(node) {
            remove(node, &["items", "properties"]);
        }
        if node["type"] == "array" && node.get("items").is_none() {
            remove(node, &["type"]);
        }
        if preserves_unknown(node) && node["type"] == "object" {
            remove(node, &["type"]);
        }
        let nullable: Vec<String> = node["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, property)| property["nullable"] == true)
            .map(|(name, _)| name.clone())
            .collect();
        if node["additionalProperties"]["nullable"] == true {
            remove(node, &["required"]);
        } else if let Some(Value::Array(required)) = node.get_mut("required") {
            required.retain(|field| !nullable.iter().any(|n| field == n.as_str()));
            if required.is_empty() {
                remove(node, &["required"]);
            }
        }
    });
}

fn prune_defaults(schema: &mut Value) {
    visit(schema, &mut |node| remove(node, &["default"]));
}

fn object_meta() -> Value {
    let mut metadata = reference(OBJECT_META);
    metadata["description"] = json!(METADATA_DESCRIPTION);
    metadata
}

fn set_property(schema: &mut Value, name: &str, value: Value) {
    if !schema["properties"].is_object() {
        schema["properties"] = json!({});
    }
    schema["properties"][name] = value;
}

fn add_kube_native(schema: &mut Value, type_meta: &Map<String, Value>) {
    set_property(schema, "metadata", object_meta());
    for (name, value) in type_meta {
        set_property(schema, name, value.clone());
    }
}

/// Objects marked `x-kubernetes-embedded-resource` get `apiVersion`, `kind` and `metadata`, the first two
/// required (not in v2 where they preserve unknown fields, which kubectl's v2 reader would check).
fn add_embedded(schema: &mut Value, type_meta: &Map<String, Value>, v2: bool) {
    visit(schema, &mut |node| {
        if node["x-kubernetes-embedded-resource"] != true || (v2 && preserves_unknown(node)) {
            return;
        }
        for (name, value) in type_meta {
            set_property(node, name, value.clone());
        }
        set_property(node, "metadata", object_meta());
        let mut required: Vec<Value> = node["required"].as_array().cloned().unwrap_or_default();
        for field in ["kind", "apiVersion"] {
            if !required.iter().any(|r| r == field) {
                required.push(json!(field));
            }
        }
        node["required"] = Value::Array(required);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(schema: Value) -> ResourceType {
        crate::model::resources::Resources::of_crd(&json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]}}))
        .expect("a CRD")
        .remove(0)
    }

    fn type_meta() -> Map<String, Value> {
        json!({"apiVersion": {"type": "string"}, "kind": {"type": "string"}}).as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn the_kind_refers_to_object_meta_and_keeps_only_structural_keys() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "example": {"a": 1}, "externalDocs": {"url": "x"}, "required": ["size", "note"],
                "properties": {"size": {"x-kubernetes-int-or-string": true}, "note": {"type": "string", "nullable": true},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"a": {"type": "string"}}},
                    "mode": {"type": "string", "default": "fast", "oneOf": [{"enum": ["fast"]}, {"enum": ["slow"]}]}}}}});
        let [(name, v3), (list_name, list)] = definitions(&resource(schema.clone()), &type_meta(), false);
        assert_eq!((name.as_str(), list_name.as_str()), ("com.example.v1.Widget", "com.example.v1.WidgetList"));
        assert_eq!(
            v3["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(
            v3["x-kubernetes-group-version-kind"],
            json!([{"group": "example.com", "kind": "Widget", "version": "v1"}])
        );
        let spec = &v3["properties"]["spec"];
        assert!(spec.get("example").is_none() && spec.get("externalDocs").is_none());
        assert_eq!(spec["properties"]["size"]["anyOf"], json!([{"type": "integer"}, {"type": "string"}]));
        assert_eq!(spec["properties"]["mode"]["default"], "fast");
        assert_eq!(list["properties"]["items"]["items"]["$ref"], "#/definitions/com.example.v1.Widget");
        assert_eq!(list["x-kubernetes-group-version-kind"][0]["kind"], "WidgetList");

        let [(_, v2), _] = definitions(&resource(schema), &type_meta(), true);
        let spec = &v2["properties"]["spec"];
        assert_eq!(spec["required"], json!(["size"]), "a nullable field is not required in v2");
        assert_eq!(spec["properties"]["note"], json!({}));
        assert!(spec["properties"]["size"].get("anyOf").is_none());
        assert_eq!(spec["properties"]["extra"], json!({"x-kubernetes-preserve-unknown-fields": true}));
        assert_eq!(spec["properties"]["mode"], json!({"type": "string"}));
    }

    #[test]
    fn a_schema_preserving_unknown_fields_is_an_object_in_v2_and_embedded_resources_are_described() {
        let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}});
        let [(_, v2), _] = definitions(&resource(schema.clone()), &type_meta(), true);
        assert_eq!(
            v2,
            json!({"type": "object", "x-kubernetes-group-version-kind": [{"group": "example.com", "kind": "Widget", "version": "v1"}]})
        );
        let [(_, v3), _] = definitions(&resource(schema), &type_meta(), false);
        let template = &v3["properties"]["template"];
        assert_eq!(template["required"], json!(["kind", "apiVersion"]));
        assert!(template["properties"]["metadata"]["$ref"].is_string());
    }
}
