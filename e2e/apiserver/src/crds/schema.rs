//! What kube-apiserver does with a custom resource and its version's structural schema: prune fields the schema
//! does not know (silently, or reported for `fieldValidation`), apply defaults, and validate values (types, required
//! fields, enums, patterns, bounds, `oneOf`/`anyOf`/`allOf`/`not`), with kube-openapi's error wording.

use serde_json::{json, Map, Value};

use crate::status::{error, ErrorType, FieldError};

const OBJECT_META_FIELDS: [&str; 16] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
    "clusterName",
];

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}

/// Drops what the schema does not allow, returning the paths dropped (for strict field validation).
pub fn prune(object: &mut Value, schema: &Value) -> Vec<String> {
    let mut dropped = Vec::new();
    if let Value::Object(root) = object {
        if let Some(Value::Object(metadata)) = root.get_mut("metadata") {
            prune_metadata(metadata, "metadata", &mut dropped);
        }
        prune_object(root, schema, "", true, &mut dropped);
    }
    dropped
}

fn prune_metadata(metadata: &mut Map<String, Value>, path: &str, dropped: &mut Vec<String>) {
    metadata.retain(|key, _| {
        let keep = OBJECT_META_FIELDS.contains(&key.as_str());
        if !keep {
            dropped.push(join(path, key));
        }
        keep
    });
}

fn prune_object(map: &mut Map<String, Value>, schema: &Value, path: &str, root: bool, dropped: &mut Vec<String>) {
    let preserve = schema["x-kubernetes-preserve-unknown-fields"] == true;
    let embedded = schema["x-kubernetes-embedded-resource"] == true;
    let properties = schema["properties"].as_object();
    let additional = &schema["additionalProperties"];
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let child_path = join(path, &key);
        let always_kept = (root || embedded) && matches!(key.as_str(), "apiVersion" | "kind" | "metadata");
        if (root || embedded) && key == "metadata" {
            // ObjectMeta is pruned to its own fields, whatever the schema says of it.
            if let Some(Value::Object(metadata)) = map.get_mut(&key) {
                if embedded {
                    prune_metadata(metadata, &child_path, dropped);
                }
            }
            continue;
        }
        if let Some(child_schema) = properties.and_then(|p| p.get(&key)) {
            if let Some(value) = map.get_mut(&key) {
                prune_value(value, child_schema, &child_path, dropped);
            }
        } else if additional.is_object() {
            if let Some(value) = map.get_mut(&key) {
                prune_value(value, additional, &child_path, dropped);
            }
        } else if !(always_kept || preserve || additional == &Value::Bool(true)) {
            map.remove(&key);
            dropped.push(child_path);
        }
    }
}

fn prune_value(value: &mut Value, schema: &Value, path: &str, dropped: &mut Vec<String>) {
    match value {
        Value::Object(map) => prune_object(map, schema, path, false, dropped),
        Value::Array(items) if schema["items"].is_object() => {
            for (index, item) in items.iter_mut().enumerate() {
                prune_value(item, &schema["items"], &format!("{path}[{index}]"), dropped);
            }
        }
        _ => {}
    }
}

/// Fills in the schema's defaults for absent fields of present objects.
pub fn apply_defaults(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            for (key, child_schema) in schema["properties"].as_object().into_iter().flatten() {
                if !map.contains_key(key) {
                    if let Some(default) = child_schema.get("default") {
                        map.insert(key.clone(), default.clone());
                    }
                }
                if let Some(child) = map.get_mut(key) {
                    apply_defaults(child, child_schema);
                }
            }
            if schema["additionalProperties"].is_object() {
                for child in map.values_mut() {
                    apply_defaults(child, &schema["additionalProperties"]);
                }
            }
        }
        Value::Array(items) if schema["items"].is_object() => {
            for item in items {
                apply_defaults(item, &schema["items"]);
            }
        }
        _ => {}
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn invalid(path: &str, value: &Value, detail: String) -> FieldError {
    let shown = match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => value.to_string(),
        other => format!("\"{}\"", type_name(other)),
    };
    error(path, ErrorType::Invalid, format!("{shown}: {detail}"))
}

/// Every way `value` breaks `schema`; `path` is the field path (empty at the root).
pub fn validate(value: &Value, schema: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    validate_into(value, schema, path, &mut errors);
    errors
}

