//! Object-metadata validation with kube-apiserver's rules and words: names (DNS subdomain, DNS label or path
//! segment, by resource), label keys and values, annotation keys and total size, and the fields an update may not
//! change.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::status::{error, ErrorType, FieldError};

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// How a resource's object names are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    Dns1123Subdomain,
    Dns1123Label,
    /// RBAC objects: anything that is a valid path segment (`system:controller:x` is fine).
    PathSegment,
}

impl NameRule {
    /// The rule kube-apiserver applies to `resource` in `group`.
    pub fn of(group: &str, resource: &str) -> Self {
        match (group, resource) {
            ("", "namespaces" | "services") => Self::Dns1123Label,
            ("rbac.authorization.k8s.io", _) => Self::PathSegment,
            _ => Self::Dns1123Subdomain,
        }
    }

    pub fn check(self, name: &str) -> Vec<String> {
        match self {
            Self::Dns1123Subdomain => dns1123_subdomain(name),
            Self::Dns1123Label => dns1123_label(name),
            Self::PathSegment => path_segment(name),
        }
    }
}

fn is_label_chars(part: &str) -> bool {
    !part.is_empty()
        && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !part.starts_with('-')
        && !part.ends_with('-')
}

pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_owned());
    }
    if !is_label_chars(value) {
        errors.push(format!("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{DNS1123_LABEL_FMT}')"));
    }
    errors
}

pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 253 {
        errors.push("must be no more than 253 characters".to_owned());
    }
    if !value.split('.').all(is_label_chars) {
        errors.push(format!("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*')"));
    }
    errors
}

pub fn path_segment(value: &str) -> Vec<String> {
    match value {
        "." => return vec!["may not be '.'".into()],
        ".." => return vec!["may not be '..'".into()],
        _ => {}
    }
    let mut errors = Vec::new();
    for bad in ["/", "%"] {
        if value.contains(bad) {
            errors.push(format!("may not contain '{bad}'"));
        }
    }
    errors
}

fn is_qualified_name_part(part: &str) -> bool {
    part.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && part.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && part.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric)
}

/// `IsQualifiedName`: label and annotation keys.
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                errors.extend(dns1123_subdomain(prefix).into_iter().map(|e| format!("prefix part {e}")));
            }
            *name
        }
        _ => {
            return vec![format!("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{QUALIFIED_NAME_FMT}') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_owned());
    }
    if !name.is_empty() && !is_qualified_name_part(name) {
        errors.push(format!("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{QUALIFIED_NAME_FMT}')"));
    }
    errors
}

pub fn label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_owned());
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errors.push(format!("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '{LABEL_VALUE_FMT}')"));
    }
    errors
}

fn invalid(field: &str, value: &str, detail: &str) -> FieldError {
    error(field, ErrorType::Invalid, format!("{}: {detail}", Value::from(value)))
}

fn string_map(value: &Value, field: &str, errors: &mut Vec<FieldError>) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    match value {
        Value::Null => {}
        Value::Object(entries) => {
            for (key, value) in entries {
                match value {
                    Value::String(text) => {
                        map.insert(key.clone(), text.clone());
                    }
                    Value::Null => {
                        map.insert(key.clone(), String::new());
                    }
                    other => errors.push(invalid(field, &other.to_string(), "must be a string")),
                }
            }
        }
        other => errors.push(invalid(field, &other.to_string(), "must be a map of strings")),
    }
    map
}

