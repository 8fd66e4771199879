//! OLM v0's second CRD upgrade check (`validateV1CRDCompatibility`): every custom resource stored today in a version
//! the live CRD serves, and the new CRD still serves, must pass the new schema of that version, or the upgrade would
//! leave objects that no longer validate ("updated validation is too restrictive"). Pure: which versions to check,
//! and the first object that fails; the reconciler lists the objects.
//!
//! A structural schema is OpenAPI v3, which JSON Schema draft 4 (the `jsonschema` crate) validates once Kubernetes'
//! own keywords are turned into JSON Schema: `nullable` admits null; `format` is not checked (kube-openapi checks a
//! few formats; a bundle's CRD rarely relies on one); `x-kubernetes-*` extensions and CEL rules are left out, as
//! OLM's validator leaves them out.

use serde_json::{Map, Value};

/// A version whose existing objects are validated against its new schema.
#[derive(Clone, Debug, PartialEq)]
pub struct VersionCheck {
    pub version: String,
    /// The new CRD's `openAPIV3Schema` of that version.
    pub schema: Value,
}

fn versions(crd: &Value) -> impl Iterator<Item = &Value> {
    crd["spec"]["versions"].as_array().into_iter().flatten()
}

fn served(version: &Value) -> bool {
    version["served"] == true
}

/// The versions served by both the live and the new CRD whose schema the new CRD changes: objects of a version whose
/// schema stays were validated by it when written.
pub fn versions_to_check(live: &Value, new: &Value) -> Vec<VersionCheck> {
    versions(new)
        .filter(|version| served(version))
        .filter_map(|version| {
            let name = version["name"].as_str()?;
            let old = versions(live).find(|old| old["name"] == name && served(old))?;
            let schema = &version["schema"]["openAPIV3Schema"];
            let changed = *schema != old["schema"]["openAPIV3Schema"];
            (changed && schema.is_object()).then(|| VersionCheck { version: name.to_owned(), schema: schema.clone() })
        })
        .collect()
}

/// Whether the new CRD converts between versions with a webhook: OLM then only warns when existing objects fail the
/// new schema, trusting the conversion (which starts only after the upgrade) to bring them to a valid form.
pub fn converts_by_webhook(new: &Value) -> bool {
    new["spec"]["conversion"]["strategy"] == "Webhook"
}

/// The JSON Schema (draft 4) that validates as the structural schema does.
fn json_schema(schema: &Value) -> Value {
    let Value::Object(map) = schema else { return schema.clone() };
    let mut out = Map::new();
    for (key, value) in map {
        let converted = match key.as_str() {
            "properties" | "patternProperties" | "definitions" => match value {
                Value::Object(children) => {
                    Value::Object(children.iter().map(|(name, child)| (name.clone(), json_schema(child))).collect())
                }
                other => other.clone(),
            },
            "items" | "additionalProperties" | "not" => json_schema(value),
            "allOf" | "anyOf" | "oneOf" => match value {
                Value::Array(children) => Value::Array(children.iter().map(json_schema).collect()),
                other => other.clone(),
            },
            "format" | "nullable" | "default" | "example" | "externalDocs" => continue,
            extension if extension.starts_with("x-kubernetes-") => continue,
            _ => value.clone(),
        };
        out.insert(key.clone(), converted);
    }
    if map.get("nullable") == Some(&Value::Bool(true)) {
        if let Some(Value::String(type_)) = out.get("type").cloned() {
            out.insert("type".into(), Value::Array(vec![Value::String(type_), Value::String("null".into())]));
        }
        if let Some(Value::Array(values)) = out.get_mut("enum") {
            values.push(Value::Null);
        }
    }
    Value::Object(out)
}

/// `spec.items[0].name` from the JSON pointer `/spec/items/0/name`.
fn field_path(pointer: &str, instance: &Value) -> String {
    let mut path = String::new();
    let mut at = instance;
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        match at {
            Value::Array(items) => {
                path.push_str(&format!("[{segment}]"));
                at = segment.parse::<usize>().ok().and_then(|index| items.get(index)).unwrap_or(&Value::Null);
            }
            _ => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&segment);
                at = at.get(&segment).unwrap_or(&Value::Null);
            }
        }
    }
    if path.is_empty() {
        "<root>".into()
    } else {
        path
    }
}

/// Why a schema cannot be used to validate.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("error creating validator for schema version {version}: {reason}")]
pub struct SchemaError {
    pub version: String,
    pub reason: String,
}

/// The validator of one version's new schema.
pub struct VersionValidator {
    version: String,
    validator: jsonschema::Validator,
}

impl VersionValidator {
    pub fn new(check: &VersionCheck) -> Result<Self, SchemaError> {
        let validator = jsonschema::draft4::options()
            .should_validate_formats(false)
            .build(&json_schema(&check.schema))
            .map_err(|error| SchemaError { version: check.version.clone(), reason: error.to_string() })?;
        Ok(Self { version: check.version.clone(), validator })
    }