fn validate_into(value: &Value, schema: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let shown_path = if path.is_empty() { "<root>" } else { path };
    if value.is_null() {
        if schema["nullable"] != true && schema.get("type").is_some() {
            let wanted = schema["type"].as_str().unwrap_or_default();
            errors.push(invalid(
                shown_path,
                &json!("null"),
                format!("{shown_path} in body must be of type {wanted}: \"null\""),
            ));
        }
        return;
    }
    if schema["x-kubernetes-int-or-string"] == true {
        if !matches!(value, Value::String(_)) && type_name(value) != "integer" {
            errors.push(invalid(
                shown_path,
                &json!(type_name(value)),
                format!("{shown_path} in body must be of type integer,string: \"{}\"", type_name(value)),
            ));
        }
    } else if let Some(wanted) = schema["type"].as_str() {
        let actual = type_name(value);
        let fits = actual == wanted || (wanted == "number" && actual == "integer");
        if !fits {
            errors.push(invalid(
                shown_path,
                &json!(actual),
                format!("{shown_path} in body must be of type {wanted}: \"{actual}\""),
            ));
            return;
        }
    }
    if let Some(allowed) = schema["enum"].as_array() {
        if !allowed.contains(value) {
            let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
            errors.push(error(
                shown_path,
                ErrorType::NotSupported,
                format!("{value}: supported values: {}", listed.join(", ")),
            ));
        }
    }
    match value {
        Value::String(text) => validate_string(text, value, schema, shown_path, errors),
        Value::Number(number) => {
            validate_number(number.as_f64().unwrap_or_default(), value, schema, shown_path, errors)
        }
        Value::Array(items) => {
            let count = items.len();
            if let Some(min) = schema["minItems"].as_u64() {
                if (count as u64) < min {
                    errors.push(invalid(
                        shown_path,
                        value,
                        format!("{shown_path} in body should have at least {min} items"),
                    ));
                }
            }
            if let Some(max) = schema["maxItems"].as_u64() {
                if count as u64 > max {
                    errors.push(error(
                        shown_path,
                        ErrorType::TooMany,
                        format!("{count}: must have at most {max} items"),
                    ));
                }
            }
            if schema["items"].is_object() {
                for (index, item) in items.iter().enumerate() {
                    validate_into(item, &schema["items"], &format!("{path}[{index}]"), errors);
                }
            }
        }
        Value::Object(map) => {
            for required in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                if !map.contains_key(required) {
                    errors.push(error(&join(path, required), ErrorType::Required, ""));
                }
            }
            if let Some(max) = schema["maxProperties"].as_u64() {
                if map.len() as u64 > max {
                    errors.push(error(
                        shown_path,
                        ErrorType::TooMany,
                        format!("{}: must have at most {max} items", map.len()),
                    ));
                }
            }
            for (key, child) in map {
                if let Some(child_schema) = schema["properties"].get(key) {
                    validate_into(child, child_schema, &join(path, key), errors);
                } else if schema["additionalProperties"].is_object() {
                    validate_into(child, &schema["additionalProperties"], &join(path, key), errors);
                }
            }
        }
        _ => {}
    }
    validate_junctors(value, schema, shown_path, path, errors);
}

fn validate_string(text: &str, value: &Value, schema: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let length = text.chars().count() as u64;
    if let Some(max) = schema["maxLength"].as_u64() {
        if length > max {
            errors.push(error(path, ErrorType::TooLong, format!("may not be more than {max} bytes")));
        }
    }
    if let Some(min) = schema["minLength"].as_u64() {
        if length < min {
            errors.push(invalid(path, value, format!("{path} in body should be at least {min} chars long")));
        }
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        if regex::Regex::new(pattern).is_ok_and(|re| !re.is_match(text)) {
            errors.push(invalid(path, value, format!("{path} in body should match '{pattern}'")));
        }
    }
}

fn validate_number(number: f64, value: &Value, schema: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if let Some(min) = schema["minimum"].as_f64() {
        let exclusive = schema["exclusiveMinimum"] == true;
        if number < min || (exclusive && number == min) {
            let relation = if exclusive { "greater than" } else { "greater than or equal to" };
            errors.push(invalid(path, value, format!("{path} in body should be {relation} {}", go_number(min))));
        }
    }
    if let Some(max) = schema["maximum"].as_f64() {
        let exclusive = schema["exclusiveMaximum"] == true;
        if number > max || (exclusive && number == max) {
            let relation = if exclusive { "less than" } else { "less than or equal to" };
            errors.push(invalid(path, value, format!("{path} in body should be {relation} {}", go_number(max))));
        }
    }
}

/// A bound as Go's `%v` prints a float64: `1`, not `1.0`.
fn go_number(number: f64) -> String {
    if number.fract() == 0.0 && number.abs() < 1e15 {
        format!("{}", number as i64)
    } else {
        format!("{number}")
    }
}