/// Everything kube-apiserver checks in `metadata` of a new or updated object, with the rule for its name.
pub fn validate_metadata(metadata: &Value, name_rule: NameRule) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match metadata["name"].as_str() {
        None | Some("") => errors.push(error("metadata.name", ErrorType::Required, "name or generateName is required")),
        Some(name) => {
            for detail in name_rule.check(name) {
                errors.push(invalid("metadata.name", name, &detail));
            }
        }
    }
    for (key, value) in string_map(&metadata["labels"], "metadata.labels", &mut errors) {
        for detail in qualified_name(&key) {
            errors.push(invalid("metadata.labels", &key, &detail));
        }
        for detail in label_value(&value) {
            errors.push(invalid("metadata.labels", &value, &detail));
        }
    }
    let annotations = string_map(&metadata["annotations"], "metadata.annotations", &mut errors);
    let mut total = 0;
    for (key, value) in &annotations {
        for detail in qualified_name(&key.to_lowercase()) {
            errors.push(invalid("metadata.annotations", key, &detail));
        }
        total += key.len() + value.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errors.push(error(
            "metadata.annotations",
            ErrorType::TooLong,
            format!("must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        ));
    }
    if let Some(finalizers) = metadata["finalizers"].as_array() {
        for (index, finalizer) in finalizers.iter().enumerate() {
            let text = finalizer.as_str().unwrap_or_default();
            let field = format!("metadata.finalizers[{index}]");
            let standard = matches!(text, "orphan" | "foregroundDeletion" | "kubernetes");
            if !standard {
                for detail in qualified_name(text) {
                    errors.push(invalid(&field, text, &detail));
                }
                if !text.contains('/') {
                    errors.push(invalid(
                        &field,
                        text,
                        "name is neither a standard finalizer name nor is it fully qualified",
                    ));
                }
            }
        }
    }
    if let Some(references) = metadata["ownerReferences"].as_array() {
        let mut controllers = 0;
        for reference in references {
            for field in ["apiVersion", "kind", "name", "uid"] {
                if reference[field].as_str().is_none_or(str::is_empty) {
                    let detail = match field {
                        "apiVersion" => "version must not be empty",
                        "kind" => "kind must not be empty",
                        "name" => "name must not be empty",
                        _ => "uid must not be empty",
                    };
                    errors.push(invalid("metadata.ownerReferences", &reference.to_string(), detail));
                }
            }
            if reference["controller"].as_bool() == Some(true) {
                controllers += 1;
            }
        }
        if controllers > 1 {
            errors.push(invalid(
                "metadata.ownerReferences",
                &Value::Array(references.clone()).to_string(),
                "Only one reference can have Controller set to true",
            ));
        }
    }
    errors
}

/// The fields of `metadata` an update may not change.
pub fn validate_metadata_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let new_finalizers = new["finalizers"].as_array().cloned().unwrap_or_default();
    let old_finalizers = old["finalizers"].as_array().cloned().unwrap_or_default();
    if !old["deletionTimestamp"].is_null() && new_finalizers.iter().any(|f| !old_finalizers.contains(f)) {
        errors.push(error(
            "metadata.finalizers",
            ErrorType::Forbidden,
            format!(
                "no new finalizers can be added if the object is being deleted, found new finalizers {}",
                Value::Array(new_finalizers.into_iter().filter(|f| !old_finalizers.contains(f)).collect())
            ),
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(metadata: Value, rule: NameRule) -> Vec<String> {
        validate_metadata(&metadata, rule).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn names_follow_the_rule_of_their_resource() {
        assert!(messages(json!({"name": "a.b-c"}), NameRule::Dns1123Subdomain).is_empty());
        assert_eq!(
            messages(json!({"name": "Foo"}), NameRule::Dns1123Subdomain),
            ["metadata.name: Invalid value: \"Foo\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
        );
        assert_eq!(
            messages(json!({"name": "a.b"}), NameRule::Dns1123Label),
            ["metadata.name: Invalid value: \"a.b\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]
        );
        assert_eq!(messages(json!({"name": &"a".repeat(64)}), NameRule::Dns1123Label).len(), 1);
        assert!(messages(json!({"name": "system:controller:x"}), NameRule::PathSegment).is_empty());
        assert_eq!(
            messages(json!({"name": "a/b"}), NameRule::PathSegment),
            ["metadata.name: Invalid value: \"a/b\": may not contain '/'"]
        );
        assert_eq!(
            messages(json!({}), NameRule::PathSegment),
            ["metadata.name: Required value: name or generateName is required"]
        );
    }

    #[test]
    fn label_keys_values_and_annotations() {
        let ok = json!({"name": "x", "labels": {"v2alpha1.operators.coreos.com/plumbus": "", "app": "My_value.1"}, "annotations": {"Example.com/Any": "anything at all"}});
        assert!(messages(ok, NameRule::Dns1123Subdomain).is_empty());
        assert_eq!(
            messages(json!({"name": "x", "labels": {"bad key": "v"}}), NameRule::Dns1123Subdomain),
            ["metadata.labels: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]
        );
        assert_eq!(
            messages(json!({"name": "x", "labels": {"a": "-v"}}), NameRule::Dns1123Subdomain),
            ["metadata.labels: Invalid value: \"-v\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]
        );
        assert_eq!(
            messages(json!({"name": "x", "labels": {"Bad_Prefix/a": "v"}}), NameRule::Dns1123Subdomain)[0],
            "metadata.labels: Invalid value: \"Bad_Prefix/a\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        assert_eq!(
            messages(json!({"name": "x", "labels": {"a": "v".repeat(64)}}), NameRule::Dns1123Subdomain)[0]
                .split(": ")
                .nth(3),
            Some("must be no more than 63 characters")
        );
        let big = "v".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        assert_eq!(
            messages(json!({"name": "x", "annotations": {"a": big}}), NameRule::Dns1123Subdomain),
            ["metadata.annotations: Too long: must have at most 262144 bytes"]
        );
    }

    #[test]
    fn finalizers_and_owner_references() {
        assert!(messages(
            json!({"name": "x", "finalizers": ["kubernetes", "example.com/cleanup"]}),
            NameRule::Dns1123Subdomain
        )
        .is_empty());
        assert_eq!(
            messages(json!({"name": "x", "finalizers": ["cleanup"]}), NameRule::Dns1123Subdomain),
            ["metadata.finalizers[0]: Invalid value: \"cleanup\": name is neither a standard finalizer name nor is it fully qualified"]
        );
        let two_controllers = json!({"name": "x", "ownerReferences": [
            {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": true},
            {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": true}]});
        assert!(messages(two_controllers, NameRule::Dns1123Subdomain)[0]
            .ends_with("Only one reference can have Controller set to true"));
        assert_eq!(
            validate_metadata_update(&json!({"finalizers": ["a/b", "c/d"]}), &json!({"finalizers": ["a/b"], "deletionTimestamp": "2026-01-01T00:00:00Z"}))
                .iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [\"c/d\"]"]
        );
    }
}