    /// OLM's message for `object` (of `group` and `kind`) when it fails the new schema: `error validating
    /// group/version, Kind=Kind "namespace/name": updated validation is too restrictive: [field: reason, ...]`.
    pub fn violation(&self, group: &str, kind: &str, object: &Value) -> Option<String> {
        let errors: Vec<String> = self
            .validator
            .iter_errors(object)
            // Masked: the values of an object in any namespace do not belong in a cluster-scoped status or event.
            .map(|error| format!("{}: {}", field_path(&error.instance_path().to_string(), object), error.masked()))
            .collect();
        if errors.is_empty() {
            return None;
        }
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let named = match object["metadata"]["namespace"].as_str() {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name.to_owned(),
        };
        let detail = match errors.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        Some(format!(
            "error validating {group}/{}, Kind={kind} {named:?}: updated validation is too restrictive: {detail}",
            self.version
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn crd(versions: Value) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "plumbai.how.theydoit.com"},
               "spec": {"group": "how.theydoit.com", "names": {"kind": "Plumbus", "plural": "plumbai"},
                        "scope": "Namespaced", "versions": versions}})
    }

    fn version(name: &str, served: bool, spec: Value) -> Value {
        json!({"name": name, "served": served, "storage": true, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": spec}}}})
    }

    fn count_schema(type_: &str) -> Value {
        json!({"type": "object", "properties": {"count": {"type": type_}}})
    }

    #[test]
    fn only_versions_served_before_and_after_whose_schema_changes_are_checked() {
        let live = crd(json!([
            version("v1", true, count_schema("string")),
            version("v2", true, count_schema("string")),
            version("v3", false, count_schema("string")),
        ]));
        let new = crd(json!([
            version("v1", true, count_schema("integer")),
            version("v2", true, count_schema("string")),
            version("v3", true, count_schema("integer")),
            version("v4", true, count_schema("integer")),
        ]));
        let checks = versions_to_check(&live, &new);
        assert_eq!(checks.iter().map(|c| c.version.as_str()).collect::<Vec<_>>(), ["v1"]);
        assert_eq!(checks[0].schema["properties"]["spec"], count_schema("integer"));
        let unserved = crd(json!([version("v1", false, count_schema("integer"))]));
        assert_eq!(versions_to_check(&live, &unserved), [], "a version no longer served is not read");
    }

    fn object(spec: Value) -> Value {
        json!({"apiVersion": "how.theydoit.com/v1", "kind": "Plumbus",
               "metadata": {"name": "dinglebop", "namespace": "team"}, "spec": spec})
    }

    fn validator(spec: Value) -> VersionValidator {
        let schema = json!({"type": "object", "properties": {"spec": spec}});
        VersionValidator::new(&VersionCheck { version: "v1".into(), schema }).expect("validator")
    }

    #[test]
    fn an_object_failing_the_new_schema_is_named_as_olm_names_it() {
        let strict = validator(json!({"type": "object", "required": ["size"], "properties": {
            "count": {"type": "integer", "maximum": 10}, "size": {"type": "string"}}}));
        assert_eq!(strict.violation("how.theydoit.com", "Plumbus", &object(json!({"count": 3, "size": "s"}))), None);
        let message = strict.violation("how.theydoit.com", "Plumbus", &object(json!({"count": 30}))).expect("fails");
        assert!(
            message.starts_with(
                "error validating how.theydoit.com/v1, Kind=Plumbus \"team/dinglebop\": updated validation is too \
                 restrictive: ["
            ),
            "{message}"
        );
        assert!(message.contains("spec.count: value is greater than the maximum of 10"), "{message}");
        assert!(!message.contains("30"), "no value of the object: {message}");
        assert!(message.contains("spec: \"size\" is a required property"), "{message}");
        let cluster_scoped = json!({"metadata": {"name": "one"}, "spec": {"count": "x", "size": "s"}});
        let message = strict.violation("how.theydoit.com", "Plumbus", &cluster_scoped).expect("fails");
        assert!(
            message.contains("Kind=Plumbus \"one\": updated validation is too restrictive: spec.count: "),
            "{message}"
        );
    }

    #[test]
    fn kubernetes_keywords_validate_as_kubernetes_validates_them() {
        let schema = json!({"type": "object", "properties": {
            "label": {"type": "string", "nullable": true, "format": "hostname"},
            "mode": {"type": "string", "enum": ["a", "b"], "nullable": true},
            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
        let lenient = validator(schema);
        let fine = object(json!({"label": null, "mode": null, "port": "http", "items": [{"name": "a"}],
                                 "free": {"anything": 1}}));
        assert_eq!(lenient.violation("g", "K", &fine), None);
        let not_a_hostname = object(json!({"label": "not a hostname!"}));
        assert_eq!(lenient.violation("g", "K", &not_a_hostname), None, "formats are not checked");
        let message = lenient.violation("g", "K", &object(json!({"items": [{"name": 1}]}))).expect("fails");
        assert!(message.contains("spec.items[0].name: value is not of type \"string\""), "{message}");
        let message = lenient.violation("g", "K", &object(json!({"mode": "c"}))).expect("fails");
        assert!(message.contains("spec.mode: "), "{message}");
    }

    #[test]
    fn a_schema_the_validator_cannot_build_is_an_error_naming_its_version() {
        let broken = VersionCheck { version: "v9".into(), schema: json!({"type": "object", "pattern": "("}) };
        let error = VersionValidator::new(&broken).err().expect("invalid pattern");
        assert_eq!(error.version, "v9");
        assert!(error.to_string().starts_with("error creating validator for schema version v9: "), "{error}");
    }

    #[test]
    fn webhook_conversion_is_recognised() {
        let mut new = crd(json!([]));
        assert!(!converts_by_webhook(&new));
        new["spec"]["conversion"] = json!({"strategy": "Webhook"});
        assert!(converts_by_webhook(&new));
    }
}