fn validate_junctors(value: &Value, schema: &Value, shown_path: &str, path: &str, errors: &mut Vec<FieldError>) {
    let passes = |branch: &Value| validate(value, branch, path).is_empty();
    if let Some(branches) = schema["oneOf"].as_array() {
        let matching = branches.iter().filter(|b| passes(b)).count();
        if matching != 1 {
            let found = if matching == 0 {
                "Found none valid".to_owned()
            } else {
                format!("Found {matching} valid alternatives")
            };
            errors.push(invalid(
                shown_path,
                value,
                format!("{shown_path} in body must validate one and only one schema (oneOf). {found}"),
            ));
        }
    }
    if let Some(branches) = schema["anyOf"].as_array() {
        if !branches.iter().any(passes) {
            errors.push(invalid(
                shown_path,
                value,
                format!("{shown_path} in body must validate at least one schema (anyOf)"),
            ));
        }
    }
    for branch in schema["allOf"].as_array().into_iter().flatten() {
        validate_into(value, branch, path, errors);
    }
    if let Some(negated) = schema.get("not") {
        if passes(negated) {
            errors.push(invalid(
                shown_path,
                value,
                format!("{shown_path} in body should not validate the schema (not)"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"type": "string", "enum": ["A", "B"], "default": "A"},
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "port": {"x-kubernetes-int-or-string": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
            "status": {"type": "object", "nullable": true}}})
    }

    fn messages(value: Value) -> Vec<String> {
        validate(&value, &schema(), "").iter().map(ToString::to_string).collect()
    }

    #[test]
    fn pruning_drops_unknown_fields_and_keeps_preserved_ones() {
        let mut object = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a", "bogus": 1}, "extra": 1,
            "spec": {"size": 1, "unknown": true, "free": {"anything": {"deep": 1}}, "labels": {"a": "b"}}});
        let dropped = prune(&mut object, &schema());
        assert_eq!(dropped, ["metadata.bogus", "extra", "spec.unknown"]);
        assert_eq!(
            object,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
            "spec": {"size": 1, "free": {"anything": {"deep": 1}}, "labels": {"a": "b"}}})
        );
    }

    #[test]
    fn defaults_fill_absent_fields() {
        let mut object = json!({"spec": {"size": 1}});
        apply_defaults(&mut object, &schema());
        assert_eq!(object["spec"]["mode"], "A");
        let mut no_spec = json!({});
        apply_defaults(&mut no_spec, &schema());
        assert_eq!(no_spec, json!({}), "defaults apply inside objects that exist");
    }

    #[test]
    fn validation_errors_read_as_kube_apiserver_writes_them() {
        assert!(messages(json!({"spec": {"size": 3, "mode": "B", "name": "abc", "port": "http", "status": null}}))
            .is_empty());
        assert_eq!(
            messages(json!({"spec": {"size": "3"}})),
            ["spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\""]
        );
        assert_eq!(messages(json!({"spec": {}})), ["spec.size: Required value"]);
        assert_eq!(
            messages(json!({"spec": {"size": 0}})),
            ["spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"]
        );
        assert_eq!(
            messages(json!({"spec": {"size": 1, "mode": "C"}})),
            ["spec.mode: Unsupported value: \"C\": supported values: \"A\", \"B\""]
        );
        assert_eq!(
            messages(json!({"spec": {"size": 1, "name": "ABCDEF"}})),
            [
                "spec.name: Too long: may not be more than 5 bytes",
                "spec.name: Invalid value: \"ABCDEF\": spec.name in body should match '^[a-z]+$'",
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"size": 1, "tags": ["a", "b", "c"]}})),
            ["spec.tags: Too many: 3: must have at most 2 items"]
        );
        assert_eq!(
            messages(json!({"spec": {"size": 1, "port": true}})),
            ["spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\""]
        );
        assert_eq!(
            messages(json!({"spec": {"size": 1, "labels": {"a": 1}}})),
            ["spec.labels.a: Invalid value: \"integer\": spec.labels.a in body must be of type string: \"integer\""]
        );
        assert_eq!(
            messages(json!({"spec": null})),
            ["spec: Invalid value: \"null\": spec in body must be of type object: \"null\""]
        );
    }

    #[test]
    fn one_of_needs_exactly_one_branch() {
        let union = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
        assert!(validate(&json!({"a": "x"}), &union, "spec").is_empty());
        let both = validate(&json!({"a": "x", "b": "y"}), &union, "spec");
        assert_eq!(both.iter().map(ToString::to_string).collect::<Vec<_>>(), ["spec: Invalid value: \"object\": spec in body must validate one and only one schema (oneOf). Found 2 valid alternatives"]);
        assert_eq!(validate(&json!({}), &union, "spec").len(), 1);
    }
}
